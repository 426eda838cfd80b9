"""History.open and append check their arguments the same way for either store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from ctxbudget import ConflictError, History, InvalidArgumentError

ROW = {"kind": "message", "role": "user", "parts": [{"type": "text", "text": "x"}]}


@pytest.fixture(params=["file", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> tuple[Any, dict[str, Any]]:
    if request.param == "file":
        return tmp_path / "ws", {}
    url = request.getfixturevalue("pg_url")
    return url, {"conversation": f"args-{tmp_path.name}"}


def test_open_refuses_a_bad_durability_or_lock_timeout(target: tuple[Any, dict[str, Any]]) -> None:
    where, extra = target
    with pytest.raises(InvalidArgumentError, match="durability"):
        History.open(where, durability="sometimes", **extra)
    with pytest.raises(ValueError, match="lock_timeout"):
        History.open(where, lock_timeout=-1, **extra)
    with pytest.raises(ValueError, match="max_row_bytes"):
        History.open(where, max_row_bytes=0, **extra)


def test_a_seq_past_the_stores_range_is_an_invalid_argument(
    target: tuple[Any, dict[str, Any]],
) -> None:
    where, extra = target
    h = History.open(where, **extra)
    with pytest.raises(InvalidArgumentError, match="a seq must be an int"):
        h.append([ROW], if_last_seq=2**64)
    with pytest.raises(ConflictError):
        h.append([ROW], if_last_seq=2**64 - 1)
    assert [r.seq for r in h.rows()] == []
