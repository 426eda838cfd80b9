"""50 AgentsSessions in one event loop: the loop's longest stall, side by side.

    python benches/agents_loop_stall.py            # 50 sessions x 20 turns, fsync
    python benches/agents_loop_stall.py --short    # 50 sessions x 5 turns

Each session appends a user and an assistant item and reads its last 4 items per turn,
as a Runner does. "worker thread" is AgentsSession as shipped (store I/O off the loop);
"on the loop" makes the very same calls synchronously inside the coroutines, which is
what an integration without worker threads does. A 1 ms ticker measures how long the
loop went without running. Prints a Markdown table; never fails on timing.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from ctxbudget import Session
from ctxbudget.integrations.agents import AgentsSession

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


async def _on_loop(sessions: list[AgentsSession], turns: int) -> None:
    async def one(s: AgentsSession, n: int) -> None:
        for k in range(turns):
            s._add_items([{"role": "user", "content": f"question {n}.{k}"}])
            await asyncio.sleep(0)
            s._add_items([{"role": "assistant", "content": f"answer {n}.{k}"}])
            await asyncio.sleep(0)
            s._get_items(4)
            await asyncio.sleep(0)

    await asyncio.gather(*(one(s, n) for n, s in enumerate(sessions)))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--short", action="store_true")
    turns = 5 if parser.parse_args().short else 20
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        threaded_sessions, loop_sessions = _sessions(root, "t"), _sessions(root, "l")
        threaded = asyncio.run(_measure(lambda: _threaded(threaded_sessions, turns)))
        on_loop = asyncio.run(_measure(lambda: _on_loop(loop_sessions, turns)))
    print(f"{SESSIONS} sessions x {turns} turns (3 store calls each), durability=fsync\n")
    print("| store I/O | longest loop stall | median tick gap | wall time |")
    print("|---|---|---|---|")
    for name, (stall, median, wall) in (("worker thread", threaded), ("on the loop", on_loop)):
        print(f"| {name} | {stall:,.1f} ms | {median:.2f} ms | {wall:,.0f} ms |")
    print(f"\nstall ratio (on the loop / worker thread): {on_loop[0] / threaded[0]:.1f}x")


if __name__ == "__main__":
    main()
