//! The `session/update` payloads this agent sends, built from the engine's typed session
//! events: message and thought chunks, tool calls and their updates, plans, and the
//! end-of-turn measurement no other adapter sends.

use droid_contract::ChangeType;
use droid_exec::session::measure::TurnMeasure;
use droid_exec::session::tools::{PlanEntry, ToolView};
use serde_json::{Value, json};

fn change_name(c: ChangeType) -> &'static str {
    match c {
        ChangeType::Added => "added",
        ChangeType::Modified => "modified",
        ChangeType::Deleted => "deleted",
        ChangeType::Renamed => "renamed",
    }
}

/// `agent_message_chunk` with `text`.
pub fn message_chunk(text: &str) -> Value {
    json!({"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": text}})
}

/// `agent_thought_chunk` with `text`.
pub fn thought_chunk(text: &str) -> Value {
    json!({"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": text}})
}

/// `user_message_chunk` with `text` (a loaded session's replay).
pub fn user_chunk(text: &str) -> Value {
    json!({"sessionUpdate": "user_message_chunk", "content": {"type": "text", "text": text}})
}

fn diff_content(view: &ToolView) -> Vec<Value> {
    view.diff
        .iter()
        .map(|d| {
            json!({
                "type": "diff",
                "path": d.path,
                "oldText": d.old_text,
                "newText": d.new_text,
            })
        })
        .collect()
}

fn locations(view: &ToolView) -> Vec<Value> {
    view.locations
        .iter()
        .map(|(path, line)| match line {
            Some(l) => json!({"path": path, "line": l}),
            None => json!({"path": path}),
        })
        .collect()
}

/// `tool_call`: a tool droid is about to run (`status` pending, or final in a replay).
pub fn tool_call(id: &str, view: &ToolView, input: &Value, status: &str) -> Value {
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": view.title,
        "kind": view.class.as_str(),
        "status": status,
        "content": diff_content(view),
        "locations": locations(view),
        "rawInput": input,
    })
}

/// `tool_call_update` replacing what a completed tool call's input now says.
pub fn tool_call_refined(id: &str, view: &ToolView, input: &Value) -> Value {
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": id,
        "title": view.title,
        "kind": view.class.as_str(),
        "content": diff_content(view),
        "locations": locations(view),
        "rawInput": input,
    })
}

/// `tool_call_update` with a new status only.
pub fn tool_status(id: &str, status: &str) -> Value {
    json!({"sessionUpdate": "tool_call_update", "toolCallId": id, "status": status})
}

/// `tool_call_update` for a tool's result: status, its output as content (after the edit's
/// diff, which stays), and `rawOutput`.
pub fn tool_result(id: &str, view: Option<&ToolView>, output: &str, failed: bool) -> Value {
    let mut content = view.map(diff_content).unwrap_or_default();
    if !output.is_empty() {
        content.push(json!({"type": "content", "content": {"type": "text", "text": output}}));
    }
    json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": id,
        "status": if failed { "failed" } else { "completed" },
        "content": content,
        "rawOutput": {"output": output, "isError": failed},
    })
}

/// `plan`: the complete list.
pub fn plan(entries: &[PlanEntry]) -> Value {
    json!({
        "sessionUpdate": "plan",
        "entries": entries.iter().map(|e| json!({
            "content": e.content,
            "priority": e.priority,
            "status": e.status,
        })).collect::<Vec<_>>(),
    })
}

/// The end-of-turn measurement, as a completed tool call of kind `other` (so every client
/// shows it with no extension): one `diff` per changed file whose text we have, a text listing
/// every change with its line counts and the verification commands' verdicts, and the same as
/// data in `rawOutput` and `_meta.droidExecutor`. Its status is `failed` when a verification
/// command failed.
pub fn measured(id: &str, root: &str, m: &TurnMeasure) -> Value {
    let mut content = Vec::new();
    let mut lines = Vec::new();
    let (mut added, mut removed) = (0u64, 0u64);
    for f in &m.files {
        let c = &f.change;
        added += c.lines_added.unwrap_or(0);
        removed += c.lines_removed.unwrap_or(0);
        let counts = match (c.lines_added, c.lines_removed) {
            (Some(a), Some(r)) => format!(" (+{a} −{r})"),
            _ => String::new(),
        };
        let renamed = c
            .old_path
            .as_ref()
            .map_or_else(String::new, |o| format!(" (from {o})"));
        lines.push(format!(
            "{} {}{renamed}{counts}",
            change_name(c.change_type),
            c.path
        ));
        if f.old_text.is_some() || f.new_text.is_some() {
            content.push(json!({
                "type": "diff",
                "path": format!("{root}/{}", c.path),
                "oldText": f.old_text,
                "newText": f.new_text.clone().unwrap_or_default(),
            }));
        }
    }
    if m.files.is_empty() {
        lines.push("no file changed".into());
    }
    let mut failed = false;
    let tests = m.tests.as_ref().map(|(t, runs)| {
        failed = t.passed == Some(false);
        for r in runs {
            lines.push(format!(
                "verify `{}`: {}",
                r.command,
                r.exit_code
                    .map_or_else(|| "did not finish".to_owned(), |c| format!("exit {c}"))
            ));
        }
        json!({
            "passed": t.passed,
            "details": t.details,
            "runs": runs.iter().map(|r| json!({
                "command": r.command,
                "exitCode": r.exit_code,
                "durationMs": r.duration_ms,
                "stdout": r.stdout_excerpt,
                "stderr": r.stderr_excerpt,
            })).collect::<Vec<_>>(),
        })
    });
    for w in &m.warnings {
        lines.push(format!("note: {w}"));
    }
    content.push(json!({"type": "content", "content": {"type": "text", "text": lines.join("\n")}}));
    let files: Vec<Value> = m
        .files
        .iter()
        .map(|f| {
            json!({
                "path": f.change.path,
                "changeType": change_name(f.change.change_type),
                "oldPath": f.change.old_path,
                "linesAdded": f.change.lines_added,
                "linesRemoved": f.change.lines_removed,
            })
        })
        .collect();
    let data = json!({"filesChanged": files, "tests": tests, "warnings": m.warnings});
    let title = if m.files.is_empty() {
        "Measured changes: none".to_owned()
    } else {
        format!(
            "Measured changes: {} file{} (+{added} −{removed})",
            m.files.len(),
            if m.files.len() == 1 { "" } else { "s" }
        )
    };
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": title,
        "kind": "other",
        "status": if failed { "failed" } else { "completed" },
        "content": content,
        "rawOutput": data,
        "_meta": {"droidExecutor": data},
    })
}

#[cfg(test)]
mod tests {
    use droid_contract::{CommandRun, CommandSource, FileChange, Tests};
    use droid_exec::session::measure::MeasuredFile;
    use pretty_assertions::assert_eq;

    use super::*;

    fn change(path: &str, kind: ChangeType, counts: (u64, u64)) -> FileChange {
        FileChange {
            path: path.into(),
            change_type: kind,
            old_path: None,
            highlights: Vec::new(),
            lines_added: Some(counts.0),
            lines_removed: Some(counts.1),
        }
    }

    #[test]
    fn the_measured_changes_carry_diffs_counts_and_the_verdict() {
        let m = TurnMeasure {
            files: vec![
                MeasuredFile {
                    change: change("a.txt", ChangeType::Modified, (1, 1)),
                    old_text: Some("a\n".into()),
                    new_text: Some("b\n".into()),
                },
                MeasuredFile {
                    change: change("big.bin", ChangeType::Added, (0, 0)),
                    old_text: None,
                    new_text: None,
                },
            ],
            warnings: vec!["w".into()],
            tests: Some((
                Tests {
                    passed: Some(false),
                    details: "false: exit 1".into(),
                    commands: vec!["false".into()],
                },
                vec![CommandRun {
                    command: "false".into(),
                    exit_code: Some(1),
                    duration_ms: 3,
                    stdout_excerpt: String::new(),
                    stderr_excerpt: String::new(),
                    source: CommandSource::Verify,
                    truncated: false,
                }],
            )),
        };
        let u = measured("measured-0", "/r", &m);
        assert_eq!(u["sessionUpdate"], "tool_call");
        assert_eq!(u["title"], "Measured changes: 2 files (+1 −1)");
        assert_eq!(u["status"], "failed");
        // a diff only where the texts are known; the listing names every file and command
        let content = u["content"].as_array().unwrap();
        assert_eq!(content.len(), 2);
        assert_eq!(content[0]["path"], "/r/a.txt");
        assert_eq!(content[0]["oldText"], "a\n");
        let text = content[1]["content"]["text"].as_str().unwrap();
        assert!(text.contains("modified a.txt (+1 −1)"), "{text}");
        assert!(text.contains("added big.bin"), "{text}");
        assert!(text.contains("verify `false`: exit 1"), "{text}");
        assert!(text.contains("note: w"), "{text}");
        assert_eq!(u["rawOutput"]["filesChanged"][1]["changeType"], "added");
        assert_eq!(u["rawOutput"]["tests"]["runs"][0]["exitCode"], 1);
        assert_eq!(u["_meta"]["droidExecutor"], u["rawOutput"]);
        let none = measured("measured-1", "/r", &TurnMeasure::default());
        assert_eq!(none["title"], "Measured changes: none");
        assert_eq!(none["status"], "completed");
    }
}
