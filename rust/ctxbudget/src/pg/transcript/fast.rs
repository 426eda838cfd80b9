//! One round trip for the common append: when the handle's index is current (same
//! epoch, same last seq as the database), the batch is encoded for the seqs that follow
//! and written by ONE statement in autocommit, which locks the conversation's row only if
//! its epoch and last seq are still those the batch was encoded for, inserts the rows
//! and moves the counters. If anything changed (another host appended, a rotation, a
//! prune, a delete) it writes nothing and the locking path ([`PgHistory::append_locked`])
//! runs instead, under the same batch id: an attempt whose acknowledgement was lost is
//! found there by its id and never committed twice.

use super::{PgHistory, PgIndex};
use crate::pg::{to_i64, BatchSeqs, PgError};
use crate::store::AppendResult;
use crate::transcript::input::{Incoming, RawRow};
use crate::transcript::log::{encode_batch, MAX_SEQ};

/// The conditional append: `$9`/`$10` are the epoch and last seq the batch was encoded
/// for. The CTE `c` moves the counters only if the conversation's row still holds them
/// (an `UPDATE` takes the row lock; one that waited for another writer checks them again
/// on the row that writer left), and marks the statement's transaction as the library's
/// append (the insert trigger's `WHEN`) before any row is inserted: its `RETURNING`
/// feeds the insert. Nothing is inserted unless `c` moved the counters; a failed insert
/// fails the whole statement, counters included (one statement, autocommit). Updating
/// first instead of locking with `SELECT … FOR UPDATE` and updating after the insert
/// spares the server a row lock (and its WAL record) and a subquery per append. Returns
/// the epoch, or no row when nothing was written.
const APPEND_IF_CURRENT: &str = "WITH c AS ( \
       UPDATE ctxbudget_conversations \
       SET last_seq = $7::int8, floor_seq = GREATEST(floor_seq, $8::int8) \
       WHERE conversation = $1 AND epoch = $9::int8 AND last_seq = $10::int8 \
       RETURNING conversation, epoch, \
                 set_config('ctxbudget.appending', conversation, true) AS mark), \
     ins AS ( \
       INSERT INTO ctxbudget_rows (conversation, seq, body, floor, batch_id, batch_last) \
       SELECT c.conversation, t.s, t.b, t.f, \
              CASE WHEN t.s = $5::int8 THEN $6::text END, \
              CASE WHEN t.s = $5::int8 THEN $7::int8 END \
       FROM c, unnest($2::int8[], $3::bytea[], $4::bool[]) AS t(s, b, f)) \
     SELECT epoch FROM c";

impl PgHistory {
    /// The append of `raws` in one statement, if the index is current; `None` when the
    /// locking path must run (the index is stale or not loaded, a condition or a row
    /// needs its checks there, or the server refused the statement: that path gives the
    /// verdict). A server that stayed away past the store's retries is the caller's
    /// error at once, as the locking path would report it after retrying as long again.
    pub(super) fn append_fast(
        &self,
        ix: &mut PgIndex,
        expected_last_seq: Option<u64>,
        raws: &[RawRow<'_>],
        batch_id: &str,
    ) -> Option<Result<AppendResult, PgError>> {
        let epoch = ix.epoch?;
        let last_seq = ix.last_seq;
        if raws.is_empty() || expected_last_seq.is_some_and(|e| e != last_seq) {
            return None;
        }
        let incoming: Vec<Incoming<'_>> = raws.iter().cloned().map(Incoming::Raw).collect();
        // A row that fails its checks goes the locking way, which reports it.
        let (lines, window) =
            encode_batch(&incoming, last_seq, &ix.fold, self.max_row_bytes, MAX_SEQ).ok()?;
        let first = lines.first()?.seq;
        let last = lines.last()?.seq;
        let bodies: Vec<&[u8]> = lines.iter().map(|r| r.body.as_slice()).collect();
        let floors: Vec<bool> = lines.iter().map(|r| r.floor).collect();
        let batch = BatchSeqs::new(first, &floors);
        let conversation = self.conversation.id();
        let (epoch_i, last_seq_i) = (to_i64(epoch), to_i64(last_seq));
        let written = self.conversation.store().run(|c| {
            let s = c.statement(APPEND_IF_CURRENT)?;
            let rows = c
                .client
                .query(
                    &s,
                    &[
                        &conversation,
                        &batch.seqs,
                        &bodies,
                        &floors,
                        &batch.first,
                        &batch_id,
                        &batch.last,
                        &batch.floor,
                        &epoch_i,
                        &last_seq_i,
                    ],
                )
                .map_err(PgError::db("appending rows"))?;
            Ok(rows.first().map(|r| r.get::<_, i64>(0)))
        });
        let epoch_after = match written {
            Ok(Some(e)) => crate::pg::from_i64(e),
            Err(e) if e.is_transient() || matches!(e, PgError::Closed) => return Some(Err(e)),
            Ok(None) | Err(_) => return None,
        };
        for r in &lines {
            ix.note(r.seq, &r.body, r.floor);
        }
        ix.last_seq = last;
        Some(Ok(AppendResult {
            first_seq: first,
            last_seq: last,
            epoch: epoch_after,
            window: window.to_string(),
        }))
    }
}
