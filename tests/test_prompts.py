"""Prompt templates (SPEC §3): handoff, warning, final and system forms, the lead-in."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

import ctxbudget
from ctxbudget import (
    DEFAULT_PROMPTS,
    Capabilities,
    PromptContext,
)

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
