//! Character classes used by the pre-tokenizers.
//!
//! The tables are built from `regex-syntax`, the same crate (and so the same Unicode
//! version) that backs the regular expressions tiktoken itself runs. Our hand-written
//! scanners therefore classify every code point exactly as tiktoken's regex would.

use rustc_hash::FxHashMap;
use std::sync::OnceLock;

/// Class of one character, as the tiktoken patterns see it.
///
/// The split of letters into three groups follows the o200k pattern, which tells
/// upper-like (`Lu Lt`), lower (`Ll`) and caseless (`Lm Lo`) letters apart; the older
/// patterns only ask "is it a letter" ([`Class::is_letter`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum Class {
    /// `\r` or `\n`.
    Newline = 0,
    /// Any other `White_Space` character.
    Space = 1,
    /// `Lu` or `Lt`.
    Upper = 2,
    /// `Ll`.
    Lower = 3,
    /// `Lm` or `Lo`.
    Caseless = 4,
    /// `M` (combining marks): not a letter, but part of o200k's letter runs.
    Mark = 5,
    /// `N`.
    Number = 6,
    /// Everything else: punctuation, symbols, controls, unassigned.
    Other = 7,
}

impl Class {
    fn from_u8(v: u8) -> Class {
        match v {
            0 => Class::Newline,
            1 => Class::Space,
            2 => Class::Upper,
            3 => Class::Lower,
            4 => Class::Caseless,
            5 => Class::Mark,
            6 => Class::Number,
            _ => Class::Other,
        }
    }

    /// `\s`.
    #[inline]
    pub(crate) fn is_space(self) -> bool {
        matches!(self, Class::Newline | Class::Space)
    }

    /// `\p{L}`.
    #[inline]
    pub(crate) fn is_letter(self) -> bool {
        matches!(self, Class::Upper | Class::Lower | Class::Caseless)
    }

    /// `[^\s\p{L}\p{N}]`: what the punctuation alternative of every pattern takes.
    #[inline]
    pub(crate) fn is_symbol(self) -> bool {
        matches!(self, Class::Mark | Class::Other)
    }

    /// `[^\r\n\p{L}\p{N}]`: the optional one-character prefix of a word.
    #[inline]
    pub(crate) fn is_word_prefix(self) -> bool {
        matches!(self, Class::Space | Class::Mark | Class::Other)
    }

    /// o200k's `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]`.
    #[inline]
    pub(crate) fn is_o200k_upper(self) -> bool {
        matches!(self, Class::Upper | Class::Caseless | Class::Mark)
    }

    /// o200k's `[\p{Ll}\p{Lm}\p{Lo}\p{M}]`.
    #[inline]
    pub(crate) fn is_o200k_lower(self) -> bool {
        matches!(self, Class::Lower | Class::Caseless | Class::Mark)
    }
}

const BLOCK: usize = 256;
const CODEPOINTS: usize = 0x11_0000;

/// Two-level table: `index[cp / 256]` picks a deduplicated block of 256 classes.
struct Table {
    index: Vec<u16>,
    blocks: Vec<u8>,
}

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(build_table)
}

/// Ranges of a Unicode class written in regex syntax, e.g. `\p{Lu}`.
fn class_ranges(pattern: &str) -> Vec<(u32, u32)> {
    use regex_syntax::hir::{Class as HirClass, HirKind};
    // The patterns are fixed literals known to parse; an empty set would only make every
    // character `Other`, which the oracle tests would catch at once.
    let Ok(hir) = regex_syntax::Parser::new().parse(pattern) else {
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
}

fn build_table() -> Table {
    let mut flat = vec![Class::Other as u8; CODEPOINTS];
    // Later assignments win; the categories are disjoint except that `\s` must be
    // applied last so that `\r`/`\n` can then be singled out.
    let assignments = [
        (r"\p{Lu}", Class::Upper),
        (r"\p{Lt}", Class::Upper),
        (r"\p{Ll}", Class::Lower),
        (r"\p{Lm}", Class::Caseless),
        (r"\p{Lo}", Class::Caseless),
        (r"\p{M}", Class::Mark),
        (r"\p{N}", Class::Number),
        (r"\s", Class::Space),
    ];
    for (pattern, class) in assignments {
        for (start, end) in class_ranges(pattern) {
            for slot in &mut flat[start as usize..=end as usize] {
                *slot = class as u8;
            }
        }
    }
    flat[usize::from(b'\r')] = Class::Newline as u8;
    flat[usize::from(b'\n')] = Class::Newline as u8;

    let mut index = Vec::with_capacity(CODEPOINTS / BLOCK);
    let mut blocks: Vec<u8> = Vec::new();
    let mut seen: FxHashMap<&[u8], u16> = FxHashMap::default();
    for chunk in flat.chunks(BLOCK) {
        let id = match seen.get(chunk) {
            Some(&id) => id,
            None => {
                // At most 4_352 blocks exist, so the id always fits in u16.
                let id = (blocks.len() / BLOCK) as u16;
                blocks.extend_from_slice(chunk);
                seen.insert(chunk, id);
                id
            }
        };
        index.push(id);
    }
    Table { index, blocks }
}

/// Forces the table to be built now rather than on first use.
pub(crate) fn warm_up() {
    let _ = table();
}

/// Classes of the ASCII characters, known at compile time so that the hot ASCII path
/// reads neither the lazily built table nor its `OnceLock` (the tests check it against
/// the table built from `regex-syntax`).
pub(crate) const ASCII: [Class; 128] = {
    let mut table = [Class::Other; 128];
    let mut b = 0;
    while b < 128 {
        let c = b as u8;
        table[b] = match c {
            b'\r' | b'\n' => Class::Newline,
            b'\t' | 0x0B | 0x0C | b' ' => Class::Space,
            b'A'..=b'Z' => Class::Upper,
            b'a'..=b'z' => Class::Lower,
            b'0'..=b'9' => Class::Number,
            _ => Class::Other,
        };
        b += 1;
    }
    table
};

/// Class and UTF-8 length of the character starting at byte `i` of `text`.
///
/// `i` must be a character boundary of a valid UTF-8 string and less than its length.
#[inline(always)]
pub(crate) fn class_at(text: &[u8], i: usize) -> (Class, usize) {
    let b0 = text[i];
    if b0 < 0x80 {
        return (ASCII[b0 as usize], 1);
    }
    class_at_non_ascii(text, i, b0)
}

/// [`class_at`] for a character that is not ASCII.
#[inline(never)]
fn class_at_non_ascii(text: &[u8], i: usize, b0: u8) -> (Class, usize) {
    let t = table();
    let (cp, len) = decode(text, i, b0);
    let block = t.index[(cp as usize) / BLOCK] as usize;
    (
        Class::from_u8(t.blocks[block * BLOCK + (cp as usize) % BLOCK]),
        len,
    )
}

/// Decodes the non-ASCII character whose first byte `b0` is at `i`.
#[inline]
fn decode(text: &[u8], i: usize, b0: u8) -> (u32, usize) {
    let cont = |k: usize| u32::from(text.get(i + k).copied().unwrap_or(0x80) & 0x3F);
    if b0 < 0xE0 {
        ((u32::from(b0 & 0x1F) << 6) | cont(1), 2)
    } else if b0 < 0xF0 {
        ((u32::from(b0 & 0x0F) << 12) | (cont(1) << 6) | cont(2), 3)
    } else {
        (
            ((u32::from(b0 & 0x07) << 18) | (cont(1) << 12) | (cont(2) << 6) | cont(3))
                .min(CODEPOINTS as u32 - 1),
            4,
        )
    }
}

/// UTF-8 length of the character that ends right before byte `end`.
#[inline]
pub(crate) fn len_before(text: &[u8], end: usize) -> usize {
    let mut k = 1;
    while k < 4 && k < end && (text[end - k] & 0xC0) == 0x80 {
        k += 1;
    }
    k
}

#[cfg(test)]
mod tests {
    use super::*;

    fn class_of(c: char) -> Class {
        let mut buf = [0u8; 4];
        let s = c.encode_utf8(&mut buf);
        class_at(s.as_bytes(), 0).0
    }

    #[test]
    fn classifies_representative_characters() {
        assert_eq!(class_of('\n'), Class::Newline);
        assert_eq!(class_of('\r'), Class::Newline);
        assert_eq!(class_of(' '), Class::Space);
        assert_eq!(class_of('\t'), Class::Space);
        assert_eq!(class_of('\u{3000}'), Class::Space);
        assert_eq!(class_of('\u{2028}'), Class::Space);
        assert_eq!(class_of('A'), Class::Upper);
        assert_eq!(class_of('ǅ'), Class::Upper); // Lt
        assert_eq!(class_of('a'), Class::Lower);
        assert_eq!(class_of('ſ'), Class::Lower);
        assert_eq!(class_of('中'), Class::Caseless);
        assert_eq!(class_of('ʰ'), Class::Caseless); // Lm
        assert_eq!(class_of('\u{301}'), Class::Mark);
        assert_eq!(class_of('7'), Class::Number);
        assert_eq!(class_of('Ⅻ'), Class::Number);
        assert_eq!(class_of('!'), Class::Other);
        assert_eq!(class_of('😀'), Class::Other);
        assert_eq!(class_of('\0'), Class::Other);
        assert_eq!(class_of('\u{10FFFF}'), Class::Other);
    }

    #[test]
    fn the_const_ascii_classes_are_the_unicode_tables() {
        let built = table();
        for b in 0..128u8 {
            let slot = usize::from(built.index[0]) * BLOCK + usize::from(b);
            assert_eq!(
                ASCII[usize::from(b)],
                Class::from_u8(built.blocks[slot]),
                "{b:#x}"
            );
        }
    }

    #[test]
    fn len_before_steps_over_one_character() {
        let s = "aé中😀".as_bytes();
        assert_eq!(len_before(s, s.len()), 4);
        assert_eq!(len_before(s, s.len() - 4), 3);
        assert_eq!(len_before(s, 3), 2);
        assert_eq!(len_before(s, 1), 1);
    }
}
