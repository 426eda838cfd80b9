"""N concurrent conversations on one event loop, each driven by a fake async model:
steps per second and the event loop's stalls (how late a 1 ms ticker wakes up), for
``AsyncSession`` (Session code on the loop's thread, blocking core calls on the I/O
pool, no Python worker thread) next to the sync ``Session`` called through
``asyncio.to_thread`` and the sync ``Session`` called directly on the loop. Every append
is fsync'ed.

    python benches/test_bench_async.py           # prints the table (or: benches/run.py async)
    python benches/test_bench_async.py --short
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from registry import Benchmark, Result

from ctxbudget import AsyncSession, Encoding, History, Session
from ctxbudget._bridge import run as _bridged
from ctxbudget.aio import io_threads

SHORT = os.environ.get("CTXBUDGET_BENCH_SHORT") == "1"
MODEL_LATENCY = 0.010  # seconds the fake model "thinks" per step
PACE: float | None = None
"""Seconds per step of each conversation when set (benches/experiments/ab_async.py --pace): the fake
model answers when the step's slot comes, so the offered load is fixed and builds that
step faster are compared at the same load; unset, every conversation steps as fast as
the loop lets it."""
TICK = 0.001
OUTPUT = "for item in batch:\n    total += price(item) * qty(item)\n" * 12
ASYNC = "AsyncSession"
ASYNC_2 = "AsyncSession, 2 I/O threads"
MODES = (ASYNC, ASYNC_2, "Session in to_thread", "Session on the loop")
IDLE = "no conversations (machine noise)"
BARE = "reference: 3 bare write + fdatasync in to_thread"
BRIDGED = "reference: 3 store appends on the I/O pool, no Session"
IDLE_SECONDS = 2.0


def _steps(n: int, short: bool) -> int:
    if short:
        return 8 if n <= 20 else 3
    return 40 if n <= 20 else 10


async def _provider_call(step: int, started: float) -> None:
    """The fake model: ``MODEL_LATENCY``, or with ``PACE``, until the step's slot."""
    if PACE is None:
        await asyncio.sleep(MODEL_LATENCY)
    else:
        await asyncio.sleep(max(0.0, started + (step + 1) * PACE - time.perf_counter()))


class _Bare:
    """The floor of any design that does its I/O in threads: per step, three 2 KiB
    appends with ``fdatasync`` through ``asyncio.to_thread``, and no ctxbudget."""

    @staticmethod
    def _append(path: Path) -> None:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, b"x" * 2048)
            os.fdatasync(fd)
        finally:
            os.close(fd)

    async def run(self, ws: Path, steps: int, done: list[int]) -> None:
        ws.mkdir(parents=True, exist_ok=True)
        started = time.perf_counter()
        for step in range(steps):
            await _provider_call(step, started)
            for _ in range(3):
                await asyncio.to_thread(self._append, ws / "log")
            done[0] += 1


_ROW = {"kind": "message", "role": "user", "parts": [{"type": "text", "text": "x" * 2000}]}


class _BridgedAppends:
    """The floor of this design: per step, three 2 KiB appends to the store through the
    async bridge (each one I/O-pool job with its ``fdatasync``), and no ``Session`` code on
    the loop."""

    async def run(self, ws: Path, steps: int, done: list[int]) -> None:
        history = await _bridged(History.open, ws)
        started = time.perf_counter()
        for step in range(steps):
            await _provider_call(step, started)
            for _ in range(3):
                await _bridged(history.append, [_ROW])
            done[0] += 1


class _Calls:
    """How one mode makes the calls: all of them drive the same Session logic."""

    def __init__(self, mode: str) -> None:
        self.mode = mode

    async def open(self, ws: Path) -> Any:
        options: dict[str, Any] = {"model": "gpt-4o", "context_window": 128_000}
        if self.mode in (ASYNC, ASYNC_2):
            return await AsyncSession.open(ws, **options)
        if self.mode == "Session in to_thread":
            return await asyncio.to_thread(Session.open, ws, **options)
        return Session.open(ws, **options)

    async def call(self, s: Any, name: str, *args: Any) -> Any:
        method = getattr(s, name)
        if self.mode in (ASYNC, ASYNC_2):
            return await method(*args)
        if self.mode == "Session in to_thread":
            return await asyncio.to_thread(method, *args)
        return method(*args)


async def _conversation(calls: _Calls, ws: Path, steps: int, done: list[int]) -> None:
    s = await calls.open(ws)
    await calls.call(s, "add_user", "Audit the billing code and report risky loops.")
    started = time.perf_counter()
    for n in range(steps):
        turn = await calls.call(s, "prepare")
        await _provider_call(n, started)
        assert turn.status == "send"
        await calls.call(
            s, "add_assistant", None, [{"id": f"c{n}", "name": "read_file", "arguments": {}}]
        )
        await calls.call(
            s, "add_tool_results", [{"call_id": f"c{n}", "name": "read_file", "output": OUTPUT}]
        )
        done[0] += 1


async def _ticker(stop: asyncio.Event, lags: list[float]) -> None:
    while not stop.is_set():
        t = time.perf_counter()
        await asyncio.sleep(TICK)
        lags.append(max(0.0, time.perf_counter() - t - TICK))


async def _run(mode: str, n: int, steps: int, root: Path) -> dict[str, float]:
    default_threads = io_threads()[0]
    if mode == ASYNC_2:
        io_threads(2)
    calls = _Calls(mode)
    lags: list[float] = []
    done = [0]
    stop = asyncio.Event()
    ticker = asyncio.create_task(_ticker(stop, lags))
    await asyncio.sleep(0.05)  # the ticker is running
    start = time.perf_counter()
    loop_cpu = time.thread_time()
    if mode == IDLE:
        await asyncio.sleep(IDLE_SECONDS)
    elif mode == BARE:
        await asyncio.gather(*(_Bare().run(root / f"ws{i}", steps, done) for i in range(n)))
    elif mode == BRIDGED:
        runs = (_BridgedAppends().run(root / f"ws{i}", steps, done) for i in range(n))
        await asyncio.gather(*runs)
    else:
        await asyncio.gather(
            *(_conversation(calls, root / f"ws{i}", steps, done) for i in range(n))
        )
    elapsed = time.perf_counter() - start
    loop_cpu = time.thread_time() - loop_cpu
    stop.set()
    await ticker
    io_threads(default_threads)
    lags.sort()

    def pct(q: float) -> float:
        return lags[min(len(lags) - 1, int(q * len(lags)))]

    return {
        "steps_per_s": done[0] / elapsed,
        # CPU time of the loop's thread per step: the work it cannot hand to others.
        "loop_cpu_per_step": loop_cpu / max(done[0], 1),
        "p50": pct(0.50),
        "p99": pct(0.99),
        "max": lags[-1],
        "ticks": float(len(lags)),
    }


def measure(short: bool = SHORT) -> list[dict[str, Any]]:
    """Every mode at N = 20 and N = 200, in one run (side by side)."""
    Encoding.for_model("gpt-4o")  # the tokenizer is loaded once per process, before timing
    rows: list[dict[str, Any]] = []
    idle = asyncio.run(_run(IDLE, 0, 0, Path(tempfile.gettempdir())))
    rows.append({"mode": IDLE, "n": 0, "steps": 0, **idle})
    for n in (20, 200):
        steps = _steps(n, short)
        for mode in (*MODES, BARE, BRIDGED):
            root = Path(tempfile.mkdtemp(prefix="ctxb-async-"))
            try:
                figures = asyncio.run(_run(mode, n, steps, root))
            finally:
                shutil.rmtree(root, ignore_errors=True)
            rows.append({"mode": mode, "n": n, "steps": steps, **figures})
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = [
        "| conversations × steps | API | steps/s | loop CPU/step | loop stall p50 | p99 | max |",
        "|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        shape = f"{r['n']} × {r['steps']}" if r["n"] else "-"
        rate = f"{r['steps_per_s']:,.0f}" if r["n"] else "-"
        cpu = f"{r['loop_cpu_per_step'] * 1e6:,.0f} µs" if r["n"] else "-"
        lines.append(
            f"| {shape} | {r['mode']} | {rate} | {cpu} | "
            f"{r['p50'] * 1e3:.3f} ms | {r['p99'] * 1e3:.3f} ms | {r['max'] * 1e3:.2f} ms |"
        )
    return "\n".join(lines)


def test_async_conversations(benchmark: Any) -> None:
    rows = measure()
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["rows"] = rows


def _table(results: list[Result]) -> str:
    return "\n\n".join(table(r.info["rows"]) for r in results)


BENCHMARK = Benchmark(
    topic="async",
    title="Concurrent conversations on one event loop",
    about=(
        "20 conversations × 40 steps and 200 × 10 (fewer steps in short mode) on one event "
        "loop, each step awaiting a fake 10 ms model and making the loop's three calls "
        "(`prepare`, `add_assistant`, `add_tool_results`) with `fdatasync`; a 1 ms ticker "
        "measures how late the loop wakes up. `AsyncSession` runs beside the sync `Session` "
        "in `asyncio.to_thread` and on the loop, and two floors that run no `Session` code: "
        "three bare `write` + `fdatasync` per step in `to_thread`, and three store appends "
        "on ctxbudget's I/O pool."
    ),
    table=_table,
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--short", action="store_true", help="fewer steps (CI)")
    args = parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}, {os.cpu_count()} CPUs")
    print(table(measure(short=args.short)))


if __name__ == "__main__":
    main()
