//! Memory files of a PostgreSQL conversation (`ctxbudget.tools.memory` stores a
//! conversation's `/memories/…` here when its `History` is a database's): thin calls
//! over the core's `PgConversation::memory_*`, which hold the paths, limits and row lock.
//!
//! A refusal of the core (`PgError::Memory`) becomes `InvalidArgumentError` with the
//! memory tool's `code` attribute; any other failure maps as the store's errors do
//! (`DatabaseError` with `.transient`).

use std::sync::Arc;

use ctxbudget::pg::{PgError, PgHistory};
use ctxbudget::store::StoreError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use pyo3::IntoPyObjectExt;

use crate::errors::{no_panic_store, raise, store_error};
use crate::history::PyHistory;

/// How many times an edit is read and applied again when other hosts changed the file
/// between its read and its write.
const UPDATE_ATTEMPTS: usize = 64;

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
        other => store_error(py, StoreError::from(other)),
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
        match history.inner.conversation() {
            Some(h) => Ok(PyPgMemoryFiles {
                history: Arc::clone(h),
            }),
            None => Err(pyo3::exceptions::PyValueError::new_err(
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

    /// Replaces the file's bytes with `edit(old_bytes) -> new_bytes`, atomically. The
    /// file is read, `edit` runs here (Python, on the caller's thread: the event loop's
    /// inside an awaited `AsyncSession` call), and the result is written only if the
    /// file still holds what was read (compare and swap under the conversation's row
    /// lock); otherwise it is read and edited again. No database call runs with the GIL
    /// held or outside the I/O pool, and Python never runs while the row lock is held, so
    /// waiting for another host's lock never stops the event loop. An exception `edit`
    /// raises aborts the change and is re-raised.
    fn update(&self, py: Python<'_>, path: String, edit: Py<PyAny>) -> PyResult<()> {
        for _ in 0..UPDATE_ATTEMPTS {
            let read_path = path.clone();
            let old = self.run(py, "memory read", move |h| {
                h.conversation().memory_read(&read_path)
            })?;
            let new: Vec<u8> = edit.call1(py, (PyBytes::new(py, &old),))?.extract(py)?;
            let write_path = path.clone();
            let replaced = self.run(py, "memory update", move |h| {
                h.conversation().memory_replace(&write_path, &old, &new)
            })?;
            if replaced {
                return Ok(());
            }
        }
        Err(memory_error(
            py,
            PgError::Memory {
                code: "io_error",
                message: format!(
                    "{path} changed under each of {UPDATE_ATTEMPTS} edits (other hosts keep \
                     writing it); nothing was written — view it and try again"
                ),
            },
        ))
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
