"""The core's window fold, as Python reads it (``_ctxbudget.WindowFold``): windows,
floor, retractions, visible rows, claims, open calls and a scheduled ``new_context``
come from one fold in Rust, advanced by the rows appended since its last step."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from history_helpers import msg
from stores import StoreUnderTest

from ctxbudget import History, InvalidArgumentError, Row, _ctxbudget


@pytest.fixture
def history(store: StoreUnderTest) -> History:
    """A new transcript of each store (the tests taking it run on both)."""
    return store.open()


def fold_of(history: History) -> _ctxbudget.WindowFold:
    return _ctxbudget.WindowFold(history._core)


def test_advance_returns_typed_rows_once_and_follows_windows(history: History) -> None:
    fold = fold_of(history)
    assert fold.advance() == ([], False)
    history.append([msg("hello"), msg("hi", role="assistant")])
    rows, changed = fold.advance()
    assert [type(r) for r in rows] == [Row, Row]
    assert [(r.seq, r.kind, r.role, r.window) for r in rows] == [
        (1, "message", "user", "w:0"),
        (2, "message", "assistant", "w:0"),
    ]
    assert rows[0].parts == [{"type": "text", "text": "hello"}]
    assert not changed
    assert fold.advance() == ([], False)
    assert (fold.window_id, fold.last_seq, fold.last_user_seq) == ("w:0", 2, 1)

    window = history.rollover(rollover_id="r1", reason="manual", lead_in="go on")
    rows, changed = fold.advance()
    assert changed and fold.window_id == window == "w:3"
    assert [r.kind for r in rows] == ["boundary", "lead_in"]
    assert fold.previous_window_id == "w:0"
    assert fold.window_kind == "rollover"
    assert fold.visible_seqs == [4]
    assert fold.last_user_seq is None


def test_claims_calls_retractions_and_new_context(history: History) -> None:
    history.append(
        [
            msg("question"),
            {"kind": "advisory", "role": "user", "meta": {"stage": "handoff"}},
            {
                "kind": "message",
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": "c1", "name": "grep", "arguments": {"q": "x"}},
                    {"type": "tool_call", "id": "c2", "name": "new_context", "arguments": {}},
                ],
            },
        ]
    )
    fold = fold_of(history)
    fold.advance()
    assert fold.claims == (False, True, False)
    assert fold.open_calls == [("c1", "grep", {"q": "x"}, 3), ("c2", "new_context", {}, 3)]
    assert not fold.new_context_requested
    history.append(
        [
            {
                "kind": "message",
                "role": "tool",
                "parts": [
                    {"type": "tool_result", "call_id": "c1", "output": "[interrupted]"},
                    {
                        "type": "tool_result",
                        "call_id": "c2",
                        "name": "new_context",
                        "output": json.dumps({"ok": True, "status": "scheduled"}),
                    },
                ],
            },
            {"kind": "retraction", "role": "system", "meta": {"retracts": 1}},
        ]
    )
    rows, _ = fold.advance()
    assert [r.seq for r in rows] == [4, 5]
    assert fold.open_calls == [] and fold.is_answered("c1")
    assert fold.new_context_requested
    assert fold.retracted == [1] and fold.is_retracted(1)
    assert fold.visible_seqs == [2, 3, 4]
    assert fold.item_count == 2
    assert fold.last_user_seq == 1  # retracted or not: the caller checks is_retracted


def test_a_soft_clear_is_the_floor_and_a_late_fold_starts_at_the_current_window(
    history: History,
) -> None:
    history.append([msg("private")])
    floor = history.clear_soft()
    history.append([msg("after")])
    fold = fold_of(history)
    rows, changed = fold.advance()
    assert changed
    assert [r.seq for r in rows] == [floor, floor + 1]
    assert fold.floor_seq == floor
    assert fold.window_id == f"w:{floor}" and fold.window_kind == "reset"
    assert fold.previous_window_id == "w:0"


def test_rows_are_built_in_rust_as_row_objects(history: History) -> None:
    history.append([msg("a", when=1)])
    (row,) = list(history.rows())
    assert isinstance(row, Row)
    assert row.meta == {"when": 1} and row.id == "1" and row.ts


def test_the_python_row_kinds_are_the_core_vocabulary() -> None:
    from ctxbudget.history import Role, RowKind

    assert [k.value for k in RowKind] == _ctxbudget.ROW_KINDS
    assert [r.value for r in Role] == _ctxbudget.ROLES
    assert _ctxbudget.ROLES == ["user", "assistant", "system", "tool"]
    assert _ctxbudget.PART_TYPES == ["text", "tool_call", "tool_result", "media"]


def test_a_detached_fold_reads_rows_handed_in_as_a_store_fold_does(tmp_path: Path) -> None:
    from ctxbudget.window import WindowFold

    h = History.open(tmp_path / "ws", durability="none")
    h.append(
        [
            {"kind": "message", "role": "user", "parts": [{"type": "text", "text": "hi"}]},
            {
                "kind": "message",
                "role": "assistant",
                "parts": [{"type": "tool_call", "id": "c1", "name": "f", "arguments": {}}],
            },
            {"kind": "retraction", "role": "system", "meta": {"retracts": 1}},
        ]
    )
    stored = WindowFold(h)
    stored.advance()
    detached = WindowFold.detached()
    change = detached.note(list(h.rows()))
    assert change.read and not change.reset
    for read in ("window_id", "last_seq", "claims", "open_calls", "visible_rows", "last_user"):
        got = getattr(detached, read)
        want = getattr(stored, read)
        assert (got() if callable(got) else got) == (want() if callable(want) else want), read
    assert detached.is_retracted(1) and stored.is_retracted(1)
    with pytest.raises(InvalidArgumentError, match="detached"):
        detached.advance()
