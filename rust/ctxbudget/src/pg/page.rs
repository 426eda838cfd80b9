//! One `session_history` page over a PostgreSQL conversation: the handle's index,
//! brought up to date by one statement, as the view every store that fetches bodies by
//! seq shares ([`SeqSource`]), its bodies from the handle's body cache and, for what the
//! cache does not hold, from the server under the call's deadline.

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::bodies::BodyCache;
use super::deadline::{text_hex, text_i64, Deadline, Literal, Prepared};
use super::{from_i64, to_i64, CursorKey, PgError, PgHistory};
use crate::scan::{ScanOptions, SessionHistoryTool};
use crate::store::page::{PageError, RunPage};
use crate::store::StoreError;
use crate::transcript::log::page::{FetchBodies, SeqSource};
use crate::transcript::log::Bodies;
use crate::transcript::RowHead;

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
            let bodies = PgBodies {
                cache: &ix.bodies,
                history,
                deadline,
            };
            run(&SeqSource::new(ix, bodies));
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

/// Where a page over a conversation gets its bodies: the handle's body cache, and the
/// server for what it does not hold.
struct PgBodies<'a> {
    cache: &'a BodyCache,
    history: &'a PgHistory,
    /// When the call must have answered.
    deadline: Deadline,
}

impl FetchBodies for PgBodies<'_> {
    fn kept(&self, seq: u64) -> Option<&[u8]> {
        self.cache.get(seq)
    }

    /// Bodies of seqs `from..=to` from the server, with the epoch they were read under
    /// (every row carries it; rows of two epochs, or none, and the page has changed).
    fn fetch(&self, from: u64, to: u64) -> Result<Bodies, PageError> {
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
        let mut epoch = None;
        let mut rows = Vec::with_capacity(found.len());
        for (seq, body, at) in found {
            let (Some(seq), Some(body), Some(at)) = (seq, body, at) else {
                return Err(PageError::Changed);
            };
            if *epoch.get_or_insert(at) != at {
                return Err(PageError::Changed);
            }
            rows.push((seq, body));
        }
        let epoch = epoch.ok_or(PageError::Changed)?;
        Ok(Bodies { epoch, rows })
    }
}
