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

use std::sync::atomic::{AtomicU8, Ordering};

use super::bpe::NO_RANK;

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
}

impl PairMerges {
    /// Builds the table from `(token id, left length, merge index)` triples for
    /// `tokens` tokens.
    pub(crate) fn new(
        tokens: usize,
        mut listed: Vec<(u32, u32, u32)>,
        ignore_merges: bool,
    ) -> PairMerges {
        listed.sort_unstable();
        let mut starts = Vec::with_capacity(tokens + 1);
        let mut entries = Vec::with_capacity(listed.len());
        let mut next = 0;
        for id in 0..tokens as u32 {
            starts.push(entries.len() as u32);
            while next < listed.len() && listed[next].0 == id {
                let (_, left, index) = listed[next];
                // A split listed twice merges at its first index (HuggingFace keeps the
                // first entry of a duplicated pair).
                if entries.last().map(|&(l, _)| l) != Some(left)
                    || starts[id as usize] as usize == entries.len()
                {
                    entries.push((left, index));
                }
                next += 1;
            }
        }
        starts.push(entries.len() as u32);
        PairMerges {
            starts,
            entries,
            ignore_merges,
            whole: (0..tokens).map(|_| AtomicU8::new(UNKNOWN)).collect(),
        }
    }

    /// Merge index that joins the first `left` bytes of token `id` with the rest, or
    /// [`NO_RANK`] when the merge list does not name that split.
    #[inline]
    pub(crate) fn rank(&self, id: u32, left: usize) -> u32 {
        let i = id as usize;
        let splits = &self.entries[self.starts[i] as usize..self.starts[i + 1] as usize];
        for &(l, index) in splits {
            if l as usize == left {
                return index;
            }
        }
        NO_RANK
    }

    /// Whether a piece spelling token `id` counts as one token; `merge` merges the
    /// piece's bytes when that is not yet known.
    #[inline]
    pub(crate) fn is_whole(&self, id: u32, merge: impl FnOnce() -> usize) -> bool {
        if self.ignore_merges {
            return true;
        }
        let slot = &self.whole[id as usize];
        match slot.load(Ordering::Relaxed) {
            WHOLE => true,
            NOT_WHOLE => false,
            _ => {
                let whole = merge() == 1;
                slot.store(if whole { WHOLE } else { NOT_WHOLE }, Ordering::Relaxed);
                whole
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
