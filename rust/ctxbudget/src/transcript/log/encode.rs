//! The one encode loop: a batch of incoming rows becomes log rows — seqs handed out
//! after the last one, each row's window, its line encoded and checked as every store
//! checks it, its floor flag.

use crate::store::{Result, StoreError};
use crate::transcript::input::Incoming;
use crate::transcript::{WindowFold, WindowId};

use super::LogRow;

/// The highest seq any backend hands out (PostgreSQL's `bigint` bounds it; every
/// backend keeps to it, so a transcript moves between them).
pub(crate) const MAX_SEQ: u64 = i64::MAX as u64 - 1;

/// Encodes `incoming` as the rows after `last_seq` of a log whose rows `fold` has
/// folded; returns them and the window of the last one, every seq at most `max_seq`.
pub(crate) fn encode_batch(
    incoming: &[Incoming<'_>],
    last_seq: u64,
    fold: &WindowFold,
    max_row_bytes: usize,
    max_seq: u64,
) -> Result<(Vec<LogRow>, WindowId)> {
    if incoming.is_empty() {
        return Err(StoreError::empty_batch());
    }
    let first = last_seq
        .checked_add(1)
        .and_then(|f| f.checked_add(incoming.len() as u64 - 1).map(|l| (f, l)))
        .filter(|&(_, l)| l <= max_seq)
        .map(|(f, _)| f)
        .ok_or_else(|| {
            StoreError::InvalidArgument(
                "no seq is left to hand out; the transcript cannot grow, start a new \
                 conversation"
                    .to_owned(),
            )
        })?;
    let ts = crate::store::now_rfc3339();
    let mut window = fold.window();
    let mut rows = Vec::with_capacity(incoming.len());
    for (i, row) in incoming.iter().enumerate() {
        let seq = first + i as u64;
        window = WindowFold::next_window(window, seq, row.kind());
        let (mut line, head) =
            row.encode_checked(i, seq, &window.to_string(), &ts, max_row_bytes)?;
        line.pop();
        rows.push(LogRow {
            seq,
            body: line,
            floor: head.is_floor(),
        });
    }
    Ok((rows, window))
}
