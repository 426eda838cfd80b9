"""The budget ladder (SPEC §2): reference values, properties, errors."""

from __future__ import annotations

import tempfile

import pytest
from hypothesis import given
from hypothesis import strategies as st

import ctxbudget
from ctxbudget import Action, Budget, Claims, History

RANK = {Action.WARNING: 1, Action.HANDOFF: 2, Action.FINAL: 3}


def test_spec_reference_values() -> None:
    b = Budget(context_window=100_000, threshold=0.7, output_reserve=None)
    assert (b.usable_limit, b.handoff_target, b.warning_at, b.final_at) == (
        91_808,
        70_000,
        60_000,
        85_664,
    )
    assert b.enabled and b.label == "Handoff target: 70%"
    expected = {
        59_999: Action.CONTINUE,
        60_000: Action.WARNING,
        70_000: Action.HANDOFF,
        85_664: Action.FINAL,
        89_760: Action.CONTINUE,
        91_808: Action.ROLLOVER,
    }
    for projected, action in expected.items():
        d = b.evaluate(projected, claims=Claims(), new_context_offered=True)
        assert d.action is action, projected
        assert d.action == action.value
        assert d.projected == projected and d.usable_limit == 91_808
    assert b.evaluate(45_904).percent_used == 50.0


def test_off_blocks_at_the_usable_limit_and_never_advises() -> None:
    b = Budget(100_000, threshold=1.0)
    assert not b.enabled and b.label == "Handoff target: Off"
    assert b.evaluate(91_807).action is Action.CONTINUE
    assert b.evaluate(80_000).action is Action.CONTINUE
    assert b.evaluate(91_808).action is Action.BLOCK


def test_final_only_when_new_context_is_offered() -> None:
    b = Budget(100_000, 0.7)
    assert b.evaluate(86_000, Claims(handoff=True), new_context_offered=False).action is (
        Action.CONTINUE
    )
    assert b.evaluate(86_000, Claims(handoff=True), new_context_offered=True).action is (
        Action.FINAL
    )


def test_high_threshold_is_clamped_below_the_final_zone() -> None:
    b = Budget(100_000, 0.99)
    assert b.handoff_target == b.final_at - 1 == 85_663


def test_low_thresholds_evaluate_as_ten_percent() -> None:
    assert Budget(100_000, 0.02).handoff_target == Budget(100_000, 0.10).handoff_target == 10_000
    assert Budget(100_000, 0.0).label == "Handoff target: 10%"
    assert Budget(100_000, 0.725).label == "Handoff target: 72.5%"


def test_small_windows_get_every_stage_before_the_forced_rollover() -> None:
    """An 8k window: the SPEC's fixed distances left it no stage at all; they scale with
    the usable limit now (docs/decisions.md), and the order of the ladder holds."""
    b = Budget(8_000, 0.7)
    assert 0 < b.warning_at < b.handoff_target < b.final_at < b.usable_limit
    assert b.advisory_headroom == b.usable_limit // 8
    stages, claims = [], Claims()
    for used in range(0, b.usable_limit):
        d = b.evaluate(used, claims)
        if d.is_advisory:
            stages.append((used, d.action))
            claims = claims.claim(d.action)
    assert stages == [
        (b.warning_at, Action.WARNING),
        (b.handoff_target, Action.HANDOFF),
        (b.final_at, Action.FINAL),
    ]
    assert b.evaluate(b.usable_limit).action is Action.ROLLOVER
    assert Budget(100_000, 0.7).advisory_headroom == 2_048


def test_handoff_suppresses_warning_but_warning_never_consumes_handoff() -> None:
    b = Budget(100_000, 0.7)
    assert b.evaluate(65_000, Claims(handoff=True)).action is Action.CONTINUE
    assert b.evaluate(75_000, Claims(warning=True)).action is Action.HANDOFF


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"context_window": -1}, "context_window"),
        ({"context_window": 0}, "context_window"),
        ({"context_window": 1.5}, "context_window"),
        ({"context_window": True}, "context_window"),
        ({"context_window": 1000, "threshold": 1.01}, "threshold"),
        ({"context_window": 1000, "threshold": -0.1}, "threshold"),
        ({"context_window": 1000, "threshold": float("nan")}, "threshold"),
        ({"context_window": 1000, "output_reserve": 1000}, "output_reserve"),
        ({"context_window": 1000, "output_reserve": -5}, "output_reserve"),
    ],
)
def test_bad_arguments_are_clear_value_errors(kwargs: dict, match: str) -> None:  # type: ignore[type-arg]
    with pytest.raises(ctxbudget.PolicyError, match=match) as info:
        Budget(**kwargs)
    assert isinstance(info.value, ValueError)


def test_countdown_wording() -> None:
    b = Budget(100_000, 0.7)
    assert b.countdown(60_000) == "10,000 tokens until the handoff target."
    assert "forced at the usable limit" in b.countdown(70_000)
    assert "off" in Budget(100_000, 1.0).countdown(5)
    with pytest.raises(ctxbudget.PolicyError):
        b.evaluate(-1)


windows = st.integers(1_000, 2_000_000)
thresholds = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 0.1, 0.5, 0.7, 0.99, 1.0]))


@given(window=windows, threshold=thresholds, steps=st.lists(st.integers(0, 2_100_000), max_size=60))
def test_ladder_only_moves_forward_once_each_with_headroom(
    window: int, threshold: float, steps: list[int]
) -> None:
    b = Budget(window, threshold)
    claims = Claims()
    seen: list[Action] = []
    rows = []
    for used in sorted(steps):
        d = b.evaluate(used, claims, new_context_offered=True)
        if d.is_advisory:
            assert used + b.advisory_headroom < b.usable_limit, "no advisory without headroom"
            assert d.action not in seen, "at most one claim of each kind per window"
            if seen:
                assert RANK[d.action] > RANK[seen[-1]], "the ladder only moves forward"
            seen.append(d.action)
            claims = claims.claim(d.action)
            rows.append({"kind": "advisory", "meta": {"stage": d.action.value, "projected": used}})
        if used >= b.usable_limit:
            assert d.action is (Action.ROLLOVER if b.enabled else Action.BLOCK)
        if not b.enabled:
            assert not d.is_advisory
    assert Claims.from_rows(rows) == claims, "claims rebuilt from rows equal claims in memory"


@given(
    window=windows,
    threshold=thresholds,
    used=st.integers(0, 2_100_000),
    w=st.booleans(),
    h=st.booleans(),
    f=st.booleans(),
    offered=st.booleans(),
)
def test_evaluate_is_a_pure_function(
    window: int, threshold: float, used: int, w: bool, h: bool, f: bool, offered: bool
) -> None:
    b = Budget(window, threshold)
    before = (b.usable_limit, b.handoff_target, b.warning_at, b.final_at)
    first = b.evaluate(used, Claims(w, h, f), offered)
    again = Budget(window, threshold).evaluate(used, Claims(w, h, f), offered)
    assert first == again == b.evaluate(used, Claims(w, h, f), offered)
    assert before == (b.usable_limit, b.handoff_target, b.warning_at, b.final_at)
    # Integer arithmetic only: every stage point is an int.
    assert all(isinstance(x, int) for x in before)


def test_claims_from_durable_rows_of_the_current_window() -> None:
    with tempfile.TemporaryDirectory() as d:
        h = History.open(d, durability="none")
        h.append([{"kind": "advisory", "role": "user", "meta": {"stage": "warning"}}])
        h.rollover(rollover_id="r", reason="usable_limit", lead_in="lead")
        h.append([{"kind": "advisory", "role": "user", "meta": {"stage": "handoff"}}])
        current = [r for r in h.rows() if r.window == h.current_window]
        assert Claims.from_rows(current) == Claims(warning=False, handoff=True, final=False)
        assert Claims.from_rows(h.rows()) == Claims(warning=True, handoff=True)
        unstaged = [{"kind": "advisory", "meta": {"final": True}}]
        assert Claims.from_rows(unstaged) == Claims()
