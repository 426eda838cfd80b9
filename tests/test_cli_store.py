"""``ctxbudget history … --store postgresql://… --conversation ID``: every subcommand that
reads a transcript gives over a PostgreSQL conversation what it gives over a workspace
holding the same rows; ``recover`` (files only) and bad combinations of arguments are
one-line errors."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from history_helpers import fill_two_windows
from stores import new_conversation_id

from ctxbudget import History, InvalidArgumentError
from ctxbudget.cli import main


@pytest.fixture
def both(pg_url: str, tmp_path: Path) -> dict[str, list[str]]:
    """The same transcript in a workspace and in a PostgreSQL conversation, as the
    arguments that name each."""
    ws = tmp_path / "ws"
    fill_two_windows(History.open(ws, durability="none"))
    conversation = f"cli-{uuid.uuid4().hex}"
    fill_two_windows(History.open(pg_url, conversation=conversation))
    return {
        "workspace": [str(ws)],
        "postgresql": ["--store", pg_url, "--conversation", conversation],
    }


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


@pytest.mark.parametrize(
    "command",
    [
        ["list", "--json"],
        ["items", "--json"],
        ["items", "--window", "w:0", "--json"],
        ["search", "DEPLOY", "--json"],
        ["read", "4"],
        ["read", "1", "--json"],
    ],
    ids=lambda c: "-".join(c),
)
def test_history_commands_read_a_conversation_as_a_workspace(
    both: dict[str, list[str]], capsys: pytest.CaptureFixture[str], command: list[str]
) -> None:
    name, *rest = command
    outs = {store: _run(capsys, "history", name, *args, *rest) for store, args in both.items()}
    assert outs["postgresql"] == outs["workspace"]
    assert outs["postgresql"][0] == 0 and outs["postgresql"][1].strip()


def test_history_tables_name_the_conversation_in_next_steps(
    both: dict[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _run(capsys, "history", "list", *both["postgresql"])
    assert code == 0 and "w:0" in out and "rollover" in out
    assert f"next: ctxbudget history items --store {both['postgresql'][1]}" in out
    code, out = _run(capsys, "history", "search", *both["postgresql"], "deploy")
    assert code == 0 and "the deploy key is in vault" in out
    assert "next: ctxbudget history read --store" in out
    with pytest.raises(SystemExit, match="no item 99 in postgresql conversation"):
        main(["history", "read", *both["postgresql"], "99"])


def test_history_export_and_verify(
    both: dict[str, list[str]], capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    exported: dict[str, list[Any]] = {}
    for store, args in both.items():
        out = tmp_path / f"{store}.jsonl"
        assert main(["history", "export", *args, "-o", str(out)]) == 0
        exported[store] = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["kind"] for r in exported["postgresql"]] == [
        "message",
        "boundary",
        "lead_in",
        "message",
    ]
    strip = ("ts", "id", "meta")  # stamped when each store wrote its rows
    assert [{k: v for k, v in r.items() if k not in strip} for r in exported["postgresql"]] == [
        {k: v for k, v in r.items() if k not in strip} for r in exported["workspace"]
    ]
    code, out = _run(capsys, "history", "verify", *both["postgresql"])
    assert code == 0 and out.rstrip().endswith("OK") and "NOT OK" not in out
    assert "live rows: 4 rows" in out
    code, out = _run(capsys, "history", "verify", *both["postgresql"], "--json")
    assert code == 0 and json.loads(out)["ok"] is True


def test_a_url_in_place_of_the_workspace_works_too(
    both: dict[str, list[str]], capsys: pytest.CaptureFixture[str]
) -> None:
    url, conversation = both["postgresql"][1], both["postgresql"][3]
    code, out = _run(
        capsys, "history", "search", url, "deploy", "--conversation", conversation, "--json"
    )
    assert code == 0 and [i["item_id"] for i in json.loads(out)] == ["1"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["history", "recover", "--store", "{url}", "--conversation", "c"], "nothing to recover"),
        (["history", "list", "--store", "{url}"], "name one with --conversation ID"),
        (["history", "list", "{ws}", "--conversation", "c"], "--conversation applies to --store"),
        (["history", "list", "{ws}", "--store", "{url}", "--conversation", "c"], "not both"),
        (["history", "list", "--store", "/var/db", "--conversation", "c"], "postgresql:// URL"),
        (["history", "list"], "a WORKSPACE directory, or --store"),
        (
            ["history", "list", "--store", "{url}", "--conversation", "no-such-{uid}"],
            "does not exist",
        ),
    ],
)
def test_store_argument_errors_are_one_line(
    pg_url: str, tmp_path: Path, argv: list[str], message: str
) -> None:
    ws = tmp_path / "ws"
    History.open(ws, durability="none")
    args = [a.format(url=pg_url, ws=ws, uid=uuid.uuid4().hex) for a in argv]
    with pytest.raises(SystemExit, match=message) as err:
        main(args)
    assert "\n" not in str(err.value)


def test_reading_a_mistyped_conversation_creates_nothing(pg_url: str) -> None:
    name = f"never-written-{uuid.uuid4().hex}"
    with pytest.raises(SystemExit, match="does not exist"):
        main(["history", "list", "--store", pg_url, "--conversation", name])
    with pytest.raises(InvalidArgumentError, match="does not exist"):
        History.open(pg_url, conversation=name, create=False)
    # Opening it to write creates it; then a reader finds it.
    History.open(pg_url, conversation=name)
    assert History.open(pg_url, conversation=name, create=False).conversation == name


def test_a_password_in_the_url_is_not_printed(capsys: pytest.CaptureFixture[str]) -> None:
    from ctxbudget._redact import redact

    shown = redact("postgresql://app:s3cret@db:5432/app?sslmode=require&password=s3cret")
    assert shown == "postgresql://app:***@db:5432/app?sslmode=require&password=***"
    assert redact("postgresql://app@db/app") == "postgresql://app@db/app"


def test_plot_and_list_use_a_conversations_recorded_budget(
    pg_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A PostgreSQL conversation keeps its budget record in the database: ``history
    list`` shows it, ``plot --store URL --conversation ID`` draws its ladder, and a
    delete removes it with the conversation."""
    from ctxbudget import Session
    from ctxbudget.budget_record import read_budgets

    conversation = new_conversation_id("plot")
    s = Session.open(pg_url, conversation=conversation, context_window=50_000, threshold=0.6)
    s.add_user("hello")
    s.prepare()
    s.add_assistant("hi there")
    [record] = read_budgets(s.history)
    assert (record.context_window, record.threshold) == (50_000, 0.6)
    assert record.request_overhead  # the session's frame, per window
    capsys.readouterr()
    assert main(["history", "list", "--store", pg_url, "--conversation", conversation]) == 0
    assert "budget: 50,000-token window" in capsys.readouterr().out
    out = tmp_path / "u.png"
    args = ["plot", "--store", pg_url, "--conversation", conversation, "-o", str(out)]
    assert main(args) == 0
    assert out.stat().st_size > 0 and "recorded by the session" in capsys.readouterr().out
    assert History.delete(pg_url, conversation=conversation).other_files == 1
    with pytest.raises(SystemExit):
        main(["plot", pg_url, "-o", str(tmp_path / "v.png")])  # no --conversation
    assert "--conversation" in capsys.readouterr().err
