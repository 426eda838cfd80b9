//! The budget ladder for Python: `ctxbudget.Budget` is a typed wrapper over this class.

use ctxbudget::budget::{self, Budget, Claims, Threshold};
use ctxbudget::transcript::{self, RowKind};
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedStr;
use pyo3::types::PyDict;
use serde_json::{Map, Value};

use crate::errors::{budget_error, no_panic};
use crate::pyjson::encode_value;

/// The ladder's points for one context window (see the typed wrapper `ctxbudget.Budget`).
#[pyclass(module = "ctxbudget._ctxbudget", name = "BudgetCore", frozen)]
pub(crate) struct PyBudgetCore {
    inner: Budget,
}

#[pymethods]
impl PyBudgetCore {
    #[new]
    #[pyo3(signature = (context_window, threshold, output_reserve = None))]
    fn new(
        py: Python<'_>,
        context_window: u64,
        threshold: f64,
        output_reserve: Option<u64>,
    ) -> PyResult<Self> {
        no_panic(py, "Budget()", || {
            Budget::new(context_window, threshold, output_reserve)
        })?
        .map(|inner| PyBudgetCore { inner })
        .map_err(|e| budget_error(py, e))
    }

    /// `(L, threshold_bp, R, U, F, H, W, advisory headroom)`, read once by the wrapper.
    #[allow(clippy::type_complexity)]
    fn points(&self, py: Python<'_>) -> PyResult<(u64, u32, u64, u64, i64, i64, i64, u64)> {
        let b = &self.inner;
        no_panic(py, "Budget.points()", || {
            (
                b.context_window(),
                b.threshold().bp(),
                b.output_reserve(),
                b.usable_limit(),
                b.final_at(),
                b.handoff_target(),
                b.warning_at(),
                b.advisory_headroom(),
            )
        })
    }

    /// The slider as evaluated (at least `MIN_THRESHOLD_BP`): the core's
    /// `Threshold::effective_bp`.
    fn effective_threshold_bp(&self, py: Python<'_>) -> PyResult<u32> {
        no_panic(py, "Budget.effective_threshold_bp", || {
            self.inner.threshold().effective_bp()
        })
    }

    /// Whether the ladder is on (the slider is not Off): the core's `Threshold::is_off`.
    fn enabled(&self, py: Python<'_>) -> PyResult<bool> {
        no_panic(py, "Budget.enabled", || self.inner.enabled())
    }

    /// `(action name, headroom)` for a next request of `projected` tokens, the hard
    /// guard keeping `margin` tokens for the count's estimated part.
    #[pyo3(signature = (projected, warning, handoff, final_prompt, new_context_offered, margin = 0))]
    #[allow(clippy::too_many_arguments)]
    fn evaluate(
        &self,
        py: Python<'_>,
        projected: u64,
        warning: bool,
        handoff: bool,
        final_prompt: bool,
        new_context_offered: bool,
        margin: u64,
    ) -> PyResult<(&'static str, bool)> {
        let claims = Claims {
            warning,
            handoff,
            final_prompt,
        };
        no_panic(py, "Budget.evaluate()", || {
            let d = self
                .inner
                .evaluate_guarded(projected, margin, claims, new_context_offered);
            (d.action.as_str(), d.headroom)
        })
    }
}

/// Whether a slider of `threshold` (0.0–1.0) means Off: the one definition of Off.
#[pyfunction]
pub(crate) fn threshold_is_off(py: Python<'_>, threshold: f64) -> PyResult<bool> {
    no_panic(py, "threshold_is_off()", || {
        Threshold::from_fraction(threshold).map(Threshold::is_off)
    })?
    .map_err(|e| budget_error(py, e))
}

/// `(warning, handoff, final)` plus what `rows` publish (row objects or dicts with
/// `kind` and `meta`): the window fold's rule (`transcript::claims_of`), so
/// `Claims.from_rows` states none of its own. Only an advisory row claims; metadata
/// that is not a JSON object claims nothing.
#[pyfunction]
pub(crate) fn claims_of_rows(
    py: Python<'_>,
    rows: &Bound<'_, PyAny>,
    claims: (bool, bool, bool),
) -> PyResult<(bool, bool, bool)> {
    no_panic(py, "claims_of_rows()", || {
        let (warning, handoff, final_prompt) = claims;
        let mut claims = Claims {
            warning,
            handoff,
            final_prompt,
        };
        for row in rows.try_iter()? {
            let row = row?;
            let (kind, meta) = match row.cast::<PyDict>() {
                Ok(dict) => (dict.get_item("kind")?, dict.get_item("meta")?),
                Err(_) => (row.getattr_opt("kind")?, row.getattr_opt("meta")?),
            };
            let is_advisory = kind
                .as_ref()
                .and_then(|k| k.extract::<PyBackedStr>().ok())
                .is_some_and(|k| &*k == RowKind::Advisory.as_str());
            let Some(meta) = meta.filter(|_| is_advisory) else {
                continue;
            };
            let meta = encode_value(&meta)
                .and_then(|json| serde_json::from_slice::<Map<String, Value>>(&json).ok())
                .unwrap_or_default();
            claims = transcript::claims_of(&meta, claims);
        }
        Ok((claims.warning, claims.handoff, claims.final_prompt))
    })?
}

/// The ladder's constants, so Python reads them instead of restating them, and the
/// claims rule (registered here, beside the ladder it feeds).
pub(crate) fn add_constants(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(claims_of_rows, m)?)?;
    m.add("OUTPUT_RESERVE_MAX", budget::OUTPUT_RESERVE_MAX)?;
    m.add("WARNING_ADVANCE_MIN", budget::WARNING_ADVANCE_MIN)?;
    m.add("FINAL_ZONE", budget::FINAL_ZONE)?;
    m.add("ADVISORY_HEADROOM", budget::ADVISORY_HEADROOM)?;
    m.add("MIN_THRESHOLD_BP", budget::MIN_THRESHOLD_BP)?;
    m.add("OFF_BP", budget::OFF_BP)?;
    Ok(())
}
