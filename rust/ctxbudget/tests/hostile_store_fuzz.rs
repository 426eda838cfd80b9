//! Adversarial checks of the file store, round 2: `fuzz_scan` on mutations of real store files.
#![cfg(all(feature = "failpoints", feature = "fuzzing"))]

use std::fs;
use std::sync::Arc;

use ctxbudget::store::{Durability, OpenOptions};
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{fuzz_scan, History};
use ctxbudget::transcript::{RolloverSpec, Transcript};
use proptest::prelude::*;

fn base() -> (Vec<u8>, Vec<u8>, Vec<u8>) {
    let dir = std::env::temp_dir().join(format!("ctxb-adv2-fuzz-{}", std::process::id()));
    let _ = fs::remove_dir_all(&dir);
    fs::create_dir_all(dir.join("history")).unwrap();
    let h = Arc::new(
        History::open(
            &dir,
            OpenOptions {
                durability: Durability::None,
                ..OpenOptions::default()
            },
        )
        .unwrap(),
    );
    h.append(vec![
        NewRow::text("message", "user", "a"),
        NewRow::text("message", "user", "b"),
    ])
    .unwrap();
    h.clear_soft().unwrap();
    h.append(vec![NewRow::text("message", "user", "c")])
        .unwrap();
    h.rollover(RolloverSpec {
        rollover_id: "r1".into(),
        reason: "usable_limit".into(),
        lead_in: "lead".into(),
        ..RolloverSpec::default()
    })
    .unwrap();
    h.rotate().unwrap();
    h.append(vec![NewRow::text("message", "user", "d")])
        .unwrap();
    h.quarantine_seq(6, None).ok();
    h.append(vec![NewRow::text("message", "user", "e")])
        .unwrap();
    let r = |n: &str| fs::read(dir.join("history").join(n)).unwrap_or_default();
    let out = (r("chat.jsonl"), r("chat-archive.jsonl"), r("receipt.json"));
    let _ = fs::remove_dir_all(&dir);
    out
}

#[derive(Clone, Debug)]
enum Mut {
    Flip(u8, u16, u8),
    Cut(u8, u16),
    Splice(u8, u16, u8),
    Dup(u8, u16, u16),
    ReceiptNum(u8, u64),
}

const PIECES: [&str; 10] = [
    "\n",
    "{\"batch\":{\"epoch\":1,\"first\":1,\"last\":1}}\n",
    "{\"commit\":{\"epoch\":1,\"first\":1,\"last\":1,\"len\":0,\"crc\":0}}\n",
    "{\"seq\":18446744073709551615,\"kind\":\"boundary\",\"meta\":{\"boundary_kind\":\"reset\"}}\n",
    "{\"seq\":0,\"kind\":\"retraction\",\"meta\":{\"retracts\":18446744073709551615}}\n",
    "\"boundary\" \"reset\"\n",
    "{\"seq\":3,\"seq\":2,\"kind\":\"message\"}\n",
    "[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\n",
    "{\"seq\":5,\"kind\":\"message\",\"x\":\"\\ud800\"}\n",
    "\r\n\u{0}",
];

fn mutation() -> impl Strategy<Value = Mut> {
    prop_oneof![
        (0u8..3, any::<u16>(), 0u8..8).prop_map(|(f, a, b)| Mut::Flip(f, a, b)),
        (0u8..3, any::<u16>()).prop_map(|(f, a)| Mut::Cut(f, a)),
        (0u8..3, any::<u16>(), 0u8..10).prop_map(|(f, a, p)| Mut::Splice(f, a, p)),
        (0u8..2, any::<u16>(), any::<u16>()).prop_map(|(f, a, b)| Mut::Dup(f, a, b)),
        (
            0u8..12,
            prop_oneof![
                Just(0u64),
                Just(u64::MAX),
                Just(1u64 << 63),
                any::<u64>(),
                0u64..4000
            ]
        )
            .prop_map(|(k, v)| Mut::ReceiptNum(k, v)),
    ]
}

fn apply(files: &mut [Vec<u8>; 3], m: &Mut) {
    let at = |len: usize, x: u16| {
        if len == 0 {
            0
        } else {
            usize::from(x) % (len + 1)
        }
    };
    match m {
        Mut::Flip(f, a, b) => {
            let v = &mut files[usize::from(*f)];
            if !v.is_empty() {
                let i = usize::from(*a) % v.len();
                v[i] ^= 1 << b;
            }
        }
        Mut::Cut(f, a) => {
            let v = &mut files[usize::from(*f)];
            let i = at(v.len(), *a);
            v.truncate(i);
        }
        Mut::Splice(f, a, p) => {
            let v = &mut files[usize::from(*f)];
            let i = at(v.len(), *a);
            let piece = PIECES[usize::from(*p)].as_bytes().to_vec();
            v.splice(i..i, piece);
        }
        Mut::Dup(f, a, b) => {
            let v = &mut files[usize::from(*f)];
            let (i, j) = (at(v.len(), *a), at(v.len(), *b));
            let (i, j) = (i.min(j), i.max(j));
            let piece = v[i..j].to_vec();
            v.extend(piece);
        }
        Mut::ReceiptNum(k, val) => {
            let Ok(mut r) = serde_json::from_slice::<serde_json::Value>(files[2].trim_ascii())
            else {
                return;
            };
            let paths: [&[&str]; 12] = [
                &["seq"],
                &["committed_end"],
                &["floor"],
                &["epoch"],
                &["anchor_crc"],
                &["archive_check", "len"],
                &["archive_check", "crc"],
                &["append", "end"],
                &["append", "last"],
                &["append", "crc"],
                &["rotation", "archive_before"],
                &["rotation", "moved"],
            ];
            let p = paths[usize::from(*k)];
            if p.len() == 2 {
                if r.get(p[0]).is_none_or(|x| !x.is_object()) {
                    r[p[0]] = serde_json::json!({"end":0,"last":0,"crc":0,"len":0,"archive_before":0,"moved":0});
                }
                r[p[0]][p[1]] = serde_json::json!(val);
            } else {
                r[p[0]] = serde_json::json!(val);
            }
            if *k >= 7 {
                r["state"] = serde_json::json!("pending");
            }
            files[2] = serde_json::to_vec(&r).unwrap();
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 2000, failure_persistence: None, .. ProptestConfig::default() })]
    #[test]
    fn fuzz_scan_never_panics_on_mutated_files(muts in proptest::collection::vec(mutation(), 0..6)) {
        static BASE: std::sync::OnceLock<(Vec<u8>, Vec<u8>, Vec<u8>)> = std::sync::OnceLock::new();
        let b = BASE.get_or_init(base);
        let mut files = [b.0.clone(), b.1.clone(), b.2.clone()];
        for m in &muts { apply(&mut files, m); }
        fuzz_scan(&files[0], &files[1], &files[2]);
    }
}
