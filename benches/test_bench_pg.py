"""The PostgreSQL store's benchmarks under ``./dev bench`` (``--short`` in CI): appends
beside the Agents SDK's ``SQLAlchemySession`` (``pg_append.py``), ``session_history``
over 2 MiB beside the file store (``pg_search.py``), and steps/s of many conversations
from several processes beside the file store (``pg_steps.py``). Each prints its table
(``benches/run.py`` shows it); they are skipped, with one line saying why, when no
server is configured (``CTXBUDGET_PG_URL``). Timing only: they never fail on a figure.
"""

from __future__ import annotations

from typing import Any

import pg_append
import pg_search
import pg_steps
import pytest
from pg_common import NO_BASELINE, NO_SERVER, missing_baseline, server_url

from conftest import SHORT


def _url() -> str:
    url = server_url()
    if url is None:
        pytest.skip(NO_SERVER)
    return url


def _report(benchmark: Any, measure: str, table: str) -> None:
    benchmark.pedantic(lambda: None, rounds=1)
    benchmark.extra_info.update(measure=measure, impl="ctxbudget", group="pg", table=table)
    print("\n" + table)


def test_pg_append(benchmark: Any) -> None:
    url = _url()
    if missing := missing_baseline():
        pytest.skip(f"missing {', '.join(missing)}: {NO_BASELINE}")
    result = pg_append.measure(url, rounds=1 if SHORT else 6, per_round=30 if SHORT else 100)
    _report(benchmark, "PostgreSQL appends beside SQLAlchemySession", pg_append.table(result))


def test_pg_session_history(benchmark: Any) -> None:
    result = pg_search.measure(_url(), rounds=3 if SHORT else 30)
    _report(
        benchmark, "session_history over 2 MiB, PostgreSQL beside files", pg_search.table(result)
    )


def test_pg_steps(benchmark: Any) -> None:
    _url()
    rows = pg_steps.measure(
        ("pg", "file"),
        conversations=40 if SHORT else 200,
        processes=4,
        steps=5 if SHORT else 20,
        apis=("store", "session"),
    )
    _report(benchmark, "steps/s of concurrent conversations", pg_steps.table(rows))
