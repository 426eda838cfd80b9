"""Steps/s of many conversations from several processes, PostgreSQL beside the file
store, driven by ``pg_steps.py`` (which also runs by hand). Skipped, with one line saying
why, when no server is configured (``CTXBUDGET_PG_URL``)."""

from __future__ import annotations

from typing import Any

import pg_steps
from pg_common import require_server
from registry import Benchmark, own_table

from conftest import SHORT


def test_pg_steps(benchmark: Any) -> None:
    require_server()
    rows = pg_steps.measure(
        ("pg", "file"),
        conversations=40 if SHORT else 200,
        processes=4,
        steps=5 if SHORT else 20,
        apis=("store", "session"),
    )
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info["table"] = pg_steps.table(rows)


BENCHMARK = Benchmark(
    topic="postgresql",
    title="Steps/s of 200 conversations from 4 processes",
    about=(
        "4 processes × 50 threads, one conversation each, prefilled with 40 rows of ~1 KiB "
        "(40 conversations × 5 steps in short mode). A *store calls* step reads the new rows "
        "(`WindowFold.advance()`), appends a user and an assistant message conditional on "
        "the last seq and every fifth step searches; a *Session* step is the same turn "
        "through `Session` (`add_user`, `prepare()`, `add_assistant`, `session_history`). "
        "The file store runs the same load over 200 workspaces on the local disk (`fsync`)."
    ),
    table=own_table,
)
