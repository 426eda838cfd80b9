"""Attacks on the async bridge's greenlets (``ctxbudget._bridge``): each test is one
defect found (most in the scheduler with kept worker greenlets that the task-driven
bridge replaced), and names the behaviour it expects. A call that would hang
is given a deadline instead of hanging the test run."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import greenlet

from ctxbudget import History, _bridge

_DEADLINE = 3.0


def _run_on(loop: asyncio.AbstractEventLoop, make: Callable[[], Awaitable[Any]]) -> Any:
    """Runs ``make()`` on ``loop`` as a task and returns its result; fails (instead of
    hanging, and without cancelling it: a bridged call waits for its call to end) when
    it is not done within the deadline."""

    async def wrapper() -> Any:
        return await make()

    task = loop.create_task(wrapper())
    loop.run_until_complete(asyncio.wait({task}, timeout=_DEADLINE))
    assert task.done(), "the awaited call never finished"
    return task.result()


def _run(make: Callable[[], Awaitable[Any]]) -> Any:
    loop = asyncio.new_event_loop()
    try:
        return _run_on(loop, make)
    finally:
        loop.close()


def _user_row(text: str) -> dict[str, Any]:
    return {"kind": "message", "role": "user", "parts": [{"type": "text", "text": text}]}


def test_a_call_raising_greenlet_exit_propagates_it_instead_of_hanging() -> None:
    """A GreenletExit raised by the called function reaches the awaiting task like any
    other exception (the worker's death must not be taken for a pending job)."""

    def raises() -> None:
        raise greenlet.GreenletExit("from the call")

    async def main() -> str:
        try:
            await _bridge.run(raises)
        except greenlet.GreenletExit as exc:
            return str(exc)
        return "returned"

    assert _run(main) == "from the call"
    assert _run(lambda: _bridge.run(lambda: 7)) == 7  # the next call is served


def test_a_loop_run_again_in_another_thread_still_serves_calls() -> None:
    """An event loop may be run in one thread and later in another (never both at
    once); bridged calls work in both (idle workers of the first thread can't run in
    the second)."""
    loop = asyncio.new_event_loop()
    try:
        assert _run_on(loop, lambda: _bridge.run(lambda: 1)) == 1
        outcome: list[Any] = []

        def other_thread() -> None:
            try:
                outcome.append(_run_on(loop, lambda: _bridge.run(lambda: 2)))
            except BaseException as exc:  # reported below
                outcome.append(exc)

        t = threading.Thread(target=other_thread)
        t.start()
        t.join()
        assert outcome == [2]
    finally:
        loop.close()


def test_a_greenlet_made_in_a_call_can_be_finished_after_the_call() -> None:
    """A greenlet created inside a call (its parent is the call's greenlet) may be
    switched to and run to its end after the call returned: its result goes to the
    code that switched to it, and later calls are unaffected (the idle worker it
    falls back into must not take it for a new call)."""

    def make() -> tuple[greenlet.greenlet, Any]:
        def body() -> str:
            parent = greenlet.getcurrent().parent
            assert parent is not None
            parent.switch("first")
            return "second"

        g = greenlet.greenlet(body)
        return g, g.switch()

    async def main() -> tuple[Any, Any, int]:
        g, first = await _bridge.run(make)
        second = g.switch()
        return first, second, await _bridge.run(lambda: 7)

    assert _run(main) == ("first", "second", 7)


def test_a_blocking_call_in_a_greenlet_made_inside_a_call_is_bridged(tmp_path: Path) -> None:
    """A blocking core call made from a greenlet that the called function switched to
    (its own helper greenlet) returns its result; it must not raise "entered outside a
    bridged call" after the job was already queued (and so done: the row is written)."""
    history = History.open(tmp_path / "ws", durability="none")

    def in_a_helper_greenlet() -> Any:
        return greenlet.greenlet(lambda: history.append([_user_row("a")])).switch()

    _run(lambda: _bridge.run(in_a_helper_greenlet))
    assert [r.parts[0]["text"] for r in history.rows() if r.kind == "message"] == ["a"]


def test_a_loop_closed_with_a_call_in_flight_is_freed(tmp_path: Path) -> None:
    """A loop closed (not by asyncio.run) while a call waits for its I/O is freed with
    its bridge once dropped: the bridge's calls must not keep it alive (today the
    module's WeakKeyDictionary value -> call -> waiter future -> task -> loop chain
    keeps the loop, its completion socket pair and the suspended worker forever)."""
    import fcntl
    import gc
    import time
    import weakref

    history = History.open(tmp_path / "ws", durability="none")
    history.append([_user_row("a")])
    loop = asyncio.new_event_loop()
    with open(tmp_path / "ws" / "history" / "lock", "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        task = loop.create_task(_bridge.run(history.append, [_user_row("b")]))
        loop.run_until_complete(asyncio.sleep(0.05))
        loop.close()
        del task
        fcntl.flock(lock, fcntl.LOCK_UN)
    time.sleep(0.3)  # the job in flight ends
    dropped = weakref.ref(loop)
    del loop
    gc.collect()
    assert dropped() is None
