"""A delete racing appends from another process, many times, on both stores: every trial
ends with the conversation wholly gone (zero rows in every table, no files) and the
writer stopped by ConversationDeletedError (or finished first) — never a half-deleted
conversation, never an untyped failure."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
from stores import StoreUnderTest, quote, sql

WORKER = Path(__file__).with_name("retention_race_worker.py")
TRIALS = 12


def _rows_left(store: StoreUnderTest, where: str) -> int:
    if not store.is_pg:
        return sum(1 for _ in Path(where).rglob("*")) if Path(where).exists() else 0
    assert store.url is not None
    found = sql(
        store.url,
        f"SELECT (SELECT count(*) FROM ctxbudget_rows WHERE conversation = {quote(where)}) "
        f"+ (SELECT count(*) FROM ctxbudget_memory_files WHERE conversation = {quote(where)}) "
        f"+ (SELECT count(*) FROM ctxbudget_conversations WHERE conversation = {quote(where)})",
    )
    return int(found[0][0])


@pytest.mark.store_needs("shares_across_processes")
def test_a_delete_racing_appends_from_another_process(store: StoreUnderTest) -> None:
    outcomes: dict[str, int] = {}
    for trial in range(TRIALS):
        where = store.fresh()
        store.open(where).append(
            [{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "0"}]}]
        )
        worker = subprocess.Popen(
            [sys.executable, str(WORKER), *store.target_args(where)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert worker.stdout is not None
        assert worker.stdout.readline().strip() == "ready"
        time.sleep(0.002 * (trial % 5))  # delete at different points of the run
        report = store.delete(where)
        assert report.existed
        out, err = worker.communicate(timeout=120)
        kind = out.split()[0] if out.split() else f"crashed: {err}"
        assert kind in ("deleted", "done"), (out, err)
        outcomes[kind] = outcomes.get(kind, 0) + 1
        # Nothing the writer did after the delete recreated it.
        assert _rows_left(store, where) == 0, (trial, out)
    assert outcomes.get("deleted", 0) > 0, outcomes
