"""Compound writes are one batch under one hold of the lock, built from the store's own
state: a rollover's lead-in names the window the core assigns (not one predicted by the
caller), a quarantine hides a row only together with its quarantine record."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from history_helpers import file_recovery, file_verify, msg
from stores import StoreUnderTest

import ctxbudget
from ctxbudget import History, _ctxbudget


@pytest.fixture
def history(store: StoreUnderTest) -> History:
    """A new transcript of each store (the tests taking it run on both)."""
    return store.open()


def test_the_lead_in_names_the_window_the_core_assigns(history: History) -> None:
    history.append([msg("hello")])
    decided_at = history.append([msg("hi", role="assistant")]).last_seq
    predicted = f"w:{decided_at + 1}"
    history.append([msg("another writer got in first")])
    window = history.rollover(
        rollover_id="r1",
        reason="usable_limit",
        lead_in=lambda window_id, previous: f"You are in {window_id}; before: {previous}.",
    )
    assert window != predicted and window == "w:4"
    lead_in = [r for r in history.rows() if r.kind == "lead_in"]
    assert [r.parts[0]["text"] for r in lead_in] == ["You are in w:4; before: w:0."]
    assert lead_in[0].window == window


def test_an_exception_in_the_lead_in_aborts_the_rollover(history: History) -> None:
    history.append([msg("hello")])

    class Broken(Exception):
        pass

    def render(window_id: str, previous: str) -> str:
        raise Broken(window_id)

    with pytest.raises(Broken, match="w:2"):
        history.rollover(rollover_id="r1", reason="manual", lead_in=render)
    assert [r.kind for r in history.rows()] == ["message"]
    assert history.current_window == "w:0"


def test_quarantine_seq_is_one_conditional_batch(history: History) -> None:
    seq = history.append([msg("far too long", source="paste")]).first_seq
    with pytest.raises(ctxbudget.ConflictError):
        history.quarantine_seq(seq, if_last_seq=0)
    q = history.quarantine_seq(seq, if_last_seq=seq)
    rows = list(history.rows())
    assert [r.kind for r in rows] == ["message", "retraction", "rejected"]
    assert rows[1].meta == {"retracts": seq}
    assert rows[2].seq == q
    assert rows[2].meta["rejected"] == {
        "role": "user",
        "parts": [{"type": "text", "text": "far too long"}],
        "meta": {"source": "paste"},
    }
    with pytest.raises(ctxbudget.InvalidArgumentError, match="no readable row with seq 42"):
        history.quarantine_seq(42)


@pytest.mark.skipif(not _ctxbudget.FAILPOINTS, reason="needs the failpoints build")
@pytest.mark.parametrize("cut", [1, 90, 200, 300, 420])
def test_a_crash_inside_quarantine_leaves_both_rows_or_neither(tmp_path: Path, cut: int) -> None:
    history = History.open(tmp_path, durability="none")
    seq = history.append([msg("far too long")]).first_seq
    _ctxbudget._arm_failpoint("append.write", f"torn:{cut}")
    try:
        with pytest.raises(ctxbudget.HistoryIOError):
            history.quarantine_seq(seq)
    finally:
        _ctxbudget._reset_failpoints()
    kinds = [r.kind for r in History.open(tmp_path, durability="none").rows()]
    assert kinds in (["message"], ["message", "retraction", "rejected"])


def test_reports_are_typed_classes_with_the_old_attributes(history: History) -> None:
    appended = history.append([msg("a")])
    assert isinstance(appended, ctxbudget.AppendResult)
    assert (appended.first_seq, appended.last_seq, appended.window) == (1, 1, "w:0")
    history.rollover(rollover_id="r", reason="manual", lead_in="go on")
    (first, second) = history.windows()
    assert isinstance(first, ctxbudget.WindowInfo)
    assert (second.window_id, second.boundary_kind, second.first_seq) == ("w:2", "rollover", 2)
    assert first == history.windows()[0]
    state = history.state()
    assert isinstance(state, ctxbudget.StoreState) and state.last_seq == 3
    report = history.verify()
    assert isinstance(report, ctxbudget.VerifyReport)
    assert isinstance(report.live, ctxbudget.RowCounts)
    assert report.ok and report.live.rows == 3 and report.last_seq == 3
    as_json = json.loads(json.dumps(report.to_dict()))
    assert as_json["live"] == {"rows": 3, "malformed": 0}
    assert "VerifyReport(ok=True" in repr(report)
    if history.directory is None:
        # A PostgreSQL conversation or the in-memory store: nothing file-only to report.
        assert isinstance(state.detail, ctxbudget.NoDetail)
        assert as_json["detail"]["kind"] == state.detail.kind
    else:
        assert isinstance(state.detail, ctxbudget.FileState)
        receipt = state.detail.receipt
        assert receipt is not None and receipt.state == "stable" and receipt.seq == 3
        assert receipt.chat is not None and receipt.chat.size > 0
        file = file_verify(report)
        assert file.chat.rows == 3 and file.chat.damage is None
        assert as_json["detail"]["kind"] == "file" and as_json["detail"]["chat"]["rows"] == 3
        assert as_json["detail"]["receipt"] == "stable"
    rotated = history.rotate()
    assert isinstance(rotated, ctxbudget.RotateReport) and rotated.rows == 1
    recovered = history.recover()
    assert not recovered.changed
    if history.directory is None:
        assert isinstance(recovered.detail, ctxbudget.NoDetail)
    else:
        assert file_recovery(recovered).moved_to == []
    with pytest.raises(AttributeError):
        report.ok = False  # type: ignore[misc]


_READS_IN_LEAD_IN = """
import sys
from ctxbudget import History, LockTimeoutError
if len(sys.argv) == 3:
    h = History.open(sys.argv[1], conversation=sys.argv[2])
else:
    h = History.open(sys.argv[1], durability="none", lock_timeout=0.5)
h.append([{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "a"}]}])
def lead_in(window_id, previous):
    return f"{len(list(h.rows()))} rows before {window_id}"
try:
    print(h.rollover(rollover_id="r", reason="manual", lead_in=lead_in))
except LockTimeoutError:
    print("lock timeout")
"""


def test_a_lead_in_that_reads_the_history_never_hangs(store: StoreUnderTest) -> None:
    """A lead-in renderer that reads the transcript (to summarize it, say) runs while the
    rollover holds the conversation: it gets the rows, or a typed error — the process
    never hangs."""
    try:
        out = subprocess.run(
            [sys.executable, "-c", _READS_IN_LEAD_IN, *store.target_args()],
            capture_output=True,
            text=True,
            timeout=15,  # the renderer's read takes milliseconds; a file lock wait 0.5 s
        )
    except subprocess.TimeoutExpired:
        pytest.fail("the rollover hung: the lead-in's read never returned")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() in ("w:2", "lock timeout"), out.stdout
