//! Test-only hooks, compiled only with the `failpoints` feature (the development build):
//! the store's fail points and a deliberate panic (to prove none crosses into Python).

use ctxbudget::store::failpoint::{arm, reset, Fault};
use pyo3::prelude::*;

/// Arms a store fail point: `action` is `"crash"`, `"error:<errno>"` or `"torn:<bytes>"`.
#[pyfunction]
pub(crate) fn _arm_failpoint(name: &str, action: &str) -> PyResult<()> {
    let parsed = match action.split_once(':') {
        None if action == "crash" => Fault::Crash,
        Some(("error", code)) => Fault::Error(code.parse().unwrap_or(5)),
        Some(("torn", n)) => Fault::Torn(n.parse().unwrap_or(0)),
        _ => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown fail point action {action:?}; use \"crash\", \"error:<errno>\" or \
                 \"torn:<bytes>\""
            )))
        }
    };
    arm(name, parsed);
    Ok(())
}

/// Disarms every fail point.
#[pyfunction]
pub(crate) fn _reset_failpoints() {
    reset();
}

/// Raises a Rust panic inside the binding; exists only so tests can prove that no
/// panic crosses into Python (it becomes `ctxbudget.InternalError`).
#[pyfunction]
pub(crate) fn _panic_for_test(py: Python<'_>) -> PyResult<()> {
    crate::errors::no_panic(py, "_panic_for_test()", || {
        crate::offload::blocking(py, || panic!("deliberate test panic"))
    })?
}

/// Registers the hooks.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(_arm_failpoint, m)?)?;
    m.add_function(wrap_pyfunction!(_reset_failpoints, m)?)?;
    m.add_function(wrap_pyfunction!(_panic_for_test, m)?)?;
    Ok(())
}
