"""Exit statuses as docs/cli.md gives them — 2 for every invalid argument (argparse's,
values the commands check, options that exclude each other), 1 when the command could
not do it — and messages that tell a command-line user what to type, not what a tool
call would take."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from history_helpers import fill_two_windows

from ctxbudget import History
from ctxbudget.cli import main


def _exit(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """The exit status of ``ctxbudget ARGV`` and its one line on stderr."""
    try:
        code = main(argv)
    except SystemExit as e:
        code = e.code  # type: ignore[assignment]
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err
    assert isinstance(code, int)
    return code, lines[0]


@pytest.fixture
def ws(tmp_path: Path) -> Path:
    ws = tmp_path / "ws"
    fill_two_windows(History.open(ws, durability="none"))
    return ws


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["count"], "give FILE arguments"),
        (["count", "--encoding", "no_such_encoding", "--sample"], "no_such_encoding"),
        (["history", "list"], "name the transcript"),
        (["history", "list", "{ws}", "--conversation", "c"], "--conversation applies to --store"),
        (["history", "export", "{ws}", "--json"], "drop --json"),
        (["history", "search", "{ws}", ""], "QUERY"),
        (["history", "list", "--store", "{ws}", "--conversation", "c"], "postgresql:// URL"),
        (["history", "list", "--store", "postgresql://u@h/db"], "--conversation ID"),
        (
            ["history", "list", "{ws}", "--store", "postgresql://u@h/db", "--conversation", "c"],
            "not both",
        ),
        (["history", "items", "{ws}", "--window", "7"], "w:0"),
        (["history", "read", "{ws}", "x"], "item ID"),
        (["history", "items", "{ws}", "--limit", "0"], "--limit"),
        (["plot", "postgresql://u@h/db"], "--conversation ID"),
        (["plot", "{ws}", "--store", "postgresql://u@h/db"], "not both"),
        (["plot", "{ws}", "--threshold", "2"], "threshold"),
        (["count", "--model", "m", "--encoding", "o200k_base", "--sample"], "not allowed"),
        (["history", "verify", "{ws}", "--store", "postgres://u@h/d"], "not both"),
    ],
)
def test_invalid_arguments_exit_2(
    argv: list[str], says: str, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, line = _exit([a.format(ws=ws) for a in argv], capsys)
    assert code == 2, line
    assert says in line and line.startswith("ctxbudget")


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["history", "read", "{ws}", "99999"], "ctxbudget history items {ws}"),
        (["history", "items", "{ws}", "--window", "w:99999"], "ctxbudget history list {ws}"),
        (["history", "list", "{ws}/nothing-here"], "has no history/ directory"),
        (["plot", "{ws}/nothing-here"], "has no history/ directory"),
        (["count", "{ws}/no-such-file"], "cannot read"),
    ],
)
def test_failures_exit_1_and_say_what_to_type(
    argv: list[str], says: str, ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, line = _exit([a.format(ws=ws) for a in argv], capsys)
    assert code == 1, line
    assert says.format(ws=ws) in line
    assert "list_windows" not in line and "list_items" not in line, "tool actions are no commands"


def test_a_damaged_transcript_fails_verify_with_1(
    ws: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = ws / "history" / "chat.jsonl"
    data = bytearray(chat.read_bytes())
    data[40] ^= 0x01
    chat.write_bytes(bytes(data))
    assert main(["history", "verify", str(ws)]) == 1
    assert "NOT OK" in capsys.readouterr().out


def test_an_empty_transcript_lists_nothing_and_succeeds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    History.open(tmp_path / "empty", durability="none")
    assert main(["history", "list", str(tmp_path / "empty")]) == 0
    assert "no windows" in capsys.readouterr().out


def test_database_errors_exit_1_and_argument_errors_2(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    down = f"postgresql://u:Zz9-s3cr3t@127.0.0.1:{port}/db?password=Zz9-s3cr3t"
    code, line = _exit(["history", "list", "--store", down, "--conversation", "c"], capsys)
    assert code == 1 and "PostgreSQL" in line and "s3cr3t" not in line
    bad = pg_url + ("&" if "?" in pg_url else "?") + "no_such_parameter=1"
    code, line = _exit(["history", "list", "--store", bad, "--conversation", "c"], capsys)
    assert code == 2 and "no_such_parameter" in line
    missing = f"missing-{uuid.uuid4().hex}"
    code, line = _exit(["history", "list", "--store", pg_url, "--conversation", missing], capsys)
    assert code == 1 and "does not exist" in line and missing in line
    code, line = _exit(["history", "recover", "--store", pg_url, "--conversation", "c"], capsys)
    assert code == 2 and "nothing to recover" in line


def test_an_empty_conversation_is_not_said_to_be_mistyped(
    pg_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    name = f"empty-{uuid.uuid4().hex}"
    History.open(pg_url, conversation=name)  # exists, no rows yet
    assert main(["history", "list", "--store", pg_url, "--conversation", name]) == 0
    assert "no windows" in capsys.readouterr().out
