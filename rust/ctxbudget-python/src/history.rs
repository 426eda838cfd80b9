//! Bindings of the transcript store. Reports cross as JSON text; the typed wrapper
//! (`ctxbudget/history.py`) turns them into dataclasses.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use ctxbudget::history::{Durability, History, NewRow, OpenOptions, ReceiptRead, RolloverSpec};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyString};
use serde::Serialize;
use serde_json::Value;

use crate::errors::{history_error, no_panic_store};

fn to_json<T: Serialize>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "null".to_owned())
}

fn parse_rows(rows_json: &[u8]) -> Result<Vec<NewRow>, ctxbudget::history::HistoryError> {
    let values: Vec<Value> = serde_json::from_slice(rows_json).map_err(|e| {
        ctxbudget::history::HistoryError::InvalidArgument(format!("rows are not a JSON list: {e}"))
    })?;
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| NewRow::from_value(i, v))
        .collect()
}

/// `(seq | None, window, raw line)` of one stored row.
type RowTuple<'py> = (Option<u64>, String, Bound<'py, PyBytes>);

/// A workspace's transcript store (see `ctxbudget.History`).
#[pyclass(module = "ctxbudget._ctxbudget", name = "History", frozen)]
pub(crate) struct PyHistory {
    pub(crate) inner: Arc<History>,
}

impl PyHistory {
    /// Runs `f` on the store without the GIL, mapping errors and panics.
    fn run<T: Send + 'static>(
        &self,
        py: Python<'_>,
        what: &str,
        f: impl FnOnce(&History) -> ctxbudget::history::Result<T> + Send + 'static,
    ) -> PyResult<T> {
        let store = Arc::clone(&self.inner);
        no_panic_store(py, what, || crate::offload::blocking(py, move || f(&store)))??
            .map_err(|e| history_error(py, e))
    }
}

#[pymethods]
impl PyHistory {
    #[staticmethod]
    #[pyo3(signature = (workspace, *, durability, lock_timeout, max_row_bytes, recover = true))]
    fn open(
        py: Python<'_>,
        workspace: PathBuf,
        durability: &str,
        lock_timeout: f64,
        max_row_bytes: usize,
        recover: bool,
    ) -> PyResult<Self> {
        let durability: Durability = durability.parse().map_err(|e| history_error(py, e))?;
        let options = OpenOptions {
            durability,
            lock_timeout: Duration::from_secs_f64(lock_timeout.max(0.0)),
            max_row_bytes,
            recover_on_open: recover,
        };
        let inner = no_panic_store(py, "History.open()", || {
            crate::offload::blocking(py, move || History::open(&workspace, options))
        })??
        .map_err(|e| history_error(py, e))?;
        Ok(PyHistory {
            inner: Arc::new(inner),
        })
    }

    /// Appends `rows` (a list of row dicts) as one batch; returns
    /// `(first_seq, last_seq, epoch, window)`. With `if_last_seq`, only if that seq is
    /// still the last row (else `ConflictError`, nothing written).
    #[pyo3(signature = (rows, if_last_seq = None))]
    fn append(
        &self,
        py: Python<'_>,
        rows: &Bound<'_, PyList>,
        if_last_seq: Option<u64>,
    ) -> PyResult<(u64, u64, u64, String)> {
        let rows_json = no_panic_store(py, "append()", || crate::pyjson::encode_rows(rows))??;
        self.run(py, "append()", move |h| {
            h.append_json_bytes_if(&rows_json, if_last_seq)
                .map(|r| (r.first_seq, r.last_seq, r.epoch, r.window))
        })
    }

    /// `[(seq | None, window, raw line bytes)]`, archive then chat, from `since_seq`.
    #[pyo3(signature = (since_seq = 0))]
    fn rows<'py>(&self, py: Python<'py>, since_seq: u64) -> PyResult<Vec<RowTuple<'py>>> {
        let rows = self.run(py, "rows()", move |h| h.rows_since(since_seq))?;
        Ok(rows
            .into_iter()
            .map(|r| (r.seq, r.window, PyBytes::new(py, &r.raw)))
            .collect())
    }

    fn windows(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, "windows()", |h| h.windows().map(|w| to_json(&w)))
    }

    fn current_window(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, "current_window", |h| h.current_window())
    }

    #[pyo3(signature = (*, rollover_id, reason, requested_by, lead_in, trigger_json, figures_json, if_last_seq = None))]
    #[allow(clippy::too_many_arguments)]
    fn rollover(
        &self,
        py: Python<'_>,
        rollover_id: String,
        reason: String,
        requested_by: Option<String>,
        lead_in: String,
        trigger_json: Option<Vec<u8>>,
        figures_json: Option<Vec<u8>>,
        if_last_seq: Option<u64>,
    ) -> PyResult<String> {
        self.run(py, "rollover()", move |h| {
            let trigger = match trigger_json {
                Some(bytes) => parse_rows(&bytes)?.into_iter().next(),
                None => None,
            };
            let figures = match figures_json {
                Some(bytes) => match serde_json::from_slice(&bytes) {
                    Ok(Value::Object(map)) => map,
                    _ => {
                        return Err(ctxbudget::history::HistoryError::InvalidArgument(
                            "figures must be a JSON object".to_owned(),
                        ))
                    }
                },
                None => serde_json::Map::new(),
            };
            h.rollover(RolloverSpec {
                rollover_id,
                reason,
                requested_by,
                lead_in,
                trigger,
                figures,
                expected_last_seq: if_last_seq,
            })
        })
    }

    fn clear_soft(&self, py: Python<'_>) -> PyResult<u64> {
        self.run(py, "clear_soft()", |h| h.clear_soft())
    }

    /// Quarantines a row; with `retracts`, retracts that seq in the same batch, and
    /// with `if_last_seq`, only if that seq is still the last row.
    #[pyo3(signature = (row_json, retracts = None, if_last_seq = None))]
    fn quarantine(
        &self,
        py: Python<'_>,
        row_json: &[u8],
        retracts: Option<u64>,
        if_last_seq: Option<u64>,
    ) -> PyResult<u64> {
        let row_json = row_json.to_vec();
        self.run(py, "quarantine()", move |h| {
            let row = parse_rows(&row_json)?.into_iter().next().ok_or_else(|| {
                ctxbudget::history::HistoryError::InvalidArgument(
                    "quarantine() needs a row".to_owned(),
                )
            })?;
            match retracts {
                Some(seq) => h.quarantine_retracting(seq, row, if_last_seq),
                None if if_last_seq.is_some() => {
                    Err(ctxbudget::history::HistoryError::InvalidArgument(
                        "quarantine(if_last_seq=…) needs retracts=<seq>: a conditional \
                         quarantine retracts the row it quarantines"
                            .to_owned(),
                    ))
                }
                None => h.quarantine(row),
            }
        })
    }

    fn rotate(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, "rotate()", |h| h.rotate().map(|r| to_json(&r)))
    }

    /// The receipt as JSON, or `"missing"` / `"malformed"`.
    fn receipt(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, "receipt()", |h| {
            Ok(match h.receipt()? {
                ReceiptRead::Missing => "\"missing\"".to_owned(),
                ReceiptRead::Malformed => "\"malformed\"".to_owned(),
                ReceiptRead::Valid(r) => to_json(&r),
            })
        })
    }

    fn recover(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, "recover()", |h| h.recover().map(|r| to_json(&r)))
    }

    fn verify(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, "verify()", |h| h.verify().map(|r| to_json(&r)))
    }

    fn anchor_crc_at(&self, py: Python<'_>, offset: u64) -> PyResult<Option<u32>> {
        self.run(py, "anchor_crc_at()", move |h| h.anchor_crc_at(offset))
    }

    #[getter]
    fn directory(&self) -> PathBuf {
        self.inner.paths().dir.clone()
    }
}

/// Arms a store fail point (test builds only): `action` is `"crash"`, `"error:<errno>"`
/// or `"torn:<bytes>"`.
#[cfg(feature = "failpoints")]
#[pyfunction]
pub(crate) fn _arm_failpoint(name: &str, action: &str) -> PyResult<()> {
    use ctxbudget::history::failpoint::{arm, Action};
    let parsed = match action.split_once(':') {
        None if action == "crash" => Action::Crash,
        Some(("error", code)) => Action::Error(code.parse().unwrap_or(5)),
        Some(("torn", n)) => Action::Torn(n.parse().unwrap_or(0)),
        _ => {
            return Err(pyo3::exceptions::PyValueError::new_err(format!(
                "unknown fail point action {action:?}"
            )))
        }
    };
    arm(name, parsed);
    Ok(())
}

/// Disarms every fail point.
#[cfg(feature = "failpoints")]
#[pyfunction]
pub(crate) fn _reset_failpoints() {
    ctxbudget::history::failpoint::reset();
}

/// The `session_history` tool over one store (see `ctxbudget.SessionHistoryTool`).
#[pyclass(module = "ctxbudget._ctxbudget", name = "SessionHistory", frozen)]
pub(crate) struct PySessionHistory {
    inner: Arc<ctxbudget::scan::SessionHistory>,
}

#[pymethods]
impl PySessionHistory {
    #[new]
    #[pyo3(signature = (history, *, deadline_seconds))]
    fn new(history: &PyHistory, deadline_seconds: f64) -> Self {
        let options = ctxbudget::scan::ScanOptions {
            deadline: Duration::from_secs_f64(deadline_seconds.clamp(0.0, 86_400.0)),
            ..ctxbudget::scan::ScanOptions::default()
        };
        PySessionHistory {
            inner: Arc::new(ctxbudget::scan::SessionHistory::with_options(
                history.inner.clone(),
                options,
            )),
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
