"""The SDK's session protocol over a ctxbudget :class:`~ctxbudget.Session`."""

from __future__ import annotations

import copy
import json
import os
import weakref
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar, cast

from ... import _bridge
from ...aio import _prepare_in_call
from ...errors import ConflictError, CtxBudgetError, InvalidArgumentError
from ...history import Row, backend_of
from ...session import Session, Turn, WindowView
from ...session.lock import SessionLock, locked
from ...tokens import RequestProfile, profile_for
from .._common import NotSentError
from .items import (
    CALL_TO_OUTPUT,
    fingerprint,
    for_model,
    items_of_row,
    plain,
    rows_for,
    stored_item,
)
from .request import agent_tools, model_of

if TYPE_CHECKING:
    from agents import Agent, RunHooks
    from agents.memory import SessionSettings
    from agents.run_config import CallModelData, ModelInputData, RunConfig

    from ...database import Database

__all__ = ["AgentsSession", "NotSentError", "SessionClosedError"]

_T = TypeVar("_T")
_MAX_REREADS = 64
"""Times pop_item reads the window again after another writer appended first."""


class SessionClosedError(CtxBudgetError, RuntimeError):
    """The :class:`AgentsSession` was closed; open a new one to continue."""


@dataclass(frozen=True, slots=True)
class _Entry:
    """One item ``get_items`` shows: its row and its place in that row."""

    row: Row
    index: int
    item: dict[str, Any]

    @property
    def position(self) -> tuple[int, int]:
        return (self.row.seq, self.index)


@dataclass(slots=True)
class _RunMark:
    """What one run's SDK holds: the items it read with ``get_items`` at its start and
    every item stored for it since.

    The rule every write of a run obeys: the model-input filter stores only what the SDK
    sends beyond ``held`` — the items new in the run. A clear or a pop changes the store,
    never a mark: an item the run held before a clear or a pop is never written again
    (the clear stays a floor, a popped item stays popped), and items new in the run after
    it are stored once, as always.
    """

    floor: tuple[int, int] | None
    """Position of the first item a limited read returned; ``None`` for the window."""
    read_upto: int
    """Last seq of the store at the read: rows after it belong to the run."""
    held: list[dict[str, Any]]
    """The items the SDK holds, in order: those read, and those stored since."""
    pending: list[dict[str, Any]]
    """Items the model-input filter recorded that the SDK has not saved yet."""
    sent: list[dict[str, Any]] = field(default_factory=list)
    """What the SDK sent at the filter's last call (a run's input only grows)."""
    stored: list[dict[str, Any]] = field(default_factory=list)
    """Every item of the window at the read, ``held`` or not (a limited read)."""


_RUN_MARKS: ContextVar[weakref.WeakKeyDictionary[AgentsSession, _RunMark] | None] = ContextVar(
    "ctxbudget_agents_run_marks", default=None
)
"""Each session's run mark in the current task (see :meth:`AgentsSession._bind`)."""


def _sdk_profile(model: str) -> RequestProfile:
    """The request profile of an SDK run on ``model``: OpenAI models get the Responses
    API's (the SDK's default model class sends Responses items); any other keeps its
    own (harmony for gpt-oss, Anthropic's or Gemini's estimates)."""
    own = profile_for(model)
    return "openai_responses" if own == "openai_chat" else own


def _resolve_limit(limit: int | None, settings: SessionSettings | None) -> int | None:
    if limit is None and settings is not None:
        limit = settings.limit
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int)):
        raise TypeError(f"limit must be an int or None, got {type(limit).__name__}")
    # As the SDK's SQLite session: a negative limit means no limit.
    return None if limit is None or limit < 0 else limit


class AgentsSession:
    """The Agents SDK's session protocol (``get_items``, ``add_items``, ``pop_item``,
    ``clear_session``) over a ctxbudget :class:`~ctxbudget.Session`: the items are
    those of the active context window.

    ``session_settings`` work as in the SDK's sessions (``limit`` = the latest N items,
    with tool calls and their results kept together in what the model sees). Every
    method that reads or writes the store runs in a worker thread (an agent turn is
    mostly Python: on the loop's thread it held the loop three times as long), so the
    event loop is never blocked on it. Calls on one ``AgentsSession`` are serialized, and
    a call cancelled while it runs (or waits for the session) finishes, then raises
    ``CancelledError``.
    """

    session_id: str
    session_settings: SessionSettings | None

    def __init__(
        self,
        session: Session,
        session_id: str | None = None,
        *,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
    ) -> None:
        from agents.memory import SessionSettings
        from agents.memory.session_settings import coerce_session_settings

        self.session = session
        self.session_id = session_id or (
            session.history.conversation or str(session.history.workspace)
        )
        self.session_settings = (
            coerce_session_settings(cast(Any, session_settings))
            if session_settings is not None
            else SessionSettings()
        )
        self.last_turn: Turn | None = None
        # Owned by a thread or an awaited call (it suspends waiting, never blocks the loop).
        self._lock = SessionLock()
        self._closed = False
        # The mark of a run without session= (no get_items binds one).
        self._loose_mark: _RunMark | None = None
        # Items of each row (by seq), for the current window only.
        self._row_items: dict[int, list[dict[str, Any]]] = {}
        self._cache_window: str | None = session.window_id
        # The host's own system text (Session.open(system=)): sent after the agent's
        # instructions, unless it repeats them.
        self._host_system = session.system_prompt

    @classmethod
    def open(
        cls,
        session_id: str,
        workspace: str | os.PathLike[str] | None = None,
        *,
        database: Database | None = None,
        agent: Agent[Any] | None = None,
        model: str | None = None,
        conversation: str | None = None,
        session_settings: SessionSettings | Mapping[str, Any] | None = None,
        **options: Any,
    ) -> AgentsSession:
        """Opens (or continues) the ctxbudget session in ``workspace`` — the one-line
        swap for ``SQLiteSession(session_id, db_path)``. The budget is that of ``model``,
        or else of the model ``agent`` runs on (its ``model``, else the SDK's default
        model); with neither, an :class:`~ctxbudget.InvalidArgumentError` (there is no
        silent default). ``workspace`` is a workspace directory, or a ``postgresql://``
        URL (the swap for the SDK's ``SQLAlchemySession``): then the conversation is
        ``conversation``, by default ``session_id``, so every host serving that session
        id continues the same conversation; ``database=`` (a
        :class:`~ctxbudget.Database` the host opened) takes the URL's place. ``options`` go to
        :meth:`ctxbudget.Session.open` (``context_window``, ``cursor_key``, ...); the
        system text and tools sent are the running agent's own, set by the filter.
        Requests count by the ``openai_responses`` profile (the SDK sends Responses API
        items) unless ``profile=`` says otherwise — ``harmony`` is kept for gpt-oss."""
        if model is None:
            if agent is None:
                raise InvalidArgumentError(
                    "AgentsSession.open needs the model the budget is for: pass agent= "
                    "(its model is used) or model= (a name such as 'gpt-4o'; add "
                    "context_window= for a model ctxbudget does not know)"
                )
            model = model_of(agent)
        if (database is not None or backend_of(workspace) == "postgres") and conversation is None:
            conversation = session_id
        return cls(
            Session.open(
                workspace,
                database=database,
                conversation=conversation,
                model=model,
                **{"profile": _sdk_profile(model), **options},
            ),
            session_id,
            session_settings=session_settings,
        )

    # ----- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        """Closes the session: later calls raise :class:`SessionClosedError`. Every
        write was durable when its call returned, so there is nothing to flush."""
        self._closed = True  # a call in flight finishes; later ones see it

    async def __aenter__(self) -> AgentsSession:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __enter__(self) -> AgentsSession:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    async def _run(self, fn: Callable[..., _T], *args: Any) -> _T:
        """Runs ``fn`` under this session's lock in a worker thread (cancelled in
        flight, it finishes, then raises): an agent turn is mostly Python (items to
        rows, the window read back), which held the loop three times as long per turn
        when it ran there (benches/experiments/async_paths.md)."""
        return await _bridge.run_off_loop(self._locked, fn, *args)

    @locked
    def _locked(self, fn: Callable[..., _T], *args: Any) -> _T:
        if self._closed:
            raise SessionClosedError(f"AgentsSession {self.session_id!r} is closed; open a new one")
        return fn(*args)

    def _recover(self) -> None:
        """After a call of this session was abandoned halfway (its event loop closed):
        the items cached by row may be those of a half-done read."""
        self._row_items.clear()
        self._cache_window = None

    # ----- the mark of the run in progress --------------------------------------------

    def _bound(self) -> _RunMark | None:
        """This session's mark in the current task: the run's that read in it (the SDK
        calls the filter and add_items from the task that read, or tasks it started)."""
        marks = _RUN_MARKS.get()
        return marks.get(self) if marks is not None else None

    def _bind(self, mark: _RunMark) -> None:
        """Binds ``mark`` to the current task. The mapping is copied, never changed in
        place: another task's read (a child's included) never replaces a run's mark, and
        a session that is gone leaves no mark behind."""
        marks: weakref.WeakKeyDictionary[AgentsSession, _RunMark] = weakref.WeakKeyDictionary(
            _RUN_MARKS.get() or {}
        )
        marks[self] = mark
        _RUN_MARKS.set(marks)

    # ----- what get_items shows -------------------------------------------------------

    def _entries(self) -> tuple[WindowView, list[_Entry]]:
        """The session's window (read up to date) and its items, oldest first, each with
        its row: the items of the window's visible rows, as the session sends them."""
        view = self.session.view(refresh=True)
        if view.window_id != self._cache_window:
            self._row_items.clear()
            self._cache_window = view.window_id
        out: list[_Entry] = []
        for row in view.rows:
            items = self._row_items.get(row.seq)
            if items is None:
                items = items_of_row(row, self._continued(row))
                self._row_items[row.seq] = items
            out.extend(_Entry(row, n, item) for n, item in enumerate(items))
        return view, out

    def _continued(self, row: Row) -> dict[str, Any] | None:
        """The stored SDK item a continuation row repeats (it lies in an earlier window)."""
        target = row.meta.get("continues")
        if row.kind != "continuation" or not isinstance(target, int):
            return None
        for earlier in self.session.history.rows(since_seq=target):
            return stored_item(earlier) if earlier.seq == target else None
        return None

    def _call_names(self, items: Sequence[dict[str, Any]]) -> dict[str, str]:
        """Tool names of the window's calls, read only when ``items`` hold a result."""
        names: dict[str, str] = {}
        if not any(i.get("type") == "function_call_output" for i in items):
            return names
        for row in self.session.view().rows:
            for p in row.parts:
                if p.get("type") == "tool_call":
                    names[str(p.get("id"))] = str(p.get("name"))
        return names

    def _append_items(self, items: Sequence[dict[str, Any]], mark: _RunMark | None) -> None:
        rows = rows_for(items, self._call_names(items))
        if rows:
            self.session.append_turn(rows)
            if mark is not None:
                mark.held.extend(items)

    # ----- the session protocol -------------------------------------------------------

    def _get_items(self, limit: int | None) -> tuple[list[dict[str, Any]], _RunMark]:
        view, entries = self._entries()
        n = _resolve_limit(limit, self.session_settings)
        shown = entries if n is None else entries[max(len(entries) - n, 0) :] if n else []
        floor = None
        if n is not None:
            floor = shown[0].position if shown else (view.last_seq + 1, 0)
        mark = _RunMark(
            floor=floor,
            read_upto=view.last_seq,
            held=[e.item for e in shown],
            pending=[],
            stored=[e.item for e in entries],
        )
        return copy.deepcopy([e.item for e in shown]), mark

    async def get_items(self, limit: int | None = None) -> list[Any]:
        """Items of the active window, oldest first: the latest ``limit`` if given, else
        ``session_settings.limit``, else all (``0`` gives none, as in the SDK). The read
        starts a run: what it returns is what the run holds."""
        items, mark = await self._run(self._get_items, limit)
        self._bind(mark)
        return items

    def _add_items(self, items: Sequence[Any], mark: _RunMark | None) -> None:
        batch = [plain(i) for i in items]
        if mark is not None and mark.pending:
            # The model-input filter already recorded these (streamed runs save the turn
            # input after the first model call): store each item once — and not again
            # after a clear or a pop that came between.
            fresh = []
            for item in batch:
                if item in mark.pending:
                    mark.pending.remove(item)
                else:
                    fresh.append(item)
            batch = fresh
        self._append_items(batch, mark)

    async def add_items(self, items: list[Any]) -> None:
        """Appends the items as one durable batch."""
        await self._run(self._add_items, items, self._bound())

    def _pop_item(self) -> dict[str, Any] | None:
        for attempt in range(_MAX_REREADS + 1):
            view, entries = self._entries()
            if not entries:
                return None
            last = entries[-1]
            rest = [e.item for e in entries if e.row.seq == last.row.seq and e is not last]
            try:
                # Only if the window is still as read: another writer's new last item
                # is read again rather than a stale one retracted. A row of ctxbudget's
                # own that shows several items keeps the others.
                self.session.retract(
                    last.row.seq,
                    replace_with=rows_for(rest, self._call_names(rest)),
                    if_last_seq=view.last_seq,
                )
            except ConflictError:
                if attempt == _MAX_REREADS:
                    raise
                continue
            break
        # A run that holds the item keeps it in its mark: it is never written again.
        return copy.deepcopy(last.item)

    async def pop_item(self) -> Any | None:
        """Hides the last item ``get_items`` shows (a retraction row; nothing is
        rewritten) and returns it; ``None`` when there is none."""
        return await self._run(self._pop_item)

    def _clear(self) -> None:
        self.session.history.clear_soft()
        self.session.refresh()
        # Marks stay as they are: what a run held before the floor is never written again.

    async def clear_session(self) -> None:
        """A soft clear: a reset boundary, the privacy floor."""
        await self._run(self._clear)

    # ----- tools ----------------------------------------------------------------------

    def tools(self) -> list[Any]:
        """``session_history``, ``memory`` and ``new_context`` (as offered) as the SDK's
        function tools (run as the other calls: their I/O on the I/O pool)."""
        from agents import FunctionTool

        def make(definition: Mapping[str, Any]) -> Any:
            name = definition["name"]

            def call(args_json: str) -> str:
                result = self.session.run_tool(name, args_json if args_json else {})
                return json.dumps(result, ensure_ascii=False)

            async def invoke(_ctx: Any, args_json: str) -> str:
                return await self._run(call, args_json)

            return FunctionTool(
                name=name,
                description=definition["description"],
                params_json_schema=dict(definition["parameters"]),
                on_invoke_tool=invoke,
                strict_json_schema=False,
            )

        return [make(d) for d in self.session.own_tools]

    # ----- the model-input filter -----------------------------------------------------

    async def input_filter(self, data: CallModelData[Any]) -> ModelInputData:
        """``RunConfig.call_model_input_filter``: records what the SDK has not saved
        yet, sets what the agent sends besides its input (its instructions as the SDK
        resolved them, and every tool it offers: function tools, MCP tools, handoffs,
        hosted tools) as the session's request, runs ``prepare()`` — which counts all
        of it — and sends the active window (lead-in, advisories, ``[id: N]``
        suffixes) with the instructions, once, followed by ctxbudget's system text.
        Raises :class:`NotSentError` when ``prepare()`` does not send."""
        tools = await agent_tools(data.agent, data.context)
        return await self._run(self._filter, data, self._bound(), tools)

    def _filter(
        self, data: CallModelData[Any], mark: _RunMark | None, offered: list[dict[str, Any]]
    ) -> ModelInputData:
        from agents.run_config import ModelInputData

        s = self.session
        # The session's system text starts with the agent's instructions, so the request
        # counted is the request sent, and the instructions are sent once.
        instructions = data.model_data.instructions or ""
        host = self._host_system if self._host_system != instructions else ""
        # ctxbudget's own tools (AgentsSession.tools()) are counted as the session's own,
        # and only those the agent offers.
        own = {t["name"] for t in s.own_tools}
        s.set_request(
            system="\n\n".join(x for x in (instructions, host) if x),
            tools=[t for t in offered if t.get("name") not in own],
            own_tools=[str(t["name"]) for t in offered if t.get("name") in own],
        )
        sent = [plain(i) for i in data.model_data.input]
        if mark is None:
            # A run without session=: the SDK holds no history. Its input only grows, so
            # a call that does not continue the last one starts another run.
            mark = self._loose_mark
            if mark is None or sent[: len(mark.sent)] != mark.sent:
                mark = self._loose_mark = _RunMark(None, s.view(refresh=True).last_seq, [], [])
        mark.sent = sent
        unsaved = _unsaved(sent, mark.held, mark.stored)
        if unsaved:
            self._append_items(unsaved, mark)
            mark.pending.extend(unsaved)
        turn = _prepare_in_call(s)  # a count endpoint is called off the loop
        self.last_turn = turn
        if turn.status != "send":
            raise NotSentError(turn)
        system = turn.system or None
        # RunConfig(reasoning_item_id_policy="omit"): the SDK sent its reasoning without IDs.
        reasoning = [i for i in sent if i.get("type") == "reasoning"]
        omit_ids = bool(reasoning) and not any("id" in i for i in reasoning)
        items = self._model_input(turn, mark, omit_reasoning_ids=omit_ids)
        return ModelInputData(input=cast(Any, items), instructions=system)

    def _model_input(
        self, turn: Turn, mark: _RunMark, *, omit_reasoning_ids: bool
    ) -> list[dict[str, Any]]:
        _, entries = self._entries()
        if mark.floor is not None:
            floor = mark.floor
            entries = [e for e in entries if e.position >= floor]
        read_upto = mark.read_upto
        limited = mark.floor is not None
        kept = _drop_orphans(entries, lambda e: e.row.seq <= read_upto, outputs=limited)
        if omit_reasoning_ids:
            kept = [_Entry(e.row, e.index, _without_id(e.item)) for e in kept]
        if not self.session.mode_active:
            return [copy.deepcopy(for_model(e.item)) for e in kept]
        # User messages end with their item ID, as in Turn.messages.
        shown = {
            m["item_id"]: str(m["content"])
            for m in turn.messages
            if m.get("role") == "user" and m.get("item_id") and "kind" not in m
        }
        out = []
        for e in kept:
            item = copy.deepcopy(for_model(e.item))
            content = shown.get(e.row.id)
            if content is not None and e.row.kind == "message":
                text = "\n".join(
                    str(p.get("text", "")) for p in e.row.parts if p.get("type") == "text"
                )
                if content.startswith(text) and len(content) > len(text):
                    item = _with_suffix(item, content[len(text) :])
            out.append(item)
        return out

    def run_config(self, **kwargs: Any) -> RunConfig:
        """A ``RunConfig`` with the model-input filter installed."""
        from agents import RunConfig

        return RunConfig(call_model_input_filter=self.input_filter, **kwargs)

    def run_hooks(self, hooks: RunHooks[Any] | None = None) -> RunHooks[Any]:
        """``RunHooks`` for ``Runner.run(..., hooks=...)`` that record each model
        response's usage (``ModelResponse.usage.input_tokens``) with the reply it
        produced, bound to the request the filter prepared, so the next request's count
        starts from the provider's figure (SPEC §1, usage anchoring). ``hooks`` (the
        host's own) are called as well, after."""
        return _usage_hooks(self.session, hooks)

    def __repr__(self) -> str:
        return f"AgentsSession({self.session_id!r}, {self.session!r})"


def _usage_hooks(session: Session, inner: RunHooks[Any] | None) -> RunHooks[Any]:
    """A ``RunHooks`` whose ``on_llm_end`` notes the response's usage on ``session``
    (in memory, no I/O: the reply's rows carry it when they are written), then calls
    ``inner``'s hooks."""
    from agents import RunHooks

    class UsageHooks(RunHooks[Any]):
        async def on_llm_end(self, context: Any, agent: Any, response: Any) -> None:
            usage = getattr(response, "usage", None)
            if usage is not None and getattr(usage, "requests", 1) != 0:
                session.record_usage(usage)
            if inner is not None:
                await inner.on_llm_end(context, agent, response)

    hooks = UsageHooks()
    if inner is not None:
        # Every other hook is the host's own.
        for name in dir(RunHooks):
            if name.startswith("on_") and name != "on_llm_end":
                setattr(hooks, name, getattr(inner, name))
    return hooks


def _unsaved(
    sent: list[dict[str, Any]], held: list[dict[str, Any]], stored: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """What the SDK sends but has not saved: every item beyond those it holds.

    Usually the SDK sends what it holds, in order, then what it has not saved yet, which
    a comparison in order finds. When it sent something else (a session input callback
    reordered history, orphan tool calls were dropped, IDs were omitted, a resumed run
    sends the history of its ``RunState`` after reading only the tail), items are matched
    by content instead, repeats counted. An item no held one matches is new unless it
    comes before a held one and was already ``stored`` in the window when the run read
    it: history the SDK carries from before its read, which the new items of a run never
    precede.
    """
    n = len(held)
    if len(sent) >= n and all(a == b for a, b in zip(sent, held, strict=False)):
        return sent[n:]
    counts = Counter(fingerprint(i) for i in held)
    last_held = -1
    unmatched: list[tuple[int, str, dict[str, Any]]] = []
    for at, item in enumerate(sent):
        key = fingerprint(item)
        if counts[key] > 0:
            counts[key] -= 1
            last_held = at
        else:
            unmatched.append((at, key, item))
    earlier = Counter(fingerprint(i) for i in stored) - Counter(fingerprint(i) for i in held)
    unsaved = []
    for at, key, item in unmatched:
        if at < last_held and earlier[key] > 0:
            earlier[key] -= 1
        else:
            unsaved.append(item)
    return unsaved


def _without_id(item: dict[str, Any]) -> dict[str, Any]:
    if item.get("type") != "reasoning" or "id" not in item:
        return item
    return {k: v for k, v in item.items() if k != "id"}


def _with_suffix(item: dict[str, Any], suffix: str) -> dict[str, Any]:
    """The user item with ``suffix`` after its text; other content parts are kept."""
    content = item.get("content")
    if isinstance(content, str):
        item["content"] = content + suffix
        return item
    parts = list(content) if isinstance(content, list) else []
    texts = [
        n for n, p in enumerate(parts) if isinstance(p, dict) and p.get("type") == "input_text"
    ]
    if texts:
        last = dict(parts[texts[-1]])
        last["text"] = str(last.get("text", "")) + suffix
        parts[texts[-1]] = last
    else:
        parts.append({"type": "input_text", "text": suffix.lstrip()})
    item["content"] = parts
    return item


def _drop_orphans(
    entries: list[_Entry], stored: Callable[[_Entry], bool], *, outputs: bool
) -> list[_Entry]:
    """What the SDK does to stored history before a model call: tool calls without
    their result are dropped (with the reasoning just before them), and, after a limit
    cut, results whose call was cut. Items of the current run are left alone."""
    called: dict[str, set[str]] = {out: set() for out in CALL_TO_OUTPUT.values()}
    answered: dict[str, set[str]] = {out: set() for out in CALL_TO_OUTPUT.values()}
    for e in entries:
        kind = str(e.item.get("type"))
        call_id = e.item.get("call_id")
        if kind in CALL_TO_OUTPUT and isinstance(call_id, str):
            called[CALL_TO_OUTPUT[kind]].add(call_id)
        elif kind in answered and isinstance(call_id, str):
            answered[kind].add(call_id)
    dropped: set[int] = set()
    calls_dropped: set[int] = set()
    for n, e in enumerate(entries):
        if not stored(e):
            continue
        kind = str(e.item.get("type"))
        call_id = e.item.get("call_id")
        if kind in CALL_TO_OUTPUT and call_id not in answered[CALL_TO_OUTPUT[kind]]:
            dropped.add(n)
            calls_dropped.add(n)
        elif outputs and kind in called and call_id not in called[kind]:
            dropped.add(n)
    for n in sorted(calls_dropped):
        k = n - 1
        while k >= 0 and entries[k].item.get("type") == "reasoning" and stored(entries[k]):
            dropped.add(k)
            k -= 1
    return [e for n, e in enumerate(entries) if n not in dropped]
