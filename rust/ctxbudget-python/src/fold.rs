//! The core's window fold over one store, for Python (`_ctxbudget.WindowFold`): what
//! `Session` and the integrations read instead of deriving windows, claims, open calls
//! or retractions from rows themselves.

use std::sync::{Arc, Mutex, MutexGuard};

use crate::backend::Backend;
use ctxbudget::transcript::{Row, WindowFold, WindowId};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyList};

use crate::pyjson::encode_value;

use crate::errors::{no_panic, no_panic_store, raise, store_error};
use crate::history::PyHistory;

/// `(call_id, name, arguments, seq)` of a tool call without a result.
type OpenCallTuple = (String, String, Py<PyAny>, u64);

/// What [`PyWindowFold::facts`] returns.
type Facts = (
    String,
    Option<String>,
    u64,
    (bool, bool, bool),
    bool,
    Option<u64>,
    usize,
);

fn lock_fold(fold: &Mutex<WindowFold>) -> MutexGuard<'_, WindowFold> {
    fold.lock().unwrap_or_else(|e| e.into_inner())
}

/// The incremental window fold over one store, or over rows handed in
/// ([`detached`](PyWindowFold::detached)).
#[pyclass(module = "ctxbudget._ctxbudget", name = "WindowFold", frozen)]
pub(crate) struct PyWindowFold {
    /// `None`: a detached fold, which notes rows handed in and reads no store.
    history: Option<Backend>,
    fold: Arc<Mutex<WindowFold>>,
}

impl PyWindowFold {
    /// The store this fold reads, or an `InvalidArgumentError` for a detached fold.
    fn store(&self, py: Python<'_>, what: &str) -> PyResult<Backend> {
        self.history.clone().ok_or_else(|| {
            raise(
                py,
                "InvalidArgumentError",
                format!(
                    "{what} needs a store: this fold is detached (it notes rows given to note())"
                ),
                &[],
            )
        })
    }

    fn state(&self) -> MutexGuard<'_, WindowFold> {
        lock_fold(&self.fold)
    }

    /// Reads the fold with the GIL released while its lock is taken (an `advance()` in
    /// another thread may hold it while it waits for the store); a panic becomes
    /// `ctxbudget.InternalError`.
    fn with<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&WindowFold) -> T + Send,
    ) -> PyResult<T> {
        no_panic(py, "WindowFold", || py.detach(|| f(&self.state())))
    }
}

#[pymethods]
impl PyWindowFold {
    #[new]
    fn new(history: &PyHistory) -> Self {
        PyWindowFold {
            history: Some(history.inner.clone()),
            fold: Arc::new(Mutex::new(WindowFold::new())),
        }
    }

    /// A fold over no store: it notes the rows handed to [`note`](Self::note), by the
    /// same rule as a store's fold (what a decision is tested on without a store).
    #[staticmethod]
    fn detached() -> Self {
        PyWindowFold {
            history: None,
            fold: Arc::new(Mutex::new(WindowFold::new())),
        }
    }

    /// Notes `rows` (`Row` objects or dicts, in order; a row without a `seq` follows
    /// the last one noted; rows the core does not know are skipped) and returns
    /// `window_changed` as [`advance`](Self::advance) does.
    fn note(&self, py: Python<'_>, rows: &Bound<'_, PyAny>) -> PyResult<bool> {
        no_panic(py, "WindowFold.note()", || {
            // Parsed first, so that no Python code runs while the fold is locked.
            let mut parsed = Vec::new();
            for row in rows.try_iter()? {
                parsed.extend(core_row(&row?)?);
            }
            let mut fold = self.state();
            let before = fold.window();
            for (mut row, seq) in parsed {
                row.seq = seq.unwrap_or(fold.last_seq() + 1);
                fold.note_row(&row);
            }
            Ok(before != fold.window())
        })?
    }

    /// Reads the rows appended since the last call (the current window's rows on the
    /// first call) in one store call without the GIL, notes them, and returns
    /// `(rows, window_changed)`: `window_changed` is true when the current window is
    /// another one than before the call (a fold starts in `w:0`). Inside an awaited
    /// `AsyncSession` call the read runs on the I/O pool (`offload::blocking`).
    fn advance<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, bool)> {
        let (fold, history) = (Arc::clone(&self.fold), self.store(py, "advance()")?);
        let (rows, changed) = no_panic_store(py, "WindowFold.advance()", || {
            crate::offload::blocking(py, move || {
                let mut fold = lock_fold(&fold);
                let before = fold.window();
                let rows = fold.catch_up(history.store())?;
                let changed = before != fold.window();
                Ok::<_, ctxbudget::store::StoreError>((rows, changed))
            })
        })??
        .map_err(|e| store_error(py, e))?;
        Ok((crate::rows::list(py, &rows)?, changed))
    }

    /// Appends `rows` (a list of row dicts) as one batch — only if seq `if_last_seq` is
    /// still the last one, when given — and then reads what was appended since the last
    /// call (this batch and anything another writer appended before it), in ONE store
    /// job without the GIL: the step that writes does not need a second trip to read its
    /// own rows back. Returns `(append_result, rows, window_changed)` as
    /// [`advance`](Self::advance) does. An error means nothing was written; a read that
    /// fails after the write returns no rows (the next `advance` reads them).
    #[pyo3(signature = (rows, if_last_seq = None))]
    fn append<'py>(
        &self,
        py: Python<'py>,
        rows: &Bound<'py, PyList>,
        if_last_seq: Option<u64>,
    ) -> PyResult<(crate::reports::PyAppendResult, Bound<'py, PyList>, bool)> {
        let rows_json = no_panic_store(py, "WindowFold.append()", || {
            crate::pyjson::encode_rows(rows)
        })??;
        let (fold, history) = (Arc::clone(&self.fold), self.store(py, "append()")?);
        let (appended, read, changed) = no_panic_store(py, "WindowFold.append()", || {
            crate::offload::blocking(py, move || {
                let appended = history.store().append_json(&rows_json, if_last_seq)?;
                let mut fold = lock_fold(&fold);
                let before = fold.window();
                // The batch is durable: a read that fails now must not turn it into an
                // error. The fold then has not moved, and the next read brings it.
                let read = fold
                    .catch_up_after(history.store(), &appended)
                    .unwrap_or_default();
                let changed = before != fold.window();
                Ok::<_, ctxbudget::store::StoreError>((appended, read, changed))
            })
        })??
        .map_err(|e| store_error(py, e))?;
        Ok((appended.into(), crate::rows::list(py, &read)?, changed))
    }

    /// The window new rows go to (`w:0` before any row).
    #[getter]
    fn window_id(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |f| f.window().to_string())
    }

    /// The window before the current one.
    #[getter]
    fn previous_window_id(&self, py: Python<'_>) -> PyResult<Option<String>> {
        self.with(py, |f| f.previous_window().map(|w| w.to_string()))
    }

    /// `root`, `rollover` or `reset`.
    #[getter]
    fn window_kind(&self, py: Python<'_>) -> PyResult<&'static str> {
        self.with(py, |f| f.window_kind_name())
    }

    /// Seq of the first row of the current window read (`None` before any row).
    #[getter]
    fn window_first_seq(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.with(py, |f| f.window_first_seq())
    }

    /// The store's last seq as of the last `advance()` (the condition for a decision
    /// made on these rows).
    #[getter]
    fn last_seq(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |f| f.last_seq())
    }

    /// Seq of the newest privacy floor (0: none).
    #[getter]
    fn floor_seq(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |f| f.floor_seq())
    }

    /// Seqs retracted by the rows read, ascending.
    #[getter]
    fn retracted(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        self.with(py, |f| f.retracted())
    }

    fn is_retracted(&self, py: Python<'_>, seq: u64) -> PyResult<bool> {
        self.with(py, |f| f.is_retracted(seq))
    }

    /// Seqs of the current window's rows a request carries (messages, lead-ins,
    /// advisories, continuations not retracted), in order.
    #[getter]
    fn visible_seqs(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        self.with(py, |f| f.visible().collect())
    }

    /// The last `n` of [`visible_seqs`](Self::visible_seqs) (all of them if fewer): the
    /// only ones rows read by the last step can be, without copying the whole window.
    fn visible_tail(&self, py: Python<'_>, n: usize) -> PyResult<Vec<u64>> {
        self.with(py, |f| {
            let visible = f.visible();
            let skip = visible.len().saturating_sub(n);
            visible.skip(skip).collect()
        })
    }

    /// Messages and continuations of the current window not retracted.
    #[getter]
    fn item_count(&self, py: Python<'_>) -> PyResult<u64> {
        self.with(py, |f| f.item_count())
    }

    /// `(warning, handoff, final)`: advisories published in the current window.
    #[getter]
    fn claims(&self, py: Python<'_>) -> PyResult<(bool, bool, bool)> {
        let c = self.with(py, |f| f.claims())?;
        Ok((c.warning, c.handoff, c.final_prompt))
    }

    /// `[(call_id, name, arguments, seq)]`: tool calls of the current window without a
    /// result (an interrupted result closes a call too), oldest first.
    #[getter]
    fn open_calls(&self, py: Python<'_>) -> PyResult<Vec<OpenCallTuple>> {
        let calls = self.with(py, |f| f.open_calls().to_vec())?;
        calls
            .into_iter()
            .map(|c| {
                let args = match &c.arguments {
                    Some(v) => crate::pyvalue::to_python(py, v)?,
                    None => py.None(),
                };
                Ok((c.call_id, c.name, args, c.seq))
            })
            .collect()
    }

    fn is_answered(&self, py: Python<'_>, call_id: &str) -> PyResult<bool> {
        self.with(py, |f| f.is_answered(call_id))
    }

    /// Whether `new_context` scheduled a rollover in the current window.
    #[getter]
    fn new_context_requested(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |f| f.new_context_requested())
    }

    /// Seq of the current window's last user message (retracted or not).
    #[getter]
    fn last_user_seq(&self, py: Python<'_>) -> PyResult<Option<u64>> {
        self.with(py, |f| f.last_user_seq())
    }

    /// What a decision reads of the fold, in one read of it (each read takes its lock
    /// without the GIL): `(window_id, previous_window_id, last_seq, (warning, handoff,
    /// final), new_context_requested, last_user_seq, open_call_count)`.
    #[getter]
    fn facts(&self, py: Python<'_>) -> PyResult<Facts> {
        self.with(py, |f| {
            let c = f.claims();
            (
                f.window().to_string(),
                f.previous_window().map(|w| w.to_string()),
                f.last_seq(),
                (c.warning, c.handoff, c.final_prompt),
                f.new_context_requested(),
                f.last_user_seq(),
                f.open_calls().len(),
            )
        })
    }

    fn __repr__(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |f| {
            format!(
                "WindowFold(window_id={:?}, last_seq={})",
                f.window().to_string(),
                f.last_seq()
            )
        })
    }
}

/// The core's window fold over rows a caller hands in (`_ctxbudget.RowFold`), for
/// readers that have rows but no store position: `NewContextTool.requested_in` and
/// `ctxbudget plot`'s estimate of a reply recorded without a measurement.
#[pyclass(module = "ctxbudget._ctxbudget", name = "RowFold", frozen)]
pub(crate) struct PyRowFold {
    fold: Mutex<WindowFold>,
}

impl PyRowFold {
    fn with<T>(&self, py: Python<'_>, f: impl FnOnce(&WindowFold) -> T) -> PyResult<T> {
        no_panic(py, "RowFold", || {
            f(&self.fold.lock().unwrap_or_else(|e| e.into_inner()))
        })
    }
}

/// `row` (a `ctxbudget.Row` or a dict with `kind`, `role`, `parts`, `meta` and
/// optionally `seq`) parsed by the core's row rule, with its seq if it has one; `None`
/// for a row the core does not know.
fn core_row(row: &Bound<'_, PyAny>) -> PyResult<Option<(Row, Option<u64>)>> {
    let dict = PyDict::new(row.py());
    let mut seq = None;
    for key in ["kind", "role", "parts", "meta", "seq"] {
        let value = match row.cast::<PyDict>() {
            Ok(d) => d.get_item(key)?,
            Err(_) => row.getattr_opt(key)?,
        };
        let Some(value) = value.filter(|v| !v.is_none()) else {
            continue;
        };
        if key == "seq" {
            seq = value.extract::<u64>().ok();
        } else {
            dict.set_item(key, value)?;
        }
    }
    let parsed = encode_value(dict.as_any())
        .and_then(|json| Row::parse(seq.unwrap_or(0), WindowId::ROOT, &json));
    Ok(parsed.map(|row| (row, seq)))
}

#[pymethods]
impl PyRowFold {
    #[new]
    fn new() -> Self {
        PyRowFold {
            fold: Mutex::new(WindowFold::new()),
        }
    }

    /// Notes `rows` in order (rows the core does not know are skipped; a row without a
    /// `seq` follows the last one noted).
    fn note(&self, py: Python<'_>, rows: &Bound<'_, PyAny>) -> PyResult<()> {
        no_panic(py, "RowFold.note()", || {
            // Parsed first, so that no Python code runs while the fold is locked.
            let mut parsed = Vec::new();
            for row in rows.try_iter()? {
                parsed.extend(core_row(&row?)?);
            }
            let mut fold = self.fold.lock().unwrap_or_else(|e| e.into_inner());
            for (mut row, seq) in parsed {
                row.seq = seq.unwrap_or(fold.last_seq() + 1);
                fold.note_row(&row);
            }
            Ok(())
        })?
    }

    /// The window of the rows noted last (`w:0` before any).
    #[getter]
    fn window_id(&self, py: Python<'_>) -> PyResult<String> {
        self.with(py, |f| f.window().to_string())
    }

    /// Seqs of the current window's rows a request carries (not retracted, not
    /// quarantined), in order.
    #[getter]
    fn visible_seqs(&self, py: Python<'_>) -> PyResult<Vec<u64>> {
        self.with(py, |f| f.visible().collect())
    }

    /// Whether `new_context` scheduled a rollover in the current window.
    #[getter]
    fn new_context_requested(&self, py: Python<'_>) -> PyResult<bool> {
        self.with(py, |f| f.new_context_requested())
    }
}
