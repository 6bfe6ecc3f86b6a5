//! Reading droid's events for what they mean: the commands it ran (Execute calls paired with their
//! results), files it touched outside the repository, permission refusals, and the known failure
//! shapes (authentication, model errors, bad flags), each mapped to an issue type.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use droid_contract::{CommandRun, CommandSource, Issue, IssueType, normalize};
use serde_json::Value;

use crate::excerpt::{head_str, tail_str};
use crate::provider::AgentEvent;
use crate::redact::Redactor;

/// droid's abort text when a tool call needs more autonomy than the run has.
const PERMISSION_ABORT: &str = "insufficient permission to proceed";
/// droid's text for a tool that is not offered at this autonomy (the run continues).
const NOT_PERMITTED: &str = "is not permitted in this exec session";

/// The exit code in droid's Execute output (`[Process exited with code N]` or
/// `Command failed (exit code: N)`), `None` for a timeout, a signal or no code at all.
pub(crate) fn execute_exit_code(text: &str) -> Option<i32> {
    let grab = |marker: &str, end: char| {
        text.rfind(marker).and_then(|i| {
            let rest = &text[i + marker.len()..];
            rest.split(end).next()?.trim().parse::<i32>().ok()
        })
    };
    grab("[Process exited with code ", ']').or_else(|| grab("Command failed (exit code: ", ')'))
}

/// Execute's output without droid's framing (`Error: Command failed (exit code: N)\n` before,
/// `\n\n\n[Process exited with code N]` after).
fn execute_output(text: &str) -> &str {
    let mut t = text;
    if let Some(rest) = t.strip_prefix("Error: Command failed (exit code: ") {
        t = rest.split_once(")\n").map_or(rest, |(_, r)| r);
    }
    if let Some(i) = t.rfind("[Process exited with code ") {
        t = &t[..i];
    }
    t.trim_end_matches('\n')
}

/// Commands droid ran: each Execute call with its result, in call order.
pub(crate) fn agent_commands(
    events: &[AgentEvent],
    keep: usize,
    redact: &Redactor,
) -> Vec<CommandRun> {
    let mut results: HashMap<&str, (&str, Option<u64>)> = HashMap::new();
    for ev in events {
        if let AgentEvent::ToolResult {
            id,
            text,
            timestamp_ms,
            ..
        } = ev
        {
            results.insert(id.as_str(), (text.as_str(), *timestamp_ms));
        }
    }
    let mut out = Vec::new();
    for ev in events {
        let AgentEvent::ToolCall {
            id,
            tool,
            parameters,
            timestamp_ms,
        } = ev
        else {
            continue;
        };
        if tool != "Execute" {
            continue;
        }
        let command = parameters
            .get("command")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let (exit_code, output, duration_ms) = match results.get(id.as_str()) {
            Some((text, done)) => (
                execute_exit_code(text),
                execute_output(text).to_owned(),
                match (timestamp_ms, done) {
                    (Some(a), Some(b)) => b.saturating_sub(*a),
                    _ => 0,
                },
            ),
            None => (
                None,
                "no result: the run ended before this command finished".to_owned(),
                0,
            ),
        };
        let (excerpt, truncated) = tail_str(&output, keep);
        out.push(CommandRun {
            command: redact.apply(&command),
            exit_code,
            duration_ms,
            stdout_excerpt: redact.apply(&excerpt),
            stderr_excerpt: String::new(),
            source: CommandSource::Agent,
            truncated,
        });
    }
    out
}

/// Paths a write tool call names: `file_path` of Create/Edit/MultiEdit, and the file headers of an
/// ApplyPatch patch.
fn written_paths(tool: &str, parameters: &Value) -> Vec<String> {
    match tool {
        "Create" | "Edit" | "MultiEdit" | "Write" => parameters
            .get("file_path")
            .and_then(Value::as_str)
            .map(|s| vec![s.to_owned()])
            .unwrap_or_default(),
        "ApplyPatch" => parameters
            .get("input")
            .and_then(Value::as_str)
            .map(|patch| {
                patch
                    .lines()
                    .filter_map(|l| {
                        [
                            "*** Add File: ",
                            "*** Update File: ",
                            "*** Delete File: ",
                            "*** Move to: ",
                        ]
                        .iter()
                        .find_map(|h| l.strip_prefix(h))
                        .map(|p| p.trim().to_owned())
                    })
                    .collect()
            })
            .unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// `path` (as droid wrote it) relative to the repository, or `None` when it lies outside.
pub(crate) fn inside_repo(path: &str, root: &Path, real_root: &Path) -> Option<PathBuf> {
    let p = Path::new(path);
    let abs = if p.is_absolute() {
        normalize(p)?
    } else {
        normalize(&root.join(p))?
    };
    abs.strip_prefix(root)
        .or_else(|_| abs.strip_prefix(real_root))
        .ok()
        .map(Path::to_path_buf)
}

/// What droid's tool calls say about files: highlights per repository path, and paths written
/// outside the repository.
pub(crate) struct ToolFiles {
    pub highlights: HashMap<PathBuf, Vec<String>>,
    pub outside: Vec<String>,
}

pub(crate) fn tool_files(events: &[AgentEvent], root: &Path, real_root: &Path) -> ToolFiles {
    let mut ok_ids: HashMap<&str, &str> = HashMap::new();
    for ev in events {
        if let AgentEvent::ToolResult {
            id,
            is_error: false,
            text,
            ..
        } = ev
        {
            ok_ids.insert(id.as_str(), text.as_str());
        }
    }
    let mut highlights: HashMap<PathBuf, Vec<String>> = HashMap::new();
    let mut outside = Vec::new();
    for ev in events {
        let AgentEvent::ToolCall {
            id,
            tool,
            parameters,
            ..
        } = ev
        else {
            continue;
        };
        for path in written_paths(tool, parameters) {
            match inside_repo(&path, root, real_root) {
                None => {
                    if !outside.contains(&path) {
                        outside.push(path);
                    }
                }
                Some(rel) => {
                    let Some(result) = ok_ids.get(id.as_str()) else {
                        continue;
                    };
                    let note = match tool.as_str() {
                        "Create" => {
                            let lines = parameters
                                .get("content")
                                .and_then(Value::as_str)
                                .map_or(0, |c| c.lines().count());
                            format!("created by droid ({lines} lines)")
                        }
                        "Edit" | "MultiEdit" => {
                            let v: Value = serde_json::from_str(result).unwrap_or(Value::Null);
                            match (v.get("linesAdded"), v.get("linesRemoved")) {
                                (Some(a), Some(r)) => format!("edited by droid (+{a} -{r})"),
                                _ => "edited by droid".to_owned(),
                            }
                        }
                        other => format!("changed by droid ({other})"),
                    };
                    highlights.entry(rel).or_default().push(note);
                }
            }
        }
    }
    ToolFiles {
        highlights,
        outside,
    }
}

/// Issues read from droid's events and stderr.
#[derive(Debug, Default)]
pub(crate) struct Findings {
    pub issues: Vec<Issue>,
    pub permission_denied: bool,
    /// The most telling error message, for the summary.
    pub headline: Option<String>,
}

impl Findings {
    fn add(&mut self, issue: Issue) {
        if !self
            .issues
            .iter()
            .any(|i| i.kind == issue.kind && i.description == issue.description)
        {
            self.issues.push(issue);
        }
    }
}

fn model_error_text(m: &str) -> bool {
    let starts_with_status =
        m.len() > 4 && m.as_bytes()[..3].iter().all(u8::is_ascii_digit) && m.as_bytes()[3] == b' ';
    starts_with_status
        || m.contains("Connection error")
        || m.contains("network issues")
        || m.contains("Invalid model")
        || m.contains("routes through Factory's LLM proxy")
}

/// Classify what droid said went wrong. `completed`: a completion event arrived.
pub(crate) fn findings(events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
    let mut f = Findings::default();
    for ev in events {
        match ev {
            AgentEvent::ToolResult {
                is_error: true,
                text,
                tool,
                ..
            } => {
                if text.contains(PERMISSION_ABORT) {
                    f.permission_denied = true;
                    f.add(Issue::new(
                        IssueType::PermissionDenied,
                        format!("droid stopped: its autonomy level refused a {tool} call ({})", head_str(text.trim_start_matches("Error: "), 300)),
                        "run again with a higher autonomy (autonomy: medium or high, capped by the server's max_autonomy) if that action is wanted",
                    ));
                } else if text.contains(NOT_PERMITTED) {
                    f.permission_denied = true;
                    f.add(Issue::new(
                        IssueType::PermissionDenied,
                        format!("droid tried a tool its autonomy level does not offer: {}", head_str(text.trim_start_matches("Error: "), 300)),
                        "raise the autonomy (execution_mode code runs at low) if droid needs that tool",
                    ));
                }
            }
            AgentEvent::Error { source, message } => {
                if message.contains("Authentication failed") {
                    f.headline = Some(message.clone());
                    f.add(Issue::new(
                        IssueType::AuthFailure,
                        format!("droid could not authenticate: {}", head_str(message, 300)),
                        "set FACTORY_API_KEY (or log in with droid), or configure a custom model and pass it as model",
                    ));
                } else if message.contains(PERMISSION_ABORT) {
                    f.permission_denied = true;
                } else if source == "agent_loop" && model_error_text(message) {
                    f.headline = Some(message.clone());
                    f.add(Issue::new(
                        IssueType::ModelError,
                        format!("the model request failed: {}", head_str(message, 500)),
                        "check the model endpoint, its key and its limits, then run the task again",
                    ));
                } else if source == "agent_loop" {
                    f.headline = Some(message.clone());
                    f.add(Issue::new(
                        IssueType::AgentError,
                        format!("droid reported: {}", head_str(message, 500)),
                        "read logs, fix the cause, and run the task again",
                    ));
                } else if f.headline.is_none() {
                    f.headline = Some(message.clone());
                }
            }
            _ => {}
        }
    }
    let stderr = stderr.trim();
    if !stderr.is_empty() {
        let first = stderr.lines().next().unwrap_or(stderr);
        let issue = if stderr.contains("Authentication failed") {
            Some((
                IssueType::AuthFailure,
                "set FACTORY_API_KEY, or pass a custom model",
            ))
        } else if stderr.contains("Invalid model") {
            Some((
                IssueType::ModelError,
                "pass a model droid knows (droid exec --help lists them; custom models are custom:<displayName>-<n>)",
            ))
        } else if stderr.contains("Error changing to directory") {
            Some((
                IssueType::EnvIssue,
                "check that repo_root exists and is readable",
            ))
        } else if !completed {
            Some((
                IssueType::AgentError,
                "read logs for droid's stderr; check the droid version and the request's model/session/reasoning_effort values",
            ))
        } else {
            None
        };
        if let Some((kind, action)) = issue {
            if f.headline.is_none() {
                f.headline = Some(first.to_owned());
            }
            f.add(Issue::new(
                kind,
                format!("droid said on stderr: {}", head_str(first, 500)),
                action,
            ));
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::droid::Droid;
    use crate::provider::Provider;

    fn recorded(name: &str) -> Vec<AgentEvent> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/droid")
            .join(format!("{name}.ndjson"));
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| Droid.parse_line(l.as_bytes()))
            .collect()
    }

    #[test]
    fn exit_codes() {
        assert_eq!(
            execute_exit_code("hello\n\n\n[Process exited with code 0]"),
            Some(0)
        );
        assert_eq!(
            execute_exit_code(
                "Error: Command failed (exit code: 3)\nto-stderr\n\n\n[Process exited with code 3]"
            ),
            Some(3)
        );
        assert_eq!(
            execute_exit_code("Error: Command terminated by signal: SIGTERM"),
            None
        );
        assert_eq!(
            execute_exit_code("Command timed out after 2 seconds. Consider increasing the timeout"),
            None
        );
        assert_eq!(
            execute_output(
                "Error: Command failed (exit code: 3)\nto-stderr\n\n\n[Process exited with code 3]"
            ),
            "to-stderr"
        );
    }

    #[test]
    fn commands_from_the_recorded_tool_dance() {
        let cmds = agent_commands(&recorded("tools-stream-json"), 4096, &Redactor::default());
        assert_eq!(
            cmds,
            vec![
                CommandRun {
                    command: "cat /tmp/rw/t1/hello.txt && echo done".into(),
                    exit_code: Some(0),
                    duration_ms: 120,
                    stdout_excerpt: "hello droid\ndone".into(),
                    stderr_excerpt: String::new(),
                    source: CommandSource::Agent,
                    truncated: false,
                },
                CommandRun {
                    command: "echo to-stderr >&2; exit 3".into(),
                    exit_code: Some(3),
                    duration_ms: 38,
                    stdout_excerpt: "to-stderr".into(),
                    stderr_excerpt: String::new(),
                    source: CommandSource::Agent,
                    truncated: false,
                },
            ]
        );
    }

    #[test]
    fn tool_files_in_and_out_of_the_repo() {
        let ev = recorded("tools-stream-json");
        let t = tool_files(&ev, Path::new("/tmp/rw/t1"), Path::new("/tmp/rw/t1"));
        assert_eq!(
            t.highlights.get(Path::new("hello.txt")),
            Some(&vec![
                "created by droid (1 lines)".to_owned(),
                "edited by droid (+1 -1)".to_owned()
            ])
        );
        assert!(t.outside.is_empty());
        let t = tool_files(&ev, Path::new("/tmp/other"), Path::new("/tmp/other"));
        assert_eq!(t.outside, vec!["/tmp/rw/t1/hello.txt".to_owned()]);
    }

    #[test]
    fn recorded_failures_map_to_issue_types() {
        let kinds = |name: &str| -> (Vec<IssueType>, bool) {
            let f = findings(&recorded(name), "", false);
            (
                f.issues.iter().map(|i| i.kind).collect(),
                f.permission_denied,
            )
        };
        assert_eq!(
            kinds("http400-stream-json"),
            (vec![IssueType::ModelError], false)
        );
        assert_eq!(
            kinds("auth-builtin-model-noairgap-stream-json"),
            (vec![IssueType::AuthFailure], false)
        );
        assert_eq!(
            kinds("autonomy-low-git-push-high-stream-json"),
            (vec![IssueType::PermissionDenied], true)
        );
        let f = findings(
            &[],
            "Invalid model: custom:Nope-0\n\nAvailable built-in models:\n  None",
            false,
        );
        assert_eq!(f.issues[0].kind, IssueType::ModelError);
        assert_eq!(f.headline.as_deref(), Some("Invalid model: custom:Nope-0"));
    }
}
