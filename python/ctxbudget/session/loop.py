"""The loop API: what a backend calls, and the state it keeps between calls.

A backend calls :meth:`Session.prepare` before every provider request. The session
reads the window through the core's fold (:mod:`ctxbudget.window`: only the rows
appended since the last step), counts the request with the accounting
(:mod:`.accounting`: system text, every message and every advertised tool schema, after
the hooks), and :mod:`.decide` applies the ladder — each write one step of
:mod:`.steps` — before it returns the :class:`Turn` to send. Everything that decides
behaviour is read back from the transcript, so a new process opening the same
workspace continues where the old one stopped.

Threads and other writers: every public method holds the session's lock, so one
``Session`` may be shared by threads. Decisions (advisories, rollovers, quarantines,
interrupted tool results) are written on condition that the transcript still ends where
the decision was made (``if_last_seq``); when another writer — a second ``Session`` in
this process or another — appended first, ``prepare()`` reads the new rows and decides
again, so no stage is published twice and no window is sealed twice.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING, Any, TypeVar, get_args

from .. import providers
from ..budget_record import record_request_overhead, record_session_budget
from ..errors import ConflictError, InvalidArgumentError
from ..history import AppendResult, Durability, History
from ..policy import Budget
from ..prompts import DEFAULT_PROMPTS, Prompts
from ..settings import Settings, Strategy
from ..tokens import Encoding, RequestProfile, profile_for
from ..tools import OWN_TOOL_NAMES, ToolPolicy, Toolset
from ..usage import Usage, usage_of
from ..window import OpenCall, WindowChange, WindowFold, WindowView
from . import keyed, steps
from . import rows as make
from .accounting import Requests, WindowTokens
from .anchoring import Counting, PendingCount, RequestCounter
from .decide import CountFirst, Plan, Progress, build_turn, decide
from .keyed import KeyedMessage, KeyIndex, SyncReport
from .lock import SessionLock
from .lock import locked as _locked
from .lock import locked_brief as _locked_brief
from .state import Inputs, OpenCallPolicy, WindowState
from .types import RequestHook, Turn, context_window_for, encoding_for

if TYPE_CHECKING:
    from ..database import Database

__all__ = ["Session"]

_STARTED = Progress()
"""Nothing written yet in this ``prepare`` call."""

_OPEN_CALL_POLICIES: tuple[OpenCallPolicy, ...] = get_args(OpenCallPolicy)
_T = TypeVar("_T")
_new_tuple = tuple.__new__
_MAX_RESYNCS = 64
"""Conflicts one call re-decides before it gives up (each one means another writer
made progress, so this bound is only reached by a transcript this session cannot read)."""


def _host_tools(tools: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The host's tool definitions checked, function tools in neutral form (names unique
    and none of ctxbudget's own); a provider's built-in tool (a ``type`` other than
    ``"function"``, e.g. ``{"type": "web_search"}``) is kept as given and counts as its
    JSON."""
    if isinstance(tools, (str, bytes, Mapping)):
        raise InvalidArgumentError("tools must be a sequence of tool definitions")
    host_tools = [_builtin(t) or providers.normalize_tool(t) for t in tools]
    names = [t["name"] for t in host_tools if isinstance(t.get("name"), str)]
    clash = sorted({n for n in names if n in OWN_TOOL_NAMES or names.count(n) > 1})
    if clash:
        raise InvalidArgumentError(
            f"host tool names must be unique and differ from ctxbudget's own "
            f"({', '.join(OWN_TOOL_NAMES)}); rename {', '.join(map(repr, clash))}"
        )
    return host_tools


def _builtin(tool: Mapping[str, Any]) -> dict[str, Any] | None:
    """A provider's built-in tool definition as given, else ``None``."""
    if not isinstance(tool, Mapping):
        return None
    kind = tool.get("type")
    if isinstance(kind, str) and kind != "function":
        return dict(tool)
    return None


class Session:
    """An agent's token-budget session over one conversation: a workspace directory or a
    PostgreSQL conversation. Create with :meth:`open`.

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
        open_calls: OpenCallPolicy = "interrupt",
        profile: RequestProfile | None = None,
        counter: RequestCounter | None = None,
    ) -> None:
        if counter is not None and not callable(counter):
            raise TypeError(f"counter must be callable, got {type(counter).__name__}")
        if open_calls not in _OPEN_CALL_POLICIES:
            raise InvalidArgumentError(
                f"open_calls must be one of {list(_OPEN_CALL_POLICIES)}, got {open_calls!r}"
            )
        self._lock = SessionLock()
        self._open_call_policy: OpenCallPolicy = open_calls
        host_tools = _host_tools(tools)
        self.history = history
        self.model = model
        self.encoding = encoding
        self.budget = budget
        self.mode_active = mode_active
        self.tool_policy = tool_policy
        self.system_prompt = system
        self.prompts = prompts
        self._hooks: tuple[RequestHook, ...] = ()
        self._keys = KeyIndex()
        self._toolset = Toolset(
            history,
            tool_policy=tool_policy,
            mode_active=mode_active,
            threshold=budget.threshold,
            read_only=read_only,
        )
        self.session_history = self._toolset.session_history
        self.memory = self._toolset.memory
        self.new_context = self._toolset.new_context
        self.profile: RequestProfile = (
            profile
            if profile is not None
            # A model's own chat template renders its requests: count exactly that.
            else "chat_template"
            if encoding.has_chat_template
            else profile_for(model)
        )
        # The window: read once by the core's fold, counted once by the accounting.
        self._state = WindowState(
            WindowFold(history),
            WindowTokens(encoding, mode_active=mode_active, profile=self.profile),
            Requests(
                encoding,
                self._toolset.capabilities,
                host_tools,
                self._toolset.definitions(),
                profile=self.profile,
            ),
            Counting(counter, estimated=encoding.is_estimate),
        )
        self._view: WindowView | None = None
        self._overhead_window: str | None = None
        self._sync()
        # Calls already open now were left by a process that stopped mid-step; calls made
        # while this session runs are the host's to answer.
        self._state.left_open = frozenset(c.id for c in self._state.fold.open_calls)
        self._record_overhead(with_budget=True)

    @classmethod
    def open(
        cls,
        workspace: str | os.PathLike[str] | None = None,
        *,
        database: Database | None = None,
        conversation: str | None = None,
        cursor_key: str | None = None,
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
        open_calls: OpenCallPolicy = "interrupt",
        profile: RequestProfile | None = None,
        counter: RequestCounter | None = None,
        tokenizer: str | os.PathLike[str] | None = None,
    ) -> Session:
        """Opens (or continues) the session stored in ``workspace``: a workspace directory,
        or a ``postgresql://`` URL with ``conversation=`` naming the conversation (and
        optionally ``cursor_key=``), as :meth:`History.open` takes them — every host
        that opens the same conversation continues the same session, its memory files
        included (kept in the same database). ``database=`` (a
        :class:`~ctxbudget.Database` the host opened with its pool settings) with
        ``conversation=`` takes the place of the URL.

        Token-budget mode is active unless ``settings`` say otherwise (its effective
        strategy). ``threshold`` defaults to the settings' value for ``model`` (0.7).

        ``tools`` are the host's own tool definitions (neutral ``{"name",
        "description", "parameters"}``, or an OpenAI or Anthropic definition): every
        :class:`Turn` advertises them beside ctxbudget's, and the budget counts them.
        ``encoding`` (a name such as ``"o200k_base"`` or an :class:`Encoding`) counts
        for any model name — a local model needs it and ``context_window``; without it
        the model's tokenizer is looked up (:class:`~ctxbudget.UnknownModelError` if
        there is none). ``tokenizer`` counts with an open-weight model's own tokenizer
        instead, read from this machine's disk (never downloaded): a ``tokenizer.json``
        or ``tekken.json`` file, the model's directory, or a directory of model
        directories where the one named like ``model`` is found
        (``model="ollama/llama3.1:8b"`` finds ``Llama-3.1-8B-Instruct``); see
        :meth:`Encoding.from_dir`. ``open_calls`` says what :meth:`prepare` does with tool calls
        that already had no result when the session opened (a process stopped between
        :meth:`add_assistant` and :meth:`add_tool_results`): ``"interrupt"`` records
        :data:`INTERRUPTED_OUTPUT` for each, so call/result pairs stay whole; ``"wait"``
        returns ``pause`` while any call of the window has no result (another worker is
        still running it). Calls made while the session runs are the host's to answer.
        ``profile`` says how the provider renders requests, and so how they count
        (:data:`~ctxbudget.tokens.RequestProfile`; SPEC §1): by default
        ``chat_template`` when the tokenizer came with the model's chat template, else
        the model's (:func:`~ctxbudget.tokens.profile_for`) — pass
        ``"openai_responses"`` for a host on OpenAI's Responses API.
        ``counter`` plugs in a provider's count endpoint as an exact source
        (:class:`~ctxbudget.RequestCounter`, e.g.
        :func:`ctxbudget.counters.anthropic_counter`): each request is counted by it
        once, and a failure falls back to the estimate with an event.
        """
        if not isinstance(model, str):
            raise TypeError(f"model must be str, got {type(model).__name__}")
        window = context_window if context_window is not None else context_window_for(model)
        if settings is not None and threshold is None:
            threshold = settings.threshold_for(model)
        mode_active = settings is None or settings.effective_strategy is Strategy.TOKEN_BUDGET
        target: str | os.PathLike[str] | Database
        if database is not None and workspace is None:
            target = database
        elif workspace is not None and database is None:
            target = workspace
        else:
            raise InvalidArgumentError(
                "Session.open needs a workspace (a directory or a postgresql:// URL) or "
                "database= (a ctxbudget.Database), not both"
            )
        return cls(
            History.open(
                target,
                conversation=conversation,
                cursor_key=cursor_key,
                durability=durability,
            ),
            model=model,
            encoding=encoding_for(model, encoding, window, tokenizer),
            budget=Budget(window, 0.7 if threshold is None else threshold, output_reserve),
            mode_active=mode_active,
            tool_policy=tool_policy if tool_policy is not None else ToolPolicy.preset("exec"),
            system=system,
            prompts=prompts,
            read_only=read_only,
            tools=tools,
            open_calls=open_calls,
            profile=profile,
            counter=counter,
        )

    # ----- the window, read back from the transcript ---------------------------------

    def _sync(self, full: bool = False) -> None:
        """Brings the window up to date: the core's fold reads only the rows appended
        since it last looked (by this session or any other writer) and the accounting
        counts only those, so a step costs O(new rows). ``full`` starts over from the
        current window. The caller holds the session (every caller is a locked method)."""
        state = self._state
        if full:
            state.fold = WindowFold(self.history)
            state.tokens = WindowTokens(
                self.encoding, mode_active=self.mode_active, profile=self.profile
            )
        change = state.read()
        if change.read:
            self._noted(change)

    def _append(
        self, rows: Sequence[Mapping[str, Any]], if_last_seq: int | None = None
    ) -> AppendResult:
        """Appends ``rows`` as one batch (conditional on ``if_last_seq`` when given) and
        brings the window up to date, this batch included, in one store call: the write
        and the read of what it wrote are one trip to the store (one I/O-pool job for an
        :class:`~ctxbudget.AsyncSession`), not two."""
        appended, change = self._state.append(rows, if_last_seq)
        self._noted(change)
        return appended

    def _noted(self, change: WindowChange) -> None:
        """What the session keeps beside the state after a read: the view is stale, and
        a new window's request overhead is recorded."""
        if change.read:
            self._view = None
            if change.reset and self._overhead_window is not None:
                self._record_overhead()

    def _until_written(
        self,
        attempt: Callable[[int], _T],
        *,
        read: Callable[[], None] | None = None,
        read_first: bool = True,
        retry: bool = True,
        on_conflict: Callable[[], None] | None = None,
    ) -> _T:
        """Runs ``attempt(n)`` on the window as read now until its conditional write
        lands: a :class:`~ctxbudget.ConflictError` means another writer appended
        first, so the session reads their rows (``read``, by default the window) and
        tries again, at most :data:`_MAX_RESYNCS` times (``retry=False``: the conflict
        is raised). ``read_first=False`` trusts the window as last read for the first
        attempt; ``on_conflict`` runs before each retry."""
        reread = self._sync if read is None else read
        for n in range(_MAX_RESYNCS + 1):
            if n or read_first:
                reread()
            try:
                return attempt(n)
            except ConflictError:
                if not retry or n == _MAX_RESYNCS:
                    raise
                if on_conflict is not None:
                    on_conflict()
        raise AssertionError("unreachable")  # pragma: no cover

    def _record_overhead(self, *, with_budget: bool = False) -> None:
        """Keeps the request overhead (frame, system text, tool schemas) this window
        counts in the workspace's budget record, for ``ctxbudget plot``; ``with_budget``
        (on open) records the session's budget in the same write."""
        fold, requests = self._state.fold, self._state.requests
        self._overhead_window = fold.window_id
        tokens = requests.overhead(requests.system(self, fold))
        if with_budget:
            record_session_budget(self, tokens)
        else:
            record_request_overhead(self.history, fold.window_id, tokens)

    @_locked
    def view(self, *, refresh: bool = False) -> WindowView:
        """A read-only snapshot of the current window as this session has read it (with
        ``refresh=True``, after reading other writers' new rows): its visible rows,
        claims, open calls, floor and the next request's tokens. Integrations and the
        plot read the window here, never the session's private state."""
        if refresh:
            self._sync()
        tokens = self._projected()  # hooks may change the system text between calls
        if self._view is None:
            self._view = self._state.fold.view(tokens)
        elif self._view.tokens != tokens:
            self._view = replace(self._view, tokens=tokens)
        return self._view

    @property
    def window_id(self) -> str:
        """The current window."""
        return self._state.fold.window_id

    @property
    def previous_window_id(self) -> str | None:
        """The window before the current one, from its boundary row."""
        return self._state.fold.previous_window_id

    @property
    @_locked_brief
    def settled(self) -> bool:
        """True when every tool call of the window has its result."""
        return not self._state.fold.open_calls

    @property
    @_locked_brief
    def open_calls(self) -> list[OpenCall]:
        """The tool calls of the current window that have no result yet, oldest first
        (as of the rows this session has read; :meth:`refresh` reads new ones)."""
        return list(self._state.fold.open_calls)

    def _recover(self) -> None:
        """Runs (under the lock) before the next call after an awaited call that held
        the session was abandoned halfway (its event loop was closed while it waited for
        I/O): the window is read again from the transcript, which holds whatever that
        call wrote (see ``lock.py``)."""
        self._state.sent = None
        self._view = None
        self._sync(full=True)

    @_locked
    def refresh(self) -> None:
        """Reads rows other writers appended since this session last looked."""
        self._sync()

    def _inputs(self) -> Inputs:
        """What a decision takes besides the window state, as set now (built as a
        plain tuple: the per-step path, and a NamedTuple's __new__ is a Python
        function)."""
        return _new_tuple(
            Inputs,
            (
                self.budget,
                self.prompts,
                self._toolset.capabilities,
                self.model,
                self.system_prompt,
                self.mode_active,
                self._open_call_policy,
                self._hooks,
            ),
        )

    # ----- what the host sends besides the window ------------------------------------

    @_locked
    def set_request(
        self,
        *,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        own_tools: Collection[str] | None = None,
    ) -> None:
        """Replaces what the host sends besides the window, as ``open(system=,
        tools=)`` set it: ``system`` is the host's system text (ctxbudget's window
        addition follows it), ``tools`` the host's tool definitions (checked as
        :meth:`open` checks them), ``own_tools`` the names of ctxbudget's own tools the
        requests offer (by default all of :attr:`own_tools`; a host that does not offer
        them names fewer, so they are not counted). ``None`` leaves that part as it is;
        nothing changes if any part is refused. From the next :meth:`prepare` on, every
        :class:`Turn` sends and counts them; a change is recorded as the window's request
        overhead."""
        if system is not None and not isinstance(system, str):
            raise TypeError(f"system must be str or None, got {type(system).__name__}")
        host_tools = None if tools is None else _host_tools(tools)
        if own_tools is not None:
            if isinstance(own_tools, (str, bytes)):
                raise TypeError("own_tools must be a collection of tool names, not a string")
            known = {t["name"] for t in self._state.requests.own_tools()}
            unknown = sorted(set(own_tools) - known)
            if unknown:
                raise InvalidArgumentError(
                    f"own_tools names tools this session does not offer: {unknown}; "
                    f"choose from {sorted(known)}"
                )
        changed = system is not None and system != self.system_prompt
        if system is not None:
            self.system_prompt = system
        if host_tools is not None:
            changed = self._state.requests.set_host_tools(host_tools) or changed
        if own_tools is not None:
            changed = self._state.requests.set_offered(own_tools) or changed
        if changed:
            self._record_overhead()

    # ----- request hooks --------------------------------------------------------------

    @_locked_brief
    def register_hook(self, fn: Callable[..., Any], *, context_only: bool) -> RequestHook:
        """Registers a request hook; it applies from the next :meth:`prepare` on."""
        hook = RequestHook(fn, bool(context_only))
        # A new tuple, never changed in place: a call in flight keeps the one it read.
        self._hooks = (*self._hooks, hook)
        return hook

    @_locked_brief
    def unregister_hook(self, hook: RequestHook) -> None:
        """Removes a hook (later requests only)."""
        self._hooks = tuple(h for h in self._hooks if h is not hook)

    # ----- recording ------------------------------------------------------------------

    @_locked
    def add_user(self, content: str | Sequence[Mapping[str, Any]]) -> str:
        """Records a user message (durably); returns its item ID."""
        return str(self.append_turn([make.user_row(content)])[-1])

    @_locked
    def append_turn(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """Appends ``rows`` as one batch and returns their seqs. If they start a new turn
        (they hold a user message) while calls left open by a stopped process are still
        unanswered, those calls are resolved first, in the same batch, under the default
        ``open_calls="interrupt"``: each gets its interrupted result right after it,
        before the new message, so the provider never sees a call, a user message and
        then the call's result. Calls the batch answers itself, and calls made while this
        session runs, are left to the host. Assistant messages in the batch answer the
        request :meth:`prepare` last sent and carry its size (``meta.request_tokens``)."""
        stamped = self._stamped(rows)
        # First on the window as last read, conditional on it: when no other writer
        # appended since (the common case) the write is the step's only trip to the
        # store, not a read and a write; when one did, nothing is written, and the
        # retries read their rows and append on the window as read then.
        first_condition = self._state.fold.last_seq
        return self._until_written(
            lambda n: self._append_turn(stamped, None if n else first_condition),
            read_first=False,
        )

    def _append_turn(self, rows: Sequence[Mapping[str, Any]], if_last_seq: int | None) -> list[int]:
        """One attempt of :meth:`append_turn` on the window as last read (conditional on
        ``if_last_seq``, or on the window when calls must be resolved first)."""
        resolve = []
        fold = self._state.fold
        if self._open_call_policy == "interrupt":
            resolve = make.calls_a_turn_interrupts(rows, fold, self._state.left_open)
        if resolve:
            condition = fold.last_seq if if_last_seq is None else if_last_seq
            r = self._append([*steps.interrupted_rows(resolve), *rows], if_last_seq=condition)
        else:
            r = self._append(list(rows), if_last_seq=if_last_seq)
        return list(range(r.last_seq - len(rows) + 1, r.last_seq + 1))

    def add_assistant(
        self,
        text: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] = (),
        *,
        usage: Usage | Mapping[str, Any] | object | None = None,
    ) -> str:
        """Records the model's reply: text and/or tool calls (``id``, ``name``,
        ``arguments``). ``usage`` is what the provider reported for the request
        (:class:`~ctxbudget.Usage`, or the provider's own usage object or dict, read by
        :func:`~ctxbudget.usage_of`): it is recorded with the reply, bound to the
        request :meth:`prepare` last sent, and the next request's count starts from
        it (SPEC §1, usage anchoring)."""
        return self._add_assistant(text, tool_calls, None, usage_of(usage))

    @_locked
    def _add_assistant(
        self,
        text: str | None,
        tool_calls: Sequence[Mapping[str, Any]],
        meta: Mapping[str, Any] | None,
        usage: Usage | None = None,
    ) -> str:
        rows = self._stamped([make.assistant_row(text, tool_calls, dict(meta or {}))], usage)
        r = self._append(rows)
        return str(r.first_seq)

    @_locked_brief
    def record_usage(self, usage: Usage | Mapping[str, Any] | object) -> bool:
        """Notes what the provider reported for the request :meth:`prepare` last sent,
        for integrations that see the usage before the reply's rows are written (the
        Agents SDK's ``on_llm_end``): the next reply recorded carries it. ``False``
        when no request is waiting for its reply."""
        found = usage_of(usage)
        state = self._state
        if found is None or state.sent is None:
            return False
        state.sent = state.sent._replace(usage=found)
        return True

    def _stamped(
        self, rows: Sequence[Mapping[str, Any]], usage: Usage | None = None
    ) -> list[Mapping[str, Any]]:
        """``rows`` with the request :meth:`prepare` last sent stamped on their
        assistant messages: its size (``meta.request_tokens``, what ``ctxbudget plot``
        draws: measured once, never recounted) on each, and on the first what binds
        the provider's figure to that request (``meta.request``) and the figure itself
        (``meta.usage``) — only in the window it was sent in, and only once. Without a
        request to bind to, ``usage`` is still recorded."""
        replies = [
            n
            for n, row in enumerate(rows)
            if row.get("kind") == "message"
            and row.get("role") == "assistant"
            and isinstance(row.get("meta") or {}, Mapping)
        ]
        if not replies:
            return list(rows)
        state = self._state
        sent, state.sent = state.sent, None
        out = list(rows)
        if sent is None or sent.window != state.fold.window_id:
            if usage is not None:
                meta = dict(out[replies[0]].get("meta") or {})
                meta["usage"] = usage.to_meta()
                out[replies[0]] = {**out[replies[0]], "meta": meta}
            return out
        stamp = sent.meta(usage)
        for k, n in enumerate(replies):
            meta = dict(out[n].get("meta") or {})
            if k == 0:
                meta.update(stamp)
            else:
                meta["request_tokens"] = stamp["request_tokens"]
            out[n] = {**out[n], "meta": meta}
        return out

    def add_assistant_from_openai(
        self, message: Any, *, usage: Usage | Mapping[str, Any] | object | None = None
    ) -> str:
        """Records an OpenAI ``ChatCompletionMessage`` (or its dict), tool calls included;
        ``usage`` is the completion's (``completion.usage``: its ``prompt_tokens``). A
        Responses API reply goes to :meth:`add_assistant_from_openai_responses`."""
        text, calls = providers.from_openai_message(message)
        return self.add_assistant(text, calls, usage=usage)

    def add_assistant_from_openai_responses(
        self, response: Any, *, usage: Usage | Mapping[str, Any] | object | None = None
    ) -> str:
        """Records an OpenAI Responses API reply (a ``Response``, its dict or its
        ``output`` list): output text and refusals as text, ``function_call`` items as
        tool calls (keyed by ``call_id``), and ``reasoning`` items kept whole so that
        :meth:`Turn.to_openai_responses` sends them back. Any other output item is an
        :class:`~ctxbudget.InvalidArgumentError` naming it. The reply's own usage
        (``usage.input_tokens``) is recorded unless ``usage`` is given."""
        reply = providers.from_openai_response(response)
        meta: dict[str, Any] = {}
        if reply.reasoning:
            meta["reasoning"] = reply.reasoning
        if reply.refusal:
            meta["refusal"] = True
        found = usage_of(usage) if usage is not None else _reply_usage(response)
        return self._add_assistant(reply.text, reply.tool_calls, meta, found)

    def add_assistant_from_litellm(
        self, response: Any, *, usage: Usage | Mapping[str, Any] | object | None = None
    ) -> str:
        """Records a LiteLLM ``ModelResponse`` of ``litellm.completion`` (or its dict, or
        its ``choices[0].message``): OpenAI Chat-shaped text and tool calls, with the
        response's usage (``usage.prompt_tokens``) unless ``usage`` is given. A response
        with several choices is an :class:`~ctxbudget.InvalidArgumentError` (record the
        one you continue with: pass its message)."""
        if usage is None:
            usage = providers.get_field(response, "usage")
        choices = providers.get_field(response, "choices")
        if choices is not None:
            if len(choices) != 1:
                raise InvalidArgumentError(
                    f"this LiteLLM response has {len(choices)} choices; pass the message of "
                    "the one the conversation continues with (response.choices[i].message)"
                )
            response = providers.get_field(choices[0], "message")
        return self.add_assistant_from_openai(response, usage=usage)

    def add_assistant_from_anthropic(
        self, message: Any, *, usage: Usage | Mapping[str, Any] | object | None = None
    ) -> str:
        """Records an Anthropic ``Message`` (or its dict), tool uses included, with its
        usage (``input_tokens`` plus the cache writes and reads) unless ``usage`` is
        given."""
        text, calls = providers.from_anthropic_message(message)
        found = usage_of(usage) if usage is not None else _reply_usage(message)
        return self._add_assistant(text, calls, None, found)

    @_locked
    def run_tool(self, name: str, arguments: Mapping[str, Any] | str | None) -> dict[str, Any]:
        """Executes a ctxbudget-owned tool (``session_history``, ``memory``,
        ``new_context``) and returns its JSON result. Never raises: a store that cannot
        be reached, is locked past its wait bound or is damaged gives ``ok: false`` with
        the code ``history_unavailable``, as ``session_history`` reports it."""
        return self._toolset.run(name, arguments, window_state=self._new_context_state)

    def _new_context_state(self) -> tuple[str, bool]:
        """The window's ID and whether it already scheduled ``new_context``: the only
        tool that answers from the window reads its new rows first."""
        self._sync()
        fold = self._state.fold
        return fold.window_id, fold.new_context_scheduled

    @_locked
    def add_tool_results(self, results: Sequence[Mapping[str, Any]]) -> None:
        """Records tool results (``call_id``, ``name``, ``output``); settles the step.

        ``output`` is sent as given: a string unchanged, anything else as JSON that
        keeps non-ASCII characters. A result for a call that already has one in this
        window (e.g. recorded as interrupted) is an
        :class:`~ctxbudget.InvalidArgumentError` and nothing is written; the check and
        the write are one conditional append, so it holds against other writers too."""

        def attempt(n: int) -> None:
            try:
                rows = make.result_rows(results, self._state.fold)
            except InvalidArgumentError:
                if n:
                    raise
                self._sync()  # refused on the window as last read: judge the current one
                rows = make.result_rows(results, self._state.fold)
            if rows:
                self._append(rows, if_last_seq=self._state.fold.last_seq)

        # The write is conditional on the rows the results were checked against, so the
        # first attempt trusts the window as last read (the write that read it brought
        # it up to date); another writer's rows make it conflict, and the next attempt
        # reads them first.
        self._until_written(attempt, read_first=False)

    @_locked
    def retract(
        self,
        seq: int,
        *,
        replace_with: Sequence[Mapping[str, Any]] = (),
        if_last_seq: int | None = None,
    ) -> list[int]:
        """Hides row ``seq`` of the current window from every later request (a
        retraction row; nothing is rewritten, and ``session_history`` still finds it),
        followed in the same batch by ``replace_with`` rows; returns the batch's seqs.

        Only a row a request carries (one of :meth:`view`'s rows) can be retracted, else
        an :class:`~ctxbudget.InvalidArgumentError` and nothing is written. Its tool
        calls are closed with it (no result is owed for a call the provider no longer
        sees). ``if_last_seq`` makes the write conditional on the store still ending
        there (:class:`~ctxbudget.ConflictError` otherwise); without it the session
        reads other writers' rows and checks ``seq`` again until its write lands."""
        if isinstance(seq, bool) or not isinstance(seq, int):
            raise InvalidArgumentError(f"retract() takes a row's seq (an int), got {seq!r}")

        def attempt(_: int) -> list[int]:
            fold = self._state.fold
            if seq not in {r.seq for r in fold.visible_rows()}:
                raise InvalidArgumentError(
                    f"row {seq} is not a row the current window ({fold.window_id}) "
                    "sends: only those can be retracted; nothing was written"
                )
            rows = [make.retraction_row(seq), *replace_with]
            r = self._append(
                rows, if_last_seq=fold.last_seq if if_last_seq is None else if_last_seq
            )
            return list(range(r.first_seq, r.last_seq + 1))

        return self._until_written(attempt, retry=if_last_seq is None)

    @_locked
    def sync_messages(self, messages: Sequence[KeyedMessage]) -> SyncReport:
        """Records the messages of a list the framework owns that are not recorded yet,
        by their keys (stable message IDs), as one batch; returns what it recorded.

        Call it with the whole list before every model call (or after a resume, from any
        process): which keys are recorded is read from the transcript, all windows
        included, so no message is ever recorded twice — not by a second process syncing
        the same list at the same moment (the write is conditional on the rows checked),
        nor after a crash, a rollover, a soft clear or a retraction. A message that
        changed under a key already recorded is a :class:`~ctxbudget.MessageChangedError`
        and nothing is written. A tool result whose call already has a result in the
        window is left out (see :attr:`SyncReport.unanswerable`). The batch is recorded
        as :meth:`append_turn` records one (calls left open by a stopped process are
        resolved before a new user message; replies carry the last request's size)."""
        if isinstance(messages, (str, bytes, Mapping)):
            raise InvalidArgumentError("sync_messages takes a sequence of KeyedMessage")
        state = self._state

        def read() -> None:
            self._keys.catch_up(self.history)
            self._sync()

        def attempt(_: int) -> SyncReport:
            fresh, report = keyed.plan(self._keys, state.fold, messages)
            if not fresh:
                return report
            sent = state.sent
            rows = self._stamped([keyed.stored_row(m) for m in fresh])
            try:
                seqs = self._append_turn(rows, if_last_seq=self._keys.last_seq)
            except ConflictError:
                state.sent = sent  # the reply is stamped when the batch lands
                raise
            return replace(report, recorded=dict(zip((m.key for m in fresh), seqs, strict=True)))

        return self._until_written(attempt, read=read)

    @_locked
    def interrupt_open_calls(self) -> list[OpenCall]:
        """Records :data:`INTERRUPTED_OUTPUT` as the result of every open call of the
        window (one batch, only if no other writer appended meanwhile; else re-read and
        retried) and returns the calls it resolved. :meth:`prepare` does this itself
        under the default ``open_calls="interrupt"``."""

        def attempt(_: int) -> list[OpenCall]:
            calls = list(self._state.fold.open_calls)
            if calls:
                self._apply_write(steps.Interrupt(tuple(calls)))
            return calls

        return self._until_written(attempt)

    # ----- counting and deciding ------------------------------------------------------

    def count_request(
        self, system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> int:
        """Tokens of a request: SPEC §1 framing (8 per message and tool schema, 1 per
        request), text counts, tool-call JSON, media allowances (the rule of
        :func:`ctxbudget.count_messages`)."""
        return self._state.requests.count(system, messages, tools)

    def _projected(self) -> int:
        """Tokens of the next request (anchored where an anchor holds); with an
        unrestricted hook registered, of the request before it."""
        state = self._state
        return state.counting.measure(state, self._inputs(), before_hooks=True).split.total

    @property
    def counter(self) -> RequestCounter | None:
        """The provider's count endpoint plugged in with ``open(counter=...)``, if any."""
        return self._state.counting.counter

    @_locked
    def pending_count(self) -> PendingCount | None:
        """The next request, when the count endpoint (:attr:`counter`) has not counted
        it yet: for a caller that counts it elsewhere (an
        :class:`~ctxbudget.AsyncSession` awaits the counter off the event loop), hands
        the result to :meth:`store_count`, then calls ``prepare(count=False)``."""
        self._sync()
        wanted = self._state.counting.wanted(self._state, self._inputs())
        return None if wanted is None else PendingCount(*wanted)

    @_locked_brief
    def store_count(self, pending: PendingCount, result: object) -> None:
        """Keeps what the count endpoint returned for ``pending`` (an exception, or
        anything but a count, falls back to the estimate with the event
        ``count_endpoint_failed:<reason>`` in the next turn)."""
        self._state.counting.store(pending.key, pending.profile, result)

    @_locked
    def prepare(self, *, count: bool = True) -> Turn:
        """Decides the next provider request (call before every request).

        Every write it makes is conditional on the rows it decided on; if another
        writer appended first it reads the new rows and decides again (``resync`` in
        the turn's events). With a count endpoint plugged in, a request it has not
        counted is counted on this thread; ``count=False`` leaves such a request to the
        estimate (for a caller that counted it first: :meth:`pending_count`)."""
        events: list[str] = []

        def resynced() -> None:
            events.append("resync")

        return self._until_written(
            lambda _: self._decide_and_write(events, count), on_conflict=resynced
        )

    def _decide_and_write(self, events: list[str], count: bool) -> Turn:
        """One attempt of :meth:`prepare` on the window as read: decides, applies each
        write the decision asks for and decides on from the state it leaves, until a
        turn (a :class:`~ctxbudget.ConflictError` from a write ends the attempt)."""
        state = self._state
        inputs = self._inputs()  # one snapshot of the hooks for this turn
        count_first = count and state.counting.counter is not None
        ask = count_first  # the endpoint counts each request once, failed or not
        progress = _STARTED
        while True:
            plan = decide(state, inputs, progress, count_first=ask)
            if plan.checked is not None:
                state.fresh_checked.add(plan.checked)
            write = plan.write
            if isinstance(write, CountFirst):
                state.counting.count(write.key, write.request, write.profile)
                ask = False
                continue
            if write is not None:
                events.extend(self._apply_write(write))
                ask = count_first  # the write changed the request
                if isinstance(write, steps.Rollover):
                    progress = progress._replace(rolled_over=(*progress.rolled_over, write.reason))
            if plan.turn is not None:
                return self._turn(plan, inputs, events, count_first)

    def _turn(self, plan: Plan, inputs: Inputs, events: list[str], count_first: bool) -> Turn:
        """The turn ``plan`` ends in, on the state its write left; a ``send`` is what
        the next reply answers."""
        assert plan.turn is not None
        state = self._state
        if count_first and plan.turn.measured is None:
            state.counting.call(state, inputs)  # the request changed with the write
        if isinstance(plan.write, steps.Quarantine):
            events = [*events, "quarantined"]
        counted = state.counting.drain() if state.counting.events else ()
        turn, sent = build_turn(state, inputs, plan.turn, [*events, *counted])
        state.sent = sent
        return turn

    def _apply_write(self, write: steps.Write) -> list[str]:
        """Applies one write of a decision (each conditional on the window as the
        decision read it) and reads the rows it wrote; returns its events."""
        fold = self._state.fold
        if isinstance(write, steps.Interrupt):
            self._append(write.rows(), if_last_seq=fold.last_seq)
            return [f"interrupted:{c.id}" for c in write.calls]
        if isinstance(write, steps.Advisory):
            self._append([write.row], if_last_seq=fold.last_seq)
            return [f"advisory:{write.row['meta']['stage']}"]
        if isinstance(write, steps.Quarantine):
            self.history.quarantine_seq(write.seq, if_last_seq=fold.last_seq)
            self._sync()
            return []
        window = fold.window_id
        self.history.rollover(
            rollover_id=f"{window}:{write.reason}:{uuid.uuid4().hex[:12]}",
            reason=write.reason,
            requested_by="model" if write.reason == "new_context" else None,
            lead_in=write.lead_in,
            trigger=write.trigger,
            figures=write.figures,
            if_last_seq=fold.last_seq,
        )
        self._sync()
        return [f"rollover:{window}"]

    @property
    def own_tools(self) -> list[dict[str, Any]]:
        """ctxbudget's tools this session offers (``{"name", "description",
        "parameters"}``, fresh copies; fixed for the session)."""
        return self._state.requests.own_tools()

    def __repr__(self) -> str:
        return f"Session({self.history.location!r}, window={self.window_id!r})"


def _reply_usage(reply: Any) -> Usage | None:
    """The usage a provider reply carries (``reply.usage``), if any."""
    if isinstance(reply, (list, tuple)):
        return None
    found = reply.get("usage") if isinstance(reply, Mapping) else getattr(reply, "usage", None)
    return usage_of(found) if found is not None else None
