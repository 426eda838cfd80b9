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
import functools
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


class _Bridged(greenlet.greenlet):
    """A greenlet whose blocking core calls suspend it instead of blocking the thread."""


def _wait(job: int) -> None:
    """Called by the binding inside a bridged greenlet after it queued ``job``: hands
    the job to :func:`run` (which awaits it) and returns once it is done."""
    current = greenlet.getcurrent()
    parent = current.parent
    if not isinstance(current, _Bridged) or parent is None:  # pragma: no cover
        raise RuntimeError("ctxbudget's async bridge was entered outside a bridged call")
    parent.switch(job)


# Once per process, under the import lock (so threads cannot race to it).
_ctxbudget._offload_register(_wait)


class _Call:
    """One bridged call: its greenlet and the future of its outcome."""

    __slots__ = ("future", "glet")

    def __init__(self, glet: _Bridged, future: asyncio.Future[Any]) -> None:
        self.glet = glet
        self.future = future


_SLICE = 0.0002
"""Seconds of bridged work one turn of the event loop runs before it lets timers and
other callbacks in (the rest continues on the next turn)."""


class _LoopBridge:
    """One event loop's completion queue and the bridged calls it drives.

    Greenlets are resumed from loop callbacks, never from the awaiting task: a call
    becomes runnable when it starts and each time its job finishes; :meth:`_step` runs
    runnable calls for at most :data:`_SLICE` per loop turn, so many conversations that
    become ready together cannot hold the loop for long."""

    __slots__ = ("__weakref__", "completions", "runnable", "scheduled", "waiting")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.completions = _ctxbudget.Completions()
        self.runnable: deque[_Call] = deque()
        self.waiting: dict[int, _Call] = {}
        self.scheduled = False
        loop.add_reader(self.completions.fileno(), self._ready)

    def start(self, loop: asyncio.AbstractEventLoop, glet: _Bridged) -> asyncio.Future[Any]:
        future: asyncio.Future[Any] = loop.create_future()
        self.runnable.append(_Call(glet, future))
        if not self.scheduled:
            self.scheduled = True
            loop.call_soon(self._step)
        return future

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
            if runnable and not self.scheduled:
                self.scheduled = True
                asyncio.get_running_loop().call_soon(self._step)

    def _resume(self, call: _Call) -> None:
        glet = call.glet
        glet.parent = greenlet.getcurrent()
        try:
            outcome = self.completions.resume(glet)
        except (KeyboardInterrupt, SystemExit) as exc:
            _settle(call.future, exc)
            raise
        except BaseException as exc:
            _settle(call.future, exc)
            return
        if glet.dead:
            _settle(call.future, None, outcome)
        else:
            self.waiting[cast(int, outcome)] = call


def _settle(future: asyncio.Future[Any], error: BaseException | None, result: Any = None) -> None:
    if future.done():  # pragma: no cover - the loop is closing: nobody awaits it
        return
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(result)


_bridges: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopBridge] = (
    weakref.WeakKeyDictionary()
)


def _bridge_for(loop: asyncio.AbstractEventLoop) -> _LoopBridge:
    bridge = _bridges.get(loop)
    if bridge is None:
        bridge = _bridges[loop] = _LoopBridge(loop)
    return bridge


async def run(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Runs ``fn(*args, **kwargs)`` on this thread; its blocking core calls run in the
    I/O pool while the loop goes on. Exceptions propagate unchanged. Cancelling the
    awaiting task lets the call finish, then raises ``CancelledError``."""
    loop = asyncio.get_running_loop()
    future = _bridge_for(loop).start(loop, _Bridged(functools.partial(fn, *args, **kwargs)))
    cancelled = False
    while not future.done():
        try:
            await asyncio.shield(future)
        except asyncio.CancelledError:
            cancelled = True
        except BaseException:
            break  # the call's own error: raised below
    if cancelled:
        error = future.exception()
        raise asyncio.CancelledError from error
    return cast(_R, future.result())
