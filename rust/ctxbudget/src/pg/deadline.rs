//! Statements that end by a deadline: a call with a time limit of its own (a
//! `session_history` page, 30 s) runs its reads in a transaction whose
//! `statement_timeout` and `lock_timeout` are the time it has left, so a lock held by
//! another session (an operator's `LOCK TABLE`, a hung client) cannot keep it waiting past
//! its deadline: the server cancels the statement and the call answers in time.

use std::time::{Duration, Instant};

use super::error::{PgError, Result};
use super::pool::Conn;

/// When a call with a time limit must have answered.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Deadline {
    /// The instant.
    pub until: Instant,
    /// The call's whole time limit (for messages).
    pub limit: Duration,
}

impl Deadline {
    /// The deadline of a call that started at `start` with `limit`.
    pub(crate) fn new(start: Instant, limit: Duration) -> Deadline {
        Deadline {
            until: start + limit,
            limit,
        }
    }

    /// The error of a call that ran out of time while `what`.
    pub(crate) fn timeout(&self, what: &'static str) -> PgError {
        PgError::Timeout {
            what,
            limit_ms: self.limit.as_millis(),
        }
    }
}

impl Conn {
    /// Runs `f` in a read-only transaction whose statements, and the locks they wait
    /// for, end by the deadline; a statement the server cancels then is
    /// [`PgError::Timeout`] for `what`.
    pub(crate) fn within<T>(
        &mut self,
        deadline: Deadline,
        what: &'static str,
        f: impl FnOnce(&mut Conn) -> Result<T>,
    ) -> Result<T> {
        // Whole milliseconds left; zero would mean "no limit" to the server.
        let ms = deadline
            .until
            .saturating_duration_since(Instant::now())
            .as_millis();
        if ms == 0 {
            return Err(deadline.timeout(what));
        }
        self.client
            .batch_execute(&format!(
                "BEGIN READ ONLY; SET LOCAL statement_timeout = {ms}; \
                 SET LOCAL lock_timeout = {ms}"
            ))
            .map_err(PgError::db("BEGIN"))?;
        match f(self) {
            Ok(value) => {
                self.client
                    .batch_execute("COMMIT")
                    .map_err(PgError::db("COMMIT of a read"))?;
                Ok(value)
            }
            Err(e) => {
                // A broken connection is discarded by the caller; otherwise end the
                // transaction (an aborted one after a cancelled statement).
                if !e.is_transient() {
                    self.client
                        .batch_execute("ROLLBACK")
                        .map_err(PgError::db("ROLLBACK"))?;
                }
                Err(if e.is_cancelled() {
                    deadline.timeout(what)
                } else {
                    e
                })
            }
        }
    }
}
