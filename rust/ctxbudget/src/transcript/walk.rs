//! Window walks over a store's index entries (every indexed line, oldest first): the
//! window of each row and the contiguous window runs. Every store's reads and
//! `windows()` are these walks, written once here.

use super::head::RowEntry;
use super::{BoundaryKind, WindowFold, WindowId};
use crate::store::WindowInfo;

/// Contiguous window runs of `entries` (every indexed line, oldest first) with their
/// item counts; `retracted` is the fold that has seen every retraction. Any store's
/// `windows()` is this walk over its entries.
pub(crate) fn window_runs<'a>(
    entries: impl Iterator<Item = &'a RowEntry>,
    retracted: &WindowFold,
) -> Vec<WindowInfo> {
    let mut fold = WindowFold::new();
    let mut out: Vec<WindowInfo> = Vec::new();
    for e in entries {
        let Some(h) = &e.head else {
            if e.reset_like {
                // A reset that does not parse still opens a (floor) window.
                out.push(WindowInfo {
                    window_id: "w:?".into(),
                    boundary_kind: BoundaryKind::Reset.as_str().into(),
                    first_seq: 0,
                    item_count: 0,
                });
            }
            continue;
        };
        if fold.note_head(h.as_head()) || out.is_empty() {
            out.push(WindowInfo {
                window_id: fold.window().to_string(),
                boundary_kind: fold.window_kind_name().to_owned(),
                first_seq: h.seq,
                item_count: 0,
            });
        }
        let item = h.as_head().is_item();
        if item && !retracted.is_retracted(h.seq) {
            if let Some(w) = out.last_mut() {
                w.item_count += 1;
            }
        }
    }
    out
}

/// The window of each of `entries`, a run of indexed lines that ends at the store's
/// last row: the fold's to say — the window open before the first of them, then
/// boundaries as they come.
pub(crate) fn windows_of<'a>(
    entries: impl Iterator<Item = &'a RowEntry> + Clone,
    fold: &WindowFold,
) -> Vec<WindowId> {
    let mut window = entries
        .clone()
        .find_map(|e| e.head.as_ref())
        .map_or(fold.window(), |h| fold.window_of(h.seq.saturating_sub(1)));
    entries
        .map(|e| {
            if let Some(h) = e.head.as_ref() {
                window = WindowFold::next_window(window, h.seq, &h.kind);
            }
            window
        })
        .collect()
}
