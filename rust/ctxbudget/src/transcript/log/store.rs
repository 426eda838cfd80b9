//! [`LogStore`]: the [`Store`] seam over any [`ByteLog`].

use std::collections::HashMap;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::encode::{encode_batch, MAX_SEQ};
use super::index::RowIndex;
use super::{ByteLog, LockedLog, LogRead, LogRow};
use crate::store::page::{PageError, RunPage};
use crate::store::{
    AppendResult, PruneReport, ReadFrom, RecoveryDetail, RecoveryReport, Result, RotateReport,
    RowCounts, RowsRead, StateDetail, StoreError, StoreState, StoredRow, VerifyDetail,
    VerifyReport, WindowInfo, DEFAULT_MAX_ROW_BYTES,
};
use crate::transcript::input::{Incoming, RawRow};
use crate::transcript::window_runs;
use crate::transcript::NewRow;
use crate::transcript::RowHead;
use crate::transcript::{BuildBatch, PruneSpec, Row, Store, Tip, WindowId};

/// A transcript over the byte log `L`: every operation of the [`Store`] seam, the log
/// supplying only bytes and seqs.
#[derive(Debug)]
pub struct LogStore<L> {
    log: L,
    max_row_bytes: usize,
    index: Mutex<RowIndex>,
    /// The thread building a batch under the log's lock while it holds the index (its
    /// callbacks — a lead-in renderer — may read the history: they get an index of
    /// their own instead of waiting for the one their own thread holds).
    writer: Mutex<Option<std::thread::ThreadId>>,
}

/// The index a read works on: the handle's, or, for a read made from inside this
/// thread's own write (a callback), a fresh one.
enum IndexRef<'a> {
    Shared(MutexGuard<'a, RowIndex>),
    Scratch(Box<RowIndex>),
}

impl std::ops::Deref for IndexRef<'_> {
    type Target = RowIndex;
    fn deref(&self) -> &RowIndex {
        match self {
            IndexRef::Shared(g) => g,
            IndexRef::Scratch(ix) => ix,
        }
    }
}

impl std::ops::DerefMut for IndexRef<'_> {
    fn deref_mut(&mut self) -> &mut RowIndex {
        match self {
            IndexRef::Shared(g) => g,
            IndexRef::Scratch(ix) => ix,
        }
    }
}

/// Marks the current thread as the one writing under the index until dropped.
struct WriterMark<'a>(&'a Mutex<Option<std::thread::ThreadId>>);

impl<'a> WriterMark<'a> {
    fn set(writer: &'a Mutex<Option<std::thread::ThreadId>>) -> WriterMark<'a> {
        *writer.lock().unwrap_or_else(|e| e.into_inner()) = Some(std::thread::current().id());
        WriterMark(writer)
    }
}

impl Drop for WriterMark<'_> {
    fn drop(&mut self) {
        *self.0.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

impl<L: ByteLog> LogStore<L> {
    /// The transcript over `log`, with the default row limit.
    pub fn new(log: L) -> LogStore<L> {
        LogStore {
            log,
            max_row_bytes: DEFAULT_MAX_ROW_BYTES,
            index: Mutex::new(RowIndex::default()),
            writer: Mutex::new(None),
        }
    }

    /// The same, refusing rows over `max_row_bytes` bytes.
    pub fn with_max_row_bytes(mut self, max_row_bytes: usize) -> LogStore<L> {
        self.max_row_bytes = max_row_bytes;
        self
    }

    /// The byte log underneath.
    pub fn log(&self) -> &L {
        &self.log
    }

    fn index_for_read(&self) -> IndexRef<'_> {
        let writer = *self.writer.lock().unwrap_or_else(|e| e.into_inner());
        if writer == Some(std::thread::current().id()) {
            IndexRef::Scratch(Box::default())
        } else {
            IndexRef::Shared(self.index.lock().unwrap_or_else(|e| e.into_inner()))
        }
    }

    /// Runs `f` on the index brought up to date, with the bodies of the rows from
    /// `keep_from` on that the same read returned (one consistent cut).
    fn with_refreshed<T>(
        &self,
        keep_from: u64,
        f: impl FnOnce(&RowIndex, Vec<(u64, Vec<u8>)>) -> T,
    ) -> Result<T> {
        let mut ix = self.index_for_read();
        let mut after = ix.last_seq.min(keep_from.saturating_sub(1));
        loop {
            let read = self.log.read_after(after)?;
            if !ix.absorb(&read, after) {
                after = 0; // a new epoch: every row is needed again
                continue;
            }
            let bodies = read
                .rows
                .into_iter()
                .filter(|r| r.seq >= keep_from)
                .map(|r| (r.seq, r.body))
                .collect();
            return Ok(f(&ix, bodies));
        }
    }

    /// Appends a batch built under the log's lock from the index brought up to date
    /// there: rows built by `build`, or the JSON rows `raw`.
    fn append_locked(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
        raw: Option<&[RawRow<'_>]>,
    ) -> Result<Option<AppendResult>> {
        let mut ix = self.index.lock().unwrap_or_else(|e| e.into_inner());
        let _writing = WriterMark::set(&self.writer);
        let max_row_bytes = self.max_row_bytes;
        let mut written: Option<(Vec<LogRow>, WindowId)> = None;
        let mut build_rows = |log: &dyn LockedLog| {
            let state = log.state();
            let mut after = ix.last_seq;
            loop {
                let read = LogRead {
                    state,
                    rows: log.rows_after(after),
                };
                if ix.absorb(&read, after) {
                    break;
                }
                after = 0; // a new epoch: every row is needed again
            }
            if let Some(expected) = expected_last_seq {
                if expected != state.last_seq {
                    return Err(StoreError::Conflict {
                        expected_last_seq: expected,
                        last_seq: state.last_seq,
                    });
                }
            }
            let built: Vec<NewRow>;
            let incoming: Vec<Incoming<'_>> = match raw {
                Some(raws) => raws.iter().cloned().map(Incoming::Raw).collect(),
                None => {
                    let fold = &ix.fold;
                    let reader = |seq: u64| -> Result<Option<Row>> {
                        Ok(log
                            .body(seq)
                            .and_then(|b| Row::parse(seq, fold.window_of(seq), &b)))
                    };
                    let tip = Tip {
                        last_seq: state.last_seq,
                        next_seq: state.last_seq.checked_add(1),
                        fold,
                        rows: &reader,
                    };
                    match build(&tip)? {
                        Some(rows) => {
                            built = rows;
                            built.iter().map(Incoming::Built).collect()
                        }
                        None => return Ok(None),
                    }
                }
            };
            let (rows, window) =
                encode_batch(&incoming, state.last_seq, &ix.fold, max_row_bytes, MAX_SEQ)?;
            written = Some((rows.clone(), window));
            Ok(Some(rows))
        };
        let outcome = self.log.append(&mut build_rows)?;
        let (Some(state), Some((rows, window))) = (outcome, written) else {
            return Ok(None);
        };
        let first_seq = rows.first().map_or(state.last_seq, |r| r.seq);
        for r in &rows {
            ix.note(r.seq, &r.body, r.floor);
        }
        ix.settle(&state);
        Ok(Some(AppendResult {
            first_seq,
            last_seq: state.last_seq,
            epoch: state.epoch,
            window: window.to_string(),
        }))
    }

    fn append_built(&self, rows: &[NewRow], expected: Option<u64>) -> Result<AppendResult> {
        for (i, row) in rows.iter().enumerate() {
            row.validate(i)?;
        }
        let mut build = |_: &Tip<'_>| Ok(Some(rows.to_vec()));
        self.append_locked(expected, &mut build, None)?
            .ok_or_else(StoreError::empty_batch)
    }

    /// Rows from `first_seq` on.
    pub fn rows_since(&self, first_seq: u64) -> Result<Vec<StoredRow>> {
        Ok(Store::read(self, ReadFrom::Seq(first_seq))?.rows)
    }

    /// Removes for good the sealed windows `spec` selects (the current window always
    /// stays; the privacy floor is never lowered); cursors minted before it answer
    /// `history_changed`. Changes nothing when it selects none.
    pub fn prune(&self, spec: &PruneSpec) -> Result<PruneReport> {
        crate::transcript::prune_with(
            self,
            spec,
            |cut, floor| {
                // As the file store does: closed windows with rows below the cut are
                // archived first, so what is kept of them sits in the archive.
                if self.log.archived_before()? < cut {
                    Store::rotate(self)?;
                }
                let removed = self.log.remove_before(cut)?;
                Ok(PruneReport {
                    rows: removed.rows,
                    bytes: removed.bytes,
                    kept_from: cut,
                    floor_seq: floor,
                    epoch: removed.epoch,
                })
            },
            |_| self.log.removed_before(),
        )
    }
}

impl<L: ByteLog> Store for LogStore<L> {
    fn append_rows(&self, rows: &[NewRow], expected_last_seq: Option<u64>) -> Result<AppendResult> {
        if rows.is_empty() {
            return Err(StoreError::empty_batch());
        }
        self.append_built(rows, expected_last_seq)
    }

    fn append_json(
        &self,
        rows_json: &[u8],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        let rows = crate::transcript::input::parse_json_batch(rows_json)?;
        let mut unused = |_: &Tip<'_>| Ok(None);
        self.append_locked(expected_last_seq, &mut unused, Some(&rows))?
            .ok_or_else(StoreError::empty_batch)
    }

    fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>> {
        let mut checked = |tip: &Tip<'_>| {
            let rows = build(tip)?;
            if let Some(rows) = &rows {
                for (i, row) in rows.iter().enumerate() {
                    row.validate(i)?;
                }
            }
            Ok(rows)
        };
        self.append_locked(expected_last_seq, &mut checked, None)
    }

    fn read(&self, from: ReadFrom) -> Result<RowsRead> {
        let keep_from = match from {
            ReadFrom::Seq(seq) => seq,
            ReadFrom::CurrentWindow => self.index_for_read().fold.window().seq(),
        };
        loop {
            let answer: Result<Option<RowsRead>> =
                self.with_refreshed(keep_from, |ix, bodies| {
                    let first_seq = match from {
                        ReadFrom::Seq(seq) => seq,
                        ReadFrom::CurrentWindow => ix.fold.window().seq(),
                    };
                    let at = ix.position(first_seq);
                    let mut bodies: HashMap<u64, Vec<u8>> = bodies.into_iter().collect();
                    if let Some(&first) = ix.seqs.get(at).filter(|&&s| s < keep_from) {
                        // The current window starts before the rows read with the index:
                        // read its bodies too, in the index's epoch (else read again).
                        let more = self.log.bodies(first, ix.last_seq)?;
                        if Some(more.epoch) != ix.epoch {
                            return Ok(None);
                        }
                        bodies.extend(more.rows);
                    }
                    Ok(Some(ix.rows_read(at, &bodies)))
                })?;
            if let Some(read) = answer? {
                return Ok(read);
            }
        }
    }

    fn windows(&self) -> Result<Vec<WindowInfo>> {
        self.with_refreshed(u64::MAX, |ix, _| window_runs(ix.entries.iter(), &ix.fold))
    }

    fn current_window(&self) -> Result<String> {
        self.with_refreshed(u64::MAX, |ix, _| ix.fold.window().to_string())
    }

    fn state(&self) -> Result<StoreState> {
        self.with_refreshed(u64::MAX, |ix, _| StoreState {
            epoch: ix.epoch,
            last_seq: ix.last_seq,
            floor_seq: ix.fold.floor_seq(),
            detail: StateDetail::Log,
        })
    }

    fn floor_seq(&self) -> Result<u64> {
        self.with_refreshed(u64::MAX, |ix, _| ix.fold.floor_seq())
    }

    /// Archives the closed windows (the rows before the current window's first row):
    /// they stay readable, and the log gets a new epoch when rows moved.
    fn rotate(&self) -> Result<RotateReport> {
        let before = self.with_refreshed(u64::MAX, |ix, _| ix.fold.window_first_seq())?;
        let moved = self.log.archive_before(before.unwrap_or(1))?;
        Ok(RotateReport {
            rows: moved.rows,
            bytes: moved.bytes,
            epoch: moved.epoch,
        })
    }

    /// Reads every row again under a fresh index and checks that each reads back as a
    /// row with its own seq and that the seqs run without a gap from the first kept.
    fn verify(&self) -> Result<VerifyReport> {
        *self.index_for_read() = RowIndex::default();
        let removed_before = self.log.removed_before()?;
        let archived_before = self.log.archived_before()?;
        self.with_refreshed(u64::MAX, |ix, _| {
            let mut live = RowCounts::default();
            let mut archive = RowCounts::default();
            let mut violations = 0u64;
            let mut first_violation = None;
            let mut expected = removed_before;
            for (e, &seq) in ix.entries.iter().zip(&ix.seqs) {
                let report = if seq < archived_before {
                    &mut archive
                } else {
                    &mut live
                };
                if e.head.is_some() {
                    report.rows += 1;
                } else {
                    report.malformed += 1;
                }
                if seq != expected {
                    violations += 1;
                    first_violation.get_or_insert_with(|| {
                        format!("seq {seq} where seq {expected} was expected (a gap)")
                    });
                }
                expected = seq + 1;
            }
            VerifyReport {
                ok: violations == 0 && live.malformed == 0 && archive.malformed == 0,
                epoch: ix.epoch,
                last_seq: ix.last_seq,
                floor_seq: ix.fold.floor_seq(),
                live,
                archive,
                seq_violations: violations,
                first_seq_violation: first_violation,
                detail: VerifyDetail::Log,
            }
        })
    }

    /// Nothing to repair: a batch is appended whole or not at all.
    fn recover(&self) -> Result<RecoveryReport> {
        self.with_refreshed(u64::MAX, |ix, _| RecoveryReport {
            changed: false,
            epoch: ix.epoch,
            detail: RecoveryDetail::Log,
        })
    }

    fn prune(&self, spec: &PruneSpec) -> Result<PruneReport> {
        LogStore::prune(self, spec)
    }

    fn identity(&self) -> String {
        self.log.identity()
    }

    fn page(
        &self,
        _start: Instant,
        _limit: Duration,
        run: &mut RunPage<'_, RowHead>,
    ) -> std::result::Result<(), PageError> {
        self.with_refreshed(u64::MAX, |ix, _| {
            run(&super::page::SeqSource::new(
                ix,
                super::page::LogBodies(&self.log),
            ));
        })
        .map_err(|e| {
            PageError::Unavailable(format!("the transcript cannot be read right now: {e}"))
        })
    }
}
