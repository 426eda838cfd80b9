"""Long runs of one repeated character (spaces, letters, newlines, CJK, emoji, digits), the
inputs that make byte-pair encoders slow: ctxbudget's exact count beside tiktoken, which
runs in a child process because it may overflow its stack or run for minutes."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from registry import Benchmark, Result, markdown

import ctxbudget

from conftest import SHORT

MIB = 1 << 20
SIZES = [1, 16] if SHORT else [1, 2, 4, 8, 16]
CHARS = [" "] if SHORT else [" ", "a", "\n", "中", "😀", "0123456789"]


def _tag(benchmark: Any, char: str, mib: int, impl: str) -> None:
    benchmark.extra_info.update(char=char, mib=mib, impl=impl)


@pytest.mark.parametrize("char", CHARS)
@pytest.mark.parametrize("mib", SIZES)
def test_long_run_ctxbudget(benchmark: Any, char: str, mib: int) -> None:
    text = char * (mib * MIB // len(char.encode()))
    enc = ctxbudget.Encoding("o200k_base", cache_size=0)
    _tag(benchmark, char, mib, "ctxbudget")
    detail = benchmark.pedantic(enc.count_detail, args=(text,), rounds=1 if mib > 4 else 3)
    benchmark.extra_info["exact"] = detail.exact
    assert detail.tokens > 0


_CHILD = """
import sys, time, tiktoken
text = sys.argv[1] * (int(sys.argv[2]) * 1048576 // len(sys.argv[1].encode()))
enc = tiktoken.get_encoding("o200k_base")
start = time.perf_counter()
enc.encode_ordinary(text)
print(time.perf_counter() - start)
"""

# Sizes at which tiktoken already failed, per character: larger ones are not retried.
_TIKTOKEN_FAILED: dict[str, int] = {}


@pytest.mark.parametrize(("char", "mib"), [(c, m) for c in CHARS for m in SIZES])
def test_long_run_tiktoken(benchmark: Any, char: str, mib: int) -> None:
    timeout = 20 if SHORT else 30
    outcome: dict[str, object] = {}

    def run() -> None:
        if char in _TIKTOKEN_FAILED:
            outcome["failure"] = f"not retried: failed at {_TIKTOKEN_FAILED[char]} MiB"
            return
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _CHILD, char, str(mib)],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            outcome["failure"] = f"no result in {timeout} s"
            return
        if proc.returncode == 0:
            outcome["seconds"] = float(proc.stdout)
        else:
            last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            outcome["failure"] = f"crashed (exit {proc.returncode}): {last[:80]}"

    benchmark.pedantic(run, rounds=1)
    if "failure" in outcome:
        _TIKTOKEN_FAILED.setdefault(char, mib)
    _tag(benchmark, char, mib, "tiktoken")
    benchmark.extra_info["outcome"] = json.dumps(outcome)


def table(results: list[Result]) -> str:
    cells: dict[tuple[str, int], dict[str, Result]] = {}
    for r in results:
        cells.setdefault((r.info["char"], r.info["mib"]), {})[r.info["impl"]] = r
    rows = []
    for char in dict.fromkeys(c for c, _ in cells):
        per_mib = []
        for mib in sorted(m for c, m in cells if c == char):
            ours, theirs = cells[(char, mib)].get("ctxbudget"), cells[(char, mib)].get("tiktoken")
            ours_cell, exact_cell, theirs_cell = "-", "-", "-"
            if ours:
                per_mib.append(ours.stats["min"] / mib)
                ours_cell = f"{per_mib[-1]:.4f}"
                exact_cell = "exact" if ours.info.get("exact") else "upper bound"
            if theirs:
                outcome = json.loads(theirs.info["outcome"])
                theirs_cell = (
                    f"{outcome['seconds'] / mib:.4f}"
                    if "seconds" in outcome
                    else f"fails: {outcome.get('failure', '?')}"
                )
            rows.append([f"`{char!r}`", str(mib), ours_cell, exact_cell, theirs_cell])
        if len(per_mib) > 1:
            spread = f"**{max(per_mib) / min(per_mib):.2f}×**"
            rows.append([f"`{char!r}`: slowest ÷ fastest s/MiB", "", spread, "", ""])
    return markdown(
        ["run (o200k_base)", "MiB", "ctxbudget s/MiB", "ctxbudget count", "tiktoken s/MiB"], rows
    )


BENCHMARK = Benchmark(
    topic="counting",
    title="Long runs of one character, in Python",
    about=(
        "1 to 16 MiB of one repeated unit (space, `a`, newline, `中`, `😀`, digits; spaces "
        "only in short mode) counted with o200k_base: ctxbudget's count (its time per MiB "
        "should stay flat as the run grows) beside tiktoken in a child process, whose "
        "failures (stack overflow, no result within 30 s) are reported as such."
    ),
    table=table,
)
