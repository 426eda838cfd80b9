"""The memory tool over both of its stores, for tests that run against each: a
workspace's ``memories/`` and a PostgreSQL conversation's memory files (the ``pg_url``
fixture: skipped without a server, failed under ``CTXBUDGET_REQUIRE_POSTGRES=1``)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from ctxbudget import History, MemoryTool

STORES = ("workspace", "postgresql")

MakeTool = Callable[..., MemoryTool]


def new_conversation(pg_url: str, prefix: str = "mem") -> History:
    """A fresh conversation (tests keep apart by unique ids)."""
    return History.open(pg_url, conversation=f"{prefix}-{uuid.uuid4().hex}")


@pytest.fixture(params=STORES)
def make_memory(request: pytest.FixtureRequest, tmp_path: Path) -> MakeTool:
    """``make(**options) -> MemoryTool``: tools over one store per test (the same files
    for every tool the test makes), once per store."""
    target: Any
    if request.param == "postgresql":
        target = new_conversation(request.getfixturevalue("pg_url"))
    else:
        target = tmp_path

    def make(**options: Any) -> MemoryTool:
        return MemoryTool(target, **options)

    return make


def stored_text(tool: MemoryTool, path: str) -> str:
    """The whole text of the file at ``path`` as the tool's store holds it."""
    result = tool.call({"command": "view", "path": path})
    assert result["ok"], result
    return "\n".join(line.split("\t", 1)[1] for line in result["content"].split("\n"))
