//! Usage anchoring (SPEC §1, Request counting): what the next request costs when the
//! provider has reported what an earlier one cost.
//!
//! Every provider reply reports the input tokens the provider counted for the request
//! it answered. While the request's prefix is unchanged (same window, system text,
//! tools and hooks; nothing in it retracted), the next request is that reported figure
//! plus the profile's count of what was appended since — the *anchored* count. For
//! families without a public tokenizer the profile's count is an estimate, calibrated
//! by the ratio of reported to estimated tokens over the conversation's anchored
//! requests, within [`CALIBRATION_MIN_BP`]..=[`CALIBRATION_MAX_BP`].
//!
//! Every count is split into its *exact*, *anchored* and *estimated* parts
//! ([`CountSplit`]); the budget's hard guards keep a margin for the estimated part only
//! ([`CountSplit::guard_margin`]). The session decides which anchor applies; this module
//! is the arithmetic, the one definition for Python and Rust hosts.
//!
//! ```
//! use ctxbudget::anchor::{Calibration, CountSplit};
//!
//! // An estimated family: the provider reported 1_000 for a request estimated at 1_250.
//! let calibration = Calibration::default().with_sample(1_000, 1_250);
//! assert_eq!(calibration.ratio_bp(), Some(8_000));
//! // The next request: the anchor plus 100 estimated tokens appended since, calibrated.
//! let split = CountSplit::counted(Some(1_000), 100, 1_350, true, calibration);
//! assert_eq!((split.anchored, split.estimated, split.total()), (1_000, 80, 1_080));
//! assert_eq!(split.guard_margin(), 4); // 5% of the estimated part, rounded up
//! ```

/// The calibration ratio's lower bound, in basis points (×0.5): a reported figure
/// less than half the estimate is more likely a usage object of another request (or
/// output tokens) than a denser tokenizer, so it calibrates no further down.
pub const CALIBRATION_MIN_BP: u32 = 5_000;
/// The calibration ratio's upper bound, in basis points (×2.0).
pub const CALIBRATION_MAX_BP: u32 = 20_000;
/// The margin the hard guards keep for the estimated part of a count, in basis points
/// of that part (5%). Exact and anchored tokens get none.
pub const ESTIMATE_MARGIN_BP: u32 = 500;

/// The estimate's calibration for one conversation: the sums of reported and estimated
/// input tokens over its anchored requests (each request's estimate is the profile's
/// count before calibration).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Calibration {
    /// Input tokens the provider reported, summed.
    pub reported: u64,
    /// The profile's uncalibrated counts of the same requests, summed.
    pub estimated: u64,
}

impl Calibration {
    /// The calibration with one more anchored request: `reported` by the provider,
    /// `estimated` by the profile. A sample with either figure zero is ignored.
    #[must_use]
    pub fn with_sample(self, reported: u64, estimated: u64) -> Calibration {
        if reported == 0 || estimated == 0 {
            return self;
        }
        Calibration {
            reported: self.reported.saturating_add(reported),
            estimated: self.estimated.saturating_add(estimated),
        }
    }

    /// The calibration with another one's samples added (saturating).
    #[must_use]
    pub fn merged(self, other: Calibration) -> Calibration {
        Calibration {
            reported: self.reported.saturating_add(other.reported),
            estimated: self.estimated.saturating_add(other.estimated),
        }
    }

    /// `reported / estimated` in basis points, rounded to nearest and held within
    /// [`CALIBRATION_MIN_BP`]..=[`CALIBRATION_MAX_BP`]; `None` without samples.
    pub fn ratio_bp(&self) -> Option<u32> {
        if self.estimated == 0 || self.reported == 0 {
            return None;
        }
        let ratio = (u128::from(self.reported) * 10_000 + u128::from(self.estimated) / 2)
            / u128::from(self.estimated);
        let bounded = ratio.clamp(
            u128::from(CALIBRATION_MIN_BP),
            u128::from(CALIBRATION_MAX_BP),
        );
        u32::try_from(bounded).ok()
    }

    /// `estimate` calibrated (rounded up); unchanged without samples.
    pub fn apply(&self, estimate: u64) -> u64 {
        match self.ratio_bp() {
            None => estimate,
            Some(bp) => scale_up(estimate, bp),
        }
    }
}

/// `value × bp / 10_000`, rounded up, saturating.
fn scale_up(value: u64, bp: u32) -> u64 {
    let scaled = (u128::from(value) * u128::from(bp)).div_ceil(10_000);
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// How much of a request's count is exact, anchored and estimated.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct CountSplit {
    /// Tokens counted with the model's own tokenizer by the provider's profile (or by a
    /// provider's count endpoint).
    pub exact: u64,
    /// Tokens the provider reported for an earlier request with the same prefix.
    pub anchored: u64,
    /// Tokens estimated for a family without a public tokenizer (calibrated when the
    /// conversation has anchored requests).
    pub estimated: u64,
}

impl CountSplit {
    /// The count of the next request.
    ///
    /// `anchor` is the input tokens reported for the latest request whose prefix the
    /// next one keeps, if any; `since` the profile's count of what was appended after
    /// that request (the reply included); `full` the profile's count of the whole
    /// request, used without an anchor. With `estimated_family` the profile's counts are
    /// estimates, calibrated by `calibration`; otherwise they are exact.
    pub fn counted(
        anchor: Option<u64>,
        since: u64,
        full: u64,
        estimated_family: bool,
        calibration: Calibration,
    ) -> CountSplit {
        let (anchored, counted) = match anchor {
            Some(reported) => (reported, since),
            None => (0, full),
        };
        if estimated_family {
            CountSplit {
                exact: 0,
                anchored,
                estimated: calibration.apply(counted),
            }
        } else {
            CountSplit {
                exact: counted,
                anchored,
                estimated: 0,
            }
        }
    }

    /// A count a provider's count endpoint returned for the whole request: all exact.
    pub fn endpoint(tokens: u64) -> CountSplit {
        CountSplit {
            exact: tokens,
            anchored: 0,
            estimated: 0,
        }
    }

    /// The whole count.
    pub fn total(&self) -> u64 {
        self.exact
            .saturating_add(self.anchored)
            .saturating_add(self.estimated)
    }

    /// The margin the hard guards keep for this count: [`ESTIMATE_MARGIN_BP`] of the
    /// estimated part, rounded up; nothing for exact and anchored tokens.
    pub fn guard_margin(&self) -> u64 {
        scale_up(self.estimated, ESTIMATE_MARGIN_BP)
    }

    /// The count the hard guards compare with the usable limit: the total plus
    /// [`Self::guard_margin`].
    pub fn guarded(&self) -> u64 {
        self.total().saturating_add(self.guard_margin())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ratio_is_bounded_and_absent_without_samples() {
        let none = Calibration::default();
        assert_eq!(none.ratio_bp(), None);
        assert_eq!(none.apply(123), 123);
        assert_eq!(none.with_sample(0, 5).ratio_bp(), None);
        assert_eq!(none.with_sample(1, 100).ratio_bp(), Some(CALIBRATION_MIN_BP));
        assert_eq!(none.with_sample(900, 100).ratio_bp(), Some(CALIBRATION_MAX_BP));
        let c = none.with_sample(770, 1_000).with_sample(230, 250);
        assert_eq!(c.ratio_bp(), Some(8_000));
        assert_eq!(c.apply(101), 81);
    }

    #[test]
    fn exact_families_are_never_calibrated() {
        let c = Calibration::default().with_sample(500, 1_000);
        let split = CountSplit::counted(None, 0, 1_000, false, c);
        assert_eq!(split, CountSplit::endpoint(1_000));
        assert_eq!(split.guard_margin(), 0);
        let anchored = CountSplit::counted(Some(990), 10, 1_005, false, c);
        assert_eq!((anchored.anchored, anchored.exact, anchored.total()), (990, 10, 1_000));
        assert_eq!(anchored.guarded(), 1_000);
    }

    #[test]
    fn the_count_never_falls_below_its_exact_and_anchored_parts() {
        for anchor in [None, Some(0), Some(1), Some(50_000)] {
            for since in [0, 1, 7, 10_000] {
                for bp in [0, 1, 4_000, 10_000, 40_000] {
                    let c = Calibration::default().with_sample(bp, 10_000);
                    for family in [false, true] {
                        let s = CountSplit::counted(anchor, since, since + 100, family, c);
                        assert!(s.total() >= s.exact + s.anchored);
                        assert!(s.total() >= anchor.unwrap_or(0));
                        assert!(s.guarded() >= s.total());
                    }
                }
            }
        }
    }
}
