//! The merge list of a `tokenizer.json` BPE model, as the byte-pair merger consults it.
//!
//! tiktoken merges any two adjacent parts whose bytes together are a token, lowest
//! token rank first. A HuggingFace BPE model merges only the pairs its `merges` list
//! names, lowest *merge* index first: a token may be listed with one split and not
//! another, and (Llama 3's files, converted from tiktoken) one token may be listed under
//! several splits at different indices. So for these tables the merger asks, for a pair
//! of adjacent parts, "which merge index joins exactly this left part with this right
//! part?" — the token's bytes are found by the same hash lookup as tiktoken's, and the
//! split is then looked up among the few listed for that token.

use std::cmp::Reverse;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::OnceLock;

use rustc_hash::FxHashMap;

use super::bpe::{Ranks, Scratch, NO_RANK};

/// Marks "no neighbour" in the heap merge's linked list.
const NONE: usize = usize::MAX;

/// Whether a piece that is itself a vocabulary token is one token.
const UNKNOWN: u8 = 0;
const WHOLE: u8 = 1;
const NOT_WHOLE: u8 = 2;

/// The listed splits of every token, by token id.
pub(crate) struct PairMerges {
    /// `entries[starts[id]..starts[id + 1]]` are token `id`'s splits.
    starts: Vec<u32>,
    /// `(length of the left part, merge index)`, sorted by length.
    entries: Vec<(u32, u32)>,
    /// The model's `ignore_merges`: a piece that is a token is that token, merged or not.
    ignore_merges: bool,
    /// Per token, whether merging its own bytes gives back the token (learnt on first
    /// use: most pieces are whole tokens, and most tokens merge back to themselves).
    whole: Vec<AtomicU8>,
    /// `(left id, right id) -> (merge index, joined id)`, built once long pieces add
    /// up (see `Ranks::count_long`; ordinary text never needs it).
    pairs: OnceLock<FxHashMap<(u32, u32), (u32, u32)>>,
    /// For a merge list in the vocabulary's id order that lists one split per token
    /// (GPT-2's, Qwen's, DeepSeek's): the length of each token's left part by id (0: no
    /// merge makes the token; [`LONG_LEFT`]: look in `entries`). Merges then rank as
    /// the ids of the tokens they make — the same order as their indices — and a pair
    /// is checked with one load from a table a byte per token (small enough to stay in
    /// the core's cache) instead of two from `starts` and `entries`, a cache miss each
    /// in a cold pass over text.
    left_of: Option<Box<[u8]>>,
}

/// In [`PairMerges::left_of`]: a left part of this many bytes or more.
const LONG_LEFT: u8 = u8::MAX;

/// Collects `(token id, left length, merge index)` triples as a merge list is read,
/// in merge order, for [`PairMerges`]. A merge list that follows the vocabulary's id
/// order (GPT-2, Qwen, and Llama 3's several splits of one token in turn) is grouped as
/// it comes: no triple is kept and nothing is sorted but each token's few splits. The
/// first merge that names a lower id than the one before turns the rest into triples,
/// grouped afterwards by [`PairMerges::new`].
pub(crate) struct PairMergesBuilder {
    /// Number of tokens.
    tokens: usize,
    /// `entries[starts[id]..]` begin token `id`'s splits, for every id up to `last`.
    starts: Vec<u32>,
    /// `(length of the left part, merge index)` in merge order.
    entries: Vec<(u32, u32)>,
    /// Every triple, once the ids stopped following the vocabulary's order.
    unordered: Option<Vec<(u32, u32, u32)>>,
}

impl PairMergesBuilder {
    /// A builder for a vocabulary of `tokens` tokens.
    pub(crate) fn new(tokens: usize) -> PairMergesBuilder {
        let mut starts = Vec::with_capacity(tokens + 1);
        starts.push(0);
        PairMergesBuilder {
            tokens,
            starts,
            // Room for the merges of every file seen (Llama 3 lists 2.2 per token): the
            // pages never written cost nothing, a copy as the list grows would.
            entries: Vec::with_capacity(tokens * 4),
            unordered: None,
        }
    }

    /// The next merge: it joins the first `left` bytes of token `id` with the rest.
    #[inline]
    pub(crate) fn push(&mut self, id: u32, left: u32, index: u32) {
        if let Some(triples) = &mut self.unordered {
            triples.push((id, left, index));
            return;
        }
        let i = id as usize;
        if i >= self.tokens || i + 1 < self.starts.len() {
            self.ungrouped().push((id, left, index));
            return;
        }
        // Tokens up to `id` whose splits end here (none, for tokens no merge makes).
        let end = self.entries.len() as u32;
        self.starts.resize(i + 1, end);
        self.entries.push((left, index));
    }

    /// Turns what was grouped so far into triples, for merges out of id order.
    fn ungrouped(&mut self) -> &mut Vec<(u32, u32, u32)> {
        let (starts, entries) = (&self.starts, &self.entries);
        self.unordered.get_or_insert_with(|| {
            let mut triples = Vec::with_capacity(entries.len() * 2);
            for (id, bounds) in starts.windows(2).enumerate() {
                for &(left, index) in &entries[bounds[0] as usize..bounds[1] as usize] {
                    triples.push((id as u32, left, index));
                }
            }
            // The last token's splits: those from its start to the end.
            let last = starts.len() - 1;
            let from = starts[last] as usize;
            for &(left, index) in &entries[from..] {
                triples.push((last as u32, left, index));
            }
            triples
        })
    }

    /// The table.
    pub(crate) fn finish(mut self, ignore_merges: bool) -> PairMerges {
        if let Some(triples) = self.unordered.take() {
            return PairMerges::new(self.tokens, triples, ignore_merges);
        }
        let PairMergesBuilder {
            tokens,
            mut starts,
            mut entries,
            ..
        } = self;
        // `starts` holds each group's start up to the last token that has merges: the
        // rest end where the entries do.
        let total = entries.len() as u32;
        starts.resize(tokens + 1, total);
        // Each token's splits sorted by length, a split listed twice kept at its first
        // index (HuggingFace keeps the first entry of a duplicated pair), compacted in
        // place.
        let mut kept = 0usize;
        for id in 0..tokens {
            let (from, to) = (starts[id] as usize, starts[id + 1] as usize);
            starts[id] = kept as u32;
            let group = &mut entries[from..to];
            if group.len() > 1 {
                group.sort_unstable();
            }
            for k in from..to {
                if k == from || entries[k - 1].0 != entries[k].0 {
                    entries[kept] = entries[k];
                    kept += 1;
                }
            }
        }
        starts[tokens] = kept as u32;
        entries.truncate(kept);
        let left_of = starts
            .windows(2)
            .all(|bounds| bounds[1] - bounds[0] <= 1)
            .then(|| {
                starts
                    .windows(2)
                    .map(|bounds| match bounds[1] > bounds[0] {
                        // A left part of 255 bytes or more is looked up in `entries`.
                        true => u8::try_from(entries[bounds[0] as usize].0).unwrap_or(LONG_LEFT),
                        false => 0,
                    })
                    .collect()
            });
        PairMerges {
            left_of,
            ..PairMerges::from_parts(starts, entries, ignore_merges)
        }
    }
}

impl PairMerges {
    /// Builds the table from `(token id, left length, merge index)` triples for
    /// `tokens` tokens.
    pub(crate) fn new(
        tokens: usize,
        listed: Vec<(u32, u32, u32)>,
        ignore_merges: bool,
    ) -> PairMerges {
        // Grouped by token with a counting sort (ids are dense, and a merge list in id
        // order needs no moving), each token's few splits then sorted in place.
        let mut starts = vec![0u32; tokens + 1];
        // Ids come from the vocabulary; one beyond it would name no token.
        let listed = || listed.iter().filter(|&&(id, _, _)| (id as usize) < tokens);
        for &(id, _, _) in listed() {
            starts[id as usize + 1] += 1;
        }
        for i in 0..tokens {
            starts[i + 1] += starts[i];
        }
        let mut grouped = vec![(0u32, 0u32); starts[tokens] as usize];
        let mut next = starts.clone();
        for &(id, left, index) in listed() {
            let at = &mut next[id as usize];
            grouped[*at as usize] = (left, index);
            *at += 1;
        }
        let mut entries = Vec::with_capacity(grouped.len());
        for id in 0..tokens {
            let group = &mut grouped[starts[id] as usize..starts[id + 1] as usize];
            group.sort_unstable();
            starts[id] = entries.len() as u32;
            for (k, &(left, index)) in group.iter().enumerate() {
                // A split listed twice merges at its first index (HuggingFace keeps the
                // first entry of a duplicated pair).
                if k == 0 || group[k - 1].0 != left {
                    entries.push((left, index));
                }
            }
        }
        starts[tokens] = entries.len() as u32;
        PairMerges::from_parts(starts, entries, ignore_merges)
    }

    /// The table of grouped, sorted and deduplicated splits.
    fn from_parts(starts: Vec<u32>, entries: Vec<(u32, u32)>, ignore_merges: bool) -> PairMerges {
        let tokens = starts.len() - 1;
        PairMerges {
            starts,
            entries,
            ignore_merges,
            whole: (0..tokens).map(|_| AtomicU8::new(UNKNOWN)).collect(),
            pairs: OnceLock::new(),
            left_of: None,
        }
    }

    /// Rank of the merge that joins the first `left` bytes of token `id` with the rest
    /// (lower merges first: its index in the list, or the token's id when those order
    /// the merges alike, see [`PairMerges::left_of`]), or [`NO_RANK`] when the merge
    /// list does not name that split.
    #[inline(always)]
    pub(crate) fn rank(&self, id: u32, left: usize) -> u32 {
        let i = id as usize;
        if let Some(left_of) = &self.left_of {
            let listed = match left_of[i] {
                0 => false,
                LONG_LEFT => self.listed_index(i, left) != NO_RANK,
                l => usize::from(l) == left,
            };
            return if listed { id } else { NO_RANK };
        }
        self.listed_index(i, left)
    }

    /// Index of the merge listed for token `i` split after `left` bytes, or [`NO_RANK`].
    #[inline]
    fn listed_index(&self, i: usize, left: usize) -> u32 {
        let splits = &self.entries[self.starts[i] as usize..self.starts[i + 1] as usize];
        for &(l, index) in splits {
            if l as usize == left {
                return index;
            }
        }
        NO_RANK
    }

    /// Whether the map of merges by the ids of their parts is built.
    pub(crate) fn has_pair_map(&self) -> bool {
        self.pairs.get().is_some()
    }

    /// The merges by the ids of their parts.
    fn pairs(&self, ranks: &Ranks) -> &FxHashMap<(u32, u32), (u32, u32)> {
        self.pairs.get_or_init(|| {
            let vocab = ranks.vocab();
            let mut pairs = FxHashMap::default();
            pairs.reserve(self.entries.len());
            for (id, bytes) in vocab.iter() {
                let i = id as usize;
                for &(left, index) in
                    &self.entries[self.starts[i] as usize..self.starts[i + 1] as usize]
                {
                    let (l, r) = bytes.split_at(left as usize);
                    let (l, r) = (ranks.rank(l), ranks.rank(r));
                    if l != NO_RANK && r != NO_RANK {
                        pairs.insert((l, r), (index, id));
                    }
                }
            }
            pairs
        })
    }

    /// HuggingFace's merge of one piece (lowest merge index first, leftmost on ties) on
    /// token ids: `O(n log n)`, each pair a lookup of two ids whatever the parts' length.
    pub(crate) fn merge_heap(&self, ranks: &Ranks, piece: &[u8], scratch: &mut Scratch) -> usize {
        let pairs = self.pairs(ranks);
        let n = piece.len();
        let Scratch {
            next,
            prev,
            rank,
            ids,
            heap,
            ..
        } = scratch;
        next.clear();
        prev.clear();
        rank.clear();
        ids.clear();
        heap.clear();
        next.extend((1..=n).map(|k| if k < n { k } else { NONE }));
        prev.extend((0..n).map(|k| if k == 0 { NONE } else { k - 1 }));
        ids.extend(piece.iter().map(|&b| ranks.rank(&[b])));
        let pair = |ids: &[u32], next: &[usize], k: usize| -> (u32, u32) {
            let m = next[k];
            if m == NONE {
                return (NO_RANK, NO_RANK);
            }
            pairs
                .get(&(ids[k], ids[m]))
                .copied()
                .unwrap_or((NO_RANK, NO_RANK))
        };
        for k in 0..n {
            let (r, _) = pair(ids, next, k);
            rank.push(r);
            if r != NO_RANK {
                heap.push(Reverse((r, k)));
            }
        }
        let mut parts = n;
        while let Some(Reverse((r, k))) = heap.pop() {
            if rank[k] != r || next[k] == NONE {
                continue; // stale: the pair changed since it was pushed
            }
            let m = next[k];
            let (_, joined) = pair(ids, next, k);
            ids[k] = joined;
            let after = next[m];
            next[k] = after;
            if after != NONE {
                prev[after] = k;
            }
            rank[m] = NO_RANK;
            next[m] = NONE;
            parts -= 1;
            let (rk, _) = pair(ids, next, k);
            rank[k] = rk;
            if rk != NO_RANK {
                heap.push(Reverse((rk, k)));
            }
            let p = prev[k];
            if p != NONE {
                let (rp, _) = pair(ids, next, p);
                rank[p] = rp;
                if rp != NO_RANK {
                    heap.push(Reverse((rp, p)));
                }
            }
        }
        parts
    }

    /// Whether a piece spelling token `id` counts as one token; `merge` merges the
    /// piece's bytes when that is not yet known.
    ///
    /// Asked of nearly every piece of text: inlined, with the first merge of a token
    /// out of line.
    #[inline(always)]
    pub(crate) fn is_whole(&self, id: u32, merge: impl FnOnce() -> usize) -> bool {
        if self.ignore_merges {
            return true;
        }
        let slot = &self.whole[id as usize];
        match slot.load(Ordering::Relaxed) {
            WHOLE => true,
            NOT_WHOLE => false,
            _ => learn_whole(slot, merge),
        }
    }
}

/// Merges a token's bytes the first time it is asked about and remembers the answer.
#[cold]
#[inline(never)]
fn learn_whole(slot: &AtomicU8, merge: impl FnOnce() -> usize) -> bool {
    let whole = merge() == 1;
    slot.store(if whole { WHOLE } else { NOT_WHOLE }, Ordering::Relaxed);
    whole
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_in_id_order_ranks_merges_by_the_ids_they_make() {
        // Tokens 0-2 are bytes; merges make 3 (split after 1 byte), 4 (after 2), and 5
        // (after 300 bytes: beyond the byte table, looked up in the entries).
        let mut builder = PairMergesBuilder::new(6);
        builder.push(3, 1, 0);
        builder.push(4, 2, 1);
        builder.push(5, 300, 2);
        let m = builder.finish(false);
        assert!(m.left_of.is_some());
        assert_eq!((m.rank(3, 1), m.rank(4, 2), m.rank(5, 300)), (3, 4, 5));
        for (id, left) in [(3, 2), (4, 1), (5, 255), (5, 299), (1, 1), (0, 0)] {
            assert_eq!(m.rank(id, left), NO_RANK, "{id} {left}");
        }
        // Two splits of one token (Llama 3's lists): ranks are merge indices.
        let mut builder = PairMergesBuilder::new(6);
        builder.push(3, 1, 0);
        builder.push(3, 2, 1);
        builder.push(4, 1, 2);
        let m = builder.finish(false);
        assert!(m.left_of.is_none());
        assert_eq!((m.rank(3, 1), m.rank(3, 2), m.rank(4, 1)), (0, 1, 2));
    }

    #[test]
    fn only_listed_splits_merge_and_the_first_listing_wins() {
        let m = PairMerges::new(3, vec![(2, 1, 7), (2, 2, 3), (2, 1, 9), (1, 1, 0)], false);
        assert_eq!(m.rank(2, 1), 7);
        assert_eq!(m.rank(2, 2), 3);
        assert_eq!(m.rank(2, 3), NO_RANK);
        assert_eq!(m.rank(1, 1), 0);
        assert_eq!(m.rank(0, 1), NO_RANK);
        assert!(m.is_whole(1, || 1));
        assert!(m.is_whole(1, || unreachable!("learnt")));
        assert!(!m.is_whole(2, || 2));
    }
}
