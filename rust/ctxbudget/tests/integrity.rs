//! Store and retrieval integrity under damage: the privacy floor never drops, an
//! acknowledged batch is never a torn tail, seqs are never reused, every page makes
//! progress, and search finds what is there.
use std::fs;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ctxbudget::scan::{SessionHistoryTool, RESULT_MAX};
use ctxbudget::store::{Durability, OpenOptions, StoreError};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{RolloverSpec, Transcript};
use serde_json::{json, Value};

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
            "ctxb-integrity-{name}-{}-{}",
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
}

fn open(ws: &Ws) -> Arc<History> {
    let options = OpenOptions {
        durability: Durability::None,
        ..OpenOptions::default()
    };
    Arc::new(History::open(&ws.0, options).unwrap_or_else(|e| panic!("{e}")))
}

fn msg(text: &str) -> NewRow {
    NewRow::text("message", "user", text)
}

fn ok<T>(r: Result<T, StoreError>) -> T {
    r.unwrap_or_else(|e| panic!("{e}"))
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

/// Flips one bit of the first byte after `needle` at or after `from` in `path`.
fn flip_after(path: &Path, from: usize, needle: &[u8]) {
    let mut bytes = fs::read(path).unwrap_or_default();
    let at = bytes[from..]
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(needle)))
        + from
        + needle.len();
    bytes[at] ^= 0x01;
    fs::write(path, &bytes).unwrap_or_else(|e| panic!("{e}"));
}

fn offset_of(path: &Path, needle: &[u8]) -> usize {
    let bytes = fs::read(path).unwrap_or_default();
    bytes
        .windows(needle.len())
        .position(|w| w == needle)
        .unwrap_or_else(|| panic!("{:?} not found", String::from_utf8_lossy(needle)))
}

/// Everything the tool shows for `query` and in a full listing, as one string.
fn everything_visible(tool: &SessionHistoryTool, query: &str) -> String {
    let mut seen = String::new();
    for args in [
        json!({"action": "search", "query": query}),
        json!({"action": "list_items", "limit": 25}),
        json!({"action": "list_items", "limit": 25, "recent_first": true}),
    ] {
        let mut args = args;
        for _ in 0..100 {
            let r = call(tool, args.clone());
            seen.push_str(&r.to_string());
            match r["cursor"].as_str() {
                Some(c) if r["has_more"] == true => args["cursor"] = json!(c),
                _ => break,
            }
        }
    }
    seen
}

// ----- defect 1: a damaged soft clear never lowers the privacy floor ------------------

fn cleared(ws: &Ws) {
    let h = open(ws);
    ok(h.append(vec![msg("my password is hunter2")]));
    ok(h.clear_soft());
    ok(h.append(vec![msg("after the clear")]));
}

fn assert_floor_holds(ws: &Ws, visible_after: u64) {
    let h = open(ws);
    let tool = SessionHistoryTool::new(h.clone());
    let seen = everything_visible(&tool, "hunter2");
    assert!(!seen.contains("hunter2"), "pre-clear row returned: {seen}");
    let windows = call(&tool, json!({"action": "list_windows"}));
    let total: u64 = windows["windows"]
        .as_array()
        .map(|w| w.iter().filter_map(|w| w["item_count"].as_u64()).sum())
        .unwrap_or(0);
    assert_eq!(total, visible_after, "pre-clear row counted: {windows}");
}

#[test]
fn a_bit_flip_in_the_reset_row_does_not_lower_the_floor() {
    let ws = Ws::new("floor-row");
    cleared(&ws);
    let chat = ws.file("chat.jsonl");
    let reset = offset_of(&chat, b"\"boundary_kind\":\"reset\"");
    flip_after(&chat, reset, b"\"ts\":\"");
    assert_floor_holds(&ws, 1);
}

#[test]
fn a_bit_flip_in_the_reset_commit_line_does_not_lower_the_floor() {
    let ws = Ws::new("floor-commit");
    cleared(&ws);
    let chat = ws.file("chat.jsonl");
    let reset = offset_of(&chat, b"\"boundary_kind\":\"reset\"");
    flip_after(&chat, reset, b"\"crc\":");
    assert_floor_holds(&ws, 1);
}

#[test]
fn a_bit_flip_in_the_archived_reset_does_not_lower_the_floor() {
    let ws = Ws::new("floor-archive");
    cleared(&ws);
    {
        let h = open(&ws);
        rollover(&h, "r1");
        ok(h.append(vec![msg("in the new window")]));
        assert!(ok(h.rotate()).rows > 0);
    }
    let archive = ws.file("chat-archive.jsonl");
    let reset = offset_of(&archive, b"\"boundary_kind\":\"reset\"");
    flip_after(&archive, reset, b"\"ts\":\"");
    assert_floor_holds(&ws, 2);
}

#[test]
fn the_receipt_keeps_the_floor_when_the_reset_row_is_gone() {
    let ws = Ws::new("floor-receipt");
    cleared(&ws);
    {
        let h = open(&ws);
        rollover(&h, "r1");
        ok(h.append(vec![msg("in the new window")]));
        ok(h.rotate());
    }
    // The archive loses its last batches, cut at a batch boundary: the reset goes, the
    // password stays, and nothing in the rows says a floor was there.
    let archive = ws.file("chat-archive.jsonl");
    let bytes = fs::read(&archive).unwrap_or_default();
    let reset = offset_of(&archive, b"\"boundary_kind\":\"reset\"");
    let batch_start = bytes[..reset]
        .windows(9)
        .rposition(|w| w == b"{\"batch\":")
        .unwrap_or(0);
    fs::write(&archive, &bytes[..batch_start]).unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws);
    assert!(!ok(h.verify()).ok);
    assert_floor_holds(&ws, 1);
}

// ----- defect 3: a cursor from before a soft clear --------------------------------------

#[test]
fn a_cursor_from_before_a_soft_clear_with_nothing_after_it_ends_cleanly() {
    let ws = Ws::new("cursor-clear");
    let h = open(&ws);
    for i in 0..3 {
        ok(h.append(vec![msg(&format!("m{i}"))]));
    }
    let tool = SessionHistoryTool::new(h.clone());
    let args = json!({"action": "list_items", "limit": 1});
    let first = call(&tool, args.clone());
    let cursor = first["cursor"].as_str().unwrap_or_default().to_owned();
    assert!(!cursor.is_empty(), "{first}");
    ok(h.clear_soft());
    for action in ["list_items", "search", "list_windows"] {
        let mut a = json!({"action": action, "limit": 1, "cursor": cursor});
        if action == "search" {
            a["query"] = json!("m");
        }
        let r = call(&tool, a);
        // A cursor for other arguments is refused; ours continues past the floor.
        assert!(r["ok"] == true || r["code"] == "invalid_cursor", "{r}");
    }
    let r = call(
        &tool,
        json!({"action": "list_items", "limit": 1, "cursor": cursor}),
    );
    assert_eq!(r["ok"], true, "{r}");
    assert_eq!(r["items"], json!([]), "{r}");
    assert_eq!(r["has_more"], false, "{r}");
}

// ----- defect 4: acknowledged batches ----------------------------------------------------

fn two_batches(ws: &Ws) -> Vec<u8> {
    let h = open(ws);
    ok(h.append(vec![msg("first")]));
    let after_first = fs::read(ws.file("chat.jsonl")).unwrap_or_default();
    ok(h.append(vec![msg("second")]));
    after_first
}

fn assert_refused_and_kept(ws: &Ws, before: &[u8]) {
    let h = open(ws);
    assert_eq!(
        fs::read(ws.file("chat.jsonl")).unwrap_or_default(),
        before,
        "acknowledged bytes were cut"
    );
    assert!(!ws.file("recovered").exists(), "moved to recovered/");
    let err = h.append(vec![msg("third")]).err();
    assert!(matches!(err, Some(StoreError::Corrupt { .. })), "{err:?}");
    let report = ok(h.verify());
    assert!(
        !report.ok
            && report
                .file()
                .expect("a file store\'s report")
                .chat
                .damage
                .is_some(),
        "{report:?}"
    );
    // Seq 2 is never handed out again, even by a store that skips recovery.
    let rows = ok(h.rows());
    assert!(rows.iter().all(|r| r.seq != Some(3)));
}

#[test]
fn a_bit_flip_in_the_last_acknowledged_batch_is_damage_not_a_torn_tail() {
    let ws = Ws::new("acked-flip");
    two_batches(&ws);
    let chat = ws.file("chat.jsonl");
    let second = offset_of(&chat, b"second");
    flip_after(&chat, second, b"sec");
    let damaged = fs::read(&chat).unwrap_or_default();
    assert_refused_and_kept(&ws, &damaged);
}

#[test]
fn a_cut_at_a_batch_boundary_through_acknowledged_data_is_damage() {
    let ws = Ws::new("acked-cut");
    let after_first = two_batches(&ws);
    fs::write(ws.file("chat.jsonl"), &after_first).unwrap_or_else(|e| panic!("{e}"));
    assert_refused_and_kept(&ws, &after_first);
}

// ----- defect 2/14: duplicated seqs are reported -----------------------------------------

#[test]
fn verify_reports_seqs_duplicated_across_archive_and_chat() {
    let ws = Ws::new("dup-seqs");
    {
        let h = open(&ws);
        ok(h.append(vec![msg("a"), msg("b")]));
        ok(h.append(vec![msg("c")]));
    }
    // As a half-finished rotation of old would leave it: the archive holds copies.
    let chat = fs::read(ws.file("chat.jsonl")).unwrap_or_default();
    fs::write(ws.file("chat-archive.jsonl"), &chat).unwrap_or_else(|e| panic!("{e}"));
    let h = History::open(
        &ws.0,
        OpenOptions {
            recover_on_open: false,
            ..OpenOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let report = ok(h.verify());
    assert!(!report.ok, "{report:?}");
    assert!(report.seq_violations >= 3, "{report:?}");
    // And a reader never shows a row twice.
    let tool = SessionHistoryTool::new(Arc::new(h));
    let r = call(&tool, json!({"action": "list_items", "limit": 25}));
    let ids: Vec<&str> = r["items"]
        .as_array()
        .map(|a| a.iter().filter_map(|i| i["item_id"].as_str()).collect())
        .unwrap_or_default();
    let mut unique = ids.clone();
    unique.dedup();
    assert_eq!(ids, unique, "{r}");
}

// ----- defect 6: a torn tail that merely mentions "boundary" and "reset" -----------------

#[test]
fn a_torn_tail_mentioning_boundary_and_reset_is_not_a_floor() {
    let ws = Ws::new("torn-words");
    {
        let h = open(&ws);
        ok(h.append(vec![msg("earlier history")]));
    }
    // An unacknowledged batch cut short inside a tool output that talks about resets.
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(ws.file("chat.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"));
    use std::io::Write;
    f.write_all(
        b"{\"batch\":{\"epoch\":1,\"first\":2,\"last\":2}}\n{\"seq\":2,\"kind\":\"message\",\"role\":\"tool\",\"parts\":[{\"type\":\"tool_result\",\"call_id\":\"c\",\"output\":{\"kind\":\"boundary\",\"boundary_kind\":\"reset\"",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    drop(f);
    let h = open(&ws);
    let windows = ok(h.windows());
    assert!(
        windows.iter().all(|w| w.boundary_kind != "reset"),
        "{windows:?}"
    );
    let tool = SessionHistoryTool::new(h);
    let r = call(&tool, json!({"action": "search", "query": "earlier"}));
    assert_eq!(r["items"].as_array().map(Vec::len), Some(1), "{r}");
}

// ----- defect 7: symlinks are refused ----------------------------------------------------

#[test]
fn chat_replaced_by_a_symlink_is_refused_not_followed() {
    let ws = Ws::new("symlink");
    {
        let h = open(&ws);
        ok(h.append(vec![msg("a")]));
    }
    let target = ws.0.join("elsewhere.jsonl");
    fs::rename(ws.file("chat.jsonl"), &target).unwrap_or_else(|e| panic!("{e}"));
    std::os::unix::fs::symlink(&target, ws.file("chat.jsonl")).unwrap_or_else(|e| panic!("{e}"));
    let before = fs::read(&target).unwrap_or_default();
    let message = match History::open(&ws.0, OpenOptions::default()) {
        Err(e) => e.to_string(),
        Ok(h) => match h.append(vec![msg("b")]) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("append through a symlink succeeded"),
        },
    };
    assert!(message.contains("symbolic link"), "{message}");
    assert_eq!(
        fs::read(&target).unwrap_or_default(),
        before,
        "target written"
    );
}

// ----- defect 8: external lines reusing a seq --------------------------------------------

#[test]
fn an_external_line_reusing_a_seq_is_malformed_and_reported() {
    let ws = Ws::new("reuse");
    let line = |seq: u64, text: &str| {
        format!(
            "{{\"seq\":{seq},\"id\":\"{seq}\",\"kind\":\"message\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"{text}\"}}],\"meta\":{{}}}}\n"
        )
    };
    let body = [
        line(1, "one"),
        line(2, "two"),
        line(1, "impostor"),
        line(3, "three"),
    ]
    .concat();
    fs::write(ws.file("chat.jsonl"), body).unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws);
    let report = ok(h.verify());
    assert!(!report.ok, "{report:?}");
    assert_eq!(report.seq_violations, 1, "{report:?}");
    let tool = SessionHistoryTool::new(h.clone());
    let seen = everything_visible(&tool, "impostor");
    assert!(!seen.contains("impostor"), "{seen}");
    assert_eq!(ok(h.append(vec![msg("four")])).first_seq, 4);
}

// ----- defect 9: every page makes progress ----------------------------------------------

#[test]
fn list_items_gets_past_a_row_that_cannot_fit() {
    let ws = Ws::new("huge-role");
    let huge_role = "r".repeat(20_000);
    let mut body = String::new();
    for seq in 1..=5u64 {
        let role = if seq == 2 { huge_role.as_str() } else { "user" };
        body.push_str(&format!(
            "{{\"seq\":{seq},\"kind\":\"message\",\"role\":\"{role}\",\"parts\":[{{\"type\":\"text\",\"text\":\"t{seq}\"}}]}}\n"
        ));
    }
    fs::write(ws.file("chat.jsonl"), body).unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws);
    ok(h.append(vec![msg("t6")])); // publishes a receipt, so cursors can be minted
    let tool = SessionHistoryTool::new(h);
    let mut args = json!({"action": "list_items", "limit": 1});
    let mut ids = Vec::new();
    for _ in 0..20 {
        let r = call(&tool, args.clone());
        assert_eq!(r["ok"], true, "{r}");
        for i in r["items"].as_array().into_iter().flatten() {
            ids.push(i["item_id"].as_str().unwrap_or("").to_owned());
        }
        match r["cursor"].as_str() {
            Some(c) if r["has_more"] == true => args["cursor"] = json!(c),
            _ => break,
        }
    }
    assert_eq!(ids, ["1", "3", "4", "5", "6"]);
}

// ----- defect 10: one entry per window with its full count -------------------------------

#[test]
fn a_window_of_more_than_500_rows_is_listed_once_with_its_full_count() {
    let ws = Ws::new("big-window");
    let h = open(&ws);
    let rows: Vec<NewRow> = (0..1_230).map(|i| msg(&format!("m{i}"))).collect();
    ok(h.append(rows));
    rollover(&h, "r1");
    ok(h.append(vec![msg("new")]));
    let tool = SessionHistoryTool::new(h);
    for recent_first in [false, true] {
        let mut args = json!({"action": "list_windows", "limit": 1, "recent_first": recent_first});
        let mut windows = Vec::new();
        for _ in 0..10 {
            let r = call(&tool, args.clone());
            windows.extend(r["windows"].as_array().cloned().unwrap_or_default());
            match r["cursor"].as_str() {
                Some(c) if r["has_more"] == true => args["cursor"] = json!(c),
                _ => break,
            }
        }
        let mut got: Vec<(String, u64)> = windows
            .iter()
            .map(|w| {
                (
                    w["window_id"].as_str().unwrap_or("").to_owned(),
                    w["item_count"].as_u64().unwrap_or(0),
                )
            })
            .collect();
        if recent_first {
            got.reverse();
        }
        assert_eq!(
            got,
            [("w:0".to_owned(), 1_230), ("w:1231".to_owned(), 1)],
            "recent_first={recent_first}"
        );
    }
}

// ----- defect 11: search finds verbatim text and snippets contain the match -------------

#[test]
fn search_finds_greek_sigma_and_snippets_contain_their_match() {
    let ws = Ws::new("unicode");
    let h = open(&ws);
    ok(h.append(vec![msg("ΟΔΟΣΑ"), msg("ΟΔΟΣ ΑΘΗΝΑ")]));
    let tail = format!("{}needle-here", "İ".repeat(3_000));
    ok(h.append(vec![msg(&tail)]));
    let tool = SessionHistoryTool::new(h);
    let found = |q: &str| -> Vec<String> {
        let r = call(
            &tool,
            json!({"action": "search", "query": q, "max_chars_per_item": 50}),
        );
        r["items"]
            .as_array()
            .map(|a| {
                a.iter()
                    .map(|i| i["text"].as_str().unwrap_or("").to_owned())
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(found("ΟΔΟΣ").len(), 2);
    assert_eq!(found("Σ").len(), 2);
    assert_eq!(found("οδοσ").len(), 2);
    let snippets = found("needle-here");
    assert_eq!(snippets.len(), 1);
    assert!(snippets[0].contains("needle-here"), "{snippets:?}");
    let snippets = found("NEEDLE");
    assert!(
        snippets[0].to_lowercase().contains("needle"),
        "{snippets:?}"
    );
}

// ----- a row is a line every reader parses --------------------------------------------

#[test]
fn a_line_the_reader_cannot_parse_is_neither_listed_nor_counted() {
    let ws = Ws::new("unparsable");
    fs::write(
        ws.file("chat.jsonl"),
        [
            // Invalid UTF-8, a lone surrogate, an out-of-range number and deep nesting,
            // each in a field the index does not read.
            b"{\"seq\":1,\"kind\":\"message\",\"role\":\"user\",\"parts\":[{\"t\xf4pe\":\"text\",\"text\":\"a\"}]}\n".to_vec(),
            b"{\"seq\":2,\"kind\":\"message\",\"role\":\"user\",\"x\":\"\\ud800\",\"parts\":[{\"type\":\"text\",\"text\":\"b\"}]}\n".to_vec(),
            b"{\"seq\":3,\"kind\":\"message\",\"role\":\"user\",\"x\":1e400,\"parts\":[{\"type\":\"text\",\"text\":\"c\"}]}\n".to_vec(),
            format!(
                "{{\"seq\":4,\"kind\":\"message\",\"role\":\"user\",\"x\":{}{},\"parts\":[{{\"type\":\"text\",\"text\":\"d\"}}]}}\n",
                "[".repeat(300),
                "]".repeat(300)
            )
            .into_bytes(),
            b"{\"seq\":5,\"kind\":\"message\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"fine\"}]}\n".to_vec(),
        ]
        .concat(),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws);
    let tool = SessionHistoryTool::new(h.clone());
    let items = call(&tool, json!({"action": "list_items"}));
    let listed = items["items"].as_array().map_or(0, Vec::len);
    let windows = call(&tool, json!({"action": "list_windows"}));
    let counted: u64 = windows["windows"]
        .as_array()
        .map(|w| w.iter().filter_map(|w| w["item_count"].as_u64()).sum())
        .unwrap_or(0);
    assert_eq!((listed, counted), (1, 1), "{items} {windows}");
    assert_eq!(ok(h.verify()).live.malformed, 4);
    assert_eq!(ok(h.rows()).iter().filter(|r| r.seq.is_some()).count(), 1);
}

#[test]
fn a_commit_line_whose_header_was_merged_away_is_damage() {
    let ws = Ws::new("orphan-commit");
    // A line written by another program, then a batch of ours.
    fs::write(
        ws.file("chat.jsonl"),
        b"{\"seq\":1,\"kind\":\"message\",\"role\":\"user\",\"parts\":[]}\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    ok(open(&ws).append(vec![msg("first"), msg("second")]));
    // Flip the newline before the batch's header: the header joins the line before it,
    // the batch's rows look like lines outside any batch, and its commit line has no
    // header. The batch was acknowledged; it is damaged, never a set of loose lines.
    let chat = ws.file("chat.jsonl");
    let mut bytes = fs::read(&chat).unwrap_or_default();
    let header = offset_of(&chat, b"\n{\"batch\":");
    bytes[header] ^= 0x04;
    fs::write(&chat, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws);
    let report = ok(h.verify());
    assert!(
        !report.ok
            && report
                .file()
                .expect("a file store\'s report")
                .chat
                .damage
                .is_some(),
        "{report:?}"
    );
    let err = h.append(vec![msg("third")]).err();
    assert!(matches!(err, Some(StoreError::Corrupt { .. })), "{err:?}");
    assert_eq!(fs::read(&chat).unwrap_or_default(), bytes, "bytes changed");
}

#[test]
fn a_row_nested_deeper_than_readers_parse_is_refused_and_nothing_is_written() {
    let ws = Ws::new("deep");
    let h = open(&ws);
    let row = |levels: usize| {
        let mut v = json!("leaf");
        for _ in 0..levels {
            v = json!([v]);
        }
        // The row object is level 1 and meta level 2.
        json!({"kind": "message", "role": "user", "parts": [], "meta": {"deep": v}})
    };
    let at_limit = ctxbudget::store::MAX_ROW_NESTING - 2;
    let too_deep = NewRow::from_value(1, row(at_limit + 1)).unwrap_or_else(|e| panic!("{e}"));
    let err = h.append(vec![msg("fine"), too_deep]).err();
    assert!(
        matches!(&err, Some(StoreError::InvalidRow { index: 1, .. })),
        "{err:?}"
    );
    assert!(ok(h.rows()).is_empty(), "nothing of the batch was written");
    let fits = NewRow::from_value(0, row(at_limit)).unwrap_or_else(|e| panic!("{e}"));
    let seq = ok(h.append(vec![fits])).first_seq;
    let tool = SessionHistoryTool::new(h.clone());
    let windows = call(&tool, json!({"action": "list_windows"}));
    assert_eq!(windows["windows"][0]["item_count"], 1, "{windows}");
    // The deepest row that is stored can still be quarantined.
    ok(h.quarantine_seq(seq, None));
}

#[test]
fn damage_that_destroys_the_archive_framing_is_damage_and_hides_the_archive() {
    let ws = Ws::new("archive-framing");
    cleared(&ws);
    {
        let h = open(&ws);
        rollover(&h, "r1");
        ok(h.append(vec![msg("in the new window")]));
        assert!(ok(h.rotate()).rows > 0);
    }
    // Break the first batch header's prefix and merge two lines: no batch, no commit
    // line and no row is left for a frame check to fail on.
    let archive = ws.file("chat-archive.jsonl");
    let mut bytes = fs::read(&archive).unwrap_or_default();
    bytes[4] ^= 0x01;
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or_else(|| panic!("no newline"));
    bytes[newline] ^= 0x04;
    fs::write(&archive, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws);
    let report = ok(h.verify());
    assert!(
        !report.ok
            && report
                .file()
                .expect("a file store\'s report")
                .archive
                .damage
                .is_some(),
        "{report:?}"
    );
    let err = h.append(vec![msg("more")]).err();
    assert!(matches!(err, Some(StoreError::Corrupt { .. })), "{err:?}");
    // Recovery does not bless it: the damage is still reported afterwards.
    let _ = h.recover();
    assert!(!ok(open(&ws).verify()).ok);
    assert_floor_holds(&ws, 2);
}
