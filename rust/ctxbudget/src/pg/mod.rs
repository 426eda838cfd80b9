//! The PostgreSQL store (cargo feature `postgres`): conversations in a shared database, so
//! that the next turn of a conversation may land on any host.
//!
//! It keeps what the file store keeps, keyed by conversation (docs/format.md, "PostgreSQL
//! layout"): the rows of a conversation as bytes with gapless, increasing seqs, the epoch
//! that cursors are bound to, the privacy floor, the rotation mark, the memory files and
//! the cursor key. Every append is one transaction, serialised per conversation by a row
//! lock on the conversation's row (`SELECT … FOR UPDATE`); conversations never wait for
//! each other.
//!
//! ```no_run
//! use ctxbudget::pg::{NewRow, PgOptions, PgStore};
//!
//! let store = PgStore::connect("postgresql://app@db.internal/app?sslmode=require", PgOptions::default())?;
//! let chat = store.open("customer-42")?;
//! let appended = chat.append(vec![NewRow::new(br#"{"kind":"message"}"#.to_vec())])?;
//! let rows = chat.rows_since(appended.first_seq, None)?;
//! assert_eq!(rows.len(), 1);
//! # Ok::<(), ctxbudget::pg::PgError>(())
//! ```

mod bodies;
mod budget;
mod config;
mod deadline;
mod error;
mod key;
mod memory;
pub(crate) mod page;
mod pool;
mod retention;
mod schema;
pub(crate) mod transcript;

use std::sync::Arc;
use std::time::{Duration, Instant};

pub use budget::BUDGET_RECORD_MAX;
pub use config::{PgOptions, SslMode, IDLE_IN_TRANSACTION_TIMEOUT};
pub use error::{PgError, Result};
pub use key::{CursorKey, CURSOR_KEY_ENV, CURSOR_KEY_MIN_BYTES};
pub use memory::{
    MemoryEntry, MEMORY_CHECKPOINT_MAX, MEMORY_FILE_MAX, MEMORY_NAME_MAX, MEMORY_PATH_MAX,
};
pub use retention::{DeleteReport, PruneReport};
pub use schema::{ddl, MIGRATION_LOCK, SCHEMA_VERSION};
pub use transcript::PgHistory;

use pool::{Conn, Pool};

/// Longest conversation id, in bytes.
pub const CONVERSATION_ID_MAX: usize = 256;
/// Longest batch id, in bytes.
pub const BATCH_ID_MAX: usize = 128;

/// A row to append: its bytes and whether it is a privacy floor (a soft clear).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NewRow {
    /// The row's bytes, stored and returned unchanged.
    pub body: Vec<u8>,
    /// True for a soft clear: the conversation's floor rises to this row's seq.
    pub floor: bool,
}

impl NewRow {
    /// A row that is not a floor.
    pub fn new(body: Vec<u8>) -> NewRow {
        NewRow { body, floor: false }
    }

    /// A privacy floor row (a soft clear).
    pub fn floor(body: Vec<u8>) -> NewRow {
        NewRow { body, floor: true }
    }
}

/// Conditions and identity of one append.
#[derive(Clone, Debug, Default)]
pub struct AppendOptions {
    /// Append only if the conversation's last seq is still this one; otherwise
    /// [`PgError::Conflict`] and nothing is written.
    pub expected_last_seq: Option<u64>,
    /// Idempotency key (1 to 128 bytes): a batch with an id that was already committed
    /// in this conversation is not written again; its first commit's seqs come back with
    /// `replayed = true`. Without one the store picks a random id for the call, so its own
    /// retries after a broken connection never commit a batch twice.
    pub batch_id: Option<String>,
}

/// What an append committed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Seq of the batch's first row.
    pub first_seq: u64,
    /// Seq of its last row.
    pub last_seq: u64,
    /// The conversation's epoch after the append (an append never changes it).
    pub epoch: u64,
    /// True when the batch id had been committed before and nothing was written now.
    pub replayed: bool,
}

/// A stored row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    /// Its seq.
    pub seq: u64,
    /// Its bytes, as appended.
    pub body: Vec<u8>,
    /// True if it was appended as a privacy floor.
    pub floor: bool,
    /// True if a rotation archived it (rows stay readable).
    pub archived: bool,
}

/// A conversation's counters.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ConversationState {
    /// Changes on every non-append change (rotation, a row changed or deleted by hand,
    /// the conversation deleted and created again); never on an append.
    pub epoch: u64,
    /// The last seq handed out (0 for an empty conversation).
    pub last_seq: u64,
    /// Seq of the newest privacy floor (0 if none); never lowered.
    pub floor_seq: u64,
    /// Rows below this seq are archived (1 = none).
    pub archived_before: u64,
}

struct Inner {
    pool: Pool,
    options: PgOptions,
    ssl_mode: SslMode,
    /// The cursor key of a role that may read but not store the database's (see
    /// [`PgStore::database_cursor_key`]), made once per store.
    own_key: std::sync::OnceLock<CursorKey>,
}

/// A connection pool to one database holding ctxbudget's tables. Cheap to clone; share
/// one per process.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore")
            .field("ssl_mode", &self.inner.ssl_mode)
            .field("schema", &self.inner.options.schema)
            .finish_non_exhaustive()
    }
}

impl PgStore {
    /// Connects, and creates or migrates the schema (safe when many hosts start at once);
    /// with [`PgOptions::migrate`] false it only checks that the schema is current
    /// ([`PgError::NotMigrated`] otherwise), so a role without `CREATE` can connect.
    pub fn connect(url: &str, options: PgOptions) -> Result<PgStore> {
        let target = config::parse(url, &options)?;
        let ssl_mode = target.ssl_mode;
        let pool = Pool::new(target, &options);
        let store = PgStore {
            inner: Arc::new(Inner {
                pool,
                options,
                ssl_mode,
                own_key: std::sync::OnceLock::new(),
            }),
        };
        if store.inner.options.migrate {
            store.migrate()?;
        } else {
            store.run(|c| schema::require_current(&mut c.client).map(|_| ()))?;
        }
        Ok(store)
    }

    /// Creates or migrates the schema to [`SCHEMA_VERSION`] (the explicit step a DBA
    /// runs, as the role that owns the tables; `ctxbudget db migrate`). Safe when many
    /// hosts run it at once; a database already current is only read. Returns the
    /// version found before (0: no tables) and the version now.
    pub fn migrate(&self) -> Result<(i32, i32)> {
        let schema = self.inner.options.schema.clone();
        let found = self.run(|c| schema::migrate(&mut c.client, schema.as_deref()))?;
        Ok((found, SCHEMA_VERSION))
    }

    /// Closes the pool: idle connections now, busy ones when their call ends; every later
    /// call on this store (and on the conversations and histories opened from it) fails
    /// with [`PgError::Closed`]. Idempotent.
    pub fn close(&self) {
        self.inner.pool.close();
    }

    /// True once [`close`](Self::close) ran.
    pub fn is_closed(&self) -> bool {
        self.inner.pool.is_closed()
    }

    /// The options it was opened with.
    pub fn options(&self) -> &PgOptions {
        &self.inner.options
    }

    /// The TLS mode in use.
    pub fn ssl_mode(&self) -> SslMode {
        self.inner.ssl_mode
    }

    /// The schema version the database holds.
    pub fn schema_version(&self) -> Result<i32> {
        self.run(|c| {
            let s =
                c.statement("SELECT coalesce(max(version), 0) FROM ctxbudget_schema_version")?;
            let row = c
                .client
                .query_one(&s, &[])
                .map_err(PgError::db("reading the schema version"))?;
            Ok(row.get(0))
        })
    }

    /// True if the connection to the server is encrypted (asks the server).
    pub fn connection_encrypted(&self) -> Result<bool> {
        self.run(|c| {
            let row = c
                .client
                .query_one(
                    "SELECT coalesce((SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()), false)",
                    &[],
                )
                .map_err(PgError::db("reading pg_stat_ssl"))?;
            Ok(row.get(0))
        })
    }

    /// The conversation `id`, created (empty, with a fresh epoch) if it does not exist.
    pub fn open(&self, id: &str) -> Result<PgConversation> {
        check_id("conversation id", id, CONVERSATION_ID_MAX)?;
        self.run(|c| {
            let s = c.statement(
                "INSERT INTO ctxbudget_conversations (conversation) VALUES ($1) \
                 ON CONFLICT (conversation) DO NOTHING",
            )?;
            c.client
                .execute(&s, &[&id])
                .map_err(PgError::db("creating the conversation"))?;
            Ok(())
        })?;
        Ok(PgConversation {
            store: self.clone(),
            id: id.to_string(),
        })
    }

    /// The conversation `id` if it exists (`None` otherwise; nothing is created): for
    /// readers that must not create a conversation by naming it wrong.
    pub fn open_existing(&self, id: &str) -> Result<Option<PgConversation>> {
        check_id("conversation id", id, CONVERSATION_ID_MAX)?;
        let exists = self.run(|c| {
            let s = c.statement("SELECT 1 FROM ctxbudget_conversations WHERE conversation = $1")?;
            let rows = c
                .client
                .query(&s, &[&id])
                .map_err(PgError::db("looking up the conversation"))?;
            Ok(!rows.is_empty())
        })?;
        Ok(exists.then(|| PgConversation {
            store: self.clone(),
            id: id.to_string(),
        }))
    }

    /// Runs `op` on a pooled connection. When the connection breaks or the server is
    /// restarting, it reconnects and runs `op` again until [`PgOptions::reconnect_for`] has
    /// passed; every `op` must therefore be safe to repeat (appends are, by batch id).
    pub(crate) fn run<T>(&self, op: impl FnMut(&mut Conn) -> Result<T>) -> Result<T> {
        self.run_until(None, op)
    }

    /// [`run`](Self::run) for a caller with a deadline of its own (a `session_history`
    /// page): past `until` it neither reconnects, nor waits for a pooled connection, nor
    /// keeps connecting. `op` bounds its own statements (see [`Conn::within`]).
    pub(crate) fn run_until<T>(
        &self,
        until: Option<Instant>,
        mut op: impl FnMut(&mut Conn) -> Result<T>,
    ) -> Result<T> {
        let start = Instant::now();
        let mut give_up = start + self.inner.options.reconnect_for;
        if let Some(until) = until {
            give_up = give_up.min(until);
        }
        let mut pause = Duration::from_millis(20);
        loop {
            let outcome = match self.inner.pool.get(until) {
                Ok(mut pooled) => {
                    let result = pooled.conn().and_then(&mut op);
                    if matches!(&result, Err(e) if e.is_transient()) {
                        pooled.discard();
                    }
                    result
                }
                Err(e) => Err(e),
            };
            match outcome {
                Err(e)
                    if e.is_transient()
                        && !matches!(e, PgError::PoolTimeout { .. })
                        && Instant::now() + pause < give_up =>
                {
                    // The server went away: the other idle connections are stale too.
                    self.inner.pool.clear_idle();
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(500));
                }
                other => return other,
            }
        }
    }
}

/// One conversation of a [`PgStore`].
#[derive(Clone, Debug)]
pub struct PgConversation {
    store: PgStore,
    id: String,
}

impl PgConversation {
    /// The conversation's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The store it lives in.
    pub fn store(&self) -> &PgStore {
        &self.store
    }

    /// Appends `rows` as one batch (one transaction) and returns their seqs.
    pub fn append(&self, rows: Vec<NewRow>) -> Result<Appended> {
        self.append_with(&AppendOptions::default(), |_| rows.clone())
    }

    /// Appends `rows` only if the last seq is still `expected_last_seq`
    /// ([`PgError::Conflict`] otherwise; nothing is written).
    pub fn append_if(&self, rows: Vec<NewRow>, expected_last_seq: u64) -> Result<Appended> {
        let options = AppendOptions {
            expected_last_seq: Some(expected_last_seq),
            batch_id: None,
        };
        self.append_with(&options, |_| rows.clone())
    }

    /// Appends one batch whose rows `make` builds from the batch's first seq, under the
    /// conversation's lock (so rows may carry their own seqs). `make` may run more than
    /// once (after a broken connection); the batch commits at most once.
    pub fn append_with(
        &self,
        options: &AppendOptions,
        mut make: impl FnMut(u64) -> Vec<NewRow>,
    ) -> Result<Appended> {
        let batch_id = match &options.batch_id {
            Some(id) => {
                check_id("batch id", id, BATCH_ID_MAX)?;
                id.clone()
            }
            None => random_batch_id(),
        };
        let conversation = self.id.as_str();
        self.store.run(|c| {
            append_once(
                c,
                conversation,
                options.expected_last_seq,
                &batch_id,
                &mut make,
            )
        })
    }

    /// Rows with seq ≥ `first_seq`, in seq order, at most `limit` of them.
    pub fn rows_since(&self, first_seq: u64, limit: Option<usize>) -> Result<Vec<StoredRow>> {
        let first = to_i64(first_seq.max(1));
        let limit = limit.map_or(i64::MAX, |l| i64::try_from(l).unwrap_or(i64::MAX));
        let conversation = self.id.as_str();
        self.store.run(|c| {
            let s = c.statement(
                "SELECT r.seq, r.body, r.floor, r.seq < c.archived_before \
                 FROM ctxbudget_rows r JOIN ctxbudget_conversations c USING (conversation) \
                 WHERE r.conversation = $1 AND r.seq >= $2 ORDER BY r.seq LIMIT $3",
            )?;
            let rows = c
                .client
                .query(&s, &[&conversation, &first, &limit])
                .map_err(PgError::db("reading rows"))?;
            Ok(rows
                .iter()
                .map(|r| StoredRow {
                    seq: from_i64(r.get(0)),
                    body: r.get(1),
                    floor: r.get(2),
                    archived: r.get(3),
                })
                .collect())
        })
    }

    /// The conversation's epoch, last seq, floor and rotation mark.
    pub fn state(&self) -> Result<ConversationState> {
        let conversation = self.id.as_str();
        self.store.run(|c| {
            let s = c.statement(
                "SELECT epoch, last_seq, floor_seq, archived_before \
                 FROM ctxbudget_conversations WHERE conversation = $1",
            )?;
            let rows = c
                .client
                .query(&s, &[&conversation])
                .map_err(PgError::db("reading the conversation"))?;
            let row = rows
                .first()
                .ok_or_else(|| PgError::NoConversation(conversation.to_string()))?;
            Ok(ConversationState {
                epoch: from_i64(row.get(0)),
                last_seq: from_i64(row.get(1)),
                floor_seq: from_i64(row.get(2)),
                archived_before: from_i64(row.get(3)),
            })
        })
    }

    /// Archives the rows below `before` (the first row of the current window, as the file
    /// store's `rotate()` moves whole closed windows) and gives the conversation a new
    /// epoch, like the file store's rotation. Returns the new epoch, or `None` when there
    /// was nothing new to archive (then nothing changes, the epoch included).
    pub fn rotate(&self, before: u64) -> Result<Option<u64>> {
        let conversation = self.id.as_str();
        let before = to_i64(before);
        self.store.run(|c| {
            let lock = c.statement(
                "SELECT last_seq, archived_before FROM ctxbudget_conversations \
                 WHERE conversation = $1 FOR UPDATE",
            )?;
            let update = c.statement(
                "UPDATE ctxbudget_conversations \
                 SET archived_before = $2, epoch = ctxbudget_new_epoch() \
                 WHERE conversation = $1 RETURNING epoch",
            )?;
            let mut tx = c.client.transaction().map_err(PgError::db("BEGIN"))?;
            let rows = tx
                .query(&lock, &[&conversation])
                .map_err(PgError::db("locking the conversation"))?;
            let row = rows
                .first()
                .ok_or_else(|| PgError::NoConversation(conversation.to_string()))?;
            let (last, archived): (i64, i64) = (row.get(0), row.get(1));
            let target = before.min(last.saturating_add(1));
            if target <= archived {
                return Ok(None);
            }
            let epoch: i64 = tx
                .query_one(&update, &[&conversation, &target])
                .map_err(PgError::db("archiving rows"))?
                .get(0);
            tx.commit().map_err(PgError::commit_of("a rotation"))?;
            Ok(Some(from_i64(epoch)))
        })
    }
}

/// One attempt at an append: lock the conversation row, replay or check, insert, commit.
fn append_once(
    c: &mut Conn,
    conversation: &str,
    expected_last_seq: Option<u64>,
    batch_id: &str,
    make: &mut dyn FnMut(u64) -> Vec<NewRow>,
) -> Result<Appended> {
    let insert = c.statement(INSERT_BATCH)?;
    let lock = c.statement(LOCK_FOR_APPEND)?;
    let mut tx = c.client.transaction().map_err(PgError::db("BEGIN"))?;
    let row = lock_for_append(&mut tx, &lock, conversation, batch_id)?;
    let epoch = from_i64(row.get(0));
    let last_seq = from_i64(row.get(1));
    if let Some((first, last)) = replayed(&row) {
        let rows = make(first);
        if rows.len() as u64 != last - first + 1 {
            return Err(PgError::BatchIdReused {
                conversation: conversation.to_string(),
                batch_id: batch_id.to_string(),
                first_seq: first,
                last_seq: last,
            });
        }
        return Ok(Appended {
            first_seq: first,
            last_seq: last,
            epoch,
            replayed: true,
        });
    }
    if let Some(expected) = expected_last_seq {
        if expected != last_seq {
            return Err(PgError::Conflict {
                conversation: conversation.to_string(),
                expected_last_seq: expected,
                last_seq,
            });
        }
    }
    let first = last_seq + 1;
    let rows = make(first);
    check_rows(&rows)?;
    let last = last_seq + rows.len() as u64;
    let bodies: Vec<&[u8]> = rows.iter().map(|r| r.body.as_slice()).collect();
    let floors: Vec<bool> = rows.iter().map(|r| r.floor).collect();
    let epoch_after = insert_batch(
        &mut tx,
        &insert,
        conversation,
        first,
        &bodies,
        &floors,
        batch_id,
    )?;
    tx.commit().map_err(PgError::db("COMMIT of an append"))?;
    debug_assert_eq!(epoch, epoch_after);
    Ok(Appended {
        first_seq: first,
        last_seq: last,
        epoch: epoch_after,
        replayed: false,
    })
}

/// Locks the conversation's row for an append (`FOR UPDATE`: appends to one conversation
/// wait for each other here, others never do), looks up the batch id, and marks the
/// transaction as the library's append to it (schema version 2). Columns: epoch,
/// last_seq, floor_seq, archived_before, and the first and last seq of a batch already
/// committed under the id (see [`replayed`]).
pub(crate) const LOCK_FOR_APPEND: &str = "SELECT c.epoch, c.last_seq, c.floor_seq, \
       c.archived_before, r.seq, r.batch_last, \
       set_config('ctxbudget.appending', c.conversation, true) \
     FROM ctxbudget_conversations c \
     LEFT JOIN ctxbudget_rows r ON r.conversation = c.conversation AND r.batch_id = $2 \
     WHERE c.conversation = $1 FOR UPDATE OF c";

/// Runs [`LOCK_FOR_APPEND`] in `tx`: the conversation's row, locked.
pub(crate) fn lock_for_append(
    tx: &mut postgres::Transaction<'_>,
    lock: &postgres::Statement,
    conversation: &str,
    batch_id: &str,
) -> Result<postgres::Row> {
    tx.query(lock, &[&conversation, &batch_id])
        .map_err(PgError::db("locking the conversation"))?
        .into_iter()
        .next()
        .ok_or_else(|| PgError::NoConversation(conversation.to_string()))
}

/// The seqs of the batch committed before under the append's batch id (an earlier
/// attempt whose acknowledgement was lost), from a [`LOCK_FOR_APPEND`] row.
pub(crate) fn replayed(row: &postgres::Row) -> Option<(u64, u64)> {
    match (row.get::<_, Option<i64>>(4), row.get::<_, Option<i64>>(5)) {
        (Some(first), Some(last)) => Some((from_i64(first), from_i64(last))),
        _ => None,
    }
}

/// Inserts a batch's rows and moves the conversation's last seq and floor, in one
/// statement: the update only happens if every row was inserted.
const INSERT_BATCH: &str = "WITH ins AS ( \
       INSERT INTO ctxbudget_rows (conversation, seq, body, floor, batch_id, batch_last) \
       SELECT $1, t.s, t.b, t.f, \
              CASE WHEN t.s = $5::int8 THEN $6::text END, \
              CASE WHEN t.s = $5::int8 THEN $7::int8 END \
       FROM unnest($2::int8[], $3::bytea[], $4::bool[]) AS t(s, b, f) \
       RETURNING 1) \
     UPDATE ctxbudget_conversations \
     SET last_seq = $7::int8, floor_seq = GREATEST(floor_seq, $8::int8) \
     WHERE conversation = $1 AND (SELECT count(*) FROM ins) = $9::int8 RETURNING epoch";

/// The values a batch insert binds besides the row bodies (both the locking path's
/// [`INSERT_BATCH`] and the one-statement append): the seqs from `first`, the last seq,
/// the highest seq whose row raises the privacy floor (0: none) and the row count.
pub(crate) struct BatchSeqs {
    /// One seq per row, from `first`.
    pub(crate) seqs: Vec<i64>,
    /// The batch's first seq.
    pub(crate) first: i64,
    /// The batch's last seq.
    pub(crate) last: i64,
    /// The highest seq of a floor row, 0 when none raises it.
    pub(crate) floor: i64,
    /// How many rows the batch holds.
    pub(crate) rows: i64,
}

impl BatchSeqs {
    /// The seqs of rows at `first..` whose floor flags are `floors` (not empty).
    pub(crate) fn new(first: u64, floors: &[bool]) -> BatchSeqs {
        let n = floors.len() as u64;
        let last = first + n.saturating_sub(1);
        let floor = floors
            .iter()
            .zip(first..)
            .filter(|(f, _)| **f)
            .map(|(_, s)| s)
            .max()
            .unwrap_or(0);
        BatchSeqs {
            seqs: (first..=last).map(to_i64).collect(),
            first: to_i64(first),
            last: to_i64(last),
            floor: to_i64(floor),
            rows: to_i64(n),
        }
    }
}

/// Inserts `bodies` (with their floor flags) at seqs from `first`, under batch id
/// `batch_id`, inside `tx` (which holds the conversation's row lock); returns the epoch.
/// The caller commits.
pub(crate) fn insert_batch(
    tx: &mut postgres::Transaction<'_>,
    insert: &postgres::Statement,
    conversation: &str,
    first: u64,
    bodies: &[&[u8]],
    floors: &[bool],
    batch_id: &str,
) -> Result<u64> {
    let n = bodies.len();
    let b = BatchSeqs::new(first, floors);
    let updated = tx
        .query(
            insert,
            &[
                &conversation,
                &b.seqs,
                &bodies,
                &floors,
                &b.first,
                &batch_id,
                &b.last,
                &b.floor,
                &b.rows,
            ],
        )
        .map_err(PgError::db("appending rows"))?;
    match updated.first() {
        Some(r) => Ok(from_i64(r.get(0))),
        None => Err(PgError::Invalid(format!(
            "the append to {conversation:?} did not insert {n} rows; nothing was written"
        ))),
    }
}

fn check_rows(rows: &[NewRow]) -> Result<()> {
    if rows.is_empty() {
        return Err(PgError::Invalid(
            "an append needs at least one row; nothing was written".into(),
        ));
    }
    let max = crate::store::DEFAULT_MAX_ROW_BYTES;
    for (i, row) in rows.iter().enumerate() {
        if row.body.len() > max {
            return Err(PgError::Invalid(format!(
                "row {i} of the batch has {} bytes, over the {max}-byte row limit; \
                 nothing was written",
                row.body.len()
            )));
        }
    }
    Ok(())
}

fn check_id(what: &str, id: &str, max: usize) -> Result<()> {
    if id.is_empty() || id.len() > max || id.contains('\0') {
        return Err(PgError::Invalid(format!(
            "{what} {id:?} must be 1 to {max} bytes of UTF-8 without NUL"
        )));
    }
    Ok(())
}

fn random_batch_id() -> String {
    let mut bytes = [0u8; 16];
    if getrandom::fill(&mut bytes).is_err() {
        for (i, chunk) in bytes.chunks_mut(8).enumerate() {
            chunk.copy_from_slice(&crate::store::random_fallback(i as u64).to_le_bytes());
        }
    }
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    format!("auto:{hex}")
}

/// Seqs and epochs are below 2^63 (they are `bigint` in the database).
fn to_i64(v: u64) -> i64 {
    i64::try_from(v).unwrap_or(i64::MAX)
}

fn from_i64(v: i64) -> u64 {
    u64::try_from(v).unwrap_or(0)
}
