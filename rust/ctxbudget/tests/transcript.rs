//! The transcript layer: one rule table for every write path, typed rows, and the window
//! fold every reader shares.
use std::fs;
use std::path::PathBuf;

use ctxbudget::store::{Durability, OpenOptions, ReadFrom, StoreError};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{Role, RolloverSpec, Row, RowKind, Transcript, WindowFold, WindowId};
use serde_json::{json, Value};

struct Ws(PathBuf);

impl Ws {
    fn new(name: &str) -> Ws {
        let dir = std::env::temp_dir().join(format!(
            "ctxb-transcript-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        Ws(dir)
    }

    fn open(&self) -> History {
        History::open(
            &self.0,
            OpenOptions {
                durability: Durability::None,
                ..OpenOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("{e}"))
    }
}

impl Drop for Ws {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn ok<T>(r: Result<T, StoreError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
}

fn user(text: &str) -> NewRow {
    NewRow::text("message", "user", text)
}

fn row(v: Value) -> NewRow {
    ok(NewRow::from_value(0, v))
}

fn rollover(h: &History, id: &str) -> String {
    ok(h.rollover(RolloverSpec {
        rollover_id: id.into(),
        reason: "manual".into(),
        lead_in: "lead-in".into(),
        ..RolloverSpec::default()
    }))
}

/// `(field, reason)` of the error each write path gives for the same row.
fn errors_of(value: &Value) -> [Option<(String, String)>; 3] {
    let pick = |e: StoreError| match e {
        StoreError::InvalidRow { field, reason, .. } => Some((field, reason)),
        other => Some(("?".into(), other.to_string())),
    };
    let from_value = NewRow::from_value(0, value.clone()).err().and_then(pick);
    let built = serde_json::from_value::<Value>(value.clone())
        .ok()
        .and_then(|v| {
            let o = v.as_object()?;
            Some(NewRow {
                kind: o.get("kind")?.as_str()?.to_owned(),
                role: o.get("role")?.as_str()?.to_owned(),
                parts: o
                    .get("parts")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default(),
                meta: o
                    .get("meta")
                    .and_then(Value::as_object)
                    .cloned()
                    .unwrap_or_default(),
            })
        })
        .map_or(from_value.clone(), |r| r.validate(0).err().and_then(pick));
    let ws = Ws::new("rules");
    let h = ws.open();
    let text = serde_json::to_vec(&json!([value])).unwrap_or_default();
    let raw = h.append_json_bytes(&text).err().and_then(pick);
    [from_value, built, raw]
}

#[test]
fn every_write_path_applies_the_one_rule_table() {
    let bad = [
        json!({"kind": "bogus_kind", "role": "user"}),
        json!({"kind": "message", "role": "robot"}),
        json!({"kind": "boundary", "role": "system"}),
        json!({"kind": "boundary", "role": "system", "meta": {"boundary_kind": "sideways"}}),
        json!({"kind": "retraction", "role": "system", "meta": {"retracts": "3"}}),
        json!({"kind": "message", "role": "user", "parts": [{"type": "txt"}]}),
        json!({"kind": "message", "role": "user", "parts": [{"type": "text", "text": 3}]}),
        json!({"kind": "message", "role": "tool", "parts": [{"type": "tool_result", "call_id": "c"}]}),
        json!({"kind": "message", "role": "assistant", "parts": [{"type": "tool_call", "id": "c"}]}),
        json!({"kind": "message", "role": "user", "parts": [{"type": "media"}]}),
    ];
    for value in &bad {
        let [a, b, c] = errors_of(value);
        assert!(a.is_some(), "{value}: accepted");
        assert_eq!(a, b, "{value}: NewRow::validate disagrees with from_value");
        assert_eq!(
            a, c,
            "{value}: the JSON-text path disagrees with from_value"
        );
    }
    let good = json!({"kind": "message", "role": "tool", "parts": [
        {"type": "tool_result", "call_id": "c", "output": null}]});
    assert_eq!(errors_of(&good), [None, None, None]);
}

#[test]
fn rust_hosts_read_typed_rows() {
    let ws = Ws::new("typed");
    let h = ws.open();
    ok(h.append(vec![user("hello")]));
    rollover(&h, "r1");
    let read = ok(h.read(ReadFrom::Seq(0)));
    let rows = Row::parse_stored(&read.rows);
    let kinds: Vec<RowKind> = rows.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [RowKind::Message, RowKind::Boundary, RowKind::LeadIn]
    );
    assert_eq!(rows[0].role, Role::User);
    assert_eq!(rows[0].text(), "hello");
    assert_eq!(rows[0].window, WindowId::ROOT);
    assert_eq!(rows[2].window, WindowId(2));
    assert_eq!(read.last_seq, 3);
    let current = ok(h.read(ReadFrom::CurrentWindow));
    assert_eq!(current.rows.len(), 2, "the boundary and the lead-in");
}

#[test]
fn the_fold_follows_windows_claims_calls_and_retractions() {
    let ws = Ws::new("fold");
    let h = ws.open();
    let mut fold = WindowFold::new();
    assert!(ok(fold.catch_up(&h)).is_empty());
    ok(h.append(vec![
        user("first question"),
        row(json!({"kind": "advisory", "role": "user",
            "parts": [{"type": "text", "text": "warn"}], "meta": {"stage": "warning"}})),
        row(json!({"kind": "message", "role": "assistant", "parts": [
            {"type": "tool_call", "id": "c1", "name": "search", "arguments": {"q": 1}},
            {"type": "tool_call", "id": "c2", "name": "new_context", "arguments": {}}]})),
    ]));
    let rows = ok(fold.catch_up(&h));
    assert_eq!(rows.len(), 3);
    assert_eq!(fold.window(), WindowId::ROOT);
    assert!(fold.claims().warning && !fold.claims().handoff);
    let open: Vec<&str> = fold
        .open_calls()
        .iter()
        .map(|c| c.call_id.as_str())
        .collect();
    assert_eq!(open, ["c1", "c2"]);
    assert_eq!(fold.open_calls()[0].arguments, Some(json!({"q": 1})));
    assert_eq!(fold.last_user_seq(), Some(1));
    assert!(!fold.new_context_requested());

    // Results close calls (an interrupted one too); a scheduled new_context result, as
    // JSON text, schedules the rollover.
    ok(h.append(vec![row(
        json!({"kind": "message", "role": "tool", "parts": [
        {"type": "tool_result", "call_id": "c1", "output": {"interrupted": true}},
        {"type": "tool_result", "call_id": "c2", "name": "new_context",
         "output": "{\"ok\": true, \"status\": \"scheduled\"}"}]}),
    )]));
    let rows = ok(fold.catch_up(&h));
    assert_eq!(rows.len(), 1, "only the new row is read");
    assert!(fold.open_calls().is_empty() && fold.is_answered("c1"));
    assert!(fold.new_context_requested());

    // A retraction hides its target from the visible rows.
    ok(h.append(vec![
        user("second"),
        row(json!({"kind": "retraction", "role": "system", "meta": {"retracts": 5}})),
    ]));
    ok(fold.catch_up(&h));
    assert!(fold.is_retracted(5));
    assert_eq!(fold.visible().collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(fold.item_count(), 3);

    // A rollover resets the window's state and names the previous window.
    let w = rollover(&h, "r1");
    ok(fold.catch_up(&h));
    assert_eq!(fold.window().to_string(), w);
    assert_eq!(fold.previous_window(), Some(WindowId::ROOT));
    assert_eq!(fold.claims(), Default::default());
    assert!(!fold.new_context_requested() && fold.last_user_seq().is_none());
    assert_eq!(fold.floor_seq(), 0, "a rollover is no privacy floor");

    // A soft clear is the floor.
    let floor = ok(h.clear_soft());
    ok(fold.catch_up(&h));
    assert_eq!(fold.floor_seq(), floor);
    assert_eq!(fold.window(), WindowId(floor));
    assert_eq!(fold.window_kind_name(), "reset");
    assert_eq!(fold.last_seq(), floor);

    // A fold that starts late reads only the current window and agrees.
    let mut late = WindowFold::new();
    let rows = ok(late.catch_up(&h));
    assert_eq!(rows.iter().map(|r| r.seq).collect::<Vec<_>>(), [floor]);
    assert_eq!(late.window(), fold.window());
    assert_eq!(late.previous_window(), fold.previous_window());
    assert_eq!(late.floor_seq(), fold.floor_seq());
}

#[test]
fn advisories_claim_by_their_stage_only() {
    let ws = Ws::new("claims");
    let h = ws.open();
    ok(h.append(vec![
        row(json!({"kind": "advisory", "role": "user", "meta": {"stage": "handoff"}})),
        row(json!({"kind": "advisory", "role": "user", "meta": {"stage": "final"}})),
        // A stage outside an advisory row, or a flag this library never wrote, claims nothing.
        row(json!({"kind": "advisory", "role": "user", "meta": {"warning": true}})),
        row(json!({"kind": "message", "role": "user", "meta": {"stage": "warning"}})),
    ]));
    let mut fold = WindowFold::new();
    ok(fold.catch_up(&h));
    let c = fold.claims();
    assert!(c.handoff && c.final_prompt && !c.warning, "{c:?}");
}

#[test]
fn window_ids_parse_with_a_typed_error() {
    assert_eq!("w:12".parse::<WindowId>().ok(), Some(WindowId(12)));
    let err = "window 12".parse::<WindowId>().err().map(|e| e.to_string());
    assert!(err.is_some_and(|e| e.contains("not a window ID")));
}

#[test]
fn a_rendered_lead_in_names_the_window_the_rollover_really_opens() {
    let ws = Ws::new("lead-in");
    let h = ws.open();
    ok(h.append(vec![user("hello")]));
    // The host decides to roll over with the store at seq 1 (a prediction would say
    // w:2); another writer appends before the rollover is written.
    ok(h.append(vec![user("meanwhile")]));
    let window = ok(h.rollover(RolloverSpec {
        rollover_id: "r1".into(),
        reason: "usable_limit".into(),
        lead_in: ctxbudget::transcript::LeadIn::template(
            "New context window {window_id} (previous window: {previous_window_id}).",
        ),
        ..RolloverSpec::default()
    }));
    assert_eq!(window, "w:3");
    let rows = Row::parse_stored(&ok(h.read(ReadFrom::CurrentWindow)).rows);
    assert_eq!(rows[1].kind, RowKind::LeadIn);
    assert_eq!(
        rows[1].text(),
        "New context window w:3 (previous window: w:0)."
    );
    // A repeat with the same ID renders nothing and writes nothing.
    let again = ok(h.rollover(RolloverSpec {
        rollover_id: "r1".into(),
        reason: "usable_limit".into(),
        lead_in: ctxbudget::transcript::LeadIn::render(|_| Err("must not be called".into())),
        ..RolloverSpec::default()
    }));
    assert_eq!(again, "w:3");
}

#[test]
fn a_lead_in_that_fails_to_render_writes_nothing() {
    let ws = Ws::new("lead-in-err");
    let h = ws.open();
    ok(h.append(vec![user("hello")]));
    let err = h
        .rollover(RolloverSpec {
            rollover_id: "r1".into(),
            reason: "manual".into(),
            lead_in: ctxbudget::transcript::LeadIn::render(|_| Err("template broken".into())),
            ..RolloverSpec::default()
        })
        .err()
        .map(|e| e.to_string());
    assert!(
        err.as_deref()
            .is_some_and(|e| e.contains("template broken") && e.contains("w:2")),
        "{err:?}"
    );
    assert_eq!(ok(h.read(ReadFrom::Seq(0))).rows.len(), 1);
}

#[test]
fn quarantine_by_seq_reads_the_row_and_writes_one_conditional_batch() {
    let ws = Ws::new("quarantine");
    let h = ws.open();
    let seq = ok(h.append(vec![user("way too long")])).first_seq;
    let stale = h.quarantine_seq(seq, Some(0));
    assert!(
        matches!(stale, Err(StoreError::Conflict { .. })),
        "{stale:?}"
    );
    let q = ok(h.quarantine_seq(seq, Some(seq)));
    let read = ok(h.read(ReadFrom::Seq(0)));
    let rows = Row::parse_stored(&read.rows);
    let kinds: Vec<RowKind> = rows.iter().map(|r| r.kind).collect();
    assert_eq!(
        kinds,
        [RowKind::Message, RowKind::Retraction, RowKind::Rejected]
    );
    assert_eq!(q, rows[2].seq);
    let rejected = &rows[2].meta["rejected"];
    assert_eq!(rejected["parts"][0]["text"], "way too long");
    assert_eq!(rejected["role"], "user");
    let mut fold = WindowFold::new();
    ok(fold.catch_up(&h));
    assert!(fold.is_retracted(seq) && fold.item_count() == 0);
    // Only items are quarantined, and only rows that exist.
    let missing = h.quarantine_seq(99, None).err().map(|e| e.to_string());
    assert!(missing.is_some_and(|e| e.contains("no readable row with seq 99")));
    let structural = h.quarantine_seq(2, None).err().map(|e| e.to_string());
    assert!(structural.is_some_and(|e| e.contains("retraction row")));
}

/// SPEC §5 words a quarantine as an empty assistant message carrying the original request
/// in `meta.rejected`. Whoever wrote it, such a row is never context: the fold leaves it
/// out of the visible rows, window listings do not count it, and `session_history` never
/// returns it — one rule (`rules::is_quarantined`) for every reader.
#[test]
fn a_row_carrying_meta_rejected_is_never_context_nor_an_item() {
    let ws = Ws::new("spec-quarantine");
    let h = std::sync::Arc::new(ws.open());
    ok(h.append(vec![user("hi"), user("far too long zebra")]));
    ok(h.append(vec![
        row(json!({"kind": "retraction", "role": "system", "meta": {"retracts": 2}})),
        row(json!({"kind": "message", "role": "assistant", "parts": [],
            "meta": {"rejected": {"role": "user",
                "parts": [{"type": "text", "text": "far too long zebra"}], "meta": {}}}})),
        row(json!({"kind": "message", "role": "assistant", "parts": [],
            "meta": {"rejected": null, "note": "a null marker is no quarantine"}})),
    ]));
    let mut fold = WindowFold::new();
    ok(fold.catch_up(&h));
    assert_eq!(fold.visible().collect::<Vec<_>>(), [1, 5]);
    assert_eq!(fold.item_count(), 2);
    let windows = ok(h.windows());
    assert_eq!(windows.len(), 1);
    assert_eq!(windows[0].item_count, 2);

    let tool = ctxbudget::scan::SessionHistoryTool::new(h.clone());
    let found: Value = serde_json::from_str(
        &tool.call_json(&json!({"action": "search", "query": "zebra"}).to_string()),
    )
    .unwrap_or_default();
    assert_eq!(found["items"], json!([]), "{found}");
    let listed: Value = serde_json::from_str(
        &tool.call_json(&json!({"action": "list_items", "window_id": "w:0"}).to_string()),
    )
    .unwrap_or_default();
    let ids: Vec<&str> = listed["items"]
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["item_id"].as_str()).collect())
        .unwrap_or_default();
    assert_eq!(ids, ["1", "5"], "{listed}");
}

/// A retraction of the row that made tool calls closes them: the request no longer
/// carries the calls, so no result is owed (an interrupted result for a call the provider
/// never saw would be refused). Calls of other rows stay open.
#[test]
fn retracting_the_row_that_made_calls_closes_them() {
    let ws = Ws::new("retract-calls");
    let h = ws.open();
    ok(h.append(vec![
        user("look it up"),
        row(json!({"kind": "message", "role": "assistant", "parts": [
            {"type": "tool_call", "id": "a", "name": "search", "arguments": {}}]})),
        row(json!({"kind": "message", "role": "assistant", "parts": [
            {"type": "tool_call", "id": "b", "name": "search", "arguments": {}}]})),
    ]));
    let mut fold = WindowFold::new();
    ok(fold.catch_up(&h));
    assert_eq!(fold.open_calls().len(), 2);
    ok(h.append(vec![row(
        json!({"kind": "retraction", "role": "system", "meta": {"retracts": 2}}),
    )]));
    ok(fold.catch_up(&h));
    let open: Vec<&str> = fold
        .open_calls()
        .iter()
        .map(|c| c.call_id.as_str())
        .collect();
    assert_eq!(open, ["b"]);
    let mut fresh = WindowFold::new();
    ok(fresh.catch_up(&h));
    let open: Vec<&str> = fresh
        .open_calls()
        .iter()
        .map(|c| c.call_id.as_str())
        .collect();
    assert_eq!(open, ["b"], "a fresh fold agrees with the incremental one");
}
