//! The file store's view for a `session_history` page: its index snapshot, taken under
//! the history lock, and the bytes of its two files.

use std::cell::RefCell;
use std::fs::File;
use std::os::unix::fs::FileExt;

use super::frame::Entry;
use super::index::Snapshot;
use super::page::{PageError, PageSource};
use super::{commit_crc_before, open_read, Stamp};

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
}

fn stat(path: &std::path::Path) -> Option<Stamp> {
    std::fs::symlink_metadata(path)
        .ok()
        .map(|m| Stamp::of_metadata(&m))
}

impl<H> PageSource<H> for FileSource<'_, H> {
    fn archive(&self) -> &[Entry<H>] {
        self.snap.archive
    }

    fn chat(&self) -> &[Entry<H>] {
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
