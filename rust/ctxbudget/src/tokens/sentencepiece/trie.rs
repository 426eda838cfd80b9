//! A byte trie over hashed edges: pieces that start at a position are found by walking
//! the text's bytes from it, one lookup a byte, stopping where no piece goes on.

use rustc_hash::FxHashMap;

/// Marks a node where no piece ends.
const NO_VALUE: u32 = u32::MAX;

/// Pieces by their bytes; each node holds the value of the piece ending there.
pub(super) struct Trie {
    edges: FxHashMap<(u32, u8), u32>,
    values: Vec<u32>,
}

impl Trie {
    /// A trie of `keys`, each with its value (a later key equal to an earlier one
    /// keeps the earlier value).
    pub(super) fn new<'a>(keys: impl IntoIterator<Item = (&'a [u8], u32)>) -> Trie {
        let mut trie = Trie {
            edges: FxHashMap::default(),
            values: vec![NO_VALUE],
        };
        for (key, value) in keys {
            let mut node = 0u32;
            for &byte in key {
                let next = trie.values.len() as u32;
                node = *trie.edges.entry((node, byte)).or_insert_with(|| next);
                if node == next {
                    trie.values.push(NO_VALUE);
                }
            }
            if let Some(slot) = trie.values.get_mut(node as usize) {
                if *slot == NO_VALUE {
                    *slot = value;
                }
            }
        }
        trie
    }

    /// Calls `each(length, value)` for every key that is a prefix of `text`, shortest
    /// first.
    #[inline]
    pub(super) fn prefixes(&self, text: &[u8], mut each: impl FnMut(usize, u32)) {
        let mut node = 0u32;
        for (i, &byte) in text.iter().enumerate() {
            match self.edges.get(&(node, byte)) {
                Some(&next) => node = next,
                None => return,
            }
            let value = self.values[node as usize];
            if value != NO_VALUE {
                each(i + 1, value);
            }
        }
    }

    /// Length of the longest key that is a prefix of `text` (0: none).
    #[inline]
    pub(super) fn longest_prefix(&self, text: &[u8]) -> usize {
        let mut longest = 0;
        self.prefixes(text, |len, _| longest = len);
        longest
    }
}
