//! Claude Code's `--output-format stream-json --verbose` lines read as [`AgentEvent`]s
//! (Claude Code 2.1.330; the recorded cases are in tests/fixtures/claude-code-2.1.330/).
//!
//! | line | event |
//! |---|---|
//! | `system/init` | [`AgentEvent::Init`] (`session_id`, `model`) |
//! | `system/permission_denied` | [`AgentEvent::Error`] with source `permission_denied` (`default-permissions-denied`) |
//! | `system/api_retry` | [`AgentEvent::Error`] with source `api_retry` (a log line; `auth-401`) |
//! | `system/{status,thinking_tokens,ui_invalidate,informational,…}` | nothing (progress noise) |
//! | `assistant` text / tool_use block | [`AgentEvent::Message`] / [`AgentEvent::ToolCall`] (one block per line) |
//! | `assistant` with `is_api_error_message` | [`AgentEvent::Error`], source = its `error` (`authentication_failed`, `unknown`, …) (`model-error-400`, `auth-401`) |
//! | `user` tool_result blocks | [`AgentEvent::ToolResult`]; Bash's exit code is only in the text (`Exit code 3\n…`, `basic-tool-turn`) |
//! | `result` with `subtype: success` and `is_error: false` | [`AgentEvent::Completion`], the only proof of success |
//! | any other `result` | [`AgentEvent::Error`] with source = `terminal_reason` or `subtype` (an API error is `subtype: success` with `is_error: true`!) |
//! | `result.permission_denials` not seen as `system/permission_denied` | [`AgentEvent::Error`] with source `permission_denied` |
//! | `stream_event` | nothing (only with `--include-partial-messages`, which we never pass) |
//!
//! Anything else (another `type`, non-JSON, invalid UTF-8, a cut line) is
//! [`AgentEvent::Unknown`] holding the line. The parser is stateful: a tool result names only
//! its `tool_use_id`, so the tool's name (and whether a Bash call ran in the background) is
//! remembered from the call.

use std::collections::{HashMap, HashSet};

use droid_contract::Usage;
use serde_json::Value;

use crate::providers::{AgentEvent, EventParser, ToolKind, WriteChange};

/// Tool calls remembered for pairing with their results; a run with more (a runaway agent) still
/// parses, its later results just lose their tool name.
const MAX_TRACKED_CALLS: usize = 100_000;

/// `Error` source for a permission refusal.
pub(crate) const PERMISSION_DENIED: &str = "permission_denied";
/// `Error` source for a retried API call (a log line, not a failure).
pub(crate) const API_RETRY: &str = "api_retry";

/// What is remembered of a tool call.
struct Call {
    tool: String,
    background: bool,
}

/// One run's parser.
#[derive(Default)]
pub(crate) struct ClaudeParser {
    calls: HashMap<String, Call>,
    denied: HashSet<String>,
    /// The text of the synthetic API-error message already reported.
    api_error: Option<String>,
    /// Usage of the model calls before the current one (docs/providers.md#token-usage).
    usage_done: Usage,
    /// The current model call: its message id and its usage as its `assistant` events say.
    usage_call: Option<(String, Usage)>,
}

fn s<'a>(v: &'a Value, key: &str) -> Option<&'a str> {
    v.get(key).and_then(Value::as_str)
}

fn owned(v: &Value, key: &str) -> Option<String> {
    s(v, key).map(str::to_owned)
}

/// What a Claude Code tool call does: `Bash` runs `command`; `Write` creates (or overwrites)
/// `file_path`; `Edit`/`MultiEdit` edit `file_path`; `NotebookEdit` edits `notebook_path`.
pub(crate) fn tool_kind(tool: &str, input: &Value) -> ToolKind {
    let path = |key: &str| owned(input, key).map(|p| vec![p]).unwrap_or_default();
    match tool {
        "Bash" => ToolKind::Shell {
            command: owned(input, "command").unwrap_or_default(),
        },
        "Write" => ToolKind::Write {
            paths: path("file_path"),
            change: WriteChange::Create {
                lines: s(input, "content").map(|c| c.lines().count()),
            },
        },
        "Edit" | "MultiEdit" => ToolKind::Write {
            paths: path("file_path"),
            change: WriteChange::Edit,
        },
        "NotebookEdit" => ToolKind::Write {
            paths: path("notebook_path"),
            change: WriteChange::Edit,
        },
        _ => ToolKind::Other,
    }
}

/// The exit code at the head of a failed Bash result (`Exit code 3\nfailing`), and the output
/// after that line.
pub(crate) fn bash_exit(text: &str) -> Option<(i32, &str)> {
    let rest = text.strip_prefix("Exit code ")?;
    let (code, output) = rest.split_once('\n').unwrap_or((rest, ""));
    Some((code.trim().parse().ok()?, output))
}

/// Epoch milliseconds of an RFC 3339 UTC timestamp as Claude Code writes it
/// (`2026-11-22T04:17:56.991Z`); `None` for anything else.
pub(crate) fn epoch_ms(ts: &str) -> Option<u64> {
    let b = ts.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || !ts.ends_with('Z') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| ts.get(r)?.parse::<u64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let ms = match ts.get(19..ts.len() - 1)? {
        "" => 0,
        frac => {
            let digits = frac.strip_prefix('.')?;
            if digits.is_empty() || digits.len() > 9 || !digits.bytes().all(|c| c.is_ascii_digit())
            {
                return None;
            }
            let three: String = digits.chars().chain("00".chars()).take(3).collect();
            three.parse::<u64>().ok()?
        }
    };
    // days from civil (Howard Hinnant's algorithm), for years from 1970 on
    let y = i64::try_from(y).ok()? - i64::from(mo <= 2);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mo = i64::try_from(mo).ok()?;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + i64::try_from(d).ok()? - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = u64::try_from(days).ok()? * 86_400 + h * 3600 + mi * 60 + sec;
    Some(secs * 1000 + ms)
}

/// A tool result's content: a string, or text blocks.
fn content_text(content: Option<&Value>) -> String {
    match content {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(t)) => t.clone(),
        Some(Value::Array(blocks)) => blocks
            .iter()
            .filter_map(|b| s(b, "text"))
            .collect::<Vec<_>>()
            .join("\n"),
        Some(other) => other.to_string(),
    }
}

/// Lines added and removed in an Edit's `structuredPatch`.
fn diffstat(tool_use_result: Option<&Value>) -> Option<(u64, u64)> {
    let hunks = tool_use_result?.get("structuredPatch")?.as_array()?;
    let (mut added, mut removed) = (0, 0);
    for line in hunks
        .iter()
        .filter_map(|h| h.get("lines").and_then(Value::as_array))
        .flatten()
        .filter_map(Value::as_str)
    {
        if line.starts_with('+') {
            added += 1;
        } else if line.starts_with('-') {
            removed += 1;
        }
    }
    Some((added, removed))
}

/// `a` with each count raised to `b`'s where `b`'s is larger.
fn max_each(a: &Usage, b: &Usage) -> Usage {
    Usage {
        input_tokens: a.input_tokens.max(b.input_tokens),
        output_tokens: a.output_tokens.max(b.output_tokens),
        cache_read_input_tokens: a.cache_read_input_tokens.max(b.cache_read_input_tokens),
        cache_creation_input_tokens: a
            .cache_creation_input_tokens
            .max(b.cache_creation_input_tokens),
        factory_credits: 0,
        ttft_ms: None,
    }
}

/// Claude Code's cumulative usage (`result.usage`), read leniently: a missing or odd count is 0.
/// Also one model call's (`assistant`'s `message.usage`). Anthropic's `input_tokens` already
/// leaves out the cache reads and writes.
fn usage(v: Option<&Value>) -> Option<Usage> {
    let v = v.filter(|u| u.is_object())?;
    let n = |key: &str| v.get(key).and_then(Value::as_u64).unwrap_or(0);
    Some(Usage {
        input_tokens: n("input_tokens"),
        output_tokens: n("output_tokens"),
        cache_read_input_tokens: n("cache_read_input_tokens"),
        cache_creation_input_tokens: n("cache_creation_input_tokens"),
        factory_credits: 0,
        ttft_ms: None,
    })
}

impl ClaudeParser {
    /// The run's usage so far, counting this `assistant` event's model call: Claude Code sends
    /// one event per content block, each with the call's usage as the stream began (exact
    /// input and cache counts, `output_tokens` the stream's first count, not its last), so a
    /// call is counted once, by its message id, with its largest counts. The `result` event
    /// has the exact total.
    fn call_usage(&mut self, v: &Value) -> Option<Usage> {
        let message = v.get("message")?;
        let id = s(message, "id")?;
        let this = usage(message.get("usage"))?;
        match &mut self.usage_call {
            Some((current, u)) if current == id => *u = max_each(u, &this),
            slot => {
                if let Some((_, previous)) = slot.take() {
                    self.usage_done = self.usage_done.plus(&previous);
                }
                *slot = Some((id.to_owned(), this));
            }
        }
        let (_, current) = self.usage_call.as_ref()?;
        Some(self.usage_done.plus(current))
    }

    fn system(&mut self, v: &Value, out: &mut Vec<AgentEvent>) -> bool {
        match s(v, "subtype") {
            Some("init") => out.push(AgentEvent::Init {
                session_id: owned(v, "session_id"),
                model: owned(v, "model"),
            }),
            Some("permission_denied") => {
                if let Some(id) = s(v, "tool_use_id") {
                    self.denied.insert(id.to_owned());
                }
                out.push(AgentEvent::Error {
                    source: PERMISSION_DENIED.into(),
                    message: format!(
                        "{}: {}",
                        s(v, "tool_name").unwrap_or("a tool"),
                        s(v, "message").unwrap_or("denied")
                    ),
                });
            }
            Some("api_retry") => {
                let num = |k: &str| v.get(k).map_or_else(|| "?".to_owned(), Value::to_string);
                out.push(AgentEvent::Error {
                    source: API_RETRY.into(),
                    message: format!(
                        "attempt {} of {} failed (status {}: {}), retrying in {} ms",
                        num("attempt"),
                        num("max_retries"),
                        num("error_status"),
                        s(v, "error").unwrap_or("error"),
                        num("retry_delay_ms"),
                    ),
                });
            }
            Some(
                "status" | "thinking_tokens" | "ui_invalidate" | "informational"
                | "compact_boundary",
            ) => {}
            _ => return false,
        }
        true
    }

    fn assistant(&mut self, v: &Value, out: &mut Vec<AgentEvent>) -> bool {
        let Some(blocks) = v
            .get("message")
            .and_then(|m| m.get("content"))
            .and_then(Value::as_array)
        else {
            return false;
        };
        if v.get("is_api_error_message").and_then(Value::as_bool) == Some(true) {
            let text = content_text(v.get("message").and_then(|m| m.get("content")));
            self.api_error = Some(text.clone());
            out.push(AgentEvent::Error {
                source: s(v, "error").unwrap_or("api_error").to_owned(),
                message: text,
            });
            return true;
        }
        if let Some(total) = self.call_usage(v) {
            out.push(AgentEvent::Usage(total));
        }
        let timestamp_ms = s(v, "timestamp").and_then(epoch_ms);
        for b in blocks {
            match s(b, "type") {
                Some("text") => {
                    let text = s(b, "text").unwrap_or("");
                    if !text.is_empty() {
                        out.push(AgentEvent::Message {
                            role: "assistant".into(),
                            text: text.to_owned(),
                        });
                    }
                }
                Some("tool_use") => {
                    let id = owned(b, "id").unwrap_or_default();
                    let tool = owned(b, "name").unwrap_or_default();
                    let parameters = b.get("input").cloned().unwrap_or(Value::Null);
                    if self.calls.len() < MAX_TRACKED_CALLS {
                        let background = parameters
                            .get("run_in_background")
                            .and_then(Value::as_bool)
                            .unwrap_or(false);
                        self.calls.insert(
                            id.clone(),
                            Call {
                                tool: tool.clone(),
                                background,
                            },
                        );
                    }
                    out.push(AgentEvent::ToolCall {
                        id,
                        kind: tool_kind(&tool, &parameters),
                        tool,
                        parameters,
                        timestamp_ms,
                    });
                }
                // thinking, redacted_thinking, server tool blocks: not ours to report
                _ => {}
            }
        }
        true
    }

    fn user(&mut self, v: &Value, out: &mut Vec<AgentEvent>) -> bool {
        let Some(content) = v.get("message").and_then(|m| m.get("content")) else {
            return false;
        };
        // a plain user text (a replayed prompt) says nothing new
        let Some(blocks) = content.as_array() else {
            return content.is_string();
        };
        let timestamp_ms = s(v, "timestamp").and_then(epoch_ms);
        let results: Vec<&Value> = blocks
            .iter()
            .filter(|b| s(b, "type") == Some("tool_result"))
            .collect();
        // `tool_use_result` describes the line's one tool result
        let detail = (results.len() == 1)
            .then(|| v.get("tool_use_result"))
            .flatten();
        for b in results {
            let id = owned(b, "tool_use_id").unwrap_or_default();
            let is_error = b.get("is_error").and_then(Value::as_bool).unwrap_or(false);
            let text = content_text(b.get("content"));
            let (tool, background) = self
                .calls
                .get(&id)
                .map_or((String::new(), false), |c| (c.tool.clone(), c.background));
            let (text, exit_code, stat) = match tool.as_str() {
                "Bash" => {
                    let interrupted = detail
                        .and_then(|d| d.get("interrupted"))
                        .and_then(Value::as_bool)
                        .unwrap_or(false);
                    if !is_error {
                        let code = (!interrupted && !background).then_some(0);
                        (text, code, None)
                    } else if let Some((code, rest)) = bash_exit(&text) {
                        (rest.to_owned(), Some(code), None)
                    } else {
                        (text, None, None)
                    }
                }
                "Edit" | "MultiEdit" if !is_error => (text, None, diffstat(detail)),
                _ => (text, None, None),
            };
            out.push(AgentEvent::ToolResult {
                id,
                tool,
                is_error,
                text,
                exit_code,
                diffstat: stat,
                timestamp_ms,
            });
        }
        true
    }

    fn result(&mut self, v: &Value, out: &mut Vec<AgentEvent>) -> bool {
        let is_error = v.get("is_error").and_then(Value::as_bool).unwrap_or(true);
        let subtype = s(v, "subtype").unwrap_or("");
        if let Some(denials) = v.get("permission_denials").and_then(Value::as_array) {
            for d in denials {
                let id = s(d, "tool_use_id").unwrap_or("");
                if self.denied.insert(id.to_owned()) {
                    out.push(AgentEvent::Error {
                        source: PERMISSION_DENIED.into(),
                        message: format!("{}: denied", s(d, "tool_name").unwrap_or("a tool")),
                    });
                }
            }
        }
        let session_id = owned(v, "session_id");
        if subtype == "success" && !is_error {
            out.push(AgentEvent::Completion {
                final_text: owned(v, "result").unwrap_or_default(),
                num_turns: v.get("num_turns").and_then(Value::as_u64),
                session_id,
                usage: usage(v.get("usage")),
            });
            return true;
        }
        let errors: Vec<&str> = v
            .get("errors")
            .and_then(Value::as_array)
            .map(|e| e.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let message = if errors.is_empty() {
            s(v, "result").unwrap_or("").to_owned()
        } else {
            errors.join("; ")
        };
        if self.api_error.as_deref() == Some(message.as_str()) {
            // already reported from the synthetic API-error message
            return true;
        }
        let source = s(v, "terminal_reason")
            .filter(|r| *r != "completed")
            .or(Some(subtype).filter(|s| !s.is_empty()))
            .unwrap_or("result");
        out.push(AgentEvent::Error {
            source: source.to_owned(),
            message: if message.is_empty() {
                format!("claude ended with {subtype} and no message")
            } else {
                message
            },
        });
        true
    }
}

impl EventParser for ClaudeParser {
    fn line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let unknown = || AgentEvent::Unknown(String::from_utf8_lossy(line).into_owned());
        let Ok(v) = serde_json::from_slice::<Value>(line) else {
            out.push(unknown());
            return;
        };
        let start = out.len();
        let understood = match s(&v, "type") {
            Some("system") => self.system(&v, out),
            Some("assistant") => self.assistant(&v, out),
            Some("user") => self.user(&v, out),
            Some("result") => self.result(&v, out),
            Some("stream_event") => true,
            _ => false,
        };
        if !understood {
            out.truncate(start);
            out.push(unknown());
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    /// Every event of a recorded stdout (tests/fixtures/claude-code-2.1.330/<name>.ndjson).
    pub(crate) fn recorded(name: &str) -> Vec<AgentEvent> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/claude-code-2.1.330")
            .join(format!("{name}.ndjson"));
        let text = std::fs::read(&path).unwrap();
        let mut p = ClaudeParser::default();
        let mut out = Vec::new();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            p.line(line, &mut out);
        }
        p.end(&mut out);
        // the running usage has a test of its own
        out.retain(|e| !matches!(e, AgentEvent::Usage(_)));
        out
    }

    fn without_init(events: Vec<AgentEvent>) -> Vec<AgentEvent> {
        events
            .into_iter()
            .filter(|e| !matches!(e, AgentEvent::Init { .. }))
            .collect()
    }

    #[test]
    fn the_recorded_tool_turn() {
        let events = recorded("basic-tool-turn");
        assert_eq!(
            events[0],
            AgentEvent::Init {
                session_id: Some("e3a003f8-c8e1-492f-9782-c5b90c36ff07".into()),
                model: Some("claude-opus-5-5".into()),
            }
        );
        let ts = |s: &str| epoch_ms(s);
        assert_eq!(
            events[1..],
            [
                AgentEvent::Message {
                    role: "assistant".into(),
                    text: "Creating the file.".into()
                },
                AgentEvent::ToolCall {
                    id: "toolu_68afef7da643".into(),
                    tool: "Write".into(),
                    kind: ToolKind::Write {
                        paths: vec!["/tmp/agentclis/work-claude/hello.txt".into()],
                        change: WriteChange::Create { lines: Some(1) }
                    },
                    parameters: json!({"file_path": "/tmp/agentclis/work-claude/hello.txt", "content": "hello world\n"}),
                    timestamp_ms: ts("2026-11-22T04:17:56.997Z"),
                },
                AgentEvent::ToolResult {
                    id: "toolu_68afef7da643".into(),
                    tool: "Write".into(),
                    is_error: false,
                    text: "File created successfully at: /tmp/agentclis/work-claude/hello.txt (file state is current in your context — no need to Read it back)".into(),
                    exit_code: None,
                    diffstat: None,
                    timestamp_ms: ts("2026-11-22T04:17:57.055Z"),
                },
                AgentEvent::ToolCall {
                    id: "toolu_0eb44c4f99c2".into(),
                    tool: "Bash".into(),
                    kind: ToolKind::Shell {
                        command: "cat hello.txt && echo done".into()
                    },
                    parameters: json!({"command": "cat hello.txt && echo done", "description": "Show file"}),
                    timestamp_ms: ts("2026-11-22T04:17:57.087Z"),
                },
                AgentEvent::ToolResult {
                    id: "toolu_0eb44c4f99c2".into(),
                    tool: "Bash".into(),
                    is_error: false,
                    text: "hello world\ndone".into(),
                    exit_code: Some(0),
                    diffstat: None,
                    timestamp_ms: ts("2026-11-22T04:17:57.138Z"),
                },
                AgentEvent::ToolCall {
                    id: "toolu_63befb5d30ba".into(),
                    tool: "Bash".into(),
                    kind: ToolKind::Shell {
                        command: "echo failing >&2; exit 3".into()
                    },
                    parameters: json!({"command": "echo failing >&2; exit 3", "description": "Fail on purpose"}),
                    timestamp_ms: ts("2026-11-22T04:17:57.158Z"),
                },
                AgentEvent::ToolResult {
                    id: "toolu_63befb5d30ba".into(),
                    tool: "Bash".into(),
                    is_error: true,
                    text: "failing".into(),
                    exit_code: Some(3),
                    diffstat: None,
                    timestamp_ms: ts("2026-11-22T04:17:57.231Z"),
                },
                AgentEvent::Message {
                    role: "assistant".into(),
                    text: "All done. Created hello.txt.".into()
                },
                AgentEvent::Completion {
                    final_text: "All done. Created hello.txt.".into(),
                    num_turns: Some(4),
                    session_id: Some("e3a003f8-c8e1-492f-9782-c5b90c36ff07".into()),
                    usage: Some(Usage {
                        input_tokens: 40,
                        output_tokens: 20,
                        ..Usage::default()
                    }),
                },
            ]
        );
    }

    #[test]
    fn an_api_error_is_not_a_completion() {
        assert_eq!(
            without_init(recorded("model-error-400")),
            [AgentEvent::Error {
                source: "unknown".into(),
                message: "API Error: 400 mock: invalid request (scripted 400)".into()
            }]
        );
        assert_eq!(
            without_init(recorded("auth-401")),
            [
                AgentEvent::Error {
                    source: API_RETRY.into(),
                    message: "attempt 1 of 1 failed (status 401: authentication_failed), retrying in 507 ms".into()
                },
                AgentEvent::Error {
                    source: "authentication_failed".into(),
                    message: "Invalid API key · Fix external API key".into()
                }
            ]
        );
        assert_eq!(
            without_init(recorded("max-turns-1")).last(),
            Some(&AgentEvent::Error {
                source: "max_turns".into(),
                message: "Reached maximum number of turns (1)".into()
            })
        );
        assert_eq!(
            recorded("resume-unknown-session"),
            [AgentEvent::Error {
                source: "error_during_execution".into(),
                message:
                    "No conversation found with session ID: 11111111-2222-4333-8444-555555555555"
                        .into()
            }]
        );
    }

    #[test]
    fn denials_are_reported_once_each() {
        let errors: Vec<AgentEvent> = recorded("default-permissions-denied")
            .into_iter()
            .filter(|e| matches!(e, AgentEvent::Error { .. }))
            .collect();
        assert_eq!(
            errors,
            [
                AgentEvent::Error {
                    source: PERMISSION_DENIED.into(),
                    message: "Write: Claude requested permissions to write to /tmp/agentclis/work-claude/perm.txt, but you haven't granted it yet.".into()
                },
                AgentEvent::Error {
                    source: PERMISSION_DENIED.into(),
                    message: "Bash: touch in '/tmp/agentclis/work-claude/bash-made.txt' needs approval. The path is inside the working directories for this session ('/tmp/agentclis/work-claude'), and Claude Code asks before a shell command creates, changes or removes files there.".into()
                },
            ]
        );
        // the run still ends with a success result
        assert!(matches!(
            recorded("default-permissions-denied").last(),
            Some(AgentEvent::Completion { .. })
        ));
        // denials only the result lists are reported from it
        let mut p = ClaudeParser::default();
        let mut out = Vec::new();
        let line = json!({"type": "result", "subtype": "success", "is_error": false, "result": "ok",
                          "permission_denials": [{"tool_name": "Write", "tool_use_id": "t1", "tool_input": {}}]});
        p.line(line.to_string().as_bytes(), &mut out);
        assert_eq!(
            out[0],
            AgentEvent::Error {
                source: PERMISSION_DENIED.into(),
                message: "Write: denied".into()
            }
        );
    }

    #[test]
    fn an_edit_has_its_diffstat() {
        let events = recorded("edit-existing-file");
        let results: Vec<(&str, Option<(u64, u64)>)> = events
            .iter()
            .filter_map(|e| match e {
                AgentEvent::ToolResult { tool, diffstat, .. } => Some((tool.as_str(), *diffstat)),
                _ => None,
            })
            .collect();
        assert_eq!(results, [("Read", None), ("Edit", Some((1, 1)))]);
    }

    #[test]
    fn a_killed_shell_has_no_completion() {
        let events = without_init(recorded("sigterm-during-shell"));
        assert_eq!(events.len(), 2);
        assert!(matches!(
            &events[1],
            AgentEvent::ToolResult {
                exit_code: Some(137),
                is_error: true,
                ..
            }
        ));
        // thinking is not reported, the text is
        assert_eq!(
            without_init(recorded("reasoning-text"))[0],
            AgentEvent::Message {
                role: "assistant".into(),
                text: "The answer is 42.".into()
            }
        );
    }

    #[test]
    fn timestamps() {
        assert_eq!(epoch_ms("1970-01-01T00:00:00.000Z"), Some(0));
        assert_eq!(epoch_ms("1970-01-01T00:00:01Z"), Some(1000));
        assert_eq!(epoch_ms("2000-03-01T00:00:00.5Z"), Some(951_868_800_500));
        assert_eq!(
            epoch_ms("2026-11-22T04:17:56.991Z"),
            Some(1_795_321_076_991)
        );
        assert_eq!(epoch_ms("2026-11-22 04:17:56Z"), None);
        assert_eq!(epoch_ms("2026-13-22T04:17:56Z"), None);
        assert_eq!(epoch_ms("2026-11-22T04:17:56.Z"), None);
        assert_eq!(epoch_ms("2026-11-22T04:17:56.9é"), None);
        assert_eq!(epoch_ms(""), None);
    }

    #[test]
    fn bash_exit_codes() {
        assert_eq!(bash_exit("Exit code 3\nfailing"), Some((3, "failing")));
        assert_eq!(bash_exit("Exit code 137"), Some((137, "")));
        assert_eq!(bash_exit("Exit code x\n"), None);
        assert_eq!(bash_exit("touch needs approval"), None);
    }

    /// Recorded against the scripted model answering three calls with 100/20 (50 read from
    /// the cache, 30 written to it), 200/40 (60) and 300/60 (70) tokens: each call's
    /// `assistant` events carry its input and cache counts and an output of 1 (the stream's
    /// first count); `result` has the exact total.
    #[test]
    fn usage_goes_out_after_every_model_call() {
        let text = std::fs::read(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/claude-code-2.1.330/usage-cache.ndjson"),
        )
        .unwrap();
        let mut p = ClaudeParser::default();
        let mut out = Vec::new();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            p.line(line, &mut out);
        }
        let total = |input, output, read, write| Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: read,
            cache_creation_input_tokens: write,
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
                total(100, 1, 50, 30),
                total(100, 1, 50, 30),
                total(300, 2, 110, 30),
                total(600, 3, 180, 30)
            ]
        );
        let completion = out.iter().find_map(|e| match e {
            AgentEvent::Completion { usage, .. } => usage.clone(),
            _ => None,
        });
        assert_eq!(completion, Some(total(600, 120, 180, 30)));
    }
}
