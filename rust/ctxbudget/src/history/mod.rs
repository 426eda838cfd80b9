//! Crash-safe JSONL transcript store (SPEC §5).
//!
//! ```text
//! <ws>/history/chat.jsonl          rows of the open windows
//! <ws>/history/chat-archive.jsonl  whole windows rotated out of chat.jsonl
//! <ws>/history/receipt.json        append receipt, at most 4 KiB
//! <ws>/history/lock                cross-process lock file; never truncated or unlinked
//! <ws>/history/recovered/          bytes recovery took out of a file; never deleted
//! ```
//!
//! An append writes one framed batch (see [`frame`](self) docs in `frame.rs`) with one
//! `write` and one `fdatasync`: O(batch), whatever the size of the file. Every other
//! mutation (recovery, rotation) publishes a durable `pending` receipt with a new epoch
//! first and a durable `stable` one after, so cursors never survive it.
//!
//! Receipts around a pure append are replaced atomically but not synced: every way such
//! a receipt can be lost (power cut before the rename or its data reach the disk) leaves
//! a missing, malformed, pending or stale-stamped receipt, all of which fail closed.
//! That keeps an append at one `fdatasync`.
//!
//! ```
//! use ctxbudget::history::{History, NewRow, OpenOptions};
//!
//! let ws = std::env::temp_dir().join(format!("ctxbudget-doc-{}", std::process::id()));
//! let history = History::open(&ws, OpenOptions::default())?;
//! let appended = history.append(vec![NewRow::text("message", "user", "hello")])?;
//! assert_eq!(appended.first_seq, 1);
//! assert_eq!(history.current_window()?, "w:0");
//! # std::fs::remove_dir_all(&ws).ok();
//! # Ok::<(), ctxbudget::history::HistoryError>(())
//! ```

mod error;
/// Fault injection for crash tests: public only with the `failpoints` feature (without
/// it the hooks compile to nothing).
#[cfg(feature = "failpoints")]
pub mod failpoint;
#[cfg(not(feature = "failpoints"))]
mod failpoint;
pub(crate) mod frame;
mod fsutil;
mod lock;
pub mod receipt;
mod row;
mod store;

use std::collections::HashMap;
use std::fs::{File, OpenOptions as FsOpenOptions};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use serde::Serialize;
use serde_json::Value;

pub use crate::transcript::{LeadIn, LeadInContext, RolloverSpec};
pub use error::{HistoryError, Result};
pub(crate) use fsutil::random_fallback;
pub use fsutil::Stamp;
pub use lock::DEFAULT_LOCK_TIMEOUT;
pub use receipt::{Files, Receipt, ReceiptRead, ReceiptState};
pub use row::{NewRow, DEFAULT_MAX_ROW_BYTES, KINDS, PART_TYPES, ROLES};
pub use store::{BuildBatch, Store, Tip};

use crate::transcript::{BoundaryKind, RowKind, WindowFold};
pub(crate) use frame::Entry;
use frame::Scan;
use lock::HistoryLock;

/// How hard the store works to make a write survive power loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// `fdatasync` every append; sync files and directories around every other change.
    #[default]
    Fsync,
    /// No syncing (tests, benchmarks that say so): crash-consistent, not power-safe.
    None,
}

impl std::str::FromStr for Durability {
    type Err = HistoryError;
    fn from_str(s: &str) -> Result<Durability> {
        match s {
            "fsync" => Ok(Durability::Fsync),
            "none" => Ok(Durability::None),
            other => Err(HistoryError::InvalidArgument(format!(
                "durability {other:?} is not one of \"fsync\", \"none\""
            ))),
        }
    }
}

/// Options of [`History::open`].
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Syncing policy.
    pub durability: Durability,
    /// Bound on waiting for the history lock.
    pub lock_timeout: Duration,
    /// Largest serialized row accepted by `append`.
    pub max_row_bytes: usize,
    /// Recover a torn tail or an interrupted mutation while opening (default). Off for
    /// inspection (`verify`), which must change nothing; writes still recover first.
    pub recover_on_open: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            durability: Durability::Fsync,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            max_row_bytes: DEFAULT_MAX_ROW_BYTES,
            recover_on_open: true,
        }
    }
}

/// Paths of one workspace's history.
#[derive(Clone, Debug)]
pub struct Paths {
    /// `<ws>/history`.
    pub dir: PathBuf,
    /// `<ws>/history/chat.jsonl`.
    pub chat: PathBuf,
    /// `<ws>/history/chat-archive.jsonl`.
    pub archive: PathBuf,
    /// `<ws>/history/receipt.json`.
    pub receipt: PathBuf,
    /// `<ws>/history/lock`.
    pub lock: PathBuf,
    /// `<ws>/history/recovered`.
    pub recovered: PathBuf,
}

impl Paths {
    /// The paths under workspace `ws`.
    pub fn new(ws: &Path) -> Paths {
        let dir = ws.join("history");
        Paths {
            chat: dir.join("chat.jsonl"),
            archive: dir.join("chat-archive.jsonl"),
            receipt: dir.join("receipt.json"),
            lock: dir.join("lock"),
            recovered: dir.join("recovered"),
            dir,
        }
    }
}

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

/// Where [`History::read`] starts.
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

/// What `recover` did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct RecoveryReport {
    /// Whether anything changed (files or receipt).
    pub changed: bool,
    /// Torn bytes moved out of `chat.jsonl`.
    pub chat_torn_bytes: u64,
    /// Torn bytes moved out of `chat-archive.jsonl`.
    pub archive_torn_bytes: u64,
    /// Files under `recovered/` that received them.
    pub moved_to: Vec<PathBuf>,
    /// Bytes of an interrupted rotation removed from `chat.jsonl` (they are in the
    /// archive). Always 0 since rotations record their intent; kept for compatibility.
    pub rotation_completed_bytes: u64,
    /// Bytes of an interrupted rotation taken back off the end of the archive (copies of
    /// rows still in `chat.jsonl`).
    pub rotation_rolled_back_bytes: u64,
    /// Epoch after recovery.
    pub epoch: Option<u64>,
    /// Damage found before a valid commit (left untouched; writes are refused).
    pub damage: Option<String>,
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

/// What `verify` found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// `chat.jsonl`.
    pub chat: FileReport,
    /// `chat-archive.jsonl`.
    pub archive: FileReport,
    /// `missing`, `malformed`, `pending`, `stable` or `stale` (stamps do not match).
    pub receipt: String,
    /// Rows whose seq is not above every seq before them, archive then chat (duplicated
    /// batches, external lines reusing a seq). Readers skip them as malformed.
    pub seq_violations: u64,
    /// Where the first of them is.
    pub first_seq_violation: Option<String>,
    /// Seq of the newest privacy floor known (rows or receipt; 0 if none).
    pub floor_seq: u64,
    /// True when nothing is torn or damaged, seqs are unique and increasing, and the
    /// receipt is stable.
    pub ok: bool,
}

/// The in-memory index of both files, valid for the stamps it records.
#[derive(Default)]
struct Index {
    epoch: Option<u64>,
    chat_stamp: Option<Stamp>,
    archive_stamp: Option<Stamp>,
    archive: Scan,
    chat: Scan,
    /// Highest seq handed out: the rows' and the receipt's, whichever is higher, so a
    /// seq is never handed out twice.
    last_seq: u64,
    /// Highest seq of a readable row, in file order.
    max_row_seq: u64,
    /// What the rows mean so far (windows, floor, retractions, rollover IDs), folded
    /// from the heads of readable rows in file order; its floor is raised to the
    /// receipt's.
    fold: WindowFold,
    /// Rows whose seq is not above every seq before them (archive then chat).
    seq_violations: u64,
    /// Where the first of them is.
    first_seq_violation: Option<String>,
}

impl Index {
    fn entries(&self) -> impl Iterator<Item = &Entry> {
        self.archive.entries.iter().chain(self.chat.entries.iter())
    }

    /// Recomputes the derived fields from all entries (after a full load), judging them
    /// against what the receipt acknowledges.
    fn derive(&mut self, receipt: &ReceiptRead) {
        self.last_seq = 0;
        self.max_row_seq = 0;
        self.seq_violations = 0;
        self.first_seq_violation = None;
        self.fold = WindowFold::new();
        let mut archive = std::mem::take(&mut self.archive);
        let mut chat = std::mem::take(&mut self.chat);
        self.note(&mut archive, 0, "chat-archive.jsonl");
        self.note(&mut chat, 0, "chat.jsonl");
        if archive.torn_bytes > 0 {
            // The archive only ever receives whole committed batches from chat.jsonl,
            // all acknowledged; an interrupted rotation is rolled back from its recorded
            // intent. Anything after its last valid commit is damage, never torn.
            let (offset, line) = (archive.committed_end, archive.lines + 1);
            archive.damage_offsets.push(offset);
            archive.tail_acked = true;
            if archive.damage.is_none() {
                archive.damage = Some(frame::Damage {
                    offset,
                    line,
                    reason: "the archive holds only acknowledged batches, and the one here \
                             is cut short or fails its check"
                        .to_owned(),
                });
            }
        }
        if let Some(r) = receipt.valid() {
            self.fold.raise_floor(r.floor);
            self.last_seq = self.last_seq.max(r.seq);
            if r.seq > self.max_row_seq {
                // The receipt vouches for rows that are not readable: the last
                // acknowledged batch was cut or fails its check. That is damage (writes
                // refused, location named), never a torn tail to cut away.
                let reason = format!(
                    "the receipt acknowledges rows up to seq {} but the last readable row \
                     is seq {}: an acknowledged batch after this point is missing or fails \
                     its check",
                    r.seq, self.max_row_seq
                );
                let (offset, line) = (chat.committed_end, chat.lines + 1);
                chat.damage_offsets.push(offset);
                chat.tail_acked = true;
                if chat.damage.is_none() {
                    chat.damage = Some(frame::Damage {
                        offset,
                        line,
                        reason,
                    });
                }
            }
        }
        self.archive = archive;
        self.chat = chat;
    }

    /// Updates the derived fields with the entries of `scan` from index `from` on, which
    /// follow the ones already noted: appends cost O(batch), not O(history). A row whose
    /// seq is not above every earlier one is malformed for indexing (kept as a floor if it
    /// is one); inside a committed batch that is damage (a batch present twice).
    fn note(&mut self, scan: &mut Scan, from: usize, file: &str) {
        let ranges = std::mem::take(&mut scan.batch_ranges);
        for e in &mut scan.entries[from..] {
            let Some(h) = e.head.as_ref() else { continue };
            if h.seq <= self.max_row_seq {
                self.seq_violations += 1;
                if self.first_seq_violation.is_none() {
                    self.first_seq_violation = Some(format!(
                        "{file} byte {}: seq {} follows seq {}",
                        e.offset, h.seq, self.max_row_seq
                    ));
                }
                let framed = ranges
                    .binary_search_by(|&(start, end)| {
                        if end <= e.offset {
                            std::cmp::Ordering::Less
                        } else if start > e.offset {
                            std::cmp::Ordering::Greater
                        } else {
                            std::cmp::Ordering::Equal
                        }
                    })
                    .is_ok();
                if framed {
                    scan.damage_offsets.push(e.offset);
                    if scan.damage.is_none() {
                        scan.damage = Some(frame::Damage {
                            offset: e.offset,
                            line: 0,
                            reason: format!(
                                "seq {} repeats or goes back after seq {}: a batch is present \
                                 twice",
                                h.seq, self.max_row_seq
                            ),
                        });
                    }
                }
                e.reset_like = h.is_floor();
                e.head = None;
                scan.malformed += 1;
                continue;
            }
            self.max_row_seq = h.seq;
            self.last_seq = self.last_seq.max(h.seq);
            self.fold.note_head(h.as_head());
        }
        scan.batch_ranges = ranges;
    }

    /// A receipt describing the files as this index knows them.
    fn receipt(&self, epoch: u64, state: ReceiptState) -> Receipt {
        Receipt {
            version: receipt::RECEIPT_VERSION,
            epoch,
            state,
            seq: self.last_seq,
            committed_end: self.chat.committed_end,
            anchor_crc: self.chat.last_crc.unwrap_or(0),
            files: Files {
                chat: self.chat_stamp,
                archive: self.archive_stamp,
            },
            floor: self.fold.floor_seq(),
            rotation: None,
        }
    }

    /// Absorbs the scan of bytes appended to `chat.jsonl` and notes its rows.
    fn absorb_chat(&mut self, next: Scan) {
        let first_new = self.chat.entries.len();
        let mut chat = std::mem::take(&mut self.chat);
        chat.absorb(next);
        self.note(&mut chat, first_new, "chat.jsonl");
        self.chat = chat;
    }

    /// The damage that makes the store refuse writes, if any: `(which file, damage)`.
    fn damage(&self) -> Option<(bool, &frame::Damage)> {
        self.chat
            .damage
            .as_ref()
            .map(|d| (true, d))
            .or_else(|| self.archive.damage.as_ref().map(|d| (false, d)))
    }
}

/// A read-only view of the store under the history lock (see `History::with_snapshot`).
pub(crate) struct Snapshot<'a> {
    pub paths: &'a Paths,
    pub receipt: ReceiptRead,
    pub chat_stamp: Option<Stamp>,
    pub archive_stamp: Option<Stamp>,
    pub archive: &'a [Entry],
    pub chat: &'a [Entry],
    pub chat_committed_end: u64,
    pub chat_last_crc: Option<u32>,
    /// Seq of the newest privacy floor known (rows or receipt).
    pub floor_seq: u64,
    /// Offset of the last damaged region of the archive, if any (a possible floor).
    pub archive_damage: Option<u64>,
    /// Offset of the last damaged region of `chat.jsonl`, if any (a possible floor).
    pub chat_damage: Option<u64>,
}

impl Snapshot<'_> {
    /// Whether the receipt is stable and matches the files: only then can a cursor be
    /// minted or continued.
    pub fn receipt_vouches(&self) -> Option<u64> {
        let r = self.receipt.valid()?;
        (r.state == ReceiptState::Stable
            && r.files.chat == self.chat_stamp
            && r.files.archive == self.archive_stamp)
            .then_some(r.epoch)
    }
}

/// A workspace's transcript store.
pub struct History {
    paths: Paths,
    options: OpenOptions,
    lock_token: lock::LockToken,
    index: Mutex<Option<Index>>,
    handles: Mutex<Handles>,
}

impl std::fmt::Debug for History {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("History")
            .field("dir", &self.paths.dir)
            .field("durability", &self.options.durability)
            .finish_non_exhaustive()
    }
}

/// Open files reused between operations while they are still the files at their paths.
#[derive(Default)]
struct Handles {
    receipt: Option<receipt::Handle>,
    /// `chat.jsonl` opened for appending, with the `(dev, ino)` it had when opened.
    chat: Option<(File, u64, u64)>,
}

/// Held history lock plus this instance's index and open files.
struct Locked<'a> {
    _lock: HistoryLock,
    index: MutexGuard<'a, Option<Index>>,
    handles: MutexGuard<'a, Handles>,
}

impl History {
    /// Opens (creating `<ws>/history/`) the store of workspace `ws`, recovering a torn
    /// tail or an interrupted rotation if there is one.
    pub fn open(ws: &Path, options: OpenOptions) -> Result<History> {
        if options.max_row_bytes == 0 {
            return Err(HistoryError::InvalidArgument(
                "max_row_bytes must be positive".to_owned(),
            ));
        }
        let paths = Paths::new(ws);
        std::fs::create_dir_all(&paths.dir)
            .map_err(|e| HistoryError::io("create directory", &paths.dir, e))?;
        let history = History {
            lock_token: lock::LockToken::new(&paths.lock),
            paths,
            options,
            index: Mutex::new(None),
            handles: Mutex::new(Handles::default()),
        };
        let mut locked = history.lock()?;
        let receipt = history.refresh(&mut locked)?;
        // Under the lock, a pending or unreadable receipt can only come from a writer
        // that died mid-mutation: finish its job before anyone reads.
        if history.options.recover_on_open && history.needs_recovery(&locked, &receipt) {
            history.recover_locked(&mut locked)?;
        }
        drop(locked);
        Ok(history)
    }

    /// The file paths of this store.
    pub fn paths(&self) -> &Paths {
        &self.paths
    }

    /// The options it was opened with.
    pub fn options(&self) -> &OpenOptions {
        &self.options
    }

    fn lock(&self) -> Result<Locked<'_>> {
        let lock = HistoryLock::acquire(
            &self.lock_token,
            &self.paths.lock,
            self.options.lock_timeout,
        )?;
        let index = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let handles = self.handles.lock().unwrap_or_else(|e| e.into_inner());
        Ok(Locked {
            _lock: lock,
            index,
            handles,
        })
    }

    fn durable(&self) -> bool {
        self.options.durability == Durability::Fsync
    }

    /// Brings the index up to date with the files; cheap when nothing changed or when
    /// tracked writers only appended.
    fn refresh(&self, locked: &mut Locked<'_>) -> Result<ReceiptRead> {
        let receipt = receipt::read_cached(&self.paths.receipt, &mut locked.handles.receipt)?;
        let chat = fsutil::stamp(&self.paths.chat)?;
        let archive = fsutil::stamp(&self.paths.archive)?;
        if let Some(ix) = locked.index.as_mut() {
            if ix.chat_stamp == chat && ix.archive_stamp == archive {
                return Ok(receipt);
            }
            if self.appended_by_tracked_writer(ix, &receipt, chat, archive)? {
                let start = ix.chat.committed_end;
                let bytes = read_range(&self.paths.chat, start)?;
                let next = frame::scan(&bytes, start, ix.chat.lines);
                ix.absorb_chat(next);
                ix.chat_stamp = chat;
                ix.epoch = receipt.valid().map(|r| r.epoch);
                return Ok(receipt);
            }
        }
        let archive_bytes = read_all(&self.paths.archive)?;
        let chat_bytes = read_all(&self.paths.chat)?;
        let mut ix = Index {
            epoch: receipt.valid().map(|r| r.epoch),
            chat_stamp: chat,
            archive_stamp: archive,
            archive: frame::scan(&archive_bytes, 0, 0),
            chat: frame::scan(&chat_bytes, 0, 0),
            ..Index::default()
        };
        ix.derive(&receipt);
        *locked.index = Some(ix);
        Ok(receipt)
    }

    /// True when the receipt vouches that the only change since our index is appends by
    /// writers that followed the protocol, and the last commit we saw is still in place.
    fn appended_by_tracked_writer(
        &self,
        ix: &Index,
        receipt: &ReceiptRead,
        chat: Option<Stamp>,
        archive: Option<Stamp>,
    ) -> Result<bool> {
        let (Some(r), Some(old), Some(new)) = (receipt.valid(), ix.chat_stamp, chat) else {
            return Ok(false);
        };
        let vouched = r.state == ReceiptState::Stable
            && Some(r.epoch) == ix.epoch
            && r.files.chat == chat
            && r.files.archive == archive
            && archive == ix.archive_stamp
            && (old.dev, old.ino) == (new.dev, new.ino)
            && new.size >= ix.chat.committed_end
            && ix.chat.torn_bytes == 0;
        if !vouched {
            return Ok(false);
        }
        match ix.chat.last_crc {
            None => Ok(ix.chat.committed_end == 0),
            Some(crc) => {
                Ok(commit_crc_before(&self.paths.chat, ix.chat.committed_end)? == Some(crc))
            }
        }
    }

    fn index<'a>(locked: &'a Locked<'_>) -> Result<&'a Index> {
        locked
            .index
            .as_ref()
            .ok_or_else(|| HistoryError::InvalidArgument("history index is not loaded".to_owned()))
    }

    /// Whether there is a torn tail (never acknowledged) to move out of the way, or a
    /// mutation that a writer left unfinished (pending or unreadable receipt).
    fn needs_recovery(&self, locked: &Locked<'_>, receipt: &ReceiptRead) -> bool {
        let interrupted = match receipt {
            ReceiptRead::Valid(r) => r.state == ReceiptState::Pending,
            ReceiptRead::Malformed => true,
            ReceiptRead::Missing => false,
        };
        interrupted
            || locked.index.as_ref().is_some_and(|ix| {
                (ix.chat.torn_bytes > 0 && !ix.chat.tail_acked)
                    || (ix.archive.torn_bytes > 0 && !ix.archive.tail_acked)
            })
    }

    // ----- appends ---------------------------------------------------------------

    /// Appends `rows` as one all-or-nothing batch, durable before this returns.
    pub fn append(&self, rows: Vec<NewRow>) -> Result<AppendResult> {
        if rows.is_empty() {
            return Err(HistoryError::InvalidArgument(
                "append needs at least one row".to_owned(),
            ));
        }
        let mut locked = self.lock()?;
        self.append_locked(&mut locked, &rows)
    }

    /// Validates JSON rows (objects with `kind`, `role`, `parts`, `meta`) and appends
    /// them as one batch.
    pub fn append_json(&self, rows: Vec<Value>) -> Result<AppendResult> {
        let rows = rows
            .into_iter()
            .enumerate()
            .map(|(i, v)| NewRow::from_value(i, v))
            .collect::<Result<Vec<_>>>()?;
        self.append(rows)
    }

    fn writable(&self, locked: &mut Locked<'_>) -> Result<ReceiptRead> {
        let mut receipt = self.refresh(locked)?;
        if self.needs_recovery(locked, &receipt) {
            self.recover_locked(locked)?;
            receipt = self.refresh(locked)?;
        }
        let ix = Self::index(locked)?;
        if let Some((in_chat, d)) = ix.damage() {
            let path = if in_chat {
                &self.paths.chat
            } else {
                &self.paths.archive
            };
            return Err(HistoryError::Corrupt {
                path: path.clone(),
                offset: d.offset,
                line: d.line,
                reason: d.reason.clone(),
            });
        }
        Ok(receipt)
    }

    fn append_locked(&self, locked: &mut Locked<'_>, rows: &[NewRow]) -> Result<AppendResult> {
        // Every batch built in Rust (a host's rows, a rollover's trigger, a quarantined
        // original) meets the rules JSON rows meet, before anything is written.
        for (i, row) in rows.iter().enumerate() {
            row.validate(i)?;
        }
        let incoming: Vec<row::Incoming<'_>> = rows.iter().map(row::Incoming::Built).collect();
        self.append_incoming(locked, &incoming)
    }

    /// Appends a batch given as UTF-8 JSON: a list of row objects with `kind`, `role`,
    /// `parts` and `meta`. Rows are validated without building value trees and their
    /// `parts` and `meta` are stored as written — the fast path for hosts that already
    /// hold JSON (the Python binding uses it).
    pub fn append_json_bytes(&self, rows_json: &[u8]) -> Result<AppendResult> {
        self.append_json_bytes_if(rows_json, None)
    }

    /// [`append_json_bytes`](Self::append_json_bytes), conditional on the store's last
    /// seq: with `Some(n)` the batch is written only if seq `n` is still the last row
    /// (`0`: the store is empty), else [`HistoryError::Conflict`] and nothing is written.
    /// The check and the write happen under one hold of the history lock, so two
    /// writers (threads or processes) that decided on the same state cannot both commit.
    pub fn append_json_bytes_if(
        &self,
        rows_json: &[u8],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        let raws: Vec<&serde_json::value::RawValue> = serde_json::from_slice(rows_json)
            .map_err(|e| HistoryError::InvalidArgument(format!("rows are not a JSON list: {e}")))?;
        if raws.is_empty() {
            return Err(HistoryError::InvalidArgument(
                "append needs at least one row".to_owned(),
            ));
        }
        let rows = raws
            .into_iter()
            .enumerate()
            .map(|(i, raw)| row::RawRow::parse(i, raw).map(row::Incoming::Raw))
            .collect::<Result<Vec<_>>>()?;
        let mut locked = self.lock()?;
        self.check_expected(&mut locked, expected_last_seq)?;
        self.append_incoming(&mut locked, &rows)
    }

    /// [`append`](Self::append), conditional on the store's last seq (see
    /// [`append_json_bytes_if`](Self::append_json_bytes_if)).
    pub fn append_if(&self, rows: Vec<NewRow>, expected_last_seq: u64) -> Result<AppendResult> {
        if rows.is_empty() {
            return Err(HistoryError::InvalidArgument(
                "append needs at least one row".to_owned(),
            ));
        }
        let mut locked = self.lock()?;
        self.check_expected(&mut locked, Some(expected_last_seq))?;
        self.append_locked(&mut locked, &rows)
    }

    /// Under the lock: refuses a conditional write whose expected last seq is no longer
    /// the store's (`None`: unconditional).
    fn check_expected(&self, locked: &mut Locked<'_>, expected: Option<u64>) -> Result<()> {
        let Some(expected_last_seq) = expected else {
            return Ok(());
        };
        self.writable(locked)?;
        let last_seq = Self::index(locked)?.last_seq;
        if last_seq == expected_last_seq {
            Ok(())
        } else {
            Err(HistoryError::Conflict {
                expected_last_seq,
                last_seq,
            })
        }
    }

    fn append_incoming(
        &self,
        locked: &mut Locked<'_>,
        rows: &[row::Incoming<'_>],
    ) -> Result<AppendResult> {
        let receipt = self.writable(locked)?;
        let ix = Self::index(locked)?;
        let pre_chat = ix.chat_stamp;
        let pre_archive = ix.archive_stamp;
        let old_size = pre_chat.map_or(0, |s| s.size);

        // Frame the batch; windows follow boundary rows inside it too.
        let first = ix.last_seq + 1;
        let last = first + rows.len() as u64 - 1;
        let pure = match receipt.valid() {
            Some(r) => {
                r.state == ReceiptState::Stable
                    && Some(r.epoch) == ix.epoch
                    && r.files.chat == pre_chat
                    && r.files.archive == pre_archive
                    && r.committed_end == old_size
            }
            None => false,
        };
        let epoch = match (pure, receipt.valid()) {
            (true, Some(r)) => r.epoch,
            _ => fsutil::random_u63(),
        };
        let ts = fsutil::now_rfc3339();
        let mut framed = frame::header_line(epoch, first, last).into_bytes();
        let mut window = ix.fold.window();
        let mut floor = ix.fold.floor_seq();
        // Index entries of the new rows, built as they are framed: no re-scan after.
        let mut entries = Vec::with_capacity(rows.len());
        for (i, row) in rows.iter().enumerate() {
            let seq = first + i as u64;
            window = WindowFold::next_window(window, seq, row.kind());
            let window_text = window.to_string();
            let line = row.encode(seq, &window_text, &ts)?;
            let head = row.head(seq, &window_text);
            if head.is_floor() {
                floor = seq;
            }
            entries.push(Entry {
                offset: old_size + framed.len() as u64,
                len: (line.len() - 1) as u32,
                head: Some(head),
                reset_like: false,
            });
            if line.len() - 1 > self.options.max_row_bytes {
                return Err(HistoryError::row(
                    i,
                    "",
                    format!(
                        "serializes to {} bytes, over the {}-byte row limit; store large \
                         content elsewhere and reference it",
                        line.len() - 1,
                        self.options.max_row_bytes
                    ),
                ));
            }
            framed.extend_from_slice(&line);
        }
        let (commit, crc) = frame::commit_line(epoch, first, last, &framed);
        framed.extend_from_slice(commit.as_bytes());

        // Announce the mutation; if even that fails, nothing is written.
        let pending = ix.receipt(epoch, ReceiptState::Pending);
        receipt::publish_in_place(
            &self.paths.receipt,
            &mut locked.handles.receipt,
            &pending,
            "receipt.pending",
        )?;

        let written = match self.write_batch(&mut locked.handles, &framed, pre_chat) {
            Ok(stamp) => stamp,
            Err(e) => {
                // The file may now hold a torn tail; rebuild the index before the next use.
                *locked.index = None;
                return Err(e);
            }
        };

        // `written` is the stamp of the file we wrote, taken through our handle. A file
        // that is exactly the old one plus our batch is a pure append; anything else
        // (a writer that ignored the lock) costs the epoch. The archive is not stat'ed
        // again: under the lock only such a writer could have changed it, and the
        // receipt then names a stamp the file no longer has, which fails closed.
        let post_chat = Some(written);
        let post_archive = pre_archive;
        let verified = match pre_chat {
            Some(a) => {
                (a.dev, a.ino) == (written.dev, written.ino)
                    && written.size == a.size + framed.len() as u64
            }
            None => written.size == framed.len() as u64,
        };
        let final_epoch = if pure && verified {
            epoch
        } else {
            fsutil::random_u63()
        };
        let stable = Receipt {
            version: receipt::RECEIPT_VERSION,
            epoch: final_epoch,
            state: ReceiptState::Stable,
            seq: last,
            committed_end: post_chat.map_or(0, |s| s.size),
            anchor_crc: crc,
            files: Files {
                chat: post_chat,
                archive: post_archive,
            },
            floor,
            rotation: None,
        };
        // The append is durable now: a failure to finalize only expires cursors.
        let published = receipt::publish_in_place(
            &self.paths.receipt,
            &mut locked.handles.receipt,
            &stable,
            "receipt.stable",
        )
        .is_ok();

        let ix = locked.index.as_mut().ok_or_else(|| {
            HistoryError::InvalidArgument("history index is not loaded".to_owned())
        })?;
        if verified {
            let end = old_size + framed.len() as u64;
            ix.absorb_chat(Scan {
                entries,
                committed_end: end,
                lines: ix.chat.lines + rows.len() as u64 + 2,
                last_crc: Some(crc),
                batch_ranges: vec![(old_size, end)],
                batches: 1,
                ..Scan::default()
            });
            ix.chat_stamp = post_chat;
            ix.epoch = published.then_some(final_epoch);
        } else {
            *locked.index = None;
        }
        Ok(AppendResult {
            first_seq: first,
            last_seq: last,
            epoch: final_epoch,
            window: window.to_string(),
        })
    }

    /// Writes one framed batch to `chat.jsonl` (whose stamp under the lock is `current`)
    /// with a single `write`, then `fdatasync`s it. Returns the stamp of the file written,
    /// or an error if that file was unlinked meanwhile (the batch would be lost).
    fn write_batch(
        &self,
        handles: &mut Handles,
        framed: &[u8],
        current: Option<Stamp>,
    ) -> Result<Stamp> {
        use std::os::unix::fs::MetadataExt;
        let path = &self.paths.chat;
        let io = |op| move |e| HistoryError::io(op, path, e);
        failpoint::hit("append.open").map_err(io("open"))?;
        let creating = current.is_none();
        let reusable = match (&handles.chat, current) {
            (Some((_, dev, ino)), Some(s)) => (*dev, *ino) == (s.dev, s.ino),
            _ => false,
        };
        if !reusable {
            let file = fsutil::open_nofollow(path, FsOpenOptions::new().append(true).create(true))
                .map_err(io("open"))?;
            let meta = file.metadata().map_err(io("stat"))?;
            handles.chat = Some((file, meta.dev(), meta.ino()));
        }
        let Some((file, _, _)) = handles.chat.as_mut() else {
            return Err(io("open")(std::io::Error::other(
                "chat.jsonl handle missing",
            )));
        };
        match failpoint::take("append.write") {
            Some(failpoint::Fault::Torn(n)) => {
                let n = n.min(framed.len());
                file.write_all(&framed[..n]).map_err(io("write"))?;
                return Err(io("write")(failpoint::crashed("append.write")));
            }
            Some(failpoint::Fault::Error(code)) => {
                return Err(io("write")(std::io::Error::from_raw_os_error(code)));
            }
            Some(failpoint::Fault::Crash) => {
                return Err(io("write")(failpoint::crashed("append.write")));
            }
            Some(failpoint::Fault::Run(f)) => f(),
            None => {}
        }
        file.write_all(framed).map_err(io("write"))?;
        if self.durable() {
            failpoint::hit("append.fsync").map_err(io("fdatasync"))?;
            file.sync_data().map_err(io("fdatasync"))?;
            if creating {
                fsutil::sync_dir(&self.paths.dir)?;
            }
        }
        failpoint::hit("append.after_fsync").map_err(io("finish append"))?;
        let meta = file.metadata().map_err(io("stat"))?;
        if meta.nlink() == 0 {
            // Someone deleted or replaced chat.jsonl between our stat and our write,
            // ignoring the lock: the batch went to a file no path names any more.
            handles.chat = None;
            return Err(io("append")(std::io::Error::other(
                "chat.jsonl was deleted or replaced by a program that ignores the history \
                 lock while this batch was written, so the batch is not stored; stop that \
                 program and append again",
            )));
        }
        Ok(Stamp::of_metadata(&meta))
    }

    /// Records a rollover: boundary row, lead-in row and the trigger, as one batch
    /// under one hold of the lock, the lead-in rendered from the window the boundary
    /// really opens (see [`crate::transcript::rollover`]). Idempotent per
    /// `rollover_id`: a repeat returns the window the first one opened.
    pub fn rollover(&self, spec: RolloverSpec) -> Result<String> {
        crate::transcript::rollover(self, spec).map(|w| w.to_string())
    }

    /// Soft clear: a `reset` boundary row, the privacy floor. Returns its seq.
    pub fn clear_soft(&self) -> Result<u64> {
        crate::transcript::clear_soft(self, None)
    }

    /// Quarantines a rejected request that was never stored: an empty assistant row
    /// whose `meta.rejected` holds the original `{role, parts, meta}`. Returns its seq.
    pub fn quarantine(&self, original: NewRow) -> Result<u64> {
        Ok(self
            .append(vec![crate::transcript::rejected_row(original)?])?
            .first_seq)
    }

    /// Quarantines stored row `seq`: its retraction and a quarantine row holding its
    /// content, one batch under one hold of the lock (see
    /// [`crate::transcript::quarantine`]). Returns the seq of the quarantine row.
    pub fn quarantine_seq(&self, seq: u64, expected_last_seq: Option<u64>) -> Result<u64> {
        crate::transcript::quarantine(self, seq, expected_last_seq)
    }

    /// Retracts row `seq` and quarantines `original` (its content) in one batch, only if
    /// the store's last seq is still `expected_last_seq`. Returns the seq of the
    /// quarantine row. Prefer [`quarantine_seq`](Self::quarantine_seq), which reads the
    /// content from the store itself.
    pub fn quarantine_retracting(
        &self,
        seq: u64,
        original: NewRow,
        expected_last_seq: Option<u64>,
    ) -> Result<u64> {
        let rows = crate::transcript::retract_and_quarantine(seq, original)?;
        let mut locked = self.lock()?;
        self.check_expected(&mut locked, expected_last_seq)?;
        Ok(self.append_locked(&mut locked, &rows)?.last_seq)
    }

    /// See [`Store::append_with`].
    pub fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>> {
        let mut locked = self.lock()?;
        self.writable(&mut locked)?;
        self.check_expected(&mut locked, expected_last_seq)?;
        let rows = {
            let ix = Self::index(&locked)?;
            let reader = |seq: u64| self.row_at(ix, seq);
            let tip = Tip {
                last_seq: ix.last_seq,
                fold: &ix.fold,
                rows: &reader,
            };
            build(&tip)?
        };
        match rows {
            None => Ok(None),
            Some(rows) if rows.is_empty() => Err(HistoryError::InvalidArgument(
                "append needs at least one row".to_owned(),
            )),
            Some(rows) => self.append_locked(&mut locked, &rows).map(Some),
        }
    }

    /// The readable row with this seq, parsed (the newest rows are searched first).
    fn row_at(&self, ix: &Index, seq: u64) -> Result<Option<crate::transcript::Row>> {
        let found = ix
            .chat
            .entries
            .iter()
            .rev()
            .map(|e| (self.paths.chat.as_path(), e))
            .chain(
                ix.archive
                    .entries
                    .iter()
                    .rev()
                    .map(|e| (self.paths.archive.as_path(), e)),
            )
            .find(|(_, e)| e.head.as_ref().is_some_and(|h| h.seq == seq));
        let Some((path, e)) = found else {
            return Ok(None);
        };
        let file = open_read(path).map_err(|err| HistoryError::io("open", path, err))?;
        let mut raw = vec![0u8; e.len as usize];
        use std::os::unix::fs::FileExt;
        file.read_exact_at(&mut raw, e.offset)
            .map_err(|err| HistoryError::io("read", path, err))?;
        Ok(crate::transcript::Row::parse(
            seq,
            ix.fold.window_of(seq),
            &raw,
        ))
    }

    // ----- reading ---------------------------------------------------------------

    /// Every committed row, archive then chat, with its derived window.
    pub fn rows(&self) -> Result<Vec<StoredRow>> {
        self.rows_since(0)
    }

    /// Committed rows from the first one whose seq is at least `first_seq` to the end,
    /// reading only their bytes: an agent loop that keeps the rows it has seen fetches
    /// just the new ones each step.
    pub fn rows_since(&self, first_seq: u64) -> Result<Vec<StoredRow>> {
        Ok(self.read(ReadFrom::Seq(first_seq))?.rows)
    }

    /// Rows from `from` to the end, with the store's last seq and privacy floor, all
    /// under one hold of the lock (a consistent cut: every row up to `last_seq` is
    /// in `rows` or before `from`).
    pub fn read(&self, from: ReadFrom) -> Result<RowsRead> {
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        let ix = Self::index(&locked)?;
        let first_seq = match from {
            ReadFrom::Seq(seq) => seq,
            ReadFrom::CurrentWindow => ix.fold.window().seq(),
        };
        let all: Vec<(&Path, &Entry)> = ix
            .archive
            .entries
            .iter()
            .map(|e| (self.paths.archive.as_path(), e))
            .chain(
                ix.chat
                    .entries
                    .iter()
                    .map(|e| (self.paths.chat.as_path(), e)),
            )
            .collect();
        let start = all
            .iter()
            .position(|(_, e)| e.head.as_ref().is_some_and(|h| h.seq >= first_seq))
            .unwrap_or(all.len());
        // The window a row belongs to is the fold's to say: the one open before the
        // first row read, then boundaries as they come.
        let mut window = all[start..]
            .iter()
            .find_map(|(_, e)| e.head.as_ref())
            .map_or(ix.fold.window(), |h| {
                ix.fold.window_of(h.seq.saturating_sub(1))
            });
        let mut out = Vec::with_capacity(all.len() - start);
        let mut files: HashMap<&Path, File> = HashMap::new();
        for (path, e) in &all[start..] {
            if let Some(h) = e.head.as_ref() {
                window = WindowFold::next_window(window, h.seq, &h.kind);
            }
            let file = match files.entry(path) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(open_read(path).map_err(|err| HistoryError::io("open", *path, err))?)
                }
            };
            let mut raw = vec![0u8; e.len as usize];
            use std::os::unix::fs::FileExt;
            if file.read_exact_at(&mut raw, e.offset).is_err() {
                continue; // the file shrank under us; the index is refreshed next time
            }
            out.push(StoredRow {
                seq: e.head.as_ref().map(|h| h.seq),
                window: window.to_string(),
                raw,
            });
        }
        Ok(RowsRead {
            rows: out,
            last_seq: ix.last_seq,
            floor_seq: ix.fold.floor_seq(),
        })
    }

    /// Contiguous window runs, oldest first.
    pub fn windows(&self) -> Result<Vec<WindowInfo>> {
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        let ix = Self::index(&locked)?;
        // The index's fold has seen every retraction; a second fold walks the runs.
        let retracted = &ix.fold;
        let mut fold = WindowFold::new();
        let mut out: Vec<WindowInfo> = Vec::new();
        for e in ix.entries() {
            let Some(h) = &e.head else {
                if e.reset_like {
                    // A reset that does not parse still opens a (floor) window.
                    out.push(WindowInfo {
                        window_id: "w:?".into(),
                        boundary_kind: BoundaryKind::Reset.as_str().into(),
                        first_seq: 0,
                        item_count: 0,
                    });
                }
                continue;
            };
            if fold.note_head(h.as_head()) || out.is_empty() {
                out.push(WindowInfo {
                    window_id: fold.window().to_string(),
                    boundary_kind: fold.window_kind_name().to_owned(),
                    first_seq: h.seq,
                    item_count: 0,
                });
            }
            let item = h.kind.parse::<RowKind>().is_ok_and(RowKind::is_item);
            if item && !retracted.is_retracted(h.seq) {
                if let Some(w) = out.last_mut() {
                    w.item_count += 1;
                }
            }
        }
        Ok(out)
    }

    /// Seq of the newest privacy floor, rows and receipt (0: none).
    pub fn floor_seq(&self) -> Result<u64> {
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        Ok(Self::index(&locked)?.fold.floor_seq())
    }

    /// ID of the window new rows go to.
    pub fn current_window(&self) -> Result<String> {
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        Ok(Self::index(&locked)?.fold.window().to_string())
    }

    /// The receipt as it is on disk.
    pub fn receipt(&self) -> Result<ReceiptRead> {
        let _locked = self.lock()?;
        receipt::read(&self.paths.receipt)
    }

    /// Runs `f` on a consistent view of the store: the history lock is held for the
    /// whole call and the index is brought up to date first (appends by others are read
    /// incrementally; recovery never runs here).
    pub(crate) fn with_snapshot<T>(&self, f: impl FnOnce(&Snapshot<'_>) -> T) -> Result<T> {
        let mut locked = self.lock()?;
        let receipt = self.refresh(&mut locked)?;
        let ix = Self::index(&locked)?;
        let snapshot = Snapshot {
            paths: &self.paths,
            receipt,
            chat_stamp: ix.chat_stamp,
            archive_stamp: ix.archive_stamp,
            archive: &ix.archive.entries,
            chat: &ix.chat.entries,
            chat_committed_end: ix.chat.committed_end,
            chat_last_crc: ix.chat.last_crc,
            floor_seq: ix.fold.floor_seq(),
            archive_damage: ix.archive.damage_offsets.iter().copied().max(),
            chat_damage: ix.chat.damage_offsets.iter().copied().max(),
        };
        Ok(f(&snapshot))
    }

    /// CRC-32C recorded by the commit line that ends exactly at byte `offset` of
    /// `chat.jsonl`, if there is one (cursor anchors).
    pub fn anchor_crc_at(&self, offset: u64) -> Result<Option<u32>> {
        commit_crc_before(&self.paths.chat, offset)
    }

    // ----- recovery, rotation, verification -----------------------------------------

    /// Moves torn tails to `recovered/`, completes an interrupted rotation and
    /// re-establishes a stable receipt under a new epoch. Idempotent: a second call
    /// changes nothing. Damage before a valid commit is reported, never touched.
    pub fn recover(&self) -> Result<RecoveryReport> {
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        self.recover_locked(&mut locked)
    }

    fn recover_locked(&self, locked: &mut Locked<'_>) -> Result<RecoveryReport> {
        let receipt = receipt::read(&self.paths.receipt)?;
        let ix = Self::index(locked)?;
        let mut report = RecoveryReport {
            damage: ix
                .damage()
                .map(|(_, d)| format!("byte {} (line {}): {}", d.offset, d.line, d.reason)),
            ..RecoveryReport::default()
        };
        // A rotation that announced itself and did not confirm: roll it back if
        // `chat.jsonl` was not replaced yet, else it is complete (the archive was synced
        // before the replacement). Either way no row ends up in both files.
        let rotation = receipt
            .valid()
            .filter(|r| r.state == ReceiptState::Pending)
            .and_then(|r| r.rotation.map(|rot| (rot, r.files.chat)));
        let rollback_to = rotation.and_then(|(rot, chat_before)| {
            let ident = |s: Option<Stamp>| s.map(|s| (s.dev, s.ino));
            let replaced = ident(ix.chat_stamp) != ident(chat_before);
            let archive_size = ix.archive_stamp.map_or(0, |s| s.size);
            (!replaced && archive_size > rot.archive_before).then_some(rot.archive_before)
        });
        let chat_torn =
            (ix.chat.torn_bytes > 0 && !ix.chat.tail_acked).then_some(ix.chat.committed_end);
        let archive_torn =
            (ix.archive.torn_bytes > 0 && !ix.archive.tail_acked && rollback_to.is_none())
                .then_some(ix.archive.committed_end);
        let receipt_ok = receipt.valid().is_some_and(|r| {
            r.state == ReceiptState::Stable
                && r.files.chat == ix.chat_stamp
                && r.files.archive == ix.archive_stamp
        });
        let has_files = ix.chat_stamp.is_some() || ix.archive_stamp.is_some();
        if chat_torn.is_none()
            && archive_torn.is_none()
            && rotation.is_none()
            && (receipt_ok || !has_files)
        {
            report.epoch = receipt.valid().map(|r| r.epoch);
            return Ok(report);
        }
        let epoch = fsutil::random_u63();
        self.publish_pending_durable(epoch, ix)?;
        *locked.index = None; // whatever happens next, rebuild from the files
        if let Some(size) = rollback_to {
            report.rotation_rolled_back_bytes = self.truncate_to(&self.paths.archive, size)?;
        }
        if let Some(keep) = archive_torn {
            report.archive_torn_bytes =
                self.move_tail(&self.paths.archive, keep, epoch, &mut report.moved_to)?;
        }
        let mut floor_in_tail = false;
        if let Some(keep) = chat_torn {
            let tail = read_range(&self.paths.chat, keep)?;
            floor_in_tail = frame::tail_has_floor(&tail);
            report.chat_torn_bytes =
                self.move_tail(&self.paths.chat, keep, epoch, &mut report.moved_to)?;
        }
        self.refresh(locked)?;
        self.publish_stable_durable(epoch, locked)?;
        report.changed = true;
        report.epoch = Some(epoch);
        if floor_in_tail {
            // The torn tail held a complete soft-clear row. Its bytes are safe in
            // recovered/, but the privacy floor must not disappear with them: a committed
            // reset takes its place (later, so stricter — fail closed).
            let floor = crate::transcript::reset_row().with_meta("recovered_floor", true);
            let appended = self.append_locked(locked, &[floor])?;
            report.epoch = Some(appended.epoch);
        }
        Ok(report)
    }

    /// Cuts `path` back to `size` bytes (rolling back an interrupted rotation, whose
    /// extra archive bytes are copies of rows still in `chat.jsonl`); returns the bytes
    /// removed.
    fn truncate_to(&self, path: &Path, size: u64) -> Result<u64> {
        failpoint::hit("recover.rollback").map_err(|e| HistoryError::io("truncate", path, e))?;
        let file = fsutil::open_nofollow(path, FsOpenOptions::new().write(true))
            .map_err(|e| HistoryError::io("open", path, e))?;
        let before = file
            .metadata()
            .map_err(|e| HistoryError::io("stat", path, e))?
            .len();
        file.set_len(size)
            .map_err(|e| HistoryError::io("truncate", path, e))?;
        if self.durable() {
            file.sync_all()
                .map_err(|e| HistoryError::io("fsync", path, e))?;
        }
        Ok(before.saturating_sub(size))
    }

    fn move_tail(
        &self,
        path: &Path,
        keep: u64,
        epoch: u64,
        moved: &mut Vec<PathBuf>,
    ) -> Result<u64> {
        let tail = read_range(path, keep)?;
        if tail.is_empty() {
            return Ok(0);
        }
        let dir = &self.paths.recovered;
        std::fs::create_dir_all(dir).map_err(|e| HistoryError::io("create directory", dir, e))?;
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("chat");
        let millis = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
            .as_millis();
        let target = dir.join(format!("{stem}-at-{keep}-{millis}-{epoch:x}.jsonl"));
        let target_ref = &target;
        let io = |op| move |e| HistoryError::io(op, target_ref, e);
        failpoint::hit("recover.copy").map_err(io("write"))?;
        let mut out =
            fsutil::open_nofollow(&target, FsOpenOptions::new().write(true).create_new(true))
                .map_err(io("create"))?;
        out.write_all(&tail).map_err(io("write"))?;
        if self.durable() {
            out.sync_all().map_err(io("fsync"))?;
            fsutil::sync_dir(dir)?;
        }
        moved.push(target.clone());
        // Only now that the bytes are safe elsewhere is the tail cut.
        failpoint::hit("recover.truncate").map_err(|e| HistoryError::io("truncate", path, e))?;
        let file = fsutil::open_nofollow(path, FsOpenOptions::new().write(true))
            .map_err(|e| HistoryError::io("open", path, e))?;
        file.set_len(keep)
            .map_err(|e| HistoryError::io("truncate", path, e))?;
        if self.durable() {
            file.sync_all()
                .map_err(|e| HistoryError::io("fsync", path, e))?;
        }
        Ok(tail.len() as u64)
    }

    fn publish_pending_durable(&self, epoch: u64, ix: &Index) -> Result<()> {
        let pending = ix.receipt(epoch, ReceiptState::Pending);
        receipt::publish(
            &self.paths.receipt,
            &pending,
            self.durable(),
            "receipt.pending",
        )
    }

    fn publish_stable_durable(&self, epoch: u64, locked: &mut Locked<'_>) -> Result<()> {
        let ix = locked.index.as_mut().ok_or_else(|| {
            HistoryError::InvalidArgument("history index is not loaded".to_owned())
        })?;
        let stable = ix.receipt(epoch, ReceiptState::Stable);
        receipt::publish(
            &self.paths.receipt,
            &stable,
            self.durable(),
            "receipt.stable",
        )?;
        ix.epoch = Some(epoch);
        Ok(())
    }

    /// Moves every closed window (all rows before the batch that opened the current
    /// window) from `chat.jsonl` to the end of `chat-archive.jsonl`, bytes unchanged.
    pub fn rotate(&self) -> Result<RotateReport> {
        let mut locked = self.lock()?;
        self.writable(&mut locked)?;
        let ix = Self::index(&locked)?;
        let boundary = ix
            .chat
            .entries
            .iter()
            .rev()
            .find(|e| e.head.as_ref().is_some_and(|h| h.kind == "boundary"));
        let Some(boundary) = boundary else {
            return Ok(RotateReport::default());
        };
        let cut = ix
            .chat
            .batch_ranges
            .iter()
            .find(|(start, end)| *start <= boundary.offset && boundary.offset < *end)
            .map_or(boundary.offset, |(start, _)| *start);
        if cut == 0 {
            return Ok(RotateReport::default());
        }
        let rows = ix.chat.entries.iter().filter(|e| e.offset < cut).count() as u64;
        let epoch = fsutil::random_u63();
        // The intent goes first, durably: a crash anywhere after this leaves a pending
        // receipt that says how to roll the rotation back (chat.jsonl not yet replaced)
        // or that it is complete (replaced), so no row is ever in both files.
        let mut pending = ix.receipt(epoch, ReceiptState::Pending);
        pending.rotation = Some(receipt::Rotation {
            archive_before: ix.archive_stamp.map_or(0, |s| s.size),
            moved: cut,
        });
        receipt::publish(
            &self.paths.receipt,
            &pending,
            self.durable(),
            "receipt.pending",
        )?;
        let archive_created = ix.archive_stamp.is_none();
        *locked.index = None;
        let chat = read_all(&self.paths.chat)?;
        let (moved, rest) = chat.split_at((cut as usize).min(chat.len()));
        {
            let path = &self.paths.archive;
            let io = |op| move |e| HistoryError::io(op, path, e);
            failpoint::hit("rotate.archive").map_err(io("append"))?;
            let mut f = fsutil::open_nofollow(path, FsOpenOptions::new().append(true).create(true))
                .map_err(io("open"))?;
            if let Some(failpoint::Fault::Torn(n)) = failpoint::take("rotate.archive.write") {
                f.write_all(&moved[..n.min(moved.len())])
                    .map_err(io("append"))?;
                return Err(io("append")(failpoint::crashed("rotate.archive.write")));
            }
            f.write_all(moved).map_err(io("append"))?;
            if self.durable() {
                f.sync_data().map_err(io("fdatasync"))?;
                if archive_created {
                    fsutil::sync_dir(&self.paths.dir)?;
                }
            }
        }
        fsutil::replace_file(&self.paths.chat, rest, self.durable(), "rotate.chat")?;
        self.refresh(&mut locked)?;
        self.publish_stable_durable(epoch, &mut locked)?;
        Ok(RotateReport {
            rows,
            bytes: cut,
            epoch: Some(epoch),
        })
    }

    /// Full check: every commit CRC of both files, torn tails, damage (including an
    /// acknowledged batch that is missing or fails its check), seqs unique and
    /// increasing across archive and chat, receipt state. Changes nothing.
    pub fn verify(&self) -> Result<VerifyReport> {
        let _locked = self.lock()?;
        let receipt = receipt::read(&self.paths.receipt)?;
        let chat_bytes = read_all(&self.paths.chat)?;
        let archive_bytes = read_all(&self.paths.archive)?;
        let mut ix = Index {
            archive: frame::scan(&archive_bytes, 0, 0),
            chat: frame::scan(&chat_bytes, 0, 0),
            ..Index::default()
        };
        ix.derive(&receipt);
        let file_report = |s: &Scan, bytes: usize| FileReport {
            bytes: bytes as u64,
            batches: s.batches,
            rows: s.entries.iter().filter(|e| e.head.is_some()).count() as u64,
            legacy_rows: s.legacy_rows,
            malformed_lines: s.malformed,
            torn_bytes: s.torn_bytes,
            damage: s
                .damage
                .as_ref()
                .map(|d| (d.offset, d.line, d.reason.clone())),
        };
        let chat = file_report(&ix.chat, chat_bytes.len());
        let archive = file_report(&ix.archive, archive_bytes.len());
        let receipt_state = match &receipt {
            ReceiptRead::Missing => "missing",
            ReceiptRead::Malformed => "malformed",
            ReceiptRead::Valid(r) if r.state == ReceiptState::Pending => "pending",
            ReceiptRead::Valid(r) => {
                let files = Files {
                    chat: fsutil::stamp(&self.paths.chat)?,
                    archive: fsutil::stamp(&self.paths.archive)?,
                };
                if r.files == files {
                    "stable"
                } else {
                    "stale"
                }
            }
        };
        let clean = |f: &FileReport| f.torn_bytes == 0 && f.damage.is_none();
        let empty = chat.bytes == 0 && archive.bytes == 0;
        Ok(VerifyReport {
            ok: clean(&chat)
                && clean(&archive)
                && ix.seq_violations == 0
                && (receipt_state == "stable" || (empty && receipt_state == "missing")),
            chat,
            archive,
            receipt: receipt_state.to_owned(),
            seq_violations: ix.seq_violations,
            first_seq_violation: ix.first_seq_violation,
            floor_seq: ix.fold.floor_seq(),
        })
    }
}

/// Fuzzing entry point (not API): scans `chat` and `archive` as the store's files with
/// `receipt` as its receipt, derives the index as a reader would, and checks the
/// scanner's own invariants.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_scan(chat: &[u8], archive: &[u8], receipt: &[u8]) {
    let receipt = match serde_json::from_slice::<Receipt>(receipt) {
        Ok(r) => ReceiptRead::Valid(r),
        Err(_) => ReceiptRead::Malformed,
    };
    let mut ix = Index {
        archive: frame::scan(archive, 0, 0),
        chat: frame::scan(chat, 0, 0),
        ..Index::default()
    };
    for (s, bytes) in [(&ix.chat, chat), (&ix.archive, archive)] {
        assert!(s.committed_end as usize <= bytes.len());
        assert_eq!(
            s.torn_bytes as usize,
            bytes.len() - s.committed_end as usize
        );
        assert!(s.entries.windows(2).all(|w| w[0].offset < w[1].offset));
        assert!(s
            .entries
            .iter()
            .all(|e| (e.offset + u64::from(e.len)) < s.committed_end.max(1)));
    }
    let _ = frame::tail_has_floor(chat);
    ix.derive(&receipt);
    let seqs: Vec<u64> = ix
        .entries()
        .filter_map(|e| e.head.as_ref().map(|h| h.seq))
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
    assert!(ix.last_seq >= seqs.last().copied().unwrap_or(0));
    // An incremental scan from any committed line boundary agrees with the full one.
    let cut = ix.chat.batch_ranges.first().map_or(0, |r| r.1);
    let head = frame::scan(&chat[..cut as usize], 0, 0);
    let mut joined = head.clone();
    joined.absorb(frame::scan(&chat[cut as usize..], cut, head.lines));
    assert_eq!(joined.committed_end, frame::scan(chat, 0, 0).committed_end);
}

fn read_all(path: &Path) -> Result<Vec<u8>> {
    read_range(path, 0)
}

/// Opens a store file for reading, never through a symbolic link.
pub(crate) fn open_read(path: &Path) -> std::io::Result<File> {
    fsutil::open_nofollow(path, FsOpenOptions::new().read(true))
}

/// Bytes of `path` from `start` to its end (empty if absent).
fn read_range(path: &Path, start: u64) -> Result<Vec<u8>> {
    let mut f = match open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(HistoryError::io("open", path, e)),
    };
    f.seek(SeekFrom::Start(start))
        .map_err(|e| HistoryError::io("seek", path, e))?;
    let mut out = Vec::new();
    f.read_to_end(&mut out)
        .map_err(|e| HistoryError::io("read", path, e))?;
    Ok(out)
}

/// CRC recorded in the commit line that ends exactly at `end`, if that line is one.
pub(crate) fn commit_crc_before(path: &Path, end: u64) -> Result<Option<u32>> {
    const MAX_COMMIT_LINE: u64 = 160;
    let start = end.saturating_sub(MAX_COMMIT_LINE);
    let mut f = match open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(HistoryError::io("open", path, e)),
    };
    f.seek(SeekFrom::Start(start))
        .map_err(|e| HistoryError::io("seek", path, e))?;
    let mut buf = Vec::new();
    f.take(end - start)
        .read_to_end(&mut buf)
        .map_err(|e| HistoryError::io("read", path, e))?;
    if buf.len() as u64 != end - start || buf.last() != Some(&b'\n') {
        return Ok(None);
    }
    let body = &buf[..buf.len() - 1];
    let line_start = body.iter().rposition(|&b| b == b'\n').map_or(0, |p| p + 1);
    if line_start == 0 && start != 0 {
        return Ok(None); // longer than any commit line
    }
    #[derive(serde::Deserialize)]
    struct C {
        commit: Crc,
    }
    #[derive(serde::Deserialize)]
    struct Crc {
        crc: u32,
    }
    Ok(serde_json::from_slice::<C>(&body[line_start..])
        .ok()
        .map(|c| c.commit.crc))
}

impl Store for History {
    fn append_rows(&self, rows: &[NewRow], expected_last_seq: Option<u64>) -> Result<AppendResult> {
        match expected_last_seq {
            Some(n) => self.append_if(rows.to_vec(), n),
            None => self.append(rows.to_vec()),
        }
    }

    fn append_json(
        &self,
        rows_json: &[u8],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        self.append_json_bytes_if(rows_json, expected_last_seq)
    }

    fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>> {
        History::append_with(self, expected_last_seq, build)
    }

    fn read(&self, from: ReadFrom) -> Result<RowsRead> {
        History::read(self, from)
    }

    fn receipt(&self) -> Result<ReceiptRead> {
        History::receipt(self)
    }

    fn floor_seq(&self) -> Result<u64> {
        History::floor_seq(self)
    }

    fn rotate(&self) -> Result<RotateReport> {
        History::rotate(self)
    }

    fn verify(&self) -> Result<VerifyReport> {
        History::verify(self)
    }

    fn recover(&self) -> Result<RecoveryReport> {
        History::recover(self)
    }
}
