//! The cursor key shared by every host of a deployment.
//!
//! `session_history` cursors are HMAC-signed. With the file store the key is random per
//! process; hosts sharing a PostgreSQL store need one key so that a cursor minted on one
//! host pages on another. It comes from configuration ([`CURSOR_KEY_ENV`] or an argument)
//! or, when none is configured, from the database: the first host stores a random key in
//! `ctxbudget_keys` and every host reads that one.

use super::error::{PgError, Result};
use super::PgStore;

/// The environment variable that configures the cursor key.
pub const CURSOR_KEY_ENV: &str = "CTXBUDGET_CURSOR_KEY";
/// Fewest bytes a configured key may have.
pub const CURSOR_KEY_MIN_BYTES: usize = 32;
/// Bytes of a key the database generates (one HMAC-SHA256 block).
const GENERATED_KEY_BYTES: usize = 64;
/// Name of the cursor key's row in `ctxbudget_keys`.
const CURSOR_KEY_NAME: &str = "cursor";

/// An HMAC key for cursors. Its `Debug` form never shows the bytes.
#[derive(Clone, PartialEq, Eq)]
pub struct CursorKey(Vec<u8>);

impl std::fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CursorKey({} bytes)", self.0.len())
    }
}

impl CursorKey {
    /// A key from bytes; at least [`CURSOR_KEY_MIN_BYTES`].
    pub fn new(bytes: impl Into<Vec<u8>>) -> Result<CursorKey> {
        let bytes = bytes.into();
        if bytes.len() < CURSOR_KEY_MIN_BYTES {
            return Err(PgError::Config(format!(
                "a cursor key needs at least {CURSOR_KEY_MIN_BYTES} bytes, this one has {}; \
                 make one with `openssl rand -base64 48`",
                bytes.len()
            )));
        }
        Ok(CursorKey(bytes))
    }

    /// The key in [`CURSOR_KEY_ENV`] (its UTF-8 bytes), `None` when unset or empty.
    pub fn from_env() -> Result<Option<CursorKey>> {
        match std::env::var(CURSOR_KEY_ENV) {
            Ok(v) => CursorKey::from_setting(&v),
            Err(std::env::VarError::NotPresent) => Ok(None),
            Err(std::env::VarError::NotUnicode(_)) => Err(PgError::Config(format!(
                "{CURSOR_KEY_ENV} is not valid UTF-8"
            ))),
        }
    }

    /// The key a configuration value gives (as [`CURSOR_KEY_ENV`] would hold it): its UTF-8
    /// bytes, `None` when empty, an error naming the variable when too short.
    pub fn from_setting(value: &str) -> Result<Option<CursorKey>> {
        if value.is_empty() {
            return Ok(None);
        }
        CursorKey::new(value.as_bytes().to_vec())
            .map(Some)
            .map_err(|e| PgError::Config(format!("{CURSOR_KEY_ENV}: {e}")))
    }

    /// The key's bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

impl PgStore {
    /// The cursor key for this deployment: [`CURSOR_KEY_ENV`] when set, else the
    /// database's (see [`PgStore::database_cursor_key`]).
    pub fn cursor_key(&self) -> Result<CursorKey> {
        match CursorKey::from_env()? {
            Some(key) => Ok(key),
            None => self.database_cursor_key(),
        }
    }

    /// The key stored in the database, created once by whichever host asks first. Read
    /// first, so that a role with only `SELECT` (a reader) gets the key once it exists;
    /// while none is stored, such a role (which may not store one) gets a random key of
    /// this store (the same on every call): its cursors then page only within this
    /// process, as the file store's do.
    pub fn database_cursor_key(&self) -> Result<CursorKey> {
        if let Some(key) = self.stored_cursor_key()? {
            return Ok(key);
        }
        let mut fresh = vec![0u8; GENERATED_KEY_BYTES];
        getrandom::fill(&mut fresh).map_err(|e| {
            PgError::Config(format!(
                "no OS randomness for a new cursor key ({e}); set {CURSOR_KEY_ENV} instead"
            ))
        })?;
        let stored = self.run(|c| {
            let insert = c.statement(
                "INSERT INTO ctxbudget_keys (name, key) VALUES ($1, $2) \
                 ON CONFLICT (name) DO NOTHING",
            )?;
            c.client
                .execute(&insert, &[&CURSOR_KEY_NAME, &fresh])
                .map_err(PgError::db("storing the cursor key"))?;
            Ok(())
        });
        match stored {
            Err(e) if e.is_insufficient_privilege() => {
                let own = self.inner.own_key.get_or_init(|| CursorKey(fresh));
                return Ok(own.clone());
            }
            other => other?,
        }
        self.stored_cursor_key()?.ok_or_else(|| {
            PgError::Config("the cursor key stored in ctxbudget_keys disappeared".into())
        })
    }

    fn stored_cursor_key(&self) -> Result<Option<CursorKey>> {
        self.run(|c| {
            let select = c.statement("SELECT key FROM ctxbudget_keys WHERE name = $1")?;
            let rows = c
                .client
                .query(&select, &[&CURSOR_KEY_NAME])
                .map_err(PgError::db("reading the cursor key"))?;
            rows.first()
                .map(|row| CursorKey::new(row.get::<_, Vec<u8>>(0)))
                .transpose()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configured_keys_need_32_bytes() {
        assert!(matches!(CursorKey::from_setting(""), Ok(None)));
        let short = CursorKey::from_setting("too short");
        assert!(matches!(&short, Err(PgError::Config(m)) if m.contains(CURSOR_KEY_ENV)));
        let key = "k".repeat(CURSOR_KEY_MIN_BYTES);
        let got = CursorKey::from_setting(&key).ok().flatten();
        assert_eq!(got.as_ref().map(CursorKey::as_bytes), Some(key.as_bytes()));
        assert_eq!(format!("{:?}", got), "Some(CursorKey(32 bytes))");
    }
}
