"""Runs synchronous ctxbudget code from a coroutine without blocking the event loop.

:func:`run` is shaped like SQLAlchemy's greenlet bridge: the awaiting task switches
into a new greenlet that runs the function (a :class:`~ctxbudget.Session` method, say)
on the loop's thread. Every blocking core call the function makes passes one chokepoint
in the binding (``offload::blocking``): there the work is queued to the binding's I/O
pool (Rust threads that never take the GIL) and the greenlet switches back to the task
with the job's ticket (:func:`_wait`). The task awaits a future for that ticket, so the
loop goes on. A finished job is announced on the loop's completion socket, which the
loop watches (``loop.add_reader``); the loop completes the job's future, the task wakes
and switches back into the greenlet, which takes the result where it stopped. No Python
thread other than the loop's runs, nothing competes with the loop for the GIL, and the
loop is held only for the Python code between two blocking calls.

A call that waits for a session's lock (``session/lock.py``) held by another thread,
task or loop suspends the same way, on a ticket that the lock's release posts to this
loop's completion socket. Each call is the lock's owner while it holds it, so the lock
knows which loop must resume it (and that a closed loop never will).

A call that is cancelled while its I/O is in flight finishes first (its write is either
complete, and later calls see it, or it never started) and then raises
``CancelledError``; one cancelled while it waits for a session's lock holding none stops
there (nothing done) and raises it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import weakref
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

import greenlet

from . import _ctxbudget
from .session import lock as _session_lock

__all__ = ["run"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Call:
    """One bridged call as the session locks see it (``session/lock.py``,
    :class:`AwaitedCall`): while it holds a lock and suspends, the lock knows which
    event loop must resume it, so a call whose loop was closed never keeps a session.

    It refers to neither its greenlet nor its task, and to its loop only weakly: a lock
    may keep a call after its loop was closed, and must not keep the loop with it."""

    __slots__ = ("cancelled", "holding", "loop", "lost", "parked", "thread")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = weakref.ref(loop)
        self.thread = threading.current_thread()
        """The thread its greenlet was made on (it can resume on no other)."""
        self.lost = False
        """It can never resume (its loop went on in another thread while it waited)."""
        self.holding = 0
        self.cancelled = False
        """Its task was cancelled: a wait for a session's lock (while it holds none)
        ends with ``CancelledError`` (nothing was done)."""
        self.parked: _Wake | None = None
        """What wakes it while it waits for a session's lock."""

    # ----- AwaitedCall, for session locks ----------------------------------------------

    def gone(self) -> bool:
        if self.lost or not self.thread.is_alive():
            return True
        loop = self.loop()
        return loop is None or loop.is_closed()

    def stranded_here(self, parks: bool) -> bool:
        loop = self.loop()
        if loop is None or loop.is_closed():
            return False
        if loop.is_running():
            # Only a thread that blocks the very loop that must resume this call waits
            # forever; a call of that loop parks, and the loop goes on.
            return not parks and asyncio._get_running_loop() is loop
        return self.thread is threading.current_thread()

    def wake_token(self) -> Callable[[], None]:
        loop = self.loop()
        bridge = _bridges.get(loop) if loop is not None else None
        if bridge is None:  # pragma: no cover - a running call's loop and bridge exist
            raise RuntimeError("ctxbudget's async bridge lost the loop of a running call")
        return _Wake(bridge.completions)

    def park(self, wake: Callable[[], None], poll: float | None) -> None:
        assert isinstance(wake, _Wake)
        self._stop_if_cancelled()
        timer = self._poll_timer(wake, poll)
        self.parked = wake
        try:
            _suspend(wake.ticket)
        finally:
            self.parked = None
            handle = timer() if timer is not None else None
            if handle is not None:
                handle.cancel()
        self._stop_if_cancelled()

    def _poll_timer(
        self, wake: _Wake, poll: float | None
    ) -> weakref.ref[asyncio.TimerHandle] | None:
        """Schedules ``wake`` in ``poll`` seconds. The handle is held weakly (the loop
        holds it while it is due): nothing in a parked call's frame may lead to its
        loop, or a closed loop would stay alive through its suspended greenlet."""
        loop = self.loop()
        if loop is None or poll is None:
            return None
        return weakref.ref(loop.call_later(poll, wake))

    def cancel(self) -> None:
        """Its task was cancelled: a wait for a session's lock ends (see ``cancelled``)."""
        self.cancelled = True
        wake = self.parked
        if wake is not None and not self.holding:
            wake()

    def _stop_if_cancelled(self) -> None:
        if self.cancelled and not self.holding:
            raise asyncio.CancelledError("cancelled while it waited for the session")


class _Wake:
    """Resumes a call parked on a session's lock (callable from any thread: it posts a
    ticket to the call's loop, as a finished job does)."""

    __slots__ = ("completions", "ticket")

    def __init__(self, completions: _ctxbudget.Completions) -> None:
        self.completions = completions
        self.ticket = completions.ticket()

    def __call__(self) -> None:
        self.completions.post(self.ticket)


class _Suspended:
    """What a bridged greenlet hands its task when it suspends: the ticket to wait for
    and the greenlet to switch back into (the call's own, or a helper greenlet that the
    called code made and switched to)."""

    __slots__ = ("resume", "ticket")

    def __init__(self, ticket: int, resume: greenlet.greenlet) -> None:
        self.ticket = ticket
        self.resume = resume


class _Raised:
    """A ``GreenletExit`` raised by the called function: a greenlet would return it as
    its result, so it is carried to the task in this and raised there."""

    __slots__ = ("error",)

    def __init__(self, error: greenlet.GreenletExit) -> None:
        self.error = error


class _Driver(threading.local):
    """The greenlet of the task that is switched into a bridged call on this thread
    right now (None between switches)."""

    task: greenlet.greenlet | None = None


_driver = _Driver()


def _suspend(ticket: int) -> None:
    """Switches back to the task that drives the current call; returns once the task
    saw ``ticket`` completed and switched back in."""
    task = _driver.task
    if task is None:  # pragma: no cover - the binding calls it inside bridged calls only
        raise RuntimeError("ctxbudget's async bridge was entered outside a bridged call")
    task.switch(_Suspended(ticket, greenlet.getcurrent()))


def _wait(job: int) -> None:
    """Called by the binding inside a bridged call after it queued ``job`` to the I/O
    pool: returns once the job is done (the loop ran other tasks meanwhile)."""
    _suspend(job)


# Once per process, under the import lock (so threads cannot race to it).
_ctxbudget._offload_register(_wait)


def _body(fn: Callable[[], Any]) -> Any:
    """What a bridged greenlet runs."""
    try:
        return fn()
    except greenlet.GreenletExit as exc:
        # Raised by the call, or thrown in as the greenlet is collected unfinished
        # (then nobody reads this).
        return _Raised(exc)


class _LoopBridge:
    """One event loop's completion socket and the futures its tasks await on it.

    The futures are held weakly: a future leads to its task and loop, and the bridges
    map keeps bridges alive as long as their loop, so a strong reference would keep a
    closed loop (and its suspended calls) forever."""

    __slots__ = ("__weakref__", "completions", "early", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.completions = _ctxbudget.Completions()
        self.waiting: dict[int, weakref.ref[asyncio.Future[None]]] = {}
        self.early: set[int] = set()
        """Tickets completed while their future was cancelled with its task (the task
        waits for them again, see :meth:`again`)."""
        loop.add_reader(self.completions.fileno(), self._ready)

    def expect(self, loop: asyncio.AbstractEventLoop, ticket: int) -> asyncio.Future[None]:
        """A future that the loop completes once ``ticket`` is."""
        future: asyncio.Future[None] = loop.create_future()
        self.waiting[ticket] = weakref.ref(future)
        return future

    def again(
        self, loop: asyncio.AbstractEventLoop, ticket: int, future: asyncio.Future[None]
    ) -> asyncio.Future[None]:
        """What a task whose wait for ``ticket`` was interrupted by its cancellation
        awaits instead: ``future`` if it was not cancelled with the task (it is done),
        else a new one (done if the ticket already was)."""
        if not future.cancelled():
            return future
        if ticket in self.early:
            self.early.discard(ticket)
            done: asyncio.Future[None] = loop.create_future()
            done.set_result(None)
            return done
        return self.expect(loop, ticket)

    def _ready(self) -> None:
        waiting = self.waiting
        for ticket in self.completions.drain():
            ref = waiting.pop(ticket, None)
            future = ref() if ref is not None else None
            if future is None:  # posted twice, or its task is gone
                continue
            if future.cancelled():
                self.early.add(ticket)
            elif not future.done():
                future.set_result(None)


_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBridge] = (
    weakref.WeakKeyDictionary()
)


def _bridge_for(loop: asyncio.AbstractEventLoop) -> _LoopBridge:
    bridge = _bridges.get(loop)
    if bridge is None:
        bridge = _bridges[loop] = _LoopBridge(loop)
    return bridge


_MOVED = (
    "the event loop moved to another thread while a ctxbudget call waited for its I/O; "
    "it cannot go on there (its write, if it had started, is in the store, and the "
    "session reads its state again)"
)


def _switch(
    completions: _ctxbudget.Completions,
    call: _Call,
    glet: greenlet.greenlet,
    target: greenlet.greenlet,
    *args: Any,
) -> Any:
    """Switches from the task into ``target`` (``glet``, the call's greenlet, or a
    helper greenlet of the call) until the call suspends or ends, with the loop's
    completions as the bridge of its blocking calls and ``call`` as the session locks'
    owner."""
    if call.thread is not threading.current_thread():
        call.lost = True  # so a session's lock it holds is free (see gone())
        raise RuntimeError(_MOVED)
    task = greenlet.getcurrent()
    if glet.parent is not task:  # the task runs in another greenlet than last time
        glet.parent = task  # where the call returns when it ends
    driver, owner = _driver, _session_lock.current
    previous_task, previous_call = driver.task, owner.call
    driver.task, owner.call = task, call
    try:
        return completions.resume(target, *args)
    finally:
        driver.task, owner.call = previous_task, previous_call


async def run(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Runs ``fn(*args, **kwargs)`` on this thread, in a copy of the awaiting task's
    context variables (as ``asyncio.to_thread`` does); its blocking core calls run on
    the I/O pool while the loop goes on. Exceptions propagate unchanged. Cancelling the
    awaiting task lets the call finish, then raises ``CancelledError``."""
    loop = asyncio.get_running_loop()
    bridge = _bridge_for(loop)
    completions = bridge.completions
    call = _Call(loop)
    context = contextvars.copy_context()
    glet = greenlet.greenlet(_body)
    cancelled = False
    try:
        outcome = _switch(completions, call, glet, glet, lambda: context.run(fn, *args, **kwargs))
        while isinstance(outcome, _Suspended):
            ticket = outcome.ticket
            future = bridge.expect(loop, ticket)
            while True:
                try:
                    await future
                    break
                except asyncio.CancelledError:
                    # The call goes on (its write completes or never starts): wait for
                    # it. One that waits for a session's lock holding none stops.
                    cancelled = True
                    call.cancel()
                    future = bridge.again(loop, ticket, future)
            outcome = _switch(completions, call, glet, outcome.resume)
    except BaseException as exc:
        if cancelled and not isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise asyncio.CancelledError from exc
        raise
    if not glet.dead:  # pragma: no cover - the called code switched here itself
        raise RuntimeError("a ctxbudget call switched to its task's greenlet directly")
    if cancelled:
        raise asyncio.CancelledError
    if isinstance(outcome, _Raised):
        raise outcome.error
    return cast(_R, outcome)
