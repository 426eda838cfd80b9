//! Byte-pair merge counting over tiktoken's rank tables.
//!
//! Only the number of tokens is needed, so nothing allocates per piece: most pieces are
//! a single token (one hash lookup), short ones use tiktoken's own quadratic merge on a
//! reused buffer, and long ones the linear backtracking encoder of
//! [`super::backtrack`].
//!
//! The encoder's tables take about as long to build as the heap merge takes on a
//! quarter of a megabyte, so they are built only once that much long-piece text has
//! been merged by the heap (or one piece is that long): ordinary text, whose long
//! pieces are rare and short, never pays for them, and no input pays more than about
//! twice what it would with the tables ready.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::hash::Hasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::OnceLock;

use rustc_hash::FxHasher;

use super::backtrack::{Backtrack, LongScratch};
use super::vocab::Vocab;

/// Pieces at least this long are counted by the backtracking encoder instead of the
/// quadratic merge.
const LONG_MIN_BYTES: usize = 64;

/// Bytes of long pieces merged by the heap before the backtracking tables are built.
const BUILD_AFTER_BYTES: usize = 256 * 1024;

/// Marks "no such token / pair" in rank slots.
pub(crate) const NO_RANK: u32 = u32::MAX;

/// Marks "no neighbour" in the heap merge's linked list.
const NONE: usize = usize::MAX;

/// Mergeable ranks of one encoding: byte string → token id (lower merges first).
///
/// Ids are positions in rank order (see [`Vocab`]), so they order merges exactly as
/// ranks do.
pub(crate) struct Ranks {
    vocab: Vocab,
    /// Open-addressing hash table of token ids, indexed by a hash of their bytes.
    slots: Vec<u32>,
    mask: usize,
    /// Longest token: longer candidates need no lookup.
    max_len: usize,
    /// Tables of the long-piece encoder, built on demand (see the module docs).
    long: OnceLock<Option<Backtrack>>,
    /// Bytes of long pieces merged by the heap so far.
    heap_bytes: AtomicUsize,
}

#[inline]
fn hash(bytes: &[u8]) -> usize {
    let mut h = FxHasher::default();
    h.write(bytes);
    h.finish() as usize
}

impl Ranks {
    /// Indexes every token of `vocab`.
    pub(crate) fn new(vocab: Vocab) -> Ranks {
        let size = (vocab.len() * 2).next_power_of_two().max(16);
        let mask = size - 1;
        let mut slots = vec![NO_RANK; size];
        let mut max_len = 0;
        for (id, bytes) in vocab.iter() {
            max_len = max_len.max(bytes.len());
            let mut i = hash(bytes) & mask;
            while slots[i] != NO_RANK {
                i = (i + 1) & mask;
            }
            slots[i] = id;
        }
        Ranks {
            vocab,
            slots,
            mask,
            max_len,
            long: OnceLock::new(),
            heap_bytes: AtomicUsize::new(0),
        }
    }

    /// Number of tokens in the table.
    pub(crate) fn len(&self) -> usize {
        self.vocab.len()
    }

    /// The tokens, in rank order.
    pub(crate) fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Id of the token spelled `bytes`, or [`NO_RANK`].
    #[inline]
    pub(crate) fn rank(&self, bytes: &[u8]) -> u32 {
        if bytes.len() > self.max_len {
            return NO_RANK;
        }
        let mut i = hash(bytes) & self.mask;
        loop {
            let id = self.slots[i];
            if id == NO_RANK || self.vocab.token(id) == bytes {
                return id;
            }
            i = (i + 1) & self.mask;
        }
    }

    /// Number of tokens byte-pair merging turns `piece` into.
    #[inline]
    pub(crate) fn count_piece(&self, piece: &[u8], scratch: &mut Scratch) -> usize {
        if piece.len() <= 1 || self.rank(piece) != NO_RANK {
            return piece.len().min(1);
        }
        if piece.len() < LONG_MIN_BYTES {
            return self.merge_quadratic(piece, &mut scratch.parts);
        }
        let long = match self.long.get() {
            Some(long) => long,
            None => {
                let merged = self.heap_bytes.fetch_add(piece.len(), Ordering::Relaxed);
                if merged + piece.len() < BUILD_AFTER_BYTES {
                    return self.merge_heap(piece, scratch);
                }
                self.long.get_or_init(|| Backtrack::new(self))
            }
        };
        match long {
            Some(long) => match long.count(piece, &mut scratch.long) {
                Some(n) => n,
                // The search cannot fail on a table that passed `Backtrack::new`'s
                // checks; should it ever, the exact heap merge answers instead.
                None => self.merge_heap(piece, scratch),
            },
            None => self.merge_heap(piece, scratch),
        }
    }

    /// tiktoken's merge: repeatedly join the adjacent pair of lowest rank, the leftmost
    /// on ties. `parts[k] = (start of part k, rank of joining part k with part k+1)`.
    pub(crate) fn merge_quadratic(&self, piece: &[u8], parts: &mut Vec<(usize, u32)>) -> usize {
        if piece.is_empty() {
            return 0;
        }
        parts.clear();
        for i in 0..piece.len() - 1 {
            parts.push((i, self.rank(&piece[i..i + 2])));
        }
        parts.push((piece.len() - 1, NO_RANK));
        parts.push((piece.len(), NO_RANK));
        // The rank of joining part `k` with part `k + 1`, given part boundaries.
        let pair_rank = |parts: &[(usize, u32)], k: usize| -> u32 {
            if k + 2 < parts.len() {
                self.rank(&piece[parts[k].0..parts[k + 2].0])
            } else {
                NO_RANK
            }
        };
        loop {
            let mut best = (NO_RANK, 0);
            for (k, &(_, rank)) in parts[..parts.len() - 1].iter().enumerate() {
                if rank < best.0 {
                    best = (rank, k);
                }
            }
            if best.0 == NO_RANK {
                break;
            }
            let k = best.1;
            parts.remove(k + 1);
            parts[k].1 = pair_rank(parts, k);
            if k > 0 {
                parts[k - 1].1 = pair_rank(parts, k - 1);
            }
        }
        parts.len() - 1
    }

    /// The same merge order as [`Ranks::merge_quadratic`], driven by a min-heap of
    /// `(rank, start)`: the smallest rank wins and, on ties, the smallest start — the
    /// leftmost pair, exactly as tiktoken's scan picks it. Stale heap entries are
    /// skipped when popped. `O(n log n)`; the fallback of the backtracking encoder.
    pub(crate) fn merge_heap(&self, piece: &[u8], scratch: &mut Scratch) -> usize {
        let n = piece.len();
        let Scratch {
            next,
            prev,
            rank,
            heap,
            ..
        } = scratch;
        next.clear();
        prev.clear();
        rank.clear();
        heap.clear();
        next.extend((1..=n).map(|k| if k < n { k } else { NONE }));
        prev.extend((0..n).map(|k| if k == 0 { NONE } else { k - 1 }));
        // `end(k)` = first byte after part k.
        let end = |next: &[usize], k: usize| if next[k] == NONE { n } else { next[k] };
        let pair = |next: &[usize], k: usize| -> u32 {
            let m = next[k];
            if m == NONE {
                NO_RANK
            } else {
                self.rank(&piece[k..end(next, m)])
            }
        };
        for k in 0..n {
            let r = pair(next, k);
            rank.push(r);
            if r != NO_RANK {
                heap.push(Reverse((r, k)));
            }
        }
        let mut parts = n;
        while let Some(Reverse((r, k))) = heap.pop() {
            // A part merged into its left neighbour has its slot cleared below, so a
            // stale entry never matches.
            if rank[k] != r || next[k] == NONE {
                continue;
            }
            let m = next[k];
            let after = next[m];
            next[k] = after;
            if after != NONE {
                prev[after] = k;
            }
            rank[m] = NO_RANK;
            next[m] = NONE;
            parts -= 1;
            let rk = pair(next, k);
            rank[k] = rk;
            if rk != NO_RANK {
                heap.push(Reverse((rk, k)));
            }
            let p = prev[k];
            if p != NONE {
                let rp = pair(next, p);
                rank[p] = rp;
                if rp != NO_RANK {
                    heap.push(Reverse((rp, p)));
                }
            }
        }
        parts
    }
}

/// Buffers reused across pieces so that counting does not allocate per piece.
#[derive(Default)]
pub(crate) struct Scratch {
    parts: Vec<(usize, u32)>,
    next: Vec<usize>,
    prev: Vec<usize>,
    rank: Vec<u32>,
    heap: BinaryHeap<Reverse<(u32, usize)>>,
    long: LongScratch,
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A small table: single bytes first (as in every tiktoken table), then merges.
    pub(crate) fn toy(merges: &[&str]) -> Ranks {
        let mut text = String::new();
        let engine = base64::engine::general_purpose::STANDARD;
        let mut rank = 0;
        let mut line = |bytes: &[u8]| {
            use base64::Engine as _;
            text.push_str(&format!("{} {rank}\n", engine.encode(bytes)));
            rank += 1;
        };
        for b in 0u8..=255 {
            line(&[b]);
        }
        for m in merges {
            line(m.as_bytes());
        }
        Ranks::new(Vocab::parse(&text).unwrap_or_else(|e| panic!("{e}")))
    }

    #[test]
    fn heap_and_quadratic_agree() {
        let ranks = toy(&["ab", "bc", "abc", "aa", "aaaa", "cd"]);
        let mut scratch = Scratch::default();
        let samples = [
            "abcd",
            "aaaaaaa",
            "abcabcabc",
            "bcabcaab",
            "aaaaabcdcdab",
            "zzzz",
        ];
        for s in samples {
            let q = ranks.merge_quadratic(s.as_bytes(), &mut Vec::new());
            let h = ranks.merge_heap(s.as_bytes(), &mut scratch);
            assert_eq!(q, h, "{s}");
        }
        // "abcd": ab (256) merges before bc (257); then abc (258); cd can't form.
        assert_eq!(ranks.merge_quadratic(b"abcd", &mut Vec::new()), 2);
        // "aaaaaaa": aa|aa|aa|a, then aaaa|aa|a.
        assert_eq!(ranks.merge_heap(b"aaaaaaa", &mut scratch), 3);
    }

    #[test]
    fn lookup_finds_every_token_and_nothing_else() {
        let ranks = toy(&["ab", "bc", "abc"]);
        assert_eq!(ranks.rank(b"abc"), 258);
        assert_eq!(ranks.rank(b"a"), u32::from(b'a'));
        assert_eq!(ranks.rank(b"abd"), NO_RANK);
        assert_eq!(ranks.rank(b"abcabc"), NO_RANK);
    }

    /// Long pieces go to the heap merge until a quarter megabyte of them has been
    /// merged, then to the backtracking encoder; both count alike.
    #[test]
    fn tables_are_built_once_enough_long_text_was_merged() {
        let data = super::super::vocab::source("o200k_base").unwrap_or_default();
        let ranks = Ranks::new(Vocab::parse(data).unwrap_or_else(|e| panic!("{e}")));
        let mut scratch = Scratch::default();
        let pieces = ["a".repeat(100), " ".repeat(5_000), "中".repeat(20_000)];
        let before: Vec<usize> = pieces
            .iter()
            .map(|p| ranks.count_piece(p.as_bytes(), &mut scratch))
            .collect();
        assert!(ranks.long.get().is_none());
        let big = "ab".repeat(BUILD_AFTER_BYTES / 2);
        let heap = ranks.merge_heap(big.as_bytes(), &mut scratch);
        assert_eq!(ranks.count_piece(big.as_bytes(), &mut scratch), heap);
        assert!(ranks.long.get().is_some_and(Option::is_some));
        let after: Vec<usize> = pieces
            .iter()
            .map(|p| ranks.count_piece(p.as_bytes(), &mut scratch))
            .collect();
        assert_eq!(before, after);
    }
}
