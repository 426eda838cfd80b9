//! Measures the cost of one small append (durability none) from Rust.
use ctxbudget::history::{Durability, History, NewRow, OpenOptions};
use std::time::Instant;

fn main() {
    let ws = std::env::temp_dir().join(format!("ctxb-prof-{}", std::process::id()));
    let options = OpenOptions {
        durability: if std::env::args().any(|a| a == "fsync") {
            Durability::Fsync
        } else {
            Durability::None
        },
        ..OpenOptions::default()
    };
    let h = History::open(&ws, options).unwrap_or_else(|e| panic!("{e}"));
    let text = "x".repeat(2000);
    let n = 2000;
    let start = Instant::now();
    for _ in 0..n {
        h.append(vec![NewRow::text("message", "user", &text)])
            .unwrap_or_else(|e| panic!("{e}"));
    }
    println!(
        "{:.1} us per append",
        start.elapsed().as_secs_f64() * 1e6 / n as f64
    );
    let _ = std::fs::remove_dir_all(&ws);
}
