"""AsyncSession: the same Session logic, with every store write and count run off the
event loop; many concurrent conversations; one conversation shared by tasks."""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import AsyncSession, History, Session

OUTPUT = "def charge(card):\n    return gateway.post(card)\n" * 30


def _fake_model(turn: Any, n: int) -> tuple[str | None, list[dict[str, Any]]]:
    """Reads files until the handoff advisory, then hands off."""
    if {"advisory:handoff", "advisory:final"} & set(turn.events):
        return "Saving.", [{"id": f"n{n}", "name": "new_context", "arguments": {}}]
    return None, [{"id": f"r{n}", "name": "read_file", "arguments": {"n": n}}]


async def _conversation(ws: Path, executor: Any = None) -> list[str]:
    s = await AsyncSession.open(
        ws,
        model="gpt-4o",
        context_window=40_000,
        threshold=0.5,
        durability="none",
        executor=executor,
    )
    await s.add_user("Audit the billing code.")
    events: list[str] = []
    for n in range(200):
        turn = await s.prepare()
        events += turn.events
        if turn.window_id != "w:0":
            return events
        text, calls = _fake_model(turn, n)
        await s.add_assistant(text, calls)
        results = []
        for c in calls:
            if c["name"] == "new_context":
                output = await s.run_tool(c["name"], c["arguments"])
            else:
                output = OUTPUT
            results.append({"call_id": c["id"], "name": c["name"], "output": output})
        await s.add_tool_results(results)
    raise AssertionError("never handed off")


def test_concurrent_async_conversations_hand_off(tmp_path: Path) -> None:
    async def main() -> list[list[str]]:
        return await asyncio.gather(*(_conversation(tmp_path / f"ws{i}") for i in range(20)))

    all_events = asyncio.run(main())
    for i, events in enumerate(all_events):
        assert events.count("advisory:warning") == 1 and events.count("advisory:handoff") == 1
        assert "advisory:final" not in events
        (b,) = [r for r in History.open(tmp_path / f"ws{i}").rows() if r.kind == "boundary"]
        assert b.meta["requested_by"] == "model"


def test_work_runs_off_the_loop_thread(tmp_path: Path) -> None:
    seen: list[int] = []

    async def main() -> int:
        s = await AsyncSession.open(tmp_path / "ws", context_window=64_000, durability="none")
        s.register_hook(lambda window: seen.append(threading.get_ident()) or "", context_only=True)
        await s.add_user("hi")
        await s.prepare()
        return threading.get_ident()

    loop_thread = asyncio.run(main())
    assert seen and loop_thread not in seen


def test_a_given_executor_is_used(tmp_path: Path) -> None:
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxb") as pool:
        names: list[str] = []

        async def main() -> None:
            s = await AsyncSession.open(
                tmp_path / "ws", context_window=64_000, durability="none", executor=pool
            )
            s.register_hook(
                lambda window: names.append(threading.current_thread().name) or "",
                context_only=True,
            )
            await s.add_user("hi")
            await s.prepare()

        asyncio.run(main())
    assert names and all(n.startswith("ctxb") for n in names)


def test_tasks_sharing_one_conversation(tmp_path: Path) -> None:
    async def main() -> tuple[Any, Any]:
        s = await AsyncSession.open(tmp_path / "ws", context_window=400_000, durability="none")

        async def worker(w: int) -> None:
            for i in range(25):
                await s.add_user(f"task {w} message {i}")
                await s.prepare()

        await asyncio.gather(*(worker(w) for w in range(8)))
        return await s.prepare(), s

    turn, _ = asyncio.run(main())
    fresh = Session.open(tmp_path / "ws", context_window=400_000, durability="none").prepare()
    ids = [m["item_id"] for m in turn.messages]
    assert len(ids) == len(set(ids)) == 200
    assert turn.messages == fresh.messages
    assert turn.decision.projected == fresh.decision.projected


def test_wraps_only_sessions() -> None:
    with pytest.raises(TypeError, match="wraps a Session"):
        AsyncSession(object())  # type: ignore[arg-type]
