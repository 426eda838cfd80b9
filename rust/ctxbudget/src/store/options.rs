//! How a store is opened and where its files are.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::error::{Result, StoreError};
use super::lock::DEFAULT_LOCK_TIMEOUT;

/// Default bound on one stored row line, in bytes (the scanner skips longer lines).
pub const DEFAULT_MAX_ROW_BYTES: usize = 1 << 20;

/// How hard the store works to make a write survive power loss.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum Durability {
    /// `fdatasync` every append; sync files and directories around every other change.
    #[default]
    Fsync,
    /// No syncing (tests, benchmarks that say so): crash-consistent, not power-safe.
    None,
}

impl std::str::FromStr for Durability {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Durability> {
        match s {
            "fsync" => Ok(Durability::Fsync),
            "none" => Ok(Durability::None),
            other => Err(StoreError::InvalidArgument(format!(
                "durability {other:?} is not one of \"fsync\", \"none\""
            ))),
        }
    }
}

/// Options of [`FileStore::open`](super::FileStore::open).
#[derive(Clone, Debug)]
pub struct OpenOptions {
    /// Syncing policy.
    pub durability: Durability,
    /// Bound on waiting for the history lock.
    pub lock_timeout: Duration,
    /// Largest serialized row accepted by `append`.
    pub max_row_bytes: usize,
    /// Recover a torn tail or an interrupted mutation while opening (default). Off for
    /// inspection (`verify`), which must change nothing; writes still recover first.
    pub recover_on_open: bool,
}

impl Default for OpenOptions {
    fn default() -> Self {
        OpenOptions {
            durability: Durability::Fsync,
            lock_timeout: DEFAULT_LOCK_TIMEOUT,
            max_row_bytes: DEFAULT_MAX_ROW_BYTES,
            recover_on_open: true,
        }
    }
}

/// Paths of one workspace's history.
#[derive(Clone, Debug)]
pub struct Paths {
    /// `<ws>/history`.
    pub dir: PathBuf,
    /// `<ws>/history/chat.jsonl`.
    pub chat: PathBuf,
    /// `<ws>/history/chat-archive.jsonl`.
    pub archive: PathBuf,
    /// `<ws>/history/receipt.json`.
    pub receipt: PathBuf,
    /// `<ws>/history/lock`.
    pub lock: PathBuf,
    /// `<ws>/history/recovered`.
    pub recovered: PathBuf,
}

impl Paths {
    /// The paths under workspace `ws`.
    pub fn new(ws: &Path) -> Paths {
        let dir = ws.join("history");
        Paths {
            chat: dir.join("chat.jsonl"),
            archive: dir.join("chat-archive.jsonl"),
            receipt: dir.join("receipt.json"),
            lock: dir.join("lock"),
            recovered: dir.join("recovered"),
            dir,
        }
    }
}
