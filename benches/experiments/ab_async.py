"""A/B comparison of builds of ctxbudget on the async bench (concurrent conversations and
the event loop's stalls), run alternately so that machine noise hits them alike:

    python benches/experiments/ab_async.py [--rounds N] [--pace S] SRC [SRC ...]

Each ``SRC`` is a directory holding a built ``ctxbudget`` package (its ``python/``
directory after ``maturin develop``, or an unpacked wheel); all run on this interpreter.
Each round runs, in a fresh process per build (the order rotates from round to round),
the ``AsyncSession`` rows of ``benches/test_bench_async.py`` (4 and 2 I/O threads,
20 × 40 and 200 × 10, ``fdatasync``) and its two references (bare threads; store appends
on the I/O pool). Prints, per row, the median over rounds of each figure for each build.

By default the fake model answers in 10 ms, as in the bench: every conversation steps as
fast as the loop lets it, so a build that steps faster also loads the loop more (more
``fdatasync``s and allocations per second). ``--pace S`` fixes the offered load instead:
each conversation takes a step every S seconds at 20 conversations and every 10 × S at
200 (``test_bench_async.PACE``), so builds are compared at the same steps/s as long as
each can serve it (S = 0.05 offers 400 steps/s). Timing only: it never fails.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

BENCHES = Path(__file__).resolve().parents[1]  # test_bench_async.py

PROBE = r"""
import asyncio, json, shutil, sys, tempfile
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import test_bench_async as b
from ctxbudget import Encoding
pace = float(sys.argv[2])
Encoding.for_model("gpt-4o")
out = {}
for n in (20, 200):
    if pace > 0:
        b.PACE = pace * (10 if n > 20 else 1)
    for mode in (b.ASYNC, b.ASYNC_2, b.BARE, b.BRIDGED):
        root = Path(tempfile.mkdtemp(prefix="ctxb-ab-async-"))
        try:
            out[f"{n} x {b._steps(n, False)} | {mode}"] = asyncio.run(
                b._run(mode, n, b._steps(n, False), root))
        finally:
            shutil.rmtree(root, ignore_errors=True)
print(json.dumps(out))
"""

FIGURES = (
    ("steps_per_s", "steps/s", 1.0, "{:,.0f}"),
    ("loop_cpu_per_step", "loop CPU/step µs", 1e6, "{:,.0f}"),
    ("p50", "p50 ms", 1e3, "{:.3f}"),
    ("p99", "p99 ms", 1e3, "{:.3f}"),
    ("max", "max ms", 1e3, "{:.2f}"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs="+", metavar="SRC")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pace", type=float, default=0.0)
    args = parser.parse_args()
    builds: list[str] = args.builds
    runs: dict[str, list[dict[str, dict[str, float]]]] = {src: [] for src in builds}
    for r in range(args.rounds):
        for src in builds[r % len(builds) :] + builds[: r % len(builds)]:
            env = {**os.environ, "PYTHONPATH": src}
            done = subprocess.run(
                [sys.executable, "-c", PROBE, str(BENCHES), str(args.pace)],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                print(f"{src} failed:\n{done.stderr}", file=sys.stderr)
                return 1
            runs[src].append(json.loads(done.stdout.splitlines()[-1]))
    load = f"paced, a step every {args.pace} s" if args.pace else "fake model 10 ms (bench)"
    print(f"{args.rounds} rotating rounds, medians; {load}")
    print("| row | build | " + " | ".join(label for _, label, _, _ in FIGURES) + " |")
    print("|---|---|" + "---|" * len(FIGURES))
    for row in runs[builds[0]][0]:
        for src in builds:
            cells = []
            for key, _, scale, fmt in FIGURES:
                median = statistics.median(run[row][key] for run in runs[src])
                cells.append(fmt.format(median * scale))
            print(f"| {row} | {src} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
