"""The stores give the same results: one sequence of operations applied to a workspace
and to another store (a PostgreSQL conversation, an in-memory store) leaves the same
rows, windows and floor, and session_history answers the same (cursors aside: they are
signed differently)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from typing import Any

import pytest
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


@pytest.fixture(scope="module", params=["postgres", "memory"])
def other_store(request: pytest.FixtureRequest) -> Callable[[], History]:
    """Opens a fresh location of the store compared with the file store."""
    if request.param == "postgres":
        url = request.getfixturevalue("pg_url")
        return lambda: History.open(url, conversation=new_conversation_id("parity"))
    return lambda: History.open(f"memory:{new_conversation_id('parity')}")


@settings(max_examples=100, deadline=None)
@given(ops=st.lists(operation, max_size=20), calls=st.lists(arguments, max_size=4))
def test_same_operations_same_results(
    other_store: Callable[[], History], ops: list[tuple[str, str]], calls: list[Any]
) -> None:
    with tempfile.TemporaryDirectory() as d:
        file_h, file_secrets, file_floor = _build(History.open(d, durability="none"), ops)
        other_h, other_secrets, other_floor = _build(other_store(), ops)
        assert (file_secrets, file_floor) == (other_secrets, other_floor)
        assert _state(file_h) == _state(other_h)
        file_tool, other_tool = SessionHistoryTool(file_h), SessionHistoryTool(other_h)
        for args in [*_PROBES, *calls]:
            assert _answer(file_tool, args) == _answer(other_tool, args), args
        for args in ({"action": "list_items", "limit": 2}, {"action": "search", "query": "m"}):
            assert _pages(file_tool, args) == _pages(other_tool, args), args


def _pages(tool: SessionHistoryTool, args: dict[str, Any]) -> list[Any]:
    """Every page of a paged call, cursors followed (and then dropped)."""
    pages, cursor = [], None
    while True:
        r = tool.call({**args, **({"cursor": cursor} if cursor else {})})
        cursor = r.pop("cursor", None)
        pages.append(r)
        if not cursor:
            return pages
