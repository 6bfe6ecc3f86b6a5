//! The OpenCode provider (`opencode-ai` 1.18.33): `opencode run --format json` argv and
//! environment, its JSON lines read as [`AgentEvent`]s (`events`), its failure texts read as
//! issues (`findings`). Facts from the project's measurements of OpenCode 1.18.33
//! (docs/architecture.md#providers) and its recorded cases (copied where a test uses them to
//! `tests/fixtures/opencode-1.18.33/`), checked again against the real CLI.
//!
//! Choices:
//! - **Prompt on stdin, from the prompt file.** `opencode run` with no message reads its stdin
//!   to EOF and sends it verbatim as the user message (checked: the scripted model receives the
//!   file's text unquoted). An open pipe would hang it forever; the engine opens the prompt file
//!   as stdin ([`PromptInput::Stdin`]). Nothing goes on argv, so the 128 KiB argument limit does
//!   not apply, and `-f` (which attaches the file as a part the model reads as an attachment) is
//!   not needed.
//! - **`--pure` always.** Without it OpenCode queries the npm registry for its plugin packages
//!   and loads the user's external plugins (code the request did not ask for); with it the run
//!   needs no network but the model's (case `no-npm-registry-pure`). A user who needs a plugin
//!   runs OpenCode themselves.
//! - **`--dir <repo_root>`** (and the process cwd) set the project (case `resume-by-session`).
//! - **Autonomy → `OPENCODE_PERMISSION`** (JSON rules; ours replaces any the user set, so a
//!   request can never run with more than its capped autonomy). `deny` removes a tool from the
//!   model's tools (a call becomes tool `invalid`, "Model tried to call unavailable tool") or
//!   refuses one call ("The user has specified a rule which prevents you…") and the run goes on;
//!   an `ask` would be auto-rejected and end the run, so no level leaves an `ask` behind:
//!
//!   | autonomy | rules | flags |
//!   |---|---|---|
//!   | read_only | `edit` deny, `bash` deny, `external_directory` deny | |
//!   | low | `edit` allow, `bash` deny, `external_directory` deny | |
//!   | medium | `edit` allow, `bash` allow, `external_directory` deny | |
//!   | high | `*` allow (`edit`, `bash`, `webfetch`, `external_directory`, `doom_loop` too) | `--auto` |
//!
//!   `edit` governs `write`, `edit` and `patch`. OpenCode merges `OPENCODE_PERMISSION` over the
//!   config's `permission`, key by key (its config loader), so a user's rules for other keys stay;
//!   rules a user config gives one agent (`agent.build.permission`) are not ours to see. Checked with the real CLI: at read_only `write`,
//!   `edit` and `bash` are unavailable and nothing is written; with `external_directory` deny a
//!   `bash` or `write` touching a path outside the project is refused and the run finishes.
//! - **Environment:** `OPENCODE_DISABLE_AUTOUPDATE=1` and `OPENCODE_DISABLE_MODELS_FETCH=1` unless
//!   the user set them (a headless run must not update itself or wait on models.dev); every
//!   `OPENCODE_*` variable belongs to this provider.
//! - **model** is `provider/model` (`-m`); a model without `/` is refused.
//! - **reasoning_effort → `--variant`**. OpenCode silently ignores a variant the model lacks
//!   (checked: `--variant bogus` runs), so only the variant names OpenCode's own tables use are
//!   passed: `none minimal low medium high xhigh max` (an OpenAI-compatible model offers
//!   `low medium high`); anything else is refused.
//! - **session_id → `--session <id>`** continues that session (case `resume-by-session`).
//! - **Completion.** There is no final event: the `step_finish` whose reason is `stop` is the
//!   completion (see `events`). A permission auto-reject ends the run with exit 0 and no stop:
//!   permission_denied (case `permission-deny-and-ask`). An `error` event is the failure (case
//!   `model-error-400`, exit 1).
//! - **Process tree.** OpenCode runs each `bash` command in its own session, which survives a
//!   SIGTERM of the CLI (cases `sigterm-during-shell`, `sigterm-group-during-shell`); the run's
//!   supervisor owns the whole tree and ends it.

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

/// The `--variant` values passed on (the reasoning-effort names OpenCode's variant tables use).
pub(crate) const VARIANTS: [&str; 7] = ["none", "minimal", "low", "medium", "high", "xhigh", "max"];

/// Variables set for every run unless the user set them.
const DEFAULTS: [(&str, &str); 2] = [
    ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
    ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
];

/// OpenCode's variables: its config (`OPENCODE_CONFIG`, `_CONFIG_DIR`, `_CONFIG_CONTENT`),
/// permissions, database, models file, server credentials: every `OPENCODE_*` name.
const ENV: EnvNames = EnvNames {
    exact: &[],
    prefixes: &["OPENCODE_"],
};

/// The `OPENCODE_PERMISSION` rules for `autonomy` (see the module doc).
pub(crate) fn permission(autonomy: Autonomy) -> &'static str {
    match autonomy {
        Autonomy::ReadOnly => r#"{"edit":"deny","bash":"deny","external_directory":"deny"}"#,
        Autonomy::Low => r#"{"edit":"allow","bash":"deny","external_directory":"deny"}"#,
        Autonomy::Medium => r#"{"edit":"allow","bash":"allow","external_directory":"deny"}"#,
        Autonomy::High => {
            r#"{"*":"allow","edit":"allow","bash":"allow","webfetch":"allow","external_directory":"allow","doom_loop":"allow"}"#
        }
    }
}

/// The environment a run gets on top of the pass-through one; `user_set` says whether the
/// user's environment has a variable.
fn run_env(autonomy: Autonomy, user_set: impl Fn(&str) -> bool) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = DEFAULTS
        .iter()
        .filter(|(k, _)| !user_set(k))
        .map(|(k, v)| ((*k).into(), (*v).into()))
        .collect();
    env.push(("OPENCODE_PERMISSION".into(), permission(autonomy).into()));
    env
}

/// The OpenCode CLI.
#[derive(Debug, Default, Clone, Copy)]
pub struct Opencode;

impl Provider for Opencode {
    fn id(&self) -> ProviderId {
        ProviderId::Opencode
    }

    fn prompt_input(&self) -> PromptInput {
        PromptInput::Stdin
    }

    fn args(&self, inv: &Invocation<'_>) -> Result<Vec<OsString>, Unsupported> {
        let mut a: Vec<OsString> = vec![
            "run".into(),
            "--format".into(),
            "json".into(),
            "--pure".into(),
            "--dir".into(),
            inv.cwd.as_os_str().to_owned(),
        ];
        if inv.autonomy == Autonomy::High {
            a.push("--auto".into());
        }
        if let Some(m) = inv.model {
            if !m.contains('/') || m.starts_with('/') || m.ends_with('/') {
                return Err(Unsupported {
                    field: "model",
                    message: format!(
                        "OpenCode names a model provider/model (e.g. anthropic/claude-sonnet-4-5, \
                         or <provider id in opencode.json>/<model id>); got '{m}'"
                    ),
                });
            }
            a.extend(["-m".into(), m.into()]);
        }
        if let Some(r) = inv.reasoning_effort {
            if !VARIANTS.contains(&r) {
                return Err(Unsupported {
                    field: "reasoning_effort",
                    message: format!(
                        "OpenCode takes reasoning effort as a model variant ({}); '{r}' is none \
                         of them (OpenCode would ignore it silently)",
                        VARIANTS.join(", ")
                    ),
                });
            }
            a.extend(["--variant".into(), r.into()]);
        }
        if let Some(s) = inv.session_id {
            a.extend(["--session".into(), s.into()]);
        }
        Ok(a)
    }

    fn env(&self, inv: &Invocation<'_>) -> Vec<(OsString, OsString)> {
        run_env(inv.autonomy, |name| inv.has_env(name))
    }

    fn auth_vars(&self) -> &'static [&'static str] {
        &["OPENCODE_CONFIG", "OPENCODE_CONFIG_CONTENT"]
    }

    fn auth_files(&self) -> &'static [&'static str] {
        &[
            ".config/opencode/opencode.json",
            ".local/share/opencode/auth.json",
        ]
    }

    fn env_names(&self) -> EnvNames {
        ENV
    }

    /// Its XDG directories: data, config, cache and state (`~/.local/share/opencode`,
    /// `~/.config/opencode`, `~/.cache/opencode`, `~/.local/state/opencode`, or under the
    /// `XDG_*_HOME` variables when set).
    fn state_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<PathBuf> {
        [
            ("XDG_DATA_HOME", ".local/share"),
            ("XDG_CONFIG_HOME", ".config"),
            ("XDG_CACHE_HOME", ".cache"),
            ("XDG_STATE_HOME", ".local/state"),
        ]
        .into_iter()
        .map(|(var, default)| {
            env_path(env, var)
                .unwrap_or_else(|| home.join(default))
                .join("opencode")
        })
        .collect()
    }

    /// In its configuration directory (`$XDG_CONFIG_HOME/opencode`, else `~/.config/opencode`):
    /// `opencode.json(c)` and `config.json` (MCP servers, plugins), `AGENTS.md`, and its plugins,
    /// tools, agents and commands, which it loads as code or instructions.
    fn config_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<ConfigPath> {
        let dir = env_path(env, "XDG_CONFIG_HOME")
            .unwrap_or_else(|| home.join(".config"))
            .join("opencode");
        [
            "opencode.json",
            "opencode.jsonc",
            "config.json",
            "AGENTS.md",
            "plugin",
            "plugins",
            "tool",
            "tools",
            "agent",
            "agents",
            "command",
            "commands",
        ]
        .iter()
        .map(|n| ConfigPath::whole(dir.join(n)))
        .collect()
    }

    fn parser(&self) -> Box<dyn EventParser> {
        Box::new(events::OpencodeParser::default())
    }

    fn findings(&self, events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
        findings::findings(events, stderr, completed)
    }

    fn exit_note(&self, exit_code: Option<i32>) -> Option<String> {
        match exit_code {
            Some(0) => Some(
                "opencode exited 0 without finishing its turn (it does so when a permission \
                 request was auto-rejected, or when its output was cut)"
                    .to_owned(),
            ),
            Some(code) => Some(format!(
                "opencode exited {code} without finishing its turn or reporting an error (its \
                 log in $HOME/.local/share/opencode/log/ may say why)"
            )),
            None => None,
        }
    }

    fn parse_version(&self, stdout: &str) -> Option<String> {
        let first = stdout.lines().next()?.trim();
        let v = first.rsplit(' ').next()?.trim_start_matches('v');
        (!v.is_empty() && v.chars().next().is_some_and(|c| c.is_ascii_digit()))
            .then(|| v.to_owned())
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

    fn strings(a: Vec<OsString>) -> Vec<String> {
        a.into_iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn argv_never_carries_the_prompt() {
        let mut i = inv(Autonomy::Medium);
        i.model = Some("mock/mock-model");
        i.reasoning_effort = Some("high");
        i.session_id = Some("ses_1");
        assert_eq!(
            strings(Opencode.args(&i).unwrap()),
            [
                "run",
                "--format",
                "json",
                "--pure",
                "--dir",
                "/repo",
                "-m",
                "mock/mock-model",
                "--variant",
                "high",
                "--session",
                "ses_1"
            ]
        );
        assert_eq!(
            strings(Opencode.args(&inv(Autonomy::High)).unwrap()),
            [
                "run", "--format", "json", "--pure", "--dir", "/repo", "--auto"
            ]
        );
        assert_eq!(Opencode.prompt_input(), PromptInput::Stdin);
    }

    #[test]
    fn what_it_cannot_express_is_refused() {
        let mut i = inv(Autonomy::Low);
        i.reasoning_effort = Some("extreme");
        assert_eq!(
            Opencode.args(&i).map_err(|u| u.field),
            Err("reasoning_effort")
        );
        let mut i = inv(Autonomy::Low);
        i.model = Some("gpt-5");
        assert_eq!(Opencode.args(&i).map_err(|u| u.field), Err("model"));
    }

    #[test]
    fn autonomy_is_the_permission_rules() {
        for a in [
            Autonomy::ReadOnly,
            Autonomy::Low,
            Autonomy::Medium,
            Autonomy::High,
        ] {
            let v: serde_json::Value = serde_json::from_str(permission(a)).unwrap();
            let rule = |k: &str| v[k].as_str().unwrap_or("").to_owned();
            let expected = match a {
                Autonomy::ReadOnly => ("deny", "deny", "deny"),
                Autonomy::Low => ("allow", "deny", "deny"),
                Autonomy::Medium => ("allow", "allow", "deny"),
                Autonomy::High => ("allow", "allow", "allow"),
            };
            assert_eq!(
                (rule("edit"), rule("bash"), rule("external_directory")),
                (
                    expected.0.to_owned(),
                    expected.1.to_owned(),
                    expected.2.to_owned()
                ),
                "{a:?}"
            );
            assert!(!permission(a).contains("ask"), "{a:?}: an ask ends the run");
        }
    }

    #[test]
    fn defaults_yield_to_the_user() {
        let names = |env: Vec<(OsString, OsString)>| -> Vec<String> {
            env.into_iter()
                .map(|(k, v)| format!("{}={}", k.to_string_lossy(), v.to_string_lossy()))
                .collect()
        };
        assert_eq!(
            names(run_env(Autonomy::Low, |_| false)),
            [
                "OPENCODE_DISABLE_AUTOUPDATE=1".to_owned(),
                "OPENCODE_DISABLE_MODELS_FETCH=1".to_owned(),
                format!("OPENCODE_PERMISSION={}", permission(Autonomy::Low)),
            ]
        );
        assert_eq!(
            names(run_env(Autonomy::Low, |n| n == "OPENCODE_DISABLE_MODELS_FETCH")),
            [
                "OPENCODE_DISABLE_AUTOUPDATE=1".to_owned(),
                format!("OPENCODE_PERMISSION={}", permission(Autonomy::Low)),
            ]
        );
        assert!(Opencode.env_names().contains("OPENCODE_CONFIG_CONTENT"));
        assert!(!Opencode.env_names().contains("OPENAI_API_KEY"));
    }

    #[test]
    fn versions() {
        assert_eq!(Opencode.parse_version("1.18.33\n"), Some("1.18.33".into()));
        assert_eq!(
            Opencode.parse_version("opencode v1.2.3"),
            Some("1.2.3".into())
        );
        assert_eq!(Opencode.parse_version("nope"), None);
    }
}
