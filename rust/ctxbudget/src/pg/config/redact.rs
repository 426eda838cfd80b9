//! The one redaction every message naming a connection goes through: passwords and other
//! secrets are replaced by `***` wherever they stand in a text — a URL's userinfo
//! (`postgresql://user:***@host`), a URL query parameter (`?password=***`,
//! `&sslpassword=***`) or a libpq `key=value` pair (`password='***'`).
//!
//! It works on whole messages, not only on a URL given alone, so that a URL quoted inside
//! an error (or a connection string a driver echoes) is covered too. It errs on the side
//! of hiding: a value whose end is ambiguous is hidden up to the next space. The Python
//! package's `ctxbudget._redact.redact` follows the same rules; both are checked against
//! the cases in `testdata/redact.json`.

/// What replaces a secret.
pub(crate) const MASK: &str = "***";

/// `text` with every password and secret-bearing parameter replaced by `***`.
pub fn redact_secrets(text: &str) -> String {
    mask_pairs(&mask_userinfo(text))
}

/// True for a parameter name that carries a secret (`password`, `sslpassword`,
/// `passfile`, `*token*`, `*secret*`, `cursor_key`…): compared lowercased, after
/// percent-decoding, so `%70assword` is one too.
fn is_secret_key(key: &str) -> bool {
    let key = percent_decoded(key).to_ascii_lowercase();
    ["pass", "pwd", "secret", "token", "credential"]
        .iter()
        .any(|word| key.contains(word))
        || key.ends_with("key")
}

/// `%XX` escapes decoded (invalid ones kept as they are).
fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok())
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match (bytes[i], hex) {
            (b'%', Some(byte)) => {
                out.push(byte);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A character of a URL scheme (`postgresql+asyncpg`).
fn is_scheme_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')
}

/// Every `scheme://user:PASSWORD@…` with the password masked. The password runs from
/// the first `:` of the userinfo to the last `@` before the next space (a password with
/// an unescaped `@` or `/` is hidden whole, whichever `@` a parser would split at).
fn mask_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let scheme_len = rest[..at]
            .chars()
            .rev()
            .take_while(|&c| is_scheme_char(c))
            .map(char::len_utf8)
            .sum::<usize>();
        let scheme = &rest[at - scheme_len..at];
        let after = at + 3;
        out.push_str(&rest[..after]);
        rest = &rest[after..];
        if !scheme.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        let token_end = rest.find(char::is_whitespace).unwrap_or(rest.len());
        let token = &rest[..token_end];
        let first_delim = token.find([':', '/', '?', '#', '@']);
        let last_at = token.rfind('@');
        if let (Some(colon), Some(last_at)) = (first_delim, last_at) {
            if token.as_bytes()[colon] == b':' && colon < last_at {
                out.push_str(&token[..=colon]);
                out.push_str(MASK);
                rest = &rest[last_at..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// A character of a parameter name (percent escapes included: `%70assword`).
fn is_key_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '%' | '-')
}

/// Every `KEY=VALUE` whose key carries a secret with the value masked: a URL query
/// parameter (the value ends at the next `&name=` or space) or a libpq pair (spaces
/// around `=` allowed; a quoted value ends at its closing quote, `\'` escaping one).
fn mask_pairs(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while let Some(eq) = text[i..].find('=').map(|p| i + p) {
        let before = text[..eq].trim_end_matches([' ', '\t']);
        let key_len = before
            .chars()
            .rev()
            .take_while(|&c| is_key_char(c))
            .map(char::len_utf8)
            .sum::<usize>();
        let key = &before[before.len() - key_len..];
        out.push_str(&text[i..=eq]);
        i = eq + 1;
        if key.is_empty() || !is_secret_key(key) {
            continue;
        }
        let spaces = text[i..].len() - text[i..].trim_start_matches([' ', '\t']).len();
        out.push_str(&text[i..i + spaces]);
        i += spaces;
        if text[i..].starts_with(MASK) {
            // Masked already (redacting twice changes nothing).
            out.push_str(MASK);
            i += MASK.len();
            continue;
        }
        let value_len = value_len(&text[i..]);
        if text[i..].starts_with('\'') {
            out.push('\'');
            out.push_str(MASK);
            out.push('\'');
        } else {
            out.push_str(MASK);
        }
        i += value_len;
    }
    out.push_str(&text[i..]);
    out
}

/// Length of the value at the start of `text` (see [`mask_pairs`]).
fn value_len(text: &str) -> usize {
    if let Some(quoted) = text.strip_prefix('\'') {
        let mut escaped = false;
        for (at, c) in quoted.char_indices() {
            match c {
                _ if escaped => escaped = false,
                '\\' => escaped = true,
                '\'' => return 1 + at + 1,
                _ => {}
            }
        }
        return text.len(); // unterminated: hide the rest
    }
    let mut end = 0;
    for (at, c) in text.char_indices() {
        if c.is_whitespace() || (c == '&' && starts_parameter(&text[at + 1..])) {
            break;
        }
        end = at + c.len_utf8();
    }
    end
}

/// True when `text` starts with `name=` (the next query parameter).
fn starts_parameter(text: &str) -> bool {
    let name = text.chars().take_while(|&c| is_key_char(c)).count();
    name > 0 && text[name..].starts_with('=')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The cases both implementations (this one and the Python package's) must meet.
    #[test]
    fn meets_the_shared_cases() {
        let cases: Vec<(String, String)> =
            serde_json::from_str(include_str!("testdata/redact.json"))
                .unwrap_or_else(|e| panic!("testdata/redact.json: {e}"));
        assert!(cases.len() > 20);
        for (given, want) in cases {
            assert_eq!(redact_secrets(&given), want, "{given}");
            assert_eq!(redact_secrets(&want), want, "idempotent: {want}");
        }
    }

    /// `%XX` for every byte but unreserved ones, as a URL carries a password.
    fn percent_encoded(s: &str) -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                    (b as char).to_string()
                }
                _ => format!("%{b:02X}"),
            })
            .collect()
    }

    proptest::proptest! {
        /// Whatever a password holds (no spaces), no form of a connection string shows it.
        #[test]
        fn no_password_survives(body in "[^\\s]{1,24}") {
            let password = format!("Q{body}Z9");
            let encoded = percent_encoded(&password);
            let quoted = password.replace('\\', "\\\\").replace('\'', "\\'");
            let mut forms = vec![
                format!("postgresql://u:{password}@h:5432/db?sslmode=require"),
                format!("postgresql://u:{encoded}@h/db"),
                format!("postgresql://u@h/db?password={encoded}&sslmode=require"),
                format!("postgres://u@h/db?sslpassword={encoded}"),
                format!("host=h password='{quoted}' dbname=x"),
                format!("cannot parse the URL \"postgresql://u:{password}@h/db\": bad"),
            ];
            if !password.contains('&') {
                forms.push(format!("postgresql://u@h/db?password={password}&x=1"));
                forms.push(format!("password={password} x=1"));
            }
            for text in forms {
                let shown = redact_secrets(&text);
                proptest::prop_assert!(
                    !shown.contains(&password) && !shown.contains(&encoded),
                    "{} -> {}", text, shown
                );
            }
        }
    }
}
