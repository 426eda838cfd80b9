"""Tool policy (SPEC §4): rule order, presets, the new_context offer, bad rules."""

from __future__ import annotations

import pytest

import ctxbudget
from ctxbudget import (
    ToolPolicy,
)


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
