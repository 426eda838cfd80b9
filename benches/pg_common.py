"""What the PostgreSQL benchmarks share: the server's URL, the baseline drivers' URLs,
percentiles, and the rows every side writes.

The server comes from ``CTXBUDGET_PG_URL`` (``./dev bench`` starts a throwaway cluster
when PostgreSQL's server binaries are installed; by hand: ``eval "$(scripts/pg-cluster
start)"``). Without it the PostgreSQL benchmarks are skipped with one line.
"""

from __future__ import annotations

import importlib.util
import os
import statistics
from typing import Any

URL_VARIABLE = "CTXBUDGET_PG_URL"
NO_SERVER = (
    f"{URL_VARIABLE} is not set: no PostgreSQL server to measure against "
    '(eval "$(scripts/pg-cluster start)", or install the server binaries and run ./dev bench)'
)
BASELINE_PACKAGES = ("sqlalchemy", "asyncpg", "psycopg", "agents")
NO_BASELINE = "pip install -r benches/requirements-pg.txt (the Agents SDK's SQLAlchemySession)"

# The message every side appends: about 300 bytes of JSON.
TEXT = (
    "Please summarise the quarterly report and list the three largest cost "
    "increases with their causes; keep it under two hundred words and cite the page "
    "numbers so that the finance team can check them."
)


def server_url() -> str | None:
    """The server to measure against, or None."""
    return os.environ.get(URL_VARIABLE) or None


def require_server() -> str:
    """The server's URL, or a pytest skip saying why there is none (benchmark modules)."""
    import pytest

    url = server_url()
    if url is None:
        pytest.skip(NO_SERVER)
    return url


def missing_baseline() -> list[str]:
    """The baseline's packages that are not installed."""
    return [p for p in BASELINE_PACKAGES if importlib.util.find_spec(p) is None]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def p50(values: list[float]) -> float:
    return statistics.median(values)


def sqlalchemy_url(url: str, driver: str) -> str:
    """``url`` for SQLAlchemy with ``driver`` (``asyncpg`` or ``psycopg``): asyncpg spells
    libpq's ``sslmode=require`` as ``ssl=require``; psycopg takes libpq's parameters."""
    base, _, query = url.partition("?")
    base = base.replace("postgresql://", f"postgresql+{driver}://", 1).replace(
        "postgres://", f"postgresql+{driver}://", 1
    )
    params = [p for p in query.split("&") if p]
    if driver == "asyncpg":
        params = [
            p.replace("sslmode=", "ssl=", 1) if p.startswith("sslmode=") else p for p in params
        ]
    return base + ("?" + "&".join(params) if params else "")


def message(role: str, text: str) -> dict[str, Any]:
    """A ctxbudget message row."""
    return {"kind": "message", "role": role, "parts": [{"type": "text", "text": text}]}
