"""Token counting, side by side with Python tiktoken (and the bpe-openai PyPI binding,
where it is installed: `pip install bpe-openai`) on the same inputs in one run.

Each benchmark records `measure` (which comparison it belongs to), `impl` and `bytes`
in extra_info; benches/run.py turns them into the ratio table in benches/README.md.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from typing import Any

import pytest

import ctxbudget

from conftest import SHORT

ENCODINGS = ("o200k_base", "cl100k_base")
MIB = 1 << 20


def _bpe_openai(name: str) -> Any:
    """The bpe-openai binding's encoding, or a skip if it is not installed."""
    module = pytest.importorskip("bpe_openai")
    return module.get_encoding(name)


def _tag(benchmark, measure: str, impl: str, nbytes: int, **extra: object) -> None:  # type: ignore[no-untyped-def]
    benchmark.extra_info.update(measure=measure, impl=impl, bytes=nbytes, **extra)


@pytest.mark.parametrize("name", ENCODINGS)
@pytest.mark.parametrize("impl", ["ctxbudget", "tiktoken", "bpe-openai"])
def test_count_single_thread(benchmark, corpus, tiktoken_encodings, name: str, impl: str) -> None:  # type: ignore[no-untyped-def]
    nbytes = sum(len(t.encode()) for t in corpus)
    _tag(benchmark, f"count {name}, single thread", impl, nbytes)
    if impl == "ctxbudget":
        enc = ctxbudget.Encoding(name, cache_size=0)
        result = benchmark(lambda: sum(enc.count(t) for t in corpus))
    elif impl == "bpe-openai":
        second = _bpe_openai(name)
        result = benchmark(lambda: sum(len(second.encode_ordinary(t)) for t in corpus))
    else:
        tk = tiktoken_encodings[name]
        result = benchmark(lambda: sum(len(tk.encode_ordinary(t)) for t in corpus))
    assert result > 0


@pytest.mark.parametrize("impl", ["ctxbudget count_many (all cores)", "tiktoken"])
def test_count_many_all_cores(benchmark, corpus, tiktoken_encodings, impl: str) -> None:  # type: ignore[no-untyped-def]
    nbytes = sum(len(t.encode()) for t in corpus)
    _tag(benchmark, f"count_many o200k_base, {os.cpu_count()} cores vs 1 thread", impl, nbytes)
    if impl.startswith("ctxbudget"):
        enc = ctxbudget.Encoding("o200k_base", cache_size=0)
        result = benchmark(lambda: sum(enc.count_many(corpus)))
    else:
        tk = tiktoken_encodings["o200k_base"]
        result = benchmark(lambda: sum(len(tk.encode_ordinary(t)) for t in corpus))
    assert result > 0


def _messages(corpus: list[str], n: int) -> list[str]:
    """n chat-sized messages (about 1.5 KiB each) cut from the corpus."""
    joined = "\n".join(corpus)
    return [joined[i * 1500 : (i + 1) * 1500] for i in range(n)]


@pytest.mark.parametrize("impl", ["cold count", "recount after append"])
def test_recount_growing_request(benchmark, corpus, impl: str) -> None:  # type: ignore[no-untyped-def]
    """The per-step recount of a 200-message request after one message is appended."""
    msgs = _messages(corpus, 200)
    enc = ctxbudget.Encoding("o200k_base")
    rounds = iter(range(10**9))
    nbytes = sum(len(m.encode()) for m in msgs)
    _tag(benchmark, "recount of 200 messages + 1 new", impl, nbytes)

    def setup() -> tuple[tuple[list[str]], dict[str, object]]:
        new = f"new message {next(rounds)}: " + msgs[0][:500]
        if impl == "cold count":
            enc.clear_cache()
        else:
            enc.count_many(msgs)  # the 200 earlier messages were counted last step
        return ([*msgs, new],), {}

    benchmark.pedantic(enc.count_many, setup=setup, rounds=30 if SHORT else 200)


PATHOLOGICAL_SIZES = [1, 16] if SHORT else [1, 2, 4, 8, 16]
PATHOLOGICAL_CHARS = [" "] if SHORT else [" ", "a", "\n", "中", "😀", "0123456789"]


@pytest.mark.parametrize("char", PATHOLOGICAL_CHARS)
@pytest.mark.parametrize("mib", PATHOLOGICAL_SIZES)
def test_pathological_ctxbudget(benchmark, char: str, mib: int) -> None:  # type: ignore[no-untyped-def]
    text = char * (mib * MIB // len(char.encode()))
    enc = ctxbudget.Encoding("o200k_base", cache_size=0)
    _tag(
        benchmark,
        f"pathological {char!r} run, o200k_base",
        "ctxbudget",
        len(text.encode()),
        mib=mib,
    )
    detail = benchmark.pedantic(enc.count_detail, args=(text,), rounds=1 if mib > 4 else 3)
    benchmark.extra_info["exact"] = detail.exact
    assert detail.tokens > 0


_COLD = {
    "ctxbudget": "import ctxbudget; ctxbudget.Encoding('o200k_base').count('Hello, world!')",
    "tiktoken": "import tiktoken; tiktoken.get_encoding('o200k_base').encode_ordinary('Hi!')",
    "bpe-openai": "import bpe_openai; bpe_openai.get_encoding('o200k_base').encode_ordinary('Hi')",
}


@pytest.mark.parametrize("impl", list(_COLD))
def test_cold_import_and_first_count(benchmark, impl: str) -> None:  # type: ignore[no-untyped-def]
    """A fresh interpreter: import, first o200k encoding, one count (whole process)."""
    if impl == "bpe-openai":
        pytest.importorskip("bpe_openai")
    _tag(benchmark, "cold start: fresh python, import + first o200k count", impl, 0)

    def run() -> float:
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", _COLD[impl]], check=True, env=os.environ.copy())
        return time.perf_counter() - start

    benchmark.pedantic(run, rounds=5)


_CHILD = """
import sys, time, tiktoken
text = sys.argv[1] * (int(sys.argv[2]) * 1048576 // len(sys.argv[1].encode()))
enc = tiktoken.get_encoding("o200k_base")
start = time.perf_counter()
enc.encode_ordinary(text)
print(time.perf_counter() - start)
"""


# Sizes at which tiktoken already failed, per character: larger ones are not retried.
_TIKTOKEN_FAILED: dict[str, int] = {}


@pytest.mark.parametrize(
    ("char", "mib"), [(c, m) for c in PATHOLOGICAL_CHARS for m in PATHOLOGICAL_SIZES]
)
def test_pathological_tiktoken(benchmark, char: str, mib: int) -> None:  # type: ignore[no-untyped-def]
    """tiktoken in a child process: it may overflow its stack or run for minutes."""
    timeout = 20 if SHORT else 30
    outcome: dict[str, object] = {}

    def run() -> None:
        if char in _TIKTOKEN_FAILED:
            outcome["failure"] = f"not retried: failed at {_TIKTOKEN_FAILED[char]} MiB"
            return
        try:
            proc = subprocess.run(
                [sys.executable, "-c", _CHILD, char, str(mib)],
                capture_output=True,
                text=True,
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            outcome["failure"] = f"no result in {timeout} s"
            return
        if proc.returncode == 0:
            outcome["seconds"] = float(proc.stdout)
        else:
            last = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
            outcome["failure"] = f"crashed (exit {proc.returncode}): {last[:80]}"

    benchmark.pedantic(run, rounds=1)
    if "failure" in outcome:
        _TIKTOKEN_FAILED.setdefault(char, mib)
    _tag(
        benchmark,
        f"pathological {char!r} run, o200k_base",
        "tiktoken",
        mib * MIB,
        mib=mib,
        outcome=json.dumps(outcome),
    )
