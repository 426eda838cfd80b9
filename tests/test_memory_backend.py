"""The in-memory store (``memory:NAME``) as every opener takes it: ``Session.open``,
``AsyncSession``, ``AgentsSession`` and the integrations' keyed conversations; and what
it keeps beside its rows (memory files, the budget record), which a delete removes and
reports as the other stores' deletes do."""

from __future__ import annotations

import asyncio
import uuid

import pytest

from ctxbudget import (
    AsyncSession,
    ConversationDeletedError,
    History,
    MemoryTool,
    Session,
)
from ctxbudget.budget_record import read_budgets
from ctxbudget.integrations._common import Conversations


def _name() -> str:
    return f"memory:m-{uuid.uuid4().hex}"


def test_a_session_records_its_budget_and_memory_files_beside_the_rows() -> None:
    where = _name()
    s = Session.open(where, model="gpt-4o", context_window=16_000)
    s.add_user("hello")
    assert s.run_tool(
        "memory", {"command": "create", "path": "/memories/session/cp.md", "file_text": "goal"}
    )["ok"]
    # Another Session of the process on the same name sees both.
    again = Session.open(where, model="gpt-4o", context_window=16_000)
    seen = again.run_tool("memory", {"command": "view", "path": "/memories/session/cp.md"})
    assert seen == {"ok": True, "path": "/memories/session/cp.md", "content": "     1\tgoal"}
    assert [b.context_window for b in read_budgets(again.history)] == [16_000]
    assert again.history.backend == "memory" and not again.history.is_database


def test_delete_removes_rows_memory_files_and_budget_record_and_reports_them() -> None:
    where = _name()
    s = Session.open(where, model="gpt-4o", context_window=16_000)
    s.add_user("hello")
    tool = MemoryTool(s.history)
    for path in ("/memories/a.md", "/memories/d/b.md"):
        assert tool.call({"command": "create", "path": path, "file_text": "x"})["ok"]
    rows = len(list(s.history.rows()))
    report = History.delete(where)
    assert report.existed and report.rows == rows and report.bytes > 0
    assert (report.memory_files, report.other_files) == (2, 1)
    with pytest.raises(ConversationDeletedError):
        s.history.append([{"kind": "message", "role": "user", "parts": []}])
    assert not History.delete(where).existed
    fresh = History.open(where)
    assert list(fresh.rows()) == [] and read_budgets(fresh) == []
    assert MemoryTool(fresh).call({"command": "view", "path": "/memories"})["entries"] == []


def test_memory_files_belong_to_one_name_and_touch_no_disk(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    a, b = MemoryTool(History.open(_name())), MemoryTool(History.open(_name()))
    assert a.root is None and "in-memory store" in a.location
    assert a.call({"command": "create", "path": "/memories/a.md", "file_text": "mine"})["ok"]
    assert b.call({"command": "view", "path": "/memories/a.md"})["code"] == "not_found"
    assert list(tmp_path.iterdir()) == []  # type: ignore[attr-defined]


def test_async_session_and_agents_session_open_an_in_memory_store() -> None:
    agents = pytest.importorskip("ctxbudget.integrations.agents")
    where = _name()

    async def run() -> None:
        a = AsyncSession(Session.open(where, model="gpt-4o", context_window=16_000))
        await a.add_user("from async")
        s = agents.AgentsSession.open("sid", where, model="gpt-4o", context_window=16_000)
        await s.add_items([{"role": "user", "content": "from agents"}])
        assert [i["content"] for i in await s.get_items()] == ["from async", "from agents"]

    asyncio.run(run())
    texts = [r.parts[0]["text"] for r in History.open(where).rows() if r.kind == "message"]
    assert texts == ["from async", "from agents"]


def test_keyed_conversations_get_one_in_memory_store_each() -> None:
    where = _name()
    conversations = Conversations(where, model="gpt-4o", context_window=16_000)
    conversations.pair("thread/1")[0].add_user("one")
    conversations.pair(None)[0].add_user("keyless")
    keyed = History.open(f"{where}/threads/thread%2F1")
    assert [r.parts[0]["text"] for r in keyed.rows() if r.kind == "message"] == ["one"]
    assert [r.parts[0]["text"] for r in History.open(where).rows() if r.kind == "message"] == [
        "keyless"
    ]
