"""Every memory command over arbitrary Python values and arbitrary paths: the tool always
returns a JSON-able result (never raises), and nothing outside ``memories/`` changes."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxbudget import MemoryTool

COMMANDS = ["view", "create", "str_replace", "insert", "delete", "rename"]
KEYS = [
    "command",
    "path",
    "file_text",
    "old_str",
    "new_str",
    "insert_line",
    "insert_text",
    "view_range",
    "old_path",
    "new_path",
]

scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.integers(min_value=10**30, max_value=10**40),
    st.floats(),
    st.text(max_size=30),
    st.binary(max_size=10),
    st.complex_numbers(),
    st.just(Ellipsis),
    st.builds(object),
)
values = st.recursive(
    scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.tuples(inner, inner),
        st.frozensets(st.integers(), max_size=3),
        st.dictionaries(
            st.one_of(st.text(max_size=5), st.integers(), st.none()), inner, max_size=3
        ),
    ),
    max_leaves=10,
)
segments = st.one_of(
    st.sampled_from(
        ["..", ".", "", "session", "link", "a.md", "d", "pipe", "hard", "big", "日本", "x\x00y"]
    ),
    st.text(max_size=12),
    st.text(alphabet=st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF), max_size=2),
)
paths = st.one_of(
    st.lists(segments, max_size=4).map(lambda s: "/memories/" + "/".join(s)),
    st.lists(segments, max_size=3).map(lambda s: "/" + "/".join(s)),
    st.text(max_size=40),
    values,
)
arguments = st.dictionaries(
    st.sampled_from(KEYS),
    st.one_of(values, paths, st.sampled_from(COMMANDS), st.lists(st.integers(-3, 3), max_size=3)),
    max_size=6,
).map(lambda d: {"command": d.get("command", "view"), **d})
calls = st.one_of(
    arguments,
    st.builds(lambda cmd, d: {**d, "command": cmd}, st.sampled_from(COMMANDS), arguments),
    st.dictionaries(
        st.one_of(st.integers(), st.text(max_size=8), st.none(), st.tuples(st.integers())),
        values,
        max_size=3,
    ),
    values,
    st.text(max_size=60),
    arguments.map(lambda d: json.dumps(d, default=repr)),
)

SECRET = "OUTSIDE-SECRET"


def _snapshot(root: Path) -> dict[str, bytes]:
    out = {}
    for dirpath, dirs, files in os.walk(root):
        for name in dirs + files:
            p = Path(dirpath) / name
            out[str(p.relative_to(root))] = (
                p.read_bytes() if p.is_file() and not p.is_symlink() else b"<not a file>"
            )
    return out


def _plant(base: Path) -> tuple[Path, Path]:
    outside = base / "outside"
    outside.mkdir()
    (outside / "trap").write_text(SECRET)
    ws = base / "ws"
    memories = ws / "memories"
    (memories / "session" / "d").mkdir(parents=True)
    (memories / "session" / "a.md").write_text("a\nb\n")
    (memories / "d").mkdir()
    (memories / "d" / "big").write_bytes(b"x" * 9000)
    (ws / "sibling.txt").write_text("keep")
    os.symlink(outside, memories / "link")
    os.symlink(outside / "trap", memories / "session" / "trap")
    os.link(outside / "trap", memories / "hard")
    os.mkfifo(memories / "session" / "pipe")
    return outside, ws


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    batch=st.lists(calls, min_size=1, max_size=8),
    session_scope=st.booleans(),
    read_only=st.booleans(),
)
def test_any_call_is_a_result_and_nothing_outside_changes(
    batch: list[Any], session_scope: bool, read_only: bool
) -> None:
    base = Path(tempfile.mkdtemp(prefix="ctxb-memhyp-"))
    try:
        outside, ws = _plant(base)
        before = _snapshot(outside)
        tool = MemoryTool(ws, session_scope=session_scope, read_only=read_only)
        for args in batch:
            result = tool.call(args)
            assert isinstance(result, dict)
            assert isinstance(result.get("ok"), bool)
            sent = json.dumps(result, ensure_ascii=False).encode("utf-8")  # sendable as is
            assert SECRET.encode() not in sent
            if not result["ok"]:
                assert isinstance(result["code"], str) and result["error"]
                assert result["code"] != "io_error", result
        assert _snapshot(outside) == before
        assert (ws / "sibling.txt").read_text() == "keep"
        assert sorted(p.name for p in ws.iterdir()) == ["memories", "sibling.txt"]
        assert sorted(p.name for p in base.iterdir()) == ["outside", "ws"]
    finally:
        shutil.rmtree(base, ignore_errors=True)


@settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(
    batch=st.lists(calls, min_size=1, max_size=8),
    session_scope=st.booleans(),
    read_only=st.booleans(),
)
def test_any_call_is_a_result_over_a_postgresql_conversation(
    pg_url: str, batch: list[Any], session_scope: bool, read_only: bool
) -> None:
    """The same over a conversation's memory files in PostgreSQL: every call is a result,
    nothing is an ``io_error``, and another conversation's files never change."""
    from memory_stores import new_conversation

    mine, other = new_conversation(pg_url), new_conversation(pg_url)
    neighbour = MemoryTool(other)
    assert neighbour.call({"command": "create", "path": "/memories/n.md", "file_text": SECRET})[
        "ok"
    ]
    tool = MemoryTool(mine, session_scope=session_scope, read_only=read_only)
    for args in batch:
        result = tool.call(args)
        assert isinstance(result, dict)
        assert isinstance(result.get("ok"), bool)
        sent = json.dumps(result, ensure_ascii=False).encode("utf-8")
        assert SECRET.encode() not in sent
        if not result["ok"]:
            assert isinstance(result["code"], str) and result["error"]
            assert result["code"] != "io_error", result
    assert neighbour.call({"command": "view"})["entries"] == ["/memories/n.md (14 bytes)"]
