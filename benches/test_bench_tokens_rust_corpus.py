"""Real text counted in Rust, file by file: the core beside bpe-openai and tiktoken-rs
(``cargo bench -p ctxbudget-compare --bench compare -- corpus``)."""

from __future__ import annotations

from typing import Any

import pytest
from registry import Benchmark, own_table
from rust_bench import cargo_table


@pytest.mark.full_only
def test_rust_corpus(benchmark: Any) -> None:
    cargo_table(benchmark, "compare", "corpus")


BENCHMARK = Benchmark(
    topic="counting",
    title="Real text in Rust, beside bpe-openai and tiktoken-rs",
    about=(
        "Every `.py` file of the Python standard library (found through `sysconfig`, tests "
        "left out) counted file by file in Rust: CPU time of the counting thread, minimum "
        "of 3 rounds, the three implementations interleaved, each round on a fresh thread "
        "(ctxbudget's whole-text cache off and its per-thread piece and segment caches "
        "empty: a cold first pass). Full runs only."
    ),
    table=own_table,
)
