"""Retention on both stores (docs/guide-deploy.md, "Retention and deletion"): a prune
removes whole sealed windows for good and keeps the current window, the privacy floor and
every row it should keep; a delete removes a conversation for good and touches no other;
cursors minted before either answer ``history_changed``; a handle still open on a deleted
conversation gets a typed error on its next write."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from history_helpers import msg, texts
from stores import StoreUnderTest

from ctxbudget import (
    ConversationDeletedError,
    FileState,
    History,
    InvalidArgumentError,
    SessionHistoryTool,
)
from ctxbudget.cli import main


def _windows(h: History, n: int, per: int = 3) -> None:
    """``n`` windows (n - 1 rollovers), ``per`` messages each, tagged ``w<i>-<j>``."""
    for i in range(n):
        if i:
            h.rollover(rollover_id=f"r{i}", reason="usable_limit", lead_in=f"lead {i}")
        h.append([msg(f"w{i}-{j}") for j in range(per)])


def _said(h: History) -> list[str]:
    """The texts of the messages (not boundaries or lead-ins), in order."""
    return [t for _, t in texts(h) if not t.startswith(("<", "lead"))]


def _cursor(h: History) -> str:
    page = SessionHistoryTool(h).call({"action": "list_items", "limit": 1})
    assert page["ok"] and page.get("cursor"), page
    return str(page["cursor"])


def _follow(h: History, cursor: str) -> dict[str, object]:
    return SessionHistoryTool(h).call({"action": "list_items", "limit": 1, "cursor": cursor})


def test_keep_windows_removes_the_oldest_sealed_windows_only(store: StoreUnderTest) -> None:
    h = store.open()
    _windows(h, 4)
    before = {seq: text for seq, text in texts(h)}
    windows = [w.window_id for w in h.windows()]
    cursor = _cursor(h)
    report = h.prune(keep_windows=1)
    assert report.epoch is not None and report.rows > 0
    kept = [w.window_id for w in h.windows()]
    assert kept == windows[-2:], (windows, kept)  # one sealed window and the current one
    # Every row from the cut on is still there, unchanged, under its seq and window.
    now = {seq: text for seq, text in texts(h)}
    assert now == {s: t for s, t in before.items() if s >= report.kept_from}
    assert min(r.seq for r in h.rows() if r.seq is not None) == report.kept_from
    assert (_follow(h, cursor)["ok"], _follow(h, cursor)["code"]) == (False, "history_changed")
    assert h.verify().ok
    # Appends go on with the next seq; a second identical prune changes nothing.
    appended = h.append([msg("after the prune")])
    assert appended.first_seq == max(before) + 1
    assert h.prune(keep_windows=1).epoch is None


def test_the_current_window_always_stays(store: StoreUnderTest) -> None:
    h = store.open()
    _windows(h, 2)
    report = h.prune(keep_windows=0)
    assert [w.window_id for w in h.windows()] == [h.current_window]
    assert _said(h) == ["w1-0", "w1-1", "w1-2"] and report.rows > 0
    assert h.prune(keep_windows=0, older_than=0).epoch is None  # nothing sealed is left


def test_a_soft_clear_then_a_purge_removes_everything_below_the_floor(
    store: StoreUnderTest,
) -> None:
    h = store.open()
    _windows(h, 3)
    floor = h.clear_soft()
    h.append([msg("after the clear"), msg("and more")])
    cursor = _cursor(h)
    report = h.prune(below_floor=True)
    assert report.floor_seq == floor and report.kept_from == floor
    rows = [r for r in h.rows() if r.seq is not None]
    assert min(r.seq for r in rows) == floor  # the soft clear itself stays: the floor row
    assert _said(h) == ["after the clear", "and more"]
    state = h.state()
    assert state.floor_seq == floor, state
    if isinstance(state.detail, FileState):
        assert state.detail.receipt is None or state.detail.receipt.floor == floor
    assert _follow(h, cursor)["code"] == "history_changed"
    # The floor is never lowered by a prune, and a later prune of everything keeps it.
    h.rollover(rollover_id="later", reason="usable_limit", lead_in="lead x")
    h.append([msg("newest")])
    again = h.prune(keep_windows=0)
    assert again.floor_seq == floor
    assert _said(h) == ["newest"]
    assert h.verify().ok


def test_prune_by_age_keeps_windows_with_newer_rows(store: StoreUnderTest) -> None:
    h = store.open()
    _windows(h, 3)
    assert h.prune(older_than=timedelta(days=1)).epoch is None  # all written just now
    report = h.prune(older_than=0)
    assert report.epoch is not None
    assert [w.window_id for w in h.windows()] == [h.current_window]


def test_prune_needs_a_criterion_and_valid_values(store: StoreUnderTest) -> None:
    h = store.open()
    _windows(h, 2)
    with pytest.raises(InvalidArgumentError, match="criterion"):
        h.prune()
    with pytest.raises(InvalidArgumentError, match="keep_windows"):
        h.prune(keep_windows=-1)
    with pytest.raises(InvalidArgumentError, match="older_than"):
        h.prune(older_than=-5)
    assert len(h.windows()) == 2  # nothing was removed


def test_delete_removes_one_conversation_and_touches_no_other(
    store: StoreUnderTest,
) -> None:
    gone, kept = store.open(), store.open(store.fresh())
    _windows(gone, 2)
    _windows(kept, 2)
    kept_rows = texts(kept)
    stored = len(texts(gone))
    cursor = _cursor(gone)
    target = store.main
    report = store.delete(target)
    assert report.existed and report.rows == stored, report
    assert texts(kept) == kept_rows and kept.verify().ok
    # The handle still open on the deleted conversation: a typed error, nothing written.
    with pytest.raises(ConversationDeletedError):
        gone.append([msg("too late")])
    # A second delete finds nothing; opening the name again starts an empty conversation.
    again = store.delete(target)
    assert not again.existed
    fresh = store.open()
    assert texts(fresh) == [] and fresh.append([msg("new")]).first_seq == 1
    # A cursor of the deleted conversation never pages the new one under its name.
    _windows(fresh, 1, per=4)
    assert _follow(fresh, cursor)["code"] == "history_changed"


def test_deleting_a_workspace_removes_every_file_it_holds(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    h = History.open(ws, durability="none")
    _windows(h, 2)
    (ws / "memories" / "notes").mkdir(parents=True)
    (ws / "memories" / "notes" / "a.md").write_text("secret")
    (ws / "budget.json").write_text("{}")
    (ws / "history" / "recovered").mkdir()
    (ws / "history" / "recovered" / "chat-at-1.jsonl").write_text("torn secret")
    report = History.delete(ws)
    assert (report.memory_files, report.recovered_files) == (1, 1)
    assert not ws.exists()
    # A host's own file keeps the directory.
    h = History.open(ws, durability="none")
    _windows(h, 1)
    (ws / "host.txt").write_text("mine")
    History.delete(ws)
    assert sorted(p.name for p in ws.iterdir()) == ["host.txt"]


def test_cli_delete_needs_yes_and_prune_prints_a_report(
    store: StoreUnderTest, capsys: pytest.CaptureFixture[str]
) -> None:
    h = store.open()
    _windows(h, 3)
    where = store.cli_args()
    with pytest.raises(SystemExit) as exited:
        main(["history", "delete", *where])
    assert exited.value.code == 2 and "--yes" in capsys.readouterr().err
    assert main(["history", "prune", *where, "--keep-windows", "1", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["rows"] > 0 and report["epoch"] is not None
    assert main(["history", "prune", *where, "--older-than", "30d"]) == 0
    assert "nothing to prune" in capsys.readouterr().out
    assert main(["history", "delete", *where, "--yes"]) == 0
    assert "deleted" in capsys.readouterr().out
    assert texts(store.open()) == []
