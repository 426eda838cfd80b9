"""What the event loop's long turns are made of, in one run of the async bench's
``AsyncSession`` conversations: every turn of the loop timed in wall and thread-CPU
time, every garbage collection timed through ``gc.callbacks``.

    python benches/experiments/loop_turns.py          # 200 conversations × 10 steps
    python benches/experiments/loop_turns.py -n 20 --steps 40 --pace 0.05

A turn that spent less than half of its wall time on the CPU was mostly preempted (the
loop's thread waited for a CPU); the ready callbacks a turn started with tell a queue
of conversations from one long piece of work. It times the loop's private ``_run_once``,
so it is a diagnostic, not a benchmark: it prints and never fails.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # test_bench_async.py

import test_bench_async as bench

from ctxbudget import Encoding

LONG = 0.002  # seconds: a turn longer than this is listed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--conversations", type=int, default=200)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--pace", type=float, default=None, help="seconds per step")
    args = parser.parse_args()
    bench.PACE = args.pace
    Encoding.for_model("gpt-4o")

    turns: list[tuple[float, float, int]] = []  # wall, cpu, ready callbacks at the start
    run_once = asyncio.BaseEventLoop._run_once  # type: ignore[attr-defined]

    def timed(loop: Any) -> None:
        ready = len(loop._ready)
        wall, cpu = time.perf_counter(), time.thread_time()
        run_once(loop)
        turns.append((time.perf_counter() - wall, time.thread_time() - cpu, ready))

    collections: list[tuple[float, int]] = []  # wall, generation
    started: list[float] = []

    def on_gc(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif started:
            collections.append((time.perf_counter() - started.pop(), info["generation"]))

    asyncio.BaseEventLoop._run_once = timed  # type: ignore[attr-defined]
    gc.callbacks.append(on_gc)
    root = Path(tempfile.mkdtemp(prefix="ctxb-turns-"))
    try:
        figures = asyncio.run(bench._run(bench.ASYNC, args.conversations, args.steps, root))
    finally:
        gc.callbacks.remove(on_gc)
        asyncio.BaseEventLoop._run_once = run_once  # type: ignore[attr-defined]
        shutil.rmtree(root, ignore_errors=True)

    long = sorted((t for t in turns if t[0] > LONG), reverse=True)
    preempted = [t for t in long if t[1] < t[0] / 2]
    print(
        f"{args.conversations} × {args.steps}: {figures['steps_per_s']:,.0f} steps/s, "
        f"stall p50 {figures['p50'] * 1e3:.3f} ms, p99 {figures['p99'] * 1e3:.3f} ms, "
        f"max {figures['max'] * 1e3:.2f} ms"
    )
    print(f"loop turns: {len(turns)}, over {LONG * 1e3:.0f} ms: {len(long)}")
    if long:
        print(
            f"  mostly off the CPU: {len(preempted)}; ready callbacks at their start: "
            f"median {statistics.median(t[2] for t in long)}, max {max(t[2] for t in long)}"
        )
        top = ", ".join(f"{w * 1e3:.1f}/{c * 1e3:.1f} ms ({r})" for w, c, r in long[:10])
        print(f"  longest (wall/CPU, ready): {top}")
    over = [c for c in collections if c[0] > 0.001]
    print(
        f"garbage collections: {len(collections)}, over 1 ms: {len(over)}, "
        f"in all {sum(c[0] for c in collections) * 1e3:.1f} ms, longest "
        + ", ".join(f"{w * 1e3:.1f} ms (gen {g})" for w, g in sorted(collections)[-3:][::-1])
    )


if __name__ == "__main__":
    main()
