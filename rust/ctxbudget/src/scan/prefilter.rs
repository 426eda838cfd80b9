//! Ruling rows out of a search from their raw JSONL bytes, without parsing them.
//!
//! Exact for the queries it accepts: ASCII text with none of the characters JSON may
//! escape and not part of the placeholders the projection adds. A row stays a
//! candidate if it contains the query ignoring ASCII case, has tool calls or results
//! (shown re-serialized), or holds something bytes cannot see through *and that could
//! become part of a match*:
//! - a `\uXXXX` escape that decodes to one of the query's bytes or its other case
//!   (`\u0041` for a query with `a`), or to a character whose lowercase is one of them;
//! - such a character written raw: K KELVIN SIGN (lowercase `k`) or İ (lowercase
//!   `i̇`), for queries with `k` or `i`.
//!
//! Every other escape decodes to a character the query cannot contain (a control
//! character such as the ESC of ANSI colour codes or a NUL, `"`, `\`, `/`, or any other
//! non-ASCII character), so a match can never span it and must appear in the raw bytes
//! as it is. Rows full of colour codes or escaped quotes thus stay as cheap to rule out
//! as plain ones.
//!
//! The scan looks for the query's rarest byte (both cases) with `memchr2` and checks
//! the surrounding bytes only there, so nothing is copied or lowercased.

/// Non-ASCII characters whose lowercase contains an ASCII byte, with that byte. The
/// tests check this list against every Unicode scalar value.
const FOLDS_TO_ASCII: [(char, u8); 2] = [('\u{130}', b'i'), ('\u{212A}', b'k')];

/// Text the projection adds, which is not in the raw line.
const SYNTHETIC: [&str; 2] = ["[media omitted]", "[session_history result omitted]"];

/// A compiled search query (see the module documentation).
pub(super) struct Prefilter {
    query: Vec<u8>,
    /// Index in `query` of the byte searched for, and that byte in both cases.
    anchor: (usize, u8, u8),
    /// Whether each lowercase ASCII byte occurs in the query.
    in_query: [bool; 128],
    /// The raw UTF-8 of the [`FOLDS_TO_ASCII`] characters that fold into the query.
    folding: Vec<String>,
    /// Starts of the escapes that can matter: `\u002` … `\u007` (printable ASCII,
    /// which is all a query holds), and the first four digits of the escapes of the
    /// folding characters.
    escapes: Vec<memchr::memmem::Finder<'static>>,
}

/// Rough frequency rank of ASCII bytes in English prose and code (higher = commoner).
fn commonness(b: u8) -> u8 {
    match b.to_ascii_lowercase() {
        b' ' => 255,
        b'e' => 250,
        b't' | b'a' | b'o' | b'i' | b'n' => 240,
        b's' | b'h' | b'r' => 230,
        b'd' | b'l' | b'c' | b'u' => 220,
        b'm' | b'w' | b'f' | b'g' | b'y' | b'p' | b'b' => 200,
        b'.' | b',' | b'_' | b'-' | b'(' | b')' | b':' | b'=' => 190,
        b'v' | b'k' => 150,
        b'0'..=b'9' => 140,
        b'x' | b'j' | b'q' | b'z' => 100,
        _ => 120,
    }
}

/// The code point of a `\uXXXX` escape whose `u` is at `at - 1`: four hex digits from
/// `at`, if there are. (`\u` without them is no escape: the `\` closes a `\\`.)
#[inline]
fn hex4(line: &[u8], at: usize) -> Option<u32> {
    let digits = line.get(at..at + 4)?;
    let mut cp = 0u32;
    for &d in digits {
        cp = (cp << 4) | char::from(d).to_digit(16)?;
    }
    Some(cp)
}

impl Prefilter {
    /// The prefilter for `query_lower` (already lowercased), or `None` when bytes
    /// cannot decide for this query and every row must be parsed.
    pub(super) fn new(query_lower: &str) -> Option<Prefilter> {
        let plain = !query_lower.is_empty()
            && query_lower
                .bytes()
                .all(|b| (0x20..0x7F).contains(&b) && !matches!(b, b'"' | b'\\' | b'/'));
        if !plain || SYNTHETIC.iter().any(|s| s.contains(query_lower)) {
            return None;
        }
        let query = query_lower.as_bytes().to_vec();
        let (index, byte) = query
            .iter()
            .copied()
            .enumerate()
            .min_by_key(|&(_, b)| commonness(b))?;
        let mut in_query = [false; 128];
        for &b in &query {
            in_query[usize::from(b.to_ascii_lowercase())] = true;
        }
        let folding = FOLDS_TO_ASCII
            .iter()
            .filter(|(_, ascii)| in_query[usize::from(*ascii)])
            .map(|(c, _)| c.to_string())
            .collect();
        let mut escapes: Vec<String> = (b'2'..=b'7')
            .map(|d| format!("\\u00{}", char::from(d)))
            .collect();
        for (c, ascii) in FOLDS_TO_ASCII {
            if in_query[usize::from(ascii)] {
                escapes.push(format!("\\u{:03x}", u32::from(c) >> 4));
                escapes.push(format!("\\u{:03X}", u32::from(c) >> 4));
            }
        }
        escapes.dedup();
        let escapes = escapes
            .iter()
            .map(|e| memchr::memmem::Finder::new(e.as_bytes()).into_owned())
            .collect();
        Some(Prefilter {
            anchor: (index, byte.to_ascii_lowercase(), byte.to_ascii_uppercase()),
            query,
            in_query,
            folding,
            escapes,
        })
    }

    /// Whether a character could be part of a match (see the module documentation).
    #[inline]
    fn matters(&self, cp: u32) -> bool {
        match u8::try_from(cp) {
            Ok(b) if b < 0x80 => self.in_query[usize::from(b.to_ascii_lowercase())],
            _ => FOLDS_TO_ASCII
                .iter()
                .any(|&(c, ascii)| u32::from(c) == cp && self.in_query[usize::from(ascii)]),
        }
    }

    /// Whether a `\uXXXX` escape in `line` decodes to a character that matters.
    ///
    /// Rows of colour codes or NULs hold an escape every few bytes, so escapes are not
    /// visited one by one: only the few spellings that can matter are searched for,
    /// each with a vectorized substring search (see [`Prefilter::escapes`]).
    #[inline]
    fn has_relevant_escape(&self, line: &[u8]) -> bool {
        let Some(first) = memchr::memmem::find(line, b"\\u") else {
            return false;
        };
        let line = &line[first..];
        self.escapes.iter().any(|finder| {
            finder
                .find_iter(line)
                .any(|p| hex4(line, p + 2).is_some_and(|cp| self.matters(cp)))
        })
    }

    /// False only if the row cannot match the query.
    pub(super) fn may_match(&self, line: &[u8]) -> bool {
        let (k, lower, upper) = self.anchor;
        let n = self.query.len();
        let found = memchr::memchr2_iter(lower, upper, line).any(|p| {
            p >= k
                && p - k + n <= line.len()
                && line[p - k..p - k + n].eq_ignore_ascii_case(&self.query)
        });
        if found {
            return true;
        }
        // Tool calls and results are shown re-serialized, which may differ from how
        // another writer spelled them (spacing, number format): always parse those.
        // Then what hides a match from byte comparison, checked only on misses.
        memchr::memmem::find(line, b"\"tool_").is_some()
            || self.has_relevant_escape(line)
            || self
                .folding
                .iter()
                .any(|raw| memchr::memmem::find(line, raw.as_bytes()).is_some())
    }
}

#[cfg(test)]
mod tests {
    use super::super::{match_char, project};
    use super::*;
    use proptest::prelude::*;
    use serde_json::{json, Value};

    fn text_strategy() -> impl Strategy<Value = String> {
        let chars = prop::sample::select(vec![
            'a', 'B', 'k', 'K', 'i', 'I', 's', ' ', 'é', '\u{212A}', '\u{130}', 'ß', '"', '\\',
            '\n', '[', ']', 'm', 'e', 'd', 'o', 't', '中', '😀', '\u{1b}', '\0', '/',
        ]);
        prop::collection::vec(chars, 0..40).prop_map(|v| v.into_iter().collect())
    }

    /// `line` with the characters picked by `pick` inside strings written as `\uXXXX`
    /// escapes, as another JSON writer might: the same row to a parser.
    fn escape_some(line: &str, pick: &[bool]) -> String {
        let mut out = String::new();
        let (mut in_string, mut escaped, mut hex_left) = (false, false, 0);
        for (i, c) in line.chars().enumerate() {
            let plain = in_string && !escaped && hex_left == 0 && c != '"' && c != '\\';
            if plain && pick.get(i % pick.len().max(1)).copied().unwrap_or(false) {
                let mut units = [0u16; 2];
                for u in c.encode_utf16(&mut units) {
                    out.push_str(&format!("\\u{u:04x}"));
                }
                continue;
            }
            out.push(c);
            if hex_left > 0 {
                hex_left -= 1;
            } else if escaped {
                escaped = false;
                if c == 'u' {
                    hex_left = 4;
                }
            } else if in_string && c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_string = !in_string;
            }
        }
        out
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 2_000, ..ProptestConfig::default() })]

        /// The prefilter may let rows through that do not match, never the reverse,
        /// however the row's writer escaped its strings.
        #[test]
        fn prefilter_never_rules_out_a_match(
            parts in prop::collection::vec((0u8..3, text_strategy()), 0..4),
            query in "[a-zA-Z ]{1,6}",
            pick in prop::collection::vec(prop::bool::weighted(0.2), 1..16),
        ) {
            let parts: Vec<Value> = parts
                .into_iter()
                .map(|(kind, text)| match kind {
                    0 => json!({"type": "text", "text": text}),
                    1 => json!({"type": "media", "media_type": "image/png"}),
                    _ => json!({"type": "tool_call", "id": "c", "name": "n", "arguments": {"t": text}}),
                })
                .collect();
            let row = json!({"seq": 1, "kind": "message", "role": "user", "parts": parts});
            let line = escape_some(&serde_json::to_string(&row).unwrap_or_default(), &pick);
            let reparsed: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
            prop_assert_eq!(&reparsed, &row);
            let q = query.to_lowercase();
            let matched = match_char(&project(&row).text, &q).is_some();
            if let Some(pf) = Prefilter::new(&q) {
                prop_assert!(!matched || pf.may_match(line.as_bytes()), "{} / {:?}", line, q);
            }
        }
    }

    #[test]
    fn prefilter_sees_through_folding_characters() {
        let pf = Prefilter::new("kelvin").unwrap_or_else(|| panic!("prefilter"));
        let row = json!({"parts": [{"type": "text", "text": "\u{212A}ELVIN"}]});
        let line = serde_json::to_vec(&row).unwrap_or_default();
        assert!(match_char(&project(&row).text, "kelvin").is_some());
        assert!(pf.may_match(&line));
        assert!(pf.may_match(br#"{"parts":[{"type":"text","text":"\u212aelvin"}]}"#));
        assert!(Prefilter::new("media omitted").is_none());
        assert!(Prefilter::new("a\"b").is_none());
        assert!(!pf.may_match(br#"{"parts":[{"type":"text","text":"nothing here"}]}"#));
        // A Kelvin sign cannot matter to a query without `k`.
        let pf = Prefilter::new("elvin").unwrap_or_else(|| panic!("prefilter"));
        assert!(!pf.may_match("{\"text\":\"\u{212A}ELVXN\"}".as_bytes()));
    }

    /// The issue's collapse: rows of ANSI colour codes, escaped NULs and escaped quotes
    /// and backslashes were all kept (and parsed) for any query, as every `\u` escape
    /// disabled the prefilter. Now only escapes that decode to a query byte keep a row.
    #[test]
    fn escapes_keep_a_row_only_if_they_could_be_part_of_a_match() {
        let pf = Prefilter::new("deploy key").unwrap_or_else(|| panic!("prefilter"));
        let ansi =
            br#"{"parts":[{"type":"text","text":"\u001b[31merror\u001b[0m: build failed"}]}"#;
        let nuls = br#"{"parts":[{"type":"text","text":"a\u0000b\u0000c\u0000"}]}"#;
        let quoted = br#"{"parts":[{"type":"text","text":"say \"hi\" to C:\\users\\u\\x"}]}"#;
        for line in [&ansi[..], nuls, quoted] {
            assert!(!pf.may_match(line), "{}", String::from_utf8_lossy(line));
        }
        // An escape that decodes to a query byte, in either case, keeps the row.
        for line in [
            &br#"{"text":"\u0064eploy key"}"#[..],
            br#"{"text":"deplo\u0059 key"}"#,
            br#"{"text":"x\u0020y"}"#,
        ] {
            assert!(pf.may_match(line), "{}", String::from_utf8_lossy(line));
        }
        // Colour codes around the query itself are no obstacle.
        assert!(pf.may_match(br#"{"text":"\u001b[1mdeploy key\u001b[0m"}"#));
        // İ matters to queries with `i` only.
        let pf = Prefilter::new("ink").unwrap_or_else(|| panic!("prefilter"));
        assert!(pf.may_match(br#"{"text":"\u0130NK"}"#));
        assert!(pf.may_match("{\"text\":\"\u{130}NK\"}".as_bytes()));
        let pf = Prefilter::new("nk").unwrap_or_else(|| panic!("prefilter"));
        assert!(!pf.may_match(br#"{"text":"\u0130N\u001bX"}"#));
    }

    #[test]
    fn folds_to_ascii_lists_every_such_character() {
        let found: Vec<(char, u8)> = (0x80..=0x10FFFFu32)
            .filter_map(char::from_u32)
            .filter_map(|c| {
                let ascii = c.to_lowercase().find(char::is_ascii)?;
                Some((c, ascii as u8))
            })
            .collect();
        assert_eq!(found, FOLDS_TO_ASCII.to_vec());
    }
}
