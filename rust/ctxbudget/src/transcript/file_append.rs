//! The file store's append entry points: rows (built, JSON values or JSON bytes),
//! conditional and compound appends, each encoded here — windows stamped, lines checked,
//! the floor raised — and handed to the byte level (`FileStore::append_batch`) as lines.

use serde_json::Value;

use super::input as row;
use super::{BuildBatch, History, NewRow, Row, RowHead, Tip, WindowFold};
use crate::store::{AppendResult, EncodedLines, Index, Result, StoreError};

impl History {
    /// Appends `rows` as one all-or-nothing batch, durable before this returns.
    pub fn append(&self, rows: Vec<NewRow>) -> Result<AppendResult> {
        self.append_built(&rows, None)
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
        self.append_incoming(&rows, expected_last_seq)
    }

    /// [`append`](Self::append), conditional on the store's last seq (see
    /// [`append_json_bytes_if`](Self::append_json_bytes_if)).
    pub fn append_if(&self, rows: Vec<NewRow>, expected_last_seq: u64) -> Result<AppendResult> {
        self.append_built(&rows, Some(expected_last_seq))
    }

    /// See [`Store::append_with`](super::Store::append_with).
    pub fn append_with(
        &self,
        expected_last_seq: Option<u64>,
        build: &mut BuildBatch<'_>,
    ) -> Result<Option<AppendResult>> {
        let max_row_bytes = self.options().max_row_bytes;
        self.append_batch(
            expected_last_seq,
            |ix| {
                let reader = |seq: u64| self.row_at(ix, seq);
                let tip = Tip {
                    last_seq: ix.last_seq(),
                    next_seq: ix.next_seq(),
                    fold: ix.fold(),
                    rows: &reader,
                };
                match build(&tip)? {
                    Some(rows) if rows.is_empty() => Err(StoreError::empty_batch()),
                    Some(rows) => validate(&rows).map(|()| Some(rows)),
                    None => Ok(None),
                }
            },
            |rows, fold, first, ts| {
                let incoming: Vec<row::Incoming<'_>> =
                    rows.iter().map(row::Incoming::Built).collect();
                encode_rows(fold, &incoming, first, ts, max_row_bytes)
            },
        )
    }

    /// Appends rows built in Rust (a host's rows, a rollover's trigger, a quarantined
    /// original): they meet the rules JSON rows meet, before anything is written.
    pub(super) fn append_built(
        &self,
        rows: &[NewRow],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        if rows.is_empty() {
            return Err(StoreError::empty_batch());
        }
        validate(rows)?;
        let incoming: Vec<row::Incoming<'_>> = rows.iter().map(row::Incoming::Built).collect();
        self.append_incoming(&incoming, expected_last_seq)
    }

    /// Appends `rows` as one batch under one hold of the lock, conditional on the last
    /// seq when `expected_last_seq` is given.
    fn append_incoming(
        &self,
        rows: &[row::Incoming<'_>],
        expected_last_seq: Option<u64>,
    ) -> Result<AppendResult> {
        let max_row_bytes = self.options().max_row_bytes;
        self.append_batch(
            expected_last_seq,
            |_| Ok(Some(())),
            |(), fold, first, ts| encode_rows(fold, rows, first, ts, max_row_bytes),
        )?
        .ok_or_else(|| StoreError::internal("a batch of rows was built and not written"))
    }

    /// The readable row with this seq, parsed, in the window the index's fold gives it.
    fn row_at(&self, ix: &Index<super::Rows>, seq: u64) -> Result<Option<Row>> {
        Ok(self
            .line_at(ix, seq)?
            .and_then(|raw| Row::parse(seq, ix.fold().window_of(seq), &raw)))
    }
}

/// Checks rows built in Rust against the rules every writer meets.
fn validate(rows: &[NewRow]) -> Result<()> {
    rows.iter()
        .enumerate()
        .try_for_each(|(i, row)| row.validate(i))
}

/// The encode loop of every file append, run under the store's lock for the seqs it
/// hands out (from `first`): each row's window follows the boundary rows before it (in
/// the batch too, from the fold of the rows stored), its line is encoded and checked,
/// and a floor among them raises the batch's floor.
pub(super) fn encode_rows(
    fold: &WindowFold,
    rows: &[row::Incoming<'_>],
    first: u64,
    ts: &str,
    max_row_bytes: usize,
) -> Result<EncodedLines<RowHead>> {
    let mut window = fold.window();
    let mut floor = fold.floor_seq();
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
}
