"""Runs synchronous ctxbudget code on the event loop's thread without blocking the loop.

:func:`run` executes a function (a :class:`~ctxbudget.Session` method, say) in a worker
greenlet on the loop's own thread (workers are kept for later calls). Every blocking
core call it makes — an append and its ``fdatasync``, a read, a ``session_history``
scan, a tokenizer load — passes one chokepoint in the binding (``offload::blocking``):
inside such a greenlet the call is queued to the binding's I/O pool (plain Rust threads
that never take the GIL) and the greenlet suspends here, in :func:`_wait`. The loop
watches the pool's completion socket (``loop.add_reader``); when the job is done the
greenlet resumes where it stopped and the result becomes Python objects on the loop's
thread. No Python thread other than the loop's runs, so nothing competes with the loop
for the GIL.

A call that waits for a session's lock (``session/lock.py``) held by another thread or
loop suspends the same way, on a ticket that the lock's release posts to this loop's
completion queue; each call is the lock's owner while it holds it, so the lock knows
which loop must resume it (and that a closed loop never will).

A call that is cancelled while its I/O is in flight finishes first (its write is either
complete, and later calls see it, or it never started) and then raises
``CancelledError``; one cancelled before it started, or while it waits for a session's
lock holding none, stops there (nothing done) and raises it.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

import greenlet

from . import _ctxbudget
from .session import lock as _session_lock

__all__ = ["run"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Call:
    """One bridged call: what to run, its outcome once it ran, and the future its task
    awaits (a new one after the task is cancelled while the call still runs).

    It is also an owner of a session's lock (``session/lock.py``, :class:`AwaitedCall`):
    while it holds one and suspends, the lock knows which event loop must resume it, so
    that a call whose loop was closed never keeps a session.

    The future and the loop are held weakly: the future leads to its task and loop, and
    the bridges map keeps bridges (and their calls) alive, so a strong reference would
    keep a closed loop."""

    __slots__ = (
        "cancelled",
        "ctx",
        "done",
        "error",
        "fn",
        "holding",
        "loop",
        "lost",
        "parked",
        "result",
        "thread",
        "waiter",
    )

    def __init__(
        self,
        fn: Callable[[], Any],
        waiter: asyncio.Future[None],
        loop: asyncio.AbstractEventLoop,
    ) -> None:
        # The awaiting task's context variables, as asyncio.to_thread passes them.
        self.ctx = contextvars.copy_context()
        self.fn = fn
        self.waiter = weakref.ref(waiter)
        self.loop = weakref.ref(loop)
        self.thread = threading.current_thread()
        """The thread the call last ran on (its greenlet can resume on no other)."""
        self.lost = False
        """It can never resume (its loop moved to another thread while it waited)."""
        self.done = False
        self.error: BaseException | None = None
        self.result: Any = None
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
            _wait(wake.ticket)
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
        loop, or a closed loop would stay alive through the bridges map."""
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


class _Finished:
    """What a worker hands back when its call returned or raised (a job id otherwise)."""

    __slots__ = ()


_FINISHED = _Finished()


class _Worker(greenlet.greenlet):
    """A greenlet that runs bridged calls one after another: kept between calls, so a
    call does not pay for a new greenlet and its Python stack (an ``mmap`` and a
    ``munmap`` each). A blocking core call suspends it in :func:`_wait`."""

    __slots__ = ("inner", "next_call")

    def __init__(self) -> None:
        super().__init__(_serve)
        self.next_call: _Call | None = None
        """The call to run when next switched to with no job pending (handed over as
        an attribute: switch arguments of a greenlet's start live as long as it)."""
        self.inner: greenlet.greenlet | None = None
        """The greenlet of the call that waits for a job, when it is not the worker
        itself (one that the called code made and switched to): resumed instead."""


class _Running(threading.local):
    """What the bridge resumes on this thread right now (None between resumes)."""

    worker: _Worker | None = None
    target: greenlet.greenlet | None = None


_running = _Running()


def _suspend(to: greenlet.greenlet, value: object) -> None:
    """Switches to ``to`` (the bridge) with ``value`` and returns once the bridge
    resumes the current greenlet. Anything else that switches to it — a greenlet that
    an earlier call made (so its parent is this worker) ending after that call — is
    handed on to the bridge's side, as it would be had the worker ended: a kept worker
    must behave as the greenlet per call that it replaces."""
    while True:
        value = to.switch(value)
        if greenlet.getcurrent() is _running.target:
            return
        to = cast(greenlet.greenlet, greenlet.getcurrent().parent)


def _serve() -> None:
    while True:
        # Nothing is held across the switch below: an idle worker that its bridge drops
        # is freed at once (no reference cycle through its own frame).
        worker = cast(_Worker, greenlet.getcurrent())
        call = worker.next_call
        worker.next_call = None
        # Nor is the worker held while the call runs (and the call does not refer to
        # it): a bridge dropped with the call in flight frees (and so ends) the worker.
        del worker
        assert call is not None
        try:
            call.result = call.ctx.run(call.fn)
        except greenlet.GreenletExit as exc:
            # Raised by the call, or thrown in to discard the worker: either way the
            # worker ends (the bridge sees it dead) and the call raises it.
            call.error, call.done = exc, True
            raise
        except BaseException as exc:  # handed to the awaiting task, never swallowed
            call.error = exc
        call.done = True
        parent = greenlet.getcurrent().parent
        del call
        assert parent is not None
        _suspend(parent, _FINISHED)
        del parent


def _wait(job: int) -> None:
    """Called by the binding inside a bridged call after it queued ``job``: hands the
    job to the loop's bridge and returns once it is done."""
    worker = _running.worker
    if worker is None or worker.parent is None:  # pragma: no cover
        raise RuntimeError("ctxbudget's async bridge was entered outside a bridged call")
    current = greenlet.getcurrent()
    # A greenlet that the call itself switched to (its helper) waits as the call does.
    worker.inner = None if current is worker else current
    parent = worker.parent
    del worker, current
    _suspend(parent, job)


# Once per process, under the import lock (so threads cannot race to it).
_ctxbudget._offload_register(_wait)


_SLICE = 0.0002
"""Seconds of bridged work one turn of the event loop runs before it lets timers and
other callbacks in (the rest continues on the next turn)."""

_IDLE_WORKERS = 64
"""Idle workers a loop keeps (more concurrent calls make more; the extra ones end)."""


class _LoopBridge:
    """One event loop's completion queue and the bridged calls it drives.

    Calls run in worker greenlets resumed from loop callbacks, never from the awaiting
    task: a call becomes runnable when it starts and each time its job finishes;
    :meth:`_step` runs runnable calls for at most :data:`_SLICE` per loop turn, so many
    conversations that become ready together cannot hold the loop for long."""

    __slots__ = (
        "__weakref__",
        "completions",
        "idle",
        "loop",
        "runnable",
        "scheduled",
        "waiting",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.completions = _ctxbudget.Completions()
        # Calls with their workers (None before they start).
        self.runnable: deque[tuple[_Call, _Worker | None]] = deque()
        self.waiting: dict[int, tuple[_Call, _Worker]] = {}
        self.idle: list[_Worker] = []
        self.scheduled = False
        # Weak: the loop owns this bridge (through its reader), not the other way round.
        self.loop = weakref.ref(loop)
        loop.add_reader(self.completions.fileno(), self._ready)

    def start(
        self, loop: asyncio.AbstractEventLoop, fn: Callable[[], Any], waiter: asyncio.Future[None]
    ) -> _Call:
        call = _Call(fn, waiter, loop)
        self.runnable.append((call, None))
        if not self.scheduled:
            self.scheduled = True
            loop.call_soon(self._step)
        return call

    def _ready(self) -> None:
        for job in self.completions.drain():
            waiting = self.waiting.pop(job, None)
            if waiting is not None:
                self.runnable.append(waiting)
        if not self.scheduled:
            self._step()

    def _step(self) -> None:
        self.scheduled = False
        runnable = self.runnable
        end = time.perf_counter() + _SLICE
        try:
            while runnable:
                self._resume(*runnable.popleft())
                if time.perf_counter() >= end:
                    break
        finally:
            loop = self.loop()
            if runnable and not self.scheduled and loop is not None:
                self.scheduled = True
                loop.call_soon(self._step)

    def _take_worker(self, current: greenlet.greenlet) -> _Worker:
        idle = self.idle
        while idle:
            worker = idle.pop()
            try:
                worker.parent = current
                return worker
            except ValueError:
                # Made in another thread, where this loop ran before: none can run here.
                idle.clear()
        return _Worker()

    def _resume(self, call: _Call, worker: _Worker | None) -> None:
        current = greenlet.getcurrent()
        if worker is None:
            if call.cancelled:  # its task was cancelled before it started: it never runs
                _fail(call, asyncio.CancelledError("cancelled before it started"))
                return
            worker = self._take_worker(current)
            worker.next_call = call
        else:
            try:
                worker.parent = current
            except ValueError:  # suspended in a thread the loop no longer runs in
                call.lost = True  # so a session's lock it holds is free (see gone())
                _fail(
                    call,
                    RuntimeError(
                        "the event loop moved to another thread while a ctxbudget call "
                        "waited for its I/O; it cannot go on there (its write, if it "
                        "had started, is in the store, and the session reads its state "
                        "again)"
                    ),
                )
                return
        target = worker.inner or worker
        worker.inner = None
        running = _running
        running.worker, running.target = worker, target
        call.thread = threading.current_thread()
        owner = _session_lock.current
        previous, owner.call = owner.call, call
        try:
            outcome = self.completions.resume(target)
        except BaseException as exc:  # pragma: no cover - the worker itself failed
            _fail(call, exc)
            raise
        finally:
            running.worker = running.target = None
            owner.call = previous
        if worker.dead:  # it ended with GreenletExit (see _serve), which it recorded
            _fail(call, call.error or RuntimeError("ctxbudget's async bridge lost a call"))
        elif outcome is _FINISHED:
            if len(self.idle) < _IDLE_WORKERS:
                self.idle.append(worker)
            _wake(call)
            if isinstance(call.error, (KeyboardInterrupt, SystemExit)):
                raise call.error
        else:
            self.waiting[cast(int, outcome)] = (call, worker)


def _fail(call: _Call, error: BaseException) -> None:
    """Ends ``call`` with ``error`` (raised to its task)."""
    call.error, call.done = error, True
    _wake(call)


def _wake(call: _Call) -> None:
    waiter = call.waiter()
    # Done: its task was cancelled and takes a new one; gone: so is its task.
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBridge] = (
    weakref.WeakKeyDictionary()
)


def _bridge_for(loop: asyncio.AbstractEventLoop) -> _LoopBridge:
    bridge = _bridges.get(loop)
    if bridge is None:
        bridge = _bridges[loop] = _LoopBridge(loop)
    return bridge


async def run(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Runs ``fn(*args, **kwargs)`` on this thread, in the awaiting task's context
    variables; its blocking core calls run in the I/O pool while the loop goes on.
    Exceptions propagate unchanged. Cancelling the awaiting task lets the call finish,
    then raises ``CancelledError``."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[None] = loop.create_future()
    call = _bridge_for(loop).start(loop, lambda: fn(*args, **kwargs), waiter)
    cancelled = False
    while not call.done:
        try:
            await waiter
        except asyncio.CancelledError:
            # The call goes on (its write completes or never starts): wait for it. One
            # that has not started, or waits for a session's lock holding none, stops.
            cancelled = True
            call.cancel()
            if not call.done:
                waiter = loop.create_future()
                call.waiter = weakref.ref(waiter)
    if cancelled:
        raise asyncio.CancelledError from call.error
    if call.error is not None:
        raise call.error
    return cast(_R, call.result)
