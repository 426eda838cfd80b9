//! The `session_history` tool over one store (`ctxbudget.SessionHistoryTool` wraps it).

use std::sync::Arc;
use std::time::Duration;

use ctxbudget::scan::{ScanOptions, SessionHistoryTool};
use pyo3::prelude::*;
use pyo3::types::PyString;

use crate::errors::no_panic_store;
use crate::history::PyHistory;

/// The `session_history` tool over one store (see `ctxbudget.SessionHistoryTool`).
#[pyclass(module = "ctxbudget._ctxbudget", name = "SessionHistoryTool", frozen)]
pub(crate) struct PySessionHistoryTool {
    inner: Arc<SessionHistoryTool>,
}

#[pymethods]
impl PySessionHistoryTool {
    #[new]
    #[pyo3(signature = (history, *, deadline_seconds))]
    fn new(history: &PyHistory, deadline_seconds: f64) -> Self {
        let options = ScanOptions {
            deadline: Duration::from_secs_f64(deadline_seconds.clamp(0.0, 86_400.0)),
            ..ScanOptions::default()
        };
        let tool =
            SessionHistoryTool::over(history.inner.shared(), history.inner.cursor_key(), options);
        PySessionHistoryTool {
            inner: Arc::new(tool),
        }
    }

    /// One call: raw JSON arguments in, JSON result (at most 16 KiB) out.
    fn call_json(&self, py: Python<'_>, args_json: &str) -> PyResult<String> {
        let (tool, args) = (Arc::clone(&self.inner), args_json.to_owned());
        no_panic_store(py, "session_history", || {
            crate::offload::blocking(py, move || tool.call_json(&args))
        })?
    }

    /// One call: arguments as JSON text or as Python objects (encoded here; anything
    /// JSON cannot hold becomes `null`, which the tool reports as invalid arguments), the
    /// result as Python objects built here, not serialized and parsed again.
    fn call(&self, py: Python<'_>, args: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let encoded;
        let text = match args.cast::<PyString>() {
            Ok(s) => s.to_str()?,
            Err(_) => {
                encoded = crate::pyjson::encode_value(args)
                    .and_then(|bytes| String::from_utf8(bytes).ok())
                    .unwrap_or_else(|| "null".to_owned());
                encoded.as_str()
            }
        };
        let (tool, text) = (Arc::clone(&self.inner), text.to_owned());
        let result = no_panic_store(py, "session_history", || {
            crate::offload::blocking(py, move || tool.call_text(&text))
        })??;
        crate::pyvalue::to_python(py, &result)
    }
}

/// The JSON Schema of `session_history`'s arguments, from the core (its limits are the
/// ones the tool checks).
#[pyfunction]
fn session_history_parameters(py: Python<'_>) -> PyResult<Py<PyAny>> {
    crate::pyvalue::to_python(py, &ctxbudget::scan::schema::parameters())
}

/// Adds the tool's description, schema and notice to the module.
pub(crate) fn add(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use ctxbudget::scan::schema;
    m.add_class::<PySessionHistoryTool>()?;
    m.add_function(wrap_pyfunction!(session_history_parameters, m)?)?;
    m.add("SESSION_HISTORY_DESCRIPTION", schema::DESCRIPTION)?;
    m.add(
        "SESSION_HISTORY_NOT_STRICT",
        schema::NOT_STRICT_KEYWORDS.to_vec(),
    )?;
    m.add("NOTICE", ctxbudget::scan::NOTICE)?;
    Ok(())
}
