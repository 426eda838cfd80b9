"""The memory tool gives the same results over every store: a workspace's
``memories/``, a PostgreSQL conversation's memory files and an in-memory store's (same
commands, results, error codes, limits and confinement; one command layer).

A directory of the database exists while a file lies under it; a directory on disk
stays after its last file is deleted or moved. The differential test removes empty
directories from the workspace before each command, so both stores hold the same tree
and every result must match."""

from __future__ import annotations

import os
import uuid
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from memory_stores import STORES, memory_target, new_conversation

from ctxbudget import DatabaseError, History, MemoryTool, Session
from ctxbudget.tools.memory import CHECKPOINT_MAX

FILE_MAX = 256 * 1024  # the contract's number (SPEC §8), written out on purpose


def _prune_empty_dirs(memories: Path) -> None:
    """Removes every empty directory below ``memories`` (deepest first, so a directory
    whose only children were empty directories goes too)."""
    for dirpath, _, _ in os.walk(memories, topdown=False):
        if Path(dirpath) != memories and not any(Path(dirpath).iterdir()):
            os.rmdir(dirpath)


def _outcome(result: dict[str, Any]) -> dict[str, Any]:
    """What must be equal: the whole result when it succeeded, else its code."""
    return result if result["ok"] else {"ok": False, "code": result["code"]}


names = st.sampled_from(["a.md", "b", "session", "d", "日本.md", "%_x", "a.md.bak"])
paths = st.one_of(
    st.lists(names, max_size=3).map(lambda p: "/memories/" + "/".join(p)),
    st.sampled_from(["/memories", "/memories/", "/etc/x", "/memories/../x", "/memories//a.md"]),
)
texts = st.one_of(
    st.text(alphabet="ab\n x", max_size=12),
    st.sampled_from(["x" * CHECKPOINT_MAX, "y" * (CHECKPOINT_MAX + 1)]),
)
commands = st.one_of(
    st.fixed_dictionaries({"command": st.just("create"), "path": paths, "file_text": texts}),
    st.fixed_dictionaries(
        {"command": st.just("view"), "path": paths},
        optional={"view_range": st.sampled_from([[1, 1], [2, -1], [0, 9]])},
    ),
    st.fixed_dictionaries(
        {
            "command": st.just("str_replace"),
            "path": paths,
            "old_str": st.sampled_from(["a", "b", "x", "\n", ""]),
            "new_str": st.text(alphabet="ab\n", max_size=4),
        }
    ),
    st.fixed_dictionaries(
        {
            "command": st.just("insert"),
            "path": paths,
            "insert_line": st.integers(-1, 3),
            "insert_text": st.text(alphabet="ab\n", max_size=4),
        }
    ),
    st.fixed_dictionaries({"command": st.just("delete"), "path": paths}),
    st.fixed_dictionaries({"command": st.just("rename"), "old_path": paths, "new_path": paths}),
)


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls=st.lists(commands, min_size=1, max_size=12), read_only=st.booleans())
@pytest.mark.parametrize("other", ["postgresql", "memory"])
def test_both_stores_give_the_same_results(
    other: str,
    request: pytest.FixtureRequest,
    tmp_path_factory: pytest.TempPathFactory,
    calls: list[dict[str, Any]],
    read_only: bool,
) -> None:
    """The workspace's files against each store that keeps no files."""
    ws = tmp_path_factory.mktemp("ws")
    disk = MemoryTool(ws, read_only=read_only)
    db = MemoryTool(memory_target(other, ws, request), read_only=read_only)
    for args in calls:
        _prune_empty_dirs(ws / "memories")
        on_disk, in_db = disk.call(args), db.call(args)
        assert _outcome(in_db) == _outcome(on_disk), args
    _prune_empty_dirs(ws / "memories")
    listing = {"command": "view", "path": "/memories"}
    assert db.call(listing) == disk.call(listing)


@pytest.mark.parametrize("store", STORES)
def test_limits_are_the_same(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> None:
    target = memory_target(store, tmp_path, request)
    m = MemoryTool(target)

    def create(path: str, size: int) -> dict[str, Any]:
        return m.call({"command": "create", "path": path, "file_text": "x" * size})

    assert create("/memories/big.md", FILE_MAX)["ok"]
    assert create("/memories/huge.md", FILE_MAX + 1)["code"] == "too_large"
    assert create("/memories/session/cp.md", CHECKPOINT_MAX)["ok"]
    assert create("/memories/session/cp2.md", CHECKPOINT_MAX + 1)["code"] == "too_large"
    # An edit that would grow a checkpoint past the limit is refused and changes nothing.
    grow = {"command": "insert", "path": "/memories/session/cp.md", "insert_line": 0}
    assert m.call({**grow, "insert_text": "y"})["code"] == "too_large"
    # Nothing over the checkpoint limit moves into the session scope: a file or a
    # directory holding one.
    assert create("/memories/d/small.md", 10)["ok"]
    assert create("/memories/d/big.md", CHECKPOINT_MAX + 1)["ok"]
    move = {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/session/d"}
    assert m.call(move)["code"] == "too_large"
    move = {"command": "rename", "old_path": "/memories/big.md", "new_path": "/memories/session/b"}
    assert m.call(move)["code"] == "too_large"
    listing = m.call({"command": "view", "path": "/memories/session"})
    assert listing["entries"] == [f"/memories/session/cp.md ({CHECKPOINT_MAX} bytes)"]


def test_database_memory_has_no_file_system_path(pg_url: str, tmp_path: Path) -> None:
    """A conversation's memory files are rows: the tool names no directory, and no
    command creates anything in the current directory or anywhere else."""
    history = new_conversation(pg_url)
    m = MemoryTool(history)
    assert m.root is None and "postgresql conversation" in m.location
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        for args in (
            {"command": "create", "path": "/memories/a.md", "file_text": "x"},
            {"command": "create", "path": "/memories/session/cp.md", "file_text": "y"},
            {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/b/a.md"},
            {"command": "create", "path": "/memories/../../etc/x", "file_text": "x"},
        ):
            m.call(args)
    finally:
        os.chdir(cwd)
    assert list(tmp_path.iterdir()) == []


def test_conversations_do_not_share_memory_files(pg_url: str) -> None:
    a, b = new_conversation(pg_url), new_conversation(pg_url)
    MemoryTool(a).call({"command": "create", "path": "/memories/a.md", "file_text": "mine"})
    assert MemoryTool(b).call({"command": "view", "path": "/memories/a.md"})["code"] == (
        "not_found"
    )
    assert MemoryTool(b).call({"command": "view"})["entries"] == []


def test_another_host_reads_the_files_a_session_wrote(pg_url: str) -> None:
    """Two `Session`s on one conversation (as two hosts would open it) share the files."""
    conversation = f"mem-hosts-{uuid.uuid4().hex}"
    first = Session.open(pg_url, conversation=conversation, model="gpt-4o")
    wrote = first.run_tool(
        "memory", {"command": "create", "path": "/memories/session/cp.md", "file_text": "goal"}
    )
    assert wrote["ok"], wrote
    second = Session.open(pg_url, conversation=conversation, model="gpt-4o")
    seen = second.run_tool("memory", {"command": "view", "path": "/memories/session/cp.md"})
    assert seen == {"ok": True, "path": "/memories/session/cp.md", "content": "     1\tgoal"}


def test_a_database_failure_is_a_result(pg_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken connection is an ``io_error`` result naming it, never an exception."""
    m = MemoryTool(new_conversation(pg_url))
    store = m._store

    class Broken:
        def __getattr__(self, name: str) -> Any:
            def fail(*args: Any) -> Any:
                err = DatabaseError("PostgreSQL connection failed (connection closed)")
                err.transient = True
                raise err

            return fail

    monkeypatch.setattr(store, "_files", Broken())
    for args in (
        {"command": "view"},
        {"command": "create", "path": "/memories/a.md", "file_text": "x"},
        {"command": "str_replace", "path": "/memories/a.md", "old_str": "x", "new_str": "y"},
        {"command": "delete", "path": "/memories/a.md"},
    ):
        result = m.call(args)
        assert result["code"] == "io_error", result
        assert "connection closed" in result["error"] and "Try again" in result["error"]


@pytest.mark.parametrize("store", STORES)
def test_a_path_under_a_file_is_not_a_directory(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Both stores answer ``not_a_directory`` for a path that goes through a file (the
    file store said ``invalid_path`` before, as for a symlink)."""
    target = memory_target(store, tmp_path, request)
    m = MemoryTool(target)
    assert m.call({"command": "create", "path": "/memories/a.md", "file_text": "x"})["ok"]
    assert m.call({"command": "create", "path": "/memories/c.md", "file_text": "x"})["ok"]
    for args in (
        {"command": "create", "path": "/memories/a.md/b.md", "file_text": "x"},
        {"command": "view", "path": "/memories/a.md/b.md"},
        {"command": "delete", "path": "/memories/a.md/b.md"},
        {"command": "str_replace", "path": "/memories/a.md/b", "old_str": "x", "new_str": "y"},
        {"command": "rename", "old_path": "/memories/a.md/b", "new_path": "/memories/c.md"},
        {"command": "rename", "old_path": "/memories/c.md", "new_path": "/memories/a.md/c.md"},
    ):
        result = m.call(args)
        assert result["code"] == "not_a_directory", (args, result)


def test_concurrent_edits_of_one_file_lose_nothing(pg_url: str) -> None:
    """Edits from many hosts (here: threads with their own tools) serialise on the
    conversation's row lock: each reads the file as the previous edit left it."""
    import threading

    history = new_conversation(pg_url)
    path = "/memories/session/log.md"
    assert MemoryTool(history).call({"command": "create", "path": path, "file_text": "log"})["ok"]
    barrier = threading.Barrier(4)
    failures: list[dict[str, Any]] = []

    def edit(worker: int) -> None:
        tool = MemoryTool(History.open(pg_url, conversation=history.conversation))
        barrier.wait()
        for n in range(15):
            line = {"command": "insert", "path": path, "insert_line": 1}
            result = tool.call({**line, "insert_text": f"w{worker}-{n}"})
            if not result["ok"]:
                failures.append(result)

    threads = [threading.Thread(target=edit, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures
    lines = MemoryTool(history).call({"command": "view", "path": path})["content"].split("\n")
    written = sorted(line.split("\t", 1)[1] for line in lines[1:])
    assert written == sorted(f"w{w}-{n}" for w in range(4) for n in range(15))


@pytest.mark.parametrize("store", STORES)
def test_refusals_come_in_one_order_on_both_stores(
    store: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    """Where a command breaks more than one rule, both stores name the same one first:
    for a rename, ``not_found``, ``too_large``, ``invalid_path`` (a path grown past the
    limit), ``not_a_directory``, ``exists``. No database refusal leaks out as an
    ``io_error`` carrying an SQL message."""
    target = memory_target(store, tmp_path, request)
    m = MemoryTool(target)
    long = "n" * 255
    for args in (
        {"command": "create", "path": "/memories/big.md", "file_text": "x" * (CHECKPOINT_MAX + 1)},
        {"command": "create", "path": "/memories/session/taken.md", "file_text": "t"},
        {"command": "create", "path": "/memories/file.md", "file_text": "f"},
        {"command": "create", "path": f"/memories/d/{long}/{long}/{long}/x", "file_text": "x"},
    ):
        assert m.call(args)["ok"], args
    expected = [
        # Too large for the session scope, onto a path that exists: too_large first.
        ("/memories/big.md", "/memories/session/taken.md", "too_large"),
        # A directory whose files' paths would grow past 1,024 bytes.
        ("/memories/d", f"/memories/{long}", "invalid_path"),
        ("/memories/d", f"/memories/file.md/{long}", "invalid_path"),
        # Onto a path under a file that also exists as a file: not_a_directory first.
        ("/memories/session/taken.md", "/memories/file.md/x", "not_a_directory"),
        ("/memories/session/taken.md", "/memories/file.md", "exists"),
        ("/memories/missing.md", "/memories/session/taken.md", "not_found"),
    ]
    for old, new, code in expected:
        result = m.call({"command": "rename", "old_path": old, "new_path": new})
        assert result.get("code") == code, (old, new, result)
        assert "SQLSTATE" not in result.get("error", ""), result
    # Nothing moved.
    listing = m.call({"command": "view", "path": "/memories"})["entries"]
    assert sorted(listing) == sorted(
        [
            f"/memories/big.md ({CHECKPOINT_MAX + 1} bytes)",
            "/memories/d/",
            "/memories/file.md (1 bytes)",
            "/memories/session/",
        ]
    ), listing


def test_a_directory_lists_in_name_order_on_both_stores(pg_url: str, tmp_path: Path) -> None:
    """`a.md.bak` and the directory `a.md/` list in the same order on both stores (the
    database's collation does not decide it); a directory shows once."""
    stores = [MemoryTool(tmp_path), MemoryTool(new_conversation(pg_url))]
    for m in stores:
        for path in ("/memories/a.md/x.md", "/memories/a.md.bak", "/memories/a.md/y.md"):
            assert m.call({"command": "create", "path": path, "file_text": "x"})["ok"]
    listing = {"command": "view", "path": "/memories"}
    disk, db = (m.call(listing) for m in stores)
    assert db == disk
    assert disk["entries"] == ["/memories/a.md/", "/memories/a.md.bak (1 bytes)"]
