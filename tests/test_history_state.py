"""A Hypothesis state machine over the transcript store.

The model is the list of acknowledged rows. Every step may be an ordinary operation,
a crash in the middle of an append (a torn tail cut at any byte of the unacknowledged
batch), an external append that ignores the lock, an external same-size rewrite,
recovery or a reopen (restart). After every step: the visible rows are exactly the
acknowledged ones (plus a whole in-flight batch that reached the disk), seqs strictly
increase, reset rows are never lost, epochs stay for pure appends and change for
everything else.

The same machine runs over a PostgreSQL conversation. The file-only faults (torn tails,
byte edits) give way to the database's: another host appending through its own
connections, an operator appending a row by hand in SQL, and every connection of the
client dropped by the server (the next call reconnects). There the seqs are also gapless.
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import pytest
from history_helpers import chat_path, msg, receipt_of, rewrite_last_batch_same_size, texts
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
    run_state_machine_as_test,
)
from stores import new_conversation_id, quote, sql, terminate, with_app_name

from ctxbudget import FileState, FileVerify, History, _ctxbudget

pytestmark = pytest.mark.skipif(not _ctxbudget.FAILPOINTS, reason="needs the failpoints build")

words = st.text(
    alphabet=st.sampled_from("abc xyz中文😀\\\"'\n\t\0é"), min_size=1, max_size=12
).filter(lambda t: t[0] not in "qxzjkvwyQ")


def _file(self: StoreMachine) -> bool:
    return self.url is None


def _pg(self: StoreMachine) -> bool:
    return self.url is not None


class StoreMachine(RuleBasedStateMachine):
    # Set per run by test_store_machine: None for the file store, else the database URL.
    url: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.ws = Path(tempfile.mkdtemp(prefix="ctxb-sm-"))
        self.conversation = new_conversation_id("sm")
        self.h = self._open()
        self.model: list[tuple[int, str]] = []
        self.resets: set[int] = set()
        self.rollover_ids: set[str] = set()
        self.epoch: int | None = None
        self.pure_since_epoch = True

    def _open(self, host: str = "main") -> History:
        """A new handle; with PostgreSQL ``host`` picks the connection pool (a pool per
        URL per process: another application_name acts as another host)."""
        if self.url is None:
            return History.open(self.ws, durability="none")
        url = with_app_name(self.url, f"ctxb-sm-{host}")
        return History.open(url, conversation=self.conversation)

    def teardown(self) -> None:
        _ctxbudget._reset_failpoints()
        shutil.rmtree(self.ws, ignore_errors=True)

    def _epoch(self) -> int | None:
        state = self.h.state()
        if isinstance(state.detail, FileState):
            receipt = state.detail.receipt
            return receipt.epoch if receipt and receipt.state == "stable" else None
        return state.epoch

    def _after_append(self, epoch: int) -> None:
        if self.epoch is not None and self.pure_since_epoch:
            assert epoch == self.epoch, "a pure append must keep the epoch"
        self.epoch = epoch
        self.pure_since_epoch = True

    def _non_append_change(self) -> None:
        self.pure_since_epoch = False

    @rule(batch=st.lists(words, min_size=1, max_size=4))
    def append(self, batch: list[str]) -> None:
        r = self.h.append([msg(t) for t in batch])
        assert r.first_seq == (self.model[-1][0] + 1 if self.model else 1)
        self.model += [(r.first_seq + i, t) for i, t in enumerate(batch)]
        self._after_append(r.epoch)

    @rule(rid=st.sampled_from(["r1", "r2", "r3"]), trigger=st.booleans())
    def rollover(self, rid: str, trigger: bool) -> None:
        before = self.model[-1][0] if self.model else 0
        window = self.h.rollover(
            rollover_id=rid,
            reason="usable_limit",
            lead_in=f"lead {rid}",
            trigger=msg(f"trigger {rid}") if trigger else None,
        )
        if rid in self.rollover_ids:
            return
        self.rollover_ids.add(rid)
        seq = before + 1
        assert window == f"w:{seq}"
        self.model += [(seq, "<boundary>"), (seq + 1, f"lead {rid}")]
        if trigger:
            self.model.append((seq + 2, f"trigger {rid}"))
        self._after_append(self._epoch() or 0)

    @rule()
    def clear_soft(self) -> None:
        seq = self.h.clear_soft()
        self.model.append((seq, "<boundary>"))
        self.resets.add(seq)
        self._after_append(self._epoch() or 0)

    @rule(text=words)
    def quarantine(self, text: str) -> None:
        seq = self.h.quarantine(msg(text))
        self.model.append((seq, "<rejected>"))
        self._after_append(self._epoch() or 0)

    @rule()
    def rotate(self) -> None:
        before = self._epoch()
        report = self.h.rotate()
        if report.rows:
            assert self._epoch() != before, "rotation must change the epoch"
            self.epoch = self._epoch()

    @rule(batch=st.lists(words, min_size=1, max_size=3))
    def another_handle_appends(self, batch: list[str]) -> None:
        r = self._open("other").append([msg(t) for t in batch])
        assert r.first_seq == (self.model[-1][0] + 1 if self.model else 1)
        self.model += [(r.first_seq + i, t) for i, t in enumerate(batch)]
        self._after_append(r.epoch)

    @precondition(_pg)
    @rule(text=words)
    def operator_appends_by_hand(self, text: str) -> None:
        """A row appended in SQL at the next seq, as a hand-written tool would."""
        assert self.url is not None
        seq = self.model[-1][0] + 1 if self.model else 1
        body = json.dumps(
            {
                "seq": seq,
                "kind": "message",
                "role": "user",
                "parts": [{"type": "text", "text": text}],
            },
            ensure_ascii=False,
        )
        conv = quote(self.conversation)
        sql(
            self.url,
            f"BEGIN; INSERT INTO ctxbudget_rows (conversation, seq, body) VALUES ({conv}, {seq}, "
            f"convert_to({quote(body)}, 'UTF8')); UPDATE ctxbudget_conversations SET "
            f"last_seq = {seq} WHERE conversation = {conv}; COMMIT;",
        )
        self.model.append((seq, text))
        self._non_append_change()

    @precondition(_pg)
    @rule()
    def server_drops_the_connections(self) -> None:
        assert self.url is not None
        terminate(self.url, "ctxb-sm-%")

    @precondition(_file)
    @rule(cut=st.integers(0, 600), batch=st.lists(words, min_size=1, max_size=3))
    def crash_mid_append(self, cut: int, batch: list[str]) -> None:
        _ctxbudget._arm_failpoint("append.write", f"torn:{cut}")
        with pytest.raises(OSError):
            self.h.append([msg(t) for t in batch])
        _ctxbudget._reset_failpoints()
        self.h = self._open()  # the process died; restart
        seen = texts(self.h)
        start = self.model[-1][0] + 1 if self.model else 1
        whole = self.model + [(start + i, t) for i, t in enumerate(batch)]
        assert seen in (self.model, whole), "only a whole in-flight batch may appear"
        if seen == whole and seen != self.model:
            self.model = whole
        self._non_append_change()
        self.epoch = self._epoch()

    @precondition(_file)
    @rule(text=words)
    def external_append_without_lock(self, text: str) -> None:
        seq = self.model[-1][0] + 1 if self.model else 1
        line = {
            "seq": seq,
            "kind": "message",
            "role": "user",
            "parts": [{"type": "text", "text": text}],
        }
        with chat_path(self.ws).open("ab") as f:
            f.write(json.dumps(line, ensure_ascii=False).encode() + b"\n")
        self.model.append((seq, text))
        self._non_append_change()

    @precondition(lambda self: _file(self) and bool(self.model))
    @rule()
    def external_same_size_rewrite(self) -> None:
        receipt = receipt_of(self.h)
        path = chat_path(self.ws)
        before = path.read_bytes()
        vouched = (
            receipt is not None
            and receipt.state == "stable"
            and receipt.chat is not None
            and receipt.chat.size == len(before)
            and receipt.chat.mtime_ns == path.stat().st_mtime_ns
        )
        if not rewrite_last_batch_same_size(self.ws):
            return
        if vouched and path.read_bytes() != before:
            # The anchor catches what sizes cannot: the commit line's CRC changed.
            assert receipt is not None
            assert self.h.anchor_crc_at(receipt.committed_end) != receipt.anchor_crc
        self.model = texts(self.h)
        self._non_append_change()

    @rule()
    def recover(self) -> None:
        self.h.recover()
        assert not self.h.recover().changed, "recovery is idempotent"
        self._non_append_change()
        self.epoch = self._epoch()

    @rule()
    def reopen(self) -> None:
        self.h = self._open()

    @invariant()
    def visible_rows_are_the_acknowledged_rows(self) -> None:
        assert texts(self.h) == self.model

    @invariant()
    def seqs_strictly_increase(self) -> None:
        seqs = [s for s, _ in self.model]
        assert seqs == sorted(set(seqs))

    @invariant()
    def seqs_are_gapless_in_the_database(self) -> None:
        if _pg(self):
            seqs = [r.seq for r in self.h.rows()]
            assert seqs == list(range(1, len(seqs) + 1))
            assert self.h.state().last_seq == len(seqs)

    @invariant()
    def resets_are_never_lost(self) -> None:
        present = {r.seq for r in self.h.rows() if r.meta.get("boundary_kind") == "reset"}
        assert self.resets <= present

    @invariant()
    def nothing_torn_or_damaged(self) -> None:
        report = self.h.verify()
        if isinstance(report.detail, FileVerify):
            assert report.detail.chat.damage is None and report.detail.archive.damage is None


# A PostgreSQL step is a few round trips to the server, and the hand-made faults run
# psql: fewer examples there, more in the slow run.
@pytest.mark.parametrize(
    ("kind", "examples"),
    [
        ("file", 250),
        ("postgres", 12),
        pytest.param("postgres", 200, marks=pytest.mark.slow, id="postgres-long"),
    ],
)
def test_store_machine(kind: str, examples: int, request: pytest.FixtureRequest) -> None:
    url = request.getfixturevalue("pg_url") if kind == "postgres" else None
    machine = type(f"StoreMachine_{kind}", (StoreMachine,), {"url": url})
    run_state_machine_as_test(
        machine,
        settings=settings(max_examples=examples, stateful_step_count=40, deadline=None),
    )
