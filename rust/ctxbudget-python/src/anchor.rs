//! Usage anchoring for Python: the core's arithmetic (`ctxbudget::anchor`), so the
//! session states no rule of its own for anchored, calibrated and guarded counts.

use ctxbudget::anchor::{self, Calibration, CountSplit};
use pyo3::prelude::*;

use crate::errors::no_panic;

/// `(exact, anchored, estimated, guard margin)` of the next request: the core's
/// `CountSplit::counted` with the conversation's calibration sums.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub(crate) fn count_split(
    py: Python<'_>,
    anchor: Option<u64>,
    since: u64,
    full: u64,
    estimated_family: bool,
    reported_sum: u64,
    estimated_sum: u64,
) -> PyResult<(u64, u64, u64, u64)> {
    no_panic(py, "count_split()", || {
        let calibration = Calibration {
            reported: reported_sum,
            estimated: estimated_sum,
        };
        let s = CountSplit::counted(anchor, since, full, estimated_family, calibration);
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

/// The calibration ratio in basis points for the sums given (bounded), or `None`.
#[pyfunction]
pub(crate) fn calibration_ratio_bp(
    py: Python<'_>,
    reported_sum: u64,
    estimated_sum: u64,
) -> PyResult<Option<u32>> {
    no_panic(py, "calibration_ratio_bp()", || {
        Calibration {
            reported: reported_sum,
            estimated: estimated_sum,
        }
        .ratio_bp()
    })
}

/// Registers the functions and the bounds.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(count_split, m)?)?;
    m.add_function(wrap_pyfunction!(guard_margin, m)?)?;
    m.add_function(wrap_pyfunction!(calibration_ratio_bp, m)?)?;
    m.add("CALIBRATION_MIN_BP", anchor::CALIBRATION_MIN_BP)?;
    m.add("CALIBRATION_MAX_BP", anchor::CALIBRATION_MAX_BP)?;
    m.add("ESTIMATE_MARGIN_BP", anchor::ESTIMATE_MARGIN_BP)?;
    Ok(())
}
