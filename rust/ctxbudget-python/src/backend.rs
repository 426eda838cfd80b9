//! The store behind a `ctxbudget.History`: a workspace's files, a PostgreSQL
//! conversation or an in-memory store, held as the core's `Store` seam (every transcript operation, the
//! `session_history` tool and the fold go through it), with the few facts that are not
//! the transcript's (the cursor key, the directory, a database conversation's records).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use ctxbudget::pg::{CursorKey, PgError, PgHistory, PgOptions, PgStore};
use ctxbudget::transcript::History;
use ctxbudget::transcript::Store;

/// One conversation's store.
#[derive(Clone)]
pub(crate) struct Backend {
    /// The seam every transcript operation goes through.
    store: Arc<dyn Store>,
    /// The key cursors are signed with: a database's deployment key, so that a cursor
    /// minted on one host pages on another; `None`: the per-process key.
    cursor_key: Option<Arc<CursorKey>>,
    /// `<workspace>/history` for a workspace's files.
    directory: Option<PathBuf>,
    /// A PostgreSQL conversation, for what it keeps beside its transcript (its id, its
    /// budget record, its memory files).
    conversation: Option<Arc<PgHistory>>,
}

impl Backend {
    /// A workspace's files.
    pub(crate) fn files(history: History) -> Backend {
        let directory = Some(history.paths().dir.clone());
        Backend {
            store: Arc::new(history),
            cursor_key: None,
            directory,
            conversation: None,
        }
    }

    /// An in-memory store of this process (see `ctxbudget::memory`).
    pub(crate) fn memory(history: ctxbudget::memory::MemoryHistory) -> Backend {
        Backend {
            store: Arc::new(history),
            cursor_key: None,
            directory: None,
            conversation: None,
        }
    }

    /// A PostgreSQL conversation, its cursors signed with the deployment's `key`.
    pub(crate) fn postgres(history: PgHistory, key: Arc<CursorKey>) -> Backend {
        let history = Arc::new(history);
        Backend {
            store: Arc::clone(&history) as Arc<dyn Store>,
            cursor_key: Some(key),
            directory: None,
            conversation: Some(history),
        }
    }

    /// The seam every transcript operation goes through.
    pub(crate) fn store(&self) -> &dyn Store {
        self.store.as_ref()
    }

    /// The seam, shared (the `session_history` tool keeps it).
    pub(crate) fn shared(&self) -> Arc<dyn Store> {
        Arc::clone(&self.store)
    }

    /// The bytes of the key cursors are signed with (`None`: the per-process key).
    pub(crate) fn cursor_key(&self) -> Option<Vec<u8>> {
        self.cursor_key.as_ref().map(|k| k.as_bytes().to_vec())
    }

    /// `<workspace>/history` for the file store; `None` for a database.
    pub(crate) fn directory(&self) -> Option<PathBuf> {
        self.directory.clone()
    }

    /// The PostgreSQL conversation; `None` for a workspace's files.
    pub(crate) fn conversation(&self) -> Option<&Arc<PgHistory>> {
        self.conversation.as_ref()
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
