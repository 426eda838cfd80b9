"""Runs synchronous ctxbudget code on the event loop's thread without blocking the loop.

:func:`run` executes a function (a :class:`~ctxbudget.Session` method, say) in a
greenlet on the loop's own thread. Every blocking core call it makes — an append and
its ``fdatasync``, a read, a ``session_history`` scan, a tokenizer load — passes one
chokepoint in the binding (``offload::blocking``): inside such a greenlet the call is
queued to the binding's I/O pool (plain Rust threads that never take the GIL) and the
greenlet suspends here, in :func:`_wait`. The loop watches the pool's completion socket
(``loop.add_reader``); when the job is done the greenlet resumes where it stopped and
the result becomes Python objects on the loop's thread. No Python thread other than the
loop's runs, so nothing competes with the loop for the GIL.

A call that is cancelled while its I/O is in flight finishes first (its write is either
complete, and later calls see it, or it never started) and then raises
``CancelledError``.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any, ParamSpec, TypeVar, cast

import greenlet

from . import _ctxbudget

__all__ = ["run"]

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Call:
    """One bridged call: what to run, its outcome once it ran, and the future its task
    awaits (replaced when the task is cancelled while the call is still running)."""

    __slots__ = ("ctx", "done", "error", "fn", "result", "waiter", "worker")

    def __init__(self, fn: Callable[[], Any], waiter: asyncio.Future[None]) -> None:
        # The awaiting task's context variables, as asyncio.to_thread passes them.
        self.ctx = contextvars.copy_context()
        self.fn = fn
        self.waiter = waiter
        self.worker: _Worker | None = None
        self.done = False
        self.error: BaseException | None = None
        self.result: Any = None


class _Finished:
    """What a worker hands back when its call returned or raised (a job id otherwise)."""

    __slots__ = ()


_FINISHED = _Finished()


class _Worker(greenlet.greenlet):
    """A greenlet that runs bridged calls one after another: kept between calls, so a
    call does not pay for a new greenlet and its Python stack (an ``mmap`` and a
    ``munmap`` each). A blocking core call suspends it in :func:`_wait`."""

    __slots__ = ("next_call",)

    def __init__(self) -> None:
        super().__init__(_serve)
        self.next_call: _Call | None = None
        """The call to run when next switched to with no job pending (handed over as
        an attribute: switch arguments of a greenlet's start live as long as it)."""


def _serve() -> None:
    while True:
        # Nothing is held across the switch below: an idle worker that its bridge drops
        # is freed at once (no reference cycle through its own frame).
        worker = cast(_Worker, greenlet.getcurrent())
        call = worker.next_call
        worker.next_call = None
        assert call is not None
        try:
            call.result = call.ctx.run(call.fn)
        except greenlet.GreenletExit:
            raise  # the worker is being discarded
        except BaseException as exc:  # handed to the awaiting task, never swallowed
            call.error = exc
        call.done = True
        parent = worker.parent
        del worker, call
        assert parent is not None
        parent.switch(_FINISHED)


def _wait(job: int) -> None:
    """Called by the binding inside a bridged call after it queued ``job``: hands the
    job to the loop's bridge and returns once it is done."""
    current = greenlet.getcurrent()
    parent = current.parent
    if not isinstance(current, _Worker) or parent is None:  # pragma: no cover
        raise RuntimeError("ctxbudget's async bridge was entered outside a bridged call")
    parent.switch(job)


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
        self.runnable: deque[_Call] = deque()
        self.waiting: dict[int, _Call] = {}
        self.idle: list[_Worker] = []
        self.scheduled = False
        # Weak: the loop owns this bridge (through its reader), not the other way round.
        self.loop = weakref.ref(loop)
        loop.add_reader(self.completions.fileno(), self._ready)

    def start(self, loop: asyncio.AbstractEventLoop, fn: Callable[[], Any]) -> _Call:
        call = _Call(fn, loop.create_future())
        self.runnable.append(call)
        if not self.scheduled:
            self.scheduled = True
            loop.call_soon(self._step)
        return call

    def _ready(self) -> None:
        for job in self.completions.drain():
            call = self.waiting.pop(job, None)
            if call is not None:
                self.runnable.append(call)
        if not self.scheduled:
            self._step()

    def _step(self) -> None:
        self.scheduled = False
        runnable = self.runnable
        end = time.perf_counter() + _SLICE
        try:
            while runnable:
                self._resume(runnable.popleft())
                if time.perf_counter() >= end:
                    break
        finally:
            loop = self.loop()
            if runnable and not self.scheduled and loop is not None:
                self.scheduled = True
                loop.call_soon(self._step)

    def _resume(self, call: _Call) -> None:
        worker = call.worker
        if worker is None:
            worker = call.worker = self.idle.pop() if self.idle else _Worker()
            worker.next_call = call
        worker.parent = greenlet.getcurrent()
        try:
            outcome = self.completions.resume(worker)
        except BaseException as exc:  # pragma: no cover - the worker itself failed
            call.worker = None
            call.error, call.done = exc, True
            _wake(call)
            raise
        if outcome is _FINISHED:
            call.worker = None
            if len(self.idle) < _IDLE_WORKERS:
                self.idle.append(worker)
            _wake(call)
            if isinstance(call.error, (KeyboardInterrupt, SystemExit)):
                raise call.error
        else:
            self.waiting[cast(int, outcome)] = call


def _wake(call: _Call) -> None:
    if not call.waiter.done():  # done: its task was cancelled and takes a new one
        call.waiter.set_result(None)


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
    call = _bridge_for(loop).start(loop, lambda: fn(*args, **kwargs))
    cancelled = False
    while not call.done:
        try:
            await call.waiter
        except asyncio.CancelledError:
            # The call goes on (its write completes or never starts): wait for it.
            cancelled = True
            if not call.done:
                call.waiter = loop.create_future()
    if cancelled:
        raise asyncio.CancelledError from call.error
    if call.error is not None:
        raise call.error
    return cast(_R, call.result)
