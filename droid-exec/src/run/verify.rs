//! Verification: re-run the request's `suggested_commands` ourselves (`sh -c` in repo_root), each
//! in its own process group under the time left in the run's budget, with bounded excerpts. The
//! result's `tests` come from here, never from droid's word.
//!
//! Nothing a command starts outlives it, whatever its outcome. Where the engine has a cgroup host
//! ([`crate::run::cgroup`]) each command runs in a leaf of its own, and once its shell exits the
//! leaf is killed and found empty before the output is drained (a `server &` holding the pipes
//! does not delay the run; `setsid` children are in the leaf too). Without one, its process group
//! is killed, then everything carrying its marker (`<run marker>-verify-<i>`, `setsid` children
//! included) is swept.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use droid_contract::{CommandRun, CommandSource, ShellCommand, Tests};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use std::sync::Arc;

use crate::run::cgroup::{END_BUDGET, Host};
use crate::run::redact::Redactor;
use crate::run::sandbox::Confinement;
use crate::run::spawn::{SpawnSpec, capture_confined};
use crate::run::sweep::MARKER_VAR;

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
        let mut env = plan.env.to_vec();
        env.retain(|(k, _)| k != MARKER_VAR);
        env.push((MARKER_VAR.into(), marker.clone().into()));
        let spec = SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), cmd.as_str().into()],
            cwd: plan.cwd.to_path_buf(),
            env,
            stdin_piped: false,
            stdin_file: None,
            detach_log: None,
        };
        // a leaf per command: a killed one takes no new process (see `crate::run::cgroup`)
        let leaf = plan.leaves.and_then(|host| {
            host.leaf()
                .inspect_err(|e| tracing::warn!("{} runs without a cgroup: {e}", cmd.as_str()))
                .ok()
        });
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
            crate::run::sweep::sweep(&marker, Duration::from_secs(3)).await;
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
