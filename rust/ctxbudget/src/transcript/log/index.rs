//! What a [`LogStore`](super::LogStore) handle knows of its log: one entry per row (its
//! strictly parsed head, its place in the rows laid end to end) and the window fold over
//! them, brought up to date with O(new rows) work.

use std::collections::HashMap;

use super::{LogRead, LogState};
use crate::store::{RowsRead, StoredRow};
use crate::transcript::head::read_line;
use crate::transcript::windows_of;
use crate::transcript::{RowEntry, WindowFold};

/// The rows' heads and the fold over them, for one epoch of a log.
#[derive(Debug, Default)]
pub(crate) struct RowIndex {
    /// The epoch the entries were read under (`None`: nothing read yet).
    pub epoch: Option<u64>,
    /// The log's last seq.
    pub last_seq: u64,
    /// One entry per row, in seq order; `offset` is the row's place in the rows laid
    /// end to end (each followed by a newline), which the page view walks.
    pub entries: Vec<RowEntry>,
    /// The log's seq of each entry (a row whose body does not parse has no head).
    pub seqs: Vec<u64>,
    /// The fold over every row.
    pub fold: WindowFold,
    /// Where the next row starts in the rows laid end to end.
    pub end: u64,
    /// The highest seq among rows that parse.
    max_row_seq: u64,
}

impl RowIndex {
    /// Notes the row stored at `seq`, which follows every row noted so far. A row whose
    /// body is not a row, or shows another seq than the one it is stored at, is
    /// malformed: readers skip it, and if it may be a soft clear it is a floor (fail
    /// closed). `false` when the row was noted already (a read retried after its
    /// connection broke sees it again).
    pub fn note(&mut self, seq: u64, body: &[u8], floor: bool) -> bool {
        if self.seqs.last().is_some_and(|&last| seq <= last) {
            return false;
        }
        let read = read_line(body);
        let mut entry = RowEntry {
            offset: self.end,
            len: u32::try_from(body.len()).unwrap_or(u32::MAX),
            head: read.head,
            reset_like: read.reset_like,
            claimed_seq: read.claimed_seq,
        };
        if let Some(h) = entry
            .head
            .take_if(|h| h.seq != seq || h.seq <= self.max_row_seq)
        {
            entry.reset_like = h.is_floor();
        }
        match &entry.head {
            Some(h) => {
                self.max_row_seq = h.seq;
                self.fold.note_head(h.as_head());
            }
            None => {
                entry.claimed_seq = Some(seq);
                if entry.reset_like {
                    self.fold.raise_floor(seq);
                }
            }
        }
        if floor {
            self.fold.raise_floor(seq);
        }
        self.end += body.len() as u64 + 1;
        self.entries.push(entry);
        self.seqs.push(seq);
        true
    }

    /// Takes the log's counters once its rows up to `state.last_seq` are noted.
    pub fn settle(&mut self, state: &LogState) {
        self.last_seq = self.last_seq.max(state.last_seq);
        self.fold.raise_floor(state.floor_seq);
        self.fold.skip_to(self.last_seq);
    }

    /// Brings the index up to `read` (the rows after what it holds, or all of them
    /// when `read` is of another epoch: then it starts over and returns `false` if
    /// `read` did not start at the beginning).
    pub fn absorb(&mut self, read: &LogRead, read_after: u64) -> bool {
        if self.epoch != Some(read.state.epoch) {
            *self = RowIndex {
                epoch: Some(read.state.epoch),
                ..RowIndex::default()
            };
            if read_after > 0 {
                return false;
            }
        }
        for r in &read.rows {
            if r.seq > self.last_seq {
                self.note(r.seq, &r.body, r.floor);
            }
        }
        self.settle(&read.state);
        true
    }

    /// Position of the first entry whose seq is at least `seq`.
    pub fn position(&self, seq: u64) -> usize {
        self.seqs.partition_point(|&s| s < seq)
    }

    /// The rows from position `at` with their windows, their bytes from `bodies`
    /// (read in the same epoch; one missing all the same is skipped, never invented).
    pub fn rows_read(&self, at: usize, bodies: &HashMap<u64, Vec<u8>>) -> RowsRead {
        let entries = &self.entries[at..];
        let windows = windows_of(entries.iter(), &self.fold);
        let rows = entries
            .iter()
            .zip(windows)
            .zip(&self.seqs[at..])
            .filter_map(|((e, window), seq)| {
                Some(StoredRow {
                    seq: e.head.as_ref().map(|h| h.seq),
                    window: window.to_string(),
                    raw: bodies.get(seq)?.clone(),
                })
            })
            .collect();
        RowsRead {
            rows,
            last_seq: self.last_seq,
            floor_seq: self.fold.floor_seq(),
        }
    }
}
