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

/// `text` as Python's `json.loads` reads it, written back on one line as
/// `json.dumps(…, ensure_ascii=False)` writes what it read; `None` where `json.loads`
/// refuses it. Python reads more than JSON, and writes what it read in its own form:
/// `NaN`, `Infinity` and `-Infinity`; integers of any size (`-0` is `0`); floats as
/// `repr` writes them (a float too large is `Infinity`); a repeated key keeps its first
/// place and its last value. A lone surrogate escape (which Python keeps and Rust
/// strings cannot hold) and nesting deeper than Python's recursion allows are refused.
pub(crate) fn python_loads_dumps(text: &str) -> Option<String> {
    let mut reader = Loads {
        bytes: text.as_bytes(),
        at: 0,
        depth: 0,
    };
    let mut out = String::with_capacity(text.len());
    reader.space();
    reader.value(&mut out)?;
    reader.space();
    (reader.at == reader.bytes.len()).then_some(out)
}

/// How deep `json.loads` nests before Python's recursion limit (1,000 frames, some of
/// them the caller's) stops it.
const MAX_LOADS_DEPTH: usize = 900;

/// The reader of [`python_loads_dumps`]: the text's bytes and where it is.
struct Loads<'a> {
    bytes: &'a [u8],
    at: usize,
    depth: usize,
}

impl Loads<'_> {
    /// Skips JSON's whitespace (Python's reader takes no other).
    fn space(&mut self) {
        while let Some(b' ' | b'\t' | b'\n' | b'\r') = self.bytes.get(self.at) {
            self.at += 1;
        }
    }

    /// Reads `word` at the current place, if it is there.
    fn word(&mut self, word: &str) -> bool {
        let found = self.bytes[self.at..].starts_with(word.as_bytes());
        if found {
            self.at += word.len();
        }
        found
    }

    /// One value, written to `out`.
    fn value(&mut self, out: &mut String) -> Option<()> {
        match *self.bytes.get(self.at)? {
            b'{' => self.nested(out, b'}'),
            b'[' => self.nested(out, b']'),
            b'"' => {
                let text = self.string()?;
                python_string(&text, out);
                Some(())
            }
            _ => {
                for (word, written) in [
                    ("null", "null"),
                    ("true", "true"),
                    ("false", "false"),
                    ("NaN", "NaN"),
                    ("Infinity", "Infinity"),
                    ("-Infinity", "-Infinity"),
                ] {
                    if self.word(word) {
                        out.push_str(written);
                        return Some(());
                    }
                }
                self.number(out)
            }
        }
    }

    /// An object or an array (opened at the current place, closed by `close`).
    fn nested(&mut self, out: &mut String, close: u8) -> Option<()> {
        self.depth += 1;
        if self.depth > MAX_LOADS_DEPTH {
            return None;
        }
        self.at += 1;
        // Each member as written, with its key for an object.
        let mut members: Vec<(Option<String>, String)> = Vec::new();
        self.space();
        if self.bytes.get(self.at) == Some(&close) {
            self.at += 1;
        } else {
            loop {
                let key = if close == b'}' {
                    if self.bytes.get(self.at) != Some(&b'"') {
                        return None;
                    }
                    let key = self.string()?;
                    self.space();
                    if !self.word(":") {
                        return None;
                    }
                    self.space();
                    Some(key)
                } else {
                    None
                };
                let mut written = String::new();
                self.value(&mut written)?;
                match members.iter_mut().find(|(k, _)| key.is_some() && *k == key) {
                    Some(member) => member.1 = written,
                    None => members.push((key, written)),
                }
                self.space();
                match self.bytes.get(self.at) {
                    Some(b',') => {
                        self.at += 1;
                        self.space();
                    }
                    Some(&c) if c == close => {
                        self.at += 1;
                        break;
                    }
                    _ => return None,
                }
            }
        }
        self.depth -= 1;
        out.push(if close == b'}' { '{' } else { '[' });
        for (i, (key, written)) in members.iter().enumerate() {
            if i > 0 {
                out.push_str(", ");
            }
            if let Some(key) = key {
                python_string(key, out);
                out.push_str(": ");
            }
            out.push_str(written);
        }
        out.push(close as char);
        Some(())
    }

    /// A string opened at the current place, its escapes read.
    fn string(&mut self) -> Option<String> {
        self.at += 1;
        let mut text = String::new();
        loop {
            let start = self.at;
            while let Some(&b) = self.bytes.get(self.at) {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.at += 1;
            }
            text.push_str(std::str::from_utf8(&self.bytes[start..self.at]).ok()?);
            match *self.bytes.get(self.at)? {
                b'"' => {
                    self.at += 1;
                    return Some(text);
                }
                b'\\' => {
                    self.at += 1;
                    let escape = *self.bytes.get(self.at)?;
                    self.at += 1;
                    text.push(match escape {
                        b'"' => '"',
                        b'\\' => '\\',
                        b'/' => '/',
                        b'b' => '\u{8}',
                        b'f' => '\u{c}',
                        b'n' => '\n',
                        b'r' => '\r',
                        b't' => '\t',
                        b'u' => self.unicode_escape()?,
                        _ => return None,
                    });
                }
                // A control character: Python's strict reader refuses it.
                _ => return None,
            }
        }
    }

    /// The character of a `\uXXXX` escape whose `\u` was read (a surrogate pair is
    /// one character; a lone surrogate is refused).
    fn unicode_escape(&mut self) -> Option<char> {
        let high = self.hex4()?;
        if !(0xD800..0xDC00).contains(&high) {
            return char::from_u32(high);
        }
        if !self.word("\\u") {
            return None;
        }
        let low = self.hex4()?;
        if !(0xDC00..0xE000).contains(&low) {
            return None;
        }
        char::from_u32(0x10000 + ((high - 0xD800) << 10) + (low - 0xDC00))
    }

    /// Four hexadecimal digits.
    fn hex4(&mut self) -> Option<u32> {
        let digits = self.bytes.get(self.at..self.at + 4)?;
        if !digits.iter().all(u8::is_ascii_hexdigit) {
            return None;
        }
        self.at += 4;
        u32::from_str_radix(std::str::from_utf8(digits).ok()?, 16).ok()
    }

    /// A number, as Python reads it (`-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?`)
    /// and writes it back: an integer as its digits, a float as `repr` writes it.
    fn number(&mut self, out: &mut String) -> Option<()> {
        let start = self.at;
        let digits = |reader: &mut Self| {
            let from = reader.at;
            while reader.bytes.get(reader.at).is_some_and(u8::is_ascii_digit) {
                reader.at += 1;
            }
            reader.at > from
        };
        self.word("-");
        let first = self.at;
        if !digits(self) {
            return None;
        }
        if self.bytes[first] == b'0' && self.at > first + 1 {
            // `0` alone is the integer part; the digits after it are extra data.
            self.at = first + 1;
        }
        let mut float = false;
        let mark = self.at;
        if self.word(".") {
            if digits(self) {
                float = true;
            } else {
                self.at = mark;
            }
        }
        let mark = self.at;
        if self.word("e") || self.word("E") {
            let _signed = self.word("+") || self.word("-");
            if digits(self) {
                float = true;
            } else {
                self.at = mark;
            }
        }
        let literal = std::str::from_utf8(&self.bytes[start..self.at]).ok()?;
        if !float {
            out.push_str(if literal == "-0" { "0" } else { literal });
            return Some(());
        }
        let value: f64 = literal.parse().ok()?;
        match serde_json::Number::from_f64(value) {
            Some(number) => out.push_str(&python_number(&number)),
            None if value > 0.0 => out.push_str("Infinity"),
            None => out.push_str("-Infinity"),
        }
        Some(())
    }
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
