"""Runs synchronous ctxbudget code from a coroutine without blocking the event loop.

:func:`run` is shaped like SQLAlchemy's greenlet bridge: the awaiting task switches
into a greenlet that runs the function (a :class:`~ctxbudget.Session` method, say)
on the loop's thread. Every blocking core call the function makes passes one chokepoint
in the binding (``offload::blocking``): there the work is queued to the binding's I/O
pool (Rust threads that never take the GIL) and the greenlet switches back to the task
with the job's ticket (:func:`_wait`). The task awaits a future for that ticket, so the
loop goes on. A finished job is announced on the loop's completion socket, which the
loop watches (``loop.add_reader``); the loop completes the job's future, the task wakes
and switches back into the greenlet, which takes the result where it stopped. No Python
thread other than the loop's runs, nothing competes with the loop for the GIL, and the
loop is held only for the Python code between two blocking calls. Those stretches share
each loop turn (:data:`_SLICE`): the loop wakes only as many calls whose jobs finished
as fit the next turn, the others in later turns, oldest first, and a call that starts
once the turn's share is spent waits for a later one; so many conversations ready at
once cannot hold the loop. Calls run in greenlets that each loop keeps for later calls
(:class:`_Runner`).

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
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, TypeVar, cast

import greenlet

from . import _ctxbudget
from .session import lock as _session_lock

__all__ = ["run", "run_off_loop"]

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


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
    """What a call hands its task when it suspends: the ticket to wait for (or an
    awaitable for the task to await, see :func:`await_only`) and the greenlet to switch
    back into (the call's runner, or a helper greenlet that the called code made)."""

    __slots__ = ("awaitable", "resume", "ticket")

    def __init__(
        self, ticket: int, resume: greenlet.greenlet, awaitable: Awaitable[Any] | None = None
    ) -> None:
        self.ticket = ticket
        self.resume = resume
        self.awaitable = awaitable


class _Done:
    """How a call ended: its result, or the exception it raised."""

    __slots__ = ("error", "result")

    def __init__(self, result: Any, error: BaseException | None) -> None:
        self.result = result
        self.error = error


class _Runner(greenlet.greenlet):
    """A greenlet that runs calls one after another, each driven by the task that
    awaits it. Kept between calls (per loop): a new greenlet costs an ``mmap`` and a
    ``munmap`` of its Python stack, about 40 µs of the loop's time. The call and its
    outcome are handed over in attributes, never as switch arguments (those stay on a
    suspended greenlet's stack), so an idle runner holds nothing of its last call."""

    __slots__ = ("call", "outcome")

    def __init__(self) -> None:
        super().__init__(_serve)
        self.call: Callable[[], Any] | None = None
        self.outcome: _Done | None = None


class _Thread(threading.local):
    """The task switched into a call on this thread right now and the runner it
    switched into (None between switches)."""

    task: greenlet.greenlet | None = None
    runner: _Runner | None = None
    loop: asyncio.AbstractEventLoop | None = None
    """The loop a :func:`run_off_loop` call came from, in its worker thread."""


_here = _Thread()

_IDLE_RUNNERS = 64
"""Idle runners a loop keeps (more concurrent calls make more; the extra ones end)."""


def _serve() -> None:
    while True:
        runner = cast(_Runner, greenlet.getcurrent())
        fn, runner.call = runner.call, None
        del runner  # nothing of the call, nor the runner itself, stays in this frame
        assert fn is not None
        try:
            outcome = _Done(fn(), None)
        except greenlet.GreenletExit as exc:
            # Raised by the call, or thrown in as the runner is collected: either way
            # the runner ends (its task sees it dead) and the call raises it.
            cast(_Runner, greenlet.getcurrent()).outcome = _Done(None, exc)
            return
        except BaseException as exc:  # handed to the awaiting task, never swallowed
            outcome = _Done(None, exc)
        del fn
        cast(_Runner, greenlet.getcurrent()).outcome = outcome
        del outcome
        _idle()


def _idle() -> None:
    """Switches back to the task whose call just ended; returns when a task switches in
    with the next call. Anything else that switches in — a greenlet that an earlier
    call made (its parent is this runner) ending after that call — is handed on to the
    task's side, as it would be had the runner ended."""
    value: Any = None
    while True:
        me = greenlet.getcurrent()
        parent = me.parent
        del me
        assert parent is not None
        value = parent.switch(value)
        del parent
        if _here.runner is greenlet.getcurrent():
            return


def _suspend(ticket: int) -> None:
    """Switches back to the task that drives the current call; returns once the task
    saw ``ticket`` completed and switched back in."""
    task = _here.task
    if task is None:  # pragma: no cover - the binding calls it inside bridged calls only
        raise RuntimeError("ctxbudget's async bridge was entered outside a bridged call")
    task.switch(_Suspended(ticket, greenlet.getcurrent()))


def await_only(awaitable: Awaitable[_T]) -> _T:
    """Inside a call of :func:`run`: has the call's task await ``awaitable`` (the loop
    goes on meanwhile) and returns its result, or raises its exception (the task's
    cancellation included); inside a call of :func:`run_off_loop`, has its loop await
    it while the worker thread waits. A host's count endpoint is awaited so."""
    task = _here.task
    if task is None and _here.loop is not None:  # a run_off_loop() call: the loop awaits
        return asyncio.run_coroutine_threadsafe(_awaited(awaitable), _here.loop).result()
    if task is None:
        raise RuntimeError("await_only() works inside ctxbudget._bridge.run() calls only")
    done = cast(_Done, task.switch(_Suspended(0, greenlet.getcurrent(), awaitable)))
    if done.error is not None:
        raise done.error
    return cast(_T, done.result)


async def _awaited(awaitable: Awaitable[_T]) -> _T:
    return await awaitable


def _wait(job: int) -> None:
    """Called by the binding inside a bridged call after it queued ``job`` to the I/O
    pool: returns once the job is done (the loop ran other tasks meanwhile)."""
    _suspend(job)


# Once per process, under the import lock (so threads cannot race to it).
_ctxbudget._offload_register(_wait)


_SLICE = 0.0002
"""Seconds of bridged code one turn of the event loop runs; past it, calls that become
ready wait for the next turn, so that many conversations ready at once (200 model
replies due together, say) cannot hold the loop for long."""


class _LoopBridge:
    """One event loop's completion socket, the futures its tasks await on it, and the
    share of each loop turn that calls take (:data:`_SLICE`).

    The share is kept where calls are woken, not where they run: a finished job's future
    is completed (its task runs in the next turn) only while the next turn's share has
    room by the calls' average stretch, else it waits in :attr:`due`, oldest first, for
    a later turn. A woken call so never has to ask again: asking after the wake-up cost
    each call past the share a second future and two more loop turns (more than half
    the stretches of 20 busy conversations). Calls that start are checked against what
    ran this turn.

    The futures are held weakly: a future leads to its task and loop, and the bridges
    map keeps bridges alive as long as their loop, so a strong reference would keep a
    closed loop (and its suspended calls) forever."""

    __slots__ = (
        "__weakref__",
        "booked",
        "completions",
        "due",
        "early",
        "gated",
        "idle",
        "loop",
        "renewing",
        "spent",
        "stretch",
        "waiting",
    )

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.completions = _ctxbudget.Completions()
        self.waiting: dict[int, weakref.ref[asyncio.Future[None]]] = {}
        self.due: dict[int, weakref.ref[asyncio.Future[None]]] = {}
        """Tickets completed whose futures wait for a turn with room, oldest first."""
        self.early: set[int] = set()
        """Tickets completed while their future was cancelled with its task (the task
        waits for them again, see :meth:`again`)."""
        self.spent = 0.0
        """Seconds calls ran in this turn of the loop."""
        self.booked = 0.0
        """Seconds of stretches woken to run in the next turn (by :attr:`stretch`)."""
        self.stretch = _SLICE / 4
        """A call's stretch, on average of late (how many woken calls fit a turn)."""
        self.gated: deque[weakref.ref[asyncio.Future[None]]] = deque()
        """Calls that start once this turn's share is spent, oldest first."""
        self.renewing = False
        """A callback that starts the next turn's share is scheduled."""
        self.idle: list[_Runner] = []
        # Weak: the loop owns this bridge (through its reader), not the other way round.
        self.loop = weakref.ref(loop)
        loop.add_reader(self.completions.fileno(), self._ready)

    def expect(self, loop: asyncio.AbstractEventLoop, ticket: int) -> asyncio.Future[None]:
        """A future that the loop completes once ``ticket`` is (and a turn has room)."""
        future: asyncio.Future[None] = loop.create_future()
        self.waiting[ticket] = weakref.ref(future)
        return future

    def again(
        self, loop: asyncio.AbstractEventLoop, ticket: int, future: asyncio.Future[None]
    ) -> asyncio.Future[None]:
        """What a task whose wait for ``ticket`` was interrupted by its cancellation
        awaits instead: ``future`` if it was not cancelled with the task (it is done),
        else a new one (done if the ticket already was; in its place among the due
        ones if the ticket is done and waits for a turn)."""
        if not future.cancelled():
            return future
        if ticket in self.early:
            self.early.discard(ticket)
            done: asyncio.Future[None] = loop.create_future()
            done.set_result(None)
            return done
        if ticket in self.due:
            again: asyncio.Future[None] = loop.create_future()
            self.due[ticket] = weakref.ref(again)  # keeps its place in the order
            return again
        return self.expect(loop, ticket)

    def _ready(self) -> None:
        waiting, due = self.waiting, self.due
        for ticket in self.completions.drain():
            ref = waiting.pop(ticket, None)
            if ref is not None:  # else posted twice, or its task is gone
                due[ticket] = ref
        if due:
            self._wake()

    def _wake(self) -> None:
        """Completes the oldest due futures, as many as fit the next turn's share by
        the average stretch (at least one a turn); the rest wait for a later turn."""
        due, stretch = self.due, self.stretch
        while due and (self.booked == 0.0 or self.booked + stretch <= _SLICE):
            ticket = next(iter(due))
            future = due.pop(ticket)()
            if future is None:  # its task is gone
                continue
            if future.cancelled():
                self.early.add(ticket)
            elif not future.done():
                future.set_result(None)
                self.booked += stretch
        if self.booked:
            loop = self.loop()
            if loop is not None:
                self._renew(loop)

    def runner(self) -> _Runner:
        """An idle runner of this loop, or a new one."""
        idle = self.idle
        while idle:
            runner = idle.pop()
            try:
                runner.parent = greenlet.getcurrent()
                return runner
            except ValueError:
                # Made in another thread, where this loop ran before: none can run here.
                idle.clear()
        return _Runner()

    def keep(self, runner: _Runner) -> None:
        """Keeps ``runner`` for a later call, unless it ended or enough are kept."""
        if not runner.dead and len(self.idle) < _IDLE_RUNNERS:
            self.idle.append(runner)

    # ----- the share of each loop turn ---------------------------------------------------

    def gate(self, loop: asyncio.AbstractEventLoop) -> asyncio.Future[None]:
        """A future completed in a later turn, when this turn's share is spent: the
        call may start once it is (without asking again)."""
        future: asyncio.Future[None] = loop.create_future()
        self.gated.append(weakref.ref(future))
        self._renew(loop)
        return future

    def ran_for(self, loop: asyncio.AbstractEventLoop, seconds: float) -> None:
        """Counts a stretch of a call against this turn's share."""
        self.spent += seconds
        self.stretch += (seconds - self.stretch) / 16
        self._renew(loop)

    def _renew(self, loop: asyncio.AbstractEventLoop) -> None:
        if not self.renewing:
            self.renewing = True
            loop.call_soon(self._next_turn)

    def _next_turn(self) -> None:
        """A new share (this turn runs the calls woken in the last one): due calls are
        woken for the next turn first (they are in flight, and may hold a session's
        lock), then the oldest gated calls may start, as many as fit by their average
        stretch, at least one a turn."""
        self.spent, self.booked, self.renewing = 0.0, 0.0, False
        if self.due:
            self._wake()
        gated = self.gated
        while gated and (self.booked == 0.0 or self.booked + self.stretch <= _SLICE):
            future = gated.popleft()()
            if future is not None and not future.done():
                future.set_result(None)
                self.booked += self.stretch
        loop = self.loop()
        if (gated or self.due or self.booked) and loop is not None:
            self._renew(loop)  # and the share of the turn after is counted afresh


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
    bridge: _LoopBridge,
    loop: asyncio.AbstractEventLoop,
    call: _Call,
    runner: _Runner,
    target: greenlet.greenlet,
    *args: Any,
) -> _Suspended | None:
    """Switches from the task into ``target`` (``runner``, or a helper greenlet of the
    call) until the call suspends (its ticket) or ends (None: ``runner.outcome``), with
    the loop's completions as the bridge of its blocking calls and ``call`` as the
    session locks' owner."""
    if call.thread is not threading.current_thread():
        call.lost = True  # so a session's lock it holds is free (see gone())
        raise RuntimeError(_MOVED)
    task = greenlet.getcurrent()
    if runner.parent is not task:  # the task runs in another greenlet than last time
        runner.parent = task  # where the call returns when it ends
    here, owner = _here, _session_lock.current
    previous = here.task, here.runner, owner.call
    here.task, here.runner, owner.call = task, runner, call
    started = time.perf_counter()
    try:
        outcome = bridge.completions.resume(target, *args)
    finally:
        here.task, here.runner, owner.call = previous
        bridge.ran_for(loop, time.perf_counter() - started)
    if isinstance(outcome, _Suspended) and not runner.dead:
        return outcome
    if runner.outcome is None:  # pragma: no cover - the called code switched here itself
        raise RuntimeError("a ctxbudget call switched to its task's greenlet directly")
    return None


async def run(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Runs ``fn(*args, **kwargs)`` on this thread, in a copy of the awaiting task's
    context variables (as ``asyncio.to_thread`` does); its blocking core calls run on
    the I/O pool while the loop goes on. Exceptions propagate unchanged. Cancelling the
    awaiting task lets the call finish, then raises ``CancelledError``."""
    loop = asyncio.get_running_loop()
    bridge = _bridge_for(loop)
    if bridge.spent >= _SLICE:  # this loop turn's share is spent: wait for a later one
        await bridge.gate(loop)  # cancelled here, the call never starts
    call = _Call(loop)
    context = contextvars.copy_context()
    runner = bridge.runner()
    runner.call = lambda: context.run(fn, *args, **kwargs)
    cancelled = False
    try:
        suspended = _switch(bridge, loop, call, runner, runner)
        while suspended is not None:
            if suspended.awaitable is not None:
                try:
                    awaited = _Done(await suspended.awaitable, None)
                except BaseException as exc:  # raised in the call, where it awaited
                    if isinstance(exc, asyncio.CancelledError):
                        cancelled = True
                        call.cancel()
                    awaited = _Done(None, exc)
                suspended = _switch(bridge, loop, call, runner, suspended.resume, awaited)
                del awaited
                continue
            ticket = suspended.ticket
            future = bridge.expect(loop, ticket)
            while True:
                try:
                    await future  # woken in a turn with room (see _LoopBridge._wake)
                    break
                except asyncio.CancelledError:
                    # The call goes on (its write completes or never starts): wait for
                    # it. One that waits for a session's lock holding none stops.
                    cancelled = True
                    call.cancel()
                    future = bridge.again(loop, ticket, future)
            suspended = _switch(bridge, loop, call, runner, suspended.resume)
    except BaseException as exc:
        if cancelled and not isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise asyncio.CancelledError from exc
        raise
    done, runner.outcome = runner.outcome, None
    bridge.keep(runner)
    assert done is not None
    if cancelled and not isinstance(done.error, (KeyboardInterrupt, SystemExit)):
        raise asyncio.CancelledError from done.error
    if done.error is not None:
        raise done.error
    return cast(_R, done.result)


async def run_off_loop(fn: Callable[_P, _R], /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
    """Runs ``fn(*args, **kwargs)`` in a worker thread (``asyncio.to_thread``: a copy of
    the task's context variables), so none of its Python holds the loop; its blocking
    core calls block that thread. The same cancellation contract as :func:`run`: a
    cancelled call finishes (its write is complete, and later calls see it), then
    ``CancelledError`` is raised. For callers whose Python per call outweighs its I/O
    (``AgentsSession``: benches/experiments/async_paths.md has the figures)."""
    loop = asyncio.get_running_loop()

    def in_thread() -> _R:
        _here.loop = loop  # for await_only(): the loop awaits what the call asks it to
        try:
            return fn(*args, **kwargs)
        finally:
            _here.loop = None

    work = asyncio.ensure_future(asyncio.to_thread(in_thread))
    cancelled = False
    while not work.done():
        try:
            await asyncio.shield(work)
        except asyncio.CancelledError:
            cancelled = cancelled or not work.done()
        except BaseException:
            break  # the call's own error: raised below (or replaced by the cancellation)
    if cancelled:
        error = work.exception()
        raise asyncio.CancelledError from error
    return work.result()
