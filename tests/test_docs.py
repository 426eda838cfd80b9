"""Every code block in docs/ runs: Python blocks in a fresh directory, shell blocks as
`ctxbudget` commands, JSON blocks must parse, the Rust block is the compiled example."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
NOT_CODE = {"text", ""}


def _blocks() -> list[tuple[str, str, str]]:
    out = []
    for page in sorted(DOCS.glob("*.md")):
        for n, m in enumerate(FENCE.finditer(page.read_text())):
            out.append((f"{page.name}#{n}", m.group(1), m.group(2)))
    return out


ALL_BLOCKS = _blocks()
# Diagrams (```text) are not code; every other block is run or checked.
BLOCKS = [b for b in ALL_BLOCKS if b[1] not in NOT_CODE]


def test_docs_have_code() -> None:
    langs = {lang for _, lang, _ in ALL_BLOCKS}
    assert {"python", "sh", "json", "rust"} <= langs
    assert all(lang in {"python", "sh", "json", "rust", "text"} for lang in langs), langs


@pytest.mark.parametrize(("where", "lang", "code"), BLOCKS, ids=[b[0] for b in BLOCKS])
def test_block_runs(
    where: str, lang: str, code: str, tmp_path: Path, request: pytest.FixtureRequest
) -> None:
    if "CTXBUDGET_PG_URL" in code:
        # A PostgreSQL example: runs against the test server (skipped without one).
        request.getfixturevalue("pg_url")
    if lang == "python":
        proc = subprocess.run(
            [sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode == 0, f"{where} failed:\n{proc.stderr[-3000:]}"
    elif lang == "sh":
        for line in code.splitlines():
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            argv = shlex.split(line, comments=True)
            assert argv[0] == "ctxbudget", f"{where}: only ctxbudget commands are run"
            proc = subprocess.run(
                [sys.executable, "-m", "ctxbudget", *argv[1:]],
                cwd=tmp_path,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert proc.returncode == 0, f"{where}: {line}\n{proc.stderr[-3000:]}"
    elif lang == "json":
        json.loads(code)
    elif lang == "rust":
        examples = REPO / "rust" / "ctxbudget" / "examples"
        compiled = [(examples / name).read_text() for name in ("rust_host.rs", "pg_host.rs")]
        assert code in compiled, f"{where} must be a compiled example verbatim"
