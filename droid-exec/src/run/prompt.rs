//! The prompt droid receives: the contract rendered as Markdown, ending with the request for a
//! fenced `droid-executor-report` block. `notes_for_human` is never included.

use std::fmt::Write as _;

use droid_contract::{ExecutionMode, ExecutionRequest};

/// The fence info string droid is asked to use for its report.
pub const REPORT_FENCE: &str = "droid-executor-report";

/// Render `req` as droid's prompt.
pub fn render(req: &ExecutionRequest) -> String {
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
    let _ = write!(
        p,
        "## Report\n\nEnd your final message with exactly one fenced block tagged `{REPORT_FENCE}` holding JSON:\n\n\
```{REPORT_FENCE}\n\
{{\"status\": \"success | partial | failed\", \"summary\": \"what you did, in a few sentences\", \
\"files\": [{{\"path\": \"relative/path\", \"highlights\": [\"what changed there\"]}}], \
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
        let p = render(&req);
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
    }
}
