//! What a row shows to the agent (SPEC §6 projection) and how items are cut to fit.

use serde::Serialize;
use serde_json::{Map, Value};

/// The tool's own name: its earlier results are not shown again.
pub const TOOL_NAME: &str = "session_history";

/// The visible text of a row, and the tools it mentions.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Projected {
    pub role: String,
    pub text: String,
    pub tool_names: Vec<String>,
}

fn compact(tag: &str, part: &Map<String, Value>, keys: &[&str]) -> String {
    let mut inner = Map::new();
    for k in keys {
        if let Some(v) = part.get(*k) {
            inner.insert((*k).to_owned(), v.clone());
        }
    }
    let mut outer = Map::new();
    outer.insert(tag.to_owned(), Value::Object(inner));
    serde_json::to_string(&Value::Object(outer)).unwrap_or_default()
}

/// Text parts as they are; tool calls and results as compact JSON; media as
/// `[media omitted]`; earlier `session_history` results as
/// `[session_history result omitted]`.
pub(crate) fn project(row: &Value) -> Projected {
    let role = row
        .get("role")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_owned();
    let mut pieces: Vec<String> = Vec::new();
    let mut tool_names = Vec::new();
    let parts = row
        .get("parts")
        .and_then(Value::as_array)
        .map(Vec::as_slice)
        .unwrap_or(&[]);
    for part in parts {
        let Some(p) = part.as_object() else { continue };
        let name = p.get("name").and_then(Value::as_str);
        if let Some(n) = name {
            tool_names.push(n.to_owned());
        }
        match p.get("type").and_then(Value::as_str) {
            Some("text") => pieces.push(
                p.get("text")
                    .and_then(Value::as_str)
                    .unwrap_or("")
                    .to_owned(),
            ),
            Some("tool_call") => pieces.push(compact("tool_call", p, &["id", "name", "arguments"])),
            Some("tool_result") if name == Some(TOOL_NAME) => {
                pieces.push("[session_history result omitted]".to_owned())
            }
            Some("tool_result") => {
                pieces.push(compact("tool_result", p, &["call_id", "name", "output"]))
            }
            Some("media") => pieces.push("[media omitted]".to_owned()),
            _ => {}
        }
    }
    Projected {
        role,
        text: pieces.join("\n"),
        tool_names,
    }
}

/// One item of a result.
#[derive(Clone, Debug, Serialize)]
pub(crate) struct Item {
    pub item_id: String,
    pub window_id: String,
    pub role: String,
    pub text: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub start_char: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_char: Option<usize>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// Byte offset of character `n` of `text` (or its length).
pub(crate) fn char_offset(text: &str, n: usize) -> usize {
    text.char_indices().nth(n).map_or(text.len(), |(i, _)| i)
}

/// Builds the item showing `text[start..]` with at most `max_chars` characters and at
/// most `max_bytes` bytes of JSON, cutting only at character boundaries. `None` when
/// not even one character fits.
pub(crate) fn fit_item(
    base: Item,
    text: &str,
    start: usize,
    max_chars: usize,
    max_bytes: usize,
    always_mark_start: bool,
) -> Option<Item> {
    let total = text.chars().count();
    let start = start.min(total);
    let from = char_offset(text, start);
    let rest = &text[from..];
    let make = |n: usize| {
        let end = char_offset(rest, n);
        let next = start + n;
        let truncated = next < total;
        Item {
            text: rest[..end].to_owned(),
            start_char: (always_mark_start || start > 0).then_some(start),
            next_char: truncated.then_some(next),
            truncated,
            ..base.clone()
        }
    };
    let size = |item: &Item| serde_json::to_string(item).map_or(usize::MAX, |s| s.len());
    let want = max_chars.min(total - start);
    let full = make(want);
    if size(&full) <= max_bytes {
        return Some(full);
    }
    // Binary search the longest prefix that fits.
    let (mut lo, mut hi) = (0usize, want);
    while lo < hi {
        let mid = (lo + hi).div_ceil(2);
        if size(&make(mid)) <= max_bytes {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    (lo > 0 || (want == 0 && size(&make(0)) <= max_bytes)).then(|| make(lo))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn projection_rules() {
        let row = json!({"role": "assistant", "parts": [
            {"type": "text", "text": "hello"},
            {"type": "tool_call", "id": "c1", "name": "read", "arguments": {"p": 1}},
            {"type": "tool_result", "call_id": "c0", "name": "session_history", "output": "old"},
            {"type": "media", "media_type": "image/png", "data": "AAAA"}
        ]});
        let p = project(&row);
        assert_eq!(
            p.text,
            "hello\n{\"tool_call\":{\"id\":\"c1\",\"name\":\"read\",\"arguments\":{\"p\":1}}}\n[session_history result omitted]\n[media omitted]"
        );
        assert_eq!(p.tool_names, ["read", "session_history"]);
    }

    #[test]
    fn fitting_cuts_at_characters_and_pages_reassemble() {
        let text = "héllo 世界 😀 \"quoted\" \\ \u{0}".repeat(50);
        let base = Item {
            item_id: "1".into(),
            window_id: "w:0".into(),
            role: "user".into(),
            text: String::new(),
            start_char: None,
            next_char: None,
            truncated: false,
        };
        let mut rebuilt = String::new();
        let mut start = 0;
        loop {
            let item = fit_item(base.clone(), &text, start, 100, 300, false)
                .unwrap_or_else(|| panic!("nothing fits"));
            assert!(serde_json::to_string(&item).map(|s| s.len()).unwrap_or(0) <= 300);
            rebuilt.push_str(&item.text);
            match item.next_char {
                Some(n) => start = n,
                None => break,
            }
        }
        assert_eq!(rebuilt, text);
    }
}
