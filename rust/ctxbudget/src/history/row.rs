//! Rows: validation of what callers append, and the line the store writes.

use serde::Serialize;
use serde_json::{Map, Value};

use super::error::{HistoryError, Result};

/// Row kinds (SPEC §5).
pub const KINDS: &[&str] = &[
    "message",
    "boundary",
    "lead_in",
    "advisory",
    "continuation",
    "rejected",
    "retraction",
];

/// Row roles.
pub const ROLES: &[&str] = &["user", "assistant", "system", "tool"];

/// Part types.
pub const PART_TYPES: &[&str] = &["text", "tool_call", "tool_result", "media"];

/// Default bound on one serialized row (the scanner skips longer lines).
pub const DEFAULT_MAX_ROW_BYTES: usize = 1 << 20;

/// A validated row, before the store assigns `seq`, `id`, `window` and `ts`.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRow {
    /// One of [`KINDS`].
    pub kind: String,
    /// One of [`ROLES`].
    pub role: String,
    /// Content parts.
    pub parts: Vec<Value>,
    /// Metadata object.
    pub meta: Map<String, Value>,
}

impl NewRow {
    /// A row of `kind` and `role` with one text part.
    pub fn text(kind: &str, role: &str, text: &str) -> NewRow {
        let mut part = Map::new();
        part.insert("type".into(), Value::from("text"));
        part.insert("text".into(), Value::from(text));
        NewRow {
            kind: kind.to_owned(),
            role: role.to_owned(),
            parts: vec![Value::Object(part)],
            meta: Map::new(),
        }
    }

    /// Adds a metadata entry.
    pub fn with_meta(mut self, key: &str, value: impl Into<Value>) -> NewRow {
        self.meta.insert(key.to_owned(), value.into());
        self
    }

    /// Validates a JSON object as a row (`index` names it in errors).
    pub fn from_value(index: usize, value: Value) -> Result<NewRow> {
        let Value::Object(mut obj) = value else {
            return Err(HistoryError::row(index, "", "must be an object"));
        };
        for key in obj.keys() {
            if !matches!(key.as_str(), "kind" | "role" | "parts" | "meta") {
                let why = if matches!(key.as_str(), "seq" | "id" | "window" | "ts") {
                    "is assigned by the store; leave it out"
                } else {
                    "is not a row field (expected kind, role, parts, meta)"
                };
                return Err(HistoryError::row(index, key.as_str(), why));
            }
        }
        let kind = one_of(index, "kind", obj.remove("kind"), KINDS)?;
        let role = one_of(index, "role", obj.remove("role"), ROLES)?;
        let parts = match obj.remove("parts") {
            None => Vec::new(),
            Some(Value::Array(parts)) => parts,
            Some(_) => return Err(HistoryError::row(index, "parts", "must be a list")),
        };
        for (i, part) in parts.iter().enumerate() {
            validate_part(index, i, part)?;
        }
        let meta = match obj.remove("meta") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(HistoryError::row(index, "meta", "must be an object")),
        };
        let row = NewRow {
            kind,
            role,
            parts,
            meta,
        };
        row.validate_kind_meta(index)?;
        Ok(row)
    }

    fn validate_kind_meta(&self, index: usize) -> Result<()> {
        match self.kind.as_str() {
            "boundary" => {
                let bk = self.meta.get("boundary_kind").and_then(Value::as_str);
                if !matches!(bk, Some("rollover" | "reset")) {
                    return Err(HistoryError::row(
                        index,
                        "meta.boundary_kind",
                        "must be \"rollover\" or \"reset\" on a boundary row",
                    ));
                }
            }
            "retraction" if !self.meta.get("retracts").is_some_and(Value::is_u64) => {
                return Err(HistoryError::row(
                    index,
                    "meta.retracts",
                    "must be the seq (an integer) of the row to hide",
                ));
            }
            _ => {}
        }
        Ok(())
    }
}

fn one_of(index: usize, field: &str, value: Option<Value>, allowed: &[&str]) -> Result<String> {
    match value {
        Some(Value::String(s)) if allowed.contains(&s.as_str()) => Ok(s),
        Some(Value::String(s)) => Err(HistoryError::row(
            index,
            field,
            format!("is {s:?}; expected one of {}", allowed.join(", ")),
        )),
        Some(_) => Err(HistoryError::row(index, field, "must be a string")),
        None => Err(HistoryError::row(index, field, "is required")),
    }
}

fn validate_part(index: usize, i: usize, part: &Value) -> Result<()> {
    let field = |name: &str| format!("parts[{i}].{name}");
    let Value::Object(p) = part else {
        return Err(HistoryError::row(
            index,
            format!("parts[{i}]"),
            "must be an object",
        ));
    };
    let require_str = |name: &str| -> Result<()> {
        match p.get(name) {
            Some(Value::String(_)) => Ok(()),
            Some(_) => Err(HistoryError::row(index, field(name), "must be a string")),
            None => Err(HistoryError::row(index, field(name), "is required")),
        }
    };
    let ty = p.get("type").and_then(Value::as_str).unwrap_or("");
    match ty {
        "text" => require_str("text"),
        "tool_call" => {
            require_str("id")?;
            require_str("name")
        }
        "tool_result" => {
            require_str("call_id")?;
            if !p.contains_key("output") {
                return Err(HistoryError::row(index, field("output"), "is required"));
            }
            Ok(())
        }
        "media" => require_str("media_type"),
        other => Err(HistoryError::row(
            index,
            field("type"),
            format!("is {other:?}; expected one of {}", PART_TYPES.join(", ")),
        )),
    }
}

#[derive(Serialize)]
struct Line<'a> {
    seq: u64,
    id: String,
    kind: &'a str,
    role: &'a str,
    window: &'a str,
    parts: &'a [Value],
    meta: &'a Map<String, Value>,
    ts: &'a str,
}

/// The JSON line (with newline) of `row` at `seq` in `window`.
pub(crate) fn encode(row: &NewRow, seq: u64, window: &str, ts: &str) -> Result<Vec<u8>> {
    let line = Line {
        seq,
        id: seq.to_string(),
        kind: &row.kind,
        role: &row.role,
        window,
        parts: &row.parts,
        meta: &row.meta,
        ts,
    };
    let mut out = serde_json::to_vec(&line)
        .map_err(|e| HistoryError::InvalidArgument(format!("row does not serialize: {e}")))?;
    out.push(b'\n');
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn validates_and_names_the_field() {
        let ok =
            json!({"kind": "message", "role": "user", "parts": [{"type": "text", "text": "hi"}]});
        assert!(NewRow::from_value(0, ok).is_ok());
        let bad = json!({"kind": "message", "role": "user", "parts": [{"type": "txt"}]});
        let err = NewRow::from_value(3, bad)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(
            err.contains("row 3") && err.contains("parts[0].type"),
            "{err}"
        );
        let seq = json!({"kind": "message", "role": "user", "seq": 4});
        let err = NewRow::from_value(0, seq)
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.contains("assigned by the store"), "{err}");
        let boundary = json!({"kind": "boundary", "role": "system"});
        assert!(NewRow::from_value(0, boundary).is_err());
    }
}
