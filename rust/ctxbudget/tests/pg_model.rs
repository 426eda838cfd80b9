//! A state-machine property test of the PostgreSQL store against a model (feature
//! `postgres`; skipped without `CTXBUDGET_PG_URL`): random appends (plain, conditional with
//! the right or a stale last seq, under batch ids that repeat), floors, rotations, reads
//! from any seq, and a second handle on the same conversation (another host).
//!
//! Invariants after every step: results equal the model's (seqs, conflicts, replays, rows
//! read); seqs gapless from 1; the floor is the newest floor row ever appended and never
//! goes down; the epoch changes exactly when a rotation archived something.
#![cfg(feature = "postgres")]

mod pg_common;

use std::collections::HashMap;

use ctxbudget::pg::{AppendOptions, NewRow, PgConversation, PgError};
use pg_common::*;
use proptest::prelude::*;

#[derive(Clone, Debug)]
enum Op {
    /// Rows (true = a floor), a batch id out of a few, and a condition: `None`, the right
    /// last seq, or the last seq minus k (stale when k > 0 and the store is not empty).
    Append(Vec<bool>, Option<u8>, Option<u8>),
    /// Rotate below (last seq + 1) × per-mille / 1000.
    Rotate(u16),
    /// Read from (last seq + 2) × per-mille / 1000, at most `limit` rows.
    Read(u16, Option<u8>),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        6 => (
            prop::collection::vec(prop::bool::weighted(0.15), 1..5),
            prop::option::weighted(0.4, 0u8..4),
            prop::option::weighted(0.4, 0u8..3),
        )
            .prop_map(|(rows, id, cond)| Op::Append(rows, id, cond)),
        1 => (0u16..=1000).prop_map(Op::Rotate),
        2 => ((0u16..=1000), prop::option::of(0u8..6)).prop_map(|(at, l)| Op::Read(at, l)),
    ]
}

#[derive(Default)]
struct Model {
    /// (body, floor) per seq - 1.
    rows: Vec<(Vec<u8>, bool)>,
    floor: u64,
    archived_before: u64,
    /// batch id → (first, last).
    batches: HashMap<String, (u64, u64)>,
}

fn run(ops: &[Op], handles: &[PgConversation; 2], case: u64) {
    let mut m = Model {
        archived_before: 1,
        ..Model::default()
    };
    let mut epoch = handles[0].state().unwrap().epoch;
    for (step, op) in ops.iter().enumerate() {
        let c = &handles[step % 2];
        let last = m.rows.len() as u64;
        match op {
            Op::Append(floors, id, cond) => {
                let id = id.map(|i| format!("b{i}"));
                let expected = cond.map(|k| last.saturating_sub(u64::from(k)));
                let body = |seq: u64, i: usize| format!("{case}/{step}/{i}@{seq}").into_bytes();
                let options = AppendOptions {
                    expected_last_seq: expected,
                    batch_id: id.clone(),
                };
                let got = c.append_with(&options, |first| {
                    floors
                        .iter()
                        .enumerate()
                        .map(|(i, f)| NewRow {
                            body: body(first, i),
                            floor: *f,
                        })
                        .collect()
                });
                let replay = id.as_ref().and_then(|i| m.batches.get(i)).copied();
                match (replay, expected) {
                    (Some((first, end)), _) if end - first + 1 == floors.len() as u64 => {
                        let a = got.unwrap();
                        assert!(a.replayed);
                        assert_eq!((a.first_seq, a.last_seq), (first, end));
                    }
                    (Some(_), _) => {
                        assert!(matches!(got, Err(PgError::BatchIdReused { .. })), "{got:?}")
                    }
                    (None, Some(e)) if e != last => match got {
                        Err(PgError::Conflict {
                            expected_last_seq,
                            last_seq,
                            ..
                        }) => assert_eq!((expected_last_seq, last_seq), (e, last)),
                        other => panic!("expected a conflict, got {other:?}"),
                    },
                    (None, _) => {
                        let a = got.unwrap();
                        assert!(!a.replayed);
                        let first = last + 1;
                        assert_eq!(a.first_seq, first);
                        assert_eq!(a.last_seq, last + floors.len() as u64);
                        assert_eq!(a.epoch, epoch, "an append never changes the epoch");
                        for (i, f) in floors.iter().enumerate() {
                            m.rows.push((body(first, i), *f));
                            if *f {
                                m.floor = first + i as u64;
                            }
                        }
                        if let Some(id) = id {
                            m.batches.insert(id, (a.first_seq, a.last_seq));
                        }
                    }
                }
            }
            Op::Rotate(share) => {
                let before = (last + 1) * u64::from(*share) / 1000;
                let got = c.rotate(before).unwrap();
                let target = before.min(last + 1);
                if target > m.archived_before {
                    let new = got.expect("something was archived: a new epoch");
                    assert_ne!(new, epoch);
                    epoch = new;
                    m.archived_before = target;
                } else {
                    assert_eq!(got, None, "nothing new archived: nothing changes");
                }
            }
            Op::Read(at, limit) => {
                let from = (last + 2) * u64::from(*at) / 1000;
                let got = c.rows_since(from, limit.map(usize::from)).unwrap();
                let start = from.max(1);
                let want: Vec<u64> = (start..=last)
                    .take(limit.map_or(usize::MAX, usize::from))
                    .collect();
                assert_eq!(got.iter().map(|r| r.seq).collect::<Vec<_>>(), want);
                for r in &got {
                    let (body, floor) = &m.rows[(r.seq - 1) as usize];
                    assert_eq!((&r.body, r.floor), (body, *floor));
                    assert_eq!(r.archived, r.seq < m.archived_before);
                }
            }
        }
        let st = handles[(step + 1) % 2].state().unwrap();
        assert_eq!(st.last_seq, m.rows.len() as u64);
        assert_eq!(st.floor_seq, m.floor);
        assert_eq!(st.archived_before, m.archived_before);
        assert_eq!(st.epoch, epoch);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 24, ..ProptestConfig::default() })]

    #[test]
    fn the_store_behaves_like_its_model(ops in prop::collection::vec(op(), 1..40)) {
        let Some(url) = url() else { return Ok(()) };
        // Two stores (two pools): two hosts on one conversation.
        let id = unique("model");
        let a = store(&url).open(&id).unwrap();
        let b = store(&url).open(&id).unwrap();
        run(&ops, &[a, b], ops.len() as u64);
    }
}
