//! The versioned schema and its migrations.
//!
//! Every host runs [`migrate`] when it connects. The migrations run in one transaction that
//! first takes a transaction-scoped advisory lock ([`MIGRATION_LOCK`]), so when two hosts
//! start at once one migrates and the other waits, then finds the work done. Each step is
//! recorded in `ctxbudget_schema_version`; a database whose version is newer than this
//! library's is refused ([`PgError::SchemaTooNew`]) instead of being written with old rules.

use postgres::Client;

use super::error::{PgError, Result};

/// Key of the advisory lock held while migrating ("ctxbdgt1" as a number).
pub const MIGRATION_LOCK: i64 = 0x6374_7862_6467_7431;

/// The newest schema version this library knows.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Migration `i` takes the schema from version `i` to `i + 1`. Append, never edit.
const MIGRATIONS: &[&str] = &[V1, V2];

/// Version 1: conversations, rows, memory files, keys.
const V1: &str = r#"
CREATE FUNCTION ctxbudget_new_epoch() RETURNS bigint LANGUAGE sql VOLATILE AS $f$
  SELECT (('x' || substr(md5(gen_random_uuid()::text), 1, 16))::bit(64)::bigint)
         & 9223372036854775807
$f$;

CREATE TABLE ctxbudget_conversations (
  conversation text PRIMARY KEY
    CHECK (octet_length(conversation) BETWEEN 1 AND 256),
  epoch bigint NOT NULL DEFAULT ctxbudget_new_epoch() CHECK (epoch >= 0),
  last_seq bigint NOT NULL DEFAULT 0 CHECK (last_seq >= 0),
  floor_seq bigint NOT NULL DEFAULT 0 CHECK (floor_seq >= 0 AND floor_seq <= last_seq),
  archived_before bigint NOT NULL DEFAULT 1
    CHECK (archived_before >= 1 AND archived_before <= last_seq + 1),
  created_at timestamptz NOT NULL DEFAULT now()
);

-- The privacy floor is never lowered and a seq is never handed out twice, whoever
-- writes: the library raises them with GREATEST, and this trigger refuses any update
-- (a hand-written one included) that would lower them.
CREATE FUNCTION ctxbudget_conversation_guard() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  IF NEW.floor_seq < OLD.floor_seq THEN
    RAISE EXCEPTION 'ctxbudget: the privacy floor of conversation % cannot be lowered (% -> %)',
      OLD.conversation, OLD.floor_seq, NEW.floor_seq USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.last_seq < OLD.last_seq THEN
    RAISE EXCEPTION 'ctxbudget: the last seq of conversation % cannot go back (% -> %)',
      OLD.conversation, OLD.last_seq, NEW.last_seq USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.archived_before < OLD.archived_before THEN
    RAISE EXCEPTION 'ctxbudget: archived rows of conversation % cannot be unarchived',
      OLD.conversation USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.conversation <> OLD.conversation THEN
    RAISE EXCEPTION 'ctxbudget: a conversation cannot be renamed'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$f$;

CREATE TRIGGER ctxbudget_conversation_guard BEFORE UPDATE ON ctxbudget_conversations
  FOR EACH ROW EXECUTE FUNCTION ctxbudget_conversation_guard();

CREATE TABLE ctxbudget_rows (
  conversation text NOT NULL
    REFERENCES ctxbudget_conversations (conversation) ON DELETE CASCADE,
  seq bigint NOT NULL CHECK (seq >= 1),
  body bytea NOT NULL,
  floor boolean NOT NULL DEFAULT false,
  batch_id text CHECK (octet_length(batch_id) BETWEEN 1 AND 128),
  batch_last bigint CHECK (batch_last >= seq),
  PRIMARY KEY (conversation, seq),
  CHECK ((batch_id IS NULL) = (batch_last IS NULL))
);

CREATE UNIQUE INDEX ctxbudget_rows_batch ON ctxbudget_rows (conversation, batch_id)
  WHERE batch_id IS NOT NULL;

-- Rows are append-only. Any other change to them (an UPDATE or DELETE by hand) gives the
-- conversation a new epoch, so cursors minted before it fail closed, as the file store's
-- do after an unexplained change.
CREATE FUNCTION ctxbudget_rows_changed() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE ctxbudget_conversations SET epoch = ctxbudget_new_epoch()
    WHERE conversation = OLD.conversation;
  RETURN NULL;
END
$f$;

CREATE TRIGGER ctxbudget_rows_changed AFTER UPDATE OR DELETE ON ctxbudget_rows
  FOR EACH ROW EXECUTE FUNCTION ctxbudget_rows_changed();

CREATE TABLE ctxbudget_memory_files (
  conversation text NOT NULL
    REFERENCES ctxbudget_conversations (conversation) ON DELETE CASCADE,
  path text NOT NULL CHECK (
    path LIKE '/memories/_%' AND octet_length(path) <= 1024 AND path NOT LIKE '%/'
    AND path NOT LIKE '%//%' AND path NOT LIKE '%/./%' AND path NOT LIKE '%/../%'
    AND path NOT LIKE '%/.' AND path NOT LIKE '%/..' AND strpos(path, '\') = 0),
  content bytea NOT NULL CHECK (
    octet_length(content) <= CASE WHEN path LIKE '/memories/session/%' THEN 8192 ELSE 262144 END),
  updated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (conversation, path)
);

CREATE TABLE ctxbudget_keys (
  name text PRIMARY KEY,
  key bytea NOT NULL CHECK (octet_length(key) >= 32),
  created_at timestamptz NOT NULL DEFAULT now()
);
"#;

/// Version 2: rows written by hand — an `INSERT` outside the library's appends (a row put
/// into a gap) or a `TRUNCATE` — give the conversation a new epoch too, as an `UPDATE` or
/// `DELETE` does, so no cursor or handle's index spans them. The library's appends mark
/// their transaction (`ctxbudget.appending` = the conversation, set by the statement that
/// locks it), and the row trigger's `WHEN` skips them without running any function.
const V2: &str = r#"
CREATE FUNCTION ctxbudget_rows_inserted() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE ctxbudget_conversations SET epoch = ctxbudget_new_epoch()
    WHERE conversation = NEW.conversation;
  RETURN NULL;
END
$f$;

CREATE TRIGGER ctxbudget_rows_inserted AFTER INSERT ON ctxbudget_rows
  FOR EACH ROW
  WHEN (current_setting('ctxbudget.appending', true) IS DISTINCT FROM NEW.conversation)
  EXECUTE FUNCTION ctxbudget_rows_inserted();

CREATE FUNCTION ctxbudget_rows_truncated() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE ctxbudget_conversations SET epoch = ctxbudget_new_epoch();
  RETURN NULL;
END
$f$;

CREATE TRIGGER ctxbudget_rows_truncated AFTER TRUNCATE ON ctxbudget_rows
  FOR EACH STATEMENT EXECUTE FUNCTION ctxbudget_rows_truncated();
"#;

/// Brings the schema to [`SCHEMA_VERSION`]; returns the version found before.
pub(crate) fn migrate(client: &mut Client, schema: Option<&str>) -> Result<i32> {
    let mut tx = client.transaction().map_err(PgError::db("BEGIN"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(PgError::db("the migration lock"))?;
    if let Some(schema) = schema {
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {}",
            quote_ident(schema)
        ))
        .map_err(PgError::db("CREATE SCHEMA"))?;
    }
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS ctxbudget_schema_version (
           version int PRIMARY KEY,
           applied_at timestamptz NOT NULL DEFAULT now())",
    )
    .map_err(PgError::db("creating ctxbudget_schema_version"))?;
    let found: i32 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM ctxbudget_schema_version",
            &[],
        )
        .map_err(PgError::db("reading the schema version"))?
        .get(0);
    if found > SCHEMA_VERSION {
        return Err(PgError::SchemaTooNew {
            found,
            known: SCHEMA_VERSION,
        });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found.max(0) as usize) {
        tx.batch_execute(sql)
            .map_err(PgError::db("a schema migration"))?;
        let version = i as i32 + 1;
        tx.execute(
            "INSERT INTO ctxbudget_schema_version (version) VALUES ($1)",
            &[&version],
        )
        .map_err(PgError::db("recording the schema version"))?;
    }
    tx.commit()
        .map_err(PgError::db("COMMIT of the migration"))?;
    Ok(found)
}

/// `name` as a quoted SQL identifier.
pub(crate) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}
