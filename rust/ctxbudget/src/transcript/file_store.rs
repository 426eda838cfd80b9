//! The file store as the transcript layer uses it: [`History`], the byte store's files
//! with their rows read, folded and labelled by this layer ([`Rows`] as its
//! [`FileRows`]), and the row-level [`Store`] seam over it. Most calls are the store's
//! own; a prune's cut is the transcript's to choose ([`prune_with`](super::prune_with)),
//! the bytes below it the file store's to remove.

use std::time::{Duration, Instant};

use super::file_append::encode_rows;
use super::head::{tail_floor_seq, RowEntry};
use super::input::Incoming;
use super::walk::{window_runs, windows_of};
use super::{
    prune_with, reset_row, BuildBatch, NewRow, PruneSpec, RowHead, Rows, Store, WindowFold,
};
use crate::store::file_page::FileSource;
use crate::store::page::{PageError, RunPage};
use crate::store::{
    AppendResult, EncodedLines, FileRows, FileStore, PruneReport, ReadFrom, RecoveryReport, Result,
    RotateReport, RowsRead, StoreState, VerifyReport, WindowInfo,
};

/// A workspace's transcript files (`<ws>/history/`, docs/format.md): the byte store of
/// [`crate::store`], its rows read and folded by this layer. Open it with
/// [`History::open`](FileStore::open); it is the file-backed [`Store`].
pub type History = FileStore<Rows>;

/// The transcript layer's rows, as the file store indexes them: heads read strictly,
/// folded into windows and floors by [`WindowFold`].
impl FileRows for Rows {
    type Fold = WindowFold;

    fn note(fold: &mut WindowFold, head: &RowHead) {
        fold.note_head(head.as_head());
    }

    fn is_floor(head: &RowHead) -> bool {
        head.is_floor()
    }

    fn raise_floor(fold: &mut WindowFold, seq: u64) {
        fold.raise_floor(seq);
    }

    fn floor_seq(fold: &WindowFold) -> u64 {
        fold.floor_seq()
    }

    fn window_seq(fold: &WindowFold) -> u64 {
        fold.window().seq()
    }

    fn window_label(fold: &WindowFold) -> String {
        fold.window().to_string()
    }

    fn window_labels<'a>(
        entries: impl Iterator<Item = &'a RowEntry> + Clone,
        fold: &WindowFold,
    ) -> Vec<String> {
        windows_of(entries, fold)
            .into_iter()
            .map(|w| w.to_string())
            .collect()
    }

    fn window_runs<'a>(
        entries: impl Iterator<Item = &'a RowEntry>,
        fold: &WindowFold,
    ) -> Vec<WindowInfo> {
        window_runs(entries, fold)
    }

    fn tail_floor_seq(tail: &[u8]) -> Option<u64> {
        tail_floor_seq(tail)
    }

    /// A committed reset marked `recovered_floor` (its bytes of the torn tail are kept
    /// in `recovered/`).
    fn recovered_floor(
        fold: &WindowFold,
        seq: u64,
        ts: &str,
        max_row_bytes: usize,
    ) -> Result<EncodedLines<RowHead>> {
        let floor = reset_row().with_meta("recovered_floor", true);
        floor.validate(0)?;
        encode_rows(fold, &[Incoming::Built(&floor)], seq, ts, max_row_bytes)
    }
}

/// Fuzzing entry point (not API): scans `chat` and `archive` as a file store's files
/// with `receipt` as its receipt, derives the index as a reader would, and checks the
/// scanner's own invariants.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_scan(chat: &[u8], archive: &[u8], receipt: &[u8]) {
    crate::store::fuzz_scan::<Rows>(chat, archive, receipt);
}

impl Store for History {
    fn append_rows(&self, rows: &[NewRow], expected_last_seq: Option<u64>) -> Result<AppendResult> {
        self.append_built(rows, expected_last_seq)
    }

    fn append_json(
        &self,
        rows_json: &[u8],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        self.append_json_bytes_if(rows_json, expected_last_seq)
    }

    fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>> {
        History::append_with(self, expected_last_seq, build)
    }

    fn read(&self, from: ReadFrom) -> Result<RowsRead> {
        History::read(self, from)
    }

    fn windows(&self) -> Result<Vec<WindowInfo>> {
        History::windows(self)
    }

    fn current_window(&self) -> Result<String> {
        History::current_window(self)
    }

    fn state(&self) -> Result<StoreState> {
        History::state(self)
    }

    fn floor_seq(&self) -> Result<u64> {
        History::floor_seq(self)
    }

    fn rotate(&self) -> Result<RotateReport> {
        History::rotate(self)
    }

    fn verify(&self) -> Result<VerifyReport> {
        History::verify(self)
    }

    fn recover(&self) -> Result<RecoveryReport> {
        History::recover(self)
    }

    /// Removes for good the sealed windows `spec` selects (the current window always
    /// stays; the privacy floor is never lowered): the cut is the transcript's to choose,
    /// the bytes below it the file store's to remove. Changes nothing when it selects none.
    fn prune(&self, spec: &PruneSpec) -> Result<PruneReport> {
        prune_with(
            self,
            spec,
            |cut, _| self.prune_before(cut),
            |rows| Ok(rows.iter().find_map(|r| r.seq).unwrap_or(1)),
        )
    }

    fn anchor_crc_at(&self, offset: u64) -> Result<Option<u32>> {
        History::anchor_crc_at(self, offset)
    }

    fn identity(&self) -> String {
        self.paths().dir.to_string_lossy().into_owned()
    }

    fn page(
        &self,
        _start: Instant,
        _limit: Duration,
        run: &mut RunPage<'_, RowHead>,
    ) -> std::result::Result<(), PageError> {
        self.with_snapshot(|snap| run(&FileSource::new(snap)))
            .map_err(|e| {
                PageError::Unavailable(format!("the transcript cannot be read right now: {e}"))
            })
    }
}
