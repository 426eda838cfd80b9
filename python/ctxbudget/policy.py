"""The token-budget ladder (SPEC §2): when to warn, ask for a handoff, give the final
prompt, force the rollover — integer arithmetic only, so every implementation agrees to
the token, and claims derived from durable rows, so a restart changes nothing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from . import _ctxbudget as _core
from .errors import PolicyError

__all__ = [
    "ADVISORY_HEADROOM",
    "FINAL_ZONE",
    "MIN_THRESHOLD_BP",
    "OFF_BP",
    "OUTPUT_RESERVE_MAX",
    "WARNING_ADVANCE_MIN",
    "Action",
    "Budget",
    "Claims",
    "CountSplit",
    "Decision",
    "threshold_is_off",
]

# The ladder's constants are the core's (``ctxbudget::budget``); read, never restated.
OUTPUT_RESERVE_MAX: int = _core.OUTPUT_RESERVE_MAX
"""The output reserve is ``min(8_192, L // 4)`` unless given."""
WARNING_ADVANCE_MIN: int = _core.WARNING_ADVANCE_MIN
"""The warning comes this many tokens before the handoff target (if it can), or
``U // 4`` when that is less (small windows keep their ladder; docs/decisions.md)."""
FINAL_ZONE: int = _core.FINAL_ZONE
"""The final prompt's zone starts this many tokens below the usable limit, or ``U // 4``
when that is less."""
ADVISORY_HEADROOM: int = _core.ADVISORY_HEADROOM
"""An advisory is sent only if ``projected + min(2_048, U // 8) < U``."""
MIN_THRESHOLD_BP: int = _core.MIN_THRESHOLD_BP
"""Stored thresholds below 10% evaluate as 10%."""
OFF_BP: int = _core.OFF_BP
"""A slider whose basis points reach 10_000 is Off."""


class Action(str, Enum):
    """What to do with the next request."""

    CONTINUE = "continue"
    WARNING = "warning"
    HANDOFF = "handoff"
    FINAL = "final"
    ROLLOVER = "rollover"
    BLOCK = "block"

    def __str__(self) -> str:
        return self.value


ADVISORY_STAGES = (Action.WARNING, Action.HANDOFF, Action.FINAL)


@dataclass(frozen=True, slots=True)
class Claims:
    """Advisories already delivered in the current window (each at most once)."""

    warning: bool = False
    handoff: bool = False
    final: bool = False

    @classmethod
    def from_rows(cls, rows: Iterable[Any], *, start: Claims | None = None) -> Claims:
        """Claims of a window, from its durably published advisory rows.

        ``rows`` are the rows of the current window: :class:`~ctxbudget.Row` objects or
        row dicts. An advisory row carries ``meta.stage``. ``start`` adds to earlier
        claims (rows seen before). The rule is the core window fold's (one
        definition, also what :class:`~ctxbudget.Session` reads).
        """
        claims = (start.warning, start.handoff, start.final) if start else (False, False, False)
        return cls(*_core.claims_of_rows(rows, claims))

    def claim(self, action: Action) -> Claims:
        """These claims plus the advisory ``action`` (others return ``self``)."""
        if action is Action.WARNING:
            return Claims(True, self.handoff, self.final)
        if action is Action.HANDOFF:
            return Claims(self.warning, True, self.final)
        if action is Action.FINAL:
            return Claims(self.warning, self.handoff, True)
        return self


_NO_CLAIMS = Claims()


@dataclass(frozen=True, slots=True)
class CountSplit:
    """How much of a request's count is exact, anchored and estimated (SPEC §1, Request
    counting; the core's ``ctxbudget::anchor::CountSplit``)."""

    exact: int = 0
    """Tokens counted with the model's own tokenizer (or by a provider's count
    endpoint)."""
    anchored: int = 0
    """Tokens the provider reported for an earlier request with the same messages (less
    the calibrated estimate of system text or tools removed since, for an estimated
    family; ``ctxbudget::anchor::CountSplit::rebased``)."""
    estimated: int = 0
    """Tokens estimated for a family without a public tokenizer (calibrated once the
    conversation has anchored requests)."""
    margin: int = 0
    """What the hard guards add for what is estimated (``ESTIMATE_MARGIN_BP`` of the
    estimated part and of any estimate taken off the anchored part)."""

    @property
    def total(self) -> int:
        """The whole count: ``exact + anchored + estimated``."""
        return self.exact + self.anchored + self.estimated


@dataclass(frozen=True, slots=True)
class Decision:
    """The outcome of :meth:`Budget.evaluate`."""

    action: Action
    projected: int
    usable_limit: int
    handoff_target: int
    percent_used: float
    """``projected`` as a percentage of the usable limit."""
    headroom: bool
    """Whether an advisory would fit (``projected + min(2_048, U // 8) < U``)."""
    count: CountSplit
    """How much of ``projected`` is exact, anchored and estimated, and the margin the
    hard guards kept for the estimated part (a bare :meth:`Budget.evaluate` call
    counts ``projected`` as exact)."""

    @property
    def is_advisory(self) -> bool:
        """True for WARNING, HANDOFF and FINAL."""
        return self.action in ADVISORY_STAGES


# `Budget.evaluate` builds its Decision through the slots' own setters: a frozen
# dataclass's __init__ routes each field through object.__setattr__, which was most of
# the call's cost. The object is the same frozen dataclass either way.
_new_object = object.__new__
_SET_DECISION = tuple(
    Decision.__dict__[name].__set__
    for name in (
        "action",
        "projected",
        "usable_limit",
        "handoff_target",
        "percent_used",
        "headroom",
        "count",
    )
)


_SET_COUNT = tuple(
    CountSplit.__dict__[name].__set__ for name in ("exact", "anchored", "estimated", "margin")
)


def _int_arg(name: str, value: object, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{name} must be an integer number of tokens, got {value!r}")
    if value < minimum:
        raise PolicyError(f"{name} must be >= {minimum}, got {value:,}")
    return value


def _threshold_arg(value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise PolicyError(f"threshold must be a number from 0.0 to 1.0, got {value!r}")
    return float(value)


def threshold_is_off(threshold: float) -> bool:
    """Whether a slider of ``threshold`` means Off (no advisories, no ``new_context``,
    block at the usable limit). The core's one definition: basis points that round to
    10_000, so 0.99995 is Off too."""
    return _core.threshold_is_off(_threshold_arg(threshold))


_ACTIONS = {a.value: a for a in Action}


class Budget:
    """A context window's budget: ``Budget(context_window=100_000, threshold=0.7)``.

    ``threshold`` is the handoff slider from 0.0 to 1.0, held as basis points
    (``round(t * 10_000)``); 1.0 means Off: no advisories, block at the usable limit.
    The ladder itself is the core's (``ctxbudget::budget``); this class is its typed view.
    """

    __slots__ = (
        "_bp",
        "_core",
        "_effective_bp",
        "_enabled",
        "advisory_headroom",
        "context_window",
        "final_at",
        "handoff_target",
        "output_reserve",
        "threshold",
        "usable_limit",
        "warning_at",
    )

    def __init__(
        self, context_window: int, threshold: float = 0.7, output_reserve: int | None = None
    ) -> None:
        window = _int_arg("context_window", context_window, 1)
        t = _threshold_arg(threshold)
        reserve = None if output_reserve is None else _int_arg("output_reserve", output_reserve, 0)
        try:
            self._core = _core.BudgetCore(window, t, reserve)
        except OverflowError:
            raise PolicyError(
                f"context_window and output_reserve must fit in 64 bits, got {window:,}"
            ) from None
        (
            self.context_window,
            self._bp,
            self.output_reserve,
            self.usable_limit,
            self.final_at,
            self.handoff_target,
            self.warning_at,
            self.advisory_headroom,
        ) = self._core.points()
        # Off and the evaluated slider are the core's (`Threshold::is_off`, `effective_bp`).
        self._effective_bp = self._core.effective_threshold_bp()
        self._enabled = self._core.enabled()
        self.threshold = t

    @property
    def threshold_bp(self) -> int:
        """The slider in basis points as stored (7_000 for 0.7)."""
        return self._bp

    @property
    def effective_threshold_bp(self) -> int:
        """The slider as evaluated: at least 1_000 (10%)."""
        return self._effective_bp

    @property
    def enabled(self) -> bool:
        """False when the slider is at 100% (Off)."""
        return self._enabled

    @property
    def budget_tokens(self) -> int:
        """Alias of :attr:`usable_limit` (the forced-rollover point)."""
        return self.usable_limit

    @property
    def label(self) -> str:
        """``"Handoff target: 70%"`` (or ``"Handoff target: Off"``)."""
        if not self.enabled:
            return "Handoff target: Off"
        bp = self.effective_threshold_bp
        pct = f"{bp // 100}" if bp % 100 == 0 else f"{bp / 100:g}"
        return f"Handoff target: {pct}%"

    def countdown(self, projected: int) -> str:
        """A short status for a settings screen or a log line."""
        used = _int_arg("projected", projected, 0)
        if not self.enabled:
            return (
                f"Automatic handoff is off; requests are blocked at the usable limit "
                f"({self.usable_limit:,} tokens)."
            )
        if self.handoff_target > 0 and used < self.handoff_target:
            return f"{self.handoff_target - used:,} tokens until the handoff target."
        return (
            f"Past the handoff target: the rollover is forced at the usable limit "
            f"({self.usable_limit:,} tokens, {max(0, self.usable_limit - used):,} left)."
        )

    def evaluate(
        self,
        projected: int,
        claims: Claims | None = None,
        new_context_offered: bool = True,
        *,
        count: CountSplit | None = None,
    ) -> Decision:
        """The action for a next request of ``projected`` tokens (SPEC §2, in order).
        ``count`` says how much of it is estimated: the hard guard (rollover, or block
        when Off, at the usable limit) then adds its :attr:`CountSplit.margin`."""
        # The exact-int check first: it is the per-step path, and `_int_arg` says why not.
        used = projected if type(projected) is int and projected >= 0 else None
        if used is None:
            used = _int_arg("projected", projected, 0)
        if claims is None:
            claims = _NO_CLAIMS
        if count is None:
            count = _new_object(CountSplit)
            set_exact, set_anchored, set_estimated, set_margin = _SET_COUNT
            set_exact(count, used)
            set_anchored(count, 0)
            set_estimated(count, 0)
            set_margin(count, 0)
        elif count.exact + count.anchored + count.estimated != used:
            raise PolicyError(f"count parts ({count.total:,}) must add up to projected ({used:,})")
        try:
            action, headroom = self._core.evaluate(
                used,
                claims.warning,
                claims.handoff,
                claims.final,
                bool(new_context_offered),
                count.margin,
            )
        except OverflowError:
            raise PolicyError(f"projected must fit in 64 bits, got {used:,}") from None
        usable = self.usable_limit
        d = _new_object(Decision)
        (
            set_action,
            set_projected,
            set_usable,
            set_target,
            set_percent,
            set_headroom,
            set_count,
        ) = _SET_DECISION
        set_action(d, _ACTIONS[action])
        set_count(d, count)
        set_projected(d, used)
        set_usable(d, usable)
        set_target(d, self.handoff_target)
        set_percent(d, round(used * 100 / usable, 2))
        set_headroom(d, headroom)
        return d

    def __repr__(self) -> str:
        return (
            f"Budget(context_window={self.context_window}, threshold={self.threshold}, "
            f"output_reserve={self.output_reserve})"
        )
