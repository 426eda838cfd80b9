//! The transcript's compound writes as methods of any store: `store.rollover(spec)`
//! works the same on the file store, PostgreSQL and the in-memory store, because each
//! is written once here over the [`Store`] seam.

use super::ops;
use super::RolloverSpec;
use super::Store;
use crate::store::Result;
use crate::transcript::NewRow;

/// Rollover, soft clear and quarantine on any [`Store`] (import this trait to call them
/// as methods).
pub trait Transcript: Store {
    /// Records a rollover: boundary row, lead-in row and the trigger, as one batch
    /// under one hold of the lock, the lead-in rendered from the window the boundary
    /// really opens (see [`ops::rollover`](super::rollover)). Idempotent per
    /// `rollover_id`: a repeat returns the window the first one opened.
    fn rollover(&self, spec: RolloverSpec) -> Result<String> {
        ops::rollover(self.as_store(), spec).map(|w| w.to_string())
    }

    /// Soft clear: a `reset` boundary row, the privacy floor. Returns its seq.
    fn clear_soft(&self) -> Result<u64> {
        ops::clear_soft(self.as_store(), None)
    }

    /// Quarantines a rejected request that was never stored: an empty assistant row
    /// whose `meta.rejected` holds the original `{role, parts, meta}`. Returns its seq.
    fn quarantine(&self, original: NewRow) -> Result<u64> {
        let row = ops::rejected_row(original)?;
        Ok(self.append_rows(&[row], None)?.first_seq)
    }

    /// Quarantines stored row `seq`: its retraction and a quarantine row holding its
    /// content, one batch under one hold of the lock (see
    /// [`quarantine`](super::quarantine)). Returns the seq of the quarantine row.
    fn quarantine_seq(&self, seq: u64, expected_last_seq: Option<u64>) -> Result<u64> {
        ops::quarantine(self.as_store(), seq, expected_last_seq)
    }

    /// Retracts row `seq` and quarantines `original` (its content) in one batch, only if
    /// the store's last seq is still `expected_last_seq`. Returns the seq of the
    /// quarantine row. Prefer [`quarantine_seq`](Self::quarantine_seq), which reads the
    /// content from the store itself.
    fn quarantine_retracting(
        &self,
        seq: u64,
        original: NewRow,
        expected_last_seq: Option<u64>,
    ) -> Result<u64> {
        let rows = ops::retract_and_quarantine(seq, original)?;
        Ok(self.append_rows(&rows, expected_last_seq)?.last_seq)
    }

    /// This store as the seam the operations take.
    fn as_store(&self) -> &dyn Store;
}

impl<S: Store + Sized> Transcript for S {
    fn as_store(&self) -> &dyn Store {
        self
    }
}

impl Transcript for dyn Store + '_ {
    fn as_store(&self) -> &dyn Store {
        self
    }
}
