//! The Claude Code provider (`@anthropic-ai/claude-code` 2.1.330): `claude -p --output-format
//! stream-json --verbose` in the repository as its working directory, the prompt on stdin, and
//! its events read by [`events`] and its failures by [`findings`].
//!
//! Choices, each from a recording (tests/fixtures/claude-code-2.1.330/README.md names them) or a
//! run of the real CLI against the scripted model:
//! - **Prompt**: stdin (the prompt file, then EOF). `claude -p` with no prompt argument reads
//!   its prompt from stdin (checked by hand; the prompt reaches the model whole in the e2e
//!   suite). An open, silent stdin would cost 3 s; the engine never leaves one.
//! - **Autonomy** onto `--permission-mode` (`default-permissions-denied`, `edit-existing-file`,
//!   `basic-tool-turn`):
//!
//!   | autonomy | argv | what the model may do |
//!   |---|---|---|
//!   | read_only | `--permission-mode dontAsk` | read-only tools and read-only shell commands; every write (Write, Edit, a file-changing Bash) is denied, never asked |
//!   | low | `--permission-mode acceptEdits` | file edits inside repo_root, and the shell commands Claude Code counts as edits there (`touch`, `mkdir`, a `>` redirection); any other shell command only when read-only |
//!   | medium | `--permission-mode acceptEdits --allowedTools=Bash` | file edits and any shell command |
//!   | high | `--permission-mode bypassPermissions` (+ `IS_SANDBOX=1` when run as root) | everything |
//!
//!   `dontAsk` rather than `plan` for read_only: in `-p` plan mode a shell command that is not
//!   read-only goes to Claude Code's auto-mode classifier, an extra model request ("Auto mode
//!   could not evaluate this action"), while `dontAsk` denies anything not pre-approved outright;
//!   both deny writes, and read-only commands run in both. `--allowedTools=Bash` is written with
//!   `=` because the option is variadic. Claude Code refuses `bypassPermissions` as root unless
//!   `IS_SANDBOX=1` (`bypass-as-root-refused`): [`Provider::env`] sets it only for autonomy high
//!   when the engine runs as root, so the run is exactly as confined as the autonomy says.
//! - **Denials** do not fail a run: Claude Code exits 0 and writes a success `result`; each
//!   refusal (`system/permission_denied`, `result.permission_denials`) becomes a
//!   `permission_denied` issue and the status at most `partial`.
//! - **Success** is only a `result` line with `subtype: success` and `is_error: false`: an API
//!   error is `subtype: success` with `is_error: true` (`model-error-400`), and the exit code is
//!   never trusted.
//! - **Shell exit codes** exist only in the tool result text (`Exit code 3\n…`); a Bash result
//!   that is not an error exited 0 (one run in the background has no exit code yet).
//! - **Writes**: `Write` is a create (its highlight says "created") even when it overwrote a
//!   file: only its result tells (`tool_use_result.type: update`), after the call was reported;
//!   `files_changed` comes from git either way.
//! - **Model** `--model`; **reasoning_effort** `--effort` (`low|medium|high|xhigh|max`, from
//!   `claude --help`; any other value is [`Unsupported`]); **session** `--resume <id>` keeps the
//!   session id (`resume`); an unknown id ends with "No conversation found with session ID"
//!   (`resume-unknown-session`), a finding naming session_id.
//! - **Environment**: `ANTHROPIC_*` (key, auth token, base URL, model variables),
//!   `CLAUDE_CONFIG_DIR` and `CLAUDE_CODE_*` belong to this provider. Every run gets
//!   `CLAUDE_CODE_MAX_RETRIES=3` (Claude Code retries a failing endpoint 10 times over ~3 min
//!   by default, `server-down-default-retries`; 0 would fail on one transient 429; the run's
//!   deadline bounds the rest), `DISABLE_AUTOUPDATER=1` and `DISABLE_TELEMETRY=1`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::process::sandbox::{env_path, under};

use droid_contract::{Autonomy, ProviderId};

use crate::providers::findings::Findings;
use crate::providers::{
    AgentEvent, ConfigPath, EnvNames, EventParser, Invocation, PromptInput, Provider, Unsupported,
};

mod events;
mod findings;
#[cfg(test)]
mod props;

/// The efforts `claude --effort` accepts (Claude Code 2.1.330).
const EFFORTS: [&str; 5] = ["low", "medium", "high", "xhigh", "max"];

/// Model retries per request: a transient 429 or 5xx is retried, a dead endpoint fails in
/// seconds rather than minutes.
const MAX_RETRIES: &str = "3";

/// Claude Code's own variables.
const ENV: EnvNames = EnvNames {
    exact: &["CLAUDE_CONFIG_DIR"],
    prefixes: &["ANTHROPIC_", "CLAUDE_CODE_"],
};

/// The Claude Code CLI.
#[derive(Debug, Default, Clone, Copy)]
pub struct Claude;

impl Provider for Claude {
    fn id(&self) -> ProviderId {
        ProviderId::Claude
    }

    fn prompt_input(&self) -> PromptInput {
        PromptInput::Stdin
    }

    fn args(&self, inv: &Invocation<'_>) -> Result<Vec<OsString>, Unsupported> {
        let mut a: Vec<OsString> = vec![
            "-p".into(),
            "--output-format".into(),
            "stream-json".into(),
            "--verbose".into(),
            "--permission-mode".into(),
        ];
        match inv.autonomy {
            Autonomy::ReadOnly => a.push("dontAsk".into()),
            Autonomy::Low => a.push("acceptEdits".into()),
            Autonomy::Medium => a.extend(["acceptEdits".into(), "--allowedTools=Bash".into()]),
            Autonomy::High => a.push("bypassPermissions".into()),
        }
        if let Some(m) = inv.model {
            a.extend(["--model".into(), m.into()]);
        }
        if let Some(r) = inv.reasoning_effort {
            if !EFFORTS.contains(&r) {
                return Err(Unsupported {
                    field: "reasoning_effort",
                    message: format!(
                        "claude --effort accepts {}; {r:?} is none of them",
                        EFFORTS.join(", ")
                    ),
                });
            }
            a.extend(["--effort".into(), r.into()]);
        }
        if let Some(s) = inv.session_id {
            a.extend(["--resume".into(), s.into()]);
        }
        Ok(a)
    }

    fn env(&self, inv: &Invocation<'_>) -> Vec<(OsString, OsString)> {
        // defaults: a value the caller set for the run is kept
        let mut env: Vec<(OsString, OsString)> = [
            ("CLAUDE_CODE_MAX_RETRIES", MAX_RETRIES),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_TELEMETRY", "1"),
        ]
        .into_iter()
        .filter(|(k, _)| !inv.has_env(k))
        .map(|(k, v)| (k.into(), v.into()))
        .collect();
        if inv.as_root && inv.autonomy == Autonomy::High {
            env.push(("IS_SANDBOX".into(), "1".into()));
        }
        env
    }

    fn auth_vars(&self) -> &'static [&'static str] {
        &[
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_AUTH_TOKEN",
            "CLAUDE_CODE_OAUTH_TOKEN",
        ]
    }

    fn auth_files(&self) -> &'static [&'static str] {
        &[".claude/.credentials.json"]
    }

    fn env_names(&self) -> EnvNames {
        ENV
    }

    /// `~/.claude` (sessions, todos, shell snapshots), the single file `~/.claude.json`, and
    /// `$CLAUDE_CONFIG_DIR`.
    fn state_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<PathBuf> {
        let mut out = under(home, &[".claude", ".claude.json"]);
        out.extend(env_path(env, "CLAUDE_CONFIG_DIR"));
        out
    }

    /// `settings.json` and `settings.local.json` (hooks, permissions), `CLAUDE.md`, its commands,
    /// agents, skills and plugins, in `~/.claude` and `$CLAUDE_CONFIG_DIR`; and of
    /// `~/.claude.json`, which Claude Code rewrites on every run, the MCP servers it starts
    /// (`mcpServers`, and each project's within `projects`).
    fn config_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<ConfigPath> {
        let mut dirs = vec![home.join(".claude")];
        dirs.extend(env_path(env, "CLAUDE_CONFIG_DIR"));
        let names = [
            "settings.json",
            "settings.local.json",
            "CLAUDE.md",
            "commands",
            "agents",
            "skills",
        ];
        let mut out: Vec<ConfigPath> = dirs
            .iter()
            .flat_map(|d| {
                names
                    .iter()
                    .map(|n| ConfigPath::whole(d.join(n)))
                    // Claude Code keeps its built-in plugins' state in `plugins/store` on
                    // every start
                    .chain(std::iter::once(ConfigPath {
                        path: d.join("plugins"),
                        json_keys: &[],
                        keep: &["store"],
                    }))
            })
            .collect();
        out.push(ConfigPath {
            path: home.join(".claude.json"),
            json_keys: &["/mcpServers", "/projects/*/mcpServers"],
            keep: &[],
        });
        out
    }

    fn parse_version(&self, stdout: &str) -> Option<String> {
        // `2.1.330 (Claude Code)`
        let first = stdout.lines().next()?.split_whitespace().next()?;
        first
            .starts_with(|c: char| c.is_ascii_digit())
            .then(|| first.to_owned())
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::new(events::ClaudeParser::default())
    }

    fn findings(&self, events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
        findings::findings(events, stderr, completed)
    }

    fn exit_note(&self, exit_code: Option<i32>) -> Option<String> {
        match exit_code {
            Some(0) => {
                Some("claude exited 0 without a result line (its output was cut short)".to_owned())
            }
            Some(143) => Some("claude was stopped by SIGTERM before its result line".to_owned()),
            Some(code) => Some(format!(
                "claude exited {code} without a result line or an error message (an API or \
                 connection failure, or a flag it refused; its stderr in logs may say which)"
            )),
            None => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;

    use super::*;

    fn inv(autonomy: Autonomy) -> Invocation<'static> {
        Invocation {
            cwd: Path::new("/repo"),
            prompt_file: Path::new("/tmp/run/prompt.md"),
            run_dir: Path::new("/tmp/run"),
            autonomy,
            model: None,
            reasoning_effort: None,
            session_id: None,
            as_root: false,
            confined: false,
            env: &[],
        }
    }

    fn strings(v: Vec<OsString>) -> Vec<String> {
        v.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn argv_per_autonomy_never_carries_the_prompt() {
        let head = ["-p", "--output-format", "stream-json", "--verbose"];
        let args = |a| strings(Claude.args(&inv(a)).unwrap())[head.len()..].to_vec();
        assert_eq!(args(Autonomy::ReadOnly), ["--permission-mode", "dontAsk"]);
        assert_eq!(args(Autonomy::Low), ["--permission-mode", "acceptEdits"]);
        assert_eq!(
            args(Autonomy::Medium),
            ["--permission-mode", "acceptEdits", "--allowedTools=Bash"]
        );
        assert_eq!(
            args(Autonomy::High),
            ["--permission-mode", "bypassPermissions"]
        );
        let full = Invocation {
            model: Some("claude-opus-5-5"),
            reasoning_effort: Some("xhigh"),
            session_id: Some("e3a003f8-c8e1-492f-9782-c5b90c36ff07"),
            ..inv(Autonomy::Low)
        };
        assert_eq!(
            strings(Claude.args(&full).unwrap()),
            [
                "-p",
                "--output-format",
                "stream-json",
                "--verbose",
                "--permission-mode",
                "acceptEdits",
                "--model",
                "claude-opus-5-5",
                "--effort",
                "xhigh",
                "--resume",
                "e3a003f8-c8e1-492f-9782-c5b90c36ff07"
            ]
        );
        assert_eq!(Claude.prompt_input(), PromptInput::Stdin);
    }

    #[test]
    fn an_unknown_effort_is_unsupported() {
        let bad = Invocation {
            reasoning_effort: Some("minimal"),
            ..inv(Autonomy::Low)
        };
        let err = Claude.args(&bad).unwrap_err();
        assert_eq!(err.field, "reasoning_effort");
        assert!(err.message.contains("low, medium, high, xhigh, max"));
    }

    #[test]
    fn is_sandbox_only_for_high_as_root() {
        let has = |autonomy, as_root| {
            let i = Invocation {
                as_root,
                ..inv(autonomy)
            };
            Claude
                .env(&i)
                .iter()
                .any(|(k, v)| k == "IS_SANDBOX" && v == "1")
        };
        assert!(has(Autonomy::High, true));
        assert!(!has(Autonomy::High, false));
        assert!(!has(Autonomy::Medium, true));
        let env = Claude.env(&inv(Autonomy::Low));
        assert!(env.contains(&("CLAUDE_CODE_MAX_RETRIES".into(), "3".into())));
    }

    #[test]
    fn env_names_and_version() {
        for name in [
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "ANTHROPIC_AUTH_TOKEN",
            "ANTHROPIC_MODEL",
            "CLAUDE_CONFIG_DIR",
            "CLAUDE_CODE_USE_BEDROCK",
        ] {
            assert!(Claude.env_names().contains(name), "{name}");
        }
        assert!(!Claude.env_names().contains("OPENAI_API_KEY"));
        assert_eq!(
            Claude.parse_version("2.1.330 (Claude Code)\n").as_deref(),
            Some("2.1.330")
        );
        assert_eq!(Claude.parse_version("oops"), None);
    }
}
