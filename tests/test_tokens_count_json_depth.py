"""count_json on deeply nested input: an InvalidJsonError, never a RecursionError or a
crash, whether the input is a Python value or JSON text."""

from __future__ import annotations

import pytest

from ctxbudget import Encoding, InvalidJsonError

DEPTH = 100_000


def _nested_list(depth: int) -> list[object]:
    root: list[object] = []
    current = root
    for _ in range(depth - 1):
        inner: list[object] = []
        current.append(inner)
        current = inner
    return root


def _nested_dict(depth: int) -> dict[str, object]:
    root: dict[str, object] = {}
    current = root
    for _ in range(depth - 1):
        inner: dict[str, object] = {}
        current["k"] = inner
        current = inner
    return root


@pytest.fixture(scope="module")
def enc() -> Encoding:
    return Encoding("o200k_base")


@pytest.mark.parametrize("build", [_nested_list, _nested_dict], ids=["list", "dict"])
def test_a_deeply_nested_value_is_invalid_json(enc: Encoding, build: object) -> None:
    value = build(DEPTH)  # type: ignore[operator]
    with pytest.raises(InvalidJsonError, match="nests too deeply"):
        enc.count_json(value)


@pytest.mark.parametrize("as_bytes", [False, True])
def test_deeply_nested_text_is_invalid_json(enc: Encoding, as_bytes: bool) -> None:
    text = "[" * DEPTH + "]" * DEPTH
    with pytest.raises(InvalidJsonError, match="levels deep") as info:
        enc.count_json(text.encode() if as_bytes else text)
    assert info.value.line == 1


def test_the_deepest_accepted_nesting(enc: Encoding) -> None:
    ok = "[" * 127 + '"x"' + "]" * 127
    assert enc.count_json(ok) >= enc.count(ok)
    assert enc.count_json(_nested_list(127)) > 0
    with pytest.raises(InvalidJsonError, match="more than 127 levels deep"):
        enc.count_json("[" * 128 + "]" * 128)
    with pytest.raises(InvalidJsonError):
        enc.count_json(_nested_list(128))


def test_a_self_referencing_value_is_invalid_json(enc: Encoding) -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(InvalidJsonError):
        enc.count_json(loop)
