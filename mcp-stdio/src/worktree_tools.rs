//! The worktree tools: `droid_apply` and `droid_discard` (a worktree task's change brought into
//! the user's working tree, or thrown away), over the engine's `Tasks::apply` and
//! `Tasks::discard`. The answer is a WorktreeAnswer in `structuredContent`; a conflict or a
//! refusal is `isError` (the model must not go on as if the change were in place).

use std::sync::Arc;

use droid_contract::{WorktreeAnswer, WorktreeOutcome};
use serde_json::{Map, Value, json};

use crate::answer::{bad_arguments, engine_error, issue_line, only_keys, tool_result};
use crate::server::Server;

/// The answer's schema, kept small (`tools/list` goes into the model's context): the fields
/// and their kinds; the contract's full schema is `schemas/worktree-answer.schema.json`.
fn answer_schema() -> Value {
    let string = json!({"type": "string"});
    let list = json!({"type": "array"});
    json!({
        "type": "object",
        "properties": {
            "outcome": string,
            "summary": string,
            "issues": list,
            "conflicts": list,
            "task_id": string,
            "action": string,
            "worktree": {"type": ["object", "null"]},
            "files_changed": list,
        },
        "required": ["outcome", "summary", "task_id"],
    })
}

/// The tools' definitions, in `tools/list` order.
pub(crate) fn definitions() -> Vec<Value> {
    let task_id = json!({"type": "string", "description": "A task run with isolation worktree."});
    vec![
        json!({
            "name": "droid_apply",
            "title": "Apply a worktree task's change",
            "description": "Bring a reviewed worktree task's change into the working tree as uncommitted changes, merged three-way. All or nothing: a conflict writes nothing and names the paths (isError). check: true only says what would happen.",
            "inputSchema": {
                "type": "object",
                "properties": {"task_id": task_id, "check": {"type": "boolean"}},
                "required": ["task_id"],
                "additionalProperties": false,
            },
            "outputSchema": answer_schema(),
            "annotations": {"title": "Apply a worktree task's change", "readOnlyHint": false, "destructiveHint": false, "idempotentHint": false, "openWorldHint": false},
        }),
        json!({
            "name": "droid_discard",
            "title": "Discard a worktree task's change",
            "description": "Remove a worktree task's worktree and branch without applying its change.",
            "inputSchema": {
                "type": "object",
                "properties": {"task_id": task_id},
                "required": ["task_id"],
                "additionalProperties": false,
            },
            "outputSchema": answer_schema(),
            "annotations": {"title": "Discard a worktree task's change", "readOnlyHint": false, "destructiveHint": true, "idempotentHint": false, "openWorldHint": false},
        }),
    ]
}

/// The short text of an answer: outcome and summary, the files, the conflicts, the issues.
fn render(a: &WorktreeAnswer) -> String {
    let mut s = format!("{}: {}", a.outcome.as_str(), a.summary);
    if !a.files_changed.is_empty() {
        let files: Vec<&str> = a.files_changed.iter().map(|f| f.path.as_str()).collect();
        s.push_str(&format!("\nfiles: {}", files.join(", ")));
    }
    if !a.conflicts.is_empty() {
        s.push_str(&format!("\nconflicts: {}", a.conflicts.join(", ")));
    }
    for i in &a.issues {
        s.push_str(&issue_line(i));
    }
    s
}

/// Run `droid_apply` or `droid_discard` with `args`.
pub(crate) async fn call(server: &Arc<Server>, name: &str, args: Map<String, Value>) -> Value {
    let apply = name == "droid_apply";
    let allowed: &[&str] = if apply {
        &["task_id", "check"]
    } else {
        &["task_id"]
    };
    if let Err(e) = only_keys(&args, allowed) {
        return e;
    }
    let id = match args.get("task_id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        None | Some(Value::Null) => return bad_arguments("task_id is required"),
        Some(other) => {
            return bad_arguments(format!(
                "task_id must be a string like droid-1795349045-3fa2, got {other}"
            ));
        }
    };
    let check = match args.get("check") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(other) => return bad_arguments(format!("check must be true or false, got {other}")),
    };
    let Some(tasks) = server.tasks() else {
        return bad_arguments("background tasks are unavailable: no task store");
    };
    let answer = if apply {
        tasks.apply(&id, check).await
    } else {
        tasks.discard(&id).await
    };
    match answer {
        Ok(a) => {
            let failed = match a.outcome {
                WorktreeOutcome::Applied | WorktreeOutcome::Clean | WorktreeOutcome::Discarded => {
                    false
                }
                WorktreeOutcome::Conflict | WorktreeOutcome::Refused => true,
            };
            tool_result(
                render(&a),
                Some(serde_json::to_value(&a).unwrap_or(Value::Null)),
                failed,
            )
        }
        Err(e) => engine_error(&e),
    }
}
