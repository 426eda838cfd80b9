//! The PostgreSQL store against a real server (feature `postgres`; skipped without
//! `CTXBUDGET_PG_URL`): seqs, conditional appends, batch ids, the floor, the epoch,
//! migrations, TLS, memory files, the cursor key, concurrent appenders.
#![cfg(feature = "postgres")]

mod pg_common;

use std::sync::{Arc, Barrier};

use ctxbudget::pg::{
    AppendOptions, CursorKey, NewRow, PgError, PgOptions, PgStore, SslMode, MEMORY_CHECKPOINT_MAX,
    MEMORY_FILE_MAX, SCHEMA_VERSION,
};
use pg_common::*;

fn rows(texts: &[&str]) -> Vec<NewRow> {
    texts
        .iter()
        .map(|t| NewRow::new(t.as_bytes().to_vec()))
        .collect()
}

#[test]
fn seqs_are_gapless_and_rows_come_back_unchanged() {
    let Some(url) = url() else { return };
    let c = conversation(&url, "seq");
    let a = c.append(rows(&["a"])).unwrap();
    let b = c.append(rows(&["b", "c", "d"])).unwrap();
    assert_eq!((a.first_seq, a.last_seq), (1, 1));
    assert_eq!((b.first_seq, b.last_seq), (2, 4));
    assert!(!a.replayed && !b.replayed);
    let all = c.rows_since(1, None).unwrap();
    let bodies: Vec<&[u8]> = all.iter().map(|r| r.body.as_slice()).collect();
    assert_eq!(bodies, [&b"a"[..], b"b", b"c", b"d"]);
    assert_eq!(all.iter().map(|r| r.seq).collect::<Vec<_>>(), [1, 2, 3, 4]);
    let page = c.rows_since(3, Some(1)).unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].seq, 3);
    assert_eq!(c.state().unwrap().last_seq, 4);
    // An empty batch and an oversized row are refused and write nothing.
    assert!(matches!(c.append(vec![]), Err(PgError::Invalid(_))));
    let big = vec![b'x'; ctxbudget::store::DEFAULT_MAX_ROW_BYTES + 1];
    assert!(matches!(
        c.append(vec![NewRow::new(big)]),
        Err(PgError::Invalid(_))
    ));
    assert_eq!(c.state().unwrap().last_seq, 4);
}

#[test]
fn rows_may_carry_their_own_seqs() {
    let Some(url) = url() else { return };
    let c = conversation(&url, "own");
    c.append(rows(&["x"])).unwrap();
    let appended = c
        .append_with(&AppendOptions::default(), |first| {
            (0..2)
                .map(|i| NewRow::new(format!(r#"{{"seq":{}}}"#, first + i).into_bytes()))
                .collect()
        })
        .unwrap();
    assert_eq!(appended.first_seq, 2);
    let got = c.rows_since(2, None).unwrap();
    assert_eq!(got[0].body, br#"{"seq":2}"#);
    assert_eq!(got[1].body, br#"{"seq":3}"#);
}

#[test]
fn conditional_append_conflicts_and_writes_nothing() {
    let Some(url) = url() else { return };
    let c = conversation(&url, "cond");
    c.append_if(rows(&["a"]), 0).unwrap();
    match c.append_if(rows(&["b"]), 0) {
        Err(PgError::Conflict {
            expected_last_seq: 0,
            last_seq: 1,
            ..
        }) => {}
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert_eq!(c.rows_since(1, None).unwrap().len(), 1);
    assert_eq!(c.append_if(rows(&["b"]), 1).unwrap().first_seq, 2);
}

#[test]
fn a_batch_id_commits_once() {
    let Some(url) = url() else { return };
    let c = conversation(&url, "batch");
    let opts = AppendOptions {
        batch_id: Some("turn-7".into()),
        ..AppendOptions::default()
    };
    let first = c.append_with(&opts, |_| rows(&["a", "b"])).unwrap();
    c.append(rows(&["c"])).unwrap();
    let again = c.append_with(&opts, |_| rows(&["a", "b"])).unwrap();
    assert!(again.replayed);
    assert_eq!(
        (again.first_seq, again.last_seq),
        (first.first_seq, first.last_seq)
    );
    assert_eq!(c.state().unwrap().last_seq, 3);
    // A replay wins over a stale condition: the retried conditional append was committed.
    let cond = AppendOptions {
        batch_id: Some("turn-8".into()),
        expected_last_seq: Some(3),
    };
    let d = c.append_with(&cond, |_| rows(&["d"])).unwrap();
    let d2 = c.append_with(&cond, |_| rows(&["d"])).unwrap();
    assert!(d2.replayed && d2.first_seq == d.first_seq);
    // The same id for a batch of another size is refused.
    assert!(matches!(
        c.append_with(&opts, |_| rows(&["a"])),
        Err(PgError::BatchIdReused {
            first_seq: 1,
            last_seq: 2,
            ..
        })
    ));
    assert_eq!(c.state().unwrap().last_seq, 4);
}

#[test]
fn the_floor_is_never_lowered() {
    let Some(url) = url() else { return };
    let c = conversation(&url, "floor");
    c.append(rows(&["a", "b"])).unwrap();
    c.append(vec![
        NewRow::new(b"c".to_vec()),
        NewRow::floor(b"reset".to_vec()),
        NewRow::new(b"e".to_vec()),
    ])
    .unwrap();
    assert_eq!(c.state().unwrap().floor_seq, 4);
    c.append(rows(&["f"])).unwrap();
    assert_eq!(c.state().unwrap().floor_seq, 4);
    assert!(c.rows_since(4, Some(1)).unwrap()[0].floor);
    // Not even by hand: the database refuses it.
    let mut sql = raw(&url, "ctxbudget_tests");
    let lowered = sql.execute(
        "UPDATE ctxbudget_conversations SET floor_seq = 1 WHERE conversation = $1",
        &[&c.id()],
    );
    let err = lowered.expect_err("lowering the floor must fail");
    let message = err
        .as_db_error()
        .map(|e| e.message().to_string())
        .unwrap_or_default();
    assert!(message.contains("cannot be lowered"), "{err:?}");
    let back = sql.execute(
        "UPDATE ctxbudget_conversations SET last_seq = 2 WHERE conversation = $1",
        &[&c.id()],
    );
    assert!(back.is_err(), "seqs must never go back");
    assert_eq!(c.state().unwrap().floor_seq, 4);
    assert_eq!(c.append(rows(&["g"])).unwrap().first_seq, 7);
}

#[test]
fn the_epoch_changes_exactly_on_non_append_changes() {
    let Some(url) = url() else { return };
    let store = store(&url);
    let id = unique("epoch");
    let c = store.open(&id).unwrap();
    let e0 = c.state().unwrap().epoch;
    assert!(e0 < 1 << 63);
    let a = c.append(rows(&["a"])).unwrap();
    assert_eq!(a.epoch, e0, "an append keeps the epoch");
    c.append(vec![NewRow::floor(b"boundary w:2".to_vec())])
        .unwrap();
    c.append(rows(&["c", "d"])).unwrap();
    assert_eq!(c.state().unwrap().epoch, e0, "a soft clear is an append");
    // Opening again (another host) changes nothing.
    assert_eq!(store.open(&id).unwrap().state().unwrap().epoch, e0);
    // Rotation with something to archive: a new epoch; rows stay readable.
    let e1 = c.rotate(2).unwrap().expect("rows were archived");
    assert_ne!(e1, e0);
    let st = c.state().unwrap();
    assert_eq!((st.epoch, st.archived_before), (e1, 2));
    let all = c.rows_since(1, None).unwrap();
    assert!(all[0].archived && !all[1].archived);
    // Nothing new to archive: nothing changes, as in the file store.
    assert_eq!(c.rotate(2).unwrap(), None);
    assert_eq!(c.rotate(1).unwrap(), None);
    assert_eq!(c.state().unwrap().epoch, e1);
    // A row changed by hand: a new epoch (cursors fail closed).
    let mut sql = raw(&url, "ctxbudget_tests");
    sql.execute(
        "UPDATE ctxbudget_rows SET body = 'x' WHERE conversation = $1 AND seq = 3",
        &[&id],
    )
    .unwrap();
    let e2 = c.state().unwrap().epoch;
    assert_ne!(e2, e1);
    sql.execute(
        "DELETE FROM ctxbudget_rows WHERE conversation = $1 AND seq = 4",
        &[&id],
    )
    .unwrap();
    let e3 = c.state().unwrap().epoch;
    assert_ne!(e3, e2);
    // Deleted and opened again: empty, under a new epoch.
    assert!(store.delete(&id).unwrap().existed);
    assert!(matches!(
        c.append(rows(&["z"])),
        Err(PgError::NoConversation(_))
    ));
    let again = store.open(&id).unwrap().state().unwrap();
    assert_eq!(again.last_seq, 0);
    assert!(![e0, e1, e2, e3].contains(&again.epoch));
}

#[test]
fn migrations_are_safe_when_hosts_start_at_once() {
    let Some(url) = url() else { return };
    let schema = unique("mig");
    let n = 6;
    let barrier = Arc::new(Barrier::new(n));
    let handles: Vec<_> = (0..n)
        .map(|_| {
            let (url, schema, barrier) = (url.clone(), schema.clone(), barrier.clone());
            std::thread::spawn(move || {
                barrier.wait();
                PgStore::connect(&url, options(&schema)).map(|s| s.schema_version())
            })
        })
        .collect();
    for h in handles {
        assert_eq!(h.join().unwrap().unwrap().unwrap(), SCHEMA_VERSION);
    }
    let mut sql = raw(&url, &schema);
    let versions: Vec<i32> = sql
        .query(
            "SELECT version FROM ctxbudget_schema_version ORDER BY version",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, (1..=SCHEMA_VERSION).collect::<Vec<_>>());
    // A database migrated by a newer library is refused, not written with old rules.
    sql.execute(
        "INSERT INTO ctxbudget_schema_version (version) VALUES (999)",
        &[],
    )
    .unwrap();
    match PgStore::connect(&url, options(&schema)) {
        Err(PgError::SchemaTooNew { found: 999, known }) => assert_eq!(known, SCHEMA_VERSION),
        other => panic!("expected SchemaTooNew, got {other:?}"),
    }
}

#[test]
fn sslmode_require_encrypts() {
    let Some(url) = url() else { return };
    let base = url.split('?').next().unwrap().to_string();
    let tls = PgStore::connect(
        &format!("{base}?sslmode=require"),
        options("ctxbudget_tests"),
    )
    .unwrap();
    assert_eq!(tls.ssl_mode(), SslMode::Require);
    assert!(tls.connection_encrypted().unwrap());
    let plain = PgStore::connect(
        &format!("{base}?sslmode=disable"),
        options("ctxbudget_tests"),
    )
    .unwrap();
    assert!(!plain.connection_encrypted().unwrap());
    // verify-full refuses a server whose certificate no trusted root signed, at once (a
    // refused certificate is not retried).
    let strict = options("ctxbudget_tests");
    let other_root = format!(
        "{}/src/pg/config/testdata/other_ca.pem",
        env!("CARGO_MANIFEST_DIR")
    );
    for mode in ["verify-ca", "verify-full"] {
        let url = format!("{base}?sslmode={mode}&sslrootcert={other_root}");
        match PgStore::connect(&url, strict.clone()) {
            Err(PgError::TlsHandshake(_)) => {}
            other => panic!("{mode}: expected TlsHandshake, got {other:?}"),
        }
    }
}

/// verify-ca and verify-full against the test server, whose certificate (for localhost and
/// 127.0.0.1) the cluster's own root signed.
#[test]
fn sslmode_verify_ca_and_verify_full_check_the_server() {
    let Some(url) = url() else { return };
    let Some(root) = root_cert() else {
        eprintln!("skipped: {ROOTCERT_ENV} is not set (scripts/pg-cluster start prints it)");
        return;
    };
    let base = url.split('?').next().unwrap().to_string();
    let strict = options("ctxbudget_tests");
    for mode in ["verify-ca", "verify-full"] {
        let url = format!("{base}?sslmode={mode}&sslrootcert={root}");
        let store = PgStore::connect(&url, strict.clone())
            .unwrap_or_else(|e| panic!("{mode} with the cluster's root: {e}"));
        assert!(store.connection_encrypted().unwrap(), "{mode}");
    }
    // The same server under a host name its certificate does not name (hostaddr still
    // reaches it): verify-ca does not check the name, verify-full refuses it.
    let misnamed = format!(
        "{}?hostaddr=127.0.0.1&sslrootcert={root}",
        base.replacen("@127.0.0.1:", "@db.not-this-server.test:", 1)
    );
    assert!(misnamed.contains("not-this-server"), "{base}");
    let ca = PgStore::connect(&format!("{misnamed}&sslmode=verify-ca"), strict.clone())
        .unwrap_or_else(|e| panic!("verify-ca under another host name: {e}"));
    assert!(ca.connection_encrypted().unwrap());
    match PgStore::connect(&format!("{misnamed}&sslmode=verify-full"), strict) {
        Err(PgError::TlsHandshake(e)) => {
            let message = PgError::TlsHandshake(e).to_string();
            assert!(message.contains("sslrootcert"), "{message}");
        }
        other => {
            panic!("verify-full under another host name: expected TlsHandshake, got {other:?}")
        }
    }
}

#[test]
fn memory_files_have_the_memory_tools_limits_and_confinement() {
    let Some(url) = url() else { return };
    let c = conversation(&url, "mem");
    let code = |r: Result<(), PgError>| match r {
        Err(PgError::Memory { code, .. }) => code,
        Err(e) => panic!("unexpected {e}"),
        Ok(()) => "ok",
    };
    assert!(c.memory_list("/memories").unwrap().is_empty());
    c.memory_write("/memories/notes.md", b"hello").unwrap();
    c.memory_write("/memories/session/cp.md", b"goal").unwrap();
    assert_eq!(c.memory_read("/memories/notes.md").unwrap(), b"hello");
    // Limits: 8 KiB in the session scope, 256 KiB elsewhere.
    let cp = vec![b'x'; MEMORY_CHECKPOINT_MAX + 1];
    assert_eq!(
        code(c.memory_write("/memories/session/cp.md", &cp)),
        "too_large"
    );
    assert_eq!(code(c.memory_write("/memories/big.md", &cp)), "ok");
    let big = vec![b'x'; MEMORY_FILE_MAX + 1];
    assert_eq!(code(c.memory_write("/memories/big.md", &big)), "too_large");
    // Confinement: no file-system path exists, and none can be named.
    for bad in [
        "/memories/../etc/passwd",
        "/etc/passwd",
        "/memories/a\\b",
        "/memories/./x",
    ] {
        assert_eq!(code(c.memory_write(bad, b"x")), "invalid_path", "{bad}");
    }
    // Files and directories.
    assert_eq!(
        code(c.memory_write("/memories/notes.md/x", b"x")),
        "not_a_directory"
    );
    assert_eq!(
        code(c.memory_write("/memories/session", b"x")),
        "is_directory"
    );
    assert!(matches!(
        c.memory_read("/memories/session"),
        Err(PgError::Memory {
            code: "is_directory",
            ..
        })
    ));
    let listing = c.memory_list("/memories").unwrap();
    let names: Vec<(&str, bool)> = listing
        .iter()
        .map(|e| (e.path.as_str(), e.is_dir))
        .collect();
    assert_eq!(
        names,
        [
            ("/memories/big.md", false),
            ("/memories/notes.md", false),
            ("/memories/session", true)
        ]
    );
    // Atomic edits.
    c.memory_update("/memories/notes.md", |old| Ok([old, b" world"].concat()))
        .unwrap();
    assert_eq!(c.memory_read("/memories/notes.md").unwrap(), b"hello world");
    assert_eq!(
        code(c.memory_update("/memories/session/cp.md", |_| Ok(cp.clone()))),
        "too_large"
    );
    assert_eq!(c.memory_read("/memories/session/cp.md").unwrap(), b"goal");
    // Rename: files and directories; never over an existing path or into itself.
    c.memory_write("/memories/dir/a_%.md", b"1").unwrap();
    c.memory_write("/memories/dir/sub/b.md", b"2").unwrap();
    c.memory_write("/memories/dirx.md", b"3").unwrap();
    assert_eq!(
        code(c.memory_rename("/memories/dir", "/memories/notes.md")),
        "exists"
    );
    assert_eq!(
        code(c.memory_rename("/memories/dir", "/memories/dir/in")),
        "invalid_path"
    );
    assert_eq!(
        code(c.memory_rename("/memories/big.md", "/memories/session/big.md")),
        "too_large"
    );
    c.memory_rename("/memories/dir", "/memories/moved").unwrap();
    assert_eq!(c.memory_read("/memories/moved/sub/b.md").unwrap(), b"2");
    assert_eq!(c.memory_read("/memories/moved/a_%.md").unwrap(), b"1");
    assert_eq!(c.memory_read("/memories/dirx.md").unwrap(), b"3");
    assert_eq!(
        code(c.memory_rename("/memories/nope", "/memories/x")),
        "not_found"
    );
    // Delete: a directory with everything in it.
    c.memory_delete("/memories/moved").unwrap();
    assert_eq!(code(c.memory_delete("/memories/moved")), "not_found");
    assert!(matches!(
        c.memory_list("/memories/moved"),
        Err(PgError::Memory {
            code: "not_found",
            ..
        })
    ));
    assert_eq!(code(c.memory_delete("/memories")), "invalid_path");
    // The database enforces the limits and confinement too.
    let mut sql = raw(&url, "ctxbudget_tests");
    for (path, size) in [
        ("/memories/../x", 1usize),
        ("/etc/x", 1),
        ("/memories/session/y", MEMORY_CHECKPOINT_MAX + 1),
        ("/memories/y", MEMORY_FILE_MAX + 1),
    ] {
        let r = sql.execute(
            "INSERT INTO ctxbudget_memory_files (conversation, path, content) VALUES ($1, $2, $3)",
            &[&c.id(), &path, &vec![0u8; size]],
        );
        assert!(r.is_err(), "{path} ({size} bytes) must be refused");
    }
}

#[test]
fn the_cursor_key_is_shared_by_every_host() {
    let Some(url) = url() else { return };
    let schema = unique("key");
    let a = PgStore::connect(&url, options(&schema)).unwrap();
    let b = PgStore::connect(&url, options(&schema)).unwrap();
    let ka = a.database_cursor_key().unwrap();
    assert_eq!(ka.as_bytes().len(), 64);
    assert_eq!(b.database_cursor_key().unwrap(), ka);
    assert!(CursorKey::new(vec![1u8; 31]).is_err());
    assert!(format!("{ka:?}").contains("64 bytes"));
}

#[test]
fn concurrent_appenders_never_gap_or_duplicate() {
    let Some(url) = url() else { return };
    let store = store(&url);
    let id = unique("threads");
    store.open(&id).unwrap();
    let threads = 6;
    let batches = 25;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let (store, id, barrier) = (store.clone(), id.clone(), barrier.clone());
            std::thread::spawn(move || {
                let c = store.open(&id).unwrap();
                barrier.wait();
                let who = format!("t{t}");
                (0..batches)
                    .map(|b| {
                        let n = 1 + (b as usize + t) % 3;
                        let made = (0..n).map(|i| NewRow::new(body(&who, b, i, n))).collect();
                        let a = c.append(made).unwrap();
                        assert_eq!(a.last_seq - a.first_seq + 1, n as u64);
                        ((who.clone(), b), a.first_seq)
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    let acked: Vec<((String, u64), u64)> = handles
        .into_iter()
        .flat_map(|h| h.join().unwrap())
        .collect();
    let stored = check_batches(&store.open(&id).unwrap().rows_since(1, None).unwrap());
    assert_eq!(stored.len(), threads * batches as usize);
    for (key, first) in acked {
        assert_eq!(
            stored.get(&key),
            Some(&first),
            "acknowledged {key:?} at {first}"
        );
    }
}

#[test]
fn a_full_pool_waits_then_says_so() {
    let Some(url) = url() else { return };
    let tight = PgOptions {
        pool_size: 1,
        pool_timeout: std::time::Duration::from_millis(50),
        ..options("ctxbudget_tests")
    };
    let store = PgStore::connect(&url, tight).unwrap();
    let c = store.open(&unique("pool")).unwrap();
    let (inside, go_on) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
    let holder = {
        let (c, inside, go_on) = (c.clone(), inside.clone(), go_on.clone());
        std::thread::spawn(move || {
            c.append_with(&AppendOptions::default(), |_| {
                // Holds the pool's only connection until the main thread has tried.
                inside.wait();
                go_on.wait();
                rows(&["held"])
            })
        })
    };
    inside.wait();
    match c.append(rows(&["waiting"])) {
        Err(PgError::PoolTimeout { size: 1, .. }) => {}
        other => panic!("expected PoolTimeout, got {other:?}"),
    }
    go_on.wait();
    assert_eq!(holder.join().unwrap().unwrap().first_seq, 1);
    // Freed: the next caller gets the connection.
    assert_eq!(c.append(rows(&["after"])).unwrap().first_seq, 2);
}

#[test]
fn a_unix_socket_url_works() {
    let Some(_) = url() else { return };
    let Ok(socket) = std::env::var("CTXBUDGET_PG_SOCKET_URL") else {
        eprintln!("skipped: CTXBUDGET_PG_SOCKET_URL is not set (scripts/pg-cluster start sets it)");
        return;
    };
    let store = PgStore::connect(&socket, options("ctxbudget_tests")).unwrap();
    assert!(!store.connection_encrypted().unwrap());
    let c = store.open(&unique("socket")).unwrap();
    assert_eq!(c.append(rows(&["a"])).unwrap().first_seq, 1);
    // As in libpq, sslmode does not apply to a unix socket (the server offers no TLS there):
    // even the strict modes connect, unencrypted, instead of failing.
    for mode in ["require", "verify-full"] {
        let url = format!("{socket}?sslmode={mode}");
        let store = PgStore::connect(&url, options("ctxbudget_tests"))
            .unwrap_or_else(|e| panic!("sslmode={mode} over the socket: {e}"));
        assert_eq!(store.ssl_mode() == SslMode::Require, mode == "require");
        assert!(!store.connection_encrypted().unwrap());
    }
}

/// Hand edits of schema `b`'s rows, made by an operator whose `search_path` is schema
/// `a` (naming `b`'s table), renew the epoch of `b`'s conversation and never `a`'s.
fn check_hand_edits_stay_in_their_schema(
    url: &str,
    (a_name, a): (&str, &PgStore),
    (b_name, b): (&str, &PgStore),
) {
    let (ca, cb) = (a.open("same").unwrap(), b.open("same").unwrap());
    ca.append(rows(&["a1", "a2", "a3"])).unwrap();
    cb.append(rows(&["b1", "b2", "b3", "b4"])).unwrap();
    let mut sql = raw(url, a_name);
    let b_rows = format!("\"{b_name}\".ctxbudget_rows");
    for edit in [
        format!("UPDATE {b_rows} SET body = 'x' WHERE conversation = 'same' AND seq = 1"),
        format!("DELETE FROM {b_rows} WHERE conversation = 'same' AND seq = 2"),
        format!("INSERT INTO {b_rows} (conversation, seq, body) VALUES ('same', 2, 'y')"),
        format!("TRUNCATE {b_rows}"),
    ] {
        let before = (ca.state().unwrap().epoch, cb.state().unwrap().epoch);
        sql.batch_execute(&edit).unwrap();
        let after = (ca.state().unwrap().epoch, cb.state().unwrap().epoch);
        assert_eq!(after.0, before.0, "{edit} renewed the other schema's epoch");
        assert_ne!(
            after.1, before.1,
            "{edit} did not renew its own schema's epoch"
        );
    }
}

#[test]
fn two_installations_in_one_database_keep_their_epochs_apart() {
    let Some(url) = url() else { return };
    let (a_name, b_name) = (unique("two_a"), unique("two_b"));
    // One schema chosen by PgOptions, the other by the URL's search_path.
    raw(&url, "public")
        .batch_execute(&format!("CREATE SCHEMA \"{b_name}\""))
        .unwrap();
    let a = PgStore::connect(&url, options(&a_name)).unwrap();
    let b_url = format!("{url}&options=-csearch_path%3D{b_name}");
    let b = PgStore::connect(&b_url, PgOptions::default()).unwrap();
    check_hand_edits_stay_in_their_schema(&url, (&a_name, &a), (&b_name, &b));
}

/// The triggers of schema version 2, which named the tables through `search_path`.
const V2_TRIGGER_FUNCTIONS: &str = r#"
CREATE OR REPLACE FUNCTION ctxbudget_rows_changed() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE ctxbudget_conversations SET epoch = ctxbudget_new_epoch()
    WHERE conversation = OLD.conversation;
  RETURN NULL;
END
$f$;
CREATE OR REPLACE FUNCTION ctxbudget_rows_inserted() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE ctxbudget_conversations SET epoch = ctxbudget_new_epoch()
    WHERE conversation = NEW.conversation;
  RETURN NULL;
END
$f$;
CREATE OR REPLACE FUNCTION ctxbudget_rows_truncated() RETURNS trigger LANGUAGE plpgsql AS $f$
BEGIN
  UPDATE ctxbudget_conversations SET epoch = ctxbudget_new_epoch();
  RETURN NULL;
END
$f$;
DROP TABLE ctxbudget_budgets;
DROP TRIGGER ctxbudget_rows_changed ON ctxbudget_rows;
CREATE TRIGGER ctxbudget_rows_changed AFTER UPDATE OR DELETE ON ctxbudget_rows
  FOR EACH ROW EXECUTE FUNCTION ctxbudget_rows_changed();
ALTER TABLE ctxbudget_conversations DROP COLUMN pruned_before;
DELETE FROM ctxbudget_schema_version WHERE version > 2;
"#;

#[test]
fn an_installation_of_version_2_is_migrated_to_schema_bound_triggers() {
    let Some(url) = url() else { return };
    let (a_name, b_name) = (unique("v2_a"), unique("v2_b"));
    for name in [&a_name, &b_name] {
        drop(PgStore::connect(&url, options(name)).unwrap());
        raw(&url, name).batch_execute(V2_TRIGGER_FUNCTIONS).unwrap();
    }
    let a = PgStore::connect(&url, options(&a_name)).unwrap();
    let b = PgStore::connect(&url, options(&b_name)).unwrap();
    assert_eq!(b.schema_version().unwrap(), SCHEMA_VERSION);
    check_hand_edits_stay_in_their_schema(&url, (&a_name, &a), (&b_name, &b));
}
