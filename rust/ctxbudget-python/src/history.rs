//! Bindings of the transcript store (`ctxbudget.History` wraps them). Results cross as
//! the frozen classes of `reports.rs` and rows as `ctxbudget.Row` objects built here.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use ctxbudget::store::{Durability, OpenOptions, StoreError};
use ctxbudget::transcript;
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{LeadIn, RolloverSpec};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use serde_json::Value;

use crate::backend::Backend;
use crate::errors::{no_panic_store, store_error};
use crate::health::{PyRecoveryReport, PyStoreState, PyVerifyReport};
use crate::reports::{PyAppendResult, PyDeleteReport, PyPruneReport, PyRotateReport, PyWindowInfo};

fn parse_rows(rows_json: &[u8]) -> Result<Vec<NewRow>, StoreError> {
    let values: Vec<Value> = serde_json::from_slice(rows_json)
        .map_err(|e| StoreError::InvalidArgument(format!("rows are not a JSON list: {e}")))?;
    values
        .into_iter()
        .enumerate()
        .map(|(i, v)| NewRow::from_value(i, v))
        .collect()
}

/// `(seq | None, window, raw line)` of one stored row.
type RowTuple<'py> = (Option<u64>, String, Bound<'py, PyBytes>);

/// A conversation's transcript store: a workspace's files or a PostgreSQL conversation
/// (see `ctxbudget.History`).
#[pyclass(module = "ctxbudget._ctxbudget", name = "History", frozen)]
pub(crate) struct PyHistory {
    pub(crate) inner: Backend,
}

impl PyHistory {
    /// Runs `f` on the store without the GIL, mapping errors and panics: here, or on
    /// the I/O pool inside an awaited `AsyncSession` call (`offload::blocking`).
    pub(crate) fn run<T: Send + 'static>(
        &self,
        py: Python<'_>,
        what: &str,
        f: impl FnOnce(&Backend) -> ctxbudget::store::Result<T> + Send + 'static,
    ) -> PyResult<T> {
        let store = self.inner.clone();
        no_panic_store(py, what, || crate::offload::blocking(py, move || f(&store)))??
            .map_err(|e| store_error(py, e))
    }

    /// As [`PyHistory::run`], but always on this thread with the GIL released, never on
    /// the I/O pool: for work that calls back into Python (a lead-in callable the core
    /// renders under its lock). A pool thread would have to take the GIL to run it,
    /// running Python code off the event loop's thread while the loop's greenlet is
    /// suspended; here the callback re-takes the GIL on the thread that released it.
    fn run_in_place<T: Send>(
        &self,
        py: Python<'_>,
        what: &str,
        f: impl FnOnce(&Backend) -> ctxbudget::store::Result<T> + Send,
    ) -> PyResult<T> {
        no_panic_store(py, what, || py.detach(|| f(&self.inner)))?.map_err(|e| store_error(py, e))
    }
}

/// A Python callable `(window_id, previous_window_id) -> str` as a lead-in rendered
/// under the store's lock. A Python exception raised by it is kept in `raised` and
/// re-raised once the store call has returned (nothing is written then).
fn lead_in_from_callable(render: Py<PyAny>, raised: Arc<Mutex<Option<PyErr>>>) -> LeadIn {
    LeadIn::render(move |ctx| {
        Python::attach(|py| {
            let result = render
                .call1(
                    py,
                    (ctx.window.to_string(), ctx.previous_window.to_string()),
                )
                .and_then(|text| text.extract::<String>(py));
            result.map_err(|err| {
                let message = err.to_string();
                *raised.lock().unwrap_or_else(|e| e.into_inner()) = Some(err);
                message
            })
        })
    })
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
        let durability: Durability = durability.parse().map_err(|e| store_error(py, e))?;
        let options = OpenOptions {
            durability,
            lock_timeout: Duration::from_secs_f64(lock_timeout.max(0.0)),
            max_row_bytes,
            recover_on_open: recover,
        };
        let inner = no_panic_store(py, "History.open()", || {
            crate::offload::blocking(py, move || History::open(&workspace, options))
        })??
        .map_err(|e| store_error(py, e))?;
        Ok(PyHistory {
            inner: Backend::files(inner),
        })
    }

    /// The in-memory store `name` of this process (created empty the first time; every
    /// `History` opened with the name shares its rows; nothing outlives the process).
    #[staticmethod]
    #[pyo3(signature = (name, *, max_row_bytes))]
    fn open_memory(name: &str, max_row_bytes: usize) -> Self {
        PyHistory {
            inner: Backend::memory(ctxbudget::memory::open(name).with_max_row_bytes(max_row_bytes)),
        }
    }

    /// The conversation `conversation` of the PostgreSQL database at `url` (created if it
    /// does not exist; the schema is created or migrated on the first connection).
    #[staticmethod]
    #[pyo3(signature = (url, *, conversation, max_row_bytes, cursor_key = None, create = true))]
    fn open_postgres(
        py: Python<'_>,
        url: String,
        conversation: String,
        max_row_bytes: usize,
        cursor_key: Option<String>,
        create: bool,
    ) -> PyResult<Self> {
        let opened = no_panic_store(py, "History.open()", || {
            crate::offload::blocking(py, move || {
                let db = crate::backend::database(&url, cursor_key.as_deref())?;
                let handle = if create {
                    db.store.open(&conversation)?
                } else {
                    db.store.open_existing(&conversation)?.ok_or_else(|| {
                        ctxbudget::pg::PgError::Invalid(format!(
                            "conversation {conversation:?} does not exist in this database; \
                             check the id (nothing was created)"
                        ))
                    })?
                };
                let history =
                    ctxbudget::pg::PgHistory::new(handle).with_max_row_bytes(max_row_bytes);
                Ok::<_, ctxbudget::pg::PgError>(Backend::postgres(history, Arc::clone(&db.key)))
            })
        })??
        .map_err(|e| crate::errors::pg_error(py, e))?;
        Ok(PyHistory { inner: opened })
    }

    /// Appends `rows` (a list of row dicts) as one batch. With `if_last_seq`, only if
    /// that seq is still the last row (else `ConflictError`, nothing written).
    #[pyo3(signature = (rows, if_last_seq = None))]
    fn append(
        &self,
        py: Python<'_>,
        rows: &Bound<'_, PyList>,
        if_last_seq: Option<u64>,
    ) -> PyResult<PyAppendResult> {
        let rows_json = no_panic_store(py, "append()", || crate::pyjson::encode_rows(rows))??;
        self.run(py, "append()", move |h| {
            h.store()
                .append_json(&rows_json, if_last_seq)
                .map(PyAppendResult::from)
        })
    }

    /// `[Row]`, archive then chat, from `since_seq`, parsed in Rust (malformed lines
    /// skipped).
    #[pyo3(signature = (since_seq = 0))]
    fn rows<'py>(&self, py: Python<'py>, since_seq: u64) -> PyResult<Bound<'py, PyList>> {
        let rows = self.run(py, "rows()", move |h| {
            Ok(ctxbudget::transcript::Row::parse_stored(
                &h.store().rows_since(since_seq)?,
            ))
        })?;
        crate::rows::list(py, &rows)
    }

    /// `[(seq | None, window, raw line bytes)]`, archive then chat, from `since_seq`:
    /// the lines exactly as stored (export, inspection).
    #[pyo3(signature = (since_seq = 0))]
    fn raw_rows<'py>(&self, py: Python<'py>, since_seq: u64) -> PyResult<Vec<RowTuple<'py>>> {
        let rows = self.run(py, "raw_rows()", move |h| h.store().rows_since(since_seq))?;
        Ok(rows
            .into_iter()
            .map(|r| (r.seq, r.window, PyBytes::new(py, &r.raw)))
            .collect())
    }

    fn windows(&self, py: Python<'_>) -> PyResult<Vec<PyWindowInfo>> {
        self.run(py, "windows()", |h| {
            Ok(h.store()
                .windows()?
                .into_iter()
                .map(PyWindowInfo::from)
                .collect())
        })
    }

    fn current_window(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, "current_window", |h| h.store().current_window())
    }

    /// Seals the current window. `lead_in` is the lead-in text, or a callable
    /// `(window_id, previous_window_id) -> str` rendered under the store's lock from
    /// the IDs the rollover really writes.
    #[pyo3(signature = (*, rollover_id, reason, requested_by, lead_in, trigger_json, figures_json, if_last_seq = None))]
    #[allow(clippy::too_many_arguments)]
    fn rollover(
        &self,
        py: Python<'_>,
        rollover_id: String,
        reason: String,
        requested_by: Option<String>,
        lead_in: &Bound<'_, PyAny>,
        trigger_json: Option<Vec<u8>>,
        figures_json: Option<Vec<u8>>,
        if_last_seq: Option<u64>,
    ) -> PyResult<String> {
        let raised = Arc::new(Mutex::new(None));
        // A callable lead-in runs Python under the store's lock: that rollover stays on
        // this thread (see `run_in_place`); a text lead-in may go to the I/O pool.
        let calls_python = !lead_in.is_instance_of::<pyo3::types::PyString>();
        let lead_in = if let Ok(text) = lead_in.extract::<String>() {
            LeadIn::Text(text)
        } else if lead_in.is_callable() {
            lead_in_from_callable(lead_in.clone().unbind(), raised.clone())
        } else {
            return Err(pyo3::exceptions::PyTypeError::new_err(
                "lead_in must be a str or a callable (window_id, previous_window_id) -> str",
            ));
        };
        let job = move |h: &Backend| {
            let trigger = match trigger_json {
                Some(bytes) => parse_rows(&bytes)?.into_iter().next(),
                None => None,
            };
            let figures = match figures_json {
                Some(bytes) => match serde_json::from_slice(&bytes) {
                    Ok(Value::Object(map)) => map,
                    _ => {
                        return Err(StoreError::InvalidArgument(
                            "figures must be a JSON object".to_owned(),
                        ))
                    }
                },
                None => serde_json::Map::new(),
            };
            transcript::rollover(
                h.store(),
                RolloverSpec {
                    rollover_id,
                    reason,
                    requested_by,
                    lead_in,
                    trigger,
                    figures,
                    expected_last_seq: if_last_seq,
                },
            )
            .map(|w| w.to_string())
        };
        let result = if calls_python {
            self.run_in_place(py, "rollover()", job)
        } else {
            self.run(py, "rollover()", job)
        };
        let raised = raised.lock().unwrap_or_else(|e| e.into_inner()).take();
        match (result, raised) {
            (Err(_), Some(err)) => Err(err),
            (result, _) => result,
        }
    }

    #[pyo3(signature = (if_last_seq = None))]
    fn clear_soft(&self, py: Python<'_>, if_last_seq: Option<u64>) -> PyResult<u64> {
        self.run(py, "clear_soft()", move |h| {
            transcript::clear_soft(h.store(), if_last_seq)
        })
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
                StoreError::InvalidArgument("quarantine() needs a row".to_owned())
            })?;
            match retracts {
                Some(seq) => {
                    let rows = transcript::retract_and_quarantine(seq, row)?;
                    Ok(h.store().append_rows(&rows, if_last_seq)?.last_seq)
                }
                None if if_last_seq.is_some() => Err(StoreError::InvalidArgument(
                    "quarantine(if_last_seq=…) needs retracts=<seq>: a conditional \
                     quarantine retracts the row it quarantines"
                        .to_owned(),
                )),
                None => Ok(h
                    .store()
                    .append_rows(&[transcript::rejected_row(row)?], None)?
                    .first_seq),
            }
        })
    }

    /// Quarantines stored row `seq` (its retraction and a quarantine row with its
    /// content, one batch read and written under one hold of the lock).
    #[pyo3(signature = (seq, if_last_seq = None))]
    fn quarantine_seq(&self, py: Python<'_>, seq: u64, if_last_seq: Option<u64>) -> PyResult<u64> {
        self.run(py, "quarantine_seq()", move |h| {
            transcript::quarantine(h.store(), seq, if_last_seq)
        })
    }

    /// The budget record of a PostgreSQL conversation (`None`: none, or a workspace,
    /// whose record is its `budget.json`).
    fn budget_record<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyBytes>>> {
        let record = self.run(py, "budget_record()", |h| match h.conversation() {
            Some(h) => h.conversation().budget_record().map_err(StoreError::from),
            None => Ok(None),
        })?;
        Ok(record.map(|r| PyBytes::new(py, &r)))
    }

    /// Replaces the budget record of a PostgreSQL conversation (a workspace keeps its
    /// own in `budget.json`: refused).
    fn set_budget_record(&self, py: Python<'_>, record: Vec<u8>) -> PyResult<()> {
        self.run(py, "set_budget_record()", move |h| match h.conversation() {
            Some(h) => h
                .conversation()
                .set_budget_record(&record)
                .map_err(StoreError::from),
            None => Err(StoreError::InvalidArgument(
                "a workspace keeps its budget record in budget.json".into(),
            )),
        })
    }

    /// Removes sealed windows for good (see `History.prune`).
    #[pyo3(signature = (*, keep_windows = None, older_than = None, below_floor = false))]
    fn prune(
        &self,
        py: Python<'_>,
        keep_windows: Option<usize>,
        older_than: Option<f64>,
        below_floor: bool,
    ) -> PyResult<PyPruneReport> {
        let spec = crate::database::prune_spec(keep_windows, older_than, below_floor)
            .map_err(|e| store_error(py, e))?;
        self.run(py, "prune()", move |h| {
            h.store().prune(&spec).map(PyPruneReport::from)
        })
    }

    /// Deletes a workspace's conversation for good (see `History.delete`).
    #[staticmethod]
    #[pyo3(signature = (workspace, *, lock_timeout))]
    fn delete_workspace(
        py: Python<'_>,
        workspace: PathBuf,
        lock_timeout: f64,
    ) -> PyResult<PyDeleteReport> {
        let timeout = Duration::from_secs_f64(lock_timeout.max(0.0));
        no_panic_store(py, "History.delete()", || {
            crate::offload::blocking(py, move || History::delete_workspace(&workspace, timeout))
        })??
        .map(PyDeleteReport::from)
        .map_err(|e| store_error(py, e))
    }

    /// Deletes the in-memory store `name` for good (see `History.delete`); the memory
    /// files and budget record the Python layer keeps beside it, which it removed, are
    /// counted in the report as given.
    #[staticmethod]
    #[pyo3(signature = (name, *, memory_files, other_files))]
    fn delete_memory(name: &str, memory_files: u64, other_files: u64) -> PyDeleteReport {
        let mut report = ctxbudget::memory::delete(name);
        report.existed |= memory_files + other_files > 0;
        report.memory_files = memory_files;
        report.other_files = other_files;
        PyDeleteReport::from(report)
    }

    /// Deletes a conversation of the database at `url` for good (the URL's shared pool).
    #[staticmethod]
    #[pyo3(signature = (url, *, conversation))]
    fn delete_postgres(
        py: Python<'_>,
        url: String,
        conversation: String,
    ) -> PyResult<PyDeleteReport> {
        no_panic_store(py, "History.delete()", || {
            crate::offload::blocking(py, move || {
                let db = crate::backend::database(&url, None)?;
                db.store.delete(&conversation)
            })
        })??
        .map(PyDeleteReport::from)
        .map_err(|e| crate::errors::pg_error(py, e))
    }

    fn rotate(&self, py: Python<'_>) -> PyResult<PyRotateReport> {
        self.run(py, "rotate()", |h| {
            h.store().rotate().map(PyRotateReport::from)
        })
    }

    /// Epoch, last seq and floor of one moment, with the store's own detail.
    fn state(&self, py: Python<'_>) -> PyResult<PyStoreState> {
        self.run(py, "state()", |h| h.store().state().map(PyStoreState::from))
    }

    fn recover(&self, py: Python<'_>) -> PyResult<PyRecoveryReport> {
        self.run(py, "recover()", |h| {
            h.store().recover().map(PyRecoveryReport::from)
        })
    }

    fn verify(&self, py: Python<'_>) -> PyResult<PyVerifyReport> {
        self.run(py, "verify()", |h| {
            h.store().verify().map(PyVerifyReport::from)
        })
    }

    fn anchor_crc_at(&self, py: Python<'_>, offset: u64) -> PyResult<Option<u32>> {
        self.run(py, "anchor_crc_at()", move |h| {
            h.store().anchor_crc_at(offset)
        })
    }

    /// `<workspace>/history`, or `None` for a PostgreSQL conversation.
    #[getter]
    fn directory(&self) -> Option<PathBuf> {
        self.inner.directory()
    }

    /// The PostgreSQL conversation's id, or `None` for a workspace's files.
    #[getter]
    fn conversation(&self) -> Option<String> {
        self.inner
            .conversation()
            .map(|h| h.conversation().id().to_owned())
    }
}
