"""The decision of ``Session.prepare`` as a function of the window state: states built
directly (a detached fold noting rows, the accounting, the request snapshot), no store,
no ``Session``. ``decide`` returns the write it asks for and the turn that follows."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from itertools import count
from typing import Any

import pytest

from ctxbudget import (
    DEFAULT_PROMPTS,
    INTERRUPTED_OUTPUT,
    Action,
    Budget,
    Capabilities,
    Claims,
    CountRequest,
    Encoding,
    RequestHook,
    Row,
)
from ctxbudget.session.accounting import Requests, WindowTokens
from ctxbudget.session.anchoring import Counting
from ctxbudget.session.decide import CountFirst, Progress, build_turn, decide
from ctxbudget.session.state import Inputs, OpenCallPolicy, WindowState
from ctxbudget.session.steps import Advisory, Interrupt, Quarantine, Rollover
from ctxbudget.window import WindowFold

HOST_TOOL = {
    "name": "read_file",
    "description": "Reads a file.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@pytest.fixture(scope="module")
def enc() -> Encoding:
    return Encoding("o200k_base")


def rows_of(*specs: tuple[str, str, list[dict[str, Any]]], window: str = "w:0") -> list[Row]:
    """Rows 1.. of ``window``: ``(kind, role, parts)`` each (meta from a ``meta`` part)."""
    seqs: Iterator[int] = count(1)
    out = []
    for kind, role, parts in specs:
        seq = next(seqs)
        meta: dict[str, Any] = {}
        body = []
        for p in parts:
            if p.get("type") == "meta":
                meta.update(p["meta"])
            else:
                body.append(p)
        out.append(Row(seq, str(seq), kind, role, window, body, meta, None))
    return out


def user(text: str) -> tuple[str, str, list[dict[str, Any]]]:
    return ("message", "user", [{"type": "text", "text": text}])


def call(call_id: str) -> tuple[str, str, list[dict[str, Any]]]:
    return (
        "message",
        "assistant",
        [{"type": "tool_call", "id": call_id, "name": "read_file", "arguments": {"path": "a"}}],
    )


def result(call_id: str, output: str = "ok") -> tuple[str, str, list[dict[str, Any]]]:
    return (
        "message",
        "tool",
        [{"type": "tool_result", "call_id": call_id, "name": "read_file", "output": output}],
    )


def state_of(
    enc: Encoding,
    rows: list[Row],
    *,
    left_open: frozenset[str] = frozenset(),
    counter: Any = None,
) -> WindowState:
    """A window state built directly over ``rows`` (no store)."""
    fold = WindowFold.detached()
    state = WindowState(
        fold,
        WindowTokens(enc, mode_active=True),
        Requests(enc, Capabilities(), [HOST_TOOL], []),
        Counting(counter, estimated=False),
        left_open=left_open,
    )
    state.note(fold.note(rows))
    return state


def inputs_of(
    budget: Budget,
    *,
    open_calls: OpenCallPolicy = "interrupt",
    hooks: tuple[RequestHook, ...] = (),
    capabilities: Capabilities | None = None,
) -> Inputs:
    return Inputs(
        budget,
        DEFAULT_PROMPTS,
        capabilities or Capabilities(),
        "gpt-4o",
        "You are a careful auditor.",
        True,
        open_calls,
        hooks,
    )


def request_tokens(state: WindowState) -> int:
    """What the state's next request counts (decided on a budget far above it)."""
    plan = decide(state, inputs_of(Budget(10_000_000)))
    assert plan.turn is not None
    return plan.turn.decision.projected


def budget_where(tokens: int, wanted: Callable[[Action], bool]) -> Budget:
    """The smallest window whose budget's decision on ``tokens`` is ``wanted``."""
    for window in range(tokens // 2, tokens * 4):
        budget = Budget(window, 0.7, 0)
        if wanted(budget.evaluate(tokens, Claims(), True).action):
            return budget
    raise AssertionError(f"no budget gives the action wanted at {tokens} tokens")


def snapshot(state: WindowState) -> tuple[Any, ...]:
    return (
        state.fold.last_seq,
        state.tokens.tokens,
        state.sent,
        set(state.fresh_checked),
        state.counting.events,
    )


def test_a_window_below_every_stage_is_sent_as_read(enc: Encoding) -> None:
    state = state_of(enc, rows_of(user("Audit the billing code."), call("c1"), result("c1")))
    before = snapshot(state)
    plan = decide(state, inputs_of(Budget(128_000)))
    assert plan.write is None
    assert plan.turn is not None and plan.turn.status == "send"
    assert plan.checked == 1  # the user message fits a fresh window
    assert snapshot(state) == before  # deciding wrote nothing, not even to the state

    turn, sent = build_turn(state, inputs_of(Budget(128_000)), plan.turn, ["x"])
    assert turn.status == "send" and turn.events == ["x"]
    assert [m["role"] for m in turn.messages] == ["user", "assistant", "tool"]
    assert turn.messages[0]["content"] == "Audit the billing code.\n\n[id: 1]"
    assert [t["name"] for t in turn.tools] == ["read_file"]
    assert sent is not None and sent.last_seq == 3 and sent.rows == 3
    assert (
        sent.tokens
        == turn.decision.projected
        == state.requests.count(turn.system, turn.messages, turn.tools)
    )


def test_a_user_message_checked_before_is_not_counted_again(enc: Encoding) -> None:
    state = state_of(enc, rows_of(user("hello")))
    state.fresh_checked.add(1)
    plan = decide(state, inputs_of(Budget(128_000)))
    assert plan.checked is None and plan.turn is not None and plan.turn.status == "send"


def test_an_advisory_is_written_then_the_request_sent(enc: Encoding) -> None:
    state = state_of(enc, rows_of(user("Audit the billing code. " * 40)))
    tokens = request_tokens(state)
    budget = budget_where(tokens, lambda a: a is Action.WARNING)
    plan = decide(state, inputs_of(budget))
    assert isinstance(plan.write, Advisory)
    assert plan.write.row["kind"] == "advisory"
    assert plan.write.row["meta"] == {
        "stage": "warning",
        "projected": tokens,
        "budget_tokens": budget.usable_limit,
    }
    assert plan.turn is not None and plan.turn.status == "send"
    assert plan.turn.measured is None  # measured again once the advisory is in


def test_a_claimed_stage_is_not_published_twice(enc: Encoding) -> None:
    rows = rows_of(
        user("Audit the billing code. " * 40),
        (
            "advisory",
            "user",
            [{"type": "text", "text": "w"}, {"type": "meta", "meta": {"stage": "warning"}}],
        ),
    )
    state = state_of(enc, rows)
    assert state.fold.claims.warning
    budget = budget_where(request_tokens(state), lambda a: a is Action.WARNING)
    plan = decide(state, inputs_of(budget))
    assert plan.write is None and plan.turn is not None and plan.turn.status == "send"


def test_the_usable_limit_seals_the_window_with_the_pending_message(enc: Encoding) -> None:
    state = state_of(
        enc,
        rows_of(
            user("Summarize the logs. " * 300),
            call("c1"),
            result("c1", "x" * 4000),
            user("And now the totals?"),
        ),
    )
    state.fresh_checked.add(4)
    budget = budget_where(request_tokens(state), lambda a: a is Action.ROLLOVER)
    plan = decide(state, inputs_of(budget))
    assert isinstance(plan.write, Rollover) and plan.turn is None  # decide again after it
    assert plan.write.reason == "usable_limit"
    assert plan.write.trigger["kind"] == "continuation"
    assert plan.write.trigger["meta"] == {"continues": 4}
    assert plan.write.figures["budget_tokens"] == budget.usable_limit
    lead_in = plan.write.lead_in("w:9", "w:0")
    assert "New context window w:9 (previous window: w:0)" in lead_in
    assert "reached its usable limit" in lead_in

    # Once rolled over in this call, the limit does not seal the new window again.
    again = decide(state, inputs_of(budget), Progress(rolled_over=("usable_limit",)))
    assert again.write is None and again.turn is not None and again.turn.status == "send"


def test_an_open_tool_step_pauses_at_the_limit(enc: Encoding) -> None:
    state = state_of(enc, rows_of(user("Summarize the logs. " * 300), call("c1")))
    state.fresh_checked.add(1)
    budget = budget_where(request_tokens(state), lambda a: a is Action.ROLLOVER)
    plan = decide(state, inputs_of(budget))
    assert plan.write is None and plan.turn is not None
    assert (plan.turn.status, plan.turn.reason) == ("pause", "a tool step is still open")


@pytest.mark.parametrize(
    ("hooks", "capabilities", "reason"),
    [
        (
            (RequestHook(lambda request: request, False),),
            Capabilities(),
            "an unrestricted request hook is registered",
        ),
        ((), Capabilities(history=False), "session_history is not allowed"),
    ],
)
def test_a_rollover_not_admitted_pauses(
    enc: Encoding, hooks: tuple[RequestHook, ...], capabilities: Capabilities, reason: str
) -> None:
    state = state_of(enc, rows_of(user("Summarize the logs. " * 300)))
    state.fresh_checked.add(1)
    budget = budget_where(request_tokens(state), lambda a: a is Action.ROLLOVER)
    plan = decide(state, inputs_of(budget, hooks=hooks, capabilities=capabilities))
    assert plan.write is None and plan.turn is not None
    assert plan.turn.status == "pause"
    assert plan.turn.reason is not None and plan.turn.reason.startswith(reason)


def test_a_message_too_large_for_a_fresh_window_is_quarantined(enc: Encoding) -> None:
    state = state_of(enc, rows_of(user("hi"), call("c1"), result("c1"), user("word " * 3000)))
    plan = decide(state, inputs_of(Budget(2_000, 0.7, 0)))
    assert plan.write == Quarantine(4)
    assert plan.turn is not None and plan.turn.status == "reject"
    assert plan.turn.reason is not None and "the message alone needs" in plan.turn.reason
    assert plan.checked is None


def test_calls_a_stopped_process_left_open_are_interrupted_first(enc: Encoding) -> None:
    state = state_of(enc, rows_of(user("go"), call("c1")), left_open=frozenset({"c1"}))
    plan = decide(state, inputs_of(Budget(128_000)))
    assert isinstance(plan.write, Interrupt) and plan.turn is None
    assert [c.id for c in plan.write.calls] == ["c1"]
    [row] = plan.write.rows()
    assert row["parts"][0]["output"] == INTERRUPTED_OUTPUT
    assert row["parts"][0]["call_id"] == "c1"


def test_calls_of_this_process_are_the_hosts_to_answer(enc: Encoding) -> None:
    state = state_of(enc, rows_of(user("go"), call("c1")))
    plan = decide(state, inputs_of(Budget(128_000)))
    assert plan.write is None and plan.turn is not None and plan.turn.status == "send"


def test_the_wait_policy_pauses_while_a_call_is_open(enc: Encoding) -> None:
    state = state_of(enc, rows_of(user("go"), call("c1")), left_open=frozenset({"c1"}))
    plan = decide(state, inputs_of(Budget(128_000), open_calls="wait"))
    assert plan.write is None and plan.turn is not None
    assert plan.turn.status == "pause"
    assert plan.turn.reason is not None and plan.turn.reason.startswith("tool calls c1 ")


def test_a_count_endpoint_is_asked_first_and_its_count_is_exact(enc: Encoding) -> None:
    asked: list[CountRequest] = []

    def counter(request: CountRequest) -> int:
        asked.append(request)
        return 1234

    state = state_of(enc, rows_of(user("hello")), counter=counter)
    inputs = inputs_of(Budget(128_000))
    first = decide(state, inputs, count_first=True)
    assert isinstance(first.write, CountFirst) and first.turn is None
    assert first.write.request.messages[0]["content"].startswith("hello")
    assert asked == []  # deciding never calls the endpoint

    state.counting.count(first.write.key, first.write.request, first.write.profile)
    assert len(asked) == 1
    then = decide(state, inputs, count_first=True)
    assert then.turn is not None and then.turn.status == "send"
    assert then.turn.decision.projected == 1234
    assert then.turn.decision.count.exact == 1234
