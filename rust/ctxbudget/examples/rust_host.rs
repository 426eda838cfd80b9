//! A Rust host running the whole token-budget ladder with the core crate alone: count each
//! request, evaluate the budget with claims derived from the transcript, publish the
//! advisory rows, roll over to a fresh window with a lead-in, then find a first-window
//! fact through `session_history`. No Python anywhere.
use std::sync::Arc;

use ctxbudget::budget::{Action, Budget, Claims};
use ctxbudget::history::{History, NewRow, OpenOptions, RolloverSpec};
use ctxbudget::scan::SessionHistoryTool;
use ctxbudget::tokens::request::RequestCount;
use ctxbudget::Encoding;
use serde_json::Value;

const SYSTEM: &str = "You are a careful release engineer.";

/// The claims of the current window: its durably published advisory rows.
fn claims(history: &History) -> Result<Claims, Box<dyn std::error::Error>> {
    let current = history.current_window()?;
    let mut claims = Claims::default();
    for row in history.rows()? {
        if row.window != current {
            continue;
        }
        let value: Value = serde_json::from_slice(&row.raw)?;
        if value["kind"] == "advisory" {
            if let Some(Ok(stage)) = value["meta"]["stage"].as_str().map(str::parse::<Action>) {
                claims = claims.claim(stage);
            }
        }
    }
    Ok(claims)
}

/// The next request: the system text and every message row of the current window.
fn projected(history: &History, enc: &Encoding) -> Result<u64, Box<dyn std::error::Error>> {
    let current = history.current_window()?;
    let mut request = RequestCount::new(enc);
    request.system(SYSTEM);
    for row in history.rows()? {
        let value: Value = serde_json::from_slice(&row.raw)?;
        if row.window == current && matches!(value["kind"].as_str(), Some("message" | "lead_in")) {
            request.message(value["parts"][0]["text"].as_str().unwrap_or(""));
        }
    }
    Ok(u64::try_from(request.total())?)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let enc = Encoding::for_model("gpt-4o")?;
    // A deliberately small window so that a few steps climb the whole ladder.
    let budget = Budget::new(24_000, 0.4, None)?;
    println!(
        "window 24,000: warning at {}, handoff at {}, final at {}, forced rollover at {}",
        budget.warning_at(),
        budget.handoff_target(),
        budget.final_at(),
        budget.usable_limit()
    );

    let ws = std::env::temp_dir().join(format!("ctxbudget-rust-host-{}", std::process::id()));
    let history = Arc::new(History::open(&ws, OpenOptions::default())?);
    history.append(vec![
        NewRow::text("message", "user", "Where does the deploy key live?"),
        NewRow::text("message", "assistant", "In vault/prod-7731."),
    ])?;

    let log_line = "build step ok; artifacts uploaded; checksums verified. ".repeat(40);
    for step in 1.. {
        let decision = budget.evaluate(projected(&history, &enc)?, claims(&history)?, true);
        if decision.action != Action::Continue {
            let (tokens, action) = (decision.projected, decision.action);
            println!("step {step}: {tokens} tokens -> {action}");
        }
        match decision.action {
            Action::Warning | Action::Handoff | Action::Final => {
                let text = format!("Context budget advisory: {}.", decision.action);
                let advisory = NewRow::text("advisory", "system", &text)
                    .with_meta("stage", decision.action.as_str())
                    .with_meta("projected", decision.projected)
                    .with_meta("budget_tokens", budget.usable_limit());
                history.append(vec![advisory])?;
            }
            Action::Rollover => {
                let window = history.rollover(RolloverSpec {
                    rollover_id: format!("rollover-{step}"),
                    reason: "usable_limit".into(),
                    lead_in: "New context window: read your checkpoint in /memories/session/ \
                              first, then use session_history for earlier windows."
                        .into(),
                    ..RolloverSpec::default()
                })?;
                println!("rolled over: now in window {window}");
                break;
            }
            Action::Block => return Err("blocked at the usable limit".into()),
            Action::Continue => {}
        }
        // The agent works: a tool-heavy step adds a long assistant message.
        history.append(vec![NewRow::text("message", "assistant", &log_line)])?;
    }

    let fresh = budget.evaluate(projected(&history, &enc)?, claims(&history)?, true);
    assert_eq!(
        fresh.action,
        Action::Continue,
        "a fresh window starts below every rung"
    );

    let tool = SessionHistoryTool::new(history.clone());
    let found =
        tool.call_json(r#"{"action": "search", "query": "deploy key", "window_id": "w:0"}"#);
    println!("{found}");
    assert!(found.contains("deploy key"));
    std::fs::remove_dir_all(&ws)?;
    Ok(())
}
