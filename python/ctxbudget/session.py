"""The agent-loop integration: counting, store, policy and tools in one object.

A backend calls :meth:`Session.prepare` before every provider request. It counts the
assembled request — system text, every message and every advertised tool schema (the
host's and ctxbudget's), after the request hooks ran — (cached per row, so a step costs
O(new content)), derives the window's claims from its durable rows, publishes an
advisory row when one is due, performs a pending rollover (asked for with
``new_context`` or forced at the usable limit) as one store batch with the lead-in, runs
the fresh-window and admission checks, and returns the :class:`Turn` to send.
Everything that decides behaviour is read back from the transcript, so a new process
opening the same workspace continues where the old one stopped.

Threads and other writers: every public method holds the session's lock, so one
``Session`` may be shared by threads. Decisions (advisories, rollovers, quarantines,
interrupted tool results) are written on condition that the transcript still ends where
the decision was made (``if_last_seq``); when another writer — a second ``Session`` in
this process or another — appended first, ``prepare()`` reads the new rows and decides
again, so no stage is published twice and no window is sealed twice.
"""

from __future__ import annotations

import json
import os
import threading
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from . import providers
from .budget_record import record_session_budget
from .errors import ConflictError, InvalidArgumentError, UnknownModelError
from .history import Durability, History, Row
from .memory import MemoryTool
from .new_context import NewContextTool
from .policy import Action, Budget, Claims, Decision
from .prompts import DEFAULT_PROMPTS, Capabilities, PromptContext, Prompts
from .session_history import SessionHistoryTool
from .settings import Settings, Strategy
from .tokens import FRAMING_TOKENS, Encoding, messages_tokens, request_tokens
from .toolpolicy import ToolPolicy

__all__ = [
    "CONTEXT_WINDOWS",
    "FRAMING_TOKENS",
    "INTERRUPTED_OUTPUT",
    "OpenCall",
    "RequestHook",
    "Session",
    "Turn",
]

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

INTERRUPTED_OUTPUT: dict[str, Any] = {
    "ok": False,
    "code": "interrupted",
    "error": "this tool call was interrupted: the process stopped before its result was "
    "recorded, so it may or may not have run; check its effects and call it again if it "
    "is still needed",
}
"""The result recorded for a tool call left open by a stopped process (see
:meth:`Session.interrupt_open_calls`)."""

_CONTINUE_TEXT = "Continue the task from your checkpoint in /memories/session/."
_OWN_TOOLS = ("session_history", "memory", "new_context")
_OPEN_CALL_POLICIES = ("interrupt", "wait")
_MAX_RESYNCS = 64
"""Conflicts one call re-decides before it gives up (each one means another writer
made progress, so this bound is only reached by a transcript this session cannot read)."""

_P = ParamSpec("_P")
_R = TypeVar("_R")


def _locked(
    method: Callable[Concatenate[Session, _P], _R],
) -> Callable[Concatenate[Session, _P], _R]:
    """Runs ``method`` holding the session's (reentrant) lock."""

    def run(self: Session, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        with self._lock:
            return method(self, *args, **kwargs)

    run.__name__ = method.__name__
    run.__qualname__ = method.__qualname__
    run.__doc__ = method.__doc__
    return run


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
    ``{"system", "messages", "tools"}`` (copies: editing them in place is safe) and
    could change anything, tools included, so while one is registered a rollover
    pauses rather than seal a window with a changed toolset. The budget counts the
    request the hooks return.
    """

    fn: Callable[..., Any]
    context_only: bool


@dataclass(frozen=True)
class OpenCall:
    """A tool call of the current window that has no result yet."""

    id: str
    name: str
    arguments: Any
    seq: int
    """The seq of the assistant row that made the call."""


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
    """Every advertised tool: the host's (``Session.open(tools=...)``) and ctxbudget's."""
    events: list[str] = field(default_factory=list)
    """What this call did, e.g. ``advisory:handoff``, ``rollover:w:12``,
    ``interrupted:<call id>``, ``resync`` (another writer appended first)."""
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


def _tool_output_text(output: object) -> str:
    """A tool result as sent: the host's text as given, anything else as JSON that keeps
    non-ASCII characters as they are."""
    return output if isinstance(output, str) else json.dumps(output, ensure_ascii=False)


class Session:
    """An agent's token-budget session over one workspace. Create with :meth:`open`.

    Safe to share between threads: every public method holds the session's lock, and
    the store and the tokenizer release the GIL while they work.
    """

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
        tools: Sequence[Mapping[str, Any]] = (),
        open_calls: str = "interrupt",
    ) -> None:
        if open_calls not in _OPEN_CALL_POLICIES:
            raise InvalidArgumentError(
                f"open_calls must be one of {list(_OPEN_CALL_POLICIES)}, got {open_calls!r}"
            )
        self._lock = threading.RLock()
        self._open_call_policy = open_calls
        self._host_tools = [providers.normalize_tool(t) for t in tools]
        names = [t["name"] for t in self._host_tools]
        clash = sorted({n for n in names if n in _OWN_TOOLS or names.count(n) > 1})
        if clash:
            raise InvalidArgumentError(
                f"host tool names must be unique and differ from ctxbudget's own "
                f"({', '.join(_OWN_TOOLS)}); rename {', '.join(map(repr, clash))}"
            )
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
        tools: Sequence[Mapping[str, Any]] = (),
        encoding: str | Encoding | None = None,
        open_calls: str = "interrupt",
    ) -> Session:
        """Opens (or continues) the session stored in ``workspace``.

        Token-budget mode is active unless ``settings`` say otherwise (its effective
        strategy). ``threshold`` defaults to the settings' value for ``model`` (0.7).

        ``tools`` are the host's own tool definitions (neutral ``{"name",
        "description", "parameters"}``, or an OpenAI or Anthropic definition): every
        :class:`Turn` advertises them beside ctxbudget's, and the budget counts them.
        ``encoding`` (a name such as ``"o200k_base"`` or an :class:`Encoding`) counts
        for any model name — a local model needs it and ``context_window``; without it
        the model's tokenizer is looked up (:class:`~ctxbudget.UnknownModelError` if
        there is none). ``open_calls`` says what :meth:`prepare` does with tool calls
        that have no result (a process stopped between :meth:`add_assistant` and
        :meth:`add_tool_results`): ``"interrupt"`` records :data:`INTERRUPTED_OUTPUT`
        for each, so call/result pairs stay whole; ``"wait"`` returns ``pause`` until
        their results are recorded (another worker is still running them).
        """
        if not isinstance(model, str):
            raise TypeError(f"model must be str, got {type(model).__name__}")
        window = context_window if context_window is not None else _context_window_for(model)
        if settings is not None and threshold is None:
            threshold = settings.threshold_for(model)
        mode_active = settings is None or settings.effective_strategy is Strategy.TOKEN_BUDGET
        if isinstance(encoding, Encoding):
            counter = encoding
        elif encoding is not None:
            counter = Encoding(encoding)
        else:
            try:
                counter = Encoding.for_model(model)
            except UnknownModelError as exc:
                err = UnknownModelError(
                    f"no tokenizer is known for model {model!r}; a local or custom model "
                    f"needs its encoding, e.g. Session.open(..., model={model!r}, "
                    f"encoding='o200k_base', context_window={window})"
                )
                err.model = model
                raise err from exc
        return cls(
            History.open(workspace, durability=durability),
            model=model,
            encoding=counter,
            budget=Budget(window, 0.7 if threshold is None else threshold, output_reserve),
            mode_active=mode_active,
            tool_policy=tool_policy if tool_policy is not None else ToolPolicy.preset("exec"),
            system=system,
            prompts=prompts,
            read_only=read_only,
            tools=tools,
            open_calls=open_calls,
        )

    # ----- state read back from the transcript ----------------------------------------

    @_locked
    def _sync(self, full: bool = False) -> None:
        """Brings the current window's state up to date. Only new rows are read, and
        everything derived from them (claims, open tool calls, a scheduled
        ``new_context``, the last user message, hidden rows) is updated from those rows
        alone, so a step costs O(new rows). Rows other writers appended are read the
        same way."""
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
        self._open_calls: dict[str, OpenCall] = {}
        self._answered: set[str] = set()
        self._claims = Claims()
        self._new_context_scheduled = False
        self._last_user: Row | None = None
        self._visible_tokens = 0
        # The visible messages in order, extended as rows arrive (None: rebuild).
        self._visible_messages: list[dict[str, Any]] | None = []
        self._previous_window: str | None = None

    def _note(self, row: Row) -> None:
        if row.kind == "boundary":
            prev = row.meta.get("previous_window")
            self._previous_window = prev if isinstance(prev, str) else None
        if row.seq not in self._hidden:
            self._visible_tokens += self._tokens_of(row)
            if self._visible_messages is not None:
                self._visible_messages.extend(self._row_to_messages(row))
        if row.kind == "retraction" and isinstance(row.meta.get("retracts"), int):
            target = int(row.meta["retracts"])
            if target not in self._hidden and target in self._row_tokens:
                self._visible_tokens -= self._row_tokens[target]
                self._visible_messages = None
            self._hidden.add(target)
        elif row.kind == "advisory":
            self._claims = Claims.from_rows([row], start=self._claims)
        elif row.kind == "message" and row.role == "user":
            self._last_user = row
        for p in row.parts:
            kind = p.get("type")
            if kind == "tool_call":
                call_id = str(p.get("id"))
                self._open_calls[call_id] = OpenCall(
                    call_id, str(p.get("name")), p.get("arguments"), row.seq
                )
            elif kind == "tool_result":
                call_id = str(p.get("call_id"))
                self._open_calls.pop(call_id, None)
                self._answered.add(call_id)
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

    @property
    def open_calls(self) -> list[OpenCall]:
        """The tool calls of the current window that have no result yet, oldest first
        (as of the rows this session has read; :meth:`refresh` reads new ones)."""
        with self._lock:
            return list(self._open_calls.values())

    @_locked
    def refresh(self) -> None:
        """Reads rows other writers appended since this session last looked."""
        self._sync()

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

    @_locked
    def register_hook(self, fn: Callable[..., Any], *, context_only: bool) -> RequestHook:
        """Registers a request hook; it applies from the next :meth:`prepare` on."""
        hook = RequestHook(fn, bool(context_only))
        self._hooks.append(hook)
        return hook

    @_locked
    def unregister_hook(self, hook: RequestHook) -> None:
        """Removes a hook (later requests only)."""
        self._hooks = [h for h in self._hooks if h is not hook]

    # ----- recording ------------------------------------------------------------------

    @_locked
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
        return self._add_assistant(text, tool_calls, None)

    @_locked
    def _add_assistant(
        self,
        text: str | None,
        tool_calls: Sequence[Mapping[str, Any]],
        meta: Mapping[str, Any] | None,
    ) -> str:
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
        row: dict[str, Any] = {"kind": "message", "role": "assistant", "parts": parts}
        if meta:
            row["meta"] = dict(meta)
        r = self.history.append([row])
        self._sync()
        return str(r.first_seq)

    def add_assistant_from_openai(self, message: Any) -> str:
        """Records an OpenAI ``ChatCompletionMessage`` (or its dict), tool calls included.
        A Responses API reply goes to :meth:`add_assistant_from_openai_responses`."""
        text, calls = providers.from_openai_message(message)
        return self.add_assistant(text, calls)

    def add_assistant_from_openai_responses(self, response: Any) -> str:
        """Records an OpenAI Responses API reply (a ``Response``, its dict or its
        ``output`` list): output text and refusals as text, ``function_call`` items as
        tool calls (keyed by ``call_id``), and ``reasoning`` items kept whole so that
        :meth:`Turn.to_openai_responses` sends them back. Any other output item is an
        :class:`~ctxbudget.InvalidArgumentError` naming it."""
        reply = providers.from_openai_response(response)
        meta: dict[str, Any] = {}
        if reply.reasoning:
            meta["reasoning"] = reply.reasoning
        if reply.refusal:
            meta["refusal"] = True
        return self._add_assistant(reply.text, reply.tool_calls, meta)

    def add_assistant_from_anthropic(self, message: Any) -> str:
        """Records an Anthropic ``Message`` (or its dict), tool uses included."""
        text, calls = providers.from_anthropic_message(message)
        return self.add_assistant(text, calls)

    @_locked
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

    @_locked
    def add_tool_results(self, results: Sequence[Mapping[str, Any]]) -> None:
        """Records tool results (``call_id``, ``name``, ``output``); settles the step.

        ``output`` is sent as given: a string unchanged, anything else as JSON that
        keeps non-ASCII characters. A result for a call that already has one in this
        window (e.g. recorded as interrupted) is an
        :class:`~ctxbudget.InvalidArgumentError` and nothing is written; the check and
        the write are one conditional append, so it holds against other writers too."""
        for attempt in range(_MAX_RESYNCS + 1):
            self._sync()
            rows = self._result_rows(results)
            if not rows:
                return
            try:
                self.history.append(rows, if_last_seq=self._last_seq)
            except ConflictError:
                if attempt == _MAX_RESYNCS:
                    raise
                continue
            self._sync()
            return

    def _result_rows(self, results: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
        rows = []
        seen: set[str] = set()
        for res in results:
            call_id = res.get("call_id")
            if not isinstance(call_id, str):
                raise InvalidArgumentError("each tool result needs a string 'call_id'")
            if call_id in seen or call_id in self._answered:
                raise InvalidArgumentError(
                    f"tool call {call_id!r} already has a result in window "
                    f"{self._window_id}; nothing was recorded (see Session.open_calls)"
                )
            seen.add(call_id)
            part = {"type": "tool_result", "call_id": call_id, "output": res.get("output")}
            if isinstance(res.get("name"), str):
                part["name"] = res["name"]
            rows.append({"kind": "message", "role": "tool", "parts": [part]})
        return rows

    @_locked
    def interrupt_open_calls(self) -> list[OpenCall]:
        """Records :data:`INTERRUPTED_OUTPUT` as the result of every open call of the
        window (one batch, only if no other writer appended meanwhile; else re-read and
        retried) and returns the calls it resolved. :meth:`prepare` does this itself
        under the default ``open_calls="interrupt"``."""
        for attempt in range(_MAX_RESYNCS + 1):
            self._sync()
            try:
                return self._interrupt()
            except ConflictError:
                if attempt == _MAX_RESYNCS:
                    raise
        return []  # pragma: no cover - the loop returns or raises

    def _interrupt(self) -> list[OpenCall]:
        calls = list(self._open_calls.values())
        if calls:
            rows = [
                {
                    "kind": "message",
                    "role": "tool",
                    "parts": [
                        {
                            "type": "tool_result",
                            "call_id": c.id,
                            "name": c.name,
                            "output": INTERRUPTED_OUTPUT,
                        }
                    ],
                    "meta": {"interrupted": True},
                }
                for c in calls
            ]
            self.history.append(rows, if_last_seq=self._last_seq)
            self._sync()
        return calls

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

    def _advertised_tools(self) -> list[dict[str, Any]]:
        """Every tool a request advertises: the host's, then ctxbudget's (fresh copies)."""
        return [*(dict(t) for t in self._host_tools), *self._tools()]

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
                    out.append(
                        {
                            "role": "tool",
                            "tool_call_id": p.get("call_id"),
                            "name": p.get("name"),
                            "content": _tool_output_text(p.get("output")),
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
            reasoning = row.meta.get("reasoning")
            if row.role == "assistant" and isinstance(reasoning, list) and reasoning:
                message["reasoning"] = reasoning
            out.append(message)
        self._row_messages[row.seq] = out
        return out

    def _messages(self) -> list[dict[str, Any]]:
        """The window's visible messages (a fresh list; O(1) per row, rebuilt only
        after a retraction)."""
        if self._visible_messages is None:
            hidden = self._hidden
            out: list[dict[str, Any]] = []
            for row in self._window_rows:
                if row.seq not in hidden:
                    out.extend(self._row_to_messages(row))
            self._visible_messages = out
        return list(self._visible_messages)

    def _message_tokens(self, messages: Sequence[Mapping[str, Any]]) -> int:
        """Tokens of messages without request framing or system text."""
        return messages_tokens(self.encoding, messages)

    def _fixed(self) -> int:
        """Tokens of the request frame, system text and every advertised tool schema
        (cached while they do not change)."""
        system = self._system_text(self._hooks)
        tools = self._advertised_tools()
        key = (system, len(tools))
        if self._fixed_tokens is not None and self._fixed_tokens[0] == key:
            return self._fixed_tokens[1]
        total = request_tokens(self.encoding, system, (), tools)
        self._fixed_tokens = (key, total)
        return total

    def count_request(
        self, system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> int:
        """Tokens of a request: SPEC §1 framing (8 per message and tool schema, 1 per
        request), text counts, tool-call JSON, media allowances (the rule of
        :func:`ctxbudget.count_messages`)."""
        return request_tokens(self.encoding, system, messages, tools)

    # ----- the step -------------------------------------------------------------------

    @_locked
    def prepare(self) -> Turn:
        """Decides the next provider request (call before every request).

        Every write it makes is conditional on the rows it decided on; if another
        writer appended first it reads the new rows and decides again (``resync`` in
        the turn's events)."""
        events: list[str] = []
        for attempt in range(_MAX_RESYNCS + 1):
            self._sync()
            try:
                return self._decide(events)
            except ConflictError:
                if attempt == _MAX_RESYNCS:
                    raise
                events.append("resync")
        raise AssertionError("unreachable")  # pragma: no cover

    def _decide(self, events: list[str]) -> Turn:
        caps = self._capabilities()

        # Tool calls left open by a process that stopped mid-step.
        if self._open_calls:
            if self._open_call_policy == "wait":
                ids = ", ".join(self._open_calls)
                return self._turn(
                    "pause",
                    self.budget.evaluate(self._projected(), self._claims, caps.new_context),
                    events,
                    reason=f"tool calls {ids} have no result yet: record them with "
                    "add_tool_results() or resolve them with interrupt_open_calls()",
                )
            events.extend(f"interrupted:{c.id}" for c in self._interrupt())

        # A request that could not fit even in a fresh window is quarantined first.
        last_user = self._last_user
        if (
            last_user is not None
            and last_user.seq not in self._hidden
            and last_user.seq not in self._fresh_checked
        ):
            fresh = self._fresh_request_tokens(last_user.parts)
            if fresh >= self.budget.usable_limit:
                self.history.quarantine(
                    {
                        "kind": "message",
                        "role": "user",
                        "parts": last_user.parts,
                        "meta": last_user.meta,
                    },
                    retracts=last_user.seq,
                    if_last_seq=self._last_seq,
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
            self._fresh_checked.add(last_user.seq)

        # A rollover the model asked for happens once the step has settled.
        if self.settled and self._new_context_scheduled:
            paused = self._rollover("new_context", events)
            if paused is not None:
                return paused

        request, projected = self._measure()
        decision = self.budget.evaluate(projected, self._claims, caps.new_context)
        if decision.action is Action.BLOCK:
            return self._turn("block", decision, events, reason="the usable limit is reached")
        if decision.action is Action.ROLLOVER:
            if not self.settled:
                return self._turn("pause", decision, events, reason="a tool step is still open")
            paused = self._rollover("usable_limit", events)
            if paused is not None:
                return paused
            request, projected = self._measure()
            decision = self.budget.evaluate(projected, self._claims, caps.new_context)
        if decision.is_advisory:
            self._publish_advisory(decision, caps)
            events.append(f"advisory:{decision.action.value}")
            request, projected = self._measure()
            decision = replace(decision, projected=projected)
        return self._turn("send", decision, events, request=request)

    def _tokens_of(self, row: Row) -> int:
        tokens = self._row_tokens.get(row.seq)
        if tokens is None:
            tokens = self._message_tokens(self._row_to_messages(row))
            self._row_tokens[row.seq] = tokens
        return tokens

    def _projected(self) -> int:
        """Tokens of the next request before unrestricted hooks: frame, system, tools
        and every visible row of the window (kept as a running sum as rows arrive)."""
        return self._fixed() + self._visible_tokens

    def _measure(self) -> tuple[dict[str, Any] | None, int]:
        """The request to send (``None`` when no unrestricted hook can change it, then
        built later) and its token count — of the request after the hooks ran."""
        if all(h.context_only for h in self._hooks):
            return None, self._projected()
        request = self._request(tuple(self._hooks))
        return request, self.count_request(request["system"], request["messages"], request["tools"])

    def _request(self, hooks: Sequence[RequestHook]) -> dict[str, Any]:
        """The request as sent: assembled, then passed through the unrestricted hooks
        (each gets copies, so editing in place cannot reach the session's caches)."""
        request: dict[str, Any] = {
            "system": self._system_text(hooks),
            "messages": self._messages(),
            "tools": self._advertised_tools(),
        }
        for hook in hooks:
            if not hook.context_only:
                request = hook.fn(
                    {
                        "system": request["system"],
                        "messages": [dict(m) for m in request["messages"]],
                        "tools": [dict(t) for t in request["tools"]],
                    }
                )
        return request

    def _turn(
        self,
        status: str,
        decision: Decision,
        events: list[str],
        reason: str | None = None,
        request: dict[str, Any] | None = None,
    ) -> Turn:
        hooks = tuple(self._hooks)  # the snapshot for this turn and its retries
        if status == "send":
            if request is None:
                request = self._request(hooks)
        else:
            request = {"system": self._system_text(hooks), "messages": [], "tools": []}
        return Turn(
            status=status,
            decision=decision,
            window_id=self._window_id,
            previous_window_id=self.previous_window_id,
            messages=request["messages"],
            system=request["system"],
            tools=request["tools"],
            events=list(events),
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
        return self.count_request(
            self._system_text(self._hooks), messages, self._advertised_tools()
        )

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
        """Seals the window (boundary + lead-in + trigger, one batch, only if no other
        writer appended since this decision) if admitted; returns a ``pause`` turn if
        not."""
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
        # The condition makes the boundary land at exactly this seq.
        boundary_seq = self._last_seq + 1
        new_window = f"w:{boundary_seq}"
        self.history.rollover(
            rollover_id=rollover_id,
            reason=reason,
            requested_by="model" if reason == "new_context" else None,
            lead_in=self._lead_in_text(new_window, reason),
            trigger=trigger,
            figures={"projected": decision.projected, "budget_tokens": self.budget.usable_limit},
            if_last_seq=self._last_seq,
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
            ],
            if_last_seq=self._last_seq,
        )
        self._sync()

    def __repr__(self) -> str:
        return f"Session({str(Path(self.history.workspace))!r}, window={self._window_id!r})"
