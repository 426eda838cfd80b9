//! The file store against hostile histories: lines written by other programs (legacy
//! writers that ignore the lock), crashes and torn writes around them, tampered archives,
//! rows deeper or longer than readers take, and seqs at the end of their range. The
//! promises checked are those of docs/format.md: the privacy floor never drops, nothing
//! unacknowledged is ever called damage (it is a torn tail, moved to `recovered/`), what
//! is acknowledged and then lost is always damage, a seq any line shows is never handed
//! out again, and what the tool counts is what it lists (run with `--features failpoints`).
#![cfg(feature = "failpoints")]

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use ctxbudget::scan::{SessionHistoryTool, LINE_MAX, RESULT_MAX};
use ctxbudget::store::failpoint::{self, Fault};
use ctxbudget::store::{
    Durability, OpenOptions, ReadFrom, StoreError, VerifyReport, MAX_ROW_NESTING,
};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{RolloverSpec, Transcript};
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
            "ctxb-hostile-{name}-{}-{}",
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

fn ok<T>(r: Result<T, StoreError>) -> T {
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
        v.file()
            .expect("a file store\'s report")
            .chat
            .damage
            .is_none()
            && v.file()
                .expect("a file store\'s report")
                .archive
                .damage
                .is_none(),
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

// ----- a reset that does not fully parse --------------------------------------------------

/// Promise: a committed line that does not parse but looks like a reset is a privacy
/// floor (fail closed), for the context read (`CurrentWindow` rows above `floor_seq`) and
/// for `session_history` alike; rows after it stay visible.
#[test]
fn a_legacy_reset_that_does_not_fully_parse_is_a_floor_for_context_and_the_tool() {
    let _serial = serial();
    for bad in [r#""n":1e400"#, r#""x":"\ud800""#] {
        let ws = Ws::new("bad-reset");
        ok(open(&ws).append(vec![msg("SECRET before the clear")]));
        ws.external_line(&format!(
            r#"{{"seq":2,"id":"2","kind":"boundary","role":"system","window":"w:2","parts":[],"meta":{{"boundary_kind":"reset",{bad}}}}}"#
        ));
        let h = open(&ws);
        assert_eq!(
            ok(h.append(vec![msg("after the clear")])).first_seq,
            3,
            "{bad}"
        );
        let read = ok(h.read(ReadFrom::CurrentWindow));
        assert!(read.floor_seq >= 2, "[{bad}] floor_seq {}", read.floor_seq);
        let ctx = context(&h);
        assert!(
            !ctx.contains("SECRET"),
            "[{bad}] pre-clear row in context: {ctx}"
        );
        assert!(ctx.contains("after the clear"), "[{bad}] {ctx}");
        let seen = everything_visible(&h, "SECRET");
        assert!(
            !seen.contains("SECRET"),
            "[{bad}] pre-clear row returned: {seen}"
        );
        assert!(
            everything_visible(&h, "after").contains("after the clear"),
            "[{bad}]"
        );
        let tool = SessionHistoryTool::new(h.clone());
        let item = call(&tool, json!({"action": "read_item", "item_id": "1"}));
        assert_eq!(item["code"], "item_not_found", "[{bad}] {item}");
        assert!(verify(&h).floor_seq >= 2, "[{bad}]");
    }
}

// ----- lines that show a seq but are not rows ----------------------------------------------

/// Promise: a line that is not a row but shows a seq reserves it, and publishing a receipt
/// without an append (reopen, recover, rotate) never turns that seq into "acknowledged
/// rows that are missing": no false damage, and writes continue above it.
#[test]
fn a_line_showing_a_seq_then_reopen_recover_or_rotate_is_never_false_damage() {
    let _serial = serial();
    for op in ["reopen", "recover", "rotate", "clear_then_rotate"] {
        let ws = Ws::new("claimed");
        ok(open(&ws).append(vec![msg("acked")]));
        // A lone surrogate, as Python's json.dumps writes one: not a row.
        ws.external_line(&legacy_row(1000, "\\ud83d oops", "{}"));
        let h = open(&ws);
        match op {
            "recover" => {
                ok(h.recover());
            }
            "rotate" => {
                ok(h.rotate());
            }
            "clear_then_rotate" => {
                assert_eq!(ok(h.clear_soft()), 1001, "{op}");
                assert_eq!(ok(h.append(vec![msg("x")])).first_seq, 1002, "{op}");
                ok(h.rotate());
            }
            _ => {}
        }
        drop(h);
        let h = open(&ws);
        assert_no_damage(&h, op);
        let next = if op == "clear_then_rotate" {
            1003
        } else {
            1001
        };
        assert_writable_at(&h, next, op);
        assert_no_damage(&open(&ws), op);
    }
}

/// Promise: a line whose head does not parse (a repeated `seq` key, a role that is not a
/// string, `meta` that is not an object, `retracts` that is not a number) still reserves
/// the seq any JSON reader sees in it; that seq is never handed out again.
#[test]
fn lines_whose_head_does_not_parse_still_reserve_their_seq() {
    let _serial = serial();
    let text = r#""parts":[{"type":"text","text":"external"}]"#;
    for (name, line) in [
        (
            "repeated seq",
            format!(
                r#"{{"seq":5,"seq":5,"id":"5","kind":"message","role":"user",{text},"meta":{{}}}}"#
            ),
        ),
        (
            "role:5",
            format!(r#"{{"seq":5,"id":"5","kind":"message","role":5,{text},"meta":{{}}}}"#),
        ),
        (
            "meta:[]",
            format!(r#"{{"seq":5,"id":"5","kind":"message","role":"user",{text},"meta":[]}}"#),
        ),
        (
            "retracts:\"3\"",
            format!(
                r#"{{"seq":5,"id":"5","kind":"message","role":"user",{text},"meta":{{"retracts":"3"}}}}"#
            ),
        ),
        (
            "number out of range",
            format!(
                r#"{{"seq":5,"id":"5","kind":"message","role":"user",{text},"meta":{{"n":1e400}}}}"#
            ),
        ),
    ] {
        let ws = Ws::new("unparsed-head");
        ok(open(&ws).append(vec![msg("acked")]));
        ws.external_line(&line);
        let h = open(&ws);
        let seqs: Vec<u64> = (0..5)
            .map(|i| ok(h.append(vec![msg(&format!("m{i}"))])).first_seq)
            .collect();
        assert_eq!(seqs, [6, 7, 8, 9, 10], "{name}: seq 5 handed out again");
        assert_no_damage(&h, name);
    }
}

// ----- a crash around the write, and lines other programs append -------------------------

/// Promise: a crash after the pending receipt but before the write leaves nothing torn;
/// external rows appended afterwards are rows as they stand, not damage, and the store
/// stays writable above their seqs.
#[test]
fn a_crash_before_the_write_then_external_rows_is_not_damage() {
    let _serial = serial();
    let ws = Ws::new("crash-rows");
    let h = open(&ws);
    ok(h.append(vec![msg("acked")]));
    failpoint::arm("append.write", Fault::Crash);
    assert!(h.append(vec![msg("in-flight")]).is_err());
    failpoint::reset();
    drop(h);
    for seq in 2..=4 {
        ws.external_line(&legacy_row(
            seq,
            &format!("legacy external row {seq} padding padding padding"),
            "{}",
        ));
    }
    let h = open(&ws);
    assert_no_damage(&h, "external rows");
    assert!(ws.recovered().is_empty(), "nothing was torn");
    let seen = everything_visible(&h, "legacy");
    for seq in 2..=4 {
        assert!(
            seen.contains(&format!("legacy external row {seq}")),
            "{seen}"
        );
    }
    assert_writable_at(&h, 5, "external rows");
}

/// Promise: as above, with external lines that are not rows at all.
#[test]
fn a_crash_before_the_write_then_external_lines_that_are_not_rows_is_not_damage() {
    let _serial = serial();
    let ws = Ws::new("crash-nonrows");
    let h = open(&ws);
    ok(h.append(vec![msg("acked")]));
    failpoint::arm("append.write", Fault::Crash);
    assert!(h.append(vec![msg("in-flight")]).is_err());
    failpoint::reset();
    drop(h);
    for i in 0..4 {
        ws.external_line(&format!(
            r#"{{"note":"external tool log line {i}, not a row, padding padding padding padding"}}"#
        ));
    }
    let h = open(&ws);
    assert_no_damage(&h, "external lines");
    assert_eq!(verify(&h).live.malformed, 4);
    assert!(ws.recovered().is_empty(), "nothing was torn");
    // The batch was never written, so its seq was never acknowledged.
    assert_writable_at(&h, 2, "external lines");
}

/// Promise: the pending batch's end offset being covered by external bytes (one long
/// external row, with a seq below the batch's last) does not make the batch "written
/// whole": only its commit line could, and it was never written.
#[test]
fn a_crash_before_a_batch_then_a_longer_external_row_is_not_damage() {
    let _serial = serial();
    let ws = Ws::new("crash-long");
    let h = open(&ws);
    ok(h.append(vec![msg("acked")]));
    failpoint::arm("append.write", Fault::Crash);
    assert!(h.append(vec![msg("a"), msg("b"), msg("c")]).is_err());
    failpoint::reset();
    drop(h);
    ws.external_line(&legacy_row(2, &"z".repeat(2_000), "{}"));
    let h = open(&ws);
    assert_no_damage(&h, "long external row");
    // Seqs 3 and 4 were announced by the pending receipt; the next append is above them
    // or above the external row, never at or below 2.
    let first = ok(h.append(vec![msg("after")])).first_seq;
    assert!(first >= 3, "seq {first} handed out again");
    assert!(everything_visible(&h, "zzz").contains("zzzz"));
}

/// Promise: a torn append that a legacy writer then follows with lines of its own leaves
/// a batch that fails validation with committed data after it, which docs/format.md
/// calls damage: it is located (the torn line), never cut or moved, writes are refused
/// naming it, recovery leaves it, and the external rows after it still read. (The torn
/// batch was never acknowledged; only its place in the middle of the file makes it
/// damage rather than a torn tail.)
#[test]
fn a_torn_append_then_external_lines_is_located_damage_and_nothing_is_cut() {
    let _serial = serial();
    let ws = Ws::new("torn-then-ext");
    let h = open(&ws);
    ok(h.append(vec![msg("acked")]));
    let acked = ws.chat();
    failpoint::arm("append.write", Fault::Torn(30));
    assert!(h.append(vec![msg("in-flight")]).is_err());
    failpoint::reset();
    drop(h);
    assert_eq!(ws.chat().len(), acked.len() + 30, "not torn");
    // The legacy writer ends the torn line, then adds its own rows.
    ws.external_line("");
    for seq in 2..=4 {
        ws.external_line(&legacy_row(seq, "legacy external row", "{}"));
    }
    let before = ws.chat();
    let h = open(&ws);
    let v = verify(&h);
    let offset = acked.len() as u64;
    assert!(
        v.file()
            .expect("a file store\'s report")
            .chat
            .damage
            .as_ref()
            .is_some_and(|d| d.0 == offset),
        "damage not located at byte {offset}: {v:?}"
    );
    let err = h.append(vec![msg("after")]).err();
    assert!(
        matches!(err, Some(StoreError::Corrupt { offset: o, .. }) if o == offset),
        "{err:?}"
    );
    let _ = h.recover();
    assert_eq!(ws.chat(), before, "bytes cut or changed");
    assert!(ws.recovered().is_empty(), "damage moved to recovered/");
    let seen = everything_visible(&h, "legacy");
    assert!(seen.contains("legacy external row"), "{seen}");
}

/// The `chat.jsonl` the racing writer below appends to (fail points take plain functions).
static RACED_CHAT: Mutex<Option<PathBuf>> = Mutex::new(None);

/// Another program appends a line without the lock.
fn external_writer() {
    let guard = RACED_CHAT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = guard.as_ref() {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap_or_else(|e| panic!("{e}"));
        let line = format!(
            "{{\"note\":\"a log line appended without the lock {}\"}}\n",
            "p".repeat(600)
        );
        f.write_all(line.as_bytes())
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

/// Promise: an external write that lands between the store's look at the file and its
/// (torn) write does not make the torn batch acknowledged: no damage, the torn bytes go to
/// `recovered/`, and the store stays writable.
#[test]
fn an_external_write_racing_a_torn_append_is_a_torn_tail_not_damage() {
    let _serial = serial();
    let ws = Ws::new("race-torn");
    let h = open(&ws);
    ok(h.append(vec![msg("acked")]));
    let acked = ws.chat();
    *RACED_CHAT.lock().unwrap_or_else(|e| e.into_inner()) = Some(ws.file("chat.jsonl"));
    failpoint::arm("append.open", Fault::Run(external_writer));
    failpoint::arm("append.write", Fault::Torn(40));
    assert!(h
        .append(vec![msg("in-flight-1"), msg("in-flight-2")])
        .is_err());
    failpoint::reset();
    *RACED_CHAT.lock().unwrap_or_else(|e| e.into_inner()) = None;
    drop(h);
    let after = ws.chat();
    assert!(after.len() > acked.len() + 40, "the race did not happen");
    let torn = &after[after.len() - 40..];
    let h = open(&ws);
    assert_no_damage(&h, "racing write");
    assert!(
        ws.recovered().iter().any(|r| r.ends_with(torn)),
        "torn bytes not moved to recovered/"
    );
    assert!(ws.chat().starts_with(&acked), "acknowledged bytes changed");
    // The torn batch was never acknowledged: its seqs are free again.
    assert_writable_at(&h, 2, "racing write");
    assert!(everything_visible(&h, "acked").contains("acked"));
}

// ----- the archive after a rotation --------------------------------------------------------

/// What happens between a rotation and the damage to the archive.
#[derive(Clone, Copy, Debug)]
enum After {
    /// Nothing: the rotation's own receipt is the last.
    Nothing,
    /// One more append by the rotating store.
    Append,
    /// A reopen, then an append.
    ReopenAppend,
}

const AFTER: [After; 3] = [After::Nothing, After::Append, After::ReopenAppend];

/// Two archived windows, rotated, then `after`; returns the workspace, store closed.
fn rotated(after: After) -> Ws {
    let ws = Ws::new("rotated");
    let h = open(&ws);
    ok(h.append(vec![msg("archived-A")]));
    ok(h.append(vec![msg("archived-B")]));
    rollover(&h, "r1");
    ok(h.append(vec![msg("current-C")]));
    assert!(ok(h.rotate()).rows > 0);
    match after {
        After::Nothing => {}
        After::Append => {
            ok(h.append(vec![msg("current-D")]));
        }
        After::ReopenAppend => {
            drop(h);
            ok(open(&ws).append(vec![msg("current-D")]));
            return ws;
        }
    }
    ws
}

/// Cuts the archive after its first batch (framing intact).
fn cut_archive_after_first_batch(ws: &Ws) {
    let archive = ws.file("chat-archive.jsonl");
    let bytes = fs::read(&archive).unwrap_or_else(|e| panic!("{e}"));
    let text = String::from_utf8_lossy(&bytes);
    let commit = text
        .find("{\"commit\"")
        .unwrap_or_else(|| panic!("no commit line"));
    let end = commit
        + text[commit..]
            .find('\n')
            .unwrap_or_else(|| panic!("no newline"))
        + 1;
    assert!(end < bytes.len(), "the archive holds one batch only");
    fs::write(&archive, &bytes[..end]).unwrap_or_else(|e| panic!("{e}"));
}

/// Acknowledged archived rows changed or lost: verify reports archive damage, writes are
/// refused (`Corrupt`), and no row before the damage is shown (it may have held a soft
/// clear): none of `hidden`.
fn assert_archive_damage(ws: &Ws, what: &str, hidden: &[&str]) {
    let h = open(ws);
    let v = verify(&h);
    assert!(
        !v.ok
            && v.file()
                .expect("a file store\'s report")
                .archive
                .damage
                .is_some(),
        "{what}: {v:?}"
    );
    let err = h.append(vec![msg("after")]).err();
    assert!(
        matches!(err, Some(StoreError::Corrupt { .. })),
        "{what}: {err:?}"
    );
    let seen = everything_visible(&h, "archived");
    for text in hidden {
        assert!(!seen.contains(text), "{what}: {text} shown: {seen}");
    }
    drop(h);
    assert!(!verify(&open(ws)).ok, "{what}: damage forgotten");
}

/// Promise: the receipt a rotation publishes checks the archive as rotated, so a batch cut
/// away from the end of the archive (framing intact) is damage, whether the rotation's
/// receipt is the last one, an append followed it, or a reopen and an append did.
#[test]
fn the_archive_check_after_rotate_detects_a_batch_cut_from_the_archive() {
    let _serial = serial();
    for after in AFTER {
        let ws = rotated(after);
        cut_archive_after_first_batch(&ws);
        // Where the change is, is unknown: the whole archive is a possible floor.
        assert_archive_damage(&ws, &format!("batch cut, {after:?}"), &["archived-"]);
    }
}

/// Promise: the same check sees a deleted archive.
#[test]
fn the_archive_check_after_rotate_detects_a_deleted_archive() {
    let _serial = serial();
    for after in AFTER {
        let ws = rotated(after);
        fs::remove_file(ws.file("chat-archive.jsonl")).unwrap_or_else(|e| panic!("{e}"));
        assert_archive_damage(&ws, &format!("archive deleted, {after:?}"), &["archived-"]);
    }
}

/// Promise: the store that rotated sees the archive change under it without a reopen:
/// its next append is refused.
#[test]
fn the_rotating_store_sees_its_archive_cut_without_a_reopen() {
    let _serial = serial();
    let ws = Ws::new("rotated-live");
    let h = open(&ws);
    ok(h.append(vec![msg("archived-A")]));
    ok(h.append(vec![msg("archived-B")]));
    rollover(&h, "r1");
    ok(h.append(vec![msg("current-C")]));
    assert!(ok(h.rotate()).rows > 0);
    cut_archive_after_first_batch(&ws);
    let err = h.append(vec![msg("after")]).err();
    assert!(matches!(err, Some(StoreError::Corrupt { .. })), "{err:?}");
    let v = verify(&h);
    assert!(
        !v.ok
            && v.file()
                .expect("a file store\'s report")
                .archive
                .damage
                .is_some(),
        "{v:?}"
    );
}

/// Promise: one flipped byte in the archive after a rotation (a newline merging the first
/// batch header into its row) is damage, located there: the row of that batch is hidden.
#[test]
fn a_flipped_byte_in_the_archive_after_rotate_is_damage() {
    let _serial = serial();
    let ws = rotated(After::Append);
    let archive = ws.file("chat-archive.jsonl");
    let mut bytes = fs::read(&archive).unwrap_or_else(|e| panic!("{e}"));
    let newline = bytes
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or_else(|| panic!("no newline"));
    bytes[newline] = b' ';
    fs::write(&archive, &bytes).unwrap_or_else(|e| panic!("{e}"));
    assert_archive_damage(&ws, "flipped byte", &["archived-A"]);
}

/// Rewrites the receipt without `fields`, as an earlier version wrote it (same length,
/// so its stamps still match).
fn strip_receipt(ws: &Ws, fields: &[&str]) {
    let path = ws.file("receipt.json");
    let text = fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let mut receipt: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{e}"));
    let object = receipt
        .as_object_mut()
        .unwrap_or_else(|| panic!("receipt is not an object: {text}"));
    for field in fields {
        assert!(object.remove(*field).is_some(), "no {field}: {text}");
    }
    let mut old = serde_json::to_string(&receipt).unwrap_or_else(|e| panic!("{e}"));
    while old.len() < text.len() {
        old.push(' ');
    }
    fs::write(&path, old).unwrap_or_else(|e| panic!("{e}"));
}

/// Promise: receipts written before `floor` and `archive_check` existed read as `floor: 0`
/// and "not checked yet": the store opens clean and stays writable.
#[test]
fn a_receipt_without_the_newer_fields_opens_clean() {
    let _serial = serial();
    let ws = rotated(After::Append);
    let last = ok(open(&ws).read(ReadFrom::Seq(0))).last_seq;
    strip_receipt(&ws, &["archive_check", "floor"]);
    let h = open(&ws);
    let v = verify(&h);
    assert!(v.ok, "{v:?}");
    assert_writable_at(&h, last + 1, "old receipt");
}

// ----- rows deeper than readers parse in a legacy batch ------------------------------------

/// Rewrites the batch holding `marker` so that `marker` (a JSON string) becomes `with`,
/// and recomputes its commit line's CRC: a batch an older version wrote whole.
fn rewrite_batch(ws: &Ws, marker: &str, with: &str) {
    let chat = ws.file("chat.jsonl");
    let text = fs::read_to_string(&chat).unwrap_or_else(|e| panic!("{e}"));
    let at = text
        .find(marker)
        .unwrap_or_else(|| panic!("{marker} not found"));
    let header = text[..at]
        .rfind("{\"batch\"")
        .unwrap_or_else(|| panic!("no header"));
    let commit = at
        + text[at..]
            .find("{\"commit\"")
            .unwrap_or_else(|| panic!("no commit"));
    let commit_end = commit
        + text[commit..]
            .find('\n')
            .unwrap_or_else(|| panic!("no newline"));
    let rows = text[header..commit].replace(marker, with);
    let crc = crc32c::crc32c(rows.as_bytes());
    let mut line: Value =
        serde_json::from_str(&text[commit..commit_end]).unwrap_or_else(|e| panic!("{e}"));
    line["commit"]["crc"] = json!(crc);
    line["commit"]["len"] = json!(rows.len());
    let out = format!("{}{rows}{line}{}", &text[..header], &text[commit_end..]);
    fs::write(&chat, out).unwrap_or_else(|e| panic!("{e}"));
}

/// Promise: a batch an earlier version wrote whole (valid CRC) holding a row nested deeper
/// than readers parse (127) is not damage: the batch keeps its place, the row is a line
/// that is not a row (skipped, counted as malformed), and writes continue. Checked with the
/// batch last in the file and with batches after it.
#[test]
fn a_legacy_batch_holding_a_row_deeper_than_readers_parse_is_not_damage() {
    let _serial = serial();
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    for last in [true, false] {
        let ws = Ws::new("deep-legacy");
        let h = open(&ws);
        ok(h.append(vec![msg("acked")]));
        let marker = "X".repeat(398);
        ok(h.append(vec![msg(&marker), msg("same batch")]));
        if !last {
            ok(h.append(vec![msg("later")]));
        }
        drop(h);
        rewrite_batch(&ws, &format!("\"{marker}\""), &deep);
        let h = open(&ws);
        let v = verify(&h);
        assert!(
            v.file()
                .expect("a file store\'s report")
                .chat
                .damage
                .is_none(),
            "last={last}: false damage: {v:?}"
        );
        assert!(
            ws.recovered().is_empty(),
            "last={last}: a whole batch was moved"
        );
        let rows = ok(h.rows());
        assert!(
            rows.iter().all(|r| r.seq != Some(2)),
            "last={last}: the deep line read as a row"
        );
        assert!(
            rows.iter()
                .any(|r| r.seq.is_none() && r.raw.windows(3).any(|w| w == b"[[[")),
            "last={last}: the deep line was not kept"
        );
        let seen = everything_visible(&h, "same batch");
        assert!(
            seen.contains("same batch") && seen.contains("acked"),
            "{seen}"
        );
        if !last {
            assert!(seen.contains("later"), "{seen}");
        }
        let next = if last { 4 } else { 5 };
        assert_writable_at(&h, next, &format!("last={last}"));
        assert!(verify(&h).ok, "last={last}: {:?}", verify(&h));
    }
}

/// Promise: a soft clear whose row an earlier version wrote nested deeper than readers
/// parse, in a whole batch, is still a floor (a line that looks like a reset counts),
/// even with a receipt that carries no floor.
#[test]
fn a_reset_row_deeper_than_readers_parse_in_a_legacy_batch_is_still_a_floor() {
    let _serial = serial();
    let ws = Ws::new("deep-reset");
    let h = open(&ws);
    ok(h.append(vec![msg("SECRET")]));
    let clear = ok(h.clear_soft());
    ok(h.append(vec![msg("after the clear")]));
    drop(h);
    let deep = format!("\"deep\":{}{},", "[".repeat(200), "]".repeat(200));
    let reset = "\"boundary_kind\":\"reset\"";
    rewrite_batch(&ws, reset, &format!("{deep}{reset}"));
    strip_receipt(&ws, &["floor"]);
    let h = open(&ws);
    assert!(
        verify(&h)
            .file()
            .expect("a file store\'s report")
            .chat
            .damage
            .is_none(),
        "{:?}",
        verify(&h)
    );
    assert!(ok(h.read(ReadFrom::CurrentWindow)).floor_seq >= clear);
    let ctx = context(&h);
    assert!(
        !ctx.contains("SECRET") && ctx.contains("after the clear"),
        "{ctx}"
    );
    let seen = everything_visible(&h, "SECRET");
    assert!(!seen.contains("SECRET"), "pre-clear row returned: {seen}");
}

/// Promise (`VerifyReport::malformed_lines`: lines that are not rows, kept and skipped by
/// readers): a line inside a whole legacy batch that is not a row is counted too.
#[test]
fn verify_counts_a_line_that_is_not_a_row_inside_a_legacy_batch() {
    let _serial = serial();
    let ws = Ws::new("deep-count");
    let h = open(&ws);
    let marker = "X".repeat(398);
    ok(h.append(vec![msg(&marker), msg("same batch")]));
    drop(h);
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    rewrite_batch(&ws, &format!("\"{marker}\""), &deep);
    let v = verify(&open(&ws));
    assert_eq!(v.live.malformed, 1, "{v:?}");
}

/// Promise (`StoreError::Corrupt::line`, `FileReport::damage`: the 1-based line of the
/// damage): a framed batch present twice is damage named by its real line.
#[test]
fn a_batch_present_twice_is_damage_named_by_its_line() {
    let _serial = serial();
    let ws = Ws::new("twice");
    let h = open(&ws);
    ok(h.append(vec![msg("first")]));
    let first = ws.chat();
    ok(h.append(vec![msg("second")]));
    drop(h);
    let mut bytes = ws.chat();
    bytes.extend_from_slice(&first);
    fs::write(ws.file("chat.jsonl"), &bytes).unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws);
    let err = h.append(vec![msg("third")]).err();
    let Some(StoreError::Corrupt { offset, line, .. }) = err else {
        panic!("expected damage, got {err:?}");
    };
    let at = usize::try_from(offset).unwrap_or_else(|e| panic!("{e}"));
    let expected = bytes[..at].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
    assert_eq!(line, expected, "damage at byte {offset}");
}

// ----- the end of the seq range ------------------------------------------------------------

/// Promise: when a line shows seq `u64::MAX` (a row, or a line that is not a row) the next
/// append is a typed error naming the cause, never a panic or a wrapped seq, and nothing
/// is written.
#[test]
fn seq_u64_max_shown_by_a_line_makes_the_next_append_a_typed_error() {
    let _serial = serial();
    for (name, meta) in [("row", "{}"), ("not a row", r#"{"n":1e400}"#)] {
        let ws = Ws::new("seq-max");
        ok(open(&ws).append(vec![msg("acked")]));
        ws.external_line(&legacy_row(u64::MAX, "big", meta));
        let h = open(&ws);
        let before = ws.chat();
        let err = h.append(vec![msg("after")]).err();
        match &err {
            Some(StoreError::InvalidArgument(m)) => {
                assert!(m.contains(&u64::MAX.to_string()), "{name}: {m}")
            }
            other => panic!("{name}: expected a typed error, got {other:?}"),
        }
        assert_eq!(ws.chat(), before, "{name}: bytes written");
        assert_no_damage(&h, name);
    }
}

/// Promise: a batch that would need seqs past `u64::MAX` is refused whole, and the last
/// seq is still handed out to a batch that fits.
#[test]
fn a_batch_past_the_last_seq_is_refused_whole_and_the_last_seq_still_fits() {
    let _serial = serial();
    let ws = Ws::new("seq-max-1");
    ok(open(&ws).append(vec![msg("acked")]));
    ws.external_line(&legacy_row(u64::MAX - 1, "almost", "{}"));
    let h = open(&ws);
    let before = ws.chat();
    let err = h.append(vec![msg("one"), msg("two")]).err();
    assert!(
        matches!(err, Some(StoreError::InvalidArgument(_))),
        "{err:?}"
    );
    assert_eq!(ws.chat(), before, "bytes written");
    assert_eq!(ok(h.append(vec![msg("last")])).first_seq, u64::MAX);
    let err = h.append(vec![msg("past")]).err();
    assert!(
        matches!(err, Some(StoreError::InvalidArgument(_))),
        "{err:?}"
    );
    assert_no_damage(&h, "seq max - 1");
}

// ----- what the tool counts and lists ------------------------------------------------------

/// Promise: `list_windows`' `item_count` counts exactly what `list_items` lists, also
/// when rows are at or over the tool's line limit (which the store may accept).
#[test]
fn item_count_equals_what_list_items_lists_with_rows_over_the_line_limit() {
    let _serial = serial();
    let ws = Ws::new("oversized");
    let h = open_with(&ws, Some(4 << 20));
    ok(h.append(vec![msg("small")]));
    let limit = usize::try_from(LINE_MAX).unwrap_or_else(|e| panic!("{e}"));
    for size in [limit - 200, limit + 200, 1_200_000] {
        ok(h.append(vec![msg(&"y".repeat(size))]));
    }
    ok(h.append(vec![msg("tail")]));
    let tool = SessionHistoryTool::new(h.clone());
    let windows = call(&tool, json!({"action": "list_windows"}));
    let counted: u64 = windows["windows"]
        .as_array()
        .map(|w| w.iter().filter_map(|w| w["item_count"].as_u64()).sum())
        .unwrap_or(0);
    let mut listed = 0u64;
    let mut args = json!({"action": "list_items", "limit": 25});
    for _ in 0..100 {
        let r = call(&tool, args.clone());
        assert_eq!(r["ok"], true, "{r}");
        listed += r["items"].as_array().map_or(0, |a| a.len() as u64);
        match r["cursor"].as_str() {
            Some(c) if r["has_more"] == true => args["cursor"] = json!(c),
            _ => break,
        }
    }
    assert_eq!(counted, listed, "{windows}");
    assert!((2..5).contains(&listed), "listed {listed}");
}

// ----- quarantine of the deepest row -------------------------------------------------------

/// Promise: any row the store accepts can be quarantined: the deepest storable row
/// (`MAX_ROW_NESTING`) is kept by a quarantine row that itself reads back.
#[test]
fn the_deepest_storable_row_can_be_quarantined() {
    let _serial = serial();
    let ws = Ws::new("deep-quarantine");
    let h = open(&ws);
    // The row object, `parts`, and the part are three levels; `x` holds the rest.
    let row = |levels: usize| {
        let mut v = json!(1);
        for _ in 0..levels - 3 {
            v = json!([v]);
        }
        json!({"kind": "message", "role": "user", "meta": {},
               "parts": [{"type": "text", "text": "deep", "x": v}]})
    };
    let too_deep =
        NewRow::from_value(0, row(MAX_ROW_NESTING + 1)).unwrap_or_else(|e| panic!("{e}"));
    let err = h.append(vec![too_deep]).err();
    assert!(
        matches!(err, Some(StoreError::InvalidRow { .. })),
        "{err:?}"
    );
    let deepest = NewRow::from_value(0, row(MAX_ROW_NESTING)).unwrap_or_else(|e| panic!("{e}"));
    let seq = ok(h.append(vec![deepest])).first_seq;
    let quarantined = ok(h.quarantine_seq(seq, None));
    assert!(quarantined > seq);
    let rows = ok(h.rows());
    assert!(
        rows.iter().any(|r| r.seq == Some(quarantined)),
        "the quarantine row does not read back"
    );
    let v = verify(&h);
    assert!(v.ok && v.live.malformed == 0, "{v:?}");
}

// ----- torn soft clears --------------------------------------------------------------------

/// After a torn soft clear: the pre-clear row is neither context nor shown by the tool,
/// and the row appended afterwards is both.
fn assert_torn_clear_holds(h: &Arc<History>, what: &str) {
    let after = ok(h.append(vec![msg("visible after")])).first_seq;
    let read = ok(h.read(ReadFrom::CurrentWindow));
    assert!(
        read.floor_seq >= 2 && read.floor_seq < after,
        "{what}: floor {}",
        read.floor_seq
    );
    let ctx = context(h);
    assert!(
        !ctx.contains("SECRET"),
        "{what}: pre-clear row in context: {ctx}"
    );
    assert!(ctx.contains("visible after"), "{what}: {ctx}");
    let seen = everything_visible(h, "SECRET");
    assert!(
        !seen.contains("SECRET"),
        "{what}: pre-clear row returned: {seen}"
    );
    let seen = everything_visible(h, "visible");
    assert!(
        seen.contains("visible after"),
        "{what}: later row hidden: {seen}"
    );
}

/// Promise: a soft clear whose batch is torn holds anyway (the caller got an error; the
/// clear it asked for holds), after a reopen, and later rows stay visible.
#[test]
fn a_torn_soft_clear_holds_the_floor_after_a_reopen() {
    let _serial = serial();
    for torn in [10, 40, 60] {
        let ws = Ws::new("torn-clear");
        let h = open(&ws);
        ok(h.append(vec![msg("SECRET")]));
        failpoint::arm("append.write", Fault::Torn(torn));
        assert!(h.clear_soft().is_err());
        failpoint::reset();
        drop(h);
        let h = open(&ws);
        assert_torn_clear_holds(&h, &format!("torn at {torn}, reopened"));
        assert!(verify(&h).ok, "torn at {torn}: {:?}", verify(&h));
    }
}

/// Promise: the same in the process whose clear was torn, without a reopen.
#[test]
fn a_torn_soft_clear_holds_the_floor_in_process() {
    let _serial = serial();
    for torn in [10, 40, 60] {
        let ws = Ws::new("torn-clear-live");
        let h = open(&ws);
        ok(h.append(vec![msg("SECRET")]));
        failpoint::arm("append.write", Fault::Torn(torn));
        assert!(h.clear_soft().is_err());
        failpoint::reset();
        assert_torn_clear_holds(&h, &format!("torn at {torn}, same process"));
    }
}

/// Promise: a torn clear whose prefix holds the whole reset row but not the commit line
/// holds the floor, the recovered store is clean, and later rows are visible.
#[test]
fn a_torn_soft_clear_holding_its_whole_reset_row_holds_the_floor() {
    let _serial = serial();
    // The length of a clear's batch up to its commit line, from a twin store.
    let twin = Ws::new("torn-clear-twin");
    let t = open(&twin);
    ok(t.append(vec![msg("SECRET")]));
    let size = twin.chat().len();
    ok(t.clear_soft());
    let full = String::from_utf8_lossy(&twin.chat()).into_owned();
    let upto = full[size..]
        .find("{\"commit\"")
        .unwrap_or_else(|| panic!("no commit line"));
    drop(t);

    let ws = Ws::new("torn-clear-whole-row");
    let h = open(&ws);
    ok(h.append(vec![msg("SECRET")]));
    failpoint::arm("append.write", Fault::Torn(upto));
    assert!(h.clear_soft().is_err());
    failpoint::reset();
    drop(h);
    let h = open(&ws);
    assert_torn_clear_holds(&h, "whole reset row, no commit line");
    assert!(verify(&h).ok, "{:?}", verify(&h));
}

/// Log lines of another program that use keys a commit line also uses.
fn log_lines_with_commit_keys(ws: &Ws, n: usize) {
    for i in 0..n {
        ws.external_line(&format!(
            r#"{{"event":"upload","file":"f{i}","len":{},"crc":{}}}"#,
            1000 + i,
            77_000 + i
        ));
    }
}

/// Promise: after a crash before the write, external lines that are not rows but carry
/// keys a commit line also has (`"len"`, `"crc"`) where the pending batch would have
/// ended do not make that batch "written whole": no damage, and writes continue.
#[test]
fn a_crash_before_the_write_then_log_lines_with_commit_keys_is_not_damage() {
    let _serial = serial();
    let ws = Ws::new("crash-commit-keys");
    let h = open(&ws);
    ok(h.append(vec![msg("acked")]));
    failpoint::arm("append.write", Fault::Crash);
    assert!(h.append(vec![msg("a"), msg("b"), msg("c")]).is_err());
    failpoint::reset();
    drop(h);
    log_lines_with_commit_keys(&ws, 20);
    let h = open(&ws);
    assert_no_damage(&h, "log lines with commit keys");
    assert!(ok(h.append(vec![msg("after")])).first_seq >= 2);
}

/// The racing writer below appends log lines that carry commit-line keys.
fn external_logger() {
    let guard = RACED_CHAT.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(path) = guard.as_ref() {
        let mut f = fs::OpenOptions::new()
            .append(true)
            .open(path)
            .unwrap_or_else(|e| panic!("{e}"));
        for i in 0..20 {
            f.write_all(format!("{{\"event\":\"upload\",\"len\":{i},\"crc\":{i}}}\n").as_bytes())
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

/// Promise: as in the race above, with the racing lines carrying commit-line keys.
#[test]
fn an_external_write_with_commit_keys_racing_a_torn_append_is_not_damage() {
    let _serial = serial();
    let ws = Ws::new("race-commit-keys");
    let h = open(&ws);
    ok(h.append(vec![msg("acked")]));
    *RACED_CHAT.lock().unwrap_or_else(|e| e.into_inner()) = Some(ws.file("chat.jsonl"));
    failpoint::arm("append.open", Fault::Run(external_logger));
    failpoint::arm("append.write", Fault::Torn(40));
    assert!(h
        .append(vec![msg("in-flight-1"), msg("in-flight-2")])
        .is_err());
    failpoint::reset();
    *RACED_CHAT.lock().unwrap_or_else(|e| e.into_inner()) = None;
    drop(h);
    let h = open(&ws);
    assert_no_damage(&h, "racing log lines with commit keys");
    assert!(ok(h.append(vec![msg("after")])).first_seq >= 2);
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
    assert_eq!(v.live.rows, 2, "{v:?}");
    assert_eq!(v.live.malformed, 1, "{v:?}");
    assert!(
        v.file().expect("a file store\'s report").chat.legacy_rows <= v.live.rows - 2,
        "legacy_rows {} counts a line that is not a row: {v:?}",
        v.file().expect("a file store\'s report").chat.legacy_rows
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
        if v.file()
            .expect("a file store\'s report")
            .chat
            .damage
            .is_some()
            || appended.is_err()
            || !listed.contains("legacy text")
        {
            failures.push(format!(
                "[{first}] damage {:?}; append {:?}; legacy rows listed: {}",
                v.file().expect("a file store\'s report").chat.damage,
                appended.map(|a| a.first_seq).map_err(|e| e.to_string()),
                listed.contains("legacy text")
            ));
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
