//! Committed rows, parsed once into types.

use serde_json::{Map, Value};

use super::kinds::{PartType, Role, RowKind};
use super::window::WindowId;

/// A committed transcript row, parsed: what a host reads instead of raw bytes.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// Sequence number (unique, increasing).
    pub seq: u64,
    /// Stable item ID (the seq as text for rows this library writes).
    pub id: String,
    /// What the row is.
    pub kind: RowKind,
    /// Who it speaks for.
    pub role: Role,
    /// The window it belongs to (derived from boundary rows).
    pub window: WindowId,
    /// Content parts (`{"type": …}` objects).
    pub parts: Vec<Value>,
    /// Metadata.
    pub meta: Map<String, Value>,
    /// Commit time (RFC 3339), when recorded.
    pub ts: Option<String>,
}

/// A tool call found in a row's parts.
#[derive(Debug, Clone, PartialEq)]
pub struct OpenCall {
    /// The call's ID (`parts[].id`), which its result names as `call_id`.
    pub call_id: String,
    /// The tool's name.
    pub name: String,
    /// The arguments as the model sent them (`None` when absent).
    pub arguments: Option<Value>,
    /// Seq of the row that made the call.
    pub seq: u64,
}

impl Row {
    /// Parses one stored line at `seq` in `window`; `None` when it is not an object or
    /// its kind or role is not one this library knows (readers skip such lines).
    pub fn parse(seq: u64, window: WindowId, line: &[u8]) -> Option<Row> {
        let Value::Object(mut obj) = serde_json::from_slice::<Value>(line).ok()? else {
            return None;
        };
        let kind = obj.get("kind")?.as_str()?.parse().ok()?;
        let role = obj.get("role")?.as_str()?.parse().ok()?;
        let id = match obj.remove("id") {
            Some(Value::String(s)) => s,
            Some(Value::Number(n)) => n.to_string(),
            _ => seq.to_string(),
        };
        let parts = match obj.remove("parts") {
            Some(Value::Array(p)) => p,
            _ => Vec::new(),
        };
        let meta = match obj.remove("meta") {
            Some(Value::Object(m)) => m,
            _ => Map::new(),
        };
        let ts = match obj.remove("ts") {
            Some(Value::String(s)) => Some(s),
            _ => None,
        };
        Some(Row {
            seq,
            id,
            kind,
            role,
            window,
            parts,
            meta,
            ts,
        })
    }

    /// The parts of type `ty`.
    pub fn parts_of(&self, ty: PartType) -> impl Iterator<Item = &Map<String, Value>> {
        self.parts.iter().filter_map(move |p| {
            let p = p.as_object()?;
            (p.get("type").and_then(Value::as_str) == Some(ty.as_str())).then_some(p)
        })
    }

    /// The text parts joined with newlines.
    pub fn text(&self) -> String {
        self.parts_of(PartType::Text)
            .filter_map(|p| p.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// A string metadata entry.
    pub fn meta_str(&self, key: &str) -> Option<&str> {
        self.meta.get(key).and_then(Value::as_str)
    }

    /// The tool calls this row makes.
    pub fn tool_calls(&self) -> impl Iterator<Item = OpenCall> + '_ {
        self.parts_of(PartType::ToolCall).map(|p| OpenCall {
            call_id: string_of(p.get("id")),
            name: string_of(p.get("name")),
            arguments: p.get("arguments").cloned(),
            seq: self.seq,
        })
    }

    /// The call IDs this row's tool results answer.
    pub fn answered_calls(&self) -> impl Iterator<Item = String> + '_ {
        self.parts_of(PartType::ToolResult)
            .map(|p| string_of(p.get("call_id")))
    }
}

/// A part field as text, the way the Python side always read it (`str(value)`).
fn string_of(value: Option<&Value>) -> String {
    match value {
        Some(Value::String(s)) => s.clone(),
        None | Some(Value::Null) => "None".to_owned(),
        Some(other) => other.to_string(),
    }
}

impl Row {
    /// Parses stored rows (skipping malformed lines and kinds or roles this library does
    /// not know), in order.
    pub fn parse_stored(rows: &[crate::store::StoredRow]) -> Vec<Row> {
        rows.iter()
            .filter_map(|r| {
                let window = r.window.parse().ok()?;
                Row::parse(r.seq?, window, &r.raw)
            })
            .collect()
    }
}
