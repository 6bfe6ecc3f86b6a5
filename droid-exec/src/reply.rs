//! "The reply" of a task (seed 002's pend, docs/architecture.md#origin): the agent's final
//! answer, in its own words. The one definition every front-end that shows a reply uses: the
//! CLI's `droid-executor pend`, the MCP tools `pend` and `pend_<p>` (and `ask` with
//! `wait_seconds`). The ACP agent has none to share: an editor shows droid's messages as they
//! stream.
//!
//! The reply is the agent's last assistant message of a run that ended its turn, with the
//! `droid-executor-report` block the prompt asks for taken out (it is for the engine, which reads
//! it into `summary`, highlights and issues; a calling model given the raw block as "the reply"
//! was misled). When that block is all the message holds, the report's own `summary` is the
//! reply. There is none while the task runs, and none when the run timed out, was cancelled or
//! never started (`timeout`, `cancelled`, `error`): the agent's last message then is not an
//! answer, and the result's `summary` and `issues` say what happened.
//!
//! It is read from the task's event log, where every message is kept redacted and bounded
//! ([`REPLY_MAX`] bytes), not from the result: the result's `summary` is the report's summary
//! when there is one (what the agent did, for a review), not its answer to a question. A result
//! stored without events (a cut synchronous result kept as a task) has no reply.

use droid_contract::{ExecutionResult, Status, TaskRecord};
use serde_json::Value;

use crate::run::report;
use crate::tasks::Tasks;

/// Longest reply, in bytes: the bound of a message in the event log (`run/supervise.rs`).
pub const REPLY_MAX: usize = 4096;

/// The reply of the finished task `rec`, read from its event log in `tasks`; `None` while it
/// runs, for a run that did not end its turn, and when the agent said nothing.
pub fn of_task(tasks: &Tasks, rec: &TaskRecord) -> Option<String> {
    let result = rec.result.as_ref()?;
    if !answered(result) {
        return None;
    }
    let events = tasks.events(&rec.task_id, 0).ok()?;
    from_events(&events)
}

/// Whether a result's run ended in a way that leaves an answer: the agent finished its turn
/// (`success`, `partial`) or stopped by itself (`failed`); not a run we stopped or never started.
fn answered(result: &ExecutionResult) -> bool {
    match result.status {
        Status::Success | Status::Partial | Status::Failed => true,
        Status::Timeout | Status::Cancelled | Status::Error => false,
    }
}

/// The reply in a run's events (as the event log holds them: `{"type": "message", "role":
/// "assistant", "text": …}`): the last assistant message without its report block, else the
/// report's summary; `None` when there is neither.
pub fn from_events(events: &[Value]) -> Option<String> {
    let last = events.iter().rev().find_map(|e| {
        (e["type"] == "message" && e["role"] == "assistant")
            .then(|| e["text"].as_str())
            .flatten()
    })?;
    from_final_message(last)
}

/// The reply in the agent's final message: the message without the report block, else the
/// report's summary.
pub fn from_final_message(text: &str) -> Option<String> {
    let (prose, reported) = report::extract(text);
    if !prose.is_empty() {
        return Some(prose);
    }
    reported.and_then(|r| r.summary)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    fn message(role: &str, text: &str) -> Value {
        json!({"seq": 1, "at": "2026-11-28T10:00:00Z", "type": "message", "role": role, "text": text})
    }

    #[test]
    fn the_reply_is_the_last_answer_without_the_report_block() {
        let events = [
            message("user", "Why does test_x fail?"),
            message("assistant", "Let me look at the test."),
            json!({"seq": 3, "type": "tool_call", "id": "1", "tool": "Read", "parameters": {}}),
            message("reasoning", "thinking"),
            message(
                "assistant",
                "test_x compares floats with ==; use approx.\n\n```droid-executor-report\n\
                 {\"status\": \"success\", \"summary\": \"Explained the failure.\", \"files\": [], \
                 \"issues\": []}\n```\n",
            ),
            json!({"seq": 6, "type": "completed", "status": "success"}),
        ];
        assert_eq!(
            from_events(&events).as_deref(),
            Some("test_x compares floats with ==; use approx.")
        );
    }

    #[test]
    fn a_message_that_is_only_a_report_replies_with_its_summary() {
        let only = "```droid-executor-report\n{\"status\": \"success\", \"summary\": \"Renamed \
                    foo to bar.\"}\n```";
        assert_eq!(
            from_final_message(only).as_deref(),
            Some("Renamed foo to bar.")
        );
        assert_eq!(
            from_final_message("```droid-executor-report\n{}\n```"),
            None
        );
        assert_eq!(from_final_message("  \n"), None);
        assert_eq!(
            from_events(&[message("user", "hi")]),
            None,
            "no assistant message, no reply"
        );
    }

    #[test]
    fn only_a_run_that_ended_by_itself_has_a_reply() {
        for (status, answers) in [
            (Status::Success, true),
            (Status::Partial, true),
            (Status::Failed, true),
            (Status::Timeout, false),
            (Status::Cancelled, false),
            (Status::Error, false),
        ] {
            let mut r = ExecutionResult::error(None, "x", Vec::new());
            r.status = status;
            assert_eq!(answered(&r), answers, "{status:?}");
        }
    }
}
