"""The memory tool (SPEC §8): commands, limits, confinement of paths."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from memory_stores import MakeTool, make_memory, stored_text

from ctxbudget import MemoryTool

__all__ = ["make_memory"]  # the fixture, imported for pytest


def test_memory_commands(make_memory: MakeTool) -> None:
    m = make_memory(session_scope=True)
    ok = m.call(
        {
            "command": "create",
            "path": "/memories/session/checkpoint.md",
            "file_text": "goal: fix export\nnext: deploy",
        }
    )
    assert ok == {"ok": True, "path": "/memories/session/checkpoint.md", "status": "written"}
    view = m.call({"command": "view", "path": "/memories/session/checkpoint.md"})
    assert view["content"] == "     1\tgoal: fix export\n     2\tnext: deploy"
    assert m.call(
        {
            "command": "str_replace",
            "path": "/memories/session/checkpoint.md",
            "old_str": "deploy",
            "new_str": "ship",
        }
    )["ok"]
    assert m.call(
        {
            "command": "insert",
            "path": "/memories/session/checkpoint.md",
            "insert_line": 1,
            "insert_text": "decision: idempotency keys",
        }
    )["ok"]
    text = stored_text(m, "/memories/session/checkpoint.md")
    assert text == "goal: fix export\ndecision: idempotency keys\nnext: ship"
    listing = m.call({"command": "view", "path": "/memories"})
    assert listing["entries"] == ["/memories/session/"]
    assert m.call(
        {
            "command": "rename",
            "old_path": "/memories/session/checkpoint.md",
            "new_path": "/memories/session/cp.md",
        }
    )["ok"]
    assert m.call({"command": "delete", "path": "/memories/session/cp.md"})["ok"]
    assert m.call({"command": "view", "path": "/memories/session/cp.md"})["code"] == "not_found"


def test_checkpoint_limit_and_read_only_agents(make_memory: MakeTool) -> None:
    m = make_memory(session_scope=True, read_only=True)
    big = m.call({"command": "create", "path": "/memories/session/cp.md", "file_text": "x" * 8193})
    assert big["code"] == "too_large"
    assert m.call(
        {"command": "create", "path": "/memories/session/cp.md", "file_text": "x" * 8192}
    )["ok"]
    denied = m.call({"command": "create", "path": "/memories/notes.md", "file_text": "x"})
    assert denied["code"] == "not_allowed"


def test_session_scope_exists_only_in_token_budget_mode(make_memory: MakeTool) -> None:
    make_memory().call(
        {"command": "create", "path": "/memories/session/cp.md", "file_text": "saved"}
    )
    off = make_memory(session_scope=False)
    assert off.call({"command": "view", "path": "/memories/session/cp.md"})["code"] == (
        "not_available"
    )
    assert off.call({"command": "view", "path": "/memories"})["entries"] == []
    assert stored_text(make_memory(), "/memories/session/cp.md") == "saved", "kept"


@pytest.mark.parametrize(
    "path",
    [
        "/memories/../secret",
        "/etc/passwd",
        "memories/x",
        "/memories/a\x00b",
        "/memoriesX/a",
        "/memories/a\\..\\b",
        "/memories/" + "n" * 256,
        "/memories/./x",
        42,
        None,
    ],
)
def test_paths_are_confined(make_memory: MakeTool, path: object) -> None:
    r = make_memory().call({"command": "create", "path": path, "file_text": "x"})
    assert r["ok"] is False and r["code"] in {"invalid_path", "invalid_arguments"}


def test_symlinks_are_refused(tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "target.txt").write_text("keep")
    ws = tmp_path / "ws"
    m = MemoryTool(ws)
    m.call({"command": "create", "path": "/memories/session/a.md", "file_text": "x"})
    os.symlink(outside, ws / "memories" / "link")
    os.symlink(outside / "target.txt", ws / "memories" / "session" / "t.md")
    for args in (
        {"command": "create", "path": "/memories/link/new.md", "file_text": "x"},
        {"command": "view", "path": "/memories/link/target.txt"},
        {
            "command": "str_replace",
            "path": "/memories/session/t.md",
            "old_str": "keep",
            "new_str": "gone",
        },
        {"command": "delete", "path": "/memories/link"},
    ):
        assert m.call(args)["ok"] is False, args
    assert (outside / "target.txt").read_text() == "keep"
    assert list(outside.iterdir()) == [outside / "target.txt"]


segments = st.one_of(
    st.sampled_from(
        ["..", ".", "", "session", "link", "a.md", "日本", "x\x00y", "trap", "n" * 300]
    ),
    st.text(min_size=1, max_size=12),
)
paths = st.one_of(
    st.sampled_from(
        [
            "/memories/link/trap",
            "/memories/session/trap",
            "/memories/link",
            "/memories/link/new.md",
            "/memories/../outside/trap",
            "/memories/session/../../outside",
        ]
    ),
    st.lists(segments, max_size=5).map(lambda s: "/memories/" + "/".join(s)),
    st.lists(segments, max_size=4).map(lambda s: "/" + "/".join(s)),
    st.text(max_size=30),
)
commands = st.fixed_dictionaries(
    {"command": st.sampled_from(["view", "create", "str_replace", "insert", "delete", "rename"])},
    optional={
        "path": paths,
        "old_path": paths,
        "new_path": paths,
        "file_text": st.text(max_size=40),
        "old_str": st.sampled_from(["OUTSIDE-SECRET", "x", ""]),
        "new_str": st.text(max_size=5),
        "insert_line": st.integers(-2, 5),
        "insert_text": st.text(max_size=5),
    },
)


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p.relative_to(root))] = p.read_bytes()
    return out


@settings(max_examples=200, deadline=None)
@given(calls=st.lists(commands, min_size=1, max_size=12))
def test_generated_paths_never_touch_anything_outside_memories(calls: list[dict[str, Any]]) -> None:
    base = Path(tempfile.mkdtemp(prefix="ctxb-mem-"))
    try:
        outside = base / "outside"
        outside.mkdir()
        (outside / "trap").write_text("OUTSIDE-SECRET")
        ws = base / "ws"
        (ws / "memories" / "session").mkdir(parents=True)
        (ws / "sibling.txt").write_text("keep")
        os.symlink(outside, ws / "memories" / "link")
        os.symlink(outside / "trap", ws / "memories" / "session" / "trap")
        before_outside = _snapshot(outside)
        m = MemoryTool(ws, read_only=False)
        for args in calls:
            result = m.call(args)
            dumped = json.dumps(result)  # always a JSON-able result
            assert isinstance(result.get("ok"), bool)
            assert "OUTSIDE-SECRET" not in dumped, "read through a symlink"
        assert _snapshot(outside) == before_outside
        assert (ws / "sibling.txt").read_text() == "keep"
        assert sorted(p.name for p in ws.iterdir()) == ["memories", "sibling.txt"]
        assert sorted(p.name for p in base.iterdir()) == ["outside", "ws"]
    finally:
        shutil.rmtree(base, ignore_errors=True)
