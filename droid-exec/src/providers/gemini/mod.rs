//! The Gemini CLI provider (`@google/gemini-cli` 0.61.0): `gemini -p "" -o stream-json` argv,
//! its stream-json events read into [`AgentEvent`]s ([`events`]), its failure texts read into
//! issues ([`findings`]), and what its exit codes mean ([`Gemini::exit_note`]), as measured
//! against the real CLI: the recordings copied into `tests/fixtures/gemini-cli-0.61.0/` (its
//! README names each case) and the end-to-end suite `provider_gemini`.
//!
//! Choices:
//! - **Prompt on stdin.** `-p` is "appended to stdin input if any": with the prompt file as stdin
//!   and `-p ""` the user message is exactly the file (checked by hand against the real CLI and in
//!   the end-to-end suite); the prompt never goes on argv (E2BIG at 128 KiB).
//! - **`--skip-trust` always.** The caller chose `repo_root` and the server checked it against
//!   `allowed_roots`; Gemini's folder trust would otherwise stop every headless run in an
//!   untrusted folder with exit 55 (case `untrusted-folder`).
//! - **Autonomy** onto `--approval-mode` (always given, so a user's `defaultApprovalMode` in
//!   settings.json cannot widen it). In headless mode nothing asks: a tool that would need
//!   approval is simply not offered to the model (case `default-approval-write-denied`), so
//!   - `read_only` → `default`: no `write_file`, `replace` nor `run_shell_command`;
//!   - `low` → `auto_edit`: file edits, no shell (case `auto-edit-fixed-model`);
//!   - `medium` → `auto_edit` plus `--allowed-tools run_shell_command`: edits and shell commands,
//!     but nothing else that needs approval (MCP tools, skills, background-process tools). Gemini
//!     has no middle level and no per-command risk rating, so medium is "edit and run commands";
//!     `--allowed-tools` is deprecated in favour of policy files but works in 0.61.0 and needs no
//!     file written per run;
//!   - `high` → `yolo`: every tool.
//! - **Model** `-m` (an explicit model also skips the router call of model `auto`).
//!   **reasoning_effort**: no flag (thinking budgets live in settings.json) → [`Unsupported`].
//!   **session_id** → `--resume <id>` (a uuid from an earlier run in the same repository and
//!   `HOME`; an unknown one exits 42, read as an issue naming session_id).
//! - **Success** only from the final `result` event with `status: "success"`; the final text is
//!   the assistant deltas after the last `tool_result`. Gemini does not report a shell command's
//!   exit code in its events (the model alone sees `Exit Code: N`), so shell results carry
//!   `exit_code: None`, and a failing command is `status: "success"` there too.
//! - **Processes.** Gemini relaunches itself in a child node and runs each shell command in its
//!   own process group (cases `sigterm-*-during-shell`): only a tree kill stops a run, which the
//!   engine's supervisor does.
//! - **Configuration** is the user's: the auth type must be set in `$HOME/.gemini/settings.json`
//!   (or under `GEMINI_CLI_HOME`) — env alone exits 41 "Invalid auth method selected." (case
//!   `no-auth-type-configured`), which [`findings`] turns into an `auth_failure` saying how to fix
//!   it. [`Gemini::env`] sets nothing: no variable bounds Gemini's retries of a dead endpoint (the
//!   run's deadline does).

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

pub(crate) use events::GeminiParser;

/// The variables Gemini CLI documents for its endpoint, keys and configuration directory (and
/// every `GEMINI_*` one: `GEMINI_CLI_TRUST_WORKSPACE`, `GEMINI_MODEL`, …).
const ENV: EnvNames = EnvNames {
    exact: &[
        "GOOGLE_API_KEY",
        "GOOGLE_GEMINI_BASE_URL",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_GENAI_USE_VERTEXAI",
    ],
    prefixes: &["GEMINI_"],
};

/// The Gemini CLI.
#[derive(Debug, Default, Clone, Copy)]
pub struct Gemini;

impl Provider for Gemini {
    fn id(&self) -> ProviderId {
        ProviderId::Gemini
    }

    fn prompt_input(&self) -> PromptInput {
        PromptInput::Stdin
    }

    fn args(&self, inv: &Invocation<'_>) -> Result<Vec<OsString>, Unsupported> {
        if inv.reasoning_effort.is_some() {
            return Err(Unsupported {
                field: "reasoning_effort",
                message: "Gemini CLI has no reasoning-effort flag (thinking budgets are set per \
                          model in its settings.json); leave reasoning_effort unset for provider \
                          gemini"
                    .to_owned(),
            });
        }
        let mut a: Vec<OsString> = vec![
            // the prompt is stdin; `-p` selects headless mode and appends nothing
            "-p".into(),
            "".into(),
            "--output-format".into(),
            "stream-json".into(),
            // the caller chose repo_root and the server allowed it
            "--skip-trust".into(),
            "--approval-mode".into(),
        ];
        match inv.autonomy {
            Autonomy::ReadOnly => a.push("default".into()),
            Autonomy::Low => a.push("auto_edit".into()),
            Autonomy::Medium => a.extend([
                "auto_edit".into(),
                "--allowed-tools".into(),
                "run_shell_command".into(),
            ]),
            Autonomy::High => a.push("yolo".into()),
        }
        if let Some(m) = inv.model {
            a.extend(["--model".into(), m.into()]);
        }
        if let Some(s) = inv.session_id {
            a.extend(["--resume".into(), s.into()]);
        }
        Ok(a)
    }

    fn auth_vars(&self) -> &'static [&'static str] {
        &[
            "GEMINI_API_KEY",
            "GOOGLE_API_KEY",
            "GOOGLE_APPLICATION_CREDENTIALS",
        ]
    }

    fn auth_files(&self) -> &'static [&'static str] {
        &[".gemini/oauth_creds.json"]
    }

    fn env_names(&self) -> EnvNames {
        ENV
    }

    /// `~/.gemini` and `$GEMINI_CLI_HOME`.
    fn state_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<PathBuf> {
        let mut out = under(home, &[".gemini"]);
        out.extend(env_path(env, "GEMINI_CLI_HOME"));
        out
    }

    /// `settings.json` (MCP servers, hooks, tool settings), `GEMINI.md`, its extensions and
    /// commands, in `~/.gemini` and `$GEMINI_CLI_HOME/.gemini`.
    fn config_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<ConfigPath> {
        let mut dirs = vec![home.join(".gemini")];
        dirs.extend(env_path(env, "GEMINI_CLI_HOME").map(|h| h.join(".gemini")));
        let names = ["settings.json", "GEMINI.md", "extensions", "commands"];
        dirs.iter()
            .flat_map(|d| names.iter().map(|n| ConfigPath::whole(d.join(n))))
            .collect()
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::new(GeminiParser::default())
    }

    fn findings(&self, events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
        findings::findings(events, stderr, completed)
    }

    fn exit_note(&self, exit_code: Option<i32>) -> Option<String> {
        let code = exit_code?;
        let what = match code {
            0 => "gemini exited 0 without a result event (it does so when its process group gets SIGTERM)".to_owned(),
            41 => "gemini exited 41: authentication failed (FatalAuthenticationError); set security.auth.selectedType in $HOME/.gemini/settings.json (e.g. \"gemini-api-key\") and GEMINI_API_KEY".to_owned(),
            42 => "gemini exited 42: bad input (FatalInputError), e.g. an unknown session_id".to_owned(),
            44 => "gemini exited 44: its sandbox failed (FatalSandboxError)".to_owned(),
            52 => "gemini exited 52: its configuration is invalid (FatalConfigError); check $HOME/.gemini/settings.json".to_owned(),
            53 => "gemini exited 53: it reached its turn limit (model.maxSessionTurns in settings.json)".to_owned(),
            54 => "gemini exited 54: a tool failed fatally (FatalToolExecutionError)".to_owned(),
            55 => "gemini exited 55: the folder is not trusted (GEMINI_CLI_TRUST_WORKSPACE=true or --skip-trust)".to_owned(),
            130 => "gemini exited 130: it was cancelled".to_owned(),
            _ => {
                let http: Vec<String> = (400..512)
                    .filter(|h| h % 256 == code)
                    .map(|h| h.to_string())
                    .collect();
                if http.is_empty() {
                    format!("gemini exited {code} without a result event")
                } else {
                    format!(
                        "gemini exited {code} without a result event; gemini exits with the HTTP status of a failed model call modulo 256, so this may be HTTP {}",
                        http.join(" or ")
                    )
                }
            }
        };
        Some(what)
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;

    use super::*;

    fn argv(autonomy: Autonomy, model: Option<&str>, session: Option<&str>) -> Vec<String> {
        let inv = Invocation {
            cwd: Path::new("/repo"),
            prompt_file: Path::new("/tmp/run/prompt.md"),
            run_dir: Path::new("/tmp/run"),
            autonomy,
            model,
            reasoning_effort: None,
            session_id: session,
            as_root: false,
            confined: false,
            env: &[],
        };
        Gemini
            .args(&inv)
            .unwrap_or_default()
            .into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn argv_per_autonomy_never_carries_the_prompt() {
        let head = ["-p", "", "--output-format", "stream-json", "--skip-trust"];
        let with = |tail: &[&str]| -> Vec<String> {
            head.iter().chain(tail).map(|s| (*s).to_owned()).collect()
        };
        assert_eq!(
            argv(Autonomy::ReadOnly, None, None),
            with(&["--approval-mode", "default"])
        );
        assert_eq!(
            argv(Autonomy::Low, Some("gemini-2.5-pro"), None),
            with(&["--approval-mode", "auto_edit", "--model", "gemini-2.5-pro"])
        );
        assert_eq!(
            argv(Autonomy::Medium, None, None),
            with(&[
                "--approval-mode",
                "auto_edit",
                "--allowed-tools",
                "run_shell_command"
            ])
        );
        assert_eq!(
            argv(
                Autonomy::High,
                None,
                Some("7578b4e8-9423-4061-b133-c277a5fadf09")
            ),
            with(&[
                "--approval-mode",
                "yolo",
                "--resume",
                "7578b4e8-9423-4061-b133-c277a5fadf09"
            ])
        );
        assert_eq!(Gemini.prompt_input(), PromptInput::Stdin);
    }

    #[test]
    fn reasoning_effort_is_refused_by_name() {
        let inv = Invocation {
            cwd: Path::new("/repo"),
            prompt_file: Path::new("/tmp/run/prompt.md"),
            run_dir: Path::new("/tmp/run"),
            autonomy: Autonomy::Low,
            model: None,
            reasoning_effort: Some("high"),
            session_id: None,
            as_root: false,
            confined: false,
            env: &[],
        };
        let err = Gemini.args(&inv).unwrap_err();
        assert_eq!(err.field, "reasoning_effort");
    }

    #[test]
    fn env_names_are_geminis_own() {
        let names = Gemini.env_names();
        for n in [
            "GEMINI_API_KEY",
            "GEMINI_CLI_HOME",
            "GOOGLE_API_KEY",
            "GOOGLE_GEMINI_BASE_URL",
            "GOOGLE_CLOUD_PROJECT",
            "GOOGLE_CLOUD_LOCATION",
            "GOOGLE_APPLICATION_CREDENTIALS",
            "GOOGLE_GENAI_USE_VERTEXAI",
        ] {
            assert!(names.contains(n), "{n}");
        }
        for n in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "FACTORY_API_KEY",
            "HOME",
        ] {
            assert!(!names.contains(n), "{n}");
        }
    }

    #[test]
    fn exit_codes_are_explained() {
        let note = |c| Gemini.exit_note(Some(c)).unwrap_or_default();
        assert!(note(144).contains("HTTP 400"), "{}", note(144));
        assert!(note(173).contains("HTTP 429"), "{}", note(173));
        assert!(note(244).contains("HTTP 500"), "{}", note(244));
        assert!(note(41).contains("selectedType"));
        assert!(note(53).contains("maxSessionTurns"));
        assert!(note(55).contains("trusted"));
        assert_eq!(note(3), "gemini exited 3 without a result event");
        assert_eq!(Gemini.exit_note(None), None);
        assert_eq!(Gemini.parse_version("0.61.0\n"), Some("0.61.0".into()));
    }
}
