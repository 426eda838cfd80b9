"""The ctxbudget command line."""

from __future__ import annotations

import io
import itertools
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


def _workspace(tmp_path: Path) -> Path:
    from ctxbudget import History

    ws = tmp_path / "ws"
    h = History.open(ws, durability="none")
    h.append(
        [
            {
                "kind": "message",
                "role": "user",
                "parts": [{"type": "text", "text": "the deploy key is in vault"}],
            }
        ]
    )
    h.rollover(rollover_id="r", reason="usable_limit", lead_in="lead-in text")
    h.append(
        [
            {
                "kind": "message",
                "role": "assistant",
                "parts": [{"type": "text", "text": "after " * 5000}],
            }
        ]
    )
    return ws


def test_history_list_search_read(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _workspace(tmp_path)
    assert main(["history", "list", str(ws)]) == 0
    out = capsys.readouterr().out
    assert "w:0" in out and "rollover" in out
    assert main(["history", "search", str(ws), "DEPLOY", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert [i["item_id"] for i in items] == ["1"]
    assert main(["history", "read", str(ws), "4"]) == 0
    assert capsys.readouterr().out.strip() == ("after " * 5000).strip(), "all pages joined"
    with pytest.raises(SystemExit, match="item_not_found"):
        main(["history", "read", str(ws), "99"])


def test_history_verify_does_not_repair_and_recover_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path)
    chat = ws / "history" / "chat.jsonl"
    with chat.open("ab") as f:
        f.write(b'{"batch":{"epoch":1,"first":9,"last":9}}\n{"seq":9,')
    torn = chat.read_bytes()
    assert main(["history", "verify", str(ws)]) == 1
    assert "NOT OK" in capsys.readouterr().out
    assert chat.read_bytes() == torn, "verify changes nothing"
    assert main(["history", "recover", str(ws), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["changed"] and report["chat_torn_bytes"] > 0
    assert main(["history", "verify", str(ws), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True


def test_history_export(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    out = tmp_path / "export.jsonl"
    assert main(["history", "export", str(ws), "-o", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["kind"] for r in rows] == ["message", "boundary", "lead_in", "message"]


def test_demo_runs_both_agents(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--workspace", str(tmp_path / "demo"), "--steps", "36"]) == 0
    out = capsys.readouterr().out
    assert "cooperative" in out and "stubborn" in out and "Summary" in out
    assert (tmp_path / "demo" / "cooperative" / "history" / "chat.jsonl").exists()


def test_plot_usage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    pytest.importorskip("matplotlib")
    from ctxbudget import Encoding, History
    from ctxbudget.plot import usage_points

    main(["demo", "--workspace", str(tmp_path / "demo"), "--steps", "45", "--agent", "stubborn"])
    ws = tmp_path / "demo" / "stubborn"
    points = usage_points(History.open(ws), Encoding("o200k_base"))
    assert len(points) == 45
    windows = [p.window_id for p in points]
    assert len(set(windows)) == 2, "one rollover in 45 steps"
    for a, b in itertools.pairwise(points):
        if a.window_id == b.window_id:
            assert b.tokens > a.tokens, "usage grows within a window"
    out = tmp_path / "usage.png"
    assert main(["plot", str(ws), "-o", str(out), "--context-window", "64000"]) == 0
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000
