//! Usage anchoring for Python: the core's arithmetic (`ctxbudget::anchor`), so the
//! session states no rule of its own for anchored, calibrated and guarded counts.

use ctxbudget::anchor::{self, Calibration, CountSplit};
use pyo3::prelude::*;

use crate::errors::no_panic;

/// The calibration sums as the session passes them: `(reported, estimated, overhead,
/// step_reported, step_estimated)`.
type Sums = (u64, u64, u64, u64, u64);

fn calibration(
    (reported, estimated, overhead, step_reported, step_estimated): Sums,
) -> Calibration {
    Calibration {
        reported,
        estimated,
        overhead,
        step_reported,
        step_estimated,
    }
}

/// `(exact, anchored, estimated, guard margin)` of the next request: the core's
/// `CountSplit::counted` with the conversation's calibration sums.
#[pyfunction]
pub(crate) fn count_split(
    py: Python<'_>,
    anchor: Option<u64>,
    since: u64,
    overhead: u64,
    messages: u64,
    estimated_family: bool,
    sums: Sums,
) -> PyResult<(u64, u64, u64, u64)> {
    no_panic(py, "count_split()", || {
        let s = CountSplit::counted(
            anchor,
            since,
            overhead,
            messages,
            estimated_family,
            calibration(sums),
        );
        (s.exact, s.anchored, s.estimated, s.guard_margin())
    })
}

/// The guard margin of an estimated part (`CountSplit::guard_margin`).
#[pyfunction]
pub(crate) fn guard_margin(py: Python<'_>, estimated: u64) -> PyResult<u64> {
    no_panic(py, "guard_margin()", || {
        CountSplit {
            exact: 0,
            anchored: 0,
            estimated,
        }
        .guard_margin()
    })
}

/// `(whole, messages, overhead)` calibration ratios in basis points for the sums given
/// (bounded), each `None` without samples.
#[pyfunction]
pub(crate) fn calibration_ratios_bp(
    py: Python<'_>,
    sums: Sums,
) -> PyResult<(Option<u32>, Option<u32>, Option<u32>)> {
    no_panic(py, "calibration_ratios_bp()", || {
        let c = calibration(sums);
        (c.ratio_bp(), c.message_ratio_bp(), c.overhead_ratio_bp())
    })
}

/// Registers the functions and the bounds.
/// Whether a reported figure can be the provider's count of a request the profile
/// counted at `profile` (`ctxbudget::anchor::plausible`).
#[pyfunction]
pub(crate) fn anchor_plausible(reported: u64, profile: u64) -> bool {
    anchor::plausible(reported, profile)
}

pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(anchor_plausible, m)?)?;
    m.add_function(wrap_pyfunction!(count_split, m)?)?;
    m.add_function(wrap_pyfunction!(guard_margin, m)?)?;
    m.add_function(wrap_pyfunction!(calibration_ratios_bp, m)?)?;
    m.add("CALIBRATION_MIN_BP", anchor::CALIBRATION_MIN_BP)?;
    m.add("CALIBRATION_MAX_BP", anchor::CALIBRATION_MAX_BP)?;
    m.add("ESTIMATE_MARGIN_BP", anchor::ESTIMATE_MARGIN_BP)?;
    Ok(())
}
