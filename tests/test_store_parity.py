"""The two stores give the same results: one sequence of operations applied to a
workspace and to a PostgreSQL conversation leaves the same rows, windows and floor, and
session_history answers the same (cursors aside: they are signed differently)."""

from __future__ import annotations

import tempfile
from typing import Any

from history_helpers import texts
from hypothesis import given, settings
from hypothesis import strategies as st
from stores import new_conversation_id
from test_session_history import _build, arguments, operation

from ctxbudget import History, SessionHistoryTool

_PROBES: list[Any] = [
    {"action": "list_windows"},
    {"action": "list_items", "limit": 4},
    {"action": "list_items", "recent_first": True},
    {"action": "search", "query": "MARK"},
    {"action": "search", "query": "a", "role": "assistant"},
    {"action": "read_item", "item_id": "3", "limit_chars": 7},
]


def _answer(tool: SessionHistoryTool, args: Any) -> Any:
    result = tool.call(args)
    if isinstance(result, dict):
        result.pop("cursor", None)
    return result


def _state(h: History) -> Any:
    return (
        texts(h),
        [w.to_dict() for w in h.windows()],
        h.current_window,
        h.verify().floor_seq,
        [(r.seq, r.kind, r.role, r.window, r.parts, r.meta) for r in h.rows()],
    )


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(operation, max_size=20), calls=st.lists(arguments, max_size=4))
def test_same_operations_same_results(
    pg_url: str, ops: list[tuple[str, str]], calls: list[Any]
) -> None:
    with tempfile.TemporaryDirectory() as d:
        file_h, file_secrets, file_floor = _build(History.open(d, durability="none"), ops)
        pg_h, pg_secrets, pg_floor = _build(
            History.open(pg_url, conversation=new_conversation_id("parity")), ops
        )
        assert (file_secrets, file_floor) == (pg_secrets, pg_floor)
        assert _state(file_h) == _state(pg_h)
        file_tool, pg_tool = SessionHistoryTool(file_h), SessionHistoryTool(pg_h)
        for args in [*_PROBES, *calls]:
            assert _answer(file_tool, args) == _answer(pg_tool, args), args
        for args in ({"action": "list_items", "limit": 2}, {"action": "search", "query": "m"}):
            assert _pages(file_tool, args) == _pages(pg_tool, args), args


def _pages(tool: SessionHistoryTool, args: dict[str, Any]) -> list[Any]:
    """Every page of a paged call, cursors followed (and then dropped)."""
    pages, cursor = [], None
    while True:
        r = tool.call({**args, **({"cursor": cursor} if cursor else {})})
        cursor = r.pop("cursor", None)
        pages.append(r)
        if not cursor:
            return pages
