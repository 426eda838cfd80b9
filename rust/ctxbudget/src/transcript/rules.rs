//! The one rule table for rows: which fields a row has, what each part type requires,
//! what metadata each kind requires. Every path that accepts a row checks it here —
//! rows built in Rust ([`NewRow`](crate::transcript::NewRow)), JSON values, and JSON text
//! validated without building values (the Python binding's path) — so no two paths can
//! disagree about what a valid row is.

use super::kinds::{BoundaryKind, PartType, RowKind, BOUNDARY_KINDS, PART_TYPES};

/// Fields a caller writes; every other field is refused.
pub const ROW_FIELDS: &[&str] = &["kind", "role", "parts", "meta"];

/// Fields the store assigns (refused with a hint to leave them out).
pub const STORE_FIELDS: &[&str] = &["seq", "id", "window", "ts"];

/// What a required field must hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A JSON string.
    Str,
    /// Any JSON value, present.
    Present,
}

impl PartType {
    /// The fields a part of this type requires (besides `type`).
    pub const fn required(self) -> &'static [(&'static str, Need)] {
        match self {
            PartType::Text => &[("text", Need::Str)],
            PartType::ToolCall => &[("id", Need::Str), ("name", Need::Str)],
            PartType::ToolResult => &[("call_id", Need::Str), ("output", Need::Present)],
            PartType::Media => &[("media_type", Need::Str)],
        }
    }
}

/// What a field of an object holds, as far as the rules care.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// Absent.
    Missing,
    /// A JSON string.
    Str,
    /// Any other JSON value (including `null`).
    Other,
}

/// A broken rule: the field (`kind`, `parts[0].text`, `meta.retracts`) and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    /// Path of the field within the row (empty: the row itself).
    pub field: String,
    /// What is wrong and what is expected.
    pub reason: String,
}

impl RuleError {
    fn new(field: impl Into<String>, reason: impl Into<String>) -> RuleError {
        RuleError {
            field: field.into(),
            reason: reason.into(),
        }
    }
}

/// Checks a top-level key of a row object.
pub fn check_row_field(key: &str) -> Result<(), RuleError> {
    if ROW_FIELDS.contains(&key) {
        Ok(())
    } else if STORE_FIELDS.contains(&key) {
        Err(RuleError::new(
            key,
            "is assigned by the store; leave it out",
        ))
    } else {
        Err(RuleError::new(
            key,
            format!("is not a row field (expected {})", ROW_FIELDS.join(", ")),
        ))
    }
}

/// Parses a required enum field (`kind`, `role`) given as text (`None`: absent).
pub fn check_name<T: std::str::FromStr<Err = super::UnknownName>>(
    field: &str,
    value: Option<&str>,
) -> Result<T, RuleError> {
    match value {
        None => Err(RuleError::new(field, "is required")),
        Some(v) => v.parse::<T>().map_err(|e| {
            RuleError::new(
                field,
                format!("is {:?}; expected one of {}", e.value, e.expected),
            )
        }),
    }
}

/// Checks part `i`: its `type` (given as text, `None` if absent or not a string) and
/// the fields that type requires, read through `field`.
pub fn check_part(
    i: usize,
    ty: Option<&str>,
    field: impl Fn(&str) -> Field,
) -> Result<PartType, RuleError> {
    let path = |name: &str| format!("parts[{i}].{name}");
    let ty_text = ty.unwrap_or("");
    let Ok(ty) = ty_text.parse::<PartType>() else {
        return Err(RuleError::new(
            path("type"),
            format!("is {ty_text:?}; expected one of {}", PART_TYPES.join(", ")),
        ));
    };
    for &(name, need) in ty.required() {
        match (field(name), need) {
            (Field::Missing, _) => return Err(RuleError::new(path(name), "is required")),
            (Field::Other, Need::Str) => {
                return Err(RuleError::new(path(name), "must be a string"))
            }
            _ => {}
        }
    }
    Ok(ty)
}

/// Checks the metadata a row of `kind` requires: a boundary names its
/// [`BoundaryKind`], a retraction names the seq it hides.
pub fn check_kind_meta(
    kind: RowKind,
    boundary_kind: Option<&str>,
    retracts: Option<u64>,
) -> Result<(), RuleError> {
    match kind {
        RowKind::Boundary
            if boundary_kind
                .and_then(|b| b.parse::<BoundaryKind>().ok())
                .is_none() =>
        {
            Err(RuleError::new(
                "meta.boundary_kind",
                format!(
                    "must be {} on a boundary row",
                    BOUNDARY_KINDS
                        .iter()
                        .map(|b| format!("{b:?}"))
                        .collect::<Vec<_>>()
                        .join(" or ")
                ),
            ))
        }
        RowKind::Retraction if retracts.is_none() => Err(RuleError::new(
            "meta.retracts",
            "must be the seq (an integer) of the row to hide",
        )),
        _ => Ok(()),
    }
}

/// Whether a row holds a quarantined request and so is never context, never an item:
/// a `rejected` row, or any row whose `meta.rejected` is set (SPEC §5 words a quarantine
/// as an empty assistant message carrying the original there). Judged from the kind and
/// the presence of a non-null `meta.rejected`, so every reader fails closed the same way.
pub fn is_quarantined(kind: &str, has_rejected_meta: bool) -> bool {
    has_rejected_meta || kind == RowKind::Rejected.as_str()
}

/// Whether a row of `kind` with this `boundary_kind` is a privacy floor: a boundary that
/// is not a rollover (a reset, or a boundary whose kind is missing or unknown — fail
/// closed).
pub fn is_floor(kind: &str, boundary_kind: Option<&str>) -> bool {
    kind == RowKind::Boundary.as_str() && boundary_kind != Some(BoundaryKind::Rollover.as_str())
}
