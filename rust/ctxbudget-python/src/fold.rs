//! The core's window fold over one store, for Python (`_ctxbudget.WindowFold`): what
//! `Session` and the integrations read instead of deriving windows, claims, open calls
//! or retractions from rows themselves.

use std::sync::{Arc, Mutex, MutexGuard};

use ctxbudget::store::History;
use ctxbudget::transcript::WindowFold;
use pyo3::prelude::*;
use pyo3::types::PyList;

use crate::errors::{history_error, no_panic_store};
use crate::history::PyHistory;

/// `(call_id, name, arguments, seq)` of a tool call without a result.
type OpenCallTuple = (String, String, Py<PyAny>, u64);

fn lock_fold(fold: &Mutex<WindowFold>) -> MutexGuard<'_, WindowFold> {
    fold.lock().unwrap_or_else(|e| e.into_inner())
}

/// The incremental window fold over one store.
#[pyclass(module = "ctxbudget._ctxbudget", name = "WindowFold", frozen)]
pub(crate) struct PyWindowFold {
    history: Arc<History>,
    fold: Arc<Mutex<WindowFold>>,
}

impl PyWindowFold {
    fn state(&self) -> MutexGuard<'_, WindowFold> {
        lock_fold(&self.fold)
    }

    /// Reads the fold with the GIL released while its lock is taken (an `advance()` in
    /// another thread may hold it while it waits for the store).
    fn with<T: Send>(&self, py: Python<'_>, f: impl FnOnce(&WindowFold) -> T + Send) -> T {
        py.detach(|| f(&self.state()))
    }
}

#[pymethods]
impl PyWindowFold {
    #[new]
    fn new(history: &PyHistory) -> Self {
        PyWindowFold {
            history: history.inner.clone(),
            fold: Arc::new(Mutex::new(WindowFold::new())),
        }
    }

    /// Reads the rows appended since the last call (the current window's rows on the
    /// first call) in one store call without the GIL, notes them, and returns
    /// `(rows, window_changed)`: `window_changed` is true when the current window is
    /// another one than before the call (a fold starts in `w:0`). Inside an awaited
    /// `AsyncSession` call the read runs on the I/O pool (`offload::blocking`).
    fn advance<'py>(&self, py: Python<'py>) -> PyResult<(Bound<'py, PyList>, bool)> {
        let (fold, history) = (Arc::clone(&self.fold), Arc::clone(&self.history));
        let (rows, changed) = no_panic_store(py, "WindowFold.advance()", || {
            crate::offload::blocking(py, move || {
                let mut fold = lock_fold(&fold);
                let before = fold.window();
                let rows = fold.catch_up(&history)?;
                let changed = before != fold.window();
                Ok::<_, ctxbudget::store::HistoryError>((rows, changed))
            })
        })??
        .map_err(|e| history_error(py, e))?;
        Ok((crate::rows::list(py, &rows)?, changed))
    }

    /// The window new rows go to (`w:0` before any row).
    #[getter]
    fn window_id(&self, py: Python<'_>) -> String {
        self.with(py, |f| f.window().to_string())
    }

    /// The window before the current one.
    #[getter]
    fn previous_window_id(&self, py: Python<'_>) -> Option<String> {
        self.with(py, |f| f.previous_window().map(|w| w.to_string()))
    }

    /// `root`, `rollover` or `reset`.
    #[getter]
    fn window_kind(&self, py: Python<'_>) -> &'static str {
        self.with(py, |f| f.window_kind_name())
    }

    /// Seq of the first row of the current window read (`None` before any row).
    #[getter]
    fn window_first_seq(&self, py: Python<'_>) -> Option<u64> {
        self.with(py, |f| f.window_first_seq())
    }

    /// The store's last seq as of the last `advance()` (the condition for a decision
    /// made on these rows).
    #[getter]
    fn last_seq(&self, py: Python<'_>) -> u64 {
        self.with(py, |f| f.last_seq())
    }

    /// Seq of the newest privacy floor (0: none).
    #[getter]
    fn floor_seq(&self, py: Python<'_>) -> u64 {
        self.with(py, |f| f.floor_seq())
    }

    /// Seqs retracted by the rows read, ascending.
    #[getter]
    fn retracted(&self, py: Python<'_>) -> Vec<u64> {
        self.with(py, |f| f.retracted())
    }

    fn is_retracted(&self, py: Python<'_>, seq: u64) -> bool {
        self.with(py, |f| f.is_retracted(seq))
    }

    /// Seqs of the current window's rows a request carries (messages, lead-ins,
    /// advisories, continuations not retracted), in order.
    #[getter]
    fn visible_seqs(&self, py: Python<'_>) -> Vec<u64> {
        self.with(py, |f| f.visible().collect())
    }

    /// Messages and continuations of the current window not retracted.
    #[getter]
    fn item_count(&self, py: Python<'_>) -> u64 {
        self.with(py, |f| f.item_count())
    }

    /// `(warning, handoff, final)`: advisories published in the current window.
    #[getter]
    fn claims(&self, py: Python<'_>) -> (bool, bool, bool) {
        let c = self.with(py, |f| f.claims());
        (c.warning, c.handoff, c.final_prompt)
    }

    /// `[(call_id, name, arguments, seq)]`: tool calls of the current window without a
    /// result (an interrupted result closes a call too), oldest first.
    #[getter]
    fn open_calls(&self, py: Python<'_>) -> PyResult<Vec<OpenCallTuple>> {
        let calls = self.with(py, |f| f.open_calls().to_vec());
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

    fn is_answered(&self, py: Python<'_>, call_id: &str) -> bool {
        self.with(py, |f| f.is_answered(call_id))
    }

    /// Whether `new_context` scheduled a rollover in the current window.
    #[getter]
    fn new_context_requested(&self, py: Python<'_>) -> bool {
        self.with(py, |f| f.new_context_requested())
    }

    /// Seq of the current window's last user message (retracted or not).
    #[getter]
    fn last_user_seq(&self, py: Python<'_>) -> Option<u64> {
        self.with(py, |f| f.last_user_seq())
    }

    fn __repr__(&self, py: Python<'_>) -> String {
        self.with(py, |f| {
            format!(
                "WindowFold(window_id={:?}, last_seq={})",
                f.window().to_string(),
                f.last_seq()
            )
        })
    }
}
