"""The typed counting API: contracts, errors, model table, cache, JSON."""

from __future__ import annotations

import json
import threading

import pytest
import tiktoken.model

import ctxbudget
from ctxbudget import _ctxbudget


@pytest.fixture(scope="module")
def o200k() -> ctxbudget.Encoding:
    return ctxbudget.Encoding("o200k_base")


def test_public_names_are_exported() -> None:
    for name in ctxbudget.__all__:
        assert hasattr(ctxbudget, name), name


def test_unknown_encoding_is_a_value_error_with_the_valid_names() -> None:
    with pytest.raises(ctxbudget.UnknownEncodingError) as info:
        ctxbudget.Encoding("o300k_base")
    err = info.value
    assert isinstance(err, ValueError)
    assert isinstance(err, ctxbudget.CtxBudgetError)
    assert err.name == "o300k_base"
    assert "o200k_base" in err.known
    assert "o200k_base" in str(err)


def test_unknown_model_never_guesses() -> None:
    with pytest.raises(ctxbudget.UnknownModelError) as info:
        ctxbudget.encoding_for_model("llama-3.1-70b")
    assert isinstance(info.value, ValueError)
    assert info.value.model == "llama-3.1-70b"
    assert "explicit encoding" in str(info.value)


def test_model_table_matches_tiktoken() -> None:
    for model, expected in tiktoken.model.MODEL_TO_ENCODING.items():
        enc = ctxbudget.encoding_for_model(model)
        assert enc.name == expected, model
        assert not enc.is_estimate
    for prefix, expected in tiktoken.model.MODEL_PREFIX_TO_ENCODING.items():
        probe = prefix + "2099-01-01"
        assert ctxbudget.encoding_for_model(probe).name == expected, probe
    assert ctxbudget.encoding_for_model("ft:gpt-4o-mini:acme::x1").name == "o200k_base"
    assert ctxbudget.encoding_for_model("ft:gpt-5-nano:acme::x1").name == "o200k_base"


def test_estimated_families_say_so() -> None:
    claude = ctxbudget.encoding_for_model("claude-sonnet-4-5")
    assert claude.is_estimate and claude.estimate_scale == 1.3
    detail = claude.count_detail("Exactness is the point of this library.")
    assert not detail.exact
    base = ctxbudget.Encoding("cl100k_base").count("Exactness is the point of this library.")
    assert detail.tokens == -(-base * 13 // 10)
    gemini = ctxbudget.encoding_for_model("gemini-2.5-pro")
    assert gemini.name == "o200k_base" and gemini.estimate_scale == 1.1
    assert "estimate" in repr(gemini)


@pytest.mark.parametrize("bad", [b"bytes", 12, None, ["list"], bytearray(b"x")])
def test_non_str_is_a_type_error(o200k: ctxbudget.Encoding, bad: object) -> None:
    with pytest.raises(TypeError, match="expects str"):
        o200k.count(bad)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        o200k.count_many([bad])  # type: ignore[list-item]


def test_bytes_error_says_how_to_fix(o200k: ctxbudget.Encoding) -> None:
    with pytest.raises(TypeError, match="decode"):
        o200k.count(b"hello")  # type: ignore[arg-type]


def test_count_many_keeps_order_and_accepts_iterables(o200k: ctxbudget.Encoding) -> None:
    texts = [f"message number {i} " * (i % 7) for i in range(500)]
    assert o200k.count_many(texts) == [o200k.count(t) for t in texts]
    assert o200k.count_many(iter(texts[:3])) == o200k.count_many(texts[:3])
    assert o200k.count_many(tuple(texts[:3])) == o200k.count_many(texts[:3])
    assert o200k.count_many([]) == []
    with pytest.raises(TypeError, match="not a single str"):
        o200k.count_many("abc")


def test_cache_makes_recount_a_lookup_and_stays_bounded() -> None:
    enc = ctxbudget.Encoding("cl100k_base", cache_size=64)
    msg = "A message long enough to be cached by its content hash. " * 3
    first = enc.count(msg)
    assert enc.cache_len() == 1
    assert enc.count(msg) == first
    for i in range(1_000):
        enc.count(f"{i} distinct message that is long enough to be worth caching, really")
    assert enc.cache_len() <= 64
    enc.clear_cache()
    assert enc.cache_len() == 0
    assert ctxbudget.Encoding("cl100k_base", cache_size=0).cache_len() == 0


def test_cache_size_is_validated() -> None:
    with pytest.raises(ValueError, match="cache_size"):
        ctxbudget.Encoding("o200k_base", cache_size=-1)
    with pytest.raises(TypeError, match="cache_size"):
        ctxbudget.Encoding("o200k_base", cache_size=1.5)  # type: ignore[arg-type]


def test_count_json_counts_contents_plus_punctuation(o200k: ctxbudget.Encoding) -> None:
    value = {"tool": "read_file", "arguments": {"path": "src/main.rs", "lines": [1, 20]}}
    compact = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    strings = ["tool", "read_file", "arguments", "path", "src/main.rs", "lines"]
    allowance = len(compact.encode()) - sum(len(s.encode()) for s in strings)
    expected = max(sum(o200k.count(s) for s in strings) + allowance, o200k.count(compact))
    assert o200k.count_json(value) == expected
    assert o200k.count_json(compact) == expected
    assert o200k.count_json(compact.encode()) == expected


def test_count_json_never_below_the_serialized_text(o200k: ctxbudget.Encoding) -> None:
    for value in ["x" * 1000, {"k": "é" * 50}, [[[]]], '\n\t"\\', {"": ""}, 3.5, None]:
        text = json.dumps(value, ensure_ascii=False, indent=2)
        assert o200k.count_json(text) >= o200k.count(text)


def test_count_json_takes_str_as_json_text(o200k: ctxbudget.Encoding) -> None:
    """Tool-call arguments arrive as JSON text; a str is parsed, never re-quoted."""
    assert o200k.count_json('"hi"') == o200k.count_json(["hi"]) - 2
    with pytest.raises(ctxbudget.InvalidJsonError):
        o200k.count_json("plain words are not JSON")


def test_count_json_treats_media_shaped_data_as_text(o200k: ctxbudget.Encoding) -> None:
    data_url = "data:image/png;base64," + "iVBORw0KGgo" * 200
    value = {"type": "image", "image_url": data_url}
    assert o200k.count_json(value) >= o200k.count(data_url)


@pytest.mark.parametrize(
    "bad", ["{not json", "[1, 2", "", '{"a": NaN}', float("nan"), {1, 2}, b"\xff\xfe"]
)
def test_count_json_rejects_invalid_input(o200k: ctxbudget.Encoding, bad: object) -> None:
    with pytest.raises(ctxbudget.InvalidJsonError) as info:
        o200k.count_json(bad)
    assert isinstance(info.value, ValueError)


def test_invalid_json_error_points_at_the_spot(o200k: ctxbudget.Encoding) -> None:
    with pytest.raises(ctxbudget.InvalidJsonError) as info:
        o200k.count_json('{\n  "a": [1,\n  ]\n}')
    assert info.value.line == 3
    assert "line 3" in str(info.value)


def test_count_tokens_needs_exactly_one_selector() -> None:
    assert ctxbudget.count_tokens("hello world", encoding="cl100k_base") == 2
    assert ctxbudget.count_tokens("hello world", model="gpt-4o") == 2
    with pytest.raises(ValueError, match="exactly one"):
        ctxbudget.count_tokens("x")
    with pytest.raises(ValueError, match="exactly one"):
        ctxbudget.count_tokens("x", model="gpt-4o", encoding="o200k_base")


@pytest.mark.skipif(not _ctxbudget.FAILPOINTS, reason="needs the failpoints build")
def test_a_panic_in_rust_becomes_internal_error() -> None:
    with pytest.raises(ctxbudget.InternalError, match="deliberate test panic"):
        _ctxbudget._panic_for_test()
    assert issubclass(ctxbudget.InternalError, ctxbudget.CtxBudgetError)
    assert issubclass(ctxbudget.InternalError, RuntimeError)


def test_counting_releases_the_gil(o200k: ctxbudget.Encoding) -> None:
    """A Python thread keeps running while another thread counts a large text."""
    # Text that does not repeat: a repeated one is answered from the segment cache
    # faster than the other thread can run.
    big = " ".join(f"w{i}" for i in range(2_000_000))
    ticks = 0
    done = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        before = ticks
        ctxbudget.Encoding("o200k_base", cache_size=0).count(big)
        during = ticks - before
    finally:
        done.set()
        spinner.join()
    assert during > 1_000


def test_repr_and_name(o200k: ctxbudget.Encoding) -> None:
    assert o200k.name == "o200k_base"
    assert repr(o200k) == "Encoding('o200k_base')"
    assert set(ctxbudget.encoding_names()) >= {"o200k_base", "cl100k_base", "r50k_base"}
