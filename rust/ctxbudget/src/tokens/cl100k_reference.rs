//! A frozen copy of cl100k's scanner as it was before its ASCII fast path was
//! rewritten (test-only): the differential tests compare every piece end of the
//! scanner in use with this one, so a changed boundary fails them.
//!
//! Kept self-contained (its own copies of the helpers it used, which the frozen o200k
//! scanner uses too) so that later changes to the shared helpers
//! cannot move the reference along with them.

use super::unicode::{class_at, len_before, Class, ASCII};

/// End of the piece that starts at `i`, as the old scanner found it.
pub(crate) fn cl100k(text: &[u8], i: usize, final_run: bool, digits: usize) -> usize {
    let b0 = text[i];
    if b0 < 0x80 && b0 != b'\'' {
        let c0 = ASCII[usize::from(b0)];
        if c0.is_letter() {
            return letters_end(text, ascii_letters(text, i, true));
        }
        if let Some(&b1) = text.get(i + 1) {
            if b1 < 0x80 && c0.is_word_prefix() && ASCII[usize::from(b1)].is_letter() {
                return letters_end(text, ascii_letters(text, i + 1, true));
            }
        }
    }
    cl100k_general(text, i, final_run, digits)
}

/// The end of a word whose ASCII letters end at `end`.
fn letters_end(text: &[u8], end: usize) -> usize {
    if text.get(end).is_some_and(|&b| b >= 0x80) {
        run(text, end, Class::is_letter)
    } else {
        end
    }
}

/// The old scanner's piece that is not an ASCII word.
fn cl100k_general(text: &[u8], i: usize, final_run: bool, digits: usize) -> usize {
    let b0 = text[i];
    if b0 < 0x80 && b0 != b'\'' {
        let c0 = ASCII[usize::from(b0)];
        if c0.is_letter() {
            return run(text, ascii_letters(text, i, true), Class::is_letter);
        }
        if c0 == Class::Number {
            return numbers(text, i, digits);
        }
        let c1 = match text.get(i + 1) {
            Some(&b1) if b1 < 0x80 => Some(ASCII[usize::from(b1)]),
            Some(_) => None,
            None => Some(Class::Newline),
        };
        if let Some(c1) = c1 {
            if c0.is_word_prefix() && c1.is_letter() {
                return run(text, ascii_letters(text, i + 1, true), Class::is_letter);
            }
            if c0.is_symbol() || (b0 == b' ' && c1.is_symbol()) {
                if let Some(end) = symbols(text, i, c0, 1, b"\r\n") {
                    return end;
                }
            }
            if c0.is_space() && (c1.is_space() || c1 == Class::Number) {
                return cl100k_whitespace(text, i, final_run);
            }
        }
        if c0 == Class::Newline {
            return cl100k_whitespace(text, i, final_run);
        }
    }
    if let Some(len) = contraction(text, i, true) {
        return i + len;
    }
    let (c0, len0) = class_at(text, i);
    if c0.is_letter() {
        return run(text, i, Class::is_letter);
    }
    if c0.is_word_prefix() && class_of(text, i + len0).is_some_and(Class::is_letter) {
        return run(text, i + len0, Class::is_letter);
    }
    if c0 == Class::Number {
        return numbers(text, i, digits);
    }
    if let Some(end) = symbols(text, i, c0, len0, b"\r\n") {
        return end;
    }
    cl100k_whitespace(text, i, final_run)
}

/// The old scanner's whitespace alternatives.
fn cl100k_whitespace(text: &[u8], i: usize, final_run: bool) -> usize {
    let (end, last_newline) = space_run(text, i);
    if final_run && end == text.len() {
        return end;
    }
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

/// Longest run of characters from `i` whose class satisfies `keep`, one at a time.
pub(super) fn run(text: &[u8], mut i: usize, keep: impl Fn(Class) -> bool) -> usize {
    while i < text.len() {
        let (class, len) = class_at(text, i);
        if !keep(class) {
            break;
        }
        i += len;
    }
    i
}

/// ASCII letters from `i`, a byte at a time.
pub(super) fn ascii_letters(text: &[u8], mut i: usize, upper: bool) -> usize {
    while i < text.len()
        && (text[i].is_ascii_lowercase() || (upper && text[i].is_ascii_uppercase()))
    {
        i += 1;
    }
    i
}

/// Class of the character at `i`, or `None` at the end of input.
pub(super) fn class_of(text: &[u8], i: usize) -> Option<Class> {
    (i < text.len()).then(|| class_at(text, i).0)
}

/// Length of a contraction starting at `i`, if any.
pub(super) fn contraction(text: &[u8], i: usize, ignore_case: bool) -> Option<usize> {
    if text.get(i) != Some(&b'\'') {
        return None;
    }
    let fold = |b: u8| {
        if ignore_case {
            b.to_ascii_lowercase()
        } else {
            b
        }
    };
    let at = |k: usize| text.get(i + k).copied().map(fold);
    match at(1)? {
        b's' | b'd' | b'm' | b't' => Some(2),
        b'l' if at(2) == Some(b'l') => Some(3),
        b'v' | b'r' if at(2) == Some(b'e') => Some(3),
        0xC5 if ignore_case && text.get(i + 2) == Some(&0xBF) => Some(3),
        _ => None,
    }
}

/// Extent of the whitespace run starting at `i` and the start of its last newline.
pub(super) fn space_run(text: &[u8], i: usize) -> (usize, Option<usize>) {
    let mut end = i;
    let mut last_newline = None;
    while end < text.len() {
        let (class, len) = class_at(text, end);
        match class {
            Class::Newline => last_newline = Some(end),
            Class::Space => {}
            _ => break,
        }
        end += len;
    }
    (end, last_newline)
}

/// `\p{N}{1,digits}`
pub(super) fn numbers(text: &[u8], i: usize, digits: usize) -> usize {
    let mut end = i;
    for _ in 0..digits {
        match (end < text.len()).then(|| class_at(text, end)) {
            Some((Class::Number, len)) => end += len,
            _ => break,
        }
    }
    end
}

/// ` ?[^\s\p{L}\p{N}]+[tail]*`, if it matches at `i`.
pub(super) fn symbols(text: &[u8], i: usize, c0: Class, len0: usize, tail: &[u8]) -> Option<usize> {
    let start = if c0.is_symbol() {
        i
    } else if text[i] == b' ' && class_of(text, i + len0).is_some_and(Class::is_symbol) {
        i + len0
    } else {
        return None;
    };
    let end = run(text, start, Class::is_symbol);
    let mut end = end;
    while end < text.len() && tail.contains(&text[end]) {
        end += 1;
    }
    Some(end)
}
