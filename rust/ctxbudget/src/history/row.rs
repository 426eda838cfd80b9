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
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(parts)) => parts,
            Some(_) => return Err(HistoryError::row(index, "parts", "must be a list")),
        };
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
        row.validate(index)?;
        Ok(row)
    }

    /// Checks a row built in Rust against the rules every append applies (`index` names
    /// it in errors): kind and role from [`KINDS`] and [`ROLES`], well-formed parts, and
    /// the metadata its kind requires. [`History::append`](super::History::append) and
    /// every other write run it, so a Rust host cannot store a row Python would refuse.
    pub fn validate(&self, index: usize) -> Result<()> {
        member(index, "kind", &self.kind, KINDS)?;
        member(index, "role", &self.role, ROLES)?;
        for (i, part) in self.parts.iter().enumerate() {
            validate_part(index, i, part)?;
        }
        self.validate_kind_meta(index)
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
        Some(Value::String(s)) => member(index, field, &s, allowed).map(|()| s),
        Some(_) => Err(HistoryError::row(index, field, "must be a string")),
        None => Err(HistoryError::row(index, field, "is required")),
    }
}

fn member(index: usize, field: &str, value: &str, allowed: &[&str]) -> Result<()> {
    if allowed.contains(&value) {
        Ok(())
    } else {
        Err(HistoryError::row(
            index,
            field,
            format!("is {value:?}; expected one of {}", allowed.join(", ")),
        ))
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

/// A row handed over as JSON text (the Python binding's path), validated without
/// building a value tree: `parts` and `meta` are copied into the line as written.
#[derive(Debug)]
pub(crate) struct RawRow<'a> {
    pub kind: String,
    role: String,
    parts: &'a str,
    meta: &'a str,
    /// What the store reads back from `meta` (boundaries, rollover IDs, retractions).
    pub head_meta: HeadMeta,
}

/// The parts of `meta` the index keeps.
#[derive(Debug, Default, Clone)]
pub(crate) struct HeadMeta {
    pub boundary_kind: Option<String>,
    pub rollover_id: Option<String>,
    pub retracts: Option<u64>,
}

type RawMap<'a> =
    std::collections::BTreeMap<std::borrow::Cow<'a, str>, &'a serde_json::value::RawValue>;

fn raw_str(
    index: usize,
    field: &str,
    raw: Option<&&serde_json::value::RawValue>,
) -> Result<Option<String>> {
    match raw {
        None => Ok(None),
        Some(r) if r.get() == "null" => Ok(None),
        Some(r) => serde_json::from_str::<String>(r.get())
            .map(Some)
            .map_err(|_| HistoryError::row(index, field, "must be a string")),
    }
}

fn require_str(
    index: usize,
    field: String,
    raw: Option<&&serde_json::value::RawValue>,
) -> Result<()> {
    match raw {
        Some(r) if r.get().starts_with('"') => Ok(()),
        Some(_) => Err(HistoryError::row(index, field, "must be a string")),
        None => Err(HistoryError::row(index, field, "is required")),
    }
}

impl<'a> RawRow<'a> {
    /// Validates one row object given as raw JSON (same rules as [`NewRow::from_value`]).
    pub(crate) fn parse(index: usize, raw: &'a serde_json::value::RawValue) -> Result<RawRow<'a>> {
        // Well-formed rows take the fast path: borrowed fields, no maps. Anything it does
        // not accept is checked again by the thorough path, which names the problem.
        Self::parse_fast(raw).map_or_else(|| Self::parse_thorough(index, raw), Ok)
    }

    fn parse_fast(raw: &'a serde_json::value::RawValue) -> Option<RawRow<'a>> {
        use serde::Deserialize;
        use serde_json::value::RawValue;
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct Fields<'a> {
            kind: &'a str,
            role: &'a str,
            #[serde(borrow, default)]
            parts: Option<&'a RawValue>,
            #[serde(borrow, default)]
            meta: Option<&'a RawValue>,
        }
        #[derive(Deserialize)]
        struct Part<'a> {
            #[serde(rename = "type")]
            ty: &'a str,
            #[serde(borrow, default)]
            text: Option<&'a RawValue>,
            #[serde(borrow, default)]
            id: Option<&'a RawValue>,
            #[serde(borrow, default)]
            name: Option<&'a RawValue>,
            #[serde(borrow, default)]
            call_id: Option<&'a RawValue>,
            #[serde(borrow, default)]
            output: Option<&'a RawValue>,
            #[serde(borrow, default)]
            media_type: Option<&'a RawValue>,
        }
        #[derive(Deserialize, Default)]
        struct Meta<'a> {
            #[serde(borrow, default)]
            boundary_kind: Option<std::borrow::Cow<'a, str>>,
            #[serde(borrow, default)]
            rollover_id: Option<std::borrow::Cow<'a, str>>,
            #[serde(default)]
            retracts: Option<u64>,
        }
        let f: Fields<'a> = serde_json::from_str(raw.get()).ok()?;
        if !KINDS.contains(&f.kind) || !ROLES.contains(&f.role) {
            return None;
        }
        let is_str = |v: Option<&RawValue>| v.is_some_and(|r| r.get().starts_with('"'));
        let parts = f.parts.map_or("[]", RawValue::get);
        let part_list: Vec<Part<'_>> = serde_json::from_str(parts).ok()?;
        for p in &part_list {
            let ok = match p.ty {
                "text" => is_str(p.text),
                "tool_call" => is_str(p.id) && is_str(p.name),
                "tool_result" => is_str(p.call_id) && p.output.is_some(),
                "media" => is_str(p.media_type),
                _ => false,
            };
            if !ok {
                return None;
            }
        }
        let meta = f.meta.map_or("{}", RawValue::get);
        if !meta.trim_start().starts_with('{') {
            return None;
        }
        let m: Meta<'_> = serde_json::from_str(meta).ok()?;
        let head_meta = HeadMeta {
            boundary_kind: m.boundary_kind.map(|c| c.into_owned()),
            rollover_id: m.rollover_id.map(|c| c.into_owned()),
            retracts: m.retracts,
        };
        let valid_kind_meta = match f.kind {
            "boundary" => matches!(
                head_meta.boundary_kind.as_deref(),
                Some("rollover" | "reset")
            ),
            "retraction" => head_meta.retracts.is_some(),
            _ => true,
        };
        valid_kind_meta.then(|| RawRow {
            kind: f.kind.to_owned(),
            role: f.role.to_owned(),
            parts,
            meta,
            head_meta,
        })
    }

    fn parse_thorough(index: usize, raw: &'a serde_json::value::RawValue) -> Result<RawRow<'a>> {
        let obj: RawMap<'a> = serde_json::from_str(raw.get())
            .map_err(|_| HistoryError::row(index, "", "must be an object"))?;
        for key in obj.keys() {
            if !matches!(key.as_ref(), "kind" | "role" | "parts" | "meta") {
                let why = if matches!(key.as_ref(), "seq" | "id" | "window" | "ts") {
                    "is assigned by the store; leave it out"
                } else {
                    "is not a row field (expected kind, role, parts, meta)"
                };
                return Err(HistoryError::row(index, key.as_ref(), why));
            }
        }
        let pick = |field: &str, allowed: &[&str]| -> Result<String> {
            match raw_str(index, field, obj.get(field))? {
                Some(v) if allowed.contains(&v.as_str()) => Ok(v),
                Some(v) => Err(HistoryError::row(
                    index,
                    field,
                    format!("is {v:?}; expected one of {}", allowed.join(", ")),
                )),
                None => Err(HistoryError::row(index, field, "is required")),
            }
        };
        let kind = pick("kind", KINDS)?;
        let role = pick("role", ROLES)?;
        let parts = match obj.get("parts").map(|r| r.get()) {
            None | Some("null") => "[]",
            Some(p) => p,
        };
        let part_list: Vec<RawMap<'a>> = serde_json::from_str(parts)
            .map_err(|_| HistoryError::row(index, "parts", "must be a list of objects"))?;
        for (i, p) in part_list.iter().enumerate() {
            let field = |name: &str| format!("parts[{i}].{name}");
            let ty = raw_str(index, &field("type"), p.get("type"))?.unwrap_or_default();
            match ty.as_str() {
                "text" => require_str(index, field("text"), p.get("text"))?,
                "tool_call" => {
                    require_str(index, field("id"), p.get("id"))?;
                    require_str(index, field("name"), p.get("name"))?;
                }
                "tool_result" => {
                    require_str(index, field("call_id"), p.get("call_id"))?;
                    if !p.contains_key("output") {
                        return Err(HistoryError::row(index, field("output"), "is required"));
                    }
                }
                "media" => require_str(index, field("media_type"), p.get("media_type"))?,
                other => {
                    return Err(HistoryError::row(
                        index,
                        field("type"),
                        format!("is {other:?}; expected one of {}", PART_TYPES.join(", ")),
                    ))
                }
            }
        }
        let meta = match obj.get("meta").map(|r| r.get()) {
            None | Some("null") => "{}",
            Some(m) => m,
        };
        let meta_map: RawMap<'a> = serde_json::from_str(meta)
            .map_err(|_| HistoryError::row(index, "meta", "must be an object"))?;
        let head_meta = HeadMeta {
            boundary_kind: raw_str(index, "meta.boundary_kind", meta_map.get("boundary_kind"))
                .ok()
                .flatten(),
            rollover_id: raw_str(index, "meta.rollover_id", meta_map.get("rollover_id"))
                .ok()
                .flatten(),
            retracts: meta_map
                .get("retracts")
                .and_then(|r| r.get().parse::<u64>().ok()),
        };
        match kind.as_str() {
            "boundary"
                if !matches!(
                    head_meta.boundary_kind.as_deref(),
                    Some("rollover" | "reset")
                ) =>
            {
                return Err(HistoryError::row(
                    index,
                    "meta.boundary_kind",
                    "must be \"rollover\" or \"reset\" on a boundary row",
                ));
            }
            "retraction" if head_meta.retracts.is_none() => {
                return Err(HistoryError::row(
                    index,
                    "meta.retracts",
                    "must be the seq (an integer) of the row to hide",
                ));
            }
            _ => {}
        }
        Ok(RawRow {
            kind,
            role,
            parts,
            meta,
            head_meta,
        })
    }

    /// The JSON line (with newline) of this row at `seq` in `window`. `parts` and `meta`
    /// are copied as given unless they span lines (pretty-printed input), which a JSONL
    /// line cannot hold: those are re-serialized compactly.
    pub(crate) fn encode(&self, seq: u64, window: &str, ts: &str) -> Result<Vec<u8>> {
        let compact = |raw: &'a str| -> Result<std::borrow::Cow<'a, str>> {
            if memchr::memchr2(b'\n', b'\r', raw.as_bytes()).is_some() {
                let v: Value = serde_json::from_str(raw).map_err(|e| {
                    HistoryError::InvalidArgument(format!("row does not parse: {e}"))
                })?;
                serde_json::to_string(&v).map(Into::into).map_err(|e| {
                    HistoryError::InvalidArgument(format!("row does not serialize: {e}"))
                })
            } else {
                Ok(raw.into())
            }
        };
        let (parts, meta) = (compact(self.parts)?, compact(self.meta)?);
        let mut out = Vec::with_capacity(parts.len() + meta.len() + 160);
        use std::io::Write;
        writeln!(
            out,
            "{{\"seq\":{seq},\"id\":\"{seq}\",\"kind\":\"{}\",\"role\":\"{}\",\"window\":\"{window}\",\"parts\":{parts},\"meta\":{meta},\"ts\":\"{ts}\"}}",
            self.kind, self.role
        )
        .map_err(|e| HistoryError::InvalidArgument(format!("row does not serialize: {e}")))?;
        Ok(out)
    }
}

/// A row on its way into a batch: built in Rust, or handed over as JSON text.
#[derive(Debug)]
pub(crate) enum Incoming<'a> {
    /// A [`NewRow`].
    Built(&'a NewRow),
    /// A validated JSON row.
    Raw(RawRow<'a>),
}

impl Incoming<'_> {
    pub(crate) fn kind(&self) -> &str {
        match self {
            Incoming::Built(r) => &r.kind,
            Incoming::Raw(r) => &r.kind,
        }
    }

    pub(crate) fn encode(&self, seq: u64, window: &str, ts: &str) -> Result<Vec<u8>> {
        match self {
            Incoming::Built(r) => encode(r, seq, window, ts),
            Incoming::Raw(r) => r.encode(seq, window, ts),
        }
    }
}

impl Incoming<'_> {
    /// What the index keeps of this row once written at `seq` in `window`.
    pub(crate) fn head(&self, seq: u64, window: &str) -> super::frame::RowHead {
        let (role, meta) = match self {
            Incoming::Built(r) => (
                r.role.clone(),
                HeadMeta {
                    boundary_kind: r
                        .meta
                        .get("boundary_kind")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    rollover_id: r
                        .meta
                        .get("rollover_id")
                        .and_then(Value::as_str)
                        .map(str::to_owned),
                    retracts: r.meta.get("retracts").and_then(Value::as_u64),
                },
            ),
            Incoming::Raw(r) => (r.role.clone(), r.head_meta.clone()),
        };
        super::frame::RowHead {
            seq,
            kind: self.kind().to_owned(),
            role: Some(role),
            window: Some(window.to_owned()),
            boundary_kind: meta.boundary_kind,
            rollover_id: meta.rollover_id,
            retracts: meta.retracts,
        }
    }
}
