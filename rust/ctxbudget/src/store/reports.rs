//! What the store's operations return: append results, stored rows, window runs and
//! the reports of rotation, deletion and pruning (verification and recovery: `health.rs`).

use serde::Serialize;

/// What `append` committed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct AppendResult {
    /// Sequence number of the first row.
    pub first_seq: u64,
    /// Sequence number of the last row.
    pub last_seq: u64,
    /// Receipt epoch after the append.
    pub epoch: u64,
    /// Window of the last row.
    pub window: String,
}

/// A committed row as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredRow {
    /// Its sequence number, or `None` for a malformed line.
    pub seq: Option<u64>,
    /// Window it belongs to (derived from boundary rows).
    pub window: String,
    /// The line's bytes, exactly as on disk (without the newline).
    pub raw: Vec<u8>,
}

/// Where [`FileStore::read`](super::FileStore::read) starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReadFrom {
    /// The first row whose seq is at least this one.
    Seq(u64),
    /// The first row of the current window (its boundary; every row for `w:0`).
    CurrentWindow,
}

/// Rows read under one hold of the lock.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RowsRead {
    /// The rows, in order.
    pub rows: Vec<StoredRow>,
    /// The store's last seq at that moment (the condition for a conditional write
    /// decided on these rows).
    pub last_seq: u64,
    /// The privacy floor at that moment (rows and receipt).
    pub floor_seq: u64,
}

/// One contiguous run of a window.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct WindowInfo {
    /// `w:0` or `w:<seq of its boundary row>`.
    pub window_id: String,
    /// `root`, `rollover` or `reset`.
    pub boundary_kind: String,
    /// First sequence number of the run.
    pub first_seq: u64,
    /// Visible rows (messages and continuations not retracted).
    pub item_count: u64,
}

/// What `rotate` did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RotateReport {
    /// Rows moved to the archive.
    pub rows: u64,
    /// Bytes moved to the archive.
    pub bytes: u64,
    /// Epoch after rotation, if anything moved.
    pub epoch: Option<u64>,
}

/// Findings of a full check of one file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FileReport {
    /// Size in bytes.
    pub bytes: u64,
    /// Committed batches (every CRC checked).
    pub batches: u64,
    /// Committed rows, framed and legacy.
    pub rows: u64,
    /// Rows outside any batch.
    pub legacy_rows: u64,
    /// Lines that are not rows (kept, skipped by readers).
    pub malformed_lines: u64,
    /// Bytes after the last commit.
    pub torn_bytes: u64,
    /// First damage before a valid commit: `(offset, line, reason)`.
    pub damage: Option<(u64, u64, String)>,
}

/// What deleting a conversation (a workspace's transcript, or a PostgreSQL conversation)
/// removed for good.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct DeleteReport {
    /// Whether there was anything to delete.
    pub existed: bool,
    /// Transcript rows removed (acknowledged ones; torn tails count as recovered files).
    pub rows: u64,
    /// Bytes of those rows.
    pub bytes: u64,
    /// Memory files removed.
    pub memory_files: u64,
    /// Files of `history/recovered/` (torn tails a recovery set aside) removed.
    pub recovered_files: u64,
    /// Other files removed with it: the workspace's budget record, receipt and lock.
    pub other_files: u64,
}

/// What a prune removed: whole sealed windows from the oldest on, for good.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct PruneReport {
    /// Rows removed.
    pub rows: u64,
    /// Bytes of those rows.
    pub bytes: u64,
    /// The first seq kept: every row below it is gone (1 when nothing was ever pruned).
    pub kept_from: u64,
    /// The privacy floor after the prune: never lowered by it.
    pub floor_seq: u64,
    /// The transcript's new epoch (cursors minted before it answer `history_changed`);
    /// `None` when nothing was removed and nothing changed.
    pub epoch: Option<u64>,
}
