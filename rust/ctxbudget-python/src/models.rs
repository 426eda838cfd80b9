//! Model names → context windows (`ctxbudget.session.context_window_for` wraps this),
//! from the core's table (`tokens::windows`).

use ctxbudget::tokens::windows;
use pyo3::prelude::*;
use pyo3::IntoPyObjectExt;

/// `(context_window, provider, family, source)` for `model`, or the core's message (a
/// `str`) saying why it is not known and what to pass instead.
#[pyfunction]
pub(crate) fn context_window<'py>(py: Python<'py>, model: &str) -> PyResult<Bound<'py, PyAny>> {
    match windows::context_window(model) {
        Ok(w) => (w.context_window, w.provider, w.family, w.source).into_bound_py_any(py),
        Err(e) => e.to_string().into_bound_py_any(py),
    }
}

/// Registers the functions.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(context_window, m)?)?;
    Ok(())
}
