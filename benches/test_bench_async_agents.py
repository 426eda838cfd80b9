"""50 ``AgentsSession``s in one event loop, as a Runner drives them: the loop's longest
stall with the store calls in worker threads (as shipped) beside the very same calls made
synchronously inside the coroutines (what an integration without worker threads does)."""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from registry import Benchmark, Result, markdown

from ctxbudget import Session
from ctxbudget.integrations.agents import AgentsSession

from conftest import SHORT

SESSIONS = 50


async def _measure(work: Callable[[], Awaitable[Any]]) -> tuple[float, float, float]:
    """(longest stall, median tick gap, wall time) in milliseconds."""
    gaps: list[float] = []
    done = asyncio.Event()

    async def ticker() -> None:
        last = time.perf_counter()
        while not done.is_set():
            await asyncio.sleep(0.001)
            now = time.perf_counter()
            gaps.append(now - last)
            last = now

    tick = asyncio.create_task(ticker())
    start = time.perf_counter()
    await work()
    wall = time.perf_counter() - start
    done.set()
    await tick
    return max(gaps) * 1e3, statistics.median(gaps) * 1e3, wall * 1e3


def _sessions(root: Path, tag: str) -> list[AgentsSession]:
    return [
        AgentsSession(Session.open(root / f"{tag}{n}", model="gpt-4o", durability="fsync"))
        for n in range(SESSIONS)
    ]


async def _threaded(sessions: list[AgentsSession], turns: int) -> None:
    async def one(s: AgentsSession, n: int) -> None:
        for k in range(turns):
            await s.add_items([{"role": "user", "content": f"question {n}.{k}"}])
            await s.add_items([{"role": "assistant", "content": f"answer {n}.{k}"}])
            await s.get_items(limit=4)

    await asyncio.gather(*(one(s, n) for n, s in enumerate(sessions)))


def _row(role: str, text: str) -> dict[str, Any]:
    return {"kind": "message", "role": role, "parts": [{"type": "text", "text": text}]}


async def _on_loop(sessions: list[AgentsSession], turns: int) -> None:
    """The same store work per turn, made synchronously inside the coroutines through
    the public ``Session`` calls an ``AgentsSession`` makes: two appends and a read of
    the window."""

    async def one(s: AgentsSession, n: int) -> None:
        for k in range(turns):
            s.session.append_turn([_row("user", f"question {n}.{k}")])
            await asyncio.sleep(0)
            s.session.append_turn([_row("assistant", f"answer {n}.{k}")])
            await asyncio.sleep(0)
            s.session.view(refresh=True)
            await asyncio.sleep(0)

    await asyncio.gather(*(one(s, n) for n, s in enumerate(sessions)))


def test_agents_sessions_loop_stall(benchmark: Any) -> None:
    turns = 5 if SHORT else 20
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        threaded_sessions, loop_sessions = _sessions(root, "t"), _sessions(root, "l")
        threaded = asyncio.run(_measure(lambda: _threaded(threaded_sessions, turns)))
        on_loop = asyncio.run(_measure(lambda: _on_loop(loop_sessions, turns)))
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info.update(
        turns=turns, rows={"worker thread": threaded, "on the loop": on_loop}
    )


def table(results: list[Result]) -> str:
    rows = []
    for r in results:
        for name, (stall, median, wall) in r.info["rows"].items():
            rows.append(
                [
                    f"{SESSIONS} × {r.info['turns']}",
                    name,
                    f"{stall:,.1f} ms",
                    f"{median:.2f} ms",
                    f"{wall:,.0f} ms",
                ]
            )
    return markdown(
        ["sessions × turns", "store I/O", "longest loop stall", "median tick gap", "wall time"],
        rows,
    )


BENCHMARK = Benchmark(
    topic="async",
    title="Agents SDK sessions on one event loop",
    about=(
        "50 `AgentsSession`s × 20 turns (5 in short mode), each turn `add_items` (user), "
        "`add_items` (assistant) and `get_items(limit=4)` with `fsync` durability, all "
        "concurrent on one loop; a 1 ms ticker measures the gaps. *worker thread* is "
        "`AgentsSession` as shipped, *on the loop* makes the same store calls (two appends, "
        "a read of the window) synchronously inside the coroutines."
    ),
    table=table,
)
