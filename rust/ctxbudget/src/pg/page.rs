//! One `session_history` page over a PostgreSQL conversation: the handle's index,
//! brought up to date by one statement, and the rows' bytes from the handle's body cache,
//! fetching only what it does not hold — each fetch checked against the epoch the index
//! was read under, so every byte a page returns belongs to that epoch's rows.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::deadline::{text_hex, text_i64, Deadline, Literal, Prepared};
use super::transcript::PgIndex;
use super::{from_i64, to_i64, CursorKey, PgError, PgHistory};
use crate::scan::{ScanOptions, SessionHistoryTool};
use crate::store::page::{PageError, PageSource, RunPage};
use crate::store::StoreError;
use crate::transcript::{RowEntry, RowHead};

/// Runs one `session_history` page over `history`, started at `start` with the time
/// limit `limit`: the index brought up to date and every fetch of rows end by the
/// deadline, whatever locks other sessions hold (see [`Deadline`]).
pub(crate) fn run_page(
    history: &PgHistory,
    start: Instant,
    limit: Duration,
    run: &mut RunPage<'_, RowHead>,
) -> Result<(), PageError> {
    let deadline = Deadline::new(start, limit);
    history
        .with_refreshed_by(u64::MAX, Some(deadline), |ix, _| {
            run(&PgSource::new(ix, history, deadline))
        })
        .map_err(|e| failure(e, deadline))
}

impl SessionHistoryTool {
    /// The tool over a PostgreSQL conversation, its cursors signed with `key` (the
    /// deployment's, see [`crate::pg::PgStore::cursor_key`]) so that a cursor minted on
    /// one host pages on another.
    pub fn over_pg(
        history: Arc<PgHistory>,
        key: CursorKey,
        options: ScanOptions,
    ) -> SessionHistoryTool {
        SessionHistoryTool::over(history, Some(key.as_bytes().to_vec()), options)
    }
}

/// A failure of the store as the call's result: out of time (`history_timeout`: the
/// server cancelled a wait, or the deadline passed while connecting) or unreadable
/// (`history_unavailable`).
fn failure(e: PgError, deadline: Deadline) -> PageError {
    let late = Instant::now() >= deadline.until;
    if late || matches!(e, PgError::Timeout { .. } | PgError::PoolTimeout { .. }) {
        return PageError::Timeout(format!("the transcript could not be read in time: {e}"));
    }
    PageError::Unavailable(format!(
        "the transcript cannot be read right now: {}",
        StoreError::from(e)
    ))
}

/// Bodies of a seq range (hex: [`Conn::query_by`](super::pool::Conn) answers in text),
/// with the epoch of the same snapshot.
const BODIES_WITH_EPOCH: Prepared = Prepared {
    name: "ctxbudget_page_bodies",
    sql: "(text, int8, int8) AS SELECT r.seq, encode(r.body, 'hex'), c.epoch \
          FROM ctxbudget_rows r JOIN ctxbudget_conversations c USING (conversation) \
          WHERE r.conversation = $1 AND r.seq >= $2 AND r.seq <= $3 ORDER BY r.seq",
};

/// A page's view of a conversation.
pub(crate) struct PgSource<'a> {
    ix: &'a PgIndex,
    history: &'a PgHistory,
    /// When the call must have answered.
    deadline: Deadline,
}

impl<'a> PgSource<'a> {
    fn new(ix: &'a PgIndex, history: &'a PgHistory, deadline: Deadline) -> PgSource<'a> {
        PgSource {
            ix,
            history,
            deadline,
        }
    }

    /// Bodies of seqs `from..=to` from the server, as of the index's epoch.
    fn fetch(&self, from: u64, to: u64) -> Result<Vec<(u64, Vec<u8>)>, PageError> {
        const WHAT: &str = "reading rows";
        let conversation = self.history.conversation().id();
        let deadline = self.deadline;
        let found = self
            .history
            .conversation()
            .store()
            .run_until(Some(deadline.until), |c| {
                let found = c.query_by(
                    deadline,
                    WHAT,
                    &BODIES_WITH_EPOCH,
                    &[
                        Literal::Text(conversation),
                        Literal::Int(to_i64(from)),
                        Literal::Int(to_i64(to)),
                    ],
                )?;
                found
                    .iter()
                    .map(|r| {
                        Ok((
                            text_i64(r, 0, WHAT)?.map(from_i64),
                            text_hex(r, 1, WHAT)?,
                            text_i64(r, 2, WHAT)?.map(from_i64),
                        ))
                    })
                    .collect::<Result<Vec<_>, PgError>>()
            })
            .map_err(|e| failure(e, deadline))?;
        let mut out = Vec::with_capacity(found.len());
        for (seq, body, epoch) in found {
            let (Some(seq), Some(body)) = (seq, body) else {
                return Err(PageError::Changed);
            };
            // Another epoch, or a row the index never saw (one written by hand into a
            // gap): the page would not describe what is stored.
            if epoch != self.ix.epoch || self.ix.seqs.binary_search(&seq).is_err() {
                return Err(PageError::Changed);
            }
            out.push((seq, body));
        }
        Ok(out)
    }
}

impl PageSource<RowHead> for PgSource<'_> {
    /// Archived rows stay where they are in the database; the page walks every row as
    /// one sequence.
    fn archive(&self) -> &[RowEntry] {
        &[]
    }

    fn chat(&self) -> &[RowEntry] {
        &self.ix.entries
    }

    fn floor_seq(&self) -> u64 {
        self.ix.fold.floor_seq()
    }

    /// A transaction is never torn: no damaged regions.
    fn damage(&self) -> (Option<u64>, Option<u64>) {
        (None, None)
    }

    fn epoch(&self) -> Option<u64> {
        self.ix.epoch
    }

    /// The epoch alone binds a cursor: any change other than an append gives the
    /// conversation a new one (a trigger sees to changes made by hand).
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
        // The rows the cache does not hold, fetched in one statement.
        let missing: Vec<u64> = seqs
            .iter()
            .copied()
            .filter(|&s| self.ix.bodies.get(s).is_none())
            .collect();
        let fetched = match (missing.first(), missing.last()) {
            (Some(&from), Some(&to)) => self.fetch(from, to)?,
            _ => Vec::new(),
        };
        let mut out = Vec::with_capacity(len + 1);
        for (e, &seq) in entries[first..last].iter().zip(seqs) {
            let body = match self.ix.bodies.get(seq) {
                Some(body) => body,
                None => fetched
                    .binary_search_by_key(&seq, |(s, _)| *s)
                    .map(|i| fetched[i].1.as_slice())
                    .map_err(|_| PageError::Changed)?,
            };
            if body.len() != e.len as usize {
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
