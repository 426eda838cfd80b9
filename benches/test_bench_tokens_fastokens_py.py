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
        *side.corpus_rows(corpus, ROUNDS),
        *side.batch_rows(corpus, ROUNDS),
        *side.run_rows(3),
        side.start_rows(ROUNDS),
    ]
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["table"] = "\n".join([side.HEADER, *rows])


BENCHMARK = Benchmark(
    topic="counting",
    title="Beside fastokens, in Python",
    about=(
        "The fastokens PyPI package and ctxbudget from the same `.tiktoken` files, every count "
        "checked equal first. The standard-library corpus counted file by file: a cold first "
        "pass (fresh thread, freshly built fastokens tokenizer) and steady state (a further "
        "pass on the same thread), CPU seconds of the counting thread, median of interleaved "
        "rounds; `count_many` / `encode_batch` over 2 threads and the fresh-interpreter start "
        "in wall seconds. ctxbudget's whole-text count cache is off; its per-thread piece "
        "and segment caches and fastokens' pretoken caches are on, as they ship. Full runs "
        "only."
    ),
    table=own_table,
)
