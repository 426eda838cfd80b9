//! # ctxbudget
//!
//! Token-budget context windows for agent backends. This core crate holds the parts that
//! must be exact and fast, usable from Rust without Python:
//!
//! - [`tokens`]: exact, linear-time token counting over tiktoken's encodings.
//! - [`budget`]: the token-budget ladder (SPEC §2) in integer arithmetic.
//! - [`store`]: the crash-safe JSONL byte store (framed O(batch) appends, cross-process
//!   lock, receipts, recovery).
//! - [`transcript`]: what rows mean — row kinds, the one validation rule table, typed
//!   rows, the incremental window fold every reader shares, and the `Store` seam every
//!   backend implements (the file store's implementation included).
//! - [`scan`]: the `session_history` tool over any store's seam — bounded, fail-closed
//!   retrieval of earlier windows with authenticated cursors.
//! - [`memory`]: the in-memory backend — a byte log in the process, made a whole
//!   store by the transcript layer's `LogStore`.
//! - `pg` (cargo feature `postgres`): the PostgreSQL store — conversations in a shared
//!   database for backends on many hosts.
//!
//! The Python package `ctxbudget` wraps this crate and adds policy, settings and tools.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod anchor;
pub mod budget;
pub mod memory;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod scan;
pub mod store;
pub mod tokens;
pub mod transcript;

pub use tokens::{Encoding, TokenCount, TokenError};
