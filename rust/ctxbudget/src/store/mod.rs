//! The byte store: crash-safe JSONL transcript files (SPEC §5). It keeps framed,
//! checksummed lines and hands out seqs; what rows mean is the layer above's. The file
//! store ([`FileStore`]) is generic over it (`FileRows`: the line reader, the fold its
//! index feeds, the window labels, the floor recovery writes), and the transcript layer names
//! the store it builds on (`ctxbudget::transcript::History`), encodes the lines every
//! append writes and implements its row-level seam on top. Nothing here uses that layer.
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
//! use ctxbudget::store::OpenOptions;
//! use ctxbudget::transcript::{History, NewRow};
//!
//! let ws = std::env::temp_dir().join(format!("ctxbudget-doc-{}", std::process::id()));
//! let history = History::open(&ws, OpenOptions::default())?;
//! let appended = history.append(vec![NewRow::text("message", "user", "hello")])?;
//! assert_eq!(appended.first_seq, 1);
//! assert_eq!(history.current_window()?, "w:0");
//! # std::fs::remove_dir_all(&ws).ok();
//! # Ok::<(), ctxbudget::store::StoreError>(())
//! ```

mod error;
/// Fault injection for crash tests: public only with the `failpoints` feature (without
/// it the hooks compile to nothing).
#[cfg(feature = "failpoints")]
pub mod failpoint;
#[cfg(not(feature = "failpoints"))]
mod failpoint;
pub(crate) mod file_page;
pub(crate) mod frame;
mod fsutil;
mod lock;
/// The view a `session_history` page reads (its types are the crate's own).
pub(crate) mod page;
pub mod receipt;
pub(crate) mod wellformed;

mod append;
mod health;
mod index;
mod maintenance;
mod options;
mod read;
mod reports;
mod retention;
/// What the file store needs of the layer above (sealed: only the transcript layer's
/// reader implements it).
mod rows;

use std::fs::{File, OpenOptions as FsOpenOptions};
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::{Mutex, MutexGuard};

pub use error::{Result, StoreError};
pub(crate) use fsutil::now_rfc3339;
pub(crate) use fsutil::random_fallback;
pub use fsutil::Stamp;
pub use lock::DEFAULT_LOCK_TIMEOUT;
pub use page::PageError;
pub use receipt::{AppendIntent, ArchiveCheck, Files, Receipt, ReceiptRead, ReceiptState};
pub use wellformed::{MAX_NESTING, MAX_ROW_NESTING, QUARANTINE_WRAP};

use lock::HistoryLock;

pub use health::{
    FileRecovery, FileVerify, ReceiptCheck, RecoveryDetail, RecoveryReport, RowCounts, StateDetail,
    StoreState, VerifyDetail, VerifyReport,
};
#[cfg(feature = "fuzzing")]
pub(crate) use index::fuzz_scan;
pub use options::{Durability, OpenOptions, Paths, DEFAULT_MAX_ROW_BYTES};
pub use reports::{
    AppendResult, DeleteReport, FileReport, PruneReport, ReadFrom, RotateReport, RowsRead,
    StoredRow, WindowInfo,
};

pub(crate) use append::EncodedLines;
pub(crate) use index::Index;
pub(crate) use rows::FileRows;

/// A workspace's transcript files: `R` reads and folds their rows (the transcript layer
/// names the store it uses, `ctxbudget::transcript::History`).
pub struct FileStore<R: FileRows> {
    paths: Paths,
    options: OpenOptions,
    lock_token: lock::LockToken,
    index: Mutex<Option<Index<R>>>,
    handles: Mutex<Handles>,
}

impl<R: FileRows> std::fmt::Debug for FileStore<R> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FileStore")
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
struct Locked<'a, R: FileRows> {
    _lock: HistoryLock,
    index: MutexGuard<'a, Option<Index<R>>>,
    handles: MutexGuard<'a, Handles>,
}

impl<R: FileRows> FileStore<R> {
    /// Opens (creating `<ws>/history/`) the store of workspace `ws`, recovering a torn
    /// tail or an interrupted rotation if there is one.
    pub fn open(ws: &Path, options: OpenOptions) -> Result<FileStore<R>> {
        if options.max_row_bytes == 0 {
            return Err(StoreError::InvalidArgument(
                "max_row_bytes must be positive".to_owned(),
            ));
        }
        let paths = Paths::new(ws);
        std::fs::create_dir_all(&paths.dir)
            .map_err(|e| StoreError::io("create directory", &paths.dir, e))?;
        let history = FileStore {
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

    fn lock(&self) -> Result<Locked<'_, R>> {
        let lock = HistoryLock::acquire(
            &self.lock_token,
            &self.paths.lock,
            self.options.lock_timeout,
        )
        .map_err(|e| match e {
            // The directory is gone: a delete removed the workspace's transcript.
            StoreError::Io { ref source, .. }
                if source.kind() == std::io::ErrorKind::NotFound && !self.paths.dir.exists() =>
            {
                StoreError::Deleted {
                    location: format!("workspace {}", self.paths.dir.display()),
                }
            }
            other => other,
        })?;
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
    fn refresh(&self, locked: &mut Locked<'_, R>) -> Result<ReceiptRead> {
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
                let next = index::scan_rows::<R>(&bytes, start, ix.chat.lines);
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
            archive: index::scan_rows::<R>(&archive_bytes, 0, 0),
            chat: index::scan_rows::<R>(&chat_bytes, 0, 0),
            ..Index::default()
        };
        ix.derive(&receipt, &chat_bytes, &archive_bytes);
        *locked.index = Some(ix);
        Ok(receipt)
    }

    /// True when the receipt vouches that the only change since our index is appends by
    /// writers that followed the protocol, and the last commit we saw is still in place.
    fn appended_by_tracked_writer(
        &self,
        ix: &Index<R>,
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

    fn index<'a>(locked: &'a Locked<'_, R>) -> Result<&'a Index<R>> {
        locked
            .index
            .as_ref()
            .ok_or_else(|| StoreError::internal("history index is not loaded"))
    }

    /// Whether there is a torn tail (never acknowledged) to move out of the way, or a
    /// mutation that a writer left unfinished (pending or unreadable receipt).
    fn needs_recovery(&self, locked: &Locked<'_, R>, receipt: &ReceiptRead) -> bool {
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
        Err(e) => return Err(StoreError::io("open", path, e)),
    };
    f.seek(SeekFrom::Start(start))
        .map_err(|e| StoreError::io("seek", path, e))?;
    let mut out = Vec::new();
    f.read_to_end(&mut out)
        .map_err(|e| StoreError::io("read", path, e))?;
    Ok(out)
}

/// CRC recorded in the commit line that ends exactly at `end`, if that line is one.
pub(crate) fn commit_crc_before(path: &Path, end: u64) -> Result<Option<u32>> {
    const MAX_COMMIT_LINE: u64 = 160;
    let start = end.saturating_sub(MAX_COMMIT_LINE);
    let mut f = match open_read(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(StoreError::io("open", path, e)),
    };
    f.seek(SeekFrom::Start(start))
        .map_err(|e| StoreError::io("seek", path, e))?;
    let mut buf = Vec::new();
    f.take(end - start)
        .read_to_end(&mut buf)
        .map_err(|e| StoreError::io("read", path, e))?;
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
