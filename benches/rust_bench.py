"""Runs one of the Rust benches of ``rust/ctxbudget-compare/benches/``, which print
their own Markdown tables, for the ``test_bench_rust_*`` modules."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]


def cargo_table(benchmark: Any, bench: str, *args: str) -> None:
    """``cargo bench -p ctxbudget --bench BENCH -- ARGS``; its Markdown table goes to
    ``extra_info["table"]`` (the bench's own timing: pytest-benchmark times nothing).

    Built with the cargo profile ``CTXBUDGET_BENCH_PROFILE`` names when it is set (the one
    the run's line records), else cargo's ``bench`` profile."""
    profile = os.environ.get("CTXBUDGET_BENCH_PROFILE")
    chosen = ["--profile", profile] if profile else []
    package = ["-p", "ctxbudget-compare", "--bench", bench]
    cmd = ["cargo", "bench", "--quiet", *chosen, *package, "--", *args]
    proc = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stderr[-4000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("|")]
    assert lines, f"{' '.join(cmd)} printed no table:\n{proc.stdout[-2000:]}"
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["table"] = "\n".join(lines)
