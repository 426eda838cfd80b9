//! Per-thread cache of the counts of short pieces.
//!
//! Real text repeats its pieces: words, identifiers, `self.`, indentation. Counting a
//! piece that is one token still costs a hash of its bytes and a probe of the rank
//! table, whose slots, offsets and token bytes are three scattered reads in tables
//! of megabytes; a piece that is not one token needs tiktoken's quadratic merge on top.
//! This cache answers a piece it has seen with one read of one 32-byte slot: the
//! piece's bytes and length packed into three words (the key, compared in full, so a
//! hit is exact, never a hash guess), the table it was counted with and its count.
//!
//! It is direct-mapped (one slot per hash, the newest piece wins) and per thread, so
//! it needs no lock; it starts small and grows with the distinct pieces a thread sees,
//! up to 4 MiB (see [`PieceCache`]). A colliding piece only costs a miss, so text
//! crafted to collide costs no more than text never seen.

use std::cell::Cell;

/// Longest piece the cache holds (longer pieces are rare and go to the mergers): its
/// bytes and its length fit the three words of a key.
pub(crate) const MAX_BYTES: usize = 23;

/// Slots of a thread's cache at its first count (a power of two): 128 KiB.
const MIN_SLOTS: usize = 1 << 12;

/// Slots the cache grows to at most (a power of two): 4 MiB. A corpus of source code
/// has about a hundred thousand distinct short pieces; an agent's messages far fewer,
/// so its threads keep small caches.
const MAX_SLOTS: usize = 1 << 17;

/// One cached piece: its packed bytes, the id of its table and its token count.
#[derive(Clone, Copy)]
#[repr(C, align(32))]
struct Slot {
    key: [u64; 3],
    /// [`super::bpe::Ranks`] id the count belongs to (0: an empty slot).
    table: u32,
    count: u32,
}

const EMPTY: Slot = Slot {
    key: [0; 3],
    table: 0,
    count: 0,
};

/// A piece of at most [`MAX_BYTES`] bytes packed into three little-endian words, its
/// length in the top byte of the last one (a byte no piece reaches), so two keys are
/// equal exactly when the pieces are.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
pub(crate) struct Key([u64; 3]);

impl Key {
    /// The key of `piece`, or `None` if it is longer than [`MAX_BYTES`]. Overlapping
    /// word loads read the bytes without a copy loop; a shift drops the bytes a load
    /// read twice.
    #[inline(always)]
    pub(crate) fn of(piece: &[u8]) -> Option<Key> {
        let n = piece.len();
        let mut w = [0u64; 3];
        match n {
            0 => {}
            1..=3 => {
                w[0] = u64::from(piece[0])
                    | u64::from(piece[n / 2]) << (8 * (n / 2))
                    | u64::from(piece[n - 1]) << (8 * (n - 1));
            }
            4..=7 => {
                w[0] = u64::from(word4(piece, 0)) | u64::from(word4(piece, n - 4)) << (8 * (n - 4));
            }
            8 => w[0] = word8(piece, 0),
            9..=16 => {
                w[0] = word8(piece, 0);
                w[1] = word8(piece, n - 8) >> (8 * (16 - n));
            }
            17..=MAX_BYTES => {
                w[0] = word8(piece, 0);
                w[1] = word8(piece, 8);
                w[2] = word8(piece, n - 8) >> (8 * (24 - n));
            }
            _ => return None,
        }
        w[2] |= (n as u64) << 56;
        Some(Key(w))
    }

    /// Hash of this key: a multiplicative hash, whose top bits mix every bit (a slot
    /// index is taken from them).
    #[inline(always)]
    fn hash(self) -> u64 {
        const K: u64 = 0x9E37_79B9_7F4A_7C15;
        let [a, b, c] = self.0;
        ((a.wrapping_mul(K) ^ b).wrapping_mul(K) ^ c).wrapping_mul(K)
    }
}

/// The 4 bytes of `s` from `at` as one word (`at + 4 <= s.len()`).
#[inline(always)]
fn word4(s: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&s[at..at + 4]);
    u32::from_le_bytes(w)
}

/// The 8 bytes of `s` from `at` as one word (`at + 8 <= s.len()`).
#[inline(always)]
fn word8(s: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_le_bytes(w)
}

/// The cache; empty (no allocation) until the first insert.
///
/// It starts at [`MIN_SLOTS`] and doubles, up to [`MAX_SLOTS`], each time it has taken
/// as many new pieces as it has slots: then the text's distinct pieces no longer fit.
#[derive(Default)]
pub(crate) struct PieceCache {
    slots: Vec<Slot>,
    /// Shift that turns a [`Key::hash`] into a slot index (64 − log2 of the slots).
    shift: u32,
    /// Pieces inserted since the cache last grew.
    inserted: usize,
}

thread_local! {
    /// The cache of this thread, lent to one count at a time (see [`PieceCache::take`]).
    static CACHE: Cell<PieceCache> = Cell::new(PieceCache::default());
}

impl PieceCache {
    /// This thread's cache, to be given back with [`PieceCache::give_back`]. A nested
    /// count on the same thread (or one during thread teardown) gets an empty cache.
    pub(crate) fn take() -> PieceCache {
        CACHE.try_with(Cell::take).unwrap_or_default()
    }

    /// Returns the cache taken with [`PieceCache::take`] to this thread.
    pub(crate) fn give_back(self) {
        let _ = CACHE.try_with(|c| c.set(self));
    }

    /// The count of the piece whose key is `key` under table `table`, if cached.
    #[inline(always)]
    pub(crate) fn get(&self, table: u32, key: Key) -> Option<usize> {
        let slot = self.slots.get((key.hash() >> self.shift) as usize)?;
        (slot.table == table && slot.key == key.0).then_some(slot.count as usize)
    }

    /// Remembers that the piece whose key is `key` counts `count` tokens under table
    /// `table` (never 0: that marks an empty slot).
    #[inline]
    pub(crate) fn insert(&mut self, table: u32, key: Key, count: usize) {
        if table == 0 {
            return;
        }
        if self.slots.is_empty() {
            self.resize(MIN_SLOTS);
        } else if self.inserted >= self.slots.len() && self.slots.len() < MAX_SLOTS {
            self.resize(self.slots.len() * 2);
        }
        self.inserted += 1;
        // A piece of at most MAX_BYTES bytes has at most that many tokens.
        self.put(Slot {
            key: key.0,
            table,
            count: count as u32,
        });
    }

    /// Stores `slot` in the place of its key, replacing what was there.
    #[inline]
    fn put(&mut self, slot: Slot) {
        let index = (Key(slot.key).hash() >> self.shift) as usize;
        if let Some(place) = self.slots.get_mut(index) {
            *place = slot;
        }
    }

    /// Moves the cache to a table of `slots` slots (a power of two), keeping what it
    /// holds (two pieces that now share a slot: the later one).
    fn resize(&mut self, slots: usize) {
        let old = std::mem::replace(&mut self.slots, vec![EMPTY; slots]);
        self.shift = 64 - slots.trailing_zeros();
        self.inserted = 0;
        for slot in old.into_iter().filter(|s| s.table != 0) {
            self.put(slot);
        }
    }

    /// Number of slots (0 before the first insert).
    #[cfg(test)]
    fn capacity(&self) -> usize {
        self.slots.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(piece: &[u8]) -> Key {
        Key::of(piece).unwrap_or_else(|| panic!("{piece:?} has no key"))
    }

    /// Keys are equal exactly when the pieces are: the packing keeps every byte and
    /// the length.
    #[test]
    fn keys_tell_every_piece_apart() {
        let base: Vec<u8> = (1..=MAX_BYTES as u8).map(|b| b.wrapping_mul(37)).collect();
        let mut seen = std::collections::HashMap::new();
        for n in 0..=MAX_BYTES {
            let piece = &base[..n];
            let mut expected = [0u8; 24];
            expected[..n].copy_from_slice(piece);
            expected[23] = n as u8;
            let words: Vec<u64> = expected
                .chunks(8)
                .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                .collect();
            assert_eq!(key(piece).0.to_vec(), words, "{n}");
            assert!(seen.insert(key(piece), n).is_none(), "{n}");
            for k in 0..n {
                let mut other = piece.to_vec();
                other[k] ^= 0x80;
                assert_ne!(key(&other), key(piece), "{n} {k}");
            }
        }
        // Trailing zero bytes are bytes too.
        assert_ne!(key(b"a"), key(b"a\0"));
        assert!(Key::of(&[b'a'; MAX_BYTES + 1]).is_none());
    }

    #[test]
    fn hits_only_the_same_bytes_of_the_same_table() {
        let mut cache = PieceCache::default();
        assert_eq!(cache.get(1, key(b"abc")), None);
        cache.insert(1, key(b"abc"), 2);
        assert_eq!(cache.get(1, key(b"abc")), Some(2));
        assert_eq!(cache.get(1, key(b"abd")), None);
        assert_eq!(cache.get(1, key(b"ab")), None);
        assert_eq!(cache.get(2, key(b"abc")), None);
        // Table 0 is never cached: it marks empty slots.
        cache.insert(0, key(b"xyz"), 3);
        assert_eq!(cache.get(0, key(b"xyz")), None);
    }

    /// The cache grows once it has taken as many pieces as it has slots, up to its
    /// bound, and keeps what it held.
    #[test]
    fn grows_with_distinct_pieces_and_keeps_them() {
        let mut cache = PieceCache::default();
        assert_eq!(cache.capacity(), 0);
        let piece = |i: usize| format!("piece {i}");
        for i in 0..MIN_SLOTS - 1 {
            cache.insert(1, key(piece(i).as_bytes()), 1);
        }
        assert_eq!(cache.capacity(), MIN_SLOTS);
        cache.insert(1, key(b"kept"), 2);
        assert_eq!(cache.capacity(), MIN_SLOTS);
        cache.insert(1, key(b"one more"), 2);
        assert_eq!(cache.capacity(), 2 * MIN_SLOTS);
        assert_eq!(cache.get(1, key(b"kept")), Some(2));
        // Most of the pieces survived the move (some collide).
        let held = (0..MIN_SLOTS)
            .filter(|&i| cache.get(1, key(piece(i).as_bytes())).is_some())
            .count();
        assert!(held > MIN_SLOTS / 2, "{held}");
        for i in 0..4 * MAX_SLOTS {
            cache.insert(1, key(piece(i).as_bytes()), 1);
        }
        assert_eq!(cache.capacity(), MAX_SLOTS);
    }

    #[test]
    fn a_nested_take_gets_an_empty_cache() {
        let mut outer = PieceCache::take();
        outer.insert(9, key(b"piece"), 2);
        let inner = PieceCache::take();
        assert_eq!(inner.get(9, key(b"piece")), None);
        inner.give_back();
        outer.give_back();
        assert_eq!(PieceCache::take().get(9, key(b"piece")), Some(2));
    }
}
