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
//! per thread, so it needs no lock and stays bounded: [`SLOTS`] slots of 32 bytes
//! (512 KiB). The standard library's multi-token pieces of DeepSeek V4 are 47,733
//! distinct ones among 330,614: 4,096 slots merged 76,583 of them, 16,384 slots
//! 62,110, which took 3.8% off the cold passes of DeepSeek and o200k.
//!
//! Longer pieces are few but costly (a ruler of `#` or `-`, a long identifier: a merge
//! of some thousands of instructions each) and they repeat even more: in the Python
//! standard library, 9,586 pieces longer than [`MAX_BYTES`] are 638 distinct ones.
//! [`LONG_SLOTS`] more slots keep them, up to [`LONG_MAX_BYTES`] each, compared in full
//! as well.

use std::cell::Cell;

use super::bpe::same_bytes;
use super::token_index::slot_of;

/// Longest piece the cache holds (longer pieces are rare and go to the merge).
pub(crate) const MAX_BYTES: usize = 22;

/// Number of slots (a power of two).
const SLOTS: usize = 16384;

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

/// Longest piece the cache holds beside the short ones (at most [`LONG_SLOTS`] ×
/// this many bytes per thread, however hostile the text).
pub(crate) const LONG_MAX_BYTES: usize = 1024;

/// Number of slots for pieces longer than [`MAX_BYTES`] (a power of two).
const LONG_SLOTS: usize = 256;

/// One cached long piece: the table's id (0: an empty slot), its count and bytes.
#[derive(Default)]
struct LongSlot {
    table: u64,
    count: usize,
    bytes: Vec<u8>,
}

/// The cache; empty (no allocation) until the first insert.
#[derive(Default)]
pub(crate) struct PieceCache {
    slots: Vec<Slot>,
    long: Vec<LongSlot>,
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
    pub(crate) fn get(&self, table: u64, piece: &[u8], hash: u64) -> Option<usize> {
        let slot = self.slots.get(slot_of(hash, SLOTS.trailing_zeros()))?;
        (slot.table == table
            && usize::from(slot.len) == piece.len()
            && same_bytes(&slot.bytes[..piece.len()], piece))
        .then_some(usize::from(slot.count))
    }

    /// The count of `piece`, longer than [`MAX_BYTES`], under table `table`, if
    /// cached; `hash` is the piece's hash.
    pub(crate) fn get_long(&self, table: u64, piece: &[u8], hash: u64) -> Option<usize> {
        let slot = self.long.get(slot_of(hash, LONG_SLOTS.trailing_zeros()))?;
        (slot.table == table && slot.bytes == piece).then_some(slot.count)
    }

    /// Remembers that `piece` counts `count` tokens under table `table`, if it is at
    /// most [`LONG_MAX_BYTES`] long.
    pub(crate) fn insert_long(&mut self, table: u64, piece: &[u8], hash: u64, count: usize) {
        if piece.len() > LONG_MAX_BYTES {
            return;
        }
        if self.long.is_empty() {
            self.long = (0..LONG_SLOTS).map(|_| LongSlot::default()).collect();
        }
        let slot = &mut self.long[slot_of(hash, LONG_SLOTS.trailing_zeros())];
        slot.table = table;
        slot.count = count;
        slot.bytes.clear();
        slot.bytes.extend_from_slice(piece);
    }

    /// Remembers that `piece` (at most [`MAX_BYTES`] long) counts `count` tokens.
    #[inline]
    pub(crate) fn insert(&mut self, table: u64, piece: &[u8], hash: u64, count: usize) {
        if piece.len() > MAX_BYTES {
            return;
        }
        if self.slots.is_empty() {
            self.slots = vec![EMPTY; SLOTS];
        }
        let slot = &mut self.slots[slot_of(hash, SLOTS.trailing_zeros())];
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
        // A colliding piece (a hash with the same top bits) replaces the slot.
        cache.insert(1, b"xyz", 7 + 1, 3);
        assert_eq!(cache.get(1, b"abc", 7), None);
        assert_eq!(cache.get(1, b"xyz", 7), Some(3));
        // Too long to hold: not cached.
        let long = [b'a'; MAX_BYTES + 1];
        cache.insert(1, &long, 9, 4);
        assert_eq!(cache.get(1, &long, 9), None);
    }

    #[test]
    fn long_pieces_hit_only_the_same_bytes_of_the_same_table() {
        let mut cache = PieceCache::default();
        let ruler = [b'#'; 80];
        assert_eq!(cache.get_long(1, &ruler, 5), None);
        cache.insert_long(1, &ruler, 5, 3);
        assert_eq!(cache.get_long(1, &ruler, 5), Some(3));
        assert_eq!(cache.get_long(2, &ruler, 5), None);
        assert_eq!(cache.get_long(1, &ruler[..79], 5), None);
        let mut other = ruler;
        other[40] = b'-';
        assert_eq!(cache.get_long(1, &other, 5), None);
        // A colliding piece (a hash with the same top bits) replaces the slot.
        cache.insert_long(1, &other, 5 + 1, 4);
        assert_eq!(cache.get_long(1, &ruler, 5), None);
        assert_eq!(cache.get_long(1, &other, 5), Some(4));
        // Too long to hold: not cached.
        let long = vec![b'a'; LONG_MAX_BYTES + 1];
        cache.insert_long(1, &long, 9, 7);
        assert_eq!(cache.get_long(1, &long, 9), None);
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
