//! The file store's append entry points: rows (built, JSON values or JSON bytes),
//! conditional and compound appends, each encoded here — windows stamped, lines checked,
//! the floor raised — and handed to the byte level ([`History::append_lines`]) as lines.

use serde_json::Value;

use super::input as row;
use super::{BuildBatch, NewRow, Row, Tip, WindowFold};
use crate::store::{AppendResult, EncodedLines, History, Index, Locked, Result, StoreError};

impl History {
    /// Appends `rows` as one all-or-nothing batch, durable before this returns.
    pub fn append(&self, rows: Vec<NewRow>) -> Result<AppendResult> {
        if rows.is_empty() {
            return Err(StoreError::empty_batch());
        }
        let mut locked = self.lock()?;
        self.append_locked(&mut locked, &rows)
    }

    /// Validates JSON rows (objects with `kind`, `role`, `parts`, `meta`) and appends
    /// them as one batch.
    pub fn append_json(&self, rows: Vec<Value>) -> Result<AppendResult> {
        let rows = rows
            .into_iter()
            .enumerate()
            .map(|(i, v)| NewRow::from_value(i, v))
            .collect::<Result<Vec<_>>>()?;
        self.append(rows)
    }

    /// Appends the committed reset that takes the place of a soft clear recovery moved
    /// out with a torn tail (its bytes are kept in `recovered/`): the floor is written
    /// again, later, so stricter — fail closed.
    pub(crate) fn append_recovered_floor(&self, locked: &mut Locked<'_>) -> Result<AppendResult> {
        let floor = super::reset_row().with_meta("recovered_floor", true);
        self.append_locked(locked, &[floor])
    }

    /// Appends rows built in Rust under a hold of the lock the caller has: a host's
    /// rows, a rollover's trigger, a quarantined original, the recovered floor.
    pub(crate) fn append_locked(
        &self,
        locked: &mut Locked<'_>,
        rows: &[NewRow],
    ) -> Result<AppendResult> {
        // Every batch built in Rust (a host's rows, a rollover's trigger, a quarantined
        // original) meets the rules JSON rows meet, before anything is written.
        for (i, row) in rows.iter().enumerate() {
            row.validate(i)?;
        }
        let incoming: Vec<row::Incoming<'_>> = rows.iter().map(row::Incoming::Built).collect();
        self.append_encoded(locked, &incoming)
    }

    /// Appends a batch given as UTF-8 JSON: a list of row objects with `kind`, `role`,
    /// `parts` and `meta`. Rows are validated without building value trees and their
    /// `parts` and `meta` are stored as written — the fast path for hosts that already
    /// hold JSON (the Python binding uses it).
    pub fn append_json_bytes(&self, rows_json: &[u8]) -> Result<AppendResult> {
        self.append_json_bytes_if(rows_json, None)
    }

    /// [`append_json_bytes`](Self::append_json_bytes), conditional on the store's last
    /// seq: with `Some(n)` the batch is written only if seq `n` is still the last row
    /// (`0`: the store is empty), else [`StoreError::Conflict`] and nothing is written.
    /// The check and the write happen under one hold of the history lock, so two
    /// writers (threads or processes) that decided on the same state cannot both commit.
    pub fn append_json_bytes_if(
        &self,
        rows_json: &[u8],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        let rows: Vec<row::Incoming<'_>> = row::parse_json_batch(rows_json)?
            .into_iter()
            .map(row::Incoming::Raw)
            .collect();
        let mut locked = self.lock()?;
        self.check_expected(&mut locked, expected_last_seq)?;
        self.append_encoded(&mut locked, &rows)
    }

    /// [`append`](Self::append), conditional on the store's last seq (see
    /// [`append_json_bytes_if`](Self::append_json_bytes_if)).
    pub fn append_if(&self, rows: Vec<NewRow>, expected_last_seq: u64) -> Result<AppendResult> {
        if rows.is_empty() {
            return Err(StoreError::empty_batch());
        }
        let mut locked = self.lock()?;
        self.check_expected(&mut locked, Some(expected_last_seq))?;
        self.append_locked(&mut locked, &rows)
    }

    /// See [`Store::append_with`](super::Store::append_with).
    pub fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>> {
        let mut locked = self.lock()?;
        self.writable(&mut locked)?;
        self.check_expected(&mut locked, expected_last_seq)?;
        let rows = {
            let ix = Self::index(&locked)?;
            let reader = |seq: u64| self.row_at(ix, seq);
            let tip = Tip {
                last_seq: ix.last_seq,
                next_seq: ix.next_seq(),
                fold: &ix.fold,
                rows: &reader,
            };
            build(&tip)?
        };
        match rows {
            None => Ok(None),
            Some(rows) if rows.is_empty() => Err(StoreError::empty_batch()),
            Some(rows) => self.append_locked(&mut locked, &rows).map(Some),
        }
    }

    /// The readable row with this seq, parsed, in the window the index's fold gives it.
    fn row_at(&self, ix: &Index, seq: u64) -> Result<Option<Row>> {
        Ok(self
            .line_at(ix, seq)?
            .and_then(|raw| Row::parse(seq, ix.fold.window_of(seq), &raw)))
    }

    /// Appends `rows` as one batch: the encode loop of every file append, run under the
    /// lock for the seqs the store hands out — each row's window follows the boundary
    /// rows before it (in the batch too), its line is encoded and checked, and a floor
    /// among them raises the batch's floor.
    fn append_encoded(
        &self,
        locked: &mut Locked<'_>,
        rows: &[row::Incoming<'_>],
    ) -> Result<AppendResult> {
        let max_row_bytes = self.options().max_row_bytes;
        let mut encode = |ix: &Index, first: u64, ts: &str| -> Result<EncodedLines> {
            let mut window = ix.fold.window();
            let mut floor = ix.fold.floor_seq();
            let mut lines = Vec::with_capacity(rows.len());
            for (i, row) in rows.iter().enumerate() {
                let seq = first + i as u64;
                window = WindowFold::next_window(window, seq, row.kind());
                let window_text = window.to_string();
                let (line, head) = row.encode_checked(i, seq, &window_text, ts, max_row_bytes)?;
                if head.is_floor() {
                    floor = seq;
                }
                lines.push((line, head));
            }
            Ok(EncodedLines {
                lines,
                floor,
                window: window.to_string(),
            })
        };
        self.append_lines(locked, rows.len(), &mut encode)
    }
}
