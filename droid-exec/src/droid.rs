//! The droid provider: `droid exec -o stream-json` argv, and its NDJSON events parsed into
//! [`AgentEvent`]s. Event shapes are those droid 0.225.2 emits (docs/architecture.md#droid-facts):
//! `system/init`, `message`, `tool_call`, `tool_result` (`value` or `error.message`),
//! `completion`, `error`. Unknown types and non-JSON lines become [`AgentEvent::Unknown`].

use std::ffi::OsString;

use droid_contract::{Autonomy, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::provider::{AgentEvent, Invocation, Provider};

/// Factory's `droid` CLI.
#[derive(Debug, Default, Clone, Copy)]
pub struct Droid;

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum Wire {
    System {
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        model: Option<String>,
    },
    Message {
        #[serde(default)]
        role: String,
        #[serde(default)]
        text: String,
    },
    ToolCall {
        #[serde(default)]
        id: String,
        #[serde(default, rename = "toolName")]
        tool_name: Option<String>,
        #[serde(default, rename = "toolId")]
        tool_id: Option<String>,
        #[serde(default)]
        parameters: Value,
        #[serde(default)]
        timestamp: Option<u64>,
    },
    ToolResult {
        #[serde(default)]
        id: String,
        #[serde(default, rename = "toolId")]
        tool_id: Option<String>,
        #[serde(default, rename = "isError")]
        is_error: bool,
        #[serde(default)]
        value: Option<Value>,
        #[serde(default)]
        error: Option<WireError>,
        #[serde(default)]
        timestamp: Option<u64>,
    },
    Completion {
        #[serde(default, rename = "finalText")]
        final_text: String,
        #[serde(default, rename = "numTurns")]
        num_turns: Option<u64>,
        #[serde(default)]
        session_id: Option<String>,
        #[serde(default)]
        usage: Option<Usage>,
    },
    Error {
        #[serde(default)]
        source: String,
        #[serde(default)]
        message: String,
    },
}

#[derive(Deserialize)]
struct WireError {
    #[serde(default)]
    message: String,
}

fn text_of(v: Option<Value>) -> String {
    match v {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s,
        Some(other) => other.to_string(),
    }
}

impl Provider for Droid {
    fn name(&self) -> &'static str {
        "droid"
    }

    fn args(&self, inv: &Invocation<'_>) -> Vec<OsString> {
        let mut a: Vec<OsString> = vec![
            "exec".into(),
            "--output-format".into(),
            "stream-json".into(),
            "--cwd".into(),
            inv.cwd.as_os_str().to_owned(),
        ];
        match inv.autonomy {
            Autonomy::ReadOnly => {}
            Autonomy::Low => a.extend(["--auto".into(), "low".into()]),
            Autonomy::Medium => a.extend(["--auto".into(), "medium".into()]),
            Autonomy::High => a.extend(["--auto".into(), "high".into()]),
        }
        if let Some(m) = inv.model {
            a.extend(["-m".into(), m.into()]);
        }
        if let Some(r) = inv.reasoning_effort {
            a.extend(["-r".into(), r.into()]);
        }
        if let Some(s) = inv.session_id {
            a.extend(["-s".into(), s.into()]);
        }
        a.extend(["-f".into(), inv.prompt_file.as_os_str().to_owned()]);
        a
    }

    fn version_args(&self) -> Vec<OsString> {
        vec!["--version".into()]
    }

    fn parse_line(&self, line: &[u8]) -> AgentEvent {
        let raw = || String::from_utf8_lossy(line).into_owned();
        let Ok(wire) = serde_json::from_slice::<Wire>(line) else {
            return AgentEvent::Unknown(raw());
        };
        match wire {
            Wire::System { session_id, model } => AgentEvent::Init { session_id, model },
            Wire::Message { role, text } => AgentEvent::Message { role, text },
            Wire::ToolCall {
                id,
                tool_name,
                tool_id,
                parameters,
                timestamp,
            } => AgentEvent::ToolCall {
                id,
                tool: tool_name.or(tool_id).unwrap_or_default(),
                parameters,
                timestamp_ms: timestamp,
            },
            Wire::ToolResult {
                id,
                tool_id,
                is_error,
                value,
                error,
                timestamp,
            } => AgentEvent::ToolResult {
                id,
                tool: tool_id.unwrap_or_default(),
                is_error,
                text: match error {
                    Some(e) if is_error || value.is_none() => e.message,
                    _ => text_of(value),
                },
                timestamp_ms: timestamp,
            },
            Wire::Completion {
                final_text,
                num_turns,
                session_id,
                usage,
            } => AgentEvent::Completion {
                final_text,
                num_turns,
                session_id,
                usage,
            },
            Wire::Error { source, message } => AgentEvent::Error { source, message },
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;

    /// Lines the real droid 0.225.2 printed (recorded in tests/fixtures/droid/tools-stream-json.ndjson).
    const TOOLS: &str = include_str!("../../tests/fixtures/droid/tools-stream-json.ndjson");

    #[test]
    fn argv_never_carries_the_prompt() {
        let inv = Invocation {
            cwd: Path::new("/repo"),
            prompt_file: Path::new("/tmp/run/prompt.md"),
            autonomy: Autonomy::Low,
            model: Some("custom:M-0"),
            reasoning_effort: Some("high"),
            session_id: None,
        };
        let args: Vec<String> = Droid
            .args(&inv)
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            args,
            [
                "exec",
                "--output-format",
                "stream-json",
                "--cwd",
                "/repo",
                "--auto",
                "low",
                "-m",
                "custom:M-0",
                "-r",
                "high",
                "-f",
                "/tmp/run/prompt.md"
            ]
        );
    }

    #[test]
    fn parses_the_recorded_tool_dance() {
        let events: Vec<AgentEvent> = TOOLS
            .lines()
            .map(|l| Droid.parse_line(l.as_bytes()))
            .collect();
        assert_eq!(events.len(), 19);
        assert_eq!(
            events[0],
            AgentEvent::Init {
                session_id: Some("c814f9ea-97d9-4de8-bbdf-1e9f801a07de".into()),
                model: Some("custom:ScriptA-0".into())
            }
        );
        assert_eq!(
            events[3],
            AgentEvent::ToolCall {
                id: "call_0_0".into(),
                tool: "Create".into(),
                parameters: json!({"file_path": "/tmp/rw/t1/hello.txt", "content": "hello world\n"}),
                timestamp_ms: Some(1_795_320_771_553),
            }
        );
        assert_eq!(
            events[12],
            AgentEvent::ToolResult {
                id: "call_4_0".into(),
                tool: "Execute".into(),
                is_error: true,
                text: "Error: Command failed (exit code: 3)\nto-stderr\n\n\n[Process exited with code 3]".into(),
                timestamp_ms: Some(1_795_320_772_385),
            }
        );
        let AgentEvent::Completion {
            final_text,
            num_turns,
            usage,
            ..
        } = &events[18]
        else {
            panic!("last event is not a completion: {:?}", events[18]);
        };
        assert_eq!(final_text, "All done.\n\nCreated and edited hello.txt.");
        assert_eq!(*num_turns, Some(8));
        assert_eq!(usage.as_ref().map(|u| u.ttft_ms), Some(Some(19.75)));
    }

    #[test]
    fn odd_lines_are_kept_not_fatal() {
        assert_eq!(
            Droid.parse_line(b"not json"),
            AgentEvent::Unknown("not json".into())
        );
        assert_eq!(
            Droid.parse_line(br#"{"type":"brand_new","x":1}"#),
            AgentEvent::Unknown(r#"{"type":"brand_new","x":1}"#.into())
        );
        assert_eq!(
            Droid.parse_line(
                br#"{"type":"error","source":"cli","message":"Exec failed","session_id":""}"#
            ),
            AgentEvent::Error {
                source: "cli".into(),
                message: "Exec failed".into()
            }
        );
    }
}

#[cfg(test)]
mod props;
