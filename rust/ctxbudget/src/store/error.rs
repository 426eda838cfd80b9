//! Errors of the transcript store.

use std::path::PathBuf;
use std::time::Duration;

/// Everything that can go wrong in the transcript store. Messages name the file and
/// say what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum HistoryError {
    /// Another writer held the history lock for longer than the wait bound.
    #[error(
        "timed out after {waited:?} waiting for the history lock {path}; another process \
         is writing this workspace — retry, or find the process holding the lock"
    )]
    LockTimeout {
        /// The lock file.
        path: PathBuf,
        /// How long we waited.
        waited: Duration,
    },
    /// The transcript is damaged before its last valid commit; writes are refused so that
    /// nothing acknowledged is overwritten.
    #[error(
        "history {path} is damaged at byte {offset} (line {line}): {reason}; writes are \
         refused to protect acknowledged rows — inspect it with `ctxbudget history verify`, \
         keep a copy, and repair it by hand"
    )]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Byte offset of the damage.
        offset: u64,
        /// 1-based line of the damage.
        line: u64,
        /// What is wrong there.
        reason: String,
    },
    /// A row given to `append` is malformed.
    #[error("row {index}: field {field:?} {reason}")]
    InvalidRow {
        /// Position of the row in the batch.
        index: usize,
        /// The offending field, e.g. `parts[2].type`.
        field: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A conditional write found the store changed since the state it was decided on
    /// (another writer appended first); nothing was written.
    #[error(
        "the transcript moved on: this write was conditional on seq {expected_last_seq} being \
         the last row, but another writer has appended up to seq {last_seq}; nothing was \
         written — read the new rows and decide again"
    )]
    Conflict {
        /// The last seq the caller's decision was based on.
        expected_last_seq: u64,
        /// The store's last seq now.
        last_seq: u64,
    },
    /// An argument other than a row is invalid.
    #[error("{0}")]
    InvalidArgument(String),
    /// The conversation was deleted for good (by `delete`, from this or another
    /// process) while this handle was open; nothing was written.
    #[error(
        "{location} was deleted (ctxbudget history delete, or a delete call) while this \
         handle was open; nothing was written — open it again to start a new, empty \
         conversation under that name, or stop writing to it"
    )]
    Deleted {
        /// The workspace directory or the PostgreSQL conversation, as messages name it.
        location: String,
    },
    /// The transcript database (the PostgreSQL store) failed or refused the operation.
    #[error("{message}")]
    Database {
        /// What failed and what to do (the database's own error, with advice).
        message: String,
        /// True when the server could not be reached or the connection broke: the
        /// operation may be retried (an append's outcome is unknown; a conditional
        /// retry commits it at most once).
        transient: bool,
    },
    /// A filesystem operation failed.
    #[error("could not {op} {path}: {source}; {}", advice(source))]
    Io {
        /// What we were doing, e.g. "fdatasync".
        op: &'static str,
        /// The file involved.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

impl HistoryError {
    /// An append of no rows (nothing is written).
    pub(crate) fn empty_batch() -> HistoryError {
        HistoryError::InvalidArgument("append needs at least one row".to_owned())
    }

    pub(crate) fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        HistoryError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    pub(crate) fn row(index: usize, field: impl Into<String>, reason: impl Into<String>) -> Self {
        HistoryError::InvalidRow {
            index,
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// What to do about an OS error, by its kind.
fn advice(e: &std::io::Error) -> &'static str {
    match e.raw_os_error() {
        Some(libc::ENOSPC) | Some(libc::EDQUOT) => {
            "the disk or quota is full: free space on that filesystem and retry (nothing \
             unacknowledged was kept as written)"
        }
        Some(libc::EMFILE) | Some(libc::ENFILE) => {
            "the process is out of file descriptors: raise the open-file limit (ulimit -n) \
             or drop History objects that are no longer used"
        }
        Some(libc::EACCES) | Some(libc::EPERM) => {
            "permission denied: check the owner and mode of the file and its directory"
        }
        Some(libc::EROFS) => {
            "the filesystem is read-only: remount it writable or move the workspace"
        }
        Some(libc::ELOOP) => {
            "the path is a symbolic link, which the store refuses to follow: replace it with \
             the real file"
        }
        Some(libc::EIO) => {
            "the device reported an I/O error: check the disk, then run `ctxbudget history \
             verify`"
        }
        _ => "check the file and its directory, then retry",
    }
}

/// Result alias of the store.
pub type Result<T, E = HistoryError> = std::result::Result<T, E>;
