"""``_bridge.run_off_loop`` (``AgentsSession``'s path): the call runs in a worker thread,
never on the loop's; cancelled in flight it finishes, then ``CancelledError`` is raised;
what it asks the loop to await (a host's async count endpoint) is awaited there."""

from __future__ import annotations

import asyncio
import threading

import pytest

from ctxbudget import _bridge


def test_a_cancelled_call_finishes_then_raises() -> None:
    started, release = threading.Event(), threading.Event()
    finished: list[str] = []

    def work() -> str:
        started.set()
        release.wait(10)
        finished.append(threading.current_thread().name)
        return "done"

    async def main() -> None:
        loop_thread = threading.current_thread().name
        task = asyncio.create_task(_bridge.run_off_loop(work))
        await asyncio.to_thread(started.wait, 10)
        task.cancel()
        await asyncio.sleep(0.01)
        assert not task.done(), "the call is still running: the task waits for it"
        release.set()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert finished and finished[0] != loop_thread

    asyncio.run(main())


def test_await_only_inside_it_is_awaited_by_the_loop() -> None:
    async def endpoint() -> int:
        await asyncio.sleep(0)
        return threading.get_ident()

    def work() -> tuple[int, int]:
        return threading.get_ident(), _bridge.await_only(endpoint())

    async def main() -> None:
        worker, awaited_on = await _bridge.run_off_loop(work)
        assert awaited_on == threading.get_ident() != worker

    asyncio.run(main())


def test_its_errors_propagate_unchanged() -> None:
    def fail() -> None:
        raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        asyncio.run(_bridge.run_off_loop(fail))
