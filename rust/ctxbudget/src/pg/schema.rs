//! The versioned schema and its migrations.
//!
//! Every host checks the schema version when it connects, with one read (no lock, no
//! right beyond `SELECT` on `ctxbudget_schema_version`): a database at this library's
//! version is used as it is, so roles with only `SELECT` (readers) or `SELECT, INSERT,
//! UPDATE, DELETE` (hosts) on the tables open it. Only when the version is older (or the
//! tables are missing) does [`migrate`] change anything: first it checks that the role has
//! the rights the migration needs ([`PgError::MigrationNotAllowed`] names the missing
//! ones), then it runs the migrations in one transaction that first takes a
//! transaction-scoped advisory lock ([`MIGRATION_LOCK`]), so when two hosts start at once
//! one migrates and the other waits, then finds the work done. Each step is recorded in
//! `ctxbudget_schema_version`; a database whose version is newer than this library's is
//! refused ([`PgError::SchemaTooNew`]) instead of being written with old rules.

use postgres::Client;

use super::error::{PgError, Result};

/// Key of the advisory lock held while migrating ("ctxbdgt1" as a number).
pub const MIGRATION_LOCK: i64 = 0x6374_7862_6467_7431;

/// The newest schema version this library knows.
pub const SCHEMA_VERSION: i32 = MIGRATIONS.len() as i32;

/// Migration `i` takes the schema from version `i` to `i + 1`. Append, never edit.
const MIGRATIONS: &[&str] = &[V1, V2, V3, V4];

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

/// Version 3: the triggers that give a conversation a new epoch on a hand edit name the
/// conversations table of the schema the edited rows live in (`TG_TABLE_SCHEMA`), not
/// whatever the editing session's `search_path` finds first: with two installations in one
/// database (two schemas), an edit of one renews that one's epochs only.
const V3: &str = r#"
CREATE OR REPLACE FUNCTION ctxbudget_rows_changed() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE format('UPDATE %I.ctxbudget_conversations SET epoch = %I.ctxbudget_new_epoch() '
                 'WHERE conversation = $1', TG_TABLE_SCHEMA, TG_TABLE_SCHEMA)
    USING OLD.conversation;
  RETURN NULL;
END
$f$;

CREATE OR REPLACE FUNCTION ctxbudget_rows_inserted() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE format('UPDATE %I.ctxbudget_conversations SET epoch = %I.ctxbudget_new_epoch() '
                 'WHERE conversation = $1', TG_TABLE_SCHEMA, TG_TABLE_SCHEMA)
    USING NEW.conversation;
  RETURN NULL;
END
$f$;

CREATE OR REPLACE FUNCTION ctxbudget_rows_truncated() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  EXECUTE format('UPDATE %I.ctxbudget_conversations SET epoch = %I.ctxbudget_new_epoch()',
                 TG_TABLE_SCHEMA, TG_TABLE_SCHEMA);
  RETURN NULL;
END
$f$;
"#;

/// Version 4: retention and the budget record. `pruned_before` marks the rows a prune
/// removed for good (seqs below it are gone on purpose, not lost), and may only rise.
/// `ctxbudget_budgets` keeps a conversation's budget record (what `budget.json` is to a
/// workspace: the budgets its sessions ran with, for `ctxbudget plot`), deleted with it. The library's prunes and
/// deletes mark their transaction (`ctxbudget.maintaining` = the conversation) and give
/// the conversation one new epoch themselves, so the per-row trigger that renews the
/// epoch on a hand edit is skipped for them (its `WHEN`), as it is for appends. Safe to
/// run again over itself (a version row deleted by hand).
const V4: &str = r#"
ALTER TABLE ctxbudget_conversations
  ADD COLUMN IF NOT EXISTS pruned_before bigint NOT NULL DEFAULT 1
    CHECK (pruned_before >= 1 AND pruned_before <= last_seq + 1);

CREATE OR REPLACE FUNCTION ctxbudget_conversation_guard() RETURNS trigger LANGUAGE plpgsql AS $f$
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
  IF NEW.pruned_before < OLD.pruned_before THEN
    RAISE EXCEPTION 'ctxbudget: pruned rows of conversation % cannot come back',
      OLD.conversation USING ERRCODE = 'check_violation';
  END IF;
  IF NEW.conversation <> OLD.conversation THEN
    RAISE EXCEPTION 'ctxbudget: a conversation cannot be renamed'
      USING ERRCODE = 'check_violation';
  END IF;
  RETURN NEW;
END
$f$;

CREATE TABLE IF NOT EXISTS ctxbudget_budgets (
  conversation text PRIMARY KEY
    REFERENCES ctxbudget_conversations (conversation) ON DELETE CASCADE,
  record bytea NOT NULL CHECK (octet_length(record) <= 65536),
  updated_at timestamptz NOT NULL DEFAULT now()
);

DROP TRIGGER IF EXISTS ctxbudget_rows_changed ON ctxbudget_rows;
CREATE TRIGGER ctxbudget_rows_changed AFTER UPDATE OR DELETE ON ctxbudget_rows
  FOR EACH ROW
  WHEN (current_setting('ctxbudget.maintaining', true) IS DISTINCT FROM OLD.conversation)
  EXECUTE FUNCTION ctxbudget_rows_changed();
"#;

/// Brings the schema to [`SCHEMA_VERSION`]; returns the version found before (0: no
/// tables). A database already at it is only read.
pub(crate) fn migrate(client: &mut Client, schema: Option<&str>) -> Result<i32> {
    let found = installed_version(client)?;
    match found {
        Some(v) if v == SCHEMA_VERSION => return Ok(v),
        Some(v) if v > SCHEMA_VERSION => {
            return Err(PgError::SchemaTooNew {
                found: v,
                known: SCHEMA_VERSION,
            })
        }
        _ => {}
    }
    let found = found.unwrap_or(0);
    let role = check_rights(client, schema, found)?;
    migrate_locked(client, schema).map_err(|e| {
        if e.is_insufficient_privilege() {
            // A right the checks above do not know of (a policy, an event trigger).
            PgError::MigrationNotAllowed {
                found,
                needed: SCHEMA_VERSION,
                role,
                missing: format!("a right the server names: {e}"),
            }
        } else {
            e
        }
    })
}

/// Checks, without changing anything, that the database holds this library's schema:
/// [`PgError::NotMigrated`] when it is missing or older (run the migration first),
/// [`PgError::SchemaTooNew`] when it is newer. What a store opened with
/// `PgOptions::migrate = false` does on connecting: a runtime role needs no `CREATE`.
pub(crate) fn require_current(client: &mut Client) -> Result<i32> {
    match installed_version(client)? {
        Some(v) if v == SCHEMA_VERSION => Ok(v),
        Some(v) if v > SCHEMA_VERSION => Err(PgError::SchemaTooNew {
            found: v,
            known: SCHEMA_VERSION,
        }),
        found => Err(PgError::NotMigrated {
            found: found.unwrap_or(0),
            needed: SCHEMA_VERSION,
        }),
    }
}

/// The SQL the migration runs on an empty database, for a DBA to review or run by hand
/// (`ctxbudget db ddl`): the schema (when named), the version table, every migration in
/// order, each recorded, in one transaction under [`MIGRATION_LOCK`].
pub fn ddl(schema: Option<&str>) -> String {
    let mut out = String::from("-- ctxbudget schema, version ");
    out.push_str(&SCHEMA_VERSION.to_string());
    out.push_str(
        ". Run as the role that will own the tables; runtime roles need only\n\
         -- SELECT, INSERT, UPDATE, DELETE on them (docs/guide-deploy.md, \"Roles\").\n\
         BEGIN;\n",
    );
    out.push_str(&format!(
        "SELECT pg_advisory_xact_lock({MIGRATION_LOCK});\n"
    ));
    if let Some(schema) = schema {
        let q = quote_ident(schema);
        out.push_str(&format!(
            "CREATE SCHEMA IF NOT EXISTS {q};\nSET LOCAL search_path = {q};\n"
        ));
    }
    out.push_str(VERSION_TABLE);
    out.push_str(";\n");
    for (i, sql) in MIGRATIONS.iter().enumerate() {
        out.push_str(&format!("\n-- version {}\n", i + 1));
        out.push_str(sql.trim());
        out.push_str(&format!(
            "\nINSERT INTO ctxbudget_schema_version (version) VALUES ({});\n",
            i + 1
        ));
    }
    out.push_str("\nCOMMIT;\n");
    out
}

/// The table that records which migrations ran.
const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS ctxbudget_schema_version (
  version int PRIMARY KEY,
  applied_at timestamptz NOT NULL DEFAULT now())";

/// The version recorded in `ctxbudget_schema_version`, `None` when that table does not
/// exist (in the connection's `search_path`).
fn installed_version(client: &mut Client) -> Result<Option<i32>> {
    let exists: bool = client
        .query_one(
            "SELECT to_regclass('ctxbudget_schema_version') IS NOT NULL",
            &[],
        )
        .map_err(PgError::db("looking up the schema version"))?
        .get(0);
    if !exists {
        return Ok(None);
    }
    let version = client
        .query_one(
            "SELECT coalesce(max(version), 0) FROM ctxbudget_schema_version",
            &[],
        )
        .map_err(PgError::db("reading the schema version"))?
        .get(0);
    Ok(Some(version))
}

/// What the connected role would need to migrate from version `found`, and lacks:
/// `CREATE` on the database for a schema that does not exist yet, `CREATE` on the schema
/// for new tables, ownership of the tables to replace their triggers' functions. Returns
/// the role's name.
fn check_rights(client: &mut Client, schema: Option<&str>, found: i32) -> Result<String> {
    let row = client
        .query_one(
            "SELECT current_user::text, current_database()::text, current_schema()::text, \
                    has_database_privilege(current_database(), 'CREATE'), \
                    coalesce(has_schema_privilege(current_schema(), 'CREATE'), false), \
                    (SELECT pg_get_userbyid(c.relowner)::text FROM pg_class c \
                      WHERE c.oid = to_regclass('ctxbudget_rows')), \
                    coalesce((SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c \
                      WHERE c.oid = to_regclass('ctxbudget_rows')), true), \
                    EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1::text)",
            &[&schema],
        )
        .map_err(PgError::db("checking the role's rights"))?;
    let role: String = row.get(0);
    let database: String = row.get(1);
    let current: Option<String> = row.get(2);
    let (create_db, create_schema): (bool, bool) = (row.get(3), row.get(4));
    let (owner, owns, wanted_exists): (Option<String>, bool, bool) =
        (row.get(5), row.get(6), row.get(7));
    let mut missing = Vec::new();
    match (current, schema) {
        (Some(current), _) => {
            if !create_schema {
                missing.push(format!("CREATE on schema {current:?}"));
            }
        }
        (None, Some(wanted)) if wanted_exists => {
            // It exists, yet the search_path it heads does not reach it.
            missing.push(format!("USAGE and CREATE on schema {wanted:?}"));
        }
        (None, Some(wanted)) => {
            if !create_db {
                missing.push(format!(
                    "CREATE on database {database:?} (schema {wanted:?} does not exist yet)"
                ));
            }
        }
        (None, None) => {
            return Err(PgError::Config(
                "no schema of the connection's search_path exists, so there is nowhere to \
                 create ctxbudget's tables; create the schema, or name one with \
                 PgOptions::schema or the URL's options=-csearch_path%3D<schema>"
                    .into(),
            ))
        }
    }
    if !owns {
        missing.push(format!(
            "ownership of ctxbudget's tables (they belong to role {:?})",
            owner.unwrap_or_default()
        ));
    }
    if missing.is_empty() {
        return Ok(role);
    }
    Err(PgError::MigrationNotAllowed {
        found,
        needed: SCHEMA_VERSION,
        role,
        missing: missing.join(" and "),
    })
}

/// Runs the missing migrations in one transaction under [`MIGRATION_LOCK`].
fn migrate_locked(client: &mut Client, schema: Option<&str>) -> Result<i32> {
    let mut tx = client.transaction().map_err(PgError::db("BEGIN"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .map_err(PgError::db("the migration lock"))?;
    if let Some(schema) = schema {
        // CREATE SCHEMA IF NOT EXISTS needs CREATE on the database even when the schema
        // exists: only run it when it does not.
        let exists: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_namespace WHERE nspname = $1)",
                &[&schema],
            )
            .map_err(PgError::db("looking up the schema"))?
            .get(0);
        if !exists {
            tx.batch_execute(&format!(
                "CREATE SCHEMA IF NOT EXISTS {}",
                quote_ident(schema)
            ))
            .map_err(PgError::db("CREATE SCHEMA"))?;
        }
    }
    tx.batch_execute(VERSION_TABLE)
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
