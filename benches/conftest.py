"""Benchmark fixtures: one corpus for every side-by-side measure."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from stdlib_corpus import CORPUS_BYTES, SHORT, stdlib_texts

REPO = Path(__file__).resolve().parents[1]
os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(REPO.parent / "shared" / "tiktoken-cache"))


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "full_only: skipped in --short mode")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if SHORT:
        skip = pytest.mark.skip(reason="full mode only")
        for item in items:
            if "full_only" in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def corpus() -> list[str]:
    """Python standard library sources, in a fixed order, up to CORPUS_BYTES."""
    return stdlib_texts(CORPUS_BYTES)


@pytest.fixture(scope="session")
def tiktoken_encodings():  # type: ignore[no-untyped-def]
    import tiktoken

    return {name: tiktoken.get_encoding(name) for name in ("o200k_base", "cl100k_base")}
