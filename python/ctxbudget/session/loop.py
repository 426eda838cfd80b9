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
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import replace
from typing import Any

from .. import providers
from ..budget_record import record_request_overhead, record_session_budget
from ..errors import ConflictError, InvalidArgumentError
from ..history import AppendResult, Durability, History
from ..media import image_rule_for
from ..policy import Budget
from ..prompts import DEFAULT_PROMPTS, Capabilities, Prompts
from ..settings import Settings, Strategy
from ..tokens import Encoding
from ..tools import OWN_TOOL_NAMES, ToolPolicy, Toolset
from ..window import OpenCall, WindowChange, WindowFold, WindowView
from . import rows as make
from . import steps
from .accounting import Requests, WindowTokens
from .decide import decide
from .lock import SessionLock
from .lock import locked as _locked
from .lock import locked_brief as _locked_brief
from .types import RequestHook, Turn, context_window_for, encoding_for

__all__ = ["Session"]

_OPEN_CALL_POLICIES = ("interrupt", "wait")
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
        open_calls: str = "interrupt",
    ) -> None:
        if open_calls not in _OPEN_CALL_POLICIES:
            raise InvalidArgumentError(
                f"open_calls must be one of {list(_OPEN_CALL_POLICIES)}, got {open_calls!r}"
            )
        self._lock = SessionLock()
        self._open_call_policy = open_calls
        host_tools = _host_tools(tools)
        self.history = history
        self.model = model
        self.encoding = encoding
        self.budget = budget
        self.mode_active = mode_active
        self.tool_policy = tool_policy
        self.system_prompt = system
        self.prompts = prompts
        self._hooks: list[RequestHook] = []
        self._fresh_checked: set[int] = set()
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
        # The window: read once by the core's fold, counted once by the accounting.
        self._fold = WindowFold(history)
        self._images = image_rule_for(model)
        self._requests = Requests(
            encoding,
            self._toolset.capabilities,
            host_tools,
            self._toolset.definitions(),
            images=self._images,
        )
        self._window = WindowTokens(encoding, mode_active=mode_active, images=self._images)
        self._view: WindowView | None = None
        self._overhead_window: str | None = None
        self._sent: tuple[str, int] | None = None
        """Window and tokens of the last request ``prepare`` sent (the reply's stamp)."""
        self._sync()
        # Calls already open now were left by a process that stopped mid-step; calls made
        # while this session runs are the host's to answer.
        self._left_open = {c.id for c in self._fold.open_calls}
        self._record_overhead(with_budget=True)

    @classmethod
    def open(
        cls,
        workspace: str | os.PathLike[str],
        *,
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
        open_calls: str = "interrupt",
        tokenizer: str | os.PathLike[str] | None = None,
    ) -> Session:
        """Opens (or continues) the session stored in ``workspace``: a workspace directory,
        or a ``postgresql://`` URL with ``conversation=`` naming the conversation (and
        optionally ``cursor_key=``), as :meth:`History.open` takes them — every host
        that opens the same conversation continues the same session, its memory files
        included (kept in the same database).

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
        """
        if not isinstance(model, str):
            raise TypeError(f"model must be str, got {type(model).__name__}")
        window = context_window if context_window is not None else context_window_for(model)
        if settings is not None and threshold is None:
            threshold = settings.threshold_for(model)
        mode_active = settings is None or settings.effective_strategy is Strategy.TOKEN_BUDGET
        return cls(
            History.open(
                workspace, conversation=conversation, cursor_key=cursor_key, durability=durability
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
        )

    # ----- the window, read back from the transcript ---------------------------------

    @_locked
    def _sync(self, full: bool = False) -> None:
        """Brings the window up to date: the core's fold reads only the rows appended
        since it last looked (by this session or any other writer) and the accounting
        counts only those, so a step costs O(new rows). ``full`` starts over from the
        current window."""
        if full:
            self._fold = WindowFold(self.history)
            self._window = WindowTokens(
                self.encoding, mode_active=self.mode_active, images=self._images
            )
        self._apply(self._fold.advance())

    def _append(
        self, rows: Sequence[Mapping[str, Any]], if_last_seq: int | None = None
    ) -> AppendResult:
        """Appends ``rows`` as one batch (conditional on ``if_last_seq`` when given) and
        brings the window up to date, this batch included, in one store call: the write
        and the read of what it wrote are one trip to the store (one I/O-pool job for an
        :class:`~ctxbudget.AsyncSession`), not two."""
        appended, change = self._fold.append(rows, if_last_seq)
        self._apply(change)
        return appended

    def _apply(self, change: WindowChange) -> None:
        if change.read:
            self._window.apply(change, self._fold)
            self._view = None
            if change.reset and self._overhead_window is not None:
                self._record_overhead()

    def _record_overhead(self, *, with_budget: bool = False) -> None:
        """Keeps the request overhead (frame, system text, tool schemas) this window
        counts in the workspace's budget record, for ``ctxbudget plot``; ``with_budget``
        (on open) records the session's budget in the same write."""
        fold = self._fold
        self._overhead_window = fold.window_id
        tokens = self._requests.overhead(self._requests.system(self, fold))
        if with_budget:
            record_session_budget(self, tokens)
        else:
            record_request_overhead(self.history.workspace, fold.window_id, tokens)

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
            self._view = self._fold.view(tokens)
        elif self._view.tokens != tokens:
            self._view = replace(self._view, tokens=tokens)
        return self._view

    @property
    def window_id(self) -> str:
        """The current window."""
        return self._fold.window_id

    @property
    def previous_window_id(self) -> str | None:
        """The window before the current one, from its boundary row."""
        return self._fold.previous_window_id

    @property
    @_locked_brief
    def settled(self) -> bool:
        """True when every tool call of the window has its result."""
        return not self._fold.open_calls

    @property
    @_locked_brief
    def open_calls(self) -> list[OpenCall]:
        """The tool calls of the current window that have no result yet, oldest first
        (as of the rows this session has read; :meth:`refresh` reads new ones)."""
        return list(self._fold.open_calls)

    def _recover(self) -> None:
        """Runs (under the lock) before the next call after an awaited call that held
        the session was abandoned halfway (its event loop was closed while it waited for
        I/O): the window is read again from the transcript, which holds whatever that
        call wrote (see ``lock.py``)."""
        self._sent = None
        self._view = None
        self._sync(full=True)

    @_locked
    def refresh(self) -> None:
        """Reads rows other writers appended since this session last looked."""
        self._sync()

    def _capabilities(self) -> Capabilities:
        return self._toolset.capabilities

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
            known = {t["name"] for t in self._requests.own_tools()}
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
            changed = self._requests.set_host_tools(host_tools) or changed
        if own_tools is not None:
            changed = self._requests.set_offered(own_tools) or changed
        if changed:
            self._record_overhead()

    # ----- request hooks --------------------------------------------------------------

    @_locked_brief
    def register_hook(self, fn: Callable[..., Any], *, context_only: bool) -> RequestHook:
        """Registers a request hook; it applies from the next :meth:`prepare` on."""
        hook = RequestHook(fn, bool(context_only))
        # A new list, never changed in place: a call in flight keeps the one it read.
        self._hooks = [*self._hooks, hook]
        return hook

    @_locked_brief
    def unregister_hook(self, hook: RequestHook) -> None:
        """Removes a hook (later requests only)."""
        self._hooks = [h for h in self._hooks if h is not hook]

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
        rows = self._stamped(rows)
        for attempt in range(_MAX_RESYNCS + 1):
            self._sync()
            resolve = []
            if self._open_call_policy == "interrupt":
                resolve = make.calls_a_turn_interrupts(rows, self._fold, self._left_open)
            try:
                if resolve:
                    r = self._append(
                        [*steps.interrupted_rows(resolve), *rows],
                        if_last_seq=self._fold.last_seq,
                    )
                else:
                    r = self._append(list(rows))
            except ConflictError:
                if attempt == _MAX_RESYNCS:
                    raise
                continue
            return list(range(r.last_seq - len(rows) + 1, r.last_seq + 1))
        raise AssertionError("unreachable")  # pragma: no cover

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
        rows = self._stamped([make.assistant_row(text, tool_calls, dict(meta or {}))])
        r = self._append(rows)
        return str(r.first_seq)

    def _stamped(self, rows: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
        """``rows`` with the size of the request :meth:`prepare` last sent stamped on
        their assistant messages (``meta.request_tokens``, what ``ctxbudget plot``
        draws): what this session counted for the request the reply answers, measured
        once, never recounted; only in the window it was sent in, and only once."""
        replies = [
            n
            for n, row in enumerate(rows)
            if row.get("kind") == "message"
            and row.get("role") == "assistant"
            and isinstance(row.get("meta") or {}, Mapping)
        ]
        if not replies or self._sent is None:
            return list(rows)
        (window, tokens), self._sent = self._sent, None
        if window != self._fold.window_id:
            return list(rows)
        out = list(rows)
        for n in replies:
            meta = dict(out[n].get("meta") or {})
            meta["request_tokens"] = tokens
            out[n] = {**out[n], "meta": meta}
        return out

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
        ``new_context``) and returns its JSON result. Never raises: a store that cannot
        be reached, is locked past its wait bound or is damaged gives ``ok: false`` with
        the code ``history_unavailable``, as ``session_history`` reports it."""
        return self._toolset.run(name, arguments, window_state=self._new_context_state)

    def _new_context_state(self) -> tuple[str, bool]:
        """The window's ID and whether it already scheduled ``new_context``: the only
        tool that answers from the window reads its new rows first."""
        self._sync()
        return self._fold.window_id, self._fold.new_context_scheduled

    @_locked
    def add_tool_results(self, results: Sequence[Mapping[str, Any]]) -> None:
        """Records tool results (``call_id``, ``name``, ``output``); settles the step.

        ``output`` is sent as given: a string unchanged, anything else as JSON that
        keeps non-ASCII characters. A result for a call that already has one in this
        window (e.g. recorded as interrupted) is an
        :class:`~ctxbudget.InvalidArgumentError` and nothing is written; the check and
        the write are one conditional append, so it holds against other writers too."""
        for attempt in range(_MAX_RESYNCS + 1):
            # The write is conditional on the rows the results were checked against, so
            # the first attempt trusts the window as last read (the write that read it
            # brought it up to date); another writer's rows make it conflict, and the
            # next attempt reads them first.
            if attempt:
                self._sync()
            try:
                rows = make.result_rows(results, self._fold)
            except InvalidArgumentError:
                if attempt:
                    raise
                self._sync()  # refused on the window as last read: judge the current one
                rows = make.result_rows(results, self._fold)
            if not rows:
                return
            try:
                self._append(rows, if_last_seq=self._fold.last_seq)
            except ConflictError:
                if attempt == _MAX_RESYNCS:
                    raise
                continue
            return

    @_locked
    def interrupt_open_calls(self) -> list[OpenCall]:
        """Records :data:`INTERRUPTED_OUTPUT` as the result of every open call of the
        window (one batch, only if no other writer appended meanwhile; else re-read and
        retried) and returns the calls it resolved. :meth:`prepare` does this itself
        under the default ``open_calls="interrupt"``."""
        for attempt in range(_MAX_RESYNCS + 1):
            self._sync()
            try:
                return steps.interrupt(self, list(self._fold.open_calls))
            except ConflictError:
                if attempt == _MAX_RESYNCS:
                    raise
        return []  # pragma: no cover - the loop returns or raises

    # ----- counting and deciding ------------------------------------------------------

    def count_request(
        self, system: str, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> int:
        """Tokens of a request: SPEC §1 framing (8 per message and tool schema, 1 per
        request), text counts, tool-call JSON, media allowances (the rule of
        :func:`ctxbudget.count_messages`)."""
        return self._requests.count(system, messages, tools)

    def _projected(self) -> int:
        """Tokens of the next request before unrestricted hooks (a running sum)."""
        return self._requests.projected(self, self._fold, self._window, self._hooks)

    def _measure(self) -> tuple[dict[str, Any] | None, int]:
        return self._requests.measure(
            self, self._fold, self._window, self._hooks, self.count_request
        )

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
                return decide(self, events)
            except ConflictError:
                if attempt == _MAX_RESYNCS:
                    raise
                events.append("resync")
        raise AssertionError("unreachable")  # pragma: no cover

    @property
    def own_tools(self) -> list[dict[str, Any]]:
        """ctxbudget's tools this session offers (``{"name", "description",
        "parameters"}``, fresh copies; fixed for the session)."""
        return self._requests.own_tools()

    def __repr__(self) -> str:
        return f"Session({self.history.location!r}, window={self.window_id!r})"
