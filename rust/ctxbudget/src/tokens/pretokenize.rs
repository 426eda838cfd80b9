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
    // A word of ASCII letters, alone or after one byte that may lead it (a space,
    // `(`, `.`; not an apostrophe, which may start a contraction): a third of the
    // pieces of text and more of code, settled in the counting loop without a call.
    let k0 = KIND[usize::from(text[i])];
    if k0 == LETTER {
        return letters_end(text, ascii_letters(text, i, true));
    }
    let k1 = kind_at(text, i + 1);
    if k0 & (SPACE | BLANK | PUNCT) != 0 && k1 == LETTER {
        return letters_end(text, ascii_letters(text, i + 1, true));
    }
    // ASCII punctuation, alone or after a space, before anything but a letter or a
    // character outside ASCII: the other common piece of code.
    if k0 == PUNCT && k1 != HIGH {
        return ascii_symbols(text, i + 1, b"\r\n");
    }
    if k0 == SPACE && k1 & (PUNCT | QUOTE) != 0 {
        return ascii_symbols(text, i + 2, b"\r\n");
    }
    if k0 == SPACE && k1 == SPACE {
        if let Some(end) = indentation_end(text, i) {
            return end;
        }
    }
    if k0 == DIGIT {
        return ascii_numbers(text, i, digits);
    }
    cl100k_general(text, i, final_run, digits)
}

/// Kind of a byte for the ASCII fast paths of cl100k and o200k: one bit each, so that
/// a set of kinds is one mask test. An ASCII letter.
const LETTER: u8 = 1;
/// An ASCII digit.
const DIGIT: u8 = 1 << 1;
/// The space ` `: the only whitespace that may lead a punctuation piece.
const SPACE: u8 = 1 << 2;
/// `\t`, `\x0B`, `\x0C`: whitespace that leads a word but not punctuation.
const BLANK: u8 = 1 << 3;
/// `\r` or `\n`.
const NEWLINE: u8 = 1 << 4;
/// ASCII punctuation, symbols and controls, but the apostrophe.
const PUNCT: u8 = 1 << 5;
/// The apostrophe, which may start a contraction.
const QUOTE: u8 = 1 << 6;
/// A byte of a character outside ASCII: the general code classifies it.
const HIGH: u8 = 1 << 7;
/// The "byte" after the end of the text ([`kind_at`]).
const END: u8 = 0;

/// [`LETTER`], [`DIGIT`], ... of every byte value, for the ASCII fast paths of
/// [`cl100k`] and [`o200k`].
static KIND: [u8; 256] = {
    let mut kinds = [HIGH; 256];
    let mut b = 0;
    while b < 128 {
        kinds[b] = match ASCII[b] {
            Class::Upper | Class::Lower | Class::Caseless => LETTER,
            Class::Number => DIGIT,
            Class::Newline => NEWLINE,
            Class::Space if b == b' ' as usize => SPACE,
            Class::Space => BLANK,
            _ if b == b'\'' as usize => QUOTE,
            _ => PUNCT,
        };
        b += 1;
    }
    kinds
};

/// Kind of the byte at `i`, [`END`] past the end of `text`.
#[inline(always)]
fn kind_at(text: &[u8], i: usize) -> u8 {
    text.get(i).map_or(END, |&b| KIND[usize::from(b)])
}

/// The end of a word whose ASCII letters end at `end`: there, unless a letter outside
/// ASCII goes on with it.
#[inline(always)]
fn letters_end(text: &[u8], end: usize) -> usize {
    if text.get(end).is_some_and(|&b| b >= 0x80) {
        letters_beyond_ascii(text, end)
    } else {
        end
    }
}

/// The letter run from `end`, where a character outside ASCII comes: out of line, as
/// it is rare in code and its loop would cost the common paths registers.
#[inline(never)]
fn letters_beyond_ascii(text: &[u8], end: usize) -> usize {
    run(text, end, Class::is_letter)
}

/// [`cl100k`] of a piece that is not an ASCII word.
#[inline(never)]
fn cl100k_general(text: &[u8], i: usize, final_run: bool, digits: usize) -> usize {
    // The pieces of most text, decided from the kinds of their first two bytes: exactly
    // what the alternatives below give for them. A byte outside ASCII next to the
    // start takes the general code (it may be a letter, a mark or whitespace).
    let k1 = kind_at(text, i + 1);
    match KIND[usize::from(text[i])] {
        LETTER => return letters_end(text, ascii_letters(text, i, true)),
        DIGIT => return ascii_numbers(text, i, digits),
        // A newline leads neither a word nor punctuation. A line's newline before
        // its indentation, then the indentation, are the commonest runs of code:
        // settled by a scan of their spaces alone.
        NEWLINE if text[i] == b'\n' => {
            let end = spaces_end(text, i + 1);
            let k = kind_at(text, end);
            if k & (LETTER | DIGIT | PUNCT | QUOTE) != 0 || (k == END && !final_run) {
                // `\s*[\r\n]` backs off to this newline, the run's only one.
                return i + 1;
            }
            if k == END {
                return end; // `\s++$`
            }
            return cl100k_other(text, i, final_run, digits);
        }
        NEWLINE => return cl100k_other(text, i, final_run, digits),
        kind @ (PUNCT | QUOTE) => {
            if kind == QUOTE {
                if let Some(len) = contraction(text, i, true) {
                    return i + len;
                }
            }
            if k1 == LETTER {
                return letters_end(text, ascii_letters(text, i + 1, true));
            }
            if k1 != HIGH {
                return ascii_symbols(text, i + 1, b"\r\n");
            }
        }
        kind @ (SPACE | BLANK) => {
            if k1 == LETTER {
                return letters_end(text, ascii_letters(text, i + 1, true));
            }
            // ` ?[^\s\p{L}\p{N}]++`: only a space may lead punctuation.
            if kind == SPACE && k1 & (PUNCT | QUOTE) != 0 {
                return ascii_symbols(text, i + 2, b"\r\n");
            }
            // One whitespace character before a digit, punctuation or the end: `\s`
            // (or `\s++$`), as no longer run of whitespace starts here.
            if k1 & (DIGIT | PUNCT | QUOTE) != 0 || k1 == END {
                return i + 1;
            }
            if kind == SPACE && k1 == SPACE {
                let end = spaces_end(text, i + 2);
                let k = kind_at(text, end);
                if k & (LETTER | DIGIT | PUNCT | QUOTE) != 0 {
                    // `\s+(?!\S)` gives back the last of two or more spaces.
                    return end - 1;
                }
                if k == END {
                    return end; // `\s++$`, or `\s+(?!\S)` at the end of the text
                }
            }
            if k1 & (SPACE | BLANK | NEWLINE) != 0 {
                return cl100k_other(text, i, final_run, digits);
            }
        }
        _ => {}
    }
    cl100k_other(text, i, final_run, digits)
}

/// [`cl100k`] of a piece that the first two bytes do not decide: next to a character
/// outside ASCII, or a run of whitespace with more than spaces in it. Kept out of
/// [`cl100k_general`] so that its common paths need few registers.
#[inline(never)]
fn cl100k_other(text: &[u8], i: usize, final_run: bool, digits: usize) -> usize {
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

/// The end of the piece of indentation from `i` (two spaces or more) before a line's
/// first word, number or punctuation: `\s+(?!\S)` gives back the last of its spaces.
/// `None` when the spaces are followed by anything else.
#[inline(always)]
fn indentation_end(text: &[u8], i: usize) -> Option<usize> {
    let end = spaces_end(text, i + 2);
    (kind_at(text, end) & (LETTER | DIGIT | PUNCT | QUOTE) != 0).then(|| end - 1)
}

/// End of the spaces (` ` only) from `i`, eight at a time.
#[inline(always)]
fn spaces_end(text: &[u8], mut i: usize) -> usize {
    const SPACES: u64 = u64::from_le_bytes([b' '; 8]);
    while let Some(word) = text.get(i..i + 8) {
        let x = super::bpe::word8(word, 0) ^ SPACES;
        if x != 0 {
            // The first byte that differs from a space.
            return i + (x.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while text.get(i) == Some(&b' ') {
        i += 1;
    }
    i
}

/// `\p{N}{1,digits}` from an ASCII digit at `i`: ASCII digits a byte at a time, and the
/// general [`numbers`] for the rest of the count if a character outside ASCII follows.
#[inline(always)]
fn ascii_numbers(text: &[u8], i: usize, digits: usize) -> usize {
    let limit = (i + digits).min(text.len());
    let mut end = i + 1;
    while end < limit && text[end].is_ascii_digit() {
        end += 1;
    }
    if end < limit && text[end] >= 0x80 {
        return numbers_beyond_ascii(text, end, digits - (end - i));
    }
    end
}

/// [`numbers`] out of line, for the digits outside ASCII after ASCII ones (rare, and
/// its loop would cost the common paths registers).
#[inline(never)]
fn numbers_beyond_ascii(text: &[u8], i: usize, digits: usize) -> usize {
    numbers(text, i, digits)
}

/// The punctuation run from `end`, where a character outside ASCII comes (out of line,
/// as [`letters_beyond_ascii`]).
#[inline(never)]
fn symbols_beyond_ascii(text: &[u8], end: usize) -> usize {
    run(text, end, Class::is_symbol)
}

/// `[^\s\p{L}\p{N}]*+` and then any of the bytes `tail` (cl100k: `[\r\n]*+`,
/// o200k: `[\r\n/]*`) from `j`, the rest of a punctuation piece whose first character
/// ends at `j`.
#[inline(always)]
fn ascii_symbols(text: &[u8], j: usize, tail: &[u8]) -> usize {
    // ASCII punctuation a byte at a time (code is full of it); a character outside
    // ASCII goes on with the general run.
    let mut end = j;
    let mut kind = kind_at(text, end);
    while kind & (PUNCT | QUOTE) != 0 {
        end += 1;
        kind = kind_at(text, end);
    }
    if kind == HIGH {
        end = symbols_beyond_ascii(text, end);
    }
    while text.get(end).is_some_and(|b| tail.contains(b)) {
        end += 1;
    }
    end
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
    // A word of ASCII letters, alone or after one byte that may lead it (any byte but a
    // letter, a digit or a newline; the apostrophe too, as o200k's contractions only
    // end words): the most common piece, settled in the counting loop without a call.
    let k0 = KIND[usize::from(text[i])];
    let k1 = kind_at(text, i + 1);
    let word = if k0 == LETTER {
        Some(i)
    } else if k0 & (SPACE | BLANK | PUNCT | QUOTE) != 0 && k1 == LETTER {
        Some(i + 1)
    } else {
        None
    };
    if let Some(start) = word {
        if let Some(end) = o200k_ascii_word(text, start) {
            return match text.get(end) {
                Some(&b'\'') if contractions => with_contraction(text, end),
                _ => end,
            };
        }
        return o200k_general(text, i, contractions, digits);
    }
    // ASCII punctuation, alone or after a space, before anything but a letter or a
    // character outside ASCII: the other common piece of code.
    if k0 & (PUNCT | QUOTE) != 0 && k1 != HIGH {
        return ascii_symbols(text, i + 1, b"\r\n/");
    }
    if k0 == SPACE && k1 & (PUNCT | QUOTE) != 0 {
        return ascii_symbols(text, i + 2, b"\r\n/");
    }
    if k0 == SPACE && k1 == SPACE {
        if let Some(end) = indentation_end(text, i) {
            return end;
        }
    }
    // A line's newline before its indentation and the line's first word, number or
    // punctuation (or before the end): `\s*[\r\n]+` backs off to this newline, the
    // run's only one. Settled by a scan of the spaces alone.
    if text[i] == b'\n' {
        let end = spaces_end(text, i + 1);
        let k = kind_at(text, end);
        if k & (LETTER | DIGIT | PUNCT | QUOTE) != 0 || k == END {
            return i + 1;
        }
    }
    if k0 == DIGIT {
        return ascii_numbers(text, i, digits);
    }
    o200k_general(text, i, contractions, digits)
}

/// End of o200k's word (`U* L+` or `U+ L*`) of ASCII letters from `start`, an ASCII
/// letter, when the byte after it is ASCII or the end of input; `None` when a
/// character outside ASCII follows (it may go on with the word), for the general code.
/// Capitals then small letters are one word (`HTTPServer`: `U*` takes `HTTPS`); small
/// letters end at a capital (`camelCase`), as no capital is in `L`. The contraction,
/// if the family has them, is the caller's to add.
#[inline(always)]
fn o200k_ascii_word(text: &[u8], start: usize) -> Option<usize> {
    let mut j = start;
    while text.get(j).is_some_and(u8::is_ascii_uppercase) {
        j += 1;
    }
    let end = ascii_letters(text, j, false);
    match text.get(end) {
        Some(&b) if b >= 0x80 => None,
        _ => Some(end),
    }
}

/// [`o200k`] of a piece that its fast paths do not settle (out of line, so that they
/// save few registers).
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

    /// The three flag sets of [`cl100k`]: cl100k itself, Llama 3, Qwen 2.
    const CL100K_FLAGS: [(bool, usize); 3] = [(true, 3), (false, 3), (false, 1)];

    /// Every piece end of [`cl100k`] from every character boundary of `text` is the
    /// frozen reference scanner's.
    fn assert_cl100k_like_reference(text: &str) {
        let bytes = text.as_bytes();
        for (final_run, digits) in CL100K_FLAGS {
            for (i, _) in text.char_indices() {
                assert_eq!(
                    cl100k(bytes, i, final_run, digits),
                    super::super::cl100k_reference::cl100k(bytes, i, final_run, digits),
                    "{text:?} from {i}, final_run {final_run}, digits {digits}"
                );
            }
        }
    }

    /// `check`s 30,000 random strings of up to 15 of `parts`, then every part repeated
    /// 40 times before each of `tails` (runs of one kind, and of one kind before
    /// another).
    fn for_random_texts(parts: &[&str], tails: &[&str], check: fn(&str)) {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut text = String::new();
        for _ in 0..30_000 {
            text.clear();
            let len = next() % 16;
            for _ in 0..len {
                text.push_str(parts[(next() % parts.len() as u64) as usize]);
            }
            check(&text);
        }
        for part in parts {
            for tail in tails {
                check(&format!("{}{tail}", part.repeat(40)));
            }
        }
    }

    /// Random strings made of the characters that decide cl100k's pieces: ASCII of
    /// every kind, contractions in both cases, and letters, digits, marks and
    /// whitespace from outside ASCII.
    #[test]
    fn cl100k_ends_where_the_reference_does_on_random_text() {
        const PARTS: &[&str] = &[
            "a", "Z", "q", "xyz", "Hello", "0", "7", "123", "4567", " ", "  ", "        ", "\t",
            "\x0b", "\x0c", "\r", "\n", "\r\n", "\n    ", "'", "'s", "'S", "'t", "'T", "'re",
            "'RE", "'ve", "'Ve", "'m", "'M", "'ll", "'LL", "'d", "'D", "'ſ", "'l", "'r", "'v", "(",
            ")", ".", ",", ":", "#", "\"", "=", "_", "-", "!", "\\", "\0", "\x7f", "é", "中", "٣",
            "\u{0301}", "\u{00a0}", "\u{2028}", "\u{3000}", "\u{85}", "ſ", "😀", "Ⅻ", "ǅ", "¿",
            "—",
        ];
        for_random_texts(
            PARTS,
            &["", "x", "1", " ", "\n", "!", "é"],
            assert_cl100k_like_reference,
        );
    }

    /// The same on real code: Python's standard library, if a Python is at hand.
    #[test]
    fn cl100k_ends_where_the_reference_does_on_python_source() {
        for text in python_sources() {
            assert_cl100k_like_reference(&text);
        }
    }

    /// The two flag sets of [`o200k`]: o200k itself, and tekken.
    const O200K_FLAGS: [(bool, usize); 2] = [(true, 3), (false, 1)];

    /// Every piece end of [`o200k`] from every character boundary of `text` is the
    /// frozen reference scanner's.
    fn assert_o200k_like_reference(text: &str) {
        let bytes = text.as_bytes();
        for (contractions, digits) in O200K_FLAGS {
            for (i, _) in text.char_indices() {
                assert_eq!(
                    o200k(bytes, i, contractions, digits),
                    super::super::o200k_reference::o200k(bytes, i, contractions, digits),
                    "{text:?} from {i}, contractions {contractions}, digits {digits}"
                );
            }
        }
    }

    /// Random strings made of the characters that decide o200k's pieces: ASCII of every
    /// kind (`/` and newlines after punctuation), words in every mix of cases,
    /// contractions in both cases, and letters of every case class, marks, digits and
    /// whitespace from outside ASCII.
    #[test]
    fn o200k_ends_where_the_reference_does_on_random_text() {
        const PARTS: &[&str] = &[
            "a",
            "Z",
            "q",
            "xyz",
            "Hello",
            "camelCase",
            "ABC",
            "HTTPServer",
            "aB",
            "Ab",
            "0",
            "7",
            "123",
            "4567",
            " ",
            "  ",
            "        ",
            "\t",
            "\x0b",
            "\x0c",
            "\r",
            "\n",
            "\r\n",
            "\n    ",
            "\r\n\r\n",
            "'",
            "'s",
            "'S",
            "'t",
            "'T",
            "'re",
            "'RE",
            "'ve",
            "'Ve",
            "'m",
            "'M",
            "'ll",
            "'LL",
            "'d",
            "'D",
            "'ſ",
            "'l",
            "'r",
            "'v",
            "(",
            ")",
            ".",
            ",",
            ":",
            "#",
            "/",
            "//",
            "\"",
            "=",
            "_",
            "-",
            "!",
            "\\",
            "\0",
            "\x7f",
            "é",
            "É",
            "ǅ",
            "ʰ",
            "中",
            "٣",
            "\u{0301}",
            "\u{00a0}",
            "\u{2028}",
            "\u{3000}",
            "\u{85}",
            "ſ",
            "😀",
            "Ⅻ",
            "¿",
            "—",
        ];
        for_random_texts(
            PARTS,
            &["", "x", "X", "1", " ", "\n", "!", "/", "'s", "é", "É"],
            assert_o200k_like_reference,
        );
    }

    /// The same on real code: Python's standard library, if a Python is at hand.
    #[test]
    fn o200k_ends_where_the_reference_does_on_python_source() {
        for text in python_sources() {
            assert_o200k_like_reference(&text);
        }
    }

    /// Some of the `.py` files of Python's standard library, if a Python is at hand.
    fn python_sources() -> Vec<String> {
        let Ok(out) = std::process::Command::new("python3")
            .args([
                "-c",
                "import sysconfig;print(sysconfig.get_paths()['stdlib'])",
            ])
            .output()
        else {
            return Vec::new();
        };
        let dir = String::from_utf8_lossy(&out.stdout).trim().to_owned();
        let Ok(entries) = std::fs::read_dir(&dir) else {
            return Vec::new();
        };
        let mut paths: Vec<_> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "py"))
            .collect();
        paths.sort();
        paths
            .iter()
            .step_by(8)
            .take(40)
            .filter_map(|path| std::fs::read_to_string(path).ok())
            .collect()
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
