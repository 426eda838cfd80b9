//! Per-thread cache of the counts of text segments, for steady-state counting.
//!
//! Text is cut into segments only at exact pre-token boundaries (see
//! [`super::chunk::segment_end`]): the pre-tokenization of the whole text is then the
//! pre-tokenizations of its segments one after the other, so its count is the sum of
//! their counts, whatever else surrounds them. A segment seen before (a line of code
//! a file repeats, every line of a file counted again, the unchanged history of a
//! conversation recounted with a new step) is then a hash and one probe instead of a
//! pre-tokenization and merges.
//!
//! Keys are 128-bit hashes of the segment's bytes, keyed with a random seed drawn per
//! thread and mixed with the rank table's id: two segments that differ have the same
//! key with probability about 2⁻¹²⁸ per pair, and text cannot be written to collide on
//! purpose, since the seed is not known outside the process. The hash's secret is
//! derived from the two once per thread and table, not for every segment (as a seeded
//! XXH3 of more than 240 bytes would). Storing the hash alone, not the bytes, keeps the
//! cache small: [`MAX_SLOTS`] slots of 24 bytes (6 MiB) at most, per thread that
//! counts, whatever the length of the text.
//!
//! The table is open-addressed and grows by doubling from a small start; once at its
//! largest and three quarters full it is emptied and fills again (text more diverse
//! than the cache holds still gets the repeats that are close together). It belongs to
//! one thread and is lent to one count at a time, so lookups take no lock.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};

/// Longest segment the cache holds: longer ones (a megabyte of one character, which
/// has no cut) are counted each time, by counters that are linear on them.
pub(crate) const MAX_SEGMENT_BYTES: usize = 64 * 1024;

/// Slots of a new table (a power of two).
const MIN_SLOTS: usize = 1 << 10;

/// Slots of the largest table (a power of two): 6 MiB of 24-byte slots.
const MAX_SLOTS: usize = 1 << 18;

/// One cached segment: its key (0: an empty slot) and its token count.
#[derive(Clone, Copy, Default)]
struct Slot {
    key_lo: u64,
    key_hi: u64,
    count: u64,
}

/// A thread's cache of segment counts; empty (no allocation) until the first insert.
pub(crate) struct SegmentCache {
    slots: Vec<Slot>,
    len: usize,
    /// Random per thread; see the module docs.
    seed: u64,
    /// The table whose keys [`SegmentCache::secret`] makes (0: none yet).
    secret_table: u64,
    /// xxh3's secret for that table's keys, derived from the seed and the table's id.
    secret: [u8; SECRET_BYTES],
}

/// Bytes of an xxh3 secret derived from a seed.
const SECRET_BYTES: usize = 192;

impl Default for SegmentCache {
    fn default() -> SegmentCache {
        SegmentCache {
            slots: Vec::new(),
            len: 0,
            seed: std::collections::hash_map::RandomState::new()
                .build_hasher()
                .finish(),
            secret_table: 0,
            secret: [0; SECRET_BYTES],
        }
    }
}

thread_local! {
    /// The cache of this thread, lent to one count at a time.
    static CACHE: Cell<Option<SegmentCache>> = const { Cell::new(None) };
}

/// Key of `segment` hashed with `secret`.
#[inline]
fn key(secret: &[u8; SECRET_BYTES], segment: &[u8]) -> (u64, u64) {
    let h = xxhash_rust::xxh3::xxh3_128_with_secret(segment, secret);
    // 0 marks an empty slot: a key is never 0.
    ((h as u64) | 1, (h >> 64) as u64)
}

impl SegmentCache {
    /// This thread's cache, to be given back with [`SegmentCache::give_back`]. A nested
    /// count on the same thread (or one during thread teardown) gets a fresh cache.
    pub(crate) fn take() -> SegmentCache {
        CACHE
            .try_with(Cell::take)
            .ok()
            .flatten()
            .unwrap_or_default()
    }

    /// Returns the cache taken with [`SegmentCache::take`] to this thread.
    pub(crate) fn give_back(self) {
        let _ = CACHE.try_with(|c| c.set(Some(self)));
    }

    /// The count of `segment` under table `table`, from the cache or from `count`
    /// (which is then cached).
    #[inline]
    pub(crate) fn count(
        &mut self,
        table: u64,
        segment: &[u8],
        count: impl FnOnce() -> usize,
    ) -> usize {
        if segment.len() > MAX_SEGMENT_BYTES {
            return count();
        }
        if table != self.secret_table {
            self.secret = xxhash_rust::const_xxh3::const_custom_default_secret(
                self.seed ^ table.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            );
            self.secret_table = table;
        }
        let (lo, hi) = key(&self.secret, segment);
        if let Some(n) = self.get(lo, hi) {
            return n;
        }
        let n = count();
        self.insert(lo, hi, n);
        n
    }

    #[inline]
    fn get(&self, lo: u64, hi: u64) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        let mask = self.slots.len() - 1;
        let mut i = lo as usize & mask;
        loop {
            let slot = &self.slots[i];
            if slot.key_lo == lo && slot.key_hi == hi {
                return Some(slot.count as usize);
            }
            if slot.key_lo == 0 {
                return None;
            }
            i = (i + 1) & mask;
        }
    }

    fn insert(&mut self, lo: u64, hi: u64, count: usize) {
        if (self.len + 1) * 4 > self.slots.len() * 3 {
            self.grow_or_clear();
        }
        self.place(Slot {
            key_lo: lo,
            key_hi: hi,
            count: count as u64,
        });
    }

    fn place(&mut self, slot: Slot) {
        let mask = self.slots.len() - 1;
        let mut i = slot.key_lo as usize & mask;
        while self.slots[i].key_lo != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
        self.len += 1;
    }

    #[cold]
    fn grow_or_clear(&mut self) {
        let size = match self.slots.len() {
            0 => MIN_SLOTS,
            n if n >= MAX_SLOTS => n,
            n => n * 2,
        };
        let old = std::mem::replace(&mut self.slots, vec![Slot::default(); size]);
        self.len = 0;
        if size > old.len() {
            for slot in old.into_iter().filter(|s| s.key_lo != 0) {
                self.place(slot);
            }
        }
    }

    /// Number of cached segments.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.len
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_once_then_hits_only_the_same_bytes_of_the_same_table() {
        let mut cache = SegmentCache::default();
        let calls = Cell::new(0);
        let count = |cache: &mut SegmentCache, table: u64, s: &[u8], n: usize| {
            cache.count(table, s, || {
                calls.set(calls.get() + 1);
                n
            })
        };
        assert_eq!(count(&mut cache, 1, b"def f(x):\n", 5), 5);
        assert_eq!(count(&mut cache, 1, b"def f(x):\n", 99), 5);
        assert_eq!(count(&mut cache, 1, b"def f(y):\n", 6), 6);
        assert_eq!(count(&mut cache, 2, b"def f(x):\n", 7), 7);
        assert_eq!(calls.get(), 3);
        let long = vec![b'a'; MAX_SEGMENT_BYTES + 1];
        assert_eq!(count(&mut cache, 1, &long, 3), 3);
        assert_eq!(count(&mut cache, 1, &long, 4), 4);
        assert_eq!(cache.len(), 3);
    }

    #[test]
    fn stays_bounded_and_keeps_counting_right() {
        let mut cache = SegmentCache::default();
        for round in 0..2 {
            for i in 0..(MAX_SLOTS + MAX_SLOTS / 2) {
                let text = i.to_string();
                let n = cache.count(1, text.as_bytes(), || i % 7);
                assert_eq!(n, i % 7, "round {round}, {i}");
            }
        }
        assert!(cache.len() <= MAX_SLOTS * 3 / 4);
        assert!(cache.slots.len() <= MAX_SLOTS);
    }

    #[test]
    fn a_nested_take_gets_a_fresh_cache() {
        let mut outer = SegmentCache::take();
        outer.count(9, b"segment", || 2);
        let mut inner = SegmentCache::take();
        assert_eq!(inner.count(9, b"segment", || 3), 3);
        inner.give_back();
        outer.give_back();
        assert_eq!(SegmentCache::take().count(9, b"segment", || 4), 2);
    }
}
