"""SessionHistoryTool.call (dict in, dict out, built by the core) beside call_json (JSON
text in and out) on the same store, interleaved call by call so that machine noise hits
both alike. Run: python benches/call_vs_call_json.py"""

from __future__ import annotations

import json
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

import ctxbudget

CASES: list[dict[str, Any]] = [
    {"action": "search", "query": "ipsum"},
    {"action": "list_items", "limit": 25},
    {"action": "list_windows"},
    {"action": "search", "query": "zzzq"},
]


def _timed(fn: Callable[[], object]) -> float:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def main() -> None:
    h = ctxbudget.History.open(tempfile.mkdtemp(), durability="none")
    for i in range(50):
        text = f"row {i} " + "lorem ipsum " * 40
        row = {"kind": "message", "role": "user", "parts": [{"type": "text", "text": text}]}
        h.append([row] * 10)
    tool = ctxbudget.SessionHistoryTool(h)
    print("| call | call p50 µs | call_json p50 µs | call ÷ call_json |")
    print("|---|---|---|---|")
    for args in CASES:
        text = json.dumps(args)
        as_dict: list[float] = []
        as_text: list[float] = []
        pair = [
            (as_dict, lambda a=args: tool.call(a)),
            (as_text, lambda t=text: tool.call_json(t)),
        ]
        for i in range(2_000):
            for samples, fn in pair if i % 2 else reversed(pair):
                samples.append(_timed(fn))
        a, b = statistics.median(as_dict), statistics.median(as_text)
        print(f"| {text} | {a * 1e6:.1f} | {b * 1e6:.1f} | {a / b:.2f}× |")


if __name__ == "__main__":
    main()
