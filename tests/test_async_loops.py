"""One session, many event loops: an ``AsyncSession`` awaited from two loops in two
threads at once, from one ``asyncio.run`` after another, a loop closed or stopped with a
call in flight, calls cancelled while they wait for the session. Each case either works
or raises a typed error at once; nothing hangs (every scenario runs under a watchdog
that fails the test instead), and nothing acknowledged is lost."""

from __future__ import annotations

import asyncio
import fcntl
import functools
import gc
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import AsyncSession, History, LoopAffinityError, Session
from ctxbudget.errors import CtxBudgetError

_WATCHDOG = 60.0
"""Seconds after which a scenario counts as hung (each takes well under one)."""


def _watchdog(test: Callable[..., None]) -> Callable[..., None]:
    """Runs the test's body in a daemon thread; a body that has not ended within
    :data:`_WATCHDOG` fails the test (the thread is left behind, hung)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        outcome: list[BaseException | None] = []

        def body() -> None:
            try:
                test(*args, **kwargs)
            except BaseException as exc:  # handed to the test below
                outcome.append(exc)
            else:
                outcome.append(None)

        thread = threading.Thread(target=body, daemon=True)
        thread.start()
        thread.join(_WATCHDOG)
        assert not thread.is_alive(), "hung: the scenario never ended"
        if outcome[0] is not None:
            raise outcome[0]

    return run


@contextmanager
def _store_locked(ws: Path) -> Iterator[None]:
    """Holds the store's lock as another process would: appends wait for it."""
    with open(ws / "history" / "lock", "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _open(ws: Path) -> Session:
    return Session.open(ws, context_window=400_000, durability="none")


def _user_texts(ws: Path) -> list[str]:
    return [
        r.parts[0]["text"]
        for r in History.open(ws).rows()
        if r.kind == "message" and r.role == "user"
    ]


def _texts(ws: Path) -> list[str]:
    """Texts of every message in the store, users' and the assistant's."""
    return [r.parts[0]["text"] for r in History.open(ws).rows() if r.kind == "message"]


def _held_by_a_call(session: Session) -> bool:
    owner = session._lock._owner
    return owner is not None and hasattr(owner, "gone")


def _run_until(loop: asyncio.AbstractEventLoop, condition: Callable[[], bool]) -> None:
    """Runs ``loop`` in short steps until ``condition()`` holds."""
    for _ in range(2_000):
        if condition():
            return
        loop.run_until_complete(asyncio.sleep(0.005))
    raise AssertionError("the condition never held")


def _consistent(session: Session, ws: Path) -> None:
    """The session's next request is the one a fresh session reads from the store."""
    turn = session.prepare()
    fresh = _open(ws).prepare()
    assert turn.messages == fresh.messages
    assert turn.decision.projected == fresh.decision.projected


# ----- several loops ------------------------------------------------------------------


@_watchdog
def test_one_async_session_awaited_from_two_loops_in_two_threads_at_once(
    tmp_path: Path,
) -> None:
    """Both loops' calls complete (no RuntimeError, no hang), each loop's in the order
    it awaited them, and every acknowledged write is in the store."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))
    rounds, per_round = 6, 12
    start = threading.Barrier(2)

    def thread_main(t: int) -> None:
        async def main() -> None:
            for r in range(rounds):
                await asyncio.gather(
                    *(s.add_user(f"t{t} r{r} m{i}") for i in range(per_round)), s.prepare()
                )

        start.wait()
        try:
            asyncio.run(main())
        except BaseException as exc:  # reported below
            errors.append(exc)

    errors: list[BaseException] = []
    threads = [threading.Thread(target=thread_main, args=(t,)) for t in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    texts = _user_texts(ws)
    for t in range(2):
        mine = [x for x in texts if x.startswith(f"t{t} ")]
        assert mine == [f"t{t} r{r} m{i}" for r in range(rounds) for i in range(per_round)]
    assert len(texts) == 2 * rounds * per_round
    _consistent(s.session, ws)


@_watchdog
def test_one_async_session_in_one_asyncio_run_after_another(tmp_path: Path) -> None:
    """A second loop (a second ``asyncio.run``) with concurrent calls works as the
    first did: nothing raises and no write is lost."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))

    async def burst(n: int) -> None:
        await asyncio.gather(*(s.add_user(f"run {n} m{i}") for i in range(10)), s.prepare())

    for n in range(4):
        asyncio.run(burst(n))
    assert _user_texts(ws) == [f"run {n} m{i}" for n in range(4) for i in range(10)]
    _consistent(s.session, ws)


@_watchdog
def test_two_async_sessions_over_one_session_in_one_loop(tmp_path: Path) -> None:
    """Two wrappers of one Session in one loop take turns through its lock (a call
    that finds it held suspends; the loop goes on)."""
    ws = tmp_path / "ws"
    session = _open(ws)
    a, b = AsyncSession(session), AsyncSession(session)

    async def main() -> None:
        await asyncio.gather(
            *(a.add_user(f"a{i}") for i in range(15)),
            *(b.add_user(f"b{i}") for i in range(15)),
        )

    asyncio.run(main())
    texts = _user_texts(ws)
    assert [x for x in texts if x[0] == "a"] == [f"a{i}" for i in range(15)]
    assert [x for x in texts if x[0] == "b"] == [f"b{i}" for i in range(15)]
    _consistent(session, ws)


@_watchdog
def test_a_call_waiting_for_the_session_held_by_a_thread_leaves_the_loop_running(
    tmp_path: Path,
) -> None:
    """While a thread holds the session (its append waits for the store's lock), an
    awaited call on the same session waits without blocking its loop: another task
    runs meanwhile and releases the store's lock."""
    ws = tmp_path / "ws"
    session = _open(ws)
    s = AsyncSession(session)
    started = threading.Event()

    def thread_call() -> None:
        started.set()
        session.add_user("from the thread")

    async def main() -> list[str]:
        order: list[str] = []
        with _store_locked(ws):
            thread = threading.Thread(target=thread_call)
            thread.start()
            started.wait()
            while session._lock._owner is None:
                await asyncio.sleep(0.001)
            waiting = asyncio.create_task(s.add_user("from the loop"))
            for _ in range(10):
                await asyncio.sleep(0.001)
            order.append("loop ran")
        await waiting
        order.append("awaited call done")
        await asyncio.to_thread(thread.join)
        return order

    assert asyncio.run(main()) == ["loop ran", "awaited call done"]
    assert sorted(_user_texts(ws)) == ["from the loop", "from the thread"]


# ----- a closed or stopped loop ---------------------------------------------------------


def _closed_with_a_call_in_flight(ws: Path, s: AsyncSession) -> None:
    """Runs ``s.add_assistant("in flight")`` on a loop of its own until it holds the
    session (its first I/O is its append, which waits for the store), then closes that
    loop (not through asyncio.run, which would let the call finish), and lets the store
    go: the append completes on the pool, but the call is never resumed."""
    loop = asyncio.new_event_loop()
    with _store_locked(ws):
        task = loop.create_task(s.add_assistant("in flight"))
        _run_until(loop, lambda: _held_by_a_call(s.session))
        loop.close()
    del task


@_watchdog
def test_a_loop_closed_with_a_call_in_flight_frees_the_session_for_other_threads(
    tmp_path: Path,
) -> None:
    """The call a closed loop will never resume no longer holds the session: another
    thread's call goes on at once, on state read again from the store (where the
    abandoned call's write landed, its I/O having started)."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))
    asyncio.run(s.add_user("before"))
    _closed_with_a_call_in_flight(ws, s)
    s.session.add_user("from another thread")
    asyncio.run(s.add_user("from a new loop"))
    texts = _texts(ws)
    assert sorted(texts) == sorted(
        ["before", "in flight", "from another thread", "from a new loop"]
    )
    assert texts[-1] == "from a new loop"
    _consistent(s.session, ws)


@_watchdog
def test_a_loop_closed_with_a_call_in_flight_frees_the_session_for_its_own_thread(
    tmp_path: Path,
) -> None:
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))

    _closed_with_a_call_in_flight(ws, s)
    s.session.add_user("same thread, after the close")
    assert sorted(_texts(ws)) == ["in flight", "same thread, after the close"]
    _consistent(s.session, ws)


@_watchdog
def test_a_closed_loop_collected_with_its_call_in_flight(tmp_path: Path) -> None:
    """Dropped and collected, the closed loop's suspended call is killed (it unwinds
    through the session's code): the session is free and reads its state again."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))

    _closed_with_a_call_in_flight(ws, s)
    gc.collect()
    s.session.add_user("after the collection")
    assert sorted(_texts(ws)) == ["after the collection", "in flight"]
    _consistent(s.session, ws)


@_watchdog
def test_a_loop_closed_in_a_thread_that_then_ended(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))
    thread = threading.Thread(target=_closed_with_a_call_in_flight, args=(ws, s))
    thread.start()
    thread.join()
    asyncio.run(s.add_user("next"))
    assert sorted(_texts(ws)) == ["in flight", "next"]
    _consistent(s.session, ws)


@_watchdog
def test_a_loop_left_open_by_a_thread_that_ended(tmp_path: Path) -> None:
    """A call's greenlet can only resume on its thread: once that thread ended, the
    call owns nothing, even though its loop was neither closed nor collected."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))
    kept: list[asyncio.AbstractEventLoop] = []

    def stop_with_a_call_in_flight() -> None:
        loop = asyncio.new_event_loop()
        kept.append(loop)
        with _store_locked(ws):
            kept_task = loop.create_task(s.add_assistant("in flight"))
            _run_until(loop, lambda: _held_by_a_call(s.session))
        del kept_task

    thread = threading.Thread(target=stop_with_a_call_in_flight)
    thread.start()
    thread.join()
    s.session.add_user("next")
    assert sorted(_texts(ws)) == ["in flight", "next"]
    _consistent(s.session, ws)
    kept[0].close()


@_watchdog
def test_a_loop_moved_to_another_thread_with_a_call_in_flight(tmp_path: Path) -> None:
    """A loop run on in another thread cannot resume a call suspended on the first
    (greenlets stay on their thread): the call raises RuntimeError, its write is in the
    store, and the session is free for the next call."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))
    loop = asyncio.new_event_loop()
    in_flight = threading.Event()
    finish = threading.Event()
    tasks: list[asyncio.Task[str]] = []

    def first_thread() -> None:
        with _store_locked(ws):
            tasks.append(loop.create_task(s.add_assistant("in flight")))
            _run_until(loop, lambda: _held_by_a_call(s.session))
        in_flight.set()
        finish.wait()  # stays alive: the call is not gone for that reason

    thread = threading.Thread(target=first_thread)
    thread.start()
    in_flight.wait()
    try:
        with pytest.raises(RuntimeError, match="moved to another thread"):
            loop.run_until_complete(tasks[0])
        s.session.add_user("after")
        asyncio.run(s.add_user("after, awaited"))
    finally:
        finish.set()
        thread.join()
        loop.close()
    assert _texts(ws) == ["in flight", "after", "after, awaited"]
    _consistent(s.session, ws)


@_watchdog
def test_a_closed_loop_whose_call_only_waited_for_the_session(tmp_path: Path) -> None:
    """A call that was still waiting for the session (never ran) when its loop closed
    leaves nothing behind: the loop is freed once dropped (nothing of the parked call
    leads to it), the holder finishes and the session stays usable. Held by a thread,
    and by an awaited call of a loop running in another thread (whose waiters poll)."""
    ws = tmp_path / "ws"
    session = _open(ws)
    s = AsyncSession(session)
    for holder_kind in ("thread", "awaited call"):
        with _store_locked(ws):
            if holder_kind == "thread":
                holder = threading.Thread(target=session.add_user, args=("holder",))
            else:
                holder = threading.Thread(
                    target=asyncio.run, args=(s.add_assistant("holder call"),)
                )
            holder.start()
            while session._lock._owner is None:
                threading.Event().wait(0.001)
            loop = asyncio.new_event_loop()
            never_runs = loop.create_task(s.add_user("never runs"))
            _run_until(loop, lambda: bool(session._lock._wakes))
            loop.close()
            dropped = weakref.ref(loop)
            del loop, never_runs
            gc.collect()
            assert dropped() is None, "the parked call keeps its closed loop alive"
        holder.join()
    asyncio.run(s.add_user("after"))
    assert _texts(ws) == ["holder", "holder call", "after"]
    _consistent(session, ws)


@_watchdog
def test_a_thread_calling_the_session_from_the_loop_holding_it_gets_a_typed_error(
    tmp_path: Path,
) -> None:
    """Calling the Session directly on the loop's thread while an awaited call of that
    loop holds it would wait forever (the call needs that very loop): it raises
    LoopAffinityError at once, and the awaited call completes."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))

    async def main() -> BaseException | None:
        with _store_locked(ws):
            # Its append waits for the store (not holding the fold, which reads wait for).
            task = asyncio.create_task(s.add_assistant("awaited"))
            while not _held_by_a_call(s.session):
                await asyncio.sleep(0.001)
            try:
                s.session.add_user("direct")
            except CtxBudgetError as exc:
                error: BaseException | None = exc
            else:
                error = None
        await task
        return error

    error = asyncio.run(main())
    assert isinstance(error, LoopAffinityError)
    assert "await" in str(error)
    assert _texts(ws) == ["awaited"]
    _consistent(s.session, ws)


@_watchdog
def test_async_session_accessors_work_on_the_loop_while_a_call_holds_the_session(
    tmp_path: Path,
) -> None:
    """``settled``, ``open_calls`` and the hook registry never suspend: read or swapped
    on the loop's thread while one of its calls holds the session, they answer at once
    (the call is suspended meanwhile), as they did under the thread lock."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))

    async def main() -> None:
        await s.add_assistant(None, [{"id": "c1", "name": "read_file", "arguments": {}}])
        with _store_locked(ws):
            # Its append waits for the store (not holding the fold, which reads wait for).
            task = asyncio.create_task(s.add_assistant("awaited"))
            while not _held_by_a_call(s.session):
                await asyncio.sleep(0.001)
            assert not s.settled
            assert [c.id for c in s.open_calls] == ["c1"]
            hook = s.register_hook(lambda window_id: "", context_only=True)
            s.unregister_hook(hook)
        await task
        await s.add_tool_results([{"call_id": "c1", "name": "read_file", "output": "x"}])
        assert s.settled

    asyncio.run(main())
    _consistent(s.session, ws)


@_watchdog
def test_a_stopped_loop_with_a_call_in_flight(tmp_path: Path) -> None:
    """A loop stopped (not closed) with a call in flight still owns that call: its own
    thread gets LoopAffinityError at once, called directly or from another loop
    (waiting there could never end); another thread waits until the loop runs again
    and finishes the call."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))

    loop = asyncio.new_event_loop()
    try:
        with _store_locked(ws):
            task = loop.create_task(s.add_assistant("in flight"))
            _run_until(loop, lambda: _held_by_a_call(s.session))
        with pytest.raises(LoopAffinityError):
            s.session.add_user("same thread")
        with pytest.raises(LoopAffinityError):  # nor from another loop on this thread
            asyncio.run(s.add_user("same thread, another loop"))
        other = threading.Thread(target=s.session.add_user, args=("other thread",))
        other.start()
        loop.run_until_complete(task)
        other.join()
    finally:
        loop.close()
    assert _texts(ws) == ["in flight", "other thread"]
    _consistent(s.session, ws)


# ----- cancellation ---------------------------------------------------------------------


@_watchdog
def test_a_call_cancelled_while_it_waits_for_the_session_never_writes(tmp_path: Path) -> None:
    """Cancelled while another thread holds the session, the call ends at once with
    CancelledError and writes nothing; the holder's write completes."""
    ws = tmp_path / "ws"
    session = _open(ws)
    s = AsyncSession(session)

    async def main() -> bool:
        with _store_locked(ws):
            holder = threading.Thread(target=session.add_user, args=("holder",))
            holder.start()
            while session._lock._owner is None:
                await asyncio.sleep(0.001)
            waiting = asyncio.create_task(s.add_user("cancelled"))
            while not session._lock._wakes:
                await asyncio.sleep(0.001)
            waiting.cancel()
            # Ends while the holder still holds the session (the store is still locked).
            await asyncio.wait({waiting})
            cancelled = waiting.cancelled()
        await asyncio.to_thread(holder.join)
        await s.add_user("after")
        return cancelled

    assert asyncio.run(main()) is True
    assert _user_texts(ws) == ["holder", "after"]
    _consistent(session, ws)


@_watchdog
def test_cancelled_calls_in_many_loops_lose_nothing_acknowledged(tmp_path: Path) -> None:
    """Many trials: tasks of two loops in two threads are cancelled at random points.
    Each call either returned (its message is stored, once) or raised CancelledError
    (its message is stored at most once: a call cancelled mid-write finishes it)."""
    ws = tmp_path / "ws"
    s = AsyncSession(_open(ws))
    acknowledged: list[str] = []
    cancelled: list[str] = []
    guard = threading.Lock()

    def thread_main(t: int) -> None:
        async def main() -> None:
            for r in range(8):
                tasks = [asyncio.create_task(s.add_user(f"t{t} r{r} m{i}")) for i in range(6)]
                for _ in range(r % 3):
                    await asyncio.sleep(0)
                for i in range(t, 6, 2):
                    tasks[i].cancel()
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
                with guard:
                    for i, o in enumerate(outcomes):
                        name = f"t{t} r{r} m{i}"
                        if isinstance(o, asyncio.CancelledError):
                            cancelled.append(name)
                        else:
                            assert isinstance(o, str), o
                            acknowledged.append(name)

        asyncio.run(main())

    threads = [threading.Thread(target=thread_main, args=(t,)) for t in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    texts = _user_texts(ws)
    assert len(texts) == len(set(texts))
    assert set(acknowledged) <= set(texts)
    assert set(texts) <= set(acknowledged) | set(cancelled)
    _consistent(s.session, ws)


@_watchdog
def test_loops_threads_cancels_and_a_closed_loop_all_at_once(tmp_path: Path) -> None:
    """Many trials of everything together on one session: three loops in three threads
    awaiting with random cancels, two threads calling the Session directly, and a
    fourth loop closed with a call in flight each trial. Nothing hangs, every
    acknowledged message is stored exactly once, and the session stays consistent."""
    ws = tmp_path / "ws"
    session = _open(ws)
    s = AsyncSession(session)
    acknowledged: list[str] = []
    maybe: list[str] = []  # cancelled or abandoned: stored at most once
    guard = threading.Lock()
    errors: list[BaseException] = []
    trials = 20

    def note(name: str, outcome: object) -> None:
        with guard:
            (acknowledged if isinstance(outcome, str) else maybe).append(name)

    def looper(t: int) -> None:
        async def main() -> None:
            for r in range(trials):
                names = [f"loop{t} r{r} m{i}" for i in range(5)]
                tasks = [asyncio.create_task(s.add_user(n)) for n in names]
                for _ in range((t + r) % 3):
                    await asyncio.sleep(0)
                tasks[(t + r) % 5].cancel()
                outcomes = await asyncio.gather(*tasks, return_exceptions=True)
                for name, o in zip(names, outcomes, strict=True):
                    if not isinstance(o, (str, asyncio.CancelledError)):
                        raise AssertionError(o)
                    note(name, o)
                await s.prepare()

        asyncio.run(main())

    def direct(t: int) -> None:
        for r in range(trials * 3):
            name = f"thread{t} r{r}"
            note(name, session.add_user(name))
            session.prepare()

    def closer() -> None:
        for r in range(trials):
            loop = asyncio.new_event_loop()
            name = f"closed r{r}"
            task = loop.create_task(s.add_user(name))
            with guard:
                maybe.append(name)
            loop.run_until_complete(asyncio.sleep(0.002 * (r % 3)))
            loop.close()
            del task

    def guarded(fn: Callable[[int], None], t: int) -> None:
        try:
            fn(t)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(looper, t)) for t in range(3)]
    threads += [threading.Thread(target=guarded, args=(direct, t)) for t in range(2)]
    threads.append(threading.Thread(target=guarded, args=(lambda _: closer(), 0)))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    texts = _user_texts(ws)
    assert len(texts) == len(set(texts))
    assert set(acknowledged) <= set(texts)
    assert set(texts) <= set(acknowledged) | set(maybe)
    _consistent(session, ws)
