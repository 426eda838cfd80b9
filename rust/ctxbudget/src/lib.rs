//! # ctxbudget
//!
//! Token-budget context windows for agent backends. This core crate holds the parts that
//! must be exact and fast, usable from Rust without Python:
//!
//! - [`tokens`]: exact, linear-time token counting over tiktoken's encodings.
//! - [`budget`]: the token-budget ladder (SPEC §2) in integer arithmetic.
//! - [`history`]: the crash-safe JSONL transcript store (framed O(batch) appends,
//!   cross-process lock, receipts, recovery).
//! - [`scan`]: the `session_history` tool — bounded, fail-closed retrieval of earlier
//!   windows with authenticated cursors.
//! - `pg` (cargo feature `postgres`): the PostgreSQL store — conversations in a shared
//!   database for backends on many hosts.
//!
//! The Python package `ctxbudget` wraps this crate and adds policy, settings and tools.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod budget;
pub mod history;
#[cfg(feature = "postgres")]
pub mod pg;
pub mod scan;
pub mod tokens;

pub use tokens::{Encoding, TokenCount, TokenError};
