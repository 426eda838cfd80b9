//! The transcript layer: the only module that knows what rows *mean*.
//!
//! The byte store ([`crate::store`]) keeps framed, checksummed lines and hands out
//! seqs; this layer names the row vocabulary ([`RowKind`], [`Role`], [`PartType`],
//! [`BoundaryKind`]), holds the one rule table every writer validates against
//! ([`rules`]), validates and encodes the rows written ([`NewRow`]), reads the heads of
//! stored lines (the byte stores are handed its line reader and never parse a row
//! themselves), parses committed rows into [`Row`]s, and folds them into windows
//! ([`WindowFold`]): current and previous window, privacy floor, retractions, visible
//! rows, advisory claims, open tool calls, a scheduled `new_context`, the last user
//! message. The store's index, the `session_history` scanner and the Python `Session`
//! all read that fold, so each rule is written once.

mod entry;
mod file_append;
mod file_store;
mod fold;
pub(crate) mod head;
pub(crate) mod input;
mod kinds;
pub mod log;
mod ops;
mod retention;
mod row;
pub mod rules;
mod seam;
mod walk;
mod window;

pub use entry::Transcript;
#[cfg(feature = "fuzzing")]
pub use file_store::fuzz_scan;
pub use file_store::History;
pub use fold::{claims_of, is_scheduled, Head, WindowFold, NEW_CONTEXT};
pub(crate) use head::{RowEntry, RowHead, Rows};
#[cfg(feature = "fuzzing")]
pub use input::fuzz_rules;
pub use input::NewRow;
pub use kinds::{
    BoundaryKind, PartType, Role, RolloverReason, RowKind, UnknownName, BOUNDARY_KINDS, KINDS,
    PART_TYPES, ROLES, ROLLOVER_REASONS,
};
pub use ops::{
    clear_soft, quarantine, rejected_row, reset_row, retract_and_quarantine, rollover, LeadIn,
    LeadInContext, RenderLeadIn, RolloverSpec,
};
pub(crate) use retention::prune_with;
pub use retention::{prune_cut, PruneSpec};
pub use row::{OpenCall, Row};
pub use seam::{BuildBatch, Store, Tip};
pub(crate) use walk::{window_runs, windows_of};
pub use window::{WindowId, WindowIdError};
