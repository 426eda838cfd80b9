//! Usage anchoring (SPEC §1, Request counting): what the next request costs when the
//! provider has reported what an earlier one cost.
//!
//! Every provider reply reports the input tokens the provider counted for the request
//! it answered. While the request's prefix is unchanged (same window, system text,
//! tools and hooks; nothing in it retracted), the next request is that reported figure
//! plus the profile's count of what was appended since — the *anchored* count. When
//! only the system text or tools changed within the window, the messages are still
//! sent as they were: for an estimated family the figure still holds for them, and
//! only the overhead's change is estimated ([`CountSplit::rebased`]). For
//! families without a public tokenizer the profile's count is an estimate, calibrated
//! by the ratio of reported to estimated tokens over the conversation's anchored
//! requests, within [`CALIBRATION_MIN_BP`]..=[`CALIBRATION_MAX_BP`].
//!
//! Every count is split into its *exact*, *anchored* and *estimated* parts
//! ([`CountSplit`]); the budget's hard guards keep a margin for what is estimated only
//! ([`CountSplit::guard_margin`]). The session decides which anchor applies; this module
//! is the arithmetic, the one definition for Python and Rust hosts.
//!
//! ```
//! use ctxbudget::anchor::{Calibration, CountSplit};
//!
//! // An estimated family: the provider reported 1_000 for a request estimated at 1_250
//! // (250 of it system text and tools), the window's first.
//! let calibration = Calibration::default()
//!     .with_sample(1_000, 1_250)
//!     .with_head(1_000, 1_250, 250);
//! assert_eq!(calibration.ratio_bp(), Some(8_000));
//! // The next request: the anchor plus 100 estimated tokens appended since, calibrated.
//! let split = CountSplit::counted(Some(1_000), 100, 250, 1_100, true, calibration);
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

/// The estimate's calibration for one conversation, as sums over its anchored requests
/// (each request's estimate is the profile's count before calibration).
///
/// A request is two parts that estimate differently: the *overhead* (request frame,
/// system text, tool definitions — a provider renders tools its own way) and the
/// *messages*. Messages are calibrated by the ratio of the steps between consecutive
/// anchored requests of one prefix (what was appended, reported against estimated),
/// which is what an anchored count adds. The overhead is calibrated by each prefix's
/// *head* — its first anchored request, the one with the fewest messages — what its
/// reported figure leaves once its messages are calibrated, over its overhead. A head's
/// share of error is the message ratio's error times its messages, so each head is
/// weighted by its overhead's share of its request (see [`Self::with_head`]): a window's
/// first request (mostly overhead) decides, a tool change late in a long window barely
/// counts. Without steps yet, both use the plain reported ÷ estimated ratio. Every
/// ratio is held within [`CALIBRATION_MIN_BP`]..=[`CALIBRATION_MAX_BP`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Calibration {
    /// Input tokens the provider reported, summed.
    pub reported: u64,
    /// The profile's counts of the same requests, summed.
    pub estimated: u64,
    /// Reported tokens added between consecutive anchored requests of one prefix.
    pub step_reported: u64,
    /// The profile's tokens added between the same requests.
    pub step_estimated: u64,
    /// Reported tokens of each prefix's head, weighted by its overhead share, summed
    /// (in [`HEAD_UNITS_PER_TOKEN`]).
    pub head_reported: u64,
    /// The profile's message tokens of the same heads, weighted alike, summed (in
    /// [`HEAD_UNITS_PER_TOKEN`]).
    pub head_messages: u64,
    /// The profile's overhead tokens of the same heads, weighted alike, summed (in
    /// [`HEAD_UNITS_PER_TOKEN`]).
    pub head_overhead: u64,
}

fn ratio(reported: u128, estimated: u128) -> Option<u32> {
    if estimated == 0 || reported == 0 {
        return None;
    }
    let r = (reported * 10_000 + estimated / 2) / estimated;
    u32::try_from(r.clamp(
        u128::from(CALIBRATION_MIN_BP),
        u128::from(CALIBRATION_MAX_BP),
    ))
    .ok()
}

/// The head sums' unit: thousandths of a token (a head's weight is a fraction, and
/// whole tokens would round a small head's figures by up to a tenth of a percent).
pub const HEAD_UNITS_PER_TOKEN: u64 = 1_000;

/// `value × overhead / estimated` in [`HEAD_UNITS_PER_TOKEN`], rounded to the nearest
/// unit, saturating (`estimated > 0`).
fn weighted(value: u64, overhead: u64, estimated: u64) -> u64 {
    let (value, overhead, estimated) = (
        u128::from(value) * u128::from(HEAD_UNITS_PER_TOKEN),
        u128::from(overhead),
        u128::from(estimated),
    );
    u64::try_from((value * overhead + estimated / 2) / estimated).unwrap_or(u64::MAX)
}

impl Calibration {
    /// The calibration with one more anchored request: `reported` by the provider,
    /// `estimated` by the profile. A sample with either zero is ignored.
    #[must_use]
    pub fn with_sample(self, reported: u64, estimated: u64) -> Calibration {
        if reported == 0 || estimated == 0 {
            return self;
        }
        Calibration {
            reported: self.reported.saturating_add(reported),
            estimated: self.estimated.saturating_add(estimated),
            ..self
        }
    }

    /// The calibration with one more step between anchored requests of one prefix:
    /// `reported` and `estimated` tokens appended (a step with either zero is ignored).
    #[must_use]
    pub fn with_step(self, reported: u64, estimated: u64) -> Calibration {
        if reported == 0 || estimated == 0 {
            return self;
        }
        Calibration {
            step_reported: self.step_reported.saturating_add(reported),
            step_estimated: self.step_estimated.saturating_add(estimated),
            ..self
        }
    }

    /// The calibration with one more prefix head: the first anchored request of a
    /// prefix (a window's first, or the first after its system text or tools changed),
    /// `reported` by the provider, `estimated` by the profile, `overhead` of which was
    /// the request's overhead. Its figures are weighted by `overhead ÷ estimated`: the
    /// overhead it implies errs by the message ratio's error times its messages, so a
    /// head that is mostly messages says little about the overhead. (Not a sample:
    /// add it with [`Self::with_sample`] too.) A head with either of the first two zero
    /// is ignored.
    #[must_use]
    pub fn with_head(self, reported: u64, estimated: u64, overhead: u64) -> Calibration {
        if reported == 0 || estimated == 0 {
            return self;
        }
        let overhead = overhead.min(estimated);
        let messages = estimated - overhead;
        Calibration {
            head_reported: self
                .head_reported
                .saturating_add(weighted(reported, overhead, estimated)),
            head_messages: self
                .head_messages
                .saturating_add(weighted(messages, overhead, estimated)),
            head_overhead: self
                .head_overhead
                .saturating_add(weighted(overhead, overhead, estimated)),
            ..self
        }
    }

    /// Both calibrations' sums added (saturating).
    #[must_use]
    pub fn merged(self, other: Calibration) -> Calibration {
        Calibration {
            reported: self.reported.saturating_add(other.reported),
            estimated: self.estimated.saturating_add(other.estimated),
            step_reported: self.step_reported.saturating_add(other.step_reported),
            step_estimated: self.step_estimated.saturating_add(other.step_estimated),
            head_reported: self.head_reported.saturating_add(other.head_reported),
            head_messages: self.head_messages.saturating_add(other.head_messages),
            head_overhead: self.head_overhead.saturating_add(other.head_overhead),
        }
    }

    /// Reported ÷ estimated over the whole requests, in basis points (bounded);
    /// `None` without samples.
    pub fn ratio_bp(&self) -> Option<u32> {
        ratio(u128::from(self.reported), u128::from(self.estimated))
    }

    /// The ratio over the steps alone (bounded); `None` without steps.
    fn step_ratio_bp(&self) -> Option<u32> {
        ratio(
            u128::from(self.step_reported),
            u128::from(self.step_estimated),
        )
    }

    /// The ratio for messages: over the steps, else [`Self::ratio_bp`].
    pub fn message_ratio_bp(&self) -> Option<u32> {
        self.step_ratio_bp().or_else(|| self.ratio_bp())
    }

    /// The ratio for the overhead: what the heads' reported figures leave once their
    /// messages are calibrated by the step ratio, over their overhead; else (no steps
    /// or no heads yet) [`Self::ratio_bp`].
    pub fn overhead_ratio_bp(&self) -> Option<u32> {
        let whole = self.ratio_bp()?;
        let Some(messages) = self.step_ratio_bp() else {
            return Some(whole);
        };
        if self.head_overhead == 0 {
            return Some(whole);
        }
        let left = (u128::from(self.head_reported) * 10_000)
            .saturating_sub(u128::from(self.head_messages) * u128::from(messages));
        // `left` is in tokens × 10_000: the ratio is left / overhead, already scaled.
        let overhead = u128::from(self.head_overhead);
        let r = (left + overhead / 2) / overhead;
        u32::try_from(r.clamp(
            u128::from(CALIBRATION_MIN_BP),
            u128::from(CALIBRATION_MAX_BP),
        ))
        .ok()
    }

    /// Messages estimated at `estimate` tokens, calibrated (rounded up); unchanged
    /// without samples.
    pub fn apply(&self, estimate: u64) -> u64 {
        match self.message_ratio_bp() {
            None => estimate,
            Some(bp) => scale_up(estimate, bp),
        }
    }

    /// A whole request estimated as `overhead` plus `messages` tokens, calibrated part
    /// by part (rounded up); unchanged without samples.
    pub fn apply_request(&self, overhead: u64, messages: u64) -> u64 {
        match self.overhead_ratio_bp() {
            None => overhead.saturating_add(messages),
            Some(bp) => scale_up(overhead, bp).saturating_add(self.apply(messages)),
        }
    }
}

/// `value × bp / 10_000`, rounded up, saturating.
fn scale_up(value: u64, bp: u32) -> u64 {
    let scaled = (u128::from(value) * u128::from(bp)).div_ceil(10_000);
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// `value × bp / 10_000`, rounded down.
fn scale_down(value: u64, bp: u32) -> u64 {
    let scaled = u128::from(value) * u128::from(bp) / 10_000;
    u64::try_from(scaled).unwrap_or(u64::MAX)
}

/// Whether `reported` can be the provider's count of a request the profile counted at
/// `profile` tokens: within the calibration bounds ([`CALIBRATION_MIN_BP`] ..=
/// [`CALIBRATION_MAX_BP`] of it). A figure outside them is another request's usage,
/// output tokens or a placeholder (test doubles report fixed figures), not a different
/// tokenizer; trusted, it would hold the count far below the request and the forced
/// rollover would never come. Such a reply neither anchors nor calibrates.
pub fn plausible(reported: u64, profile: u64) -> bool {
    if reported == 0 || profile == 0 {
        return false;
    }
    let (reported, profile) = (u128::from(reported) * 10_000, u128::from(profile));
    reported >= profile * u128::from(CALIBRATION_MIN_BP)
        && reported <= profile * u128::from(CALIBRATION_MAX_BP)
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
    /// Estimated tokens already taken off [`Self::anchored`]: the calibrated estimate of
    /// system text or tools removed since the anchored request (see
    /// [`Self::rebased`]). Not part of the total; the guards keep a margin for it as
    /// for the estimated part, since it is an estimate too.
    pub deducted: u64,
}

impl CountSplit {
    /// The count of the next request.
    ///
    /// `anchor` is the input tokens reported for the latest request whose prefix the
    /// next one keeps, if any; `since` the profile's count of what was appended after
    /// that request (the reply included). Without an anchor the profile's count of the
    /// whole request is used: `overhead` (frame, system text, tools) plus `messages`.
    /// With `estimated_family` the profile's counts are estimates, calibrated by
    /// `calibration`; otherwise they are exact.
    pub fn counted(
        anchor: Option<u64>,
        since: u64,
        overhead: u64,
        messages: u64,
        estimated_family: bool,
        calibration: Calibration,
    ) -> CountSplit {
        let (anchored, counted) = match anchor {
            Some(reported) => (reported, since),
            None => (0, overhead.saturating_add(messages)),
        };
        if !estimated_family {
            return CountSplit {
                exact: counted,
                anchored,
                ..CountSplit::default()
            };
        }
        let estimated = match anchor {
            Some(_) => calibration.apply(since),
            None => calibration.apply_request(overhead, messages),
        };
        CountSplit {
            anchored,
            estimated,
            ..CountSplit::default()
        }
    }

    /// The count of the next request of an estimated family when its system text or
    /// tools changed since the latest anchored request of the same window, and nothing
    /// else did: the messages that request carried are still sent as they were, so
    /// the provider's figure for them still holds; only the overhead part changed.
    ///
    /// `reported` is the anchored request's figure, `overhead_was` the profile's count
    /// of its overhead, `overhead` that of the next request's, `since` the profile's
    /// count of what was appended after it. The count is `reported`, plus the
    /// calibrated estimate of the overhead added (estimated), less that of the overhead
    /// removed ([`Self::deducted`], rounded down so the count errs high), plus the
    /// calibrated estimate of what was appended (estimated). The guard margin covers
    /// both estimates.
    pub fn rebased(
        reported: u64,
        overhead_was: u64,
        overhead: u64,
        since: u64,
        calibration: Calibration,
    ) -> CountSplit {
        let bp = calibration.overhead_ratio_bp().unwrap_or(10_000);
        let added = scale_up(overhead.saturating_sub(overhead_was), bp);
        let removed = scale_down(overhead_was.saturating_sub(overhead), bp).min(reported);
        CountSplit {
            exact: 0,
            anchored: reported - removed,
            estimated: added.saturating_add(calibration.apply(since)),
            deducted: removed,
        }
    }

    /// A count a provider's count endpoint returned for the whole request: all exact.
    pub fn endpoint(tokens: u64) -> CountSplit {
        CountSplit {
            exact: tokens,
            ..CountSplit::default()
        }
    }

    /// The whole count.
    pub fn total(&self) -> u64 {
        self.exact
            .saturating_add(self.anchored)
            .saturating_add(self.estimated)
    }

    /// The margin the hard guards keep for this count: [`ESTIMATE_MARGIN_BP`] of the
    /// estimated part and of what was [deducted](Self::deducted) from the anchored one,
    /// rounded up; nothing for exact and anchored tokens.
    pub fn guard_margin(&self) -> u64 {
        scale_up(
            self.estimated.saturating_add(self.deducted),
            ESTIMATE_MARGIN_BP,
        )
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
    fn a_figure_far_from_the_profiles_count_is_not_plausible() {
        assert!(plausible(1_000, 1_000));
        assert!(plausible(500, 1_000) && plausible(2_000, 1_000));
        assert!(!plausible(499, 1_000) && !plausible(2_001, 1_000));
        assert!(!plausible(10, 5_000), "a placeholder usage of 10 tokens");
        assert!(!plausible(0, 1_000) && !plausible(1_000, 0));
        assert!(plausible(u64::MAX, u64::MAX));
    }

    #[test]
    fn ratios_are_bounded_and_absent_without_samples() {
        let none = Calibration::default();
        assert_eq!(none.ratio_bp(), None);
        assert_eq!(none.apply(123), 123);
        assert_eq!(none.apply_request(20, 103), 123);
        assert_eq!(none.with_sample(0, 5).ratio_bp(), None);
        assert_eq!(none.with_head(0, 5, 1), none);
        assert_eq!(
            none.with_sample(1, 100).ratio_bp(),
            Some(CALIBRATION_MIN_BP)
        );
        assert_eq!(
            none.with_sample(900, 100).ratio_bp(),
            Some(CALIBRATION_MAX_BP)
        );
        let c = none.with_sample(770, 1_000).with_sample(230, 250);
        assert_eq!(c.ratio_bp(), Some(8_000));
        assert_eq!(c.apply(101), 81);
    }

    #[test]
    fn messages_and_overhead_calibrate_apart() {
        // Messages really cost 0.8 of the estimate, the overhead 1.5 of it.
        let (o, m1, m2) = (1_000_u64, 2_000_u64, 3_000_u64);
        let truth = |m: u64| o * 3 / 2 + m * 4 / 5;
        let c = Calibration::default()
            .with_sample(truth(m1), o + m1)
            .with_head(truth(m1), o + m1, o)
            .with_sample(truth(m2), o + m2)
            .with_step(truth(m2) - truth(m1), m2 - m1);
        assert_eq!(c.message_ratio_bp(), Some(8_000));
        assert_eq!(c.overhead_ratio_bp(), Some(15_000));
        assert_eq!(c.apply_request(o, 5_000), truth(5_000));
        let anchored = CountSplit::counted(Some(truth(m2)), 500, o, m2 + 500, true, c);
        assert_eq!(anchored.total(), truth(m2 + 500));
    }

    #[test]
    fn the_overhead_is_calibrated_by_the_heads_not_by_what_long_requests_leave() {
        // A window's first request is all overhead, reported at 1.2 × its estimate;
        // then 10_000 estimated tokens are appended that cost 0.9 of it, and 2_000 that
        // cost 0.6: the steps' ratio (0.85) is right on average, not for the first
        // 10_000 the later requests all carry. What their reported figures leave after
        // it (the overhead ratio before heads) was 1.37; the head says 1.2.
        let c = Calibration::default()
            .with_sample(1_200, 1_000)
            .with_head(1_200, 1_000, 1_000)
            .with_sample(10_200, 11_000)
            .with_step(9_000, 10_000)
            .with_sample(11_400, 13_000)
            .with_step(1_200, 2_000);
        assert_eq!(c.message_ratio_bp(), Some(8_500));
        assert_eq!(c.overhead_ratio_bp(), Some(12_000));
        // The next window's first request: its overhead and 100 tokens of lead-in.
        assert_eq!(c.apply_request(1_000, 100), 1_200 + 85);
    }

    #[test]
    fn a_head_that_is_mostly_messages_barely_moves_the_overhead() {
        let first = Calibration::default()
            .with_sample(1_285, 1_100)
            .with_head(1_285, 1_100, 1_000)
            .with_sample(9_785, 11_100)
            .with_step(8_500, 10_000);
        assert_eq!(first.overhead_ratio_bp(), Some(12_000));
        // A tool change late in the window: a prefix whose head is 1_000 overhead tokens
        // that cost 1.2 of their estimate and 20_000 message tokens that cost 0.86 (not
        // the 0.85 the steps say). Weighted by 1_000 / 21_000, it moves the ratio by
        // 0.8%; unweighted, by 8%.
        let changed = first
            .with_sample(18_400, 21_000)
            .with_head(18_400, 21_000, 1_000);
        assert_eq!(changed.overhead_ratio_bp(), Some(12_100));
    }

    #[test]
    fn a_rebased_count_keeps_the_figure_and_estimates_the_overhead_change() {
        // Overhead costs 1.2 of its estimate, messages 0.8.
        let c = Calibration::default()
            .with_sample(1_200, 1_000)
            .with_head(1_200, 1_000, 1_000)
            .with_sample(9_200, 11_000)
            .with_step(8_000, 10_000);
        assert_eq!(
            (c.overhead_ratio_bp(), c.message_ratio_bp()),
            (Some(12_000), Some(8_000))
        );
        // A tool of 100 estimated tokens added; 50 appended since.
        let more = CountSplit::rebased(9_200, 1_000, 1_100, 50, c);
        assert_eq!(
            (more.exact, more.anchored, more.estimated, more.deducted),
            (0, 9_200, 120 + 40, 0)
        );
        assert_eq!(more.total(), 9_360);
        assert_eq!(more.guard_margin(), 8);
        // The same tool removed again: its estimate is taken off the figure, and the
        // guards keep a margin for that estimate.
        let fewer = CountSplit::rebased(9_360, 1_100, 1_000, 0, c);
        assert_eq!(
            (fewer.anchored, fewer.estimated, fewer.deducted),
            (9_240, 0, 120)
        );
        assert_eq!((fewer.total(), fewer.guard_margin()), (9_240, 6));
        // Never more taken off than was reported; without samples, uncalibrated.
        let none = Calibration::default();
        let all = CountSplit::rebased(10, 5_000, 0, 3, none);
        assert_eq!((all.anchored, all.estimated, all.deducted), (0, 3, 10));
    }

    #[test]
    fn exact_families_are_never_calibrated() {
        let c = Calibration::default()
            .with_sample(500, 1_000)
            .with_head(500, 1_000, 100);
        let split = CountSplit::counted(None, 0, 100, 900, false, c);
        assert_eq!(split, CountSplit::endpoint(1_000));
        assert_eq!(split.guard_margin(), 0);
        let anchored = CountSplit::counted(Some(990), 10, 100, 905, false, c);
        assert_eq!(
            (anchored.anchored, anchored.exact, anchored.total()),
            (990, 10, 1_000)
        );
        assert_eq!(anchored.guarded(), 1_000);
    }

    #[test]
    fn the_count_never_falls_below_its_exact_and_anchored_parts() {
        for anchor in [None, Some(0), Some(1), Some(50_000)] {
            for since in [0, 1, 7, 10_000] {
                for bp in [0, 1, 4_000, 10_000, 40_000] {
                    let c = Calibration::default()
                        .with_sample(bp, 10_000)
                        .with_head(bp, 10_000, 3_000)
                        .with_step(bp / 3 + 1, 2_000);
                    for family in [false, true] {
                        let s = CountSplit::counted(anchor, since, 100, since, family, c);
                        assert!(s.total() >= s.exact + s.anchored);
                        assert!(s.total() >= anchor.unwrap_or(0));
                        assert!(s.guarded() >= s.total());
                    }
                }
            }
        }
    }
}
