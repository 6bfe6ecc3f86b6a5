//! OpenCode's `run --format json` lines read as [`AgentEvent`]s.
//!
//! Every line is `{type, timestamp, sessionID, part | error}` (OpenCode 1.18.33; the recorded
//! cases `basic-tool-turn`, `edit-existing-file`, `permission-deny-and-ask`, `model-error-400`
//! of the OpenCode recordings, `tests/fixtures/opencode-1.18.33/`). There is **no final event**: a turn is made of steps
//! (`step_start` … `step_finish`), and the turn is over when a `step_finish` has
//! `part.reason == "stop"`. That `step_finish` is read as the [`AgentEvent::Completion`], its
//! final text the `text` parts of that last step; the engine stops the CLI when it sees it. An
//! `error` line is an [`AgentEvent::Error`]. A tool is reported once, when it has finished
//! (`tool_use` with `state.status` `completed` or `error`), so each `tool_use` line gives a
//! [`AgentEvent::ToolCall`] and its [`AgentEvent::ToolResult`] at once, stamped with the tool's own
//! start and end times.

use droid_contract::Usage;
use serde::Deserialize;
use serde_json::Value;

use crate::providers::droid::patch_paths;
use crate::providers::{AgentEvent, EventParser, ToolKind, WriteChange};

/// OpenCode's text when `run` auto-rejected a permission `ask` (the run ends right there).
pub(crate) const REJECTED: &str = "rejected permission";
/// OpenCode's text when a `deny` rule refused one call (the run goes on).
pub(crate) const DENIED_BY_RULE: &str = "specified a rule which prevents you from using";
/// OpenCode's text for a call of a tool that a `deny` rule removed from the model's tools.
pub(crate) const UNAVAILABLE_TOOL: &str = "Model tried to call unavailable tool";

/// The tools whose removal is a permission matter (the ones `edit`, `bash` and `webfetch`
/// rules govern), as opposed to a tool name the model made up.
pub(crate) const GOVERNED_TOOLS: [&str; 7] = [
    "write",
    "edit",
    "patch",
    "apply_patch",
    "multiedit",
    "bash",
    "webfetch",
];

#[derive(Deserialize)]
struct Line {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default, rename = "sessionID")]
    session_id: Option<String>,
    #[serde(default)]
    part: Value,
    #[serde(default)]
    error: Value,
}

/// The stateful reader of one run's stdout.
#[derive(Debug, Default)]
pub(crate) struct OpencodeParser {
    session_id: Option<String>,
    /// Text parts of the current step.
    step_text: Vec<String>,
    /// Finished steps (model calls).
    steps: u64,
    usage: Usage,
    /// The reason of the last `step_finish`.
    last_reason: Option<String>,
    completed: bool,
}

fn str_at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a str> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_str()
}

fn u64_at(v: &Value, path: &[&str]) -> Option<u64> {
    path.iter().try_fold(v, |v, k| v.get(k))?.as_u64()
}

/// What an OpenCode tool call does: `bash` runs `command`; `write` creates (or overwrites)
/// `filePath`; `edit` edits it; `patch`/`apply_patch` name their files in the patch headers.
pub(crate) fn tool_kind(tool: &str, input: &Value, metadata: &Value) -> ToolKind {
    let file_path = || {
        str_at(input, &["filePath"])
            .map(|s| vec![s.to_owned()])
            .unwrap_or_default()
    };
    match tool {
        "bash" => ToolKind::Shell {
            command: str_at(input, &["command"]).unwrap_or_default().to_owned(),
        },
        "write" => ToolKind::Write {
            paths: file_path(),
            change: if metadata.get("exists").and_then(Value::as_bool) == Some(true) {
                WriteChange::Edit
            } else {
                WriteChange::Create {
                    lines: str_at(input, &["content"]).map(|c| c.lines().count()),
                }
            },
        },
        "edit" | "multiedit" => ToolKind::Write {
            paths: file_path(),
            change: WriteChange::Edit,
        },
        "patch" | "apply_patch" => ToolKind::Write {
            paths: str_at(input, &["patchText"])
                .map(patch_paths)
                .unwrap_or_default(),
            change: WriteChange::Patch,
        },
        _ => ToolKind::Other,
    }
}

impl OpencodeParser {
    fn tool_use(&self, part: &Value, out: &mut Vec<AgentEvent>) {
        let tool = str_at(part, &["tool"]).unwrap_or_default().to_owned();
        let id = str_at(part, &["callID"])
            .or_else(|| str_at(part, &["id"]))
            .unwrap_or_default()
            .to_owned();
        let state = part.get("state").unwrap_or(&Value::Null);
        let input = state.get("input").cloned().unwrap_or(Value::Null);
        let metadata = state.get("metadata").unwrap_or(&Value::Null);
        let status = str_at(state, &["status"]).unwrap_or_default();
        let exit_code = (tool == "bash")
            .then(|| metadata.get("exit").and_then(Value::as_i64))
            .flatten()
            .and_then(|c| i32::try_from(c).ok());
        let diffstat = u64_at(metadata, &["filediff", "additions"])
            .zip(u64_at(metadata, &["filediff", "deletions"]));
        let text = match status {
            "error" => str_at(state, &["error"]).unwrap_or_default(),
            _ => str_at(state, &["output"]).unwrap_or_default(),
        }
        .to_owned();
        let is_error =
            status != "completed" || tool == "invalid" || exit_code.is_some_and(|c| c != 0);
        out.push(AgentEvent::ToolCall {
            id: id.clone(),
            kind: tool_kind(&tool, &input, metadata),
            tool: tool.clone(),
            parameters: input,
            timestamp_ms: u64_at(state, &["time", "start"]),
        });
        out.push(AgentEvent::ToolResult {
            id,
            tool,
            is_error,
            text,
            exit_code,
            diffstat,
            timestamp_ms: u64_at(state, &["time", "end"]),
        });
    }

    fn step_finish(&mut self, part: &Value, out: &mut Vec<AgentEvent>) {
        self.steps += 1;
        let tokens = part.get("tokens").unwrap_or(&Value::Null);
        let n = |path: &[&str]| u64_at(tokens, path).unwrap_or(0);
        self.usage.input_tokens += n(&["input"]);
        self.usage.output_tokens += n(&["output"]) + n(&["reasoning"]);
        self.usage.cache_read_input_tokens += n(&["cache", "read"]);
        self.usage.cache_creation_input_tokens += n(&["cache", "write"]);
        // each step is one model call and reports its own tokens: the running total goes out
        // at once, for a token budget (docs/providers.md#token-usage)
        out.push(AgentEvent::Usage(self.usage.clone()));
        let reason = str_at(part, &["reason"]).unwrap_or_default().to_owned();
        if reason == "stop" && !self.completed {
            self.completed = true;
            out.push(AgentEvent::Completion {
                final_text: self.step_text.join("\n\n"),
                num_turns: Some(self.steps),
                session_id: self.session_id.clone(),
                usage: Some(self.usage.clone()),
            });
        }
        self.last_reason = Some(reason);
    }
}

/// `error.data.message` with its HTTP status, e.g. `mock: bad request (HTTP 400)`.
fn error_message(error: &Value) -> String {
    let data = error.get("data").unwrap_or(&Value::Null);
    let message = str_at(data, &["message"])
        .map(str::to_owned)
        .or_else(|| str_at(error, &["message"]).map(str::to_owned))
        .unwrap_or_else(|| error.to_string());
    match u64_at(data, &["statusCode"]) {
        Some(status) => format!("{message} (HTTP {status})"),
        None => message,
    }
}

impl EventParser for OpencodeParser {
    fn line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let Ok(l) = serde_json::from_slice::<Line>(line) else {
            out.push(AgentEvent::Unknown(
                String::from_utf8_lossy(line).into_owned(),
            ));
            return;
        };
        if self.session_id.is_none()
            && let Some(s) = l.session_id.filter(|s| !s.is_empty())
        {
            self.session_id = Some(s.clone());
            out.push(AgentEvent::Init {
                session_id: Some(s),
                model: None,
            });
        }
        match l.kind.as_str() {
            "step_start" => self.step_text.clear(),
            "text" => {
                let text = str_at(&l.part, &["text"]).unwrap_or_default().to_owned();
                self.step_text.push(text.clone());
                out.push(AgentEvent::Message {
                    role: "assistant".into(),
                    text,
                });
            }
            // only with --thinking, which we do not pass
            "reasoning" => {}
            "tool_use" => self.tool_use(&l.part, out),
            "step_finish" => self.step_finish(&l.part, out),
            "error" => out.push(AgentEvent::Error {
                source: str_at(&l.error, &["name"]).unwrap_or("error").to_owned(),
                message: error_message(&l.error),
            }),
            _ => out.push(AgentEvent::Unknown(
                String::from_utf8_lossy(line).into_owned(),
            )),
        }
    }

    fn end(&mut self, out: &mut Vec<AgentEvent>) {
        // a turn the model ended for another reason than `stop` (length, content filter): the
        // output ends with no completion; say why
        if self.completed {
            return;
        }
        if let Some(reason) = self
            .last_reason
            .as_deref()
            .filter(|r| !r.is_empty() && *r != "tool-calls")
        {
            out.push(AgentEvent::Error {
                source: "step".into(),
                message: format!(
                    "the model ended its last step with reason '{reason}', not 'stop'"
                ),
            });
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    pub(crate) fn recorded(case: &str) -> Vec<AgentEvent> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/opencode-1.18.33")
            .join(format!("{case}.ndjson"));
        let text = std::fs::read_to_string(path).unwrap();
        let mut p = OpencodeParser::default();
        let mut out = Vec::new();
        for l in text.lines() {
            p.line(l.as_bytes(), &mut out);
        }
        p.end(&mut out);
        // the running usage has a test of its own
        out.retain(|e| !matches!(e, AgentEvent::Usage(_)));
        out
    }

    #[test]
    fn the_recorded_basic_turn() {
        let ev = recorded("basic-tool-turn");
        let session = "ses_dfe7e2c50ffeG7evnH80J7LlT7";
        assert_eq!(
            ev[0],
            AgentEvent::Init {
                session_id: Some(session.into()),
                model: None
            }
        );
        assert_eq!(
            ev[1],
            AgentEvent::Message {
                role: "assistant".into(),
                text: "Creating the file.".into()
            }
        );
        assert_eq!(
            ev[2],
            AgentEvent::ToolCall {
                id: "call_aa20028b".into(),
                tool: "write".into(),
                kind: ToolKind::Write {
                    paths: vec!["/tmp/agentclis/work-opencode/hello.txt".into()],
                    change: WriteChange::Create { lines: Some(1) }
                },
                parameters: json!({"filePath": "/tmp/agentclis/work-opencode/hello.txt", "content": "hello world\n"}),
                timestamp_ms: Some(1_795_321_617_978),
            }
        );
        assert_eq!(
            ev[5],
            AgentEvent::ToolResult {
                id: "call_75c78858".into(),
                tool: "bash".into(),
                is_error: false,
                text: "hello world\ndone\n".into(),
                exit_code: Some(0),
                diffstat: None,
                timestamp_ms: Some(1_795_321_618_509),
            }
        );
        assert_eq!(
            ev[6],
            AgentEvent::ToolCall {
                id: "call_a14d251b".into(),
                tool: "bash".into(),
                kind: ToolKind::Shell {
                    command: "echo failing >&2; exit 3".into()
                },
                parameters: json!({"command": "echo failing >&2; exit 3", "description": "Fail on purpose"}),
                timestamp_ms: Some(1_795_321_618_730),
            }
        );
        assert!(matches!(
            &ev[7],
            AgentEvent::ToolResult { is_error: true, exit_code: Some(3), text, .. } if text == "failing\n"
        ));
        assert_eq!(
            ev.last(),
            Some(&AgentEvent::Completion {
                final_text: "All done. Created hello.txt.".into(),
                num_turns: Some(4),
                session_id: Some(session.into()),
                usage: Some(Usage {
                    input_tokens: 40,
                    output_tokens: 20,
                    ..Usage::default()
                }),
            })
        );
        assert_eq!(ev.len(), 10);
    }

    #[test]
    fn an_edit_has_its_diffstat() {
        let ev = recorded("edit-existing-file");
        let edit = ev
            .iter()
            .find(|e| matches!(e, AgentEvent::ToolResult { tool, .. } if tool == "edit"));
        assert!(
            matches!(
                edit,
                Some(AgentEvent::ToolResult {
                    diffstat: Some((1, 1)),
                    is_error: false,
                    ..
                })
            ),
            "{edit:?}"
        );
        assert!(ev.iter().any(|e| matches!(e, AgentEvent::ToolCall { kind: ToolKind::Write { change: WriteChange::Edit, paths }, .. } if paths == &["/tmp/agentclis/work-opencode/hello.txt"])));
        assert!(
            matches!(ev.last(), Some(AgentEvent::Completion { final_text, .. }) if final_text == "Edited hello.txt.")
        );
    }

    #[test]
    fn a_rejected_permission_ends_without_completion() {
        let ev = recorded("permission-deny-and-ask");
        assert!(
            !ev.iter()
                .any(|e| matches!(e, AgentEvent::Completion { .. }))
        );
        assert!(ev.iter().any(|e| matches!(e, AgentEvent::ToolResult { tool, is_error: true, text, .. } if tool == "bash" && text.contains(REJECTED))));
        assert!(ev.iter().any(|e| matches!(e, AgentEvent::ToolResult { tool, is_error: true, text, .. } if tool == "invalid" && text.contains(UNAVAILABLE_TOOL))));
        // the last step ended for tool calls: nothing more to say at the end
        assert!(!ev.iter().any(|e| matches!(e, AgentEvent::Error { .. })));
    }

    #[test]
    fn a_model_error_is_an_error_event() {
        assert_eq!(
            recorded("model-error-400"),
            vec![
                AgentEvent::Init {
                    session_id: Some("ses_dfe7d64a3ffew4NZEQo0tw0lQw".into()),
                    model: None
                },
                AgentEvent::Error {
                    source: "APIError".into(),
                    message: "mock: invalid request (scripted 400) (HTTP 400)".into()
                }
            ]
        );
    }

    #[test]
    fn a_step_ended_by_length_is_said_at_the_end() {
        let mut p = OpencodeParser::default();
        let mut out = Vec::new();
        p.line(
            br#"{"type":"step_finish","sessionID":"ses_1","part":{"reason":"length","tokens":{"input":1,"output":2}}}"#,
            &mut out,
        );
        p.line(b"not json", &mut out);
        p.line(br#"{"type":"brand_new"}"#, &mut out);
        p.end(&mut out);
        assert_eq!(
            out,
            vec![
                AgentEvent::Init {
                    session_id: Some("ses_1".into()),
                    model: None
                },
                AgentEvent::Usage(Usage {
                    input_tokens: 1,
                    output_tokens: 2,
                    ..Usage::default()
                }),
                AgentEvent::Unknown("not json".into()),
                AgentEvent::Unknown(r#"{"type":"brand_new"}"#.into()),
                AgentEvent::Error {
                    source: "step".into(),
                    message: "the model ended its last step with reason 'length', not 'stop'"
                        .into()
                },
            ]
        );
    }

    /// Recorded against the scripted model answering three calls with 100/20 (50 read from
    /// the cache), 200/40 (60) and 300/60 (70) tokens: each `step_finish` gives its call's
    /// tokens, `input` without the cache reads; the running total goes out after each.
    #[test]
    fn usage_goes_out_after_every_step() {
        let text = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/opencode-1.18.33/usage-cache.ndjson"),
        )
        .unwrap();
        let mut p = OpencodeParser::default();
        let mut out = Vec::new();
        for l in text.lines() {
            p.line(l.as_bytes(), &mut out);
        }
        let total = |input, output, read| Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: read,
            ..Usage::default()
        };
        let usages: Vec<Usage> = out
            .iter()
            .filter_map(|e| match e {
                AgentEvent::Usage(u) => Some(u.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(
            usages,
            [
                total(100, 20, 50),
                total(300, 60, 110),
                total(600, 120, 180)
            ]
        );
        let completion = out.iter().find_map(|e| match e {
            AgentEvent::Completion { usage, .. } => usage.clone(),
            _ => None,
        });
        assert_eq!(completion, Some(total(600, 120, 180)));
        assert_eq!(completion.map(|u| u.budget_tokens()), Some(720));
    }
}
