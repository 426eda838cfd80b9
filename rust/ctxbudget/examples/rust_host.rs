//! A Rust host using the core crate without Python: count tokens, keep a transcript,
//! roll over to a fresh window and read the earlier one back with `session_history`.
use std::sync::Arc;

use ctxbudget::history::{History, NewRow, OpenOptions, RolloverSpec};
use ctxbudget::scan::SessionHistory;
use ctxbudget::Encoding;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let enc = Encoding::for_model("gpt-4o")?;
    let question = "Where does the deploy key live?";
    println!("{} tokens: {question}", enc.count(question));

    let ws = std::env::temp_dir().join(format!("ctxbudget-rust-host-{}", std::process::id()));
    let history = Arc::new(History::open(&ws, OpenOptions::default())?);
    history.append(vec![
        NewRow::text("message", "user", question),
        NewRow::text("message", "assistant", "In vault/prod-7731."),
    ])?;
    let window = history.rollover(RolloverSpec {
        rollover_id: "example-1".into(),
        reason: "usable_limit".into(),
        lead_in: "New context window; read your checkpoint, then use session_history.".into(),
        ..RolloverSpec::default()
    })?;
    println!("now in window {window}");

    let tool = SessionHistory::new(history.clone());
    let found =
        tool.call_json(r#"{"action": "search", "query": "deploy key", "window_id": "w:0"}"#);
    println!("{found}");
    assert!(found.contains("deploy key"));
    std::fs::remove_dir_all(&ws)?;
    Ok(())
}
