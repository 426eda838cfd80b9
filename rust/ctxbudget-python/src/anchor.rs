//! Usage anchoring for Python: the core's arithmetic (`ctxbudget::anchor`), so the
//! session states no rule of its own for anchored, calibrated and guarded counts.

use ctxbudget::anchor::{self, Calibration, CountSplit};
use pyo3::prelude::*;

use crate::errors::no_panic;

/// The calibration sums as the session passes them: `(reported, estimated,
/// step_reported, step_estimated, head_reported, head_messages, head_overhead)`.
type Sums = (u64, u64, u64, u64, u64, u64, u64);

fn calibration(
    (
        reported,
        estimated,
        step_reported,
        step_estimated,
        head_reported,
        head_messages,
        head_overhead,
    ): Sums,
) -> Calibration {
    Calibration {
        reported,
        estimated,
        step_reported,
        step_estimated,
        head_reported,
        head_messages,
        head_overhead,
    }
}

/// `(exact, anchored, estimated, guard margin)` of the next request: the core's
/// `CountSplit::counted` with the conversation's calibration sums, or, given the
/// anchored request's overhead `overhead_was` (its system text or tools changed since)
/// for an estimated family, `CountSplit::rebased`.
#[pyfunction]
#[pyo3(signature = (anchor, since, overhead, messages, estimated_family, sums, overhead_was=None))]
#[allow(clippy::too_many_arguments)]
pub(crate) fn count_split(
    py: Python<'_>,
    anchor: Option<u64>,
    since: u64,
    overhead: u64,
    messages: u64,
    estimated_family: bool,
    sums: Sums,
    overhead_was: Option<u64>,
) -> PyResult<(u64, u64, u64, u64)> {
    no_panic(py, "count_split()", || {
        let s = match (anchor, overhead_was) {
            (Some(reported), Some(was)) if estimated_family => {
                CountSplit::rebased(reported, was, overhead, since, calibration(sums))
            }
            _ => CountSplit::counted(
                anchor,
                since,
                overhead,
                messages,
                estimated_family,
                calibration(sums),
            ),
        };
        (s.exact, s.anchored, s.estimated, s.guard_margin())
    })
}

/// The guard margin of an estimated part (`CountSplit::guard_margin`).
#[pyfunction]
pub(crate) fn guard_margin(py: Python<'_>, estimated: u64) -> PyResult<u64> {
    no_panic(py, "guard_margin()", || {
        CountSplit {
            estimated,
            ..CountSplit::default()
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

/// What one prefix head adds to the sums `(head_reported, head_messages,
/// head_overhead)`: its figures weighted by its overhead share (`Calibration::with_head`).
#[pyfunction]
pub(crate) fn calibration_head(
    py: Python<'_>,
    reported: u64,
    estimated: u64,
    overhead: u64,
) -> PyResult<(u64, u64, u64)> {
    no_panic(py, "calibration_head()", || {
        let c = Calibration::default().with_head(reported, estimated, overhead);
        (c.head_reported, c.head_messages, c.head_overhead)
    })
}

/// Whether a reported figure can be the provider's count of a request the profile
/// counted at `profile` (`ctxbudget::anchor::plausible`).
#[pyfunction]
pub(crate) fn anchor_plausible(reported: u64, profile: u64) -> bool {
    anchor::plausible(reported, profile)
}

/// Registers the functions and the bounds.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(anchor_plausible, m)?)?;
    m.add_function(wrap_pyfunction!(count_split, m)?)?;
    m.add_function(wrap_pyfunction!(guard_margin, m)?)?;
    m.add_function(wrap_pyfunction!(calibration_ratios_bp, m)?)?;
    m.add_function(wrap_pyfunction!(calibration_head, m)?)?;
    m.add("CALIBRATION_MIN_BP", anchor::CALIBRATION_MIN_BP)?;
    m.add("CALIBRATION_MAX_BP", anchor::CALIBRATION_MAX_BP)?;
    m.add("ESTIMATE_MARGIN_BP", anchor::ESTIMATE_MARGIN_BP)?;
    Ok(())
}
