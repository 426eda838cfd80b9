//! Retention, explicit migration and the one-statement append of the PostgreSQL store
//! against a real server (feature `postgres`; skipped without `CTXBUDGET_PG_URL`).
#![cfg(feature = "postgres")]

mod pg_common;

use ctxbudget::pg::{ddl, PgError, PgOptions, PgStore, SCHEMA_VERSION};
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::Store;
use ctxbudget::transcript::{self, PruneSpec};
use pg_common::*;

fn msg(text: &str) -> NewRow {
    NewRow::text("message", "user", text)
}

/// Three windows (two rollovers), two messages each.
fn three_windows(h: &dyn Store) {
    for i in 0..3 {
        if i > 0 {
            let spec = transcript::RolloverSpec {
                rollover_id: format!("r{i}"),
                reason: "usable_limit".into(),
                requested_by: None,
                lead_in: transcript::LeadIn::Text(format!("lead {i}")),
                trigger: None,
                figures: Default::default(),
                expected_last_seq: None,
            };
            transcript::rollover(h, spec).unwrap();
        }
        h.append_rows(&[msg(&format!("w{i}-a")), msg(&format!("w{i}-b"))], None)
            .unwrap();
    }
}

fn count(client: &mut postgres::Client, table: &str, conversation: &str) -> i64 {
    client
        .query_one(
            &format!("SELECT count(*) FROM {table} WHERE conversation = $1"),
            &[&conversation],
        )
        .unwrap()
        .get(0)
}

#[test]
fn delete_leaves_no_row_of_the_conversation_and_touches_no_other() {
    let Some(url) = url() else { return };
    let store = store(&url);
    let (gone, kept) = (unique("gone"), unique("kept"));
    for id in [&gone, &kept] {
        let h = store.history(id).unwrap();
        three_windows(&h);
        h.conversation()
            .memory_write("/memories/a.md", b"x")
            .unwrap();
    }
    let report = store.delete(&gone).unwrap();
    assert!(
        report.existed && report.rows > 0 && report.memory_files == 1,
        "{report:?}"
    );
    let mut raw = raw(&url, "ctxbudget_tests");
    for table in [
        "ctxbudget_rows",
        "ctxbudget_memory_files",
        "ctxbudget_conversations",
    ] {
        assert_eq!(count(&mut raw, table, &gone), 0, "{table}");
        assert!(count(&mut raw, table, &kept) > 0, "{table}");
    }
    assert!(!store.delete(&gone).unwrap().existed);
}

#[test]
fn prune_keeps_the_current_window_and_the_floor_and_renews_the_epoch() {
    let Some(url) = url() else { return };
    let store = store(&url);
    let h = store.history(&unique("prune")).unwrap();
    three_windows(&h);
    let floor = transcript::clear_soft(&h, None).unwrap();
    h.append_rows(&[msg("after")], None).unwrap();
    let before = h.conversation().state().unwrap();
    let spec = PruneSpec {
        below_floor: true,
        ..PruneSpec::default()
    };
    let report = h.prune(&spec).unwrap();
    let after = h.conversation().state().unwrap();
    assert_eq!((report.kept_from, report.floor_seq), (floor, floor));
    assert_ne!(after.epoch, before.epoch);
    assert_eq!(after.floor_seq, floor);
    assert_eq!(after.last_seq, before.last_seq);
    let seqs: Vec<u64> = h
        .rows_since(0)
        .unwrap()
        .iter()
        .filter_map(|r| r.seq)
        .collect();
    assert_eq!(seqs.first(), Some(&floor));
    assert!(h.verify().unwrap().ok);
    // The prune mark only rises: a lower cut changes nothing.
    assert_eq!(h.conversation().prune_before(2).unwrap().epoch, None);
}

#[test]
fn an_explicit_migration_and_a_store_that_only_checks() {
    let Some(url) = url() else { return };
    let schema = unique("mig");
    let check_only = PgOptions {
        migrate: false,
        ..options(&schema)
    };
    match PgStore::connect(&url, check_only.clone()) {
        Err(PgError::NotMigrated { found: 0, needed }) => assert_eq!(needed, SCHEMA_VERSION),
        other => panic!("expected NotMigrated, got {:?}", other.err()),
    }
    let owner = PgStore::connect(&url, options(&schema)).unwrap();
    assert_eq!(owner.migrate().unwrap(), (SCHEMA_VERSION, SCHEMA_VERSION));
    let runtime = PgStore::connect(&url, check_only).unwrap();
    assert_eq!(runtime.schema_version().unwrap(), SCHEMA_VERSION);
    runtime.close();
    assert!(matches!(runtime.open("x"), Err(PgError::Closed)));
    assert!(ddl(Some("s")).contains("CREATE SCHEMA IF NOT EXISTS \"s\""));
}

#[test]
fn the_one_statement_append_falls_back_when_another_host_wrote() {
    let Some(url) = url() else { return };
    let id = unique("fast");
    let (a, b) = (
        store(&url).history(&id).unwrap(),
        store(&url).history(&id).unwrap(),
    );
    let json = br#"[{"kind":"message","role":"user","parts":[{"type":"text","text":"x"}]}]"#;
    assert_eq!(a.append_json(json, None).unwrap().first_seq, 1);
    assert_eq!(a.append_json(json, None).unwrap().first_seq, 2); // current index: fast
    assert_eq!(b.append_json(json, None).unwrap().first_seq, 3); // stale index: fallback
    assert_eq!(a.append_json(json, None).unwrap().first_seq, 4); // stale again
    assert!(matches!(
        a.append_json(json, Some(3)),
        Err(ctxbudget::store::StoreError::Conflict { last_seq: 4, .. })
    ));
    let seqs: Vec<u64> = a
        .rows_since(0)
        .unwrap()
        .iter()
        .filter_map(|r| r.seq)
        .collect();
    assert_eq!(seqs, [1, 2, 3, 4]);
    // No append went through the hand-edit trigger: the epoch never changed.
    let epochs: Vec<u64> = [&a, &b]
        .iter()
        .map(|h| h.conversation().state().unwrap().epoch)
        .collect();
    assert_eq!(epochs[0], epochs[1]);
    assert_eq!(a.append_json(json, None).unwrap().epoch, epochs[0]);
    assert!(a.verify().unwrap().ok);
}
