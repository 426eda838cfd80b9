"""The agent-loop integration: counting, store, policy and tools in one object.

A backend calls :meth:`Session.prepare` before every provider request. It counts the
assembled request (cached per row, so a step costs O(new content)), derives the window's
claims from its durable rows, publishes an advisory row when one is due, performs a
pending rollover (asked for with ``new_context`` or forced at the usable limit) as one
store batch with the lead-in, runs the fresh-window and admission checks, and returns the
:class:`Turn` to send. Everything that decides behaviour is read back from the
transcript, so a new process opening the same workspace continues where the old one
stopped.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import providers
from .budget_record import record_session_budget
from .errors import InvalidArgumentError
from .history import Durability, History, Row
from .memory import MemoryTool
from .new_context import NewContextTool
from .policy import Action, Budget, Claims, Decision
from .prompts import DEFAULT_PROMPTS, Capabilities, PromptContext, Prompts
from .session_history import SessionHistoryTool
from .settings import Settings, Strategy
from .tokens import Encoding
from .toolpolicy import ToolPolicy

__all__ = ["CONTEXT_WINDOWS", "FRAMING_TOKENS", "RequestHook", "Session", "Turn"]

FRAMING_TOKENS = 8
"""Tokens per message and per advertised tool schema (plus 1 per request)."""

CONTEXT_WINDOWS: dict[str, int] = {
    "gpt-5": 400_000,
    "gpt-4.1": 1_047_576,
    "gpt-4o": 128_000,
    "gpt-4-turbo": 128_000,
    "gpt-4": 8_192,
    "gpt-3.5-turbo": 16_385,
    "o1": 200_000,
    "o3": 200_000,
    "o4-mini": 200_000,
    "claude-": 200_000,
    "gemini-": 1_048_576,
}
"""Context windows by model name prefix (longest match wins); pass ``context_window``
for anything else."""

_CONTINUE_TEXT = "Continue the task from your checkpoint in /memories/session/."


def _context_window_for(model: str) -> int:
    best = max((p for p in CONTEXT_WINDOWS if model.startswith(p)), key=len, default=None)
    if best is None:
        raise InvalidArgumentError(
            f"no known context window for model {model!r}; pass context_window=N"
        )
    return CONTEXT_WINDOWS[best]


@dataclass(frozen=True)
class RequestHook:
    """A host hook that edits requests (SPEC §2).

    A *context-only* hook is called as ``fn(window_id) -> str`` and may only add system
    text. An *unrestricted* hook is called as ``fn(request) -> request`` on
    ``{"system", "messages", "tools"}`` and could change anything, tools included, so
    while one is registered a rollover pauses rather than seal a window with a changed
    toolset.
    """

    fn: Callable[..., Any]
    context_only: bool


@dataclass(frozen=True)
class Turn:
    """What :meth:`Session.prepare` decided for the next provider request."""

    status: str
    """``send``, ``reject`` (input quarantined), ``block`` (Off at the limit) or
    ``pause`` (admission failed; the window stays open)."""
    decision: Decision
    window_id: str
    previous_window_id: str | None
    messages: list[dict[str, Any]] = field(default_factory=list)
    system: str = ""
    tools: list[dict[str, Any]] = field(default_factory=list)
    events: list[str] = field(default_factory=list)
    """What this call did, e.g. ``advisory:handoff``, ``rollover:w:12``."""
    hooks: tuple[RequestHook, ...] = ()
    """The hooks captured for this turn (already applied; reuse the turn for retries)."""

    def to_openai_chat(self) -> dict[str, Any]:
        """``messages`` and ``tools`` for OpenAI Chat Completions (``**`` them in)."""
        return providers.to_openai_chat(self.system, self.messages, self.tools)

    def to_openai_responses(self) -> dict[str, Any]:
        """``instructions``, ``input`` and ``tools`` for the OpenAI Responses API."""
        return providers.to_openai_responses(self.system, self.messages, self.tools)

    def to_anthropic(self) -> dict[str, Any]:
        """``system``, ``messages`` and ``tools`` for Anthropic Messages."""
        return providers.to_anthropic(self.system, self.messages, self.tools)

    reason: str | None = None
    """Why the status is not ``send``."""


def _text_of(parts: Sequence[Mapping[str, Any]]) -> str:
    return "\n".join(str(p.get("text", "")) for p in parts if p.get("type") == "text")


def _as_parts(content: str | Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    parts = [dict(p) for p in content]
    if not all(isinstance(p.get("type"), str) for p in parts):
        raise InvalidArgumentError(
            "every part needs a 'type' (text, tool_call, tool_result, media)"
        )
    return parts


class Session:
    """An agent's token-budget session over one workspace. Create with :meth:`open`."""

    def __init__(
        self,
        history: History,
        *,
        model: str,
        encoding: Encoding,
        budget: Budget,
        mode_active: bool,
        tool_policy: ToolPolicy,
        system: str,
        prompts: Prompts,
        read_only: bool,
    ) -> None:
        self.history = history
        self.model = model
        self.encoding = encoding
        self.budget = budget
        self.mode_active = mode_active
        self.tool_policy = tool_policy
        self.system_prompt = system
        self.prompts = prompts
        self._window_rows: list[Row] = []
        self._window_id = "w:0"
        self._last_seq = 0
        # Per-row caches: a step costs O(new rows), not O(window).
        self._row_messages: dict[int, list[dict[str, Any]]] = {}
        self._row_tokens: dict[int, int] = {}
        self._hidden: set[int] = set()
        self._fresh_checked: set[int] = set()
        self._fixed_tokens: tuple[tuple[str, int], int] | None = None
        self._hooks: list[RequestHook] = []
        self._tool_defs: list[dict[str, Any]] | None = None
        self.session_history = SessionHistoryTool(
            history, allowed=tool_policy.allows("session_history")
        )
        self.memory = MemoryTool(history.workspace, session_scope=mode_active, read_only=read_only)
        self._memory_writable = tool_policy.allows("memory")
        self.new_context = NewContextTool(history, offered=self._new_context_offered())
        self._sync(full=True)
        record_session_budget(self)

    @classmethod
    def open(
        cls,
        workspace: str | os.PathLike[str],
        *,
        model: str = "gpt-4o",
        context_window: int | None = None,
        threshold: float | None = None,
        settings: Settings | None = None,
        tool_policy: ToolPolicy | None = None,
        system: str = "",
        output_reserve: int | None = None,
        durability: Durability | str = Durability.FSYNC,
        prompts: Prompts = DEFAULT_PROMPTS,
        read_only: bool = False,
    ) -> Session:
        """Opens (or continues) the session stored in ``workspace``.

        Token-budget mode is active unless ``settings`` say otherwise (its effective
        strategy). ``threshold`` defaults to the settings' value for ``model`` (0.7).
        """
        window = context_window if context_window is not None else _context_window_for(model)
        if settings is not None and threshold is None:
            threshold = settings.threshold_for(model)
        mode_active = settings is None or settings.effective_strategy is Strategy.TOKEN_BUDGET
        return cls(
            History.open(workspace, durability=durability),
            model=model,
            encoding=Encoding.for_model(model),
            budget=Budget(window, 0.7 if threshold is None else threshold, output_reserve),
            mode_active=mode_active,
            tool_policy=tool_policy if tool_policy is not None else ToolPolicy.preset("exec"),
            system=system,
            prompts=prompts,
            read_only=read_only,
        )

    # ----- state read back from the transcript ----------------------------------------

    def _sync(self, full: bool = False) -> None:
        """Brings the current window's state up to date. Only new rows are read, and
        everything derived from them (claims, open tool calls, a scheduled
        ``new_context``, the last user message, hidden rows) is updated from those rows
        alone, so a step costs O(new rows)."""
        if full:
            windows = self.history.windows()
            start = windows[-1].first_seq if windows else 0
            self._window_id = self.history.current_window
            self._last_seq = max(start - 1, 0)
            self._reset_window()
        for row in self.history.rows(since_seq=self._last_seq + 1):
            if row.kind == "boundary":
                self._reset_window()
            self._window_id = row.window
            self._window_rows.append(row)
            self._last_seq = max(self._last_seq, row.seq)
            self._note(row)

    def _reset_window(self) -> None:
        self._window_rows = []
        self._row_messages.clear()
        self._row_tokens.clear()
        self._hidden = set()
        self._open_calls: set[str] = set()
        self._claims = Claims()
        self._new_context_scheduled = False
        self._last_user: Row | None = None
        self._visible_tokens = 0
        self._previous_window: str | None = None

    def _note(self, row: Row) -> None:
        if row.kind == "boundary":
            prev = row.meta.get("previous_window")
            self._previous_window = prev if isinstance(prev, str) else None
        if row.seq not in self._hidden:
            self._visible_tokens += self._tokens_of(row)
        if row.kind == "retraction" and isinstance(row.meta.get("retracts"), int):
            target = int(row.meta["retracts"])
            if target not in self._hidden and target in self._row_tokens:
                self._visible_tokens -= self._row_tokens[target]
            self._hidden.add(target)
        elif row.kind == "advisory":
            self._claims = Claims.from_rows([row], start=self._claims)
        elif row.kind == "message" and row.role == "user":
            self._last_user = row
        for p in row.parts:
            kind = p.get("type")
            if kind == "tool_call":
                self._open_calls.add(str(p.get("id")))
            elif kind == "tool_result":
                self._open_calls.discard(str(p.get("call_id")))
        if not self._new_context_scheduled and any(
            p.get("type") == "tool_result" for p in row.parts
        ):
            self._new_context_scheduled = NewContextTool.requested_in([row])

    @property
    def window_id(self) -> str:
        """The current window."""
        return self._window_id

    @property
    def previous_window_id(self) -> str | None:
        """The window before the current one, from its boundary row."""
        return self._previous_window

    def _retracted(self) -> set[int]:
        return self._hidden

    @property
    def settled(self) -> bool:
        """True when every tool call of the window has its result."""
        return not self._open_calls

    def _new_context_offered(self) -> bool:
        return self.tool_policy.offers_new_context(
            mode_active=self.mode_active, threshold=self.budget.threshold
        )

    def _capabilities(self) -> Capabilities:
        return Capabilities(
            new_context=self._new_context_offered(),
            history=self.tool_policy.allows("session_history"),
            memory_writable=self._memory_writable,
        )

    # ----- request hooks --------------------------------------------------------------

    def register_hook(self, fn: Callable[..., Any], *, context_only: bool) -> RequestHook:
        """Registers a request hook; it applies from the next :meth:`prepare` on."""
        hook = RequestHook(fn, bool(context_only))
        self._hooks.append(hook)
        return hook

    def unregister_hook(self, hook: RequestHook) -> None:
        """Removes a hook (later requests only)."""
        self._hooks = [h for h in self._hooks if h is not hook]

    # ----- recording ------------------------------------------------------------------

    def add_user(self, content: str | Sequence[Mapping[str, Any]]) -> str:
        """Records a user message (durably); returns its item ID."""
        r = self.history.append([{"kind": "message", "role": "user", "parts": _as_parts(content)}])
        self._sync()
        return str(r.first_seq)

    def add_assistant(
        self, text: str | None = None, tool_calls: Sequence[Mapping[str, Any]] = ()
    ) -> str:
        """Records the model's reply: text and/or tool calls (``id``, ``name``,
        ``arguments``)."""
        parts: list[dict[str, Any]] = []
        if text:
            parts.append({"type": "text", "text": text})
        for call in tool_calls:
            if not isinstance(call.get("id"), str) or not isinstance(call.get("name"), str):
                raise InvalidArgumentError("each tool call needs a string 'id' and 'name'")
            parts.append(
                {
                    "type": "tool_call",
                    "id": call["id"],
                    "name": call["name"],
                    "arguments": call.get("arguments", {}),
                }
            )
        r = self.history.append([{"kind": "message", "role": "assistant", "parts": parts}])
        self._sync()
        return str(r.first_seq)

    def add_assistant_from_openai(self, message: Any) -> str:
        """Records an OpenAI ``ChatCompletionMessage`` (or its dict), tool calls included."""
        text, calls = providers.from_openai_message(message)
        return self.add_assistant(text, calls)

    def add_assistant_from_anthropic(self, message: Any) -> str:
        """Records an Anthropic ``Message`` (or its dict), tool uses included."""
        text, calls = providers.from_anthropic_message(message)
        return self.add_assistant(text, calls)

    def run_tool(self, name: str, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
        """Executes a ctxbudget-owned tool (``session_history``, ``memory``,
        ``new_context``) and returns its JSON result."""
        args = arguments if arguments is not None else {}
        if name == "session_history":
            return self.session_history.call(args)
        if name == "memory":
            if not self._memory_writable:
                return {"ok": False, "code": "not_allowed", "error": "memory is not allowed"}
            return self.memory.call(args)
        if name == "new_context":
            tool = NewContextTool(self.history, offered=self._new_context_offered())
            return tool.call(args, window_id=self._window_id)
        return {"ok": False, "code": "unknown_tool", "error": f"{name!r} is not a ctxbudget tool"}

    def add_tool_results(self, results: Sequence[Mapping[str, Any]]) -> None:
        """Records tool results (``call_id``, ``name``, ``output``); settles the step."""
        rows = []
        for res in results:
            if not isinstance(res.get("call_id"), str):
                raise InvalidArgumentError("each tool result needs a string 'call_id'")
            part = {"type": "tool_result", "call_id": res["call_id"], "output": res.get("output")}
            if isinstance(res.get("name"), str):
                part["name"] = res["name"]
            rows.append({"kind": "message", "role": "tool", "parts": [part]})
        if rows:
            self.history.append(rows)
            self._sync()

    # ----- assembling and counting ----------------------------------------------------

    def _system_text(self, hooks: Sequence[RequestHook] | None = None) -> str:
        base = self._base_system_text()
        extra = [str(h.fn(self._window_id)) for h in (hooks or ()) if h.context_only]
        return "\n\n".join([base, *extra]) if extra else base

    def _base_system_text(self) -> str:
        if not self.mode_active:
            return self.system_prompt
        addition = self.prompts.render(
            "system",
            self._capabilities(),
            PromptContext(window_id=self._window_id, previous_window_id=self.previous_window_id),
        )
        return f"{self.system_prompt}\n\n{addition}" if self.system_prompt else addition

    def _tools(self) -> list[dict[str, Any]]:
        """The ctxbudget tools offered (fixed for the session: policy and mode do not
        change); a fresh list each call, since callers may edit it."""
        if self._tool_defs is None:
            self._tool_defs = self._build_tools()
        return [dict(t) for t in self._tool_defs]

    def _build_tools(self) -> list[dict[str, Any]]:
        tools = []
        if self.mode_active and self.tool_policy.allows("session_history"):
            tools.append(self._tool_def(self.session_history.name, self.session_history))
        if self.tool_policy.allows("memory"):
            tools.append(self._tool_def(self.memory.name, self.memory))
        if self._new_context_offered():
            tools.append(self._tool_def(self.new_context.name, self.new_context))
        return tools

    @staticmethod
    def _tool_def(name: str, tool: Any) -> dict[str, Any]:
        return {"name": name, "description": tool.description, "parameters": tool.schema("json")}

    def _row_to_messages(self, row: Row) -> list[dict[str, Any]]:
        """The provider-neutral messages of one row (cached by seq)."""
        cached = self._row_messages.get(row.seq)
        if cached is not None:
            return cached
        out: list[dict[str, Any]] = []
        text = _text_of(row.parts)
        if row.kind in ("boundary", "rejected", "retraction"):
            pass
        elif row.kind in ("lead_in", "advisory", "continuation"):
            out.append({"role": "user", "content": text, "item_id": row.id, "kind": row.kind})
        elif row.role == "tool":
            for p in row.parts:
                if p.get("type") == "tool_result":
                    output = p.get("output")
                    content = output if isinstance(output, str) else json.dumps(output)
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": p.get("call_id"),
                            "name": p.get("name"),
                            "content": content,
                        }
                    )
        else:
            message: dict[str, Any] = {"role": row.role, "content": text, "item_id": row.id}
            if row.role == "user" and self.mode_active:
                message["content"] = f"{text}\n\n[id: {row.id}]"
            calls = [p for p in row.parts if p.get("type") == "tool_call"]
            if calls:
                message["tool_calls"] = [
                    {"id": c.get("id"), "name": c.get("name"), "arguments": c.get("arguments")}
                    for c in calls
                ]
            if any(p.get("type") == "media" for p in row.parts):
                message["media"] = [p for p in row.parts if p.get("type") == "media"]
            out.append(message)
        self._row_messages[row.seq] = out
        return out

    def _messages(self) -> list[dict[str, Any]]:
        hidden = self._hidden
        out: list[dict[str, Any]] = []
        for row in self._window_rows:
            if row.seq not in hidden:
                out.extend(self._row_to_messages(row))
        return out

    def _message_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of messages without request framing or system text."""
        texts = []
        total = 0
        for m in messages:
            total += FRAMING_TOKENS
            texts.append(str(m.get("content") or ""))
            if m.get("tool_calls"):
                texts.append(json.dumps(m["tool_calls"], ensure_ascii=False))
            for media in m.get("media", ()):
                pages = media.get("pages")
                total += min(int(pages), 100) * 3_000 if isinstance(pages, int) else 1_024
        return total + sum(self.encoding.count_many(texts))

    def _fixed(self) -> int:
        """Tokens of the request frame, system text and tool schemas (cached while
        they do not change)."""
        system = self._system_text(self._hooks)
        tools = self._tools()
        key = (system, len(tools))
        if self._fixed_tokens is not None and self._fixed_tokens[0] == key:
            return self._fixed_tokens[1]
        total = 1 + (FRAMING_TOKENS + self.encoding.count(system) if system else 0)
        for t in tools:
            total += FRAMING_TOKENS + self.encoding.count_json(t)
        self._fixed_tokens = (key, total)
        return total

    def count_request(
        self, system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> int:
        """Tokens of a request: SPEC §1 framing (8 per message and tool schema, 1 per
        request), text counts, tool-call JSON, media allowances."""
        total = 1 + (FRAMING_TOKENS + self.encoding.count(system) if system else 0)
        for t in tools:
            total += FRAMING_TOKENS + self.encoding.count_json(t)
        return total + self._message_tokens(messages)

    # ----- the step -------------------------------------------------------------------

    def prepare(self) -> Turn:
        """Decides the next provider request (call before every request)."""
        self._sync()
        events: list[str] = []
        caps = self._capabilities()

        # A request that could not fit even in a fresh window is quarantined first.
        last_user = self._last_user
        if (
            last_user is not None
            and last_user.seq not in self._hidden
            and last_user.seq not in self._fresh_checked
        ):
            self._fresh_checked.add(last_user.seq)
            fresh = self._fresh_request_tokens(last_user.parts)
            if fresh >= self.budget.usable_limit:
                self.history.append(
                    [{"kind": "retraction", "role": "system", "meta": {"retracts": last_user.seq}}]
                )
                self.history.quarantine(
                    {
                        "kind": "message",
                        "role": "user",
                        "parts": last_user.parts,
                        "meta": last_user.meta,
                    }
                )
                self._sync()
                decision = self.budget.evaluate(fresh, Claims(), caps.new_context)
                return self._turn(
                    "reject",
                    decision,
                    [*events, "quarantined"],
                    reason=f"the message alone needs {fresh:,} tokens; the usable "
                    f"limit is {self.budget.usable_limit:,}",
                )

        # A rollover the model asked for happens once the step has settled.
        if self.settled and self._new_context_scheduled:
            paused = self._rollover("new_context", events)
            if paused is not None:
                return paused

        projected = self._projected()
        claims = self._claims
        decision = self.budget.evaluate(projected, claims, caps.new_context)
        if decision.action is Action.BLOCK:
            return self._turn("block", decision, events, reason="the usable limit is reached")
        if decision.action is Action.ROLLOVER:
            if not self.settled:
                return self._turn("pause", decision, events, reason="a tool step is still open")
            paused = self._rollover("usable_limit", events)
            if paused is not None:
                return paused
            projected = self._projected()
            decision = self.budget.evaluate(projected, Claims(), caps.new_context)
        if decision.is_advisory:
            self._publish_advisory(decision, caps)
            events.append(f"advisory:{decision.action.value}")
            decision = Decision(
                action=decision.action,
                projected=self._projected(),
                usable_limit=decision.usable_limit,
                handoff_target=decision.handoff_target,
                percent_used=decision.percent_used,
                headroom=decision.headroom,
            )
        return self._turn("send", decision, events)

    def _tokens_of(self, row: Row) -> int:
        tokens = self._row_tokens.get(row.seq)
        if tokens is None:
            tokens = self._message_tokens(self._row_to_messages(row))
            self._row_tokens[row.seq] = tokens
        return tokens

    def _projected(self) -> int:
        """Tokens of the next request: frame, system, tools and every visible row of the
        window (kept as a running sum as rows arrive)."""
        return self._fixed() + self._visible_tokens

    def _turn(
        self, status: str, decision: Decision, events: list[str], reason: str | None = None
    ) -> Turn:
        hooks = tuple(self._hooks)  # the snapshot for this turn and its retries
        request: dict[str, Any] = {
            "system": self._system_text(hooks),
            "messages": self._messages() if status == "send" else [],
            "tools": self._tools() if status == "send" else [],
        }
        if status == "send":
            for hook in hooks:
                if not hook.context_only:
                    request = hook.fn(request)
        return Turn(
            status=status,
            decision=decision,
            window_id=self._window_id,
            previous_window_id=self.previous_window_id,
            messages=request["messages"],
            system=request["system"],
            tools=request["tools"],
            events=events,
            reason=reason,
            hooks=hooks,
        )

    def _lead_in_text(self, window_id: str, reason: str) -> str:
        ctx = PromptContext(
            window_id=window_id,
            previous_window_id=self._window_id,
            limit_reached=reason == "usable_limit",
            requested_by_model=reason == "new_context",
        )
        return self.prompts.render("lead_in", self._capabilities(), ctx)

    def _fresh_request_tokens(self, trigger_parts: Sequence[Mapping[str, Any]]) -> int:
        lead_in = self._lead_in_text("w:0000000", "usable_limit")
        messages = [
            {"role": "user", "content": lead_in},
            {"role": "user", "content": _text_of(trigger_parts) + "\n\n[id: 0000000]"},
        ]
        return self.count_request(self._system_text(), messages, self._tools())

    def _trigger(self) -> dict[str, Any]:
        """The message that opens the new window: the pending user message (if the
        window ends with one) or a plain continuation."""
        hidden = self._retracted()
        visible = [r for r in self._window_rows if r.kind == "message" and r.seq not in hidden]
        if visible and visible[-1].role == "user":
            last = visible[-1]
            return {
                "kind": "continuation",
                "role": "user",
                "parts": last.parts,
                "meta": {"continues": last.seq},
            }
        return {
            "kind": "continuation",
            "role": "user",
            "parts": [{"type": "text", "text": _CONTINUE_TEXT}],
        }

    def _rollover(self, reason: str, events: list[str]) -> Turn | None:
        """Seals the window (boundary + lead-in + trigger, one batch) if admitted;
        returns a ``pause`` turn if not."""
        caps = self._capabilities()
        decision = self.budget.evaluate(self._projected(), self._claims, caps.new_context)
        if any(not h.context_only for h in self._hooks):
            return self._turn(
                "pause",
                decision,
                events,
                reason="an unrestricted request hook is registered: it could change the "
                "toolset of the sealed window",
            )
        if not caps.history:
            return self._turn(
                "pause",
                decision,
                events,
                reason="session_history is not allowed: sealing the window would lose its context",
            )
        trigger = self._trigger()
        fresh = self._fresh_request_tokens(trigger["parts"])
        if fresh >= self.budget.usable_limit:
            return self._turn(
                "pause", decision, events, reason="the fresh window would not fit the request"
            )
        rollover_id = f"{self._window_id}:{reason}:{uuid.uuid4().hex[:12]}"
        boundary_seq = self._last_seq + 1
        new_window = f"w:{boundary_seq}"
        self.history.rollover(
            rollover_id=rollover_id,
            reason=reason,
            requested_by="model" if reason == "new_context" else None,
            lead_in=self._lead_in_text(new_window, reason),
            trigger=trigger,
            figures={"projected": decision.projected, "budget_tokens": self.budget.usable_limit},
        )
        self._sync()
        events.append(f"rollover:{self._window_id}")
        return None

    def _publish_advisory(self, decision: Decision, caps: Capabilities) -> None:
        ctx = PromptContext(
            used=decision.projected,
            usable=self.budget.usable_limit,
            target=self.budget.handoff_target,
            window_id=self._window_id,
            previous_window_id=self.previous_window_id,
        )
        text = self.prompts.render(decision.action.value, caps, ctx)
        meta = {
            "stage": decision.action.value,
            "projected": decision.projected,
            "budget_tokens": self.budget.usable_limit,
        }
        self.history.append(
            [
                {
                    "kind": "advisory",
                    "role": "user",
                    "parts": [{"type": "text", "text": text}],
                    "meta": meta,
                }
            ]
        )
        self._sync()

    def __repr__(self) -> str:
        return f"Session({str(Path(self.history.workspace))!r}, window={self._window_id!r})"
