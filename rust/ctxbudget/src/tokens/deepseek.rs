//! The pre-tokenizer of DeepSeek V3's `tokenizer.json` (also V3.1, R1 and V4), scanned
//! by hand instead of by three regexes.
//!
//! The file splits text with three `Split` regexes in turn, each keeping its matches
//! and the text between them as pieces ("Isolated"):
//!
//! 1. `\p{N}{1,3}`: numbers, in pieces of up to three digits;
//! 2. `[一-龥぀-ゟ゠-ヿ]+`: runs of CJK ideographs (U+4E00–U+9FA5), hiragana and katakana;
//! 3. ``[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+|
//!    ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+``, over each piece the first two
//!    left.
//!
//! So the third regex runs over *inputs* that end where a digit starts or where the
//! text goes into or out of a CJK run: its lookahead `(?!\S)` sees the end of such an
//! input as the end of text, and no piece crosses one. [`piece_end`] finds, in one
//! forward pass, the end of the piece that starts at a given offset; each alternative's
//! leftmost-first semantics are spelled out next to its code. The tests check it
//! against the three regexes run by the regex engine ([`super::split::RegexSplits`]),
//! which the oracle tests check against HuggingFace `tokenizers`.

use std::sync::OnceLock;

use super::pretokenize::{ascii_letters, space_before_word, space_run};
use super::unicode::{class_at, Class, ASCII};

/// The three split patterns, exactly as DeepSeek's `tokenizer.json` spells them.
pub(crate) const PATTERNS: [&str; 3] = [
    r"\p{N}{1,3}",
    "[\u{4e00}-\u{9fa5}\u{3040}-\u{309f}\u{30a0}-\u{30ff}]+",
    "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+| ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+",
];

/// What the third pattern asks of a character.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    /// `\r` or `\n`.
    Newline,
    /// Any other `\s`.
    Space,
    /// `\p{L}`.
    Letter,
    /// `\p{M}`.
    Mark,
    /// `\p{N}`: never inside an input of the third pattern (the first isolates them).
    Number,
    /// `[\p{P}\p{S}]`.
    Punct,
    /// Anything else: controls, format characters, unassigned and private-use code
    /// points.
    Other,
}

impl Kind {
    /// `\s`.
    fn is_space(self) -> bool {
        matches!(self, Kind::Newline | Kind::Space)
    }

    /// `[\p{L}\p{M}]`.
    fn is_word(self) -> bool {
        matches!(self, Kind::Letter | Kind::Mark)
    }

    /// `[^\r\n\p{L}\p{P}\p{S}]`: the optional first character of a word.
    fn is_word_prefix(self) -> bool {
        matches!(self, Kind::Space | Kind::Mark | Kind::Number | Kind::Other)
    }
}

/// Ranges of `[\p{P}\p{S}]` outside ASCII, sorted, from `regex-syntax` (the Unicode
/// version of the regex engine the other scanners and the regex path follow).
fn punct_ranges() -> &'static [(u32, u32)] {
    static RANGES: OnceLock<Vec<(u32, u32)>> = OnceLock::new();
    RANGES.get_or_init(|| {
        use regex_syntax::hir::{Class as HirClass, HirKind};
        let Ok(hir) = regex_syntax::Parser::new().parse(r"[\p{P}\p{S}]") else {
            return Vec::new();
        };
        match hir.kind() {
            HirKind::Class(HirClass::Unicode(cls)) => cls
                .ranges()
                .iter()
                .map(|r| (u32::from(r.start()), u32::from(r.end())))
                .collect(),
            _ => Vec::new(),
        }
    })
}

/// Whether the code point `cp` is in `[\p{P}\p{S}]`.
fn is_punct(cp: u32) -> bool {
    let ranges = punct_ranges();
    let k = ranges.partition_point(|&(_, end)| end < cp);
    ranges.get(k).is_some_and(|&(start, _)| start <= cp)
}

/// Whether the code point `cp` is in the second pattern's CJK ranges.
fn is_cjk(cp: u32) -> bool {
    matches!(cp, 0x4E00..=0x9FA5 | 0x3040..=0x309F | 0x30A0..=0x30FF)
}

/// The code point of the non-ASCII character at `i`, whose UTF-8 length is `len`.
fn code_point(text: &[u8], i: usize, len: usize) -> u32 {
    let b0 = u32::from(text[i]);
    let cont = |k: usize| u32::from(text[i + k] & 0x3F);
    match len {
        2 => (b0 & 0x1F) << 6 | cont(1),
        3 => (b0 & 0x0F) << 12 | cont(1) << 6 | cont(2),
        _ => (b0 & 0x07) << 18 | cont(1) << 12 | cont(2) << 6 | cont(3),
    }
}

/// The kind of each ASCII character, from the classes of [`ASCII`]: every printable
/// one those call `Other` is punctuation or a symbol, the rest are controls.
const ASCII_KINDS: [Kind; 128] = {
    let mut kinds = [Kind::Other; 128];
    let mut b = 0;
    while b < 128 {
        kinds[b] = match ASCII[b] {
            Class::Newline => Kind::Newline,
            Class::Space => Kind::Space,
            Class::Upper | Class::Lower | Class::Caseless => Kind::Letter,
            Class::Mark => Kind::Mark,
            Class::Number => Kind::Number,
            Class::Other if matches!(b, 0x21..=0x7E) => Kind::Punct,
            Class::Other => Kind::Other,
        };
        b += 1;
    }
    kinds
};

/// The kind of the character at `i`, its UTF-8 length and whether it is in the CJK
/// ranges.
#[inline(always)]
fn kind_at(text: &[u8], i: usize) -> (Kind, usize, bool) {
    let b0 = text[i];
    if b0 < 0x80 {
        return (ASCII_KINDS[usize::from(b0)], 1, false);
    }
    kind_at_non_ascii(text, i)
}

/// [`kind_at`] for a character that is not ASCII.
#[inline(never)]
fn kind_at_non_ascii(text: &[u8], i: usize) -> (Kind, usize, bool) {
    let b0 = text[i];
    let (class, len) = class_at(text, i);
    let kind = match class {
        Class::Newline => Kind::Newline,
        Class::Space => Kind::Space,
        Class::Upper | Class::Lower | Class::Caseless => Kind::Letter,
        Class::Mark => Kind::Mark,
        Class::Number => Kind::Number,
        Class::Other => {
            if is_punct(code_point(text, i, len)) {
                Kind::Punct
            } else {
                Kind::Other
            }
        }
    };
    let cjk = (0xE3..=0xE9).contains(&b0) && is_cjk(code_point(text, i, len));
    (kind, len, cjk)
}

/// The third pattern's input around a position: the characters that are no digit and
/// are inside (or outside) the CJK ranges as the first one is.
struct Input<'t> {
    text: &'t [u8],
    cjk: bool,
}

impl Input<'_> {
    /// The kind and length of the character at `j`, or `None` at the end of the input.
    #[inline(always)]
    fn at(&self, j: usize) -> Option<(Kind, usize)> {
        if j >= self.text.len() {
            return None;
        }
        let (kind, len, cjk) = kind_at(self.text, j);
        (kind != Kind::Number && cjk == self.cjk).then_some((kind, len))
    }

    /// End of the run of characters from `j` whose kind satisfies `keep`.
    #[inline]
    fn run(&self, mut j: usize, keep: impl Fn(Kind) -> bool) -> usize {
        while let Some((kind, len)) = self.at(j) {
            if !keep(kind) {
                break;
            }
            j += len;
        }
        j
    }
}

/// Kind of a byte for [`piece_end`]'s ASCII fast paths, one bit each so that a set of
/// kinds is one mask test: an ASCII letter.
const LETTER: u8 = 1;
/// An ASCII digit.
const DIGIT: u8 = 1 << 1;
/// The space ` `.
const SPACE: u8 = 1 << 2;
/// `\t`.
const TAB: u8 = 1 << 3;
/// `\r` or `\n`.
const NEWLINE: u8 = 1 << 4;
/// ASCII punctuation and symbols: `[\p{P}\p{S}]` of ASCII.
const PUNCT: u8 = 1 << 5;
/// Any other ASCII byte (controls, `\x0B`, `\x0C`): the general code weighs it.
const OTHER_ASCII: u8 = 1 << 6;
/// A byte of a character outside ASCII.
const HIGH: u8 = 1 << 7;
/// Past the end of the text ([`byte_kind_at`]).
const END: u8 = 0;

/// [`LETTER`], [`DIGIT`], ... of every byte value.
static BYTE_KIND: [u8; 256] = {
    let mut kinds = [HIGH; 256];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        kinds[b] = if c.is_ascii_alphabetic() {
            LETTER
        } else if c.is_ascii_digit() {
            DIGIT
        } else if c == b' ' {
            SPACE
        } else if c == b'\t' {
            TAB
        } else if c == b'\n' || c == b'\r' {
            NEWLINE
        } else if c.is_ascii_punctuation() {
            PUNCT
        } else {
            OTHER_ASCII
        };
        b += 1;
    }
    kinds
};

/// Kind of the byte at `i`, [`END`] past the end of `text`.
#[inline(always)]
fn byte_kind_at(text: &[u8], i: usize) -> u8 {
    text.get(i).map_or(END, |&b| BYTE_KIND[usize::from(b)])
}

/// End (exclusive byte offset) of the piece that starts at `i` (`i < text.len()`, a
/// character boundary of valid UTF-8).
pub(crate) fn piece_end(text: &[u8], i: usize) -> usize {
    let b0 = text[i];
    let (k0, k1) = (BYTE_KIND[usize::from(b0)], byte_kind_at(text, i + 1));
    // Most pieces of most text: an ASCII letter run, alone or after a space (the
    // second alternative, when no letter or mark outside ASCII goes on with the run).
    if k0 == LETTER || (k0 == SPACE && k1 == LETTER) {
        let from = if k0 == LETTER { i + 1 } else { i + 2 };
        let end = ascii_letters(text, from, true);
        if byte_kind_at(text, end) != HIGH {
            return end;
        }
    }
    // Then runs of ASCII punctuation (code is full of them): a mark and the ASCII
    // letters after it, or ` ?[\p{P}\p{S}]+[\r\n]*` — unless the run goes on into a
    // character outside ASCII, which the general scan below weighs.
    let punct_from = if k0 == PUNCT {
        if k1 == LETTER {
            return ascii_letters(text, i + 2, true);
        }
        Some(i + 1)
    } else if k0 == SPACE && k1 == PUNCT {
        Some(i + 2)
    } else {
        None
    };
    if let Some(mut j) = punct_from {
        let mut k = byte_kind_at(text, j);
        while k == PUNCT {
            j += 1;
            k = byte_kind_at(text, j);
        }
        if k != HIGH {
            while k == NEWLINE {
                j += 1;
                k = byte_kind_at(text, j);
            }
            return j;
        }
    }
    // Whitespace that starts no word and no punctuation run here: a line end, a tab
    // before an ASCII character that is no letter, a space before one that is no
    // letter and no punctuation (or the end of the text).
    if k0 == NEWLINE
        || (k0 == TAB && k1 & (LETTER | HIGH) == 0)
        || (k0 == SPACE && k1 & (LETTER | PUNCT | HIGH) == 0)
    {
        return whitespace(&Input { text, cjk: false }, i);
    }
    // ASCII digits, three at most (a number character outside ASCII may go on).
    if k0 == DIGIT {
        let mut end = i + 1;
        while end < i + 3 && byte_kind_at(text, end) == DIGIT {
            end += 1;
        }
        if end == i + 3 || byte_kind_at(text, end) != HIGH {
            return end;
        }
    }
    let (k0, len0, cjk) = kind_at(text, i);
    // First pattern: `\p{N}{1,3}`.
    if k0 == Kind::Number {
        let mut j = i + len0;
        for _ in 0..2 {
            match text.get(j) {
                Some(_) => {
                    let (kind, len, _) = kind_at(text, j);
                    if kind != Kind::Number {
                        break;
                    }
                    j += len;
                }
                None => break,
            }
        }
        return j;
    }
    let input = Input { text, cjk };
    let next = input.at(i + len0);
    // ``[!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+``
    if b0.is_ascii_punctuation() && text.get(i + 1).is_some_and(u8::is_ascii_alphabetic) {
        return ascii_letters(text, i + 2, true);
    }
    // `[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+`: the prefix is taken when a word follows
    // it; a mark without one is a word itself.
    if k0.is_word_prefix() && next.is_some_and(|(k, _)| k.is_word()) {
        return input.run(i + len0, Kind::is_word);
    }
    if k0.is_word() {
        return input.run(i + len0, Kind::is_word);
    }
    // ` ?[\p{P}\p{S}]+[\r\n]*`
    let symbols_from = if b0 == b' ' && next.is_some_and(|(k, _)| k == Kind::Punct) {
        Some(i + 1)
    } else if k0 == Kind::Punct {
        Some(i)
    } else {
        None
    };
    if let Some(from) = symbols_from {
        let end = input.run(from, |k| k == Kind::Punct);
        return input.run(end, |k| k == Kind::Newline);
    }
    if k0.is_space() {
        return whitespace(&input, i);
    }
    // No alternative matches here: the text up to where one does is a piece of its
    // own. A match starts at any character but another `Other` that no word follows.
    let mut j = i + len0;
    while let Some((kind, len)) = input.at(j) {
        if kind != Kind::Other || input.at(j + len).is_some_and(|(k, _)| k.is_word()) {
            break;
        }
        j += len;
    }
    j
}

/// `\s*[\r\n]+|\s+(?!\S)|\s+` at the whitespace character at `i`.
fn whitespace(input: &Input<'_>, i: usize) -> usize {
    // Whitespace is no number and in no CJK range: the whole run is in this input.
    let (end, last_newline) = space_run(input.text, i);
    // `\s*[\r\n]+`: greedy `\s*` backs off to the last newline of the run.
    if let Some(nl) = last_newline {
        return nl + 1;
    }
    // `\s+(?!\S)`: the whole run at the end of the input, else all but its last
    // character when that leaves one; `\s+` otherwise.
    if input.at(end).is_none() {
        end
    } else {
        space_before_word(input.text, i, end)
    }
}

/// Whether DeepSeek's pieces always start at byte `p` (`0 < p < text.len()`), whatever
/// the text around: an ASCII space after a printable ASCII character that is not one,
/// or the start of a line (after `\r` or `\n`) whose first character other than
/// spaces and tabs is printable ASCII — an indented line of code.
///
/// No piece runs from a printable ASCII character into a space (words, digit groups and
/// punctuation runs stop there), and every such space starts a piece whose end does not
/// depend on what came before it (the patterns look behind nowhere). At a line start,
/// the piece holding the newline ends right after it: a run of whitespace with a
/// newline in it is matched by `\s*[\r\n]+`, which backs off to the run's last newline
/// (and the spaces or tabs after this one hold none), and a punctuation run takes the
/// newlines after it and no more; no other alternative takes a newline. None of these
/// positions is a digit's or a CJK run's inside, which the first two splits would keep
/// whole.
pub(crate) fn is_exact_boundary(text: &[u8], p: usize) -> bool {
    let (before, at) = (text[p - 1], text[p]);
    let printable = |b: u8| (0x21..=0x7E).contains(&b);
    if at == b' ' && printable(before) {
        return true;
    }
    if before != b'\n' && before != b'\r' {
        return false;
    }
    // Indentation is short: a line that starts with a long run of blanks is left to the
    // next boundary rather than scanned to its end.
    let stop = (p + LINE_START_LOOKAHEAD).min(text.len());
    text[p..stop]
        .iter()
        .find(|&&b| b != b' ' && b != b'\t')
        .is_some_and(|&b| printable(b))
}

/// Spaces and tabs [`is_exact_boundary`] looks past at the start of a line.
const LINE_START_LOOKAHEAD: usize = 64;

#[cfg(test)]
mod tests {
    use super::super::split::RegexSplits;
    use super::*;

    fn scanned(text: &str) -> Vec<&str> {
        let bytes = text.as_bytes();
        let mut out = Vec::new();
        let mut i = 0;
        while i < bytes.len() {
            let end = piece_end(bytes, i);
            assert!(end > i, "no progress at {i} in {text:?}");
            out.push(&text[i..end]);
            i = end;
        }
        out
    }

    fn regex(splits: &RegexSplits, text: &str) -> Vec<String> {
        let mut out = Vec::new();
        splits.for_each_piece(text, &mut |p| {
            out.push(String::from_utf8_lossy(p).into_owned())
        });
        out
    }

    fn splits() -> RegexSplits {
        let patterns: Vec<String> = PATTERNS.iter().map(|p| (*p).to_owned()).collect();
        RegexSplits::new(&patterns).unwrap_or_else(|e| panic!("{e}"))
    }

    /// Characters of every kind the patterns tell apart, ASCII and not, to build texts
    /// from.
    const ALPHABET: &[&str] = &[
        "a", "Z", "q", " ", "  ", "\n", "\r", "\t", "1", "7", "!", "#", "-", ".", "'", "/", "_",
        "`", "~", "é", "ß", "Ж", "\u{301}", "\u{a0}", "\u{3000}", "\u{200b}", "\u{1}", "\u{7f}",
        "\u{b}", "\u{c}", "999", "中", "国", "の", "カ", "゛", "゠", "・", "ー", "\u{3099}",
        "\u{3097}", "한", "٣", "²", "½", "€", "😀", "«", "→", "\u{e000}", "\u{2028}", "x", "y",
        "🙂",
    ];

    fn texts(seed: u64, count: usize, len: usize) -> Vec<String> {
        texts_of(ALPHABET, seed, count, len)
    }

    /// Line starts, indentation and what may follow them.
    const LINES: &[&str] = &[
        "\n", "\r", " ", "  ", "\t", "x", "1", "!", "#", "中", "\u{a0}", "é",
    ];

    fn texts_of(alphabet: &[&str], seed: u64, count: usize, len: usize) -> Vec<String> {
        let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        (0..count)
            .map(|_| {
                (0..len)
                    .map(|_| {
                        state ^= state << 13;
                        state ^= state >> 7;
                        state ^= state << 17;
                        alphabet[(state % alphabet.len() as u64) as usize]
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn scans_as_the_three_regexes_split() {
        let splits = splits();
        let fixed = [
            "Hello, world! It's 2024-12-03.",
            "def f(x):\n    return x**2  # 12345\n\n\n  ",
            "中文テキスト、カタカナ・ひらがな。123abc",
            "  \n\t \r\n x",
            "a\u{200b}\u{200b}b\u{200b}!",
            "éclair naïve Ж\u{301}ук",
            "x   ",
            "x   1",
            "1   x",
            "!!!\n\n#x",
            " !a",
            "\u{3000}中",
        ];
        for text in fixed {
            assert_eq!(scanned(text), regex(&splits, text), "{text:?}");
        }
        for (k, text) in texts(1, 4_000, 12).iter().enumerate() {
            assert_eq!(scanned(text), regex(&splits, text), "#{k}: {text:?}");
        }
        for text in texts(2, 300, 80) {
            assert_eq!(scanned(&text), regex(&splits, &text), "{text:?}");
        }
    }

    #[test]
    fn the_files_patterns_get_this_scanner() {
        let patterns: Vec<String> = PATTERNS.iter().map(|p| (*p).to_owned()).collect();
        assert_eq!(
            super::super::hf::family_of(&patterns),
            Ok(super::super::pretokenize::Family::DeepSeek)
        );
    }

    /// Counting the parts of a text cut at exact boundaries gives its pieces.
    #[test]
    fn exact_boundaries_cut_between_pieces() {
        for text in texts(3, 2_000, 16)
            .iter()
            .chain(&texts_of(LINES, 4, 2_000, 16))
            .chain(&[
                "a b\nc".to_owned(),
                "x! \ny".to_owned(),
                "def f(x):\n    return x\n\n  \n\t\t# done\n".to_owned(),
                "x \n   1\r\n  !y\n \u{a0} z\n  中".to_owned(),
            ])
        {
            let bytes = text.as_bytes();
            let whole = scanned(text);
            for p in 1..bytes.len() {
                if !text.is_char_boundary(p) || !is_exact_boundary(bytes, p) {
                    continue;
                }
                let mut parts = scanned(&text[..p]);
                parts.extend(scanned(&text[p..]));
                assert_eq!(parts, whole, "{text:?} cut at {p}");
            }
        }
    }
}
