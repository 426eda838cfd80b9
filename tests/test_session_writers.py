"""Several writers on one conversation: one Session shared by threads, and two Sessions
(threads, then processes) deciding on the same state at the same moment. No stage is
published twice in a window, no window is sealed twice, and lead-ins name the right
windows."""

from __future__ import annotations

import multiprocessing
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import session_worker
from session_invariants import check_transcript, rollover_due, step_until, warning_due

from ctxbudget import ConflictError, History, InvalidArgumentError, Session

TRIALS = 30
WINDOW = 16_000


def _open(ws: Path, **kw: Any) -> Session:
    return Session.open(ws, model="gpt-4o", context_window=WINDOW, durability="none", **kw)


def _template(tmp_path: Path, name: str, until: Callable[[Session], bool]) -> Path:
    """A workspace stepped (without prepare) until ``until`` holds: the state both
    writers will decide on."""
    ws = tmp_path / name
    step_until(_open(ws), until)
    return ws


def _check_transcript(ws: Path) -> None:
    check_transcript(History.open(ws, durability="none").rows())


def _race_threads(ws: Path, writers: int = 2) -> list[Any]:
    sessions = [_open(ws) for _ in range(writers)]
    barrier = threading.Barrier(writers)
    turns: list[Any] = [None] * writers

    def run(i: int) -> None:
        barrier.wait()
        turns[i] = sessions[i].prepare()

    threads = [threading.Thread(target=run, args=(i,)) for i in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return turns


@pytest.mark.parametrize("due", [warning_due, rollover_due], ids=["advisory", "rollover"])
def test_two_sessions_in_threads_decide_once(tmp_path: Path, due: Callable[..., bool]) -> None:
    template = _template(tmp_path, "template", due)
    for trial in range(TRIALS):
        ws = tmp_path / f"t{trial}"
        shutil.copytree(template, ws)
        turns = _race_threads(ws)
        _check_transcript(ws)
        assert all(t.status == "send" for t in turns)
        assert len({t.window_id for t in turns}) == 1, "both continue in the same window"
        if due is rollover_due:
            assert {t.previous_window_id for t in turns} == {"w:0"}


def test_two_sessions_in_processes_decide_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    jobs: Any = ctx.Queue()
    results: Any = ctx.Queue()
    barrier = ctx.Barrier(2)
    workers = [
        ctx.Process(target=session_worker.serve, args=(jobs, results, barrier)) for _ in range(2)
    ]
    for w in workers:
        w.start()
    try:
        for name, due in (("advisory", warning_due), ("rollover", rollover_due)):
            template = _template(tmp_path, f"template-{name}", due)
            for trial in range(TRIALS):
                ws = tmp_path / f"{name}-{trial}"
                shutil.copytree(template, ws)
                jobs.put(str(ws))
                jobs.put(str(ws))
                got = [results.get(timeout=120) for _ in range(2)]
                _check_transcript(ws)
                assert all(g["status"] == "send" for g in got), got
                assert len({g["window_id"] for g in got}) == 1, got
    finally:
        for _ in workers:
            jobs.put(None)
        for w in workers:
            w.join(timeout=60)
            if w.is_alive():
                w.kill()


def test_one_session_shared_by_threads_builds_the_right_request(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    shared = Session.open(ws, model="gpt-4o", context_window=400_000, durability="none")
    barrier = threading.Barrier(8)

    def run(worker: int) -> None:
        barrier.wait()
        for i in range(50):
            shared.add_user(f"worker {worker} message {i}")
            shared.prepare()

    threads = [threading.Thread(target=run, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    turn = shared.prepare()
    fresh = Session.open(ws, model="gpt-4o", context_window=400_000, durability="none")
    expected = fresh.prepare()
    ids = [m["item_id"] for m in turn.messages]
    assert (
        len(ids)
        == len(set(ids))
        == 400 + len([m for m in turn.messages if m.get("kind") == "advisory"])
    )
    assert turn.messages == expected.messages
    assert turn.decision.projected == expected.decision.projected


def test_conditional_append_is_typed_and_writes_nothing(tmp_path: Path) -> None:
    h = History.open(tmp_path / "ws", durability="none")
    row = {"kind": "message", "role": "user", "parts": [{"type": "text", "text": "a"}]}
    assert h.append([row], if_last_seq=0).first_seq == 1
    with pytest.raises(ConflictError) as err:
        h.append([row], if_last_seq=0)
    assert (err.value.expected_last_seq, err.value.last_seq) == (0, 1)
    assert isinstance(err.value, RuntimeError) and "decide again" in str(err.value)
    with pytest.raises(ConflictError):
        h.rollover(rollover_id="r", reason="manual", lead_in="x", if_last_seq=0)
    with pytest.raises(ConflictError):
        h.quarantine(row, retracts=1, if_last_seq=0)
    assert [r.seq for r in h.rows()] == [1]
    assert h.quarantine(row, retracts=1, if_last_seq=1) == 3
    assert [r.kind for r in h.rows()] == ["message", "retraction", "rejected"]


def _record_result(w: Session, n: int, barrier: threading.Barrier, outcomes: list[str]) -> None:
    barrier.wait()
    try:
        w.add_tool_results([{"call_id": "c1", "name": "read_file", "output": f"{n}"}])
        outcomes.append("recorded")
    except InvalidArgumentError:
        outcomes.append("refused")


def test_two_writers_never_record_two_results_for_one_call(tmp_path: Path) -> None:
    for trial in range(TRIALS):
        ws = tmp_path / f"t{trial}"
        s = _open(ws)
        s.add_user("go")
        s.add_assistant(None, [{"id": "c1", "name": "read_file", "arguments": {}}])
        writers = [_open(ws, open_calls="wait") for _ in range(2)]
        barrier = threading.Barrier(2)
        outcomes: list[str] = []
        threads = [
            threading.Thread(target=_record_result, args=(w, n, barrier, outcomes))
            for n, w in enumerate(writers)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert sorted(outcomes) == ["recorded", "refused"]
        results = [r for r in History.open(ws, durability="none").rows() if r.role == "tool"]
        assert len(results) == 1
