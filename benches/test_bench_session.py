"""A 1,000-step scripted session on a 128k window: prepare() latency, the share spent
counting, and the whole session against the time spent appending (fsync) to the store
(every write of a Session goes through its window fold: the append and the read of what
it wrote, one store call)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from registry import Benchmark, Result, duration, markdown, ratio

from ctxbudget import Session
from ctxbudget.window import WindowFold

from conftest import SHORT

STEPS = 200 if SHORT else 1_000
OUTPUT = "for item in batch:\n    total += price(item) * qty(item)  # line {n}\n" * 12


def _percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def test_session_steps(benchmark: Any, tmp_path: Path) -> None:
    s = Session.open(
        tmp_path / "ws",
        model="gpt-4o",
        context_window=128_000,
        durability="fsync",
        system="You are a careful code auditor.",
    )
    counting = [0.0]
    appending = [0.0]
    count_request = s.count_request
    append = WindowFold.append

    def timed_count(*a: Any, **kw: Any) -> int:
        t = time.perf_counter()
        try:
            return count_request(*a, **kw)
        finally:
            counting[0] += time.perf_counter() - t

    def timed_append(self: WindowFold, rows: Any, *a: Any, **kw: Any) -> Any:
        t = time.perf_counter()
        try:
            return append(self, rows, **kw)
        finally:
            appending[0] += time.perf_counter() - t

    s.count_request = timed_count  # type: ignore[method-assign]
    WindowFold.append = timed_append  # type: ignore[method-assign]
    prepare_times: list[float] = []
    rollovers = 0
    try:
        s.add_user("Audit the billing code and report risky loops.")
        start = time.perf_counter()
        for n in range(STEPS):
            t = time.perf_counter()
            turn = s.prepare()
            prepare_times.append(time.perf_counter() - t)
            rollovers += sum(e.startswith("rollover") for e in turn.events)
            s.add_assistant(None, [{"id": f"c{n}", "name": "read_file", "arguments": {"n": n}}])
            s.add_tool_results(
                [{"call_id": f"c{n}", "name": "read_file", "output": OUTPUT.format(n=n)}]
            )
        total = time.perf_counter() - start
    finally:
        WindowFold.append = append  # type: ignore[method-assign]
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info.update(
        steps=STEPS,
        rollovers=rollovers,
        p50=_percentile(prepare_times, 0.5),
        p99=_percentile(prepare_times, 0.99),
        counting_share=counting[0] / sum(prepare_times),
        session=total,
        appends=appending[0],
    )


def table(results: list[Result]) -> str:
    rows = []
    for r in results:
        i = r.info
        rows.append(
            [
                f"{i['steps']:,} steps, {i['rollovers']} rollovers",
                duration(i["p50"]),
                duration(i["p99"]),
                f"{i['counting_share'] * 100:.1f}%",
                f"{i['session']:.2f} s",
                f"{i['appends']:.2f} s",
                ratio(i["session"] / i["appends"]),
            ]
        )
    return markdown(
        [
            "session (128k window, fsync)",
            "prepare p50",
            "prepare p99",
            "counting ÷ prepare",
            "whole session",
            "its store appends",
            "session ÷ appends",
        ],
        rows,
    )


BENCHMARK = Benchmark(
    topic="session",
    title="An agent loop's steps through Session",
    about=(
        "A scripted session on a 128k window with `fsync` durability: per step `prepare()`, "
        "an assistant tool call and a 24-line tool result, for 1,000 steps (200 in short "
        "mode) and the forced rollovers they cause. The session's whole time is set beside "
        "the time its store appends took (each write and the read of what it wrote is one "
        "store call), which no agent loop can avoid."
    ),
    table=table,
)
