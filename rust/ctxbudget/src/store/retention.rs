//! Retention for the file store: pruning sealed windows out of the archive and
//! deleting a workspace's conversation for good (docs/format.md, "Retention").
//!
//! A prune first rotates (so every row it removes is in `chat-archive.jsonl`), then
//! replaces the archive by its tail from the first kept batch, under the history lock
//! and between a durable `pending` receipt with a new epoch and a `stable` one, like
//! every mutation that is not an append: cursors minted before it answer
//! `history_changed`, and a crash leaves the old archive or the new one, never a mix.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::index::scan_rows;
use super::lock::{HistoryLock, LockToken};
use super::receipt::{self, ReceiptState};
use super::rows::FileRows;
use super::{fsutil, read_all, DeleteReport, FileStore, Paths, PruneReport, Result, StoreError};

/// Prefix of the directory a delete moves a workspace's files into before removing it.
const TOMB_PREFIX: &str = ".ctxbudget-deleting-";

impl<R: FileRows> FileStore<R> {
    /// Removes for good every row below `cut`, which is held to the current window's
    /// first row (a cut inside a batch keeps that whole batch).
    pub fn prune_before(&self, cut: u64) -> Result<PruneReport> {
        let mut locked = self.lock()?;
        self.writable(&mut locked)?;
        let ix = Self::index(&locked)?;
        let cut = cut.min(ix.current_window_seq());
        let in_chat = ix
            .chat
            .entries
            .iter()
            .any(|e| e.head.as_ref().is_some_and(|h| R::seq(h) < cut));
        if in_chat {
            self.rotate_locked(&mut locked)?;
        }
        let ix = Self::index(&locked)?;
        let floor_seq = ix.floor_seq();
        let first_kept = ix
            .archive
            .entries
            .iter()
            .find(|e| e.head.as_ref().is_some_and(|h| R::seq(h) >= cut));
        let offset = match first_kept {
            Some(e) => ix
                .archive
                .batch_ranges
                .iter()
                .find(|(start, end)| *start <= e.offset && e.offset < *end)
                .map_or(e.offset, |(start, _)| *start),
            None => ix.archive.committed_end,
        };
        if offset == 0 {
            let kept_from = ix
                .entries()
                .find_map(|e| e.head.as_ref().map(R::seq))
                .unwrap_or(1);
            return Ok(PruneReport {
                kept_from,
                floor_seq,
                ..PruneReport::default()
            });
        }
        let rows = ix
            .archive
            .entries
            .iter()
            .filter(|e| e.offset < offset && e.head.is_some())
            .count() as u64;
        let epoch = fsutil::random_u63();
        // Announced first, durably, without the archive's checksum: a crash before the
        // stable receipt leaves the old archive or the new one, and either is accepted.
        let mut pending = ix.receipt(epoch, ReceiptState::Pending);
        pending.floor = pending.floor.max(floor_seq);
        pending.archive_check = None;
        receipt::publish(
            &self.paths.receipt,
            &pending,
            self.durable(),
            "receipt.pending",
        )?;
        *locked.index = None;
        let archive = read_all(&self.paths.archive)?;
        let start = usize::try_from(offset)
            .unwrap_or(archive.len())
            .min(archive.len());
        fsutil::replace_file(
            &self.paths.archive,
            &archive[start..],
            self.durable(),
            "prune.archive",
        )?;
        self.refresh(&mut locked)?;
        self.publish_stable_durable(epoch, &mut locked)?;
        let ix = Self::index(&locked)?;
        let report = PruneReport {
            rows,
            bytes: offset,
            kept_from: ix
                .entries()
                .find_map(|e| e.head.as_ref().map(R::seq))
                .unwrap_or(cut),
            floor_seq: ix.floor_seq(),
            epoch: Some(epoch),
        };
        Ok(report)
    }

    /// Deletes for good the conversation workspace `ws` holds: `history/` (rows,
    /// receipt, lock, `recovered/` tails), `memories/` and `budget.json`, and the
    /// workspace directory itself if nothing else is left in it. It waits for a writer
    /// in progress (up to `lock_timeout`), then moves the files out of the way in one
    /// rename of `history/` before removing them: a writer that comes after gets
    /// [`StoreError::Deleted`], never a half-deleted transcript. Opening the workspace
    /// again starts an empty conversation under a new epoch.
    pub fn delete_workspace(ws: &Path, lock_timeout: Duration) -> Result<DeleteReport> {
        let paths = Paths::new(ws);
        let memories = ws.join("memories");
        let budget = ws.join("budget.json");
        let mut report = DeleteReport::default();
        let tomb = ws.join(format!("{TOMB_PREFIX}{:016x}", fsutil::random_u63()));
        if paths.dir.is_dir() {
            let token = LockToken::new(&paths.lock);
            let lock = HistoryLock::acquire(&token, &paths.lock, lock_timeout)?;
            for path in [&paths.chat, &paths.archive] {
                let bytes = read_all(path)?;
                let scan = scan_rows::<R>(&bytes, 0, 0);
                report.rows += scan.entries.iter().filter(|e| e.head.is_some()).count() as u64;
                report.bytes += bytes.len() as u64;
            }
            report.recovered_files = count_files(&paths.recovered)?;
            std::fs::create_dir(&tomb).map_err(|e| StoreError::io("create", &tomb, e))?;
            // The one step that deletes: after it, no writer finds the transcript.
            std::fs::rename(&paths.dir, tomb.join("history"))
                .map_err(|e| StoreError::io("move away", &paths.dir, e))?;
            drop(lock);
            report.existed = true;
            report.other_files += 2; // the receipt and the lock
        }
        if memories.exists() {
            report.memory_files = count_files(&memories)?;
            std::fs::create_dir_all(&tomb).map_err(|e| StoreError::io("create", &tomb, e))?;
            std::fs::rename(&memories, tomb.join("memories"))
                .map_err(|e| StoreError::io("move away", &memories, e))?;
            report.existed = true;
        }
        if budget.exists() {
            std::fs::create_dir_all(&tomb).map_err(|e| StoreError::io("create", &tomb, e))?;
            std::fs::rename(&budget, tomb.join("budget.json"))
                .map_err(|e| StoreError::io("move away", &budget, e))?;
            report.other_files += 1;
            report.existed = true;
        }
        // This delete's files, and any an interrupted delete left behind.
        for leftover in tombs(ws)? {
            std::fs::remove_dir_all(&leftover)
                .map_err(|e| StoreError::io("remove", &leftover, e))?;
        }
        if report.existed {
            // Only if nothing of the host's is left in it.
            let _ = std::fs::remove_dir(ws);
        }
        Ok(report)
    }
}

/// Regular files under `dir` (0 if it does not exist).
fn count_files(dir: &Path) -> Result<u64> {
    let entries = match std::fs::read_dir(dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(0),
        Err(e) if e.raw_os_error() == Some(libc::ENOTDIR) => return Ok(1),
        Err(e) => return Err(StoreError::io("list", dir, e)),
    };
    let mut n = 0;
    for entry in entries {
        let entry = entry.map_err(|e| StoreError::io("list", dir, e))?;
        let kind = entry
            .file_type()
            .map_err(|e| StoreError::io("stat", entry.path(), e))?;
        n += if kind.is_dir() {
            count_files(&entry.path())?
        } else {
            1
        };
    }
    Ok(n)
}

/// The delete directories in `ws` (this one's and interrupted ones').
fn tombs(ws: &Path) -> Result<Vec<PathBuf>> {
    let entries = match std::fs::read_dir(ws) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(StoreError::io("list", ws, e)),
    };
    Ok(entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with(TOMB_PREFIX))
        .map(|e| e.path())
        .collect())
}
