//! Retention in the PostgreSQL store: deleting a conversation for good and pruning its
//! oldest rows, each in one transaction under the conversation's row lock.
//!
//! Both mark their transaction (`ctxbudget.maintaining` = the conversation) so the
//! per-row trigger that renews the epoch on a hand edit stays out of the way (schema
//! version 4), and a prune gives the conversation one new epoch itself: cursors minted
//! before it answer `history_changed`. An append waiting on the lock while a delete
//! commits finds no conversation and fails ([`crate::store::HistoryError::Deleted`]
//! through the transcript layer, [`PgError::NoConversation`] here); it never writes into
//! a half-deleted one.

use super::{
    check_id, from_i64, to_i64, PgConversation, PgError, PgStore, Result, CONVERSATION_ID_MAX,
};
pub use crate::store::{DeleteReport, PruneReport};

/// Locks the conversation for a delete or prune and marks the transaction as the
/// library's maintenance of it. Columns: last_seq, floor_seq, pruned_before.
const LOCK_FOR_MAINTENANCE: &str = "SELECT last_seq, floor_seq, pruned_before, \
       set_config('ctxbudget.maintaining', conversation, true) \
     FROM ctxbudget_conversations WHERE conversation = $1 FOR UPDATE";

/// What a delete removes: rows, their bytes, memory files, the budget record.
const COUNT_FOR_DELETE: &str = "SELECT \
       (SELECT count(*) FROM ctxbudget_rows WHERE conversation = $1), \
       (SELECT coalesce(sum(octet_length(body)), 0)::int8 FROM ctxbudget_rows \
          WHERE conversation = $1), \
       (SELECT count(*) FROM ctxbudget_memory_files WHERE conversation = $1), \
       (SELECT count(*) FROM ctxbudget_budgets WHERE conversation = $1)";

/// Removes the rows below `$2`, returning how many and their bytes.
const PRUNE_ROWS: &str = "WITH gone AS ( \
       DELETE FROM ctxbudget_rows WHERE conversation = $1 AND seq < $2 \
       RETURNING octet_length(body) AS n) \
     SELECT count(*), coalesce(sum(n), 0)::int8 FROM gone";

/// Records the prune and gives the conversation a new epoch.
const MARK_PRUNED: &str = "UPDATE ctxbudget_conversations \
     SET pruned_before = $2, archived_before = GREATEST(archived_before, $2), \
         epoch = ctxbudget_new_epoch() \
     WHERE conversation = $1 RETURNING epoch, floor_seq";

impl PgStore {
    /// Deletes conversation `id` for good — its rows, memory files and counters — in one
    /// transaction, after any append in flight to it has committed. Reports what was
    /// removed (`existed = false`: there was no such conversation). Opening the id again
    /// starts an empty conversation under a new epoch; handles still open on the old one
    /// fail on their next write. The database's cursor key is shared by every
    /// conversation and stays.
    pub fn delete(&self, id: &str) -> Result<DeleteReport> {
        check_id("conversation id", id, CONVERSATION_ID_MAX)?;
        self.run(|c| {
            let lock = c.statement(LOCK_FOR_MAINTENANCE)?;
            let count = c.statement(COUNT_FOR_DELETE)?;
            let delete =
                c.statement("DELETE FROM ctxbudget_conversations WHERE conversation = $1")?;
            let mut tx = c.client.transaction().map_err(PgError::db("BEGIN"))?;
            let found = tx
                .query(&lock, &[&id])
                .map_err(PgError::db("locking the conversation"))?;
            if found.is_empty() {
                return Ok(DeleteReport::default());
            }
            let counts = tx
                .query_one(&count, &[&id])
                .map_err(PgError::db("counting the conversation's rows"))?;
            tx.execute(&delete, &[&id])
                .map_err(PgError::db("deleting the conversation"))?;
            tx.commit().map_err(PgError::commit_of("a delete"))?;
            Ok(DeleteReport {
                existed: true,
                rows: from_i64(counts.get(0)),
                bytes: from_i64(counts.get(1)),
                memory_files: from_i64(counts.get(2)),
                recovered_files: 0,
                other_files: from_i64(counts.get(3)),
            })
        })
    }
}

impl PgConversation {
    /// Removes for good every row below `cut` (held to the last seq + 1) and gives the
    /// conversation a new epoch; the privacy floor stays where it is. The transcript
    /// layer's [`PgHistory::prune`](super::PgHistory::prune) picks a cut on a window
    /// boundary; this call removes what it is told.
    pub fn prune_before(&self, cut: u64) -> Result<PruneReport> {
        let conversation = self.id();
        let cut = to_i64(cut);
        self.store().run(|c| {
            let lock = c.statement(LOCK_FOR_MAINTENANCE)?;
            let prune = c.statement(PRUNE_ROWS)?;
            let mark = c.statement(MARK_PRUNED)?;
            let mut tx = c.client.transaction().map_err(PgError::db("BEGIN"))?;
            let row = tx
                .query(&lock, &[&conversation])
                .map_err(PgError::db("locking the conversation"))?
                .into_iter()
                .next()
                .ok_or_else(|| PgError::NoConversation(conversation.to_string()))?;
            let (last, floor, pruned): (i64, i64, i64) = (row.get(0), row.get(1), row.get(2));
            let target = cut.min(last.saturating_add(1));
            if target <= pruned {
                return Ok(PruneReport {
                    kept_from: from_i64(pruned),
                    floor_seq: from_i64(floor),
                    ..PruneReport::default()
                });
            }
            let gone = tx
                .query_one(&prune, &[&conversation, &target])
                .map_err(PgError::db("pruning rows"))?;
            let marked = tx
                .query_one(&mark, &[&conversation, &target])
                .map_err(PgError::db("recording the prune"))?;
            tx.commit().map_err(PgError::commit_of("a prune"))?;
            Ok(PruneReport {
                rows: from_i64(gone.get(0)),
                bytes: from_i64(gone.get(1)),
                kept_from: from_i64(target),
                floor_seq: from_i64(marked.get(1)),
                epoch: Some(from_i64(marked.get(0))),
            })
        })
    }

    /// The first seq not pruned (1 when nothing was).
    pub fn pruned_before(&self) -> Result<u64> {
        let conversation = self.id();
        self.store().run(|c| {
            let s = c.statement(
                "SELECT pruned_before FROM ctxbudget_conversations WHERE conversation = $1",
            )?;
            let rows = c
                .client
                .query(&s, &[&conversation])
                .map_err(PgError::db("reading the conversation"))?;
            rows.first()
                .map(|r| from_i64(r.get(0)))
                .ok_or_else(|| PgError::NoConversation(conversation.to_string()))
        })
    }
}
