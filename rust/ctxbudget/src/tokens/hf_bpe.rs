//! The byte-level BPE model of a `tokenizer.json`: its `vocab` object and `merges`
//! array decoded straight from the JSON text into the engine's tables.
//!
//! These two values are nearly all of a file (10 MB for 150,000 tokens), so each is
//! read in one pass with no string allocated: every vocabulary key is decoded from
//! GPT-2's printable characters into its bytes directly inside the concatenated byte
//! table, and every merge is decoded into one scratch buffer and looked up in the rank
//! table that the tokens have just filled. A merge list usually follows the vocabulary's
//! id order (the merge at index `i` makes the token after the one merge `i - 1` made),
//! so the joined token is first compared with that next token, sequentially in memory,
//! and looked up by hash only when it is not.

use rustc_hash::FxHashSet;

use super::bpe::{same_bytes, Ranks, NO_RANK};
use super::json_scan::{RawStr, Scan};
use super::merges::PairMerges;
use super::vocab::Vocab;

/// Characters a byte-level vocabulary is written in: all below this.
pub(crate) const BYTE_CHARS: usize = 256 + 68;

/// GPT-2's map from bytes to the printable characters that byte-level vocabularies are
/// written in, inverted: `byte + 1` by character (0: not byte-level).
pub(crate) const BYTE_OF_CHAR: [u16; BYTE_CHARS] = {
    let mut map = [0u16; BYTE_CHARS];
    let mut extra = 0usize;
    let mut b = 0usize;
    while b < 256 {
        let printable = matches!(b, 33..=126 | 161..=172 | 174..=255);
        let c = if printable {
            b
        } else {
            extra += 1;
            255 + extra
        };
        map[c] = b as u16 + 1;
        b += 1;
    }
    map
};

/// Appends the bytes a byte-level string spells to `out`: `Ok(false)` (with `out` in
/// an unspecified state past its old length) if a character is not byte-level.
#[inline]
fn decode_into(s: RawStr<'_>, out: &mut Vec<u8>) -> Result<bool, String> {
    if !s.escaped {
        // Printable ASCII stands for itself, and every other byte-level character is
        // two bytes of UTF-8 (U+00A1 to U+0143, lead byte 0xC2 to 0xC5): decoded here,
        // and checked as they are, without a pass over the string first.
        let raw = s.raw;
        let mut i = 0;
        while i < raw.len() {
            let b = raw[i];
            if (33..=126).contains(&b) {
                out.push(b);
                i += 1;
                continue;
            }
            let Some(&next) = raw.get(i + 1) else { break };
            if !(0xC2..=0xC5).contains(&b) || next & 0xC0 != 0x80 {
                break;
            }
            let c = (usize::from(b & 0x1F) << 6) | usize::from(next & 0x3F);
            match BYTE_OF_CHAR.get(c) {
                Some(&v) if v > 0 => out.push((v - 1) as u8),
                _ => return Ok(false),
            }
            i += 2;
        }
        if i == raw.len() {
            return Ok(true);
        }
    }
    // Escapes, or characters no byte-level string holds: the general decoder says which.
    s.for_each_char(|c| match BYTE_OF_CHAR.get(c as usize) {
        Some(&v) if v > 0 => {
            out.push((v - 1) as u8);
            true
        }
        _ => false,
    })
}

/// What [`plain_token`] found.
enum Plain {
    /// The string, its bytes appended, with the position of its single space (when
    /// `split`) in them.
    Decoded { space: Option<usize> },
    /// Something the fast path leaves to [`decode_into`] (an escape, a character that is
    /// not byte-level, a second space); nothing was appended.
    Other,
}

/// Decodes the byte-level string at the scan in the same pass as it finds its end —
/// a vocabulary is mostly strings of a few bytes, where a separate search for the
/// closing quote would cost as much as the decoding. With `split`, one space (the
/// separator of a `"left right"` merge) is allowed and its position in the decoded
/// bytes is returned.
#[inline]
fn plain_token(scan: &mut Scan<'_>, out: &mut Vec<u8>, split: bool) -> Plain {
    let Some(rest) = scan.string_ahead() else {
        return Plain::Other;
    };
    let start = out.len();
    let mut space = None;
    let mut i = 0;
    while let Some(&b) = rest.get(i) {
        if b == b'"' {
            scan.consume(i + 2);
            return Plain::Decoded { space };
        }
        if (33..=126).contains(&b) && b != b'\\' {
            out.push(b);
            i += 1;
        } else if b == b' ' && split && space.is_none() {
            space = Some(out.len() - start);
            i += 1;
        } else if (0xC2..=0xC5).contains(&b) && rest.get(i + 1).is_some_and(|&n| n & 0xC0 == 0x80) {
            let c = (usize::from(b & 0x1F) << 6) | usize::from(rest[i + 1] & 0x3F);
            match BYTE_OF_CHAR.get(c) {
                Some(&v) if v > 0 => out.push((v - 1) as u8),
                _ => break,
            }
            i += 2;
        } else {
            break;
        }
    }
    out.truncate(start);
    Plain::Other
}

/// The string `s` decoded as text, for messages.
fn text_of(s: RawStr<'_>) -> String {
    s.decoded().unwrap_or_default()
}

/// Bytes of tokens written as byte-level characters, for messages.
fn spelled(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|&b| {
            let c = BYTE_OF_CHAR
                .iter()
                .position(|&v| usize::from(v) == usize::from(b) + 1)
                .unwrap_or(0);
            char::from_u32(c as u32).unwrap_or(char::REPLACEMENT_CHARACTER)
        })
        .collect()
}

/// The `vocab` object, its keys decoded into bytes (in the file's order).
#[derive(Default)]
pub(crate) struct VocabText {
    /// Every kept key's bytes, concatenated in the file's order.
    bytes: Vec<u8>,
    /// (file id, end of its bytes), in the file's order.
    spans: Vec<(u32, u32)>,
}

impl VocabText {
    /// Reads the `vocab` object at the scan. A key that is not byte-level is left out:
    /// no byte sequence can spell it.
    pub(crate) fn read(scan: &mut Scan<'_>) -> Result<VocabText, String> {
        let mut vocab = VocabText {
            bytes: Vec::with_capacity(1 << 20),
            spans: Vec::with_capacity(1 << 17),
        };
        scan.members(|scan| {
            let start = vocab.bytes.len();
            let byte_level = match plain_token(scan, &mut vocab.bytes, false) {
                Plain::Decoded { .. } => true,
                Plain::Other => {
                    let key = scan.string()?;
                    decode_into(key, &mut vocab.bytes)?
                }
            };
            scan.colon()?;
            let id = scan.u32()?;
            if !byte_level {
                vocab.bytes.truncate(start);
                return Ok(());
            }
            if vocab.bytes.len() == start {
                return Err(format!("token {id} is empty"));
            }
            let end =
                u32::try_from(vocab.bytes.len()).map_err(|_| "the vocabulary is too large")?;
            vocab.spans.push((id, end));
            Ok(())
        })?;
        Ok(vocab)
    }

    /// The byte-level tokens in id order, the ids in `added` left out (added tokens are
    /// matched in the text, never merged).
    pub(crate) fn into_vocab(self, added: &FxHashSet<u32>) -> Result<Vocab, String> {
        let VocabText { bytes, spans } = self;
        let in_order = spans.windows(2).all(|w| w[0].0 < w[1].0);
        let keeps_all = !spans.iter().any(|(id, _)| added.contains(id));
        let (bytes, ends) = if in_order && keeps_all {
            (
                bytes,
                spans.iter().map(|&(_, end)| end).collect::<Vec<u32>>(),
            )
        } else {
            // A file that lists its vocabulary out of id order, or with added tokens in it.
            let mut kept: Vec<(u32, u32, u32)> = Vec::with_capacity(spans.len());
            let mut start = 0;
            for &(id, end) in &spans {
                if !added.contains(&id) {
                    kept.push((id, start, end));
                }
                start = end;
            }
            kept.sort_unstable_by_key(|&(id, start, _)| (id, start));
            let mut sorted = Vec::with_capacity(bytes.len());
            let mut ends = Vec::with_capacity(kept.len());
            for (_, start, end) in kept {
                sorted.extend_from_slice(&bytes[start as usize..end as usize]);
                ends.push(sorted.len() as u32);
            }
            (sorted, ends)
        };
        let mut starts = Vec::with_capacity(ends.len() + 1);
        starts.push(0);
        starts.extend_from_slice(&ends);
        let vocab = Vocab { bytes, starts };
        let mut single = [false; 256];
        for (_, token) in vocab.iter() {
            if let [b] = token {
                single[usize::from(*b)] = true;
            }
        }
        if let Some(b) = single.iter().position(|&seen| !seen) {
            return Err(format!(
                "its vocabulary lacks byte {b:#04x}: not a byte-level BPE vocabulary"
            ));
        }
        Ok(vocab)
    }
}

/// A message for a merge part that no token can be.
fn missing(index: usize, s: RawStr<'_>) -> String {
    format!(
        "merge {index} names {:?}, which is not in the vocabulary",
        text_of(s)
    )
}

/// Appends the bytes of one part of an `[left, right]` merge.
fn token_part(scan: &mut Scan<'_>, out: &mut Vec<u8>, index: usize) -> Result<(), String> {
    if let Plain::Decoded { .. } = plain_token(scan, out, false) {
        return Ok(());
    }
    let part = scan.string()?;
    if !decode_into(part, out)? {
        return Err(missing(index, part));
    }
    Ok(())
}

/// Appends the bytes of both parts of a `"left right"` merge the fast path left
/// alone, and returns the left part's length.
fn joined_parts(scan: &mut Scan<'_>, out: &mut Vec<u8>, index: usize) -> Result<usize, String> {
    let both = scan.string()?;
    let Some(space) = both.raw.iter().position(|&b| b == b' ') else {
        return Err(format!(
            "merge {index} ({:?}) is not two tokens",
            text_of(both)
        ));
    };
    let part = |raw| RawStr {
        raw,
        escaped: both.escaped,
    };
    let (left, right) = (part(&both.raw[..space]), part(&both.raw[space + 1..]));
    let start = out.len();
    if !decode_into(left, out)? {
        return Err(missing(index, left));
    }
    let left_len = out.len() - start;
    if !decode_into(right, out)? {
        return Err(missing(index, right));
    }
    Ok(left_len)
}

/// The `merges` array, each merge's two parts decoded into bytes.
#[derive(Default)]
pub(crate) struct MergesText {
    /// Every merge's two parts, concatenated.
    bytes: Vec<u8>,
    /// (end of the joined bytes, length of the left part), in merge order.
    parts: Vec<(u32, u32)>,
}

impl MergesText {
    /// Reads the `merges` array at the scan: `"left right"` strings or `[left, right]`
    /// pairs. A part that is not byte-level is no token: refused, as HuggingFace
    /// refuses a merge of a part not in its vocabulary.
    pub(crate) fn read(scan: &mut Scan<'_>) -> Result<MergesText, String> {
        let mut merges = MergesText {
            bytes: Vec::with_capacity(1 << 20),
            parts: Vec::with_capacity(1 << 17),
        };
        scan.array(|scan| {
            let index = merges.parts.len();
            let start = merges.bytes.len();
            let left_len = if scan.at_array() {
                let mut left_len = None;
                let mut n = 0;
                scan.array(|scan| {
                    n += 1;
                    if n > 2 {
                        return Err(format!("merge {index} is not a pair of tokens"));
                    }
                    token_part(scan, &mut merges.bytes, index)?;
                    if n == 1 {
                        left_len = Some(merges.bytes.len() - start);
                    }
                    Ok(())
                })?;
                match (n, left_len) {
                    (2, Some(left_len)) => left_len,
                    _ => return Err(format!("merge {index} is not a pair of tokens")),
                }
            } else {
                match plain_token(scan, &mut merges.bytes, true) {
                    Plain::Decoded { space: Some(space) } => space,
                    Plain::Decoded { space: None } => {
                        merges.bytes.truncate(start);
                        return Err(format!("merge {index} is not two tokens"));
                    }
                    Plain::Other => joined_parts(scan, &mut merges.bytes, index)?,
                }
            };
            let end = u32::try_from(merges.bytes.len()).map_err(|_| "too many merges")?;
            merges.parts.push((end, left_len as u32));
            Ok(())
        })?;
        Ok(merges)
    }

    /// The merges against the tokens of `ranks`: a merge whose parts or result are not
    /// tokens is refused, as HuggingFace refuses it. A second thread checks the parts of
    /// the first three quarters of the merges while this one finds the merged tokens,
    /// builds the table and checks the rest (each check is a lookup in a table of a few
    /// megabytes, most of its cost a cache miss): the two take about as long.
    pub(crate) fn resolve(&self, ranks: &Ranks, ignore_merges: bool) -> Result<PairMerges, String> {
        let split = self.parts.len() / 4 * 3;
        std::thread::scope(|scope| {
            let first = scope.spawn(|| self.check_parts(ranks, 0..split));
            let merges = self
                .joined_ids(ranks)
                .map(|listed| PairMerges::new(ranks.len(), listed, ignore_merges));
            let rest = self.check_parts(ranks, split..self.parts.len());
            // A thread that cannot be joined panicked: check its part again here.
            let first = first
                .join()
                .unwrap_or_else(|_| self.check_parts(ranks, 0..split));
            first?;
            rest?;
            merges
        })
    }

    /// Each merge with its bytes split into its two parts.
    fn each(&self) -> impl Iterator<Item = (usize, &[u8], u32)> + '_ {
        let mut start = 0usize;
        self.parts
            .iter()
            .enumerate()
            .map(move |(index, &(end, left_len))| {
                let joined = &self.bytes[start..end as usize];
                start = end as usize;
                (index, joined, left_len)
            })
    }

    /// Checks that both parts of the merges at `indices` are tokens.
    fn check_parts(&self, ranks: &Ranks, indices: std::ops::Range<usize>) -> Result<(), String> {
        let merges = || {
            self.each()
                .skip(indices.start)
                .take(indices.end - indices.start)
        };
        let parts = merges().flat_map(|(_, joined, left_len)| {
            let (left, right) = joined.split_at(left_len as usize);
            // Every byte is a token (the vocabulary was checked for it).
            [left, right].into_iter().filter(|part| part.len() != 1)
        });
        let Some(missing) = ranks.first_missing(parts) else {
            return Ok(());
        };
        // Rare: find which merge it was, for the message.
        let index = merges()
            .find(|&(_, joined, left_len)| {
                let (left, right) = joined.split_at(left_len as usize);
                left == missing || right == missing
            })
            .map_or(0, |(index, _, _)| index);
        Err(format!(
            "merge {index} names {:?}, which is not in the vocabulary",
            spelled(missing)
        ))
    }

    /// `(joined token id, left part's length, merge index)` of every merge.
    fn joined_ids(&self, ranks: &Ranks) -> Result<Vec<(u32, u32, u32)>, String> {
        let vocab = ranks.vocab();
        let mut listed: Vec<(u32, u32, u32)> = Vec::with_capacity(self.parts.len());
        // The token the previous merge made: merges mostly list tokens in id order,
        // each once (GPT-2, Qwen) or under each of its splits in turn (Llama 3).
        let mut last = 0u32;
        for (index, joined, left_len) in self.each() {
            let is = |id: u32| (id as usize) < vocab.len() && same_bytes(vocab.token(id), joined);
            let id = if is(last + 1) {
                last + 1
            } else if is(last) {
                last
            } else {
                ranks.rank(joined)
            };
            if id == NO_RANK {
                return Err(format!(
                    "merge {index} names {:?}, which is not in the vocabulary",
                    spelled(joined)
                ));
            }
            last = id;
            listed.push((id, left_len, index as u32));
        }
        Ok(listed)
    }
}
