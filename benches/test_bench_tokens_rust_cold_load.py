"""Cold start in Rust, as whole processes: load an encoding and count one sentence, for
the core beside bpe-openai and tiktoken-rs (``cargo bench -p ctxbudget --bench cold_load``)."""

from __future__ import annotations

from typing import Any

import pytest
from registry import Benchmark, own_table
from rust_bench import cargo_table


@pytest.mark.full_only
def test_rust_cold_load(benchmark: Any) -> None:
    cargo_table(benchmark, "cold_load")


BENCHMARK = Benchmark(
    topic="counting",
    title="Cold start in Rust, beside bpe-openai and tiktoken-rs",
    about=(
        "A fresh process loads o200k_base or cl100k_base and counts one sentence: its wall "
        "time (median of 5 processes), the load and count timed inside it, and its peak "
        "resident set. ctxbudget decodes tiktoken's rank files embedded in the binary; "
        "the others build their tokenizer first. Full runs only."
    ),
    table=own_table,
)
