"""The ctxbudget command line."""

from __future__ import annotations

import io
import itertools
import json
import sys
from pathlib import Path

import pytest
from history_helpers import fill_two_windows

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
    fill_two_windows(History.open(ws, durability="none"))
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
    with pytest.raises(SystemExit, match="no item 99 in"):
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
    assert report["changed"] and report["detail"]["kind"] == "file"
    assert report["detail"]["chat_torn_bytes"] > 0
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


# ----- one-line errors, exit codes (issue: first ten minutes) -------------------------


def _one_line_error(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, f"expected one line on stderr, got:\n{err}"
    assert "Traceback" not in err
    return lines[0]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert capsys.readouterr().out.strip() == f"ctxbudget {ctxbudget.__version__}"


@pytest.mark.parametrize("value", ["-5", "0", "ten"])
def test_search_limit_must_be_positive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], value: str
) -> None:
    ws = _workspace(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["history", "search", str(ws), "deploy", "--limit", value])
    assert exit_.value.code == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "--limit" in line and value in line


@pytest.mark.parametrize(
    "argv",
    [
        ["demo", "--steps", "-1"],
        ["demo", "--context-window", "0"],
        ["plot", "ws", "--threshold", "1.5"],
        ["plot", "ws", "--context-window", "-64000"],
        ["history", "read", "ws", "abc"],
        ["history", "items", "ws", "--window", "0"],
        ["no-such-command"],
    ],
)
def test_bad_arguments_are_one_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert _one_line_error(capsys.readouterr().err).startswith("ctxbudget")


def test_export_json_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _workspace(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["history", "export", str(ws), "--json"])
    assert exit_.value.code == 2, "an option the command does not take: exit 2"
    assert "JSON Lines" in str(exit_.value) and "--json" in str(exit_.value)
    assert capsys.readouterr().out == "", "nothing exported when the flag is refused"


def test_read_missing_item_points_at_the_items_command(tmp_path: Path) -> None:
    ws = _workspace(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["history", "read", str(ws), "999999"])
    assert exit_.value.code == 1, "a missing item: the command could not do it"
    message = str(exit_.value)
    assert "list_items" not in message, "a tool action is not a command"
    assert f"ctxbudget history items {ws}" in message
    assert "999999" in message and "\n" not in message


def _tool_workspace(tmp_path: Path) -> Path:
    from ctxbudget import History

    ws = tmp_path / "tools"
    h = History.open(ws, durability="none")
    h.append(
        [
            {"kind": "message", "role": "user", "parts": [{"type": "text", "text": "audit"}]},
            {
                "kind": "message",
                "role": "assistant",
                "parts": [
                    {
                        "type": "tool_call",
                        "id": "c1",
                        "name": "memory",
                        "arguments": {"command": "view", "path": "/memories/session/checkpoint.md"},
                    }
                ],
            },
            {
                "kind": "message",
                "role": "tool",
                "parts": [
                    {
                        "type": "tool_result",
                        "call_id": "c1",
                        "name": "memory",
                        "output": "goal: audit the checkpoint.md retries",
                    }
                ],
            },
        ]
    )
    h.rollover(rollover_id="r", reason="usable_limit", lead_in="lead-in text")
    h.append([{"kind": "message", "role": "user", "parts": [{"type": "text", "text": "more"}]}])
    return ws


def test_search_shows_text_not_raw_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _tool_workspace(tmp_path)
    assert main(["history", "search", str(ws), "checkpoint.md"]) == 0
    out = capsys.readouterr().out
    assert '{"tool_call"' not in out and '{"tool_result"' not in out
    assert "→ memory(command=view, path=/memories/session/checkpoint.md)" in out
    assert "← memory: goal: audit the checkpoint.md retries" in out


def test_history_items_lists_a_window(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    ws = _tool_workspace(tmp_path)
    assert main(["history", "items", str(ws), "--window", "w:0"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].split() == ["item", "window", "role", "text"]
    assert [line.split()[:3] for line in lines[1:4]] == [
        ["1", "w:0", "user"],
        ["2", "w:0", "assistant"],
        ["3", "w:0", "tool"],
    ]
    assert "more" not in out, "only the asked window"
    assert main(["history", "items", str(ws), "--limit", "2", "--json"]) == 0
    items = json.loads(capsys.readouterr().out)
    assert [i["item_id"] for i in items] == ["1", "2"]
    assert main(["history", "read", str(ws), "2"]) == 0
    assert capsys.readouterr().out.strip() == (
        "→ memory(command=view, path=/memories/session/checkpoint.md)"
    )


def test_plot_without_matplotlib_is_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path)
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)
    status = main(["plot", str(ws), "-o", str(tmp_path / "u.png")])
    assert status != 0
    line = _one_line_error(capsys.readouterr().err)
    assert "pip install 'ctxbudget[plot]'" in line
    assert not (tmp_path / "u.png").exists()


def test_io_error_says_what_where_and_what_to_do(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    status = main(["demo", "--workspace", str(blocker / "ws"), "--steps", "2"])
    assert status == 1
    line = _one_line_error(capsys.readouterr().err)
    assert "None:" not in line and "PosixPath" not in line and "[Errno" not in line
    assert "cannot run the demo in" in line
    assert "Not a directory" in line
    assert str(blocker) in line
    assert "check the path" in line


def test_export_to_a_missing_directory_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ws = _workspace(tmp_path)
    target = tmp_path / "missing" / "out.jsonl"
    assert main(["history", "export", str(ws), "-o", str(target)]) == 1
    line = _one_line_error(capsys.readouterr().err)
    assert f"cannot export the transcript of {ws}" in line
    assert "No such file or directory" in line and str(target) in line


def test_plot_and_history_use_the_recorded_budget(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from ctxbudget.plot import plot_budget

    root = tmp_path / "demo"
    assert main(["demo", "--workspace", str(root), "--steps", "3", "--agent", "stubborn"]) == 0
    ws = root / "stubborn"
    capsys.readouterr()
    record, recorded = plot_budget(ws)
    assert recorded
    assert (record.context_window, record.threshold, record.encoding) == (
        64_000,
        0.7,
        "o200k_base",
    )
    assert record.budget().usable_limit == 64_000 - 8_192
    assert main(["history", "list", str(ws)]) == 0
    assert "budget: 64,000-token window, Handoff target: 70%" in capsys.readouterr().out
    # An explicit argument still overrides the record.
    assert plot_budget(ws, context_window=100_000)[0].context_window == 100_000
    # A workspace no session wrote falls back to the model's defaults and says so.
    bare, recorded = plot_budget(_workspace(tmp_path))
    assert not recorded and bare.context_window == 128_000
