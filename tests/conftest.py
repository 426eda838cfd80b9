"""Shared test configuration: offline tiktoken as the oracle."""

from __future__ import annotations

import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from stores import STORE_KINDS, StoreUnderTest

REPO = Path(__file__).resolve().parents[1]
_default_cache = REPO.parent / "shared" / "tiktoken-cache"
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(_default_cache))

settings.register_profile(
    "default",
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("ci", parent=settings.get_profile("default"), max_examples=600)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

ORACLE_ENCODINGS = ("o200k_base", "cl100k_base")


def _load_tiktoken(name: str):  # type: ignore[no-untyped-def]
    import tiktoken

    cache = os.environ["TIKTOKEN_CACHE_DIR"]
    if not Path(cache).is_dir():
        raise RuntimeError(
            f"tiktoken oracle files not found in {cache!r}; set TIKTOKEN_CACHE_DIR to the "
            "directory holding the offline encoding files (see README)"
        )
    return tiktoken.get_encoding(name)


@pytest.fixture(scope="session")
def tiktoken_encodings():  # type: ignore[no-untyped-def]
    """Python tiktoken encodings by name, loaded offline."""
    return {name: _load_tiktoken(name) for name in ORACLE_ENCODINGS}


def _start_throwaway_cluster() -> tuple[str, str] | None:
    """Starts a cluster with scripts/pg-cluster: (URL, folder), or None without server
    binaries."""
    script = REPO / "scripts" / "pg-cluster"
    if subprocess.run([script, "bindir"], capture_output=True).returncode != 0:
        return None
    out = subprocess.run([script, "start"], capture_output=True, text=True, check=True).stdout
    env = dict(re.findall(r"export (\w+)='([^']*)'", out))
    return env["CTXBUDGET_PG_URL"], env["CTXBUDGET_PG_CLUSTER"]


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A PostgreSQL URL for the store tests: CTXBUDGET_PG_URL, else a throwaway cluster
    (scripts/pg-cluster, removed at the end of the session); skipped without server
    binaries, a failure with CTXBUDGET_REQUIRE_POSTGRES=1. Tests use unique
    conversation ids, so one database serves them all."""
    url = os.environ.get("CTXBUDGET_PG_URL")
    if url:
        yield url
        return
    started = _start_throwaway_cluster()
    if started is None:
        message = (
            "no PostgreSQL server: set CTXBUDGET_PG_URL, or install the server binaries "
            "(Debian/Ubuntu: apt-get install postgresql) for a throwaway cluster"
        )
        if os.environ.get("CTXBUDGET_REQUIRE_POSTGRES") == "1":
            pytest.fail(f"CTXBUDGET_REQUIRE_POSTGRES=1 and {message}")
        pytest.skip(message)
    url, cluster = started
    try:
        yield url
    finally:
        subprocess.run([REPO / "scripts" / "pg-cluster", "stop", cluster], check=False)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUnderTest:
    """The store under test, once per kind: a workspace directory or a PostgreSQL
    conversation of its own."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    return StoreUnderTest(request.param, tmp_path, url)
