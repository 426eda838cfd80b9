//! Measures opening a large transcript: the full load that scans, checks and indexes
//! every line.
//!
//! `cargo run --release -p ctxbudget --example open_profile -- [MIB]` fills a store in a
//! temporary directory with MIB mebibytes (default 128) of 20-row batches of 1 KiB rows,
//! then opens it five times and prints each time.
use ctxbudget::store::{Durability, OpenOptions};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use std::time::Instant;

fn main() {
    let mib: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(128);
    let dir = std::env::temp_dir().join(format!("ctxb-open-{}", std::process::id()));
    let options = || OpenOptions {
        durability: Durability::None,
        ..OpenOptions::default()
    };
    {
        let h = History::open(&dir, options()).unwrap_or_else(|e| panic!("{e}"));
        let text = "lorem ipsum dolor sit amet ".repeat(40);
        for _ in 0..(mib << 20) / (1_200 * 20) {
            h.append(
                (0..20)
                    .map(|_| NewRow::text("message", "user", &text))
                    .collect(),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let bytes = std::fs::metadata(dir.join("history").join("chat.jsonl")).map_or(0, |m| m.len());
    for _ in 0..5 {
        let t = Instant::now();
        let h = History::open(&dir, options()).unwrap_or_else(|e| panic!("{e}"));
        let windows = h.windows().map_or(0, |w| w.len());
        println!(
            "open {:.1} MiB ({windows} window): {:.3} s",
            bytes as f64 / 1048576.0,
            t.elapsed().as_secs_f64()
        );
    }
    let _ = std::fs::remove_dir_all(&dir);
}
