//! The prompt droid receives: the contract rendered as Markdown, ending with the request for a
//! fenced `droid-executor-report` block. `notes_for_human` is never included.
//!
//! The "Mode" section fits the autonomy the run gets (after `max_autonomy`): at `read_only` the
//! request is a consultation (an ask's default), so the agent is told to look, change nothing
//! and answer in its final message, the reply the caller reads ([`crate::reply`]); told instead
//! to implement a decided plan, a read-only agent tried to edit, was refused, and the run ended
//! `partial` with `permission_denied` (issue 32). Above it, the execution mode says what the
//! work is and the plan is the caller's.

use std::fmt::Write as _;

use droid_contract::{Autonomy, ExecutionMode, ExecutionRequest};

/// The fence info string droid is asked to use for its report.
pub const REPORT_FENCE: &str = "droid-executor-report";

/// Render `req` as droid's prompt for a run at `autonomy` (the request's, capped by the
/// server's `max_autonomy`).
pub fn render(req: &ExecutionRequest, autonomy: Autonomy) -> String {
    let mut p = String::with_capacity(
        req.objective.as_str().len() + req.instructions.as_str().len() + 2048,
    );
    // writes to a String cannot fail
    let _ = writeln!(p, "# Task\n\n{}\n", req.objective.as_str());
    if !req.instructions.as_str().is_empty() {
        let _ = writeln!(p, "## Instructions\n\n{}\n", req.instructions.as_str());
    }
    let _ = writeln!(
        p,
        "## Repository\n\nWork only inside `{}` (your working directory).",
        req.context.repo_root.as_path().display()
    );
    if !req.context.files_of_interest.is_empty() {
        let _ = writeln!(p, "\nFiles of interest (relative to it):");
        for f in &req.context.files_of_interest {
            let _ = writeln!(p, "- `{}`", f.as_path().display());
        }
    }
    p.push('\n');
    if !req.constraints.is_empty() {
        let _ = writeln!(p, "## Constraints (must hold)\n");
        for c in &req.constraints {
            let _ = writeln!(p, "- {}", c.as_str());
        }
        p.push('\n');
    }
    if !req.acceptance_criteria.is_empty() {
        let _ = writeln!(p, "## Acceptance criteria\n");
        for c in &req.acceptance_criteria {
            let _ = writeln!(p, "- {}", c.as_str());
        }
        p.push('\n');
    }
    if !req.suggested_commands.is_empty() {
        let _ = writeln!(
            p,
            "## Commands\n\nRun these to check your work; they will be run again independently afterwards:\n"
        );
        for c in &req.suggested_commands {
            let _ = writeln!(p, "- `{}`", c.as_str());
        }
        p.push('\n');
    }
    let consultation = autonomy == Autonomy::ReadOnly;
    if consultation {
        let _ = writeln!(
            p,
            "## Mode\n\nread-only: a consultation. Read files and run commands that change nothing; do not \
create, edit or delete files (writes are refused). Answer the request in your final message: that \
answer is what the caller reads. If it cannot be answered without changing something, say what \
should change instead of doing it.\n"
        );
    } else {
        let mode = match req.execution_mode {
            ExecutionMode::Code => "code: the work is mainly changing code.",
            ExecutionMode::Command => "command: the work is mainly running commands.",
            ExecutionMode::Mixed => "mixed: change code and run commands as needed.",
        };
        let _ = writeln!(
            p,
            "## Mode\n\n{mode} The plan is decided: implement it, do not redesign it, and do not expand the scope. \
Report problems instead of working around them silently.\n"
        );
    }
    let (after, summary, files) = if consultation {
        (
            ", after your answer,",
            "your answer, in a sentence or two",
            "[]",
        )
    } else {
        (
            "",
            "what you did, in a few sentences",
            "[{\"path\": \"relative/path\", \"highlights\": [\"what changed there\"]}]",
        )
    };
    let _ = write!(
        p,
        "## Report\n\nEnd your final message{after} with exactly one fenced block tagged `{REPORT_FENCE}` holding JSON:\n\n\
```{REPORT_FENCE}\n\
{{\"status\": \"success | partial | failed\", \"summary\": \"{summary}\", \"files\": {files}, \
\"issues\": [{{\"type\": \"test_failure | env_issue | unclear_requirement | conflict\", \"description\": \"...\", \"suggested_action\": \"...\"}}]}}\n\
```\n"
    );
    p
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn renders_every_part_but_the_notes() {
        let req = ExecutionRequest::from_value(
            &json!({"objective": "Add a greeting", "instructions": "Use hello.txt",
                    "context": {"repo_root": "/repo", "files_of_interest": ["hello.txt"]},
                    "constraints": ["keep it short"], "acceptance_criteria": ["file exists"],
                    "suggested_commands": ["test -f hello.txt"], "execution_mode": "code",
                    "notes_for_human": "SECRET NOTE"}),
            None,
        )
        .unwrap();
        let p = render(&req, Autonomy::Low);
        for part in [
            "# Task\n\nAdd a greeting\n",
            "## Instructions\n\nUse hello.txt\n",
            "Work only inside `/repo`",
            "- `hello.txt`",
            "- keep it short",
            "- file exists",
            "- `test -f hello.txt`",
            "code: the work is mainly changing code.",
            "```droid-executor-report\n{\"status\"",
        ] {
            assert!(p.contains(part), "missing {part:?} in:\n{p}");
        }
        assert!(!p.contains("SECRET NOTE"));
        assert!(!p.contains("read-only"), "{p}");
    }

    #[test]
    fn a_read_only_run_is_asked_for_an_answer_not_an_implementation() {
        // an ask: the whole message as instructions, no execution mode (mixed)
        let req = ExecutionRequest::from_value(
            &json!({"objective": "Why does test_x fail?", "instructions": "Why does test_x fail?\nSince yesterday.",
                    "context": {"repo_root": "/repo"}, "autonomy": "read_only"}),
            None,
        )
        .unwrap();
        let p = render(&req, Autonomy::ReadOnly);
        for part in [
            "## Mode\n\nread-only: a consultation.",
            "do not create, edit or delete files",
            "Answer the request in your final message",
            "End your final message, after your answer, with exactly one fenced block",
            "\"summary\": \"your answer, in a sentence or two\", \"files\": [],",
        ] {
            assert!(p.contains(part), "missing {part:?} in:\n{p}");
        }
        for never in ["The plan is decided", "implement it", "mixed: change code"] {
            assert!(!p.contains(never), "{never:?} in:\n{p}");
        }
        // the same request at an autonomy that edits is a decided task again
        let p = render(&req, Autonomy::Medium);
        assert!(p.contains("mixed: change code and run commands as needed. The plan is decided"));
        assert!(
            p.contains("\"highlights\": [\"what changed there\"]"),
            "{p}"
        );
    }
}
