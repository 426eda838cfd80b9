//! The bodies of a conversation's newest rows, kept by the handle that read or wrote
//! them, so a `session_history` page reads them from memory instead of fetching up to its
//! whole 2 MiB scan budget from the server on every call.
//!
//! Rows never change within an epoch (any other change gives the conversation a new one,
//! and a new epoch drops the index and this cache with it), so a kept body is the stored
//! body. Each handle keeps at most [`HANDLE_BYTES`], and every handle of the process
//! together at most [`PROCESS_BYTES`]; past either bound the oldest bodies go first.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::scan::SCAN_MAX_BYTES;

/// Most body bytes one handle keeps: twice what one `session_history` call may scan.
pub const HANDLE_BYTES: usize = 2 * SCAN_MAX_BYTES as usize;
/// Most body bytes every handle of the process keeps together.
pub const PROCESS_BYTES: usize = 256 * 1024 * 1024;

static PROCESS_KEPT: AtomicUsize = AtomicUsize::new(0);

/// The newest bodies of one handle's conversation, in seq order.
#[derive(Debug, Default)]
pub struct BodyCache {
    bodies: VecDeque<(u64, Vec<u8>)>,
    bytes: usize,
}

impl BodyCache {
    /// Keeps the body of `seq`, which follows every seq kept so far; drops the oldest
    /// while over a bound (a body over the handle's bound is not kept).
    pub(crate) fn keep(&mut self, seq: u64, body: &[u8]) {
        if body.len() > HANDLE_BYTES {
            return;
        }
        while !self.bodies.is_empty()
            && (self.bytes + body.len() > HANDLE_BYTES
                || PROCESS_KEPT.load(Ordering::Relaxed) + body.len() > PROCESS_BYTES)
        {
            self.drop_oldest();
        }
        if PROCESS_KEPT.load(Ordering::Relaxed) + body.len() > PROCESS_BYTES {
            return; // other handles hold the process's share
        }
        PROCESS_KEPT.fetch_add(body.len(), Ordering::Relaxed);
        self.bytes += body.len();
        self.bodies.push_back((seq, body.to_vec()));
    }

    fn drop_oldest(&mut self) {
        if let Some((_, body)) = self.bodies.pop_front() {
            self.bytes -= body.len();
            PROCESS_KEPT.fetch_sub(body.len(), Ordering::Relaxed);
        }
    }

    /// The kept body of `seq`.
    pub(crate) fn get(&self, seq: u64) -> Option<&[u8]> {
        let at = self.bodies.partition_point(|(s, _)| *s < seq);
        match self.bodies.get(at) {
            Some((s, body)) if *s == seq => Some(body),
            _ => None,
        }
    }
}

impl Drop for BodyCache {
    fn drop(&mut self) {
        PROCESS_KEPT.fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_the_newest_within_its_bound() {
        let mut cache = BodyCache::default();
        let row = vec![b'x'; HANDLE_BYTES / 4];
        for seq in 1..=6 {
            cache.keep(seq, &row);
        }
        assert!(cache.get(1).is_none() && cache.get(2).is_none());
        assert_eq!(cache.get(6), Some(row.as_slice()));
        assert!(cache.bytes <= HANDLE_BYTES);
        cache.keep(7, &vec![b'y'; HANDLE_BYTES + 1]);
        assert!(cache.get(7).is_none(), "a body over the bound is not kept");
    }
}
