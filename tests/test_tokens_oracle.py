"""Counts against Python tiktoken, the reference: always equal, always exact."""

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
    assert detail.tokens == expected


@pytest.mark.parametrize("name", ENCODINGS)
@given(sample=text, reps=st.integers(1, 30), chunk=st.integers(64, 400))
def test_chunk_size_never_changes_a_count(  # type: ignore[no-untyped-def]
    name: str, sample: str, reps: int, chunk: int, tiktoken_encodings
) -> None:
    """Text is cut only at exact pre-token boundaries: tiny chunks change nothing."""
    long_text = sample * reps
    expected = len(tiktoken_encodings[name].encode_ordinary(long_text))
    enc = _ctxbudget.Encoding(name, cache_size=0, chunk_bytes=chunk)
    assert enc.count_detail(long_text) == (expected, True)


RUN_UNITS = st.sampled_from(
    [" ", "a", "\n", "中", "😀", "7", "!", "\t", "\r\n", "ab", "Zx", "가", "=", "  \n", "é"]
)


@pytest.mark.parametrize("name", ENCODINGS)
@given(
    head=text,
    unit=st.one_of(RUN_UNITS, st.from_regex(r"[A-Za-z0-9+/]{1,12}", fullmatch=True)),
    size=st.integers(1, 3_000),
    tail=text,
)
def test_runs_between_text_equal_tiktoken(  # type: ignore[no-untyped-def]
    name: str, head: str, unit: str, size: int, tail: str, tiktoken_encodings
) -> None:
    """Long pieces (counted by the backtracking encoder) between ordinary text."""
    sample = head + unit * (size // len(unit) + 1) + tail
    expected = len(tiktoken_encodings[name].encode_ordinary(sample))
    detail = ctxbudget.Encoding(name, cache_size=0).count_detail(sample)
    assert (detail.tokens, detail.exact) == (expected, True)


def test_chunked_prose_counts_exactly(tiktoken_encodings) -> None:  # type: ignore[no-untyped-def]
    prose = "The agent read the file, fixed two bugs, and ran the tests again.\n" * 4_000
    for name in ENCODINGS:
        enc = _ctxbudget.Encoding(name, cache_size=0, chunk_bytes=1_000)
        tokens, exact = enc.count_detail(prose)
        assert exact
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


CODE_UNITS = st.one_of(
    st.from_regex(r"[a-z_]{1,12}|[A-Z][a-z]{0,8}|[A-Z]{2,5}|[0-9]{1,6}", fullmatch=True),
    st.sampled_from(
        [
            *(" ", "  ", "\n", "\n    ", "\t", "\r\n", " \n", "(", ").", ":", " = ", "'s"),
            *("'T", '"', "#", "/", "\n/", "!\n", "->", "[", "{", "\x0b", "\x0c", "\x00"),
            *("é", "É", "中", "\u0301", "\xa0", "\u3000", "😀", "ʰ", "ǅ", "ſ", "٣"),
        ]
    ),
)


@pytest.mark.parametrize("name", ENCODINGS)
@given(sample=st.lists(CODE_UNITS, max_size=60).map("".join))
def test_code_like_text_counts_twice_like_tiktoken(  # type: ignore[no-untyped-def]
    name: str, sample: str, tiktoken_encodings
) -> None:
    """Mostly ASCII code (the scanners' ASCII fast paths), counted twice: the second
    time the per-thread piece cache holds its repeated pieces."""
    expected = len(tiktoken_encodings[name].encode_ordinary(sample))
    enc = ctxbudget.Encoding(name, cache_size=0)
    assert enc.count(sample) == expected
    assert enc.count(sample) == expected


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
