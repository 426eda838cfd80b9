//! Rows on their way in: validation of what callers append (the one rule table of
//! [`rules`](super::rules)), the row encoder, and the checks every store applies to an
//! encoded line before acknowledging it. A byte store receives the lines and never reads
//! them.

use serde::Serialize;
use serde_json::{Map, Value};

use crate::store::wellformed::{self, MAX_NESTING, MAX_ROW_NESTING};
use crate::store::{Result, StoreError};

use super::head::RowHead;
use super::rules::{self, Field, RuleError};
use super::{Role, RowKind};

/// A validated row, before the store assigns `seq`, `id`, `window` and `ts`.
#[derive(Clone, Debug, PartialEq)]
pub struct NewRow {
    /// One of [`KINDS`](super::KINDS).
    pub kind: String,
    /// One of [`ROLES`](super::ROLES).
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
            return Err(StoreError::row(index, "", "must be an object"));
        };
        for key in obj.keys() {
            rules::check_row_field(key).map_err(|e| at(index, e))?;
        }
        let kind = name_of::<RowKind>(index, "kind", obj.remove("kind"))?;
        let role = name_of::<Role>(index, "role", obj.remove("role"))?;
        let parts = match obj.remove("parts") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::Array(parts)) => parts,
            Some(_) => return Err(StoreError::row(index, "parts", "must be a list")),
        };
        let meta = match obj.remove("meta") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m,
            Some(_) => return Err(StoreError::row(index, "meta", "must be an object")),
        };
        let row = NewRow {
            kind: kind.as_str().to_owned(),
            role: role.as_str().to_owned(),
            parts,
            meta,
        };
        row.validate(index)?;
        Ok(row)
    }

    /// Checks a row built in Rust against the rules every append applies (`index` names
    /// it in errors) — the one rule table of [`rules`]: kind and role
    /// from [`KINDS`](super::KINDS) and [`ROLES`](super::ROLES), well-formed parts, and the metadata its kind
    /// requires. [`History::append`](crate::transcript::History) and every other write run
    /// it, so a Rust host cannot store a row Python would refuse.
    pub fn validate(&self, index: usize) -> Result<()> {
        let kind =
            rules::check_name::<RowKind>("kind", Some(&self.kind)).map_err(|e| at(index, e))?;
        rules::check_name::<Role>("role", Some(&self.role)).map_err(|e| at(index, e))?;
        for (i, part) in self.parts.iter().enumerate() {
            let Value::Object(p) = part else {
                return Err(StoreError::row(
                    index,
                    format!("parts[{i}]"),
                    "must be an object",
                ));
            };
            rules::check_part(i, p.get("type").and_then(Value::as_str), |name| {
                field_of(p.get(name))
            })
            .map_err(|e| at(index, e))?;
        }
        rules::check_kind_meta(
            kind,
            self.meta.get("boundary_kind").and_then(Value::as_str),
            self.meta.get("retracts").and_then(Value::as_u64),
        )
        .map_err(|e| at(index, e))
    }
}

/// A broken rule of row `index` as the store's error.
fn at(index: usize, e: RuleError) -> StoreError {
    StoreError::row(index, e.field, e.reason)
}

fn field_of(value: Option<&Value>) -> Field {
    match value {
        None => Field::Missing,
        Some(Value::String(_)) => Field::Str,
        Some(_) => Field::Other,
    }
}

fn raw_field(value: Option<&&serde_json::value::RawValue>) -> Field {
    match value {
        None => Field::Missing,
        Some(r) if r.get().starts_with('"') => Field::Str,
        Some(_) => Field::Other,
    }
}

fn name_of<T: std::str::FromStr<Err = super::UnknownName>>(
    index: usize,
    field: &str,
    value: Option<Value>,
) -> Result<T> {
    match value {
        Some(Value::String(s)) => rules::check_name(field, Some(&s)).map_err(|e| at(index, e)),
        Some(_) => Err(StoreError::row(index, field, "must be a string")),
        None => Err(StoreError::row(index, field, "is required")),
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
        .map_err(|e| StoreError::InvalidArgument(format!("row does not serialize: {e}")))?;
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
#[derive(Clone, Debug)]
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
    /// `meta.rejected` is present and not null.
    pub rejected: bool,
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
            .map_err(|_| StoreError::row(index, field, "must be a string")),
    }
}

/// A batch given as UTF-8 JSON (a non-empty list of row objects), each row validated
/// without building value trees: what every store's JSON append path starts from.
pub(crate) fn parse_json_batch(rows_json: &[u8]) -> Result<Vec<RawRow<'_>>> {
    let raws: Vec<&serde_json::value::RawValue> = serde_json::from_slice(rows_json)
        .map_err(|e| StoreError::InvalidArgument(format!("rows are not a JSON list: {e}")))?;
    if raws.is_empty() {
        return Err(StoreError::empty_batch());
    }
    raws.into_iter()
        .enumerate()
        .map(|(i, raw)| RawRow::parse(i, raw))
        .collect()
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
            #[serde(default)]
            rejected: Option<serde::de::IgnoredAny>,
        }
        let f: Fields<'a> = serde_json::from_str(raw.get()).ok()?;
        let kind = f.kind.parse::<RowKind>().ok()?;
        let role = f.role.parse::<Role>().ok()?;
        let parts = f.parts.map_or("[]", RawValue::get);
        let part_list: Vec<Part<'_>> = serde_json::from_str(parts).ok()?;
        for (i, p) in part_list.iter().enumerate() {
            let field = |name: &str| {
                raw_field(match name {
                    "text" => p.text.as_ref(),
                    "id" => p.id.as_ref(),
                    "name" => p.name.as_ref(),
                    "call_id" => p.call_id.as_ref(),
                    "output" => p.output.as_ref(),
                    "media_type" => p.media_type.as_ref(),
                    _ => None,
                })
            };
            rules::check_part(i, Some(p.ty), field).ok()?;
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
            rejected: m.rejected.is_some(),
        };
        rules::check_kind_meta(kind, head_meta.boundary_kind.as_deref(), head_meta.retracts)
            .ok()?;
        Some(RawRow {
            kind: kind.as_str().to_owned(),
            role: role.as_str().to_owned(),
            parts,
            meta,
            head_meta,
        })
    }

    fn parse_thorough(index: usize, raw: &'a serde_json::value::RawValue) -> Result<RawRow<'a>> {
        let obj: RawMap<'a> = serde_json::from_str(raw.get())
            .map_err(|_| StoreError::row(index, "", "must be an object"))?;
        for key in obj.keys() {
            rules::check_row_field(key).map_err(|e| at(index, e))?;
        }
        let kind_text = raw_str(index, "kind", obj.get("kind"))?;
        let kind =
            rules::check_name::<RowKind>("kind", kind_text.as_deref()).map_err(|e| at(index, e))?;
        let role_text = raw_str(index, "role", obj.get("role"))?;
        let role =
            rules::check_name::<Role>("role", role_text.as_deref()).map_err(|e| at(index, e))?;
        let parts = match obj.get("parts").map(|r| r.get()) {
            None | Some("null") => "[]",
            Some(p) => p,
        };
        let part_list: Vec<RawMap<'a>> = serde_json::from_str(parts)
            .map_err(|_| StoreError::row(index, "parts", "must be a list of objects"))?;
        for (i, p) in part_list.iter().enumerate() {
            let ty = raw_str(index, &format!("parts[{i}].type"), p.get("type"))?;
            rules::check_part(i, ty.as_deref(), |name| raw_field(p.get(name)))
                .map_err(|e| at(index, e))?;
        }
        let meta = match obj.get("meta").map(|r| r.get()) {
            None | Some("null") => "{}",
            Some(m) => m,
        };
        let meta_map: RawMap<'a> = serde_json::from_str(meta)
            .map_err(|_| StoreError::row(index, "meta", "must be an object"))?;
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
            rejected: meta_map.get("rejected").is_some_and(|r| r.get() != "null"),
        };
        rules::check_kind_meta(kind, head_meta.boundary_kind.as_deref(), head_meta.retracts)
            .map_err(|e| at(index, e))?;
        Ok(RawRow {
            kind: kind.as_str().to_owned(),
            role: role.as_str().to_owned(),
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
                let v: Value = serde_json::from_str(raw)
                    .map_err(|e| StoreError::InvalidArgument(format!("row does not parse: {e}")))?;
                serde_json::to_string(&v).map(Into::into).map_err(|e| {
                    StoreError::InvalidArgument(format!("row does not serialize: {e}"))
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
        .map_err(|e| StoreError::InvalidArgument(format!("row does not serialize: {e}")))?;
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
    /// The line (with its newline) of row `index` of a batch at `seq` in `window`, and
    /// its head, after the checks every store applies before acknowledging a row: at
    /// most `max_row_bytes`, nested no deeper than readers parse (leaving room for the
    /// quarantine row that may one day keep it), and read back by the reader's parse.
    pub(crate) fn encode_checked(
        &self,
        index: usize,
        seq: u64,
        window: &str,
        ts: &str,
        max_row_bytes: usize,
    ) -> Result<(Vec<u8>, RowHead)> {
        let line = self.encode(seq, window, ts)?;
        let body = &line[..line.len() - 1];
        if body.len() > max_row_bytes {
            return Err(StoreError::row(
                index,
                "",
                format!(
                    "serializes to {} bytes, over the {max_row_bytes}-byte row limit; store \
                     large content elsewhere and reference it",
                    body.len()
                ),
            ));
        }
        let limit = if self.kind() == RowKind::Rejected.as_str() {
            MAX_NESTING
        } else {
            MAX_ROW_NESTING
        };
        let depth = wellformed::nesting(body);
        if depth > limit {
            return Err(StoreError::row(
                index,
                "",
                format!(
                    "nests {depth} objects and arrays deep, the row itself included; rows \
                     may nest at most {limit}: flatten it"
                ),
            ));
        }
        if let Err(e) = wellformed::check(body) {
            return Err(StoreError::row(
                index,
                "",
                format!("would not read back as JSON ({e}); nothing was written"),
            ));
        }
        let head = self.head(seq, window);
        Ok((line, head))
    }

    /// What the index keeps of this row once written at `seq` in `window`.
    pub(crate) fn head(&self, seq: u64, window: &str) -> RowHead {
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
                    rejected: r.meta.get("rejected").is_some_and(|v| !v.is_null()),
                },
            ),
            Incoming::Raw(r) => (r.role.clone(), r.head_meta.clone()),
        };
        RowHead {
            seq,
            kind: self.kind().to_owned(),
            role: Some(role),
            window: Some(window.to_owned()),
            boundary_kind: meta.boundary_kind,
            rollover_id: meta.rollover_id,
            retracts: meta.retracts,
            rejected: meta.rejected,
        }
    }
}

/// Fuzzing entry point (not API): a row given as JSON text is judged the same way by
/// every write path — the value path ([`NewRow::from_value`]) and the raw-text path the
/// binding uses (fast and thorough) — down to the field and reason of a refusal.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn fuzz_rules(input: &[u8]) {
    let Ok(raw) = serde_json::from_slice::<&serde_json::value::RawValue>(input) else {
        return;
    };
    let Ok(value) = serde_json::from_str::<Value>(raw.get()) else {
        return;
    };
    let key = |r: Result<()>| match r {
        Ok(()) => None,
        Err(StoreError::InvalidRow { field, reason, .. }) => Some((field, reason)),
        Err(other) => Some(("?".to_owned(), other.to_string())),
    };
    let by_value = key(NewRow::from_value(0, value).map(|_| ()));
    let by_text = key(RawRow::parse(0, raw).map(|_| ()));
    if by_value.is_none() || by_text.is_none() {
        // Duplicate keys are legal JSON that the two parsers resolve alike (the last
        // wins); both must then accept or refuse together.
        assert_eq!(by_value.is_none(), by_text.is_none(), "{}", raw.get());
    }
    if let Some(fast) = RawRow::parse_fast(raw) {
        assert!(
            by_value.is_none(),
            "fast path accepted what the rules refuse: {}",
            raw.get()
        );
        let _ = fast;
    }
}
