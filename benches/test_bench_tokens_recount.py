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
    msgs = _messages(corpus, 200)
    enc = ctxbudget.Encoding("o200k_base")
    rounds = iter(range(10**9))
    benchmark.extra_info.update(impl=impl, bytes=sum(len(m.encode()) for m in msgs))

    def setup() -> tuple[tuple[list[str]], dict[str, object]]:
        new = f"new message {next(rounds)}: " + msgs[0][:500]
        if impl == "cold count":
            enc.clear_cache()
        else:
            enc.count_many(msgs)  # the 200 earlier messages were counted last step
        return ([*msgs, new],), {}

    benchmark.pedantic(enc.count_many, setup=setup, rounds=30 if SHORT else 200)


def table(results: list[Result]) -> str:
    by_impl = {r.info["impl"]: r for r in results}
    cold, warm = by_impl["cold count"].median, by_impl["recount after append"].median
    kib = by_impl["cold count"].info["bytes"] / 1024
    return markdown(
        [f"200-message request (~{kib:,.0f} KiB), o200k_base", "median"],
        [
            ["cold count (cache empty)", duration(cold)],
            ["recount after appending one (200 cached + 1 new)", duration(warm)],
            ["recount ÷ cold", f"**{warm / cold * 100:.1f}%**"],
        ],
    )


BENCHMARK = Benchmark(
    topic="counting",
    title="Recount after appending one message",
    about=(
        "What an agent loop pays per step: 200 messages of about 1.5 KiB cut from the "
        "counting corpus plus one new message, counted with `count_many` from an empty "
        "cache beside the same count when the 200 were counted the step before."
    ),
    table=table,
)
