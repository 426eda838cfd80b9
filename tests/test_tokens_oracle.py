"""Counts against Python tiktoken, the reference: equal when exact, never below."""

from __future__ import annotations

import sysconfig
from pathlib import Path

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import ctxbudget
from ctxbudget import _ctxbudget

from strategies import text

ENCODINGS = ("o200k_base", "cl100k_base")


@pytest.mark.parametrize("name", ENCODINGS)
@given(sample=text)
@example(sample=" " * 3 + "x")
@example(sample="it's  \n\n  DON'T ſ'S 'll")
@example(sample="'ſa x'ſb don'ſ 'ſ")
@example(sample="\r\n\r\n\t \u3000word")
@example(sample="<|endoftext|> and <|fim_prefix|>")
@example(sample="ABCdef GHIj\u0301kl MNO\u0301 x\u0301")
def test_count_equals_tiktoken(name: str, sample: str, tiktoken_encodings) -> None:  # type: ignore[no-untyped-def]
    expected = len(tiktoken_encodings[name].encode_ordinary(sample))
    detail = ctxbudget.Encoding(name, cache_size=0).count_detail(sample)
    assert detail.exact
    assert detail.forced_cuts == 0
    assert detail.tokens == expected


@pytest.mark.parametrize("name", ENCODINGS)
@given(sample=text, reps=st.integers(1, 30), chunk=st.integers(64, 400))
def test_small_chunks_exact_or_upper_bound(  # type: ignore[no-untyped-def]
    name: str, sample: str, reps: int, chunk: int, tiktoken_encodings
) -> None:
    """With tiny chunks most cuts must still be exact; forced ones only ever add."""
    long_text = sample * reps
    expected = len(tiktoken_encodings[name].encode_ordinary(long_text))
    enc = _ctxbudget.Encoding(name, cache_size=0, chunk_bytes=chunk)
    tokens, exact, forced_cuts = enc.count_detail(long_text)
    if exact:
        assert forced_cuts == 0
        assert tokens == expected
    else:
        assert forced_cuts > 0
        assert tokens >= expected


def test_exact_boundaries_avoid_forced_cuts_on_prose(tiktoken_encodings) -> None:  # type: ignore[no-untyped-def]
    prose = "The agent read the file, fixed two bugs, and ran the tests again.\n" * 4_000
    for name in ENCODINGS:
        enc = _ctxbudget.Encoding(name, cache_size=0, chunk_bytes=1_000)
        tokens, exact, forced_cuts = enc.count_detail(prose)
        assert (exact, forced_cuts) == (True, 0)
        assert tokens == len(tiktoken_encodings[name].encode_ordinary(prose))


@pytest.mark.parametrize("name", ENCODINGS)
@given(
    sample=st.lists(
        st.one_of(
            st.characters(codec="utf-8"),
            st.sampled_from(["\ud800", "\udfff", "\ud83d", "\ude00", "\ud83d\ude00"]),
        ),
        max_size=40,
    ).map("".join)
)
def test_surrogates_count_like_tiktoken(name: str, sample: str, tiktoken_encodings) -> None:  # type: ignore[no-untyped-def]
    expected = len(tiktoken_encodings[name].encode_ordinary(sample))
    assert ctxbudget.Encoding(name, cache_size=0).count(sample) == expected


def _stdlib_corpus() -> list[tuple[str, str]]:
    """Python's own standard library sources and text files: real code and prose."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files: list[tuple[str, str]] = []
    for pattern in ("*.py", "*.txt", "*.rst", "*.html", "*.json", "*.xml", "*.cfg"):
        for path in sorted(root.rglob(pattern)):
            if "site-packages" in path.parts:
                continue
            try:
                files.append((str(path.relative_to(root)), path.read_text("utf-8")))
            except (UnicodeDecodeError, OSError):
                continue
    return files


@pytest.fixture(scope="module")
def corpus() -> list[tuple[str, str]]:
    files = _stdlib_corpus()
    assert len(files) > 500, "the standard library corpus should have hundreds of files"
    return files


@pytest.mark.parametrize("name", ENCODINGS)
def test_real_text_corpus_identical(name: str, corpus, tiktoken_encodings) -> None:  # type: ignore[no-untyped-def]
    enc = ctxbudget.Encoding(name, cache_size=0)
    texts = [t for _, t in corpus]
    ours = enc.count_many(texts)
    expected = [len(v) for v in tiktoken_encodings[name].encode_ordinary_batch(texts)]
    mismatches = [
        (path, o, e) for (path, _), o, e in zip(corpus, ours, expected, strict=True) if o != e
    ]
    assert not mismatches, mismatches[:5]
    assert sum(ours) > 1_000_000
