//! Statements that end by a deadline: a call with a time limit of its own (a
//! `session_history` page, 30 s) runs its reads in a transaction whose
//! `statement_timeout` and `lock_timeout` are the time it has left, so a lock held by
//! another session (an operator's `LOCK TABLE`, a hung client) cannot keep it waiting past
//! its deadline: the server cancels the statement and the call answers in time. The
//! transaction, its limits and the statement travel as one message ([`Conn::query_by`]):
//! a page costs one round trip, as an unbounded read does.

use std::time::{Duration, Instant};

use postgres::{SimpleQueryMessage, SimpleQueryRow};

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

/// A statement that a call with a deadline runs (see [`Conn::query_by`]): prepared on the
/// server by name with SQL `PREPARE` (once per connection, inside the first call's
/// limits), so that the call needs no extended-protocol round trips of its own.
pub(crate) struct Prepared {
    /// The name it is prepared under (unique among the library's statements).
    pub name: &'static str,
    /// What follows the name in `PREPARE`: `(parameter types) AS statement`.
    pub sql: &'static str,
}

/// A parameter of a [`Prepared`] statement, written into the message as a literal.
pub(crate) enum Literal<'a> {
    /// A text value.
    Text(&'a str),
    /// A `bigint`.
    Int(i64),
}

impl Literal<'_> {
    /// The SQL literal: an escape string (`E'…'`, read the same whatever the server's
    /// `standard_conforming_strings`) with quotes and backslashes doubled.
    fn sql(&self) -> String {
        match self {
            Literal::Int(n) => n.to_string(),
            Literal::Text(s) => format!("E'{}'", s.replace('\\', "\\\\").replace('\'', "''")),
        }
    }
}

impl Conn {
    /// Runs `statement` with `args` in a read-only transaction whose statements, and the
    /// locks they wait for, end by the deadline — `BEGIN`, the limits, the statement
    /// (and its `PREPARE` on this connection's first use) and `COMMIT` sent as ONE
    /// simple-protocol message: one round trip. Returns its rows as text. A statement
    /// the server cancels at the deadline is [`PgError::Timeout`] for `what`.
    pub(crate) fn query_by(
        &mut self,
        deadline: Deadline,
        what: &'static str,
        statement: &Prepared,
        args: &[Literal<'_>],
    ) -> Result<Vec<SimpleQueryRow>> {
        // Whole milliseconds left; zero would mean "no limit" to the server.
        let ms = deadline
            .until
            .saturating_duration_since(Instant::now())
            .as_millis();
        if ms == 0 {
            return Err(deadline.timeout(what));
        }
        let prepare = !self.server_prepared.contains(statement.name);
        let mut message = format!(
            "BEGIN READ ONLY; SET LOCAL statement_timeout = {ms}; SET LOCAL lock_timeout = {ms}; "
        );
        if prepare {
            // Inside the limits: preparing takes the tables' locks too.
            message.push_str(&format!("PREPARE {} {}; ", statement.name, statement.sql));
        }
        let args: Vec<String> = args.iter().map(Literal::sql).collect();
        message.push_str(&format!(
            "EXECUTE {}({}); COMMIT",
            statement.name,
            args.join(", ")
        ));
        match self.client.simple_query(&message) {
            Ok(messages) => {
                if prepare {
                    self.server_prepared.insert(statement.name);
                }
                Ok(messages
                    .into_iter()
                    .filter_map(|m| match m {
                        SimpleQueryMessage::Row(row) => Some(row),
                        _ => None,
                    })
                    .collect())
            }
            Err(e) => {
                let e = PgError::db(what)(e);
                // A broken connection is discarded by the caller; otherwise end the
                // transaction (aborted by the failed statement), and forget a PREPARE
                // that may have run before it (a prepared statement outlives a rollback).
                if !e.is_transient() {
                    self.client
                        .batch_execute("ROLLBACK")
                        .map_err(PgError::db("ROLLBACK"))?;
                    if prepare {
                        self.forget_prepared(statement.name)?;
                    }
                }
                Err(if e.is_cancelled() {
                    deadline.timeout(what)
                } else {
                    e
                })
            }
        }
    }

    /// Deallocates the server-side statement `name` if it exists.
    fn forget_prepared(&mut self, name: &str) -> Result<()> {
        match self.client.batch_execute(&format!("DEALLOCATE {name}")) {
            Ok(()) => Ok(()),
            // 26000 invalid_sql_statement_name: it was never prepared.
            Err(e) if e.code().is_some_and(|c| c.code() == "26000") => Ok(()),
            Err(e) => Err(PgError::db("DEALLOCATE")(e)),
        }
    }
}

/// Column `i` of a text row as a `bigint` (`None` when NULL).
pub(crate) fn text_i64(row: &SimpleQueryRow, i: usize, what: &'static str) -> Result<Option<i64>> {
    row.try_get(i)
        .map_err(PgError::db(what))?
        .map(|t| t.parse().map_err(|_| unreadable(what, "an integer", t)))
        .transpose()
}

/// Column `i` of a text row as a `boolean` (`None` when NULL).
pub(crate) fn text_bool(
    row: &SimpleQueryRow,
    i: usize,
    what: &'static str,
) -> Result<Option<bool>> {
    row.try_get(i)
        .map_err(PgError::db(what))?
        .map(|t| match t {
            "t" => Ok(true),
            "f" => Ok(false),
            other => Err(unreadable(what, "a boolean", other)),
        })
        .transpose()
}

/// Column `i` of a text row, written by `encode(…, 'hex')`, as bytes (`None` when NULL).
pub(crate) fn text_hex(
    row: &SimpleQueryRow,
    i: usize,
    what: &'static str,
) -> Result<Option<Vec<u8>>> {
    let Some(text) = row.try_get(i).map_err(PgError::db(what))? else {
        return Ok(None);
    };
    let digit = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    text.as_bytes()
        .chunks(2)
        .map(|pair| match pair {
            [hi, lo] => Some((digit(*hi)? << 4) | digit(*lo)?),
            _ => None,
        })
        .collect::<Option<Vec<u8>>>()
        .map(Some)
        .ok_or_else(|| unreadable(what, "hex digits", "an odd or non-hex string"))
}

/// The server answered with a value this library cannot read.
fn unreadable(what: &'static str, expected: &str, found: &str) -> PgError {
    let found: String = found.chars().take(40).collect();
    PgError::Invalid(format!(
        "PostgreSQL answered {what} with {found:?} where {expected} was expected; \
         check that the server is PostgreSQL and the schema is ctxbudget's"
    ))
}
