//! The transcript over a byte log: a [`ByteLog`] keeps numbered row bodies (append a
//! batch built under its lock from its current state, read what follows a seq, its
//! state — epoch, last seq, floor) and knows nothing of what they mean; [`LogStore`]
//! gives any byte log the whole [`Store`](crate::transcript::Store) seam — the row encoder and
//! its checks, the strict head parse, the window fold, the compound operations, the
//! `session_history` page view — written once here.
//!
//! The in-memory backend ([`crate::memory`]) is a byte log and nothing more.

mod encode;
mod index;
pub(crate) mod page;
mod store;

// The PostgreSQL transcript encodes and indexes its rows with these too.
#[cfg(feature = "postgres")]
pub(crate) use encode::{encode_batch, MAX_SEQ};
#[cfg(feature = "postgres")]
pub(crate) use index::RowIndex;
pub use store::LogStore;

use crate::store::Result;

/// A byte log's counters at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LogState {
    /// Changes whenever anything but an append changes the rows (a prune, the log
    /// recreated): cursors and indexes of an older epoch are void.
    pub epoch: u64,
    /// The last seq handed out (0: none).
    pub last_seq: u64,
    /// The highest seq of a row appended as a floor (0: none). Never lowered.
    pub floor_seq: u64,
}

/// One row of a byte log: its seq, its bytes (one JSON line without its newline) and
/// whether it was appended as a privacy floor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogRow {
    /// Its seq.
    pub seq: u64,
    /// Its bytes, exactly as appended.
    pub body: Vec<u8>,
    /// Appended as a privacy floor.
    pub floor: bool,
}

/// The state of a byte log and the rows after a seq, as one consistent cut.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LogRead {
    /// The counters.
    pub state: LogState,
    /// The rows after the seq asked for, oldest first.
    pub rows: Vec<LogRow>,
}

/// Row bodies read in one moment, with the epoch of that moment.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bodies {
    /// The log's epoch when they were read.
    pub epoch: u64,
    /// `(seq, body)`, oldest first.
    pub rows: Vec<(u64, Vec<u8>)>,
}

/// What archiving or removing rows below a seq did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Moved {
    /// Rows archived or removed.
    pub rows: u64,
    /// Their bytes (each with a newline, as the rows laid end to end).
    pub bytes: u64,
    /// The log's new epoch, when rows moved.
    pub epoch: Option<u64>,
}

/// A byte log as a batch sees it while it is built, under the log's lock: nothing
/// changes it until the batch is appended or dropped.
pub trait LockedLog {
    /// The counters.
    fn state(&self) -> LogState;
    /// The rows with a seq above `after`, oldest first.
    fn rows_after(&self, after: u64) -> Vec<LogRow>;
    /// The body of the row at `seq` (`None`: no row has it).
    fn body(&self, seq: u64) -> Option<Vec<u8>>;
}

/// Builds a batch from a log under its lock: the rows to append (seqs from
/// `state().last_seq + 1`, consecutive), or `None` to write nothing.
pub type BuildRows<'b> = dyn FnMut(&dyn LockedLog) -> Result<Option<Vec<LogRow>>> + 'b;

/// What a backend implements to carry a transcript: numbered bytes, nothing more.
pub trait ByteLog: Send + Sync {
    /// The state and the rows with a seq above `after`, as one consistent cut.
    fn read_after(&self, after: u64) -> Result<LogRead>;

    /// Under the log's lock (one writer at a time): lets `build` make a batch from the
    /// log as it is ([`LockedLog`]) and appends it as one all-or-nothing batch. Returns
    /// the state after it, or `None` when `build` wrote nothing. `build` may read the log
    /// through this trait's other methods (a lead-in renderer reading the history):
    /// reads never wait for the writer.
    fn append(&self, build: &mut BuildRows<'_>) -> Result<Option<LogState>>;

    /// The bodies of the rows with seqs in `from..=to` and the epoch of the same
    /// moment.
    fn bodies(&self, from: u64, to: u64) -> Result<Bodies>;

    /// Marks the rows below `seq` archived: they stay readable, closed windows out of
    /// the live part; a new epoch when the mark moved over rows (cursors do not survive
    /// it).
    fn archive_before(&self, seq: u64) -> Result<Moved>;

    /// The seq below which rows are archived (1: none are).
    fn archived_before(&self) -> Result<u64>;

    /// Removes every row below `seq` for good (the floor stays); a new epoch when rows
    /// went.
    fn remove_before(&self, seq: u64) -> Result<Moved>;

    /// The seq below which rows were removed (1: none were).
    fn removed_before(&self) -> Result<u64>;

    /// What cursors of this log are bound to: the same for every handle on it.
    fn identity(&self) -> String;
}
