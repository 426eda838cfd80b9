"""``Session`` over a PostgreSQL conversation: everything a session does over a
workspace — rows, prepare and the ladder, handoff with ``new_context``, forced
rollover, ``session_history``, the memory tool, open calls — and the async session (its
I/O through the offload bridge) and the Agents SDK session, chosen by a
``postgresql://`` URL and ``conversation=``."""

from __future__ import annotations

import asyncio
import threading
import uuid
from pathlib import Path
from typing import Any

import pytest
from stores import Psql, quote

from ctxbudget import AsyncSession, History, InvalidArgumentError, Session
from ctxbudget.budget_record import BUDGET_FILE

OUTPUT = "def charge(card):\n    return gateway.post(card)\n" * 30


def _id(prefix: str = "session") -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def _steps(s: Session, n: int, *, hand_off: bool) -> list[str]:
    """Reads files (each result ~600 tokens) until ``n`` steps or, with ``hand_off``,
    until the handoff advisory, which the agent answers with a checkpoint and
    ``new_context``."""
    events: list[str] = []
    for step in range(n):
        turn = s.prepare()
        events += turn.events
        if hand_off and {"advisory:handoff", "advisory:final"} & set(turn.events):
            s.add_assistant("Saving.", [{"id": f"n{step}", "name": "new_context", "arguments": {}}])
            saved = s.run_tool(
                "memory",
                {
                    "command": "create",
                    "path": "/memories/session/cp.md",
                    "file_text": "goal: audit",
                },
            )
            assert saved["ok"], saved
            out = s.run_tool("new_context", {})
            s.add_tool_results([{"call_id": f"n{step}", "name": "new_context", "output": out}])
            events += s.prepare().events
            return events
        s.add_assistant(None, [{"id": f"r{step}", "name": "read_file", "arguments": {"n": step}}])
        s.add_tool_results([{"call_id": f"r{step}", "name": "read_file", "output": OUTPUT}])
    return events


def test_a_session_over_postgresql_runs_the_ladder(pg_url: str, tmp_path: Path) -> None:
    conversation = _id()
    s = Session.open(pg_url, conversation=conversation, context_window=20_000, threshold=0.5)
    assert s.history.conversation == conversation and s.history.workspace is None
    assert repr(s) == f"Session(\"postgresql conversation '{conversation}'\", window='w:0')"
    s.add_user("Audit the billing code.")
    events = _steps(s, 200, hand_off=True)
    assert "advisory:warning" in events and {"advisory:handoff", "advisory:final"} & set(events)
    assert any(e.startswith("rollover:") for e in events), events
    assert s.window_id != "w:0", "new_context rolled the window over"
    lead_in = [r for r in s.history.rows() if r.kind == "lead_in"]
    assert len(lead_in) == 1 and s.window_id in lead_in[0].parts[0]["text"]
    # The checkpoint survives the rollover, in the database, for any host.
    other = Session.open(pg_url, conversation=conversation, context_window=20_000, threshold=0.5)
    cp = other.run_tool("memory", {"command": "view", "path": "/memories/session/cp.md"})
    assert cp["ok"] and cp["content"].endswith("goal: audit")
    assert other.window_id == s.window_id
    # The earlier window is read back with session_history.
    found = other.run_tool("session_history", {"action": "search", "query": "Audit the billing"})
    assert found["ok"] and found["items"][0]["window_id"] == "w:0"
    assert not any(tmp_path.iterdir()) and not Path(BUDGET_FILE).exists(), "nothing on disk"


def test_a_stubborn_agent_is_rolled_over_at_the_limit(pg_url: str) -> None:
    s = Session.open(pg_url, conversation=_id(), context_window=16_000)
    s.add_user("Audit everything.")
    events = _steps(s, 200, hand_off=False)
    assert any(e.startswith("rollover") for e in events), events
    assert s.window_id != "w:0"
    boundaries = [r for r in s.history.rows() if r.kind == "boundary"]
    assert boundaries[0].meta["previous_window"] == "w:0"


def test_calls_left_open_by_a_stopped_host_are_interrupted(pg_url: str) -> None:
    conversation = _id()
    first = Session.open(pg_url, conversation=conversation)
    first.add_user("go")
    first.add_assistant(None, [{"id": "c1", "name": "read_file", "arguments": {}}])
    # That host stops; another opens the conversation and goes on.
    second = Session.open(pg_url, conversation=conversation)
    assert [c.id for c in second.open_calls] == ["c1"]
    turn = second.prepare()
    assert turn.status == "send" and second.settled


def test_conversation_and_url_arguments_are_checked(pg_url: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="conversation="):
        Session.open(pg_url)
    with pytest.raises(InvalidArgumentError, match="apply to a postgresql:// store"):
        Session.open(tmp_path, conversation="x")
    with pytest.raises(InvalidArgumentError, match="apply to a postgresql:// store"):
        Session.open(tmp_path, cursor_key="k" * 40)


def test_a_cursor_key_argument_signs_cursors_for_every_host(pg_url: str) -> None:
    conversation, key = _id(), "a deployment's cursor key, 32 bytes or more"
    a = Session.open(pg_url, conversation=conversation, cursor_key=key)
    for n in range(30):
        a.add_user(f"ledger entry {n}")
    page = a.run_tool("session_history", {"action": "search", "query": "ledger", "limit": 5})
    assert page["ok"] and page["cursor"]
    b = Session.open(pg_url, conversation=conversation, cursor_key=key)
    more = b.run_tool(
        "session_history",
        {"action": "search", "query": "ledger", "limit": 5, "cursor": page["cursor"]},
    )
    assert more["ok"] and more["items"][0]["item_id"] != page["items"][0]["item_id"]


async def _async_conversation(url: str, conversation: str) -> dict[str, Any]:
    s = await AsyncSession.open(url, conversation=conversation, context_window=20_000)
    await s.add_user("Audit the billing code.")
    # The memory tool's edit runs Python under the conversation's lock from inside the
    # bridged session; every other store call goes through the I/O pool.
    created = await s.run_tool(
        "memory", {"command": "create", "path": "/memories/session/cp.md", "file_text": "a"}
    )
    edited = await s.run_tool(
        "memory",
        {
            "command": "str_replace",
            "path": "/memories/session/cp.md",
            "old_str": "a",
            "new_str": "b",
        },
    )
    turn = await s.prepare()
    seen = await s.run_tool("memory", {"command": "view", "path": "/memories/session/cp.md"})
    return {"created": created, "edited": edited, "status": turn.status, "seen": seen}


def test_async_sessions_over_postgresql(pg_url: str) -> None:
    async def main() -> list[dict[str, Any]]:
        return await asyncio.gather(*(_async_conversation(pg_url, _id("async")) for _ in range(8)))

    for got in asyncio.run(main()):
        assert got["created"]["ok"] and got["edited"]["status"] == "replaced", got
        assert got["status"] == "send" and got["seen"]["content"] == "     1\tb"


_CP = "/memories/session/cp.md"
_WRITES: list[dict[str, Any]] = [
    {"command": "str_replace", "path": _CP, "old_str": "a", "new_str": "b"},
    {"command": "insert", "path": _CP, "insert_line": 1, "insert_text": "c"},
    {"command": "create", "path": "/memories/n.md", "file_text": "n"},
    {"command": "rename", "old_path": "/memories/n.md", "new_path": "/memories/m.md"},
    {"command": "delete", "path": "/memories/m.md"},
]


def test_memory_commands_waiting_for_another_hosts_lock_leave_the_loop_free(
    pg_url: str,
) -> None:
    """Another host holds the conversation's row lock: each writing memory command waits
    for it off the event loop, which keeps running other tasks meanwhile. A frozen loop
    cannot tick; the watchdog then releases the lock (and the test fails)."""
    conversation = _id("memlock")
    holder = Psql(pg_url)
    frozen = threading.Event()

    def release() -> None:
        frozen.set()
        holder.run("ROLLBACK")

    async def main() -> list[dict[str, Any]]:
        s = await AsyncSession.open(pg_url, conversation=conversation, context_window=20_000)
        created = await s.run_tool("memory", {"command": "create", "path": _CP, "file_text": "a"})
        assert created["ok"], created
        results = []
        for args in _WRITES:
            holder.run(
                "BEGIN; SELECT 1 FROM ctxbudget_conversations "
                f"WHERE conversation = {quote(conversation)} FOR UPDATE"
            )
            watchdog = threading.Timer(20, release)
            watchdog.start()
            call = asyncio.ensure_future(s.run_tool("memory", args))
            for _ in range(20):
                await asyncio.sleep(0.005)  # other tasks run while the command waits
            watchdog.cancel()
            assert not frozen.is_set(), f"{args['command']} froze the event loop"
            assert not call.done(), f"{args['command']} did not wait for the lock"
            holder.run("ROLLBACK")
            results.append(await call)
        return results

    try:
        results = asyncio.run(main())
    finally:
        holder.close()
    assert all(r["ok"] for r in results), results
    s = Session.open(pg_url, conversation=conversation, context_window=20_000)
    seen = s.run_tool("memory", {"command": "view", "path": _CP})
    assert seen["content"] == "     1\tb\n     2\tc", seen


def test_agents_session_uses_the_session_id_as_conversation(pg_url: str) -> None:
    pytest.importorskip("agents")
    from ctxbudget.integrations.agents import AgentsSession

    session_id = _id("agents")
    a = AgentsSession.open(session_id, pg_url, model="gpt-4o")
    assert a.session_id == session_id and a.session.history.conversation == session_id
    asyncio.run(a.add_items([{"role": "user", "content": "hello from host A"}]))
    b = AgentsSession.open(session_id, pg_url, model="gpt-4o")
    items = asyncio.run(b.get_items())
    assert [i["content"] for i in items] == ["hello from host A"]
    named = AgentsSession.open("other-id", pg_url, conversation=session_id, model="gpt-4o")
    assert named.session.history.conversation == session_id
    assert History.open(pg_url, conversation=session_id).windows()[0].window_id == "w:0"


def test_usage_points_read_a_conversation_without_a_budget_record(pg_url: str) -> None:
    from ctxbudget import Encoding
    from ctxbudget.plot import usage_points

    s = Session.open(pg_url, conversation=_id("plot"), context_window=16_000)
    s.add_user("Audit everything.")
    _steps(s, 60, hand_off=False)
    points = usage_points(s.history, Encoding("o200k_base"))
    assert len(points) == 60 and len({p.window_id for p in points}) >= 2
    assert all(p.tokens > 0 for p in points)
