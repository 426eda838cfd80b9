//! The hash index from a token's bytes to its id, which counting asks about every
//! piece of text (most are one token) and every candidate pair of a merge.
//!
//! An index of bare ids makes each hit three dependent loads from tables of
//! megabytes — the slot, the token's offset in the vocabulary, its bytes — and a
//! piece first seen (the whole of a cold first pass over text) waits on each. Here a
//! slot holds the token's first [`INLINE`] bytes and its length beside its id, in 16
//! bytes: a lookup of a piece of at most [`INLINE`] bytes (almost every piece of text
//! and every merge candidate) is settled by one slot, hit or miss. Longer pieces whose
//! first bytes and length match a slot compare the rest with the vocabulary's bytes.

use std::hash::Hasher;

use rustc_hash::FxHasher;

use super::bpe::{same_bytes, word4, word8, NO_RANK};
use super::vocab::Vocab;

/// Bytes of a token held in its slot.
pub(crate) const INLINE: usize = 11;

/// Lookups made together when building or checking a whole index: each step goes
/// over the whole batch before the next, so their cache misses overlap instead of
/// following one another.
const BATCH: usize = 16;

/// Lookups made together when checking many pieces (see [`TokenIndex::first_missing`]):
/// more than [`BATCH`], for more of their cache misses to overlap.
const CHECK_BATCH: usize = 48;

/// One slot: the first [`INLINE`] bytes of a token (`head`: bytes 0–7, zero padded;
/// the low 24 bits of `tail`: bytes 8–10), its length (the top 8 bits of `tail`,
/// 255 for any length from 255 up) and its id ([`NO_RANK`]: an empty slot).
#[derive(Clone, Copy)]
#[repr(C, align(16))]
struct Slot {
    head: u64,
    tail: u32,
    id: u32,
}

const EMPTY: Slot = Slot {
    head: 0,
    tail: 0,
    id: NO_RANK,
};

/// What a lookup compares and where it starts: the first bytes and length of a
/// piece, as a [`Slot`] holds them, and the piece's hash.
#[derive(Clone, Copy)]
pub(crate) struct Key {
    head: u64,
    tail: u32,
    /// Hash of the whole piece: a product, whose top bits mix every byte, so tables
    /// take their slot from the top (see [`slot_of`]; also the per-thread piece
    /// caches' slot).
    pub(crate) hash: u64,
}

impl Key {
    /// The key of `bytes`.
    #[inline(always)]
    pub(crate) fn of(bytes: &[u8]) -> Key {
        let n = bytes.len();
        let len = (n.min(255) as u32) << 24;
        let (head, tail) = if n >= 8 {
            (word8(bytes, 0), up_to_3(&bytes[8..n.min(INLINE)]) | len)
        } else {
            (up_to_8(bytes), len)
        };
        let mut mixed = head ^ u64::from(tail).rotate_left(29);
        if n > INLINE {
            let mut rest = FxHasher::default();
            rest.write(&bytes[INLINE..]);
            mixed ^= rest.finish().rotate_left(7);
        }
        Key {
            head,
            tail,
            // One multiply: bit k of a product depends on bits 0..=k of `mixed`, so
            // the top bits depend on all of them (Fibonacci hashing).
            hash: mixed.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        }
    }
}

/// Slot of `hash` in a table of `2^bits` slots (`1 <= bits <= 64`): its top bits
/// (see [`Key::hash`]).
#[inline(always)]
pub(crate) fn slot_of(hash: u64, bits: u32) -> usize {
    (hash >> (64 - bits)) as usize
}

/// `s` (at most 8 bytes) as a little-endian word padded with zeros, by two
/// overlapping loads rather than a copy of variable length: a byte both loads read
/// lands in the same place from each.
#[inline(always)]
fn up_to_8(s: &[u8]) -> u64 {
    let n = s.len();
    match n {
        0 => 0,
        1..=3 => u64::from(up_to_3(s)),
        _ => u64::from(word4(s, 0)) | u64::from(word4(s, n - 4)) << (8 * (n - 4)),
    }
}

/// `s` (at most 3 bytes) as a little-endian word padded with zeros: its first,
/// middle and last byte are all of them.
#[inline(always)]
fn up_to_3(s: &[u8]) -> u32 {
    let n = s.len();
    if n == 0 {
        return 0;
    }
    u32::from(s[0]) | u32::from(s[n / 2]) << (8 * (n / 2)) | u32::from(s[n - 1]) << (8 * (n - 1))
}

/// Slots up to which an index is made at most half full (4 MiB of them).
const MAX_ROOMY_SLOTS: usize = 1 << 18;

/// Open-addressing (linear probing) index of every token of a vocabulary.
pub(crate) struct TokenIndex {
    slots: Vec<Slot>,
    mask: usize,
    /// `log2` of the number of slots.
    bits: u32,
}

impl TokenIndex {
    /// Indexes every token of `vocab`, at most half full while that takes at most
    /// [`MAX_ROOMY_SLOTS`] slots, else 40% to 80% full (the least power of two of slots
    /// that is 1.25 times the tokens or more: o200k's index is 4 MiB, twice what bare
    /// ids at half that load took, and its lookups measured faster still; 8 MiB would
    /// take its corpus run's peak RSS over 52 MiB). Most lookups of a merge are of
    /// pieces that are no token, which linear probing at 76% load (cl100k at 1.25×)
    /// ends after some nine slots, at a place the branch predictor cannot guess: at
    /// 38% a cold pass of cl100k over the standard library took 7% less time.
    /// Of tokens spelled alike, the lowest id is found.
    pub(crate) fn new(vocab: &Vocab) -> TokenIndex {
        let size = (vocab.len() + vocab.len() / 4)
            .next_power_of_two()
            .max((2 * vocab.len()).next_power_of_two().min(MAX_ROOMY_SLOTS))
            .max(16);
        let mask = size - 1;
        let bits = size.trailing_zeros();
        let mut slots = vec![EMPTY; size];
        let mut keys = [Key::of(&[]); BATCH];
        let count = vocab.len() as u32;
        for first in (0..count).step_by(BATCH) {
            let batch = first..(first + BATCH as u32).min(count);
            for (k, id) in batch.clone().enumerate() {
                keys[k] = Key::of(vocab.token(id));
            }
            // Touch every home slot of the batch first (the misses overlap), then
            // place each token.
            let mut occupied = 0u32;
            for (k, key) in keys.iter().take(batch.len()).enumerate() {
                occupied |= u32::from(slots[slot_of(key.hash, bits)].id != NO_RANK) << k;
            }
            std::hint::black_box(occupied);
            for (id, key) in batch.zip(&keys) {
                let mut i = slot_of(key.hash, bits);
                while slots[i].id != NO_RANK {
                    i = (i + 1) & mask;
                }
                slots[i] = Slot {
                    head: key.head,
                    tail: key.tail,
                    id,
                };
            }
        }
        TokenIndex { slots, mask, bits }
    }

    /// Id of the token spelled `bytes`, whose key is `key`, or [`NO_RANK`].
    #[inline(always)]
    pub(crate) fn get(&self, vocab: &Vocab, bytes: &[u8], key: Key) -> u32 {
        let mut i = slot_of(key.hash, self.bits);
        loop {
            let slot = &self.slots[i];
            if slot.head == key.head && slot.tail == key.tail {
                if bytes.len() <= INLINE || same_bytes(vocab.token(slot.id), bytes) {
                    return slot.id;
                }
            } else if slot.id == NO_RANK {
                return NO_RANK;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// The first of `pieces` that is not a token, if any; the lookups go in batches
    /// (see [`BATCH`]): a `tokenizer.json` load checks a few hundred thousand merge
    /// parts against an index of megabytes.
    pub(crate) fn first_missing<'p>(
        &self,
        vocab: &Vocab,
        pieces: impl Iterator<Item = &'p [u8]>,
    ) -> Option<&'p [u8]> {
        let mut batch: [&[u8]; CHECK_BATCH] = [&[]; CHECK_BATCH];
        let mut keys = [Key::of(&[]); CHECK_BATCH];
        let mut pieces = pieces.peekable();
        while pieces.peek().is_some() {
            let mut n = 0;
            for p in pieces.by_ref().take(CHECK_BATCH) {
                batch[n] = p;
                keys[n] = Key::of(p);
                n += 1;
            }
            let mut touched = 0u64;
            for key in &keys[..n] {
                touched ^= self.slots[slot_of(key.hash, self.bits)].head;
            }
            std::hint::black_box(touched);
            if let Some((p, _)) = batch[..n]
                .iter()
                .zip(&keys)
                .find(|(p, key)| self.get(vocab, p, **key) == NO_RANK)
            {
                return Some(p);
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_hold_the_first_bytes_and_the_length() {
        let base: Vec<u8> = (1..=40u8).collect();
        for n in 0..=base.len() {
            let a = Key::of(&base[..n]);
            let mut padded = [0u8; 16];
            let inline = n.min(INLINE);
            padded[..inline].copy_from_slice(&base[..inline]);
            assert_eq!(
                a.head,
                u64::from_le_bytes(padded[..8].try_into().unwrap_or_default())
            );
            assert_eq!(
                a.tail,
                u32::from_le_bytes([padded[8], padded[9], padded[10], n as u8])
            );
        }
        // A trailing zero byte changes the length, so the key.
        assert_ne!(Key::of(b"ab").tail, Key::of(b"ab\0").tail);
        // Past the inline bytes the hash still sees every byte.
        let long = [b'x'; 30];
        let mut other = long;
        other[29] = b'y';
        assert_ne!(Key::of(&long).hash, Key::of(&other).hash);
    }

    #[test]
    fn finds_every_token_and_nothing_else() {
        let mut text = String::new();
        let engine = base64::engine::general_purpose::STANDARD;
        let mut tokens: Vec<Vec<u8>> = (0u8..=255).map(|b| vec![b]).collect();
        // Tokens that share their inline bytes and length, and differ after them.
        tokens.push(b"abcdefghijk_one".to_vec());
        tokens.push(b"abcdefghijk_two".to_vec());
        tokens.push(vec![b'z'; 300]);
        tokens.push(b"\0\0".to_vec());
        for (rank, t) in tokens.iter().enumerate() {
            use base64::Engine as _;
            text.push_str(&format!("{} {rank}\n", engine.encode(t)));
        }
        let vocab = Vocab::parse(&text).unwrap_or_else(|e| panic!("{e}"));
        let index = TokenIndex::new(&vocab);
        for (id, t) in tokens.iter().enumerate() {
            assert_eq!(index.get(&vocab, t, Key::of(t)), id as u32, "{t:?}");
        }
        let absent: [&[u8]; 5] = [
            b"abcdefghijk_six",
            b"\0\0\0",
            b"ab",
            &[b'z'; 301],
            &[b'z'; 299],
        ];
        for t in absent {
            assert_eq!(index.get(&vocab, t, Key::of(t)), NO_RANK, "{t:?}");
        }
        let parts: Vec<&[u8]> = vec![b"a", b"abcdefghijk_two", b"abcdefghijk_six", b"b"];
        assert_eq!(
            index.first_missing(&vocab, parts.into_iter()),
            Some(&b"abcdefghijk_six"[..])
        );
    }

    /// Longest run of occupied slots (a lookup of a piece that is no token walks at
    /// most this far) and mean slots a token's lookup reads.
    fn clusters(index: &TokenIndex, vocab: &Vocab) -> (usize, f64) {
        let n = index.slots.len();
        let (mut longest, mut run) = (0, 0);
        // Twice round: a run may wrap past the last slot.
        for i in 0..2 * n {
            if index.slots[i % n].id == NO_RANK {
                run = 0;
            } else {
                run += 1;
                longest = longest.max(run.min(n));
            }
        }
        let mut probes = 0usize;
        for id in 0..vocab.len() as u32 {
            let key = Key::of(vocab.token(id));
            let mut i = slot_of(key.hash, index.bits);
            probes += 1;
            while index.slots[i].id != id {
                i = (i + 1) & index.mask;
                probes += 1;
            }
        }
        (longest, probes as f64 / vocab.len() as f64)
    }

    /// The tokens of every shipped table spread over the index as random keys would:
    /// a lookup reads no more slots on average than linear probing with a random hash
    /// does at that load (`(1 + 1 / (1 - load)) / 2`), and no run of occupied slots is
    /// longer than half again the longest such hashing expects (`ln n / (load - 1 -
    /// ln load)`). A hash that lost some of a key's bytes (the one multiply's low bits,
    /// say) piles tokens that share them into runs of thousands.
    #[test]
    fn tokens_spread_as_random_keys_would() {
        for name in ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"] {
            let data = super::super::vocab::source(name).unwrap_or_default();
            let vocab = Vocab::parse(data).unwrap_or_else(|e| panic!("{e}"));
            let index = TokenIndex::new(&vocab);
            let (longest, mean) = clusters(&index, &vocab);
            let n = index.slots.len() as f64;
            let load = vocab.len() as f64 / n;
            let random_mean = (1.0 + 1.0 / (1.0 - load)) / 2.0;
            let random_longest = n.ln() / (load - 1.0 - load.ln());
            assert!(
                mean <= random_mean * 1.05,
                "{name}: {mean:.3} > {random_mean:.3}"
            );
            assert!(
                (longest as f64) <= random_longest * 1.5,
                "{name}: a run of {longest} slots, random hashing about {random_longest:.0}"
            );
        }
    }
}
