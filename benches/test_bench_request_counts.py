"""Request counts side by side (benches/request_counts.py, which also runs by hand):
ctxbudget, the OpenAI cookbook's formula, LiteLLM and LangChain on the same requests."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from registry import Benchmark, own_table

sys.path.insert(0, str(Path(__file__).resolve().parent))


def test_request_counts_side_by_side(benchmark: Any) -> None:
    pytest.importorskip("litellm")
    pytest.importorskip("langchain_openai")
    import request_counts

    text = benchmark.pedantic(request_counts.table, rounds=1, iterations=1)
    benchmark.extra_info.update(
        measure="request counts beside the cookbook, LiteLLM and LangChain",
        impl="ctxbudget",
        group="counts",
        table=text,
    )
    print("\n" + text)


BENCHMARK = Benchmark(
    topic="counting",
    title="Request counts beside the cookbook, LiteLLM and LangChain",
    about=(
        "33 realistic gpt-4o requests (chat in several scripts, 1–20 tool schemas, tool-call "
        "rounds, code and log outputs, images of several sizes and detail levels; "
        "tests/request_corpus.py) counted by ctxbudget, the OpenAI cookbook's formula, "
        "LiteLLM's `token_counter` and LangChain's `ChatOpenAI.get_num_tokens_from_messages`, "
        "as deviations from the cookbook (images: from OpenAI's documented tile rule), "
        "median and worst per category. Counts, not times."
    ),
    table=own_table,
)
