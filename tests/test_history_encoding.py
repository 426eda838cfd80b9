"""Rows are serialized in Rust, straight from the Python objects: the result must mean
what ``json.dumps(row, ensure_ascii=False, allow_nan=False)`` means, and everything
json would refuse must be refused with the row and field named — before anything is
written."""

from __future__ import annotations

import enum
import json
import math
import types
from pathlib import Path
from typing import Any

import pytest
from history_helpers import msg
from hypothesis import given
from hypothesis import strategies as st

import ctxbudget
from ctxbudget import History, _ctxbudget

from strategies import any_char, tricky_text

json_text = st.one_of(tricky_text, st.text(any_char, max_size=40))
json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),  # unbounded: big ints too
    st.floats(allow_nan=False, allow_infinity=False),
    json_text,
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.dictionaries(json_text, inner, max_size=4),
    ),
    max_leaves=25,
)


def _decode(encoded: bytes) -> Any:
    return json.loads(encoded.decode("utf-8"))


def _json_meaning(value: Any) -> Any:
    return json.loads(json.dumps(value, ensure_ascii=False, allow_nan=False))


@given(meta=st.dictionaries(json_text, json_values, max_size=5), text=json_text)
def test_encoding_means_what_json_dumps_means(meta: dict[str, Any], text: str) -> None:
    parts = [{"type": "text", "text": text}]
    row = {"kind": "message", "role": "user", "parts": parts, "meta": meta}
    assert _decode(_ctxbudget.encode_rows([row, row])) == [_json_meaning(row)] * 2


@given(text=json_text)
def test_strings_are_escaped_byte_for_byte_as_json_does(text: str) -> None:
    row = {"kind": "message", "role": "user", "parts": [{"type": "text", "text": text}]}
    expected = json.dumps(row, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    assert _ctxbudget.encode_rows([row]) == b"[" + expected + b"]"


class Colour(enum.IntEnum):
    RED = 7


class Label(str):
    pass


class Ratio(float):
    pass


def test_keys_and_scalar_subclasses_are_spelled_as_json_spells_them() -> None:
    meta = {
        3: "int key",
        False: "bool key",  # json spells it "false"
        None: "none key",
        2.5: "float key",
        "big": 2**100,
        "negative": -(2**70),
        "colour": Colour.RED,
        "label": Label("x"),
        "ratio": Ratio(0.25),
        "pair": (1, "two"),
    }
    row = {"kind": "message", "role": "user", "meta": meta}
    assert _decode(_ctxbudget.encode_rows([row])) == [_json_meaning(row)]


def test_rows_may_be_any_mapping(tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none")
    h.append([types.MappingProxyType({"kind": "message", "role": "user", "parts": []})])
    assert [r.kind for r in h.rows()] == ["message"]


def _self_referencing() -> dict[str, Any]:
    meta: dict[str, Any] = {}
    meta["me"] = meta
    return meta


@pytest.mark.parametrize(
    ("row", "field", "words"),
    [
        (msg("x", score=math.nan), "meta.score", "JSON cannot hold"),
        (msg("x", score=-math.inf), "meta.score", "JSON cannot hold"),
        (msg("x", when=object()), "meta.when", "not JSON-serializable"),
        (msg("x", tags={"a", "b"}), "meta.tags", "not JSON-serializable"),
        (msg("x", raw=b"bytes"), "meta.raw", "not JSON-serializable"),
        (msg("x", nested={"deep": [1, {"v": object()}]}), "meta.nested.deep[1].v", "not JSON"),
        (msg("x", bad_key={(1, 2): "tuple key"}), "meta.bad_key", "keys must be str"),
        (msg("x", proxy=types.MappingProxyType({})), "meta.proxy", "not JSON-serializable"),
        (msg("x", me=_self_referencing()), "meta.me" + ".me" * 123, "arrays deep"),
        (
            {"kind": "message", "role": "user", "parts": [{"type": "text", "text": "\ud800"}]},
            "parts[0].text",
            "lone surrogate",
        ),
        ([("kind", "message")], "", "must be a dict"),
    ],
)
def test_what_json_refuses_is_refused_naming_row_and_field(
    tmp_path: Path, row: Any, field: str, words: str
) -> None:
    h = History.open(tmp_path, durability="none")
    with pytest.raises(ctxbudget.InvalidRowError) as info:
        h.append([msg("fine"), row])
    assert isinstance(info.value, ValueError)
    assert info.value.index == 1
    assert info.value.field == field
    assert "row 1" in str(info.value) and words in str(info.value)
    assert list(h.rows()) == [], "nothing of the batch was written"


def _nested(levels: int) -> Any:
    value: Any = "leaf"
    for _ in range(levels):
        value = [value]
    return value


def test_nesting_up_to_what_readers_parse_is_stored_and_read_back(tmp_path: Path) -> None:
    # The row object is level 1 and meta level 2: 123 more levels make 125, the store's
    # limit for rows (serde_json's 127, less the 2 a quarantine row adds to keep one).
    row = {"kind": "message", "role": "user", "parts": [], "meta": {"deep": _nested(123)}}
    assert _decode(_ctxbudget.encode_rows([row])) == [row]
    h = History.open(tmp_path, durability="none")
    h.append([row])
    assert [r.seq for r in h.rows()] == [1]
    listed = ctxbudget.SessionHistoryTool(h).call({"action": "list_windows"})
    assert listed["windows"][0]["item_count"] == 1
    h.quarantine_seq(1)


def test_nesting_deeper_than_readers_parse_is_refused(tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none")
    row = {"kind": "message", "role": "user", "parts": [], "meta": {"deep": _nested(124)}}
    with pytest.raises(ctxbudget.InvalidRowError, match="125 objects and arrays deep"):
        h.append([row])
    assert list(h.rows()) == []


def test_rollover_and_quarantine_use_the_same_checks(tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none")
    with pytest.raises(ctxbudget.InvalidRowError, match=r"meta\.when"):
        h.quarantine(msg("x", when=object()))
    with pytest.raises(ctxbudget.InvalidRowError):
        h.rollover(rollover_id="r", reason="manual", lead_in="go", figures={"f": math.nan})
    assert list(h.rows()) == []
