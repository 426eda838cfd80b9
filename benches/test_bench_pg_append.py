"""PostgreSQL appends beside the Agents SDK's ``SQLAlchemySession``, driven by
``pg_append.py`` (which also runs by hand: ``python benches/pg_append.py --rust``). Skipped,
with one line saying why, when no server is configured (``CTXBUDGET_PG_URL``) or the
baseline is not installed."""

from __future__ import annotations

from typing import Any

import pg_append
import pytest
from pg_common import NO_BASELINE, missing_baseline, require_server
from registry import Benchmark, own_table

from conftest import SHORT


def test_pg_append(benchmark: Any) -> None:
    url = require_server()
    if missing := missing_baseline():
        pytest.skip(f"missing {', '.join(missing)}: {NO_BASELINE}")
    result = pg_append.measure(url, rounds=1 if SHORT else 6, per_round=30 if SHORT else 100)
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["table"] = pg_append.table(result)


BENCHMARK = Benchmark(
    topic="postgresql",
    title="Appends beside SQLAlchemySession",
    about=(
        "One local PostgreSQL server (`fsync` and `synchronous_commit` on, TLS over TCP): "
        "`History.open(url, conversation=…).append(rows)` beside the Agents SDK's "
        "`SQLAlchemySession.add_items` over asyncpg and over psycopg 3, and the file store "
        "through the same `History` (`fsync`), one transaction per call of a ~300-byte "
        "message, the sides alternating in rounds of 100 calls (30 in short mode)."
    ),
    table=own_table,
)
