//! Opaque, authenticated cursors: base64url(payload) "." base64url(HMAC-SHA256).
//!
//! The key is random per process unless the store supplies one (hosts sharing a
//! PostgreSQL store share a key), so with the file store a restart expires every cursor. A cursor is bound
//! to the workspace, the action and its arguments, and carries what the store binds
//! cursors to (its epoch and, for the file store, the anchor — the last commit line's
//! offset and CRC when it was minted — that catches same-size rewrites) and the row to
//! continue from, named as the store names it.

use std::sync::OnceLock;

use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use base64::Engine;
use hmac::{Hmac, Mac};
use serde::{Deserialize, Serialize};
use sha2::Sha256;

type HmacSha256 = Hmac<Sha256>;

/// Where a page continues.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Payload {
    /// Format version.
    pub v: u8,
    /// Hash of the workspace's history directory.
    pub ws: u64,
    /// Hash of the action and its arguments.
    pub args: u64,
    /// The store's epoch when minted.
    pub epoch: u64,
    /// Which part of the store `off` is in (the store's `RowMark::part`: the file store's
    /// 0 = archive, 1 = chat).
    pub file: u8,
    /// Where the next row to examine is in that part (the file store: its byte offset).
    pub off: u64,
    /// Where the anchor is (the file store: the end of the last commit in chat.jsonl
    /// when minted; 0 without an anchor).
    pub anchor_off: u64,
    /// The checksum that must still be found there (the file store: that commit's CRC),
    /// if there is an anchor.
    pub anchor_crc: Option<u32>,
}

/// The per-process key: one HMAC-SHA256 block of random bytes.
fn key() -> &'static [u8; 64] {
    static KEY: OnceLock<[u8; 64]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 64];
        if getrandom::fill(&mut key).is_err() {
            // Without OS randomness, still never reuse a key across processes.
            for (i, chunk) in key.chunks_mut(8).enumerate() {
                let mix = crate::store::random_fallback(i as u64);
                chunk.copy_from_slice(&mix.to_le_bytes());
            }
        }
        key
    })
}

/// The MAC under `key`, or under the per-process key when there is none.
fn mac(key: Option<&[u8]>) -> HmacSha256 {
    match key {
        Some(k) => <HmacSha256 as hmac::Mac>::new_from_slice(k)
            .unwrap_or_else(|_| <HmacSha256 as hmac::digest::KeyInit>::new(&(*self::key()).into())),
        None => <HmacSha256 as hmac::digest::KeyInit>::new(&(*self::key()).into()),
    }
}

/// Encodes and signs `payload`.
pub(crate) fn mint(payload: &Payload, key: Option<&[u8]>) -> String {
    let body = serde_json::to_vec(payload).unwrap_or_default();
    let mut m = mac(key);
    m.update(&body);
    let tag = m.finalize().into_bytes();
    format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(&body),
        URL_SAFE_NO_PAD.encode(tag)
    )
}

/// Verifies and decodes a cursor; `None` if it was not minted under this key.
pub(crate) fn open(cursor: &str, key: Option<&[u8]>) -> Option<Payload> {
    let (body, tag) = cursor.split_once('.')?;
    let body = URL_SAFE_NO_PAD.decode(body).ok()?;
    let tag = URL_SAFE_NO_PAD.decode(tag).ok()?;
    let mut m = mac(key);
    m.update(&body);
    m.verify_slice(&tag).ok()?;
    parse(&body)
}

/// Decodes a cursor body whose MAC was verified.
pub(crate) fn parse(body: &[u8]) -> Option<Payload> {
    let payload: Payload = serde_json::from_slice(body).ok()?;
    (payload.v == 1).then_some(payload)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_tamper() {
        let p = Payload {
            v: 1,
            ws: 7,
            args: 9,
            epoch: 11,
            file: 1,
            off: 1234,
            anchor_off: 2000,
            anchor_crc: Some(5),
        };
        let c = mint(&p, None);
        assert_eq!(open(&c, None), Some(p.clone()));
        let shared = [7u8; 48];
        let c2 = mint(&p, Some(&shared));
        assert_eq!(open(&c2, Some(&shared)), Some(p));
        assert_eq!(open(&c2, None), None);
        assert_eq!(open(&c2, Some(&[8u8; 48])), None);
        let mut bytes = c.into_bytes();
        bytes[3] ^= 0x02;
        let tampered = String::from_utf8(bytes).unwrap_or_default();
        assert_eq!(open(&tampered, None), None);
        assert_eq!(open("not a cursor", None), None);
    }
}
