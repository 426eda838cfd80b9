//! Hand-written pre-tokenizers, equivalent to tiktoken's split regexes.
//!
//! tiktoken splits text with a backtracking regex (fancy-regex) before byte-pair
//! merging. That regex is the slow part of tiktoken and the part that overflows its
//! stack on a million spaces. Each function here computes, in one forward pass with no
//! backtracking, the end of the piece the regex would match at a given offset — the
//! leftmost-first semantics of every alternative are spelled out next to its code.
//! Equivalence is checked against tiktoken-rs and Python tiktoken in the tests.

use super::split::RegexSplits;
use super::unicode::{class_at, len_before, Class, ASCII};

/// The split patterns: those of the encodings tiktoken ships, the open-weight families
/// that reuse them with a change or two (each scanned by hand), and any other sequence
/// of `tokenizer.json` split regexes (run by a regex engine).
#[derive(Clone, Copy, Debug)]
pub(crate) enum Family {
    /// r50k_base, p50k_base, p50k_edit (GPT-2 pattern); also `tokenizer.json`'s
    /// `ByteLevel` pre-tokenizer with its own regex.
    Gpt2,
    /// cl100k_base.
    Cl100k,
    /// Llama 3's `tokenizer.json` split (also Phi-4's): cl100k's without `\s++$`, so a
    /// final whitespace run still ends at its last newline.
    Llama3,
    /// Qwen 2's (and Qwen 3's): Llama 3's with one digit per number piece.
    Qwen2,
    /// o200k_base, o200k_harmony.
    O200k,
    /// Mistral's tekken: o200k's without contractions, one digit per number piece.
    Tekken,
    /// DeepSeek V3's three splits (also V3.1, R1 and V4); see [`super::deepseek`].
    DeepSeek,
    /// Any other sequence of split regexes, run by the regex engine.
    Regex(&'static RegexSplits),
}

impl PartialEq for Family {
    fn eq(&self, other: &Family) -> bool {
        match (self, other) {
            (Family::Regex(a), Family::Regex(b)) => std::ptr::eq(*a, *b),
            _ => std::mem::discriminant(self) == std::mem::discriminant(other),
        }
    }
}

impl Eq for Family {}

/// End (exclusive byte offset) of the piece that starts at `i`; `text` ends where the
/// regex would see the end of input. `i < text.len()` and `i` is a char boundary.
///
/// A [`Family::Regex`] is split by [`RegexSplits::for_each_piece`] instead: its pieces
/// are not found one end at a time, so here the rest of the text is one piece.
#[inline]
pub(crate) fn piece_end(family: Family, text: &[u8], i: usize) -> usize {
    match family {
        Family::Gpt2 => gpt2(text, i),
        Family::Cl100k => cl100k(text, i, true, 3),
        Family::Llama3 => cl100k(text, i, false, 3),
        Family::Qwen2 => cl100k(text, i, false, 1),
        Family::O200k => o200k(text, i, true, 3),
        Family::Tekken => o200k(text, i, false, 1),
        Family::DeepSeek => super::deepseek::piece_end(text, i),
        Family::Regex(_) => text.len(),
    }
}

/// End of the longest run of characters from `i` whose class satisfies `keep`.
#[inline]
fn run(text: &[u8], mut i: usize, keep: impl Fn(Class) -> bool) -> usize {
    while i < text.len() {
        let (class, len) = class_at(text, i);
        if !keep(class) {
            break;
        }
        i = repeats_end(text, i + len, len);
    }
    i
}

/// Longest block compared at once by [`repeats_end`].
const MAX_REPEAT_BLOCK: usize = 4096;

/// End of the repeats of the `len`-byte character that ends at `i` (`i` itself when
/// the next character is another one): a repeated character has the same class, so a
/// run of one character (a megabyte of `中`) is scanned by comparing blocks of bytes,
/// not classified character by character. Most characters are not repeated, and the
/// first-byte check sends them on at once.
#[inline]
fn repeats_end(text: &[u8], mut i: usize, len: usize) -> usize {
    if text.get(i) != Some(&text[i - len]) || text.get(i..i + len) != Some(&text[i - len..i]) {
        return i;
    }
    i += len;
    // `text[i - run..i]` is the character repeated: a block of it (whole characters)
    // equal to the bytes that follow means the run goes on by that block.
    let mut run = 2 * len;
    let most = MAX_REPEAT_BLOCK / len * len;
    loop {
        let block = run.min(most);
        match text.get(i..i + block) {
            Some(next) if next == &text[i - block..i] => {
                i += block;
                run += block;
            }
            _ => break,
        }
    }
    // Less than a block of it is left: one character at a time.
    while text.get(i..i + len) == Some(&text[i - len..i]) {
        i += len;
    }
    i
}

/// Bytes `[i, end)` that are ASCII letters (`[a-z]`, or `[A-Za-z]` when `upper`), eight
/// at a time: the end of the ASCII part of a word's letter run. Any byte that is not
/// such a letter (including every non-ASCII byte) stops it, for [`run`] to go on from.
#[inline(always)]
pub(crate) fn ascii_letters(text: &[u8], mut i: usize, upper: bool) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    let fold = if upper { 0x20 * ONES } else { 0 };
    while let Some(chunk) = text.get(i..i + 8) {
        let mut w = [0u8; 8];
        w.copy_from_slice(chunk);
        let x = u64::from_le_bytes(w);
        let folded = x | fold;
        // Per byte b < 0x80: b + 0x1F sets the high bit iff b >= b'a'; b + 0x05 iff
        // b > b'z'. Bytes with the high bit set are excluded outright.
        let at_least_a = folded.wrapping_add(0x1F * ONES);
        let above_z = folded.wrapping_add(0x05 * ONES);
        let letters = at_least_a & !above_z & !x & HIGH;
        if letters != HIGH {
            // The first byte that is not a letter. A byte below 0x80 plus 0x1F stays
            // below 0x100; only a byte of 0x80 or more (never a letter) can carry into
            // the next one, which comes after the first non-letter and is not read.
            return i + ((!letters & HIGH).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while i < text.len() {
        let b = text[i] | if upper { 0x20 } else { 0 };
        if !b.is_ascii_lowercase() || text[i] >= 0x80 {
            break;
        }
        i += 1;
    }
    i
}

/// Class of the character at `i`, or `None` at the end of input.
#[inline]
fn class_of(text: &[u8], i: usize) -> Option<Class> {
    (i < text.len()).then(|| class_at(text, i).0)
}

/// Length of a contraction (`'s 't 're 've 'm 'll 'd`) starting at `i`, if any.
///
/// Case-insensitive matching follows Unicode simple case folding, under which `ſ`
/// (U+017F LATIN SMALL LETTER LONG S) matches `s`.
#[inline]
fn contraction(text: &[u8], i: usize, ignore_case: bool) -> Option<usize> {
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

/// Extent of the whitespace run starting at `i` and the start of its last `\r`/`\n`.
#[inline]
pub(crate) fn space_run(text: &[u8], i: usize) -> (usize, Option<usize>) {
    const SPACES: u64 = u64::from_le_bytes([b' '; 8]);
    let mut end = i;
    let mut last_newline = None;
    while end < text.len() {
        // Indentation eight spaces at a time (every line of code is scanned twice
        // here: for the newline's piece, then for the indentation's).
        while let Some(word) = text.get(end..end + 8) {
            if super::bpe::word8(word, 0) != SPACES {
                break;
            }
            end += 8;
        }
        let Some(&b) = text.get(end) else {
            break;
        };
        // The common bytes of long runs first, without the class table.
        match b {
            b' ' | b'\t' => {
                end += 1;
                continue;
            }
            b'\n' | b'\r' => {
                last_newline = Some(end);
                end += 1;
                continue;
            }
            _ => {}
        }
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

/// `\s+(?!\S)` then `\s`, for a whitespace run `[i, end)` that is not followed by the
/// end of input: greedy `\s+` gives back its last character so that the lookahead sees
/// whitespace; a run of one character falls through to the single `\s`.
#[inline]
pub(crate) fn space_before_word(text: &[u8], i: usize, end: usize) -> usize {
    let back = end - len_before(text, end);
    if back > i {
        back
    } else {
        end
    }
}

/// `'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s`
fn gpt2(text: &[u8], i: usize) -> usize {
    if let Some(len) = contraction(text, i, false) {
        return i + len;
    }
    let (c0, _) = class_at(text, i);
    // ` ?X++`: the optional space is taken only if an X follows it.
    let start = if text[i] == b' ' { i + 1 } else { i };
    let next = if start > i {
        class_of(text, start)
    } else {
        Some(c0)
    };
    if let Some(c) = next {
        if c.is_letter() {
            return run(text, start, Class::is_letter);
        }
        if c == Class::Number {
            return run(text, start, |c| c == Class::Number);
        }
        if c.is_symbol() {
            return run(text, start, Class::is_symbol);
        }
    }
    // Only whitespace is left: `\s++$`, then `\s+(?!\S)`, then `\s`.
    let (end, _) = space_run(text, i);
    if end == text.len() {
        return end;
    }
    space_before_word(text, i, end)
}

/// `'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+|
/// ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s`
///
/// Without `final_run` (Llama 3, Qwen 2), the pattern has no `\s++$`: its
/// `\s*[\r\n]+|\s+(?!\S)|\s+` ends a whitespace run at its last newline even at the
/// end of the text. `digits` is the `{1,3}` bound (Qwen 2: one).
#[inline(always)]
fn cl100k(text: &[u8], i: usize, final_run: bool, digits: usize) -> usize {
    // A word of ASCII letters, alone or after one byte that may lead a word (a space,
    // `(`, `.`): a third of the pieces of text and more of code, settled in the
    // counting loop without a call.
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

/// The end of a word whose ASCII letters end at `end`: there, unless a letter outside
/// ASCII goes on with it.
#[inline(always)]
fn letters_end(text: &[u8], end: usize) -> usize {
    if text.get(end).is_some_and(|&b| b >= 0x80) {
        run(text, end, Class::is_letter)
    } else {
        end
    }
}

/// [`cl100k`] of a piece that is not an ASCII word.
#[inline(never)]
fn cl100k_general(text: &[u8], i: usize, final_run: bool, digits: usize) -> usize {
    // The pieces of most text, decided from one or two ASCII bytes: exactly what the
    // alternatives below give for them (an apostrophe may start a contraction and
    // takes the general path).
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
            None => Some(Class::Newline), // end of input: no letter follows
        };
        if let Some(c1) = c1 {
            if c0.is_word_prefix() && c1.is_letter() {
                return run(text, ascii_letters(text, i + 1, true), Class::is_letter);
            }
            // Punctuation, or a space before it (no word can start at either).
            if c0.is_symbol() || (b0 == b' ' && c1.is_symbol()) {
                if let Some(end) = symbols(text, i, c0, 1, b"\r\n") {
                    return end;
                }
            }
            // Whitespace before whitespace, a digit or the end: no word, number or
            // punctuation alternative can start here.
            if c0.is_space() && (c1.is_space() || c1 == Class::Number) {
                return cl100k_whitespace(text, i, final_run);
            }
        }
        // A newline never starts a word, number or punctuation piece.
        if c0 == Class::Newline {
            return cl100k_whitespace(text, i, final_run);
        }
    }
    if let Some(len) = contraction(text, i, true) {
        return i + len;
    }
    let (c0, len0) = class_at(text, i);
    // `[^\r\n\p{L}\p{N}]?+\p{L}++`
    if c0.is_letter() {
        return run(text, i, Class::is_letter);
    }
    if c0.is_word_prefix() && class_of(text, i + len0).is_some_and(Class::is_letter) {
        return run(text, i + len0, Class::is_letter);
    }
    // `\p{N}{1,3}+`
    if c0 == Class::Number {
        return numbers(text, i, digits);
    }
    // ` ?[^\s\p{L}\p{N}]++[\r\n]*+`
    if let Some(end) = symbols(text, i, c0, len0, b"\r\n") {
        return end;
    }
    cl100k_whitespace(text, i, final_run)
}

/// `\s++$|\s*[\r\n]|\s+(?!\S)|\s` (without `final_run`, no `\s++$`): what is left of
/// cl100k's pattern for a piece that starts with whitespace no other alternative takes.
#[inline]
fn cl100k_whitespace(text: &[u8], i: usize, final_run: bool) -> usize {
    let (end, last_newline) = space_run(text, i);
    // `\s++$`
    if final_run && end == text.len() {
        return end;
    }
    // `\s*[\r\n]`: greedy `\s*` backs off to the last newline of the run.
    if let Some(nl) = last_newline {
        return nl + 1;
    }
    // `\s+(?!\S)` is satisfied by the end of input.
    if end == text.len() {
        return end;
    }
    space_before_word(text, i, end)
}

/// `[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
/// [^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?|
/// \p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+`
///
/// Without `contractions` (tekken) the words take no `'s`; `digits` is the `{1,3}`
/// bound (tekken: one).
#[inline(always)]
fn o200k(text: &[u8], i: usize, contractions: bool, digits: usize) -> usize {
    // A word of ASCII lowercase letters, alone or after one byte that may lead a word,
    // followed by an ASCII byte that neither goes on with it nor may start a
    // contraction: the most common piece, settled in the counting loop without a call.
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

/// [`o200k`] of a piece that the word path above does not settle.
#[inline(never)]
fn o200k_general(text: &[u8], i: usize, contractions: bool, digits: usize) -> usize {
    let with_contraction = |end: usize| {
        if contractions {
            with_contraction(text, end)
        } else {
            end
        }
    };
    // The pieces of most text, decided from one or two ASCII bytes: exactly what the
    // alternatives below give for them. A lowercase word (after an optional space or
    // punctuation prefix) is `L+` at once; punctuation before a non-letter is the
    // punctuation alternative; ASCII capitals are settled by `o200k_ascii_capitals`;
    // anything next to non-ASCII takes the general path.
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
            None => Some(Class::Newline), // end of input: no letter follows
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
            // Punctuation before no letter, or a space before punctuation (no word
            // can start at either: no ASCII character is a mark).
            if (c0.is_symbol() && !c1.is_letter()) || (b0 == b' ' && c1.is_symbol()) {
                if let Some(end) = symbols(text, i, c0, 1, b"\r\n/") {
                    return end;
                }
            }
            // Whitespace before whitespace, a digit or the end: no word, number or
            // punctuation alternative can start here.
            if c0.is_space() && (c1.is_space() || c1 == Class::Number) {
                return o200k_whitespace(text, i);
            }
        }
        // A newline never starts a word, number or punctuation piece.
        if c0 == Class::Newline {
            return o200k_whitespace(text, i);
        }
    }
    let (c0, len0) = class_at(text, i);
    // The optional prefix is greedy: the word is tried after it first, then without it.
    let with_prefix = c0.is_word_prefix().then_some(i + len0);
    let starts = [with_prefix, Some(i)];
    for start in starts.into_iter().flatten() {
        if let Some(end) = o200k_lower_word(text, start) {
            return with_contraction(end);
        }
    }
    for start in starts.into_iter().flatten() {
        if class_of(text, start).is_some_and(Class::is_o200k_upper) {
            // `U+ L*`: when the first alternative failed from this start there is no
            // lower-class character after the `U` run, so `L*` matches nothing.
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

/// `\s*[\r\n]+|\s+(?!\S)|\s+`: what is left of o200k's pattern for a piece that
/// starts with whitespace no other alternative takes.
#[inline]
fn o200k_whitespace(text: &[u8], i: usize) -> usize {
    let (end, last_newline) = space_run(text, i);
    // `\s*[\r\n]+`: the match ends right after the last newline of the run.
    if let Some(nl) = last_newline {
        return nl + 1;
    }
    // `\s+(?!\S)` is satisfied by the end of input; otherwise it gives back a character.
    if end == text.len() {
        return end;
    }
    space_before_word(text, i, end)
}

/// o200k's word from `start` when it begins with ASCII capitals followed by an ASCII
/// byte or the end of input, else `None` (for the general code). After `[A-Z]+` the
/// `U` run can only go on with non-ASCII characters, so: a lowercase letter next makes
/// it `U+ L+` (the first alternative); anything else leaves `U+` with no `L` in it, so
/// the first alternative fails and the second takes the capitals alone. The word's
/// contraction, if the family has them, is the caller's to add.
#[inline]
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

/// `U* L+` from `start`, where `U = [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]` and
/// `L = [\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
///
/// Greedy `U*` takes the whole `U` run `[start, u)`. If the character at `u` is in `L`
/// (it can only be `Ll`), `L+` continues from there. Otherwise `U*` backs off to the
/// rightmost character of its run that is also in `L` (`Lm Lo M`), and `L+` takes just
/// that one character, because everything after it up to `u` is `Lu Lt`.
#[inline]
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
        pos = repeats_end(text, pos + len, len);
        if class.is_o200k_lower() {
            last_shared_end = Some(pos);
        }
    }
    last_shared_end
}

/// `(?i:'s|'t|'re|'ve|'m|'ll|'d)?` after a word.
#[inline]
fn with_contraction(text: &[u8], end: usize) -> usize {
    end + contraction(text, end, true).unwrap_or(0)
}

/// `\p{N}{1,digits}`
#[inline]
fn numbers(text: &[u8], i: usize, digits: usize) -> usize {
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
#[inline]
fn symbols(text: &[u8], i: usize, c0: Class, len0: usize, tail: &[u8]) -> Option<usize> {
    let start = if c0.is_symbol() {
        i
    } else if text[i] == b' ' && class_of(text, i + len0).is_some_and(Class::is_symbol) {
        i + len0
    } else {
        return None;
    };
    // ASCII punctuation a byte at a time (code is full of it); a character outside
    // ASCII goes on with the general run.
    let mut end = start;
    while let Some(&b) = text.get(end) {
        if b >= 0x80 || !ASCII[usize::from(b)].is_symbol() {
            break;
        }
        end += 1;
    }
    if text.get(end).is_some_and(|&b| b >= 0x80) {
        end = run(text, end, Class::is_symbol);
    }
    while end < text.len() && tail.contains(&text[end]) {
        end += 1;
    }
    Some(end)
}

/// Iterator over the pieces of `text`, as byte ranges.
#[cfg(test)]
pub(crate) fn pieces(family: Family, text: &str) -> impl Iterator<Item = (usize, usize)> + '_ {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || {
        if i >= bytes.len() {
            return None;
        }
        let start = i;
        i = piece_end(family, bytes, i);
        Some((start, i))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn split(family: Family, text: &str) -> Vec<&str> {
        pieces(family, text).map(|(a, b)| &text[a..b]).collect()
    }

    /// The word-at-a-time letter scan ends where a byte-by-byte scan does.
    #[test]
    fn ascii_letters_ends_where_a_byte_scan_does() {
        let alphabet: Vec<u8> = (0u8..=255).collect();
        let mut seed = 0x2545_f491_4f6c_dd1du64;
        for _ in 0..20_000 {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            let len = (seed % 24) as usize;
            // Mostly letters, now and then any byte (the scan reads bytes, not text).
            let text: Vec<u8> = (0..len)
                .map(|k| {
                    let r = (seed >> (k % 8 * 8)) as usize ^ (k * 31);
                    if r.is_multiple_of(7) {
                        alphabet[r % 256]
                    } else {
                        b"azAZmqMQ"[r % 8]
                    }
                })
                .collect();
            for upper in [false, true] {
                for start in 0..=text.len() {
                    let expected = start
                        + text[start..]
                            .iter()
                            .take_while(|&&b| {
                                b.is_ascii_lowercase() || (upper && b.is_ascii_uppercase())
                            })
                            .count();
                    assert_eq!(
                        ascii_letters(&text, start, upper),
                        expected,
                        "{text:?} from {start}, upper {upper}"
                    );
                }
            }
        }
    }

    #[test]
    fn cl100k_examples() {
        let f = Family::Cl100k;
        assert_eq!(split(f, "Hello world"), ["Hello", " world"]);
        assert_eq!(
            split(f, "it's   done\n\n  x"),
            ["it", "'s", "  ", " done", "\n\n", " ", " x"]
        );
        assert_eq!(split(f, "a  \n "), ["a", "  \n "]);
        assert_eq!(split(f, "12345"), ["123", "45"]);
        assert_eq!(split(f, "x!!\n\ny"), ["x", "!!\n\n", "y"]);
        assert_eq!(split(f, "'ſ"), ["'ſ"]);
    }

    #[test]
    fn o200k_examples() {
        let f = Family::O200k;
        assert_eq!(split(f, "HelloWorld"), ["Hello", "World"]);
        assert_eq!(split(f, "ABCdef"), ["ABCdef"]);
        assert_eq!(split(f, "ABC def"), ["ABC", " def"]);
        assert_eq!(split(f, "don't"), ["don't"]);
        assert_eq!(split(f, "a  \n "), ["a", "  \n", " "]);
        assert_eq!(split(f, "x!\n/y"), ["x", "!\n/", "y"]);
    }

    #[test]
    fn gpt2_examples() {
        let f = Family::Gpt2;
        assert_eq!(split(f, "Hello world 123"), ["Hello", " world", " 123"]);
        assert_eq!(split(f, "a\n\n b"), ["a", "\n\n", " b"]);
        assert_eq!(split(f, "  "), ["  "]);
    }
}
