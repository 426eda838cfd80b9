//! The transcript's compound writes, each one batch under one hold of the store's lock:
//! the rows are built from the state the store holds at that moment (its last seq, the
//! window fold, stored rows), so no decision rests on a prediction.
//!
//! - [`rollover`]: boundary + lead-in + trigger; the lead-in is rendered from the window
//!   ID the boundary actually gets ([`LeadIn`]).
//! - [`quarantine`]: the retraction of a stored row + the quarantine row holding its
//!   content. A crash leaves both or neither.
//! - [`clear_soft`]: a reset boundary (the privacy floor) naming the window it closes.

use std::fmt;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::kinds::{BoundaryKind, Role, RolloverReason, RowKind};
use super::window::WindowId;
use super::{Store, Tip};
use crate::store::{Result, StoreError};
use crate::transcript::NewRow;

/// What a lead-in's text is rendered from, under the store's lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeadInContext {
    /// The window the rollover opens (the boundary row's seq).
    pub window: WindowId,
    /// The window it seals.
    pub previous_window: WindowId,
}

/// A rendering function for a lead-in.
pub type RenderLeadIn = dyn Fn(&LeadInContext) -> std::result::Result<String, String> + Send + Sync;

/// The text of a rollover's lead-in row.
#[derive(Clone)]
pub enum LeadIn {
    /// Fixed text.
    Text(String),
    /// Rendered under the lock from the window IDs the rollover really writes; an `Err`
    /// aborts the rollover (nothing is written) with that message.
    Render(Arc<RenderLeadIn>),
}

impl LeadIn {
    /// A lead-in rendered from the window IDs under the lock.
    pub fn render(
        f: impl Fn(&LeadInContext) -> std::result::Result<String, String> + Send + Sync + 'static,
    ) -> LeadIn {
        LeadIn::Render(Arc::new(f))
    }

    /// A lead-in from a template: `{window_id}` and `{previous_window_id}` are replaced
    /// by the IDs the rollover writes (`w:N`); nothing else is interpreted.
    pub fn template(template: impl Into<String>) -> LeadIn {
        let template = template.into();
        LeadIn::render(move |ctx| {
            Ok(template
                .replace("{window_id}", &ctx.window.to_string())
                .replace("{previous_window_id}", &ctx.previous_window.to_string()))
        })
    }

    fn text(&self, ctx: &LeadInContext) -> Result<String> {
        match self {
            LeadIn::Text(t) => Ok(t.clone()),
            LeadIn::Render(f) => f(ctx).map_err(|why| {
                StoreError::InvalidArgument(format!(
                    "rendering the lead-in of window {} failed ({why}); nothing was written",
                    ctx.window
                ))
            }),
        }
    }
}

impl Default for LeadIn {
    fn default() -> LeadIn {
        LeadIn::Text(String::new())
    }
}

impl fmt::Debug for LeadIn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LeadIn::Text(t) => f.debug_tuple("Text").field(t).finish(),
            LeadIn::Render(_) => f.write_str("Render(..)"),
        }
    }
}

impl From<String> for LeadIn {
    fn from(text: String) -> LeadIn {
        LeadIn::Text(text)
    }
}

impl From<&str> for LeadIn {
    fn from(text: &str) -> LeadIn {
        LeadIn::Text(text.to_owned())
    }
}

/// How a rollover is recorded.
#[derive(Clone, Debug, Default)]
pub struct RolloverSpec {
    /// Idempotency key: a second rollover with the same id writes nothing.
    pub rollover_id: String,
    /// `usable_limit`, `new_context` or `manual` (see [`RolloverReason`]).
    pub reason: String,
    /// `Some("model")` when `new_context` asked for it.
    pub requested_by: Option<String>,
    /// The lead-in row's text, fixed or rendered from the window IDs under the lock.
    pub lead_in: LeadIn,
    /// The triggering message or continuation row, committed in the same batch.
    pub trigger: Option<NewRow>,
    /// Token figures and other metadata for the boundary row.
    pub figures: Map<String, Value>,
    /// Seal only if the store's last seq is still this one (the state the rollover was
    /// decided on); otherwise [`StoreError::Conflict`] and nothing is written.
    pub expected_last_seq: Option<u64>,
}

fn structural(kind: RowKind) -> NewRow {
    NewRow {
        kind: kind.as_str().to_owned(),
        role: Role::System.as_str().to_owned(),
        parts: Vec::new(),
        meta: Map::new(),
    }
}

/// Seals the current window: boundary row, lead-in row and the trigger, as one batch.
/// Idempotent per `rollover_id`: a repeat returns the window the first one opened and
/// writes nothing. Returns the new window.
pub fn rollover(store: &dyn Store, spec: RolloverSpec) -> Result<WindowId> {
    if spec.rollover_id.is_empty() {
        return Err(StoreError::InvalidArgument(
            "rollover_id must not be empty".to_owned(),
        ));
    }
    let reason: RolloverReason = spec.reason.parse().map_err(|e: super::UnknownName| {
        StoreError::InvalidArgument(format!("{e}; pass one of them as reason"))
    })?;
    if let Some(t) = &spec.trigger {
        if !t.kind.parse::<RowKind>().is_ok_and(RowKind::can_trigger) {
            return Err(StoreError::InvalidArgument(format!(
                "a rollover trigger must be a message or continuation row, not {:?}",
                t.kind
            )));
        }
    }
    let mut opened = None;
    let mut build = |tip: &Tip<'_>| -> Result<Option<Vec<NewRow>>> {
        if let Some(window) = tip.fold.rollover_window(&spec.rollover_id) {
            opened = Some(window);
            return Ok(None);
        }
        if let Some(expected_last_seq) = spec.expected_last_seq {
            if tip.last_seq != expected_last_seq {
                return Err(StoreError::Conflict {
                    expected_last_seq,
                    last_seq: tip.last_seq,
                });
            }
        }
        // The boundary is the batch's first row: the window is named after the seq the
        // store will give it.
        let first = tip.next_seq.ok_or_else(|| {
            StoreError::InvalidArgument(format!(
                "no seq is left to hand out after seq {}: the transcript cannot grow, start \
                 a new one",
                tip.last_seq
            ))
        })?;
        let ctx = LeadInContext {
            window: WindowId(first),
            previous_window: tip.fold.window(),
        };
        let mut boundary = NewRow {
            meta: spec.figures.clone(),
            ..structural(RowKind::Boundary)
        }
        .with_meta("boundary_kind", BoundaryKind::Rollover.as_str())
        .with_meta("rollover_id", spec.rollover_id.as_str())
        .with_meta("reason", reason.as_str())
        .with_meta("previous_window", ctx.previous_window.to_string());
        if let Some(by) = &spec.requested_by {
            boundary = boundary.with_meta("requested_by", by.as_str());
        }
        let lead_in = NewRow::text(
            RowKind::LeadIn.as_str(),
            Role::User.as_str(),
            &spec.lead_in.text(&ctx)?,
        )
        .with_meta("rollover_id", spec.rollover_id.as_str());
        let mut rows = vec![boundary, lead_in];
        rows.extend(spec.trigger.clone());
        opened = Some(ctx.window);
        Ok(Some(rows))
    };
    let appended = store.append_with(None, &mut build)?;
    if let Some(a) = &appended {
        // The boundary is the batch's first row: the window is named after its seq.
        debug_assert_eq!(opened, Some(WindowId(a.first_seq)));
        return Ok(WindowId(a.first_seq));
    }
    opened.ok_or_else(|| StoreError::internal("rollover wrote nothing and found no window"))
}

/// Soft clear: a `reset` boundary row (the privacy floor) naming the window it closes.
/// Returns its seq.
pub fn clear_soft(store: &dyn Store, expected_last_seq: Option<u64>) -> Result<u64> {
    let mut build = |tip: &Tip<'_>| -> Result<Option<Vec<NewRow>>> {
        Ok(Some(vec![reset_row().with_meta(
            "previous_window",
            tip.fold.window().to_string(),
        )]))
    };
    let appended = store.append_with(expected_last_seq, &mut build)?;
    appended
        .map(|a| a.first_seq)
        .ok_or_else(|| StoreError::internal("clear_soft wrote nothing"))
}

/// Quarantines stored row `seq`: a retraction hiding it and a quarantine row holding its
/// content (`meta.rejected`), one batch under one hold of the lock, read from the store
/// itself (no copy held by the caller can differ from what is hidden). Only if the
/// store's last seq is still `expected_last_seq` (when given). Returns the seq of the
/// quarantine row.
pub fn quarantine(store: &dyn Store, seq: u64, expected_last_seq: Option<u64>) -> Result<u64> {
    let mut build = |tip: &Tip<'_>| -> Result<Option<Vec<NewRow>>> {
        if seq <= tip.fold.floor_seq() {
            // Its record would carry the row's text above the floor.
            return Err(StoreError::InvalidArgument(format!(
                "row {seq} is behind the privacy floor (seq {}); it is never sent or shown, \
                 so there is nothing to quarantine",
                tip.fold.floor_seq()
            )));
        }
        let row = tip.row(seq)?.ok_or_else(|| {
            StoreError::InvalidArgument(format!(
                "there is no readable row with seq {seq} to quarantine; the last seq is {}",
                tip.last_seq
            ))
        })?;
        if !row.kind.is_item() {
            return Err(StoreError::InvalidArgument(format!(
                "row {seq} is a {} row; only messages and continuations are quarantined",
                row.kind
            )));
        }
        let original = NewRow {
            kind: row.kind.as_str().to_owned(),
            role: row.role.as_str().to_owned(),
            parts: row.parts,
            meta: row.meta,
        };
        Ok(Some(retract_and_quarantine(seq, original)?.to_vec()))
    };
    let appended = store.append_with(expected_last_seq, &mut build)?;
    appended
        .map(|a| a.last_seq)
        .ok_or_else(|| StoreError::internal("quarantine wrote nothing"))
}

/// The retraction of `seq` and the quarantine row of `original`, in batch order.
pub fn retract_and_quarantine(seq: u64, original: NewRow) -> Result<[NewRow; 2]> {
    let retraction = structural(RowKind::Retraction).with_meta("retracts", seq);
    Ok([retraction, rejected_row(original)?])
}

/// A quarantine row: empty and from the assistant, the original `{role, parts, meta}`
/// inside `meta.rejected`, so it is never sent to a provider. The original must be a
/// valid row itself: what is kept for display and export is a row like any other.
pub fn rejected_row(original: NewRow) -> Result<NewRow> {
    original.validate(0)?;
    let mut rejected = Map::new();
    rejected.insert("role".into(), Value::from(original.role));
    rejected.insert("parts".into(), Value::Array(original.parts));
    rejected.insert("meta".into(), Value::Object(original.meta));
    Ok(NewRow {
        role: Role::Assistant.as_str().to_owned(),
        ..structural(RowKind::Rejected)
    }
    .with_meta("rejected", Value::Object(rejected)))
}

/// A soft clear's boundary row: `reset`, reason `manual`.
pub fn reset_row() -> NewRow {
    structural(RowKind::Boundary)
        .with_meta("boundary_kind", BoundaryKind::Reset.as_str())
        .with_meta("reason", RolloverReason::Manual.as_str())
}
