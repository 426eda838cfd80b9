//! Errors of the PostgreSQL store.

use thiserror::Error;

use super::config::redact_secrets;

/// Result of a PostgreSQL store operation.
pub type Result<T, E = PgError> = std::result::Result<T, E>;

/// What went wrong in the PostgreSQL store. Every message names what was wrong and what to do.
///
/// Every text that may quote a connection URL or string (the configuration's, the
/// driver's, the server's) is shown through [`redact_secrets`], in `Display` and `Debug`
/// alike: no password or other secret parameter is ever printed, whoever built the error.
#[derive(Error)]
pub enum PgError {
    /// The connection URL or an option is invalid.
    #[error("invalid PostgreSQL configuration: {}", redact_secrets(.0))]
    Config(String),
    /// The connection broke while a change that is not idempotent (a memory edit, a
    /// rotation) was being committed: it may or may not have been applied. Not retried.
    #[error(
        "the connection to PostgreSQL broke while committing {what}; it may or may not \
         have been applied — read the current state back before doing it again"
    )]
    OutcomeUnknown {
        /// The change.
        what: &'static str,
    },
    /// The server could not be reached or the connection broke. For an append this means
    /// its outcome is unknown: retry it with the same `batch_id` (or `expected_last_seq`),
    /// which commits it at most once.
    #[error(
        "PostgreSQL connection failed ({}); check that the server is up and the URL is \
         right, then retry (an append retried with the same batch_id commits at most once)",
        redact_secrets(&.0.to_string())
    )]
    Connection(#[source] postgres::Error),
    /// The server's certificate was refused or the TLS handshake failed: not retried.
    #[error(
        "TLS with the PostgreSQL server failed ({}); check sslmode and sslrootcert (with \
         verify-ca/verify-full the server's certificate must chain to a trusted root, and \
         with verify-full name the host it was issued for)",
        redact_secrets(&.0.to_string())
    )]
    TlsHandshake(#[source] postgres::Error),
    /// TLS could not be set up.
    #[error("PostgreSQL TLS setup failed: {}", redact_secrets(.0))]
    Tls(String),
    /// No pooled connection became free in time.
    #[error(
        "no PostgreSQL connection became free within {waited_ms} ms ({size} in the pool); \
         raise PgOptions::pool_size or pool_timeout, or finish long transactions"
    )]
    PoolTimeout {
        /// How long the caller waited.
        waited_ms: u128,
        /// The pool's size.
        size: usize,
    },
    /// The server refused a statement.
    #[error("PostgreSQL refused {what}: {}", redact_secrets(.message))]
    Database {
        /// The operation that failed.
        what: &'static str,
        /// The server's message, SQLSTATE, detail and hint.
        message: String,
        /// The server's error.
        #[source]
        source: postgres::Error,
    },
    /// The database holds a newer schema than this library knows.
    #[error(
        "the database holds ctxbudget schema version {found}, newer than this library's \
         {known}; upgrade ctxbudget on this host"
    )]
    SchemaTooNew {
        /// Version found in the database.
        found: i32,
        /// Newest version this library knows.
        known: i32,
    },
    /// The schema needs a migration that this role may not make; nothing was changed.
    #[error(
        "the database holds ctxbudget schema version {found} and this library needs version \
         {needed}, but role {role:?} may not migrate it: it lacks {missing}. Run the migration once as a role that has \
         it (`ctxbudget db migrate URL`, as the role that owns the tables), or grant it; \
         after that, roles with only SELECT, INSERT, UPDATE, DELETE on the tables suffice"
    )]
    MigrationNotAllowed {
        /// Version found in the database (0: no tables yet).
        found: i32,
        /// The version this library needs.
        needed: i32,
        /// The role connected.
        role: String,
        /// The rights it lacks, named.
        missing: String,
    },
    /// The store was opened without migrating (`PgOptions::migrate = false`, a runtime
    /// role) and the database does not hold this library's schema yet; nothing was changed.
    #[error(
        "the database holds ctxbudget schema version {found} and this library needs version \
         {needed}: run the migration first, as the role that owns the tables \
         (`ctxbudget db migrate URL`, `ctxbudget.Database.migrate`, `PgStore::migrate`), \
         or review its SQL with `ctxbudget db ddl`"
    )]
    NotMigrated {
        /// Version found in the database (0: no tables).
        found: i32,
        /// The version this library needs.
        needed: i32,
    },
    /// The store was closed by its owner ([`PgStore::close`](super::PgStore::close)).
    #[error(
        "this PostgreSQL database object was closed by its owner; open a new one \
         (nothing was done)"
    )]
    Closed,
    /// A call with a deadline (a `session_history` page) ran out of time waiting for the
    /// server: a lock held by another session, a slow statement or a full pool.
    #[error(
        "PostgreSQL did not finish {what} within the call's time limit ({limit_ms} ms); \
         another session may hold a lock on ctxbudget's tables — try again later"
    )]
    Timeout {
        /// What was waiting.
        what: &'static str,
        /// The time the call had.
        limit_ms: u128,
    },
    /// A conditional append found rows it was not decided on; nothing was written.
    #[error(
        "conversation {conversation:?} changed: expected last seq {expected_last_seq}, \
         it is {last_seq}; nothing was written — read the new rows and decide again"
    )]
    Conflict {
        /// The conversation.
        conversation: String,
        /// The last seq the caller's decision was based on.
        expected_last_seq: u64,
        /// The conversation's last seq now.
        last_seq: u64,
    },
    /// A batch id was reused for a different batch.
    #[error(
        "batch id {batch_id:?} of conversation {conversation:?} was already used for seqs \
         {first_seq}..={last_seq} with other rows; use a new batch id for a new batch"
    )]
    BatchIdReused {
        /// The conversation.
        conversation: String,
        /// The batch id.
        batch_id: String,
        /// First seq of the batch committed under that id.
        first_seq: u64,
        /// Last seq of that batch.
        last_seq: u64,
    },
    /// An argument is invalid (conversation id, row, batch); nothing was written.
    #[error("invalid argument: {}", redact_secrets(.0))]
    Invalid(String),
    /// The conversation does not exist.
    #[error("conversation {0:?} does not exist; append to it (or open it) first")]
    NoConversation(String),
    /// A memory command was refused (code as the `memory` tool reports it).
    #[error("{message}")]
    Memory {
        /// `invalid_path`, `not_found`, `is_directory`, `not_a_directory`, `too_large`,
        /// `exists` or `invalid_arguments`.
        code: &'static str,
        /// What was wrong and what to do.
        message: String,
    },
}

/// The variant's name and its (redacted) message: a derived `Debug` would print the
/// fields raw, a connection string among them.
impl std::fmt::Debug for PgError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let variant = match self {
            PgError::Config(_) => "Config",
            PgError::OutcomeUnknown { .. } => "OutcomeUnknown",
            PgError::Connection(_) => "Connection",
            PgError::TlsHandshake(_) => "TlsHandshake",
            PgError::Tls(_) => "Tls",
            PgError::PoolTimeout { .. } => "PoolTimeout",
            PgError::Database { .. } => "Database",
            PgError::SchemaTooNew { .. } => "SchemaTooNew",
            PgError::MigrationNotAllowed { .. } => "MigrationNotAllowed",
            PgError::NotMigrated { .. } => "NotMigrated",
            PgError::Closed => "Closed",
            PgError::Timeout { .. } => "Timeout",
            PgError::Conflict { .. } => "Conflict",
            PgError::BatchIdReused { .. } => "BatchIdReused",
            PgError::Invalid(_) => "Invalid",
            PgError::NoConversation(_) => "NoConversation",
            PgError::Memory { .. } => "Memory",
        };
        f.debug_tuple(variant).field(&self.to_string()).finish()
    }
}

impl PgError {
    /// A failed connection attempt: [`PgError::TlsHandshake`] when TLS refused the server
    /// (retrying cannot help), else [`PgError::Connection`] or the server's refusal.
    pub(crate) fn connect(source: postgres::Error) -> PgError {
        if super::config::is_tls_refusal(&source) {
            PgError::TlsHandshake(source)
        } else {
            PgError::db("the connection")(source)
        }
    }

    /// A `Database` error for `what`, or `Connection` when the connection itself broke.
    pub(crate) fn db(what: &'static str) -> impl FnOnce(postgres::Error) -> PgError {
        move |source| {
            if source.is_closed() || source.as_db_error().is_none() {
                PgError::Connection(source)
            } else {
                let message = source
                    .as_db_error()
                    .map(|e| {
                        let mut m = format!("{} (SQLSTATE {})", e.message(), e.code().code());
                        if let Some(d) = e.detail() {
                            m.push_str(&format!("; {d}"));
                        }
                        if let Some(h) = e.hint() {
                            m.push_str(&format!("; hint: {h}"));
                        }
                        m
                    })
                    .unwrap_or_else(|| source.to_string());
                PgError::Database {
                    what,
                    message,
                    source,
                }
            }
        }
    }

    /// A failed `COMMIT` of a change that must not be repeated blindly: a broken
    /// connection becomes [`PgError::OutcomeUnknown`] (not retried), anything else stays.
    pub(crate) fn commit_of(what: &'static str) -> impl FnOnce(postgres::Error) -> PgError {
        move |source| match PgError::db(what)(source) {
            e if e.is_transient() => PgError::OutcomeUnknown { what },
            e => e,
        }
    }

    pub(crate) fn memory(code: &'static str, message: impl Into<String>) -> PgError {
        PgError::Memory {
            code,
            message: message.into(),
        }
    }

    /// True when the server cancelled a statement for running past `statement_timeout` or
    /// waiting past `lock_timeout` (SQLSTATE 57014, 55P03).
    pub(crate) fn is_cancelled(&self) -> bool {
        matches!(self, PgError::Database { source, .. }
            if source.as_db_error().is_some_and(|e| matches!(e.code().code(), "57014" | "55P03")))
    }

    /// True when the server refused the statement for want of a right (SQLSTATE 42501).
    pub(crate) fn is_insufficient_privilege(&self) -> bool {
        matches!(self, PgError::Database { source, .. }
            if source.as_db_error().is_some_and(|e| e.code().code() == "42501"))
    }

    /// True when the operation may be retried on a fresh connection: the connection broke
    /// or the server is restarting.
    pub fn is_transient(&self) -> bool {
        match self {
            PgError::Connection(_) | PgError::PoolTimeout { .. } => true,
            PgError::Database { source, .. } => source.as_db_error().is_some_and(|e| {
                let code = e.code().code();
                // 57P01 admin_shutdown, 57P02 crash_shutdown, 57P03 cannot_connect_now,
                // 40001 serialization_failure, 40P01 deadlock_detected.
                matches!(code, "57P01" | "57P02" | "57P03" | "40001" | "40P01")
                    || code.starts_with("08")
            }),
            _ => false,
        }
    }
}
