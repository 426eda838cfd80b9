"""What :meth:`Session.prepare` decides, in SPEC §2's order: resolve calls a stopped
process left open, quarantine a message that cannot fit even a fresh window, perform a
rollover the model asked for, evaluate the budget on the measured request, roll over at
the usable limit, publish a due advisory.

:func:`decide` is a function of the window state and the inputs: it writes nothing and
calls nothing outside the process. It returns a :class:`Plan` — at most one write
(:mod:`.steps`) and the turn that follows it, or the write alone when the decision
continues on the state the write leaves (the session applies it, reads, and calls
:func:`decide` again with the :class:`Progress` so far). :func:`build_turn` makes the
:class:`Turn` of a plan from the state after its write.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import NamedTuple

from ..policy import ADVISORY_STAGES, Action, Claims, Decision
from . import steps
from .anchoring import CountRequest, Measured, Sent, calibration_meta, measure
from .state import Inputs, WindowState
from .steps import RolloverReason, Write
from .types import Turn, TurnStatus

__all__ = ["CountFirst", "Plan", "Progress", "TurnPlan", "build_turn", "decide"]


class Progress(NamedTuple):
    """What one :meth:`Session.prepare` call has written so far (a decision continues
    from it after each write)."""

    rolled_over: tuple[RolloverReason, ...] = ()


_STARTED = Progress()
_new_tuple = tuple.__new__
_new_object = object.__new__


class TurnPlan(NamedTuple):
    """The turn a plan ends in: its status, the decision and why it is not ``send``
    (a tuple: built on every step)."""

    status: TurnStatus
    decision: Decision
    reason: str | None = None
    measured: Measured | None = None
    """The measurement a ``send`` carries (``None``: measure after the write)."""


@dataclass(frozen=True)
class CountFirst:
    """Count the request with the host's count endpoint before deciding (its result
    is an exact source for the decision)."""

    key: tuple[str, int, int]
    request: CountRequest
    profile: tuple[int, int]


class Plan(NamedTuple):
    """What to do next: apply ``write`` (if any), then end in ``turn`` (if any; else
    decide again on the state the write leaves). ``checked`` is a user message found to
    fit a fresh window (not checked again). A tuple: built on every step."""

    write: Write | CountFirst | None = None
    turn: TurnPlan | None = None
    checked: int | None = None


def decide(
    state: WindowState,
    inputs: Inputs,
    progress: Progress = _STARTED,
    *,
    count_first: bool = False,
) -> Plan:
    """The next step of the decision on ``state``. ``count_first``: before measuring a
    request the session's count endpoint has not counted yet, ask for it
    (:class:`CountFirst`)."""
    fold = state.fold
    budget = inputs.budget
    facts = fold.facts()
    claims, new_context_scheduled = facts[3:5]
    open_calls = fold.open_calls if facts[6] else ()  # facts[6]: how many are open
    checked = None

    # Tool calls left open by a process that stopped mid-step.
    if open_calls and inputs.open_calls == "wait":
        ids = ", ".join(c.id for c in open_calls)
        return Plan(
            turn=TurnPlan(
                "pause",
                budget.evaluate(_projected(state, inputs), claims, _new_context(inputs)),
                reason=f"tool calls {ids} have no result yet: record them with "
                "add_tool_results() or resolve them with interrupt_open_calls()",
            )
        )
    if not progress.rolled_over:
        if open_calls and inputs.open_calls == "interrupt":
            left_open = tuple(c for c in open_calls if c.id in state.left_open)
            if left_open:
                return Plan(steps.Interrupt(left_open))

        # A request that could not fit even in a fresh window is quarantined first.
        last_user = fold.last_user
        if (
            last_user is not None
            and last_user.seq not in state.fresh_checked
            and not fold.is_retracted(last_user.seq)
        ):
            fresh = state.counting.fresh(
                state, inputs, steps.fresh_request_tokens(state, inputs, last_user.parts)
            )
            if fresh.total + fresh.margin >= budget.usable_limit:
                margin = (
                    f" (with {fresh.margin:,} kept for its estimated part)" if fresh.margin else ""
                )
                return Plan(
                    write=steps.Quarantine(last_user.seq),
                    turn=TurnPlan(
                        "reject",
                        budget.evaluate(fresh.total, Claims(), _new_context(inputs), count=fresh),
                        reason=f"the message alone needs {fresh.total:,} tokens{margin}; the "
                        f"usable limit is {budget.usable_limit:,}",
                    ),
                )
            checked = last_user.seq

        # A rollover the model asked for happens once the step has settled.
        if new_context_scheduled and not open_calls:
            return _rollover(state, inputs, "new_context", checked)

    if count_first:
        wanted = state.counting.wanted(state, inputs)
        if wanted is not None:
            return Plan(write=CountFirst(*wanted), checked=checked)
    measured = state.counting.measure(state, inputs)
    count = measured.split
    decision = budget.evaluate(
        count.exact + count.anchored + count.estimated,
        claims,
        inputs.capabilities.new_context,
        count=count,
    )
    action = decision.action
    if action is Action.BLOCK:
        return Plan(
            turn=TurnPlan("block", decision, reason="the usable limit is reached"),
            checked=checked,
        )
    if action is Action.ROLLOVER and "usable_limit" not in progress.rolled_over:
        if open_calls:
            return Plan(
                turn=TurnPlan("pause", decision, reason="a tool step is still open"),
                checked=checked,
            )
        return _rollover(state, inputs, "usable_limit", checked)
    if action in ADVISORY_STAGES:
        return Plan(
            write=steps.advisory(fold, inputs, decision),
            turn=TurnPlan("send", decision),
            checked=checked,
        )
    # The per-step outcome: built as plain tuples (a NamedTuple's __new__ is a Python
    # function; these are the same objects).
    return _new_tuple(
        Plan, (None, _new_tuple(TurnPlan, ("send", decision, None, measured)), checked)
    )


def _new_context(inputs: Inputs) -> bool:
    return inputs.capabilities.new_context


def _projected(state: WindowState, inputs: Inputs) -> int:
    """Tokens of the next request (anchored where an anchor holds); with an
    unrestricted hook registered, of the request before it."""
    return measure(state, inputs, before_hooks=True).split.total


def _rollover(
    state: WindowState, inputs: Inputs, reason: RolloverReason, checked: int | None
) -> Plan:
    """Seal the window (boundary + lead-in + trigger) if admitted, else a ``pause``."""
    fold = state.fold
    budget = inputs.budget
    decision = budget.evaluate(_projected(state, inputs), fold.claims, _new_context(inputs))

    def pause(reason: str) -> Plan:
        return Plan(turn=TurnPlan("pause", decision, reason=reason), checked=checked)

    if any(not h.context_only for h in inputs.hooks):
        return pause(
            "an unrestricted request hook is registered: it could change the "
            "toolset of the sealed window"
        )
    if not inputs.capabilities.history:
        return pause("session_history is not allowed: sealing the window would lose its context")
    trigger = steps.trigger(fold)
    fresh = state.counting.fresh(
        state, inputs, steps.fresh_request_tokens(state, inputs, trigger["parts"])
    )
    if fresh.total + fresh.margin >= budget.usable_limit:
        return pause("the fresh window would not fit the request")
    figures = {
        "projected": decision.projected,
        "budget_tokens": budget.usable_limit,
        **calibration_meta(state),
    }
    return Plan(write=steps.Rollover(reason, trigger, figures, inputs), checked=checked)


def build_turn(
    state: WindowState, inputs: Inputs, plan: TurnPlan, events: list[str]
) -> tuple[Turn, Sent | None]:
    """The :class:`Turn` of ``plan`` on ``state`` (after the plan's write), and for a
    ``send`` the request it sends (the reply's stamp): a ``send`` carries the request
    (assembled now unless measured already), the others only the system text."""
    fold = state.fold
    window_id, previous_window_id, last_seq = fold.facts()[:3]
    hooks = inputs.hooks
    decision = plan.decision
    measured = plan.measured
    sent = None
    if plan.status == "send":
        if measured is None:
            # Measured again after the advisory the plan wrote.
            measured = measure(state, inputs)
            decision = replace(decision, projected=measured.split.total, count=measured.split)
        # Sent(window, tokens, profile, overhead, last_seq, rows, fingerprint,
        # messages_fp, usage), built as a plain tuple (see decide()).
        sent = _new_tuple(
            Sent,
            (
                window_id,
                decision.projected,
                measured.profile,
                measured.overhead,
                last_seq,
                state.tokens.rows,
                measured.fingerprint,
                measured.messages_fp,
                None,
            ),
        )
        request = measured.request
        if request is None:
            # No unrestricted hook (else the measure assembled it): the request is the
            # window's messages, the measured system text and the advertised tools.
            request = {
                "system": measured.system,
                "messages": state.tokens.messages(),
                "tools": state.requests.tools(),
            }
    else:
        request = {
            "system": state.requests.system(inputs, fold, hooks),
            "messages": [],
            "tools": [],
        }
    # The frozen dataclass's __init__ routes each field through object.__setattr__ (most
    # of the step's cost of building it); the same Turn, its fields set at once.
    turn = _new_object(Turn)
    turn.__dict__.update(
        status=plan.status,
        decision=decision,
        window_id=window_id,
        previous_window_id=previous_window_id,
        messages=request["messages"],
        system=request["system"],
        tools=request["tools"],
        events=events,
        hooks=hooks,
        reason=plan.reason,
    )
    return turn, sent
