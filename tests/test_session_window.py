"""One reading of the window for everything: Session's requests, its public WindowView,
the plot, the Agents SDK integration and the ctxbudget tools all read the same window
state, so what one shows, counts or retracts cannot drift from the others."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import History, Row, Session, ToolPolicy, WindowView, _ctxbudget
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


def _reply_item(text: str) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": text, "annotations": []}],
    }


def test_plot_shows_what_the_sdk_session_measured(tmp_path: Path) -> None:
    """A reply the Agents SDK saves carries the size of the request the session sent
    for it, as one recorded with add_assistant does; the plot draws that figure."""
    ws = tmp_path / "ws"
    s = _open(ws, tools=[HOST_TOOL])
    a = _agents(s)
    measured = []
    for n in range(3):
        asyncio.run(a.add_items([{"role": "user", "content": f"question {n}"}]))
        turn = s.prepare()
        assert turn.status == "send", turn.reason
        measured.append((turn.window_id, turn.decision.projected))
        asyncio.run(a.add_items([_reply_item(f"answer {n}")]))
    replies = [r for r in s.history.rows() if r.kind == "message" and r.role == "assistant"]
    assert [r.meta.get("request_tokens") for r in replies] == [t for _, t in measured]
    points = usage_points(History.open(ws), s.encoding)
    assert [(p.window_id, p.tokens) for p in points] == measured


def test_plot_estimate_skips_retracted_and_quarantined_rows(tmp_path: Path) -> None:
    """A reply recorded without a measurement is estimated from the core fold's view of
    the window: a row popped by pop_item and a quarantined request are not counted, and
    a quarantine's rejected copy is not a step; the estimate is what the session
    measures for the same request."""
    ws = tmp_path / "ws"
    s = _open(ws, tools=[HOST_TOOL])
    a = _agents(s)
    s.add_user("hi")
    s.add_assistant("hello")
    asyncio.run(a.add_items([{"role": "user", "content": "a long aside " * 200}]))
    asyncio.run(a.pop_item())
    _spec_form_quarantine(s, int(s.add_user("far too long " * 300)), "far too long")
    s.add_user("the real question")
    turn = s.prepare()
    assert turn.status == "send", turn.reason
    # A host that writes the reply itself records no measurement.
    s.history.append(
        [
            {
                "kind": "message",
                "role": "assistant",
                "parts": [{"type": "text", "text": "the answer"}],
            }
        ]
    )
    points = usage_points(History.open(ws), s.encoding)
    assert len(points) == 2, "the quarantine's rejected copy is not a step"
    assert (points[-1].window_id, points[-1].tokens) == (
        turn.window_id,
        turn.decision.projected,
    )


# ----- defect: new_context reads O(new rows), not the file ------------------------------


class _CountingFold:
    """A proxy for the core's window fold that counts the rows its ``advance()`` reads."""

    def __init__(self, real: Any, counter: list[int]) -> None:
        self._real = real
        self._counter = counter

    def advance(self) -> tuple[list[Row], bool]:
        rows, changed = self._real.advance()
        self._counter[0] += len(rows)
        return rows, changed

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def test_new_context_call_reads_only_new_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each ``run_tool("new_context")`` reads at most the rows appended since the last
    call: every core fold (the session's and any made later) is counted, and reading the
    transcript row by row through ``History`` is refused."""
    s = _open(tmp_path / "ws")
    s.add_user("Audit the billing code.")
    for n in range(30):
        _step(s, n)
    read = [0]
    real_fold = _ctxbudget.WindowFold
    s._state.fold._core = _CountingFold(s._state.fold._core, read)
    monkeypatch.setattr(
        _ctxbudget, "WindowFold", lambda history: _CountingFold(real_fold(history), read)
    )

    def refuse(*_: object, **__: object) -> None:
        raise AssertionError("run_tool read the transcript through History.rows")

    monkeypatch.setattr(History, "rows", refuse)
    seen = s._state.fold.last_seq
    s.add_assistant(None, [{"id": "nc", "name": "new_context", "arguments": {}}])
    for expected in ({"ok": True, "status": "scheduled"}, None):
        before = read[0]
        result = s.run_tool("new_context", {})
        appended = s._state.fold.last_seq - seen
        assert read[0] - before <= appended, "run_tool read rows it had read before"
        seen = s._state.fold.last_seq
        if expected is not None:
            assert result == expected
            s.add_tool_results([{"call_id": "nc", "name": "new_context", "output": result}])
        else:
            assert result["code"] == "already_requested"
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


def test_pop_item_reads_again_when_another_writer_appended_first(tmp_path: Path) -> None:
    s = _open(tmp_path / "ws")
    a = _agents(s)
    s.add_user("hi")
    s.add_assistant("hello")
    other = _open(tmp_path / "ws")
    retract = s.retract

    def racing(seq: int, **kw: Any) -> list[int]:
        # Another writer appends between pop_item's read and its conditional retraction.
        other.add_assistant("late")
        s.retract = retract  # type: ignore[method-assign]
        return retract(seq, **kw)

    s.retract = racing  # type: ignore[method-assign]
    popped = asyncio.run(a.pop_item())
    assert popped is not None and popped["content"] == "late", "the newest item, not a stale one"
    assert [r.seq for r in s.view(refresh=True).rows] == [1, 2]


def test_agents_items_carry_tool_text_as_the_session_sends_it(tmp_path: Path) -> None:
    """A tool step the loop API recorded reaches the Agents SDK as the session's own
    request carries it: arguments and output as JSON that keeps non-ASCII characters
    (one rule, in ``providers``), not ASCII-escaped text the model would be sent at up to
    six bytes a character."""
    s = _open(tmp_path / "ws")
    a = _agents(s)
    s.add_user("Wie ist das Wetter in Zürich?")
    s.add_assistant(None, [{"id": "c1", "name": "weather", "arguments": {"stadt": "Zürich"}}])
    s.add_tool_results([{"call_id": "c1", "name": "weather", "output": {"himmel": "sonnig ☀"}}])
    sent = s.prepare().messages
    items = asyncio.run(a.get_items())
    call = next(i for i in items if i.get("type") == "function_call")
    result = next(i for i in items if i.get("type") == "function_call_output")
    assert call["arguments"] == '{"stadt":"Zürich"}'  # compact, as counted
    assert result["output"] == '{"himmel": "sonnig ☀"}'
    assert result["output"] == next(m["content"] for m in sent if m["role"] == "tool")
