"""The ladder has one owner, the core (``ctxbudget::budget``): the Python ``Budget`` agrees
with an independent transcription of SPEC §2 on every input, and the tool policy uses the
same definition of Off."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ctxbudget import Action, Budget, Claims, ToolPolicy
from ctxbudget.policy import threshold_is_off


def spec_points(window: int, threshold: float, reserve: int | None) -> tuple[int, ...]:
    """SPEC §2 written out in Python integers (floor division), as the oracle, with the
    refinement of docs/decisions.md: the final zone and the warning's advance are at most
    a quarter of U, the advisory headroom at most an eighth."""
    bp = round(threshold * 10_000)
    eff = max(1_000, bp)
    r = min(8_192, window // 4) if reserve is None else reserve
    u = window - r
    f = u - min(6_144, u // 4)
    h = min(window * eff // 10_000, f - 1)
    w = max(h // 2, min(window * (eff - 1_000) // 10_000, h - min(6_144, u // 4)))
    return (u, f, h, w, bp)


def spec_action(points: tuple[int, ...], used: int, claims: Claims, offered: bool) -> Action:
    u, f, h, w, bp = points
    enabled = bp < 10_000
    if used >= u:
        return Action.ROLLOVER if enabled else Action.BLOCK
    if not enabled or used + min(2_048, u // 8) >= u:
        return Action.CONTINUE
    if f > 0 and used >= f and not claims.final and offered:
        return Action.FINAL
    if h > 0 and used >= h and not claims.handoff and not claims.final:
        return Action.HANDOFF
    if w > 0 and used >= w and not (claims.warning or claims.handoff or claims.final):
        return Action.WARNING
    return Action.CONTINUE


windows = st.one_of(st.integers(1, 300_000), st.integers(1, 2**62))
thresholds = st.one_of(
    st.floats(0.0, 1.0, allow_nan=False),
    st.sampled_from([0.0, 0.1, 0.7, 0.99994, 0.99995, 0.99999, 1.0, 0.00005, 0.00015]),
)


@given(
    window=windows,
    threshold=thresholds,
    reserve_fraction=st.one_of(st.none(), st.floats(0.0, 0.999)),
    used=st.integers(0, 2**62),
    near=st.integers(-3, 3),
    claims=st.builds(Claims, st.booleans(), st.booleans(), st.booleans()),
    offered=st.booleans(),
)
def test_python_budget_is_the_spec_on_every_input(
    window: int,
    threshold: float,
    reserve_fraction: float | None,
    used: int,
    near: int,
    claims: Claims,
    offered: bool,
) -> None:
    reserve = None if reserve_fraction is None else int(window * reserve_fraction)
    b = Budget(window, threshold, reserve)
    points = spec_points(window, threshold, reserve)
    assert (b.usable_limit, b.final_at, b.handoff_target, b.warning_at, b.threshold_bp) == points
    # Probe the ladder's own points (±3) as well as arbitrary sizes.
    for probe in (used % (window + 1), *(max(0, p + near) for p in points[:4])):
        got = b.evaluate(probe, claims, new_context_offered=offered)
        assert got.action is spec_action(points, probe, claims, offered), probe
        assert got.headroom == (probe + min(2_048, points[0] // 8) < points[0])


def test_off_is_one_definition_for_the_ladder_and_the_tool_policy() -> None:
    """0.99995 rounds to 10_000 basis points: the budget is Off, so new_context must not
    be offered (the policy used to test ``threshold < 1.0`` and offered it)."""
    policy = ToolPolicy.preset("exec")
    for t in (0.99995, 0.99999, 1.0):
        assert threshold_is_off(t)
        assert not Budget(100_000, t).enabled
        assert Budget(100_000, t).evaluate(91_808).action is Action.BLOCK
        assert not policy.offers_new_context(mode_active=True, threshold=t)
    for t in (0.0, 0.7, 0.99994):
        assert not threshold_is_off(t)
        assert Budget(100_000, t).enabled
        assert policy.offers_new_context(mode_active=True, threshold=t)


def test_off_and_the_evaluated_slider_are_read_from_the_core(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`Budget.enabled` and `effective_threshold_bp` are the core's `Threshold::is_off`
    and `effective_bp`, not a Python restatement: a core that answered otherwise would be
    what the wrapper reports."""
    from ctxbudget import _ctxbudget, policy

    real = _ctxbudget.BudgetCore

    class Core:
        def __init__(self, *args: object) -> None:
            self._real = real(*args)  # type: ignore[arg-type]

        def points(self) -> tuple[int, int, int, int, int, int, int]:
            return self._real.points()

        def effective_threshold_bp(self) -> int:
            return 4_321

        def enabled(self) -> bool:
            return False

    monkeypatch.setattr(policy._core, "BudgetCore", Core)
    b = Budget(100_000, 0.7)
    assert (b.enabled, b.effective_threshold_bp) == (False, 4_321)
    monkeypatch.undo()
    for t in (0.0, 0.05, 0.1, 0.7, 0.99994, 0.99995, 1.0):
        core = _ctxbudget.BudgetCore(100_000, t)
        b = Budget(100_000, t)
        assert b.enabled is core.enabled() is not threshold_is_off(t)
        assert b.effective_threshold_bp == core.effective_threshold_bp()
    assert Budget(100_000, 0.05).effective_threshold_bp == 1_000
