"""Pathological inputs: megabytes of one repeated character.

Every size from 1 to 16 MiB must count without error; with forced cuts the count must
stay at or above the exact count, which our unchunked merge computes (it is proven equal
to tiktoken by the oracle tests), and — where Python tiktoken itself survives the input
— at or above tiktoken's count, computed in a child process so that its stack overflow
on long runs cannot take the test run down with it. Linear time is shown by the
benchmarks (benches/README.md), not by timed assertions here.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

import ctxbudget
from ctxbudget import _ctxbudget

MIB = 1 << 20
CHARS = [" ", "\n", "\t", "a", "Z", "7", "中", "😀", "!", "/", "'", "\u0301"]
UNCHUNKED = 64 * MIB


def _exact(name: str, text: str) -> int:
    tokens, exact, _ = _ctxbudget.Encoding(name, cache_size=0, chunk_bytes=UNCHUNKED).count_detail(
        text
    )
    assert exact
    return tokens


@pytest.mark.slow
@pytest.mark.parametrize("char", CHARS)
@pytest.mark.parametrize("tail", ["", "x", " ", "\n", "1"])
def test_one_mib_runs_are_upper_bounds(char: str, tail: str) -> None:
    text = char * (MIB // len(char.encode())) + tail
    for name in ("o200k_base", "cl100k_base"):
        detail = ctxbudget.Encoding(name, cache_size=0).count_detail(text)
        truth = _exact(name, text)
        assert detail.tokens >= truth
        assert detail.tokens <= truth + detail.forced_cuts * ctxbudget.BOUNDARY_SLACK + 64
        assert detail.exact == (detail.forced_cuts == 0)


@pytest.mark.slow
@pytest.mark.parametrize("mib", [4, 16])
@pytest.mark.parametrize("char", [" ", "a", "中", "😀", "\n"])
def test_large_runs_count_without_error(char: str, mib: int) -> None:
    text = char * (mib * MIB // len(char.encode())) + "x"
    detail = ctxbudget.Encoding("o200k_base", cache_size=0).count_detail(text)
    assert not detail.exact
    # n chunks of 64 KiB need n - 1 cuts; the cut before a trailing "x" may be exact.
    assert detail.forced_cuts >= mib * MIB // (64 * 1024) - 1
    assert detail.tokens >= _exact("o200k_base", text)


def _tiktoken_in_child(name: str, char: str, n: int, timeout: float) -> int | None:
    code = (
        "import sys, tiktoken\n"
        f"e = tiktoken.get_encoding({name!r})\n"
        f"print(len(e.encode_ordinary({char!r} * {n} + 'x')))\n"
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


@pytest.mark.parametrize("char", ["7", "\n", " ", "a"])
def test_upper_bound_against_tiktoken_where_it_survives(char: str) -> None:
    n = 300_000
    truth = _tiktoken_in_child("cl100k_base", char, n, timeout=60)
    ours = ctxbudget.Encoding("cl100k_base", cache_size=0).count_detail(char * n + "x")
    if truth is None:
        # tiktoken crashed or timed out here: our exact unchunked merge is the truth.
        truth = _exact("cl100k_base", char * n + "x")
    assert ours.tokens >= truth
