//! The droid provider: `droid exec -o stream-json` argv, and its NDJSON events parsed into
//! [`AgentEvent`]s. Event shapes are those droid 0.225.2 emits (docs/architecture.md#droid-facts):
//! `system/init`, `message`, `tool_call`, `tool_result` (`value` or `error.message`),
//! `completion`, `error`. Unknown types and non-JSON lines become [`AgentEvent::Unknown`].
//! Its tools: `Execute` is a shell command (the exit code is in its output text),
//! `Create`/`Edit`/`MultiEdit`/`ApplyPatch` write files.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::process::sandbox::{env_path, under};

use droid_contract::{Autonomy, ProviderId, Usage};
use serde::Deserialize;
use serde_json::Value;

use crate::providers::findings::Findings;
use crate::providers::{
    AgentEvent, ConfigPath, EnvNames, EventParser, Invocation, ModelUsed, PromptInput, Provider,
    RunFacts, ToolKind, Unsupported, WriteChange,
};

mod advice;
pub(crate) mod custom_models;
mod findings;
pub(crate) mod install;
pub(crate) mod session_settings;

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

/// What a droid tool call does: `Execute` runs `command`; `Create`/`Edit`/`MultiEdit`/`Write`
/// name `file_path`; an `ApplyPatch` patch names its files in its headers.
fn tool_kind(tool: &str, parameters: &Value) -> ToolKind {
    let file_path = || {
        parameters
            .get("file_path")
            .and_then(Value::as_str)
            .map(|s| vec![s.to_owned()])
            .unwrap_or_default()
    };
    match tool {
        "Execute" => ToolKind::Shell {
            command: parameters
                .get("command")
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned(),
        },
        "Create" | "Write" => ToolKind::Write {
            paths: file_path(),
            change: WriteChange::Create {
                lines: parameters
                    .get("content")
                    .and_then(Value::as_str)
                    .map(|c| c.lines().count()),
            },
        },
        "Edit" | "MultiEdit" => ToolKind::Write {
            paths: file_path(),
            change: WriteChange::Edit,
        },
        "ApplyPatch" => ToolKind::Write {
            paths: parameters
                .get("input")
                .and_then(Value::as_str)
                .map(patch_paths)
                .unwrap_or_default(),
            change: WriteChange::Patch,
        },
        _ => ToolKind::Other,
    }
}

/// A tool result's text without droid's framing, with the exit code of an `Execute` and the
/// line counts of an `Edit`.
fn result_detail(tool: &str, text: String) -> (String, Option<i32>, Option<(u64, u64)>) {
    match tool {
        "Execute" => (
            execute_output(&text).to_owned(),
            execute_exit_code(&text),
            None,
        ),
        "Edit" | "MultiEdit" => {
            let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            let stat = v
                .get("linesAdded")
                .and_then(Value::as_u64)
                .zip(v.get("linesRemoved").and_then(Value::as_u64));
            (text, None, stat)
        }
        _ => (text, None, None),
    }
}

/// The files an apply_patch-format patch names (`*** Add File: p` and its siblings). Codex's
/// `apply_patch` uses the same format.
pub(crate) fn patch_paths(patch: &str) -> Vec<String> {
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
}

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

/// droid's variables (it reads every `FACTORY_*` one).
const ENV: EnvNames = EnvNames {
    exact: &[],
    prefixes: &["FACTORY_"],
};

impl Provider for Droid {
    fn id(&self) -> ProviderId {
        ProviderId::Droid
    }

    /// The platform package, pinned: the launcher `@factory/cli` alone may come without the
    /// binary (see [`install`]).
    fn install_hint(&self) -> String {
        install::install_line(self.package().1)
    }

    fn prompt_input(&self) -> PromptInput {
        PromptInput::File
    }

    fn env_names(&self) -> EnvNames {
        ENV
    }

    /// `~/.factory` (settings, sessions, logs), or `$FACTORY_HOME`.
    fn state_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<PathBuf> {
        let mut out = under(home, &[".factory"]);
        out.extend(env_path(env, "FACTORY_HOME"));
        out
    }

    /// `settings.json` (hooks, custom models), `settings.local.json`, `mcp.json` (MCP servers it
    /// starts), and its hooks, commands and skills, in `~/.factory` and `$FACTORY_HOME` (not its
    /// custom droids: droid writes its built-in ones there on every run).
    fn config_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<ConfigPath> {
        let mut dirs = vec![home.join(".factory")];
        dirs.extend(env_path(env, "FACTORY_HOME"));
        let names = [
            "settings.json",
            "settings.local.json",
            "mcp.json",
            "hooks",
            // not `droids/`: droid writes its own built-in droids there on every run
            "commands",
            "skills",
        ];
        dirs.iter()
            .flat_map(|d| names.iter().map(|n| ConfigPath::whole(d.join(n))))
            .collect()
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::new(DroidParser)
    }

    fn findings(&self, events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
        findings::findings(events, stderr, completed)
    }

    fn model_used(&self, run: &RunFacts<'_>) -> ModelUsed {
        session_settings::model_used(run)
    }

    /// droid's record of the session (see [`session_settings`]): its stream-json says usage
    /// only in `completion`.
    fn usage_so_far(&self, run: &RunFacts<'_>) -> Option<Usage> {
        let home = run.var("HOME")?;
        session_settings::usage(Path::new(home), run.cwd, run.session_id?)
    }

    fn advise(&self, run: &RunFacts<'_>, issues: &mut [droid_contract::Issue]) {
        advice::advise(run, issues);
    }

    fn exit_note(&self, exit_code: Option<i32>) -> Option<String> {
        match exit_code {
            Some(0) => Some("droid exited 0 without a completion event (it does so when killed by SIGTERM, when its output closes, or when a stream breaks)".to_owned()),
            Some(code) => Some(format!("droid exited {code} without a completion event or an error message (its log in $HOME/.factory/logs/droid-log-single.log may say why)")),
            None => None,
        }
    }

    fn args(&self, inv: &Invocation<'_>) -> Result<Vec<OsString>, Unsupported> {
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
        Ok(a)
    }
}

/// droid's lines map one-to-one onto events.
struct DroidParser;

impl EventParser for DroidParser {
    fn line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>) {
        out.push(Droid.parse_line(line));
    }
}

impl Droid {
    /// Parse one output line (without its newline).
    pub fn parse_line(&self, line: &[u8]) -> AgentEvent {
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
            } => {
                let tool = tool_name.or(tool_id).unwrap_or_default();
                AgentEvent::ToolCall {
                    id,
                    kind: tool_kind(&tool, &parameters),
                    tool,
                    parameters,
                    timestamp_ms: timestamp,
                }
            }
            Wire::ToolResult {
                id,
                tool_id,
                is_error,
                value,
                error,
                timestamp,
            } => {
                let tool = tool_id.unwrap_or_default();
                let text = match error {
                    Some(e) if is_error || value.is_none() => e.message,
                    _ => text_of(value),
                };
                let (text, exit_code, diffstat) = result_detail(&tool, text);
                AgentEvent::ToolResult {
                    id,
                    tool,
                    is_error,
                    text,
                    exit_code,
                    diffstat,
                    timestamp_ms: timestamp,
                }
            }
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
    const TOOLS: &str = include_str!("../../../../tests/fixtures/droid/tools-stream-json.ndjson");

    #[test]
    fn argv_never_carries_the_prompt() {
        let inv = Invocation {
            cwd: Path::new("/repo"),
            prompt_file: Path::new("/tmp/run/prompt.md"),
            run_dir: Path::new("/tmp/run"),
            autonomy: Autonomy::Low,
            model: Some("custom:M-0"),
            reasoning_effort: Some("high"),
            session_id: None,
            as_root: false,
            confined: false,
            env: &[],
        };
        let args: Vec<String> = Droid
            .args(&inv)
            .unwrap_or_default()
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
                kind: ToolKind::Write {
                    paths: vec!["/tmp/rw/t1/hello.txt".into()],
                    change: WriteChange::Create { lines: Some(1) }
                },
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
                text: "to-stderr".into(),
                exit_code: Some(3),
                diffstat: None,
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
