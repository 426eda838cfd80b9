//! The window fold is incremental: a fold fed the rows a few at a time, as an agent loop
//! feeds it, ends in the same state as a fold that reads the current window in one go,
//! and agrees with the store's own window listing — for any sequence of rows.
use std::fs;
use std::path::PathBuf;

use ctxbudget::store::{Durability, OpenOptions};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{RolloverSpec, Transcript, WindowFold};
use proptest::prelude::*;
use serde_json::json;

struct Ws(PathBuf);

impl Drop for Ws {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

#[derive(Clone, Debug)]
enum Op {
    User,
    Assistant,
    Advisory(u8),
    Call(u8),
    Result(u8, bool),
    Retract(u8),
    Rollover,
    Clear,
    Step,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => Just(Op::User),
        2 => Just(Op::Assistant),
        1 => (0u8..4).prop_map(Op::Advisory),
        2 => (0u8..4).prop_map(Op::Call),
        2 => (0u8..4, any::<bool>()).prop_map(|(c, s)| Op::Result(c, s)),
        1 => (0u8..16).prop_map(Op::Retract),
        1 => Just(Op::Rollover),
        1 => Just(Op::Clear),
        3 => Just(Op::Step),
    ]
}

fn row(v: serde_json::Value) -> NewRow {
    NewRow::from_value(0, v).unwrap_or_else(|e| panic!("{e}"))
}

/// Everything the fold says about the current window, comparable.
fn state(f: &WindowFold) -> String {
    format!(
        "window={} prev={:?} kind={} floor={} visible={:?} items={} claims={:?} open={:?} nc={} user={:?} last={}",
        f.window(),
        f.previous_window(),
        f.window_kind_name(),
        f.floor_seq(),
        f.visible().collect::<Vec<_>>(),
        f.item_count(),
        f.claims(),
        f.open_calls().iter().map(|c| (&c.call_id, &c.name, c.seq)).collect::<Vec<_>>(),
        f.new_context_requested(),
        f.last_user_seq().filter(|s| !f.is_retracted(*s)),
        f.last_seq(),
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn an_incremental_fold_equals_a_fresh_one(ops in prop::collection::vec(op(), 1..40)) {
        let dir = std::env::temp_dir().join(format!(
            "ctxb-fold-prop-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        let ws = Ws(dir);
        let h = History::open(&ws.0, OpenOptions { durability: Durability::None, ..OpenOptions::default() })
            .unwrap_or_else(|e| panic!("{e}"));
        let mut fold = WindowFold::new();
        let mut rollovers = 0;
        for op in ops {
            let last = fold.last_seq().max(1);
            let written = match op {
                Op::User => h.append(vec![NewRow::text("message", "user", "u")]).map(|_| ()),
                Op::Assistant => h.append(vec![NewRow::text("message", "assistant", "a")]).map(|_| ()),
                Op::Advisory(s) => {
                    let stage = ["warning", "handoff", "final", "continue"][usize::from(s)];
                    h.append(vec![row(json!({"kind": "advisory", "role": "user", "meta": {"stage": stage}}))]).map(|_| ())
                }
                Op::Call(c) => h.append(vec![row(json!({"kind": "message", "role": "assistant",
                    "parts": [{"type": "tool_call", "id": format!("c{c}"), "name": "new_context"}]}))]).map(|_| ()),
                Op::Result(c, scheduled) => {
                    let output = if scheduled { json!({"status": "scheduled"}) } else { json!("[interrupted]") };
                    h.append(vec![row(json!({"kind": "message", "role": "tool",
                        "parts": [{"type": "tool_result", "call_id": format!("c{c}"), "name": "new_context", "output": output}]}))]).map(|_| ())
                }
                Op::Retract(back) => {
                    let target = last.saturating_sub(u64::from(back)).max(1);
                    h.append(vec![row(json!({"kind": "retraction", "role": "system", "meta": {"retracts": target}}))]).map(|_| ())
                }
                Op::Rollover => {
                    rollovers += 1;
                    h.rollover(RolloverSpec {
                        rollover_id: format!("r{rollovers}"),
                        reason: "manual".into(),
                        lead_in: "lead".into(),
                        ..RolloverSpec::default()
                    }).map(|_| ())
                }
                Op::Clear => h.clear_soft().map(|_| ()),
                Op::Step => fold.catch_up(&h).map(|_| ()),
            };
            prop_assert!(written.is_ok(), "{written:?}");
        }
        fold.catch_up(&h).unwrap_or_else(|e| panic!("{e}"));
        let mut fresh = WindowFold::new();
        fresh.catch_up(&h).unwrap_or_else(|e| panic!("{e}"));
        prop_assert_eq!(state(&fold), state(&fresh));
        let windows = h.windows().unwrap_or_else(|e| panic!("{e}"));
        let current = windows.last().map(|w| (w.window_id.clone(), w.item_count));
        prop_assert_eq!(current, Some((fold.window().to_string(), fold.item_count())).filter(|_| fold.last_seq() > 0));
    }
}
