"""Several processes acting as separate hosts drive the same PostgreSQL conversations
with ``Session`` (the PostgreSQL version of test_session_writers.py): they decide on the
same state at the same moment (barrier-synchronised, many trials), step one
conversation past every threshold and the usable limit together, and hand
``session_history`` cursors to each other. No stage is published twice in a window, no
window is sealed twice, lead-ins name the right windows, and a cursor minted by one
host pages on another."""

from __future__ import annotations

import itertools
import multiprocessing
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pg_host_worker
import pytest
from session_invariants import CHUNK, check_transcript, rollover_due, step_until, warning_due

from ctxbudget import History, Session

HOSTS = 3
TRIALS = 20


class Hosts:
    """``HOSTS`` worker processes, each with its own job queue, one results queue."""

    def __init__(self, url: str) -> None:
        ctx = multiprocessing.get_context("spawn")
        self.url = url
        self.jobs: list[Any] = [ctx.Queue() for _ in range(HOSTS)]
        self.results: Any = ctx.Queue()
        self.barrier: Any = ctx.Barrier(HOSTS)  # kept: the workers unpickle it after start
        self.procs = [
            ctx.Process(
                target=pg_host_worker.serve, args=(h, self.jobs[h], self.results, self.barrier)
            )
            for h in range(HOSTS)
        ]
        for p in self.procs:
            p.start()

    def run(self, jobs: dict[int, dict[str, Any]], timeout: float = 180) -> dict[int, Any]:
        """Sends each host its job and waits for every answer (an error fails the test)."""
        for host, job in jobs.items():
            self.jobs[host].put({"url": self.url, **job})
        got = [self.results.get(timeout=timeout) for _ in jobs]
        errors = [g["exception"] for g in got if "exception" in g]
        assert not errors, errors
        return {g["host"]: g for g in got}

    def all(self, job: dict[str, Any], timeout: float = 180) -> list[Any]:
        return list(self.run(dict.fromkeys(range(HOSTS), job), timeout).values())

    def close(self) -> None:
        for q in self.jobs:
            q.put(None)
        for p in self.procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()


@pytest.fixture(scope="module")
def hosts(pg_url: str) -> Iterator[Hosts]:
    h = Hosts(pg_url)
    try:
        yield h
    finally:
        h.close()


def _conversation(name: str) -> str:
    return f"hosts-{name}-{uuid.uuid4().hex}"


def _open(url: str, conversation: str) -> Session:
    return Session.open(
        url, conversation=conversation, model="gpt-4o", context_window=pg_host_worker.WINDOW
    )


def _template_rows(url: str, until: Callable[[Session], bool]) -> list[dict[str, Any]]:
    """The rows of a conversation stepped (without prepare) until ``until`` holds: the
    state every host will decide on (appended to a fresh conversation per trial)."""
    s = _open(url, _conversation("template"))
    step_until(s, until)
    return [
        {"kind": r.kind, "role": r.role, "parts": r.parts, "meta": r.meta} for r in s.history.rows()
    ]


def _check_transcript(url: str, conversation: str) -> list[Any]:
    return check_transcript(History.open(url, conversation=conversation).rows())


@pytest.mark.parametrize("due", [warning_due, rollover_due], ids=["advisory", "rollover"])
def test_hosts_deciding_at_once_decide_once(
    pg_url: str, hosts: Hosts, due: Callable[[Session], bool]
) -> None:
    template = _template_rows(pg_url, due)
    for _ in range(TRIALS):
        conversation = _conversation("race")
        History.open(pg_url, conversation=conversation).append(template)
        got = hosts.all({"op": "prepare", "conversation": conversation})
        rows = _check_transcript(pg_url, conversation)
        assert all(g["status"] == "send" for g in got), got
        assert len({g["window_id"] for g in got}) == 1, "every host continues in one window"
        if due is rollover_due:
            assert {g["previous_window_id"] for g in got} == {"w:0"}, got
            assert sum(r.kind == "boundary" for r in rows) == 1
        else:
            assert sum(r.kind == "advisory" for r in rows) == 1


def test_hosts_stepping_one_conversation_past_the_limit(pg_url: str, hosts: Hosts) -> None:
    """Every host steps the same stubborn conversation (long messages, never a
    handoff): advisories fire and forced rollovers seal windows while the others
    write, and the transcript keeps every invariant."""
    conversation = _conversation("drive")
    text = CHUNK * 8  # ~900 tokens a message: a window fills in a dozen steps
    got = hosts.all({"op": "drive", "conversation": conversation, "steps": 24, "text": text})
    rows = _check_transcript(pg_url, conversation)
    boundaries = [r for r in rows if r.kind == "boundary"]
    assert len(boundaries) >= 3, "the hosts' steps went past the usable limit several times"
    assert any(r.kind == "advisory" for r in rows), "advisories fired"
    users = [r for r in rows if r.kind == "message" and r.role == "user"]
    assert len(users) == HOSTS * 24, "every host's every message is stored once"
    assert all(s in ("send", "pause") for g in got for s in g["statuses"]), got
    # A host that opens the conversation afterwards sees the window the others left.
    assert _open(pg_url, conversation).window_id == boundaries[-1].window


def test_hosts_never_record_two_results_for_one_call(pg_url: str, hosts: Hosts) -> None:
    for _ in range(TRIALS):
        conversation = _conversation("result")
        s = _open(pg_url, conversation)
        s.add_user("go")
        s.add_assistant(None, [{"id": "c1", "name": "read_file", "arguments": {}}])
        got = hosts.all({"op": "record", "conversation": conversation})
        assert sorted(g["outcome"] for g in got) == ["recorded"] + ["refused"] * (HOSTS - 1)
        rows = list(History.open(pg_url, conversation=conversation).rows())
        results = [p for r in rows for p in r.parts if p.get("type") == "tool_result"]
        assert len(results) == 1, results


def test_cursors_page_across_hosts(pg_url: str, hosts: Hosts) -> None:
    """A ``session_history`` cursor minted on one host continues on each other host,
    page after page, and the pages are the ones a single host reads."""
    conversation = _conversation("cursor")
    s = _open(pg_url, conversation)
    for n in range(40):
        s.add_user(f"ledger entry {n}: the total is {n * 7}")
        s.add_assistant(f"noted ledger entry {n}")
    search = {"action": "search", "query": "ledger", "limit": 7}
    expected: list[str] = []
    cursor = None
    while True:
        page = s.run_tool("session_history", {**search, **({"cursor": cursor} if cursor else {})})
        assert page["ok"], page
        expected += [i["item_id"] for i in page["items"]]
        cursor = page.get("cursor")
        if not cursor:
            break
    assert len(expected) == 80
    seen: list[str] = []
    cursor = None
    for turn in itertools.count():
        host = turn % HOSTS
        args = {**search, **({"cursor": cursor} if cursor else {})}
        page = hosts.run({host: {"op": "page", "conversation": conversation, "args": args}})[host]
        assert page["ok"], page
        seen += [i["item_id"] for i in page["items"]]
        cursor = page.get("cursor")
        if not cursor:
            break
    assert seen == expected
    # Appends by another host keep a cursor valid (the epoch is unchanged) ...
    first = s.run_tool("session_history", search)
    _open(pg_url, conversation).add_user("ledger entry appended by another host")
    more = hosts.run(
        {
            1: {
                "op": "page",
                "conversation": conversation,
                "args": {**search, "cursor": first["cursor"]},
            }
        }
    )[1]
    assert more["ok"], more
    # ... and a tampered cursor fails closed on every host.
    bad = first["cursor"][:-2] + ("AA" if not first["cursor"].endswith("AA") else "BB")
    refused = hosts.run(
        {2: {"op": "page", "conversation": conversation, "args": {**search, "cursor": bad}}}
    )[2]
    assert refused["ok"] is False, refused
