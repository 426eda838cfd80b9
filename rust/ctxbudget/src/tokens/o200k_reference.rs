//! A frozen copy of o200k's scanner (also tekken's) as it was before its ASCII fast
//! paths were rewritten (test-only): the differential tests compare every piece end of
//! the scanner in use with this one, so a changed boundary fails them.
//!
//! Its helpers are those of the frozen cl100k scanner, so that later changes to the
//! shared helpers cannot move the reference along with them.

use super::cl100k_reference::{
    ascii_letters, class_of, contraction, numbers, run, space_run, symbols,
};
use super::unicode::{class_at, len_before, Class, ASCII};

/// End of the piece that starts at `i`, as the old scanner found it.
pub(crate) fn o200k(text: &[u8], i: usize, contractions: bool, digits: usize) -> usize {
    let b0 = text[i];
    if b0 < 0x80 {
        let c0 = ASCII[usize::from(b0)];
        let from = if c0 == Class::Lower {
            Some(i)
        } else if c0.is_word_prefix()
            && text
                .get(i + 1)
                .is_some_and(|&b1| b1 < 0x80 && ASCII[usize::from(b1)] == Class::Lower)
        {
            Some(i + 1)
        } else {
            None
        };
        if let Some(from) = from {
            let end = ascii_letters(text, from, false);
            if text
                .get(end)
                .is_none_or(|&b| b < 0x80 && !(contractions && b == b'\''))
            {
                return end;
            }
        }
    }
    o200k_general(text, i, contractions, digits)
}

/// The old scanner's piece that the word path above does not settle.
fn o200k_general(text: &[u8], i: usize, contractions: bool, digits: usize) -> usize {
    let with_contraction = |end: usize| {
        if contractions {
            with_contraction(text, end)
        } else {
            end
        }
    };
    let b0 = text[i];
    if b0 < 0x80 {
        let c0 = ASCII[usize::from(b0)];
        if c0 == Class::Lower {
            let ascii_end = ascii_letters(text, i, false);
            return with_contraction(run(text, ascii_end, Class::is_o200k_lower));
        }
        if c0 == Class::Number {
            return numbers(text, i, digits);
        }
        if c0 == Class::Upper {
            if let Some(end) = o200k_ascii_capitals(text, i) {
                return with_contraction(end);
            }
        }
        let c1 = match text.get(i + 1) {
            Some(&b1) if b1 < 0x80 => Some(ASCII[usize::from(b1)]),
            Some(_) => None,
            None => Some(Class::Newline),
        };
        if let Some(c1) = c1 {
            if c0.is_word_prefix() && c1 == Class::Lower {
                let ascii_end = ascii_letters(text, i + 1, false);
                return with_contraction(run(text, ascii_end, Class::is_o200k_lower));
            }
            if c0.is_word_prefix() && c1 == Class::Upper {
                if let Some(end) = o200k_ascii_capitals(text, i + 1) {
                    return with_contraction(end);
                }
            }
            if (c0.is_symbol() && !c1.is_letter()) || (b0 == b' ' && c1.is_symbol()) {
                if let Some(end) = symbols(text, i, c0, 1, b"\r\n/") {
                    return end;
                }
            }
            if c0.is_space() && (c1.is_space() || c1 == Class::Number) {
                return o200k_whitespace(text, i);
            }
        }
        if c0 == Class::Newline {
            return o200k_whitespace(text, i);
        }
    }
    let (c0, len0) = class_at(text, i);
    let with_prefix = c0.is_word_prefix().then_some(i + len0);
    let starts = [with_prefix, Some(i)];
    for start in starts.into_iter().flatten() {
        if let Some(end) = o200k_lower_word(text, start) {
            return with_contraction(end);
        }
    }
    for start in starts.into_iter().flatten() {
        if class_of(text, start).is_some_and(Class::is_o200k_upper) {
            let end = run(text, start, Class::is_o200k_upper);
            return with_contraction(end);
        }
    }
    if c0 == Class::Number {
        return numbers(text, i, digits);
    }
    if let Some(end) = symbols(text, i, c0, len0, b"\r\n/") {
        return end;
    }
    o200k_whitespace(text, i)
}

/// The old scanner's `\s*[\r\n]+|\s+(?!\S)|\s+`.
fn o200k_whitespace(text: &[u8], i: usize) -> usize {
    let (end, last_newline) = space_run(text, i);
    if let Some(nl) = last_newline {
        return nl + 1;
    }
    if end == text.len() {
        return end;
    }
    let back = end - len_before(text, end);
    if back > i {
        back
    } else {
        end
    }
}

/// The old scanner's word from `start` that begins with ASCII capitals followed by an
/// ASCII byte or the end of input, else `None`.
fn o200k_ascii_capitals(text: &[u8], start: usize) -> Option<usize> {
    let mut j = start;
    while j < text.len() && text[j].is_ascii_uppercase() {
        j += 1;
    }
    let end = match text.get(j) {
        Some(&b) if b.is_ascii_lowercase() => {
            run(text, ascii_letters(text, j, false), Class::is_o200k_lower)
        }
        Some(&b) if b >= 0x80 => return None,
        _ => j,
    };
    Some(end)
}

/// The old scanner's `U* L+` from `start`.
fn o200k_lower_word(text: &[u8], start: usize) -> Option<usize> {
    let mut pos = start;
    let mut last_shared_end = None;
    while pos < text.len() {
        let (class, len) = class_at(text, pos);
        if !class.is_o200k_upper() {
            if class == Class::Lower {
                return Some(run(text, pos, Class::is_o200k_lower));
            }
            break;
        }
        pos += len;
        if class.is_o200k_lower() {
            last_shared_end = Some(pos);
        }
    }
    last_shared_end
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` after a word.
fn with_contraction(text: &[u8], end: usize) -> usize {
    end + contraction(text, end, true).unwrap_or(0)
}
