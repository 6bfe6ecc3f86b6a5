//! The five agent CLIs the engine drives, as the demo and the benchmark see them: where each one
//! is installed, the model id the sandbox configures for it, how its program is named to
//! `droid-executor` (`DROID_EXECUTOR_<P>_BIN`), and its own headless JSON command (the bare
//! baseline of `bench engine`), with the final event that says the run succeeded.
//!
//! The bare commands ask for what `droid-executor run --mode code` asks of each CLI (autonomy
//! `low`: droid `--auto low`, Codex `-s workspace-write`, Claude Code `--permission-mode
//! acceptEdits`, Gemini CLI `--approval-mode auto_edit`, OpenCode `edit` allowed and `bash`
//! denied), with the prompt as an argument and stdin `/dev/null`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Result, bail};

use crate::{droid, interop};

/// The custom model droid is told about.
pub(crate) const MODEL: &str = "custom:Demo-0";

/// One of the five providers: the contract's own enum and table ([`droid_contract::PROVIDERS`]:
/// names, packages, versions, the variables naming each program); what the demo and the
/// benchmark add to a row is [`AgentCli`].
pub(crate) use droid_contract::ProviderId as Agent;

/// The OpenCode provider and model ids the sandbox's `opencode.json` declares.
pub(crate) const OPENCODE_MODEL: &str = "scripted/demo";
/// The variable the sandbox's Codex provider reads its key from (`env_key`): not one of Codex's
/// documented variables, so the sandbox's `droid-executor` config lists it in `env_passthrough`.
pub(crate) const CODEX_KEY_VAR: &str = "MOCK_API_KEY";

/// `name` as an agent, or `all`'s error.
pub(crate) fn parse(name: &str) -> Result<Agent> {
    match Agent::parse(name) {
        Some(a) => Ok(a),
        None => bail!(
            "unknown provider {name:?}: one of {}, all",
            Agent::names(", ")
        ),
    }
}

/// What the demo and the benchmark know of a provider beyond its row: the sandbox's model, the
/// bare command, its success event.
pub(crate) trait AgentCli: Sized {
    /// The provider's name in requests (`--provider`).
    fn name(self) -> &'static str;
    /// The model the sandbox configures (see the impl).
    fn model(self) -> Option<&'static str>;
    /// The variable that names the program to `droid-executor`.
    fn bin_var(self) -> &'static str;
    /// The bare command as the benchmark prints it.
    fn bare_label(self) -> &'static str;
    /// The program, installed if it is not yet.
    fn program(self) -> Result<PathBuf>;
    /// The CLI's own headless run of `prompt` in `repo` at autonomy `low`.
    fn bare_args(self, repo: &Path, prompt: &str, prompt_file: &Path) -> Vec<OsString>;
    /// Variables the bare run needs to behave as the engine's run.
    fn bare_env(self) -> &'static [(&'static str, &'static str)];
    /// Whether `stdout` of a bare run ends in the CLI's own success event.
    fn bare_succeeded(self, stdout: &str) -> bool;
}

impl AgentCli for Agent {
    fn name(self) -> &'static str {
        self.as_str()
    }

    /// The model the sandbox configures, passed as `--model` (Claude Code: its default model;
    /// the scripted model answers whatever is asked).
    fn model(self) -> Option<&'static str> {
        match self {
            Agent::Droid => Some(MODEL),
            // a slug of Codex's catalog: Codex offers `apply_patch` only for a model it knows
            Agent::Codex => Some("gpt-5.5"),
            Agent::Claude => None,
            // an explicit model: Gemini CLI skips its router call
            Agent::Gemini => Some("gemini-2.5-pro"),
            Agent::Opencode => Some(OPENCODE_MODEL),
        }
    }

    /// droid's seed-000 variable (`DROID_CLI_CMD`, the one the tour shows), else the row's.
    fn bin_var(self) -> &'static str {
        match self {
            Agent::Droid => "DROID_CLI_CMD",
            other => other.info().bin_vars[0],
        }
    }

    /// The bare command as the benchmark prints it.
    fn bare_label(self) -> &'static str {
        match self {
            Agent::Droid => "droid exec -o stream-json",
            Agent::Codex => "codex exec --json",
            Agent::Claude => "claude -p --output-format stream-json",
            Agent::Gemini => "gemini -p -o stream-json",
            Agent::Opencode => "opencode run --format json",
        }
    }

    /// The program, installed if it is not yet: droid under `target/droid/`, the others under
    /// `target/agents/node/` (`cargo xtask fetch-interop` installs the same).
    fn program(self) -> Result<PathBuf> {
        if self == Agent::Droid {
            return droid::fetch();
        }
        let dir = interop::fetch_agents()?;
        let bin = dir.join("node_modules/.bin").join(self.as_str());
        if !bin.exists() {
            bail!(
                "{} is missing after installing the agent CLIs (run `cargo xtask fetch-interop` and look at its output)",
                bin.display()
            );
        }
        Ok(bin)
    }

    /// The CLI's own headless run of `prompt` in `repo` at autonomy `low`, in its JSON mode.
    fn bare_args(self, repo: &Path, prompt: &str, prompt_file: &Path) -> Vec<OsString> {
        let mut a: Vec<OsString> = Vec::new();
        let push = |a: &mut Vec<OsString>, items: &[&str]| a.extend(items.iter().map(Into::into));
        match self {
            Agent::Droid => {
                push(
                    &mut a,
                    &["exec", "--output-format", "stream-json", "--auto", "low"],
                );
                push(&mut a, &["-m", MODEL, "--cwd"]);
                a.push(repo.into());
                a.push("-f".into());
                a.push(prompt_file.into());
            }
            Agent::Codex => {
                push(
                    &mut a,
                    &[
                        "exec",
                        "--json",
                        "--disable",
                        "unbounded_connection_retries",
                        "--skip-git-repo-check",
                        "-s",
                        "workspace-write",
                        "-m",
                        "gpt-5.5",
                        "-C",
                    ],
                );
                a.push(repo.into());
                a.push(prompt.into());
            }
            Agent::Claude => {
                push(&mut a, &["-p", prompt, "--output-format", "stream-json"]);
                push(&mut a, &["--verbose", "--permission-mode", "acceptEdits"]);
            }
            Agent::Gemini => {
                push(&mut a, &["-p", prompt, "-o", "stream-json", "--skip-trust"]);
                push(
                    &mut a,
                    &["--approval-mode", "auto_edit", "-m", "gemini-2.5-pro"],
                );
            }
            Agent::Opencode => {
                push(&mut a, &["run", "--format", "json", "--pure", "--dir"]);
                a.push(repo.into());
                push(&mut a, &["-m", OPENCODE_MODEL, prompt]);
            }
        }
        a
    }

    /// Variables the engine's provider sets for a run at autonomy `low`, which the bare run
    /// needs as well to behave the same (bounded retries, no update checks, the permissions).
    fn bare_env(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Agent::Droid | Agent::Codex | Agent::Gemini => &[],
            Agent::Claude => &[
                ("CLAUDE_CODE_MAX_RETRIES", "3"),
                ("DISABLE_AUTOUPDATER", "1"),
                ("DISABLE_TELEMETRY", "1"),
            ],
            Agent::Opencode => &[
                ("OPENCODE_DISABLE_AUTOUPDATE", "1"),
                ("OPENCODE_DISABLE_MODELS_FETCH", "1"),
                (
                    "OPENCODE_PERMISSION",
                    r#"{"edit":"allow","bash":"deny","external_directory":"deny"}"#,
                ),
            ],
        }
    }

    /// Whether `stdout` of a bare run ends in the CLI's own success event.
    fn bare_succeeded(self, stdout: &str) -> bool {
        let events: Vec<serde_json::Value> = stdout
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect();
        let ty = |e: &serde_json::Value| e["type"].as_str().unwrap_or("").to_owned();
        match self {
            Agent::Droid => events.iter().any(|e| ty(e) == "completion"),
            Agent::Codex => events.iter().any(|e| ty(e) == "turn.completed"),
            Agent::Claude => events
                .iter()
                .any(|e| ty(e) == "result" && e["is_error"] == false),
            Agent::Gemini => events
                .iter()
                .any(|e| ty(e) == "result" && e["status"] == "success"),
            Agent::Opencode => events
                .iter()
                .any(|e| ty(e) == "step_finish" && e["part"]["reason"] == "stop"),
        }
    }
}

/// The programs of `agents`, each installed if missing, as `(agent, program)`.
pub(crate) fn programs(agents: &[Agent]) -> Result<Vec<(Agent, PathBuf)>> {
    agents.iter().map(|&a| Ok((a, a.program()?))).collect()
}
