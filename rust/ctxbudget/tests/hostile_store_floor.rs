//! Adversarial checks of the file store, round 2.
#![cfg(feature = "failpoints")]
#![allow(dead_code, unused_imports)]

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ctxbudget::history::failpoint::{self, Fault};
use ctxbudget::history::{
    Durability, History, HistoryError, NewRow, OpenOptions, ReadFrom, RolloverSpec, VerifyReport,
    MAX_ROW_NESTING,
};
use ctxbudget::scan::{SessionHistoryTool, LINE_MAX, RESULT_MAX};
use serde_json::{json, Value};

/// Fail points are process-global: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    let guard = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    failpoint::reset();
    guard
}

struct Ws(PathBuf);
impl Drop for Ws {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

impl Ws {
    fn new(name: &str) -> Ws {
        static N: AtomicU64 = AtomicU64::new(0);
        let dir = std::env::temp_dir().join(format!(
            "ctxb-adv2-{name}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(dir.join("history")).unwrap_or_else(|e| panic!("{e}"));
        Ws(dir)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.join("history").join(name)
    }

    fn chat(&self) -> Vec<u8> {
        fs::read(self.file("chat.jsonl")).unwrap_or_else(|e| panic!("{e}"))
    }

    /// What a legacy writer that ignores the lock does: append one line to `chat.jsonl`.
    fn external_line(&self, line: &str) {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .create(true)
            .open(self.file("chat.jsonl"))
            .unwrap_or_else(|e| panic!("{e}"));
        f.write_all(format!("{line}\n").as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }

    /// The contents of every file under `recovered/`.
    fn recovered(&self) -> Vec<Vec<u8>> {
        fs::read_dir(self.file("recovered"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| fs::read(e.path()).ok())
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn open_with(ws: &Ws, max_row_bytes: Option<usize>) -> Arc<History> {
    let mut options = OpenOptions {
        durability: Durability::None,
        ..OpenOptions::default()
    };
    if let Some(max) = max_row_bytes {
        options.max_row_bytes = max;
    }
    Arc::new(History::open(&ws.0, options).unwrap_or_else(|e| panic!("{e}")))
}

fn open(ws: &Ws) -> Arc<History> {
    open_with(ws, None)
}

fn msg(text: &str) -> NewRow {
    NewRow::text("message", "user", text)
}

fn ok<T>(r: Result<T, HistoryError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn verify(h: &History) -> VerifyReport {
    ok(h.verify())
}

fn call(tool: &SessionHistoryTool, args: Value) -> Value {
    let out = tool.call_json(&args.to_string());
    assert!(out.len() <= RESULT_MAX, "result of {} bytes", out.len());
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"))
}

fn rollover(h: &History, id: &str) {
    ok(h.rollover(RolloverSpec {
        rollover_id: id.into(),
        reason: "usable_limit".into(),
        lead_in: format!("LEAD-IN {id}").into(),
        ..RolloverSpec::default()
    }));
}

/// A legacy row line (outside any batch) with `text` and the given `meta` object.
fn legacy_row(seq: u64, text: &str, meta: &str) -> String {
    format!(
        "{{\"seq\":{seq},\"id\":\"{seq}\",\"kind\":\"message\",\"role\":\"user\",\"window\":\"w:0\",\"parts\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"meta\":{meta}}}"
    )
}

/// The rows a prompt is built from: the current window above the floor, as one string.
fn context(h: &History) -> String {
    let read = ok(h.read(ReadFrom::CurrentWindow));
    read.rows
        .iter()
        .filter(|r| r.seq.is_some_and(|s| s > read.floor_seq))
        .map(|r| String::from_utf8_lossy(&r.raw).into_owned())
        .collect::<Vec<_>>()
        .join("\n")
}

/// Everything `session_history` shows for `query` and in full listings, as one string.
fn everything_visible(h: &Arc<History>, query: &str) -> String {
    let tool = SessionHistoryTool::new(h.clone());
    let mut seen = String::new();
    for first in [
        json!({"action": "search", "query": query}),
        json!({"action": "list_items", "limit": 25}),
        json!({"action": "list_items", "limit": 25, "recent_first": true}),
    ] {
        let mut args = first;
        for _ in 0..100 {
            let r = call(&tool, args.clone());
            assert_eq!(r["ok"], true, "{r}");
            seen.push_str(&r.to_string());
            match r["cursor"].as_str() {
                Some(c) if r["has_more"] == true => args["cursor"] = json!(c),
                _ => break,
            }
        }
    }
    seen
}

/// `verify` finds no damage in either file.
fn assert_no_damage(h: &History, what: &str) {
    let v = verify(h);
    assert!(
        v.chat.damage.is_none() && v.archive.damage.is_none(),
        "{what}: false damage: {v:?}"
    );
}

/// The next append succeeds and takes `seq`.
fn assert_writable_at(h: &History, seq: u64, what: &str) {
    let r = h.append(vec![msg("written after")]);
    match r {
        Ok(a) => assert_eq!(a.first_seq, seq, "{what}: seq handed out"),
        Err(e) => panic!("{what}: append refused: {e}"),
    }
}

// ----- a reset row whose seq goes back --------------------------------------------------

/// docs/format.md: "A row whose seq is not above every seq before it is malformed for
/// indexing: readers skip it (a reset among them still counts as a floor)". The context
/// read must agree with session_history.
#[test]
fn a_reset_row_whose_seq_goes_back_is_a_floor_for_context_too() {
    let _serial = serial();
    let ws = Ws::new("seqback-reset");
    let h = open(&ws);
    ok(h.append(vec![msg("one")]));
    ok(h.append(vec![msg("two")]));
    ok(h.append(vec![msg("SECRET before the clear")]));
    // A legacy writer appends a soft clear that reuses seq 2.
    ws.external_line(r#"{"seq":2,"id":"2","kind":"boundary","role":"system","window":"w:2","parts":[],"meta":{"boundary_kind":"reset"}}"#);
    let h2 = open(&ws);
    ok(h2.append(vec![msg("after the clear")]));
    let seen = everything_visible(&h2, "SECRET");
    let tool_hides = !seen.contains("SECRET");
    let read = ok(h2.read(ReadFrom::CurrentWindow));
    let ctx = context(&h2);
    let v = verify(&h2);
    assert!(tool_hides, "tool returns pre-clear row: {seen}");
    assert!(
        !ctx.contains("SECRET"),
        "pre-clear row sent as context (floor_seq {}): {ctx}",
        read.floor_seq
    );
    assert!(v.floor_seq >= 3, "verify floor {}", v.floor_seq);
}

// ----- a row the writer accepts but the reader's strict head parse refuses ---------------

fn item_ids(h: &Arc<History>) -> Vec<String> {
    let tool = SessionHistoryTool::new(h.clone());
    let r = call(&tool, json!({"action": "list_items", "limit": 25}));
    r["items"]
        .as_array()
        .map(|a| a.iter().map(|i| i["item_id"].to_string()).collect())
        .unwrap_or_default()
}

/// An acknowledged message row whose `meta` holds a head key (`retracts`, `boundary_kind`,
/// `rollover_id`) with a value of another type than the head expects: the writer indexes it
/// as a row, but a fresh open (strict head parse) does not — it is never listed again.
#[test]
fn meta_head_keys_of_other_types_read_back_as_rows() {
    let _serial = serial();
    let mut broken = Vec::new();
    for meta in [
        r#"{"retracts":1.5}"#,
        r#"{"retracts":-1}"#,
        r#"{"retracts":"2"}"#,
        r#"{"boundary_kind":7}"#,
        r#"{"rollover_id":{"a":1}}"#,
        r#"{"boundary_kind":["reset"]}"#,
    ] {
        for path in ["json_bytes", "value", "built"] {
            let ws = Ws::new("meta-types");
            let h = open(&ws);
            ok(h.append(vec![msg("first")]));
            let row = format!(
                r#"{{"kind":"message","role":"user","parts":[{{"type":"text","text":"USER TEXT"}}],"meta":{meta}}}"#
            );
            let res = match path {
                "json_bytes" => h.append_json_bytes(format!("[{row}]").as_bytes()),
                "value" => h.append_json(vec![serde_json::from_str(&row).unwrap()]),
                _ => {
                    let m: serde_json::Map<String, Value> = serde_json::from_str(meta).unwrap();
                    let mut r = msg("USER TEXT");
                    r.meta = m;
                    h.append(vec![r])
                }
            };
            let Ok(a) = res else {
                continue;
            };
            let live_items = item_ids(&h);
            let live_windows = ok(h.windows());
            let fresh = open(&ws);
            let fresh_items = item_ids(&fresh);
            let fresh_windows = ok(fresh.windows());
            let fresh_rows = ok(fresh.read(ReadFrom::CurrentWindow));
            let v = verify(&fresh);
            if !(live_items == fresh_items && live_windows == fresh_windows) {
                broken.push(format!(
                "[{meta} via {path}] acknowledged seq {} : live handle lists {live_items:?} {live_windows:?}, fresh open lists {fresh_items:?} {fresh_windows:?}; fresh row seqs {:?}; verify {v:?}",
                a.first_seq,
                fresh_rows.rows.iter().map(|r| r.seq).collect::<Vec<_>>()
            ));
            }
        }
    }
    assert!(broken.is_empty(), "{} cases", broken.len());
}

/// Consequences of the gap above: a rollover boundary whose `meta.rollover_id` is not a
/// string opens a window for the writer but not after a reopen (the previous window's
/// rows come back as context); a message that mentions "boundary" and "reset" and carries
/// such a meta key becomes a reset-like line after a reopen (the floor jumps over it).
#[test]
fn meta_type_gap_changes_windows_and_floor_after_reopen() {
    let _serial = serial();
    // (a) rollover boundary with a numeric rollover_id.
    let ws = Ws::new("gap-rollover");
    let h = open(&ws);
    ok(h.append(vec![msg("OLD WINDOW ROW")]));
    let res = h.append_json_bytes(
        br#"[{"kind":"boundary","role":"system","parts":[],"meta":{"boundary_kind":"rollover","rollover_id":5}},{"kind":"message","role":"user","parts":[{"type":"text","text":"new window"}]}]"#,
    );
    let mut failures = Vec::new();
    if res.is_ok() {
        let live = context(&h);
        let fresh = open(&ws);
        let fresh_ctx = context(&fresh);
        if live != fresh_ctx {
            failures.push(format!(
                "(a) context differs: live {live:?}\nfresh {fresh_ctx:?}"
            ));
        }
    }
    // (b) a message mentioning "boundary" and "reset" with a non-integer retracts.
    let ws = Ws::new("gap-floor");
    let h = open(&ws);
    ok(h.append(vec![msg("EARLIER ROW")]));
    let res = h.append_json_bytes(
        br#"[{"kind":"message","role":"user","parts":[{"type":"text","text":"what does \"boundary\" with \"reset\" mean?"}],"meta":{"retracts":"none","topic":"boundary","mode":"reset"}}]"#,
    );
    if res.is_ok() {
        ok(h.append(vec![msg("later row")]));
        let live_floor = ok(h.floor_seq());
        let fresh = open(&ws);
        let fresh_floor = ok(fresh.floor_seq());
        let seen = everything_visible(&fresh, "EARLIER");
        if live_floor != fresh_floor || !seen.contains("EARLIER ROW") {
            failures.push(format!("(b) live floor {live_floor} fresh floor {fresh_floor}; earlier row listed by fresh tool: {}", seen.contains("EARLIER ROW")));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

// ----- a rollover after a torn soft clear ---------------------------------------------

/// docs/format.md: "the lead-in is rendered from the window ID the boundary really gets".
/// After a torn soft clear the floor is above the last seq, so the next seq is floor + 1,
/// not last seq + 1: the rollover's lead-in names a window one below the one it opens.
#[test]
fn a_rollover_after_a_torn_soft_clear_names_its_real_window() {
    let _serial = serial();
    for reopen in [false, true] {
        let ws = Ws::new("torn-clear-rollover");
        let mut h = open(&ws);
        ok(h.append(vec![msg("SECRET")]));
        failpoint::arm("append.write", Fault::Torn(10));
        assert!(h.clear_soft().is_err());
        failpoint::reset();
        if reopen {
            drop(h);
            h = open(&ws);
        }
        let rendered = Arc::new(Mutex::new(String::new()));
        let r2 = rendered.clone();
        let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            h.rollover(RolloverSpec {
                rollover_id: "r1".into(),
                reason: "usable_limit".into(),
                lead_in: ctxbudget::transcript::LeadIn::render(move |ctx| {
                    *r2.lock().unwrap() = ctx.window.to_string();
                    Ok(format!("you are now in {}", ctx.window))
                }),
                ..RolloverSpec::default()
            })
        }));
        let windows = ok(h.windows());
        let lead_in_names = rendered.lock().unwrap().clone();
        match res {
            Err(_) => panic!("[reopen {reopen}] rollover panicked (lead-in named {lead_in_names}); windows {windows:?}"),
            Ok(Ok(w)) => assert_eq!(w, lead_in_names, "[reopen {reopen}] rollover opened {w}, lead-in says {lead_in_names}"),
            Ok(Err(e)) => panic!("[reopen {reopen}] rollover refused: {e}"),
        }
    }
}

/// Seq overflow is a typed error: a rollover when a line shows seq u64::MAX must be
/// refused, never panic (the lead-in context computes `last_seq + 1`).
#[test]
fn a_rollover_at_the_end_of_the_seq_space_is_a_typed_error() {
    let _serial = serial();
    let ws = Ws::new("rollover-max");
    ok(open(&ws).append(vec![msg("acked")]));
    ws.external_line(&legacy_row(u64::MAX, "last", "{}"));
    let h = open(&ws);
    let res = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        h.rollover(RolloverSpec {
            rollover_id: "r-max".into(),
            reason: "usable_limit".into(),
            lead_in: "lead".into(),
            ..RolloverSpec::default()
        })
    }));
    match res {
        Err(_) => panic!("rollover panicked at the end of the seq space"),
        Ok(r) => assert!(r.is_err(), "{r:?}"),
    }
}

/// Quarantining a row from before a soft clear copies its content into a row after the
/// floor: is it returned by the tool, or part of the rows above floor_seq?
#[test]
fn quarantine_of_a_row_before_the_floor() {
    let _serial = serial();
    let ws = Ws::new("quarantine-below-floor");
    let h = open(&ws);
    let secret = ok(h.append(vec![msg("SECRET before the clear")])).first_seq;
    ok(h.clear_soft());
    ok(h.append(vec![msg("after the clear")]));
    let res = h.quarantine_seq(secret, None);
    let seen = everything_visible(&h, "SECRET");
    let ctx = context(&h);
    assert!(
        !seen.contains("SECRET"),
        "tool returns pre-clear content: {seen}"
    );
    assert!(
        res.is_err() || !ctx.contains("SECRET"),
        "pre-clear content copied above the floor: {ctx}"
    );
}

/// verify() numbers: a legacy line whose seq goes back is malformed for indexing (not a
/// row); it must not also count as a legacy row (legacy rows are rows).
#[test]
fn verify_counts_a_seq_violation_once() {
    let _serial = serial();
    let ws = Ws::new("verify-counts");
    ok(open(&ws).append(vec![msg("one"), msg("two")]));
    ws.external_line(&legacy_row(1, "again", "{}"));
    let h = open(&ws);
    let v = verify(&h);
    assert_eq!(v.seq_violations, 1);
    assert_eq!(v.chat.rows, 2, "{v:?}");
    assert_eq!(v.chat.malformed_lines, 1, "{v:?}");
    assert!(
        v.chat.legacy_rows <= v.chat.rows - 2,
        "legacy_rows {} counts a line that is not a row: {v:?}",
        v.chat.legacy_rows
    );
}

// ----- a crash while recovery replaces a soft clear found in a torn tail ---------------

/// docs/format.md: "If a row in the tail parses completely as a soft clear, a committed
/// reset row takes its place, so a privacy floor never disappears." A legacy writer's
/// reset line without its newline is such a tail; recovery cuts it, then appends the
/// reset. A crash between the two must not lose the floor.
#[test]
fn a_crash_between_cutting_a_torn_reset_and_replacing_it_keeps_the_floor() {
    let _serial = serial();
    let mut failures = Vec::new();
    for point in [
        "receipt.stable.write",
        "receipt.stable.fsync",
        "receipt.stable.rename",
        "receipt.pending.write",
        "append.open",
        "append.write",
        "append.fsync",
        "dir.fsync",
    ] {
        let ws = Ws::new("crash-torn-reset");
        ok(open(&ws).append(vec![msg("SECRET before the clear")]));
        // An unterminated reset line: a torn tail holding a complete soft clear.
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(ws.file("chat.jsonl"))
            .unwrap();
        f.write_all(br#"{"seq":2,"id":"2","kind":"boundary","role":"system","window":"w:2","parts":[],"meta":{"boundary_kind":"reset"}}"#).unwrap();
        drop(f);
        failpoint::arm(point, Fault::Crash);
        let first = History::open(
            &ws.0,
            OpenOptions {
                durability: Durability::None,
                ..OpenOptions::default()
            },
        );
        failpoint::reset();
        let crashed = first.is_err();
        drop(first);
        let h = open(&ws);
        ok(h.append(vec![msg("after the clear")]));
        let seen = everything_visible(&h, "SECRET");
        let ctx = context(&h);
        if seen.contains("SECRET") || ctx.contains("SECRET") {
            failures.push(format!("[{point}] (open crashed: {crashed}) floor lost: tool returns it {}, context has it {}", seen.contains("SECRET"), ctx.contains("SECRET")));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}

// ----- legacy rows whose first key is a frame key ----------------------------------------

/// A legacy writer that sorts keys (Python's `json.dumps(row, sort_keys=True)`) and
/// keeps a `commit` (a VCS revision) or `batch` field in its rows writes lines that begin
/// with `{"commit":` / `{"batch":`. They are rows as they stand (docs/format.md: complete
/// lines outside any batch are rows); they must not be damage that refuses writes.
#[test]
fn legacy_rows_whose_first_key_is_commit_or_batch_are_not_damage() {
    let _serial = serial();
    let mut failures = Vec::new();
    for first in [r#""commit": "3f2a9c1""#, r#""batch": 7"#] {
        let ws = Ws::new("legacy-frame-keys");
        ok(open(&ws).append(vec![msg("acked")]));
        ws.external_line(&format!(
            r#"{{{first}, "id": "2", "kind": "message", "meta": {{}}, "parts": [{{"text": "legacy text", "type": "text"}}], "role": "user", "seq": 2, "window": "w:0"}}"#
        ));
        ws.external_line(&format!(
            r#"{{{first}, "id": "3", "kind": "message", "meta": {{}}, "parts": [{{"text": "legacy text 2", "type": "text"}}], "role": "user", "seq": 3, "window": "w:0"}}"#
        ));
        let h = open(&ws);
        let v = verify(&h);
        let appended = h.append(vec![msg("after")]);
        let listed = everything_visible(&h, "legacy");
        if v.chat.damage.is_some() || appended.is_err() || !listed.contains("legacy text") {
            failures.push(format!(
                "[{first}] damage {:?}; append {:?}; legacy rows listed: {}",
                v.chat.damage,
                appended.map(|a| a.first_seq).map_err(|e| e.to_string()),
                listed.contains("legacy text")
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
