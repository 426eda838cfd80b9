//! Arguments of the `session_history` tool: strict validation with bounded messages.

use serde_json::{Map, Value};

use super::{Failure, MAX_CHARS_LIMIT, MAX_ITEMS_LIMIT, MAX_WINDOWS_LIMIT, QUERY_MAX_CHARS};

/// The four actions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Operation {
    /// Contiguous window runs.
    ListWindows,
    /// Items of the history or of one window.
    ListItems,
    /// Items whose text contains a literal, case-insensitive query.
    Search,
    /// One item's text, page by page.
    ReadItem,
}

impl Operation {
    /// The action's name in arguments.
    pub fn name(self) -> &'static str {
        match self {
            Operation::ListWindows => "list_windows",
            Operation::ListItems => "list_items",
            Operation::Search => "search",
            Operation::ReadItem => "read_item",
        }
    }
}

/// Validated arguments.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Args {
    /// What to do.
    pub action: Operation,
    /// Search text (literal, case-insensitive).
    pub query: Option<String>,
    /// Restrict to one window, e.g. `w:12`.
    pub window_id: Option<String>,
    /// The item to read.
    pub item_id: Option<u64>,
    /// Restrict to one role.
    pub role: Option<String>,
    /// Restrict to rows that call or answer this tool.
    pub tool_name: Option<String>,
    /// Walk from the newest row backwards.
    pub recent_first: bool,
    /// Most windows or items returned.
    pub limit: usize,
    /// Most characters of text per item.
    pub max_chars_per_item: usize,
    /// `read_item`: first character to return.
    pub offset_chars: usize,
    /// `read_item`: most characters to return.
    pub limit_chars: usize,
    /// Continue from an earlier result.
    pub cursor: Option<String>,
}

pub(super) const KEYS: &[&str] = &[
    "action",
    "query",
    "window_id",
    "item_id",
    "role",
    "tool_name",
    "recent_first",
    "limit",
    "max_chars_per_item",
    "offset_chars",
    "limit_chars",
    "cursor",
];

fn invalid(message: impl Into<String>) -> Failure {
    Failure::new("invalid_arguments", message)
}

/// A short, safe rendering of a value for error messages (never echoes huge input).
fn describe(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(_) => "a boolean".into(),
        Value::Number(n) => format!("the number {}", clip(&n.to_string(), 24)),
        Value::String(s) => format!("a string of {} characters", s.chars().count()),
        Value::Array(_) => "a list".into(),
        Value::Object(_) => "an object".into(),
    }
}

fn clip(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        s.to_owned()
    } else {
        let mut out: String = s.chars().take(max).collect();
        out.push('…');
        out
    }
}

fn string(
    obj: &Map<String, Value>,
    key: &str,
    max_chars: usize,
) -> Result<Option<String>, Failure> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => {
            if s.chars().count() > max_chars {
                Err(invalid(format!(
                    "{key} must be at most {max_chars} characters"
                )))
            } else {
                Ok(Some(s.clone()))
            }
        }
        Some(other) => Err(invalid(format!(
            "{key} must be a string, not {}",
            describe(other)
        ))),
    }
}

fn integer(
    obj: &Map<String, Value>,
    key: &str,
    min: u64,
    max: u64,
) -> Result<Option<usize>, Failure> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => match n.as_u64() {
            Some(v) if (min..=max).contains(&v) => Ok(Some(v as usize)),
            _ => Err(invalid(format!(
                "{key} must be an integer from {min} to {max}, not {}",
                describe(&Value::Number(n.clone()))
            ))),
        },
        Some(other) => Err(invalid(format!(
            "{key} must be an integer, not {}",
            describe(other)
        ))),
    }
}

/// Validates raw tool arguments.
pub fn parse(value: &Value) -> Result<Args, Failure> {
    let Value::Object(obj) = value else {
        return Err(invalid(format!(
            "arguments must be a JSON object, not {}",
            describe(value)
        )));
    };
    if let Some(unknown) = obj.keys().find(|k| !KEYS.contains(&k.as_str())) {
        return Err(invalid(format!(
            "unknown argument {:?}; allowed: {}",
            clip(unknown, 40),
            KEYS.join(", ")
        )));
    }
    let action = match obj.get("action") {
        Some(Value::String(s)) => match s.as_str() {
            "list_windows" => Operation::ListWindows,
            "list_items" => Operation::ListItems,
            "search" => Operation::Search,
            "read_item" => Operation::ReadItem,
            other => {
                return Err(invalid(format!(
                    "action {:?} is not one of list_windows, list_items, search, read_item",
                    clip(other, 40)
                )))
            }
        },
        None | Some(Value::Null) => {
            return Err(invalid(
                "action is required: list_windows, list_items, search or read_item",
            ))
        }
        Some(other) => {
            return Err(invalid(format!(
                "action must be a string, not {}",
                describe(other)
            )))
        }
    };
    let query = string(obj, "query", QUERY_MAX_CHARS)?;
    let window_id = string(obj, "window_id", 32)?;
    if let Some(w) = &window_id {
        if w.parse::<crate::transcript::WindowId>().is_err() {
            return Err(invalid("window_id looks like \"w:0\" or \"w:<number>\""));
        }
    }
    let item_id = match obj.get("item_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s))
            if s.len() <= 20 && !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) =>
        {
            s.parse::<u64>().ok()
        }
        Some(Value::Number(n)) if n.as_u64().is_some() => n.as_u64(),
        Some(other) => {
            return Err(invalid(format!(
                "item_id must be an item ID such as \"42\", not {}",
                describe(other)
            )))
        }
    };
    let role = string(obj, "role", 16)?;
    if let Some(r) = &role {
        if !crate::transcript::ROLES.contains(&r.as_str()) {
            return Err(invalid(format!(
                "role must be one of {}",
                crate::transcript::ROLES.join(", ")
            )));
        }
    }
    let tool_name = string(obj, "tool_name", super::schema::TOOL_NAME_MAX_CHARS)?;
    let recent_first = match obj.get("recent_first") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => {
            return Err(invalid(format!(
                "recent_first must be true or false, not {}",
                describe(other)
            )))
        }
    };
    let max_limit = if action == Operation::ListWindows {
        MAX_WINDOWS_LIMIT
    } else {
        MAX_ITEMS_LIMIT
    };
    let limit =
        integer(obj, "limit", 1, max_limit as u64)?.unwrap_or(super::DEFAULT_LIMIT.min(max_limit));
    let max_chars_per_item = integer(obj, "max_chars_per_item", 1, MAX_CHARS_LIMIT as u64)?
        .unwrap_or(super::DEFAULT_MAX_CHARS);
    let offset_chars = integer(obj, "offset_chars", 0, 1 << 40)?.unwrap_or(0);
    let limit_chars = integer(obj, "limit_chars", 1, MAX_CHARS_LIMIT as u64)?
        .unwrap_or(super::DEFAULT_READ_CHARS);
    let cursor = string(obj, "cursor", 4096)?;
    match action {
        Operation::Search if query.as_deref().is_none_or(str::is_empty) => {
            return Err(Failure::new(
                "query_required",
                "search needs a non-empty query (1 to 1024 characters)",
            ));
        }
        Operation::ReadItem if item_id.is_none() => {
            return Err(Failure::new(
                "item_id_required",
                "read_item needs item_id, e.g. \"42\"",
            ));
        }
        _ => {}
    }
    Ok(Args {
        action,
        query,
        window_id,
        item_id,
        role,
        tool_name,
        recent_first,
        limit,
        max_chars_per_item,
        offset_chars,
        limit_chars,
        cursor,
    })
}

impl Args {
    /// The arguments a cursor is bound to: everything but the cursor itself, in a fixed
    /// order, so that reuse with other arguments is detected.
    pub fn binding(&self) -> String {
        format!(
            "{}|{:?}|{:?}|{:?}|{:?}|{:?}|{}|{}|{}|{}|{}",
            self.action.name(),
            self.query,
            self.window_id,
            self.item_id,
            self.role,
            self.tool_name,
            self.recent_first,
            self.limit,
            self.max_chars_per_item,
            self.offset_chars,
            self.limit_chars
        )
    }
}
