"""A fresh interpreter: import, first o200k encoding, one count, timed as a whole process,
for ctxbudget beside tiktoken (and the bpe-openai binding where it is installed)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from typing import Any

import pytest
from registry import Benchmark, Result, markdown, ratio

_COLD = {
    "ctxbudget": "import ctxbudget; ctxbudget.Encoding('o200k_base').count('Hello, world!')",
    "tiktoken": "import tiktoken; tiktoken.get_encoding('o200k_base').encode_ordinary('Hi!')",
    "bpe-openai": "import bpe_openai; bpe_openai.get_encoding('o200k_base').encode_ordinary('Hi')",
}


@pytest.mark.parametrize("impl", list(_COLD))
def test_cold_import_and_first_count(benchmark: Any, impl: str) -> None:
    if impl == "bpe-openai":
        pytest.importorskip("bpe_openai")
    benchmark.extra_info["impl"] = impl

    def run() -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", _COLD[impl]], check=True, env=os.environ.copy())
        return time.perf_counter() - start

    benchmark.pedantic(run, rounds=5)


def table(results: list[Result]) -> str:
    by_impl = {r.info["impl"]: r for r in results}
    ours = by_impl["ctxbudget"].stats["min"]
    rows = [
        [impl, f"{r.stats['min']:.3f} s", ratio(r.stats["min"] / ours, bold=impl != "ctxbudget")]
        for impl, r in by_impl.items()
    ]
    return markdown(
        ["fresh `python -c`: import + first o200k count", "min of 5", "÷ ctxbudget"], rows
    )


BENCHMARK = Benchmark(
    topic="counting",
    title="Cold start in Python",
    about=(
        "A new `python -c` process that imports the package, loads o200k_base and counts "
        "one sentence, timed as a whole process (interpreter start-up included): ctxbudget "
        "beside tiktoken (its encoding file read from the local cache, no download)."
    ),
    table=table,
)
