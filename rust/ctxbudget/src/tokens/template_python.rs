//! Python's string semantics for chat templates, where MiniJinja's (Rust's) differ from
//! those of Jinja2, which `transformers` runs templates on.
//!
//! Python counts `\x1c`–`\x1f` as whitespace (`str.isspace`) and Rust does not, so
//! `trim`, `.strip()`, `.split()` and friends would keep characters Python drops;
//! `str.splitlines` also breaks at `\r`, `\v`, `\f`, `\x1c`–`\x1e`, `\x85`, `\u2028` and
//! `\u2029`, where Rust's `lines` breaks only at `\n`. Every other method is
//! `minijinja-contrib`'s pycompat. A backslash before a line break inside a string
//! literal continues the line, as in Python.

use std::borrow::Cow;

use minijinja::value::{from_args, Value};
use minijinja::{Error, State};

/// Whether Python's `str.isspace` holds for `c`: Unicode's `White_Space` plus the four
/// information separators.
pub(crate) fn is_space(c: char) -> bool {
    c.is_whitespace() || ('\u{1c}'..='\u{1f}').contains(&c)
}

/// Python's `str.strip(chars)`, `lstrip`, `rstrip`: `chars` (a set) or whitespace.
fn strip<'a>(s: &'a str, chars: Option<&str>, start: bool, end: bool) -> &'a str {
    let strips = |c: char| chars.map_or_else(|| is_space(c), |set| set.contains(c));
    let s = if start {
        s.trim_start_matches(strips)
    } else {
        s
    };
    if end {
        s.trim_end_matches(strips)
    } else {
        s
    }
}

/// Jinja2's `trim` filter: `value.strip(chars)`.
pub(crate) fn trim(value: String, chars: Option<String>) -> String {
    strip(&value, chars.as_deref(), true, true).to_owned()
}

/// Python's `str.split()` without a separator: runs of whitespace split, none at the
/// ends; at most `maxsplit` splits (all when negative), the rest kept whole after its
/// leading whitespace.
fn split_whitespace(s: &str, maxsplit: i64) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    let mut left = maxsplit;
    loop {
        rest = rest.trim_start_matches(is_space);
        if rest.is_empty() {
            break;
        }
        if left == 0 {
            out.push(rest);
            break;
        }
        let end = rest.find(is_space).unwrap_or(rest.len());
        out.push(&rest[..end]);
        rest = &rest[end..];
        left -= 1;
    }
    out
}

/// Whether Python's `str.splitlines` breaks a line at `c`.
fn is_line_break(c: char) -> bool {
    matches!(
        c,
        '\n' | '\r'
            | '\u{b}'
            | '\u{c}'
            | '\u{1c}'
            | '\u{1d}'
            | '\u{1e}'
            | '\u{85}'
            | '\u{2028}'
            | '\u{2029}'
    )
}

/// Python's `str.splitlines(keepends)`: `\r\n` is one break.
fn splitlines(s: &str, keepends: bool) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = s;
    while let Some(at) = rest.find(is_line_break) {
        let width = if rest[at..].starts_with("\r\n") {
            2
        } else {
            rest[at..].chars().next().map_or(1, char::len_utf8)
        };
        out.push(if keepends {
            &rest[..at + width]
        } else {
            &rest[..at]
        });
        rest = &rest[at + width..];
    }
    if !rest.is_empty() {
        out.push(rest);
    }
    out
}

/// Methods templates call on values (`message.content.strip()`, `tool.items()`):
/// Python's whitespace rules for strings, pycompat for the rest.
pub(crate) fn unknown_method(
    state: &State,
    value: &Value,
    method: &str,
    args: &[Value],
) -> Result<Value, Error> {
    if let Some(s) = value.as_str() {
        match method {
            "strip" | "lstrip" | "rstrip" => {
                let (chars,): (Option<&str>,) = from_args(args)?;
                let start = method != "rstrip";
                let end = method != "lstrip";
                return Ok(Value::from(strip(s, chars, start, end)));
            }
            "split" => {
                let (sep, maxsplit): (Option<Value>, Option<i64>) = from_args(args)?;
                if sep.as_ref().is_none_or(Value::is_none) {
                    let parts = split_whitespace(s, maxsplit.unwrap_or(-1));
                    return Ok(parts.into_iter().map(Value::from).collect());
                }
            }
            "splitlines" => {
                let (keepends,): (Option<bool>,) = from_args(args)?;
                let lines = splitlines(s, keepends.unwrap_or(false));
                return Ok(lines.into_iter().map(Value::from).collect());
            }
            "isspace" => {
                let () = from_args(args)?;
                return Ok(Value::from(!s.is_empty() && s.chars().all(is_space)));
            }
            _ => {}
        }
    }
    minijinja_contrib::pycompat::unknown_method_callback(state, value, method, args)
}

/// `source` with each backslash-newline inside a string literal of a tag removed, as
/// Jinja2 reads string literals (Python's `unicode-escape`: a backslash before a line
/// break continues the line), where MiniJinja keeps both characters. Mistral Small
/// 3.1's template writes its default system prompt that way. Text outside tags, and
/// every other escape, is left to MiniJinja.
pub(crate) fn join_continued_lines(source: &str) -> Cow<'_, str> {
    if !source.contains("\\\n") && !source.contains("\\\r") {
        return Cow::Borrowed(source);
    }
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    // Text outside tags is copied up to the next tag opener; comments as they are.
    while let Some(open) = rest.find('{') {
        let (before, from) = rest.split_at(open);
        out.push_str(before);
        let close = match from.get(..2) {
            Some("{{") => "}}",
            Some("{%") => "%}",
            Some("{#") => "#}",
            _ => {
                out.push('{');
                rest = &from[1..];
                continue;
            }
        };
        let body_len = tag_len(from, close);
        let tag = &from[..body_len];
        if close == "#}" {
            out.push_str(tag);
        } else {
            push_tag(tag, &mut out);
        }
        rest = &from[body_len..];
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// Length of the tag at the start of `from` (its closer included; the rest of the
/// source when unclosed), skipping closers inside string literals.
fn tag_len(from: &str, close: &str) -> usize {
    let bytes = from.as_bytes();
    let mut i = 2;
    let mut quote: Option<u8> = None;
    while i < bytes.len() {
        let b = bytes[i];
        match quote {
            Some(_) if b == b'\\' => i += 1,
            Some(q) if b == q => quote = None,
            Some(_) => {}
            None if close != "#}" && (b == b'"' || b == b'\'') => quote = Some(b),
            None if bytes[i..].starts_with(close.as_bytes()) => return i + close.len(),
            None => {}
        }
        i += 1;
    }
    from.len()
}

/// A tag's text with backslash-newlines inside its string literals removed.
fn push_tag(tag: &str, out: &mut String) {
    let mut quote: Option<char> = None;
    let mut chars = tag.chars().peekable();
    while let Some(c) = chars.next() {
        match quote {
            Some(_) if c == '\\' => match chars.peek() {
                Some('\n') => {
                    chars.next();
                }
                Some('\r') => {
                    chars.next();
                    if chars.peek() == Some(&'\n') {
                        chars.next();
                    }
                }
                Some(&next) => {
                    out.push(c);
                    out.push(next);
                    chars.next();
                }
                None => out.push(c),
            },
            Some(q) if c == q => {
                quote = None;
                out.push(c);
            }
            None if c == '"' || c == '\'' => {
                quote = Some(c);
                out.push(c);
            }
            _ => out.push(c),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backslash_newline_in_a_string_literal_continues_the_line() {
        let source = "{% set a = \"x.\\\ny\\\r\n\\\\\n\" %}a\\\n{{ a + '}}\\\n' }}{# 'é\\\n #}é";
        assert_eq!(
            join_continued_lines(source),
            "{% set a = \"x.y\\\\\n\" %}a\\\n{{ a + '}}' }}{# 'é\\\n #}é"
        );
        let plain = "{{ 'a\\nb' }}\\\n";
        assert_eq!(join_continued_lines(plain), plain);
    }

    #[test]
    fn whitespace_is_pythons() {
        // Python: [c for c in map(chr, range(0x110000)) if c.isspace()]
        let python: Vec<u32> = [
            0x9, 0xa, 0xb, 0xc, 0xd, 0x1c, 0x1d, 0x1e, 0x1f, 0x20, 0x85, 0xa0, 0x1680,
        ]
        .into_iter()
        .chain(0x2000..=0x200a)
        .chain([0x2028, 0x2029, 0x202f, 0x205f, 0x3000])
        .collect();
        let ours: Vec<u32> = (0..=0x10ffff)
            .filter_map(char::from_u32)
            .filter(|&c| is_space(c))
            .map(u32::from)
            .collect();
        assert_eq!(ours, python);
    }

    #[test]
    fn strip_split_and_splitlines_as_python() {
        assert_eq!(trim("\u{1f} a \u{1c}".into(), None), "a");
        assert_eq!(trim("xxaxx".into(), Some("x".into())), "a");
        assert_eq!(strip(" \u{1d}a ", None, true, false), "a ");
        assert_eq!(split_whitespace("  a \u{1f} b  c ", -1), ["a", "b", "c"]);
        assert_eq!(split_whitespace("  a  b  c ", 1), ["a", "b  c "]);
        assert_eq!(split_whitespace(" a ", 1), ["a"]);
        assert_eq!(split_whitespace("  ", -1), Vec::<&str>::new());
        assert_eq!(
            splitlines("a\r\nb\rc\u{2028}d\n", false),
            ["a", "b", "c", "d"]
        );
        assert_eq!(splitlines("a\r\nb\n", true), ["a\r\n", "b\n"]);
        assert_eq!(splitlines("", false), Vec::<&str>::new());
    }
}
