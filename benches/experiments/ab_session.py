"""A/B comparison of builds of ctxbudget on the agent loop's per-step paths, run
alternately in one session so that machine noise hits them alike:

    python benches/experiments/ab_session.py OLD_SRC NEW_SRC [MORE_SRC...] [ROUNDS]

Each ``*_SRC`` is a directory holding a built ``ctxbudget`` package (its ``python/``
directory after ``maturin develop``, or a copy of it); all run on this interpreter.
Each round runs, in a fresh process per build (the order rotating round by round): the
1,000-step session of ``benches/test_bench_session.py`` (128k window, ``fsync``, a
200-line tool result per step, two forced rollovers) timing every ``Session.prepare()``
(wall time, and the thread's CPU time, which a loaded machine's preemptions do not
reach), and ``Budget.evaluate`` under ``timeit`` (best of 5). Prints the median over
rounds per build and each build ÷ OLD; with ``--per-round``, also the median over
rounds of each round's ratio to OLD's run of that round (the prepare p50, thread CPU)
and in how many rounds the build was at most as slow. Timing only: it never fails.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

PROBE = r"""
import json, tempfile, time, timeit
from ctxbudget import Budget, Claims, Session

OUTPUT = "for item in batch:\n    total += price(item) * qty(item)  # line {n}\n" * 12
out = {}
with tempfile.TemporaryDirectory() as ws:
    s = Session.open(ws, model="gpt-4o", context_window=128_000, durability="fsync",
                     system="You are a careful code auditor.")
    s.add_user("Audit the billing code and report risky loops.")
    times, cpu = [], []
    for n in range(1000):
        t, c = time.perf_counter(), time.thread_time()
        s.prepare()
        cpu.append(time.thread_time() - c); times.append(time.perf_counter() - t)
        s.add_assistant(None, [{"id": f"c{n}", "name": "read_file", "arguments": {"n": n}}])
        s.add_tool_results([{"call_id": f"c{n}", "name": "read_file",
                             "output": OUTPUT.format(n=n)}])
    times.sort(); cpu.sort()
    out["Session.prepare p50"] = times[len(times) // 2]
    out["Session.prepare p99"] = times[int(len(times) * 0.99)]
    out["Session.prepare p50, thread CPU"] = cpu[len(cpu) // 2]
    out["Session.prepare p99, thread CPU"] = cpu[int(len(cpu) * 0.99)]
b, c = Budget(128_000, 0.7), Claims(warning=True)
t = timeit.Timer("b.evaluate(95_000, c, True)", globals={"b": b, "c": c})
n, _ = t.autorange()
out["Budget.evaluate"] = min(t.repeat(5, n)) / n
print(json.dumps(out))
"""


_PER_ROUND = "Session.prepare p50, thread CPU"


def main() -> int:
    args = [a for a in sys.argv[1:] if a != "--per-round"]
    rounds = 5
    if args and args[-1].isdigit():
        rounds = int(args.pop())
    if len(args) < 2:
        sys.stderr.write(__doc__ or "")
        return 2
    builds = [f"build {i}" if i else "old" for i in range(len(args))]
    if len(args) == 2:
        builds = ["old", "new"]
    sources = dict(zip(builds, args, strict=True))
    results: dict[str, dict[str, list[float]]] = {name: {} for name in builds}
    for r in range(rounds):
        shift = r % len(builds)
        for name in builds[shift:] + builds[:shift]:
            src = sources[name]
            env = {**os.environ, "PYTHONPATH": src}
            done = subprocess.run(
                [sys.executable, "-c", PROBE],
                capture_output=True,
                text=True,
                check=False,
                env=env,
                cwd=os.path.dirname(os.path.abspath(src)),
            )
            if done.returncode != 0:
                sys.stderr.write(done.stderr)
                return 1
            for measure, seconds in json.loads(done.stdout).items():
                results[name].setdefault(measure, []).append(seconds)
    others = builds[1:]
    print(
        "| measure (median over rounds) | old µs | "
        + " | ".join(f"{n} µs | {n} ÷ old" for n in others)
        + " |"
    )
    print("|---|---|" + "---|---|" * len(others))
    for measure, olds in results["old"].items():
        o = statistics.median(olds) * 1e6
        cells = []
        for name in others:
            n = statistics.median(results[name][measure]) * 1e6
            cells.append(f"{n:.2f} | {n / o:.2f}×")
        print(f"| {measure} | {o:.2f} | " + " | ".join(cells) + " |")
    if "--per-round" in sys.argv:
        base = results["old"][_PER_ROUND]
        for name in others:
            runs = results[name][_PER_ROUND]
            ratios = [n / o for n, o in zip(runs, base, strict=True)]
            at_most = sum(n <= o for n, o in zip(runs, base, strict=True))
            print(
                f"{name}: per round ÷ old, median {statistics.median(ratios):.2f}×; "
                f"at most as slow in {at_most} of {rounds} rounds"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
