//! The PostgreSQL store's side of `benches/pg_append.py`: times appends to one
//! conversation through `ctxbudget::pg`.
//!
//! `cargo run --profile quick -p ctxbudget --features postgres --example pg_append -- URL`
//! then, on standard input, lines `ROWS COUNT`: it appends COUNT batches of ROWS rows (each
//! the JSON message the harness gives in `CTXBUDGET_BENCH_ITEM`) and prints one line with
//! the COUNT latencies in microseconds. It prints `ready` once connected.
use std::io::{BufRead, Write};
use std::time::Instant;

use ctxbudget::pg::{NewRow, PgError, PgOptions, PgStore};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let url = std::env::args()
        .nth(1)
        .ok_or("usage: pg_append POSTGRESQL_URL (then `ROWS COUNT` lines on stdin)")?;
    let item = std::env::var("CTXBUDGET_BENCH_ITEM")
        .unwrap_or_else(|_| r#"{"role":"user","content":"hello"}"#.to_string());
    let options = PgOptions {
        schema: Some("ctxbudget_bench".into()),
        ..PgOptions::default()
    };
    let store = PgStore::connect(&url, options)?;
    let chat = store.open(&format!("bench-{}", std::process::id()))?;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready")?;
    out.flush()?;
    for line in std::io::stdin().lock().lines() {
        let line = line?;
        let mut words = line.split_whitespace().map(str::parse::<usize>);
        let (Some(Ok(rows)), Some(Ok(count))) = (words.next(), words.next()) else {
            return Err(format!("expected `ROWS COUNT`, got {line:?}").into());
        };
        let mut micros = Vec::with_capacity(count);
        for _ in 0..count {
            let batch: Vec<NewRow> = (0..rows)
                .map(|_| NewRow::new(item.as_bytes().to_vec()))
                .collect();
            let start = Instant::now();
            chat.append(batch).map_err(|e: PgError| e.to_string())?;
            micros.push(start.elapsed().as_micros().to_string());
        }
        writeln!(out, "{}", micros.join(" "))?;
        out.flush()?;
    }
    store.delete(chat.id())?;
    Ok(())
}
