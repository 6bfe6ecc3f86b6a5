//! Verification: re-run the request's `suggested_commands` ourselves (`sh -c` in repo_root), each
//! in its own process group under the time left in the run's budget, with bounded excerpts. The
//! result's `tests` come from here, never from droid's word.
//!
//! Nothing a command starts outlives it, whatever its outcome. Where the engine has a cgroup host
//! ([`crate::process::cgroup`]) each command runs in a leaf of its own, and once its shell exits the
//! leaf is killed and found empty before the output is drained (a `server &` holding the pipes
//! does not delay the run; `setsid` children are in the leaf too). Without one, its process group
//! is killed, then everything carrying its marker (`<run marker>-verify-<i>`, `setsid` children
//! included) is swept.
//!
//! The commands run code the agent wrote (a test file, a build script), so their environment is
//! the run's without any credential ([`command_env`]): not the run's provider's, nor another's,
//! nor a token of ours, whatever the caller's environment.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use droid_contract::{CommandRun, CommandSource, ShellCommand, Tests};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::process::capture::capture_confined;
use crate::process::cgroup::{END_BUDGET, Host};
use crate::process::limits::{Controllers, Rlimits, RunLimits};
use crate::process::sandbox::Confinement;
use crate::process::spawn::SpawnSpec;
use crate::process::sweep::MARKER_VAR;
use crate::run::redact::{Redactor, is_credential};

/// Outcome of verification.
#[derive(Debug)]
pub(crate) struct Verified {
    pub runs: Vec<CommandRun>,
    pub tests: Tests,
    /// Exit code per command (`None`: killed, not run, or could not start).
    pub codes: Vec<Option<i32>>,
    pub cancelled: bool,
    /// Every command's processes were proven gone (its cgroup leaf found empty), none only
    /// swept for.
    pub proven: bool,
}

pub(crate) struct VerifyPlan<'a> {
    pub commands: &'a [ShellCommand],
    pub cwd: &'a Path,
    pub env: &'a [(OsString, OsString)],
    pub deadline: Instant,
    pub keep: usize,
    pub marker: &'a str,
    pub redact: &'a Redactor,
    /// The run's confinement: the commands write where the agent could, nowhere else.
    pub confine: Option<&'a Confinement>,
    /// Where each command's cgroup leaf comes from (`None`, or no leaf: the marker sweep).
    pub leaves: Option<&'a Arc<Host>>,
    /// The most tasks and memory of each command ([`crate::process::limits`]).
    pub limits: RunLimits,
}

pub(crate) async fn verify(plan: &VerifyPlan<'_>, cancel: &CancellationToken) -> Verified {
    let mut runs = Vec::new();
    let mut codes = Vec::new();
    let mut details = Vec::new();
    let mut cancelled = false;
    let mut proven = true;
    for (i, cmd) in plan.commands.iter().enumerate() {
        let left = plan.deadline.saturating_duration_since(Instant::now());
        if cancelled || left.is_zero() {
            let why = if cancelled {
                "not run: the task was cancelled"
            } else {
                "not run: the time budget ran out before verification"
            };
            runs.push(not_run(cmd, why));
            codes.push(None);
            details.push(format!("{}: {why}", cmd.as_str()));
            continue;
        }
        let marker = format!("{}-verify-{i}", plan.marker);
        let mut env = command_env(plan.env, plan.redact);
        env.push((MARKER_VAR.into(), marker.clone().into()));
        let spec = SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), cmd.as_str().into()],
            cwd: plan.cwd.to_path_buf(),
            env,
            stdin_piped: false,
            stdin_file: None,
            detach_log: None,
            rlimits: crate::process::limits::Rlimits::NONE,
        };
        // a leaf per command: a killed one takes no new process (see `crate::process::cgroup`)
        let leaf = plan.leaves.and_then(|host| {
            host.leaf()
                .inspect_err(|e| tracing::warn!("{} runs without a cgroup: {e}", cmd.as_str()))
                .ok()
        });
        // what the leaf does not bound, the command bounds itself
        let spec = SpawnSpec {
            rlimits: Rlimits::for_child(
                plan.limits,
                leaf.as_ref()
                    .map_or(Controllers::default(), |l| l.controllers()),
            ),
            ..spec
        };
        let outcome = tokio::select! {
            r = capture_confined(&spec, None, left, plan.keep, &marker, plan.confine, leaf.as_ref()) => Some(r),
            () = cancel.cancelled() => None,
        };
        // whatever the outcome, nothing the command started outlives it: its group was killed
        // when its shell exited (`server &`); this finds the rest (a `setsid` child that closed
        // its output) and, after a cancel, the whole tree
        let ended = match &leaf {
            Some(leaf) => leaf.end(END_BUDGET).await,
            None => false,
        };
        if !ended {
            proven = false;
            crate::process::sweep::sweep(&marker, Duration::from_secs(3)).await;
        }
        let Some(result) = outcome else {
            cancelled = true;
            runs.push(not_run(cmd, "stopped: the task was cancelled"));
            codes.push(None);
            details.push(format!("{}: cancelled", cmd.as_str()));
            continue;
        };
        match result {
            Ok(c) => {
                let detail = match (c.code, c.timed_out) {
                    (_, true) => format!(
                        "{}: killed after {} s (time budget)",
                        cmd.as_str(),
                        c.duration.as_secs()
                    ),
                    (Some(code), false) => format!("{}: exit {code}", cmd.as_str()),
                    (None, false) => format!("{}: killed by a signal", cmd.as_str()),
                };
                details.push(detail);
                codes.push(c.code);
                runs.push(CommandRun {
                    command: cmd.as_str().to_owned(),
                    exit_code: c.code,
                    duration_ms: u64::try_from(c.duration.as_millis()).unwrap_or(u64::MAX),
                    stdout_excerpt: plan.redact.apply(&c.stdout.text()),
                    stderr_excerpt: plan.redact.apply(&c.stderr.text()),
                    source: CommandSource::Verify,
                    truncated: c.stdout.truncated() || c.stderr.truncated(),
                });
            }
            Err(e) => {
                details.push(format!("{}: could not start: {e}", cmd.as_str()));
                codes.push(None);
                runs.push(not_run(cmd, &format!("could not start: {e}")));
            }
        }
    }
    let passed = (!codes.is_empty()).then(|| codes.iter().all(|c| *c == Some(0)));
    Verified {
        tests: Tests {
            passed,
            details: details.join("\n"),
            commands: plan
                .commands
                .iter()
                .map(|c| c.as_str().to_owned())
                .collect(),
        },
        runs,
        codes,
        cancelled,
        proven,
    }
}

/// Our own variables' prefix: the settings, and the bridge's token (`DROID_EXECUTOR_TOKEN`).
const OUR_PREFIX: &str = "DROID_EXECUTOR_";

/// The environment of a verification command, from the run's `env`: whatever the run's provider
/// and whatever the caller's environment, no credential of any provider and no token of ours.
/// Left out are
/// - every provider's own variables ([`crate::providers::all_env_names`]: keys, endpoints and
///   configuration directories), the run's own provider's included;
/// - every `DROID_EXECUTOR_*` variable (our settings, the bridge's token; the command's marker,
///   `DROID_EXECUTOR_RUN_ID`, is set again by [`verify`]);
/// - every variable whose name says it holds a credential (`KEY`, `TOKEN`, `SECRET`,
///   `PASSWORD`, `PASSWD`, `CREDENTIAL`, `AUTH`, `COOKIE`: the redactor's rule), so a key listed
///   in `env_passthrough` for an agent (`OPENROUTER_API_KEY` for OpenCode) stays the agent's;
/// - every variable whose whole value the redactor hides (the bridge's token under any name).
///
/// The rest (`PATH`, `HOME`, locale, proxies, toolchain homes, `TMPDIR`, the other names of
/// `env_passthrough`) is passed as it is.
pub(crate) fn command_env(
    env: &[(OsString, OsString)],
    redact: &Redactor,
) -> Vec<(OsString, OsString)> {
    let providers = crate::providers::all_env_names();
    env.iter()
        .filter(|(name, value)| {
            let name = name.to_string_lossy();
            !(name.starts_with(OUR_PREFIX)
                || providers.iter().any(|p| p.contains(&name))
                || is_credential(&name)
                || value.to_str().is_some_and(|v| redact.hides_value(v)))
        })
        .cloned()
        .collect()
}

fn not_run(cmd: &ShellCommand, why: &str) -> CommandRun {
    CommandRun {
        command: cmd.as_str().to_owned(),
        exit_code: None,
        duration_ms: 0,
        stdout_excerpt: String::new(),
        stderr_excerpt: why.to_owned(),
        source: CommandSource::Verify,
        truncated: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use droid_contract::ProviderId;
    use pretty_assertions::assert_eq;

    fn pairs(list: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        list.iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v)))
            .collect()
    }

    fn names(env: &[(OsString, OsString)]) -> Vec<String> {
        env.iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect()
    }

    #[test]
    fn verification_gets_no_credential_of_any_provider_and_no_token_of_ours() {
        let bridge_token = "bridge-token-0123456789";
        let redact = Redactor::for_config(&crate::EngineConfig {
            redact: vec![bridge_token.to_owned()],
            ..crate::Settings::default().engine_config(&crate::EnvMap::new())
        });
        let env = pairs(&[
            ("PATH", "/usr/bin:/bin"),
            ("HOME", "/home/u"),
            ("LANG", "C.UTF-8"),
            ("TMPDIR", "/tmp/run/tmp"),
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("CARGO_HOME", "/home/u/.cargo"),
            ("RUST_LOG", "info"),
            ("FACTORY_API_KEY", "fk-0123456789abcdef"),
            ("FACTORY_HOME", "/home/u/.factory"),
            ("OPENAI_API_KEY", "sk-openai-0123456789"),
            ("OPENAI_BASE_URL", "http://127.0.0.1:9/v1"),
            ("CODEX_API_KEY", "codex-0123456789"),
            ("CODEX_HOME", "/home/u/.codex"),
            ("ANTHROPIC_API_KEY", "sk-ant-0123456789"),
            ("ANTHROPIC_AUTH_TOKEN", "ant-token-0123456789"),
            ("CLAUDE_CODE_OAUTH_TOKEN", "oauth-0123456789"),
            ("GEMINI_API_KEY", "gemini-0123456789"),
            ("GOOGLE_API_KEY", "google-0123456789"),
            ("GOOGLE_APPLICATION_CREDENTIALS", "/home/u/adc.json"),
            ("OPENCODE_CONFIG_CONTENT", "{}"),
            // listed in env_passthrough for an agent
            ("OPENROUTER_API_KEY", "or-0123456789"),
            ("AWS_SECRET_ACCESS_KEY", "aws-0123456789"),
            // ours
            ("DROID_EXECUTOR_TOKEN", bridge_token),
            ("DROID_EXECUTOR_RUN_ID", "run-1"),
            ("BRIDGE", bridge_token),
        ]);
        assert_eq!(
            names(&command_env(&env, &redact)),
            [
                "PATH",
                "HOME",
                "LANG",
                "TMPDIR",
                "HTTPS_PROXY",
                "CARGO_HOME",
                "RUST_LOG"
            ]
        );
    }

    #[test]
    fn every_variable_a_provider_declares_is_left_out() {
        let redact = Redactor::default();
        for id in ProviderId::ALL {
            let provider = crate::providers::provider(id);
            let declared = provider.env_names();
            let mut env: Vec<(OsString, OsString)> = declared
                .exact
                .iter()
                .chain(provider.auth_vars())
                .map(|n| ((*n).into(), "value".into()))
                .collect();
            env.extend(
                declared
                    .prefixes
                    .iter()
                    .map(|p| (format!("{p}ANY").into(), "value".into())),
            );
            env.push(("PATH".into(), "/bin".into()));
            assert_eq!(names(&command_env(&env, &redact)), ["PATH"], "{id:?}");
        }
    }
}
