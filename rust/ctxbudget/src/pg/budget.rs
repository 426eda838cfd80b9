//! A conversation's budget record: what `budget.json` is to a workspace (the budgets its
//! sessions ran with and the request overhead per window, as the Python package writes
//! them), kept as opaque bytes in `ctxbudget_budgets` and deleted with the conversation.

use super::{PgConversation, PgError, Result};

/// Largest budget record, in bytes (the table's check).
pub const BUDGET_RECORD_MAX: usize = 65_536;

impl PgConversation {
    /// The budget record, as stored (`None`: none was written).
    pub fn budget_record(&self) -> Result<Option<Vec<u8>>> {
        let conversation = self.id();
        self.store().run(|c| {
            let s = c.statement("SELECT record FROM ctxbudget_budgets WHERE conversation = $1")?;
            let rows = c
                .client
                .query(&s, &[&conversation])
                .map_err(PgError::db("reading the budget record"))?;
            Ok(rows.first().map(|r| r.get(0)))
        })
    }

    /// Replaces the budget record (at most [`BUDGET_RECORD_MAX`] bytes). Idempotent, so
    /// retried like an append when the connection breaks.
    pub fn set_budget_record(&self, record: &[u8]) -> Result<()> {
        if record.len() > BUDGET_RECORD_MAX {
            return Err(PgError::Invalid(format!(
                "a budget record has {} bytes, over the {BUDGET_RECORD_MAX}-byte limit; \
                 nothing was written",
                record.len()
            )));
        }
        let conversation = self.id();
        self.store().run(|c| {
            let s = c.statement(
                "INSERT INTO ctxbudget_budgets (conversation, record) VALUES ($1, $2) \
                 ON CONFLICT (conversation) DO UPDATE \
                 SET record = excluded.record, updated_at = now()",
            )?;
            c.client
                .execute(&s, &[&conversation, &record])
                .map_err(PgError::db("writing the budget record"))?;
            Ok(())
        })
    }
}
