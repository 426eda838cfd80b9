//! What a store says about its own state and health, for every backend alike: the
//! common part is what any store of rows can tell (epoch, last seq, floor, rows, seq
//! violations); what only one kind of store knows (the file store's byte counts, torn
//! tails and receipt) is the `detail` enum's arm for that store.

use std::path::PathBuf;

use serde::Serialize;

use super::receipt::ReceiptRead;
use super::reports::FileReport;

/// A store's state at one moment (one hold of its lock, one transaction).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreState {
    /// The epoch cursors are bound to; `None` while nothing vouches for one (a store
    /// nothing was written to yet, or a file store whose receipt is missing or
    /// unreadable).
    pub epoch: Option<u64>,
    /// The store's last seq (0: no row yet).
    pub last_seq: u64,
    /// Seq of the newest privacy floor (0: none). Never lowered.
    pub floor_seq: u64,
    /// What only this kind of store knows.
    pub detail: StateDetail,
}

/// The backend-specific part of a [`StoreState`].
// One value per call, on the stack: boxing the receipt would only add an allocation.
#[allow(clippy::large_enum_variant)]
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StateDetail {
    /// A workspace's files: the append receipt as stored.
    File {
        /// `history/receipt.json` as read (missing, malformed or valid).
        receipt: ReceiptRead,
    },
    /// A PostgreSQL conversation.
    Postgres,
    /// A byte log (the in-memory store is one).
    Log,
}

/// Rows of one part of a transcript (its live rows or its archive).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RowCounts {
    /// Committed rows that read back as rows.
    pub rows: u64,
    /// Stored rows (file store: lines) that do not: kept, skipped by readers.
    pub malformed: u64,
}

/// What `verify` found: a full check that changes nothing.
///
/// ```
/// use ctxbudget::store::{OpenOptions, ReceiptCheck};
/// use ctxbudget::transcript::{History, NewRow, Store};
///
/// let ws = std::env::temp_dir().join(format!("ctxbudget-verify-{}", std::process::id()));
/// let history = History::open(&ws, OpenOptions::default())?;
/// history.append(vec![NewRow::text("message", "user", "hello")])?;
/// let store: &dyn Store = &history;
/// let report = store.verify()?;
/// // The common part: what every store can say.
/// assert!(report.ok && report.last_seq == 1 && report.live.rows == 1);
/// // What only the file store checks is its arm of `detail`.
/// let file = report.file().expect("a workspace's report");
/// assert_eq!((file.receipt, file.chat.torn_bytes), (ReceiptCheck::Stable, 0));
/// # std::fs::remove_dir_all(&ws).ok();
/// # Ok::<(), ctxbudget::store::StoreError>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// True when every check passed: no seq violation, and what the backend checks on
    /// its own (file store: nothing torn or damaged, the receipt stable or copied, its
    /// malformed lines being kept and skipped; PostgreSQL and byte logs: no malformed
    /// row).
    pub ok: bool,
    /// The epoch at the check (see [`StoreState::epoch`]).
    pub epoch: Option<u64>,
    /// The store's last seq at the check.
    pub last_seq: u64,
    /// Seq of the newest privacy floor known (0 if none).
    pub floor_seq: u64,
    /// The rows new rows join (file store: `chat.jsonl`).
    pub live: RowCounts,
    /// The archived rows, moved there by `rotate` (file store: `chat-archive.jsonl`).
    pub archive: RowCounts,
    /// Rows whose seq breaks the order: not above every seq before them (duplicated
    /// batches, lines reusing a seq), and seqs missing or past the last one where the
    /// store can tell. Readers skip the rows among them as malformed.
    pub seq_violations: u64,
    /// Where the first of them is.
    pub first_seq_violation: Option<String>,
    /// What only this kind of store checked.
    pub detail: VerifyDetail,
}

impl VerifyReport {
    /// The file store's findings, when the report is a file store's.
    pub fn file(&self) -> Option<&FileVerify> {
        match &self.detail {
            VerifyDetail::File(f) => Some(f),
            _ => None,
        }
    }
}

/// The backend-specific part of a [`VerifyReport`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum VerifyDetail {
    /// A workspace's files.
    File(FileVerify),
    /// A PostgreSQL conversation.
    Postgres {
        /// Rows stored past the conversation's last seq (inserted by hand; readers
        /// ignore them; each run of them is one seq violation).
        rows_past_last_seq: u64,
    },
    /// A byte log: nothing beyond the common part.
    Log,
}

/// What only the file store's check finds: each file's bytes, batches, torn tail and
/// damage, and the receipt's state.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FileVerify {
    /// `chat.jsonl`.
    pub chat: FileReport,
    /// `chat-archive.jsonl`.
    pub archive: FileReport,
    /// The receipt against the files.
    pub receipt: ReceiptCheck,
}

/// The file store's receipt against its files, as `verify` found it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ReceiptCheck {
    /// No receipt file.
    #[default]
    Missing,
    /// Present but unreadable.
    Malformed,
    /// A mutation announced itself and did not confirm.
    Pending,
    /// It vouches for these very files.
    Stable,
    /// The files' identities or times changed (a copy, a restored backup) but they hold
    /// exactly what it vouches for: ok; the next write or `recover` adopts them under a
    /// new epoch.
    Copied,
    /// The files changed otherwise.
    Stale,
}

impl ReceiptCheck {
    /// The state's name: `missing`, `malformed`, `pending`, `stable`, `copied` or
    /// `stale`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReceiptCheck::Missing => "missing",
            ReceiptCheck::Malformed => "malformed",
            ReceiptCheck::Pending => "pending",
            ReceiptCheck::Stable => "stable",
            ReceiptCheck::Copied => "copied",
            ReceiptCheck::Stale => "stale",
        }
    }
}

/// What `recover` did.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    /// Whether anything changed.
    pub changed: bool,
    /// The epoch after recovery (`None`: nothing vouches for one, as in
    /// [`StoreState::epoch`]).
    pub epoch: Option<u64>,
    /// What only this kind of store repaired.
    pub detail: RecoveryDetail,
}

impl RecoveryReport {
    /// The file store's repairs, when the report is a file store's.
    pub fn file(&self) -> Option<&FileRecovery> {
        match &self.detail {
            RecoveryDetail::File(f) => Some(f),
            _ => None,
        }
    }
}

/// The backend-specific part of a [`RecoveryReport`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum RecoveryDetail {
    /// A workspace's files.
    File(FileRecovery),
    /// A PostgreSQL conversation: every append is one transaction, nothing is torn.
    Postgres,
    /// A byte log: a batch is appended whole or not at all, nothing is torn.
    Log,
}

/// What only the file store's recovery does: torn tails moved aside, an interrupted
/// rotation rolled back, damage reported.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct FileRecovery {
    /// Torn bytes moved out of `chat.jsonl`.
    pub chat_torn_bytes: u64,
    /// Torn bytes moved out of `chat-archive.jsonl`.
    pub archive_torn_bytes: u64,
    /// Files under `recovered/` that received them.
    pub moved_to: Vec<PathBuf>,
    /// Bytes of an interrupted rotation taken back off the end of the archive (copies of
    /// rows still in `chat.jsonl`).
    pub rotation_rolled_back_bytes: u64,
    /// Damage found before a valid commit (left untouched; writes are refused).
    pub damage: Option<String>,
}
