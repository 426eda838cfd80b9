//! Adversarial checks of the file store, round 2: a long-lived handle (refreshed incrementally or
//! not) and a fresh open agree after every operation of several writers.
#![cfg(feature = "failpoints")]
#![allow(dead_code)]

use std::fs;
use std::io::Write;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use ctxbudget::scan::SessionHistoryTool;
use ctxbudget::store::failpoint::{self, Fault};
use ctxbudget::store::{Durability, OpenOptions, ReadFrom};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{RolloverSpec, Transcript};
use proptest::prelude::*;
use serde_json::{json, Value};

static SERIAL: Mutex<()> = Mutex::new(());

struct Ws(PathBuf);
impl Drop for Ws {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}
fn ws() -> Ws {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "ctxb-adv2-live-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::SeqCst)
    ));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("history")).unwrap();
    Ws(dir)
}
fn open(ws: &Ws) -> Arc<History> {
    Arc::new(
        History::open(
            &ws.0,
            OpenOptions {
                durability: Durability::None,
                ..OpenOptions::default()
            },
        )
        .unwrap_or_else(|e| panic!("open: {e}")),
    )
}

#[derive(Clone, Debug)]
enum Op {
    Append(bool, u8),
    Clear(bool),
    Rollover(bool),
    QuarantineSeq(bool, u8),
    Rotate(bool),
    Recover(bool),
    /// 0 valid next row, 1 garbage, 2 garbage reset-like, 3 non-row showing a high seq,
    /// 4 valid row seq last+5, 5 a reset row with the next seq
    External(u8),
    TornAppend(bool, u16),
    CrashAt(bool, u8, u8),
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

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (any::<bool>(), 1u8..3).prop_map(|(a, n)| Op::Append(a, n)),
        2 => any::<bool>().prop_map(Op::Clear),
        2 => any::<bool>().prop_map(Op::Rollover),
        1 => (any::<bool>(), any::<u8>()).prop_map(|(a, s)| Op::QuarantineSeq(a, s)),
        2 => any::<bool>().prop_map(Op::Rotate),
        1 => any::<bool>().prop_map(Op::Recover),
        2 => (0u8..6).prop_map(Op::External),
        1 => (any::<bool>(), 0u16..1000).prop_map(|(a, s)| Op::TornAppend(a, s)),
        2 => (any::<bool>(), 0u8..4, 0u8..11).prop_map(|(a, w, p)| Op::CrashAt(a, w, p)),
    ]
}

fn ext(ws: &Ws, line: &str) {
    let mut f = fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(ws.0.join("history/chat.jsonl"))
        .unwrap();
    f.write_all(format!("{line}\n").as_bytes()).unwrap();
}

fn tool_view(h: &Arc<History>) -> String {
    let tool = SessionHistoryTool::new(h.clone());
    let mut s = String::new();
    for args in [
        json!({"action": "list_windows", "limit": 25}),
        json!({"action": "list_items", "limit": 25}),
    ] {
        let out: Value = serde_json::from_str(&tool.call_json(&args.to_string())).unwrap();
        let mut o = out.clone();
        if let Some(m) = o.as_object_mut() {
            m.remove("cursor");
        }
        s.push_str(&o.to_string());
    }
    s
}

fn view(h: &Arc<History>) -> String {
    let cw = h.read(ReadFrom::CurrentWindow);
    let all = h.read(ReadFrom::Seq(0));
    let v = h.verify();
    format!(
        "floor={:?}\nwindows={:?}\ncw={:?}\nall={:?}\nverify={:?}\ntool={}",
        h.floor_seq().map_err(|e| e.to_string()),
        h.windows().map_err(|e| e.to_string()),
        cw.map(|r| (
            r.floor_seq,
            r.last_seq,
            r.rows
                .iter()
                .map(|x| (x.seq, x.window.clone()))
                .collect::<Vec<_>>()
        ))
        .map_err(|e| e.to_string()),
        all.map(|r| r
            .rows
            .iter()
            .map(|x| (x.seq, x.window.clone()))
            .collect::<Vec<_>>())
            .map_err(|e| e.to_string()),
        v.map(|v| (
            v.ok,
            v.floor_seq,
            v.file()
                .expect("a file store\'s report")
                .chat
                .damage
                .is_some(),
            v.file()
                .expect("a file store\'s report")
                .archive
                .damage
                .is_some(),
            v.seq_violations
        ))
        .map_err(|e| e.to_string()),
        tool_view(h)
    )
}

fn run(ops: &[Op]) -> Result<(), TestCaseError> {
    let w = ws();
    let a = open(&w);
    let b = open(&w);
    let mut rolls = 0;
    let mut acked: Vec<u64> = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        failpoint::reset();
        let pick = |x: bool| if x { &a } else { &b };
        match op {
            Op::Append(x, n) => {
                let rows = (0..*n)
                    .map(|k| NewRow::text("message", "user", &format!("m{i}-{k}")))
                    .collect();
                if let Ok(r) = pick(*x).append(rows) {
                    acked.extend(r.first_seq..=r.last_seq);
                }
            }
            Op::Clear(x) => {
                if let Ok(s) = pick(*x).clear_soft() {
                    acked.push(s);
                }
            }
            Op::Rollover(x) => {
                rolls += 1;
                let _ = pick(*x).rollover(RolloverSpec {
                    rollover_id: format!("r{rolls}"),
                    reason: "usable_limit".into(),
                    lead_in: "lead".into(),
                    trigger: Some(NewRow::text("message", "user", "trigger")),
                    ..RolloverSpec::default()
                });
            }
            Op::QuarantineSeq(x, s) => {
                if !acked.is_empty() {
                    let seq = acked[usize::from(*s) % acked.len()];
                    let _ = pick(*x).quarantine_seq(seq, None);
                }
            }
            Op::Rotate(x) => {
                let _ = pick(*x).rotate();
            }
            Op::Recover(x) => {
                let _ = pick(*x).recover();
            }
            Op::External(k) => {
                let last = a
                    .read(ReadFrom::Seq(u64::MAX))
                    .map(|r| r.last_seq)
                    .unwrap_or(0);
                let line = match k {
                    0 => format!(
                        r#"{{"seq":{},"kind":"message","role":"user","parts":[{{"type":"text","text":"ext"}}]}}"#,
                        last + 1
                    ),
                    1 => "not json at all".to_owned(),
                    2 => r#"{"kind":"boundary","meta":{"boundary_kind":"reset"}"#.to_owned(),
                    3 => format!(r#"{{"seq":{},"kind":"message","x":1e999}}"#, last + 3),
                    4 => format!(
                        r#"{{"seq":{},"kind":"message","role":"user","parts":[{{"type":"text","text":"ext5"}}]}}"#,
                        last + 5
                    ),
                    _ => format!(
                        r#"{{"seq":{},"kind":"boundary","role":"system","parts":[],"meta":{{"boundary_kind":"reset"}}}}"#,
                        last + 1
                    ),
                };
                ext(&w, &line);
            }
            Op::TornAppend(x, share) => {
                failpoint::arm("append.write", Fault::Torn(usize::from(*share) * 3));
                let _ = pick(*x).append(vec![
                    NewRow::text("message", "user", "torn"),
                    NewRow::text("message", "user", "torn2"),
                ]);
            }
            Op::CrashAt(x, which, p) => {
                failpoint::arm(POINTS[usize::from(*p)], Fault::Crash);
                let h = pick(*x);
                match which {
                    0 => {
                        if let Ok(r) = h.append(vec![NewRow::text("message", "user", "c")]) {
                            acked.extend(r.first_seq..=r.last_seq);
                        }
                    }
                    1 => {
                        let _ = h.rotate();
                    }
                    2 => {
                        let _ = h.clear_soft();
                    }
                    _ => {
                        let _ = h.recover();
                    }
                }
            }
        }
        failpoint::reset();
        // A fresh open (it may recover), then the long-lived handles, then the fresh one.
        let f = open(&w);
        let fv = view(&f);
        let av = view(&a);
        let bv = view(&b);
        let fv2 = view(&f);
        prop_assert_eq!(
            &fv,
            &fv2,
            "fresh view changed by reading the others, after {:?}",
            &ops[..=i]
        );
        prop_assert_eq!(
            &av,
            &fv,
            "live handle a differs from a fresh open after {:?}",
            &ops[..=i]
        );
        prop_assert_eq!(
            &bv,
            &fv,
            "live handle b differs from a fresh open after {:?}",
            &ops[..=i]
        );
        // The store keeps accepting writes unless the files were damaged by hand (never here).
        let v = f.verify().unwrap();
        prop_assert!(
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
            "false damage after {:?}: {:?}",
            &ops[..=i],
            v
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, failure_persistence: None, .. ProptestConfig::default() })]
    #[test]
    fn live_handles_agree_with_a_fresh_open(ops in proptest::collection::vec(op(), 1..30)) {
        let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
        run(&ops)?;
    }
}

/// Several handles on one workspace from several threads: every acknowledged seq present
/// exactly once, no false damage, every handle agrees with a fresh open.
#[test]
fn threads_with_their_own_handles() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    failpoint::reset();
    let w = ws();
    let handles: Vec<Arc<History>> = (0..4).map(|_| open(&w)).collect();
    let acked = Arc::new(Mutex::new(Vec::<(u64, String)>::new()));
    std::thread::scope(|s| {
        for (t, h) in handles.iter().enumerate() {
            let acked = acked.clone();
            let h = h.clone();
            s.spawn(move || {
                for i in 0..60 {
                    let text = format!("t{t}-{i}");
                    match i % 10 {
                        3 if t == 0 => {
                            let _ = h.clear_soft();
                        }
                        5 if t == 1 => {
                            let _ = h.rollover(RolloverSpec {
                                rollover_id: format!("r{t}-{i}"),
                                reason: "usable_limit".into(),
                                lead_in: "lead".into(),
                                ..RolloverSpec::default()
                            });
                        }
                        7 if t == 2 => {
                            let _ = h.rotate();
                        }
                        _ => match h.append(vec![NewRow::text("message", "user", &text)]) {
                            Ok(r) => acked.lock().unwrap().push((r.first_seq, text)),
                            Err(e) => panic!("append refused: {e}"),
                        },
                    }
                    let _ = h.read(ReadFrom::CurrentWindow).unwrap();
                }
            });
        }
    });
    let f = open(&w);
    let rows = f.rows().unwrap();
    for (seq, text) in acked.lock().unwrap().iter() {
        let n = rows
            .iter()
            .filter(|r| {
                r.seq == Some(*seq)
                    && String::from_utf8_lossy(&r.raw).contains(&format!("\"{text}\""))
            })
            .count();
        assert_eq!(n, 1, "seq {seq} {text} present {n} times");
    }
    let v = f.verify().unwrap();
    assert!(v.ok, "{v:?}");
    let fv = view(&f);
    for h in &handles {
        assert_eq!(view(h), fv);
    }
}
