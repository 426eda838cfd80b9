"""ctxbudget beside the fastokens crate in Rust, side by side in one run (issue 30)
(``cargo bench -p ctxbudget --bench fastokens``)."""

from __future__ import annotations

from typing import Any

import pytest
from registry import Benchmark, own_table
from rust_bench import cargo_table


@pytest.mark.full_only
def test_fastokens_rust(benchmark: Any) -> None:
    cargo_table(benchmark, "fastokens")


BENCHMARK = Benchmark(
    topic="counting",
    title="Beside fastokens, in Rust",
    about=(
        "The fastokens crate (a dev-dependency, built without its download feature) and the "
        "core from the same `.tiktoken` files, every count checked equal first. Every `.py` "
        "file of the Python standard library counted file by file: a cold first pass (fresh "
        "thread, freshly built fastokens tokenizer) and steady state (a further pass on the "
        "same thread), CPU seconds of the counting thread, median of 5 interleaved rounds; "
        "`count_many` / `encode_batch` on a 2-thread pool in wall seconds; 1 MiB runs of one "
        "character. ctxbudget's whole-text count cache is off; its per-thread piece and "
        "segment caches and fastokens' pretoken caches are on, as they ship. Full runs only."
    ),
    table=own_table,
)
