"""``session_history`` over 2 MiB in PostgreSQL beside the file store, driven by
``pg_search.py`` (which also runs by hand). Skipped, with one line saying why, when no
server is configured (``CTXBUDGET_PG_URL``)."""

from __future__ import annotations

from typing import Any

import pg_search
from pg_common import require_server
from registry import Benchmark, own_table

from conftest import SHORT


def test_pg_session_history(benchmark: Any) -> None:
    result = pg_search.measure(require_server(), rounds=3 if SHORT else 30)
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["table"] = pg_search.table(result)


BENCHMARK = Benchmark(
    topic="postgresql",
    title="session_history beside the file store",
    about=(
        "The same 500 rows of ~4.2 KiB (just under one call's 2 MiB scan budget) in a "
        "PostgreSQL conversation and in a workspace, the same calls alternating (searches "
        "that fill early, hit only the last row or miss, a second page, `list_items` pages, "
        "`list_windows`); the bench checks that both stores give the same items."
    ),
    table=own_table,
)
