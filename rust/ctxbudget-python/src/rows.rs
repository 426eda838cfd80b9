//! Committed rows as Python `ctxbudget.Row` objects, built here from the core's parsed
//! rows (each row is parsed once, in Rust).

use ctxbudget::transcript::Row;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::{PyDict, PyList};

/// The `ctxbudget.history.Row` class, looked up once.
fn row_class(py: Python<'_>) -> PyResult<&Bound<'_, PyAny>> {
    static CLASS: PyOnceLock<Py<PyAny>> = PyOnceLock::new();
    let class = CLASS.get_or_try_init(py, || {
        Ok::<_, PyErr>(py.import("ctxbudget.history")?.getattr("Row")?.unbind())
    })?;
    Ok(class.bind(py))
}

/// One row as a `ctxbudget.Row`.
pub(crate) fn to_python<'py>(py: Python<'py>, row: &Row) -> PyResult<Bound<'py, PyAny>> {
    let parts = PyList::empty(py);
    for part in &row.parts {
        parts.append(crate::pyvalue::to_python(py, part)?)?;
    }
    let meta = PyDict::new(py);
    for (key, value) in &row.meta {
        meta.set_item(key, crate::pyvalue::to_python(py, value)?)?;
    }
    row_class(py)?.call1((
        row.seq,
        row.id.as_str(),
        row.kind.as_str(),
        row.role.as_str(),
        row.window.to_string(),
        parts,
        meta,
        row.ts.as_deref(),
    ))
}

/// Rows as a Python list of `ctxbudget.Row`.
pub(crate) fn list<'py>(py: Python<'py>, rows: &[Row]) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for row in rows {
        out.append(to_python(py, row)?)?;
    }
    Ok(out)
}
