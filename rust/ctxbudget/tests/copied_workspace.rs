//! A copied or restored workspace (new inodes and times, the same bytes) is not damaged:
//! `verify` reports the receipt `copied` and ok; the next append adopts the copy under a
//! new epoch; a copy whose bytes differ from what the receipt vouches for is not ok.
use std::fs;
use std::path::{Path, PathBuf};

use ctxbudget::store::{Durability, OpenOptions, ReceiptCheck, ReceiptRead};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;

struct Dir(PathBuf);

impl Dir {
    fn new(name: &str) -> Dir {
        let dir = std::env::temp_dir().join(format!(
            "ctxb-copy-{name}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.as_nanos())
                .unwrap_or(0)
        ));
        fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
        Dir(dir)
    }
}

impl Drop for Dir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

fn open(ws: &Path) -> History {
    let options = OpenOptions {
        durability: Durability::None,
        ..OpenOptions::default()
    };
    History::open(ws, options).unwrap_or_else(|e| panic!("{e}"))
}

fn epoch(h: &History) -> u64 {
    match h.receipt().unwrap_or_else(|e| panic!("{e}")) {
        ReceiptRead::Valid(r) => r.epoch,
        other => panic!("no valid receipt: {other:?}"),
    }
}

/// Copies the workspace's `history/` files (new inodes, new times) to `to`.
fn copy_history(from: &Path, to: &Path) {
    fs::create_dir_all(to.join("history")).unwrap_or_else(|e| panic!("{e}"));
    for entry in fs::read_dir(from.join("history")).unwrap_or_else(|e| panic!("{e}")) {
        let entry = entry.unwrap_or_else(|e| panic!("{e}"));
        if entry.path().is_file() {
            fs::copy(entry.path(), to.join("history").join(entry.file_name()))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
}

fn filled(dir: &Dir) -> PathBuf {
    let ws = dir.0.join("ws");
    let h = open(&ws);
    for i in 0..5 {
        h.append(vec![NewRow::text("message", "user", &format!("m{i}"))])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    ws
}

#[test]
fn a_copy_verifies_ok_and_the_next_append_adopts_it() {
    let dir = Dir::new("ok");
    let ws = filled(&dir);
    let before = epoch(&open(&ws));
    let copy = dir.0.join("copy");
    copy_history(&ws, &copy);

    let h = open(&copy);
    let report = h.verify().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.file().map(|f| f.receipt), Some(ReceiptCheck::Copied));
    assert!(report.ok, "{report:?}");
    assert_eq!(epoch(&h), before, "verify and open adopt nothing");

    h.append(vec![NewRow::text("message", "user", "on the copy")])
        .unwrap_or_else(|e| panic!("{e}"));
    assert_ne!(
        epoch(&h),
        before,
        "the append that adopts a copy is not a pure one"
    );
    let report = h.verify().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.file().map(|f| f.receipt), Some(ReceiptCheck::Stable));
    assert!(report.ok);
}

#[test]
fn a_copy_with_other_bytes_is_not_ok() {
    let dir = Dir::new("changed");
    let ws = filled(&dir);
    let copy = dir.0.join("copy");
    copy_history(&ws, &copy);
    // One more whole, valid batch than the receipt vouches for (a backup mixing moments).
    open(&ws)
        .append(vec![NewRow::text("message", "user", "later")])
        .unwrap_or_else(|e| panic!("{e}"));
    fs::copy(
        ws.join("history/chat.jsonl"),
        copy.join("history/chat.jsonl"),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let report = History::open(
        &copy,
        OpenOptions {
            durability: Durability::None,
            recover_on_open: false,
            ..OpenOptions::default()
        },
    )
    .and_then(|h| h.verify())
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.file().map(|f| f.receipt), Some(ReceiptCheck::Stale));
    assert!(!report.ok);
}
