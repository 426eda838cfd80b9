//! The in-memory backend: a [`ByteLog`] kept in the process, which the transcript layer
//! ([`LogStore`]) turns into a whole [`Store`](crate::transcript::Store) — rows, windows,
//! rollover, soft clear, quarantine, rotation, retention, `session_history` pages. Nothing
//! survives the process; tests and short-lived agents use it where a workspace
//! directory or a database would only be in the way.
//!
//! [`open`] names a log: every handle opened with one name in this process shares its
//! rows, as handles on one workspace directory do.
//!
//! ```
//! use ctxbudget::transcript::Store;
//! use ctxbudget::transcript::NewRow;
//!
//! let history = ctxbudget::memory::open("doc-example");
//! let appended = history.append_rows(&[NewRow::text("message", "user", "hello")], None)?;
//! assert_eq!(appended.first_seq, 1);
//! assert_eq!(history.current_window()?, "w:0");
//! # Ok::<(), ctxbudget::store::StoreError>(())
//! ```

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use crate::store::{DeleteReport, Result, StoreError};
use crate::transcript::log::{Bodies, ByteLog, LockedLog, LogRead, LogRow, LogState, Moved};

pub use crate::transcript::log::LogStore;

/// A transcript kept in memory.
pub type MemoryHistory = LogStore<MemoryLog>;

/// The in-memory store named `name` in this process (created empty the first time).
pub fn open(name: &str) -> MemoryHistory {
    LogStore::new(MemoryLog::named(name))
}

/// A byte log in memory, shared by every handle opened with its name.
#[derive(Clone, Debug)]
pub struct MemoryLog {
    name: String,
    shared: Arc<Shared>,
}

/// One log's rows and the lock its writers take one at a time.
#[derive(Debug, Default)]
struct Shared {
    /// Set by [`delete`] (under the writer lock): every later write of a handle still
    /// open fails with [`StoreError::Deleted`], as on the other stores.
    deleted: AtomicBool,
    /// Held by the writer for a whole append: writers never interleave.
    writer: Mutex<()>,
    /// The rows and counters, held only while read or changed (never while a batch is
    /// built, so the code building it may read).
    data: Mutex<Data>,
}

#[derive(Debug)]
struct Data {
    state: LogState,
    removed_before: u64,
    archived_before: u64,
    rows: Vec<LogRow>,
}

impl Default for Data {
    fn default() -> Data {
        Data {
            state: LogState {
                epoch: 1,
                last_seq: 0,
                floor_seq: 0,
            },
            removed_before: 1,
            archived_before: 1,
            rows: Vec::new(),
        }
    }
}

impl Data {
    fn position(&self, seq: u64) -> usize {
        self.rows.partition_point(|r| r.seq < seq)
    }

    fn rows_after(&self, after: u64) -> Vec<LogRow> {
        let at = self.position(after.saturating_add(1));
        self.rows[at..].to_vec()
    }
}

/// The logs of the process by name, and the last epoch of each deleted name: a log
/// opened again under a deleted name starts above it, so that a cursor minted on the
/// deleted one answers `history_changed` instead of paging the new one.
#[derive(Default)]
struct Registry {
    logs: BTreeMap<String, Arc<Shared>>,
    retired_epochs: BTreeMap<String, u64>,
}

fn registry() -> MutexGuard<'static, Registry> {
    static LOGS: OnceLock<Mutex<Registry>> = OnceLock::new();
    LOGS.get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Deletes the in-memory store `name` for good and reports what was removed (its rows
/// and their bytes; memory files and budget records are the caller's to count). A
/// handle still open on it gets [`StoreError::Deleted`] on its next write and reads
/// nothing; opening the name again starts an empty store.
pub fn delete(name: &str) -> DeleteReport {
    let mut registry = registry();
    let Some(shared) = registry.logs.remove(name) else {
        return DeleteReport::default();
    };
    let _writer = shared.writer.lock().unwrap_or_else(|e| e.into_inner());
    let mut data = shared.data.lock().unwrap_or_else(|e| e.into_inner());
    shared.deleted.store(true, Ordering::SeqCst);
    let removed = std::mem::take(&mut data.rows);
    registry
        .retired_epochs
        .insert(name.to_owned(), data.state.epoch);
    DeleteReport {
        existed: true,
        rows: removed.len() as u64,
        bytes: removed.iter().map(|r| r.body.len() as u64 + 1).sum(),
        ..DeleteReport::default()
    }
}

impl MemoryLog {
    /// The log named `name` in this process (created empty the first time).
    pub fn named(name: &str) -> MemoryLog {
        let mut registry = registry();
        let retired = registry.retired_epochs.get(name).copied();
        let shared = Arc::clone(registry.logs.entry(name.to_owned()).or_insert_with(|| {
            let shared = Shared::default();
            if let Some(epoch) = retired {
                let mut data = shared.data.lock().unwrap_or_else(|e| e.into_inner());
                data.state.epoch = epoch + 1;
            }
            Arc::new(shared)
        }));
        MemoryLog {
            name: name.to_owned(),
            shared,
        }
    }

    /// A log of its own that no name reaches.
    pub fn private() -> MemoryLog {
        MemoryLog {
            name: String::new(),
            shared: Arc::default(),
        }
    }

    /// Forgets the log named `name` (handles still open keep their rows); `true` if
    /// there was one.
    pub fn forget(name: &str) -> bool {
        registry().logs.remove(name).is_some()
    }

    fn data(&self) -> MutexGuard<'_, Data> {
        self.shared.data.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Refuses a write to a deleted log (called with the writer lock held).
    fn check_not_deleted(&self) -> Result<()> {
        if self.shared.deleted.load(Ordering::SeqCst) {
            return Err(StoreError::Deleted {
                location: self.identity(),
            });
        }
        Ok(())
    }
}

/// The log as the batch being built sees it (the writer lock held).
struct Locked<'a>(&'a MemoryLog);

impl LockedLog for Locked<'_> {
    fn state(&self) -> LogState {
        self.0.data().state
    }

    fn rows_after(&self, after: u64) -> Vec<LogRow> {
        self.0.data().rows_after(after)
    }

    fn body(&self, seq: u64) -> Option<Vec<u8>> {
        let data = self.0.data();
        let at = data.position(seq);
        data.rows
            .get(at)
            .filter(|r| r.seq == seq)
            .map(|r| r.body.clone())
    }
}

impl ByteLog for MemoryLog {
    fn read_after(&self, after: u64) -> Result<LogRead> {
        let data = self.data();
        Ok(LogRead {
            state: data.state,
            rows: data.rows_after(after),
        })
    }

    fn append(
        &self,
        build: &mut crate::transcript::log::BuildRows<'_>,
    ) -> Result<Option<LogState>> {
        let _writer = self.shared.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.check_not_deleted()?;
        let Some(rows) = build(&Locked(self))? else {
            return Ok(None);
        };
        let mut data = self.data();
        let mut next = data.state.last_seq;
        for r in &rows {
            next += 1;
            if r.seq != next {
                return Err(StoreError::internal(format!(
                    "a batch for seq {next} came with seq {}; nothing was written",
                    r.seq
                )));
            }
        }
        for r in rows {
            data.state.last_seq = r.seq;
            if r.floor {
                data.state.floor_seq = data.state.floor_seq.max(r.seq);
            }
            data.rows.push(r);
        }
        Ok(Some(data.state))
    }

    fn bodies(&self, from: u64, to: u64) -> Result<Bodies> {
        let data = self.data();
        let at = data.position(from);
        let found = data.rows[at..]
            .iter()
            .take_while(|r| r.seq <= to)
            .map(|r| (r.seq, r.body.clone()))
            .collect();
        Ok(Bodies {
            epoch: data.state.epoch,
            rows: found,
        })
    }

    fn archive_before(&self, seq: u64) -> Result<Moved> {
        let _writer = self.shared.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.check_not_deleted()?;
        let mut data = self.data();
        let from = data.position(data.archived_before);
        let to = data.position(seq);
        if to <= from {
            return Ok(Moved::default());
        }
        let bytes = data.rows[from..to]
            .iter()
            .map(|r| r.body.len() as u64 + 1)
            .sum();
        data.archived_before = seq;
        data.state.epoch += 1;
        Ok(Moved {
            rows: (to - from) as u64,
            bytes,
            epoch: Some(data.state.epoch),
        })
    }

    fn archived_before(&self) -> Result<u64> {
        Ok(self.data().archived_before)
    }

    fn remove_before(&self, seq: u64) -> Result<Moved> {
        let _writer = self.shared.writer.lock().unwrap_or_else(|e| e.into_inner());
        self.check_not_deleted()?;
        let mut data = self.data();
        let at = data.position(seq);
        if at == 0 && data.removed_before >= seq {
            return Ok(Moved::default());
        }
        let removed: Vec<LogRow> = data.rows.drain(..at).collect();
        let bytes = removed.iter().map(|r| r.body.len() as u64 + 1).sum();
        data.removed_before = data.removed_before.max(seq);
        data.archived_before = data.archived_before.max(seq);
        data.state.epoch += 1;
        Ok(Moved {
            rows: removed.len() as u64,
            bytes,
            epoch: Some(data.state.epoch),
        })
    }

    fn removed_before(&self) -> Result<u64> {
        Ok(self.data().removed_before)
    }

    fn identity(&self) -> String {
        if self.name.is_empty() {
            format!("memory:{:p}", Arc::as_ptr(&self.shared))
        } else {
            format!("memory:{}", self.name)
        }
    }
}
