//! What one `session_history` page walks: a store's index entries in a consistent
//! snapshot, the epoch and anchor cursors are bound to, and the rows' bytes. The file
//! store's snapshot reads them from its two files under the history lock; the PostgreSQL
//! store's from one repeatable-read transaction. The walk itself (floor, windows,
//! budgets, cursors) is the same code for both.

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;

use super::{changed, Failure};
use crate::store::frame::Entry;
use crate::store::{commit_crc_before, Snapshot};

/// A consistent view of one store for one page.
pub(crate) trait Source {
    /// Entries of the archive, oldest first (file 0).
    fn archive(&self) -> &[Entry];
    /// Entries of the live rows, oldest first (file 1).
    fn chat(&self) -> &[Entry];
    /// The privacy floor the store recorded (rows or receipt; damage cannot lower it).
    fn floor_seq(&self) -> u64;
    /// Offsets of the last damaged region of the archive and of the live rows.
    fn damage(&self) -> (Option<u64>, Option<u64>);
    /// The epoch cursors are bound to, when the store vouches for one.
    fn epoch(&self) -> Option<u64>;
    /// The anchor a minted cursor records: an offset and, when there is one, the CRC
    /// that must still be found there.
    fn anchor(&self) -> (u64, Option<u32>);
    /// Whether the anchor a cursor recorded still holds.
    fn anchor_holds(&self, offset: u64, crc: u32) -> bool;
    /// Whether the rows are still the snapshot's when the page is done.
    fn unchanged(&self) -> bool;
    /// `len` bytes at `offset` of `file`, exactly as the entries describe them (rows
    /// separated by one newline).
    fn read(&self, file: u8, offset: u64, len: usize) -> Result<Vec<u8>, Failure>;
}

/// The file store's snapshot, its files opened on first read.
pub(crate) struct FileSource<'a> {
    snap: &'a Snapshot<'a>,
    files: RefCell<[Option<File>; 2]>,
}

impl<'a> FileSource<'a> {
    pub(crate) fn new(snap: &'a Snapshot<'a>) -> FileSource<'a> {
        FileSource {
            snap,
            files: RefCell::new([None, None]),
        }
    }
}

fn stat(path: &std::path::Path) -> Option<crate::store::Stamp> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| crate::store::Stamp::of_metadata(&m))
}

impl Source for FileSource<'_> {
    fn archive(&self) -> &[Entry] {
        self.snap.archive
    }

    fn chat(&self) -> &[Entry] {
        self.snap.chat
    }

    fn floor_seq(&self) -> u64 {
        self.snap.floor_seq
    }

    fn damage(&self) -> (Option<u64>, Option<u64>) {
        (self.snap.archive_damage, self.snap.chat_damage)
    }

    fn epoch(&self) -> Option<u64> {
        self.snap.receipt_vouches()
    }

    fn anchor(&self) -> (u64, Option<u32>) {
        (self.snap.chat_committed_end, self.snap.chat_last_crc)
    }

    fn anchor_holds(&self, offset: u64, crc: u32) -> bool {
        commit_crc_before(&self.snap.paths.chat, offset).is_ok_and(|at| at == Some(crc))
    }

    /// The lock was held throughout, but an untracked writer may still have touched the
    /// files: never hand out data from a page that changed under us.
    fn unchanged(&self) -> bool {
        stat(&self.snap.paths.chat) == self.snap.chat_stamp
            && stat(&self.snap.paths.archive) == self.snap.archive_stamp
    }

    fn read(&self, file: u8, offset: u64, len: usize) -> Result<Vec<u8>, Failure> {
        let mut files = self.files.borrow_mut();
        let slot = &mut files[usize::from(file.min(1))];
        if slot.is_none() {
            let path = if file == 0 {
                &self.snap.paths.archive
            } else {
                &self.snap.paths.chat
            };
            let f = crate::store::open_read(path).map_err(|e| {
                Failure::new(
                    "history_unavailable",
                    format!("cannot open the transcript: {e}"),
                )
            })?;
            *slot = Some(f);
        }
        let f = slot
            .as_ref()
            .ok_or_else(|| Failure::new("history_unavailable", "transcript not open"))?;
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, offset).map_err(|_| changed())?;
        Ok(buf)
    }
}
