//! Conditional writes: a batch decided on the rows up to seq N commits only while N is
//! still the last seq, so two writers that decided on the same state never both commit.
use std::path::PathBuf;
use std::sync::{Arc, Barrier};

use ctxbudget::store::{Durability, OpenOptions, StoreError};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{RolloverSpec, Transcript};

struct Ws(PathBuf);

impl Ws {
    fn new(name: &str) -> Ws {
        let dir = std::env::temp_dir().join(format!(
            "ctxb-cond-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        Ws(dir)
    }
}

impl Drop for Ws {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn open(ws: &Ws) -> History {
    History::open(
        &ws.0,
        OpenOptions {
            durability: Durability::None,
            ..OpenOptions::default()
        },
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

fn user(text: &str) -> NewRow {
    NewRow::text("message", "user", text)
}

fn conflict(result: Result<impl std::fmt::Debug, StoreError>) -> (u64, u64) {
    match result {
        Err(StoreError::Conflict {
            expected_last_seq,
            last_seq,
        }) => (expected_last_seq, last_seq),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[test]
fn append_if_commits_only_on_the_expected_last_seq() {
    let ws = Ws::new("append");
    let h = open(&ws);
    let first = h
        .append_if(vec![user("a")], 0)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((first.first_seq, first.last_seq), (1, 1));
    assert_eq!(conflict(h.append_if(vec![user("b")], 0)), (0, 1));
    let err = h.append_if(vec![user("b")], 0).map(|_| ()).unwrap_err();
    assert!(err.to_string().contains("decide again"), "{err}");
    let rows = h.rows().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rows.len(), 1, "nothing was written by the refused batch");
    let second = h
        .append_json_bytes_if(br#"[{"kind":"message","role":"user","parts":[]}]"#, Some(1))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(second.first_seq, 2);
    conflict(h.append_json_bytes_if(b"[{\"kind\":\"message\",\"role\":\"user\"}]", Some(1)));
}

#[test]
fn another_instance_moving_the_store_is_a_conflict() {
    let ws = Ws::new("instances");
    let (a, b) = (open(&ws), open(&ws));
    a.append(vec![user("a")]).unwrap_or_else(|e| panic!("{e}"));
    b.append(vec![user("b")]).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(conflict(a.append_if(vec![user("c")], 1)), (1, 2));
    a.append_if(vec![user("c")], 2)
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn rollover_and_quarantine_are_conditional_too() {
    let ws = Ws::new("rollover");
    let h = open(&ws);
    h.append(vec![user("a"), user("b")])
        .unwrap_or_else(|e| panic!("{e}"));
    let spec = |id: &str, at: u64| RolloverSpec {
        rollover_id: id.into(),
        reason: "usable_limit".into(),
        lead_in: "new window".into(),
        expected_last_seq: Some(at),
        ..RolloverSpec::default()
    };
    conflict(h.rollover(spec("r1", 1)));
    assert_eq!(h.current_window().unwrap_or_else(|e| panic!("{e}")), "w:0");
    let w = h.rollover(spec("r1", 2)).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(w, "w:3");
    // A repeat of a committed rollover still answers with its window.
    assert_eq!(
        h.rollover(spec("r1", 2)).unwrap_or_else(|e| panic!("{e}")),
        "w:3"
    );

    let last = h.rows().unwrap_or_else(|e| panic!("{e}")).len() as u64;
    h.append(vec![user("too big")])
        .unwrap_or_else(|e| panic!("{e}"));
    conflict(h.quarantine_retracting(last + 1, user("too big"), Some(last)));
    let seq = h
        .quarantine_retracting(last + 1, user("too big"), Some(last + 1))
        .unwrap_or_else(|e| panic!("{e}"));
    let rows = h.rows().unwrap_or_else(|e| panic!("{e}"));
    let kinds: Vec<String> = rows[rows.len() - 2..]
        .iter()
        .map(|r| {
            let v: serde_json::Value =
                serde_json::from_slice(&r.raw).unwrap_or_else(|e| panic!("{e}"));
            v["kind"].as_str().unwrap_or("").to_owned()
        })
        .collect();
    assert_eq!(kinds, ["retraction", "rejected"], "one batch, both rows");
    assert_eq!(seq, last + 3);
}

#[test]
fn racing_writers_on_one_state_commit_exactly_once() {
    for trial in 0..50 {
        let ws = Ws::new(&format!("race{trial}"));
        open(&ws)
            .append(vec![user("seed")])
            .unwrap_or_else(|e| panic!("{e}"));
        let barrier = Arc::new(Barrier::new(4));
        let handles: Vec<_> = (0..4)
            .map(|i| {
                let (barrier, dir) = (barrier.clone(), ws.0.clone());
                std::thread::spawn(move || {
                    let h = History::open(
                        &dir,
                        OpenOptions {
                            durability: Durability::None,
                            ..OpenOptions::default()
                        },
                    )
                    .unwrap_or_else(|e| panic!("{e}"));
                    barrier.wait();
                    h.append_if(vec![user(&format!("advisory {i}"))], 1).is_ok()
                })
            })
            .collect();
        let won = handles
            .into_iter()
            .map(|t| t.join().unwrap_or(false))
            .filter(|ok| *ok)
            .count();
        assert_eq!(won, 1, "trial {trial}");
        assert_eq!(open(&ws).rows().unwrap_or_else(|e| panic!("{e}")).len(), 2);
    }
}
