"""`import ctxbudget` and a first count load no module that only async hosts need:
asyncio (and ssl, which it imports) cost a third of the import's CPU time, and a host
that never awaits would carry them (issue 30's cold start: import + first count)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ASYNC_ONLY = ("asyncio", "ssl")


def test_import_and_first_count_load_no_async_machinery(tmp_path: Path) -> None:
    code = (
        "import sys, ctxbudget\n"
        "ctxbudget.Encoding('o200k_base').count('Hello, world!')\n"
        f"print(sorted(m for m in {ASYNC_ONLY!r} if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
