//! The file store ([`History`]) as a [`Store`]: the row-level seam over its byte files.
//! Most calls are the store's own; a prune's cut is the transcript's to choose
//! ([`prune_cut`]), the bytes below it the file store's to remove.

use std::time::{Duration, Instant};

use super::{prune_cut, BuildBatch, NewRow, PruneSpec, RowHead, Store};
use crate::store::file_page::FileSource;
use crate::store::page::{PageError, RunPage};
use crate::store::{
    AppendResult, History, PruneReport, ReadFrom, RecoveryReport, Result, RotateReport, RowsRead,
    StoreError, StoreState, VerifyReport, WindowInfo,
};

impl Store for History {
    fn append_rows(&self, rows: &[NewRow], expected_last_seq: Option<u64>) -> Result<AppendResult> {
        match expected_last_seq {
            Some(n) => self.append_if(rows.to_vec(), n),
            None => self.append(rows.to_vec()),
        }
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
        if spec.is_empty() {
            return Err(StoreError::InvalidArgument(
                "a prune needs a criterion: keep_windows, older_than or below_floor".into(),
            ));
        }
        let rows = self.rows_since(0)?;
        let floor = Store::floor_seq(self)?;
        match prune_cut(&rows, floor, spec, std::time::SystemTime::now()) {
            Some(cut) => self.prune_before(cut),
            None => Ok(PruneReport {
                kept_from: rows.iter().find_map(|r| r.seq).unwrap_or(1),
                floor_seq: floor,
                ..PruneReport::default()
            }),
        }
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
