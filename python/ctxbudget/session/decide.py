"""What :meth:`Session.prepare` decides, in SPEC §2's order: resolve calls a stopped
process left open, quarantine a message that cannot fit even a fresh window, perform a
rollover the model asked for, evaluate the budget on the measured request, roll over at
the usable limit, publish a due advisory — each write one step of :mod:`.steps`."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from ..policy import Action, Decision
from . import steps
from .anchoring import Measured
from .steps import turn
from .types import Turn

if TYPE_CHECKING:
    from .loop import Session

__all__ = ["decide"]


def decide(s: Session, events: list[str]) -> Turn:
    """The turn for the next request (raises ConflictError if another writer appended
    before one of its writes; the caller re-reads and decides again)."""
    caps = s._capabilities()
    fold = s._fold
    open_calls = fold.open_calls

    # Tool calls left open by a process that stopped mid-step.
    if open_calls and s._open_call_policy == "wait":
        ids = ", ".join(c.id for c in open_calls)
        return turn(
            s,
            "pause",
            s.budget.evaluate(s._projected(), fold.claims, caps.new_context),
            events,
            reason=f"tool calls {ids} have no result yet: record them with "
            "add_tool_results() or resolve them with interrupt_open_calls()",
        )
    left_open = [c for c in open_calls if c.id in s._left_open]
    if left_open and s._open_call_policy == "interrupt":
        events.extend(f"interrupted:{c.id}" for c in steps.interrupt(s, left_open))

    # A request that could not fit even in a fresh window is quarantined first.
    last_user = fold.last_user
    if (
        last_user is not None
        and not fold.is_retracted(last_user.seq)
        and last_user.seq not in s._fresh_checked
    ):
        fresh = s._counting.fresh(s, steps.fresh_request_tokens(s, last_user.parts))
        if fresh.total + fresh.margin >= s.budget.usable_limit:
            return steps.quarantine(s, last_user, fresh, events)
        s._fresh_checked.add(last_user.seq)

    # A rollover the model asked for happens once the step has settled.
    if fold.new_context_scheduled and not fold.open_calls:
        paused = steps.rollover(s, "new_context", events)
        if paused is not None:
            return paused

    measured = s._measure()
    decision = _evaluate(s, measured)
    if decision.action is Action.BLOCK:
        return turn(s, "block", decision, events, reason="the usable limit is reached")
    if decision.action is Action.ROLLOVER:
        if fold.open_calls:
            return turn(s, "pause", decision, events, reason="a tool step is still open")
        paused = steps.rollover(s, "usable_limit", events)
        if paused is not None:
            return paused
        measured = s._measure()
        decision = _evaluate(s, measured)
    if decision.is_advisory:
        steps.publish_advisory(s, decision, caps)
        events.append(f"advisory:{decision.action.value}")
        measured = s._measure()
        decision = replace(decision, projected=measured.split.total, count=measured.split)
    return turn(s, "send", decision, events, measured=measured)


def _evaluate(s: Session, measured: Measured) -> Decision:
    """The budget's decision on a measured request (its estimated part guarded)."""
    count = measured.split
    return s.budget.evaluate(
        count.total, s._fold.claims, s._capabilities().new_context, count=count
    )
