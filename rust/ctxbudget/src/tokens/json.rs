//! String contents of a JSON document, for `count_json`.

use serde_json::Value;

use super::TokenError;

/// Deepest nesting the parser accepts (serde_json's recursion limit of 128 stops at the
/// 128th level); deeper documents are refused as invalid JSON instead of exhausting the
/// stack.
pub(crate) const MAX_DEPTH: usize = 127;

/// Every string in the document — object keys and values alike — decoded.
pub(crate) fn string_contents(json_text: &str) -> Result<Vec<String>, TokenError> {
    let value: Value = serde_json::from_str(json_text).map_err(|e| {
        // serde_json appends the position to its message; we report it separately.
        let full = e.to_string();
        let suffix = format!(" at line {} column {}", e.line(), e.column());
        let message = full.strip_suffix(&suffix).unwrap_or(&full);
        let message = if message == "recursion limit exceeded" {
            format!("nests more than {MAX_DEPTH} levels deep; flatten the document")
        } else {
            message.to_owned()
        };
        TokenError::InvalidJson {
            line: e.line(),
            column: e.column(),
            message,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_nesting_is_invalid_json_not_a_stack_overflow() {
        let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
        match string_contents(&deep) {
            Err(TokenError::InvalidJson { message, line, .. }) => {
                assert_eq!(line, 1);
                assert!(message.contains("levels deep"), "{message}");
            }
            other => panic!("expected InvalidJson, got {other:?}"),
        }
        let ok = format!("{}\"x\"{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
        assert_eq!(string_contents(&ok).ok(), Some(vec!["x".to_owned()]));
    }
}
