"""session_history's cheap calls: listing the windows of a full scan budget, and reading a
1 MiB row page by page."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from registry import Benchmark, latency_table, percentiles

from ctxbudget import History, SessionHistoryTool

from conftest import SHORT


def test_list_windows_500_rows(benchmark: Any, tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none")
    for w in range(25):
        rows = [
            {"kind": "message", "role": "user", "parts": [{"type": "text", "text": f"w{w} m{i}"}]}
            for i in range(19)
        ]
        h.append(rows)
        h.rollover(rollover_id=f"r{w}", reason="usable_limit", lead_in="lead-in")
    tool = SessionHistoryTool(h)
    benchmark.pedantic(
        tool.call, args=({"action": "list_windows", "limit": 50},), rounds=50 if SHORT else 300
    )
    p50, p99 = percentiles(benchmark.stats.stats.data)
    benchmark.extra_info.update(call="list_windows over 25 windows, 500 rows", p50=p50, p99=p99)


def test_read_item_1_mib_row_page_by_page(benchmark: Any, tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none")
    text = ("0123456789abcdef" * 65_000)[:1_000_000]
    h.append([{"kind": "message", "role": "tool", "parts": [{"type": "text", "text": text}]}])
    tool = SessionHistoryTool(h)
    samples: list[float] = []
    rounds = 1 if SHORT else 3

    def read_all() -> None:
        offset = 0
        while True:
            start = time.perf_counter()
            r = tool.call(
                {
                    "action": "read_item",
                    "item_id": "1",
                    "offset_chars": offset,
                    "limit_chars": 16_000,
                }
            )
            samples.append(time.perf_counter() - start)
            item = r["items"][0]
            if "next_char" not in item:
                break
            offset = item["next_char"]

    benchmark.pedantic(read_all, rounds=rounds)
    p50, p99 = percentiles(samples)
    pages = len(samples) // rounds
    benchmark.extra_info.update(
        call=f"read_item of a 1 MiB row, one of its {pages} pages", p50=p50, p99=p99
    )


BENCHMARK = Benchmark(
    topic="session_history",
    title="Listing windows and reading a large row",
    about=(
        "Per-call latency of `list_windows` over 25 windows of 20 rows, and of `read_item` "
        "walking a 1 MiB tool output 16,000 characters at a time through its "
        "`next_char` offsets. Absolute figures: nothing runs beside them."
    ),
    table=latency_table,
)
