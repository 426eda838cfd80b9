"""A/B comparison of builds of ctxbudget on one event loop (concurrent conversations and
the loop's stalls), run alternately so that machine noise hits them alike:

    python benches/experiments/ab_async.py [--rounds N] [--pace S] [--only KIND] SRC [SRC ...]

Each ``SRC`` is a directory holding a built ``ctxbudget`` package (its ``python/``
directory after ``maturin develop``, or an unpacked wheel); all run on this interpreter.
Each round runs, in a fresh process per build (the order rotates from round to round),
at 20 and 200 conversations:

- ``AsyncSession``: the conversations of ``benches/test_bench_async.py`` (20 × 40 and
  200 × 10 steps; a step is ``prepare``, the fake model, ``add_assistant``,
  ``add_tool_results``, with ``fdatasync``);
- ``AgentsSession``: the turns of ``benches/test_bench_async_agents.py`` (20 × 20 and
  200 × 5; a turn is ``add_items`` twice and ``get_items(limit=4)``, ``fsync``, no
  model wait: every session goes as fast as the loop and the disk let it);
- the floor of ``test_bench_async.py`` that runs no ctxbudget code (three bare
  ``write`` + ``fdatasync`` per step in ``asyncio.to_thread``): the same in every build,
  so it shows what the machine did in that round.

Figures per row: wall time, steps (turns) per second, CPU time per step of the loop's
thread and of the whole process (the loop, the I/O pool, worker threads), and how late
a 1 ms ticker woke up (p99, max: the loop's stalls). Prints, per row, the median over
rounds of each figure for each build, and each build's ratio to the first.

By default the fake model answers in 10 ms, as in the bench. ``--pace S`` fixes the
offered load of the ``AsyncSession`` rows instead: each conversation takes a step every
S seconds at 20 conversations and every 10 × S at 200 (``test_bench_async.PACE``).
Timing only: it never fails.
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
import asyncio, json, shutil, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import test_bench_async as b
from ctxbudget import Encoding, Session
from ctxbudget.integrations.agents import AgentsSession
pace, only = float(sys.argv[2]), sys.argv[3]
Encoding.for_model("gpt-4o")

async def agents_turns(s, turns, done):
    for k in range(turns):
        await s.add_items([{"role": "user", "content": f"question {k}"}])
        await s.add_items([{"role": "assistant", "content": f"answer {k}"}])
        await s.get_items(limit=4)
        done[0] += 1

async def measure(kind, n, root):
    done = [0]
    if kind == "AsyncSession":
        steps = b._steps(n, False)
        calls = b._Calls(b.ASYNC)
        work = [b._conversation(calls, root / f"ws{i}", steps, done) for i in range(n)]
    elif kind == "AgentsSession":
        turns = 20 if n <= 20 else 5
        sessions = [
            AgentsSession(Session.open(root / f"ws{i}", model="gpt-4o", durability="fsync"))
            for i in range(n)
        ]  # opened before the clock starts, as in the bench
        work = [agents_turns(s, turns, done) for s in sessions]
    else:
        steps = b._steps(n, False)
        work = [b._Bare().run(root / f"ws{i}", steps, done) for i in range(n)]
    lags, stop = [], asyncio.Event()
    ticker = asyncio.create_task(b._ticker(stop, lags))
    await asyncio.sleep(0.05)
    wall, cpu, loop_cpu = time.perf_counter(), time.process_time(), time.thread_time()
    await asyncio.gather(*work)
    loop_cpu = time.thread_time() - loop_cpu
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    stop.set()
    await ticker
    lags.sort()
    return {
        "wall": wall,
        "steps_per_s": done[0] / wall,
        "loop_cpu_per_step": loop_cpu / done[0],
        "cpu_per_step": cpu / done[0],
        "p99": lags[min(len(lags) - 1, int(0.99 * len(lags)))],
        "max": lags[-1],
    }

out = {}
for kind in ("AsyncSession", "AgentsSession", "floor: bare fdatasync in to_thread"):
    if only and not kind.startswith(only):
        continue
    for n in (20, 200):
        b.PACE = (pace * (10 if n > 20 else 1)) if pace > 0 else None
        root = Path(tempfile.mkdtemp(prefix="ctxb-ab-async-"))
        try:
            out[f"{n} | {kind}"] = asyncio.run(measure(kind, n, root))
        finally:
            shutil.rmtree(root, ignore_errors=True)
print(json.dumps(out))
"""

FIGURES = (
    ("wall", "wall s", 1.0, "{:.2f}"),
    ("steps_per_s", "steps/s", 1.0, "{:,.0f}"),
    ("loop_cpu_per_step", "loop CPU/step µs", 1e6, "{:,.0f}"),
    ("cpu_per_step", "process CPU/step µs", 1e6, "{:,.0f}"),
    ("p99", "stall p99 ms", 1e3, "{:.2f}"),
    ("max", "stall max ms", 1e3, "{:.1f}"),
)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("builds", nargs="+", metavar="SRC")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--pace", type=float, default=0.0)
    parser.add_argument("--only", default="", help="rows whose kind starts so")
    args = parser.parse_args()
    builds: list[str] = args.builds
    runs: dict[str, list[dict[str, dict[str, float]]]] = {src: [] for src in builds}
    for r in range(args.rounds):
        for src in builds[r % len(builds) :] + builds[: r % len(builds)]:
            env = {**os.environ, "PYTHONPATH": src}
            done = subprocess.run(
                [sys.executable, "-c", PROBE, str(BENCHES), str(args.pace), args.only],
                env=env,
                capture_output=True,
                text=True,
                check=False,
            )
            if done.returncode != 0:
                print(f"{src} failed:\n{done.stderr}", file=sys.stderr)
                return 1
            runs[src].append(json.loads(done.stdout.splitlines()[-1]))
        print(f"round {r + 1} of {args.rounds} done", file=sys.stderr)
    load = f"paced, a step every {args.pace} s" if args.pace else "fake model 10 ms (bench)"
    print(f"{args.rounds} rotating rounds, medians; AsyncSession: {load}")
    labels = [label for _, label, _, _ in FIGURES]
    print("| conversations | API | build | " + " | ".join(labels) + " |")
    print("|---|---|---|" + "---|" * len(FIGURES))
    for row in runs[builds[0]][0]:
        medians = {
            src: [statistics.median(run[row][key] for run in runs[src]) for key, *_ in FIGURES]
            for src in builds
        }
        for src in builds:
            cells = []
            for (_, _, scale, fmt), value, first in zip(
                FIGURES, medians[src], medians[builds[0]], strict=True
            ):
                cell = fmt.format(value * scale)
                if src != builds[0] and first:
                    cell += f" ({value / first:.2f}×)"
                cells.append(cell)
            n, kind = row.split(" | ")
            print(f"| {n} | {kind} | {src} | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
