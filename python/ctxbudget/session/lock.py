"""The lock of a :class:`~ctxbudget.Session`: the one owner of the session at a time —
a thread, or an awaited :class:`~ctxbudget.AsyncSession` call.

An awaited call runs on its event loop's thread in a greenlet that suspends, holding
this lock, while its I/O runs on the binding's pool. So the owner is the *call*, not the
thread: a thread lock would let the loop's other code in, on the same thread, halfway
through the call (and a call that a closed loop will never resume would keep it forever).
Hence the rules:

- A thread that wants the lock waits for it (as with any lock); an awaited call that
  wants it suspends until it is free, so its loop goes on meanwhile — whoever holds it,
  in whatever thread or loop.
- A call whose event loop was closed (or garbage-collected), whose thread ended, or
  whose loop went on in another thread can never resume: it owns nothing any more.
  The next owner takes the lock at once and marks the session *abandoned*: its
  in-memory state may be halfway through that call, so the session reads its window
  again from the transcript before it goes on (:func:`locked`). Any write of the
  abandoned call that had started completes on the pool and is read back like another
  writer's rows; it was never acknowledged to anyone.
- Waiting that could never end is refused at once with
  :class:`~ctxbudget.LoopAffinityError`: a thread that would block waiting for a call of
  the event loop it is itself running, or anyone on a thread waiting for a call of a
  stopped loop last run on that thread (the thread would have to run that loop again).

A waiter for an awaited call re-checks it every :data:`_POLL` seconds (nothing
announces that a loop was closed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Concatenate, ParamSpec, Protocol, TypeGuard, TypeVar

from ..errors import LoopAffinityError

__all__ = ["AwaitedCall", "SessionLock", "current", "locked", "locked_brief"]

_NOT_HELD = -1
"""The token of a brief acquire that did not take the lock (releases nothing)."""

_POLL = 0.05
"""Seconds between a waiter's checks that the holder's event loop still exists."""


class AwaitedCall(Protocol):
    """What the lock needs of an awaited call (``ctxbudget._bridge`` makes them)."""

    holding: int
    """Session locks this call holds (maintained by the locks)."""

    def gone(self) -> bool:
        """True when it can never resume: its event loop was closed or collected, its
        thread (the only one its greenlet can run on) ended, or the loop went on in
        another thread."""

    def stranded_here(self, parks: bool) -> bool:
        """True when a waiter on this thread would wait forever for the call: the
        call's loop is stopped and was last run on this thread, or — for a waiter that
        blocks its thread instead of parking (``parks`` false) — this thread runs it."""

    def wake_token(self) -> Callable[[], None]:
        """A thread-safe callable that makes :meth:`park` return."""

    def park(self, wake: Callable[[], None], poll: float | None) -> None:
        """Suspends the call (its loop goes on) until ``wake()`` or, unless ``poll`` is
        None, ``poll`` seconds; a call cancelled while it holds no lock raises
        ``CancelledError`` instead."""


class _Current(threading.local):
    """The awaited call running on this thread right now (set by the bridge)."""

    call: AwaitedCall | None = None


current = _Current()


class _ThreadOwner:
    """A thread as an owner (one per thread)."""

    __slots__ = ("name",)

    def __init__(self) -> None:
        self.name = threading.current_thread().name

    def __repr__(self) -> str:
        return f"<thread {self.name!r}>"


class _Threads(threading.local):
    def __init__(self) -> None:
        self.owner = _ThreadOwner()


_threads = _Threads()


def _is_call(owner: AwaitedCall | _ThreadOwner | None) -> TypeGuard[AwaitedCall]:
    return owner is not None and not isinstance(owner, _ThreadOwner)


class SessionLock:
    """A reentrant lock owned by a thread or an awaited call (see the module docs).

    :meth:`acquire` returns a token for :meth:`release`: the release of an owner that
    was abandoned meanwhile (its greenlet unwinding later) then changes nothing."""

    __slots__ = (
        "_changed",
        "_depth",
        "_generation",
        "_mutex",
        "_owner",
        "_sleepers",
        "_wakes",
        "abandoned",
    )

    def __init__(self) -> None:
        self._mutex = threading.Lock()
        self._changed = threading.Condition(self._mutex)
        self._owner: AwaitedCall | _ThreadOwner | None = None
        self._depth = 0
        self._generation = 0
        self._wakes: list[Callable[[], None]] = []
        """How to resume each awaited call waiting for the lock (all are woken at a
        release, and each tries again)."""
        self._sleepers = 0
        """Threads waiting for the lock."""
        self.abandoned = False
        """True after an owner was abandoned, until the session has read its state again."""

    def acquire(self, *, brief: bool = False) -> int:
        """Takes the lock (again, if this owner holds it) and returns the token to
        release it with. ``brief`` (see :func:`locked_brief`): where waiting could
        never end, returns at once without the lock (a token that releases nothing)."""
        call = current.call
        me: AwaitedCall | _ThreadOwner = call if call is not None else _threads.owner
        if self._owner is me:  # again: no one else moves the lock away from a live owner
            self._depth += 1
            return self._generation
        mutex = self._mutex
        while True:
            with mutex:
                owner = self._owner
                if owner is not None and _is_call(owner) and owner.gone():
                    self._drop_owner(abandoned=True)
                    owner = None
                if owner is None:
                    self._owner, self._depth = me, 1
                    self._generation += 1
                    if call is not None:
                        call.holding += 1
                    return self._generation
                if _is_call(owner) and owner.stranded_here(parks=call is not None):
                    if brief:
                        return _NOT_HELD
                    raise LoopAffinityError(_STRANDED)
                # Only an awaited call may vanish without a release (a thread always
                # lets go): only then is the holder checked again while waiting.
                poll = _POLL if _is_call(owner) else None
                if call is None:
                    self._sleepers += 1
                    self._changed.wait(poll)
                    self._sleepers -= 1
                    continue
                wake = call.wake_token()
                self._wakes.append(wake)
            try:
                call.park(wake, poll)
            finally:
                with mutex:
                    if wake in self._wakes:  # woken by the poll, not by a release
                        self._wakes.remove(wake)

    def release(self, token: int) -> None:
        """Lets go once (the lock is free when every acquire was released); a token of
        an owner abandoned since changes nothing."""
        with self._mutex:
            owner = self._owner
            if token != self._generation or owner is None:
                return
            if self._depth > 1:
                self._depth -= 1
                return
            if owner.__class__ is _ThreadOwner and not self._sleepers and not self._wakes:
                # The common case, inline: a thread lets go and no one waits.
                self._owner, self._depth = None, 0
                self._generation = token + 1
                return
            # Code of a call whose loop is gone runs only as its greenlet is killed: it
            # unwound halfway, so the session's state must be read again.
            self._drop_owner(abandoned=not isinstance(owner, _ThreadOwner) and owner.gone())

    def _drop_owner(self, *, abandoned: bool) -> None:
        owner = self._owner
        if owner is not None and not isinstance(owner, _ThreadOwner):  # an awaited call
            owner.holding -= 1
        self._owner, self._depth = None, 0
        self._generation += 1
        if abandoned:
            self.abandoned = True
        if self._sleepers:
            self._changed.notify_all()
        if self._wakes:
            wakes, self._wakes = self._wakes, []
            for wake in wakes:
                wake()

    def __repr__(self) -> str:
        return f"<SessionLock owner={self._owner!r} depth={self._depth}>"


_STRANDED = (
    "this Session is held by an awaited AsyncSession call that only this thread can "
    "finish (this thread runs its event loop, or that loop was stopped with the call in "
    "flight); waiting here would never end. Await the AsyncSession's method instead of "
    "calling the Session directly from the loop, and run a stopped loop until its calls "
    "finish (or close it: its calls are then abandoned and the session reads its state "
    "again from the transcript)"
)

_P = ParamSpec("_P")
_R = TypeVar("_R")


class _Lockable(Protocol):
    _lock: SessionLock

    def _recover(self) -> None: ...


_S = TypeVar("_S", bound=_Lockable)


def locked(method: Callable[Concatenate[_S, _P], _R]) -> Callable[Concatenate[_S, _P], _R]:
    """Runs ``method`` holding the object's :class:`SessionLock`; after an owner was
    abandoned, the object's ``_recover()`` runs first (under the lock)."""
    return _holding(method, brief=False)


def locked_brief(
    method: Callable[Concatenate[_S, _P], _R],
) -> Callable[Concatenate[_S, _P], _R]:
    """:func:`locked` for a method that never suspends and is sound between any two
    steps of a call (a read of a consistent snapshot, a swap of a list): where waiting
    for the holder could never end — the loop's own thread asking while a call of that
    loop holds the lock, suspended — it runs without the lock, as the thread lock let
    it before, instead of raising :class:`~ctxbudget.LoopAffinityError`."""
    return _holding(method, brief=True)


def _holding(
    method: Callable[Concatenate[_S, _P], _R], *, brief: bool
) -> Callable[Concatenate[_S, _P], _R]:
    def run(self: _S, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        lock = self._lock
        token = lock.acquire(brief=True) if brief else lock.acquire()
        try:
            if lock.abandoned and token != _NOT_HELD:
                lock.abandoned = False
                try:
                    self._recover()
                except BaseException:
                    lock.abandoned = True
                    raise
            return method(self, *args, **kwargs)
        finally:
            lock.release(token)

    run.__name__ = method.__name__
    run.__qualname__ = method.__qualname__
    run.__doc__ = method.__doc__
    return run
