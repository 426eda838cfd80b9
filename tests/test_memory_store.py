"""``History.open("memory:NAME")``: the in-memory store of this process. Its contract
with the other stores is pinned by the parity property (test_store_parity.py) and the
core's tests; these pin how it is named and opened."""

from __future__ import annotations

import pytest
from history_helpers import msg, texts
from stores import new_conversation_id

from ctxbudget import History, InvalidArgumentError, InvalidRowError, SessionHistoryTool


def test_histories_opened_with_one_name_share_rows_and_others_do_not() -> None:
    name = f"memory:{new_conversation_id('mem')}"
    a, b = History.open(name), History.open(name)
    other = History.open(f"memory:{new_conversation_id('mem')}")
    a.append([msg("one")])
    assert b.append([msg("two")], if_last_seq=1).first_seq == 2
    assert texts(a) == [(1, "one"), (2, "two")]
    assert texts(other) == []
    assert a.directory is None


def test_a_name_is_required_and_database_options_are_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="needs a name"):
        History.open("memory:")
    with pytest.raises(InvalidArgumentError, match="conversation="):
        History.open(f"memory:{new_conversation_id('mem')}", conversation="c")


def test_rows_over_the_limit_are_refused_and_nothing_is_written() -> None:
    h = History.open(f"memory:{new_conversation_id('mem')}", max_row_bytes=200)
    with pytest.raises(InvalidRowError, match="row limit"):
        h.append([msg("ok"), msg("x" * 500)])
    assert texts(h) == []


def test_session_history_pages_over_it_and_a_rotation_voids_cursors() -> None:
    h = History.open(f"memory:{new_conversation_id('mem')}")
    for i in range(3):
        h.append([msg(f"window {i}")])
        h.rollover(rollover_id=f"r{i}", reason="usable_limit", lead_in="lead")
    tool = SessionHistoryTool(h)
    first = tool.call({"action": "list_items", "limit": 1})
    assert first["ok"] and first["cursor"]
    assert h.rotate().rows > 0
    again = tool.call({"action": "list_items", "limit": 1, "cursor": first["cursor"]})
    assert again["code"] == "history_changed"
