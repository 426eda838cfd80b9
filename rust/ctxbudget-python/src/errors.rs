//! The one place where core errors and panics become Python exceptions.
//!
//! The exception classes are defined in Python (`ctxbudget/errors.py`) so that they can
//! inherit from both `CtxBudgetError` and the fitting builtin (`ValueError`, …); this
//! module looks them up once and raises them.

use std::panic::{catch_unwind, AssertUnwindSafe};

use ctxbudget::store::HistoryError;
use ctxbudget::TokenError;
use pyo3::exceptions::PyRuntimeError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyType;
use pyo3::IntoPyObjectExt;

/// The class `name` from `ctxbudget.errors`.
fn exception_class<'py>(py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyType>> {
    static MODULE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    let module = MODULE.get_or_try_init(py, || py.import("ctxbudget.errors").map(Bound::unbind))?;
    Ok(module.bind(py).getattr(name)?.cast_into::<PyType>()?)
}

/// Builds `ctxbudget.errors.<class>(message)` and sets keyword attributes on it.
pub(crate) fn raise(
    py: Python<'_>,
    class: &str,
    message: String,
    attrs: &[(&str, Py<PyAny>)],
) -> PyErr {
    let build = || -> PyResult<PyErr> {
        let cls = exception_class(py, class)?;
        let exc = cls.call1((message.clone(),))?;
        for (key, value) in attrs {
            exc.setattr(*key, value.bind(py))?;
        }
        Ok(PyErr::from_value(exc))
    };
    // If the Python side cannot be imported the message still reaches the user.
    build().unwrap_or_else(|_| PyRuntimeError::new_err(message))
}

/// Maps a core token error to its Python exception.
pub(crate) fn token_error(py: Python<'_>, err: TokenError) -> PyErr {
    let message = err.to_string();
    match err {
        TokenError::UnknownEncoding { name, known } => raise(
            py,
            "UnknownEncodingError",
            message,
            &[("name", obj(py, name)), ("known", known_names(py, &known))],
        ),
        TokenError::UnknownModel { model } => raise(
            py,
            "UnknownModelError",
            message,
            &[("model", obj(py, model))],
        ),
        TokenError::InvalidJson { line, column, .. } => raise(
            py,
            "InvalidJsonError",
            message,
            &[("line", obj(py, line)), ("column", obj(py, column))],
        ),
        _ => raise(py, "TokenizerError", message, &[]),
    }
}

/// Maps a core store error to its Python exception.
pub(crate) fn history_error(py: Python<'_>, err: HistoryError) -> PyErr {
    let message = err.to_string();
    match err {
        HistoryError::LockTimeout { path, waited } => raise(
            py,
            "LockTimeoutError",
            message,
            &[
                ("path", obj(py, path)),
                ("waited", obj(py, waited.as_secs_f64())),
            ],
        ),
        HistoryError::Corrupt {
            path, offset, line, ..
        } => raise(
            py,
            "CorruptHistoryError",
            message,
            &[
                ("path", obj(py, path)),
                ("offset", obj(py, offset)),
                ("line", obj(py, line)),
            ],
        ),
        HistoryError::InvalidRow { index, field, .. } => raise(
            py,
            "InvalidRowError",
            message,
            &[("index", obj(py, index)), ("field", obj(py, field))],
        ),
        HistoryError::Io { path, source, .. } => raise(
            py,
            "HistoryIOError",
            message.clone(),
            &[
                ("filename", obj(py, path)),
                ("errno", obj(py, source.raw_os_error())),
                ("strerror", obj(py, message)),
            ],
        ),
        HistoryError::Conflict {
            expected_last_seq,
            last_seq,
        } => raise(
            py,
            "ConflictError",
            message,
            &[
                ("expected_last_seq", obj(py, expected_last_seq)),
                ("last_seq", obj(py, last_seq)),
            ],
        ),
        HistoryError::Deleted { .. } => raise(py, "ConversationDeletedError", message, &[]),
        HistoryError::Database { transient, .. } => raise(
            py,
            "DatabaseError",
            message,
            &[("transient", obj(py, transient))],
        ),
        _ => raise(py, "InvalidArgumentError", message, &[]),
    }
}

/// Maps a PostgreSQL store error: an unmigrated database and a closed database object
/// get classes of their own (both `DatabaseError`s); the rest map as the store's errors.
pub(crate) fn pg_error(py: Python<'_>, err: ctxbudget::pg::PgError) -> PyErr {
    use ctxbudget::pg::PgError;
    match err {
        PgError::NotMigrated { found, needed } => raise(
            py,
            "SchemaNotMigratedError",
            err.to_string(),
            &[
                ("found", obj(py, found)),
                ("needed", obj(py, needed)),
                ("transient", obj(py, false)),
            ],
        ),
        PgError::Closed => raise(
            py,
            "DatabaseClosedError",
            err.to_string(),
            &[("transient", obj(py, false))],
        ),
        other => history_error(py, HistoryError::from(other)),
    }
}

/// Maps a core budget error to `PolicyError` (also a `ValueError`).
pub(crate) fn budget_error(py: Python<'_>, err: ctxbudget::budget::BudgetError) -> PyErr {
    raise(py, "PolicyError", err.to_string(), &[])
}

fn known_names(py: Python<'_>, known: &str) -> Py<PyAny> {
    obj(py, known.split(", ").collect::<Vec<&str>>())
}

/// A Python object for an exception attribute (`None` if conversion fails).
fn obj<'py, T: IntoPyObject<'py>>(py: Python<'py>, value: T) -> Py<PyAny> {
    value.into_py_any(py).unwrap_or_else(|_| py.None())
}

/// The message of a caught panic.
fn panic_detail(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_owned())
}

/// Runs a transcript-store call `f`, turning a panic into `ctxbudget.InternalError`
/// (naming the call) so that none crosses into Python.
pub(crate) fn no_panic_store<T>(py: Python<'_>, what: &str, f: impl FnOnce() -> T) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        raise(
            py,
            "InternalError",
            format!(
                "{what} hit an internal error ({}); the store was left as it was. Please \
                 report this, with the output of `ctxbudget history verify`.",
                panic_detail(payload.as_ref())
            ),
            &[],
        )
    })
}

/// Runs `f`, turning a panic into `ctxbudget.InternalError` (a `CtxBudgetError` and
/// `RuntimeError`) so that none crosses into Python.
pub(crate) fn no_panic<T>(py: Python<'_>, what: &str, f: impl FnOnce() -> T) -> PyResult<T> {
    catch_unwind(AssertUnwindSafe(f)).map_err(|payload| {
        raise(
            py,
            "InternalError",
            format!(
                "{what} hit an internal error ({}); nothing was produced. Please report \
                 this, with the input that caused it.",
                panic_detail(payload.as_ref())
            ),
            &[],
        )
    })
}
