"""End to end: the agent loop through warnings, handoffs, new_context, the final prompt,
forced rollovers, quarantine, soft clears, Off, restricted tool policies, restarts and
a crash in the middle of the rollover batch."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import Action, History, Session, SessionHistoryTool, ToolPolicy, _ctxbudget
from ctxbudget.demo import FACT, run_agent

BIG = "def retry(x):\n    return send(x)  # resends invoices on 503\n" * 40  # ~700 tokens


def _open(ws: Path, **kw: Any) -> Session:
    kw.setdefault("context_window", 64_000)
    kw.setdefault("durability", "none")
    return Session.open(ws, model="gpt-4o", **kw)


def _step(s: Session, n: int, *, output: str = BIG) -> None:
    """One ordinary tool step: a call and its (large) result."""
    s.add_assistant(None, [{"id": f"c{n}", "name": "read_file", "arguments": {"n": n}}])
    s.add_tool_results([{"call_id": f"c{n}", "name": "read_file", "output": output}])


def _boundaries(ws: Path) -> list[Any]:
    return [r for r in History.open(ws, durability="none").rows() if r.kind == "boundary"]


def test_cooperative_agent_hands_off_and_recovers_a_fact(tmp_path: Path) -> None:
    result = run_agent(
        tmp_path / "ws", agent="cooperative", context_window=64_000, steps=40, out=lambda _: None
    )
    assert result.advisories["warning"] == 1 and result.advisories["handoff"] == 1
    assert result.rollovers_requested == 1 and result.rollovers_forced == 0
    assert result.fact_recovered and result.checkpoint_reads == 1
    h = History.open(tmp_path / "ws", durability="none")
    rows = list(h.rows())
    b = next(r for r in rows if r.kind == "boundary")
    assert b.meta["requested_by"] == "model" and b.meta["reason"] == "new_context"
    lead = next(r for r in rows if r.seq == b.seq + 1)
    assert lead.kind == "lead_in" and b.window == lead.window
    # Boundary, lead-in and trigger were one batch: one header covers all three.
    chat = (tmp_path / "ws" / "history" / "chat.jsonl").read_text().splitlines()
    headers = [json.loads(x)["batch"] for x in chat if x.startswith('{"batch":')]
    assert any(hd["first"] == b.seq and hd["last"] == b.seq + 2 for hd in headers)
    cp = tmp_path / "ws" / "memories" / "session" / "checkpoint.md"
    assert "requests: w:0 item 1" in cp.read_text()
    tool = SessionHistoryTool(h)
    assert FACT in json.dumps(
        tool.call({"action": "search", "query": "deploy key", "window_id": "w:0"})
    )


def test_stubborn_agent_gets_final_then_forced_rollover_at_the_limit(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = _open(ws)
    s.add_user("Audit everything.")
    stages, n = [], 0
    while True:
        turn = s.prepare()
        if turn.window_id != "w:0":
            break
        stages.append(turn.decision.action)
        before = turn.decision.projected
        n += 1
        _step(s, n)
    assert [a for a in stages if a is not Action.CONTINUE] == [
        Action.WARNING,
        Action.HANDOFF,
        Action.FINAL,
    ]
    (b,) = _boundaries(ws)
    assert b.meta["reason"] == "usable_limit" and "requested_by" not in b.meta
    assert b.meta["projected"] >= s.budget.usable_limit > before
    assert "reached its usable limit" in turn.messages[0]["content"]
    assert turn.messages[0]["kind"] == "lead_in"


def test_restart_after_every_step_changes_nothing(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = _open(ws)
    s.add_user("Audit everything.")
    events: list[str] = []
    for n in range(1, 90):
        s = _open(ws)  # a new process would see exactly this
        turn = s.prepare()
        events += turn.events
        if "advisory:handoff" in turn.events:
            s.add_assistant("saving", [{"id": f"nc{n}", "name": "new_context", "arguments": {}}])
            s = _open(ws)
            out = s.run_tool("new_context", {})
            assert out == {"ok": True, "status": "scheduled"}
            s.add_tool_results([{"call_id": f"nc{n}", "name": "new_context", "output": out}])
            continue
        if turn.window_id != "w:0":
            break
        _step(s, n)
    assert events.count("advisory:warning") == 1, events
    assert events.count("advisory:handoff") == 1, events
    assert "advisory:final" not in events
    (b,) = _boundaries(ws)
    assert b.meta["requested_by"] == "model", "the scheduled new_context survived restarts"


def test_scheduled_new_context_survives_a_fresh_process(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = _open(ws)
    s.add_user("hi")
    s.prepare()
    s.add_assistant(None, [{"id": "nc", "name": "new_context", "arguments": {}}])
    s.add_tool_results(
        [{"call_id": "nc", "name": "new_context", "output": s.run_tool("new_context", {})}]
    )
    code = (
        "import sys; from ctxbudget import Session\n"
        "s = Session.open(sys.argv[1], context_window=64000, durability='none')\n"
        "print(s.prepare().window_id)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(ws)], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert out != "w:0" and len(_boundaries(ws)) == 1


def test_input_that_cannot_fit_is_quarantined(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = _open(ws, context_window=16_000)
    s.add_user("a normal question")
    assert s.prepare().status == "send"
    s.add_assistant("an answer")
    huge = "token " * 20_000
    s.add_user(huge)
    turn = s.prepare()
    assert turn.status == "reject" and turn.messages == []
    rows = list(History.open(ws, durability="none").rows())
    rejected = [r for r in rows if r.kind == "rejected"]
    assert len(rejected) == 1 and rejected[0].meta["rejected"]["parts"][0]["text"] == huge
    again = s.prepare()
    assert again.status == "send"
    assert all(huge not in m["content"] for m in again.messages), "never sent"
    found = s.run_tool("session_history", {"action": "search", "query": "token token"})
    assert found["items"] == [], "never returned by session_history"


def test_soft_clear_is_a_floor_for_retrieval(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = _open(ws)
    s.add_user("my secret is swordfish")
    s.prepare()
    s.history.clear_soft()
    s.add_user("new topic")
    turn = s.prepare()
    assert all("swordfish" not in m["content"] for m in turn.messages)
    r = s.run_tool("session_history", {"action": "search", "query": "swordfish"})
    assert r["ok"] and r["items"] == []


def test_off_never_advises_and_blocks_at_the_limit(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = _open(ws, threshold=1.0, context_window=16_000)
    s.add_user("go")
    statuses, n = [], 0
    while True:
        turn = s.prepare()
        statuses.append(turn.status)
        assert "new_context" not in [t["name"] for t in turn.tools]
        assert not turn.events
        if turn.status != "send":
            break
        n += 1
        _step(s, n)
    assert statuses[-1] == "block" and turn.decision.action is Action.BLOCK
    assert _boundaries(ws) == []


def test_without_session_history_a_rollover_pauses(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    policy = ToolPolicy.preset("exec").with_rules(("session_history", "disable"))
    s = _open(ws, tool_policy=policy, context_window=16_000)
    s.add_user("go")
    n = 0
    while True:
        turn = s.prepare()
        if turn.status != "send":
            break
        assert "new_context" not in [t["name"] for t in turn.tools]
        n += 1
        _step(s, n)
    assert turn.status == "pause" and "session_history" in (turn.reason or "")
    assert _boundaries(ws) == [], "the window was not sealed"


@pytest.mark.skipif(not _ctxbudget.FAILPOINTS, reason="needs the failpoints build")
@pytest.mark.parametrize(
    "point,action",
    [("append.fsync", "crash"), ("append.write", "torn:300"), ("append.after_fsync", "crash")],
)
def test_crash_during_the_rollover_batch(tmp_path: Path, point: str, action: str) -> None:
    ws = tmp_path / "ws"
    s = Session.open(ws, model="gpt-4o", context_window=16_000, durability="fsync")
    s.add_user("go")
    n = 0
    # Step until the next prepare() must seal the window, then crash inside that batch.
    while True:
        assert s.prepare().window_id == "w:0"
        n += 1
        _step(s, n, output="x " * 300)
        if s._projected() >= s.budget.usable_limit:
            break
    _ctxbudget._arm_failpoint(point, action)
    try:
        with pytest.raises(OSError):
            s.prepare()
    finally:
        _ctxbudget._reset_failpoints()
    reopened = _open(ws, context_window=16_000)
    rows = list(reopened.history.rows())
    boundaries = [r for r in rows if r.kind == "boundary"]
    assert len(boundaries) <= 1, "never a duplicate rollover"
    for b in boundaries:
        assert [r.kind for r in rows if r.seq in (b.seq + 1,)] == ["lead_in"], "whole or none"
    turn = reopened.prepare()
    assert turn.status == "send"
    assert len([r for r in reopened.history.rows() if r.kind == "boundary"]) <= 1 + (
        0 if boundaries else 1
    )


def test_request_hooks_snapshot_and_rollover_admission(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    s = _open(ws, context_window=16_000)
    s.add_user("go")
    s.register_hook(lambda window: f"Workspace note for {window}.", context_only=True)
    first = s.prepare()
    assert "Workspace note for w:0." in first.system and len(first.hooks) == 1
    unrestricted = s.register_hook(lambda req: {**req, "tools": []}, context_only=False)
    n = 0
    while True:
        turn = s.prepare()
        if turn.status != "send":
            break
        assert turn.tools == [], "the unrestricted hook applied"
        n += 1
        _step(s, n)
    assert turn.status == "pause" and "hook" in (turn.reason or "")
    assert _boundaries(ws) == []
    s.unregister_hook(unrestricted)
    after = s.prepare()
    assert after.status == "send" and after.window_id != "w:0", "context-only hooks never block"
    assert "Workspace note for" in after.system
