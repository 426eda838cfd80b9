"""What several writers of one conversation must never break, for the file store's
(test_session_writers.py) and PostgreSQL's (test_pg_hosts.py) multi-writer tests: the
steps that bring a session to a threshold, and the transcript's invariants."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Callable, Iterable
from typing import Any

from ctxbudget import Session

CHUNK = "audit the ledger entry and report the total\n" * 12  # ~110 tokens


def warning_due(s: Session) -> bool:
    return s._projected() >= s.budget.warning_at


def rollover_due(s: Session) -> bool:
    return s._projected() >= s.budget.usable_limit


def step_until(s: Session, until: Callable[[Session], bool]) -> None:
    """Steps ``s`` (a tool call and its ~110-token result each, without prepare) until
    ``until`` holds: the state the writers will decide on."""
    s.add_user("Audit everything.")
    n = 0
    while not until(s):
        n += 1
        s.add_assistant(None, [{"id": f"c{n}", "name": "read_file", "arguments": {"n": n}}])
        s.add_tool_results([{"call_id": f"c{n}", "name": "read_file", "output": CHUNK}])


def check_transcript(rows: Iterable[Any]) -> list[Any]:
    """The invariants: one advisory per stage per window, one boundary per sealed
    window, and every lead-in names its own window and the one it follows. Returns the
    rows."""
    rows = list(rows)
    stages = Counter((r.window, r.meta.get("stage")) for r in rows if r.kind == "advisory")
    assert all(n == 1 for n in stages.values()), f"a stage was published twice: {stages}"
    boundaries = [r for r in rows if r.kind == "boundary"]
    sealed = Counter(b.meta.get("previous_window") for b in boundaries)
    assert all(n == 1 for n in sealed.values()), f"a window was sealed twice: {sealed}"
    by_seq = {r.seq: r for r in rows}
    for b in boundaries:
        lead = by_seq[b.seq + 1]
        assert lead.kind == "lead_in" and lead.window == b.window == f"w:{b.seq}"
        text = lead.parts[0]["text"]
        assert b.window in text and str(b.meta["previous_window"]) in text, text
    for earlier, later in itertools.pairwise(boundaries):
        assert later.meta["previous_window"] == earlier.window
    return rows
