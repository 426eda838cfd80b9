//! The rights a role needs (docs/guide-deploy.md, "Rights"), against a real server
//! (feature `postgres`; skipped without `CTXBUDGET_PG_URL`): once the tables exist, a role
//! with only `SELECT, INSERT, UPDATE, DELETE` on them runs conversations, and one with only
//! `SELECT` reads them (the CLI's readers). Opening never needs `CREATE` then; when the
//! schema does need a migration and the role may not make it, the error says which right
//! is missing.
#![cfg(feature = "postgres")]

mod pg_common;

use ctxbudget::pg::{NewRow, PgError, PgHistory, PgStore};
use ctxbudget::store::ReadFrom;
use ctxbudget::transcript::NewRow as Row;
use ctxbudget::transcript::Store;
use pg_common::*;

/// A schema installed by the test server's superuser (its tables, the cursor key).
fn installed(url: &str, prefix: &str) -> String {
    let schema = unique(prefix);
    let owner = PgStore::connect(url, options(&schema)).expect("install as the owner");
    owner.database_cursor_key().expect("the cursor key");
    schema
}

#[test]
fn a_role_with_only_dml_rights_runs_conversations() {
    let Some(url) = url() else { return };
    let schema = installed(&url, "dml");
    let role = unique("app");
    create_role(&url, &schema, &role, "SELECT, INSERT, UPDATE, DELETE");
    let store = PgStore::connect(&as_role(&url, &role), options(&schema))
        .expect("a role with DML rights opens the store");
    store.cursor_key().expect("and reads the cursor key");
    let chat = store.open("chat").expect("creates a conversation");
    let a = chat
        .append(vec![NewRow::new(b"one".to_vec())])
        .expect("appends");
    assert_eq!(a.first_seq, 1);
    chat.memory_write("/memories/a.md", b"x")
        .expect("writes memory");
    chat.memory_update("/memories/a.md", |old| Ok([old, b"y"].concat()))
        .expect("edits memory");
    assert_eq!(chat.memory_read("/memories/a.md").unwrap(), b"xy");
    chat.memory_delete("/memories/a.md")
        .expect("deletes memory");
    let h = PgHistory::new(store.open("transcript").unwrap());
    h.append_rows(&[Row::text("message", "user", "hi")], Some(0))
        .expect("appends rows");
    assert_eq!(h.read(ReadFrom::Seq(1)).unwrap().rows.len(), 1);
    assert!(h.verify().unwrap().ok);
    assert!(
        store.delete("chat").unwrap().existed,
        "deletes a conversation"
    );
}

#[test]
fn a_role_with_only_select_reads() {
    let Some(url) = url() else { return };
    let schema = installed(&url, "ro");
    {
        let owner = PgStore::connect(&url, options(&schema)).unwrap();
        let h = PgHistory::new(owner.open("kept").unwrap());
        h.append_rows(&[Row::text("message", "user", "hi")], None)
            .unwrap();
    }
    let role = unique("reader");
    create_role(&url, &schema, &role, "SELECT");
    let store = PgStore::connect(&as_role(&url, &role), options(&schema))
        .expect("a role with SELECT only opens the store");
    store.cursor_key().expect("and reads the cursor key");
    let chat = store
        .open_existing("kept")
        .expect("looks the conversation up")
        .expect("it exists");
    let h = PgHistory::new(chat);
    assert_eq!(h.read(ReadFrom::Seq(1)).unwrap().rows.len(), 1);
    assert_eq!(h.windows().unwrap().len(), 1);
    assert!(h.verify().unwrap().ok);
    assert!(h.state().is_ok() && h.recover().is_ok());
    // Writing is refused by the server, as its rights say.
    assert!(h
        .append_rows(&[Row::text("message", "user", "no")], None)
        .is_err());
}

#[test]
fn a_reader_needs_no_stored_cursor_key() {
    let Some(url) = url() else { return };
    // Hosts that configure CTXBUDGET_CURSOR_KEY store none in the database.
    let schema = unique("nokey");
    PgStore::connect(&url, options(&schema)).expect("install as the owner");
    let role = unique("keyless");
    create_role(&url, &schema, &role, "SELECT");
    let store = PgStore::connect(&as_role(&url, &role), options(&schema)).expect("opens");
    let key = store
        .database_cursor_key()
        .expect("a key of this process, since the role may not store one");
    assert_eq!(
        store.database_cursor_key().unwrap(),
        key,
        "the same key on every call"
    );
    let mut sql = raw(&url, &schema);
    let stored: i64 = sql
        .query_one("SELECT count(*) FROM ctxbudget_keys", &[])
        .unwrap()
        .get(0);
    assert_eq!(stored, 0, "nothing was written");
}

#[test]
fn a_migration_the_role_may_not_make_names_the_missing_right() {
    let Some(url) = url() else { return };
    // No tables yet: creating them needs CREATE on the schema.
    let schema = unique("empty");
    raw(&url, "public")
        .batch_execute(&format!("CREATE SCHEMA \"{schema}\""))
        .unwrap();
    let role = unique("weak");
    create_role(&url, &schema, &role, "SELECT");
    match PgStore::connect(&as_role(&url, &role), options(&schema)) {
        Err(e @ PgError::MigrationNotAllowed { .. }) => {
            let m = e.to_string();
            assert!(m.contains("CREATE") && m.contains(&schema), "{m}");
        }
        other => panic!("expected MigrationNotAllowed, got {other:?}"),
    }
    // An older version: upgrading replaces the owner's functions, so only the tables'
    // owner may do it.
    let schema = installed(&url, "old");
    raw(&url, &schema)
        .batch_execute(
            "DELETE FROM ctxbudget_schema_version \
             WHERE version = (SELECT max(version) FROM ctxbudget_schema_version)",
        )
        .unwrap();
    let role = unique("dmlold");
    create_role(&url, &schema, &role, "SELECT, INSERT, UPDATE, DELETE");
    match PgStore::connect(&as_role(&url, &role), options(&schema)) {
        Err(e @ PgError::MigrationNotAllowed { .. }) => {
            let m = e.to_string();
            assert!(m.contains("owner"), "{m}");
        }
        other => panic!("expected MigrationNotAllowed, got {other:?}"),
    }
    // The owner migrates it; then the role opens it.
    PgStore::connect(&url, options(&schema)).expect("the owner migrates");
    PgStore::connect(&as_role(&url, &role), options(&schema)).expect("then the role opens");
}
