//! One `session_history` page over a byte log: the handle's index as the entries, the
//! rows' bytes fetched from the log on demand, each fetch checked against the epoch the
//! index was read under, so every byte a page returns belongs to that epoch's rows.

use super::index::RowIndex;
use super::ByteLog;
use crate::store::page::{PageError, PageSource};
use crate::transcript::{RowEntry, RowHead};

/// A page's view of a byte log.
pub(super) struct LogSource<'a, L> {
    ix: &'a RowIndex,
    log: &'a L,
}

impl<'a, L: ByteLog> LogSource<'a, L> {
    pub(super) fn new(ix: &'a RowIndex, log: &'a L) -> LogSource<'a, L> {
        LogSource { ix, log }
    }
}

impl<L: ByteLog> PageSource<RowHead> for LogSource<'_, L> {
    /// A byte log keeps every row in one sequence.
    fn archive(&self) -> &[RowEntry] {
        &[]
    }

    fn chat(&self) -> &[RowEntry] {
        &self.ix.entries
    }

    fn floor_seq(&self) -> u64 {
        self.ix.fold.floor_seq()
    }

    /// A batch is appended whole or not at all: no damaged regions.
    fn damage(&self) -> (Option<u64>, Option<u64>) {
        (None, None)
    }

    fn epoch(&self) -> Option<u64> {
        self.ix.epoch
    }

    /// The epoch alone binds a cursor: any change other than an append gives the log a
    /// new one.
    fn anchor(&self) -> (u64, Option<u32>) {
        (self.ix.end, None)
    }

    fn anchor_holds(&self, _offset: u64, _crc: u32) -> bool {
        false
    }

    /// Every byte read was checked against the index's epoch as it was read.
    fn unchanged(&self) -> bool {
        true
    }

    fn read(&self, _file: u8, offset: u64, len: usize) -> Result<Vec<u8>, PageError> {
        let entries = &self.ix.entries;
        let first = entries.partition_point(|e| e.offset < offset);
        let last = entries.partition_point(|e| e.offset < offset + len as u64);
        if first >= last || entries[first].offset != offset {
            return Err(PageError::Changed);
        }
        let seqs = &self.ix.seqs[first..last];
        let fetched = self
            .log
            .bodies(seqs[0], seqs[seqs.len() - 1])
            .map_err(|e| {
                PageError::Unavailable(format!("the transcript cannot be read right now: {e}"))
            })?;
        if Some(fetched.epoch) != self.ix.epoch || fetched.rows.len() != seqs.len() {
            return Err(PageError::Changed);
        }
        let mut out = Vec::with_capacity(len + 1);
        for ((e, &seq), (got, body)) in entries[first..last].iter().zip(seqs).zip(&fetched.rows) {
            if *got != seq || body.len() != e.len as usize {
                return Err(PageError::Changed);
            }
            out.extend_from_slice(body);
            out.push(b'\n');
        }
        if out.len() < len {
            return Err(PageError::Changed);
        }
        out.truncate(len);
        Ok(out)
    }
}
