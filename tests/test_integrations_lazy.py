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


def test_counting_imports_only_the_counting_layer(tmp_path: Path) -> None:
    """`import ctxbudget` and a count load errors and counting only; the session, async,
    store and tool layers load on first use of one of their names (PEP 562)."""
    layers = ("ctxbudget.session", "ctxbudget.aio", "ctxbudget.history", "ctxbudget.tools")
    code = (
        "import sys, ctxbudget\n"
        "assert ctxbudget.count_tokens('hello', 'o200k_base') == 1\n"
        f"print(sorted(m for m in {layers!r} if m in sys.modules))\n"
        "ctxbudget.Session\n"
        f"print(sorted(m for m in {layers!r} if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    before, after = proc.stdout.splitlines()
    assert before == "[]"
    assert "'ctxbudget.session'" in after


def test_every_exported_name_is_its_defining_module_s_object() -> None:
    import importlib

    import ctxbudget

    lazy = ctxbudget._LAZY
    for name in ctxbudget.__all__:
        value = getattr(ctxbudget, name)
        module = lazy.get(name, "")
        if module is None:
            assert value is importlib.import_module(f"ctxbudget.{name}")
        elif module:
            assert value is getattr(importlib.import_module(f"ctxbudget.{module}"), name)
    assert set(dir(ctxbudget)) >= set(ctxbudget.__all__)
    try:
        ctxbudget.no_such_name  # type: ignore[attr-defined]  # noqa: B018
    except AttributeError as e:
        assert "no_such_name" in str(e)
    else:
        raise AssertionError("an unknown name must raise AttributeError")
