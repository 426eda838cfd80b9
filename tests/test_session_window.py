"""One reading of the window for everything: Session's requests, its public WindowView,
the plot, the Agents SDK integration and the ctxbudget tools all read the same window
state, so what one shows, counts or retracts cannot drift from the others."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import History, Row, Session, ToolPolicy, WindowView
from ctxbudget.plot import usage_points

HOST_TOOL = {
    "name": "read_file",
    "description": "Reads one file of the repository and returns its text.",
    "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}},
}
OUTPUT = "def retry(x):\n    return send(x)  # resends invoices on 503\n" * 12


def _open(ws: Path, **kw: Any) -> Session:
    kw.setdefault("context_window", 64_000)
    kw.setdefault("durability", "none")
    return Session.open(ws, model="gpt-4o", **kw)


def _step(s: Session, n: int) -> None:
    s.add_assistant(None, [{"id": f"c{n}", "name": "read_file", "arguments": {"n": n}}])
    s.add_tool_results([{"call_id": f"c{n}", "name": "read_file", "output": OUTPUT}])


# ----- defect: pop_item and the request read one visibility rule ------------------------


def _spec_form_quarantine(s: Session, seq: int, text: str) -> None:
    """A quarantine as SPEC §5 words it, written by another writer: the retraction of
    the user's row and an empty assistant row carrying the original in ``meta.rejected``."""
    s.history.append(
        [
            {"kind": "retraction", "role": "system", "meta": {"retracts": seq}},
            {
                "kind": "message",
                "role": "assistant",
                "parts": [],
                "meta": {
                    "rejected": {
                        "role": "user",
                        "parts": [{"type": "text", "text": text}],
                        "meta": {},
                    }
                },
            },
        ]
    )


def _agents(s: Session) -> Any:
    pytest.importorskip("agents")
    from ctxbudget.integrations.agents import AgentsSession

    return AgentsSession(s)


def test_pop_item_pops_what_the_request_carries_never_a_quarantined_row(tmp_path: Path) -> None:
    """The SDK's items are the fold's visible rows, as the request is: a quarantined
    message (its retracted row and its ``rejected`` copy) is in neither, and pop_item
    hides the last item the model saw."""
    s = _open(tmp_path / "ws", context_window=4_000)
    a = _agents(s)
    s.add_user("hi")
    s.add_assistant("hello")
    s.add_user("huge " * 5_000)
    assert s.prepare().status == "reject"
    view = s.view()
    assert [r.seq for r in view.rows] == [1, 2]
    assert 3 in view.retracted
    sent = s.prepare().messages
    shown = asyncio.run(a.get_items())
    assert [m["content"] for m in sent] == ["hi\n\n[id: 1]", "hello"]
    assert [i["content"] for i in shown] == ["hi", "hello"]
    assert asyncio.run(a.pop_item()) == shown[-1]
    assert [r.seq for r in s.view().rows] == [1]
    kinds = [r.kind for r in s.history.rows()]
    assert kinds.count("retraction") == 2 and kinds.count("rejected") == 1


def test_a_spec_form_quarantine_row_is_neither_sent_nor_shown(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    a = _agents(s)
    s.add_user("hi")
    s.add_assistant("hello")
    _spec_form_quarantine(s, int(s.add_user("far too long")), "far too long")
    sent = s.prepare().messages
    shown = asyncio.run(a.get_items())
    assert [(m["role"], m["content"]) for m in sent] == [
        ("user", "hi\n\n[id: 1]"),
        ("assistant", "hello"),
    ]
    assert [i["content"] for i in shown] == ["hi", "hello"]
    assert asyncio.run(a.pop_item()) == shown[-1]


# ----- defect: the plot counts with the session's formula -------------------------------


def test_plot_shows_what_the_session_measured(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = _open(
        ws,
        context_window=12_000,
        system="You are a careful code auditor.",
        tools=[HOST_TOOL],
        tool_policy=ToolPolicy([(".*", "enable"), ("new_context", "disable")]),
    )
    s.add_user("Audit the billing code and report risky loops.")
    measured: list[tuple[str, int]] = []
    for n in range(60):
        turn = s.prepare()
        assert turn.status == "send", turn.reason
        measured.append((turn.window_id, turn.decision.projected))
        _step(s, n)
    assert len({w for w, _ in measured}) >= 2, "the run crosses a forced rollover"
    points = usage_points(History.open(ws), s.encoding)
    assert [(p.window_id, p.tokens) for p in points] == measured


# ----- defect: new_context reads O(new rows), not the file ------------------------------


class _CountingHistory(History):
    """A History that counts the rows its readers pull."""

    __slots__ = ("pulled",)

    def __init__(self, inner: History) -> None:
        super().__init__(inner._core, inner.workspace)
        self.pulled = 0

    def rows(self, *, since_seq: int = 0) -> Iterator[Row]:
        for row in super().rows(since_seq=since_seq):
            self.pulled += 1
            yield row


def test_new_context_call_reads_only_new_rows(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    s.add_user("Audit the billing code.")
    for n in range(30):
        _step(s, n)
    counting = _CountingHistory(s.history)
    s.history = counting
    s.add_assistant(None, [{"id": "nc", "name": "new_context", "arguments": {}}])
    before = counting.pulled
    result = s.run_tool("new_context", {})
    assert result == {"ok": True, "status": "scheduled"}
    assert counting.pulled - before <= 1, "run_tool read the whole transcript"
    s.add_tool_results([{"call_id": "nc", "name": "new_context", "output": result}])
    before = counting.pulled
    assert s.run_tool("new_context", {})["code"] == "already_requested"
    assert counting.pulled - before <= 1
    assert s.view().new_context_scheduled


# ----- defect: Off is one definition for the ladder and the tools offered ---------------


@pytest.mark.parametrize("threshold", [0.99995, 0.99999, 1.0])
def test_an_off_budget_offers_no_new_context(tmp_path: Path, threshold: float) -> None:
    s = _open(tmp_path / "ws", threshold=threshold)
    assert not s.budget.enabled
    s.add_user("hi")
    turn = s.prepare()
    assert "new_context" not in [t["name"] for t in turn.tools]
    assert s.run_tool("new_context", {})["code"] == "rollover_disabled"


def test_just_below_off_offers_new_context(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws", threshold=0.99994)
    assert s.budget.enabled
    s.add_user("hi")
    assert "new_context" in [t["name"] for t in s.prepare().tools]


# ----- the public view ------------------------------------------------------------------


def test_window_view_is_a_read_only_snapshot(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    s.add_user("hi")
    s.add_assistant(None, [{"id": "c1", "name": "read_file", "arguments": {"n": 1}}])
    v = s.view()
    assert isinstance(v, WindowView)
    assert v.window_id == "w:0" and v.previous_window_id is None
    assert [c.id for c in v.open_calls] == ["c1"]
    assert v.last_user is not None and v.last_user.seq == 1
    assert v.last_seq == 2 and not v.new_context_scheduled
    with pytest.raises(AttributeError):
        v.window_id = "w:9"  # type: ignore[misc]
    s.add_tool_results([{"call_id": "c1", "name": "read_file", "output": "x"}])
    assert [c.id for c in v.open_calls] == ["c1"], "a snapshot does not change"
    assert s.view().open_calls == ()
    assert s.view().tokens == s._projected()


class _RacingHistory(History):
    """A History on which another writer appends right before the first conditional
    write (the race between reading the window and writing on it)."""

    __slots__ = ("raced",)

    def __init__(self, inner: History) -> None:
        super().__init__(inner._core, inner.workspace)
        self.raced = False

    def append(self, rows: Any, *, if_last_seq: int | None = None) -> Any:
        if not self.raced and if_last_seq is not None:
            self.raced = True
            late = {
                "kind": "message",
                "role": "assistant",
                "parts": [{"type": "text", "text": "late"}],
            }
            super().append([late])
        return super().append(rows, if_last_seq=if_last_seq)


def test_pop_item_reads_again_when_another_writer_appended_first(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    a = _agents(s)
    s.add_user("hi")
    s.add_assistant("hello")
    s.history = _RacingHistory(s.history)
    popped = asyncio.run(a.pop_item())
    assert popped is not None and popped["content"] == "late", "the newest item, not a stale one"
    assert [r.seq for r in s.view(refresh=True).rows] == [1, 2]
