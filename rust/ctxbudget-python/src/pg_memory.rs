//! Memory files of a PostgreSQL conversation (`ctxbudget.tools.memory` stores a
//! conversation's `/memories/…` here when its `History` is a database's): thin calls
//! over the core's `PgConversation::memory_*`, which hold the paths, limits and row lock.
//!
//! A refusal of the core (`PgError::Memory`) becomes `InvalidArgumentError` with the
//! memory tool's `code` attribute; any other failure maps as the store's errors do
//! (`DatabaseError` with `.transient`).

use std::sync::{Arc, Mutex};

use ctxbudget::pg::{PgError, PgHistory};
use ctxbudget::store::HistoryError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::IntoPyObjectExt;

use crate::backend::Backend;
use crate::errors::{history_error, no_panic_store, raise};
use crate::history::PyHistory;

/// `(path, is_dir, size)` of one directory entry.
type EntryTuple = (String, bool, u64);

/// The memory files of one PostgreSQL conversation.
#[pyclass(module = "ctxbudget._ctxbudget", name = "PgMemoryFiles", frozen)]
pub(crate) struct PyPgMemoryFiles {
    history: Arc<PgHistory>,
}

/// Maps a core error of a memory command.
fn memory_error(py: Python<'_>, err: PgError) -> PyErr {
    match err {
        PgError::Memory { code, message } => {
            let code = code.into_py_any(py).unwrap_or_else(|_| py.None());
            raise(py, "InvalidArgumentError", message, &[("code", code)])
        }
        other => history_error(py, HistoryError::from(other)),
    }
}

impl PyPgMemoryFiles {
    /// Runs `f` on the conversation without the GIL (on the I/O pool inside an awaited
    /// `AsyncSession` call), mapping errors and panics.
    fn run<T: Send + 'static>(
        &self,
        py: Python<'_>,
        what: &str,
        f: impl FnOnce(&PgHistory) -> Result<T, PgError> + Send + 'static,
    ) -> PyResult<T> {
        let history = Arc::clone(&self.history);
        no_panic_store(py, what, || {
            crate::offload::blocking(py, move || f(history.as_ref()))
        })??
        .map_err(|e| memory_error(py, e))
    }
}

#[pymethods]
impl PyPgMemoryFiles {
    /// The memory files of `history`'s conversation (`ValueError` for a workspace's).
    #[new]
    fn new(history: &PyHistory) -> PyResult<Self> {
        match &history.inner {
            Backend::Pg(h, _) => Ok(PyPgMemoryFiles {
                history: Arc::clone(h),
            }),
            Backend::File(_) => Err(pyo3::exceptions::PyValueError::new_err(
                "PgMemoryFiles needs a PostgreSQL conversation; a workspace keeps its \
                 memory files in <workspace>/memories/",
            )),
        }
    }

    /// The conversation's id.
    #[getter]
    fn conversation(&self) -> String {
        self.history.conversation().id().to_string()
    }

    /// A file's bytes.
    fn read<'py>(&self, py: Python<'py>, path: String) -> PyResult<Bound<'py, PyBytes>> {
        let bytes = self.run(py, "memory read", move |h| {
            h.conversation().memory_read(&path)
        })?;
        Ok(PyBytes::new(py, &bytes))
    }

    /// `[(path, is_dir, size)]` directly in the directory `path`, sorted by path.
    fn entries(&self, py: Python<'_>, path: String) -> PyResult<Vec<EntryTuple>> {
        let entries = self.run(py, "memory list", move |h| {
            h.conversation().memory_list(&path)
        })?;
        Ok(entries
            .into_iter()
            .map(|e| (e.path, e.is_dir, e.size))
            .collect())
    }

    /// Creates or replaces the whole file `path`.
    fn write(&self, py: Python<'_>, path: String, content: Vec<u8>) -> PyResult<()> {
        self.run(py, "memory write", move |h| {
            h.conversation().memory_write(&path, &content)
        })
    }

    /// Replaces the file's bytes with `edit(old_bytes) -> new_bytes` under the
    /// conversation's row lock (`edit` may run again after a broken connection; an
    /// exception it raises aborts the change and is re-raised).
    fn update(&self, py: Python<'_>, path: String, edit: Py<PyAny>) -> PyResult<()> {
        let raised: Arc<Mutex<Option<PyErr>>> = Arc::new(Mutex::new(None));
        let kept = Arc::clone(&raised);
        let history = Arc::clone(&self.history);
        // Always on this thread (never the I/O pool): `edit` is Python code, which
        // re-takes the GIL on the thread that released it.
        let result = no_panic_store(py, "memory update", || {
            py.detach(|| {
                history.conversation().memory_update(&path, |old| {
                    Python::attach(|py| {
                        let out = edit
                            .call1(py, (PyBytes::new(py, old),))
                            .and_then(|v| v.extract::<Vec<u8>>(py));
                        out.map_err(|err| {
                            let message = err.to_string();
                            *kept.lock().unwrap_or_else(|e| e.into_inner()) = Some(err);
                            PgError::Memory {
                                code: "edit_failed",
                                message,
                            }
                        })
                    })
                })
            })
        })?;
        if let Some(err) = raised.lock().unwrap_or_else(|e| e.into_inner()).take() {
            return Err(err);
        }
        result.map_err(|e| memory_error(py, e))
    }

    /// Deletes a file or a directory with everything under it.
    fn delete(&self, py: Python<'_>, path: String) -> PyResult<()> {
        self.run(py, "memory delete", move |h| {
            h.conversation().memory_delete(&path)
        })
    }

    /// Renames a file or a directory; `new_path` must not exist.
    fn rename(&self, py: Python<'_>, old_path: String, new_path: String) -> PyResult<()> {
        self.run(py, "memory rename", move |h| {
            h.conversation().memory_rename(&old_path, &new_path)
        })
    }

    fn __repr__(&self) -> String {
        format!(
            "PgMemoryFiles(conversation={:?})",
            self.history.conversation().id()
        )
    }
}

/// The memory files' limits, from the core (the one place they are written):
/// `MEMORY_CHECKPOINT_MAX`, `MEMORY_FILE_MAX`, `MEMORY_NAME_MAX`, `MEMORY_PATH_MAX`.
pub(crate) fn add_constants(m: &Bound<'_, PyModule>) -> PyResult<()> {
    use ctxbudget::pg::{MEMORY_CHECKPOINT_MAX, MEMORY_FILE_MAX, MEMORY_NAME_MAX, MEMORY_PATH_MAX};
    m.add("MEMORY_CHECKPOINT_MAX", MEMORY_CHECKPOINT_MAX)?;
    m.add("MEMORY_FILE_MAX", MEMORY_FILE_MAX)?;
    m.add("MEMORY_NAME_MAX", MEMORY_NAME_MAX)?;
    m.add("MEMORY_PATH_MAX", MEMORY_PATH_MAX)?;
    Ok(())
}
