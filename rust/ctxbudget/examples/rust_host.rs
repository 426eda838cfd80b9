//! A Rust host running the whole token-budget ladder with the core crate alone: count each
//! request, evaluate the budget with the claims the window fold read from the transcript,
//! publish the advisory rows, roll over to a fresh window with a lead-in rendered from
//! the window ID the store assigns, then find a first-window fact through
//! `session_history`. No Python anywhere.
use std::sync::Arc;

use ctxbudget::budget::{Action, Budget};
use ctxbudget::scan::SessionHistoryTool;
use ctxbudget::store::OpenOptions;
use ctxbudget::tokens::request::RequestCount;
use ctxbudget::transcript::History;
use ctxbudget::transcript::NewRow;
use ctxbudget::transcript::{LeadIn, RolloverSpec, Row, Transcript, WindowFold};
use ctxbudget::Encoding;

const SYSTEM: &str = "You are a careful release engineer.";

/// The next request: the system text and every row of the current window a request
/// carries (the fold says which, retractions applied), counted from the rows kept.
fn projected(fold: &WindowFold, rows: &[Row], enc: &Encoding) -> u64 {
    let mut request = RequestCount::new(enc);
    request.system(SYSTEM);
    for seq in fold.visible() {
        if let Some(row) = rows.iter().find(|r| r.seq == seq) {
            request.message(row.role.as_str(), &row.text());
        }
    }
    u64::try_from(request.total()).unwrap_or(u64::MAX)
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

    // The fold reads only the rows appended since its last step; the host keeps the
    // rows of the current window to build requests from.
    let mut fold = WindowFold::new();
    let mut rows: Vec<Row> = Vec::new();
    let log_line = "build step ok; artifacts uploaded; checksums verified. ".repeat(40);
    for step in 1.. {
        let window = fold.window();
        rows.extend(fold.catch_up(&history)?);
        if fold.window() != window {
            rows.retain(|r| r.window == fold.window());
        }
        let decision = budget.evaluate(projected(&fold, &rows, &enc), fold.claims(), true);
        if decision.action != Action::Continue {
            let (tokens, action) = (decision.projected, decision.action);
            println!("step {step}: {tokens} tokens -> {action}");
        }
        match decision.action {
            Action::Warning | Action::Handoff | Action::Final => {
                let text = format!("Context budget advisory: {}.", decision.action);
                let advisory = NewRow::text("advisory", "user", &text)
                    .with_meta("stage", decision.action.as_str())
                    .with_meta("projected", decision.projected)
                    .with_meta("budget_tokens", budget.usable_limit());
                // Published only if nobody appended since the rows it was decided on.
                history.append_if(vec![advisory], fold.last_seq())?;
            }
            Action::Rollover => {
                let window = history.rollover(RolloverSpec {
                    rollover_id: format!("rollover-{step}"),
                    reason: "usable_limit".into(),
                    lead_in: LeadIn::template(
                        "New context window {window_id} (previous: {previous_window_id}): \
                         read your checkpoint in /memories/session/ first, then use \
                         session_history for earlier windows.",
                    ),
                    expected_last_seq: Some(fold.last_seq()),
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

    rows.extend(fold.catch_up(&history)?);
    rows.retain(|r| r.window == fold.window());
    let lead_in = rows[1].text();
    println!("lead-in: {lead_in}");
    assert!(lead_in.starts_with(&format!("New context window {}", fold.window())));
    let fresh = budget.evaluate(projected(&fold, &rows, &enc), fold.claims(), true);
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

#[cfg(test)]
mod tests {
    #[test]
    fn the_whole_ladder_runs() {
        super::main().unwrap_or_else(|e| panic!("{e}"));
    }
}
