//! SentencePiece's BPE (`bpe_model.cc`): the normalized text split into characters
//! (user-defined symbols whole, never merged), then the adjacent pair whose join is a
//! piece with the highest score merged first (the leftmost among equal scores), until
//! no join is a piece; an unused piece is given back as the two parts it was made of.
//!
//! When no piece joins a character to a following space mark (every model trained
//! with `split_by_whitespace`, the default), no merge crosses the start of a word, so
//! each word is merged on its own: the same merges, on heaps of a word's size.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

use rustc_hash::FxHashMap;

use super::normalize::{one_char_len, SPACE_MARK};
use super::proto::PieceType;
use super::{Model, Tally};

/// Marks "no neighbour".
const NONE: u32 = u32::MAX;

/// A symbol: its bytes `start..end` of the normalized text and its neighbours.
#[derive(Clone, Copy)]
struct Symbol {
    start: u32,
    end: u32,
    prev: u32,
    next: u32,
    frozen: bool,
}

/// A candidate merge of two adjacent symbols.
struct Pair {
    score: f32,
    left: u32,
    right: u32,
    size: u32,
}

impl PartialEq for Pair {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}

impl Eq for Pair {}

impl PartialOrd for Pair {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Pair {
    /// Higher scores first, then the leftmost (as sentencepiece's comparator, whose
    /// `<` on floats makes 0.0 and -0.0 equal).
    fn cmp(&self, other: &Self) -> Ordering {
        self.score
            .partial_cmp(&other.score)
            .unwrap_or(Ordering::Equal)
            .then_with(|| other.left.cmp(&self.left))
    }
}

/// Encodes `text` (normalized) and tallies its pieces.
pub(super) fn encode(model: &Model, text: &[u8], tally: &mut Tally) {
    let mut symbols: Vec<Symbol> = Vec::new();
    let mut at = 0usize;
    while at < text.len() {
        let user = model.user.longest_prefix(&text[at..]);
        let len = if user > 0 {
            user
        } else {
            one_char_len(text[at]).min(text.len() - at)
        };
        symbols.push(Symbol {
            start: at as u32,
            end: (at + len) as u32,
            prev: NONE,
            next: NONE,
            frozen: user > 0,
        });
        at += len;
    }
    let mut heap = BinaryHeap::new();
    let mut unused = FxHashMap::default();
    let mut start = 0;
    while start < symbols.len() {
        let mut end = start + 1;
        if model.word_parts {
            while end < symbols.len() && !starts_word(text, &symbols, end) {
                end += 1;
            }
        } else {
            end = symbols.len();
        }
        merge(
            model,
            text,
            &mut symbols[start..end],
            &mut heap,
            &mut unused,
            tally,
        );
        start = end;
    }
}

/// Whether symbol `i` is a space mark after something else: a word starts there.
fn starts_word(text: &[u8], symbols: &[Symbol], i: usize) -> bool {
    let is_mark = |s: &Symbol| !s.frozen && &text[s.start as usize..s.end as usize] == SPACE_MARK;
    is_mark(&symbols[i]) && !is_mark(&symbols[i - 1])
}

/// Merges one word's symbols and tallies the pieces it ends with.
fn merge<'t>(
    model: &Model,
    text: &'t [u8],
    symbols: &mut [Symbol],
    heap: &mut BinaryHeap<Pair>,
    unused: &mut FxHashMap<&'t [u8], (&'t [u8], &'t [u8])>,
    tally: &mut Tally,
) {
    let n = symbols.len();
    for (i, s) in symbols.iter_mut().enumerate() {
        s.prev = if i == 0 { NONE } else { i as u32 - 1 };
        s.next = if i + 1 == n { NONE } else { i as u32 + 1 };
    }
    heap.clear();
    unused.clear();
    let bytes = |s: &Symbol| &text[s.start as usize..s.end as usize];
    let consider = |symbols: &[Symbol],
                    heap: &mut BinaryHeap<Pair>,
                    unused: &mut FxHashMap<&'t [u8], (&'t [u8], &'t [u8])>,
                    left: u32,
                    right: u32| {
        if left == NONE || right == NONE {
            return;
        }
        let (l, r) = (&symbols[left as usize], &symbols[right as usize]);
        if l.frozen || r.frozen {
            return;
        }
        let joined = &text[l.start as usize..r.end as usize];
        let Some(piece) = model.pieces.get(joined) else {
            return;
        };
        heap.push(Pair {
            score: piece.score,
            left,
            right,
            size: joined.len() as u32,
        });
        if piece.kind == PieceType::Unused {
            unused.insert(joined, (bytes(l), bytes(r)));
        }
    };
    for i in 1..n {
        consider(symbols, heap, unused, i as u32 - 1, i as u32);
    }
    while let Some(top) = heap.pop() {
        let (l, r) = (symbols[top.left as usize], symbols[top.right as usize]);
        // A pair whose symbols have changed since is stale.
        if l.start == l.end || r.start == r.end || (l.end - l.start) + (r.end - r.start) != top.size
        {
            continue;
        }
        symbols[top.left as usize].end = r.end;
        symbols[top.left as usize].next = r.next;
        if r.next != NONE {
            symbols[r.next as usize].prev = top.left;
        }
        symbols[top.right as usize].end = r.start;
        symbols[top.right as usize].start = r.start;
        let prev = symbols[top.left as usize].prev;
        consider(symbols, heap, unused, prev, top.left);
        let next = symbols[top.left as usize].next;
        consider(symbols, heap, unused, top.left, next);
    }
    let mut i = 0u32;
    while i != NONE && (i as usize) < n {
        resegment(model, bytes(&symbols[i as usize]), unused, tally);
        i = symbols[i as usize].next;
    }
}

/// Tallies `piece`, given back as its parts if it is an unused piece.
fn resegment(
    model: &Model,
    piece: &[u8],
    unused: &FxHashMap<&[u8], (&[u8], &[u8])>,
    tally: &mut Tally,
) {
    match model.pieces.get(piece) {
        None => tally.piece(piece.len(), true),
        Some(p) if p.kind == PieceType::Unused => match unused.get(piece) {
            Some(&(left, right)) => {
                resegment(model, left, unused, tally);
                resegment(model, right, unused, tally);
            }
            None => tally.piece(piece.len(), false),
        },
        Some(_) => tally.piece(piece.len(), false),
    }
}
