"""The memory tool over each of its stores, for tests that run against each: a
workspace's ``memories/``, a PostgreSQL conversation's memory files (the ``pg_url``
fixture: skipped without a server, failed under ``CTXBUDGET_REQUIRE_POSTGRES=1``) and an
in-memory store's."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import History, MemoryTool

STORES = ("workspace", "postgresql", "memory")

MakeTool = Callable[..., MemoryTool]


def new_conversation(pg_url: str, prefix: str = "mem") -> History:
    """A fresh conversation (tests keep apart by unique ids)."""
    return History.open(pg_url, conversation=f"{prefix}-{uuid.uuid4().hex}")


def memory_target(store: str, tmp_path: Path, request: pytest.FixtureRequest) -> Any:
    """What a ``MemoryTool`` of the store ``store`` (one of :data:`STORES`) is given."""
    if store == "postgresql":
        return new_conversation(request.getfixturevalue("pg_url"))
    if store == "memory":
        return History.open(f"memory:mem-{uuid.uuid4().hex}")
    return tmp_path


@pytest.fixture(params=STORES)
def make_memory(request: pytest.FixtureRequest, tmp_path: Path) -> MakeTool:
    """``make(**options) -> MemoryTool``: tools over one store per test (the same files
    for every tool the test makes), once per store."""
    target = memory_target(request.param, tmp_path, request)

    def make(**options: Any) -> MemoryTool:
        return MemoryTool(target, **options)

    return make


def stored_text(tool: MemoryTool, path: str) -> str:
    """The whole text of the file at ``path`` as the tool's store holds it."""
    result = tool.call({"command": "view", "path": path})
    assert result["ok"], result
    return "\n".join(line.split("\t", 1)[1] for line in result["content"].split("\n"))
