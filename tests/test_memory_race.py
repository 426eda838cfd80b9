"""The memory tool against a concurrent attacker on the same machine.

Attacker threads keep flipping every directory on the way to the files — the memories
root, the session scope and the directories below — between the real directory and a
symlink to an outside tree that mirrors it, and keep swapping the files for hard links
to outside files, FIFOs and symlinks. Meanwhile worker threads run every memory command
a fixed number of times. Nothing outside may be read, written, moved or deleted, and no
call may block (a watchdog fails the test instead of hanging it).

The attackers act through directory descriptors themselves, so the test's own swaps
never touch the outside tree through a flipped symlink.
"""

from __future__ import annotations

import json
import os
import random
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ctxbudget import MemoryTool

SECRET = "OUTSIDE-SECRET"
OUTSIDE_ONLY = "outside-only.md"
ITERATIONS = int(os.environ.get("CTXBUDGET_RACE_ITERATIONS", "150"))
"""Rounds per worker thread (each round runs every command)."""
WORKERS = 3
WATCHDOG_S = 600.0
"""Workers still running this long after the start are blocked; the test fails."""

DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW
# Directories flipped, as paths below the workspace.
FLIPPED = ["memories", "memories/session", "memories/session/d", "memories/n"]
# Files swapped for hard links, FIFOs and symlinks.
SWAPPED = ["memories/session/d/f.md", "memories/n/f.md", "memories/session/cp.md"]


def _mirror(outside: Path) -> None:
    """An outside tree shaped like the memories, so a followed symlink finds a target."""
    for rel in ("", "session", "session/d", "n", "d"):
        (outside / rel).mkdir(parents=True, exist_ok=True)
        for name in ("f.md", "cp.md", "g.md", OUTSIDE_ONLY):
            (outside / rel / name).write_text(f"{SECRET} in {rel or '.'}/{name}")


def _snapshot(root: Path) -> dict[str, bytes | None]:
    out: dict[str, bytes | None] = {}
    for dirpath, dirs, files in os.walk(root):
        for d in dirs:
            out[str((Path(dirpath) / d).relative_to(root)) + "/"] = None
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes() if p.is_file() else b"<special>"
    return out


def _open_parent(ws: Path, rel: str) -> tuple[int, str] | None:
    """The parent directory of ``rel`` opened without following symlinks, or None."""
    *dirs, name = rel.split("/")
    fd = os.open(ws, DIR_FLAGS)
    try:
        for part in dirs:
            child = os.open(part, DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = child
    except OSError:
        os.close(fd)
        return None
    return fd, name


def _attack(
    stop: threading.Event, ws: Path, outside: Path, rel: str, step: Callable[..., None]
) -> None:
    rng = random.Random(rel)
    while not stop.is_set():
        opened = _open_parent(ws, rel)
        if opened is None:
            time.sleep(0.0005)
            continue
        fd, name = opened
        try:
            step(fd, name, outside, rng)
        except OSError:
            pass  # the tree changed under us (another attacker, or a command)
        finally:
            os.close(fd)


def _flip_dir(fd: int, name: str, outside: Path, rng: random.Random) -> None:
    aside = f".aside-{name}"
    os.rename(name, aside, src_dir_fd=fd, dst_dir_fd=fd)
    try:
        os.symlink(outside, name, dir_fd=fd)
        os.sched_yield()
        os.unlink(name, dir_fd=fd)
    finally:
        os.rename(aside, name, src_dir_fd=fd, dst_dir_fd=fd)
    time.sleep(0.0005)  # leave the real directory in place for a while too


def _swap_file(fd: int, name: str, outside: Path, rng: random.Random) -> None:
    tmp = f".swap-{name}"
    kind = rng.choice(["hardlink", "fifo", "symlink", "regular"])
    if kind == "hardlink":
        os.link(outside / "f.md", tmp, dst_dir_fd=fd)
    elif kind == "fifo":
        os.mkfifo(tmp, dir_fd=fd)
    elif kind == "symlink":
        os.symlink(outside / "f.md", tmp, dir_fd=fd)
    else:
        wfd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600, dir_fd=fd)
        os.write(wfd, b"inside")
        os.close(wfd)
    try:
        os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
    except OSError:
        os.unlink(tmp, dir_fd=fd)
        raise


def _rounds(tool: MemoryTool, results: list[dict[str, Any]]) -> None:
    files = ["/memories/session/d/f.md", "/memories/n/f.md", "/memories/session/cp.md"]
    for i in range(ITERATIONS):
        f = files[i % len(files)]
        for args in (
            {"command": "view", "path": f},
            {"command": "view", "path": f, "view_range": [1, -1]},
            {"command": "view", "path": "/memories/session/d"},
            {"command": "view", "path": "/memories/n"},
            {"command": "view", "path": "/memories"},
            {"command": "str_replace", "path": f, "old_str": "SECRET", "new_str": "stolen"},
            {"command": "str_replace", "path": f, "old_str": "inside", "new_str": "inside"},
            {"command": "insert", "path": f, "insert_line": 0, "insert_text": "note"},
            {"command": "create", "path": f"/memories/session/d/new{i % 4}.md", "file_text": "n"},
            {"command": "create", "path": "/memories/n/g.md", "file_text": "n"},
            {"command": "create", "path": f, "file_text": "inside"},
            {"command": "rename", "old_path": f, "new_path": "/memories/n/moved.md"},
            {"command": "rename", "old_path": "/memories/n/moved.md", "new_path": f},
            {
                "command": "rename",
                "old_path": "/memories/session/d/g.md",
                "new_path": "/memories/g.md",
            },
            {
                "command": "rename",
                "old_path": f"/memories/n/{OUTSIDE_ONLY}",
                "new_path": "/memories/x.md",
            },
            {"command": "rename", "old_path": "/memories/n", "new_path": "/memories/session/n2"},
            {"command": "rename", "old_path": "/memories/session/n2", "new_path": "/memories/n"},
            {"command": "delete", "path": f"/memories/session/d/{OUTSIDE_ONLY}"},
            {"command": "delete", "path": "/memories/session/d/g.md"},
            {"command": "delete", "path": f"/memories/session/d/new{(i + 2) % 4}.md"},
        ):
            results.append(tool.call(args))


def test_swapping_directories_and_files_never_leads_outside(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    _mirror(outside)
    ws = tmp_path / "ws"
    tool = MemoryTool(ws)
    for f in ("session/d/f.md", "n/f.md", "session/cp.md"):
        assert tool.call({"command": "create", "path": f"/memories/{f}", "file_text": "inside"})[
            "ok"
        ]
    before = _snapshot(outside)
    before_inodes = {p: os.stat(outside / p).st_ino for p in before if not p.endswith("/")}

    stop = threading.Event()
    attackers = [
        threading.Thread(target=_attack, args=(stop, ws, outside, rel, _flip_dir), daemon=True)
        for rel in FLIPPED
    ] + [
        threading.Thread(target=_attack, args=(stop, ws, outside, rel, _swap_file), daemon=True)
        for rel in SWAPPED
    ]
    per_worker: list[list[dict[str, Any]]] = [[] for _ in range(WORKERS)]
    workers = [
        threading.Thread(target=_rounds, args=(tool, results), daemon=True)
        for results in per_worker
    ]
    deadline = time.monotonic() + WATCHDOG_S
    for t in attackers + workers:
        t.start()
    for t in workers:
        t.join(max(0.0, deadline - time.monotonic()))
    blocked = [t for t in workers if t.is_alive()]
    stop.set()
    for t in attackers:
        t.join(60)
    assert not blocked, "a memory command blocked"

    results = [r for rs in per_worker for r in rs]
    assert len(results) == WORKERS * ITERATIONS * 20
    # Paths in error messages echo the request; what was read is content and entries.
    leaked = [
        r
        for r in results
        if SECRET in json.dumps(r)
        or OUTSIDE_ONLY in json.dumps([r.get("content"), r.get("entries")])
    ]
    assert leaked == [], f"{len(leaked)} results showed outside content: {leaked[:3]}"
    assert all(isinstance(r.get("ok"), bool) for r in results)
    assert _snapshot(outside) == before, "the outside tree changed"
    assert {p: os.stat(outside / p).st_ino for p in before_inodes} == before_inodes
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside", "ws"]
    # The attack really ran: some calls met a symlink or a special file, some succeeded.
    codes = {r.get("code") for r in results if not r["ok"]}
    assert codes & {"invalid_path", "unsupported_file"}, codes
    assert any(r["ok"] for r in results)
