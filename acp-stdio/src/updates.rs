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
/// every change with its line counts, what was put back under `.git`, the processes ended and
/// the verification commands' verdicts, and the same as data in `rawOutput` and
/// `_meta.droidExecutor`. Its status is `failed` when a verification command failed or
/// something under `.git` could not be put back. Its size is bounded by the measure's own
/// bounds (`droid_exec::session::measure`).
pub fn measured(id: &str, root: &str, m: &TurnMeasure) -> Value {
    use droid_exec::session::measure::{DIFFS_MAX_BYTES, LIST_MAX_FILES};
    let mut content = Vec::new();
    let mut lines = Vec::new();
    for f in &m.files {
        let c = &f.change;
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
        // a diff only with both of its sides (an empty side only for a file added or deleted)
        let whole = match c.change_type {
            ChangeType::Added => f.new_text.is_some(),
            ChangeType::Deleted => f.old_text.is_some(),
            ChangeType::Modified | ChangeType::Renamed => {
                f.old_text.is_some() && f.new_text.is_some()
            }
        };
        if whole {
            content.push(json!({
                "type": "diff",
                "path": format!("{root}/{}", c.path),
                "oldText": f.old_text,
                "newText": f.new_text.clone().unwrap_or_default(),
            }));
        }
    }
    let unlisted = m.changed.saturating_sub(m.files.len());
    if m.changed == 0 {
        lines.push("no file changed".into());
    }
    if unlisted > 0 {
        lines.push(format!(
            "… and {unlisted} more changed file{} (at most {LIST_MAX_FILES} are listed)",
            plural(unlisted)
        ));
    }
    if m.texts_left_out > 0 {
        lines.push(format!(
            "{} changed file{} listed without a diff (the diffs of a turn are bounded to {} KiB)",
            m.texts_left_out,
            plural(m.texts_left_out),
            DIFFS_MAX_BYTES / 1024
        ));
    }
    let mut failed = false;
    if let Some(r) = &m.restored {
        failed |= r.failed();
        if !r.changed.is_empty() {
            lines.push(format!(
                "put back {}: the turn changed what git runs or consults later on your behalf \
                 (hooks, config); it is as it was before the turn",
                r.changed.join(", ")
            ));
        }
        if !r.failed.is_empty() {
            lines.push(format!("could not put back {}", r.failed.join("; ")));
        }
        lines.extend(r.refused.iter().cloned());
    }
    if m.processes_ended > 0 {
        lines.push(format!(
            "ended {} process{} the turn left running",
            m.processes_ended,
            if m.processes_ended == 1 { "" } else { "es" }
        ));
    }
    let tests = m.tests.as_ref().map(|(t, runs)| {
        failed |= t.passed == Some(false);
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
    let restored = m
        .restored
        .as_ref()
        .map(|r| json!({"changed": r.changed, "failed": r.failed, "refused": r.refused}));
    let data = json!({
        "filesChanged": files,
        "filesNotListed": unlisted,
        "diffsLeftOut": m.texts_left_out,
        "gitRestored": restored,
        "processesEnded": m.processes_ended,
        "tests": tests,
        "warnings": m.warnings,
    });
    let mut title = if m.changed == 0 {
        "Measured changes: none".to_owned()
    } else {
        format!(
            "Measured changes: {} file{} (+{} −{})",
            m.changed,
            plural(m.changed),
            m.lines.0,
            m.lines.1
        )
    };
    if let Some(r) = &m.restored {
        let touched = r.changed.len() + r.failed.len() + r.refused.len();
        if touched > 0 {
            title.push_str(&format!(
                "; .git changed ({}), put back",
                match r.changed.as_slice() {
                    [one] => one.clone(),
                    _ => format!("{touched} path{}", plural(touched)),
                }
            ));
            if r.failed() {
                title.push_str(" in part");
            }
        }
    }
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

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}

#[cfg(test)]
mod tests {
    use droid_contract::{CommandRun, CommandSource, FileChange, Tests};
    use droid_exec::session::measure::{GitRestored, MeasuredFile};
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
            changed: 2,
            lines: (1, 1),
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
            ..TurnMeasure::default()
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

    /// What a turn changed under `.git` and put back is in the title, the text and the data;
    /// so are the processes ended, the files not listed and the diffs left out.
    #[test]
    fn what_was_put_back_and_what_was_bounded_are_said() {
        let m = TurnMeasure {
            files: vec![MeasuredFile {
                change: change("big.txt", ChangeType::Modified, (3, 1)),
                old_text: Some("a\n".into()),
                // its new text was left out for the budget: no half diff
                new_text: None,
            }],
            changed: 5,
            lines: (9, 1),
            texts_left_out: 1,
            restored: Some(GitRestored {
                changed: vec![".git/hooks/pre-commit".into()],
                failed: Vec::new(),
                refused: Vec::new(),
            }),
            processes_ended: 2,
            ..TurnMeasure::default()
        };
        let u = measured("measured-3", "/r", &m);
        assert_eq!(
            u["title"],
            "Measured changes: 5 files (+9 −1); .git changed (.git/hooks/pre-commit), put back"
        );
        assert_eq!(u["status"], "completed");
        let content = u["content"].as_array().unwrap();
        assert_eq!(content.len(), 1, "no diff with one side missing: {u}");
        let text = content[0]["content"]["text"].as_str().unwrap();
        for said in [
            "modified big.txt (+3 −1)",
            "… and 4 more changed files",
            "1 changed file listed without a diff",
            "put back .git/hooks/pre-commit",
            "ended 2 processes the turn left running",
        ] {
            assert!(text.contains(said), "{said:?} in {text}");
        }
        assert_eq!(
            u["rawOutput"]["gitRestored"],
            json!({"changed": [".git/hooks/pre-commit"], "failed": [], "refused": []})
        );
        assert_eq!(u["rawOutput"]["filesNotListed"], 4);
        assert_eq!(u["rawOutput"]["diffsLeftOut"], 1);
        assert_eq!(u["rawOutput"]["processesEnded"], 2);
        let clean = measured("measured-4", "/r", &TurnMeasure::default());
        assert_eq!(clean["rawOutput"]["gitRestored"], Value::Null);
        // what could not be put back fails the tool call
        let m = TurnMeasure {
            restored: Some(GitRestored {
                changed: Vec::new(),
                failed: vec![".git/config: permission denied".into()],
                refused: Vec::new(),
            }),
            ..TurnMeasure::default()
        };
        let u = measured("measured-5", "/r", &m);
        assert_eq!(u["status"], "failed");
        assert_eq!(
            u["title"],
            "Measured changes: none; .git changed (1 path), put back in part"
        );
    }
}
