"""Shared test configuration: offline tiktoken as the oracle."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

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
