"""The memory tool under attack: hard links, FIFOs, directory renames into the session
scope, malformed arguments (issue: memory tool and inputs that cannot be turned against
the host). The concurrent swap race is in test_memory_race.py."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import MemoryTool

SECRET = "OUTSIDE-SECRET"
HANG_LIMIT_S = 60.0
"""A call still running after this long is blocked (a FIFO open, say): the test fails."""


def _call_with_watchdog(tool: MemoryTool, args: dict[str, Any]) -> dict[str, Any]:
    """Runs one call in a daemon thread so a blocked call fails the test, not hangs it."""
    box: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: box.append(tool.call(args)), daemon=True)
    worker.start()
    worker.join(HANG_LIMIT_S)
    assert not worker.is_alive(), f"{args['command']} blocked"
    return box[0]


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "secret.txt").write_text(SECRET)
    return out


@pytest.fixture
def tool(tmp_path: Path) -> MemoryTool:
    m = MemoryTool(tmp_path / "ws")
    assert m.call({"command": "create", "path": "/memories/session/cp.md", "file_text": "x"})["ok"]
    return m


# ----- FIFOs and hard links (item 3) ---------------------------------------------------


@pytest.mark.parametrize(
    "args",
    [
        {"command": "view", "path": "/memories/session/pipe"},
        {"command": "view", "path": "/memories/session/pipe", "view_range": [1, 2]},
        {"command": "str_replace", "path": "/memories/session/pipe", "old_str": "a"},
        {
            "command": "insert",
            "path": "/memories/session/pipe",
            "insert_line": 0,
            "insert_text": "a",
        },
    ],
    ids=lambda a: str(a["command"]) + ("+range" if "view_range" in a else ""),
)
def test_a_fifo_is_refused_without_blocking(tool: MemoryTool, args: dict[str, Any]) -> None:
    fifo = tool.root / "session" / "pipe"
    os.mkfifo(fifo)
    result = _call_with_watchdog(tool, args)
    assert result["ok"] is False
    assert result["code"] == "unsupported_file", result
    assert "regular file" in result["error"]
    assert fifo.exists(), "nothing is removed by a refused read"


def test_a_fifo_is_listed_as_nothing_and_can_be_deleted(tool: MemoryTool) -> None:
    os.mkfifo(tool.root / "session" / "pipe")
    listing = _call_with_watchdog(tool, {"command": "view", "path": "/memories/session"})
    assert listing["entries"] == ["/memories/session/cp.md (1 bytes)"]
    assert _call_with_watchdog(tool, {"command": "delete", "path": "/memories/session/pipe"})["ok"]
    assert not (tool.root / "session" / "pipe").exists()


@pytest.mark.parametrize(
    "args",
    [
        {"command": "view", "path": "/memories/session/linked.md"},
        {"command": "str_replace", "path": "/memories/session/linked.md", "old_str": "OUTSIDE"},
        {
            "command": "insert",
            "path": "/memories/session/linked.md",
            "insert_line": 0,
            "insert_text": "x",
        },
    ],
    ids=lambda a: str(a["command"]),
)
def test_a_hard_link_to_an_outside_file_is_not_read(
    tool: MemoryTool, outside: Path, args: dict[str, Any]
) -> None:
    os.link(outside / "secret.txt", tool.root / "session" / "linked.md")
    result = tool.call(args)
    assert result["ok"] is False
    assert result["code"] == "unsupported_file", result
    assert "hard links" in result["error"]
    assert SECRET not in json.dumps(result)
    assert (outside / "secret.txt").read_text() == SECRET
    listing = tool.call({"command": "view", "path": "/memories/session"})["entries"]
    assert "/memories/session/linked.md (not readable: 2 hard links)" in listing


def test_replacing_or_deleting_a_hard_link_leaves_the_outside_file(
    tool: MemoryTool, outside: Path
) -> None:
    link = tool.root / "session" / "linked.md"
    os.link(outside / "secret.txt", link)
    assert tool.call(
        {"command": "create", "path": "/memories/session/linked.md", "file_text": "y"}
    )["ok"]
    assert link.read_text() == "y"
    os.unlink(link)
    os.link(outside / "secret.txt", link)
    assert tool.call({"command": "delete", "path": "/memories/session/linked.md"})["ok"]
    assert (outside / "secret.txt").read_text() == SECRET
    assert os.stat(outside / "secret.txt").st_nlink == 1


def test_an_oversized_planted_file_is_not_read_whole(tool: MemoryTool) -> None:
    (tool.root / "huge.md").write_bytes(b"a" * (256 * 1024 + 1))
    result = tool.call({"command": "view", "path": "/memories/huge.md"})
    assert result["code"] == "too_large"


# ----- directory renames into the session scope (item 2) ------------------------------


def test_renaming_a_directory_cannot_bring_a_big_file_into_the_session_scope(
    tool: MemoryTool,
) -> None:
    big = "x" * 100_000
    assert tool.call({"command": "create", "path": "/memories/d/big.md", "file_text": big})["ok"]
    result = tool.call(
        {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/session/d"}
    )
    assert result["ok"] is False
    assert result["code"] == "too_large"
    assert "/memories/d/big.md" in result["error"]
    assert (tool.root / "d" / "big.md").read_text() == big, "left where it was"
    assert not (tool.root / "session" / "d").exists()


def test_the_check_covers_nested_directories_and_a_new_session_scope(tmp_path: Path) -> None:
    m = MemoryTool(tmp_path)
    assert m.call({"command": "create", "path": "/memories/d/e/f/big.md", "file_text": "y" * 9000})[
        "ok"
    ]
    for new in ("/memories/session/d", "/memories/session"):
        result = m.call({"command": "rename", "old_path": "/memories/d", "new_path": new})
        assert result["code"] == "too_large", (new, result)
        assert "/memories/d/e/f/big.md" in result["error"]


def test_a_directory_of_small_files_moves_into_the_session_scope(tool: MemoryTool) -> None:
    for name in ("a.md", "sub/b.md"):
        path = f"/memories/d/{name}"
        assert tool.call({"command": "create", "path": path, "file_text": "z" * 8192})["ok"]
    result = tool.call(
        {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/session/d"}
    )
    assert result == {"ok": True, "path": "/memories/session/d", "status": "renamed"}
    assert (tool.root / "session" / "d" / "sub" / "b.md").stat().st_size == 8192


def test_a_big_file_planted_in_the_session_scope_cannot_be_moved_within_it(
    tool: MemoryTool,
) -> None:
    (tool.root / "session" / "planted.md").write_bytes(b"p" * 9000)
    result = tool.call(
        {
            "command": "rename",
            "old_path": "/memories/session/planted.md",
            "new_path": "/memories/session/cp2.md",
        }
    )
    assert result["code"] == "too_large"
    assert tool.call(
        {
            "command": "rename",
            "old_path": "/memories/session/planted.md",
            "new_path": "/memories/p.md",
        }
    )["ok"], "moving it out of the session scope is fine"


def test_rename_does_not_replace_and_not_into_itself(tool: MemoryTool) -> None:
    assert tool.call({"command": "create", "path": "/memories/a.md", "file_text": "a"})["ok"]
    taken = tool.call(
        {"command": "rename", "old_path": "/memories/a.md", "new_path": "/memories/session/cp.md"}
    )
    assert taken["code"] == "exists"
    assert (tool.root / "session" / "cp.md").read_text() == "x"
    assert tool.call({"command": "create", "path": "/memories/d/x.md", "file_text": "a"})["ok"]
    inside = tool.call(
        {"command": "rename", "old_path": "/memories/d", "new_path": "/memories/d/e"}
    )
    assert inside["code"] == "invalid_path"


# ----- arguments that are not a plain JSON object (item 4) -----------------------------


@pytest.mark.parametrize(
    "args",
    [
        {1: 2, "a": 3},
        {1: 2},
        {None: "view"},
        {("command",): "view"},
        {"command": "view", 2.5: 1},
        {b"command": "view"},
    ],
    ids=repr,
)
def test_non_string_argument_names_are_a_result(args: Any) -> None:
    result = MemoryTool("/nonexistent-workspace").call(args)
    assert result["ok"] is False
    assert result["code"] == "invalid_arguments"
    json.dumps(result, ensure_ascii=False).encode("utf-8")


def test_deeply_nested_json_arguments_are_a_result() -> None:
    text = "[" * 100_000 + "]" * 100_000
    result = MemoryTool("/nonexistent-workspace").call(text)
    assert result["code"] == "invalid_arguments"


def test_text_with_a_lone_surrogate_is_refused(tmp_path: Path) -> None:
    m = MemoryTool(tmp_path)
    result = m.call({"command": "create", "path": "/memories/a.md", "file_text": "a\ud800b"})
    assert result["code"] == "invalid_arguments"
    assert not (tmp_path / "memories" / "a.md").exists()


def test_temporary_file_names_are_reserved(tmp_path: Path) -> None:
    m = MemoryTool(tmp_path)
    result = m.call(
        {"command": "create", "path": "/memories/.tmp-ctxbudget-0123abcd", "file_text": "a"}
    )
    assert result["code"] == "invalid_path"
