"""A/B comparison of two builds of ctxbudget (two virtualenvs) on the store's hot paths,
run alternately in one session so that machine noise hits both alike:

    python benches/experiments/ab_store.py OLD_PYTHON NEW_PYTHON [ROUNDS]

Each round runs, in a fresh process per build: 2,000 single-row appends (durability
``none``, rows of about 2 KiB) to a 16 MiB transcript, 300 twenty-row appends, and 300
no-match searches over a full 2 MiB / 500-row budget. Prints the per-round medians and
the median over rounds, per build, with the NEW ÷ OLD ratio. Timing only: it never fails.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys

PROBE = r"""
import json, statistics, sys, tempfile, time
from ctxbudget import History, SessionHistoryTool

def row(i, size=2000):
    return {"kind": "message", "role": "user",
            "parts": [{"type": "text", "text": f"row {i} " + "lorem ipsum " * (size // 12)}],
            "meta": {}}

out = {}
with tempfile.TemporaryDirectory() as ws:
    h = History.open(ws, durability="none")
    batch = [row(i) for i in range(400)]
    h.append(batch)
    while (h.directory / "chat.jsonl").stat().st_size < 16 << 20:
        h.append(batch)
    times = []
    for i in range(2000):
        t = time.perf_counter(); h.append([row(i)]); times.append(time.perf_counter() - t)
    out["append 1 row, 16 MiB, none"] = statistics.median(times)
    times = []
    rows20 = [row(i) for i in range(20)]
    for i in range(300):
        t = time.perf_counter(); h.append(rows20); times.append(time.perf_counter() - t)
    out["append 20 rows, 16 MiB, none"] = statistics.median(times)
with tempfile.TemporaryDirectory() as ws:
    h = History.open(ws, durability="none")
    h.append([row(i, 4000) for i in range(500)])
    tool = SessionHistoryTool(h)
    args = {"action": "search", "query": "zebra quartz", "limit": 25}
    times = []
    for i in range(300):
        t = time.perf_counter(); tool.call(args); times.append(time.perf_counter() - t)
    out["no-match search, 2 MiB / 500 rows"] = statistics.median(times)
print(json.dumps(out))
"""


def main() -> int:
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    results: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for r in range(rounds):
        for name, python in (
            (("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old))
        ):
            done = subprocess.run(
                [python, "-c", PROBE], capture_output=True, text=True, check=False
            )
            if done.returncode != 0:
                sys.stderr.write(done.stderr)
                return 1
            for measure, seconds in json.loads(done.stdout).items():
                results[name].setdefault(measure, []).append(seconds)
    print("| measure (median of per-round medians) | old µs | new µs | new ÷ old |")
    print("|---|---|---|---|")
    for measure, olds in results["old"].items():
        o = statistics.median(olds) * 1e6
        n = statistics.median(results["new"][measure]) * 1e6
        print(f"| {measure} | {o:.1f} | {n:.1f} | {n / o:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
