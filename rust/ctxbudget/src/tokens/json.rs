//! String contents of a JSON document, for `count_json`.

use serde_json::Value;

use super::TokenError;

/// Every string in the document — object keys and values alike — decoded.
pub(crate) fn string_contents(json_text: &str) -> Result<Vec<String>, TokenError> {
    let value: Value = serde_json::from_str(json_text).map_err(|e| {
        // serde_json appends the position to its message; we report it separately.
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        TokenError::InvalidJson {
            line: e.line(),
            column: e.column(),
            message: full.strip_suffix(&suffix).unwrap_or(&full).to_owned(),
        }
    })?;
    let mut out = Vec::new();
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        match v {
            Value::String(s) => out.push(s),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (k, v) in map {
                    out.push(k);
                    stack.push(v);
                }
            }
            Value::Null | Value::Bool(_) | Value::Number(_) => {}
        }
    }
    Ok(out)
}
