//! The byte-level BPE model of a `tokenizer.json`: its `vocab` object and `merges`
//! array decoded straight from the JSON text into the engine's tables.
//!
//! These two values are nearly all of a file (10 MB for 150,000 tokens), so each is
//! read in one pass with no string allocated: every vocabulary key is decoded from
//! GPT-2's printable characters into its bytes directly inside the concatenated byte
//! table. A merge list usually follows the vocabulary's id order (the merge at index
//! `i` makes the token after the one merge `i - 1` made, or the same token split
//! elsewhere), so each merge's JSON text is first compared, a word at a time, with the
//! spelling of those two tokens: a merge that matches is never decoded, its token is
//! known without a lookup, and its parts are the token's bytes. Any other merge is
//! decoded into one scratch buffer and looked up in the rank table.

use rustc_hash::FxHashSet;

use super::bpe::{same_bytes, word8, Ranks, NO_RANK};
use super::json_scan::{self, RawStr, Scan};
use super::merges::{PairMerges, PairMergesBuilder};
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

/// Decodes the byte-level string at the scan in the same pass as it checks it — a
/// vocabulary is mostly strings of a few bytes, where a second pass would cost as much
/// as the decoding. With `split`, one space (the separator of a `"left right"` merge)
/// is allowed and its position in the decoded bytes is returned.
///
/// The string ends at the first quote: one that an escape makes part of it comes after
/// the escape's backslash, which is left to the general decoder. The bytes are written
/// into room made for them first (a string never decodes to more bytes than it has),
/// so that the loop keeps its positions in registers rather than a `Vec`'s length.
#[inline]
fn plain_token(scan: &mut Scan<'_>, out: &mut Vec<u8>, split: bool) -> Result<Plain, String> {
    let Some(rest) = scan.string_ahead()? else {
        return Ok(Plain::Other);
    };
    let Some(len) = memchr::memchr(b'"', rest) else {
        return Ok(Plain::Other);
    };
    let raw = &rest[..len];
    let start = out.len();
    out.resize(start + len, 0);
    let dst = &mut out[start..];
    let mut space = None;
    let (mut i, mut o) = (0, 0);
    while let Some(&b) = raw.get(i) {
        if (33..=126).contains(&b) && b != b'\\' {
            dst[o] = b;
            o += 1;
            i += 1;
        } else if b == b' ' && split && space.is_none() {
            space = Some(o);
            i += 1;
        } else if (0xC2..=0xC5).contains(&b) && raw.get(i + 1).is_some_and(|&n| n & 0xC0 == 0x80) {
            let c = (usize::from(b & 0x1F) << 6) | usize::from(raw[i + 1] & 0x3F);
            match BYTE_OF_CHAR.get(c) {
                Some(&v) if v > 0 => dst[o] = (v - 1) as u8,
                _ => break,
            }
            o += 1;
            i += 2;
        } else {
            break;
        }
    }
    if i < len {
        out.truncate(start);
        return Ok(Plain::Other);
    }
    out.truncate(start + o);
    scan.consume(len + 2);
    Ok(Plain::Decoded { space })
}

/// Decodes the body of a plain byte-level string, `text[i..]` up to its closing quote,
/// onto `out`, and returns where the quote ends; `None` (with `out` past its old length
/// in an unspecified state) at anything else: an escape, a control character, a
/// character that is not byte-level, a second space. With `split`, one space (the
/// separator of a `"left right"` merge) is allowed and its position in the bytes
/// appended is set in `space`.
///
/// What it accepts is valid JSON and decodes as [`decode_into`] decodes it: printable
/// ASCII stands for itself, and every other byte-level character is two bytes of UTF-8
/// (lead byte 0xC2 to 0xC5). Strings are a few bytes long, so a byte loop beats a
/// search for the quote first.
#[inline(always)]
fn plain_body(
    text: &[u8],
    mut i: usize,
    out: &mut Vec<u8>,
    split: bool,
    space: &mut Option<usize>,
) -> Option<usize> {
    let start = out.len();
    loop {
        let b = *text.get(i)?;
        if b == b'"' {
            return Some(i + 1);
        }
        if (33..=126).contains(&b) && b != b'\\' {
            out.push(b);
            i += 1;
        } else if (0xC2..=0xC5).contains(&b) {
            let next = *text.get(i + 1)?;
            if next & 0xC0 != 0x80 {
                return None;
            }
            let c = (usize::from(b & 0x1F) << 6) | usize::from(next & 0x3F);
            match BYTE_OF_CHAR.get(c) {
                Some(&v) if v > 0 => out.push((v - 1) as u8),
                _ => return None,
            }
            i += 2;
        } else if b == b' ' && split && space.is_none() {
            *space = Some(out.len() - start);
            i += 1;
        } else {
            return None;
        }
    }
}

/// Where the JSON whitespace at `text[i..]` ends (see [`json_scan::space_end`]).
#[inline(always)]
fn after_space(text: &[u8], i: usize) -> usize {
    json_scan::space_end(text, i)
}

/// One merge in either common form, `"left right"` or `["left", "right"]`, with plain
/// byte-level parts, at the start of `rest`: its bytes are appended to `out`, and how
/// much of `rest` it took and the left part's length returned. `None` (nothing
/// appended) for anything else, which the general reader reads or refuses.
#[inline]
fn plain_merge(rest: &[u8], out: &mut Vec<u8>) -> Option<(usize, usize)> {
    let start = out.len();
    let found = (|| {
        let mut space = None;
        match rest.first()? {
            b'"' => {
                let end = plain_body(rest, 1, out, true, &mut space)?;
                Some((end, space?))
            }
            b'[' => {
                let i = after_space(rest, 1);
                (rest.get(i)? == &b'"').then_some(())?;
                let i = plain_body(rest, i + 1, out, false, &mut space)?;
                let left = out.len() - start;
                let i = after_space(rest, i);
                (rest.get(i)? == &b',').then_some(())?;
                let i = after_space(rest, i + 1);
                (rest.get(i)? == &b'"').then_some(())?;
                let i = plain_body(rest, i + 1, out, false, &mut space)?;
                let i = after_space(rest, i);
                (rest.get(i)? == &b']').then_some((i + 1, left))
            }
            _ => None,
        }
    })();
    if found.is_none() {
        out.truncate(start);
    }
    found
}

/// One vocabulary entry `"key": id` with a plain byte-level key at the start of `rest`:
/// the key's bytes are appended to `out`, and how much of `rest` it took and the id
/// returned. `None` (nothing appended) for anything else, which the general reader
/// reads or refuses (an id is read here only in the form [`Scan::u32`] accepts).
#[inline]
fn plain_entry(rest: &[u8], out: &mut Vec<u8>) -> Option<(usize, u32)> {
    let start = out.len();
    let found = (|| {
        (rest.first()? == &b'"').then_some(())?;
        let i = plain_body(rest, 1, out, false, &mut None)?;
        let i = after_space(rest, i);
        (rest.get(i)? == &b':').then_some(())?;
        let mut i = after_space(rest, i + 1);
        let digits = i;
        let mut id: u64 = 0;
        while let Some(&b) = rest.get(i).filter(|b| b.is_ascii_digit()) {
            id = id * 10 + u64::from(b - b'0');
            i += 1;
            if i - digits > 10 {
                return None;
            }
        }
        // What follows the digits must be at hand: a number cut by the end of the bytes
        // read so far goes to the general reader, which reads on.
        let after = *rest.get(i)?;
        let plain_number = i > digits
            && (i - digits == 1 || rest[digits] != b'0')
            && !matches!(after, b'.' | b'e' | b'E');
        let id = u32::try_from(id).ok().filter(|_| plain_number)?;
        Some((i, id))
    })();
    if found.is_none() {
        out.truncate(start);
    }
    found
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
pub(crate) struct VocabText {
    /// Every kept key's bytes, concatenated in the file's order.
    bytes: Vec<u8>,
    /// `bytes[starts[k]..starts[k + 1]]` is the `k`th kept key: in a file that lists
    /// its tokens in id order, already the table's `starts`.
    starts: Vec<u32>,
    /// The file's id of each kept key, once they stop being consecutive: until then
    /// (in every file HuggingFace writes, to the end) the `k`th kept key's id is
    /// `first + k`, and the table of ids is not written (its pages cost more than the
    /// check).
    ids: Option<Vec<u32>>,
    /// The id of the first kept key.
    first: u32,
}

impl VocabText {
    /// Reads the `vocab` object at the scan. A key that is not byte-level is left out:
    /// no byte sequence can spell it.
    pub(crate) fn read(scan: &mut Scan<'_>) -> Result<VocabText, String> {
        // Room for any vocabulary of a file this size (pages never written cost
        // nothing), so that neither table is copied as it grows.
        let room = scan.len_left();
        let mut vocab = VocabText {
            bytes: Vec::with_capacity(room.min(1 << 23)),
            starts: Vec::with_capacity((room / 4).min(1 << 21) + 1),
            ids: None,
            first: 0,
        };
        vocab.starts.push(0);
        scan.members(|scan| {
            let start = vocab.bytes.len();
            let (byte_level, id) = match plain_entry(scan.rest()?, &mut vocab.bytes) {
                Some((n, id)) => {
                    scan.consume(n);
                    (true, id)
                }
                None => {
                    let byte_level = match plain_token(scan, &mut vocab.bytes, false)? {
                        Plain::Decoded { .. } => true,
                        Plain::Other => {
                            let key = scan.string()?;
                            decode_into(key, &mut vocab.bytes)?
                        }
                    };
                    scan.colon()?;
                    (byte_level, scan.u32()?)
                }
            };
            if !byte_level {
                vocab.bytes.truncate(start);
                return Ok(());
            }
            if vocab.bytes.len() == start {
                return Err(format!("token {id} is empty"));
            }
            let end =
                u32::try_from(vocab.bytes.len()).map_err(|_| "the vocabulary is too large")?;
            vocab.starts.push(end);
            vocab.push_id(id);
            Ok(())
        })?;
        Ok(vocab)
    }

    /// Notes the id of the key just kept.
    #[inline]
    fn push_id(&mut self, id: u32) {
        let k = self.starts.len() - 2;
        match &mut self.ids {
            Some(ids) => ids.push(id),
            None if k == 0 => self.first = id,
            None if u64::from(self.first) + k as u64 == u64::from(id) => {}
            None => {
                let mut ids: Vec<u32> = (0..k as u32).map(|j| self.first + j).collect();
                ids.push(id);
                self.ids = Some(ids);
            }
        }
    }

    /// The byte-level tokens in id order, the ids in `added` left out (added tokens are
    /// matched in the text, never merged).
    pub(crate) fn into_vocab(self, added: &FxHashSet<u32>) -> Result<Vocab, String> {
        let kept = self.starts.len() - 1;
        let VocabText {
            bytes,
            starts,
            ids,
            first,
        } = self;
        let (in_order, keeps_all) = match &ids {
            Some(ids) => (
                ids.windows(2).all(|w| w[0] < w[1]),
                added.is_empty() || !ids.iter().any(|id| added.contains(id)),
            ),
            None => {
                let end = u64::from(first) + kept as u64;
                let within = |&id: &u32| (u64::from(first)..end).contains(&u64::from(id));
                (true, !added.iter().any(within))
            }
        };
        let vocab = if in_order && keeps_all {
            Vocab { bytes, starts }
        } else {
            let ids = ids.unwrap_or_else(|| (0..kept as u32).map(|k| first + k).collect());
            // A file that lists its vocabulary out of id order, or with added tokens in it.
            let mut kept: Vec<(u32, u32, u32)> = Vec::with_capacity(ids.len());
            for (k, &id) in ids.iter().enumerate() {
                if !added.contains(&id) {
                    kept.push((id, starts[k], starts[k + 1]));
                }
            }
            kept.sort_unstable_by_key(|&(id, start, _)| (id, start));
            let mut sorted = Vec::with_capacity(bytes.len());
            let mut starts = Vec::with_capacity(kept.len() + 1);
            starts.push(0);
            for (_, start, end) in kept {
                sorted.extend_from_slice(&bytes[start as usize..end as usize]);
                starts.push(sorted.len() as u32);
            }
            Vocab {
                bytes: sorted,
                starts,
            }
        };
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
    if let Plain::Decoded { .. } = plain_token(scan, out, false)? {
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

/// Merges read per chunk before they are checked: enough for the lookups of a chunk
/// to overlap their cache misses, few enough that a chunk stays in cache.
const CHUNK: usize = 4096;

/// A token as a merge list writes it: GPT-2's printable characters, unescaped, in
/// JSON (see [`Spelling::of`]); a merge making it is this spelling with a space, or
/// `", "`, at the split.
struct Spelling {
    /// The token's id ([`NO_RANK`]: none, or one that cannot be spelled here).
    id: u32,
    /// The characters' UTF-8: `raw[..len]`, then at least [`PAD`] bytes of room
    /// (kept between tokens).
    raw: Vec<u8>,
    /// Bytes of `raw` in use.
    len: usize,
    /// Whether `raw` is the spelling of `id` (cleared when `id` moves on).
    ready: bool,
}

/// The printable character of each byte (see [`BYTE_OF_CHAR`]) as UTF-8, its first
/// byte in the low 8 bits (one byte for ASCII, two otherwise); 0 for `"` and `\`,
/// which JSON escapes.
const SPELL: [u16; 256] = {
    let mut map = [0u16; 256];
    let mut c = 0usize;
    while c < BYTE_CHARS {
        if BYTE_OF_CHAR[c] > 0 && c != b'"' as usize && c != b'\\' as usize {
            let b = BYTE_OF_CHAR[c] as usize - 1;
            map[b] = if c < 0x80 {
                c as u16
            } else {
                (0xC0 | (c >> 6) as u16) | (0x80 | (c & 0x3F) as u16) << 8
            };
        }
        c += 1;
    }
    map
};

/// Bytes past the end of a spelling kept readable, so that it is compared a word at
/// a time.
const PAD: usize = 8;

impl Spelling {
    /// No token spelled yet.
    fn new() -> Spelling {
        Spelling {
            id: NO_RANK,
            raw: Vec::new(),
            len: 0,
            ready: false,
        }
    }

    /// Spells token `id` of `vocab`: `false` (and nothing to compare) if it names no
    /// token or its spelling needs a JSON escape (a `"` or `\`, left to the decoder).
    #[inline(always)]
    fn of(&mut self, vocab: &Vocab, id: u32) -> bool {
        if self.id == id {
            return self.ready;
        }
        self.spell(vocab, id)
    }

    /// [`Spelling::of`] a token not spelled yet.
    #[inline(never)]
    fn spell(&mut self, vocab: &Vocab, id: u32) -> bool {
        self.id = id;
        self.ready = false;
        if id as usize >= vocab.len() {
            return false;
        }
        let token = vocab.token(id);
        // Each character written as two bytes, the second overwritten by the next
        // one when the character takes one.
        let room = 2 * token.len() + PAD;
        if self.raw.len() < room {
            self.raw.resize(room, 0);
        }
        let mut o = 0;
        let mut escaped = false;
        for &b in token {
            let code = SPELL[usize::from(b)];
            escaped |= code == 0;
            self.raw[o..o + 2].copy_from_slice(&code.to_le_bytes());
            o += 1 + usize::from(code > 0xFF);
        }
        self.len = o;
        self.ready = !escaped;
        self.ready
    }

    /// The merge at the start of `rest`, if it is written exactly as this token split
    /// in two at a character: `"left right"` or `["left", "right"]` (JSON whitespace
    /// around the brackets and the comma), each part plain (unescaped) UTF-8. Returns
    /// how much of `rest` it took and the left part's length in bytes.
    ///
    /// What matches is valid JSON that decodes (as [`plain_merge`] decodes it) to this
    /// token's bytes split there: the spelling holds no quote, backslash, space or
    /// control character, and is split only where a character starts.
    #[inline(always)]
    fn split_in(&self, rest: &[u8]) -> Option<(usize, u32)> {
        let (d, taken) = match rest.first()? {
            b'"' => {
                let d = self.first_part(&rest[1..], b' ')?;
                (d, self.second_part(rest, 1 + d + 1, d)?)
            }
            b'[' => {
                let i = after_space(rest, 1);
                (rest.get(i)? == &b'"').then_some(())?;
                let d = self.first_part(rest.get(i + 1..)?, b'"')?;
                let i = after_space(rest, i + 1 + d + 1);
                (rest.get(i)? == &b',').then_some(())?;
                let i = after_space(rest, i + 1);
                (rest.get(i)? == &b'"').then_some(())?;
                let i = after_space(rest, self.second_part(rest, i + 1, d)?);
                (rest.get(i)? == &b']').then_some(())?;
                (d, i + 1)
            }
            _ => return None,
        };
        Some((taken, chars_before(&self.raw, d) as u32))
    }

    /// Where the first part of a merge, `body` on, ends (at `stop`): after a whole
    /// character of the spelling, neither none of it nor all of it.
    #[inline(always)]
    fn first_part(&self, body: &[u8], stop: u8) -> Option<usize> {
        let d = common_prefix(body, &self.raw, self.len);
        let boundary = d > 0 && d < self.len && self.raw[d] & 0xC0 != 0x80;
        (boundary && body.get(d) == Some(&stop)).then_some(d)
    }

    /// Where the second part of a merge, `rest[i..]` on, ends: the spelling from `d`
    /// on and a closing quote.
    #[inline(always)]
    fn second_part(&self, rest: &[u8], i: usize, d: usize) -> Option<usize> {
        let n = self.len - d;
        let tail = rest.get(i..)?;
        (common_prefix(tail, &self.raw[d..], n) == n && tail.get(n) == Some(&b'"'))
            .then_some(i + n + 1)
    }
}

/// Characters in `raw[..d]` (valid UTF-8 of one- and two-byte characters, read a
/// word at a time: `raw` has at least [`PAD`] bytes past `d`).
#[inline(always)]
fn chars_before(raw: &[u8], d: usize) -> usize {
    let mut continuations = 0;
    let mut i = 0;
    while i < d {
        let w = word8(raw, i);
        // The top bit of each byte of the form 0b10xx_xxxx.
        let marks = w & !(w << 1) & 0x8080_8080_8080_8080;
        let keep = if d - i >= 8 {
            u64::MAX
        } else {
            (1u64 << (8 * (d - i))) - 1
        };
        continuations += (marks & keep).count_ones() as usize;
        i += 8;
    }
    d - continuations
}

/// How many of the first `n` bytes `a` and `b` have in common (`b` has at least
/// `n` bytes and [`PAD`] more): a word at a time.
#[inline(always)]
fn common_prefix(a: &[u8], b: &[u8], n: usize) -> usize {
    let mut i = 0;
    if a.len() >= n + PAD {
        while i < n {
            let diff = word8(a, i) ^ word8(b, i);
            if diff != 0 {
                return (i + (diff.trailing_zeros() / 8) as usize).min(n);
            }
            i += 8;
        }
        return n;
    }
    // The end of the text: byte by byte.
    while i < n && i < a.len() && a[i] == b[i] {
        i += 1;
    }
    i
}

/// The `merges` array, each merge's two parts decoded into bytes: a chunk of it at a
/// time when the vocabulary is known by the time the merges come (as in every file
/// HuggingFace writes), the whole of it otherwise.
#[derive(Default)]
pub(crate) struct MergesText {
    /// Every merge's two parts, concatenated (none for a merge whose token is known:
    /// its bytes are the token's).
    bytes: Vec<u8>,
    /// (end of the joined bytes, length of the left part), in merge order.
    parts: Vec<(u32, u32)>,
    /// The token each merge makes ([`NO_RANK`]: none), when the merges are resolved as
    /// they are read; empty otherwise.
    ids: Vec<u32>,
}

impl MergesText {
    /// Reads the whole `merges` array at the scan: `"left right"` strings or
    /// `[left, right]` pairs. A part that is not byte-level is no token: refused, as
    /// HuggingFace refuses a merge of a part not in its vocabulary.
    pub(crate) fn read(scan: &mut Scan<'_>) -> Result<MergesText, String> {
        let mut merges = MergesText {
            bytes: Vec::with_capacity(1 << 20),
            parts: Vec::with_capacity(1 << 17),
            ids: Vec::new(),
        };
        merges.read_with(scan, |_| None, |_| {})?;
        Ok(merges)
    }

    /// Reads the `merges` array at the scan as [`MergesText::read`] does, each chunk of
    /// it resolved against `ranks` as soon as it is read (and then dropped).
    ///
    /// A merge list usually follows the vocabulary's id order (the merge at index `i`
    /// makes the token after the one merge `i - 1` made, or the same one split
    /// elsewhere), so each merge's text is first compared with the spelling of those
    /// two tokens (see [`Spelling::split_in`]): nothing is decoded, and the token's id
    /// is known without a lookup. Any other merge is decoded and looked up.
    ///
    /// Each chunk read is checked (its parts looked up, its splits listed) on a second
    /// thread while this one reads the next: the two halves of the work take about as
    /// long each. Without a thread to be had, the chunks are checked here in turn.
    pub(crate) fn read_resolving(
        scan: &mut Scan<'_>,
        ranks: &Ranks,
    ) -> Result<MergeResolver, String> {
        std::thread::scope(|threads| {
            // Chunks go to a second thread as they are read, which checks them and
            // lists their splits while this one reads on, and hands them back to be
            // filled again.
            let (full, to_check) = std::sync::mpsc::sync_channel::<MergesText>(2);
            let (checked, empty) = std::sync::mpsc::channel::<MergesText>();
            // Made here, with all the room it needs: the thread allocates nothing.
            let mut resolver = MergeResolver::new(ranks);
            resolver.spans.reserve(2 * CHUNK);
            let worker = std::thread::Builder::new()
                .name("ctxbudget-merges".to_owned())
                .spawn_scoped(threads, move || {
                    for chunk in to_check {
                        resolver.feed(&chunk, ranks);
                        // The reader may have finished: then the chunk is dropped.
                        let _ = checked.send(chunk);
                    }
                    resolver
                });
            let mut inline = match worker {
                Ok(_) => None,
                // No thread to be had: the chunks are checked here.
                Err(_) => Some(MergeResolver::new(ranks)),
            };
            let read = MergesText::read_chunks(scan, ranks, |chunk| match &mut inline {
                Some(resolver) => {
                    resolver.feed(chunk, ranks);
                    chunk.clear();
                }
                None => {
                    let fresh = empty.try_recv().map_or_else(
                        |_| MergesText::chunk(),
                        |mut c| {
                            c.clear();
                            c
                        },
                    );
                    // A send fails only if the thread panicked, which `join` reports.
                    let _ = full.send(std::mem::replace(chunk, fresh));
                }
            });
            drop(full);
            let resolver = match (inline, worker) {
                (Some(resolver), _) => resolver,
                (None, Ok(worker)) => match worker.join() {
                    Ok(resolver) => resolver,
                    Err(panic) => std::panic::resume_unwind(panic),
                },
                (None, Err(_)) => MergeResolver::new(ranks),
            };
            read.map(|()| resolver)
        })
    }

    /// An empty chunk, with room for [`CHUNK`] merges.
    fn chunk() -> MergesText {
        MergesText {
            bytes: Vec::with_capacity(CHUNK * 16),
            parts: Vec::with_capacity(CHUNK),
            ids: Vec::with_capacity(CHUNK),
        }
    }

    /// Empties a chunk, keeping its room.
    fn clear(&mut self) {
        self.bytes.clear();
        self.parts.clear();
        self.ids.clear();
    }

    /// Reads the `merges` array at the scan for [`MergesText::read_resolving`],
    /// handing each chunk of [`CHUNK`] merges (and the last, shorter one) to `full`,
    /// which leaves an empty chunk in its place.
    fn read_chunks(
        scan: &mut Scan<'_>,
        ranks: &Ranks,
        mut full: impl FnMut(&mut MergesText),
    ) -> Result<(), String> {
        let vocab = ranks.vocab();
        let mut chunk = MergesText::chunk();
        // The spellings of the token the last merge made and of the one after it.
        let last = std::cell::Cell::new(0u32);
        let (mut same, mut next) = (Spelling::new(), Spelling::new());
        // Parts are located by offsets below 2^31 (see `first_missing_part`).
        let spellable = vocab.bytes.len() < 1 << 31;
        chunk.read_with(
            scan,
            |rest| {
                if !spellable {
                    return None;
                }
                if next.of(vocab, last.get().wrapping_add(1)) {
                    if let Some((n, left)) = next.split_in(rest) {
                        last.set(next.id);
                        std::mem::swap(&mut same, &mut next);
                        return Some((n, same.id, left));
                    }
                }
                if same.of(vocab, last.get()) {
                    if let Some((n, left)) = same.split_in(rest) {
                        return Some((n, same.id, left));
                    }
                }
                None
            },
            |chunk| {
                let k = chunk.parts.len() - 1;
                if chunk.ids.len() == k {
                    // Decoded: found as the resolver once found every merge.
                    let from = k.checked_sub(1).map_or(0, |j| chunk.parts[j].0 as usize);
                    let joined = &chunk.bytes[from..chunk.parts[k].0 as usize];
                    let is = |id: u32| {
                        (id as usize) < vocab.len() && same_bytes(vocab.token(id), joined)
                    };
                    let id = if is(last.get().wrapping_add(1)) {
                        last.get() + 1
                    } else if is(last.get()) {
                        last.get()
                    } else {
                        ranks.rank(joined)
                    };
                    if id != NO_RANK {
                        last.set(id);
                    }
                    chunk.ids.push(id);
                }
                if chunk.parts.len() == CHUNK {
                    full(chunk);
                }
            },
        )?;
        full(&mut chunk);
        Ok(())
    }

    /// Reads the merges, calling `read` after each one. `known` is asked first about
    /// each merge's text: a merge it knows (how much text it took, the token it makes,
    /// the left part's length) is not decoded.
    fn read_with(
        &mut self,
        scan: &mut Scan<'_>,
        mut known: impl FnMut(&[u8]) -> Option<(usize, u32, u32)>,
        mut read: impl FnMut(&mut MergesText),
    ) -> Result<(), String> {
        let mut index = 0usize;
        scan.array(|scan| {
            let start = self.bytes.len();
            let rest = scan.rest()?;
            let left_len = if let Some((n, id, left_len)) = known(rest) {
                scan.consume(n);
                self.ids.push(id);
                left_len as usize
            } else if let Some((n, left_len)) = plain_merge(rest, &mut self.bytes) {
                scan.consume(n);
                left_len
            } else if scan.at_array()? {
                let mut left_len = None;
                let mut n = 0;
                scan.array(|scan| {
                    n += 1;
                    if n > 2 {
                        return Err(format!("merge {index} is not a pair of tokens"));
                    }
                    token_part(scan, &mut self.bytes, index)?;
                    if n == 1 {
                        left_len = Some(self.bytes.len() - start);
                    }
                    Ok(())
                })?;
                match (n, left_len) {
                    (2, Some(left_len)) => left_len,
                    _ => return Err(format!("merge {index} is not a pair of tokens")),
                }
            } else {
                match plain_token(scan, &mut self.bytes, true)? {
                    Plain::Decoded { space: Some(space) } => space,
                    Plain::Decoded { space: None } => {
                        self.bytes.truncate(start);
                        return Err(format!("merge {index} is not two tokens"));
                    }
                    Plain::Other => joined_parts(scan, &mut self.bytes, index)?,
                }
            };
            let end = u32::try_from(self.bytes.len()).map_err(|_| "too many merges")?;
            self.parts.push((end, left_len as u32));
            index += 1;
            read(self);
            Ok(())
        })
    }

    /// The merges against the tokens of `ranks`: a merge whose parts or result are not
    /// tokens is refused, as HuggingFace refuses it.
    pub(crate) fn resolve(&self, ranks: &Ranks, ignore_merges: bool) -> Result<PairMerges, String> {
        let mut resolver = MergeResolver::new(ranks);
        resolver.feed(self, ranks);
        resolver.finish(ignore_merges)
    }

    /// Where merge `k`'s bytes lie, its bytes in `bytes` starting at `start` (where
    /// merge `k - 1`'s end): `(in vocab.bytes, from, to)` — a known token's are the
    /// vocabulary's.
    #[inline(always)]
    fn span(&self, vocab: &Vocab, k: usize, start: usize) -> (bool, usize, usize) {
        let end = self.parts[k].0 as usize;
        match self.ids.get(k) {
            Some(&id) if end == start && (id as usize) < vocab.len() => {
                let i = id as usize;
                (true, vocab.starts[i] as usize, vocab.starts[i + 1] as usize)
            }
            _ => (false, start, end),
        }
    }

    /// Merge `k`'s bytes and the length of its left part (see [`MergesText::span`]).
    #[inline(always)]
    fn merge<'s>(&'s self, vocab: &'s Vocab, k: usize, start: usize) -> (&'s [u8], u32) {
        let (in_vocab, from, to) = self.span(vocab, k, start);
        let bytes = if in_vocab { &vocab.bytes } else { &self.bytes };
        (&bytes[from..to], self.parts[k].1)
    }

    /// Each merge's bytes and the length of its left part (see [`MergesText::merge`]).
    fn each<'s>(&'s self, vocab: &'s Vocab) -> impl Iterator<Item = (&'s [u8], u32)> + 's {
        let mut start = 0usize;
        (0..self.parts.len()).map(move |k| {
            let merge = self.merge(vocab, k, start);
            start = self.parts[k].0 as usize;
            merge
        })
    }

    /// Notes where merge `index`'s parts lie (from `from` to `to` in `bytes`, split
    /// `left_len` bytes in), for [`MergesText::first_missing_part`]: a part of two
    /// bytes is looked up at once, in the table of byte pairs (`false` if it is not a
    /// token), a longer one is listed in `spans` (see there).
    #[inline(always)]
    fn note_parts(
        ranks: &Ranks,
        bytes: &[u8],
        in_vocab: bool,
        (from, to, left_len): (usize, usize, u32),
        spans: &mut Vec<(u32, u32)>,
    ) -> bool {
        let middle = from + left_len as usize;
        let mut found = true;
        for (a, b) in [(from, middle), (middle, to)] {
            match b - a {
                1 => {}
                2 => found &= ranks.rank(&bytes[a..b]) != NO_RANK,
                _ => spans.push((a as u32 | u32::from(in_vocab) << 31, b as u32)),
            }
        }
        found
    }

    /// The index (in this text) of the first merge with a part that is not a token,
    /// and that part (its left one if both are not). Every byte is a token (the
    /// vocabulary was checked for it); `short` is the first merge with a part of two
    /// bytes that is not one, and `spans` lists where the longer parts of the merges
    /// before it (and its own) lie: `(from, to)` in `self.bytes`, or in `vocab.bytes`
    /// with `from`'s top bit set. They are looked up in batches.
    fn first_missing_part<'s>(
        &'s self,
        ranks: &'s Ranks,
        spans: &[(u32, u32)],
        short: Option<usize>,
    ) -> Option<(usize, &'s [u8])> {
        let vocab = ranks.vocab();
        let long = spans.iter().map(|&(from, to)| {
            let bytes = if from >> 31 == 1 {
                &vocab.bytes
            } else {
                &self.bytes
            };
            &bytes[(from & !(1 << 31)) as usize..to as usize]
        });
        let long = ranks.first_missing(long).and_then(|missing| {
            // Rare: find which merge it was.
            self.each(vocab).position(|(joined, left_len)| {
                let (left, right) = joined.split_at(left_len as usize);
                left == missing || right == missing
            })
        });
        let index = match (short, long) {
            (Some(a), Some(b)) => a.min(b),
            (a, b) => a.or(b)?,
        };
        let (joined, left_len) = self.each(vocab).nth(index)?;
        let (left, right) = joined.split_at(left_len as usize);
        [left, right]
            .into_iter()
            .find(|part| part.len() != 1 && ranks.rank(part) == NO_RANK)
            .map(|part| (index, part))
    }
}

/// The merge list as it is resolved against the vocabulary, chunk by chunk.
pub(crate) struct MergeResolver {
    /// The splits of each token, so far.
    table: PairMergesBuilder,
    /// Merges resolved so far.
    done: usize,
    /// The token the previous merge made: merges mostly list tokens in id order, each
    /// once (GPT-2, Qwen) or under each of its splits in turn (Llama 3).
    last: u32,
    /// The first merge with a part that is not a token.
    missing_part: Option<String>,
    /// The first merge whose joined parts are not a token.
    missing_joined: Option<String>,
    /// Scratch space: where the parts to look up lie in a chunk.
    spans: Vec<(u32, u32)>,
}

impl MergeResolver {
    /// A resolver against the tokens of `ranks`.
    fn new(ranks: &Ranks) -> MergeResolver {
        MergeResolver {
            table: PairMergesBuilder::new(ranks.len()),
            done: 0,
            last: 0,
            missing_part: None,
            missing_joined: None,
            spans: Vec::new(),
        }
    }

    /// Resolves the next merges: checks their parts, finds the token each makes
    /// (unless the text's reader knew it), and lists its split, in one pass.
    fn feed(&mut self, merges: &MergesText, ranks: &Ranks) {
        let vocab = ranks.vocab();
        // A part that is not a token refuses the list before a joined pair that is not
        // one does, wherever each is: once either is found, nothing more is listed.
        let check_parts = self.missing_part.is_none();
        let mut list = check_parts && self.missing_joined.is_none();
        let mut short = None;
        self.spans.clear();
        let mut start = 0;
        for index in 0..merges.parts.len() {
            let (in_vocab, from, to) = merges.span(vocab, index, start);
            start = merges.parts[index].0 as usize;
            let left_len = merges.parts[index].1;
            let bytes = if in_vocab {
                &vocab.bytes
            } else {
                &merges.bytes
            };
            if check_parts
                && short.is_none()
                && !MergesText::note_parts(
                    ranks,
                    bytes,
                    in_vocab,
                    (from, to, left_len),
                    &mut self.spans,
                )
            {
                short = Some(index);
            }
            if list {
                let joined = &bytes[from..to];
                let id = match merges.ids.get(index) {
                    Some(&id) => id,
                    None => {
                        let last = self.last;
                        let is = |id: u32| {
                            (id as usize) < vocab.len() && same_bytes(vocab.token(id), joined)
                        };
                        if is(last.wrapping_add(1)) {
                            last + 1
                        } else if is(last) {
                            last
                        } else {
                            ranks.rank(joined)
                        }
                    }
                };
                if id == NO_RANK {
                    self.missing_joined = Some(format!(
                        "merge {} names {:?}, which is not in the vocabulary",
                        self.done + index,
                        spelled(joined)
                    ));
                    list = false;
                } else {
                    self.last = id;
                    self.table.push(id, left_len, (self.done + index) as u32);
                }
            }
            if !list && (!check_parts || short.is_some()) {
                break;
            }
        }
        if check_parts {
            if let Some((index, part)) = merges.first_missing_part(ranks, &self.spans, short) {
                self.missing_part = Some(format!(
                    "merge {} names {:?}, which is not in the vocabulary",
                    self.done + index,
                    spelled(part)
                ));
            }
        }
        self.done += merges.parts.len();
    }

    /// The table, or why the merges are refused: a part that is not a token before
    /// a joined pair that is not one, as HuggingFace checks them.
    pub(crate) fn finish(self, ignore_merges: bool) -> Result<PairMerges, String> {
        if let Some(e) = self.missing_part.or(self.missing_joined) {
            return Err(e);
        }
        Ok(self.table.finish(ignore_merges))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The bytes a byte-level JSON string spells, decoded by `serde_json` and the map.
    fn spelled_bytes(part: &serde_json::Value) -> Option<Vec<u8>> {
        part.as_str()?
            .chars()
            .map(|c| match BYTE_OF_CHAR.get(c as usize) {
                Some(&v) if v > 0 => Some((v - 1) as u8),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn plain_merges_read_as_json_spells_them() {
        let plain = [
            r#""a b""#,
            r#""Ġ t""#,
            r#""ĠĠ ĠĠĠ""#,
            r#""é ÿ""#,
            r#""ab ""#,
            r#"["a","b"]"#,
            r#"[ "a" , "b" ]"#,
            "[\n        \"Ġ\",\n        \"t\"\n      ]",
            "[\t\"Ġ\",\r\n\"\"]",
        ];
        let other = [
            r#""ab""#,
            r#""a b c""#,
            r#""\u0061 b""#,
            r#"["a\"", "b"]"#,
            r#"["a"]"#,
            r#"["a", "b", "c"]"#,
            r#"["a b", "c"]"#,
            r#""ſ b""#,
            r#""中 b""#,
            r#""a	b""#,
            r#"["a", 1]"#,
            r#"{"a": "b"}"#,
            r#""a b"#,
        ];
        for text in plain {
            let mut out = vec![9];
            let found = plain_merge(text.as_bytes(), &mut out);
            let Some((n, left)) = found else {
                panic!("{text:?} is not read as plain");
            };
            assert_eq!(n, text.len(), "{text:?}");
            let value: serde_json::Value =
                serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}"));
            let (l, r) = match &value {
                serde_json::Value::Array(parts) => (
                    spelled_bytes(&parts[0]).unwrap_or_default(),
                    spelled_bytes(&parts[1]).unwrap_or_default(),
                ),
                serde_json::Value::String(s) => {
                    let (l, r) = s.split_once(' ').unwrap_or_default();
                    (
                        spelled_bytes(&l.into()).unwrap_or_default(),
                        spelled_bytes(&r.into()).unwrap_or_default(),
                    )
                }
                _ => panic!("{text:?}"),
            };
            assert_eq!(left, l.len(), "{text:?}");
            assert_eq!(out, [&[9][..], &l, &r].concat(), "{text:?}");
        }
        for text in other {
            let mut out = vec![9];
            assert_eq!(plain_merge(text.as_bytes(), &mut out), None, "{text:?}");
            assert_eq!(out, [9], "{text:?}");
        }
    }

    /// A merge compared with a token's spelling is accepted exactly when the decoder
    /// reads it as that token split there.
    #[test]
    fn spelled_merges_read_as_the_decoder_reads_them() {
        let tokens: [&[u8]; 7] = [
            b"ab",
            b" t",
            b"  \n",
            &[0xE9, b'x', 0],
            b"a\"b",
            b"abcdefghijklmnopqrstu",
            &[0x80, 0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x88, b'z'],
        ];
        let vocab = Vocab::from_tokens(tokens).unwrap_or_else(|e| panic!("{e}"));
        let write = |bytes: &[u8]| spelled(bytes).replace('\\', "\\\\").replace('"', "\\\"");
        let mut spelling = Spelling::new();
        for (id, token) in tokens.iter().enumerate() {
            let spellable = spelling.of(&vocab, id as u32);
            assert_eq!(spellable, !token.contains(&b'"'), "{token:?}");
            for split in 0..=token.len() {
                let (l, r) = (write(&token[..split]), write(&token[split..]));
                let other = write(b"ab");
                let texts = [
                    format!(r#""{l} {r}","#),
                    format!("[\n  \"{l}\",\n  \"{r}\"\n ],"),
                    format!(r#"["{l}", "{r}"]"#),
                    format!(r#""{l}  {r}""#),
                    format!(r#""{l} {r}{other}""#),
                    format!(r#""{l}{other} {r}""#),
                    format!(r#"["{l}" "{r}"]"#),
                    format!(r#"["{l}", "{r}""#),
                    format!(r#""{l} {r}"#),
                    format!(r#""{l}\u0041 {r}""#),
                ];
                for text in texts {
                    for cut in [text.len(), text.len().saturating_sub(1), 3] {
                        let rest = &text.as_bytes()[..cut.min(text.len())];
                        let mut out = Vec::new();
                        let decoded = plain_merge(rest, &mut out)
                            .filter(|_| out == *token)
                            .map(|(n, left)| (n, left as u32));
                        let found = if spellable {
                            spelling.split_in(rest)
                        } else {
                            None
                        };
                        let expected = decoded.filter(|&(_, left)| {
                            spellable && left > 0 && (left as usize) < token.len()
                        });
                        assert_eq!(found, expected, "{token:?} {rest:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn plain_entries_read_as_the_general_reader_reads_them() {
        /// A key's bytes and its id, if the entry is read as plain.
        type Expected<'a> = Option<(&'a [u8], u32)>;
        let cases: &[(&str, Expected<'_>)] = &[
            (r#""ab": 7,"#, Some((b"ab", 7))),
            // Cut after its digits: what follows may be more of them.
            (r#""ab": 7"#, None),
            ("\"Ġt\" :\n\t 83,", Some((b" t", 83))),
            (r#""a": 0}"#, Some((b"a", 0))),
            (r#""a": 4294967295}"#, Some((b"a", u32::MAX))),
            (r#""a": 4294967296"#, None),
            (r#""a": 01"#, None),
            (r#""a": 1.5"#, None),
            (r#""a": 1e3"#, None),
            (r#""a": -1"#, None),
            (r#""a": "1""#, None),
            (r#""a" 1"#, None),
            (r#""\u0061": 1"#, None),
            (r#""a b": 1"#, None),
            (r#""é": 1 "#, Some((&[0xE9], 1))),
            (r#""ſ": 1"#, None),
            (r#""中": 1"#, None),
        ];
        for &(text, expected) in cases {
            let mut out = vec![9];
            let found = plain_entry(text.as_bytes(), &mut out);
            match expected {
                Some((bytes, id)) => {
                    let (n, got) = found.unwrap_or_else(|| panic!("{text:?}"));
                    assert_eq!(got, id, "{text:?}");
                    assert_eq!(&out[1..], bytes, "{text:?}");
                    assert!(
                        !text.as_bytes()[n..].first().is_some_and(u8::is_ascii_digit),
                        "{text:?}"
                    );
                }
                None => {
                    assert_eq!(found, None, "{text:?}");
                    assert_eq!(out, [9], "{text:?}");
                }
            }
        }
    }
}
