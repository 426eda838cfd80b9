//! Transcript store: framing, windows, rollover, recovery, rotation, receipts.
use std::fs;
use std::path::{Path, PathBuf};

use ctxbudget::store::{
    Durability, OpenOptions, ReceiptCheck, ReceiptRead, ReceiptState, StateDetail, StoreError,
};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{RolloverSpec, Transcript};

struct Ws(PathBuf);

impl Ws {
    fn new(name: &str) -> Ws {
        let dir = std::env::temp_dir().join(format!(
            "ctxb-test-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        Ws(dir)
    }
    fn chat(&self) -> PathBuf {
        self.0.join("history/chat.jsonl")
    }
}

impl Drop for Ws {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn open(ws: &Path) -> History {
    History::open(
        ws,
        OpenOptions {
            durability: Durability::None,
            ..OpenOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn msg(text: &str) -> NewRow {
    NewRow::text("message", "user", text)
}

fn texts(h: &History) -> Vec<String> {
    h.rows()
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .filter_map(|r| {
            let v: serde_json::Value = serde_json::from_slice(&r.raw).ok()?;
            Some(v["parts"][0]["text"].as_str().unwrap_or("").to_owned())
        })
        .collect()
}

fn epoch(h: &History) -> Option<u64> {
    match h.receipt().unwrap_or_else(|e| panic!("{e}")) {
        ReceiptRead::Valid(r) if r.state == ReceiptState::Stable => Some(r.epoch),
        _ => None,
    }
}

#[test]
fn appends_are_framed_and_read_back() {
    let ws = Ws::new("append");
    let h = open(&ws.0);
    let r1 = h
        .append(vec![msg("a"), msg("b")])
        .unwrap_or_else(|e| panic!("{e}"));
    let r2 = h.append(vec![msg("c")]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r1.first_seq, r1.last_seq, r2.first_seq), (1, 2, 3));
    assert_eq!(r1.epoch, r2.epoch, "a pure append keeps the epoch");
    assert_eq!(texts(&h), ["a", "b", "c"]);
    let raw = fs::read_to_string(ws.chat()).unwrap_or_default();
    assert_eq!(raw.lines().count(), 7, "2 headers + 3 rows + 2 commits");
    let report = h.verify().unwrap_or_else(|e| panic!("{e}"));
    assert!(report.ok, "{report:?}");
    assert_eq!(
        (
            report.epoch,
            report.last_seq,
            report.live.rows,
            report.archive.rows
        ),
        (Some(r2.epoch), 3, 3, 0),
        "{report:?}"
    );
    let file = report.file().unwrap_or_else(|| panic!("{report:?}"));
    assert_eq!((file.receipt, file.chat.batches), (ReceiptCheck::Stable, 2));
    let state = h.state().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        (state.epoch, state.last_seq, state.floor_seq),
        (Some(r2.epoch), 3, 0)
    );
    let StateDetail::File {
        receipt: ReceiptRead::Valid(receipt),
    } = state.detail
    else {
        panic!("{state:?}")
    };
    assert_eq!((receipt.seq, receipt.epoch), (3, r2.epoch));
    // A second handle (another "process") sees the same rows and continues the seqs.
    let h2 = open(&ws.0);
    assert_eq!(h2.append(vec![msg("d")]).map(|r| r.first_seq).ok(), Some(4));
    assert_eq!(texts(&h), ["a", "b", "c", "d"]);
    assert_eq!(epoch(&h), Some(r1.epoch));
}

#[test]
fn rollover_windows_and_idempotency() {
    let ws = Ws::new("rollover");
    let h = open(&ws.0);
    h.append(vec![msg("one")]).unwrap_or_else(|e| panic!("{e}"));
    let spec = RolloverSpec {
        rollover_id: "r-1".into(),
        reason: "new_context".into(),
        requested_by: Some("model".into()),
        lead_in: "You are in window w:2".into(),
        trigger: Some(NewRow::text("continuation", "user", "continue")),
        ..RolloverSpec::default()
    };
    let w = h.rollover(spec.clone()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(w, "w:2");
    assert_eq!(
        h.rollover(spec).ok(),
        Some("w:2".into()),
        "same rollover_id writes nothing"
    );
    assert_eq!(h.current_window().ok(), Some("w:2".into()));
    let floor = h.clear_soft().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(floor, 5);
    let windows = h.windows().unwrap_or_else(|e| panic!("{e}"));
    let summary: Vec<(String, String, u64)> = windows
        .iter()
        .map(|w| (w.window_id.clone(), w.boundary_kind.clone(), w.item_count))
        .collect();
    assert_eq!(
        summary,
        [
            ("w:0".into(), "root".into(), 1),
            ("w:2".into(), "rollover".into(), 1),
            ("w:5".into(), "reset".into(), 0)
        ]
    );
    let rows = h.rows().unwrap_or_else(|e| panic!("{e}"));
    let boundary: serde_json::Value = serde_json::from_slice(&rows[1].raw).unwrap_or_default();
    assert_eq!(boundary["meta"]["previous_window"], "w:0");
    assert_eq!(boundary["meta"]["requested_by"], "model");
    assert_eq!(boundary["window"], "w:2");
}

#[test]
fn quarantine_keeps_the_original_inside_meta_only() {
    let ws = Ws::new("quarantine");
    let h = open(&ws.0);
    let original = msg("huge input").with_meta("skill", "x");
    let seq = h.quarantine(original).unwrap_or_else(|e| panic!("{e}"));
    let rows = h.rows().unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_slice(&rows[0].raw).unwrap_or_default();
    assert_eq!(seq, 1);
    assert_eq!(v["kind"], "rejected");
    assert_eq!(v["role"], "assistant");
    assert_eq!(v["parts"], serde_json::json!([]));
    assert_eq!(v["meta"]["rejected"]["parts"][0]["text"], "huge input");
    assert_eq!(v["meta"]["rejected"]["meta"]["skill"], "x");
    assert!(v["meta"].get("skill").is_none());
}

#[test]
fn torn_tail_at_every_byte_is_recovered_to_the_acknowledged_rows() {
    let ws = Ws::new("torn");
    let h = open(&ws.0);
    h.append(vec![msg("kept-1"), msg("kept-2")])
        .unwrap_or_else(|e| panic!("{e}"));
    let good = fs::read(ws.chat()).unwrap_or_default();
    // The receipt as it stood before the second batch was acknowledged: a crash while
    // writing that batch leaves it so (a cut through an acknowledged batch is damage,
    // tested in integrity.rs).
    let receipt_path = ws.0.join("history/receipt.json");
    let receipt = fs::read(&receipt_path).unwrap_or_default();
    h.append(vec![msg("lost-3"), msg("lost-4")])
        .unwrap_or_else(|e| panic!("{e}"));
    let full = fs::read(ws.chat()).unwrap_or_default();
    drop(h);
    for cut in good.len()..full.len() {
        fs::write(ws.chat(), &full[..cut]).unwrap_or_else(|e| panic!("{e}"));
        fs::write(&receipt_path, &receipt).unwrap_or_else(|e| panic!("{e}"));
        let _ = fs::remove_dir_all(ws.0.join("history/recovered"));
        let h = open(&ws.0);
        assert_eq!(texts(&h), ["kept-1", "kept-2"], "cut at {cut}");
        assert_eq!(
            fs::read(ws.chat()).unwrap_or_default(),
            good,
            "cut at {cut}"
        );
        if cut > good.len() {
            let moved: Vec<_> = fs::read_dir(ws.0.join("history/recovered"))
                .map(|d| d.filter_map(|e| e.ok()).collect())
                .unwrap_or_default();
            assert_eq!(moved.len(), 1);
            assert_eq!(
                fs::read(moved[0].path()).unwrap_or_default(),
                &full[good.len()..cut]
            );
        }
        h.recover().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !h.recover().unwrap_or_else(|e| panic!("{e}")).changed,
            "idempotent"
        );
        assert_eq!(
            h.append(vec![msg("next")]).map(|r| r.first_seq).ok(),
            Some(3)
        );
    }
}

#[test]
fn damage_before_the_last_commit_refuses_writes_and_keeps_bytes() {
    let ws = Ws::new("damage");
    let h = open(&ws.0);
    h.append(vec![msg("first")])
        .unwrap_or_else(|e| panic!("{e}"));
    h.append(vec![msg("second")])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut bytes = fs::read(ws.chat()).unwrap_or_default();
    let at = bytes.windows(5).position(|w| w == b"first").unwrap_or(0);
    bytes[at] = b'F';
    fs::write(ws.chat(), &bytes).unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws.0);
    let err = h.append(vec![msg("third")]).err();
    assert!(matches!(err, Some(StoreError::Corrupt { .. })), "{err:?}");
    let message = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(
        message.contains("line 1") && message.contains("verify"),
        "{message}"
    );
    assert_eq!(
        fs::read(ws.chat()).unwrap_or_default(),
        bytes,
        "nothing rewritten"
    );
    let report = h.verify().unwrap_or_else(|e| panic!("{e}"));
    assert!(
        !report.ok
            && report
                .file()
                .expect("a file store\'s report")
                .chat
                .damage
                .is_some()
    );
}

#[test]
fn legacy_unframed_lines_are_rows_and_writes_continue_after_them() {
    let ws = Ws::new("legacy");
    fs::create_dir_all(ws.0.join("history")).unwrap_or_else(|e| panic!("{e}"));
    let legacy = concat!(
        "{\"seq\":1,\"id\":\"1\",\"kind\":\"message\",\"role\":\"user\",\"window\":\"w:0\",\"parts\":[{\"type\":\"text\",\"text\":\"old\"}],\"meta\":{}}\n",
        "garbage that is not json \u{fffd}\n",
        "{\"seq\":2,\"id\":\"2\",\"kind\":\"boundary\",\"role\":\"system\",\"window\":\"w:2\",\"parts\":[],\"meta\":{\"boundary_kind\":\"rollover\",\"rollover_id\":\"legacy-r\"}}\n",
    );
    let mut bytes = legacy.as_bytes().to_vec();
    bytes.extend_from_slice(b"{\"seq\":3,\"kind\":\"message\",\"raw\":\"\xff\xfe\"}\n");
    fs::write(ws.chat(), &bytes).unwrap_or_else(|e| panic!("{e}"));
    let h = open(&ws.0);
    assert_eq!(h.current_window().ok(), Some("w:2".into()));
    // A boundary without its lead-in (legacy partial batch) is not duplicated.
    let again = h.rollover(RolloverSpec {
        rollover_id: "legacy-r".into(),
        reason: "usable_limit".into(),
        lead_in: "x".into(),
        ..RolloverSpec::default()
    });
    assert_eq!(again.ok(), Some("w:2".into()));
    assert_eq!(
        h.append(vec![msg("new")]).map(|r| r.first_seq).ok(),
        Some(4)
    );
    let after = fs::read(ws.chat()).unwrap_or_default();
    assert_eq!(
        &after[..bytes.len()],
        &bytes[..],
        "raw bytes, even invalid UTF-8, kept"
    );
}

#[test]
fn rotation_moves_closed_windows_and_changes_the_epoch() {
    let ws = Ws::new("rotate");
    let h = open(&ws.0);
    h.append(vec![msg("w0-a"), msg("w0-b")])
        .unwrap_or_else(|e| panic!("{e}"));
    h.rollover(RolloverSpec {
        rollover_id: "r".into(),
        reason: "usable_limit".into(),
        lead_in: "lead".into(),
        ..RolloverSpec::default()
    })
    .unwrap_or_else(|e| panic!("{e}"));
    h.append(vec![msg("w3-a")])
        .unwrap_or_else(|e| panic!("{e}"));
    let before = texts(&h);
    let e0 = epoch(&h);
    let report = h.rotate().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.rows, 2);
    assert_ne!(epoch(&h), e0);
    assert_eq!(texts(&h), before);
    assert!(fs::read_to_string(ws.0.join("history/chat-archive.jsonl"))
        .unwrap_or_default()
        .contains("w0-b"));
    assert!(!fs::read_to_string(ws.chat())
        .unwrap_or_default()
        .contains("w0-a"));
    assert!(h.verify().map(|r| r.ok).unwrap_or(false));
    assert_eq!(
        h.rotate().map(|r| r.rows).ok(),
        Some(0),
        "nothing left to rotate"
    );
}

#[test]
fn external_append_without_the_lock_changes_the_epoch_at_the_next_write() {
    let ws = Ws::new("external");
    let h = open(&ws.0);
    let first = h.append(vec![msg("a")]).unwrap_or_else(|e| panic!("{e}"));
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(ws.chat())
        .unwrap_or_else(|e| panic!("{e}"));
    use std::io::Write;
    f.write_all(b"{\"seq\":2,\"kind\":\"message\",\"role\":\"user\",\"parts\":[{\"type\":\"text\",\"text\":\"ext\"}]}\n")
        .unwrap_or_else(|e| panic!("{e}"));
    drop(f);
    let next = h.append(vec![msg("b")]).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(next.epoch, first.epoch);
    assert_eq!(next.first_seq, 3);
    assert_eq!(texts(&h), ["a", "ext", "b"]);
}

#[test]
fn anchor_detects_a_same_size_rewrite() {
    let ws = Ws::new("anchor");
    let h = open(&ws.0);
    h.append(vec![msg("original text")])
        .unwrap_or_else(|e| panic!("{e}"));
    let end = fs::metadata(ws.chat()).map(|m| m.len()).unwrap_or(0);
    let anchor = h.anchor_crc_at(end).unwrap_or_else(|e| panic!("{e}"));
    assert!(anchor.is_some());
    // Rewrite the batch with different text of the same length, re-framed correctly.
    let bytes = fs::read_to_string(ws.chat()).unwrap_or_default();
    let lines: Vec<&str> = bytes.lines().collect();
    // Different replacement texts until the new CRC has as many digits as the old one.
    let rewritten = (0..1000)
        .map(|i| {
            let row = lines[1].replace("original text", &format!("replaced {i:04}"));
            let framed = format!("{}\n{}\n", lines[0], row);
            let crc = crc32c_of(framed.as_bytes());
            let old = format!("\"crc\":{}", anchor.unwrap_or(0));
            let commit = lines[2].replace(&old, &format!("\"crc\":{crc}"));
            format!("{framed}{commit}\n")
        })
        .find(|r| r.len() == bytes.len())
        .unwrap_or_default();
    assert_eq!(rewritten.len(), bytes.len());
    fs::write(ws.chat(), rewritten).unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(
        h.anchor_crc_at(end).unwrap_or_else(|e| panic!("{e}")),
        anchor
    );
}

fn crc32c_of(bytes: &[u8]) -> u32 {
    // Bitwise CRC-32C (Castagnoli), independent of the implementation under test.
    let mut crc = !0u32;
    for &b in bytes {
        crc ^= u32::from(b);
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
    }
    !crc
}

#[test]
fn invalid_rows_are_rejected_with_the_field_named() {
    let ws = Ws::new("invalid");
    let h = open(&ws.0);
    let bad = serde_json::json!([{"kind": "message", "role": "user", "parts": [{"type": "text"}]}]);
    let rows = bad.as_array().cloned().unwrap_or_default();
    let err = h
        .append_json(rows)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("parts[0].text"), "{err}");
    let big = msg(&"x".repeat(2 << 20));
    let err = h
        .append(vec![big])
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.contains("row limit"), "{err}");
    assert!(
        h.rows().map(|r| r.is_empty()).unwrap_or(false),
        "nothing written"
    );
}

#[test]
fn a_reset_in_a_torn_tail_is_replaced_by_a_committed_floor() {
    let ws = Ws::new("floor");
    let h = open(&ws.0);
    h.append(vec![msg("private")])
        .unwrap_or_else(|e| panic!("{e}"));
    drop(h);
    let mut f = fs::OpenOptions::new()
        .append(true)
        .open(ws.chat())
        .unwrap_or_else(|e| panic!("{e}"));
    use std::io::Write;
    // A batch cut before its commit line whose reset row was written whole.
    f.write_all(b"{\"batch\":{\"epoch\":1,\"first\":2,\"last\":2}}\n{\"seq\":2,\"kind\":\"boundary\",\"role\":\"system\",\"meta\":{\"boundary_kind\":\"reset\"}}\n")
        .unwrap_or_else(|e| panic!("{e}"));
    drop(f);
    let h = open(&ws.0);
    let windows = h.windows().unwrap_or_else(|e| panic!("{e}"));
    let last = windows.last().map(|w| w.boundary_kind.clone());
    assert_eq!(last.as_deref(), Some("reset"), "{windows:?}");
    assert_eq!(texts(&h)[0], "private");
}

#[test]
fn rows_built_in_rust_meet_the_same_rules_as_json_rows() {
    // A Rust host used to store what Python refuses (`InvalidRowError`): a bogus kind, a
    // bogus role, a boundary without its kind, a part without a type.
    let ws = Ws::new("rust-rows");
    let h = open(&ws.0);
    let mut no_type = msg("x");
    no_type.parts = vec![serde_json::json!({"text": "x"})];
    let cases = [
        (NewRow::text("bogus_kind", "user", "x"), "kind"),
        (NewRow::text("message", "robot", "x"), "role"),
        (
            NewRow::text("boundary", "system", "x"),
            "meta.boundary_kind",
        ),
        (no_type, "parts[0]"),
    ];
    for (row, field) in cases {
        match h.append(vec![msg("fine"), row.clone()]) {
            Err(StoreError::InvalidRow {
                index: 1, field: f, ..
            }) => {
                assert!(f.starts_with(field), "{field}: {f}")
            }
            other => panic!("{field}: {other:?}"),
        }
        let quarantined = h.quarantine(row).err().map(|e| e.to_string());
        assert!(quarantined.is_some_and(|t| t.contains(field)), "{field}");
    }
    assert!(texts(&h).is_empty(), "nothing was written");
    h.append(vec![msg("fine")])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(texts(&h), ["fine"]);
}
