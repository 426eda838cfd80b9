//! One `session_history` page over a store that fetches row bodies by seq — a byte log
//! under [`LogStore`](super::LogStore), a PostgreSQL conversation: the handle's
//! [`RowIndex`] as the rows, cursors bound to its epoch and naming rows by seq, and the
//! bodies of a run of rows fetched in one range of seqs (those the store keeps in memory
//! taken from there), each fetch checked against the index's epoch, so every byte a page
//! returns belongs to that epoch's rows.

use super::index::RowIndex;
use super::{Bodies, ByteLog};
use crate::store::page::{Binding, PageError, PageSource, RowMark, Run};
use crate::transcript::{RowEntry, RowHead};

/// How a cursor of a store that fetches bodies by seq names its rows' part; not the file
/// store's 0 and 1 (archive, chat), so a cursor whose `at` was an offset never lands on a
/// row with that seq.
const BY_SEQ: u8 = 2;

/// Rows whose bodies lie at most this many bytes apart are fetched in one range (the
/// rows between are fetched and dropped), so a page is a few fetches.
const MERGE_GAP: u64 = 64 * 1024;

/// Where a page's bodies come from, by seq.
pub(crate) trait FetchBodies {
    /// The body of the row at `seq` as the handle keeps it in memory (`None`: fetch it).
    fn kept(&self, seq: u64) -> Option<&[u8]> {
        let _ = seq;
        None
    }

    /// The bodies of the rows with seqs in `from..=to`, oldest first, read in one moment,
    /// with the epoch of that moment.
    fn fetch(&self, from: u64, to: u64) -> Result<Bodies, PageError>;
}

/// A byte log's bodies, all fetched.
pub(crate) struct LogBodies<'a, L>(pub &'a L);

impl<L: ByteLog> FetchBodies for LogBodies<'_, L> {
    fn fetch(&self, from: u64, to: u64) -> Result<Bodies, PageError> {
        self.0.bodies(from, to).map_err(|e| {
            PageError::Unavailable(format!("the transcript cannot be read right now: {e}"))
        })
    }
}

/// A page's view of a store that fetches bodies by seq.
pub(crate) struct SeqSource<'a, F> {
    ix: &'a RowIndex,
    bodies: F,
}

impl<'a, F: FetchBodies> SeqSource<'a, F> {
    /// The view of `ix`, its bodies from `bodies`.
    pub(crate) fn new(ix: &'a RowIndex, bodies: F) -> SeqSource<'a, F> {
        SeqSource { ix, bodies }
    }

    /// How many of `positions` (ascending) start a run fetched at once: the next row
    /// joins while the rows skipped before it hold at most [`MERGE_GAP`] bytes.
    fn run_len(&self, positions: &[usize]) -> usize {
        let entries = &self.ix.entries;
        let mut n = 1;
        for pair in positions.windows(2) {
            let mut gap = 0u64;
            for e in entries.get(pair[0] + 1..pair[1]).unwrap_or_default() {
                gap += u64::from(e.len) + 1;
                if gap > MERGE_GAP {
                    return n;
                }
            }
            n += 1;
        }
        n
    }
}

impl<F: FetchBodies> PageSource<RowHead> for SeqSource<'_, F> {
    /// Archived rows stay where they are: the page walks every row as one sequence.
    fn rows(&self) -> Vec<&RowEntry> {
        self.ix.entries.iter().collect()
    }

    fn floor_seq(&self) -> u64 {
        self.ix.fold.floor_seq()
    }

    /// A batch is stored whole or not at all: no damaged regions.
    fn damage(&self) -> Option<usize> {
        None
    }

    /// The epoch alone binds a cursor: any change other than an append gives the store a
    /// new one.
    fn binding(&self) -> Option<Binding> {
        self.ix.epoch.map(|epoch| Binding {
            epoch,
            anchor: None,
        })
    }

    fn binds(&self, binding: &Binding) -> bool {
        binding.anchor.is_none() && self.ix.epoch == Some(binding.epoch)
    }

    fn mark(&self, position: usize) -> Option<RowMark> {
        self.ix.seqs.get(position).map(|&seq| RowMark {
            part: BY_SEQ,
            at: seq,
        })
    }

    fn find(&self, mark: RowMark) -> Option<usize> {
        (mark.part == BY_SEQ)
            .then(|| self.ix.seqs.binary_search(&mark.at).ok())
            .flatten()
    }

    /// Every body was checked against the index's epoch as it was fetched.
    fn unchanged(&self) -> bool {
        true
    }

    fn bodies(&self, positions: &[usize]) -> Result<Run, PageError> {
        if positions.is_empty() {
            return Ok(Run::default());
        }
        let positions = &positions[..self.run_len(positions)];
        let seqs = positions
            .iter()
            .map(|&p| self.ix.seqs.get(p).copied())
            .collect::<Option<Vec<u64>>>()
            .ok_or(PageError::Changed)?;
        // The rows not kept in memory, fetched in one range.
        let mut missing = seqs.iter().filter(|&&s| self.bodies.kept(s).is_none());
        let fetched = match (missing.next(), missing.last()) {
            (Some(&from), last) => {
                let got = self.bodies.fetch(from, last.copied().unwrap_or(from))?;
                // Another epoch, or a row the index never saw (one written by hand into
                // a gap): the page would not describe what is stored.
                if Some(got.epoch) != self.ix.epoch
                    || got
                        .rows
                        .iter()
                        .any(|(s, _)| self.ix.seqs.binary_search(s).is_err())
                {
                    return Err(PageError::Changed);
                }
                got.rows
            }
            (None, _) => Vec::new(),
        };
        let mut run = Run::default();
        for (&p, &seq) in positions.iter().zip(&seqs) {
            let body = match self.bodies.kept(seq) {
                Some(body) => body,
                None => fetched
                    .binary_search_by_key(&seq, |(s, _)| *s)
                    .map(|i| fetched[i].1.as_slice())
                    .map_err(|_| PageError::Changed)?,
            };
            let entry = self.ix.entries.get(p).ok_or(PageError::Changed)?;
            if body.len() != entry.len as usize {
                return Err(PageError::Changed);
            }
            let from = run.bytes.len();
            run.bytes.extend_from_slice(body);
            run.lines.push((from, run.bytes.len()));
        }
        Ok(run)
    }
}
