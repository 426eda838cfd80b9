//! SentencePiece's normalizer: the compiled character map of its rule (`nmt_nfkc` and
//! the like; none for `identity`), then its whitespace handling — a space mark
//! (U+2581) before the text, spaces written as that mark, extra spaces removed — as
//! `normalizer.cc` does it, step for step.

use super::proto::ProtoModel;
use super::trie::Trie;

/// U+2581 LOWER ONE EIGHTH BLOCK, which stands for a space.
pub(super) const SPACE_MARK: &[u8] = "\u{2581}".as_bytes();

/// U+FFFD, which stands for a byte that is not UTF-8.
const REPLACEMENT: &[u8] = "\u{fffd}".as_bytes();

/// Bytes of the UTF-8 character a lead byte starts (1 for a stray byte), as
/// SentencePiece's `OneCharLen` reads it.
#[inline]
pub(super) fn one_char_len(lead: u8) -> usize {
    match lead >> 4 {
        0xc | 0xd => 2,
        0xe => 3,
        0xf => 4,
        _ => 1,
    }
}

/// The length of the valid UTF-8 character at the start of `text`, or `None`.
fn valid_char_len(text: &[u8]) -> Option<usize> {
    let len = one_char_len(text[0]).min(4);
    let head = text.get(..len)?;
    let c = std::str::from_utf8(head).ok()?.chars().next()?;
    (c.len_utf8() == len).then_some(len)
}

/// The compiled rules of a normalization: a double-array trie (darts-clone's layout)
/// from source strings to offsets of their replacements, and the replacements.
struct CharsMap {
    units: Vec<u32>,
    replacements: Vec<u8>,
}

impl CharsMap {
    /// Reads a `precompiled_charsmap`: the trie's size in bytes (32-bit little
    /// endian), the trie, then the NUL-terminated replacements.
    fn parse(blob: &[u8]) -> Result<CharsMap, String> {
        let bad = || "its precompiled_charsmap is malformed".to_owned();
        let size = blob.get(..4).ok_or_else(bad)?;
        let size = u32::from_le_bytes([size[0], size[1], size[2], size[3]]) as usize;
        let trie = blob.get(4..4 + size).ok_or_else(bad)?;
        if !size.is_multiple_of(4) || size == 0 {
            return Err(bad());
        }
        let units = trie
            .chunks_exact(4)
            .map(|u| u32::from_le_bytes([u[0], u[1], u[2], u[3]]))
            .collect();
        Ok(CharsMap {
            units,
            replacements: blob[4 + size..].to_vec(),
        })
    }

    /// The longest rule matching the start of `text`: its length and replacement.
    fn longest(&self, text: &[u8]) -> Option<(usize, &[u8])> {
        // darts-clone's unit fields.
        let offset = |unit: u32| ((unit >> 10) << ((unit & (1 << 9)) >> 6)) as usize;
        let has_leaf = |unit: u32| (unit >> 8) & 1 == 1;
        let label = |unit: u32| unit & ((1 << 31) | 0xff);
        let value = |unit: u32| (unit & ((1 << 31) - 1)) as usize;
        let mut found = None;
        let mut node = offset(*self.units.first()?);
        for (i, &byte) in text.iter().enumerate() {
            node ^= usize::from(byte);
            let unit = *self.units.get(node)?;
            if label(unit) != u32::from(byte) {
                break;
            }
            node ^= offset(unit);
            if has_leaf(unit) {
                if let Some(&leaf) = self.units.get(node) {
                    found = Some((i + 1, value(leaf)));
                }
            }
        }
        let (len, at) = found?;
        let rest = self.replacements.get(at..)?;
        let end = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
        Some((len, &rest[..end]))
    }
}

/// A model's normalizer.
pub(super) struct Normalizer {
    map: Option<CharsMap>,
    add_dummy_prefix: bool,
    remove_extra_whitespaces: bool,
    escape_whitespaces: bool,
    treat_whitespace_as_suffix: bool,
}

impl Normalizer {
    /// The normalizer a model file describes.
    pub(super) fn new(model: &ProtoModel<'_>) -> Result<Normalizer, String> {
        let map = if model.precompiled_charsmap.is_empty() {
            None
        } else {
            Some(CharsMap::parse(model.precompiled_charsmap)?)
        };
        Ok(Normalizer {
            map,
            add_dummy_prefix: model.add_dummy_prefix,
            remove_extra_whitespaces: model.remove_extra_whitespaces,
            escape_whitespaces: model.escape_whitespaces,
            treat_whitespace_as_suffix: model.treat_whitespace_as_suffix,
        })
    }

    /// The text that replaces the start of `input`, and how many bytes it replaces:
    /// a user-defined symbol as it is, else the longest rule, else one character.
    #[inline]
    fn prefix<'a>(&'a self, input: &'a [u8], user: &Trie) -> (&'a [u8], usize) {
        let symbol = user.longest_prefix(input);
        if symbol > 0 {
            return (&input[..symbol], symbol);
        }
        if let Some((len, replacement)) = self.map.as_ref().and_then(|m| m.longest(input)) {
            return (replacement, len);
        }
        match valid_char_len(input) {
            Some(len) => (&input[..len], len),
            None => (REPLACEMENT, 1),
        }
    }

    /// Appends the space as this model writes it.
    fn push_space(&self, out: &mut Vec<u8>) {
        if self.escape_whitespaces {
            out.extend_from_slice(SPACE_MARK);
        } else {
            out.push(b' ');
        }
    }

    /// Normalizes `input` into `out` (cleared first); `user` holds the user-defined
    /// symbols, which are left as they are.
    pub(super) fn normalize(&self, input: &str, user: &Trie, out: &mut Vec<u8>) {
        out.clear();
        let mut input = input.as_bytes();
        if self.remove_extra_whitespaces {
            while !input.is_empty() {
                let (text, len) = self.prefix(input, user);
                if text != b" " {
                    break;
                }
                input = &input[len..];
            }
        }
        if input.is_empty() {
            return;
        }
        if !self.treat_whitespace_as_suffix && self.add_dummy_prefix {
            self.push_space(out);
        }
        let mut prev_space = self.remove_extra_whitespaces;
        while !input.is_empty() {
            let (mut text, len) = self.prefix(input, user);
            while prev_space && text.first() == Some(&b' ') {
                text = &text[1..];
            }
            if !text.is_empty() {
                for &byte in text {
                    if byte == b' ' && self.escape_whitespaces {
                        out.extend_from_slice(SPACE_MARK);
                    } else {
                        out.push(byte);
                    }
                }
                prev_space = text.last() == Some(&b' ');
            }
            input = &input[len..];
            if !self.remove_extra_whitespaces {
                prev_space = false;
            }
        }
        if self.remove_extra_whitespaces {
            let space: &[u8] = if self.escape_whitespaces {
                SPACE_MARK
            } else {
                b" "
            };
            while out.ends_with(space) {
                out.truncate(out.len() - space.len());
            }
        }
        if self.treat_whitespace_as_suffix && self.add_dummy_prefix {
            self.push_space(out);
        }
    }
}
