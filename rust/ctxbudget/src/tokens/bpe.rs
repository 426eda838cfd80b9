//! Byte-pair merge counting over tiktoken's rank tables.
//!
//! Only the number of tokens is needed, so nothing allocates per piece: most pieces are
//! a single token (one hash lookup), short ones use tiktoken's own quadratic merge on a
//! reused buffer, and long ones a heap with lazy invalidation, `O(n log n)`, so that a
//! piece of a megabyte costs what its length says and not its square.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

/// Pieces at least this long are merged with the heap instead of the quadratic scan.
const HEAP_MIN_BYTES: usize = 128;

/// Marks "no such pair" in rank slots.
const NO_RANK: u32 = u32::MAX;

/// Marks "no neighbour" in the heap merge's linked list.
const NONE: usize = usize::MAX;

/// Mergeable ranks of one encoding: byte string → rank (lower merges first).
pub(crate) struct Ranks {
    map: FxHashMap<Box<[u8]>, u32>,
    /// Longest byte string in the table: longer candidates need no lookup.
    max_len: usize,
}

impl Ranks {
    /// Builds the table from `(bytes, rank)` pairs.
    pub(crate) fn new(entries: impl IntoIterator<Item = (Vec<u8>, u32)>) -> Ranks {
        let map: FxHashMap<Box<[u8]>, u32> = entries
            .into_iter()
            .map(|(bytes, rank)| (bytes.into_boxed_slice(), rank))
            .collect();
        let max_len = map.keys().map(|k| k.len()).max().unwrap_or(0);
        Ranks { map, max_len }
    }

    /// Number of byte strings in the table.
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }

    #[inline]
    fn rank(&self, bytes: &[u8]) -> u32 {
        if bytes.len() > self.max_len {
            return NO_RANK;
        }
        self.map.get(bytes).copied().unwrap_or(NO_RANK)
    }

    /// Number of tokens byte-pair merging turns `piece` into.
    #[inline]
    pub(crate) fn count_piece(&self, piece: &[u8], scratch: &mut Scratch) -> usize {
        if piece.len() <= 1 || self.rank(piece) != NO_RANK {
            return piece.len().min(1);
        }
        if piece.len() < HEAP_MIN_BYTES {
            self.merge_quadratic(piece, &mut scratch.parts)
        } else {
            self.merge_heap(piece, scratch)
        }
    }

    /// tiktoken's merge: repeatedly join the adjacent pair of lowest rank, the leftmost
    /// on ties. `parts[k] = (start of part k, rank of joining part k with part k+1)`.
    fn merge_quadratic(&self, piece: &[u8], parts: &mut Vec<(usize, u32)>) -> usize {
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
    /// skipped when popped.
    fn merge_heap(&self, piece: &[u8], scratch: &mut Scratch) -> usize {
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
            // A part that was merged into its left neighbour has rank NONE-equivalent:
            // its slot is cleared below, so a stale entry never matches.
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
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toy() -> Ranks {
        // Single bytes first (as in every tiktoken table), then merges.
        let mut entries: Vec<(Vec<u8>, u32)> =
            (0u8..=255).map(|b| (vec![b], u32::from(b))).collect();
        for (i, s) in ["ab", "bc", "abc", "aa", "aaaa", "cd"].iter().enumerate() {
            entries.push((s.as_bytes().to_vec(), 256 + i as u32));
        }
        Ranks::new(entries)
    }

    #[test]
    fn heap_and_quadratic_agree() {
        let ranks = toy();
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
}
