"""The real-text corpus of the Python benchmarks: the Python standard library's sources."""

from __future__ import annotations

import os
import sysconfig
from pathlib import Path

SHORT = os.environ.get("CTXBUDGET_BENCH_SHORT") == "1"
CORPUS_BYTES = (2 if SHORT else 8) << 20


def stdlib_texts(limit: int = CORPUS_BYTES) -> list[str]:
    """Python standard library sources (tests and site-packages left out), in a fixed
    order, up to `limit` bytes."""
    root = Path(sysconfig.get_paths()["stdlib"])
    texts: list[str] = []
    total = 0
    for path in sorted(root.rglob("*.py")):
        if "site-packages" in path.parts or "test" in path.parts:
            continue
        try:
            text = path.read_text("utf-8")
        except (UnicodeDecodeError, OSError):
            continue
        texts.append(text)
        total += len(text.encode())
        if total >= limit:
            break
    return texts
