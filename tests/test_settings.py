"""Settings (SPEC §4): strategy, per-model thresholds, atomic save, corrupt files."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

import ctxbudget
from ctxbudget import (
    Settings,
    Strategy,
)


def test_effective_strategy_needs_both_experiments() -> None:
    s = Settings(strategy=Strategy.TOKEN_BUDGET, experiments=frozenset({"token_budget"}))
    assert s.strategy is Strategy.TOKEN_BUDGET, "the preference is kept"
    assert s.effective_strategy is Strategy.SUMMARIZE
    both = replace(s, experiments=frozenset({"token_budget", "agent_memory"}))
    assert both.effective_strategy is Strategy.TOKEN_BUDGET
    assert Settings().effective_strategy is Strategy.SUMMARIZE


def test_thresholds_per_model_and_budget() -> None:
    s = Settings(default_threshold=0.6).with_threshold("gpt-4o", 0.05)
    assert s.threshold_for("gpt-4o") == 0.05 and s.threshold_for("other") == 0.6
    assert s.budget_for("gpt-4o", 100_000).handoff_target == 10_000, "below 10% evaluates as 10%"


def test_round_trip_and_atomic_save(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "settings.json"
    s = Settings(
        Strategy.TOKEN_BUDGET, frozenset({"agent_memory", "token_budget"}), 0.8, {"gpt-4o": 0.5}
    )
    s.save(path)
    assert Settings.load(path) == s
    assert list(path.parent.iterdir()) == [path], "no temporary files left behind"
    assert Settings.load(tmp_path / "missing.json", missing_ok=True) == Settings()
    with pytest.raises(ctxbudget.SettingsError, match="does not exist"):
        Settings.load(tmp_path / "missing.json")


@pytest.mark.parametrize(
    ("content", "field"),
    [
        ('{"strategy": "fast"}', "strategy"),
        ('{"thresholds": {"gpt-4o": 1.5}}', "thresholds['gpt-4o']"),
        ('{"thresholds": {"gpt-4o": "high"}}', "thresholds['gpt-4o']"),
        ('{"default_threshold": null}', "default_threshold"),
        ('{"experiments": "token_budget"}', "experiments"),
        ('{"color": "blue"}', "color"),
        ("{not json", "<file>"),
        ("[1, 2]", "<root>"),
    ],
)
def test_corrupt_file_names_the_field_and_is_kept(tmp_path: Path, content: str, field: str) -> None:
    path = tmp_path / "settings.json"
    Settings(default_threshold=0.9).save(path)
    good = path.read_bytes()
    path.write_text(content)
    with pytest.raises(ctxbudget.SettingsError) as info:
        Settings.load(path)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)
    assert str(path) in str(info.value)
    assert path.read_text() == content, "an invalid file is never rewritten"
    path.write_bytes(good)
    assert Settings.load(path).default_threshold == 0.9


def test_invalid_values_in_code_are_errors() -> None:
    with pytest.raises(ctxbudget.SettingsError, match="default_threshold"):
        Settings(default_threshold=2.0)
    with pytest.raises(ctxbudget.SettingsError, match="strategy"):
        Settings(strategy="fast")  # type: ignore[arg-type]
