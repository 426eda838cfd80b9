//! Bounded content-hash cache of token counts.
//!
//! An agent recounts its whole request before every step, and almost all of it is
//! unchanged. Keying counts by a 128-bit hash of the text turns each unchanged message
//! into a hash plus a lookup, so a step costs O(new content).
//!
//! Eviction is generational: each shard keeps a *young* and an *old* map; hits in the old
//! map are promoted, and when the young map fills up the old one is dropped. That bounds
//! memory to the capacity and keeps whatever was used since the last turnover — an LRU
//! approximation with no per-hit bookkeeping.

use std::sync::Mutex;

use rustc_hash::FxHashMap;

use super::TokenCount;

const SHARDS: usize = 16;

/// Seed of the keys of JSON counts (any value other than 0, the plain counts' seed).
const JSON_SEED: u64 = 0x6a73_6f6e;

#[derive(Default)]
struct Shard {
    young: FxHashMap<u128, TokenCount>,
    old: FxHashMap<u128, TokenCount>,
}

/// Sharded cache of counts keyed by content hash.
pub(crate) struct CountCache {
    shards: Vec<Mutex<Shard>>,
    /// Entries per generation per shard; a shard holds at most twice this.
    generation: usize,
}

impl CountCache {
    /// A cache that holds about `capacity` counts.
    pub(crate) fn new(capacity: usize) -> CountCache {
        CountCache {
            shards: (0..SHARDS).map(|_| Mutex::new(Shard::default())).collect(),
            generation: (capacity / (2 * SHARDS)).max(1),
        }
    }

    /// Hash used as the key of `text`.
    #[inline]
    pub(crate) fn key(text: &str) -> u128 {
        xxhash_rust::xxh3::xxh3_128(text.as_bytes())
    }

    /// The key of a JSON document's count (`Encoding::count_json`), apart from the
    /// key of the same text's plain count: the two counts differ.
    pub(crate) fn json_key(json_text: &str) -> u128 {
        xxhash_rust::xxh3::xxh3_128_with_seed(json_text.as_bytes(), JSON_SEED)
    }

    fn shard(&self, key: u128) -> &Mutex<Shard> {
        &self.shards[(key as usize) % SHARDS]
    }

    pub(crate) fn get(&self, key: u128) -> Option<TokenCount> {
        // A poisoned shard only means another thread panicked mid-insert into a plain
        // map; its contents are still valid counts.
        let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        if let Some(&count) = shard.young.get(&key) {
            return Some(count);
        }
        let count = shard.old.remove(&key)?;
        self.insert_locked(&mut shard, key, count);
        Some(count)
    }

    pub(crate) fn insert(&self, key: u128, count: TokenCount) {
        let mut shard = self.shard(key).lock().unwrap_or_else(|e| e.into_inner());
        self.insert_locked(&mut shard, key, count);
    }

    fn insert_locked(&self, shard: &mut Shard, key: u128, count: TokenCount) {
        if shard.young.len() >= self.generation {
            shard.old = std::mem::take(&mut shard.young);
        }
        shard.young.insert(key, count);
    }

    /// Number of cached counts.
    pub(crate) fn len(&self) -> usize {
        self.shards
            .iter()
            .map(|s| {
                let s = s.lock().unwrap_or_else(|e| e.into_inner());
                s.young.len() + s.old.len()
            })
            .sum()
    }

    /// Drops every cached count.
    pub(crate) fn clear(&self) {
        for s in &self.shards {
            *s.lock().unwrap_or_else(|e| e.into_inner()) = Shard::default();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tc(tokens: usize) -> TokenCount {
        TokenCount {
            tokens,
            exact: true,
        }
    }

    #[test]
    fn stays_bounded_and_keeps_recent_entries() {
        let cache = CountCache::new(64);
        for i in 0..10_000u128 {
            cache.insert(i, tc(i as usize));
        }
        assert!(cache.len() <= 64, "{}", cache.len());
        assert_eq!(cache.get(9_999), Some(tc(9_999)));
        assert_eq!(cache.get(0), None);
        cache.clear();
        assert_eq!(cache.len(), 0);
    }
}
