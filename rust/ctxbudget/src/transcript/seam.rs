//! The `Store` seam: what the transcript layer reads and writes rows through. The file
//! store ([`History`](super::History), in `file_store.rs`), a
//! PostgreSQL conversation (`ctxbudget::pg::PgHistory`, feature `postgres`) and any byte
//! log under [`LogStore`](super::log::LogStore) implement it, with the same guarantees
//! (one append = one atomic, durable batch with gapless increasing seqs; conditional
//! appends serialised per conversation; the privacy floor never lowered; cursors fail
//! closed when the epoch changes).
//!
//! It lives here, not in `store/`, because its terms are rows: a store keeps bytes and
//! seqs, and the code building a batch gets the [`WindowFold`] of the rows it holds
//! ([`Tip`]), so compound writes (rollover, quarantine, soft clear) are built from the
//! state under the store's lock.

use std::time::{Duration, Instant};

use super::{NewRow, PruneSpec, Row, RowHead, WindowFold};
use crate::store::page::{PageError, RunPage};
use crate::store::{
    AppendResult, PruneReport, ReadFrom, RecoveryReport, Result, RotateReport, RowsRead,
    StoreState, StoredRow, VerifyReport, WindowInfo,
};

/// What a batch is built from, under the store's lock.
pub struct Tip<'a> {
    /// The store's last seq.
    pub last_seq: u64,
    /// The seq the batch's first row gets, as the store hands seqs out (above the last
    /// seq and the floor); `None` once the seq space is used up.
    pub next_seq: Option<u64>,
    /// The fold of every row head the store holds.
    pub fold: &'a WindowFold,
    /// Reads a stored row by seq (`None`: no readable row has it).
    pub(crate) rows: &'a dyn Fn(u64) -> Result<Option<Row>>,
}

impl Tip<'_> {
    /// The stored row with this seq, parsed (`None`: no readable row has it).
    pub fn row(&self, seq: u64) -> Result<Option<Row>> {
        (self.rows)(seq)
    }
}

/// Builds a batch from the store's state under its lock; `Ok(None)` writes nothing.
pub type BuildBatch<'b> = dyn FnMut(&Tip<'_>) -> Result<Option<Vec<NewRow>>> + 'b;

/// The operations the transcript layer needs from a byte store.
pub trait Store: Send + Sync {
    /// Appends `rows` as one all-or-nothing batch, durable before this returns; with
    /// `Some(n)`, only if seq `n` is still the last one (else
    /// [`StoreError::Conflict`](crate::store::StoreError::Conflict), nothing written).
    fn append_rows(&self, rows: &[NewRow], expected_last_seq: Option<u64>) -> Result<AppendResult>;

    /// [`append_rows`](Self::append_rows) for rows given as a UTF-8 JSON list, validated
    /// without building value trees.
    fn append_json(&self, rows_json: &[u8], expected_last_seq: Option<u64>)
        -> Result<AppendResult>;

    /// Under one hold of the lock: checks `expected_last_seq` (when given), lets `build`
    /// make a batch from the state ([`Tip`]), and appends it as one batch. `None` when
    /// `build` wrote nothing.
    fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>>;

    /// Rows from `from` to the end, with the last seq and floor of the same moment.
    fn read(&self, from: ReadFrom) -> Result<RowsRead>;

    /// What a writer reads back right after its own append returned `appended`: the rows
    /// from `from` through that batch at least (every row committed before it), as one
    /// consistent cut; rows another writer committed after it may or may not be there.
    /// A store that knows its rows up to the batch answers without reading them again
    /// (PostgreSQL: no round trip); by default, [`read`](Self::read).
    fn read_after_append(&self, from: ReadFrom, appended: &AppendResult) -> Result<RowsRead> {
        let _ = appended;
        self.read(from)
    }

    /// Committed rows from the first one whose seq is at least `first_seq` to the end.
    fn rows_since(&self, first_seq: u64) -> Result<Vec<StoredRow>> {
        Ok(self.read(ReadFrom::Seq(first_seq))?.rows)
    }

    /// Contiguous window runs, oldest first.
    fn windows(&self) -> Result<Vec<WindowInfo>>;

    /// ID of the window new rows go to (`w:N`).
    fn current_window(&self) -> Result<String>;

    /// Epoch, last seq and floor of one moment, with what only this kind of store
    /// knows about them (the file store: its receipt as stored).
    fn state(&self) -> Result<StoreState>;

    /// Seq of the newest privacy floor (0: none). Never lowered.
    fn floor_seq(&self) -> Result<u64>;

    /// Moves closed windows out of the live file, where the store has one.
    fn rotate(&self) -> Result<RotateReport>;

    /// Full integrity check; changes nothing. The common part is what every store can
    /// tell; what only this kind checked is the report's `detail` arm.
    fn verify(&self) -> Result<VerifyReport>;

    /// Repairs what a crash left (torn tails, interrupted mutations), where a store can
    /// be left so; the report's `detail` arm says what this kind of store did.
    fn recover(&self) -> Result<RecoveryReport>;

    /// Removes sealed windows for good (see [`PruneSpec`]); the epoch changes when rows
    /// go.
    fn prune(&self, spec: &PruneSpec) -> Result<PruneReport>;

    /// The CRC recorded by the commit that ends at `offset`, where the store anchors
    /// cursors to commits (the file store); `None` elsewhere.
    fn anchor_crc_at(&self, offset: u64) -> Result<Option<u32>> {
        let _ = offset;
        Ok(None)
    }

    /// What cursors of this conversation are bound to: the same for every handle on it
    /// (its workspace directory, its database conversation).
    fn identity(&self) -> String;

    /// Runs `run` on a consistent view of the rows for one `session_history` page,
    /// started at `start` with the call's time limit `limit`: no wait for the store
    /// outlasts it. The view's types are the crate's own, so only the crate's stores
    /// serve pages; any other answers [`PageError::Unavailable`].
    #[doc(hidden)]
    fn page(
        &self,
        start: Instant,
        limit: Duration,
        run: &mut RunPage<'_, RowHead>,
    ) -> std::result::Result<(), PageError> {
        let _ = (start, limit, run);
        Err(PageError::Unavailable(
            "this store cannot serve session_history pages".to_owned(),
        ))
    }
}

/// A shared store is a store: hosts keep theirs in an `Arc` and pass it anywhere a
/// `&dyn Store` goes.
impl<S: Store + ?Sized> Store for std::sync::Arc<S> {
    fn append_rows(&self, rows: &[NewRow], expected_last_seq: Option<u64>) -> Result<AppendResult> {
        (**self).append_rows(rows, expected_last_seq)
    }

    fn append_json(
        &self,
        rows_json: &[u8],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        (**self).append_json(rows_json, expected_last_seq)
    }

    fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>> {
        (**self).append_with(expected_last_seq, build)
    }

    fn read(&self, from: ReadFrom) -> Result<RowsRead> {
        (**self).read(from)
    }

    fn read_after_append(&self, from: ReadFrom, appended: &AppendResult) -> Result<RowsRead> {
        (**self).read_after_append(from, appended)
    }

    fn rows_since(&self, first_seq: u64) -> Result<Vec<StoredRow>> {
        (**self).rows_since(first_seq)
    }

    fn windows(&self) -> Result<Vec<WindowInfo>> {
        (**self).windows()
    }

    fn current_window(&self) -> Result<String> {
        (**self).current_window()
    }

    fn state(&self) -> Result<StoreState> {
        (**self).state()
    }

    fn floor_seq(&self) -> Result<u64> {
        (**self).floor_seq()
    }

    fn rotate(&self) -> Result<RotateReport> {
        (**self).rotate()
    }

    fn verify(&self) -> Result<VerifyReport> {
        (**self).verify()
    }

    fn recover(&self) -> Result<RecoveryReport> {
        (**self).recover()
    }

    fn prune(&self, spec: &PruneSpec) -> Result<PruneReport> {
        (**self).prune(spec)
    }

    fn anchor_crc_at(&self, offset: u64) -> Result<Option<u32>> {
        (**self).anchor_crc_at(offset)
    }

    fn identity(&self) -> String {
        (**self).identity()
    }

    fn page(
        &self,
        start: Instant,
        limit: Duration,
        run: &mut RunPage<'_, RowHead>,
    ) -> std::result::Result<(), PageError> {
        (**self).page(start, limit, run)
    }
}
