"""A/B comparison of two builds of ctxbudget on the agent loop's per-step paths, run
alternately in one session so that machine noise hits both alike:

    python benches/experiments/ab_session.py OLD_SRC NEW_SRC [ROUNDS]

``OLD_SRC`` and ``NEW_SRC`` are directories holding a built ``ctxbudget`` package each
(its ``python/`` directory after ``maturin develop``, or a copy of it); both run on this
interpreter. Each round runs, in a fresh process per build: the 1,000-step session of
``benches/test_bench_session.py`` (128k window, ``fsync``, a 200-line tool result per
step, two forced rollovers) timing every ``Session.prepare()``, and
``Budget.evaluate`` under ``timeit`` (best of 5). Prints the median over rounds per
build and the NEW ÷ OLD ratio. Timing only: it never fails.
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
    times = []
    for n in range(1000):
        t = time.perf_counter(); s.prepare(); times.append(time.perf_counter() - t)
        s.add_assistant(None, [{"id": f"c{n}", "name": "read_file", "arguments": {"n": n}}])
        s.add_tool_results([{"call_id": f"c{n}", "name": "read_file",
                             "output": OUTPUT.format(n=n)}])
    times.sort()
    out["Session.prepare p50"] = times[len(times) // 2]
    out["Session.prepare p99"] = times[int(len(times) * 0.99)]
b, c = Budget(128_000, 0.7), Claims(warning=True)
t = timeit.Timer("b.evaluate(95_000, c, True)", globals={"b": b, "c": c})
n, _ = t.autorange()
out["Budget.evaluate"] = min(t.repeat(5, n)) / n
print(json.dumps(out))
"""


def main() -> int:
    old, new = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    results: dict[str, dict[str, list[float]]] = {"old": {}, "new": {}}
    for r in range(rounds):
        for name, src in (
            (("old", old), ("new", new)) if r % 2 == 0 else (("new", new), ("old", old))
        ):
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
    print("| measure (median over rounds) | old µs | new µs | new ÷ old |")
    print("|---|---|---|---|")
    for measure, olds in results["old"].items():
        o = statistics.median(olds) * 1e6
        n = statistics.median(results["new"][measure]) * 1e6
        print(f"| {measure} | {o:.2f} | {n:.2f} | {n / o:.2f}× |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
