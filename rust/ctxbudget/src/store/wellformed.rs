//! Whether a line is JSON exactly as every reader of rows parses it.
//!
//! The index decides which lines are rows from a head parse that skips the fields it
//! does not need. serde_json skips such fields leniently: it does not check their UTF-8,
//! their `\u` surrogates, the range of their numbers or their nesting depth. A damaged or
//! hostile line could then be a row to the index (listed in a window's `item_count`) and
//! malformed to the reader that renders it. This check walks every value through the same
//! `deserialize_any` path a `serde_json::Value` takes, without building one, so "is a row"
//! has one meaning.

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};

/// Containers (objects and arrays) a line may nest, the row object itself included:
/// serde_json's readers refuse a 128th level, so nothing deeper is ever written.
pub const MAX_NESTING: usize = 127;

/// Levels a quarantine row adds around the row it keeps (`meta`, then `rejected`).
pub const QUARANTINE_WRAP: usize = 2;

/// Containers any row but a quarantine row may nest, the row object included: room for
/// the quarantine row that may one day keep it.
pub const MAX_ROW_NESTING: usize = MAX_NESTING - QUARANTINE_WRAP;

/// The deepest nesting of objects and arrays in a JSON text (brackets inside strings
/// do not count).
pub(crate) fn nesting(json: &[u8]) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    let (mut in_string, mut escaped) = (false, false);
    for &b in json {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Whether `line` parses as one JSON value under the reader's rules.
#[cfg(test)]
pub(crate) fn is_wellformed(line: &[u8]) -> bool {
    check(line).is_ok()
}

/// `Ok` if `line` parses as one JSON value under the reader's rules, else why not.
pub(crate) fn check(line: &[u8]) -> Result<(), serde_json::Error> {
    serde_json::from_slice::<Checked>(line).map(|_| ())
}

/// A JSON value that was fully checked and then dropped.
pub(crate) struct Checked;

impl<'de> Deserialize<'de> for Checked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(CheckedVisitor)
    }
}

struct CheckedVisitor;

impl<'de> Visitor<'de> for CheckedVisitor {
    type Value = Checked;

    fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_bool<E>(self, _: bool) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_i64<E>(self, _: i64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_u64<E>(self, _: u64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_f64<E>(self, _: f64) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_str<E>(self, _: &str) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_unit<E>(self) -> Result<Checked, E> {
        Ok(Checked)
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Checked, A::Error> {
        while seq.next_element::<Checked>()?.is_some() {}
        Ok(Checked)
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Checked, A::Error> {
        while map.next_entry::<Checked, Checked>()?.is_some() {}
        Ok(Checked)
    }
}

#[cfg(test)]
mod tests {
    use super::{is_wellformed, MAX_NESTING};
    use serde_json::Value;

    #[test]
    fn nesting_skips_strings() {
        assert_eq!(super::nesting(br#"{"a":[1,{"b":"[[{{\"]]"}]}"#), 3);
        assert_eq!(super::nesting(b"1"), 0);
    }

    /// `MAX_NESTING` is serde_json's limit, exactly.
    #[test]
    fn max_nesting_is_the_readers_limit() {
        let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(serde_json::from_str::<Value>(&nested(MAX_NESTING)).is_ok());
        assert!(serde_json::from_str::<Value>(&nested(MAX_NESTING + 1)).is_err());
        assert!(is_wellformed(nested(MAX_NESTING).as_bytes()));
        assert!(!is_wellformed(nested(MAX_NESTING + 1).as_bytes()));
    }

    /// The check agrees with the reader on lines a lenient skip would accept.
    #[test]
    fn agrees_with_the_value_parser() {
        let deep = format!("{{\"seq\":1,\"x\":{}{}}}", "[".repeat(200), "]".repeat(200));
        let cases: Vec<Vec<u8>> = vec![
            b"{\"seq\":1,\"kind\":\"message\",\"parts\":[{\"\xf4ype\":\"text\"}]}".to_vec(),
            b"{\"seq\":1,\"x\":\"\\ud800\"}".to_vec(),
            b"{\"seq\":1,\"x\":1e400}".to_vec(),
            deep.into_bytes(),
            b"{\"seq\":1,\"kind\":\"message\",\"x\":[1,2,{\"y\":null}]}".to_vec(),
            b"{\"seq\":1} trailing".to_vec(),
            b"{\"seq\":1,\"seq\":2}".to_vec(),
        ];
        for line in cases {
            assert_eq!(
                is_wellformed(&line),
                serde_json::from_slice::<Value>(&line).is_ok(),
                "{}",
                String::from_utf8_lossy(&line)
            );
        }
    }
}
