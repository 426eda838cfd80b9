"""The transcript store's Python API: rows, windows, receipts, errors, locking."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from filelock import FileLock
from history_helpers import chat_path, file_verify, msg, receipt_of, texts
from stores import StoreUnderTest

import ctxbudget
from ctxbudget import Durability, History, _ctxbudget


@pytest.fixture
def history(store: StoreUnderTest) -> History:
    """A new transcript of each store (the tests taking it run on both)."""
    return store.open()


def test_append_is_one_durable_batch_with_increasing_seqs(store: StoreUnderTest) -> None:
    h = store.open(durability="fsync")  # the default, for the file store
    first = h.append([msg("a"), msg("b", role="assistant")])
    second = h.append([msg("c")])
    assert (first.first_seq, first.last_seq, second.first_seq) == (1, 2, 3)
    assert first.epoch == second.epoch
    assert texts(h) == [(1, "a"), (2, "b"), (3, "c")]
    rows = list(h.rows())
    assert [r.id for r in rows] == ["1", "2", "3"]
    assert {r.window for r in rows} == {"w:0"}
    assert all(r.ts and r.ts.endswith("Z") for r in rows)
    state = h.state()
    assert (state.epoch, state.last_seq, state.floor_seq) == (first.epoch, 3, 0)
    report = h.verify()
    assert report.ok and (report.epoch, report.last_seq) == (first.epoch, 3), report
    assert (report.live.rows, report.archive.rows) == (3, 0), report
    kinds = {"file": "file", "postgres": "postgres", "memory": "log"}
    assert state.detail.kind == kinds[store.kind], state
    if store.has_files:
        ws = Path(store.main)
        receipt = receipt_of(h)
        assert receipt is not None and receipt.state == "stable"
        assert receipt.seq == 3 and receipt.epoch == first.epoch
        assert receipt.chat is not None
        assert receipt.committed_end == chat_path(ws).stat().st_size
        assert len((ws / "history" / "receipt.json").read_bytes()) <= 4096


def test_rollover_lead_in_and_trigger_form_one_window(history: History) -> None:
    history.append([msg("before")])
    window = history.rollover(
        rollover_id="roll-1",
        reason="new_context",
        requested_by="model",
        lead_in="New window w:2, previous w:0. Read /memories/session/ first.",
        trigger={"kind": "continuation", "role": "user", "parts": []},
        figures={"projected": 91_808, "budget_tokens": 91_808},
    )
    assert window == "w:2" == history.current_window
    again = history.rollover(rollover_id="roll-1", reason="new_context", lead_in="x")
    assert again == "w:2"
    kinds = [(r.seq, r.kind, r.window) for r in history.rows()]
    assert kinds == [
        (1, "message", "w:0"),
        (2, "boundary", "w:2"),
        (3, "lead_in", "w:2"),
        (4, "continuation", "w:2"),
    ]
    boundary = next(r for r in history.rows() if r.kind == "boundary")
    assert boundary.meta["boundary_kind"] == "rollover"
    assert boundary.meta["rollover_id"] == "roll-1"
    assert boundary.meta["requested_by"] == "model"
    assert boundary.meta["previous_window"] == "w:0"
    assert boundary.meta["projected"] == 91_808
    lead_in = next(r for r in history.rows() if r.kind == "lead_in")
    assert lead_in.meta == {"rollover_id": "roll-1"}


def test_soft_clear_is_a_reset_window(history: History) -> None:
    history.append([msg("secret")])
    seq = history.clear_soft()
    assert history.current_window == f"w:{seq}"
    windows = history.windows()
    assert [(w.window_id, w.boundary_kind, w.item_count) for w in windows] == [
        ("w:0", "root", 1),
        (f"w:{seq}", "reset", 0),
    ]


def test_quarantine_hides_control_metadata(history: History) -> None:
    seq = history.quarantine(msg("too big to ever fit", skill="deploy", command="/run"))
    row = next(r for r in history.rows() if r.seq == seq)
    assert (row.kind, row.role, row.parts) == ("rejected", "assistant", [])
    assert set(row.meta) == {"rejected"}
    assert row.meta["rejected"]["meta"] == {"skill": "deploy", "command": "/run"}
    assert row.meta["rejected"]["parts"][0]["text"] == "too big to ever fit"


def test_retraction_hides_an_item_from_window_counts(history: History) -> None:
    history.append([msg("keep"), msg("oops")])
    history.append([{"kind": "retraction", "role": "system", "meta": {"retracts": 2}}])
    assert history.windows()[0].item_count == 1
    assert len(list(history.rows())) == 3, "the retracted row stays in the file"


def test_rotate_moves_closed_windows_to_the_archive(store: StoreUnderTest) -> None:
    h = store.open(durability=Durability.NONE)
    h.append([msg("w0")])
    h.rollover(rollover_id="r", reason="usable_limit", lead_in="lead")
    h.append([msg("w2")])
    before = texts(h)
    epoch = h.state().epoch
    assert epoch is not None
    report = h.rotate()
    assert report.rows == 1 and report.bytes > 0
    assert texts(h) == before
    assert h.state().epoch not in (None, epoch)
    assert store.open().rotate().rows == 0, "nothing left to archive"
    verified = h.verify()
    assert verified.archive.rows == 1 and verified.live.rows == 3, verified
    if store.has_files:
        ws = Path(store.main)
        assert "w0" in (ws / "history" / "chat-archive.jsonl").read_text()
        assert "w0" not in chat_path(ws).read_text()


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ({"kind": "note", "role": "user"}, "kind"),
        ({"kind": "message", "role": "robot"}, "role"),
        ({"kind": "message", "role": "user", "parts": "text"}, "parts"),
        ({"kind": "message", "role": "user", "parts": [{"type": "video"}]}, "parts[0].type"),
        ({"kind": "message", "role": "user", "parts": [{"type": "text"}]}, "parts[0].text"),
        ({"kind": "message", "role": "user", "parts": [{"type": "tool_call"}]}, "parts[0].id"),
        ({"kind": "message", "role": "user", "meta": []}, "meta"),
        ({"kind": "message", "role": "user", "seq": 9}, "seq"),
        ({"kind": "boundary", "role": "system"}, "meta.boundary_kind"),
    ],
)
def test_invalid_rows_name_row_and_field(history: History, row: dict, field: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ctxbudget.InvalidRowError) as info:
        history.append([msg("fine"), row])
    assert isinstance(info.value, ValueError)
    assert info.value.index == 1
    assert info.value.field == field
    assert "row 1" in str(info.value)
    assert list(history.rows()) == [], "nothing of the batch was written"


@pytest.mark.parametrize(
    "bad",
    [
        msg("x", score=float("nan")),
        msg("x", when=object()),
        {"kind": "message", "role": "user", "parts": [{"type": "text", "text": "\ud800"}]},
    ],
)
def test_unserializable_rows_are_invalid(history: History, bad: dict) -> None:  # type: ignore[type-arg]
    with pytest.raises(ctxbudget.InvalidRowError, match="row 0"):
        history.append([bad])


def test_oversized_row_is_refused(store: StoreUnderTest) -> None:
    h = store.open(max_row_bytes=1_000)
    with pytest.raises(ctxbudget.InvalidRowError, match="row limit"):
        h.append([msg("x" * 2_000)])
    h.append([msg("x" * 500)])


def test_bad_options_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="durability"):
        History.open(tmp_path, durability="sometimes")
    with pytest.raises(ValueError, match="lock_timeout"):
        History.open(tmp_path, lock_timeout=-1)
    with pytest.raises(ValueError, match="max_row_bytes"):
        History.open(tmp_path, max_row_bytes=0)
    h = History.open(tmp_path, durability="none")
    with pytest.raises(ctxbudget.InvalidArgumentError, match="reason"):
        h.rollover(rollover_id="r", reason="because", lead_in="x")
    with pytest.raises(TypeError, match="list of rows"):
        h.append(msg("not in a list"))  # type: ignore[arg-type]


def test_filelock_on_the_lock_file_blocks_an_append(tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none", lock_timeout=10)
    lock = FileLock(str(tmp_path / "history" / "lock"))
    done = threading.Event()
    with lock:
        worker = threading.Thread(target=lambda: (h.append([msg("waited")]), done.set()))
        worker.start()
        time.sleep(0.4)
        assert not done.is_set(), "the append must wait for the filelock holder"
    worker.join(timeout=10)
    assert done.is_set()
    assert texts(h) == [(1, "waited")]
    assert (tmp_path / "history" / "lock").exists(), "the lock file is never unlinked"


def test_lock_timeout_names_the_lock_file(tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none", lock_timeout=0.2)
    with FileLock(str(tmp_path / "history" / "lock")):
        start = time.monotonic()
        with pytest.raises(ctxbudget.LockTimeoutError) as info:
            h.append([msg("never")])
        assert time.monotonic() - start < 5
    err = info.value
    assert isinstance(err, TimeoutError)
    assert str(tmp_path / "history" / "lock") in str(err)
    assert err.path == tmp_path / "history" / "lock" or str(err.path).endswith("lock")


def test_corruption_refuses_writes_and_keeps_every_byte(tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="none")
    h.append([msg("alpha")])
    h.append([msg("omega")])
    path = chat_path(tmp_path)
    data = path.read_bytes().replace(b"alpha", b"alpho")
    path.write_bytes(data)
    h2 = History.open(tmp_path, durability="none")
    with pytest.raises(ctxbudget.CorruptHistoryError) as info:
        h2.append([msg("more")])
    assert info.value.line == 1 and info.value.offset == 0
    assert "verify" in str(info.value)
    assert path.read_bytes() == data
    report = h2.verify()
    assert not report.ok and file_verify(report).chat.damage is not None


@pytest.mark.skipif(not _ctxbudget.FAILPOINTS, reason="needs the failpoints build")
def test_enospc_is_an_oserror_with_errno_and_nothing_is_lost(tmp_path: Path) -> None:
    h = History.open(tmp_path, durability="fsync")
    h.append([msg("safe")])
    _ctxbudget._arm_failpoint("append.write", "error:28")
    try:
        with pytest.raises(ctxbudget.HistoryIOError) as info:
            h.append([msg("no space")])
    finally:
        _ctxbudget._reset_failpoints()
    assert isinstance(info.value, OSError) and info.value.errno == 28
    assert texts(History.open(tmp_path)) == [(1, "safe")]


def test_legacy_histories_are_read_and_continued(tmp_path: Path) -> None:
    (tmp_path / "history").mkdir()
    legacy = [
        {
            "seq": 1,
            "id": "1",
            "kind": "message",
            "role": "user",
            "window": "w:0",
            "parts": [{"type": "text", "text": "from an older version"}],
            "meta": {},
        },
        {
            "seq": 2,
            "id": "2",
            "kind": "message",
            "role": "assistant",
            "window": "w:0",
            "parts": [{"type": "text", "text": "reply"}],
            "meta": {},
        },
    ]
    chat_path(tmp_path).write_text("".join(json.dumps(r) + "\n" for r in legacy))
    h = History.open(tmp_path, durability="none")
    assert texts(h) == [(1, "from an older version"), (2, "reply")]
    assert h.append([msg("new")]).first_seq == 3
    assert file_verify(h.verify()).chat.legacy_rows == 2
