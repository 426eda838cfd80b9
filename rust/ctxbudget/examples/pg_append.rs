//! The Rust side of `benches/pg_append.py`: times appends through `ctxbudget::pg` (one
//! conversation on the server) and through the file store (`ctxbudget::store`, a
//! temporary workspace, `fsync` durability), in this one process.
//!
//! `cargo run --profile quick -p ctxbudget --features postgres --example pg_append -- URL`
//! then, on standard input, lines `STORE ROWS COUNT` (`STORE` = `pg` or `file`): it appends
//! COUNT batches of ROWS rows and prints one line with the COUNT latencies in microseconds.
//! A row holds the text the harness gives in `CTXBUDGET_BENCH_TEXT`. It prints `ready` once
//! connected.
use std::io::{BufRead, Write};
use std::time::Instant;

use ctxbudget::pg::{NewRow, PgOptions, PgStore};
use ctxbudget::store::OpenOptions;
use ctxbudget::transcript;
use ctxbudget::transcript::History;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: pg_append POSTGRESQL_URL (then `pg|file ROWS COUNT` lines on stdin)")?;
    let text = std::env::var("CTXBUDGET_BENCH_TEXT").unwrap_or_else(|_| "hello".to_string());
    let message = serde_json::json!({"role": "user", "content": text}).to_string();
    let options = PgOptions {
        schema: Some("ctxbudget_bench".into()),
        ..PgOptions::default()
    };
    let store = PgStore::connect(&url, options)?;
    let chat = store.open(&format!("bench-{}", std::process::id()))?;
    let ws = std::env::temp_dir().join(format!("ctxbudget-bench-{}", std::process::id()));
    let file = History::open(&ws, OpenOptions::default())?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let (Some(which), Some(Ok(rows)), Some(Ok(count))) = (
            words.first().copied(),
            words.get(1).map(|w| w.parse::<usize>()),
            words.get(2).map(|w| w.parse::<usize>()),
        ) else {
            return Err(format!("expected `pg|file ROWS COUNT`, got {line:?}").into());
        };
        let mut micros = Vec::with_capacity(count);
        for _ in 0..count {
            let start = match which {
                "pg" => {
                    let batch = (0..rows)
                        .map(|_| NewRow::new(message.as_bytes().to_vec()))
                        .collect();
                    let start = Instant::now();
                    chat.append(batch)?;
                    start
                }
                "file" => {
                    let batch = (0..rows)
                        .map(|_| transcript::NewRow::text("message", "user", &text))
                        .collect();
                    let start = Instant::now();
                    file.append(batch)?;
                    start
                }
                other => return Err(format!("unknown store {other:?}").into()),
            };
            micros.push(start.elapsed().as_micros().to_string());
        }
        writeln!(out, "{}", micros.join(" "))?;
        out.flush()?;
    }
    store.delete(chat.id())?;
    drop(file);
    std::fs::remove_dir_all(&ws)?;
    Ok(())
}
