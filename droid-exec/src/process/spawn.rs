//! The one place the workspace starts processes (docs/architecture.md#house-rules: one spawn
//! module): here with tokio's spawn, and in [`leaf`] straight into a cgroup leaf with `clone3`.
//! The workspace's `unsafe` code is in this module only.
//!
//! Every child gets its own process group (`process_group(0)`), an explicit environment (cleared,
//! then exactly what the caller passes), null or piped stdin, piped stdout and stderr,
//! `kill_on_drop`, and a parent-death signal (SIGKILL when the thread that started it dies, which
//! covers our process being SIGKILLed). Killing is by process group; descendants that escaped into
//! their own session (droid runs each Execute command under `setsid`) are ended with the run's
//! cgroup leaf, where a child is born ([`leaf`]), or by
//! the run's supervisor, their subreaper ([`crate::process::guard`]), or else found by
//! [`crate::process::sweep`].
//!
//! The exceptions: a *detached* child (a background task's worker, a run's guardian) gets a new
//! session (`setsid`), its output goes to a log file (`/dev/null` for a guardian), and neither
//! `kill_on_drop` nor a parent-death signal, because it must outlive the front-end that started
//! it; a run's *supervisor* (`spawn_supervisor`) keeps its own group and pipes, but gets no
//! parent-death signal and no `kill_on_drop` either, for the same reason; and droid started by that supervisor (`spawn_inheriting`)
//! writes straight to the supervisor's stdout and stderr, in a Landlock layer of its own where
//! the run is scoped ([`crate::process::sandbox`]: droid's tree cannot signal the supervisor).
//!
//! The parent-death signal is per *thread* on Linux: it fires when the thread that called `fork`
//! exits. Children are spawned from async code, that is from a tokio worker thread (or the
//! current-thread runtime's thread), which lives as long as the runtime; never spawn from
//! `spawn_blocking`, whose threads retire when idle.

pub(crate) mod leaf;
mod orphans;

use std::os::unix::fs::OpenOptionsExt;
use std::process::Stdio;
use std::time::Duration;

use landlock::RulesetCreated;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::{Child, Command};

use crate::error::EngineError;
use crate::process::child::RunChild;
use crate::process::sandbox::Confinement;
use crate::process::sweep;

pub use crate::process::spawn_spec::{SpawnSpec, resolve_program};

/// How a child is tied to the process starting it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tie {
    /// Own process group, piped stdout and stderr, parent-death signal, killed on drop.
    Owned,
    /// A new session, output to a log file, outlives us (a task's worker, a run's guardian).
    Detached,
    /// A run's supervisor ([`crate::process::guard`]): own process group, piped stdin, stdout and stderr,
    /// but neither a parent-death signal nor a kill on drop: when we die it must live on long
    /// enough to end the agent's tree (it learns of our death from its stdin's end-of-file).
    Supervisor,
    /// The agent under a supervisor: [`Tie::Owned`] but with this process's stdout and stderr
    /// (the supervisor's, which are the engine's pipes).
    Inherit,
}

/// Start `spec` in its own process group.
///
/// # Errors
/// [`EngineError::Spawn`] when the program cannot be started.
pub fn spawn(spec: &SpawnSpec) -> Result<Child, EngineError> {
    let tie = if spec.detach_log.is_some() {
        Tie::Detached
    } else {
        Tie::Owned
    };
    spawn_tied(spec, tie, None)
}

/// [`spawn`] confined by `confine` ([`crate::process::sandbox`]): the ruleset is built here and
/// enforced in the child before it executes the program.
///
/// # Errors
/// [`EngineError::Spawn`] when the ruleset cannot be built or enforced, or the program cannot
/// be started.
pub(crate) fn spawn_confined(
    spec: &SpawnSpec,
    confine: Option<&Confinement>,
) -> Result<Child, EngineError> {
    let tie = if spec.detach_log.is_some() {
        Tie::Detached
    } else {
        Tie::Owned
    };
    spawn_tied(spec, tie, ruleset(spec, confine)?)
}

/// Start a run's supervisor ([`crate::process::guard::supervise_tree`]): its own process group, its stdin,
/// stdout and stderr piped, no parent-death signal and no kill on drop (`detach_log` ignored).
///
/// # Errors
/// [`EngineError::Spawn`] when the program cannot be started.
///
/// With `confine`, the supervisor itself is confined before it executes, and so is everything
/// it starts (see [`crate::process::sandbox`]).
pub(crate) fn spawn_supervisor(
    spec: &SpawnSpec,
    confine: Option<&Confinement>,
) -> Result<Child, EngineError> {
    spawn_tied(spec, Tie::Supervisor, ruleset(spec, confine)?)
}

/// Start the agent from its supervisor: [`spawn`], but writing to this process's own stdout and
/// stderr (`detach_log` ignored). `scoped`: the agent gets a Landlock layer of scopes only
/// ([`crate::process::sandbox::scope_ruleset`]) on top of the supervisor's domain, so that nothing
/// it starts can signal the supervisor.
///
/// # Errors
/// [`EngineError::Spawn`] when the scopes cannot be built or enforced, or the program cannot be
/// started.
pub(crate) fn spawn_inheriting(spec: &SpawnSpec, scoped: bool) -> Result<Child, EngineError> {
    let rules = scoped
        .then(crate::process::sandbox::scope_ruleset)
        .transpose()
        .map_err(|source| EngineError::Spawn {
            program: spec.program.display().to_string(),
            source,
        })?;
    spawn_tied(spec, Tie::Inherit, rules)
}

/// The ruleset of `confine`, built here, in the parent: the child only enforces it.
fn ruleset(
    spec: &SpawnSpec,
    confine: Option<&Confinement>,
) -> Result<Option<RulesetCreated>, EngineError> {
    confine
        .map(Confinement::ruleset)
        .transpose()
        .map_err(|source| EngineError::Spawn {
            program: spec.program.display().to_string(),
            source,
        })
}

/// Start `spec` tied as `tie` says, enforcing `ruleset` (built by the caller) in the child.
#[allow(clippy::disallowed_methods)] // the one spawn site
fn spawn_tied(
    spec: &SpawnSpec,
    tie: Tie,
    mut ruleset: Option<RulesetCreated>,
) -> Result<Child, EngineError> {
    let failed = |source| EngineError::Spawn {
        program: spec.program.display().to_string(),
        source,
    };
    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .current_dir(&spec.cwd)
        .env_clear()
        .envs(spec.env.iter().map(|(k, v)| (k, v)))
        .stdin(if spec.stdin_piped || tie == Tie::Supervisor {
            Stdio::piped()
        } else if let Some(file) = &spec.stdin_file {
            Stdio::from(std::fs::File::open(file).map_err(failed)?)
        } else {
            Stdio::null()
        });
    match (tie, &spec.detach_log) {
        (Tie::Detached, Some(log)) => {
            let file = std::fs::OpenOptions::new()
                .append(true)
                .create(true)
                .mode(0o600)
                .open(log)
                .map_err(failed)?;
            cmd.stdout(file.try_clone().map_err(failed)?)
                .stderr(file)
                .kill_on_drop(false);
        }
        (Tie::Detached, None) => {
            cmd.stdout(Stdio::null())
                .stderr(Stdio::null())
                .kill_on_drop(false);
        }
        (Tie::Owned, _) => {
            cmd.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(true);
        }
        (Tie::Supervisor, _) => {
            cmd.stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .process_group(0)
                .kill_on_drop(false);
        }
        (Tie::Inherit, _) => {
            cmd.stdout(Stdio::inherit())
                .stderr(Stdio::inherit())
                .process_group(0)
                .kill_on_drop(true);
        }
    }
    let parent = nix::unistd::getpid();
    let rlimits = spec.rlimits;
    #[allow(unsafe_code)]
    // SAFETY: the closure runs in the forked child before exec, where only async-signal-safe
    // calls are allowed; setsid, prctl, getppid and landlock_restrict_self are plain system
    // calls (the ruleset was built before the fork), and the closure allocates nothing (errors
    // are raw errno values).
    unsafe {
        cmd.pre_exec(move || {
            in_child(tie, parent)?;
            rlimits.set_on_self()?;
            match ruleset.take() {
                Some(rules) => confine_self(rules),
                None => Ok(()),
            }
        });
    }
    cmd.spawn().map_err(failed)
}

/// Runs in the child between fork and exec (see the SAFETY note in [`spawn_tied`]).
fn in_child(tie: Tie, parent: Pid) -> std::io::Result<()> {
    match tie {
        Tie::Detached => {
            nix::unistd::setsid()?;
        }
        Tie::Supervisor => {}
        Tie::Owned | Tie::Inherit => {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL)?;
            // the parent may have died before the line above: then nobody will ever signal us
            if nix::unistd::getppid() != parent {
                return Err(std::io::Error::from_raw_os_error(nix::libc::ESRCH));
            }
        }
    }
    Ok(())
}

/// Enforce `rules` on this (child) process: `no_new_privs`, then `landlock_restrict_self`. A
/// ruleset the kernel did not enforce fails the spawn (ENOSYS): a run that was to be confined
/// never runs unconfined.
fn confine_self(rules: RulesetCreated) -> std::io::Result<()> {
    match rules.restrict_self() {
        Ok(status) if status.ruleset != landlock::RulesetStatus::NotEnforced => Ok(()),
        Ok(_) => Err(std::io::Error::from_raw_os_error(nix::libc::ENOSYS)),
        Err(_) => Err(std::io::Error::last_os_error()),
    }
}

/// Send `signal` to the process group led by `pid`; a group that is already gone is not an error.
pub(crate) fn signal_group(pid: u32, signal: Signal) {
    let Ok(raw) = i32::try_from(pid) else { return };
    // ESRCH (group gone) is the expected race; nothing else can usefully be done on failure.
    let _ = killpg(Pid::from_raw(raw), signal);
}

/// Stop a child: SIGTERM its group, wait up to `grace`, SIGKILL the group, reap it, then kill
/// anything that still carries `marker` in its environment. Returns the exit status.
pub(crate) async fn terminate(
    child: &mut RunChild,
    grace: Duration,
    marker: &str,
) -> Option<std::process::ExitStatus> {
    let status = terminate_group(child, grace).await;
    sweep::sweep(marker, Duration::from_secs(3)).await;
    status
}

/// Stop a child: SIGTERM its group, wait up to `grace`, SIGKILL the group, reap it. What left
/// the group is the caller's to end.
pub(crate) async fn terminate_group(
    child: &mut RunChild,
    grace: Duration,
) -> Option<std::process::ExitStatus> {
    match child.id() {
        None => child.wait().await.ok(),
        Some(pid) => {
            signal_group(pid, Signal::SIGTERM);
            match tokio::time::timeout(grace, child.wait()).await {
                Ok(status) => {
                    // the leader is gone; make sure the rest of its group is too
                    signal_group(pid, Signal::SIGKILL);
                    status.ok()
                }
                Err(_) => {
                    signal_group(pid, Signal::SIGKILL);
                    child.wait().await.ok()
                }
            }
        }
    }
}
