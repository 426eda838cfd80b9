//! Reading: rows from a seq (or from the current window), window runs, the floor, the
//! receipt, the state, and consistent snapshots for `session_history`.

use std::collections::HashMap;
use std::fs::File;
use std::path::Path;
use std::sync::TryLockError;

use super::fsutil;
use super::index::{Entry, Snapshot};
use super::receipt::{self, ReceiptRead};
use super::rows::FileRows;
use super::{
    commit_crc_before, open_read, FileStore, ReadFrom, Result, RowsRead, StateDetail, StoreError,
    StoreState, StoredRow, WindowInfo,
};

impl<R: FileRows> FileStore<R> {
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
        if let ReadFrom::Seq(first_seq) = from {
            if let Some(nothing_new) = self.read_nothing_new(first_seq) {
                return Ok(nothing_new);
            }
        }
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        let ix = Self::index(&locked)?;
        let first_seq = match from {
            ReadFrom::Seq(seq) => seq,
            ReadFrom::CurrentWindow => ix.current_window_seq(),
        };
        // Walk back from the end to the first row read: O(rows returned), however long
        // the transcript (an agent loop asks for the few rows appended since its last
        // step). Malformed lines just before that row are not part of the answer.
        let (chat, archive) = (self.paths.chat.as_path(), self.paths.archive.as_path());
        let mut all: Vec<(&Path, &Entry<R>)> = (ix.chat.entries.iter().rev().map(|e| (chat, e)))
            .chain(ix.archive.entries.iter().rev().map(|e| (archive, e)))
            .take_while(|(_, e)| e.head.as_ref().is_none_or(|h| R::seq(h) >= first_seq))
            .collect();
        while all.last().is_some_and(|(_, e)| e.head.is_none()) {
            all.pop();
        }
        all.reverse();
        let windows = ix.window_labels(all.iter().map(|(_, e)| *e));
        let mut out = Vec::with_capacity(all.len());
        let mut files: HashMap<&Path, File> = HashMap::new();
        for ((path, e), window) in all.iter().zip(windows) {
            let file = match files.entry(path) {
                std::collections::hash_map::Entry::Occupied(o) => o.into_mut(),
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(open_read(path).map_err(|err| StoreError::io("open", *path, err))?)
                }
            };
            let mut raw = vec![0u8; e.len as usize];
            use std::os::unix::fs::FileExt;
            if file.read_exact_at(&mut raw, e.offset).is_err() {
                continue; // the file shrank under us; the index is refreshed next time
            }
            out.push(StoredRow {
                seq: e.head.as_ref().map(R::seq),
                window,
                raw,
            });
        }
        Ok(RowsRead {
            rows: out,
            last_seq: ix.last_seq,
            floor_seq: ix.floor_seq(),
        })
    }

    /// The answer of [`read`](Self::read) from `first_seq` when it is past every row
    /// this process's index knows and neither file changed since the index was brought
    /// up to date: no rows, the index's last seq and floor. `None` sends the caller the
    /// locked way (anything to read, a file changed, no index yet, or a stat failed: the
    /// locked way then reports what is wrong).
    ///
    /// Without the history lock: it is what an agent loop asks before every request,
    /// and the lock is two `flock` calls and a `stat` of the lock file on top of the two
    /// `stat`s here. It is sound because the locked way, on the same stamps, would not
    /// change the index either (`refresh` trusts unchanged stamps) and would read no
    /// line; and a writer elsewhere changes a file's stamp (size, inode or times) before
    /// its change can be read, so stamps that are still the index's mean the files hold
    /// what the index says as of the second `stat` — any write still in flight is
    /// ordered after this read. This process's own writers hold the index's mutex for
    /// the whole of their change, so this only tries it: a busy index (a write, or a
    /// rollover whose lead-in reads the history on the thread that holds it) sends the
    /// caller the locked way, which waits at most the lock timeout — never for ever.
    fn read_nothing_new(&self, first_seq: u64) -> Option<RowsRead> {
        let index = match self.index.try_lock() {
            Ok(guard) => guard,
            Err(TryLockError::Poisoned(poisoned)) => poisoned.into_inner(),
            Err(TryLockError::WouldBlock) => return None,
        };
        let ix = index.as_ref()?;
        // No chat file yet: the lock's check is what tells a deleted workspace apart.
        let known_chat = ix.chat_stamp?;
        if first_seq <= ix.last_seq {
            return None;
        }
        let chat = fsutil::stamp(&self.paths.chat).ok()?;
        let archive = fsutil::stamp(&self.paths.archive).ok()?;
        (chat == Some(known_chat) && archive == ix.archive_stamp).then(|| RowsRead {
            rows: Vec::new(),
            last_seq: ix.last_seq,
            floor_seq: ix.floor_seq(),
        })
    }

    /// Contiguous window runs, oldest first.
    pub fn windows(&self) -> Result<Vec<WindowInfo>> {
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        let ix = Self::index(&locked)?;
        Ok(ix.window_runs())
    }

    /// Seq of the newest privacy floor, rows and receipt (0: none).
    pub fn floor_seq(&self) -> Result<u64> {
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        Ok(Self::index(&locked)?.floor_seq())
    }

    /// ID of the window new rows go to.
    pub fn current_window(&self) -> Result<String> {
        let mut locked = self.lock()?;
        self.refresh(&mut locked)?;
        Ok(R::window_label(Self::index(&locked)?.fold()))
    }

    /// The receipt as it is on disk.
    pub fn receipt(&self) -> Result<ReceiptRead> {
        let _locked = self.lock()?;
        receipt::read(&self.paths.receipt)
    }

    /// Epoch (the receipt's), last seq and floor under one hold of the lock, with the
    /// receipt as it is on disk.
    pub fn state(&self) -> Result<StoreState> {
        let mut locked = self.lock()?;
        let receipt = self.refresh(&mut locked)?;
        let ix = Self::index(&locked)?;
        Ok(StoreState {
            epoch: receipt.valid().map(|r| r.epoch),
            last_seq: ix.last_seq,
            floor_seq: ix.floor_seq(),
            detail: StateDetail::File { receipt },
        })
    }

    /// Runs `f` on a consistent view of the store: the history lock is held for the
    /// whole call and the index is brought up to date first (appends by others are read
    /// incrementally; recovery never runs here).
    pub(crate) fn with_snapshot<T>(
        &self,
        f: impl FnOnce(&Snapshot<'_, R::Head>) -> T,
    ) -> Result<T> {
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
            floor_seq: ix.floor_seq(),
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
}
