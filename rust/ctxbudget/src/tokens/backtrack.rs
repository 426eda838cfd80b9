//! Linear-time exact byte-pair encoding of long pieces, by longest match and
//! backtracking.
//!
//! The idea (from the `bpe` crate of GitHub's rust-gems, re-derived here): a sequence
//! of tokens spelling a text is the one byte-pair merging produces exactly when every
//! *adjacent pair* of its tokens is one that merging could leave side by side. Whether
//! a pair `(a, b)` can is decided from the tables alone: replay, latest first, the
//! merges that built `a` and `b` at their common boundary, and ask whether some merge
//! across the boundary would have come earlier (see [`Backtrack::valid_pair`]).
//!
//! Encoding is then a depth-first search: at each position take the longest token that
//! matches (a walk down a trie of all tokens), fall back to ever shorter tokens that
//! are prefixes of it while the pair with the previous token is not valid, and step
//! back one token when none is. A bit per position remembers positions from which no
//! encoding can finish, and since the valid encoding of each prefix is unique, each
//! position is given up at most once: the work is linear in the piece length times a
//! small factor (the token length), where tiktoken's merge is quadratic and a heap
//! merge `O(n log n)` with a hash lookup per step.
//!
//! Tokens that merging can never produce (a few in the older tables) are left out of
//! the trie, so the search never picks them.

use rustc_hash::FxHashMap;

use super::bpe::{Ranks, NO_RANK};

/// No trie node / no token.
const NONE: u32 = u32::MAX;

/// Slots of the per-call cache of pair verdicts (a power of two). Long runs repeat the
/// same few pairs, whose replay would otherwise dominate.
const PAIR_CACHE_SLOTS: usize = 1 << 10;

/// One trie node: children are the nodes `first..first + count`, sorted by label.
#[derive(Clone, Copy)]
struct Node {
    first: u32,
    /// Token spelled by the path to this node, or [`NONE`].
    token: u32,
    count: u16,
}

/// Tables of the backtracking encoder for one rank table.
pub(crate) struct Backtrack {
    nodes: Vec<Node>,
    /// Byte on the edge into each node.
    labels: Vec<u8>,
    /// Byte length of each token.
    lens: Vec<u32>,
    /// Longest producible token that is a proper prefix of each token, or [`NONE`].
    shorter: Vec<u32>,
    /// The pair whose merge made each token; `(id, id)` for single bytes and for
    /// tokens merging never produces.
    split: Vec<(u32, u32)>,
    /// `(a, b)` → the token merging `a` and `b` makes, for every producible token.
    pairs: FxHashMap<u64, u32>,
}

#[inline]
fn pair_key(a: u32, b: u32) -> u64 {
    (u64::from(a) << 32) | u64::from(b)
}

/// Buffers of one counting call, reused across its long pieces.
#[derive(Default)]
pub(crate) struct LongScratch {
    /// Tokens chosen so far.
    stack: Vec<u32>,
    /// Bit `p` clear: no encoding of the piece passes through position `p`.
    open: Vec<u64>,
    /// Direct-mapped cache of `valid_pair` verdicts: `(pair key, verdict)`.
    verdicts: Vec<(u64, bool)>,
}

impl Backtrack {
    /// Builds the tables, or `None` if the rank table lacks a single byte (no
    /// tiktoken table does; the caller then falls back to the heap merge).
    pub(crate) fn new(ranks: &Ranks) -> Option<Backtrack> {
        let vocab = ranks.vocab();
        let n = vocab.len();
        if (0..=255u8).any(|b| ranks.rank(&[b]) == NO_RANK) || n >= NONE as usize {
            return None;
        }
        let lens: Vec<u32> = vocab.iter().map(|(_, t)| t.len() as u32).collect();
        let mut trie = Trie::build(vocab);
        // Every prefix token, producible or not, as candidates for each split.
        let any_prefix = trie.prefix_tokens(n);
        let mut this = Backtrack {
            nodes: Vec::new(),
            labels: Vec::new(),
            lens,
            shorter: Vec::new(),
            split: Vec::with_capacity(n),
            pairs: FxHashMap::default(),
        };
        this.pairs.reserve(n);
        let mut producible = vec![false; n];
        for (id, bytes) in vocab.iter() {
            let mut made = None;
            if bytes.len() > 1 {
                // The last merge of `id` joined a prefix token and the rest; only one
                // split is a valid pair, try them longest prefix first.
                let mut left = any_prefix[id as usize];
                while left != NONE {
                    let right = ranks.rank(&bytes[this.lens[left as usize] as usize..]);
                    if left < id
                        && right < id
                        && producible[left as usize]
                        && producible[right as usize]
                        && this.valid_pair(left, right)
                    {
                        made = Some((left, right));
                        break;
                    }
                    left = any_prefix[left as usize];
                }
            }
            match made {
                Some((left, right)) => {
                    this.split.push((left, right));
                    this.pairs.insert(pair_key(left, right), id);
                    producible[id as usize] = true;
                }
                None => {
                    this.split.push((id, id));
                    producible[id as usize] = bytes.len() == 1;
                }
            }
        }
        trie.keep_only(&producible);
        this.shorter = trie.prefix_tokens(n);
        this.nodes = trie.nodes;
        this.labels = trie.labels;
        Some(this)
    }

    /// Whether byte-pair merging can leave `left` directly before `right`.
    ///
    /// Undo the merges at the boundary, the later-made token first (ids are merge
    /// order). Just before a token formed, its last merge's parts sat next to the
    /// other side; a merge across the boundary with a lower id would have happened
    /// first, so the pair could not survive. On the left the token itself wins a tie
    /// (it is leftmost); on the right the crossing merge does, hence `right + 1`.
    fn valid_pair(&self, mut left: u32, mut right: u32) -> bool {
        let mut limit = NONE;
        loop {
            if let Some(&merged) = self.pairs.get(&pair_key(left, right)) {
                if merged < limit {
                    return false;
                }
            }
            let (_, left_part) = self.split[left as usize];
            let (right_part, _) = self.split[right as usize];
            let left_base = left_part == left;
            let right_base = right_part == right;
            if (left > right || right_base) && !left_base {
                limit = left;
                left = left_part;
            } else if !right_base {
                limit = right + 1;
                right = right_part;
            } else {
                return true;
            }
        }
    }

    /// [`Backtrack::valid_pair`] through the call's cache.
    #[inline]
    fn valid_cached(&self, left: u32, right: u32, verdicts: &mut [(u64, bool)]) -> bool {
        let key = pair_key(left, right);
        let slot = (key.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 54) as usize & (verdicts.len() - 1);
        let (k, v) = verdicts[slot];
        if k == key {
            return v;
        }
        let v = self.valid_pair(left, right);
        verdicts[slot] = (key, v);
        v
    }

    /// The longest producible token that `text` starts with (`text` is not empty).
    #[inline]
    fn longest(&self, text: &[u8]) -> u32 {
        let mut node = 0usize;
        let mut best = NONE;
        for &b in text {
            let Node { first, count, .. } = self.nodes[node];
            let first = first as usize;
            let labels = &self.labels[first..first + usize::from(count)];
            let found = if count == 256 {
                Some(usize::from(b))
            } else if count <= 8 {
                labels.iter().position(|&l| l == b)
            } else {
                labels.binary_search(&b).ok()
            };
            let Some(k) = found else { break };
            node = first + k;
            let token = self.nodes[node].token;
            if token != NONE {
                best = token;
            }
        }
        best
    }

    /// Number of tokens in `piece` (not empty), or `None` if the search failed, which
    /// the load checks rule out.
    pub(crate) fn count(&self, piece: &[u8], s: &mut LongScratch) -> Option<usize> {
        let n = piece.len();
        s.stack.clear();
        s.open.clear();
        s.open.resize(n / 64 + 1, u64::MAX);
        if s.verdicts.is_empty() {
            s.verdicts.resize(PAIR_CACHE_SLOTS, (u64::MAX, false));
        }
        let mut pos = 0;
        let mut next = self.longest(piece);
        loop {
            let last = s.stack.last().copied();
            let mut token = next;
            loop {
                if token == NONE {
                    return None;
                }
                let end = pos + self.lens[token as usize] as usize;
                let open = s.open[end / 64] & (1 << (end % 64)) != 0;
                if open && last.is_none_or(|l| self.valid_cached(l, token, &mut s.verdicts)) {
                    s.stack.push(token);
                    pos = end;
                    if pos == n {
                        return Some(s.stack.len());
                    }
                    next = self.longest(&piece[pos..]);
                    break;
                }
                let shorter = self.shorter[token as usize];
                if shorter != NONE {
                    token = shorter;
                    continue;
                }
                // Nothing fits here: no encoding passes through `pos`.
                let back = last?;
                s.open[pos / 64] &= !(1 << (pos % 64));
                s.stack.pop();
                pos -= self.lens[back as usize] as usize;
                next = back;
                break;
            }
        }
    }
}

/// Trie of token byte strings, children of a node stored together and sorted.
struct Trie {
    nodes: Vec<Node>,
    labels: Vec<u8>,
}

impl Trie {
    fn build(vocab: &super::vocab::Vocab) -> Trie {
        let mut order: Vec<(&[u8], u32)> = vocab.iter().map(|(id, t)| (t, id)).collect();
        order.sort_unstable();
        let root = Node {
            first: 0,
            token: NONE,
            count: 0,
        };
        let mut trie = Trie {
            nodes: Vec::with_capacity(vocab.bytes.len() / 3),
            labels: Vec::with_capacity(vocab.bytes.len() / 3),
        };
        trie.nodes.push(root);
        trie.labels.push(0);
        // (node, range of `order` below it, depth): every token in the range starts
        // with the node's path of `depth` bytes; the shortest, if it is that path, first.
        let mut todo = vec![(0usize, 0usize, order.len(), 0usize)];
        while let Some((node, mut lo, hi, depth)) = todo.pop() {
            if lo < hi && order[lo].0.len() == depth {
                trie.nodes[node].token = order[lo].1;
                lo += 1;
            }
            let first = trie.nodes.len();
            let mut count = 0u16;
            while lo < hi {
                let byte = order[lo].0[depth];
                let mut end = lo + 1;
                while end < hi && order[end].0[depth] == byte {
                    end += 1;
                }
                trie.nodes.push(Node {
                    first: 0,
                    token: NONE,
                    count: 0,
                });
                trie.labels.push(byte);
                todo.push((first + usize::from(count), lo, end, depth + 1));
                count += 1;
                lo = end;
            }
            trie.nodes[node].first = first as u32;
            trie.nodes[node].count = count;
        }
        trie
    }

    /// For every token, the longest token in the trie that is a proper prefix of it.
    fn prefix_tokens(&self, n: usize) -> Vec<u32> {
        let mut out = vec![NONE; n];
        let mut todo = vec![(0usize, NONE)];
        while let Some((node, above)) = todo.pop() {
            let Node {
                first,
                token,
                count,
            } = self.nodes[node];
            if token != NONE {
                out[token as usize] = above;
            }
            let below = if token != NONE { token } else { above };
            for child in first as usize..first as usize + usize::from(count) {
                todo.push((child, below));
            }
        }
        out
    }

    /// Forgets the tokens for which `keep` is false (the nodes stay, as paths).
    fn keep_only(&mut self, keep: &[bool]) {
        for node in &mut self.nodes {
            if node.token != NONE && !keep[node.token as usize] {
                node.token = NONE;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::bpe::tests::toy;
    use super::*;

    #[test]
    fn agrees_with_the_quadratic_merge_on_a_toy_table() {
        let ranks = toy(&["ab", "bc", "abc", "aa", "aaaa", "cd", "bca", "aaa"]);
        let long = Backtrack::new(&ranks).unwrap_or_else(|| panic!("tables"));
        let mut s = LongScratch::default();
        let mut parts = Vec::new();
        let alphabet = [b'a', b'b', b'c', b'd'];
        // Every string over the alphabet up to length 7.
        for len in 1..=7u32 {
            for mut code in 0..4usize.pow(len) {
                let text: Vec<u8> = (0..len)
                    .map(|_| {
                        let b = alphabet[code % 4];
                        code /= 4;
                        b
                    })
                    .collect();
                assert_eq!(
                    long.count(&text, &mut s),
                    Some(ranks.merge_quadratic(&text, &mut parts)),
                    "{}",
                    String::from_utf8_lossy(&text)
                );
            }
        }
    }

    #[test]
    fn unproducible_tokens_are_never_chosen() {
        // "abcd" (rank 258) can never form: "bc" merges first, leaving a|bc|d, and
        // neither "abc" nor "bcd" is a token.
        let ranks = toy(&["bc", "ab", "abcd"]);
        let long = Backtrack::new(&ranks).unwrap_or_else(|| panic!("tables"));
        assert_eq!(long.split[258], (258, 258));
        let mut s = LongScratch::default();
        for text in [&b"abcd"[..], b"abcdabcd", b"xabcdx", b"bcd", b"ab"] {
            assert_eq!(
                long.count(text, &mut s),
                Some(ranks.merge_quadratic(text, &mut Vec::new())),
                "{}",
                String::from_utf8_lossy(text)
            );
        }
    }

    fn real(name: &str) -> Ranks {
        let data = super::super::vocab::source(name).unwrap_or_default();
        Ranks::new(super::super::vocab::Vocab::parse(data).unwrap_or_else(|e| panic!("{e}")))
    }

    const FILES: [&str; 4] = ["o200k_base", "cl100k_base", "p50k_base", "r50k_base"];

    /// A token is left out of the search exactly when tiktoken's merge of its own bytes
    /// does not give it back, and every other token encodes to itself.
    #[test]
    fn producible_tokens_are_the_ones_merging_makes() {
        for name in FILES {
            let ranks = real(name);
            let long = Backtrack::new(&ranks).unwrap_or_else(|| panic!("{name}"));
            let mut s = LongScratch::default();
            let mut parts = Vec::new();
            let mut left_out = 0;
            for (id, bytes) in ranks.vocab().iter() {
                let merged = ranks.merge_quadratic(bytes, &mut parts);
                let producible = long.split[id as usize] != (id, id) || bytes.len() == 1;
                assert_eq!(producible, merged == 1, "{name} token {id}");
                if producible {
                    assert_eq!(long.count(bytes, &mut s), Some(1), "{name} token {id}");
                } else {
                    left_out += 1;
                    assert_eq!(long.count(bytes, &mut s), Some(merged), "{name} token {id}");
                }
            }
            assert!(left_out < 100, "{name}: {left_out}");
        }
    }

    /// Long byte strings (not pre-tokenized: any bytes) agree with the heap merge, for
    /// every table, including the GPT-2 ones no second implementation covers.
    #[test]
    fn long_strings_agree_with_the_heap_merge() {
        let units = [
            " ",
            "a",
            "\n",
            "中",
            "😀",
            "7",
            "!",
            "ab",
            "aab",
            " a",
            "\t ",
            "QmFzZTY0+/",
            "ZZ",
            "-=",
            "é",
            "\u{301}",
            "0000",
            "llll",
            "rrr ",
        ];
        for name in FILES {
            let ranks = real(name);
            let long = Backtrack::new(&ranks).unwrap_or_else(|| panic!("{name}"));
            let mut s = LongScratch::default();
            let mut scratch = super::super::bpe::Scratch::default();
            for unit in units {
                for len in [65usize, 1_000, 20_000] {
                    let text = format!("x{}y", unit.repeat(len / unit.len() + 1));
                    assert_eq!(
                        long.count(text.as_bytes(), &mut s),
                        Some(ranks.merge_heap(text.as_bytes(), &mut scratch)),
                        "{name} {unit:?} x{len}"
                    );
                }
            }
        }
    }
}
