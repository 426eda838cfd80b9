//! A state-machine property test over the store and `session_history` together: random
//! appends, clears, rollovers, quarantines, rotations, crashes at fail points (inside
//! `rotate` too) and at any byte of a batch, bit flips anywhere, external appends and
//! every `session_history` action with cursors followed to the end.
//!
//! Invariants: no panic; nothing at or before the highest floor ever acknowledged is
//! returned or counted (damage included); every acknowledged batch is present exactly
//! once or `verify` says the store is not ok; seqs unique and increasing; every page
//! makes progress; results ≤ 16 KiB.
#![cfg(feature = "failpoints")]

use std::collections::BTreeSet;
use std::fs;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ctxbudget::scan::{SessionHistoryTool, RESULT_MAX};
use ctxbudget::store::failpoint::{self, Fault};
use ctxbudget::store::{Durability, OpenOptions};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{RolloverSpec, Transcript};
use proptest::prelude::*;
use serde_json::{json, Value};

/// Fail points are process-global: one case at a time.
static SERIAL: Mutex<()> = Mutex::new(());

#[derive(Clone, Debug)]
enum Op {
    Append(u8),
    Clear,
    Rollover,
    Quarantine,
    Rotate,
    /// Crash an append after writing this share (per mille) of its batch.
    TornAppend(u16),
    /// Crash at a fail point of an operation (0 append, 1 rotate, 2 clear, 3 recover).
    CrashAt(u8, u8),
    /// Cut a rotation's archive append after this share (per mille) of the bytes.
    TornRotate(u16),
    /// Flip one bit at this share (per mille) of chat (false) or archive (true).
    Flip(bool, u16, u8),
    /// An external writer appends a line with this seq offset from the last (may reuse).
    External(i8),
    Reopen,
    Query(u8),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (1u8..4).prop_map(Op::Append),
        2 => Just(Op::Clear),
        2 => Just(Op::Rollover),
        1 => Just(Op::Quarantine),
        2 => Just(Op::Rotate),
        1 => (0u16..1000).prop_map(Op::TornAppend),
        2 => (0u8..4, 0u8..11).prop_map(|(a, b)| Op::CrashAt(a, b)),
        1 => (0u16..1000).prop_map(Op::TornRotate),
        1 => (any::<bool>(), 0u16..1000, 0u8..8).prop_map(|(a, b, c)| Op::Flip(a, b, c)),
        1 => (-3i8..3).prop_map(Op::External),
        1 => Just(Op::Reopen),
        3 => (0u8..8).prop_map(Op::Query),
    ]
}

const POINTS: [&str; 11] = [
    "receipt.pending.write",
    "append.fsync",
    "append.after_fsync",
    "receipt.stable.write",
    "rotate.archive",
    "rotate.chat.rename",
    "dir.fsync",
    "receipt.pending.fsync",
    "recover.copy",
    "recover.truncate",
    "recover.rollback",
];

struct Model {
    dir: PathBuf,
    h: Arc<History>,
    /// Acknowledged seqs (appends that returned Ok).
    acked: BTreeSet<u64>,
    /// Highest seq of an acknowledged soft clear.
    floor: u64,
    /// Message rows (acknowledged or external) above the floor, by seq.
    messages: BTreeSet<u64>,
    /// Bytes were damaged on purpose.
    damaged: bool,
    rollovers: u64,
}

fn open(dir: &Path) -> Arc<History> {
    let options = OpenOptions {
        durability: Durability::None,
        ..OpenOptions::default()
    };
    Arc::new(History::open(dir, options).unwrap_or_else(|e| panic!("open: {e}")))
}

impl Model {
    fn reopen(&mut self) {
        failpoint::reset();
        self.h = open(&self.dir);
    }

    fn note_append(&mut self, first: u64, texts: &[String]) {
        for i in 0..texts.len() {
            let seq = first + i as u64;
            self.acked.insert(seq);
            self.messages.insert(seq);
        }
    }

    fn append(&mut self, n: u8) -> bool {
        let texts: Vec<String> = (0..n)
            .map(|i| format!("secret-{}-{i}", self.acked.len()))
            .collect();
        let rows = texts
            .iter()
            .map(|t| NewRow::text("message", "user", t))
            .collect();
        match self.h.append(rows) {
            Ok(r) => {
                self.note_append(r.first_seq, &texts);
                true
            }
            Err(_) => false,
        }
    }

    fn apply(&mut self, op: &Op) {
        match *op {
            Op::Append(n) => {
                self.append(n);
            }
            Op::Clear => {
                if let Ok(seq) = self.h.clear_soft() {
                    self.acked.insert(seq);
                    self.floor = self.floor.max(seq);
                    self.messages.retain(|&s| s > seq);
                }
            }
            Op::Rollover => {
                self.rollovers += 1;
                let spec = RolloverSpec {
                    rollover_id: format!("r{}", self.rollovers),
                    reason: "usable_limit".into(),
                    lead_in: "lead".into(),
                    trigger: Some(NewRow::text("message", "user", "trigger")),
                    ..RolloverSpec::default()
                };
                if self.h.rollover(spec).is_ok() {
                    // Its seqs are read back below from the rows.
                    if let Ok(rows) = self.h.rows() {
                        let top: Vec<u64> =
                            rows.iter().rev().take(3).filter_map(|r| r.seq).collect();
                        for s in &top {
                            self.acked.insert(*s);
                        }
                        if let Some(&trigger) = top.first() {
                            self.messages.insert(trigger);
                        }
                    }
                }
            }
            Op::Quarantine => {
                if let Ok(seq) = self
                    .h
                    .quarantine(NewRow::text("message", "user", "rejected"))
                {
                    self.acked.insert(seq);
                }
            }
            Op::Rotate => {
                let _ = self.h.rotate();
            }
            Op::TornAppend(share) => {
                failpoint::arm("append.write", Fault::Torn(usize::from(share) * 3));
                let ok = self.append(2);
                failpoint::reset();
                if !ok {
                    self.reopen();
                }
            }
            Op::CrashAt(which, point) => {
                failpoint::arm(POINTS[usize::from(point)], Fault::Crash);
                let ok = match which {
                    0 => self.append(1),
                    1 => self.h.rotate().is_ok(),
                    3 => self.h.recover().is_ok(),
                    _ => match self.h.clear_soft() {
                        Ok(seq) => {
                            self.acked.insert(seq);
                            self.floor = self.floor.max(seq);
                            self.messages.retain(|&s| s > seq);
                            true
                        }
                        Err(_) => false,
                    },
                };
                failpoint::reset();
                if !ok {
                    self.reopen();
                }
            }
            Op::TornRotate(share) => {
                failpoint::arm("rotate.archive.write", Fault::Torn(usize::from(share) * 2));
                let ok = self.h.rotate().is_ok();
                failpoint::reset();
                if !ok {
                    self.reopen();
                }
            }
            Op::Flip(archive, share, bit) => {
                let path = self.dir.join("history").join(if archive {
                    "chat-archive.jsonl"
                } else {
                    "chat.jsonl"
                });
                if let Ok(mut bytes) = fs::read(&path) {
                    if !bytes.is_empty() {
                        let at = bytes.len() * usize::from(share) / 1000;
                        bytes[at] ^= 1 << bit;
                        let _ = fs::write(&path, &bytes);
                        self.damaged = true;
                    }
                }
            }
            Op::External(delta) => {
                let last = self.acked.iter().next_back().copied().unwrap_or(0);
                let seq = (last as i64 + i64::from(delta)).max(1) as u64;
                let line = format!(
                    "{{\"seq\":{seq},\"kind\":\"message\",\"role\":\"user\",\"parts\":[{{\"type\":\"text\",\"text\":\"external-{seq}\"}}]}}\n"
                );
                let path = self.dir.join("history").join("chat.jsonl");
                if let Ok(mut f) = fs::OpenOptions::new().append(true).create(true).open(&path) {
                    let _ = f.write_all(line.as_bytes());
                }
                if seq > self.floor {
                    self.messages.insert(seq);
                }
                // Lines after a torn tail or reusing a seq are not rows: not tracked.
                self.damaged = true;
            }
            Op::Reopen => self.reopen(),
            Op::Query(k) => self.query(k),
        }
    }

    /// Every action, followed through its cursors to the end.
    fn query(&self, k: u8) {
        let tool = SessionHistoryTool::new(self.h.clone());
        let actions = [
            json!({"action": "list_items", "limit": 3}),
            json!({"action": "list_items", "limit": 2, "recent_first": true}),
            json!({"action": "search", "query": "secret", "limit": 2}),
            json!({"action": "search", "query": "SECRET-0", "max_chars_per_item": 5}),
            json!({"action": "list_windows", "limit": 1}),
            json!({"action": "list_windows", "limit": 2, "recent_first": true}),
            json!({"action": "search", "query": "external"}),
            json!({"action": "list_items", "role": "user", "limit": 25}),
        ];
        let first = actions[usize::from(k) % actions.len()].clone();
        let mut args = first;
        let mut ids: Vec<u64> = Vec::new();
        let mut counted = 0u64;
        let mut pages = 0;
        loop {
            pages += 1;
            assert!(pages < 2_000, "pages do not end: {args}");
            let out = tool.call_json(&args.to_string());
            assert!(out.len() <= RESULT_MAX, "{} bytes", out.len());
            let r: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}"));
            for item in r["items"].as_array().into_iter().flatten() {
                let id: u64 = item["item_id"]
                    .as_str()
                    .and_then(|s| s.parse().ok())
                    .unwrap_or(0);
                assert!(
                    id > self.floor,
                    "item {id} at or before floor {}: {r}",
                    self.floor
                );
                ids.push(id);
            }
            for w in r["windows"].as_array().into_iter().flatten() {
                counted += w["item_count"].as_u64().unwrap_or(0);
            }
            match r["cursor"].as_str() {
                Some(c) if r["has_more"] == true => {
                    let next = c.to_owned();
                    assert_ne!(args["cursor"].as_str(), Some(next.as_str()), "no progress");
                    args["cursor"] = json!(next);
                }
                _ => break,
            }
        }
        let mut unique = ids.clone();
        unique.sort_unstable();
        unique.dedup();
        assert_eq!(unique.len(), ids.len(), "an item twice: {ids:?}");
        // Counts never include a row at or before the floor.
        let above_floor = self
            .h
            .rows()
            .map(|rows| {
                rows.iter()
                    .filter(|r| r.seq.is_some_and(|s| s > self.floor))
                    .filter_map(|r| serde_json::from_slice::<Value>(&r.raw).ok())
                    .filter(|v| matches!(v["kind"].as_str(), Some("message" | "continuation")))
                    .count() as u64
            })
            .unwrap_or(u64::MAX);
        assert!(
            counted <= above_floor,
            "{counted} items counted, {above_floor} message rows above the floor exist"
        );
    }

    fn check_store(&self) {
        let Ok(rows) = self.h.rows() else { return };
        let seqs: Vec<u64> = rows.iter().filter_map(|r| r.seq).collect();
        assert!(
            seqs.windows(2).all(|w| w[0] < w[1]),
            "seqs not increasing: {seqs:?}"
        );
        let present: BTreeSet<u64> = seqs.iter().copied().collect();
        let missing: Vec<u64> = self.acked.difference(&present).copied().collect();
        if !missing.is_empty() {
            let report = self.h.verify().unwrap_or_else(|e| panic!("verify: {e}"));
            assert!(
                self.damaged && !report.ok,
                "acknowledged seqs {missing:?} missing and verify says {report:?}"
            );
        }
    }
}

static N: AtomicU64 = AtomicU64::new(0);

proptest! {
    #![proptest_config(ProptestConfig { cases: 96, max_shrink_iters: 200, ..ProptestConfig::default() })]

    #[test]
    fn store_and_scanner_hold_their_invariants(ops in prop::collection::vec(op(), 1..30)) {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        failpoint::reset();
        let dir = std::env::temp_dir().join(format!(
            "ctxb-sm-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::SeqCst)
        ));
        let _ = fs::remove_dir_all(&dir);
        let mut m = Model {
            h: open(&dir),
            dir: dir.clone(),
            acked: BTreeSet::new(),
            floor: 0,
            messages: BTreeSet::new(),
            damaged: false,
            rollovers: 0,
        };
        for op in &ops {
            m.apply(op);
            m.check_store();
            m.query(0);
            m.query(4);
        }
        for k in 0..8 {
            m.query(k);
        }
        m.reopen();
        m.check_store();
        for k in 0..8 {
            m.query(k);
        }
        drop(m);
        let _ = fs::remove_dir_all(&dir);
    }
}
