"""Shared test configuration: offline tiktoken as the oracle."""

from __future__ import annotations

import os
import sys
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


@pytest.fixture(autouse=True)
def _ctxbudget_model_table(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once a program has imported LiteLLM, ctxbudget reads model names and windows
    through it. A test that imports it (the counters compared in test_request_counts)
    may share a pytest worker with later tests: they see ctxbudget's own table, with
    LiteLLM hidden from ``sys.modules`` unless marked ``litellm_in_process``."""
    if request.node.get_closest_marker("litellm_in_process") is None:
        monkeypatch.delitem(sys.modules, "litellm", raising=False)


# ----- PostgreSQL -------------------------------------------------------------------

_PG_SKIP = (
    "PostgreSQL tests skipped: set CTXBUDGET_PG_URL, or install the server binaries "
    "(apt-get install postgresql; found through pg_config --bindir) for a throwaway cluster"
)


def _start_cluster() -> tuple[str, str] | None:
    """Starts a throwaway cluster with scripts/pg-cluster: ``(url, its folder)``, or
    ``None`` when no server binaries are installed."""
    import subprocess

    script = REPO / "scripts" / "pg-cluster"
    if subprocess.run([script, "bindir"], capture_output=True).returncode != 0:
        return None
    started = subprocess.run([script, "start"], capture_output=True, text=True)
    if started.returncode != 0:
        pytest.fail(f"scripts/pg-cluster start failed: {started.stderr.strip()[-2000:]}")
    out = started.stdout
    exports = dict(
        line.removeprefix("export ").split("=", 1) for line in out.splitlines() if "=" in line
    )
    return exports["CTXBUDGET_PG_URL"].strip("'"), exports["CTXBUDGET_PG_CLUSTER"].strip("'")


@pytest.fixture(scope="session")
def pg_url():  # type: ignore[no-untyped-def]
    """A PostgreSQL URL for the tests: ``CTXBUDGET_PG_URL``, else a throwaway cluster
    started for this run (and removed after it), else the test is skipped — or fails
    when ``CTXBUDGET_REQUIRE_POSTGRES=1`` (CI). Tests keep apart by unique conversation
    ids."""
    url = os.environ.get("CTXBUDGET_PG_URL")
    if url:
        yield url
        return
    started = _start_cluster()
    if started is None:
        if os.environ.get("CTXBUDGET_REQUIRE_POSTGRES") == "1":
            pytest.fail(
                "CTXBUDGET_REQUIRE_POSTGRES=1: the PostgreSQL tests must run here; "
                + _PG_SKIP.split(": ", 1)[1]
            )
        pytest.skip(_PG_SKIP)
    url, cluster = started
    os.environ["CTXBUDGET_PG_URL"] = url  # for worker processes the tests start
    try:
        yield url
    finally:
        import subprocess

        os.environ.pop("CTXBUDGET_PG_URL", None)
        subprocess.run([REPO / "scripts" / "pg-cluster", "stop", cluster], capture_output=True)


@pytest.fixture(params=STORE_KINDS)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> StoreUnderTest:
    """The store under test, once per kind: a workspace directory or a PostgreSQL
    conversation of its own (tests taking it run on both stores)."""
    url = request.getfixturevalue("pg_url") if request.param == "postgres" else None
    under_test = StoreUnderTest(request.param, tmp_path, url)
    # A test that needs a capability some store lacks says so with
    # `@pytest.mark.store_needs("shares_across_processes")`: it does not apply to that
    # store (reported as such), and runs on every store that has it.
    for mark in request.node.iter_markers("store_needs"):
        for capability in mark.args:
            if not getattr(under_test, capability):
                pytest.skip(f"not applicable: a {request.param} store lacks {capability}")
    return under_test
