"""The budget a session ran with is kept in its workspace (budget.json)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxbudget import Session
from ctxbudget.budget_record import BUDGET_FILE, BudgetRecordError, read_budgets
from ctxbudget.errors import CtxBudgetError


def test_open_records_the_budget_once(tmp_path: Path) -> None:
    Session.open(tmp_path, model="gpt-4o", context_window=50_000, threshold=0.6, durability="none")
    path = tmp_path / BUDGET_FILE
    first = path.stat()
    Session.open(tmp_path, model="gpt-4o", context_window=50_000, threshold=0.6, durability="none")
    assert path.stat().st_ino == first.st_ino, "an unchanged budget is not rewritten"
    (record,) = read_budgets(tmp_path)
    assert (record.context_window, record.threshold, record.output_reserve) == (50_000, 0.6, 8_192)
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == [], "no temp files"


def test_a_changed_budget_is_appended(tmp_path: Path) -> None:
    Session.open(tmp_path, model="gpt-4o", context_window=50_000, durability="none")
    Session.open(
        tmp_path, model="gpt-4.1", context_window=90_000, output_reserve=1_000, durability="none"
    )
    old, new = read_budgets(tmp_path)
    assert (old.model, old.context_window) == ("gpt-4o", 50_000)
    assert (new.model, new.encoding, new.context_window, new.output_reserve) == (
        "gpt-4.1",
        "o200k_base",
        90_000,
        1_000,
    )


def test_a_damaged_record_is_named_and_replaced_by_the_next_session(tmp_path: Path) -> None:
    (tmp_path / BUDGET_FILE).write_text("{not json")
    with pytest.raises(BudgetRecordError, match=BUDGET_FILE) as info:
        read_budgets(tmp_path)
    assert isinstance(info.value, CtxBudgetError) and isinstance(info.value, ValueError)
    Session.open(tmp_path, model="gpt-4o", context_window=40_000, durability="none")
    assert [r.context_window for r in read_budgets(tmp_path)] == [40_000]
    assert json.loads((tmp_path / BUDGET_FILE).read_text())["format"] == 1


def test_no_record_reads_as_empty(tmp_path: Path) -> None:
    assert read_budgets(tmp_path) == []


def test_opening_writes_the_budget_and_the_window_overhead_in_one_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each atomic write is a temporary file, two fsyncs and a rename (three trips to
    the I/O pool for an AsyncSession): opening makes one, not one per fact recorded."""
    from ctxbudget import budget_record

    writes: list[str] = []
    real = budget_record.atomic_write

    def counted(path: Path, data: bytes) -> None:
        writes.append(path.name)
        real(path, data)

    monkeypatch.setattr(budget_record, "atomic_write", counted)
    s = Session.open(tmp_path, model="gpt-4o", context_window=50_000, durability="none")
    assert writes == [BUDGET_FILE]
    (record,) = read_budgets(tmp_path)
    (tokens,) = record.request_overhead.values()
    assert set(record.request_overhead) == {s.window_id} and tokens > 0
    Session.open(tmp_path, model="gpt-4o", context_window=50_000, durability="none")
    assert writes == [BUDGET_FILE], "nothing changed: nothing rewritten"
    Session.open(tmp_path, model="gpt-4o", context_window=60_000, durability="none")
    assert writes == [BUDGET_FILE, BUDGET_FILE]
    old, new = read_budgets(tmp_path)
    assert new.context_window == 60_000 and new.request_overhead == old.request_overhead
