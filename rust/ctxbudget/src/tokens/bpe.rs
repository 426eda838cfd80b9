//! Byte-pair merge counting over tiktoken's rank tables.
//!
//! Only the number of tokens is needed, so nothing allocates per piece: most pieces are
//! a single token (one hash lookup), short ones use tiktoken's own quadratic merge on a
//! reused buffer, and long ones the linear backtracking encoder of
//! [`super::backtrack`].
//!
//! The encoder's tables take about as long to build as the heap merge takes on a
//! quarter of a megabyte (some 260 ms for `o200k_base`), so they are built only once
//! that much long-piece text has been merged by the heap (or one piece is that long):
//! ordinary text, whose long pieces are rare and short, never pays for them, and no
//! input pays more than about twice what it would with the tables ready.
//!
//! The build that the running total starts runs on a thread of its own, never in the
//! count that crossed the mark: that count may be a short message counted on an event
//! loop's thread, which must not stall for the build. Counts go on with the exact heap
//! merge until the tables are there. Only a piece that is itself a quarter megabyte
//! builds them in place: merging it by the heap would cost as much (and such texts are
//! counted on the I/O pool, never on an event loop, by the async API).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;

use super::backtrack::{Backtrack, LongScratch};
use super::merges::PairMerges;
use super::pieces::{self, PieceCache};
use super::token_index::{Key, TokenIndex};
use super::vocab::Vocab;

/// Pieces at least this long are counted by the backtracking encoder instead of the
/// quadratic merge.
const LONG_MIN_BYTES: usize = 64;

/// Bytes of long pieces merged by the heap before the backtracking tables are built.
const BUILD_AFTER_BYTES: usize = 256 * 1024;

/// Bytes of long pieces a merge list merges by their bytes before the map of its
/// pairs by token ids is built (see [`Ranks::count_long`]).
pub(crate) const PAIR_MAP_AFTER_BYTES: usize = 64 * 1024;

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
    /// Unique id of this table (never 0), which keys its entries in the per-thread
    /// [`PieceCache`]: an address could be reused by a later table.
    id: u64,
    /// Token ids by their bytes.
    index: TokenIndex,
    /// Longest token: longer candidates need no lookup.
    max_len: usize,
    /// Id of the token of each two bytes `a b` at `a << 8 | b`, or [`NO_RANK`]: a
    /// sixth of the pieces of text and a third of the lookups of a merge are two
    /// bytes, answered here by one load from 256 KiB instead of a hash and a probe
    /// into megabytes (a cache miss each).
    pairs: Box<[u32]>,
    /// The merge list of a `tokenizer.json` model, whose merges are named pairs rather
    /// than any two parts that spell a token (`None` for tiktoken's tables).
    merges: Option<PairMerges>,
    /// Tables of the long-piece encoder, built on demand (see the module docs). Only
    /// ever filled with `set` after a build, never `get_or_init`: a process forked
    /// while another thread built them must not wait for that thread, which the child
    /// does not have.
    long: OnceLock<Option<Backtrack>>,
    /// Bytes of long pieces merged by the heap on their bytes so far.
    heap_bytes: AtomicUsize,
    /// Id of the process whose thread builds the tables in the background (0: none
    /// started). A forked child sees its parent's id and starts its own.
    builder: AtomicU32,
    /// Holds a background build until the test lets it go.
    #[cfg(test)]
    gate: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>>,
}

/// Slot of the two bytes `a b` in [`Ranks::pairs`].
#[inline(always)]
fn pair_index(a: u8, b: u8) -> usize {
    usize::from(a) << 8 | usize::from(b)
}

/// `a == b`, without a call to `memcmp` for the short strings that tokens and pieces
/// mostly are: two overlapping word loads compare 4 to 16 bytes.
#[inline(always)]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    match n {
        0 => true,
        // First, middle and last byte: every byte of a string of 1 to 3.
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => word4(a, 0) == word4(b, 0) && word4(a, n - 4) == word4(b, n - 4),
        8..=16 => word8(a, 0) == word8(b, 0) && word8(a, n - 8) == word8(b, n - 8),
        _ => a == b,
    }
}

/// The 4 bytes of `s` from `at` as one word (`at + 4 <= s.len()`).
#[inline(always)]
pub(crate) fn word4(s: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&s[at..at + 4]);
    u32::from_le_bytes(w)
}

/// The 8 bytes of `s` from `at` as one word (`at + 8 <= s.len()`).
#[inline(always)]
pub(crate) fn word8(s: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_le_bytes(w)
}

impl Ranks {
    /// Indexes every token of `vocab`.
    pub(crate) fn new(vocab: Vocab) -> Ranks {
        let index = TokenIndex::new(&vocab);
        let max_len = (0..vocab.len() as u32)
            .map(|id| vocab.token(id).len())
            .max()
            .unwrap_or(0);
        let mut pairs = vec![NO_RANK; 1 << 16].into_boxed_slice();
        for id in 0..vocab.len() as u32 {
            if let &[a, b] = vocab.token(id) {
                pairs[pair_index(a, b)] = id;
            }
        }
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        Ranks {
            vocab,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            index,
            max_len,
            pairs,
            merges: None,
            long: OnceLock::new(),
            heap_bytes: AtomicUsize::new(0),
            builder: AtomicU32::new(0),
            #[cfg(test)]
            gate: std::sync::Mutex::new(None),
        }
    }

    /// These tables, merging only the pairs `merges` names (read against them).
    pub(crate) fn with_merges(mut self, merges: PairMerges) -> Ranks {
        self.merges = Some(merges);
        self
    }

    /// The rank that joining `piece[a..b]` with `piece[b..c]` has: the token's rank for
    /// tiktoken's tables, the index of the merge naming exactly that pair for a merge
    /// list, [`NO_RANK`] if the two parts do not merge.
    #[inline(always)]
    fn pair(&self, piece: &[u8], a: usize, b: usize, c: usize) -> u32 {
        let id = self.rank(&piece[a..c]);
        match &self.merges {
            Some(merges) if id != NO_RANK => merges.rank(id, b - a),
            _ => id,
        }
    }

    /// The merge list of a `tokenizer.json` model, if these tables have one.
    #[cfg(test)]
    pub(crate) fn merges(&self) -> Option<&PairMerges> {
        self.merges.as_ref()
    }

    /// Unique id of this table (never 0), for keying per-thread caches.
    pub(crate) fn id(&self) -> u64 {
        self.id
    }

    /// Number of tokens in the table.
    pub(crate) fn len(&self) -> usize {
        self.vocab.len()
    }

    /// The tokens, in rank order.
    pub(crate) fn vocab(&self) -> &Vocab {
        &self.vocab
    }

    /// Id of the token spelled `bytes`, or [`NO_RANK`]. Always inlined: the hot loop
    /// of counting (a call here cost about 4% of a corpus count's instructions).
    #[inline(always)]
    pub(crate) fn rank(&self, bytes: &[u8]) -> u32 {
        if let &[a, b] = bytes {
            return self.pairs[pair_index(a, b)];
        }
        if bytes.len() > self.max_len {
            return NO_RANK;
        }
        self.index.get(&self.vocab, bytes, Key::of(bytes))
    }

    /// The first of `pieces` that is not a token, if any.
    pub(crate) fn first_missing<'p>(
        &self,
        pieces: impl Iterator<Item = &'p [u8]>,
    ) -> Option<&'p [u8]> {
        self.index.first_missing(&self.vocab, pieces)
    }

    /// Number of tokens byte-pair merging turns `piece` into. Inlined into the loops
    /// that cut text into pieces, for the pieces most text is made of (one token, found
    /// by one lookup); the rest is counted out of line.
    #[inline(always)]
    pub(crate) fn count_piece(&'static self, piece: &[u8], scratch: &mut Scratch) -> usize {
        if piece.len() <= 1 {
            return piece.len();
        }
        if let &[a, b] = piece {
            // One token if the two bytes are one (and, for a merge list, merge).
            let id = self.pairs[pair_index(a, b)];
            return if id != NO_RANK && self.is_whole(id, piece, scratch) {
                1
            } else {
                2
            };
        }
        if piece.len() <= pieces::MAX_BYTES {
            // One key serves the token lookup and the piece cache.
            let key = Key::of(piece);
            if piece.len() <= self.max_len {
                let id = self.index.get(&self.vocab, piece, key);
                if id != NO_RANK && self.is_whole(id, piece, scratch) {
                    return 1;
                }
            }
            return self.count_short_merged(piece, key, scratch);
        }
        self.count_long(piece, scratch)
    }

    /// [`Ranks::count_piece`] of a piece longer than [`pieces::MAX_BYTES`]: one token,
    /// from the piece cache, or merged.
    #[inline(never)]
    fn count_long(&'static self, piece: &[u8], scratch: &mut Scratch) -> usize {
        let id = self.rank(piece);
        if id != NO_RANK && self.is_whole(id, piece, scratch) {
            return 1;
        }
        if piece.len() > pieces::LONG_MAX_BYTES {
            return self.merge_long(piece, scratch);
        }
        let hash = Key::of(piece).hash;
        if let Some(n) = scratch.pieces.get_long(self.id, piece, hash) {
            return n;
        }
        let n = self.merge_long(piece, scratch);
        scratch.pieces.insert_long(self.id, piece, hash, n);
        n
    }

    /// The merge of a piece longer than [`pieces::MAX_BYTES`] that is not one token.
    fn merge_long(&'static self, piece: &[u8], scratch: &mut Scratch) -> usize {
        if piece.len() < LONG_MIN_BYTES {
            return self.merge_quadratic(piece, &mut scratch.parts);
        }
        if piece.len() >= REPEAT_MIN_BYTES {
            if let Some(n) = self.count_repeated(piece, scratch) {
                return n;
            }
        }
        if let Some(merges) = &self.merges {
            // The backtracking encoder assumes tiktoken's rule (any two parts that spell
            // a token merge); a merge list is followed by the exact heap merge. On token
            // ids once long pieces add up (a long run's parts grow long: hashing their
            // bytes for every pair would cost more than the merge); until then on bytes,
            // for the map of pairs by ids costs as much to build as merging
            // [`PAIR_MAP_AFTER_BYTES`] by bytes — ordinary text, whose long pieces are
            // a few lines of `=` or `#`, never pays for it.
            if !merges.has_pair_map() {
                let merged = self.heap_bytes.fetch_add(piece.len(), Ordering::Relaxed);
                if merged + piece.len() < PAIR_MAP_AFTER_BYTES {
                    return self.merge_heap(piece, scratch);
                }
            }
            return merges.merge_heap(self, piece, scratch);
        }
        let long = match self.long.get() {
            Some(long) => long,
            None if piece.len() >= BUILD_AFTER_BYTES => {
                // As costly to merge by the heap as to build the tables: build them here.
                let _ = self.long.set(Backtrack::new(self));
                match self.long.get() {
                    Some(long) => long,
                    None => return self.merge_heap(piece, scratch),
                }
            }
            None => {
                let merged = self.heap_bytes.fetch_add(piece.len(), Ordering::Relaxed);
                if merged + piece.len() >= BUILD_AFTER_BYTES {
                    self.build_in_background();
                }
                return self.merge_heap(piece, scratch);
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

    /// [`Ranks::count_piece`] of a piece of 3 to [`pieces::MAX_BYTES`] bytes, whose
    /// key is `key`, that is not one token: from the piece cache, or merged.
    #[inline(never)]
    fn count_short_merged(&'static self, piece: &[u8], key: Key, scratch: &mut Scratch) -> usize {
        if let Some(n) = scratch.pieces.get(self.id, piece, key.hash) {
            return n;
        }
        let n = self.merge_quadratic(piece, &mut scratch.parts);
        scratch.pieces.insert(self.id, piece, key.hash, n);
        n
    }

    /// The count of a piece that is one short unit repeated (a megabyte of `中`), when
    /// no token of the table spans the seam between two repeats: no merge can then
    /// cross a seam, so each repeat merges on its own, exactly as the unit alone does,
    /// and the piece counts `repeats × count(unit) + count(rest)`, the rest being the
    /// start of one more unit. `None` for any other piece (including runs such as
    /// spaces or `a`, which the table's tokens do span), which the mergers count.
    fn count_repeated(&'static self, piece: &[u8], scratch: &mut Scratch) -> Option<usize> {
        let unit = &piece[..repeat_unit(piece)?];
        // The last unit's answer is kept: a text may hold many runs of one character.
        let spans = match &scratch.seam {
            Some((table, seen, spans)) if *table == self.id && seen.as_slice() == unit => *spans,
            _ => {
                let spans = self.spans_a_seam(unit);
                scratch.seam = Some((self.id, unit.to_vec(), spans));
                spans
            }
        };
        if spans {
            return None;
        }
        let unit = unit.len();
        let repeats = piece.len() / unit;
        let rest = &piece[repeats * unit..];
        let per_unit = self.count_piece(&piece[..unit], scratch);
        Some(repeats * per_unit + self.count_piece(rest, scratch))
    }

    /// Whether a token of the table occurs in `unit` repeated across the seam between
    /// two repeats: a substring of the repeats that starts within one `unit` and ends
    /// in the next. The repeats are periodic, so its start within the unit and its
    /// length name it.
    fn spans_a_seam(&self, unit: &[u8]) -> bool {
        let n = unit.len();
        // Enough repeats for the longest token to start anywhere in the first one.
        let repeats: Vec<u8> = unit
            .iter()
            .copied()
            .cycle()
            .take(n + self.max_len)
            .collect();
        (0..n).any(|start| {
            // Lengths that end past the seam, up to the longest token.
            (n - start + 1..=self.max_len)
                .any(|len| self.rank(&repeats[start..start + len]) != NO_RANK)
        })
    }

    /// Starts building the long-piece tables on a thread of its own, unless this
    /// process already did; counts merge by the heap until they are there. If no thread
    /// can be started, a later count tries again.
    fn build_in_background(&'static self) {
        let pid = std::process::id();
        let started = self.builder.load(Ordering::Acquire);
        if started == pid
            || self
                .builder
                .compare_exchange(started, pid, Ordering::AcqRel, Ordering::Acquire)
                .is_err()
        {
            return; // under way in this process (or another count just started it)
        }
        #[cfg(test)]
        let gate = self.gate.lock().ok().and_then(|mut g| g.take());
        let spawned = std::thread::Builder::new()
            .name("ctxbudget-bpe-tables".to_owned())
            .spawn(move || {
                #[cfg(test)]
                if let Some(gate) = gate {
                    let _ = gate.recv();
                }
                let _ = self.long.set(Backtrack::new(self));
            });
        if spawned.is_err() {
            self.builder.store(0, Ordering::Release);
        }
    }

    /// Whether `piece`, which spells token `id`, counts as that one token: always for
    /// tiktoken's tables; for a merge list, only if its merges reach the whole piece.
    #[inline(always)]
    fn is_whole(&self, id: u32, piece: &[u8], scratch: &mut Scratch) -> bool {
        match &self.merges {
            None => true,
            Some(merges) => merges.is_whole(id, || self.merge_any(piece, scratch)),
        }
    }

    /// The quadratic merge for short pieces, the heap merge for long ones.
    fn merge_any(&self, piece: &[u8], scratch: &mut Scratch) -> usize {
        if piece.len() < LONG_MIN_BYTES {
            self.merge_quadratic(piece, &mut scratch.parts)
        } else {
            self.merge_heap(piece, scratch)
        }
    }

    /// tiktoken's merge: repeatedly join the adjacent pair of lowest rank, the leftmost
    /// on ties. `parts[k] = (start of part k, rank of joining part k with part k+1)`.
    pub(crate) fn merge_quadratic(&self, piece: &[u8], parts: &mut Vec<(usize, u32)>) -> usize {
        if piece.is_empty() {
            return 0;
        }
        parts.clear();
        parts.extend((0..piece.len() - 1).map(|i| (i, self.pair(piece, i, i + 1, i + 2))));
        parts.push((piece.len() - 1, NO_RANK));
        parts.push((piece.len(), NO_RANK));
        loop {
            // The lowest rank, the leftmost on ties: the least of `rank << 32 | k`
            // (`k` fits: the pieces merged here are short), taken without a branch
            // on each comparison, which the predictor cannot guess (2–4% of a cold
            // pass).
            let best = parts[..parts.len() - 1]
                .iter()
                .enumerate()
                .map(|(k, &(_, rank))| u64::from(rank) << 32 | k as u64)
                .min()
                .unwrap_or(u64::MAX);
            if (best >> 32) as u32 == NO_RANK {
                break;
            }
            let k = (best & u64::from(u32::MAX)) as usize;
            parts.remove(k + 1);
            parts[k].1 = self.part_pair(piece, parts, k);
            if k > 0 {
                parts[k - 1].1 = self.part_pair(piece, parts, k - 1);
            }
        }
        parts.len() - 1
    }

    /// The rank of joining part `k` with part `k + 1` in [`Ranks::merge_quadratic`],
    /// given part boundaries. Always inlined: a call (a closure the compiler kept out
    /// of line) cost a quarter of each lookup's instructions.
    #[inline(always)]
    fn part_pair(&self, piece: &[u8], parts: &[(usize, u32)], k: usize) -> u32 {
        if k + 2 < parts.len() {
            self.pair(piece, parts[k].0, parts[k + 1].0, parts[k + 2].0)
        } else {
            NO_RANK
        }
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
                self.pair(piece, k, m, end(next, m))
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

/// Pieces at least this long are checked for being one unit repeated (see
/// [`Ranks::count_repeated`]): checking whether tokens span a unit's seams costs up to
/// a few thousand lookups, as much as merging a few kilobytes.
const REPEAT_MIN_BYTES: usize = 4096;

/// Longest unit [`repeat_unit`] looks for: an emoji with a modifier is 8 bytes.
const MAX_REPEAT_UNIT: usize = 16;

/// Length of the shortest unit (at most [`MAX_REPEAT_UNIT`] bytes) that `piece` is a
/// repetition of, at least twice, possibly ending in part of one more repeat; `None`
/// when there is none. Most long pieces fail the first-bytes checks at once; a piece
/// that passes them costs one comparison of its bytes with themselves, shifted.
fn repeat_unit(piece: &[u8]) -> Option<usize> {
    (1..=MAX_REPEAT_UNIT.min(piece.len() / 2)).find(|&unit| {
        piece[unit..2 * unit] == piece[..unit] && piece[unit..] == piece[..piece.len() - unit]
    })
}

/// Buffers reused across pieces so that counting does not allocate per piece.
#[derive(Default)]
pub(crate) struct Scratch {
    parts: Vec<(usize, u32)>,
    pub(crate) next: Vec<usize>,
    pub(crate) prev: Vec<usize>,
    pub(crate) rank: Vec<u32>,
    /// Token id of each part (the merge-list heap merge).
    pub(crate) ids: Vec<u32>,
    pub(crate) heap: BinaryHeap<Reverse<(u32, usize)>>,
    long: LongScratch,
    /// The table and unit [`Ranks::count_repeated`] last checked, and whether the
    /// table's tokens span the unit's seams.
    seam: Option<(u64, Vec<u8>, bool)>,
    /// Counts of short multi-token pieces; see [`Scratch::lend_piece_cache`].
    pieces: PieceCache,
}

impl Scratch {
    /// Buffers for one count, with this thread's piece cache lent to them; give the
    /// cache back with [`Scratch::return_piece_cache`] when the count is done.
    pub(crate) fn lend_piece_cache() -> Scratch {
        Scratch {
            pieces: PieceCache::take(),
            ..Scratch::default()
        }
    }

    /// Gives the piece cache back to this thread (see [`Scratch::lend_piece_cache`]).
    pub(crate) fn return_piece_cache(self) {
        self.pieces.give_back();
    }
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
    fn same_bytes_is_slice_equality() {
        let base: Vec<u8> = (0..40u8).collect();
        for n in 0..=base.len() {
            let a = &base[..n];
            assert!(same_bytes(a, a), "{n}");
            for k in 0..n {
                let mut b = a.to_vec();
                b[k] ^= 0x20;
                assert!(!same_bytes(a, &b), "{n} {k}");
            }
            if n > 0 {
                assert!(!same_bytes(a, &base[..n - 1]), "{n}");
            }
        }
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

    fn o200k() -> &'static Ranks {
        let data = super::super::vocab::source("o200k_base").unwrap_or_default();
        // Leaked: a background build borrows the table for as long as it runs.
        Box::leak(Box::new(Ranks::new(
            Vocab::parse(data).unwrap_or_else(|e| panic!("{e}")),
        )))
    }

    /// A lowercase word of `len` bytes: one long piece, of pseudo-random letters (not a
    /// short unit repeated, which `Ranks::count_repeated` would count).
    fn word(seed: usize, len: usize) -> String {
        let mut state = (seed as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        (0..len)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                char::from(b'a' + (state % 26) as u8)
            })
            .collect()
    }

    fn cl100k() -> &'static Ranks {
        let data = super::super::vocab::source("cl100k_base").unwrap_or_default();
        Box::leak(Box::new(Ranks::new(
            Vocab::parse(data).unwrap_or_else(|e| panic!("{e}")),
        )))
    }

    /// A run of one unit counts as the heap merge counts it, whether or not the
    /// table's tokens span the seam between repeats (`中` and emoji: none do, so the
    /// run is counted from its unit; `a`, `я` in o200k, `ab`: some do, so the mergers
    /// count it), and whatever part of a unit ends it.
    #[test]
    fn repeated_units_count_as_the_heap_merge_does() {
        for ranks in [o200k(), cl100k()] {
            let mut scratch = Scratch::default();
            for unit in ["中", "😀", "é", "я", "a", "ab", "中a", "👍🏽", "\u{3000}"] {
                for len in [64, 200, 4_096, 4_097, 4_099, 10_001] {
                    let bytes: Vec<u8> = unit.bytes().cycle().take(len).collect();
                    assert_eq!(
                        ranks.count_piece(&bytes, &mut scratch),
                        ranks.merge_heap(&bytes, &mut scratch),
                        "{unit:?} × {len} bytes"
                    );
                }
            }
        }
        assert_eq!(repeat_unit("中".repeat(30).as_bytes()), Some(3));
        assert_eq!(repeat_unit(b"abcabcab"), Some(3));
        assert_eq!(repeat_unit(b"abcabd"), None);
        let seams = o200k();
        assert!(!seams.spans_a_seam("中".as_bytes()));
        assert!(seams.spans_a_seam(b"a"));
    }

    /// The count that takes the running total of heap-merged long pieces past the mark
    /// returns without building the tables: a thread of their own builds them (held
    /// here by the gate, so the count provably did not wait for it), and counts merge by
    /// the heap meanwhile, exactly.
    #[test]
    fn crossing_the_mark_builds_the_tables_off_the_counting_thread() {
        let ranks = o200k();
        let (open, gate) = std::sync::mpsc::channel();
        *ranks.gate.lock().unwrap_or_else(|e| e.into_inner()) = Some(gate);
        let mut scratch = Scratch::default();
        let pieces: Vec<String> = (0..BUILD_AFTER_BYTES / 2_000 + 2)
            .map(|n| word(n, 2_000))
            .collect();
        let mut counted = Vec::new();
        for piece in &pieces {
            counted.push(ranks.count_piece(piece.as_bytes(), &mut scratch));
            assert!(
                ranks.long.get().is_none(),
                "a count built the tables in place"
            );
        }
        assert_eq!(ranks.builder.load(Ordering::Acquire), std::process::id());
        let heap: Vec<usize> = pieces
            .iter()
            .map(|p| ranks.merge_heap(p.as_bytes(), &mut scratch))
            .collect();
        assert_eq!(counted, heap);
        open.send(()).unwrap_or_else(|e| panic!("{e}"));
        // The build takes a fraction of a second; a minute means it never ran.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while ranks.long.get().is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the background build never ended"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(ranks.long.get().is_some_and(Option::is_some));
        let after: Vec<usize> = pieces
            .iter()
            .map(|p| ranks.count_piece(p.as_bytes(), &mut scratch))
            .collect();
        assert_eq!(after, heap);
    }

    /// Long pieces go to the heap merge until a quarter megabyte of them has been
    /// merged, then to the backtracking encoder; both count alike. A piece that long by
    /// itself builds the tables in place.
    #[test]
    fn tables_are_built_once_enough_long_text_was_merged() {
        let ranks = o200k();
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
