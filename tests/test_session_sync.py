"""Session.retract and Session.sync_messages: a framework's message list recorded by its
messages' IDs, once — across calls, sessions, processes, windows and races."""

from __future__ import annotations

import asyncio
import multiprocessing
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from stores import STORE_KINDS, StoreUnderTest

from ctxbudget import (
    AsyncSession,
    ConflictError,
    CtxBudgetError,
    History,
    InvalidArgumentError,
    KeyedMessage,
    MessageChangedError,
    Session,
)

TRIALS = 25
PROCESS_TRIALS = 6


def _open(ws: Path, **kw: Any) -> Session:
    return Session.open(ws, model="gpt-4o", context_window=16_000, durability="none", **kw)


def _conversation(n: int = 3) -> list[KeyedMessage]:
    """A framework's list: user, a tool call, its result, the answer, n times."""
    out = []
    for i in range(n):
        out += [
            KeyedMessage.from_chat(f"u{i}", {"role": "user", "content": f"question {i}"}),
            KeyedMessage.from_chat(
                f"a{i}",
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": f"call{i}",
                            "type": "function",
                            "function": {"name": "lookup", "arguments": '{"q": 1}'},
                        }
                    ],
                },
            ),
            KeyedMessage.from_chat(
                f"t{i}", {"role": "tool", "tool_call_id": f"call{i}", "content": f"result {i}"}
            ),
            KeyedMessage.from_chat(f"r{i}", {"role": "assistant", "content": f"answer {i}"}),
        ]
    return out


def _keys(ws: Path) -> Counter[str]:
    return Counter(
        str(r.meta["key"]) for r in History.open(ws, durability="none").rows() if "key" in r.meta
    )


# ----- retract ------------------------------------------------------------------------


def test_retract_hides_a_row_and_writes_the_replacement_in_the_same_batch(tmp_path: Path) -> None:
    s = _open(tmp_path)
    s.add_user("first")
    second = int(s.add_user("second"))
    seqs = s.retract(
        second,
        replace_with=[
            {
                "kind": "message",
                "role": "user",
                "parts": [{"type": "text", "text": "second, edited"}],
            }
        ],
    )
    assert len(seqs) == 2
    texts = [r.parts[0]["text"] for r in s.view().rows]
    assert texts == ["first", "second, edited"]
    kinds = [r.kind for r in History.open(tmp_path).rows()]
    assert kinds == ["message", "message", "retraction", "message"], "nothing rewritten"


def test_retract_refuses_a_row_no_request_carries_and_writes_nothing(tmp_path: Path) -> None:
    s = _open(tmp_path)
    seq = int(s.add_user("hi"))
    s.retract(seq)
    before = len(list(s.history.rows()))
    for bad in (seq, 999, 0):
        with pytest.raises(InvalidArgumentError, match="only those can be retracted"):
            s.retract(bad)
    with pytest.raises(InvalidArgumentError):
        s.retract(True)
    assert len(list(s.history.rows())) == before


def test_retract_is_conditional_when_asked(tmp_path: Path) -> None:
    s = _open(tmp_path)
    seq = int(s.add_user("hi"))
    stale = s.view().last_seq
    _open(tmp_path).add_user("another writer")
    with pytest.raises(ConflictError):
        s.retract(seq, if_last_seq=stale)
    s.retract(seq)  # unconditional: reads the new row, checks again, lands
    assert [r.parts[0]["text"] for r in s.view().rows] == ["another writer"]


def test_retracting_a_call_closes_it(tmp_path: Path) -> None:
    s = _open(tmp_path)
    s.add_user("hi")
    seq = int(s.add_assistant(None, [{"id": "c1", "name": "lookup", "arguments": {}}]))
    assert not s.settled
    s.retract(seq)
    assert s.settled


# ----- sync_messages -------------------------------------------------------------------


def test_sync_records_each_message_once(tmp_path: Path) -> None:
    s = _open(tmp_path)
    msgs = _conversation()
    first = s.sync_messages(msgs[:5])
    assert list(first.recorded) == ["u0", "a0", "t0", "r0", "u1"]
    again = s.sync_messages(msgs)
    assert list(again.recorded) == [m.key for m in msgs[5:]]
    assert set(again.already) == {"u0", "a0", "t0", "r0", "u1"}
    assert s.sync_messages(msgs).recorded == {}
    assert _keys(tmp_path) == Counter(m.key for m in msgs)
    assert s.settled
    # What the window sends is the conversation, in order.
    texts = [m.get("content") for m in s.prepare().messages if m["role"] == "assistant"]
    assert "answer 2" in texts


def test_a_second_session_and_a_new_window_record_nothing_again(tmp_path: Path) -> None:
    msgs = _conversation()
    _open(tmp_path).sync_messages(msgs)
    s = _open(tmp_path)  # another process, a restart, a resume
    assert s.sync_messages(msgs).recorded == {}
    s.history.rollover(rollover_id="r1", reason="manual", lead_in="earlier work")
    s.refresh()
    assert s.sync_messages(msgs).recorded == {}
    s.history.clear_soft()
    assert _open(tmp_path).sync_messages(msgs).recorded == {}
    more = [*msgs, KeyedMessage.from_chat("u9", {"role": "user", "content": "new"})]
    assert list(_open(tmp_path).sync_messages(more).recorded) == ["u9"]
    assert _keys(tmp_path) == Counter(m.key for m in more)


def test_a_retracted_message_stays_recorded(tmp_path: Path) -> None:
    s = _open(tmp_path)
    msgs = _conversation(1)
    report = s.sync_messages(msgs)
    s.retract(report.recorded["r0"])
    assert s.sync_messages(msgs).recorded == {}
    assert "r0" in s.sync_messages(msgs).already


def test_a_changed_message_is_a_typed_error_and_records_nothing(tmp_path: Path) -> None:
    s = _open(tmp_path)
    s.sync_messages(_conversation(1))
    before = len(list(s.history.rows()))
    changed = [
        KeyedMessage.from_chat("new", {"role": "user", "content": "fine"}),
        KeyedMessage.from_chat("u0", {"role": "user", "content": "question 0, edited"}),
    ]
    with pytest.raises(MessageChangedError) as err:
        _open(tmp_path).sync_messages(changed)
    assert isinstance(err.value, CtxBudgetError)
    assert err.value.key == "u0" and err.value.seq == 1
    assert len(list(s.history.rows())) == before, "not even the new message"
    twice = [
        KeyedMessage.from_chat("x", {"role": "user", "content": "one"}),
        KeyedMessage.from_chat("x", {"role": "user", "content": "two"}),
    ]
    with pytest.raises(MessageChangedError) as err:
        s.sync_messages(twice)
    assert err.value.seq is None


def test_a_key_given_twice_with_the_same_message_is_recorded_once(tmp_path: Path) -> None:
    s = _open(tmp_path)
    same = KeyedMessage.from_chat("x", {"role": "user", "content": "one"})
    assert list(s.sync_messages([same, same]).recorded) == ["x"]


def test_a_result_for_a_call_already_answered_is_left_out(tmp_path: Path) -> None:
    """A process stopped after the call; the next one recorded it as interrupted. The
    framework's real result must not become a second result for the call."""
    msgs = _conversation(1)
    _open(tmp_path).sync_messages(msgs[:2])  # stops before the result
    s = _open(tmp_path)
    s.add_user("go on")  # the interrupted result is recorded first
    report = s.sync_messages(msgs)
    assert report.unanswerable == ("t0",)
    assert list(report.recorded) == ["r0"]
    assert s.prepare().status == "send"


def test_bad_input_is_refused(tmp_path: Path) -> None:
    s = _open(tmp_path)
    with pytest.raises(InvalidArgumentError):
        KeyedMessage("", {"kind": "message", "role": "user", "parts": []})
    with pytest.raises(InvalidArgumentError, match="set_request"):
        KeyedMessage.from_chat("s", {"role": "system", "content": "be brief"})
    with pytest.raises(InvalidArgumentError):
        KeyedMessage.from_chat("t", {"role": "tool", "content": "no call id"})
    with pytest.raises(InvalidArgumentError):
        s.sync_messages([{"role": "user", "content": "hi"}])  # type: ignore[list-item]
    with pytest.raises(InvalidArgumentError):
        s.sync_messages("hi")  # type: ignore[arg-type]
    assert list(s.history.rows()) == []


def test_from_chat_takes_content_parts(tmp_path: Path) -> None:
    m = KeyedMessage.from_chat(
        "u",
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look"},
                {"type": "image_url", "image_url": {"url": "https://example.com/a.png"}},
            ],
        },
    )
    assert [p["type"] for p in m.row["parts"]] == ["text", "media"]
    s = _open(tmp_path)
    s.sync_messages([m])
    assert s.view().tokens > 80  # the image counts


# ----- races ---------------------------------------------------------------------------


def test_threads_syncing_the_same_list_record_each_message_once(tmp_path: Path) -> None:
    msgs = _conversation(2)
    for trial in range(TRIALS):
        ws = tmp_path / f"t{trial}"
        sessions = [_open(ws) for _ in range(3)]
        barrier = threading.Barrier(len(sessions))
        errors: list[BaseException] = []

        def run(
            s: Session,
            barrier: threading.Barrier = barrier,
            errors: list[BaseException] = errors,
        ) -> None:
            try:
                barrier.wait()
                s.sync_messages(msgs)
            except BaseException as exc:  # pragma: no cover - reported below
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(s,)) for s in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors
        assert _keys(ws) == Counter(m.key for m in msgs), f"trial {trial}"


def _sync_in_process(ws: str, barrier: Any, n: int, out: Any) -> None:
    s = _open(Path(ws))
    barrier.wait()
    out.put(sorted(s.sync_messages(_conversation(n)).recorded))


def test_processes_syncing_the_same_list_record_each_message_once(tmp_path: Path) -> None:
    ctx = multiprocessing.get_context("spawn")
    for trial in range(PROCESS_TRIALS):
        ws = tmp_path / f"p{trial}"
        barrier = ctx.Barrier(2)
        out = ctx.Queue()
        procs = [
            ctx.Process(target=_sync_in_process, args=(str(ws), barrier, 2, out)) for _ in range(2)
        ]
        for p in procs:
            p.start()
        recorded = [out.get(timeout=120) for _ in procs]
        for p in procs:
            p.join(timeout=120)
            assert p.exitcode == 0
        assert _keys(ws) == Counter(m.key for m in _conversation(2)), f"trial {trial}"
        assert sorted(recorded[0] + recorded[1]) == sorted(m.key for m in _conversation(2))


def test_async_sync_and_retract(tmp_path: Path) -> None:
    async def main() -> None:
        a, b = AsyncSession(_open(tmp_path)), AsyncSession(_open(tmp_path))
        msgs = _conversation(2)
        reports = await asyncio.gather(a.sync_messages(msgs), b.sync_messages(msgs))
        assert sorted([*reports[0].recorded, *reports[1].recorded]) == sorted(m.key for m in msgs)
        view = await a.view(refresh=True)
        await a.retract(view.rows[-1].seq)
        assert (await a.view()).rows[-1].seq != view.rows[-1].seq

    asyncio.run(main())
    assert _keys(tmp_path) == Counter(m.key for m in _conversation(2))


@pytest.mark.parametrize("store", STORE_KINDS, indirect=True)
def test_sessions_on_either_store_sync_the_same_list_once(store: StoreUnderTest) -> None:
    """Threads, each with its own Session, on one workspace or PostgreSQL conversation."""
    msgs = _conversation(2)
    for trial in range(8):
        where = store.fresh()

        def open_session(where: str = where) -> Session:
            return Session.open(
                **store.session_location(where), model="gpt-4o", context_window=16_000
            )

        sessions = [open_session() for _ in range(3)]
        barrier = threading.Barrier(len(sessions))
        reports: list[list[str]] = []

        def run(
            s: Session,
            barrier: threading.Barrier = barrier,
            reports: list[list[str]] = reports,
        ) -> None:
            barrier.wait()
            reports.append(list(s.sync_messages(msgs).recorded))

        threads = [threading.Thread(target=run, args=(s,)) for s in sessions]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        recorded = sorted(k for r in reports for k in r)
        assert recorded == sorted(m.key for m in msgs), f"trial {trial}"
        keys = Counter(str(r.meta["key"]) for r in store.open(where).rows() if "key" in r.meta)
        assert keys == Counter(m.key for m in msgs)
