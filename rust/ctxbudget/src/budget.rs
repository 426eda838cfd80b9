//! The token-budget ladder (SPEC §2): when to warn, ask for a handoff, give the final
//! prompt, force the rollover.
//!
//! Every figure is integer arithmetic on the context window and the slider held in basis
//! points, so every implementation — this crate, the Python package, a Rust host — agrees
//! to the token. This module is the one definition of the ladder; the Python `Budget` is
//! a typed wrapper over it, and the tool policy asks it whether the budget is Off.
//!
//! ```
//! use ctxbudget::budget::{Action, Budget, Claims};
//!
//! let budget = Budget::new(100_000, 0.7, None)?;
//! assert_eq!(budget.usable_limit(), 91_808);
//! assert_eq!(budget.handoff_target(), 70_000);
//! assert_eq!(budget.evaluate(70_000, Claims::default(), true).action, Action::Handoff);
//! let claimed = Claims::default().claim(Action::Handoff);
//! assert_eq!(budget.evaluate(70_000, claimed, true).action, Action::Continue);
//! # Ok::<(), ctxbudget::budget::BudgetError>(())
//! ```

use std::fmt;
use std::str::FromStr;

/// The output reserve is `min(8_192, L / 4)` unless given.
pub const OUTPUT_RESERVE_MAX: u64 = 8_192;
/// The warning comes this many tokens before the handoff target (if it can), or a
/// quarter of the usable limit when that is less.
pub const WARNING_ADVANCE_MIN: i64 = 6_144;
/// The final prompt's zone starts this many tokens below the usable limit, or a quarter
/// of the usable limit below it when that is less.
pub const FINAL_ZONE: i64 = 6_144;
/// An advisory is sent only if `projected + headroom < U`, the headroom being this many
/// tokens or an eighth of the usable limit when that is less.
pub const ADVISORY_HEADROOM: u64 = 2_048;

/// The stage distances scale down with small windows, so that a window of a few thousand
/// tokens still gets its advisories before the forced rollover (the SPEC's fixed figures
/// left none below a usable limit of about 6,000 tokens); from a usable limit of 24,576
/// tokens (16,384 for the headroom) up they are the SPEC's figures.
fn scaled(max: u64, usable: u64, divisor: u64) -> u64 {
    max.min(usable / divisor)
}
/// Stored thresholds below 10% evaluate as 10%.
pub const MIN_THRESHOLD_BP: u32 = 1_000;
/// A slider at (or rounding to) 100% is Off: no advisories, no `new_context`, block at `U`.
pub const OFF_BP: u32 = 10_000;

/// A budget that cannot be built from its arguments.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum BudgetError {
    /// The threshold is not a number from 0.0 to 1.0.
    #[error("threshold must be a number from 0.0 to 1.0 (1.0 = Off), got {value}")]
    Threshold {
        /// The value given.
        value: f64,
    },
    /// The context window is zero.
    #[error("context_window must be at least 1 token, got {value}")]
    ContextWindow {
        /// The value given.
        value: u64,
    },
    /// The output reserve leaves no usable tokens.
    #[error(
        "output_reserve ({reserve}) must be smaller than the context window ({window}); \
         leave it unset for min(8192, window / 4)"
    )]
    OutputReserve {
        /// The reserve given.
        reserve: u64,
        /// The context window.
        window: u64,
    },
}

/// The handoff slider in basis points, as stored (`round(t * 10_000)`, ties to even like
/// Python's `round`, so both languages store the same value).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Threshold(u32);

impl Threshold {
    /// The slider for a fraction from 0.0 to 1.0.
    pub fn from_fraction(value: f64) -> Result<Self, BudgetError> {
        if !value.is_finite() || !(0.0..=1.0).contains(&value) {
            return Err(BudgetError::Threshold { value });
        }
        // In range 0..=10_000 after the check above, so the cast is exact.
        Ok(Threshold((value * 10_000.0).round_ties_even() as u32))
    }

    /// The slider from basis points (values above 10_000 are Off, kept as 10_000).
    pub fn from_bp(bp: u32) -> Self {
        Threshold(bp.min(OFF_BP))
    }

    /// The slider as stored, in basis points (7_000 for 0.7).
    pub fn bp(self) -> u32 {
        self.0
    }

    /// The slider as evaluated: at least [`MIN_THRESHOLD_BP`].
    pub fn effective_bp(self) -> u32 {
        self.0.max(MIN_THRESHOLD_BP)
    }

    /// Whether the budget is Off. The only definition: the tool policy, the ladder and
    /// the session all ask this.
    pub fn is_off(self) -> bool {
        self.0 >= OFF_BP
    }
}

/// What to do with the next request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// Send it as it is.
    Continue,
    /// Send it with the warning advisory.
    Warning,
    /// Send it with the handoff request.
    Handoff,
    /// Send it with the final prompt.
    Final,
    /// Seal the window and start a fresh one (forced at the usable limit).
    Rollover,
    /// Do not send: the budget is Off and the request reached the usable limit.
    Block,
}

impl Action {
    /// Every action, in ladder order.
    pub const ALL: [Action; 6] = [
        Action::Continue,
        Action::Warning,
        Action::Handoff,
        Action::Final,
        Action::Rollover,
        Action::Block,
    ];

    /// The name used in rows and results (`"handoff"`).
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Continue => "continue",
            Action::Warning => "warning",
            Action::Handoff => "handoff",
            Action::Final => "final",
            Action::Rollover => "rollover",
            Action::Block => "block",
        }
    }

    /// True for the three advisory stages.
    pub fn is_advisory(self) -> bool {
        matches!(self, Action::Warning | Action::Handoff | Action::Final)
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not an [`Action`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown action {0:?}; expected one of continue, warning, handoff, final, rollover, block")]
pub struct UnknownAction(pub String);

impl FromStr for Action {
    type Err = UnknownAction;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Action::ALL
            .into_iter()
            .find(|a| a.as_str() == s)
            .ok_or_else(|| UnknownAction(s.to_owned()))
    }
}

/// Advisories already delivered in the current window (each at most once).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Claims {
    /// The warning was published.
    pub warning: bool,
    /// The handoff request was published.
    pub handoff: bool,
    /// The final prompt was published.
    pub final_prompt: bool,
}

impl Claims {
    /// These claims plus the advisory `action` (other actions change nothing).
    pub fn claim(self, action: Action) -> Claims {
        match action {
            Action::Warning => Claims {
                warning: true,
                ..self
            },
            Action::Handoff => Claims {
                handoff: true,
                ..self
            },
            Action::Final => Claims {
                final_prompt: true,
                ..self
            },
            _ => self,
        }
    }
}

/// The outcome of [`Budget::evaluate`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// What to do.
    pub action: Action,
    /// The projected size of the next request, in tokens.
    pub projected: u64,
    /// Whether an advisory would fit (`projected + min(2_048, U / 8) < U`).
    pub headroom: bool,
}

/// A context window's budget: every point of the ladder, computed once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Budget {
    context_window: u64,
    threshold: Threshold,
    output_reserve: u64,
    usable_limit: u64,
    final_at: i64,
    handoff_target: i64,
    warning_at: i64,
    advisory_headroom: u64,
}

impl Budget {
    /// The budget for a context window of `context_window` tokens and a slider from 0.0
    /// to 1.0 (1.0 = Off). `output_reserve` defaults to `min(8_192, L / 4)`.
    pub fn new(
        context_window: u64,
        threshold: f64,
        output_reserve: Option<u64>,
    ) -> Result<Self, BudgetError> {
        Self::with_threshold(
            context_window,
            Threshold::from_fraction(threshold)?,
            output_reserve,
        )
    }

    /// As [`Budget::new`], with the slider already in basis points.
    pub fn with_threshold(
        context_window: u64,
        threshold: Threshold,
        output_reserve: Option<u64>,
    ) -> Result<Self, BudgetError> {
        let window = context_window;
        if window == 0 {
            return Err(BudgetError::ContextWindow { value: window });
        }
        let reserve = match output_reserve {
            None => OUTPUT_RESERVE_MAX.min(window / 4),
            Some(r) if r >= window => {
                return Err(BudgetError::OutputReserve { reserve: r, window })
            }
            Some(r) => r,
        };
        let usable = window - reserve;
        // Points may be zero or negative for small windows (the stage then does not
        // exist), so they are signed; `div_euclid` is floor division like SPEC's `//`.
        let l = i128::from(window);
        let eff = i128::from(threshold.effective_bp());
        let zone = scaled(FINAL_ZONE.unsigned_abs(), usable, 4);
        let advance = scaled(WARNING_ADVANCE_MIN.unsigned_abs(), usable, 4);
        let final_at = i128::from(usable) - i128::from(zone);
        let handoff = (l * eff).div_euclid(10_000).min(final_at - 1);
        let warning = handoff.div_euclid(2).max(
            (l * (eff - i128::from(MIN_THRESHOLD_BP)))
                .div_euclid(10_000)
                .min(handoff - i128::from(advance)),
        );
        Ok(Budget {
            context_window: window,
            threshold,
            output_reserve: reserve,
            usable_limit: usable,
            final_at: clamp_i64(final_at),
            handoff_target: clamp_i64(handoff),
            warning_at: clamp_i64(warning),
            advisory_headroom: scaled(ADVISORY_HEADROOM, usable, 8),
        })
    }

    /// The context window `L`.
    pub fn context_window(&self) -> u64 {
        self.context_window
    }
    /// The slider as stored.
    pub fn threshold(&self) -> Threshold {
        self.threshold
    }
    /// The output reserve `R`.
    pub fn output_reserve(&self) -> u64 {
        self.output_reserve
    }
    /// The usable limit `U = L - R`: the forced-rollover point.
    pub fn usable_limit(&self) -> u64 {
        self.usable_limit
    }
    /// The final zone start `F = U - min(6_144, U / 4)` (not positive: no final prompt).
    pub fn final_at(&self) -> i64 {
        self.final_at
    }
    /// The handoff target `H` (not positive: no handoff request).
    pub fn handoff_target(&self) -> i64 {
        self.handoff_target
    }
    /// The advance warning `W` (not positive: no warning).
    pub fn warning_at(&self) -> i64 {
        self.warning_at
    }
    /// The headroom an advisory needs: `min(2_048, U / 8)`.
    pub fn advisory_headroom(&self) -> u64 {
        self.advisory_headroom
    }
    /// False when the slider is at 100% (Off).
    pub fn enabled(&self) -> bool {
        !self.threshold.is_off()
    }

    /// The action for a next request of `projected` tokens (SPEC §2, in order).
    ///
    /// One refinement: a delivered final prompt also suppresses a later handoff request,
    /// so the ladder only moves forward in a window.
    pub fn evaluate(&self, projected: u64, claims: Claims, new_context_offered: bool) -> Decision {
        self.evaluate_guarded(projected, 0, claims, new_context_offered)
    }

    /// [`Self::evaluate`] for a count part of which is estimated: the hard guard (the
    /// forced rollover, or block when Off, at `U`) compares `projected + margin` with the
    /// usable limit, where `margin` is what the count keeps for its estimated part
    /// ([`crate::anchor::CountSplit::guard_margin`]); the advisory stages use
    /// `projected` as it is.
    pub fn evaluate_guarded(
        &self,
        projected: u64,
        margin: u64,
        claims: Claims,
        new_context_offered: bool,
    ) -> Decision {
        let used = projected;
        let usable = self.usable_limit;
        let headroom = used.saturating_add(self.advisory_headroom) < usable;
        let reached = |point: i64| point > 0 && i128::from(used) >= i128::from(point);
        let action = if used.saturating_add(margin) >= usable {
            if self.enabled() {
                Action::Rollover
            } else {
                Action::Block
            }
        } else if !self.enabled() || !headroom {
            Action::Continue
        } else if reached(self.final_at) && !claims.final_prompt && new_context_offered {
            Action::Final
        } else if reached(self.handoff_target) && !claims.handoff && !claims.final_prompt {
            Action::Handoff
        } else if reached(self.warning_at)
            && !(claims.warning || claims.handoff || claims.final_prompt)
        {
            Action::Warning
        } else {
            Action::Continue
        };
        Decision {
            action,
            projected: used,
            headroom,
        }
    }
}

fn clamp_i64(v: i128) -> i64 {
    i64::try_from(v).unwrap_or(if v < 0 { i64::MIN } else { i64::MAX })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget(l: u64, t: f64) -> Budget {
        Budget::new(l, t, None).unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn the_guard_margin_moves_only_the_hard_guard() {
        let b = budget(100_000, 0.7);
        let u = b.usable_limit();
        let none = Claims::default();
        assert_eq!(b.evaluate(u - 10, none, true).action, Action::Continue);
        assert_eq!(
            b.evaluate_guarded(u - 10, 10, none, true).action,
            Action::Rollover
        );
        // The stages read the count itself: a margin does not pull an advisory earlier.
        assert_eq!(
            b.evaluate_guarded(59_999, 5_000, none, true).action,
            Action::Continue
        );
        let off = budget(100_000, 1.0);
        assert_eq!(
            off.evaluate_guarded(u - 1, 1, none, true).action,
            Action::Block
        );
    }

    #[test]
    fn reference_values_of_the_spec() {
        let b = budget(100_000, 0.7);
        assert_eq!(
            (
                b.usable_limit(),
                b.handoff_target(),
                b.warning_at(),
                b.final_at()
            ),
            (91_808, 70_000, 60_000, 85_664)
        );
        let expect = [
            (59_999, Action::Continue),
            (60_000, Action::Warning),
            (70_000, Action::Handoff),
            (85_664, Action::Final),
            (89_760, Action::Continue),
            (91_808, Action::Rollover),
        ];
        for (projected, action) in expect {
            assert_eq!(
                b.evaluate(projected, Claims::default(), true).action,
                action,
                "{projected}"
            );
        }
    }

    #[test]
    fn off_is_one_definition_including_rounding_to_100_percent() {
        for t in [1.0, 0.99995, 0.99999] {
            let b = budget(100_000, t);
            assert!(!b.enabled(), "{t}");
            assert!(Threshold::from_fraction(t)
                .map(|x| x.is_off())
                .unwrap_or(false));
            assert_eq!(
                b.evaluate(91_808, Claims::default(), true).action,
                Action::Block
            );
            assert_eq!(
                b.evaluate(70_000, Claims::default(), true).action,
                Action::Continue
            );
        }
        assert!(!Threshold::from_fraction(0.99994)
            .map(|x| x.is_off())
            .unwrap_or(true));
    }

    #[test]
    fn the_stages_of_tiny_windows_scale_with_them() {
        // L = 40: U = 30, F = 30 - 7 = 23, H = min(28, 22) = 22,
        // W = max(11, min(24, 22 - 7 = 15)) = 15; headroom 3.
        let b = budget(40, 0.7);
        assert_eq!(
            (
                b.usable_limit(),
                b.final_at(),
                b.handoff_target(),
                b.warning_at()
            ),
            (30, 23, 22, 15)
        );
        // L = 4: U = 3, F = 3 - 0 = 3, H = min(2, 2) = 2, W = max(1, min(2, 2)) = 2.
        let tiny = budget(4, 0.7);
        assert_eq!(
            (tiny.final_at(), tiny.handoff_target(), tiny.warning_at()),
            (3, 2, 2)
        );
        assert_eq!(
            b.evaluate(30, Claims::default(), true).action,
            Action::Rollover
        );
    }

    #[test]
    fn small_windows_get_the_ladder_before_the_forced_rollover() {
        // L = 8_192: U = 6_144, F = 6_144 - 1_536 = 4_608, H = min(5_734, 4_607) = 4_607,
        // W = max(2_303, min(4_915, 4_607 - 1_536 = 3_071)) = 3_071; headroom 768.
        let b = budget(8_192, 0.7);
        assert_eq!(
            (
                b.final_at(),
                b.handoff_target(),
                b.warning_at(),
                b.advisory_headroom()
            ),
            (4_608, 4_607, 3_071, 768)
        );
        let action = |used| b.evaluate(used, Claims::default(), true).action;
        assert_eq!(action(3_070), Action::Continue);
        assert_eq!(action(3_071), Action::Warning);
        assert_eq!(action(4_607), Action::Handoff);
        assert_eq!(action(4_608), Action::Final);
        assert_eq!(action(5_376), Action::Continue); // 5_376 + 768 = U: no headroom
        assert_eq!(action(6_144), Action::Rollover);
        // The SPEC's figures from U = 24_576 up.
        let b = budget(32_768, 0.7);
        assert_eq!(b.final_at(), 24_576 - 6_144);
        assert_eq!(b.advisory_headroom(), 2_048);
    }

    #[test]
    fn bad_arguments_are_typed_errors() {
        assert!(matches!(
            Budget::new(0, 0.7, None),
            Err(BudgetError::ContextWindow { .. })
        ));
        assert!(matches!(
            Budget::new(100, f64::NAN, None),
            Err(BudgetError::Threshold { .. })
        ));
        assert!(matches!(
            Budget::new(100, 1.5, None),
            Err(BudgetError::Threshold { .. })
        ));
        assert!(matches!(
            Budget::new(100, 0.7, Some(100)),
            Err(BudgetError::OutputReserve { .. })
        ));
        assert_eq!(
            Budget::new(u64::MAX, 0.7, None).map(|b| b.enabled()),
            Ok(true)
        );
    }

    #[test]
    fn actions_round_trip_through_their_names() {
        for a in Action::ALL {
            assert_eq!(a.as_str().parse::<Action>(), Ok(a));
        }
        assert!("nope".parse::<Action>().is_err());
    }
}
