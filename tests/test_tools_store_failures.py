"""Tool calls return results, never raise, whatever the store does: a workspace locked
past the wait bound, a PostgreSQL server gone after the session opened. Every ctxbudget
tool (``session_history``, ``memory``, ``new_context``) answers with ``ok: false`` and a
code (``history_unavailable``, as ``session_history`` reports a store it cannot read;
``io_error`` for the memory files), its message without the URL's password."""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from filelock import FileLock
from history_helpers import SESSION_HISTORY_CODES
from stores import new_conversation_id

from ctxbudget import AsyncSession, Database, History, NewContextTool, Session, ToolPolicy
from ctxbudget.policy import Budget
from ctxbudget.prompts import DEFAULT_PROMPTS
from ctxbudget.session.types import encoding_for

PG_CLUSTER = Path(__file__).resolve().parent.parent / "scripts" / "pg-cluster"
SECRET = "hunter2-tool-secret"

CALLS: list[tuple[str, dict[str, Any]]] = [
    ("session_history", {"action": "search", "query": "needle"}),
    ("session_history", {"action": "list_windows"}),
    ("memory", {"command": "view", "path": "/memories"}),
    ("memory", {"command": "create", "path": "/memories/session/a.md", "file_text": "x"}),
    (
        "memory",
        {"command": "str_replace", "path": "/memories/notes.md", "old_str": "a", "new_str": "b"},
    ),
    ("new_context", {}),
]
"""One call of each kind: reads and writes of every tool."""

# The code each tool gives when the transcript store cannot be used (the memory files of a
# workspace are not in the transcript store, so there memory may succeed).
STORE_CODES = {"session_history": {"history_unavailable"}, "new_context": {"history_unavailable"}}
DB_CODES = {**STORE_CODES, "memory": {"io_error"}}


def _session(history: History) -> Session:
    return Session(
        history,
        model="gpt-4o",
        encoding=encoding_for("gpt-4o", None, 128_000),
        budget=Budget(128_000, 0.7, None),
        mode_active=True,
        tool_policy=ToolPolicy.preset("exec"),
        system="",
        prompts=DEFAULT_PROMPTS,
        read_only=False,
    )


def _check_failure(name: str, result: Any, codes: dict[str, set[str]]) -> None:
    assert isinstance(result, dict), f"{name} raised {result!r}"
    assert result["ok"] is False and result["code"] in codes[name], (name, result)
    assert isinstance(result["error"], str) and result["error"]
    if name == "session_history":
        assert result["code"] in SESSION_HISTORY_CODES
        assert result["has_more"] is False and "notice" in result
    assert SECRET not in json.dumps(result)


def test_every_tool_answers_while_another_process_holds_the_workspace(tmp_path: Path) -> None:
    """The history lock held past the wait bound: before, every ``run_tool`` raised
    ``LockTimeoutError`` (the window was read before any tool ran)."""
    ws = tmp_path / "ws"
    s = _session(History.open(ws, durability="none", lock_timeout=0.2))
    s.add_user("needle in the first window")
    s.memory.call({"command": "create", "path": "/memories/notes.md", "file_text": "a"})
    outcomes: dict[str, Any] = {}
    tool = NewContextTool(History.open(ws, lock_timeout=0.2))
    with FileLock(str(ws / "history" / "lock")):
        for n, (name, args) in enumerate(CALLS):
            try:
                outcomes[f"{n}:{name}"] = s.run_tool(name, args)
            except Exception as exc:  # the defect: recorded, reported below
                outcomes[f"{n}:{name}"] = exc
        try:
            standalone: Any = tool.call({})
        except Exception as exc:
            standalone = exc
    raised = {k: v for k, v in outcomes.items() if isinstance(v, BaseException)}
    assert not raised, f"tool calls raised: {raised}"
    for key, result in outcomes.items():
        name = key.split(":", 1)[1]
        if name == "new_context":
            # The session read this window and neither file changed since: the store
            # answers "nothing new" from its index without the lock, so the answer is
            # the window's own (the variant below changes the files first).
            assert result == {"ok": True, "status": "scheduled"}, result
        elif name != "memory":  # the memory files do not need the transcript's lock
            _check_failure(name, result, STORE_CODES)
    _check_failure("new_context", standalone, STORE_CODES)
    # Nothing was half-done: once the lock is free, the tools work again.
    assert s.run_tool("session_history", {"action": "list_windows"})["ok"]
    assert s.run_tool("new_context", {}) == {"ok": True, "status": "scheduled"}


def test_new_context_fails_closed_when_another_process_wrote_and_holds_the_lock(
    tmp_path: Path,
) -> None:
    """The lock-free "nothing new" answer is only for unchanged files: after another
    writer's row, the session's ``new_context`` must read it under the lock, and with the
    lock held past the wait bound it answers ``history_unavailable``."""
    ws = tmp_path / "ws"
    s = _session(History.open(ws, durability="none", lock_timeout=0.2))
    s.add_user("first")
    History.open(ws, durability="none").append(
        [{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "other"}]}]
    )
    with FileLock(str(ws / "history" / "lock")):
        result = s.run_tool("new_context", {})
    _check_failure("new_context", result, STORE_CODES)
    assert s.run_tool("new_context", {}) == {"ok": True, "status": "scheduled"}


def test_every_tool_answers_when_the_transcript_is_gone(tmp_path: Path) -> None:
    """The workspace's history directory removed under an open session (a damaged
    workspace): before, every ``run_tool`` raised ``HistoryIOError``."""
    ws = tmp_path / "ws"
    s = _session(History.open(ws, durability="none", lock_timeout=0.2))
    s.add_user("needle in the first window")
    shutil.rmtree(ws / "history")
    for name, args in CALLS:
        try:
            result: Any = s.run_tool(name, args)
        except Exception as exc:  # the defect: reported by the check below
            result = exc
        if name != "memory":  # the memory files are elsewhere in the workspace
            _check_failure(name, result, STORE_CODES)
        else:
            assert isinstance(result, dict), f"memory raised {result!r}"


def test_every_async_tool_call_answers_when_the_transcript_is_gone(tmp_path: Path) -> None:
    """The same through ``AsyncSession.run_tool`` (its store reads run on the I/O
    pool): a result, never an exception."""
    ws = tmp_path / "ws"

    async def main() -> dict[str, Any]:
        s = await AsyncSession.open(ws, model="gpt-4o", durability="none")
        await s.add_user("needle in the first window")
        shutil.rmtree(ws / "history")
        out: dict[str, Any] = {}
        for n, (name, args) in enumerate(CALLS):
            try:
                out[f"{n}:{name}"] = await s.run_tool(name, args)
            except Exception as exc:  # the defect: reported by the check below
                out[f"{n}:{name}"] = exc
        return out

    for key, result in asyncio.run(asyncio.wait_for(main(), 60)).items():
        name = key.split(":", 1)[1]
        if name != "memory":
            _check_failure(name, result, STORE_CODES)
        else:
            assert isinstance(result, dict), f"memory raised {result!r}"


@pytest.fixture
def own_cluster() -> Iterator[tuple[str, str]]:
    """A cluster of this test's own (it is stopped under the sessions): (URL, folder)."""
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


def test_every_tool_answers_while_the_database_is_down(own_cluster: tuple[str, str]) -> None:
    """The server goes away after the sessions opened: before, every ``run_tool`` raised
    ``DatabaseError`` once the store's reconnects ran out. Each call runs in its own
    session and thread (each waits out the store's reconnecting: 2 s here, 30 s by
    default), under a watchdog."""
    url, folder = own_cluster
    # A password in the URL (the throwaway server trusts local connections): no result
    # may show it.
    url = url.replace("@", f":{SECRET}@", 1)
    conversation = new_conversation_id("tools-down")
    sessions = [
        _session(Database.open(url, reconnect_for=2.0).history(conversation))
        for _ in range(len(CALLS))
    ]
    sessions[0].add_user("needle")
    subprocess.run([PG_CLUSTER, "crash", folder], check=True)
    results: dict[int, Any] = {}

    def call(n: int) -> None:
        name, args = CALLS[n]
        try:
            results[n] = sessions[n].run_tool(name, args)
        except BaseException as exc:  # the defect: recorded, reported below
            results[n] = exc

    try:
        threads = [threading.Thread(target=call, args=(n,), daemon=True) for n in range(len(CALLS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=180)
        assert len(results) == len(CALLS), "a tool call hung (watchdog)"
    finally:
        subprocess.run([PG_CLUSTER, "resume", folder], check=True)
    raised = {CALLS[n][0]: repr(r) for n, r in results.items() if isinstance(r, BaseException)}
    assert not raised, f"tool calls raised: {raised}"
    for n, result in results.items():
        _check_failure(CALLS[n][0], result, DB_CODES)
    assert sessions[0].run_tool("session_history", {"action": "search", "query": "needle"})["ok"], (
        "answers again once the server is back"
    )
