"""Pathological inputs: megabytes of one repeated character, base64 blobs, long words.

Every such text must count exactly (``exact`` true, no forced cuts) at every size from
1 to 16 MiB. The truth comes from Python tiktoken where it survives the input (in a
child process, so that its stack overflow on long runs cannot take the test run down);
beyond that, the Rust tests compare megabyte runs with GitHub's bpe-openai crate, and
here the count must not depend on how the text is chunked. Linear time is shown by the
benchmarks (benches/README.md), not by timed assertions.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys

import pytest

import ctxbudget
from ctxbudget import _ctxbudget

MIB = 1 << 20
CHARS = [" ", "\n", "\t", "a", "Z", "7", "中", "😀", "!", "/", "'", "\u0301"]
BASE64 = base64.b64encode(bytes(range(256)) * 3).decode()


@pytest.mark.slow
@pytest.mark.parametrize("char", CHARS)
@pytest.mark.parametrize("tail", ["", "x", " ", "\n", "1"])
def test_one_mib_runs_are_exact(char: str, tail: str) -> None:
    text = char * (MIB // len(char.encode())) + tail
    for name in ("o200k_base", "cl100k_base"):
        detail = ctxbudget.Encoding(name, cache_size=0).count_detail(text)
        assert detail.exact
        chunked = _ctxbudget.Encoding(name, cache_size=0, chunk_bytes=64).count_detail(text)
        assert chunked == (detail.tokens, True)


def test_the_reported_run_counts_exactly() -> None:
    """The issue's figure: 1 MiB of spaces is 8,192 o200k tokens (tiktoken and
    bpe-openai agree; the old chunked count was 8,312 with 15 forced cuts)."""
    detail = ctxbudget.Encoding("o200k_base", cache_size=0).count_detail(" " * MIB)
    assert (detail.tokens, detail.exact) == (8_192, True)


@pytest.mark.slow
@pytest.mark.parametrize("mib", [4, 16])
@pytest.mark.parametrize("unit", [" ", "a", "中", "😀", "\n", "7", BASE64])
def test_large_runs_are_exact(unit: str, mib: int) -> None:
    text = unit * (mib * MIB // len(unit.encode())) + "x"
    for name in ("o200k_base", "cl100k_base"):
        detail = ctxbudget.Encoding(name, cache_size=0).count_detail(text)
        assert detail.exact


def _tiktoken_in_child(name: str, text_expr: str, timeout: float) -> int | None:
    code = (
        "import sys, tiktoken\n"
        f"e = tiktoken.get_encoding({name!r})\n"
        f"print(len(e.encode_ordinary({text_expr})))\n"
    )
    try:
        out = subprocess.run(
            [sys.executable, "-c", code],
            capture_output=True,
            text=True,
            timeout=timeout,
            env=os.environ.copy(),
        )
    except subprocess.TimeoutExpired:
        return None
    return int(out.stdout) if out.returncode == 0 and out.stdout.strip() else None


@pytest.mark.parametrize("name", ["o200k_base", "cl100k_base"])
@pytest.mark.parametrize(
    ("unit", "n"),
    [("7", 300_000), ("\n", 100_000), (" ", 100_000), ("a", 50_000), ("中", 20_000)],
)
def test_equal_to_tiktoken_where_it_survives(name: str, unit: str, n: int) -> None:
    text_expr = f"{unit!r} * {n} + 'x'"
    truth = _tiktoken_in_child(name, text_expr, timeout=120)
    detail = ctxbudget.Encoding(name, cache_size=0).count_detail(unit * n + "x")
    assert detail.exact
    if truth is None:
        pytest.skip(f"tiktoken could not count {text_expr} here")
    assert detail.tokens == truth
