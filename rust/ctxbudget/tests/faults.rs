//! Fault injection at every write step of the store (run with `--features failpoints`).
//!
//! After each injected failure or simulated crash, a fresh `History::open` (a restart)
//! must show exactly the acknowledged rows, plus the in-flight batch only where the
//! failure struck after that batch was durable — and always whole.
#![cfg(feature = "failpoints")]

use std::fs;
use std::path::PathBuf;
use std::sync::Mutex;

use ctxbudget::store::failpoint::{self, Fault};
use ctxbudget::store::{OpenOptions, StoreError};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{RolloverSpec, Transcript};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

/// Fail points are process-global: one test at a time.
static SERIAL: Mutex<()> = Mutex::new(());

struct Ws(PathBuf);
impl Drop for Ws {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn ws(name: &str) -> Ws {
    let dir = std::env::temp_dir().join(format!("ctxb-fault-{name}-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    Ws(dir)
}

fn open(ws: &Ws) -> History {
    History::open(&ws.0, OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"))
}

fn texts(h: &History) -> Vec<String> {
    h.rows()
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .filter_map(|r| {
            let v: serde_json::Value = serde_json::from_slice(&r.raw).ok()?;
            v["parts"][0]["text"].as_str().map(str::to_owned)
        })
        .collect()
}

fn batch() -> Vec<NewRow> {
    vec![
        NewRow::text("message", "user", "in-flight-1"),
        NewRow::text("message", "assistant", "in-flight-2"),
    ]
}

/// Arms `point`, appends a batch, restarts, and returns (append ok?, visible texts).
fn append_with(name: &str, point: &str, action: Fault) -> (bool, Vec<String>) {
    let ws = ws(name);
    let h = open(&ws);
    h.append(vec![NewRow::text("message", "user", "acked")])
        .unwrap_or_else(|e| panic!("{e}"));
    failpoint::arm(point, action);
    let ok = h.append(batch()).is_ok();
    failpoint::reset();
    drop(h);
    let reopened = open(&ws);
    let seen = texts(&reopened);
    // The store is writable again and seqs continue after whatever is visible.
    let next = reopened
        .append(vec![NewRow::text("message", "user", "after")])
        .unwrap_or_else(|e| panic!("{point}: {e}"));
    assert_eq!(next.first_seq as usize, seen.len() + 1, "{point}");
    assert!(reopened.verify().map(|r| r.ok).unwrap_or(false), "{point}");
    (ok, seen)
}

const ACKED: &[&str] = &["acked"];
const WITH_BATCH: &[&str] = &["acked", "in-flight-1", "in-flight-2"];

#[test]
fn failures_before_the_data_is_durable_lose_only_the_unacknowledged_batch() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases: Vec<(&str, Fault)> = vec![
        ("receipt.pending.write", Fault::Error(ENOSPC)),
        ("receipt.pending.write", Fault::Crash),
        ("append.open", Fault::Error(EIO)),
        ("append.write", Fault::Error(ENOSPC)),
        ("append.write", Fault::Crash),
        ("append.write", Fault::Torn(1)),
        ("append.write", Fault::Torn(60)),
        ("append.write", Fault::Torn(200)),
        ("append.fsync", Fault::Error(EIO)),
    ];
    for (i, (point, action)) in cases.into_iter().enumerate() {
        let (ok, seen) = append_with(&format!("before-{i}"), point, action.clone());
        assert!(!ok, "{point} {action:?} must fail the append");
        // Bytes written before a failed fsync may or may not be on disk; either way
        // the batch is whole or absent.
        if point == "append.fsync" {
            assert!(seen == ACKED || seen == WITH_BATCH, "{point}: {seen:?}");
        } else {
            assert_eq!(seen, ACKED, "{point} {action:?}");
        }
    }
}

#[test]
fn torn_writes_at_every_length_are_cut_on_restart() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for n in (0..400).step_by(7) {
        let (ok, seen) = append_with("torn-all", "append.write", Fault::Torn(n));
        assert!(!ok);
        assert_eq!(seen, ACKED, "torn at {n}");
    }
}

#[test]
fn failures_after_the_data_is_durable_keep_the_whole_batch() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let cases: Vec<(&str, Fault, bool)> = vec![
        ("append.after_fsync", Fault::Crash, false),
        ("receipt.stable.write", Fault::Error(ENOSPC), true),
        ("receipt.stable.write", Fault::Crash, true),
    ];
    for (i, (point, action, append_ok)) in cases.into_iter().enumerate() {
        let (ok, seen) = append_with(&format!("after-{i}"), point, action);
        assert_eq!(
            ok, append_ok,
            "{point}: the append is durable; only finalizing failed"
        );
        assert_eq!(seen, WITH_BATCH, "{point}");
    }
}

fn rotated_ws(name: &str) -> (Ws, Vec<String>) {
    let ws = ws(name);
    let h = open(&ws);
    h.append(vec![NewRow::text("message", "user", "old-1")])
        .unwrap_or_else(|e| panic!("{e}"));
    h.rollover(RolloverSpec {
        rollover_id: "r1".into(),
        reason: "usable_limit".into(),
        lead_in: "lead".into(),
        ..RolloverSpec::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    h.append(vec![NewRow::text("message", "user", "new-1")])
        .unwrap_or_else(|e| panic!("{e}"));
    let before = texts(&h);
    (ws, before)
}

#[test]
fn rotation_interrupted_anywhere_loses_and_duplicates_nothing() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let points = [
        ("receipt.pending.fsync", Fault::Error(EIO)),
        ("rotate.archive", Fault::Error(ENOSPC)),
        ("rotate.chat.write", Fault::Crash),
        ("rotate.chat.fsync", Fault::Error(EIO)),
        ("rotate.chat.rename", Fault::Crash),
        ("dir.fsync", Fault::Crash),
        ("receipt.stable.write", Fault::Crash),
    ];
    for (i, (point, action)) in points.into_iter().enumerate() {
        let (ws, before) = rotated_ws(&format!("rotate-{i}"));
        let h = open(&ws);
        failpoint::arm(point, action);
        let _ = h.rotate();
        failpoint::reset();
        drop(h);
        let reopened = open(&ws);
        assert_eq!(texts(&reopened), before, "{point}");
        assert!(reopened.verify().map(|r| r.ok).unwrap_or(false), "{point}");
        // Rotation can be finished afterwards and still changes nothing visible.
        reopened.rotate().unwrap_or_else(|e| panic!("{point}: {e}"));
        assert_eq!(texts(&reopened), before, "{point} after rotate");
    }
}

#[test]
fn recovery_interrupted_anywhere_never_loses_the_torn_bytes() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (i, point) in ["recover.copy", "recover.truncate", "receipt.pending.write"]
        .into_iter()
        .enumerate()
    {
        let ws = ws(&format!("recover-{i}"));
        let h = open(&ws);
        h.append(vec![NewRow::text("message", "user", "acked")])
            .unwrap_or_else(|e| panic!("{e}"));
        let chat = ws.0.join("history/chat.jsonl");
        let mut bytes = fs::read(&chat).unwrap_or_default();
        bytes.extend_from_slice(
            b"{\"batch\":{\"epoch\":1,\"first\":2,\"last\":2}}\n{\"seq\":2,\"kind\":\"mess",
        );
        fs::write(&chat, &bytes).unwrap_or_else(|e| panic!("{e}"));
        drop(h);
        failpoint::arm(point, Fault::Crash);
        let first = History::open(&ws.0, OpenOptions::default());
        failpoint::reset();
        assert!(first.is_err(), "{point}: recovery was interrupted");
        let h = open(&ws);
        assert_eq!(texts(&h), ACKED, "{point}");
        let moved: Vec<Vec<u8>> = fs::read_dir(ws.0.join("history/recovered"))
            .map(|d| {
                d.filter_map(|e| e.ok())
                    .filter_map(|e| fs::read(e.path()).ok())
                    .collect()
            })
            .unwrap_or_default();
        assert!(
            moved.iter().any(|m| m.ends_with(b"\"kind\":\"mess")),
            "{point}: tail kept"
        );
    }
}

/// The workspace the `Run` action below acts on (fail points take plain functions).
static REPLACED_WS: Mutex<Option<PathBuf>> = Mutex::new(None);

/// A program that ignores the lock replaces `chat.jsonl` by rename.
fn replace_chat() {
    let guard = REPLACED_WS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(dir) = guard.as_ref() {
        let history = dir.join("history");
        let other = history.join("chat.jsonl.other");
        fs::write(&other, b"").unwrap_or_else(|e| panic!("{e}"));
        fs::rename(&other, history.join("chat.jsonl")).unwrap_or_else(|e| panic!("{e}"));
    }
}

#[test]
fn a_batch_written_to_a_file_replaced_meanwhile_is_not_acknowledged() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ws = ws("replaced");
    let h = open(&ws);
    h.append(vec![NewRow::text("message", "user", "acked")])
        .unwrap_or_else(|e| panic!("{e}"));
    *REPLACED_WS.lock().unwrap_or_else(|e| e.into_inner()) = Some(ws.0.clone());
    failpoint::arm("append.write", Fault::Run(replace_chat));
    let result = h.append(batch());
    failpoint::reset();
    let message = result.err().map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("deleted or replaced") && message.contains("append again"),
        "the append must fail, saying why and what to do: {message:?}"
    );
    // The replacement also lost the acknowledged row: that is damage, not a fresh
    // start. Writes are refused, naming the file, and seq 1 is never handed out again.
    let next = h.append(vec![NewRow::text("message", "user", "after")]);
    assert!(
        matches!(&next, Err(StoreError::Corrupt { path, .. }) if path.ends_with("chat.jsonl")),
        "{next:?}"
    );
    drop(h);
    let report = open(&ws).verify().unwrap_or_else(|e| panic!("{e}"));
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
}

#[test]
fn a_rotation_cut_short_in_the_archive_rolls_back_on_open_and_verify_sees_no_duplicates() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (probe, _) = rotated_ws("rotate-torn-probe");
    let moved = open(&probe).rotate().map(|r| r.bytes).unwrap_or(0) as usize;
    drop(probe);
    assert!(moved > 0);
    for n in (0..=moved).step_by(7).chain([moved]) {
        let (ws, before) = rotated_ws(&format!("rotate-torn-{n}"));
        let h = open(&ws);
        failpoint::arm("rotate.archive.write", Fault::Torn(n));
        assert!(h.rotate().is_err(), "cut at {n}");
        failpoint::reset();
        drop(h);
        let reopened = open(&ws);
        assert_eq!(texts(&reopened), before, "cut at {n}");
        let report = reopened.verify().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            report.ok && report.seq_violations == 0,
            "cut at {n}: {report:?}"
        );
        let seqs: Vec<u64> = reopened
            .rows()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .filter_map(|r| r.seq)
            .collect();
        assert!(seqs.windows(2).all(|w| w[0] < w[1]), "cut at {n}: {seqs:?}");
    }
}

#[test]
fn io_errors_name_the_operation_the_file_and_what_to_do() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ws = ws("io-messages");
    let h = open(&ws);
    for (code, advice) in [
        (ENOSPC, "free space"),
        (24, "open-file limit"),
        (13, "permission"),
        (EIO, "verify"),
    ] {
        failpoint::arm("append.open", Fault::Error(code));
        let message = h
            .append(batch())
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        failpoint::reset();
        assert!(
            message.contains("could not open") && message.contains("chat.jsonl"),
            "{message}"
        );
        assert!(message.contains(advice), "{code}: {message}");
    }
}

/// Quarantine is one batch: a crash anywhere in its write — between the retraction and
/// the quarantine row included — leaves both rows or neither, never the user's message
/// hidden without its quarantine record.
#[test]
fn a_crash_inside_a_quarantine_leaves_both_rows_or_neither() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for n in (1..600).step_by(11) {
        let ws = ws("quarantine-torn");
        let h = open(&ws);
        let seq = h
            .append(vec![NewRow::text("message", "user", "too big")])
            .unwrap_or_else(|e| panic!("{e}"))
            .first_seq;
        failpoint::arm("append.write", Fault::Torn(n));
        let result = h.quarantine_seq(seq, Some(seq));
        failpoint::reset();
        drop(h);
        let reopened = open(&ws);
        let kinds: Vec<String> = reopened
            .rows()
            .unwrap_or_else(|e| panic!("{e}"))
            .iter()
            .filter_map(|r| {
                let v: serde_json::Value = serde_json::from_slice(&r.raw).ok()?;
                v["kind"].as_str().map(str::to_owned)
            })
            .collect();
        // A cut past the batch's end wrote it whole before the "crash": kept whole.
        let both = kinds == ["message", "retraction", "rejected"];
        assert!(both || kinds == ["message"], "cut at {n}: {kinds:?}");
        assert!(result.is_err() || both, "cut at {n}");
        let windows = reopened.windows().unwrap_or_else(|e| panic!("{e}"));
        let visible: u64 = windows.iter().map(|w| w.item_count).sum();
        assert_eq!(
            visible,
            u64::from(!both),
            "cut at {n}: the message is hidden only with its record"
        );
    }
}

/// Everything `session_history` lists, as one string.
fn listed(h: History) -> String {
    let tool = ctxbudget::scan::SessionHistoryTool::new(std::sync::Arc::new(h));
    let mut seen = String::new();
    for args in [
        r#"{"action":"list_items","limit":25}"#,
        r#"{"action":"search","query":"hunter2"}"#,
        r#"{"action":"list_windows"}"#,
    ] {
        seen.push_str(&tool.call_json(args));
    }
    seen
}

#[test]
fn a_soft_clear_acknowledged_before_its_stable_receipt_keeps_the_floor_through_damage() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for action in [Fault::Crash, Fault::Error(ENOSPC)] {
        for external_line_after in [false, true] {
            let case = format!("{action:?}, external line after: {external_line_after}");
            let ws = ws("clear-unfinalized");
            let h = open(&ws);
            h.append(vec![NewRow::text(
                "message",
                "user",
                "my password is hunter2",
            )])
            .unwrap_or_else(|e| panic!("{e}"));
            failpoint::arm("receipt.stable.write", action.clone());
            let floor = h.clear_soft();
            failpoint::reset();
            // The reset row is durable, so the clear is acknowledged; only its stable
            // receipt is missing. Then the reset row's kind is damaged, so nothing in
            // the rows says a floor was there.
            let floor = floor.unwrap_or_else(|e| panic!("{case}: {e}"));
            drop(h);
            let chat = ws.0.join("history").join("chat.jsonl");
            let mut bytes = fs::read(&chat).unwrap_or_default();
            let needle = b"\"kind\":\"boundary\"";
            let kind = bytes
                .windows(needle.len())
                .position(|w| w == needle)
                .unwrap_or_else(|| panic!("no boundary row"));
            bytes[kind + 9] ^= 0x01;
            if external_line_after {
                bytes.extend_from_slice(
                    b"{\"seq\":2,\"kind\":\"message\",\"role\":\"user\",\"parts\":[]}\n",
                );
            }
            fs::write(&chat, &bytes).unwrap_or_else(|e| panic!("{e}"));
            let h = open(&ws);
            assert!(
                h.floor_seq().unwrap_or(0) >= floor,
                "{case}: the floor dropped below the acknowledged clear at seq {floor}"
            );
            let read = h
                .read(ctxbudget::store::ReadFrom::CurrentWindow)
                .unwrap_or_else(|e| panic!("{e}"));
            let context: Vec<String> = read
                .rows
                .iter()
                .filter(|r| r.seq.is_some_and(|s| s > read.floor_seq))
                .map(|r| String::from_utf8_lossy(&r.raw).into_owned())
                .collect();
            assert!(
                !context.iter().any(|r| r.contains("hunter2")),
                "{case}: {context:?}"
            );
            let seen = listed(h);
            assert!(!seen.contains("hunter2"), "{case}: {seen}");
        }
    }
}

#[test]
fn a_torn_soft_clear_takes_effect_and_later_rows_stay_visible() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for cut in [1usize, 40, 120] {
        let ws = ws("clear-torn");
        let h = open(&ws);
        h.append(vec![NewRow::text(
            "message",
            "user",
            "my password is hunter2",
        )])
        .unwrap_or_else(|e| panic!("{e}"));
        failpoint::arm("append.write", Fault::Torn(cut));
        assert!(h.clear_soft().is_err(), "torn at {cut}");
        failpoint::reset();
        drop(h);
        let h = open(&ws);
        // Fail closed: the clear was announced, so its floor holds although its row is
        // gone; a row appended afterwards gets a seq above that floor and is visible.
        let after = h
            .append(vec![NewRow::text("message", "user", "after the clear")])
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            after.first_seq > h.floor_seq().unwrap_or(0),
            "torn at {cut}"
        );
        assert!(h.verify().map(|r| r.ok).unwrap_or(false), "torn at {cut}");
        let seen = listed(h);
        assert!(!seen.contains("hunter2"), "torn at {cut}: {seen}");
        assert!(seen.contains("after the clear"), "torn at {cut}: {seen}");
    }
}

#[test]
fn a_batch_acknowledged_before_its_stable_receipt_and_then_damaged_is_kept_as_damage() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let ws = ws("acked-unfinalized-flip");
    let h = open(&ws);
    h.append(vec![NewRow::text("message", "user", "acked")])
        .unwrap_or_else(|e| panic!("{e}"));
    failpoint::arm("receipt.stable.write", Fault::Error(ENOSPC));
    let acked = h.append(batch());
    failpoint::reset();
    assert!(acked.is_ok(), "durable, so acknowledged: {acked:?}");
    drop(h);
    // The last batch, written whole, is damaged: it is not a torn write to move away.
    let chat = ws.0.join("history").join("chat.jsonl");
    let mut bytes = fs::read(&chat).unwrap_or_default();
    let at = bytes
        .windows(11)
        .rposition(|w| w == b"in-flight-2")
        .unwrap_or_else(|| panic!("no batch"));
    bytes[at] ^= 0x01;
    fs::write(&chat, &bytes).unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws);
    let report = h.verify().unwrap_or_else(|e| panic!("{e}"));
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
    let err = h
        .append(vec![NewRow::text("message", "user", "after")])
        .err();
    assert!(matches!(err, Some(StoreError::Corrupt { .. })), "{err:?}");
    assert_eq!(
        fs::read(&chat).unwrap_or_default(),
        bytes,
        "bytes moved or cut"
    );
    assert!(!ws.0.join("history").join("recovered").exists());
}
