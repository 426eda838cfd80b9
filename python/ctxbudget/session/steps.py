"""The writes :meth:`Session.prepare` decides on, as values a decision returns and the
session applies: record interrupted results for calls a stopped process left open,
quarantine an oversized message, seal the window with its lead-in (rollover), publish
an advisory. Each is applied as one store operation, only if the transcript still ends
where the decision was made (``if_last_seq``); a :class:`~ctxbudget.ConflictError` means
another writer appended first, and the session re-reads and decides again.

Building them reads the window state and the decision's inputs only (no store)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ..policy import Decision
from ..prompts import PromptContext
from ..window import OpenCall
from .accounting import text_of
from .types import INTERRUPTED_OUTPUT

if TYPE_CHECKING:
    from ..window import WindowFold
    from .state import Inputs, WindowState

__all__ = [
    "Advisory",
    "Interrupt",
    "Quarantine",
    "Rollover",
    "RolloverReason",
    "Write",
    "advisory",
    "fresh_request_tokens",
    "interrupted_rows",
    "lead_in_text",
    "trigger",
]

RolloverReason = Literal["new_context", "usable_limit"]
"""Why a window is sealed: the model asked (``new_context``) or the usable limit."""

_CONTINUE_TEXT = "Continue the task from your checkpoint in /memories/session/."
_ID_PLACEHOLDER = "w:0000000"
"""Window ID a fresh-window estimate renders (no shorter than a real one's tokens)."""


@dataclass(frozen=True)
class Interrupt:
    """Record :data:`INTERRUPTED_OUTPUT` for ``calls`` (one conditional append)."""

    calls: tuple[OpenCall, ...]

    def rows(self) -> list[dict[str, Any]]:
        """The rows this write appends."""
        return interrupted_rows(self.calls)


@dataclass(frozen=True)
class Quarantine:
    """Hide user message ``seq`` and store it as a rejected request (the retraction and
    the quarantine row, one batch)."""

    seq: int


@dataclass(frozen=True)
class Rollover:
    """Seal the window: a boundary, the new window's lead-in (rendered by ``lead_in``
    under the store's lock, with the IDs the rollover writes) and ``trigger``, one
    batch."""

    reason: RolloverReason
    trigger: dict[str, Any]
    figures: dict[str, Any]
    """What the boundary records: the projection, the usable limit, calibration."""
    inputs: Inputs = field(repr=False)
    """What the lead-in is rendered with."""

    def lead_in(self, window_id: str, previous: str) -> str:
        """The lead-in of window ``window_id`` opened after ``previous``."""
        return lead_in_text(self.inputs, window_id, self.reason, previous)


@dataclass(frozen=True)
class Advisory:
    """Append the advisory row of ``decision`` (one conditional append)."""

    row: dict[str, Any]


Write = Interrupt | Quarantine | Rollover | Advisory
"""One write a decision asks the session to apply."""


def interrupted_rows(calls: Sequence[OpenCall]) -> list[dict[str, Any]]:
    """The rows recording :data:`INTERRUPTED_OUTPUT` for ``calls``."""
    return [
        {
            "kind": "message",
            "role": "tool",
            "parts": [
                {
                    "type": "tool_result",
                    "call_id": c.id,
                    "name": c.name,
                    "output": INTERRUPTED_OUTPUT,
                }
            ],
            "meta": {"interrupted": True},
        }
        for c in calls
    ]


def lead_in_text(inputs: Inputs, window_id: str, reason: str, previous: str | None) -> str:
    """The lead-in of window ``window_id`` opened for ``reason`` after ``previous``."""
    ctx = PromptContext(
        window_id=window_id,
        previous_window_id=previous,
        limit_reached=reason == "usable_limit",
        requested_by_model=reason == "new_context",
    )
    return inputs.prompts.render("lead_in", inputs.capabilities, ctx)


def fresh_request_tokens(
    state: WindowState, inputs: Inputs, trigger_parts: Sequence[Mapping[str, Any]]
) -> int:
    """Tokens of the first request of a fresh window opened by ``trigger_parts``."""
    trigger: dict[str, Any] = {
        "role": "user",
        "content": text_of(trigger_parts) + "\n\n[id: 0000000]",
        # The trigger's images and documents count too (as row_messages sends them).
        "media": [p for p in trigger_parts if p.get("type") == "media"],
    }
    lead_in = lead_in_text(inputs, _ID_PLACEHOLDER, "usable_limit", state.fold.window_id)
    messages = [{"role": "user", "content": lead_in}, trigger]
    requests = state.requests
    system = requests.prefix(inputs, state.fold, inputs.hooks).system
    return requests.count(system, messages, requests.tools())


def trigger(fold: WindowFold) -> dict[str, Any]:
    """The message that opens the new window: the pending user message (if the window
    ends with one) or a plain continuation."""
    visible = [r for r in fold.visible_rows() if r.kind == "message"]
    if visible and visible[-1].role == "user":
        last = visible[-1]
        return {
            "kind": "continuation",
            "role": "user",
            "parts": last.parts,
            "meta": {"continues": last.seq},
        }
    return {
        "kind": "continuation",
        "role": "user",
        "parts": [{"type": "text", "text": _CONTINUE_TEXT}],
    }


def advisory(fold: WindowFold, inputs: Inputs, decision: Decision) -> Advisory:
    """The advisory row of ``decision`` for the window of ``fold``."""
    budget = inputs.budget
    ctx = PromptContext(
        used=decision.projected,
        usable=budget.usable_limit,
        target=budget.handoff_target,
        window_id=fold.window_id,
        previous_window_id=fold.previous_window_id,
    )
    text = inputs.prompts.render(decision.action.value, inputs.capabilities, ctx)
    meta = {
        "stage": decision.action.value,
        "projected": decision.projected,
        "budget_tokens": budget.usable_limit,
    }
    return Advisory(
        {
            "kind": "advisory",
            "role": "user",
            "parts": [{"type": "text", "text": text}],
            "meta": meta,
        }
    )
