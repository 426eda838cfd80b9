"""The PostgreSQL store under faults, against a real server: clients SIGKILLed in the
middle of a transaction, the server stopped the hard way and restarted under a
multi-process append load, connections dropped by the server.

Afterwards every acknowledged batch is there exactly once, no batch is there in part or
twice, the seqs are gapless, and the clients go on (the store reconnects and retries an
append with its batch id, which commits it at most once).
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.parse
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from history_helpers import msg
from pg_append_worker import batch_texts
from stores import Psql, new_conversation_id, quote, sql, terminate, with_app_name

from ctxbudget import DatabaseError, History, SessionHistoryTool

REPO = Path(__file__).resolve().parents[1]
WORKER = Path(__file__).with_name("pg_append_worker.py")
PG_CLUSTER = REPO / "scripts" / "pg-cluster"


def _spawn(
    url: str, conversation: str, worker: str, batches: int, acks: Path
) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [sys.executable, str(WORKER), url, conversation, worker, str(batches), str(acks / worker)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )


def _acks(acks: Path) -> dict[tuple[str, int], tuple[int, int]]:
    """Acknowledged batches: (worker, n) -> (first_seq, last_seq)."""
    out = {}
    for log in acks.iterdir():
        for line in log.read_text().splitlines():
            n, first, last = line.split()
            out[(log.name, int(n))] = (int(first), int(last))
    return out


def check_conversation(
    url: str, conversation: str, acked: dict[tuple[str, int], tuple[int, int]]
) -> dict[tuple[str, int], tuple[int, int]]:
    """Checks the promises on what the database holds and returns every batch found:
    seqs gapless up to the conversation's last seq, each batch whole, in order and there
    once, every acknowledged batch where its acknowledgement said. (Writers may still be
    appending: the rows are read after the last seq.)"""
    conv = quote(conversation)
    state = sql(url, f"SELECT last_seq FROM ctxbudget_conversations WHERE conversation = {conv}")
    last_seq = int(state[0][0])
    history = History.open(url, conversation=conversation)
    rows = list(history.rows())
    seqs = [r.seq for r in rows]
    assert seqs == list(range(1, len(seqs) + 1)), "seqs are gapless"
    assert len(seqs) >= last_seq, "no row up to the last seq is missing"
    groups: dict[tuple[str, int], list[tuple[int, str]]] = defaultdict(list)
    for r in rows:
        text = r.parts[0]["text"]
        worker, n, _ = text.split(":")
        groups[(worker, int(n))].append((r.seq, text))
    found = {}
    for (worker, n), members in groups.items():
        expected = batch_texts(worker, n)
        got = [t for _, t in members]
        assert got == expected, f"batch {worker}:{n} is there in part or twice: {members}"
        first = members[0][0]
        assert [s for s, _ in members] == list(range(first, first + len(expected)))
        found[(worker, n)] = (first, members[-1][0])
    for key, span in acked.items():
        assert found.get(key) == span, f"acknowledged batch {key} {span} is {found.get(key)}"
    assert history.verify().ok
    return found


def _backend_waiting(url: str, app: str) -> bool:
    rows = sql(
        url,
        "SELECT count(*) FROM pg_stat_activity WHERE application_name = "
        f"{quote(app)} AND wait_event_type = 'Lock'",
    )
    return int(rows[0][0]) > 0


def _wait_for(predicate: object, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


# Appends a first batch (so that the connection has its statements prepared: preparing
# an INSERT waits for table locks too), says "ready", and appends the second batch once
# it reads a line.
_TWO_APPENDS = """
import sys
from ctxbudget import History
h = History.open(sys.argv[1], conversation=sys.argv[2])
def rows(texts):
    return [{"kind": "message", "role": "user", "parts": [{"type": "text", "text": t}]}
            for t in texts]
h.append(rows(sys.argv[3:4]))
print("ready", flush=True)
sys.stdin.readline()
h.append(rows(sys.argv[4:]))
print("acknowledged", flush=True)
"""


def test_client_sigkilled_inside_its_transaction_leaves_nothing(pg_url: str) -> None:
    """The client holds the conversation's row lock and has sent its INSERT (blocked by
    an operator's table lock) when it is killed: its batch never appears, the lock goes
    with it, and other clients go on at the next seq."""
    conversation = new_conversation_id("kill")
    h = History.open(pg_url, conversation=conversation)
    h.append([msg("w:0:0/1")])
    app = f"ctxb-kill-{conversation[-8:]}"
    victim = subprocess.Popen(
        [
            *(sys.executable, "-c", _TWO_APPENDS, with_app_name(pg_url, app)),
            *(conversation, "v:0:0/1", "v:1:0/2", "v:1:1/2"),
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
    )
    assert victim.stdin is not None and victim.stdout is not None
    assert victim.stdout.readline() == b"ready\n"
    blocker = Psql(pg_url)
    try:
        blocker.run("BEGIN; LOCK TABLE ctxbudget_rows IN SHARE MODE")
        victim.stdin.write(b"go\n")
        victim.stdin.flush()
        _wait_for(lambda: _backend_waiting(pg_url, app), "the client's INSERT to block")
        holds = sql(
            pg_url,
            "SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid) "
            f"WHERE a.application_name = {quote(app)} AND l.granted "
            "AND l.relation = 'ctxbudget_conversations'::regclass",
        )
        assert int(holds[0][0]) > 0, "the victim is inside its transaction"
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=30)
        assert victim.stdout.read() == b"", "the second batch was never acknowledged"
        blocker.run("ROLLBACK")
    finally:
        blocker.close()
    # The server notices the dead client and rolls its transaction back.
    r = h.append([msg("w:1:0/2"), msg("w:1:1/2")])
    assert (r.first_seq, r.last_seq) == (3, 4)
    acked = {("w", 0): (1, 1), ("v", 0): (2, 2), ("w", 1): (3, 4)}
    assert check_conversation(pg_url, conversation, acked) == acked


def _workers_acked(acks: Path, prefix: str, at_least: int) -> int:
    """How many workers named ``prefix…`` acknowledged ``at_least`` batches."""
    logs = [p for p in acks.iterdir() if p.name.startswith(prefix)]
    return sum(1 for p in logs if p.read_text().count("\n") >= at_least)


def test_clients_sigkilled_at_random_during_a_load(pg_url: str, tmp_path: Path) -> None:
    """Three processes append to one conversation; each is killed at some point and a
    new generation takes over. Every batch acknowledged before a kill is there once."""
    conversation = new_conversation_id("loadkill")
    acks = tmp_path / "acks"
    acks.mkdir()
    for generation in range(3):
        workers = [_spawn(pg_url, conversation, f"g{generation}w{i}", 400, acks) for i in range(3)]
        # Kill once each has acknowledged something (so the kill lands mid-load).
        _wait_for(
            lambda g=generation: _workers_acked(acks, f"g{g}", 3 + g * 4) == 3,
            "every worker to acknowledge batches",
        )
        for i, p in enumerate(workers):
            time.sleep(0.02 * i)
            p.send_signal(signal.SIGKILL)
        for p in workers:
            p.wait(timeout=30)
    found = check_conversation(pg_url, conversation, _acks(acks))
    assert len(found) >= len(_acks(acks)) >= 9


def test_connections_dropped_by_the_server_during_a_load(pg_url: str, tmp_path: Path) -> None:
    """An operator terminates the clients' connections again and again while three
    processes append: they reconnect and go on; every batch is there once."""
    conversation = new_conversation_id("drop")
    app = f"ctxb-drop-{conversation[-8:]}"
    url = with_app_name(pg_url, app)
    acks = tmp_path / "acks"
    acks.mkdir()
    workers = [_spawn(url, conversation, f"w{i}", 60, acks) for i in range(3)]
    dropped = 0
    while any(p.poll() is None for p in workers):
        dropped += terminate(pg_url, app)
        time.sleep(0.05)
    for p in workers:
        assert p.wait() == 0, p.stderr.read().decode()[-2000:] if p.stderr else ""
    assert dropped > 0, "connections were dropped while the workers ran"
    acked = _acks(acks)
    assert len(acked) == 180, "every worker finished its batches"
    found = check_conversation(pg_url, conversation, acked)
    assert found == acked


def test_connection_dropped_inside_an_append_commits_it_once(pg_url: str) -> None:
    """The server drops the client's connection while its append waits inside its
    transaction: the store retries on a new connection with the same batch id and the
    call returns normally, the batch there once."""
    conversation = new_conversation_id("dropmid")
    app = f"ctxb-dropmid-{conversation[-8:]}"
    h = History.open(with_app_name(pg_url, app), conversation=conversation)
    h.append([msg("w:0:0/1")])
    blocker = Psql(pg_url)
    result: list[object] = []
    try:
        blocker.run("BEGIN; LOCK TABLE ctxbudget_rows IN SHARE MODE")
        t = threading.Thread(
            target=lambda: result.append(_try(lambda: h.append([msg("w:1:0/2"), msg("w:1:1/2")])))
        )
        t.start()
        _wait_for(lambda: _backend_waiting(pg_url, app), "the append to block")
        assert terminate(pg_url, app) >= 1
        blocker.run("ROLLBACK")
    finally:
        blocker.close()
    t.join(timeout=60)
    assert len(result) == 1
    outcome = result[0]
    if isinstance(outcome, DatabaseError):
        assert outcome.transient, outcome
    else:
        assert (outcome.first_seq, outcome.last_seq) == (2, 3)  # type: ignore[attr-defined]
    acked = {} if isinstance(outcome, DatabaseError) else {("w", 1): (2, 3)}
    found = check_conversation(pg_url, conversation, {("w", 0): (1, 1), **acked})
    assert len(found) in (1, 2)
    assert h.append([msg("w:2:0/3"), msg("w:2:1/3"), msg("w:2:2/3")]).first_seq == 2 * len(found)


def test_session_history_answers_by_its_deadline_while_a_table_is_locked(pg_url: str) -> None:
    """An operator's table lock held past the call's deadline: the call answers
    ``history_timeout`` by its deadline instead of waiting for the lock (the watchdog
    fails a call that waits)."""
    h = History.open(pg_url, conversation=new_conversation_id("deadline"))
    h.append([msg("w:0:0/1")])
    tool = SessionHistoryTool(h, deadline_seconds=2)
    got: list[dict[str, Any]] = []
    blocker = Psql(pg_url)
    try:
        for table in ("ctxbudget_rows", "ctxbudget_conversations"):
            blocker.run(f"BEGIN; LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
            call = threading.Thread(
                target=lambda: got.append(tool.call({"action": "list_items"})), daemon=True
            )
            call.start()
            call.join(timeout=25)
            blocker.run("ROLLBACK")
            assert not call.is_alive(), f"session_history waited for the lock on {table}"
    finally:
        blocker.close()
    assert [r["code"] for r in got] == ["history_timeout", "history_timeout"], got
    assert tool.call({"action": "list_items"})["ok"]


def _try(call: object) -> object:
    try:
        return call()  # type: ignore[operator]
    except DatabaseError as e:
        return e


@pytest.fixture
def own_cluster() -> Iterator[tuple[str, str]]:
    """A cluster of this test's own (it is crashed and restarted): (URL, folder). The
    script picks the folder (the server's user must be able to reach it)."""
    if subprocess.run([PG_CLUSTER, "bindir"], capture_output=True).returncode != 0:
        if os.environ.get("CTXBUDGET_REQUIRE_POSTGRES") == "1":
            pytest.fail("CTXBUDGET_REQUIRE_POSTGRES=1 and no PostgreSQL server binaries")
        pytest.skip("needs PostgreSQL server binaries (apt-get install postgresql)")
    out = subprocess.run([PG_CLUSTER, "start"], capture_output=True, text=True, check=True)
    env = dict(re.findall(r"export (\w+)='([^']*)'", out.stdout))
    try:
        yield env["CTXBUDGET_PG_URL"], env["CTXBUDGET_PG_CLUSTER"]
    finally:
        subprocess.run([PG_CLUSTER, "stop", env["CTXBUDGET_PG_CLUSTER"]], check=False)


def test_server_crash_and_restart_during_a_multiprocess_load(
    own_cluster: tuple[str, str], tmp_path: Path
) -> None:
    """`pg_ctl stop -m immediate` while four processes append, then a restart (crash
    recovery): the clients reconnect and finish; every acknowledged batch is there once,
    nothing unacknowledged in part."""
    url, folder = own_cluster
    conversation = new_conversation_id("crash")
    History.open(url, conversation=conversation)  # schema and conversation exist
    acks = tmp_path / "acks"
    acks.mkdir()
    workers = [_spawn(url, conversation, f"w{i}", 45, acks) for i in range(4)]
    for _ in range(2):
        before = len(_acks(acks))
        _wait_for(lambda b=before: len(_acks(acks)) >= b + 12, "the load to make progress")
        subprocess.run([PG_CLUSTER, "crash", folder], check=True)
        acked_at_crash = _acks(acks)
        time.sleep(1.0)
        subprocess.run([PG_CLUSTER, "resume", folder], check=True)
        check_conversation(url, conversation, acked_at_crash)
    for p in workers:
        assert p.wait(timeout=120) == 0, p.stderr.read().decode()[-2000:] if p.stderr else ""
    acked = _acks(acks)
    assert len(acked) == 180
    assert check_conversation(url, conversation, acked) == acked
    assert History.open(url, conversation=conversation).state().last_seq == 360


@pytest.mark.slow
def test_server_down_longer_than_the_retries(own_cluster: tuple[str, str]) -> None:
    """The server stays away longer than the store retries (30 s): an append raises a
    transient DatabaseError, session_history answers `history_unavailable` (a result, not
    an exception); once the server is back, the app retries with if_last_seq."""
    url, folder = own_cluster
    conversation = new_conversation_id("down")
    h = History.open(url, conversation=conversation)
    last = h.append([msg("w:0:0/1")]).last_seq
    tool = SessionHistoryTool(History.open(url, conversation=conversation))  # own index
    subprocess.run([PG_CLUSTER, "crash", folder], check=True)
    outcomes: dict[str, object] = {}

    def append() -> None:
        outcomes["append"] = _try(lambda: h.append([msg("w:3:0/1")]))

    def call() -> None:
        outcomes["call"] = tool.call({"action": "list_items"})

    threads = [threading.Thread(target=append), threading.Thread(target=call)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    subprocess.run([PG_CLUSTER, "resume", folder], check=True)
    failed = outcomes["append"]
    assert isinstance(failed, DatabaseError) and failed.transient, failed
    assert "retry" in str(failed)
    result = outcomes["call"]
    assert isinstance(result, dict) and result["ok"] is False, result
    assert result["code"] == "history_unavailable", result
    assert h.append([msg("w:3:0/1")], if_last_seq=last).first_seq == last + 1
    check_conversation(url, conversation, {("w", 0): (1, 1), ("w", 3): (2, 2)})


class CommitDropper:
    """A TCP proxy to the server (plain protocol, so that it can read the messages) that,
    when armed, forwards a COMMIT (or, with ``marker`` set, the message carrying that
    text: a one-statement append commits by itself) and then closes the client's
    connection before the answer comes back: the change commits and the client cannot
    know it."""

    COMMIT = b"Q\x00\x00\x00\x0bCOMMIT\x00"

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.armed = threading.Event()
        # When set, only a COMMIT on a connection that has sent this text is dropped.
        self.after: bytes | None = None
        # When set, the message carrying this text is the one whose answer is dropped.
        self.marker: bytes | None = None
        self.dropped = threading.Event()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            cut = threading.Event()  # set: nothing more goes back to the client
            for args in ((client, server, cut, True), (server, client, cut, False)):
                threading.Thread(target=self._pump, args=args, daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, cut: threading.Event, up: bool) -> None:
        seen = False
        try:
            while data := src.recv(65536):
                if not up and cut.is_set():
                    break
                seen = seen or (self.after is not None and self.after in data)
                ready = self.after is None or seen
                trigger = self.COMMIT if self.marker is None else self.marker
                if up and ready and self.armed.is_set() and trigger in data:
                    self.armed.clear()
                    cut.set()
                    self.dropped.set()
                    dst.sendall(data)
                    time.sleep(0.3)  # the server commits; its answer is thrown away
                    break
                dst.sendall(data)
        except OSError:
            pass
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)
            s.close()

    def close(self) -> None:
        self.listener.close()


@pytest.fixture
def dropper(pg_url: str) -> Iterator[tuple[CommitDropper, str]]:
    """The proxy, and a URL through it (TLS off: the proxy reads the protocol)."""
    parsed = urllib.parse.urlsplit(pg_url)
    if not parsed.hostname or parsed.hostname.startswith("/"):
        pytest.skip("needs a TCP URL")
    proxy = CommitDropper(parsed.hostname, parsed.port or 5432)
    netloc = f"{parsed.username or ''}{'@' if parsed.username else ''}127.0.0.1:{proxy.port}"
    url = urllib.parse.urlunsplit(
        (parsed.scheme, netloc, parsed.path, "sslmode=disable&application_name=ctxb-drop", "")
    )
    yield proxy, url
    proxy.close()


def test_an_append_whose_commit_answer_is_lost_commits_once(
    dropper: tuple[CommitDropper, str],
) -> None:
    """The append's commit reaches the server, its answer never comes back: the store
    retries on a new connection with the same batch id, finds the batch committed, and
    returns it — there once, at the seqs it reports. The first append of a handle takes
    the locking path (its COMMIT is dropped); the next one, with the handle's index
    current, is one statement in autocommit (the message carrying its rows is dropped)."""
    proxy, url = dropper
    conversation = new_conversation_id("lostcommit")
    h = History.open(url, conversation=conversation)
    proxy.armed.set()
    h.append([msg("w:0:0/1")])
    assert proxy.dropped.is_set(), "the COMMIT's answer was dropped"
    proxy.dropped.clear()
    proxy.marker = b"w:1:0/2"
    proxy.armed.set()
    r = h.append([msg("w:1:0/2"), msg("w:1:1/2")])
    assert proxy.dropped.is_set(), "the one-statement append's answer was dropped"
    assert (r.first_seq, r.last_seq) == (2, 3)
    proxy.marker = None
    window = h.rollover(rollover_id="r", reason="manual", lead_in="w:2:0/1")
    assert window == "w:4"
    proxy.armed.set()
    again = h.rollover(rollover_id="r2", reason="manual", lead_in="w:3:0/1")
    assert proxy.dropped.is_set() and again == "w:6"
    kinds = [(row.seq, row.kind) for row in h.rows()]
    assert kinds == [
        (1, "message"),
        (2, "message"),
        (3, "message"),
        (4, "boundary"),
        (5, "lead_in"),
        (6, "boundary"),
        (7, "lead_in"),
    ], "each batch once"
    assert h.verify().ok
    # A rotation is not retried blindly: its outcome is reported unknown.
    proxy.after = b"SET archived_before"
    proxy.armed.set()
    with pytest.raises(DatabaseError, match="may or may not have been applied") as info:
        h.rotate()
    assert proxy.dropped.is_set() and not info.value.transient
    assert [(row.seq, row.kind) for row in h.rows()] == kinds
    assert h.rotate().rows == 0, "the rotation had been applied"


def test_the_deadline_holds_while_the_server_is_down(own_cluster: tuple[str, str]) -> None:
    """With the server gone, a session_history call answers by its deadline (not after
    the store's 30 s of reconnecting) with a result that says why; a generous bound of
    15 s tells a call that waited for its deadline from one that waited for the retries."""
    url, folder = own_cluster
    h = History.open(url, conversation=new_conversation_id("deadline"))
    h.append([msg("needle")])
    tool = SessionHistoryTool(h, deadline_seconds=0.5)
    subprocess.run([PG_CLUSTER, "crash", folder], check=True)
    answers: list[dict[str, Any]] = []
    try:
        t = threading.Thread(
            target=lambda: answers.append(tool.call({"action": "search", "query": "needle"})),
            daemon=True,
        )
        t.start()
        t.join(timeout=15)
    finally:
        subprocess.run([PG_CLUSTER, "resume", folder], check=True)
    assert answers, "the call waited for the store's reconnects, past its deadline"
    r = answers[0]
    assert r["ok"] is False and r["code"] in ("history_timeout", "history_unavailable"), r
    assert "items" not in r
    assert tool.call({"action": "search", "query": "needle"})["ok"], "answers again once back"
