"""Importing ctxbudget, or an integration's package, imports no framework: each is an
optional extra, loaded only when its integration is used."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

FRAMEWORKS = ("agents", "langchain", "langchain_core", "langgraph", "pydantic_ai", "litellm")


def test_no_framework_is_imported(tmp_path: Path) -> None:
    code = (
        "import sys, ctxbudget\n"
        "import ctxbudget.integrations.agents, ctxbudget.integrations.langchain\n"
        "import ctxbudget.integrations.pydantic_ai, ctxbudget.integrations.litellm\n"
        "from ctxbudget.integrations.langchain import token_counter\n"
        "ctxbudget.Session.open('ws', model='gpt-4o', durability='none')\n"
        f"print(sorted(m for m in {FRAMEWORKS!r} if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"
