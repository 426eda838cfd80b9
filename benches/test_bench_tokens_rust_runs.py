"""The core's exact count on long runs of one unit beside GitHub's bpe-openai, in Rust
(``cargo bench -p ctxbudget-compare --bench compare -- runs``)."""

from __future__ import annotations

from typing import Any

import pytest
from registry import Benchmark, own_table
from rust_bench import cargo_table


@pytest.mark.full_only
def test_rust_runs(benchmark: Any) -> None:
    cargo_table(benchmark, "compare", "runs")


BENCHMARK = Benchmark(
    topic="counting",
    title="Long runs in Rust, beside bpe-openai",
    about=(
        "1 and 16 MiB of one repeated unit (space, `a`, newline, `中`, `😀`, digits, base64) "
        "counted with o200k_base in Rust: the CPU time of the counting thread, minimum over "
        "rounds with the two interleaved, and whether both give the same exact count "
        "(bpe-openai counts exactly by construction, so it is the reference). Full runs only."
    ),
    table=own_table,
)
