//! The store behind a `ctxbudget.History`: a workspace's files or a PostgreSQL
//! conversation. Both implement the core's `Store` seam; what only one of them has (a
//! directory, commit anchors) is answered here.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use ctxbudget::pg::{CursorKey, PgError, PgHistory, PgOptions, PgStore};
use ctxbudget::store::{History, Result, Store, StoredRow, WindowInfo};

/// One conversation's store.
#[derive(Clone)]
pub(crate) enum Backend {
    /// `<workspace>/history/`.
    File(Arc<History>),
    /// A conversation in a PostgreSQL database, with the deployment's cursor key.
    Pg(Arc<PgHistory>, Arc<CursorKey>),
}

impl Backend {
    /// The seam every transcript operation goes through.
    pub(crate) fn store(&self) -> &dyn Store {
        match self {
            Backend::File(h) => h.as_ref(),
            Backend::Pg(h, _) => h.as_ref(),
        }
    }

    pub(crate) fn rows_since(&self, seq: u64) -> Result<Vec<StoredRow>> {
        match self {
            Backend::File(h) => h.rows_since(seq),
            Backend::Pg(h, _) => h.rows_since(seq),
        }
    }

    pub(crate) fn windows(&self) -> Result<Vec<WindowInfo>> {
        match self {
            Backend::File(h) => h.windows(),
            Backend::Pg(h, _) => h.windows(),
        }
    }

    pub(crate) fn current_window(&self) -> Result<String> {
        match self {
            Backend::File(h) => h.current_window(),
            Backend::Pg(h, _) => h.current_window(),
        }
    }

    /// The CRC of the commit ending at `offset` (file store only: a PostgreSQL
    /// conversation binds cursors by its epoch alone).
    pub(crate) fn anchor_crc_at(&self, offset: u64) -> Result<Option<u32>> {
        match self {
            Backend::File(h) => h.anchor_crc_at(offset),
            Backend::Pg(..) => Ok(None),
        }
    }

    /// `<workspace>/history` for the file store; `None` for a database.
    pub(crate) fn directory(&self) -> Option<PathBuf> {
        match self {
            Backend::File(h) => Some(h.paths().dir.clone()),
            Backend::Pg(..) => None,
        }
    }
}

/// A connected database and its cursor key, shared by every `History` of the process
/// that names the same URL (one pool per URL, as a backend keeps one engine per
/// database).
pub(crate) struct Database {
    pub store: PgStore,
    pub key: Arc<CursorKey>,
}

/// One slot per URL (and cursor key): the database once connected. Its mutex is held by
/// the first caller while it connects, so the others of that URL wait for it — and only
/// they: a URL that is down (30 s of reconnects) never holds up another URL's first open.
type Slot = Arc<Mutex<Option<Arc<Database>>>>;

fn databases() -> &'static Mutex<HashMap<String, Slot>> {
    static DATABASES: OnceLock<Mutex<HashMap<String, Slot>>> = OnceLock::new();
    DATABASES.get_or_init(|| Mutex::new(HashMap::new()))
}

/// The database at `url`, connected (and its schema checked, migrated if needed) on
/// first use: threads that open their first `History` of a URL at once share one pool,
/// the first of them connecting while the others wait. With `cursor_key`, cursors are
/// signed with it; otherwise with `CTXBUDGET_CURSOR_KEY` or the key kept in the database.
pub(crate) fn database(
    url: &str,
    cursor_key: Option<&str>,
) -> std::result::Result<Arc<Database>, PgError> {
    let cache_key = format!("{url}\u{0}{}", cursor_key.unwrap_or(""));
    let slot: Slot = Arc::clone(
        databases()
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .entry(cache_key)
            .or_default(),
    );
    // Held while connecting: once per URL per process, so two threads never both build
    // a pool for one URL; a failure leaves the slot empty and the next caller tries again.
    let mut connected = slot.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(db) = connected.as_ref() {
        return Ok(Arc::clone(db));
    }
    let store = PgStore::connect(url, PgOptions::default())?;
    let key = match cursor_key
        .map(CursorKey::from_setting)
        .transpose()?
        .flatten()
    {
        Some(key) => key,
        None => store.cursor_key()?,
    };
    let db = Arc::new(Database {
        store,
        key: Arc::new(key),
    });
    *connected = Some(Arc::clone(&db));
    Ok(db)
}
