//! Gemini CLI 0.61.0's `-o stream-json` lines read into [`AgentEvent`]s (recordings in
//! `tests/fixtures/gemini-cli-0.61.0/`):
//!
//! | line | events |
//! |---|---|
//! | `init {session_id, model}` | [`AgentEvent::Init`] |
//! | `message {role: user, content}` | [`AgentEvent::Message`] |
//! | `message {role: assistant, content, delta: true}` | buffered: one [`AgentEvent::Message`] per run of deltas, emitted when anything else comes |
//! | `tool_use {tool_name, tool_id, parameters}` | [`AgentEvent::ToolCall`]: `run_shell_command` is a shell command, `write_file` a create, `replace` an edit |
//! | `tool_result {tool_id, status, output?, error?}` | [`AgentEvent::ToolResult`], `is_error` = status is not `success`; no exit code (Gemini does not report one) |
//! | `error {severity, message}` | [`AgentEvent::Error`] with source `gemini-<severity>` (non-fatal: loop detected, …) |
//! | `result {status: success, stats}` | [`AgentEvent::Completion`]: the assistant text after the last tool result, the model turns counted here, token usage from `stats` |
//! | `result {status: error, error {type, message}}` | [`AgentEvent::Error`] with source `result`, message `<type>: <message>` |
//!
//! Anything else (another type, a line that is not JSON or not UTF-8) is [`AgentEvent::Unknown`].
//! Model turns: Gemini does not count them; a turn is counted each time model output (an
//! assistant delta or a tool call) follows a user message or a tool result.

use std::collections::HashMap;

use droid_contract::Usage;
use serde::Deserialize;
use serde_json::Value;

use crate::providers::{AgentEvent, EventParser, ToolKind, WriteChange, lossy};

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire {
    Init {
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        model: Option<String>,
    },
    Message {
        #[serde(default)]
        role: String,
        #[serde(default)]
        content: String,
    },
    ToolUse {
        #[serde(default)]
        tool_name: String,
        #[serde(default)]
        tool_id: String,
        #[serde(default)]
        parameters: Value,
        #[serde(default)]
        timestamp: Option<String>,
    },
    ToolResult {
        #[serde(default)]
        tool_id: String,
        #[serde(default)]
        status: String,
        #[serde(default)]
        output: Option<String>,
        #[serde(default)]
        error: Option<WireError>,
        #[serde(default)]
        timestamp: Option<String>,
    },
    Error {
        #[serde(default)]
        severity: String,
        #[serde(default)]
        message: String,
    },
    Result {
        #[serde(default)]
        status: String,
        #[serde(default)]
        error: Option<WireError>,
        #[serde(default)]
        stats: Option<Stats>,
    },
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default, rename = "type")]
    kind: String,
    #[serde(default)]
    message: String,
}

#[derive(Deserialize)]
struct Stats {
    #[serde(default)]
    input_tokens: u64,
    #[serde(default)]
    output_tokens: u64,
    #[serde(default)]
    cached: u64,
    /// The input tokens not read from the cache (`input_tokens` counts them too).
    #[serde(default)]
    input: Option<u64>,
}

/// What a Gemini tool call does: `run_shell_command` runs `command`; `write_file` writes
/// `file_path` whole (a create, or an overwrite git will show as a modification); `replace`
/// edits it.
fn tool_kind(tool: &str, parameters: &Value) -> ToolKind {
    let str_param = |k: &str| parameters.get(k).and_then(Value::as_str);
    let paths = || {
        str_param("file_path")
            .map(|p| vec![p.to_owned()])
            .unwrap_or_default()
    };
    match tool {
        "run_shell_command" => ToolKind::Shell {
            command: str_param("command").unwrap_or("").to_owned(),
        },
        "write_file" => ToolKind::Write {
            paths: paths(),
            change: WriteChange::Create {
                lines: str_param("content").map(|c| c.lines().count()),
            },
        },
        "replace" => ToolKind::Write {
            paths: paths(),
            change: WriteChange::Edit,
        },
        _ => ToolKind::Other,
    }
}

/// Epoch milliseconds of an RFC 3339 UTC timestamp as Gemini writes it
/// (`2026-11-22T04:22:05.090Z`); `None` for anything else.
pub(crate) fn epoch_ms(ts: &str) -> Option<u64> {
    let b = ts.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[10] != b'T' || b[13] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<u64> { ts.get(r)?.parse::<u64>().ok() };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, s) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
        return None;
    }
    let rest = ts.get(19..)?;
    let (frac, zone) = match rest.strip_prefix('.') {
        Some(r) => {
            let digits = r.bytes().take_while(u8::is_ascii_digit).count();
            (r.get(..digits)?, r.get(digits..)?)
        }
        None => ("", rest),
    };
    if zone != "Z" {
        return None;
    }
    let ms = frac
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(3)
        .fold(0u64, |acc, c| acc * 10 + u64::from(c - b'0'));
    // days from civil (Howard Hinnant), for years from 1970 on
    let (y, m) = if mo <= 2 {
        (y.checked_sub(1)?, mo + 9)
    } else {
        (y, mo - 3)
    };
    let era = y / 400;
    let yoe = y - era * 400;
    let doy = (153 * m + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = (era * 146_097 + doe).checked_sub(719_468)?;
    Some(((days * 24 + h) * 60 + mi) * 60_000 + s * 1000 + ms)
}

/// The stateful reader of one run's stdout.
#[derive(Default)]
pub(crate) struct GeminiParser {
    session_id: Option<String>,
    /// Tool names by call id (a `tool_result` names only the id).
    tools: HashMap<String, String>,
    /// Assistant deltas not yet emitted as a message.
    pending: String,
    /// Assistant text since the last tool result: the final answer when the run succeeds.
    final_text: String,
    /// Model output is being read (a new turn starts when it begins again).
    in_turn: bool,
    turns: u64,
}

impl GeminiParser {
    fn flush(&mut self, out: &mut Vec<AgentEvent>) {
        if !self.pending.is_empty() {
            out.push(AgentEvent::Message {
                role: "assistant".to_owned(),
                text: std::mem::take(&mut self.pending),
            });
        }
    }

    fn model_output(&mut self) {
        if !self.in_turn {
            self.in_turn = true;
            self.turns += 1;
        }
    }
}

impl EventParser for GeminiParser {
    fn line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        let Ok(wire) = serde_json::from_slice::<Wire>(line) else {
            self.flush(out);
            out.push(AgentEvent::Unknown(lossy(line)));
            return;
        };
        if let Wire::Message { role, content } = &wire
            && role == "assistant"
        {
            self.model_output();
            self.pending.push_str(content);
            self.final_text.push_str(content);
            return;
        }
        self.flush(out);
        match wire {
            Wire::Init { session_id, model } => {
                self.session_id.clone_from(&session_id);
                out.push(AgentEvent::Init { session_id, model });
            }
            Wire::Message { role, content } => {
                self.in_turn = false;
                self.final_text.clear();
                out.push(AgentEvent::Message {
                    role,
                    text: content,
                });
            }
            Wire::ToolUse {
                tool_name,
                tool_id,
                parameters,
                timestamp,
            } => {
                self.model_output();
                self.tools.insert(tool_id.clone(), tool_name.clone());
                out.push(AgentEvent::ToolCall {
                    id: tool_id,
                    kind: tool_kind(&tool_name, &parameters),
                    tool: tool_name,
                    parameters,
                    timestamp_ms: timestamp.as_deref().and_then(epoch_ms),
                });
            }
            Wire::ToolResult {
                tool_id,
                status,
                output,
                error,
                timestamp,
            } => {
                self.in_turn = false;
                self.final_text.clear();
                let is_error = status != "success";
                let text = match (error, output) {
                    (Some(e), _) if is_error => e.message,
                    (_, Some(o)) => o,
                    (Some(e), None) => e.message,
                    (None, None) => String::new(),
                };
                out.push(AgentEvent::ToolResult {
                    tool: self.tools.get(&tool_id).cloned().unwrap_or_default(),
                    id: tool_id,
                    is_error,
                    text,
                    exit_code: None,
                    diffstat: None,
                    timestamp_ms: timestamp.as_deref().and_then(epoch_ms),
                });
            }
            Wire::Error { severity, message } => out.push(AgentEvent::Error {
                source: format!("gemini-{severity}"),
                message,
            }),
            Wire::Result {
                status,
                error,
                stats,
            } => {
                if status == "success" {
                    out.push(AgentEvent::Completion {
                        final_text: self.final_text.trim().to_owned(),
                        num_turns: Some(self.turns),
                        session_id: self.session_id.clone(),
                        // `input_tokens` includes the cached tokens, `input` does not
                        // (docs/providers.md#token-usage)
                        usage: stats.map(|s| Usage {
                            input_tokens: s
                                .input
                                .unwrap_or_else(|| s.input_tokens.saturating_sub(s.cached)),
                            output_tokens: s.output_tokens,
                            cache_read_input_tokens: s.cached,
                            ..Usage::default()
                        }),
                    });
                } else {
                    let message = match error {
                        Some(e) if e.kind.is_empty() => e.message,
                        Some(e) => format!("{}: {}", e.kind, e.message),
                        None => format!("gemini ended with status {status:?}"),
                    };
                    out.push(AgentEvent::Error {
                        source: "result".to_owned(),
                        message,
                    });
                }
            }
        }
    }

    fn end(&mut self, out: &mut Vec<AgentEvent>) {
        self.flush(out);
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    pub(crate) fn recorded(case: &str) -> Vec<AgentEvent> {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/gemini-cli-0.61.0")
            .join(format!("{case}.ndjson"));
        let text = std::fs::read(&path).unwrap();
        let mut p = GeminiParser::default();
        let mut out = Vec::new();
        for line in text.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
            p.line(line, &mut out);
        }
        p.end(&mut out);
        out
    }

    #[test]
    fn parses_the_recorded_tool_turn() {
        let ev = recorded("basic-tool-turn");
        assert_eq!(ev.len(), 11, "{ev:#?}");
        assert_eq!(
            ev[0],
            AgentEvent::Init {
                session_id: Some("7578b4e8-9423-4061-b133-c277a5fadf09".into()),
                model: Some("auto".into())
            }
        );
        assert_eq!(
            ev[2],
            AgentEvent::Message {
                role: "assistant".into(),
                text: "Creating the file.".into()
            }
        );
        assert_eq!(
            ev[3],
            AgentEvent::ToolCall {
                id: "write_file__write_file_1795321325214_0".into(),
                tool: "write_file".into(),
                kind: ToolKind::Write {
                    paths: vec!["hello.txt".into()],
                    change: WriteChange::Create { lines: Some(1) }
                },
                parameters: json!({"file_path": "hello.txt", "content": "hello world\n"}),
                timestamp_ms: Some(1_795_321_325_284),
            }
        );
        assert_eq!(
            ev[5],
            AgentEvent::ToolCall {
                id: "run_shell_command__run_shell_command_1795321325417_0".into(),
                tool: "run_shell_command".into(),
                kind: ToolKind::Shell {
                    command: "cat hello.txt && echo done".into()
                },
                parameters: json!({"command": "cat hello.txt && echo done", "description": "Show file"}),
                timestamp_ms: Some(1_795_321_325_421),
            }
        );
        assert_eq!(
            ev[8],
            AgentEvent::ToolResult {
                id: "run_shell_command__run_shell_command_1795321325506_0".into(),
                tool: "run_shell_command".into(),
                is_error: false,
                text: "failing".into(),
                exit_code: None,
                diffstat: None,
                timestamp_ms: Some(1_795_321_325_573),
            }
        );
        assert_eq!(
            ev[10],
            AgentEvent::Completion {
                final_text: "All done. Created hello.txt.".into(),
                num_turns: Some(4),
                session_id: Some("7578b4e8-9423-4061-b133-c277a5fadf09".into()),
                usage: Some(Usage {
                    input_tokens: 50,
                    output_tokens: 25,
                    ..Usage::default()
                }),
            }
        );
    }

    #[test]
    fn refused_tools_are_errors_and_replace_is_an_edit() {
        let ev = recorded("default-approval-write-denied");
        let AgentEvent::ToolResult { is_error, text, .. } = &ev[4] else {
            panic!("{:?}", ev[4]);
        };
        assert!(is_error);
        assert!(text.starts_with("Tool \"write_file\" not found"), "{text}");
        let ev = recorded("edit-existing-file");
        let AgentEvent::ToolCall { kind, .. } = &ev[2] else {
            panic!("{:?}", ev[2]);
        };
        assert_eq!(
            *kind,
            ToolKind::Write {
                paths: vec!["hello.txt".into()],
                change: WriteChange::Edit
            }
        );
        assert!(matches!(
            ev.last(),
            Some(AgentEvent::Completion { final_text, .. }) if final_text == "Edited hello.txt."
        ));
    }

    #[test]
    fn error_results_are_errors_not_completions() {
        let ev = recorded("model-error-400");
        assert_eq!(
            ev.last(),
            Some(&AgentEvent::Error {
                source: "result".into(),
                message: "unknown: [API Error: {\"error\":{\"code\":400,\"message\":\"mock: invalid request (scripted 400)\",\"status\":\"INVALID_ARGUMENT\"}}]".into()
            })
        );
        let ev = recorded("max-session-turns-1");
        assert!(matches!(
            ev.last(),
            Some(AgentEvent::Error { message, .. }) if message.starts_with("FatalTurnLimitedError: Reached max session turns")
        ));
        assert!(
            !ev.iter()
                .any(|e| matches!(e, AgentEvent::Completion { .. }))
        );
    }

    #[test]
    fn deltas_before_a_cut_are_kept() {
        let mut p = GeminiParser::default();
        let mut out = Vec::new();
        p.line(
            br#"{"type":"message","role":"assistant","content":"Hel","delta":true}"#,
            &mut out,
        );
        p.line(
            br#"{"type":"message","role":"assistant","content":"lo","delta":true}"#,
            &mut out,
        );
        assert_eq!(out, vec![]);
        p.end(&mut out);
        assert_eq!(
            out,
            vec![AgentEvent::Message {
                role: "assistant".into(),
                text: "Hello".into()
            }]
        );
    }

    #[test]
    fn timestamps() {
        assert_eq!(epoch_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            epoch_ms("2026-11-22T04:22:05.090Z"),
            Some(1_795_321_325_090)
        );
        assert_eq!(epoch_ms("2000-02-29T12:00:00.5Z"), Some(951_825_600_500));
        assert_eq!(epoch_ms("2026-11-22 04:22:05Z"), None);
        assert_eq!(epoch_ms("2026-11-22T04:22:05+01:00"), None);
        assert_eq!(epoch_ms("é"), None);
    }

    /// Recorded against the scripted model answering three calls with 100/20 (50 read from
    /// the cache), 200/40 (60) and 300/60 (70) tokens: Gemini CLI says so only in `result`,
    /// `input_tokens` (780) counting the cached ones (180), `input` (600) not.
    #[test]
    fn usage_comes_at_the_end_without_the_cache_reads() {
        let text = std::fs::read_to_string(
            std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/gemini-cli-0.61.0/usage-cache.ndjson"),
        )
        .unwrap();
        let mut p = GeminiParser::default();
        let mut out = Vec::new();
        for l in text.lines() {
            p.line(l.as_bytes(), &mut out);
        }
        let usage = out.iter().find_map(|e| match e {
            AgentEvent::Completion { usage, .. } => usage.clone(),
            _ => None,
        });
        assert_eq!(
            usage,
            Some(Usage {
                input_tokens: 600,
                output_tokens: 120,
                cache_read_input_tokens: 180,
                ..Usage::default()
            })
        );
    }
}
