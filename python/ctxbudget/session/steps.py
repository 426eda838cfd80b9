"""The writes :meth:`Session.prepare` decides on, each one store operation applied only
if the transcript still ends where the decision was made (``if_last_seq``): publish an
advisory, seal the window with its lead-in (rollover), quarantine an oversized message,
and record interrupted results for calls a stopped process left open. A
:class:`~ctxbudget.ConflictError` from any of them means another writer appended first;
the caller re-reads and decides again."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..policy import Claims, CountSplit, Decision
from ..prompts import Capabilities, PromptContext
from ..window import OpenCall
from .accounting import text_of
from .anchoring import Measured, Sent, calibration_meta
from .types import INTERRUPTED_OUTPUT, Turn

if TYPE_CHECKING:
    from ..history import Row
    from .loop import Session

__all__ = [
    "fresh_request_tokens",
    "interrupt",
    "interrupted_rows",
    "publish_advisory",
    "quarantine",
    "rollover",
    "turn",
]

_CONTINUE_TEXT = "Continue the task from your checkpoint in /memories/session/."
_ID_PLACEHOLDER = "w:0000000"
"""Window ID a fresh-window estimate renders (no shorter than a real one's tokens)."""


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


def interrupt(s: Session, calls: list[OpenCall]) -> list[OpenCall]:
    """Records interrupted results for ``calls`` (one conditional append)."""
    if calls:
        s._append(interrupted_rows(calls), if_last_seq=s._fold.last_seq)
    return calls


def lead_in_text(s: Session, window_id: str, reason: str, previous: str | None = None) -> str:
    """The lead-in of window ``window_id`` opened for ``reason`` after ``previous``
    (default: the current window)."""
    ctx = PromptContext(
        window_id=window_id,
        previous_window_id=previous if previous is not None else s._fold.window_id,
        limit_reached=reason == "usable_limit",
        requested_by_model=reason == "new_context",
    )
    return s.prompts.render("lead_in", s._capabilities(), ctx)


def fresh_request_tokens(s: Session, trigger_parts: Sequence[Mapping[str, Any]]) -> int:
    """Tokens of the first request of a fresh window opened by ``trigger_parts``."""
    trigger: dict[str, Any] = {
        "role": "user",
        "content": text_of(trigger_parts) + "\n\n[id: 0000000]",
        # The trigger's images and documents count too (as row_messages sends them).
        "media": [p for p in trigger_parts if p.get("type") == "media"],
    }
    messages = [
        {"role": "user", "content": lead_in_text(s, _ID_PLACEHOLDER, "usable_limit")},
        trigger,
    ]
    return s.count_request(s._requests.system(s, s._fold, s._hooks), messages, s._requests.tools())


def quarantine(s: Session, last_user: Row, fresh: CountSplit, events: list[str]) -> Turn:
    """Hides the user's message and stores it as a rejected request: one store
    operation (the retraction and the quarantine row, read and written as one batch)."""
    s.history.quarantine_seq(last_user.seq, if_last_seq=s._fold.last_seq)
    s._sync()
    decision = s.budget.evaluate(fresh.total, Claims(), s._capabilities().new_context, count=fresh)
    margin = f" (with {fresh.margin:,} kept for its estimated part)" if fresh.margin else ""
    return turn(
        s,
        "reject",
        decision,
        [*events, "quarantined"],
        reason=f"the message alone needs {fresh.total:,} tokens{margin}; the usable "
        f"limit is {s.budget.usable_limit:,}",
    )


def _trigger(s: Session) -> dict[str, Any]:
    """The message that opens the new window: the pending user message (if the window
    ends with one) or a plain continuation."""
    visible = [r for r in s._fold.visible_rows() if r.kind == "message"]
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


def rollover(s: Session, reason: str, events: list[str]) -> Turn | None:
    """Seals the window (boundary + lead-in + trigger, one batch, only if no other
    writer appended since this decision) if admitted; returns a ``pause`` turn if not."""
    caps = s._capabilities()
    fold = s._fold
    decision = s.budget.evaluate(s._projected(), fold.claims, caps.new_context)
    if any(not h.context_only for h in s._hooks):
        return turn(
            s,
            "pause",
            decision,
            events,
            reason="an unrestricted request hook is registered: it could change the "
            "toolset of the sealed window",
        )
    if not caps.history:
        return turn(
            s,
            "pause",
            decision,
            events,
            reason="session_history is not allowed: sealing the window would lose its context",
        )
    trigger = _trigger(s)
    fresh = s._counting.fresh(s, fresh_request_tokens(s, trigger["parts"]))
    if fresh.total + fresh.margin >= s.budget.usable_limit:
        return turn(
            s, "pause", decision, events, reason="the fresh window would not fit the request"
        )
    rollover_id = f"{fold.window_id}:{reason}:{uuid.uuid4().hex[:12]}"

    def lead_in(window_id: str, previous: str) -> str:
        # Rendered by the store under its lock, with the IDs this rollover writes.
        return lead_in_text(s, window_id, reason, previous)

    s.history.rollover(
        rollover_id=rollover_id,
        reason=reason,
        requested_by="model" if reason == "new_context" else None,
        lead_in=lead_in,
        trigger=trigger,
        figures={
            "projected": decision.projected,
            "budget_tokens": s.budget.usable_limit,
            **calibration_meta(s),
        },
        if_last_seq=fold.last_seq,
    )
    s._sync()
    events.append(f"rollover:{fold.window_id}")
    return None


def publish_advisory(s: Session, decision: Decision, caps: Capabilities) -> None:
    """Appends the advisory row of ``decision`` (one conditional append)."""
    fold = s._fold
    ctx = PromptContext(
        used=decision.projected,
        usable=s.budget.usable_limit,
        target=s.budget.handoff_target,
        window_id=fold.window_id,
        previous_window_id=fold.previous_window_id,
    )
    text = s.prompts.render(decision.action.value, caps, ctx)
    meta = {
        "stage": decision.action.value,
        "projected": decision.projected,
        "budget_tokens": s.budget.usable_limit,
    }
    s._append(
        [
            {
                "kind": "advisory",
                "role": "user",
                "parts": [{"type": "text", "text": text}],
                "meta": meta,
            }
        ],
        if_last_seq=fold.last_seq,
    )


def turn(
    s: Session,
    status: str,
    decision: Decision,
    events: list[str],
    reason: str | None = None,
    measured: Measured | None = None,
) -> Turn:
    """The :class:`Turn` of ``status``: a ``send`` carries the request (assembled now
    unless measured already), the others only the system text."""
    hooks = tuple(s._hooks)  # the snapshot for this turn and its retries
    s._sent = None
    events = [*events, *s._counting.drain()]
    request = measured.request if measured is not None else None
    if status == "send" and measured is not None:
        s._sent = Sent(
            window=s._fold.window_id,
            tokens=decision.projected,
            profile=measured.profile,
            overhead=measured.overhead,
            last_seq=s._fold.last_seq,
            rows=s._window.rows,
            fingerprint=measured.fingerprint,
        )
        if request is None:
            request = s._requests.assemble(s, s._fold, s._window, hooks)
    else:
        request = {"system": s._requests.system(s, s._fold, hooks), "messages": [], "tools": []}
    return Turn(
        status=status,
        decision=decision,
        window_id=s._fold.window_id,
        previous_window_id=s._fold.previous_window_id,
        messages=request["messages"],
        system=request["system"],
        tools=request["tools"],
        events=list(events),
        reason=reason,
        hooks=hooks,
    )
