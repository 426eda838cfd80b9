//! A Rust host on a PostgreSQL conversation: the same `Store` as the file store, cursors
//! that page on any host. Run with `CTXBUDGET_PG_URL=postgresql://… cargo run --example
//! pg_host --features postgres`.
use std::sync::Arc;

use ctxbudget::pg::{PgOptions, PgStore};
use ctxbudget::scan::{ScanOptions, SessionHistoryTool};
use ctxbudget::transcript::{NewRow, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let Ok(url) = std::env::var("CTXBUDGET_PG_URL") else {
        eprintln!(
            "set CTXBUDGET_PG_URL to a postgresql:// URL (scripts/pg-cluster start makes one)"
        );
        return Ok(());
    };
    let store = PgStore::connect(&url, PgOptions::default())?;
    let chat = Arc::new(store.history("customer-42")?);
    let user = NewRow::text("message", "user", "Where is the deploy key?");
    chat.append_rows(&[user], None)?;
    let key = store.cursor_key()?;
    let tool = SessionHistoryTool::over_pg(Arc::clone(&chat), key, ScanOptions::default());
    println!(
        "{}",
        tool.call_json(r#"{"action": "search", "query": "deploy key"}"#)
    );
    Ok(())
}
