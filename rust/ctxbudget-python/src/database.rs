//! `ctxbudget.Database`'s core: a PostgreSQL database the host opens once with its pool
//! settings, hands to `History`, `Session`, `AsyncSession` and `AgentsSession`, and
//! closes. The URL-only form (`History.open(url, …)`) keeps one pool per URL per process
//! (`backend::database`); a `Database` owns its pool and nothing else shares it.

use std::sync::Arc;
use std::time::Duration;

use ctxbudget::pg::{CursorKey, PgError, PgHistory, PgOptions, PgStore};
use ctxbudget::store::HistoryError;
use ctxbudget::transcript::PruneSpec;
use pyo3::prelude::*;

use crate::backend::{Backend, Database};
use crate::errors::{history_error, no_panic_store, pg_error};
use crate::history::PyHistory;
use crate::reports::{PyDeleteReport, PyPruneReport};

/// A connected PostgreSQL database with its own pool (see `ctxbudget.Database`).
#[pyclass(module = "ctxbudget._ctxbudget", name = "Database", frozen)]
pub(crate) struct PyDatabase {
    db: Arc<Database>,
}

impl PyDatabase {
    /// Runs `f` on the store without the GIL, mapping errors and panics.
    fn run<T: Send + 'static>(
        &self,
        py: Python<'_>,
        what: &str,
        f: impl FnOnce(&Database) -> Result<T, PgError> + Send + 'static,
    ) -> PyResult<T> {
        let db = Arc::clone(&self.db);
        no_panic_store(py, what, || crate::offload::blocking(py, move || f(&db)))??
            .map_err(|e| pg_error(py, e))
    }
}

fn seconds(value: f64, what: &str) -> Result<Duration, PgError> {
    Duration::try_from_secs_f64(value)
        .map_err(|_| PgError::Invalid(format!("{what} must be 0 or more seconds, got {value}")))
}

/// The spec of a prune from its Python arguments.
pub(crate) fn prune_spec(
    keep_windows: Option<usize>,
    older_than: Option<f64>,
    below_floor: bool,
) -> Result<PruneSpec, HistoryError> {
    let older_than = older_than
        .map(|s| {
            Duration::try_from_secs_f64(s).map_err(|_| {
                HistoryError::InvalidArgument(format!(
                    "older_than must be 0 or more seconds, got {s}"
                ))
            })
        })
        .transpose()?;
    Ok(PruneSpec {
        keep_windows,
        older_than,
        below_floor,
    })
}

#[pymethods]
impl PyDatabase {
    /// Connects (checking or migrating the schema, as `migrate` says).
    #[staticmethod]
    #[pyo3(signature = (url, *, pool_size, pool_timeout, connect_timeout, reconnect_for,
        statement_timeout, lock_timeout, schema, migrate, cursor_key))]
    #[allow(clippy::too_many_arguments)]
    fn open(
        py: Python<'_>,
        url: String,
        pool_size: usize,
        pool_timeout: f64,
        connect_timeout: f64,
        reconnect_for: f64,
        statement_timeout: Option<f64>,
        lock_timeout: Option<f64>,
        schema: Option<String>,
        migrate: bool,
        cursor_key: Option<String>,
    ) -> PyResult<Self> {
        let db = no_panic_store(py, "Database.open()", || {
            crate::offload::blocking(py, move || {
                if pool_size == 0 {
                    return Err(PgError::Invalid("pool_size must be 1 or more".into()));
                }
                let options = PgOptions {
                    pool_size,
                    pool_timeout: seconds(pool_timeout, "pool_timeout")?,
                    connect_timeout: seconds(connect_timeout, "connect_timeout")?,
                    reconnect_for: seconds(reconnect_for, "reconnect_for")?,
                    statement_timeout: statement_timeout
                        .map(|s| seconds(s, "statement_timeout"))
                        .transpose()?,
                    lock_timeout: lock_timeout
                        .map(|s| seconds(s, "lock_timeout"))
                        .transpose()?,
                    schema,
                    migrate,
                    ..PgOptions::default()
                };
                let store = PgStore::connect(&url, options)?;
                let key = match cursor_key
                    .as_deref()
                    .map(CursorKey::from_setting)
                    .transpose()?
                    .flatten()
                {
                    Some(key) => key,
                    None => store.cursor_key()?,
                };
                Ok(Database {
                    store,
                    key: Arc::new(key),
                })
            })
        })??
        .map_err(|e| pg_error(py, e))?;
        Ok(PyDatabase { db: Arc::new(db) })
    }

    /// Runs the migration (creating or upgrading the schema); `(found, now)` versions.
    fn migrate(&self, py: Python<'_>) -> PyResult<(i32, i32)> {
        self.run(py, "Database.migrate()", |db| db.store.migrate())
    }

    /// The schema version the database holds.
    fn schema_version(&self, py: Python<'_>) -> PyResult<i32> {
        self.run(py, "Database.schema_version()", |db| {
            db.store.schema_version()
        })
    }

    /// The conversation `conversation` as a `History` core (created unless `create` is
    /// false, when a missing one is an error).
    #[pyo3(signature = (conversation, *, max_row_bytes, create = true))]
    fn history(
        &self,
        py: Python<'_>,
        conversation: String,
        max_row_bytes: usize,
        create: bool,
    ) -> PyResult<PyHistory> {
        let inner = self.run(py, "Database.history()", move |db| {
            let handle = if create {
                db.store.open(&conversation)?
            } else {
                db.store.open_existing(&conversation)?.ok_or_else(|| {
                    PgError::Invalid(format!(
                        "conversation {conversation:?} does not exist in this database; \
                         check the id (nothing was created)"
                    ))
                })?
            };
            let history = PgHistory::new(handle).with_max_row_bytes(max_row_bytes);
            Ok(Backend::Pg(Arc::new(history), Arc::clone(&db.key)))
        })?;
        Ok(PyHistory { inner })
    }

    /// Deletes a conversation for good.
    fn delete(&self, py: Python<'_>, conversation: String) -> PyResult<PyDeleteReport> {
        self.run(py, "Database.delete()", move |db| {
            db.store.delete(&conversation).map(PyDeleteReport::from)
        })
    }

    /// Prunes a conversation's sealed windows (it must exist).
    #[pyo3(signature = (conversation, *, keep_windows = None, older_than = None, below_floor = false))]
    fn prune(
        &self,
        py: Python<'_>,
        conversation: String,
        keep_windows: Option<usize>,
        older_than: Option<f64>,
        below_floor: bool,
    ) -> PyResult<PyPruneReport> {
        let spec =
            prune_spec(keep_windows, older_than, below_floor).map_err(|e| history_error(py, e))?;
        let db = Arc::clone(&self.db);
        let result = no_panic_store(py, "Database.prune()", || {
            crate::offload::blocking(py, move || {
                let handle = db
                    .store
                    .open_existing(&conversation)
                    .map_err(HistoryError::from)?
                    .ok_or_else(|| {
                        HistoryError::InvalidArgument(format!(
                            "conversation {conversation:?} does not exist in this database; \
                             check the id (nothing was created)"
                        ))
                    })?;
                PgHistory::new(handle).prune(&spec)
            })
        })??;
        result
            .map(PyPruneReport::from)
            .map_err(|e| history_error(py, e))
    }

    /// Closes the pool; later calls fail with `DatabaseClosedError`. Idempotent.
    fn close(&self) {
        self.db.store.close();
    }

    /// True once closed.
    #[getter]
    fn closed(&self) -> bool {
        self.db.store.is_closed()
    }

    /// The pool's size.
    #[getter]
    fn pool_size(&self) -> usize {
        self.db.store.options().pool_size
    }

    /// The schema named at open (`None`: the connection's search_path).
    #[getter]
    fn schema(&self) -> Option<String> {
        self.db.store.options().schema.clone()
    }
}

/// The SQL of the migration, for review (`ctxbudget db ddl`).
#[pyfunction]
#[pyo3(signature = (schema = None))]
pub(crate) fn pg_ddl(schema: Option<String>) -> String {
    ctxbudget::pg::ddl(schema.as_deref())
}
