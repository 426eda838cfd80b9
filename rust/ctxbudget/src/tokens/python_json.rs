//! Python's `json.dumps(…, ensure_ascii=False)`, as chat templates (`tojson`) and
//! mistral-common's request encoder write JSON: Python's separators, `repr` of floats
//! and string escapes, keys in their order (or sorted).

use serde_json::Value;

/// How Python's `json.dumps` lays a value out.
pub(crate) struct JsonStyle {
    /// Each level's indent (`indent=`); `None` lays the value out on one line.
    pub(crate) indent: Option<String>,
    /// Between items (`separators[0]`).
    pub(crate) item: String,
    /// Between a key and its value (`separators[1]`).
    pub(crate) key: String,
    /// `sort_keys=`.
    pub(crate) sort_keys: bool,
}

impl JsonStyle {
    /// `json.dumps(value, ensure_ascii=False)`: one line, `", "` and `": "`.
    pub(crate) fn python_default() -> JsonStyle {
        JsonStyle {
            indent: None,
            item: ", ".to_owned(),
            key: ": ".to_owned(),
            sort_keys: false,
        }
    }

    /// `value` as `json.dumps(value, ensure_ascii=False, …)` writes it in this style.
    pub(crate) fn dumps(&self, value: &Value) -> String {
        let mut out = String::new();
        self.write(value, 0, &mut out);
        out
    }

    /// A line break and `depth` indents, when the style indents.
    fn newline(&self, depth: usize, out: &mut String) {
        if let Some(indent) = &self.indent {
            out.push('\n');
            for _ in 0..depth {
                out.push_str(indent);
            }
        }
    }

    /// `value` at nesting `depth`, appended to `out`.
    fn write(&self, value: &Value, depth: usize, out: &mut String) {
        match value {
            Value::Null => out.push_str("null"),
            Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Value::Number(n) => out.push_str(&python_number(n)),
            Value::String(s) => python_string(s, out),
            Value::Array(items) if items.is_empty() => out.push_str("[]"),
            Value::Array(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(&self.item);
                    }
                    self.newline(depth + 1, out);
                    self.write(item, depth + 1, out);
                }
                self.newline(depth, out);
                out.push(']');
            }
            Value::Object(map) if map.is_empty() => out.push_str("{}"),
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                if self.sort_keys {
                    entries.sort_by(|a, b| a.0.cmp(b.0));
                }
                out.push('{');
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    if i > 0 {
                        out.push_str(&self.item);
                    }
                    self.newline(depth + 1, out);
                    python_string(k, out);
                    out.push_str(&self.key);
                    self.write(v, depth + 1, out);
                }
                self.newline(depth, out);
                out.push('}');
            }
        }
    }
}

/// A number as Python's `repr` writes it (`1.0`, `1e+20`, `1e-05`; `inf` is not JSON):
/// exponent form below 1e-4 and from 1e16 on.
fn python_number(n: &serde_json::Number) -> String {
    if let Some(f) = n.as_f64().filter(|_| n.is_f64()) {
        if f.is_finite() && f == f.trunc() && f.abs() < 1e16 {
            return format!("{f:.1}");
        }
        let text = format!("{f:e}");
        // Rust writes `1e20` and `1.5e-7`; Python `1e+20` and `1.5e-07`.
        if let Some((mantissa, exp)) = text.split_once('e') {
            let exp: i32 = exp.parse().unwrap_or(0);
            if !(-4..16).contains(&exp) {
                let sign = if exp < 0 { '-' } else { '+' };
                return format!("{mantissa}e{sign}{:02}", exp.abs());
            }
        }
        return f.to_string();
    }
    n.to_string()
}

/// A string as `json.dumps(…, ensure_ascii=False)` writes it.
fn python_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn floats_as_python_repr() {
        let cases = [
            (json!(1.0), "1.0"),
            (json!(0.5), "0.5"),
            (json!(0.0001), "0.0001"),
            (json!(0.00001), "1e-05"),
            (json!(1.5e-7), "1.5e-07"),
            (json!(1.5e15), "1500000000000000.0"),
            (json!(1e16), "1e+16"),
            (json!(-3), "-3"),
        ];
        for (value, python) in cases {
            assert_eq!(JsonStyle::python_default().dumps(&value), python, "{value}");
        }
    }

    #[test]
    fn strings_and_layout_as_python() {
        let value = json!({"b": ["é\u{1}\n\"", null, true], "a": {}});
        assert_eq!(
            JsonStyle::python_default().dumps(&value),
            "{\"b\": [\"é\\u0001\\n\\\"\", null, true], \"a\": {}}"
        );
    }
}
