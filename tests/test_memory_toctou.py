"""The gaps between checking a path and using it, hit deterministically: the test swaps a
file or a directory at the exact moment between the tool's steps (the race test hits
them by chance). Whatever is swapped in, nothing outside is read, written or moved."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import MemoryTool, _confined
from ctxbudget.tools import _memory_disk

SECRET = "OUTSIDE-SECRET"


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    out = tmp_path / "outside"
    out.mkdir()
    (out / "f.md").write_text(SECRET)
    return out


@pytest.fixture
def tool(tmp_path: Path) -> MemoryTool:
    m = MemoryTool(tmp_path / "ws")
    assert m.call({"command": "create", "path": "/memories/d/f.md", "file_text": "inside"})["ok"]
    return m


def _after_lstat(
    monkeypatch: pytest.MonkeyPatch, name: str, swap: Callable[[], None]
) -> list[bool]:
    """Runs ``swap`` once, right after the tool looked at ``name`` and before it opens it."""
    real = _confined.lstat_at
    done: list[bool] = []

    def lstat_then_swap(parent: int, entry: str, shown: str) -> os.stat_result:
        st = real(parent, entry, shown)
        if entry == name and not done:
            done.append(True)
            swap()
        return st

    monkeypatch.setattr(_confined, "lstat_at", lstat_then_swap)
    return done


def _after_walk(monkeypatch: pytest.MonkeyPatch, swap: Callable[[], None]) -> list[bool]:
    """Runs ``swap`` once, right after the tool opened the directory holding its target."""
    real = _memory_disk.walk
    done: list[bool] = []

    def walk_then_swap(root: int, parts: list[str], **kwargs: Any) -> int:
        fd = real(root, parts, **kwargs)
        if parts and not done:
            done.append(True)
            swap()
        return fd

    monkeypatch.setattr(_memory_disk, "walk", walk_then_swap)
    return done


def _replace_with(path: Path, make: Callable[[Path], None]) -> Callable[[], None]:
    def swap() -> None:
        aside = path.with_name(path.name + ".aside")
        os.rename(path, aside)
        make(path)

    return swap


@pytest.mark.parametrize(
    "make",
    [
        lambda p, out: os.symlink(out / "f.md", p),
        lambda p, out: os.link(out / "f.md", p),
        lambda p, out: os.mkfifo(p),
    ],
    ids=["symlink", "hardlink", "fifo"],
)
@pytest.mark.parametrize("command", ["view", "str_replace", "insert"])
def test_a_file_swapped_after_it_was_checked_is_not_read(
    tool: MemoryTool,
    outside: Path,
    monkeypatch: pytest.MonkeyPatch,
    make: Callable[[Path, Path], None],
    command: str,
) -> None:
    target = tool.root / "d" / "f.md"
    done = _after_lstat(monkeypatch, "f.md", _replace_with(target, lambda p: make(p, outside)))
    args: dict[str, Any] = {"command": command, "path": "/memories/d/f.md"}
    args.update(
        {"old_str": "OUTSIDE", "new_str": "x"}
        if command == "str_replace"
        else {"insert_line": 0, "insert_text": "x"}
        if command == "insert"
        else {}
    )
    box: list[dict[str, Any]] = []
    worker = threading.Thread(target=lambda: box.append(tool.call(args)), daemon=True)
    worker.start()
    worker.join(60)
    assert not worker.is_alive(), "the call blocked"
    assert done, "the swap happened"
    result = box[0]
    assert result["ok"] is False
    assert result["code"] in {"invalid_path", "unsupported_file"}, result
    assert SECRET not in json.dumps(result)
    assert (outside / "f.md").read_text() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["f.md"]


def _flip_to_outside(directory: Path, outside: Path) -> Callable[[], None]:
    def swap() -> None:
        os.rename(directory, directory.with_name(directory.name + ".aside"))
        os.symlink(outside, directory)

    return swap


def test_a_directory_swapped_after_it_was_opened_keeps_a_create_inside(
    tool: MemoryTool, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = _after_walk(monkeypatch, _flip_to_outside(tool.root / "d", outside))
    result = tool.call({"command": "create", "path": "/memories/d/f.md", "file_text": "new"})
    assert done and result["ok"], result
    assert (tool.root / "d.aside" / "f.md").read_text() == "new", "written where it was opened"
    assert (outside / "f.md").read_text() == SECRET
    assert sorted(p.name for p in outside.iterdir()) == ["f.md"]


def test_a_directory_swapped_after_it_was_opened_keeps_a_rename_inside(
    tool: MemoryTool, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = _after_walk(monkeypatch, _flip_to_outside(tool.root / "d", outside))
    result = tool.call(
        {"command": "rename", "old_path": "/memories/d/f.md", "new_path": "/memories/moved.md"}
    )
    assert done and result["ok"], result
    assert (tool.root / "moved.md").read_text() == "inside", "the inside file moved"
    assert (outside / "f.md").read_text() == SECRET, "the outside file stayed"


def test_a_directory_swapped_after_it_was_opened_keeps_a_delete_inside(
    tool: MemoryTool, outside: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    done = _after_walk(monkeypatch, _flip_to_outside(tool.root / "d", outside))
    result = tool.call({"command": "delete", "path": "/memories/d/f.md"})
    assert done and result["ok"], result
    assert not (tool.root / "d.aside" / "f.md").exists()
    assert (outside / "f.md").read_text() == SECRET
