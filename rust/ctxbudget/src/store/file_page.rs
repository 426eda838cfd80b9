//! The file store's view for a `session_history` page: its index snapshot, taken under
//! the history lock, its archive's rows then its live file's as one sequence, and the
//! bytes of its two files, a run of rows read as one contiguous range of a file.

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;

use super::frame::Entry;
use super::index::Snapshot;
use super::page::{Binding, PageError, PageSource, RowMark, Run};
use super::{commit_crc_before, open_read, Stamp};

/// Rows of one file at most this far apart are read in one range, so a page is a few
/// large reads (the bytes between are read and dropped).
const MERGE_GAP: u64 = 64 * 1024;

/// The file store's snapshot, its files opened on first read.
pub(crate) struct FileSource<'a, H> {
    snap: &'a Snapshot<'a, H>,
    files: RefCell<[Option<File>; 2]>,
}

impl<'a, H> FileSource<'a, H> {
    pub(crate) fn new(snap: &'a Snapshot<'a, H>) -> FileSource<'a, H> {
        FileSource {
            snap,
            files: RefCell::new([None, None]),
        }
    }

    /// The file (0 archive, 1 chat) and entry of the row at `position`.
    fn at(&self, position: usize) -> Option<(u8, &'a Entry<H>)> {
        let archived = self.snap.archive.len();
        match position.checked_sub(archived) {
            None => self.snap.archive.get(position).map(|e| (0, e)),
            Some(p) => self.snap.chat.get(p).map(|e| (1, e)),
        }
    }

    /// Rows of `file` before `offset`.
    fn rows_before(&self, file: u8, offset: u64) -> usize {
        let archive = self.snap.archive;
        if file == 0 {
            archive.partition_point(|e| e.offset < offset)
        } else {
            archive.len() + self.snap.chat.partition_point(|e| e.offset < offset)
        }
    }

    /// `len` bytes at `offset` of `file`.
    fn read(&self, file: u8, offset: u64, len: usize) -> Result<Vec<u8>, PageError> {
        let mut files = self.files.borrow_mut();
        let slot = &mut files[usize::from(file.min(1))];
        if slot.is_none() {
            let path = if file == 0 {
                &self.snap.paths.archive
            } else {
                &self.snap.paths.chat
            };
            let f = open_read(path)
                .map_err(|e| PageError::Unavailable(format!("cannot open the transcript: {e}")))?;
            *slot = Some(f);
        }
        let f = slot
            .as_ref()
            .ok_or_else(|| PageError::Unavailable("transcript not open".to_owned()))?;
        let mut buf = vec![0u8; len];
        f.read_exact_at(&mut buf, offset)
            .map_err(|_| PageError::Changed)?;
        Ok(buf)
    }
}

fn stat(path: &std::path::Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| Stamp::of_metadata(&m))
}

impl<H> PageSource<H> for FileSource<'_, H> {
    fn rows(&self) -> Vec<&Entry<H>> {
        self.snap.archive.iter().chain(self.snap.chat).collect()
    }

    fn floor_seq(&self) -> u64 {
        self.snap.floor_seq
    }

    /// Damage in the live file lies after every archived row, so it is the last region
    /// when there is any.
    fn damage(&self) -> Option<usize> {
        match (self.snap.archive_damage, self.snap.chat_damage) {
            (_, Some(d)) => Some(self.rows_before(1, d)),
            (Some(d), None) => Some(self.rows_before(0, d)),
            (None, None) => None,
        }
    }

    /// The receipt's epoch, when it is stable and matches the files, and the last commit
    /// of the live file: a same-size rewrite keeps the stamps but not that CRC.
    fn binding(&self) -> Option<Binding> {
        Some(Binding {
            epoch: self.snap.receipt_vouches()?,
            anchor: self
                .snap
                .chat_last_crc
                .map(|crc| (self.snap.chat_committed_end, crc)),
        })
    }

    fn binds(&self, binding: &Binding) -> bool {
        self.snap.receipt_vouches() == Some(binding.epoch)
            && binding.anchor.is_none_or(|(offset, crc)| {
                commit_crc_before(&self.snap.paths.chat, offset).is_ok_and(|at| at == Some(crc))
            })
    }

    /// The row's file and its offset in it.
    fn mark(&self, position: usize) -> Option<RowMark> {
        self.at(position)
            .map(|(part, e)| RowMark { part, at: e.offset })
    }

    fn find(&self, mark: RowMark) -> Option<usize> {
        let p = self.rows_before(mark.part, mark.at);
        match self.at(p) {
            Some((part, e)) if part == mark.part && e.offset == mark.at => Some(p),
            _ => None,
        }
    }

    /// The lock was held throughout, but an untracked writer may still have touched the
    /// files: never hand out data from a page that changed under us.
    fn unchanged(&self) -> bool {
        stat(&self.snap.paths.chat) == self.snap.chat_stamp
            && stat(&self.snap.paths.archive) == self.snap.archive_stamp
    }

    /// The rows of one file lying at most [`MERGE_GAP`] apart, read as one range.
    fn bodies(&self, positions: &[usize]) -> Result<Run, PageError> {
        let mut rows = positions
            .iter()
            .map(|&p| self.at(p).ok_or(PageError::Changed));
        let Some(row) = rows.next() else {
            return Ok(Run::default());
        };
        let (file, first) = row?;
        let mut run = vec![first];
        let mut last = first;
        for row in rows {
            let (f, e) = row?;
            let end = last.offset + u64::from(last.len) + 1;
            if f != file || e.offset > end + MERGE_GAP {
                break;
            }
            run.push(e);
            last = e;
        }
        let span_end = last.offset + u64::from(last.len);
        let len = usize::try_from(span_end - first.offset).map_err(|_| PageError::Changed)?;
        let bytes = self.read(file, first.offset, len)?;
        let lines = run
            .iter()
            .map(|e| {
                let from = (e.offset - first.offset) as usize;
                (from, from + e.len as usize)
            })
            .collect();
        Ok(Run { bytes, lines })
    }
}
