//! The in-memory backend (`ctxbudget::memory`): a byte log that the transcript layer
//! makes a whole store. The main property is differential, as for PostgreSQL: the same
//! random operations (appends, soft clears, rollovers, quarantines, rotations, prunes,
//! reopened handles, `session_history` calls with their cursors followed) applied to a file store and to an in-memory store give the same
//! rows, windows, floor and `session_history` results. The other tests pin what the
//! byte-log seam promises: a lead-in that reads the history while its rollover holds the
//! log's lock, conditional writes from many threads, handles of one name sharing rows,
//! prunes that void cursors.

use std::sync::{Arc, Barrier};

use ctxbudget::memory::{self, MemoryHistory};
use ctxbudget::scan::SessionHistoryTool;
use ctxbudget::store::{
    OpenOptions, ReadFrom, StateDetail, StoreError, VerifyDetail, VerifyReport,
};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::Store;
use ctxbudget::transcript::{self, LeadIn, PruneSpec, RolloverSpec};
use proptest::prelude::*;
use serde_json::{json, Value};

static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// A name no other test of this process uses.
fn unique(prefix: &str) -> String {
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("{prefix}-{}-{n}", std::process::id())
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
    Prune(u8),
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
        1 => (0u8..3).prop_map(Op::Prune),
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
    name: String,
    mem: Arc<MemoryHistory>,
    rollovers: u32,
}

impl Pair {
    fn stores(&self) -> [&dyn Store; 2] {
        [self.file.as_ref(), self.mem.as_ref()]
    }

    fn same<T: PartialEq + std::fmt::Debug>(
        &self,
        what: &str,
        f: impl Fn(&dyn Store) -> Result<T, StoreError>,
    ) {
        let got: Vec<_> = self
            .stores()
            .iter()
            .map(|s| f(*s).map_err(|e| e.to_string()))
            .collect();
        assert_eq!(got[0], got[1], "{what}");
    }

    fn apply(&mut self, op: &Op) {
        match op {
            Op::Append(n, w) => {
                let words: Vec<&str> = (0..*n)
                    .map(|i| WORDS[(*w as usize + i as usize) % WORDS.len()])
                    .collect();
                let rows = texts(&words);
                self.same("append", |s| {
                    s.append_rows(&rows, None)
                        .map(|r| (r.first_seq, r.last_seq, r.window))
                });
            }
            Op::AppendIfStale(w) => {
                let rows = texts(&[WORDS[*w as usize]]);
                for s in self.stores() {
                    let last = s.read(ReadFrom::Seq(u64::MAX)).expect("read").last_seq;
                    let r = s.append_rows(&rows, Some(last.saturating_sub(1)));
                    if last > 0 {
                        assert!(
                            matches!(r, Err(StoreError::Conflict { .. })),
                            "a stale condition must conflict: {r:?}"
                        );
                    }
                }
            }
            Op::Clear => self.same("clear", |s| transcript::clear_soft(s, None)),
            Op::Rollover => {
                self.rollovers += 1;
                let id = format!("r{}", self.rollovers);
                self.same("rollover", |s| {
                    transcript::rollover(
                        s,
                        RolloverSpec {
                            rollover_id: id.clone(),
                            reason: "usable_limit".into(),
                            lead_in: LeadIn::template(
                                "lead-in {window_id} after {previous_window_id}",
                            ),
                            trigger: Some(NewRow::text("message", "user", "trigger")),
                            ..RolloverSpec::default()
                        },
                    )
                    .map(|w| w.to_string())
                });
            }
            Op::Quarantine => {
                let last = self
                    .file
                    .read(ReadFrom::Seq(u64::MAX))
                    .expect("read")
                    .last_seq;
                self.same("quarantine", |s| transcript::quarantine(s, last, None));
            }
            Op::Rotate => {
                let file = self.file.rotate().expect("rotate the file store");
                let mem = self.mem.rotate().expect("rotate the memory store");
                assert_eq!(file.rows, mem.rows, "rows archived");
                assert_eq!(file.epoch.is_some(), mem.epoch.is_some(), "a new epoch");
            }
            Op::Reopen => {
                self.file =
                    Arc::new(History::open(&self.ws, OpenOptions::default()).expect("reopen"));
                self.mem = Arc::new(memory::open(&self.name));
            }
            Op::Prune(keep) => {
                let spec = PruneSpec {
                    keep_windows: Some(usize::from(*keep) + 1),
                    ..PruneSpec::default()
                };
                self.same("prune", |s| {
                    s.prune(&spec)
                        .map(|r| (r.rows, r.kept_from, r.floor_seq, r.epoch.is_some()))
                });
            }
            Op::Query(q) => {
                let file_tool = SessionHistoryTool::new(Arc::clone(&self.file));
                let mem_tool = SessionHistoryTool::new(Arc::clone(&self.mem));
                let args = query(*q);
                assert_eq!(walk(&file_tool, args.clone()), walk(&mem_tool, args), "{q}");
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
        let mem = self
            .mem
            .read(ReadFrom::Seq(0))
            .expect("read the memory store");
        assert_eq!(file.last_seq, mem.last_seq, "last seq");
        assert_eq!(file.floor_seq, mem.floor_seq, "floor");
        let rows = |read: &ctxbudget::store::RowsRead| -> Vec<_> {
            read.rows
                .iter()
                .map(|r| (r.seq, r.window.clone(), comparable(&r.raw)))
                .collect()
        };
        assert_eq!(rows(&file), rows(&mem), "rows");
        self.same("windows", |s| s.windows());
        self.same("current window", |s| s.current_window());
        self.same("current window's rows", |s| {
            s.read(ReadFrom::CurrentWindow).map(|r| r.rows.len())
        });
        assert!(self.mem.verify().expect("verify").ok, "verify");
        same_health(&self.file, &self.mem, StateDetail::Log, VerifyDetail::Log);
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
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|v| v.parse().ok()).unwrap_or(64)
    ))]

    #[test]
    fn file_and_memory_stores_give_the_same_answers(ops in proptest::collection::vec(op(), 1..30)) {
        let ws = temp_workspace("mem-diff");
        let file = Arc::new(History::open(&ws, OpenOptions::default()).expect("open"));
        let name = unique("diff");
        let mem = Arc::new(memory::open(&name));
        let mut pair = Pair { ws: ws.clone(), file, name, mem, rollovers: 0 };
        for op in &ops {
            pair.apply(op);
        }
        std::fs::remove_dir_all(&ws).ok();
    }
}

#[test]
fn handles_opened_with_one_name_share_rows_and_others_do_not() {
    let name = unique("shared");
    let a = memory::open(&name);
    let b = memory::open(&name);
    let other = memory::open(&unique("other"));
    a.append_rows(&texts(&["one", "two"]), None)
        .expect("append");
    let appended = b.append_rows(&texts(&["three"]), Some(2)).expect("append");
    assert_eq!((appended.first_seq, appended.last_seq), (3, 3));
    assert_eq!(a.rows_since(0).expect("rows").len(), 3);
    assert_eq!(other.rows_since(0).expect("rows").len(), 0);
    assert_eq!(a.identity(), b.identity());
    assert_ne!(a.identity(), other.identity());
}

#[test]
fn a_lead_in_that_reads_the_history_does_not_wait_for_its_own_rollover() {
    let h = Arc::new(memory::open(&unique("leadin")));
    h.append_rows(&texts(&["the plan", "agreed"]), None)
        .expect("append");
    let reader = Arc::clone(&h);
    let lead_in = LeadIn::render(move |ctx| {
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

#[test]
fn conditional_writes_from_many_threads_commit_exactly_one_decision_per_state() {
    let name = unique("race");
    let threads = 8;
    let barrier = Arc::new(Barrier::new(threads));
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let barrier = Arc::clone(&barrier);
            let name = name.clone();
            std::thread::spawn(move || {
                let h = memory::open(&name);
                barrier.wait();
                let mut won = 0;
                for _ in 0..20 {
                    let last = h.read(ReadFrom::Seq(u64::MAX)).expect("read").last_seq;
                    match h.append_rows(&texts(&[&format!("t{i}")]), Some(last)) {
                        Ok(r) => {
                            assert_eq!(r.first_seq, last + 1);
                            won += 1;
                        }
                        Err(StoreError::Conflict { .. }) => {}
                        Err(e) => panic!("{e}"),
                    }
                }
                won
            })
        })
        .collect();
    let won: u64 = handles.into_iter().map(|t| t.join().expect("thread")).sum();
    let rows = memory::open(&name).rows_since(0).expect("rows");
    assert_eq!(rows.len() as u64, won);
    let seqs: Vec<u64> = rows.iter().filter_map(|r| r.seq).collect();
    assert_eq!(seqs, (1..=won).collect::<Vec<_>>());
}

#[test]
fn a_prune_voids_cursors_minted_before_it() {
    let h = Arc::new(memory::open(&unique("prune")));
    for i in 0..3 {
        h.append_rows(&texts(&[&format!("window {i} text"), "reply"]), None)
            .expect("append");
        transcript::rollover(
            h.as_ref(),
            RolloverSpec {
                rollover_id: format!("r{i}"),
                reason: "manual".into(),
                lead_in: LeadIn::template("lead-in"),
                ..RolloverSpec::default()
            },
        )
        .expect("rollover");
    }
    let tool = SessionHistoryTool::new(Arc::clone(&h));
    let page = tool.call(&json!({"action": "list_items", "limit": 1}));
    let cursor = page["cursor"].clone();
    assert!(cursor.is_string(), "{page}");
    let report = h
        .prune(&PruneSpec {
            keep_windows: Some(1),
            ..PruneSpec::default()
        })
        .expect("prune");
    assert!(report.rows > 0 && report.epoch.is_some(), "{report:?}");
    let next = tool.call(&json!({"action": "list_items", "limit": 1, "cursor": cursor}));
    assert_eq!(next["code"], "history_changed", "{next}");
}

#[test]
fn a_batch_with_a_bad_row_writes_nothing() {
    let h = memory::open(&unique("bad"));
    let bad = NewRow::text("message", "robot", "who");
    let err = h
        .append_rows(&[NewRow::text("message", "user", "ok"), bad], None)
        .expect_err("a bad role");
    assert!(matches!(err, StoreError::InvalidRow { .. }), "{err}");
    assert_eq!(h.rows_since(0).expect("rows").len(), 0);
    let big = NewRow::text("message", "user", &"x".repeat(200));
    let small = memory::MemoryHistory::new(memory::MemoryLog::private()).with_max_row_bytes(100);
    assert!(small.append_rows(&[big], None).is_err());
    assert_eq!(small.read(ReadFrom::Seq(0)).expect("read").last_seq, 0);
}
