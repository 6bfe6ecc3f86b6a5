//! The `session/update` payloads this agent sends, built from the engine's typed session
//! events: message and thought chunks, tool calls and their updates, plans, and the
//! end-of-turn measurement no other adapter sends.

use droid_contract::ChangeType;
use droid_exec::session::measure::TurnMeasure;
use droid_exec::session::tools::{PlanEntry, ToolView};
use droid_exec::session::{ContextStats, TokenUsage};
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

/// The content and raw output of a tool's result: its output as text content, and
/// `rawOutput`. A file edit droid reports done (its internal JSON,
/// `{"success":true,…,"diffLines":[…]}`) shows the diff only: no `rawOutput` (clients print
/// it as text), droid's JSON in `_meta.droidExecutor.result` without its `diffLines`. An edit
/// that failed (or was rejected) shows why, without the diff it did not make.
fn result_fields(
    view: Option<&ToolView>,
    output: &str,
    failed: bool,
) -> serde_json::Map<String, Value> {
    let mut content = if failed {
        Vec::new()
    } else {
        view.map(diff_content).unwrap_or_default()
    };
    let mut fields = serde_json::Map::new();
    let edit_done = (!failed && !content.is_empty())
        .then(|| serde_json::from_str::<Value>(output).ok())
        .flatten()
        .filter(|v| v.get("success") == Some(&Value::Bool(true)));
    match edit_done {
        Some(mut result) => {
            if let Some(obj) = result.as_object_mut() {
                obj.remove("diffLines");
            }
            fields.insert("_meta".into(), json!({"droidExecutor": {"result": result}}));
        }
        None => {
            if !output.is_empty() {
                content.push(text_content(output));
            }
            fields.insert(
                "rawOutput".into(),
                json!({"output": output, "isError": failed}),
            );
        }
    }
    fields.insert("content".into(), Value::Array(content));
    fields
}

fn text_content(text: &str) -> Value {
    json!({"type": "content", "content": {"type": "text", "text": text}})
}

/// `tool_call_update` for a tool's result: status, content and raw output
/// ([`result_fields`]).
pub fn tool_result(id: &str, view: Option<&ToolView>, output: &str, failed: bool) -> Value {
    let mut update = json!({
        "sessionUpdate": "tool_call_update",
        "toolCallId": id,
        "status": if failed { "failed" } else { "completed" },
    });
    if let Some(obj) = update.as_object_mut() {
        obj.extend(result_fields(view, output, failed));
    }
    update
}

/// A replayed tool call, as it ended: one `tool_call` with its final status, its input and its
/// result (`output` `None`: droid recorded no result, the turn ended before the tool did).
pub fn replayed_tool_call(
    id: &str,
    view: &ToolView,
    input: &Value,
    output: Option<(&str, bool)>,
) -> Value {
    let (output, failed) = output.unwrap_or((NO_RESULT, true));
    let mut call = tool_call(id, view, input, if failed { "failed" } else { "completed" });
    if let Some(obj) = call.as_object_mut() {
        obj.extend(result_fields(Some(view), output, failed));
    }
    call
}

/// What a replayed tool call without a recorded result says.
pub const NO_RESULT: &str = "No result was recorded: the turn ended before this tool finished.";

/// `usage_update`: how full the model's context is (`used` of `size` tokens, droid's
/// estimate), the session's cost when droid counts one (Factory credits), and the tokens of
/// the turn and of the session in `_meta.droidExecutor`.
pub fn usage(stats: ContextStats, turn: Option<TokenUsage>, session: Option<TokenUsage>) -> Value {
    let tokens = |u: TokenUsage| {
        json!({
            "inputTokens": u.input,
            "outputTokens": u.output,
            "cacheReadTokens": u.cache_read,
            "cacheCreationTokens": u.cache_creation,
            "thinkingTokens": u.thinking,
            "factoryCredits": u.factory_credits,
        })
    };
    let mut update = json!({
        "sessionUpdate": "usage_update",
        "used": stats.used,
        "size": stats.limit,
        "_meta": {"droidExecutor": {
            "turn": turn.map(tokens),
            "session": session.map(tokens),
        }},
    });
    if let Some(s) = session.filter(|s| s.factory_credits > 0.0) {
        update["cost"] = json!({"amount": s.factory_credits, "currency": "credits"});
    }
    update
}

/// `current_mode_update`.
pub fn current_mode(mode_id: &str) -> Value {
    json!({"sessionUpdate": "current_mode_update", "currentModeId": mode_id})
}

/// `config_option_update` with the complete list.
pub fn config_options(options: Value) -> Value {
    json!({"sessionUpdate": "config_option_update", "configOptions": options})
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

/// Whether a turn's measure is worth a tool call: a file changed, something under `.git` was
/// put back, processes the turn left running were ended, a verification command failed, or
/// something could not be measured. A turn that changed nothing (a question, a cancel, a
/// failure, a rejected edit) gets none: clients show every tool call.
pub fn worth_reporting(m: &TurnMeasure) -> bool {
    m.changed > 0
        || m.restored.is_some()
        || m.processes_ended > 0
        || m.tests
            .as_ref()
            .is_some_and(|(t, _)| t.passed == Some(false))
        || !m.warnings.is_empty()
}

/// The end-of-turn measurement, as a completed tool call of kind `other` (so every client
/// shows it with no extension), sent when [`worth_reporting`]: one `diff` per changed file
/// whose text we have and a one-line summary as content; the data (every file with its line
/// counts, what was put back under `.git`, the processes ended, the verification commands'
/// runs, the notes) in `rawOutput` and `_meta.droidExecutor`, with the summary as
/// `rawOutput.output` (what clients that print a raw output show, instead of the data as
/// JSON). Its status is `failed` when a verification command failed or something under `.git`
/// could not be put back. Its size is bounded by the measure's own bounds
/// (`droid_exec::session::measure`).
pub fn measured(id: &str, root: &str, m: &TurnMeasure) -> Value {
    let mut content = Vec::new();
    for f in &m.files {
        let c = &f.change;
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
    let failed = m.restored.as_ref().is_some_and(|r| r.failed())
        || m.tests
            .as_ref()
            .is_some_and(|(t, _)| t.passed == Some(false));
    let summary = summary(m);
    content.push(text_content(&summary));
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
    let tests = m.tests.as_ref().map(|(t, runs)| {
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
    let data = json!({
        "summary": summary,
        "filesChanged": files,
        "filesNotListed": m.changed.saturating_sub(m.files.len()),
        "diffsLeftOut": m.texts_left_out,
        "gitRestored": restored,
        "processesEnded": m.processes_ended,
        "tests": tests,
        "warnings": m.warnings,
    });
    let mut raw = data.clone();
    raw["output"] = json!(summary);
    json!({
        "sessionUpdate": "tool_call",
        "toolCallId": id,
        "title": title(m),
        "kind": "other",
        "status": if failed { "failed" } else { "completed" },
        "content": content,
        "rawOutput": raw,
        "_meta": {"droidExecutor": data},
    })
}

/// Files named in a summary; the rest are counted.
const SUMMARY_FILES: usize = 3;

/// The measure in one line: the files changed (a few named, with their line counts), what was
/// put back under `.git`, the processes ended, the verification verdict and the notes.
pub fn summary(m: &TurnMeasure) -> String {
    use droid_exec::session::measure::{DIFFS_MAX_BYTES, LIST_MAX_FILES};
    let mut parts = Vec::new();
    if m.changed > 0 {
        let named: Vec<String> = m
            .files
            .iter()
            .take(SUMMARY_FILES)
            .map(|f| {
                let c = &f.change;
                let counts = match (c.lines_added, c.lines_removed) {
                    (Some(a), Some(r)) => format!(" (+{a} −{r})"),
                    _ => String::new(),
                };
                let from = c
                    .old_path
                    .as_ref()
                    .map_or_else(String::new, |o| format!(" from {o}"));
                format!("{} {}{from}{counts}", c.path, change_name(c.change_type))
            })
            .collect();
        let more = m.changed - named.len();
        let mut files = format!(
            "{} file{} changed (+{} −{}): {}",
            m.changed,
            plural(m.changed),
            m.lines.0,
            m.lines.1,
            named.join(", ")
        );
        if more > 0 {
            files.push_str(&format!(" and {more} more"));
        }
        parts.push(files);
        let unlisted = m.changed.saturating_sub(m.files.len());
        if unlisted > 0 {
            parts.push(format!(
                "{unlisted} not listed (at most {LIST_MAX_FILES} are)"
            ));
        }
        if m.texts_left_out > 0 {
            parts.push(format!(
                "{} without a diff (a turn's diffs are bounded to {} KiB)",
                m.texts_left_out,
                DIFFS_MAX_BYTES / 1024
            ));
        }
    } else {
        parts.push("no file changed".to_owned());
    }
    if let Some(r) = &m.restored {
        if !r.changed.is_empty() {
            parts.push(format!(
                "put back {} (what git runs or consults later on your behalf; the turn changed it)",
                r.changed.join(", ")
            ));
        }
        if !r.failed.is_empty() {
            parts.push(format!("could not put back {}", r.failed.join(", ")));
        }
        parts.extend(r.refused.iter().cloned());
    }
    if m.processes_ended > 0 {
        parts.push(format!(
            "ended {} process{} the turn left running",
            m.processes_ended,
            if m.processes_ended == 1 { "" } else { "es" }
        ));
    }
    if let Some((_, runs)) = &m.tests {
        let failed: Vec<String> = runs
            .iter()
            .filter(|r| r.exit_code != Some(0))
            .map(|r| {
                format!(
                    "`{}` {}",
                    r.command,
                    r.exit_code
                        .map_or_else(|| "did not finish".to_owned(), |c| format!("exit {c}"))
                )
            })
            .collect();
        if failed.is_empty() {
            parts.push(format!(
                "verification passed ({} command{})",
                runs.len(),
                plural(runs.len())
            ));
        } else {
            parts.push(format!("verification failed: {}", failed.join(", ")));
        }
    }
    for w in &m.warnings {
        parts.push(format!("note: {w}"));
    }
    parts.join("; ")
}

fn title(m: &TurnMeasure) -> String {
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
    title
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
    fn the_measured_changes_carry_diffs_a_summary_and_the_data() {
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
        assert!(worth_reporting(&m));
        let u = measured("measured-0", "/r", &m);
        assert_eq!(u["sessionUpdate"], "tool_call");
        assert_eq!(u["title"], "Measured changes: 2 files (+1 −1)");
        assert_eq!(u["status"], "failed");
        // a diff only where the texts are known, then the one-line summary
        let summary = "2 files changed (+1 −1): a.txt modified (+1 −1), big.bin added (+0 −0); \
                       verification failed: `false` exit 1; note: w";
        assert_eq!(
            u["content"],
            json!([
                {"type": "diff", "path": "/r/a.txt", "oldText": "a\n", "newText": "b\n"},
                {"type": "content", "content": {"type": "text", "text": summary}},
            ])
        );
        // the data in rawOutput and _meta, never as text; the summary as the raw output's text
        assert_eq!(u["rawOutput"]["output"], summary);
        assert_eq!(u["rawOutput"]["filesChanged"][1]["changeType"], "added");
        assert_eq!(u["rawOutput"]["tests"]["runs"][0]["exitCode"], 1);
        assert_eq!(u["_meta"]["droidExecutor"]["summary"], summary);
        assert_eq!(
            u["_meta"]["droidExecutor"]["filesChanged"],
            u["rawOutput"]["filesChanged"]
        );
        // nothing changed, nothing to say: no tool call at all
        assert!(!worth_reporting(&TurnMeasure::default()));
        let passed = TurnMeasure {
            tests: Some((
                Tests {
                    passed: Some(true),
                    details: String::new(),
                    commands: vec!["true".into()],
                },
                Vec::new(),
            )),
            ..TurnMeasure::default()
        };
        assert!(!worth_reporting(&passed));
    }

    /// What a turn changed under `.git` and put back is in the title, the summary and the
    /// data; so are the processes ended, the files not listed and the diffs left out.
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
        assert_eq!(
            text,
            "5 files changed (+9 −1): big.txt modified (+3 −1) and 4 more; 4 not listed (at \
             most 1000 are); 1 without a diff (a turn's diffs are bounded to 1024 KiB); put back \
             .git/hooks/pre-commit (what git runs or consults later on your behalf; the turn \
             changed it); ended 2 processes the turn left running"
        );
        assert_eq!(
            u["rawOutput"]["gitRestored"],
            json!({"changed": [".git/hooks/pre-commit"], "failed": [], "refused": []})
        );
        assert_eq!(u["rawOutput"]["filesNotListed"], 4);
        assert_eq!(u["rawOutput"]["diffsLeftOut"], 1);
        assert_eq!(u["rawOutput"]["processesEnded"], 2);
        // processes ended alone are worth a word
        let ended = TurnMeasure {
            processes_ended: 1,
            ..TurnMeasure::default()
        };
        assert!(worth_reporting(&ended));
        assert_eq!(
            measured("m", "/r", &ended)["title"],
            "Measured changes: none"
        );
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

    /// A file edit droid reports done shows its diff only; droid's JSON is kept in `_meta`
    /// without its `diffLines`; any other result shows its output, and a failed edit too.
    #[test]
    fn an_edit_droid_reports_done_shows_the_diff_only() {
        let root = std::path::Path::new("/r");
        let input = json!({"file_path": "/r/a.txt", "old_str": "one", "new_str": "uno"});
        let view = droid_exec::session::tools::view("Edit", &input, root);
        let done = r#"{"success":true,"file_path":"/r/a.txt","diffLines":[{"type":"removed","content":"one"}],"linesAdded":1,"linesRemoved":1}"#;
        let u = tool_result("call_0_0", Some(&view), done, false);
        assert_eq!(
            u,
            json!({
                "sessionUpdate": "tool_call_update",
                "toolCallId": "call_0_0",
                "status": "completed",
                "content": [{"type": "diff", "path": "/r/a.txt", "oldText": "one", "newText": "uno"}],
                "_meta": {"droidExecutor": {"result": {"success": true, "file_path": "/r/a.txt", "linesAdded": 1, "linesRemoved": 1}}},
            })
        );
        let refused = "Error: old_str not found";
        let u = tool_result("call_0_1", Some(&view), refused, true);
        assert_eq!(u["status"], "failed");
        assert_eq!(
            u["content"],
            json!([{"type": "content", "content": {"type": "text", "text": refused}}])
        );
        assert_eq!(u["rawOutput"], json!({"output": refused, "isError": true}));
        let run = droid_exec::session::tools::view("Execute", &json!({"command": "ls"}), root);
        let u = tool_result("call_0_2", Some(&run), "a.txt\n", false);
        assert_eq!(
            u["content"],
            json!([{"type": "content", "content": {"type": "text", "text": "a.txt\n"}}])
        );
        // a replay: the final status on the tool call itself
        let r = replayed_tool_call("call_0_3", &run, &json!({"command": "ls"}), None);
        assert_eq!(r["sessionUpdate"], "tool_call");
        assert_eq!(r["status"], "failed");
        assert_eq!(r["rawOutput"]["output"], NO_RESULT);
    }
}
