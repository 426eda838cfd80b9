"""The async face of :class:`~ctxbudget.Session` for asyncio backends.

Each method runs the very same :class:`~ctxbudget.Session` method on the event loop's
own thread, and every blocking call it makes into the core — an append and its
``fdatasync``, a read of new rows, a ``session_history`` scan, a tokenizer load, the
``fsync`` of a memory-tool write — runs on the binding's I/O pool (plain Rust threads
that never take the GIL) while the loop serves other tasks (see ``_bridge.py``). No
Python worker thread is involved, so nothing competes with the loop for the GIL. There
is one implementation of the loop logic: this class only changes where the waiting
happens.

Calls of one event loop on an :class:`AsyncSession` apply in the order they were
awaited. The session's lock (``session/lock.py``) is the one owner of the session across
loops and threads: an ``AsyncSession`` may be awaited from several loops, in several
threads, at once or one ``asyncio.run`` after another, and a call that waits for the
lock suspends without blocking its loop. A call cancelled while its write is in flight
finishes first (the write is complete and later calls see it, or it never started) and
then raises ``CancelledError``; a call cancelled while waiting for its turn never runs.
A call whose event loop is closed while it waits for its I/O is abandoned: the session
is free at once, and reads its state again from the transcript (where that call's write,
if it had started, lands).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections import deque
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar, cast

from . import _ctxbudget, tokens
from .history import History
from .policy import Budget
from .session import KeyedMessage, OpenCall, RequestHook, Session, SyncReport, Turn
from .tokens import Encoding
from .window import WindowView

__all__ = ["AsyncSession", "count_messages", "io_threads", "load_encoding"]

if TYPE_CHECKING:
    import asyncio

_P = ParamSpec("_P")
_R = TypeVar("_R")

_bridged: Callable[..., Any] | None = None


async def _run(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    global _bridged
    if _bridged is None:
        # Imported on first use: `import ctxbudget` should not pay for asyncio and
        # greenlet (a third of its import time) in the many programs that never await it.
        from . import _bridge

        _bridged = _bridge.run
    return cast(_R, await _bridged(fn, *args, **kwargs))


def io_threads(max_threads: int | None = None) -> tuple[int, int]:
    """``(max_threads, running)`` of the I/O pool that runs the blocking work of async
    calls; ``max_threads`` sets the bound (default 4). Idle threads end after two
    seconds; after ``os.fork()`` the child starts its own pool on its first call."""
    if max_threads is not None and (isinstance(max_threads, bool) or max_threads < 1):
        raise ValueError(f"max_threads must be a positive int, got {max_threads!r}")
    bound, running, _ = _ctxbudget.offload_pool(max_threads)
    return bound, running


async def count_messages(
    messages: Iterable[Mapping[str, Any]],
    tools: Iterable[Mapping[str, Any]] | None = None,
    *,
    model: str | None = None,
    encoding: str | Encoding | None = None,
    profile: tokens.RequestProfile | None = None,
) -> int:
    """:func:`ctxbudget.count_messages`, awaited: a first load of the tokenizer runs on
    the I/O pool instead of blocking the event loop."""
    return await _run(
        tokens.count_messages, messages, tools, model=model, encoding=encoding, profile=profile
    )


async def load_encoding(name: str | None = None, *, model: str | None = None) -> Encoding:
    """:class:`Encoding` ``name`` (or :meth:`Encoding.for_model` ``model``), loaded on
    the I/O pool: the first load of an encoding in a process reads its rank table."""
    if (name is None) == (model is None):
        raise ValueError("load_encoding() needs exactly one of name or model=")
    if model is not None:
        return await _run(Encoding.for_model, model)
    assert name is not None
    return await _run(Encoding, name)


async def _count_off_loop(counter: Callable[[Any], Any], request: Any) -> object:
    """What a count endpoint returns for ``request`` (or the exception it raised),
    never run on the event loop: a coroutine function is awaited, a plain callable runs
    in a worker thread (and an awaitable it returns is awaited)."""
    import asyncio
    import inspect

    try:
        # An instance whose __call__ is a coroutine function counts as one too.
        call = type(counter).__call__ if not inspect.isfunction(counter) else counter
        if inspect.iscoroutinefunction(counter) or inspect.iscoroutinefunction(call):
            return await counter(request)
        result = await asyncio.to_thread(counter, request)
        if inspect.isawaitable(result):
            result = await result
        return result
    except Exception as exc:  # the host's endpoint: any failure falls back
        return exc


class _Turns:
    """The order of one event loop's calls on an :class:`AsyncSession`: first awaited,
    first run (a turn passes straight to the next waiter). Used on its loop's thread
    only; it holds its waiters' futures weakly, so nothing here keeps a loop alive."""

    __slots__ = ("__weakref__", "busy", "waiting")

    def __init__(self) -> None:
        self.busy = False
        self.waiting: deque[weakref.ref[asyncio.Future[None]]] = deque()

    async def take(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self.busy:
            self.busy = True
            return
        import asyncio

        turn: asyncio.Future[None] = loop.create_future()
        self.waiting.append(weakref.ref(turn))
        try:
            await turn
        except asyncio.CancelledError:
            if turn.done() and not turn.cancelled():
                self.give()  # handed the turn as it was cancelled: it passes it on
            raise

    def give(self) -> None:
        while self.waiting:
            turn = self.waiting.popleft()()
            if turn is not None and not turn.done():
                turn.set_result(None)
                return
        self.busy = False


class AsyncSession:
    """A :class:`~ctxbudget.Session` whose I/O and counting run off the event loop.

    Open it with ``await AsyncSession.open(workspace, **options)`` (a workspace directory
    or a ``postgresql://`` URL with ``conversation=``, and the options of
    :meth:`Session.open`), or wrap an existing session. It may be awaited from any
    event loop in any thread, also from several at once; each loop's calls apply in
    the order they were awaited. Other threads may call the wrapped :class:`Session`
    meanwhile (they wait for the session's lock); a loop's own thread must await
    instead: calling the :class:`Session` there while an awaited call holds it raises
    :class:`~ctxbudget.LoopAffinityError` (waiting would never end).

    .. code-block:: python

        s = await AsyncSession.open("ws", model="gpt-4o", tools=my_tools)
        await s.add_user("Fix the nightly export")
        turn = await s.prepare()
    """

    __slots__ = ("_session", "_turns", "_turns_lock")

    def __init__(self, session: Session) -> None:
        if not isinstance(session, Session):
            raise TypeError(f"AsyncSession wraps a Session, got {type(session).__name__}")
        self._session = session
        # The session's lock decides who holds the session (a thread or an awaited
        # call, of any loop); these order each loop's tasks, first awaited first run.
        self._turns: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Turns] = (
            weakref.WeakKeyDictionary()
        )
        self._turns_lock = threading.Lock()

    @classmethod
    async def open(
        cls, workspace: str | os.PathLike[str] | None = None, **options: Any
    ) -> AsyncSession:
        """Opens the session; its store, tokenizer and budget-record I/O run on the I/O
        pool. ``options`` are those of :meth:`Session.open` (``database=`` among them)."""
        return cls(await _run(Session.open, workspace, **options))

    async def _call(self, fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        import asyncio

        loop = asyncio.get_running_loop()
        with self._turns_lock:  # loops in other threads may add theirs meanwhile
            turns = self._turns.get(loop)
            if turns is None:
                turns = self._turns[loop] = _Turns()
        await turns.take(loop)
        try:
            return await _run(fn, *args, **kwargs)
        finally:
            turns.give()

    @property
    def session(self) -> Session:
        """The underlying synchronous session (for its attributes and tools)."""
        return self._session

    @property
    def history(self) -> History:
        """The transcript store."""
        return self._session.history

    @property
    def budget(self) -> Budget:
        """The token budget."""
        return self._session.budget

    @property
    def encoding(self) -> Encoding:
        """The encoding that counts the requests."""
        return self._session.encoding

    @property
    def window_id(self) -> str:
        """The current window."""
        return self._session.window_id

    @property
    def previous_window_id(self) -> str | None:
        """The window before the current one."""
        return self._session.previous_window_id

    @property
    def settled(self) -> bool:
        """True when every tool call of the window has its result."""
        return self._session.settled

    @property
    def open_calls(self) -> list[OpenCall]:
        """Tool calls of the current window without a result."""
        return self._session.open_calls

    def register_hook(self, fn: Callable[..., Any], *, context_only: bool) -> RequestHook:
        """See :meth:`Session.register_hook` (hooks run on the loop's thread: keep them
        quick)."""
        return self._session.register_hook(fn, context_only=context_only)

    def unregister_hook(self, hook: RequestHook) -> None:
        """See :meth:`Session.unregister_hook`."""
        self._session.unregister_hook(hook)

    async def set_request(
        self,
        *,
        system: str | None = None,
        tools: Sequence[Mapping[str, Any]] | None = None,
        own_tools: Collection[str] | None = None,
    ) -> None:
        """:meth:`Session.set_request`, awaited (a change is recorded in the workspace)."""
        await self._call(self._session.set_request, system=system, tools=tools, own_tools=own_tools)

    async def view(self, *, refresh: bool = False) -> WindowView:
        """See :meth:`Session.view` (with ``refresh=True`` the read of new rows runs on
        the I/O pool)."""
        return await self._call(self._session.view, refresh=refresh)

    async def append_turn(self, rows: Sequence[Mapping[str, Any]]) -> list[int]:
        """See :meth:`Session.append_turn`."""
        return await self._call(self._session.append_turn, rows)

    async def prepare(self) -> Turn:
        """See :meth:`Session.prepare`. With a count endpoint plugged in
        (``open(counter=...)``), the request is counted first, off the event loop: an
        awaitable the counter returns is awaited, a plain callable runs in a worker
        thread; a request that changes within the call (an advisory appended) counts
        from that result plus what was appended."""
        s = self._session
        counter = s._counting.counter
        if counter is not None:
            wanted = await self._call(s._count_wanted)
            if wanted is not None:
                key, request, profile = wanted
                result = await _count_off_loop(counter, request)
                await self._call(s._count_store, key, profile, result)
        return await self._call(s._prepare_counted)

    async def add_user(self, content: str | Sequence[Mapping[str, Any]]) -> str:
        """See :meth:`Session.add_user`."""
        return await self._call(self._session.add_user, content)

    async def add_assistant(
        self,
        text: str | None = None,
        tool_calls: Sequence[Mapping[str, Any]] = (),
        *,
        usage: object | None = None,
    ) -> str:
        """See :meth:`Session.add_assistant`."""
        return await self._call(self._session.add_assistant, text, tool_calls, usage=usage)

    async def add_assistant_from_openai(self, message: Any, *, usage: object | None = None) -> str:
        """See :meth:`Session.add_assistant_from_openai`."""
        return await self._call(self._session.add_assistant_from_openai, message, usage=usage)

    async def add_assistant_from_openai_responses(
        self, response: Any, *, usage: object | None = None
    ) -> str:
        """See :meth:`Session.add_assistant_from_openai_responses`."""
        return await self._call(
            self._session.add_assistant_from_openai_responses, response, usage=usage
        )

    async def add_assistant_from_litellm(
        self, response: Any, *, usage: object | None = None
    ) -> str:
        """See :meth:`Session.add_assistant_from_litellm`."""
        return await self._call(self._session.add_assistant_from_litellm, response, usage=usage)

    async def add_assistant_from_anthropic(
        self, message: Any, *, usage: object | None = None
    ) -> str:
        """See :meth:`Session.add_assistant_from_anthropic`."""
        return await self._call(self._session.add_assistant_from_anthropic, message, usage=usage)

    def record_usage(self, usage: object) -> bool:
        """See :meth:`Session.record_usage` (in memory only: nothing to await)."""
        return self._session.record_usage(usage)

    async def run_tool(
        self, name: str, arguments: Mapping[str, Any] | str | None
    ) -> dict[str, Any]:
        """See :meth:`Session.run_tool`."""
        return await self._call(self._session.run_tool, name, arguments)

    async def add_tool_results(self, results: Sequence[Mapping[str, Any]]) -> None:
        """See :meth:`Session.add_tool_results`."""
        await self._call(self._session.add_tool_results, results)

    async def retract(
        self,
        seq: int,
        *,
        replace_with: Sequence[Mapping[str, Any]] = (),
        if_last_seq: int | None = None,
    ) -> list[int]:
        """See :meth:`Session.retract`."""
        return await self._call(
            self._session.retract, seq, replace_with=replace_with, if_last_seq=if_last_seq
        )

    async def sync_messages(self, messages: Sequence[KeyedMessage]) -> SyncReport:
        """See :meth:`Session.sync_messages`."""
        return await self._call(self._session.sync_messages, messages)

    async def interrupt_open_calls(self) -> list[OpenCall]:
        """See :meth:`Session.interrupt_open_calls`."""
        return await self._call(self._session.interrupt_open_calls)

    async def refresh(self) -> None:
        """See :meth:`Session.refresh`."""
        await self._call(self._session.refresh)

    async def count_request(
        self,
        system: str,
        messages: Sequence[Mapping[str, Any]],
        tools: Sequence[Mapping[str, Any]],
    ) -> int:
        """See :meth:`Session.count_request`."""
        return await self._call(self._session.count_request, system, messages, tools)

    def __repr__(self) -> str:
        return f"Async{self._session!r}"
