"""The ctxbudget command line."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

import ctxbudget
from ctxbudget.cli import main


def test_count_sample_prints_a_table(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["count", "--sample"]) == 0
    out = capsys.readouterr().out
    assert "o200k_base" in out and "cl100k_base" in out
    assert "sample:agent_session.md" in out
    assert "MiB/s" in out


def test_count_files_as_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.txt"
    f.write_text("hello world", encoding="utf-8")
    assert main(["count", str(f), "--encoding", "cl100k_base", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows == [
        {
            "file": str(f),
            "bytes": 11,
            "encoding": "cl100k_base",
            "tokens": 2,
            "exact": True,
            "forced_cuts": 0,
            "seconds": rows[0]["seconds"],
        }
    ]


def test_count_stdin_with_model(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"hello world")))
    assert main(["count", "-", "--model", "gpt-4o", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows[0]["tokens"] == ctxbudget.count_tokens("hello world", model="gpt-4o")
    assert rows[0]["encoding"] == "o200k_base"


def test_unknown_model_is_a_clean_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "a.txt"
    f.write_text("x", encoding="utf-8")
    assert main(["count", str(f), "--model", "mystery-1"]) == 2
    assert "unknown model" in capsys.readouterr().err


def test_missing_file_names_it() -> None:
    with pytest.raises(SystemExit, match="cannot read /nonexistent/file"):
        main(["count", "/nonexistent/file"])


def test_invalid_utf8_warns_and_counts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "b.bin"
    f.write_bytes(b"ok \xff\xfe end")
    assert main(["count", str(f), "--encoding", "o200k_base", "--json"]) == 0
    captured = capsys.readouterr()
    assert "not valid UTF-8" in captured.err
    assert json.loads(captured.out)[0]["tokens"] > 0
