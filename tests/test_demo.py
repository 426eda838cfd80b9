"""``ctxbudget demo``: a short story a newcomer reads in a minute, every step on request."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from ctxbudget.budget_record import read_budgets
from ctxbudget.cli import main

STEP_ROW = re.compile(r"^\s*(\d+)\s+(w:\d+)\s+([\d,]+)\s+([\d.]+)%")


@pytest.fixture(scope="module")
def story(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The default demo (both agents, 90 steps), run once for this module."""
    import contextlib
    import io

    root = tmp_path_factory.mktemp("demo")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        assert main(["demo", "--workspace", str(root)]) == 0
    return root, buf.getvalue()


def test_default_output_is_short(story: tuple[Path, str]) -> None:
    _, out = story
    lines = out.splitlines()
    assert len(lines) <= 70, f"{len(lines)} lines: a newcomer reads it in a minute"
    rows = [m for line in lines if (m := STEP_ROW.match(line))]
    assert 4 <= len(rows) <= 30, "only the steps where something happens"
    assert "steps reading files" in out or "step(s) reading files" in out, "skips are said"
    assert "--verbose" in out


def test_every_rung_is_told(story: tuple[Path, str]) -> None:
    _, out = story
    for words in (
        "warning advisory",
        "handoff request",
        "final prompt",
        "writes its checkpoint",
        "calls new_context",
        "rollover, as the agent asked",
        "lead-in",
        "forced rollover at the usable limit",
        "session_history: found 'the deploy key lives in vault/prod-7731'",
    ):
        assert words in out, words


def test_window_ids_are_explained(story: tuple[Path, str]) -> None:
    _, out = story
    assert "A window ID such as w:" in out and "w:0 is the first" in out


def test_next_commands_are_given_and_run(
    story: tuple[Path, str], capsys: pytest.CaptureFixture[str]
) -> None:
    root, out = story
    suggested = [
        line.split("#")[0].strip()
        for line in out.splitlines()
        if line.strip().startswith("ctxbudget history")
    ]
    assert any(c.startswith("ctxbudget history list") for c in suggested)
    assert "ctxbudget plot" in out
    assert "Python" not in out.split("Try next")[-1], "next steps are commands, not classes"
    for command in suggested:
        argv = shlex.split(command)[1:]
        assert main(argv) == 0, command
    capsys.readouterr()


def test_peak_matches_the_rows(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        main(
            [
                "demo",
                "--workspace",
                str(tmp_path),
                "--agent",
                "stubborn",
                "--steps",
                "60",
                "--verbose",
            ]
        )
        == 0
    )
    out = capsys.readouterr().out
    rows = [m for line in out.splitlines() if (m := STEP_ROW.match(line))]
    assert [int(m.group(1)) for m in rows] == list(range(1, 61)), "--verbose: every step"
    highest = max(float(m.group(4)) for m in rows)
    summary = out.split("Summary")[1].splitlines()
    stubborn = next(line for line in summary if line.startswith("stubborn"))
    assert f"{highest:.1f}%" in stubborn.split(), "the summary's peak is the highest row"


def test_session_records_its_budget(story: tuple[Path, str]) -> None:
    root, _ = story
    for agent in ("cooperative", "stubborn"):
        (record,) = read_budgets(root / agent)
        assert (record.context_window, record.threshold, record.output_reserve) == (
            64_000,
            0.7,
            8_192,
        )
        assert (record.model, record.encoding, record.since_window) == (
            "gpt-4o",
            "o200k_base",
            "w:0",
        )
