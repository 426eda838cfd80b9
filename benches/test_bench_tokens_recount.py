"""The per-step recount of a growing request: a 200-message request counted cold beside
the same request recounted after one message was appended (the 200 are cached)."""

from __future__ import annotations

from typing import Any

import pytest
from registry import Benchmark, Result, duration, markdown

import ctxbudget

from conftest import SHORT


def _messages(corpus: list[str], n: int) -> list[str]:
    """n chat-sized messages (about 1.5 KiB each) cut from the corpus."""
    joined = "\n".join(corpus)
    return [joined[i * 1500 : (i + 1) * 1500] for i in range(n)]


@pytest.mark.parametrize("impl", ["cold count", "recount after append"])
def test_recount_growing_request(benchmark: Any, corpus: list[str], impl: str) -> None:
    rounds = 30 if SHORT else 200
    # The 200 messages, then one new message per round: text not seen before, as a
    # step's new message is (a copy of an earlier message would be found in the
    # count caches, which a real step cannot count on).
    every = _messages(corpus, 200 + rounds)
    msgs, news = every[:200], iter(every[200:])
    enc = ctxbudget.Encoding("o200k_base")
    benchmark.extra_info.update(impl=impl, bytes=sum(len(m.encode()) for m in msgs))

    def setup() -> tuple[tuple[list[str]], dict[str, object]]:
        new = next(news)[:500]
        if impl == "cold count":
            enc.clear_cache()
        else:
            enc.count_many(msgs)  # the 200 earlier messages were counted last step
        return ([*msgs, new],), {}

    benchmark.pedantic(enc.count_many, setup=setup, rounds=rounds)


def table(results: list[Result]) -> str:
    by_impl = {r.info["impl"]: r for r in results}
    cold, warm = by_impl["cold count"].median, by_impl["recount after append"].median
    kib = by_impl["cold count"].info["bytes"] / 1024
    return markdown(
        [f"200-message request (~{kib:,.0f} KiB), o200k_base", "median"],
        [
            ["count, whole-text cache empty (segment caches warm)", duration(cold)],
            ["recount after appending one (200 cached + 1 new)", duration(warm)],
            ["recount ÷ the count above", f"**{warm / cold * 100:.1f}%**"],
        ],
    )


BENCHMARK = Benchmark(
    topic="counting",
    title="Recount after appending one message",
    about=(
        "What an agent loop pays per step: 200 messages of about 1.5 KiB cut from the "
        "counting corpus plus one new message (500 characters of corpus text not among "
        "them, new each round), counted with `count_many` with the whole-text cache "
        "emptied (`clear_cache`; the per-thread segment caches stay warm) beside the "
        "same count when the 200 were counted the step before."
    ),
    table=table,
)
