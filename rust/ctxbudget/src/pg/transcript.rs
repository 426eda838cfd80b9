//! A PostgreSQL conversation as a transcript store: [`PgHistory`] implements the same
//! [`Store`] seam as the file store, so the transcript layer (rollover, quarantine, soft
//! clear), the window fold, `Session` and `session_history` run on it unchanged.
//!
//! Rows are encoded and checked exactly as the file store encodes and checks them (one
//! function does it for both), and their heads are read back by the same strict parse.
//! Each handle keeps an index of the conversation — one entry per row, with the row's
//! head and its place in a virtual concatenation of the rows (so `session_history` pages
//! over it as over a file) — and brings it up to date from the database with
//! O(new rows) work: under the conversation's row lock before a write, by one statement
//! (one snapshot, one round trip) before a read. A new epoch (a rotation, a row changed,
//! inserted or truncated by hand, the conversation recreated) rebuilds it. The bodies of
//! the newest rows stay with the index (`bodies.rs`) for `session_history` pages.

mod fast;

use std::cell::RefCell;
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use postgres::{IsolationLevel, Transaction};

use super::deadline::{text_bool, text_hex, text_i64, Deadline, Literal, Prepared};
use super::pool::Conn;
use super::{from_i64, insert_batch, random_batch_id, to_i64, PgConversation, PgError, PgStore};

use crate::store::{
    AppendResult, ReadFrom, RecoveryDetail, RecoveryReport, Result, RotateReport, RowCounts,
    RowsRead, StateDetail, StoreError, StoreState, StoredRow, VerifyDetail, VerifyReport,
    WindowInfo, DEFAULT_MAX_ROW_BYTES,
};
use crate::transcript::input::{Incoming, RawRow};
use crate::transcript::log::{encode_batch, LogState, RowIndex, MAX_SEQ};
use crate::transcript::window_runs;
use crate::transcript::NewRow;
use crate::transcript::Row;
use crate::transcript::{BuildBatch, Store, Tip};

/// Longest a read with a deadline waits for its handle's index before it reads one of
/// its own (see [`PgHistory::index_by`]).
const INDEX_WAIT: Duration = Duration::from_millis(250);

/// A conversation of a [`PgStore`] as a transcript store.
#[derive(Debug)]
pub struct PgHistory {
    conversation: PgConversation,
    max_row_bytes: usize,
    index: Mutex<PgIndex>,
    /// The thread building a batch under the conversation's lock while it holds the
    /// index (its callbacks — a lead-in renderer — may read the history: they get an
    /// index of their own instead of waiting for the one their own thread holds).
    writer: Mutex<Option<std::thread::ThreadId>>,
}

/// The index a read works on: the handle's, or, for a read made from inside this
/// thread's own write (a callback), a fresh one read from the database.
enum IndexRef<'a> {
    Shared(MutexGuard<'a, PgIndex>),
    Scratch(Box<PgIndex>),
}

impl std::ops::Deref for IndexRef<'_> {
    type Target = PgIndex;
    fn deref(&self) -> &PgIndex {
        match self {
            IndexRef::Shared(g) => g,
            IndexRef::Scratch(ix) => ix,
        }
    }
}

impl std::ops::DerefMut for IndexRef<'_> {
    fn deref_mut(&mut self) -> &mut PgIndex {
        match self {
            IndexRef::Shared(g) => g,
            IndexRef::Scratch(ix) => ix,
        }
    }
}

/// What a handle knows of its conversation: the transcript layer's index of the rows
/// (heads, fold, places in the rows laid end to end), plus what only PostgreSQL has —
/// where the archive ends, and the bodies of the newest rows.
#[derive(Debug, Default)]
pub(crate) struct PgIndex {
    rows: RowIndex,
    /// Rows below this seq are archived.
    pub archived_before: u64,
    /// Bodies of the newest rows, so `session_history` pages read them from memory.
    pub bodies: super::bodies::BodyCache,
}

impl std::ops::Deref for PgIndex {
    type Target = RowIndex;
    fn deref(&self) -> &RowIndex {
        &self.rows
    }
}

impl std::ops::DerefMut for PgIndex {
    fn deref_mut(&mut self) -> &mut RowIndex {
        &mut self.rows
    }
}

impl PgIndex {
    /// An empty index of epoch `epoch`.
    fn of_epoch(epoch: u64) -> PgIndex {
        let mut ix = PgIndex::default();
        ix.rows.epoch = Some(epoch);
        ix
    }

    /// Notes the row stored at `seq` (see [`RowIndex::note`]) and keeps its body.
    fn note(&mut self, seq: u64, body: &[u8], floor: bool) {
        if self.rows.note(seq, body, floor) {
            self.bodies.keep(seq, body);
        }
    }

    /// Takes the conversation's counters once its rows up to `state.last_seq` are noted.
    fn settle(&mut self, state: &State) {
        self.rows.settle(&LogState {
            epoch: state.epoch,
            last_seq: state.last_seq,
            floor_seq: state.floor_seq,
        });
        self.archived_before = state.archived_before;
    }
}

/// Marks the current thread as the one writing under the index until dropped.
struct WriterMark<'a>(&'a PgHistory);

impl<'a> WriterMark<'a> {
    fn set(h: &'a PgHistory) -> WriterMark<'a> {
        *h.writer() = Some(std::thread::current().id());
        WriterMark(h)
    }
}

impl Drop for WriterMark<'_> {
    fn drop(&mut self) {
        *self.0.writer() = None;
    }
}

/// The conversation's counters, read with its rows.
#[derive(Clone, Copy)]
struct State {
    epoch: u64,
    last_seq: u64,
    floor_seq: u64,
    archived_before: u64,
}

const STATE: &str = "SELECT epoch, last_seq, floor_seq, archived_before \
                     FROM ctxbudget_conversations WHERE conversation = $1";
const ROWS_AFTER: &str = "SELECT seq, body, floor FROM ctxbudget_rows \
                          WHERE conversation = $1 AND seq > $2 AND seq <= $3 ORDER BY seq";
const BODIES: &str = "SELECT seq, body FROM ctxbudget_rows \
                      WHERE conversation = $1 AND seq >= $2 AND seq <= $3 ORDER BY seq";
/// The conversation's counters and its rows after `$2`, in ONE statement (one snapshot,
/// one round trip): what a read needs when the index is nearly up to date. `$body` is
/// how the row's body is returned.
macro_rules! refresh_sql {
    ($body:literal) => {
        concat!(
            "SELECT c.epoch, c.last_seq, c.floor_seq, c.archived_before, r.seq, ",
            $body,
            ", r.floor FROM ctxbudget_conversations c \
             LEFT JOIN ctxbudget_rows r ON r.conversation = c.conversation \
               AND r.seq > $2 AND r.seq <= c.last_seq \
             WHERE c.conversation = $1 ORDER BY r.seq"
        )
    };
}
/// [`refresh_sql`] for an unbounded read (binary bodies).
const REFRESH: &str = refresh_sql!("r.body");
/// [`refresh_sql`] for a read with a deadline ([`Conn::query_by`]: text, so hex bodies).
const REFRESH_BY: Prepared = Prepared {
    name: "ctxbudget_refresh",
    sql: concat!("(text, int8) AS ", refresh_sql!("encode(r.body, 'hex')")),
};
const ROW: &str = "SELECT body FROM ctxbudget_rows WHERE conversation = $1 AND seq = $2";

impl From<PgError> for StoreError {
    fn from(e: PgError) -> StoreError {
        match &e {
            PgError::Conflict {
                expected_last_seq,
                last_seq,
                ..
            } => StoreError::Conflict {
                expected_last_seq: *expected_last_seq,
                last_seq: *last_seq,
            },
            PgError::NoConversation(id) => StoreError::Deleted {
                location: format!("postgresql conversation {id:?}"),
            },
            PgError::Invalid(_) | PgError::Config(_) => StoreError::InvalidArgument(e.to_string()),
            PgError::Connection(source) => StoreError::Database {
                transient: true,
                // The transcript layer has no batch ids to offer: its own retries used
                // one; the caller's retry is safe when conditional.
                message: format!(
                    "PostgreSQL connection failed ({}) and did not come back in time; \
                     check that the server is up and the URL is right, then retry (an append \
                     retried with if_last_seq / expected_last_seq commits at most once)",
                    super::config::redact_secrets(&source.to_string())
                ),
            },
            other => StoreError::Database {
                transient: other.is_transient(),
                message: other.to_string(),
            },
        }
    }
}

fn state_of(row: &postgres::Row) -> State {
    State {
        epoch: from_i64(row.get(0)),
        last_seq: from_i64(row.get(1)),
        floor_seq: from_i64(row.get(2)),
        archived_before: from_i64(row.get(3)),
    }
}

/// Brings `ix` up to `state` with the rows `tx` sees: a new epoch starts over.
fn sync(
    ix: &mut PgIndex,
    tx: &mut Transaction<'_>,
    rows_after: &postgres::Statement,
    conversation: &str,
    state: &State,
) -> std::result::Result<(), PgError> {
    if ix.epoch != Some(state.epoch) {
        *ix = PgIndex::of_epoch(state.epoch);
    }
    if state.last_seq > ix.last_seq {
        let rows = tx
            .query(
                rows_after,
                &[&conversation, &to_i64(ix.last_seq), &to_i64(state.last_seq)],
            )
            .map_err(PgError::db("reading new rows"))?;
        for r in &rows {
            let body: &[u8] = r.get(1);
            ix.note(from_i64(r.get(0)), body, r.get(2));
        }
    }
    ix.settle(state);
    Ok(())
}

/// One row of [`REFRESH`]: the conversation's counters, and a row after the seq asked
/// for (none when no row follows).
struct Refreshed {
    state: State,
    row: Option<(u64, Vec<u8>, bool)>,
}

/// [`REFRESH`] after `after`, prepared, in autocommit.
fn refresh_rows(
    c: &mut Conn,
    conversation: &str,
    after: u64,
) -> std::result::Result<Vec<Refreshed>, PgError> {
    let refresh = c.statement(REFRESH)?;
    let found = c
        .client
        .query(&refresh, &[&conversation, &to_i64(after)])
        .map_err(PgError::db("reading the conversation"))?;
    Ok(found
        .iter()
        .map(|r| Refreshed {
            state: state_of(r),
            row: r
                .get::<_, Option<i64>>(4)
                .map(|seq| (from_i64(seq), r.get(5), r.get(6))),
        })
        .collect())
}

/// [`REFRESH`] after `after`, ending by `deadline`, in one round trip.
fn refresh_rows_by(
    c: &mut Conn,
    deadline: Deadline,
    conversation: &str,
    after: u64,
) -> std::result::Result<Vec<Refreshed>, PgError> {
    const WHAT: &str = "reading the conversation";
    let found = c.query_by(
        deadline,
        WHAT,
        &REFRESH_BY,
        &[Literal::Text(conversation), Literal::Int(to_i64(after))],
    )?;
    let counter = |r: &postgres::SimpleQueryRow, i| -> std::result::Result<u64, PgError> {
        text_i64(r, i, WHAT)?.map(from_i64).ok_or_else(|| {
            PgError::Invalid(format!("PostgreSQL answered {WHAT} with a NULL counter"))
        })
    };
    found
        .iter()
        .map(|r| {
            let state = State {
                epoch: counter(r, 0)?,
                last_seq: counter(r, 1)?,
                floor_seq: counter(r, 2)?,
                archived_before: counter(r, 3)?,
            };
            let row = match text_i64(r, 4, WHAT)? {
                None => None,
                Some(seq) => Some((
                    from_i64(seq),
                    text_hex(r, 5, WHAT)?.unwrap_or_default(),
                    text_bool(r, 6, WHAT)?.unwrap_or(false),
                )),
            };
            Ok(Refreshed { state, row })
        })
        .collect()
}

/// Brings `ix` up to date with the rows after what it holds (all of them under a new
/// epoch), by [`REFRESH`] (ending by `deadline` when given); returns the bodies of the
/// rows from `keep_from` on, from the statement or, for rows the index holds, from its
/// body cache (a row never changes within an epoch) — so a read of rows this handle
/// wrote or read before fetches only what is new.
fn refresh(
    c: &mut Conn,
    ix: &mut PgIndex,
    conversation: &str,
    keep_from: u64,
    deadline: Option<Deadline>,
) -> std::result::Result<Vec<(u64, Vec<u8>)>, PgError> {
    let mut cached = cached_since(ix, keep_from);
    let mut after = match cached {
        Some(_) => ix.last_seq,
        None => ix.last_seq.min(keep_from.saturating_sub(1)),
    };
    loop {
        let found = match deadline {
            None => refresh_rows(c, conversation, after)?,
            Some(d) => refresh_rows_by(c, d, conversation, after)?,
        };
        let first = found
            .first()
            .ok_or_else(|| PgError::NoConversation(conversation.to_string()))?;
        let state = first.state;
        if ix.epoch != Some(state.epoch) {
            // The cached bodies belong to the epoch that ended.
            cached = None;
            *ix = PgIndex::of_epoch(state.epoch);
            if after > 0 {
                // A new epoch: every row is needed again.
                after = 0;
                continue;
            }
        }
        let mut bodies = cached.take().unwrap_or_default();
        for r in found {
            let Some((seq, body, floor)) = r.row else {
                continue;
            };
            if seq > ix.last_seq {
                ix.note(seq, &body, floor);
            }
            if seq >= keep_from {
                bodies.push((seq, body));
            }
        }
        ix.settle(&state);
        return Ok(bodies);
    }
}

/// The bodies of the rows from `keep_from` through the index's last seq, if its body
/// cache holds every one of them (an empty list when there are none).
fn cached_since(ix: &PgIndex, keep_from: u64) -> Option<Vec<(u64, Vec<u8>)>> {
    ix.epoch?;
    let at = ix.position(keep_from);
    ix.seqs[at..]
        .iter()
        .map(|&seq| Some((seq, ix.bodies.get(seq)?.to_vec())))
        .collect()
}

impl PgStore {
    /// The conversation `id` as a transcript store (created if it does not exist).
    pub fn history(&self, id: &str) -> super::Result<PgHistory> {
        Ok(PgHistory::new(self.open(id)?))
    }
}

impl PgHistory {
    /// The conversation as a transcript store, with the default row limit.
    pub fn new(conversation: PgConversation) -> PgHistory {
        PgHistory {
            conversation,
            max_row_bytes: DEFAULT_MAX_ROW_BYTES,
            index: Mutex::new(PgIndex::default()),
            writer: Mutex::new(None),
        }
    }

    /// The same, refusing rows longer than `max_row_bytes` when serialized.
    pub fn with_max_row_bytes(mut self, max_row_bytes: usize) -> PgHistory {
        self.max_row_bytes = max_row_bytes;
        self
    }

    /// The conversation.
    pub fn conversation(&self) -> &PgConversation {
        &self.conversation
    }

    fn index(&self) -> MutexGuard<'_, PgIndex> {
        self.index.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn writer(&self) -> MutexGuard<'_, Option<std::thread::ThreadId>> {
        self.writer.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The index for a read (see [`IndexRef`]).
    fn index_for_read(&self) -> IndexRef<'_> {
        if *self.writer() == Some(std::thread::current().id()) {
            IndexRef::Scratch(Box::default())
        } else {
            IndexRef::Shared(self.index())
        }
    }

    /// The index for a read with a deadline: the handle's once it is free — another read
    /// holds it for milliseconds, so it is waited for briefly ([`INDEX_WAIT`], at most a
    /// quarter of the time left) — else one of its own read from the database (a write
    /// of this process holds the handle's while it waits for another host's lock).
    fn index_by(&self, deadline: Deadline) -> IndexRef<'_> {
        if *self.writer() == Some(std::thread::current().id()) {
            return IndexRef::Scratch(Box::default());
        }
        let now = Instant::now();
        let give_up = now + INDEX_WAIT.min(deadline.until.saturating_duration_since(now) / 4);
        let mut pause = Duration::from_micros(100);
        loop {
            match self.index.try_lock() {
                Ok(ix) => return IndexRef::Shared(ix),
                Err(TryLockError::Poisoned(p)) => return IndexRef::Shared(p.into_inner()),
                Err(TryLockError::WouldBlock) if Instant::now() < give_up => {
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(5));
                }
                Err(TryLockError::WouldBlock) => return IndexRef::Scratch(Box::default()),
            }
        }
    }

    fn run<T>(&self, op: impl FnMut(&mut Conn) -> super::Result<T>) -> Result<T> {
        self.conversation.store().run(op).map_err(StoreError::from)
    }

    /// Runs `f` on the index brought up to date in one repeatable-read snapshot, with
    /// that snapshot's transaction for further reads (every read sees the same rows).
    pub(crate) fn with_fresh<T>(
        &self,
        mut f: impl FnMut(&PgIndex, &mut Transaction<'_>, &str) -> super::Result<T>,
    ) -> Result<T> {
        let conversation = self.conversation.id();
        let mut ix = self.index_for_read();
        self.run(|c| {
            let state_q = c.statement(STATE)?;
            let rows_after = c.statement(ROWS_AFTER)?;
            let mut tx = c
                .client
                .build_transaction()
                .isolation_level(IsolationLevel::RepeatableRead)
                .read_only(true)
                .start()
                .map_err(PgError::db("BEGIN"))?;
            let rows = tx
                .query(&state_q, &[&conversation])
                .map_err(PgError::db("reading the conversation"))?;
            let state = rows
                .first()
                .map(state_of)
                .ok_or_else(|| PgError::NoConversation(conversation.to_string()))?;
            sync(&mut ix, &mut tx, &rows_after, conversation, &state)?;
            let out = f(&ix, &mut tx, conversation)?;
            tx.commit().map_err(PgError::db("COMMIT of a read"))?;
            Ok(out)
        })
    }

    /// Runs `f` on the index brought up to date by one statement, with the bodies of
    /// the rows from `keep_from` on that the same statement returned (a consistent cut:
    /// every row up to the index's last seq is there or before `keep_from`).
    fn with_refreshed<T>(
        &self,
        keep_from: u64,
        f: impl FnOnce(&PgIndex, Vec<(u64, Vec<u8>)>) -> T,
    ) -> Result<T> {
        self.with_refreshed_by(keep_from, None, f)
            .map_err(StoreError::from)
    }

    /// [`with_refreshed`](Self::with_refreshed) for a call with a deadline (a
    /// `session_history` page): no wait outlasts it — not for the handle's index (held by
    /// a write of this process that waits for another host's lock: the read then builds
    /// an index of its own), a pooled connection, a reconnect, a lock or a statement
    /// ([`PgError::Timeout`]).
    pub(crate) fn with_refreshed_by<T>(
        &self,
        keep_from: u64,
        deadline: Option<Deadline>,
        f: impl FnOnce(&PgIndex, Vec<(u64, Vec<u8>)>) -> T,
    ) -> super::Result<T> {
        let conversation = self.conversation.id();
        let mut ix = match deadline {
            Some(deadline) => self.index_by(deadline),
            None => self.index_for_read(),
        };
        let bodies = self
            .conversation
            .store()
            .run_until(deadline.map(|d| d.until), |c| {
                refresh(c, &mut ix, conversation, keep_from, deadline)
            })?;
        Ok(f(&ix, bodies))
    }

    /// The rows from `first_seq` on as the handle's index holds them, if it is known to
    /// hold every row through the append that returned `appended`: the same epoch (a
    /// rotation, prune or hand change since gives another), a last seq at or past the
    /// batch's (an append leaves the index at its batch, every row before it read under
    /// the same condition the database checked), and the bodies still kept. `None`
    /// otherwise, or when this thread is inside its own write (a callback).
    fn known_since(&self, first_seq: u64, appended: &AppendResult) -> Option<RowsRead> {
        let ix = match self.index_for_read() {
            IndexRef::Shared(ix) => ix,
            IndexRef::Scratch(_) => return None,
        };
        if ix.epoch != Some(appended.epoch) || ix.last_seq < appended.last_seq {
            return None;
        }
        let at = ix.position(first_seq);
        let bodies = ix.seqs[at..]
            .iter()
            .map(|&seq| Some((seq, ix.bodies.get(seq)?.to_vec())))
            .collect::<Option<std::collections::HashMap<u64, Vec<u8>>>>()?;
        Some(ix.rows_read(at, &bodies))
    }

    /// Rows from `first_seq` on.
    pub fn rows_since(&self, first_seq: u64) -> Result<Vec<StoredRow>> {
        Ok(self.read(ReadFrom::Seq(first_seq))?.rows)
    }

    /// Contiguous window runs, oldest first.
    pub fn windows(&self) -> Result<Vec<WindowInfo>> {
        self.with_refreshed(u64::MAX, |ix, _| window_runs(ix.entries.iter(), &ix.fold))
    }

    /// ID of the window new rows go to.
    pub fn current_window(&self) -> Result<String> {
        self.with_refreshed(u64::MAX, |ix, _| ix.fold.window().to_string())
    }

    /// Appends a batch built under the conversation's row lock from the index brought up
    /// to date there. Retried on a broken connection with the same batch id, so it
    /// commits at most once.
    fn append_locked(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut dyn FnMut(&Tip<'_>) -> Result<Option<Vec<NewRow>>>,
        raw: Option<&[RawRow<'_>]>,
    ) -> Result<Option<AppendResult>> {
        let conversation = self.conversation.id();
        let batch_id = random_batch_id();
        let mut ix = self.index();
        if let Some(raws) = raw {
            if let Some(done) = self.append_fast(&mut ix, expected_last_seq, raws, &batch_id) {
                return done.map(Some).map_err(StoreError::from);
            }
        }
        let _writing = WriterMark::set(self);
        let mut failure: Option<StoreError> = None;
        let outcome = self.conversation.store().run(|c| {
            let lock = c.statement(super::LOCK_FOR_APPEND)?;
            let rows_after = c.statement(ROWS_AFTER)?;
            let row_q = c.statement(ROW)?;
            let insert = c.statement(super::INSERT_BATCH)?;
            let mut tx = c.client.transaction().map_err(PgError::db("BEGIN"))?;
            let row = super::lock_for_append(&mut tx, &lock, conversation, &batch_id)?;
            let state = state_of(&row);
            sync(&mut ix, &mut tx, &rows_after, conversation, &state)?;
            if let Some((first, last)) = super::replayed(&row) {
                // An earlier attempt of this call committed before its connection broke.
                return Ok(Some(AppendResult {
                    first_seq: first,
                    last_seq: last,
                    epoch: state.epoch,
                    window: ix.fold.window_of(last).to_string(),
                }));
            }
            if let Some(expected) = expected_last_seq {
                if expected != state.last_seq {
                    return Err(PgError::Conflict {
                        conversation: conversation.to_string(),
                        expected_last_seq: expected,
                        last_seq: state.last_seq,
                    });
                }
            }
            let first = state
                .last_seq
                .checked_add(1)
                .filter(|&s| s < i64::MAX as u64);
            let built: Vec<NewRow>;
            let incoming: Vec<Incoming<'_>> = match raw {
                Some(raws) => raws.iter().cloned().map(Incoming::Raw).collect(),
                None => {
                    let tx_cell = RefCell::new(&mut tx);
                    let reader = |seq: u64| -> Result<Option<Row>> {
                        let mut tx = tx_cell.borrow_mut();
                        let found = tx
                            .query(&row_q, &[&conversation, &to_i64(seq)])
                            .map_err(PgError::db("reading a row"))?;
                        Ok(found.first().and_then(|r| {
                            Row::parse(seq, ix.fold.window_of(seq), r.get::<_, &[u8]>(0))
                        }))
                    };
                    let tip = Tip {
                        last_seq: state.last_seq,
                        next_seq: first,
                        fold: &ix.fold,
                        rows: &reader,
                    };
                    match build(&tip) {
                        Ok(Some(rows)) => {
                            built = rows;
                            built.iter().map(Incoming::Built).collect()
                        }
                        Ok(None) => return Ok(None),
                        Err(e) => {
                            failure = Some(e);
                            return Ok(None);
                        }
                    }
                }
            };
            let (lines, window) = match encode_batch(
                &incoming,
                state.last_seq,
                &ix.fold,
                self.max_row_bytes,
                MAX_SEQ,
            ) {
                Ok(encoded) => encoded,
                Err(e) => {
                    failure = Some(e);
                    return Ok(None);
                }
            };
            let first = lines.first().map_or(state.last_seq + 1, |r| r.seq);
            let bodies: Vec<&[u8]> = lines.iter().map(|r| r.body.as_slice()).collect();
            let floors: Vec<bool> = lines.iter().map(|r| r.floor).collect();
            let epoch = insert_batch(
                &mut tx,
                &insert,
                conversation,
                first,
                &bodies,
                &floors,
                &batch_id,
            )?;
            tx.commit().map_err(PgError::db("COMMIT of an append"))?;
            let last = first + lines.len() as u64 - 1;
            for r in &lines {
                ix.note(r.seq, &r.body, r.floor);
            }
            ix.last_seq = last;
            Ok(Some(AppendResult {
                first_seq: first,
                last_seq: last,
                epoch,
                window: window.to_string(),
            }))
        });
        match (outcome, failure) {
            (_, Some(e)) => Err(e),
            (outcome, None) => outcome.map_err(StoreError::from),
        }
    }

    fn append_built(&self, rows: &[NewRow], expected: Option<u64>) -> Result<AppendResult> {
        for (i, row) in rows.iter().enumerate() {
            row.validate(i)?;
        }
        let mut build = |_: &Tip<'_>| Ok(Some(rows.to_vec()));
        self.append_locked(expected, &mut build, None)?
            .ok_or_else(StoreError::empty_batch)
    }
}

impl PgHistory {
    /// Removes for good the sealed windows `spec` selects (the current window always
    /// stays; the privacy floor is never lowered), in one transaction; cursors minted
    /// before it answer `history_changed`. Changes nothing when it selects none.
    pub fn prune(&self, spec: &crate::transcript::PruneSpec) -> Result<crate::store::PruneReport> {
        crate::transcript::prune_with(
            self,
            spec,
            |cut, _| Ok(self.conversation.prune_before(cut)?),
            |_| Ok(self.conversation.pruned_before()?),
        )
    }
}

impl Store for PgHistory {
    fn append_rows(&self, rows: &[NewRow], expected_last_seq: Option<u64>) -> Result<AppendResult> {
        if rows.is_empty() {
            return Err(StoreError::empty_batch());
        }
        self.append_built(rows, expected_last_seq)
    }

    fn append_json(
        &self,
        rows_json: &[u8],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        let rows = crate::transcript::input::parse_json_batch(rows_json)?;
        let mut unused = |_: &Tip<'_>| Ok(None);
        self.append_locked(expected_last_seq, &mut unused, Some(&rows))?
            .ok_or_else(StoreError::empty_batch)
    }

    fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>> {
        let mut checked = |tip: &Tip<'_>| {
            let rows = build(tip)?;
            if let Some(rows) = &rows {
                for (i, row) in rows.iter().enumerate() {
                    row.validate(i)?;
                }
            }
            Ok(rows)
        };
        self.append_locked(expected_last_seq, &mut checked, None)
    }

    fn prune(&self, spec: &crate::transcript::PruneSpec) -> Result<crate::store::PruneReport> {
        PgHistory::prune(self, spec)
    }

    fn identity(&self) -> String {
        format!("postgresql:{}", self.conversation().id())
    }

    // No wait for the server (a lock, a reconnect) outlasts the call's deadline.
    fn page(
        &self,
        start: std::time::Instant,
        limit: std::time::Duration,
        run: &mut crate::store::page::RunPage<'_, crate::transcript::RowHead>,
    ) -> std::result::Result<(), crate::store::PageError> {
        super::page::run_page(self, start, limit, run)
    }

    fn windows(&self) -> Result<Vec<WindowInfo>> {
        PgHistory::windows(self)
    }

    fn current_window(&self) -> Result<String> {
        PgHistory::current_window(self)
    }

    /// One statement in the common case (the rows since the caller last looked); a
    /// second snapshot read only when the conversation changed under a new epoch.
    fn read(&self, from: ReadFrom) -> Result<RowsRead> {
        let keep_from = match from {
            ReadFrom::Seq(seq) => seq,
            // The current window starts at or after the one this handle knows.
            ReadFrom::CurrentWindow => self.index_for_read().fold.window().seq(),
        };
        let answer = self.with_refreshed(keep_from, |ix, bodies| {
            let first_seq = match from {
                ReadFrom::Seq(seq) => seq,
                ReadFrom::CurrentWindow => ix.fold.window().seq(),
            };
            let at = ix.position(first_seq);
            if ix.seqs.get(at).is_some_and(|&s| s < keep_from) {
                return None; // rows before what the statement returned: read them all
            }
            let bodies: std::collections::HashMap<u64, Vec<u8>> = bodies.into_iter().collect();
            Some(ix.rows_read(at, &bodies))
        })?;
        match answer {
            Some(read) => Ok(read),
            None => self.with_fresh(|ix, tx, conversation| {
                let first_seq = match from {
                    ReadFrom::Seq(seq) => seq,
                    ReadFrom::CurrentWindow => ix.fold.window().seq(),
                };
                let at = ix.position(first_seq);
                let first = ix.seqs.get(at).copied().unwrap_or(u64::MAX);
                let found = tx
                    .query(
                        BODIES,
                        &[&conversation, &to_i64(first), &to_i64(ix.last_seq)],
                    )
                    .map_err(PgError::db("reading rows"))?;
                let bodies = found
                    .iter()
                    .map(|r| (from_i64(r.get(0)), r.get(1)))
                    .collect();
                Ok(ix.rows_read(at, &bodies))
            }),
        }
    }

    /// From the handle's index without a round trip when it holds every row through
    /// the batch (the append left it so, under the batch's epoch) and keeps their
    /// bodies; otherwise [`read`](Store::read).
    fn read_after_append(&self, from: ReadFrom, appended: &AppendResult) -> Result<RowsRead> {
        if let ReadFrom::Seq(first_seq) = from {
            if let Some(read) = self.known_since(first_seq, appended) {
                return Ok(read);
            }
        }
        self.read(from)
    }

    fn state(&self) -> Result<StoreState> {
        self.with_refreshed(u64::MAX, |ix, _| StoreState {
            epoch: ix.epoch,
            last_seq: ix.last_seq,
            floor_seq: ix.fold.floor_seq(),
            detail: StateDetail::Postgres,
        })
    }

    fn floor_seq(&self) -> Result<u64> {
        self.with_refreshed(u64::MAX, |ix, _| ix.fold.floor_seq())
    }

    /// Archives the closed windows (the rows before the current window's first row):
    /// they stay readable, and the conversation gets a new epoch, as the file store's
    /// rotation gives it one.
    fn rotate(&self) -> Result<RotateReport> {
        let (before, archived_before) = self.with_refreshed(u64::MAX, |ix, _| {
            (ix.fold.window_first_seq().unwrap_or(1), ix.archived_before)
        })?;
        let epoch = self.conversation.rotate(before)?;
        let (rows, bytes) = match epoch {
            None => (0, 0),
            Some(_) => self.with_refreshed(u64::MAX, |ix, _| {
                let moved = ix
                    .seqs
                    .iter()
                    .zip(&ix.entries)
                    .filter(|(s, _)| **s >= archived_before && **s < ix.archived_before);
                moved.fold((0u64, 0u64), |(n, b), (_, e)| {
                    (n + 1, b + u64::from(e.len) + 1)
                })
            })?,
        };
        Ok(RotateReport { rows, bytes, epoch })
    }

    /// Reads every row again under a fresh index and checks what the database cannot:
    /// that every row reads back as a row with its own seq, that the seqs run from 1 to
    /// the conversation's last seq without a gap (rows deleted by hand, the newest ones
    /// included), and that no row lies past the last seq (one inserted by hand). It only
    /// reads: nothing is rewritten.
    fn verify(&self) -> Result<VerifyReport> {
        *self.index_for_read() = PgIndex::default();
        let pruned_before = self.conversation.pruned_before()?;
        self.with_fresh(|ix, tx, conversation| {
            let beyond = tx
                .query_one(
                    "SELECT count(*), min(seq) FROM ctxbudget_rows \
                     WHERE conversation = $1 AND seq > $2",
                    &[&conversation, &to_i64(ix.last_seq)],
                )
                .map_err(PgError::db("reading rows"))?;
            let (beyond, first_beyond): (i64, Option<i64>) = (beyond.get(0), beyond.get(1));
            let mut live = RowCounts::default();
            let mut archive = RowCounts::default();
            let mut violations = 0u64;
            let mut first_violation = None;
            // Rows below the prune mark are gone on purpose.
            let mut expected = pruned_before;
            for (e, &seq) in ix.entries.iter().zip(&ix.seqs) {
                let report = if seq < ix.archived_before {
                    &mut archive
                } else {
                    &mut live
                };
                if e.head.is_some() {
                    report.rows += 1;
                } else {
                    report.malformed += 1;
                }
                if seq != expected {
                    violations += 1;
                    first_violation.get_or_insert_with(|| {
                        format!("seq {seq} where seq {expected} was expected (a gap)")
                    });
                }
                expected = seq + 1;
            }
            if expected <= ix.last_seq {
                violations += 1;
                first_violation.get_or_insert_with(|| {
                    let newest = match expected - 1 {
                        0 => "it has no row".to_owned(),
                        seq => format!("its newest row is seq {seq}"),
                    };
                    format!(
                        "seqs {expected}..={last} are missing: the conversation's last seq is \
                         {last} but {newest} (rows deleted by hand)",
                        last = ix.last_seq,
                    )
                });
            }
            if beyond > 0 {
                violations += 1;
                first_violation.get_or_insert_with(|| {
                    format!(
                        "{beyond} row(s) from seq {} lie past the conversation's last seq {} \
                         (inserted by hand; readers ignore them)",
                        first_beyond.unwrap_or(0),
                        ix.last_seq
                    )
                });
            }
            let ok = violations == 0 && live.malformed == 0 && archive.malformed == 0;
            Ok(VerifyReport {
                ok,
                epoch: ix.epoch,
                last_seq: ix.last_seq,
                floor_seq: ix.fold.floor_seq(),
                live,
                archive,
                seq_violations: violations,
                first_seq_violation: first_violation,
                detail: VerifyDetail::Postgres {
                    rows_past_last_seq: u64::try_from(beyond).unwrap_or(0),
                },
            })
        })
    }

    /// Nothing to repair: every append is one transaction, so a crash leaves no torn
    /// tail. Reports the epoch.
    fn recover(&self) -> Result<RecoveryReport> {
        self.with_refreshed(u64::MAX, |ix, _| RecoveryReport {
            changed: false,
            epoch: ix.epoch,
            detail: RecoveryDetail::Postgres,
        })
    }
}
