//! Python's `json.dumps(…, ensure_ascii=False)`, as chat templates (`tojson`) and
//! mistral-common's request encoder write JSON: Python's separators, `repr` of floats
//! and string escapes, keys in their order (or sorted).

use serde_json::Value;

use super::json_scan::Scan;

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

/// `text` as Python's `json.loads` reads it, written back on one line as
/// `json.dumps(…, ensure_ascii=False)` writes what it read; `None` where `json.loads`
/// refuses it. Python reads more than JSON, and writes what it read in its own form:
/// `NaN`, `Infinity` and `-Infinity`; integers of any size (`-0` is `0`); floats as
/// `repr` writes them (a float too large is `Infinity`); a repeated key keeps its first
/// place and its last value. A lone surrogate escape (which Python keeps and Rust
/// strings cannot hold) and nesting deeper than Python's recursion allows are refused.
pub(crate) fn python_loads_dumps(text: &str) -> Option<String> {
    let mut scan = Scan::new(text.as_bytes());
    let mut out = String::with_capacity(text.len());
    loads_value(&mut scan, 0, &mut out).ok()?;
    scan.rest().ok()?.is_empty().then_some(out)
}

/// How deep `json.loads` nests before Python's recursion limit (1,000 frames, some of
/// them the caller's) stops it.
const MAX_LOADS_DEPTH: usize = 900;

/// The words Python's reader takes as values, and how `json.dumps` writes them back.
const LOADS_WORDS: [&str; 6] = ["null", "true", "false", "NaN", "Infinity", "-Infinity"];

/// One value of [`python_loads_dumps`], nested `depth` deep, written to `out`.
fn loads_value(scan: &mut Scan<'_>, depth: usize, out: &mut String) -> Result<(), String> {
    let too_deep = || "nested deeper than Python reads".to_owned();
    match scan.rest()?.first() {
        Some(b'{') if depth < MAX_LOADS_DEPTH => {
            // Each member written, in its key's first place.
            let mut members: Vec<(String, String)> = Vec::new();
            scan.object(|scan, key| {
                let key = key.decoded()?;
                let mut written = String::new();
                loads_value(scan, depth + 1, &mut written)?;
                match members.iter_mut().find(|(k, _)| *k == key) {
                    Some(member) => member.1 = written,
                    None => members.push((key, written)),
                }
                Ok(())
            })?;
            out.push('{');
            for (i, (key, written)) in members.iter().enumerate() {
                if i > 0 {
                    out.push_str(", ");
                }
                python_string(key, out);
                out.push_str(": ");
                out.push_str(written);
            }
            out.push('}');
        }
        Some(b'[') if depth < MAX_LOADS_DEPTH => {
            out.push('[');
            let mut first = true;
            scan.array(|scan| {
                if !std::mem::take(&mut first) {
                    out.push_str(", ");
                }
                loads_value(scan, depth + 1, out)
            })?;
            out.push(']');
        }
        Some(b'{' | b'[') => return Err(too_deep()),
        Some(b'"') => python_string(&scan.string()?.decoded()?, out),
        _ => {
            let rest = scan.rest()?;
            if let Some(word) = LOADS_WORDS.iter().find(|w| rest.starts_with(w.as_bytes())) {
                out.push_str(word);
                scan.consume(word.len());
            } else {
                let len = loads_number(rest, out).ok_or("not a value")?;
                scan.consume(len);
            }
        }
    }
    Ok(())
}

/// The number at the start of `text`, as Python reads it
/// (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`) and writes it back to `out`: an
/// integer as its digits, a float as `repr` writes it. Returns its length.
fn loads_number(text: &[u8], out: &mut String) -> Option<usize> {
    let digits = |from: usize| {
        from + text[from.min(text.len())..]
            .iter()
            .take_while(|b| b.is_ascii_digit())
            .count()
    };
    let start = usize::from(text.first() == Some(&b'-'));
    let mut end = digits(start);
    if end == start {
        return None;
    }
    if text[start] == b'0' {
        end = start + 1; // `0` alone is the integer part; digits after it are extra data
    }
    let mut float = false;
    if text.get(end) == Some(&b'.') && digits(end + 1) > end + 1 {
        end = digits(end + 1);
        float = true;
    }
    if matches!(text.get(end), Some(b'e' | b'E')) {
        let sign = usize::from(matches!(text.get(end + 1), Some(b'+' | b'-')));
        let exp = digits(end + 1 + sign);
        if exp > end + 1 + sign {
            end = exp;
            float = true;
        }
    }
    let literal = std::str::from_utf8(&text[..end]).ok()?;
    if !float {
        out.push_str(if literal == "-0" { "0" } else { literal });
        return Some(end);
    }
    let value: f64 = literal.parse().ok()?;
    match serde_json::Number::from_f64(value) {
        Some(number) => out.push_str(&python_number(&number)),
        None if value > 0.0 => out.push_str("Infinity"),
        None => out.push_str("-Infinity"),
    }
    Some(end)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn loads_then_dumps_as_python_does() {
        // What Python 3.11 prints for `json.dumps(json.loads(text), ensure_ascii=False)`.
        let cases = [
            ("Infinity", Some("Infinity")),
            (" -Infinity ", Some("-Infinity")),
            ("NaN", Some("NaN")),
            (
                "[1e400, -1e400, 1E5, 1.5e-7, 0.1]",
                Some("[Infinity, -Infinity, 100000.0, 1.5e-07, 0.1]"),
            ),
            ("-0", Some("0")),
            (
                "123456789012345678901234567890",
                Some("123456789012345678901234567890"),
            ),
            ("{\"a\":1,\"b\":2,\"a\":3}", Some("{\"a\": 3, \"b\": 2}")),
            ("{\"k\": {\"x\": NaN}}", Some("{\"k\": {\"x\": NaN}}")),
            (
                "[\"\\ud83d\\ude00\", \"\\u00e9\\/\"]",
                Some("[\"\u{1f600}\", \"\u{e9}/\"]"),
            ),
            ("{}", Some("{}")),
            ("[ ]", Some("[]")),
            ("0123", None),
            ("1.", None),
            ("1e", None),
            ("+1", None),
            ("-NaN", None),
            ("[1,]", None),
            ("{\"a\" 1}", None),
            ("\"\\ud800\"", None),
            ("\"a\tb\"", None),
            ("\u{feff}1", None),
            ("", None),
            ("  ", None),
            ("nul", None),
        ];
        for (text, expected) in cases {
            assert_eq!(python_loads_dumps(text).as_deref(), expected, "{text:?}");
        }
        let deep = format!(
            "{}{}",
            "[".repeat(MAX_LOADS_DEPTH + 1),
            "]".repeat(MAX_LOADS_DEPTH + 1)
        );
        assert_eq!(python_loads_dumps(&deep), None);
    }

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
