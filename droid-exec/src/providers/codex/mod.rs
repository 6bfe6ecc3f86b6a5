//! The Codex provider: OpenAI's Codex CLI 0.169.0 run as `codex exec --json`, its JSONL events
//! parsed into [`AgentEvent`]s ([`events`]) and its failure texts read as issues ([`findings`]).
//! Measured behaviour: the recordings in `tests/fixtures/codex-0.169.0/` (their README names the
//! cases cited below) and the project's agent-CLI research report (its Codex section).
//!
//! Choices:
//! - **Prompt on stdin** (`-` as the prompt argument, the prompt file as stdin, then EOF): Codex
//!   reads stdin whenever it is not a terminal and waits forever on an open pipe (research
//!   report); a file ends, and argv stays clear of the prompt (one argument is capped at
//!   128 KiB).
//! - **`--disable unbounded_connection_retries`** always: without it a dead endpoint is retried
//!   forever (case `server-down`); with it the run fails at once with `turn.failed` (case
//!   `server-down-disable-unbounded-retries`).
//! - **`--skip-git-repo-check`** always: Codex otherwise refuses a directory that is not a git
//!   repository before any request (case `not-git-repo`). The engine already decided that
//!   repo_root may be worked on (`allowed_roots`), and a non-git repo_root is valid in the
//!   contract (files_changed then comes from a directory walk).
//! - **`-C <repo_root>`** for a new session; `codex exec resume` has no `-C` (nor `-s`), so a
//!   resumed run relies on the process working directory, which the engine sets to repo_root,
//!   and gets its sandbox through `-c sandbox_mode="…"`.
//! - **Autonomy under the run's confinement** (Landlock, every level): Codex's own sandbox is
//!   off (`--dangerously-bypass-approvals-and-sandbox`) and the kernel keeps the level: at
//!   `read_only` the repository is read-only to the run ([`crate::process::sandbox`]), above it the
//!   repository and the run's temporary directory are writable. Measured with Codex 0.169.0: its
//!   bubblewrap sandbox cannot start inside a Landlock domain (`bwrap: setting up uid map:
//!   Permission denied`; mounts are denied to a Landlock-confined process), and its legacy
//!   Landlock pipeline (`features.use_legacy_landlock`) refuses a restricted file system
//!   ("filesystem-restricted execution requires bubblewrap to isolate app-server sockets"). So
//!   Codex is told in a developer instruction ([`confined_note`]) what its sandbox would have
//!   told it.
//! - **Autonomy without our confinement** (`sandbox = "off"`, a kernel without Landlock) onto
//!   Codex's sandbox: `read_only` → `-s read-only`, `low` and `medium` →
//!   `-s workspace-write` (writes inside the workspace; bwrap sandbox, which works in this
//!   container), `high` → `--dangerously-bypass-approvals-and-sandbox`. `exec` never asks for
//!   approval: a refused action goes back to the model. Codex has no level between `low` and
//!   `medium`, so they run alike. In `read-only` a refused patch yields **no item event** (only
//!   a stderr line, case `readonly-sandbox-default`); a command the sandbox made fail yields
//!   nothing in some runs and a failed command item in others (the suite's
//!   `read_only_prevents_writes` sees both), and one that hides the failure
//!   (`touch x; echo $?`) only its output (case `readonly-command-blocked`).
//!   [`findings`] reads what there is; files_changed from the repository is the real guard.
//! - **reasoning_effort** → `-c model_reasoning_effort="…"` for the values the Responses API
//!   knows (`none minimal low medium high xhigh`); Codex forwards any string unchecked, so the
//!   contract's droid-only values (`dynamic`, `off`, `max`) are refused as [`Unsupported`]
//!   rather than sent to fail at the endpoint.
//! - **session_id** → `codex exec resume <id> -`: same `thread_id`, history resent (case
//!   `resume`).
//! - **Success** is `turn.completed` only; its final text is the last `agent_message`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::process::sandbox::env_path;

use droid_contract::{Autonomy, ProviderId};

use crate::providers::findings::Findings;
use crate::providers::{
    AgentEvent, ConfigPath, EnvNames, EventParser, Invocation, PromptInput, Provider, Unsupported,
};

mod events;
mod findings;
#[cfg(test)]
mod props;

/// Reasoning efforts Codex passes to the Responses API as `reasoning.effort`.
const EFFORTS: [&str; 6] = ["none", "minimal", "low", "medium", "high", "xhigh"];

/// Codex's own variables: the built-in OpenAI provider's key and endpoint, and everything
/// `CODEX_*` (`CODEX_HOME`, `CODEX_API_KEY`, …). A custom provider's `env_key` is named by the
/// user's config; it reaches Codex through the setting `env_passthrough`.
const ENV: EnvNames = EnvNames {
    exact: &["OPENAI_API_KEY", "OPENAI_BASE_URL"],
    prefixes: &["CODEX_"],
};

/// OpenAI's Codex CLI.
#[derive(Debug, Default, Clone, Copy)]
pub struct Codex;

impl Provider for Codex {
    fn id(&self) -> ProviderId {
        ProviderId::Codex
    }

    fn prompt_input(&self) -> PromptInput {
        PromptInput::Stdin
    }

    fn args(&self, inv: &Invocation<'_>) -> Result<Vec<OsString>, Unsupported> {
        let effort = match inv.reasoning_effort {
            Some(e) if EFFORTS.contains(&e) => Some(e),
            Some(e) => {
                return Err(Unsupported {
                    field: "reasoning_effort",
                    message: format!(
                        "codex passes reasoning_effort to the model as is and the Responses API \
                         knows only {}; {e:?} has no equivalent: pass one of those",
                        EFFORTS.join(", ")
                    ),
                });
            }
            None => None,
        };
        let mut a: Vec<OsString> = vec!["exec".into()];
        if inv.session_id.is_some() {
            a.push("resume".into());
        }
        a.extend([
            "--json".into(),
            "--disable".into(),
            "unbounded_connection_retries".into(),
            "--skip-git-repo-check".into(),
        ]);
        // under the run's confinement Codex's own sandbox is off (its bubblewrap cannot work
        // inside a Landlock domain) and the kernel keeps the level; Codex is told so
        let sandbox = match inv.autonomy {
            _ if inv.confined => None,
            Autonomy::ReadOnly => Some("read-only"),
            Autonomy::Low | Autonomy::Medium => Some("workspace-write"),
            Autonomy::High => None,
        };
        if inv.session_id.is_none() {
            a.extend(["-C".into(), inv.cwd.as_os_str().to_owned()]);
        }
        match (sandbox, inv.session_id) {
            (None, _) => a.push("--dangerously-bypass-approvals-and-sandbox".into()),
            (Some(mode), None) => a.extend(["-s".into(), mode.into()]),
            (Some(mode), Some(_)) => {
                a.extend(["-c".into(), format!("sandbox_mode=\"{mode}\"").into()]);
            }
        }
        if inv.confined {
            a.extend([
                "-c".into(),
                format!("developer_instructions=\"{}\"", confined_note(inv.autonomy)).into(),
            ]);
        }
        if let Some(m) = inv.model {
            a.extend(["-m".into(), m.into()]);
        }
        if let Some(e) = effort {
            a.extend([
                "-c".into(),
                format!("model_reasoning_effort=\"{e}\"").into(),
            ]);
        }
        if let Some(s) = inv.session_id {
            a.push(s.into());
        }
        a.push("-".into());
        Ok(a)
    }

    fn auth_vars(&self) -> &'static [&'static str] {
        &["OPENAI_API_KEY", "CODEX_API_KEY"]
    }

    fn auth_files(&self) -> &'static [&'static str] {
        &[".codex/config.toml", ".codex/auth.json"]
    }

    fn env_names(&self) -> EnvNames {
        ENV
    }

    /// `$CODEX_HOME`, else `~/.codex` (sessions, logs, its sqlite state).
    fn state_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<PathBuf> {
        vec![env_path(env, "CODEX_HOME").unwrap_or_else(|| home.join(".codex"))]
    }

    /// `config.toml` (MCP servers, `notify`, profiles), `AGENTS.md`, its prompts and skills, in
    /// `$CODEX_HOME`, else `~/.codex`.
    fn config_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<ConfigPath> {
        let dir = env_path(env, "CODEX_HOME").unwrap_or_else(|| home.join(".codex"));
        let mut out: Vec<ConfigPath> =
            ["config.toml", "AGENTS.md", "AGENTS.override.md", "prompts"]
                .iter()
                .map(|n| ConfigPath::whole(dir.join(n)))
                .collect();
        // Codex installs its own system skills in `skills/.system` when it starts
        out.push(ConfigPath {
            path: dir.join("skills"),
            json_keys: &[],
            keep: &[".system"],
        });
        out
    }

    /// `codex-cli 0.169.0` → `0.169.0`.
    fn parse_version(&self, stdout: &str) -> Option<String> {
        let first = stdout.lines().next()?.trim();
        let v = first.strip_prefix("codex-cli ").unwrap_or(first).trim();
        (!v.is_empty()).then(|| v.to_owned())
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::new(events::CodexParser::default())
    }

    fn findings(&self, events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
        findings::findings(events, stderr, completed)
    }

    fn exit_note(&self, exit_code: Option<i32>) -> Option<String> {
        match exit_code {
            Some(0) => {
                Some("codex exited 0 without turn.completed (its output was cut short)".to_owned())
            }
            Some(1) => Some(
                "codex exited 1 before finishing a turn: it does so for a configuration error \
                 ($CODEX_HOME/config.toml, -c values) and for a session id it cannot resume \
                 (its stderr, in logs, says which)"
                    .to_owned(),
            ),
            Some(code) => Some(format!(
                "codex exited {code} without turn.completed or turn.failed"
            )),
            None => None,
        }
    }
}

/// What Codex is told when the run's confinement, not its own sandbox, keeps the autonomy
/// level (a TOML basic string's content: no quote, no backslash).
fn confined_note(autonomy: Autonomy) -> &'static str {
    match autonomy {
        Autonomy::ReadOnly => {
            "This run is read-only: the operating system refuses every write to the repository \
             and outside this run's temporary directory. Do not try to change files; answer \
             from what you read."
        }
        _ => {
            "The operating system confines this run: writes are refused outside the repository \
             and this run's temporary directory ($TMPDIR)."
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;

    use super::*;

    fn inv(autonomy: Autonomy, session: Option<&'static str>) -> Invocation<'static> {
        Invocation {
            cwd: Path::new("/repo"),
            prompt_file: Path::new("/tmp/run/prompt.md"),
            run_dir: Path::new("/tmp/run"),
            autonomy,
            model: Some("gpt-5.5"),
            reasoning_effort: Some("high"),
            session_id: session,
            as_root: false,
            confined: false,
            env: &[],
        }
    }

    fn argv(inv: &Invocation<'_>) -> Vec<String> {
        Codex
            .args(inv)
            .unwrap()
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    const BASE: [&str; 4] = [
        "--json",
        "--disable",
        "unbounded_connection_retries",
        "--skip-git-repo-check",
    ];

    fn want(head: &[&str], mid: &[&str], tail: &[&str]) -> Vec<String> {
        head.iter()
            .chain(&BASE)
            .chain(mid)
            .chain(["-m", "gpt-5.5", "-c", "model_reasoning_effort=\"high\""].iter())
            .chain(tail)
            .map(|s| (*s).to_owned())
            .collect()
    }

    #[test]
    fn autonomy_maps_onto_the_sandbox() {
        assert_eq!(
            argv(&inv(Autonomy::ReadOnly, None)),
            want(&["exec"], &["-C", "/repo", "-s", "read-only"], &["-"])
        );
        for level in [Autonomy::Low, Autonomy::Medium] {
            assert_eq!(
                argv(&inv(level, None)),
                want(&["exec"], &["-C", "/repo", "-s", "workspace-write"], &["-"])
            );
        }
        assert_eq!(
            argv(&inv(Autonomy::High, None)),
            want(
                &["exec"],
                &["-C", "/repo", "--dangerously-bypass-approvals-and-sandbox"],
                &["-"]
            )
        );
    }

    #[test]
    fn under_the_runs_confinement_codex_runs_without_its_own_sandbox_and_is_told_the_level() {
        for level in [
            Autonomy::ReadOnly,
            Autonomy::Low,
            Autonomy::Medium,
            Autonomy::High,
        ] {
            let mut i = inv(level, None);
            i.confined = true;
            let note = format!("developer_instructions=\"{}\"", confined_note(level));
            assert_eq!(
                argv(&i),
                want(
                    &["exec"],
                    &[
                        "-C",
                        "/repo",
                        "--dangerously-bypass-approvals-and-sandbox",
                        "-c",
                        &note
                    ],
                    &["-"]
                )
            );
        }
        assert!(confined_note(Autonomy::ReadOnly).contains("read-only"));
        for level in [Autonomy::ReadOnly, Autonomy::High] {
            let note = confined_note(level);
            assert!(!note.contains(['"', '\\']), "a TOML basic string: {note}");
        }
    }

    #[test]
    fn resume_is_a_subcommand_without_cd_or_sandbox_flags() {
        assert_eq!(
            argv(&inv(Autonomy::Low, Some("01a2-thread"))),
            want(
                &["exec", "resume"],
                &["-c", "sandbox_mode=\"workspace-write\""],
                &["01a2-thread", "-"]
            )
        );
        assert_eq!(
            argv(&inv(Autonomy::High, Some("t"))),
            want(
                &["exec", "resume"],
                &["--dangerously-bypass-approvals-and-sandbox"],
                &["t", "-"]
            )
        );
    }

    #[test]
    fn efforts_codex_cannot_send_are_refused() {
        for e in ["dynamic", "off", "max"] {
            let mut i = inv(Autonomy::Low, None);
            i.reasoning_effort = Some(e);
            let err = Codex.args(&i).unwrap_err();
            assert_eq!(err.field, "reasoning_effort");
            assert!(err.message.contains(e), "{}", err.message);
        }
        let mut i = inv(Autonomy::Low, None);
        i.reasoning_effort = None;
        i.model = None;
        assert_eq!(
            argv(&i),
            [
                "exec",
                "--json",
                "--disable",
                "unbounded_connection_retries",
                "--skip-git-repo-check",
                "-C",
                "/repo",
                "-s",
                "workspace-write",
                "-"
            ]
        );
    }

    #[test]
    fn version_and_env() {
        assert_eq!(
            Codex.parse_version("codex-cli 0.169.0\n").as_deref(),
            Some("0.169.0")
        );
        assert_eq!(Codex.parse_version(""), None);
        assert!(Codex.env_names().contains("CODEX_HOME"));
        assert!(Codex.env_names().contains("OPENAI_API_KEY"));
        assert!(!Codex.env_names().contains("ANTHROPIC_API_KEY"));
    }
}
