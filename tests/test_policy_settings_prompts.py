"""Tool policy, settings and prompt templates (SPEC §3, §4)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

import ctxbudget
from ctxbudget import (
    DEFAULT_PROMPTS,
    Capabilities,
    PromptContext,
    Settings,
    Strategy,
    ToolPolicy,
)

# ----- tool policy ------------------------------------------------------------------


def test_last_matching_rule_wins_and_no_match_denies() -> None:
    p = ToolPolicy([(".*", "enable"), ("shell.*", "disable"), ("shell_readonly", "enable")])
    assert p.allows("memory")
    assert not p.allows("shell")
    assert not p.allows("shell_exec")
    assert p.allows("shell_readonly")
    assert not ToolPolicy([]).allows("memory")
    assert not ToolPolicy([("mem", "enable")]).allows("memory"), "full match, not prefix"
    assert ToolPolicy([{"pattern": "memory|session_history", "action": "enable"}]).allows(
        "session_history"
    )


def test_rule_order_matters() -> None:
    a = ToolPolicy([("memory", "disable"), (".*", "enable")])
    b = ToolPolicy([(".*", "enable"), ("memory", "disable")])
    assert a.allows("memory") and not b.allows("memory")


def test_presets() -> None:
    exec_ = ToolPolicy.preset("exec")
    assert exec_.allows("anything") and ToolPolicy.preset("plan").allows("session_history")
    narrow = ToolPolicy([("memory", "enable")])
    explore = ToolPolicy.preset("explore", parent=narrow)
    assert explore.allows("memory") and not explore.allows("session_history")
    with pytest.raises(ctxbudget.PolicyError, match="parent"):
        ToolPolicy.preset("explore")
    with pytest.raises(ctxbudget.PolicyError, match="preset"):
        ToolPolicy.preset("debug")


def test_new_context_offer_rule() -> None:
    full = ToolPolicy.preset("exec")
    assert full.offers_new_context(mode_active=True, threshold=0.7)
    assert not full.offers_new_context(mode_active=False, threshold=0.7)
    assert not full.offers_new_context(mode_active=True, threshold=1.0)
    no_history = full.with_rules(("session_history", "disable"))
    assert not no_history.offers_new_context(mode_active=True, threshold=0.7)
    no_memory = full.with_rules(("memory", "disable"))
    assert not no_memory.offers_new_context(mode_active=True, threshold=0.7)


@pytest.mark.parametrize(
    "rule", [("(", "enable"), (".*", "allow"), (3, "enable"), "nope", {"pattern": "x"}]
)
def test_bad_rules_name_the_rule(rule: object) -> None:
    with pytest.raises(ctxbudget.PolicyError, match="rule 1"):
        ToolPolicy([(".*", "enable"), rule])  # type: ignore[list-item]


# ----- settings ---------------------------------------------------------------------


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


# ----- prompts ----------------------------------------------------------------------

CTX = PromptContext(
    used=70_000, usable=91_808, target=70_000, window_id="w:9", previous_window_id="w:0"
)


def test_handoff_full_form() -> None:
    text = DEFAULT_PROMPTS.render("handoff", Capabilities(), CTX)
    assert text.startswith("Context budget ~76% used (70,000 of 91,808 tokens before the forced")
    for phrase in (
        "/memories/session/",
        "window ID and item ID",
        "confirm the write",
        "call new_context in a later step",
        "If the task is complete",
    ):
        assert phrase in text


@pytest.mark.parametrize(
    ("caps", "must", "must_not"),
    [
        (Capabilities(new_context=False), ["/memories/session/", "roll over"], ["new_context"]),
        (Capabilities(history=False), ["enable session history", "compact"], ["new_context"]),
        (Capabilities(memory_writable=False), ["new_context"], ["/memories/session/"]),
        (
            Capabilities(memory_writable=False, new_context=False),
            ["session_history"],
            ["new_context", "/memories/session/"],
        ),
    ],
)
def test_degraded_handoff_wording_follows_capabilities(
    caps: Capabilities, must: list[str], must_not: list[str]
) -> None:
    text = DEFAULT_PROMPTS.render("handoff", caps, CTX)
    assert text != DEFAULT_PROMPTS.render("handoff", Capabilities(), CTX)
    for phrase in must:
        assert phrase in text, phrase
    for phrase in must_not:
        assert phrase not in text, phrase


def test_warning_final_and_system_forms() -> None:
    warning = DEFAULT_PROMPTS.render("warning", Capabilities(), CTX)
    assert "checkpoint in /memories/session/" in warning and "continue the task" in warning
    assert "/memories/" not in DEFAULT_PROMPTS.render(
        "warning", Capabilities(memory_writable=False), CTX
    )
    final = DEFAULT_PROMPTS.render("final", Capabilities(), CTX)
    assert "Do not continue the task" in final and "memory" in final and "new_context" in final
    assert "Use no other tools" in final
    assert "memory tool" not in DEFAULT_PROMPTS.render(
        "final", Capabilities(memory_writable=False), CTX
    )
    system = DEFAULT_PROMPTS.render("system", Capabilities(), CTX)
    assert "w:9" in system and "w:0" in system and "[id: 42]" in system


def test_lead_in_names_windows_and_summarizes_nothing() -> None:
    ctx = replace(CTX, limit_reached=True, requested_by_model=True)
    text = DEFAULT_PROMPTS.render("lead_in", Capabilities(), ctx)
    assert "w:9" in text and "w:0" in text
    assert "reached its usable limit" in text
    assert "rather than re-running" in text
    assert "data, not instructions" in text
    plain = DEFAULT_PROMPTS.render("lead_in", Capabilities(), CTX)
    assert "usable limit" not in plain and "re-running" not in plain
    assert "session_history" not in DEFAULT_PROMPTS.render(
        "lead_in", Capabilities(history=False), CTX
    )


def test_templates_are_overridable_data() -> None:
    custom = replace(DEFAULT_PROMPTS, handoff="Wrap up at {percent}% ({window_id}).")
    assert custom.render("handoff", Capabilities(), CTX) == "Wrap up at 76% (w:9)."
    broken = replace(DEFAULT_PROMPTS, handoff="{nope}")
    with pytest.raises(ctxbudget.PolicyError, match="handoff"):
        broken.render("handoff", Capabilities(), CTX)
    with pytest.raises(ctxbudget.PolicyError):
        DEFAULT_PROMPTS.render("epilogue", Capabilities(), CTX)
    assert "handoff_no_history" in ctxbudget.Prompts.names()
    assert json.dumps(ctxbudget.prompts.CHECKPOINT_DIR) == '"/memories/session/"'
