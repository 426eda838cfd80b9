//! Per-thread cache of the counts of short pieces that are not one token.
//!
//! Real text repeats its words: in source code most multi-token pieces (identifiers,
//! `self.`, indentation-and-keyword pairs) recur within a file and across files. A
//! piece that is a single token costs one table lookup already; a piece that is not
//! needs tiktoken's quadratic merge, with a lookup per candidate pair. This cache keeps
//! the count of such pieces, keyed by the piece's own bytes (stored in the slot and
//! compared in full, so a hit is exact, never a hash guess) and by the table it was
//! counted with.
//!
//! It is direct-mapped (one slot per hash, the newest piece wins), fixed in size, and
//! per thread, so it needs no lock and stays small: [`SLOTS`] slots of 32 bytes.

use std::cell::Cell;

use super::bpe::same_bytes;

/// Longest piece the cache holds (longer pieces are rare and go to the merge).
pub(crate) const MAX_BYTES: usize = 22;

/// Number of slots (a power of two).
const SLOTS: usize = 4096;

/// One cached piece: its bytes, its length, its token count and the table's id.
#[derive(Clone, Copy)]
struct Slot {
    /// [`super::bpe::Ranks`] id the count belongs to (0: an empty slot).
    table: u64,
    bytes: [u8; MAX_BYTES],
    len: u8,
    count: u8,
}

const EMPTY: Slot = Slot {
    table: 0,
    bytes: [0; MAX_BYTES],
    len: 0,
    count: 0,
};

/// The cache; empty (no allocation) until the first insert.
#[derive(Default)]
pub(crate) struct PieceCache {
    slots: Vec<Slot>,
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

    /// The count of `piece` under table `table`, if cached; `hash` is the piece's hash.
    #[inline]
    pub(crate) fn get(&self, table: u64, piece: &[u8], hash: usize) -> Option<usize> {
        let slot = self.slots.get(hash & (SLOTS - 1))?;
        (slot.table == table
            && usize::from(slot.len) == piece.len()
            && same_bytes(&slot.bytes[..piece.len()], piece))
        .then_some(usize::from(slot.count))
    }

    /// Remembers that `piece` (at most [`MAX_BYTES`] long) counts `count` tokens.
    #[inline]
    pub(crate) fn insert(&mut self, table: u64, piece: &[u8], hash: usize, count: usize) {
        if piece.len() > MAX_BYTES {
            return;
        }
        if self.slots.is_empty() {
            self.slots = vec![EMPTY; SLOTS];
        }
        let slot = &mut self.slots[hash & (SLOTS - 1)];
        slot.table = table;
        slot.bytes[..piece.len()].copy_from_slice(piece);
        // Both fit: a piece of at most MAX_BYTES bytes has at most that many tokens.
        slot.len = piece.len() as u8;
        slot.count = count as u8;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hits_only_the_same_bytes_of_the_same_table() {
        let mut cache = PieceCache::default();
        assert_eq!(cache.get(1, b"abc", 7), None);
        cache.insert(1, b"abc", 7, 2);
        assert_eq!(cache.get(1, b"abc", 7), Some(2));
        // Same slot, other bytes, other length, other table: misses.
        assert_eq!(cache.get(1, b"abd", 7), None);
        assert_eq!(cache.get(1, b"ab", 7), None);
        assert_eq!(cache.get(2, b"abc", 7), None);
        // A colliding piece replaces the slot.
        cache.insert(1, b"xyz", 7 + SLOTS, 3);
        assert_eq!(cache.get(1, b"abc", 7), None);
        assert_eq!(cache.get(1, b"xyz", 7), Some(3));
        // Too long to hold: not cached.
        let long = [b'a'; MAX_BYTES + 1];
        cache.insert(1, &long, 9, 4);
        assert_eq!(cache.get(1, &long, 9), None);
    }

    #[test]
    fn a_nested_take_gets_an_empty_cache() {
        let mut outer = PieceCache::take();
        outer.insert(9, b"piece", 1, 2);
        let inner = PieceCache::take();
        assert_eq!(inner.get(9, b"piece", 1), None);
        inner.give_back();
        outer.give_back();
        assert_eq!(PieceCache::take().get(9, b"piece", 1), Some(2));
    }
}
