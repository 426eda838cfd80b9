"""Token counting throughput, side by side with Python tiktoken (and the bpe-openai PyPI
binding, where it is installed: ``pip install bpe-openai``) on the same corpus in one run.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from typing import Any

import pytest
from registry import Benchmark, Result, markdown, ratio

import ctxbudget

ENCODINGS = ("o200k_base", "cl100k_base")
BASELINES = ("tiktoken", "bpe-openai")


def _bpe_openai(name: str) -> Any:
    """The bpe-openai binding's encoding, or a skip if it is not installed."""
    module = pytest.importorskip("bpe_openai")
    return module.get_encoding(name)


def _on_fresh_thread(count: Callable[[], int]) -> int:
    """`count()` on a thread of its own: ctxbudget's per-thread piece and segment caches
    start empty, so every round is a cold first pass (tiktoken keeps no such cache)."""
    out: list[int] = []
    worker = threading.Thread(target=lambda: out.append(count()))
    worker.start()
    worker.join()
    return out[0]


def _tag(benchmark: Any, measure: str, impl: str, corpus: list[str]) -> None:
    nbytes = sum(len(t.encode()) for t in corpus)
    benchmark.extra_info.update(measure=measure, impl=impl, bytes=nbytes)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("impl", ["ctxbudget", *BASELINES])
def test_count_single_thread(benchmark, corpus, tiktoken_encodings, name: str, impl: str) -> None:  # type: ignore[no-untyped-def]
    _tag(benchmark, f"count {name}, single thread, cold", impl, corpus)
    if impl == "ctxbudget":
        enc = ctxbudget.Encoding(name, cache_size=0)
        result = benchmark(lambda: _on_fresh_thread(lambda: sum(enc.count(t) for t in corpus)))
    elif impl == "bpe-openai":
        second = _bpe_openai(name)
        result = benchmark(
            lambda: _on_fresh_thread(lambda: sum(len(second.encode_ordinary(t)) for t in corpus))
        )
    else:
        tk = tiktoken_encodings[name]
        result = benchmark(
            lambda: _on_fresh_thread(lambda: sum(len(tk.encode_ordinary(t)) for t in corpus))
        )
    assert result > 0


@pytest.mark.parametrize("impl", ["ctxbudget", "tiktoken"])
def test_count_many_all_cores(benchmark, corpus, tiktoken_encodings, impl: str) -> None:  # type: ignore[no-untyped-def]
    """ctxbudget's count_many on every core beside tiktoken on one thread."""
    _tag(
        benchmark,
        f"count_many o200k_base, {os.cpu_count()} cores, caches warm (baselines: 1 thread)",
        impl,
        corpus,
    )
    if impl == "ctxbudget":
        enc = ctxbudget.Encoding("o200k_base", cache_size=0)
        result = benchmark(lambda: sum(enc.count_many(corpus)))
    else:
        tk = tiktoken_encodings["o200k_base"]
        result = benchmark(lambda: sum(len(tk.encode_ordinary(t)) for t in corpus))
    assert result > 0


def table(results: list[Result]) -> str:
    measures: dict[str, dict[str, Result]] = {}
    for r in results:
        measures.setdefault(r.info["measure"], {})[r.info["impl"]] = r
    present = [b for b in BASELINES if any(b in impls for impls in measures.values())]

    def mib_s(r: Result | None) -> str:
        return f"{r.info['bytes'] / r.median / 2**20:,.1f} MiB/s" if r else "-"

    rows = []
    for measure, impls in measures.items():
        ours = impls.get("ctxbudget")
        row = [measure, mib_s(ours), *(mib_s(impls.get(b)) for b in present)]
        for b in present:
            theirs = impls.get(b)
            row.append(ratio(theirs.median / ours.median) if ours and theirs else "-")
        rows.append(row)
    header = ["measure", "ctxbudget", *present, *(f"{b} time ÷ ctxbudget time" for b in present)]
    return markdown(header, rows)


BENCHMARK = Benchmark(
    topic="counting",
    title="Count throughput beside tiktoken",
    about=(
        "The Python standard library's sources (`Lib/**/*.py` without tests, fixed order; "
        "8 MiB, 2 MiB in short mode), counted file by file: ctxbudget with its whole-text "
        "cache off (`cache_size=0`), each round of the single-thread rows on a fresh thread "
        "(its per-thread piece and segment caches empty: cold counts), beside tiktoken's "
        "`encode_ordinary` (and the bpe-openai binding when installed); `count_many` uses "
        "every core, whose pool threads keep their caches from round to round (steady "
        "state)."
    ),
    table=table,
)
