//! Measures one small append from Rust: p50 and p99 in microseconds.
//!
//! `cargo run --release -p ctxbudget --example append_profile -- [fsync] [MIB] [ROWS]`
//! appends single rows of 2,000 characters (or batches of ROWS) to a store prefilled
//! with MIB mebibytes, with durability `none` unless `fsync` is given; then the floor, a
//! bare write (and fdatasync) of as many bytes to a plain file, for comparison.
use ctxbudget::store::{Durability, OpenOptions};
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use std::time::Instant;

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let fsync = args.iter().any(|a| a == "fsync");
    let numbers: Vec<usize> = args.iter().filter_map(|a| a.parse().ok()).collect();
    let prefill_mib = numbers.first().copied().unwrap_or(0);
    let batch = numbers.get(1).copied().unwrap_or(1).max(1);
    let ws = std::env::temp_dir().join(format!("ctxb-prof-{}", std::process::id()));
    let text = "x".repeat(2000);
    let rows = |n: usize| -> Vec<NewRow> {
        (0..n)
            .map(|_| NewRow::text("message", "user", &text))
            .collect()
    };
    {
        let filler = History::open(&ws, OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
        let per_batch = 200;
        for _ in 0..(prefill_mib << 20) / (2_100 * per_batch) {
            filler
                .append(rows(per_batch))
                .unwrap_or_else(|e| panic!("{e}"));
        }
    }
    let options = OpenOptions {
        durability: if fsync {
            Durability::Fsync
        } else {
            Durability::None
        },
        ..OpenOptions::default()
    };
    let h = History::open(&ws, options).unwrap_or_else(|e| panic!("{e}"));
    let n = if fsync { 500 } else { 3000 };
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let batch_rows = rows(batch);
        let start = Instant::now();
        h.append(batch_rows).unwrap_or_else(|e| panic!("{e}"));
        times.push(start.elapsed().as_secs_f64() * 1e6);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "{} MiB, {batch} row(s), {}: p50 {:.1} us, p99 {:.1} us",
        prefill_mib,
        if fsync { "fsync" } else { "none" },
        times[n / 2],
        times[n * 99 / 100]
    );
    // The floor: as many bytes as one batch (a slice of the transcript) appended with one
    // write, and fdatasync, to a plain file in the same directory.
    let line = {
        use std::io::Read;
        let mut l = Vec::with_capacity(2_200 * batch);
        std::fs::File::open(h.paths().chat.as_path())
            .and_then(|f| f.take(2_200 * batch as u64).read_to_end(&mut l))
            .unwrap_or_else(|e| panic!("{e}"));
        l
    };
    let mut bare = std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(ws.join("bare.jsonl"))
        .unwrap_or_else(|e| panic!("{e}"));
    let mut floor = Vec::with_capacity(n);
    for _ in 0..n {
        use std::io::Write;
        let start = Instant::now();
        bare.write_all(&line).unwrap_or_else(|e| panic!("{e}"));
        if fsync {
            bare.sync_data().unwrap_or_else(|e| panic!("{e}"));
        }
        floor.push(start.elapsed().as_secs_f64() * 1e6);
    }
    floor.sort_by(f64::total_cmp);
    println!(
        "bare write{} of as many bytes: p50 {:.1} us, p99 {:.1} us",
        if fsync { " + fdatasync" } else { "" },
        floor[n / 2],
        floor[n * 99 / 100]
    );
    let _ = std::fs::remove_dir_all(&ws);
}
