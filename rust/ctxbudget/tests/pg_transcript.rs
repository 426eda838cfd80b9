//! The PostgreSQL conversation as a transcript store (`PgHistory`), against a real server
//! (feature `postgres`; skipped without `CTXBUDGET_PG_URL`).
//!
//! The main property is differential: the same random operations — appends (plain and
//! conditional), soft clears, rollovers, quarantines, rotations, reopened handles and
//! every `session_history` action with its cursors followed to the end — applied to a
//! file store and to a PostgreSQL conversation give the same rows, windows, floor and
//! `session_history` results. The other tests pin what only the database store has:
//! cursors that page across handles (hosts) with the deployment's key, conditional
//! writes from many threads, hand edits that fail cursors closed.
#![cfg(feature = "postgres")]

mod pg_common;

use std::sync::{Arc, Barrier};

use ctxbudget::pg::{CursorKey, PgHistory};
use ctxbudget::scan::{ScanOptions, SessionHistoryTool};
use ctxbudget::store::{
    OpenOptions, ReadFrom, StateDetail, StoreError, VerifyDetail, VerifyReport,
};
use ctxbudget::transcript;
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::Store;
use ctxbudget::transcript::{LeadIn, RolloverSpec};
use pg_common::*;
use proptest::prelude::*;
use serde_json::{json, Value};

fn key() -> CursorKey {
    CursorKey::new(vec![42u8; 48]).expect("a 48-byte key")
}

fn pg_history(url: &str, prefix: &str) -> PgHistory {
    PgHistory::new(conversation(url, prefix))
}

fn pg_tool(h: &Arc<PgHistory>) -> SessionHistoryTool {
    SessionHistoryTool::over_pg(Arc::clone(h), key(), ScanOptions::default())
}

fn temp_workspace(prefix: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(unique(prefix));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// A row as both stores must give it back: everything but its timestamp.
fn comparable(raw: &[u8]) -> Value {
    let mut v: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    if let Some(o) = v.as_object_mut() {
        o.remove("ts");
    }
    v
}

fn texts(words: &[&str]) -> Vec<NewRow> {
    words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            NewRow::text("message", role, w)
        })
        .collect()
}

/// Every `session_history` answer for `args`, following cursors to the end (at most 50
/// pages), with the cursors themselves removed (they are bound to the store).
fn walk(tool: &SessionHistoryTool, mut args: Value) -> Vec<Value> {
    let mut pages = Vec::new();
    for _ in 0..50 {
        let mut page = tool.call(&args);
        let cursor = page.as_object_mut().and_then(|o| o.remove("cursor"));
        pages.push(page);
        match cursor {
            Some(c) => args["cursor"] = c,
            None => break,
        }
    }
    pages
}

#[derive(Clone, Debug)]
enum Op {
    Append(u8, u8),
    AppendIfStale(u8),
    Clear,
    Rollover,
    Quarantine,
    Rotate,
    Reopen,
    Query(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u8..4, 0u8..8).prop_map(|(n, w)| Op::Append(n, w)),
        1 => (0u8..8).prop_map(Op::AppendIfStale),
        1 => Just(Op::Clear),
        2 => Just(Op::Rollover),
        1 => Just(Op::Quarantine),
        1 => Just(Op::Rotate),
        1 => Just(Op::Reopen),
        3 => (0u8..8).prop_map(Op::Query),
    ]
}

const WORDS: [&str; 8] = [
    "deploy key in vault",
    "Ünïcödé ΣΊΣΥΦΟΣ text",
    "plain reply",
    "the DEPLOY plan",
    "nothing here",
    "tool output 42",
    "x",
    "a longer message about the rollout of the new service to production",
];

fn query(q: u8) -> Value {
    match q {
        0 => json!({"action": "list_windows", "limit": 2}),
        1 => json!({"action": "list_items", "limit": 3}),
        2 => json!({"action": "search", "query": "deploy", "limit": 2}),
        3 => json!({"action": "search", "query": "σίσυφος"}),
        4 => json!({"action": "list_items", "recent_first": true, "limit": 4}),
        5 => json!({"action": "read_item", "item_id": "3"}),
        6 => json!({"action": "list_items", "role": "assistant", "max_chars_per_item": 20}),
        _ => json!({"action": "list_windows", "recent_first": true}),
    }
}

struct Pair {
    ws: std::path::PathBuf,
    file: Arc<History>,
    pg: Arc<PgHistory>,
    url: String,
    rollovers: u32,
}

impl Pair {
    fn stores(&self) -> [&dyn Store; 2] {
        [self.file.as_ref(), self.pg.as_ref()]
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Append(n, w) => {
                let words: Vec<&str> = (0..*n)
                    .map(|i| WORDS[(*w as usize + i as usize) % WORDS.len()])
                    .collect();
                let rows = texts(&words);
                let got: Vec<_> = self
                    .stores()
                    .iter()
                    .map(|s| {
                        s.append_rows(&rows, None)
                            .map(|r| (r.first_seq, r.last_seq, r.window))
                    })
                    .map(|r| r.map_err(|e| e.to_string()))
                    .collect();
                assert_eq!(got[0], got[1], "append");
            }
            Op::AppendIfStale(w) => {
                let rows = texts(&[WORDS[*w as usize]]);
                for s in self.stores() {
                    let last = s
                        .read(ReadFrom::Seq(u64::MAX))
                        .map(|r| r.last_seq)
                        .unwrap_or(0);
                    let stale = last.saturating_sub(1);
                    let r = s.append_rows(&rows, Some(stale));
                    if last > 0 {
                        assert!(
                            matches!(r, Err(StoreError::Conflict { .. })),
                            "a stale condition must conflict: {r:?}"
                        );
                    }
                }
            }
            Op::Clear => {
                let got: Vec<_> = self
                    .stores()
                    .iter()
                    .map(|s| transcript::clear_soft(*s, None).map_err(|e| e.to_string()))
                    .collect();
                assert_eq!(got[0], got[1], "clear");
            }
            Op::Rollover => {
                self.rollovers += 1;
                let got: Vec<_> = self
                    .stores()
                    .iter()
                    .map(|s| {
                        transcript::rollover(
                            *s,
                            RolloverSpec {
                                rollover_id: format!("r{}", self.rollovers),
                                reason: "usable_limit".into(),
                                lead_in: LeadIn::template(
                                    "lead-in {window_id} after {previous_window_id}",
                                ),
                                trigger: Some(NewRow::text("message", "user", "trigger")),
                                ..RolloverSpec::default()
                            },
                        )
                        .map(|w| w.to_string())
                        .map_err(|e| e.to_string())
                    })
                    .collect();
                assert_eq!(got[0], got[1], "rollover");
            }
            Op::Quarantine => {
                let last = self
                    .file
                    .read(ReadFrom::Seq(u64::MAX))
                    .map(|r| r.last_seq)
                    .unwrap_or(0);
                let got: Vec<_> = self
                    .stores()
                    .iter()
                    .map(|s| transcript::quarantine(*s, last, None).map_err(|e| e.to_string()))
                    .collect();
                assert_eq!(got[0].is_ok(), got[1].is_ok(), "quarantine: {got:?}");
                if got[0].is_ok() {
                    assert_eq!(got[0], got[1], "quarantine");
                }
            }
            Op::Rotate => {
                let file = self.file.rotate().expect("rotate the file store");
                let pg = self.pg.rotate().expect("rotate the conversation");
                assert_eq!(file.rows, pg.rows, "rows archived");
                assert_eq!(file.epoch.is_some(), pg.epoch.is_some(), "a new epoch");
            }
            Op::Reopen => {
                self.file =
                    Arc::new(History::open(&self.ws, OpenOptions::default()).expect("reopen"));
                let id = self.pg.conversation().id().to_owned();
                self.pg = Arc::new(PgHistory::new(store(&self.url).open(&id).expect("reopen")));
            }
            Op::Query(q) => {
                let file_tool = SessionHistoryTool::new(Arc::clone(&self.file));
                let pg_tool = pg_tool(&self.pg);
                let args = query(*q);
                assert_eq!(walk(&file_tool, args.clone()), walk(&pg_tool, args), "{q}");
            }
        }
        self.check();
    }

    /// Both stores say the same about everything.
    fn check(&self) {
        let file = self
            .file
            .read(ReadFrom::Seq(0))
            .expect("read the file store");
        let pg = self
            .pg
            .read(ReadFrom::Seq(0))
            .expect("read the conversation");
        assert_eq!(file.last_seq, pg.last_seq, "last seq");
        assert_eq!(file.floor_seq, pg.floor_seq, "floor");
        let f: Vec<_> = file
            .rows
            .iter()
            .map(|r| (r.seq, r.window.clone(), comparable(&r.raw)))
            .collect();
        let p: Vec<_> = pg
            .rows
            .iter()
            .map(|r| (r.seq, r.window.clone(), comparable(&r.raw)))
            .collect();
        assert_eq!(f, p, "rows");
        assert_eq!(self.file.windows().ok(), self.pg.windows().ok(), "windows");
        assert_eq!(
            self.file.current_window().ok(),
            self.pg.current_window().ok(),
            "current window"
        );
        let window = self
            .file
            .read(ReadFrom::CurrentWindow)
            .expect("current window");
        let pg_window = self
            .pg
            .read(ReadFrom::CurrentWindow)
            .expect("current window");
        assert_eq!(
            window.rows.len(),
            pg_window.rows.len(),
            "rows of the current window"
        );
        assert!(self.pg.verify().expect("verify").ok, "verify");
        same_health(
            &self.file,
            &self.pg,
            StateDetail::Postgres,
            VerifyDetail::Postgres {
                rows_past_last_seq: 0,
            },
        );
    }
}

/// The common part of the state and of `verify` is the same for the file store and
/// `other`; each fills its own detail arm.
fn same_health(file: &History, other: &dyn Store, state: StateDetail, verify: VerifyDetail) {
    let (f, o) = (
        Store::state(file).expect("file state"),
        other.state().expect("state"),
    );
    assert_eq!(
        (f.last_seq, f.floor_seq),
        (o.last_seq, o.floor_seq),
        "state"
    );
    // An empty store may or may not have an epoch yet (the file store's comes with its
    // first receipt); one with rows has one.
    if f.last_seq > 0 {
        assert!(f.epoch.is_some() && o.epoch.is_some(), "{f:?} {o:?}");
    }
    assert!(matches!(f.detail, StateDetail::File { .. }), "{f:?}");
    assert_eq!(o.detail, state);
    let (f, o) = (
        Store::verify(file).expect("file verify"),
        other.verify().expect("verify"),
    );
    let common = |v: &VerifyReport| {
        (
            v.ok,
            v.last_seq,
            v.floor_seq,
            v.live,
            v.archive,
            v.seq_violations,
        )
    };
    assert_eq!(common(&f), common(&o), "verify: {f:?} {o:?}");
    assert!(f.file().is_some(), "{f:?}");
    assert_eq!(o.detail, verify);
    let recovered = other.recover().expect("recover");
    assert!(
        !recovered.changed && recovered.file().is_none(),
        "{recovered:?}"
    );
}

proptest! {
    // 24 cases by default (each starts a conversation on the server); PROPTEST_CASES
    // asks for more.
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(24)
    ))]

    #[test]
    fn both_stores_give_the_same_answers(ops in proptest::collection::vec(op(), 1..30)) {
        let Some(url) = url() else { return Ok(()) };
        let ws = temp_workspace("pg-diff");
        let file = Arc::new(History::open(&ws, OpenOptions::default()).expect("open"));
        let pg = Arc::new(pg_history(&url, "diff"));
        let mut pair = Pair { ws: ws.clone(), file, pg, url, rollovers: 0 };
        for op in &ops {
            pair.apply(op);
        }
        std::fs::remove_dir_all(&ws).ok();
    }
}

#[test]
fn a_cursor_minted_on_one_host_pages_on_another_and_fails_closed_after_a_change() {
    let Some(url) = url() else { return };
    let a = Arc::new(pg_history(&url, "cursor"));
    let rows: Vec<NewRow> = (0..12)
        .map(|i| NewRow::text("message", "user", &format!("row {i}")))
        .collect();
    a.append_rows(&rows, None).expect("append");
    let first = pg_tool(&a).call(&json!({"action": "list_items", "limit": 5}));
    let cursor = first["cursor"].as_str().expect("a cursor").to_owned();

    // Another host: its own pool, handle and index, the same key.
    let id = a.conversation().id().to_owned();
    let b = Arc::new(PgHistory::new(store(&url).open(&id).expect("open")));
    let next = pg_tool(&b).call(&json!({"action": "list_items", "limit": 5, "cursor": cursor}));
    let ids: Vec<&str> = next["items"]
        .as_array()
        .map(|v| v.iter().filter_map(|i| i["item_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["6", "7", "8", "9", "10"], "{next}");

    // Another key, other arguments, a tampered cursor: refused.
    let other_key = SessionHistoryTool::over_pg(
        Arc::clone(&b),
        CursorKey::new(vec![7u8; 48]).expect("key"),
        ScanOptions::default(),
    );
    let refused = other_key.call(&json!({"action": "list_items", "limit": 5, "cursor": cursor}));
    assert_eq!(refused["code"], "invalid_cursor", "{refused}");
    let refused = pg_tool(&b).call(&json!({"action": "list_items", "limit": 4, "cursor": cursor}));
    assert_eq!(refused["code"], "invalid_cursor", "{refused}");
    let mut tampered = cursor.clone().into_bytes();
    tampered[5] ^= 1;
    let tampered = String::from_utf8(tampered).unwrap_or_default();
    let refused =
        pg_tool(&b).call(&json!({"action": "list_items", "limit": 5, "cursor": tampered}));
    assert_eq!(refused["code"], "invalid_cursor", "{refused}");

    // An append keeps it valid; a change by hand (any UPDATE of a row) fails it closed.
    a.append_rows(&[NewRow::text("message", "user", "later")], None)
        .expect("append");
    let still = pg_tool(&b).call(&json!({"action": "list_items", "limit": 5, "cursor": cursor}));
    assert_eq!(still["ok"], true, "{still}");
    let mut sql = raw(&url, "ctxbudget_tests");
    sql.execute(
        "UPDATE ctxbudget_rows SET body = body WHERE conversation = $1 AND seq = 2",
        &[&id],
    )
    .expect("a hand edit");
    let changed = pg_tool(&b).call(&json!({"action": "list_items", "limit": 5, "cursor": cursor}));
    assert_eq!(changed["code"], "history_changed", "{changed}");
}

#[test]
fn a_row_edited_by_hand_into_a_soft_clear_hides_everything_before_it() {
    let Some(url) = url() else { return };
    let h = Arc::new(pg_history(&url, "handclear"));
    let rows: Vec<NewRow> = (0..6)
        .map(|i| NewRow::text("message", "user", &format!("secret {i}")))
        .collect();
    h.append_rows(&rows, None).expect("append");
    let id = h.conversation().id().to_owned();
    let mut sql = raw(&url, "ctxbudget_tests");
    // A reset row that does not parse as a row (its seq is another one): reset-like.
    sql.execute(
        "UPDATE ctxbudget_rows SET body = convert_to('{\"seq\":99,\"kind\":\"boundary\",\"role\":\"system\",\"meta\":{\"boundary_kind\":\"reset\"}}', 'UTF8') \
         WHERE conversation = $1 AND seq = 4",
        &[&id],
    )
    .expect("a hand edit");
    let found = pg_tool(&h).call(&json!({"action": "search", "query": "secret"}));
    let ids: Vec<&str> = found["items"]
        .as_array()
        .map(|v| v.iter().filter_map(|i| i["item_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["5", "6"], "{found}");
    assert!(h.floor_seq().expect("floor") >= 4);
    assert!(!h.verify().expect("verify").ok);
}

#[test]
fn conditional_writes_from_many_threads_commit_exactly_one_decision_per_state() {
    let Some(url) = url() else { return };
    let h = Arc::new(pg_history(&url, "race"));
    h.append_rows(&texts(&["start"]), None).expect("append");
    let id = h.conversation().id().to_owned();
    for round in 0..10u64 {
        let barrier = Arc::new(Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|t| {
                let (barrier, url, id) = (Arc::clone(&barrier), url.clone(), id.clone());
                std::thread::spawn(move || {
                    // Each thread is its own host: its own handle and index.
                    let h = PgHistory::new(store(&url).open(&id).expect("open"));
                    let last = h.read(ReadFrom::Seq(u64::MAX)).expect("read").last_seq;
                    barrier.wait();
                    h.append_rows(&texts(&[&format!("round {round} thread {t}")]), Some(last))
                        .is_ok()
                })
            })
            .collect();
        let won = handles
            .into_iter()
            .map(|j| j.join().unwrap_or(false))
            .filter(|&ok| ok)
            .count();
        assert_eq!(won, 1, "round {round}");
    }
    let read = h.read(ReadFrom::Seq(0)).expect("read");
    let seqs: Vec<u64> = read.rows.iter().filter_map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=11).collect::<Vec<_>>());
}

#[test]
fn two_hosts_rolling_over_at_once_seal_the_window_once() {
    let Some(url) = url() else { return };
    for trial in 0..8 {
        let h = Arc::new(pg_history(&url, "seal"));
        h.append_rows(&texts(&["a", "b"]), None).expect("append");
        let id = h.conversation().id().to_owned();
        let last = h.read(ReadFrom::Seq(u64::MAX)).expect("read").last_seq;
        let barrier = Arc::new(Barrier::new(2));
        let joins: Vec<_> = (0..2)
            .map(|t| {
                let (barrier, url, id) = (Arc::clone(&barrier), url.clone(), id.clone());
                std::thread::spawn(move || {
                    let h = PgHistory::new(store(&url).open(&id).expect("open"));
                    barrier.wait();
                    transcript::rollover(
                        &h,
                        RolloverSpec {
                            rollover_id: format!("host-{t}"),
                            reason: "usable_limit".into(),
                            lead_in: LeadIn::template("continue from {previous_window_id}"),
                            expected_last_seq: Some(last),
                            ..RolloverSpec::default()
                        },
                    )
                    .map(|w| w.to_string())
                })
            })
            .collect();
        let results: Vec<_> = joins.into_iter().map(|j| j.join().ok()).collect();
        let sealed = results.iter().filter(|r| matches!(r, Some(Ok(_)))).count();
        assert_eq!(sealed, 1, "trial {trial}: {results:?}");
        let windows = h.windows().expect("windows");
        assert_eq!(windows.len(), 2, "trial {trial}: {windows:?}");
        let rows = h.read(ReadFrom::CurrentWindow).expect("read").rows;
        let lead_in = rows
            .iter()
            .map(|r| comparable(&r.raw))
            .find(|v| v["kind"] == "lead_in")
            .expect("a lead-in");
        assert!(
            lead_in.to_string().contains("continue from w:0"),
            "{lead_in}"
        );
    }
}

#[test]
fn appends_survive_dropped_connections_exactly_once() {
    let Some(url) = url() else { return };
    // Only this test's connections are dropped (its own application name).
    let app = unique("pgtx_drop");
    let sep = if url.contains('?') { '&' } else { '?' };
    let pool = ctxbudget::pg::PgStore::connect(
        &format!("{url}{sep}application_name={app}"),
        options("ctxbudget_tests"),
    )
    .expect("connect");
    let id = unique("drops");
    let h = Arc::new(PgHistory::new(pool.open(&id).expect("open")));
    let writer = {
        let h = Arc::clone(&h);
        std::thread::spawn(move || {
            let mut acknowledged = Vec::new();
            for i in 0..120u64 {
                let text = format!("row {i}");
                // A failure is an outcome the caller must handle; a success must be
                // there exactly once.
                if let Ok(r) = h.append_rows(&[NewRow::text("message", "user", &text)], None) {
                    acknowledged.push((r.first_seq, text));
                }
            }
            acknowledged
        })
    };
    let mut sql = raw(&url, "ctxbudget_tests");
    let mut dropped = 0i64;
    // Bounded: at most 40 rounds, 25 ms apart (a new connection gets time to do work).
    for _ in 0..40 {
        if writer.is_finished() {
            break;
        }
        if let Ok(row) = sql.query_one(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE application_name = $1",
            &[&app],
        ) {
            dropped += row.get::<_, i64>(0);
        }
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    let acknowledged = writer.join().unwrap_or_default();
    assert!(
        dropped > 0,
        "no connection was dropped; the test did not test"
    );
    let fresh = PgHistory::new(store(&url).open(&id).expect("open"));
    let read = fresh.read(ReadFrom::Seq(0)).expect("read");
    let seqs: Vec<u64> = read.rows.iter().filter_map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=read.last_seq).collect::<Vec<_>>(), "gapless");
    for (seq, text) in &acknowledged {
        let matching: Vec<_> = read
            .rows
            .iter()
            .filter(|r| comparable(&r.raw)["parts"][0]["text"] == *text.as_str())
            .collect();
        assert_eq!(matching.len(), 1, "{text} present exactly once");
        assert_eq!(matching[0].seq, Some(*seq));
    }
    assert!(fresh.verify().expect("verify").ok);
    // The handle whose connections were dropped agrees with a fresh one.
    assert_eq!(
        h.read(ReadFrom::Seq(0)).expect("read").rows.len(),
        read.rows.len()
    );
}

#[test]
fn a_lead_in_that_reads_the_history_does_not_wait_for_its_own_rollover() {
    let Some(url) = url() else { return };
    let h = Arc::new(pg_history(&url, "leadin"));
    h.append_rows(&texts(&["the plan", "agreed"]), None)
        .expect("append");
    let reader = Arc::clone(&h);
    let lead_in = LeadIn::render(move |ctx| {
        // A renderer that looks at the transcript it is rolling over (its last rows).
        let rows = reader.rows_since(1).map_err(|e| e.to_string())?;
        Ok(format!(
            "{} rows before {}; continue in {}",
            rows.len(),
            ctx.previous_window,
            ctx.window
        ))
    });
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    let writer = Arc::clone(&h);
    std::thread::spawn(move || {
        let window = transcript::rollover(
            writer.as_ref(),
            RolloverSpec {
                rollover_id: "r1".into(),
                reason: "manual".into(),
                lead_in,
                ..RolloverSpec::default()
            },
        );
        let _ = done_tx.send(window.map(|w| w.to_string()));
    });
    let window = done_rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the rollover finished (no self-deadlock)")
        .expect("the rollover succeeded");
    assert_eq!(window, "w:3");
    let rows = h.read(ReadFrom::CurrentWindow).expect("read").rows;
    let lead_in = rows
        .iter()
        .map(|r| comparable(&r.raw))
        .find(|v| v["kind"] == "lead_in")
        .expect("a lead-in");
    assert!(
        lead_in
            .to_string()
            .contains("2 rows before w:0; continue in w:3"),
        "{lead_in}"
    );
}

/// What a writer reads back right after its own append (`read_after_append`, which a
/// handle whose index holds the batch answers without a round trip) is what a fresh
/// handle reads from the server through that batch: another host's rows appended before
/// it, its soft clears (the floor) and rotations (a new epoch) included.
#[test]
fn a_read_after_an_append_gives_what_the_server_holds_through_the_batch() {
    let Some(url) = url() else { return };
    let writer = pg_history(&url, "after-append");
    let id = writer.conversation().id().to_owned();
    let other = store(&url).history(&id).expect("a second handle");
    let mut from = 1;
    for step in 0..12u64 {
        match step % 4 {
            1 => {
                other
                    .append_rows(&texts(&["from", "another host"]), None)
                    .expect("the other host appends");
            }
            2 => {
                transcript::clear_soft(&other, None).expect("the other host clears");
            }
            3 if step > 4 => {
                other.rotate().expect("the other host rotates");
            }
            _ => {}
        }
        let batch = format!(
            r#"[{{"kind":"message","role":"user","parts":[{{"type":"text","text":"step {step}"}}]}}]"#
        );
        let appended = writer.append_json(batch.as_bytes(), None).expect("append");
        let after = writer
            .read_after_append(ReadFrom::Seq(from), &appended)
            .expect("read after the append");
        let fresh = store(&url)
            .history(&id)
            .expect("a fresh handle")
            .read(ReadFrom::Seq(from))
            .expect("read");
        assert_eq!(after.last_seq, appended.last_seq, "step {step}");
        assert_eq!(
            (after.last_seq, after.floor_seq),
            (fresh.last_seq, fresh.floor_seq),
            "step {step}"
        );
        assert_eq!(after.rows, fresh.rows, "step {step}");
        from = appended.last_seq + 1;
    }
}

#[test]
fn verify_reports_rows_deleted_by_hand_at_the_tail() {
    let Some(url) = url() else { return };
    let h = pg_history(&url, "tail");
    let id = h.conversation().id().to_owned();
    h.append_rows(&texts(&["a", "b", "c", "d", "e"]), None)
        .expect("append");
    assert!(h.verify().expect("verify").ok);
    let mut sql = raw(&url, "ctxbudget_tests");
    let rows_left = |sql: &mut postgres::Client| -> i64 {
        sql.query_one(
            "SELECT count(*) FROM ctxbudget_rows WHERE conversation = $1",
            &[&id],
        )
        .expect("count")
        .get(0)
    };
    // The newest two rows deleted by hand: no gap between the rows that are left.
    sql.execute(
        "DELETE FROM ctxbudget_rows WHERE conversation = $1 AND seq >= 4",
        &[&id],
    )
    .expect("delete the tail");
    let report = h.verify().expect("verify");
    assert!(!report.ok, "a deleted tail must not verify ok: {report:?}");
    assert_eq!(report.live.rows, 3, "{report:?}");
    assert_eq!(
        report.detail,
        VerifyDetail::Postgres {
            rows_past_last_seq: 0
        }
    );
    assert!(report.seq_violations >= 1, "{report:?}");
    let what = report.first_seq_violation.clone().unwrap_or_default();
    assert!(what.contains('4') && what.contains('5'), "{what}");
    // Verify rewrote nothing: the conversation still says 5, three rows are left.
    assert_eq!(h.conversation().state().expect("state").last_seq, 5);
    assert_eq!(rows_left(&mut sql), 3);
    // Every row deleted by hand.
    sql.execute("DELETE FROM ctxbudget_rows WHERE conversation = $1", &[&id])
        .expect("delete all");
    assert!(!h.verify().expect("verify").ok);
    assert_eq!(rows_left(&mut sql), 0);
    // A row put by hand past the last seq is reported too.
    let other = pg_history(&url, "beyond");
    other
        .append_rows(&texts(&["a", "b"]), None)
        .expect("append");
    sql.execute(
        "INSERT INTO ctxbudget_rows (conversation, seq, body) \
         SELECT conversation, 3, body FROM ctxbudget_rows WHERE conversation = $1 AND seq = 2",
        &[&other.conversation().id()],
    )
    .expect("insert past the last seq");
    let report = other.verify().expect("verify");
    assert!(
        !report.ok,
        "a row past the last seq must not verify ok: {report:?}"
    );
    assert_eq!(
        (report.last_seq, report.seq_violations, &report.detail),
        (
            2,
            1,
            &VerifyDetail::Postgres {
                rows_past_last_seq: 1
            }
        ),
        "{report:?}"
    );
}

/// Runs one `session_history` call on another thread and waits for it at most `watchdog`
/// (a call that outlives its deadline would otherwise hang the test).
fn call_within(tool: &Arc<SessionHistoryTool>, watchdog: std::time::Duration) -> Option<Value> {
    let (send, recv) = std::sync::mpsc::channel();
    let tool = Arc::clone(tool);
    std::thread::spawn(move || {
        let _ = send.send(tool.call(&json!({"action": "list_items", "limit": 5})));
    });
    recv.recv_timeout(watchdog).ok()
}

#[test]
fn session_history_returns_by_its_deadline_while_a_lock_is_held() {
    let Some(url) = url() else { return };
    // A schema of its own: the locks below would stop the other tests' tables.
    let schema = unique("deadline");
    let store = ctxbudget::pg::PgStore::connect(&url, options(&schema)).expect("connect");
    let h = Arc::new(PgHistory::new(store.open("chat").expect("open")));
    h.append_rows(&texts(&["a", "b"]), None).expect("append");
    let short = ScanOptions {
        deadline: std::time::Duration::from_secs(2),
        ..ScanOptions::default()
    };
    let tool = Arc::new(SessionHistoryTool::over_pg(Arc::clone(&h), key(), short));
    let watchdog = std::time::Duration::from_secs(25);
    for table in ["ctxbudget_rows", "ctxbudget_conversations"] {
        let mut locker = raw(&url, &schema);
        let mut tx = locker.transaction().expect("BEGIN");
        tx.batch_execute(&format!("LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE"))
            .expect("lock");
        let got = call_within(&tool, watchdog);
        tx.rollback().expect("release the lock");
        let result = got.unwrap_or_else(|| {
            panic!("session_history ran past its deadline while {table} was locked")
        });
        assert_eq!(result["ok"], false, "{result}");
        assert_eq!(result["code"], "history_timeout", "{result}");
    }
    // Another host holds the conversation's row lock; this process's append waits for it
    // (holding the handle's index): the page does not wait behind it past its deadline.
    let mut locker = raw(&url, &schema);
    let mut tx = locker.transaction().expect("BEGIN");
    let locker_pid: i32 = tx
        .query_one(
            "SELECT pg_backend_pid() FROM ctxbudget_conversations \
             WHERE conversation = 'chat' FOR UPDATE",
            &[],
        )
        .expect("lock the conversation")
        .get(0);
    let writer = {
        let h = Arc::clone(&h);
        std::thread::spawn(move || h.append_rows(&texts(&["c"]), None).map(|a| a.first_seq))
    };
    // The append is waiting once the server shows its backend blocked on the lock.
    let mut watch = raw(&url, &schema);
    let mut waited = 0;
    while waited < 2000 {
        let blocked: i64 = watch
            .query_one(
                "SELECT count(*) FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))",
                &[&locker_pid],
            )
            .expect("pg_stat_activity")
            .get(0);
        if blocked > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
        waited += 1;
    }
    let got = call_within(&tool, watchdog);
    tx.rollback().expect("release the conversation");
    assert_eq!(writer.join().expect("writer").expect("append"), 3);
    let result = got.expect("session_history waited past its deadline behind an append");
    assert_eq!(result["ok"], true, "{result}");
}

/// A page's reads go to the server as literals in one message (one round trip): a
/// conversation id with quotes, backslashes and a multi-byte character reaches the server
/// as itself, and pages over its own rows (a fresh handle: every body from the server).
#[test]
fn session_history_pages_a_conversation_whose_id_needs_quoting() {
    let Some(url) = url() else { return };
    let id = format!("{}-it's a \\'quote\\\\ \"d\" é", unique("quoted"));
    let writer = PgHistory::new(store(&url).open(&id).expect("open"));
    writer
        .append_rows(&texts(&["alpha one", "beta two", "alpha three"]), None)
        .expect("append");
    // Its neighbour without the quotes must not be what the page reads.
    let plain = PgHistory::new(store(&url).open(&id.replace('\'', "")).expect("open"));
    plain
        .append_rows(&texts(&["alpha other"]), None)
        .expect("append");
    let reader = Arc::new(PgHistory::new(store(&url).open(&id).expect("reopen")));
    let tool = pg_tool(&reader);
    let found = tool.call(&json!({"action": "search", "query": "alpha", "limit": 5}));
    assert_eq!(found["ok"], true, "{found}");
    let text = found.to_string();
    assert!(
        text.contains("alpha one") && text.contains("alpha three"),
        "{found}"
    );
    assert!(!text.contains("alpha other"), "{found}");
    let listed = tool.call(&json!({"action": "list_items", "limit": 5}));
    assert_eq!(listed["ok"], true, "{listed}");
    assert!(listed.to_string().contains("beta two"), "{listed}");
}
