//! A run's supervisor and guardian: a small process of our own (`<supervisor program> guard
//! <marker> …`, [`EngineConfig::supervisor`], the front-end's own executable) that owns what a
//! run starts and ends it, however the run ends, the front-end being SIGKILLed included. Where
//! the front-end may make cgroups, a run's processes are in a cgroup leaf instead
//! ([`crate::process::cgroup`]) and neither process is started; [`TreeControl`] is the engine's hold
//! on droid's tree either way.
//!
//! # The supervisor: `guard <marker> -- <droid> <args…>`
//! The engine starts the supervisor in a process group of its own, with droid's environment (but
//! not the marker, which it passes on to droid), droid's working directory, and three pipes:
//! stdout and stderr (droid's, which it hands down unchanged) and stdin, the control pipe whose
//! only writer is the engine. The supervisor makes itself a child subreaper
//! (`PR_SET_CHILD_SUBREAPER`) and starts droid ([`supervise_tree`]). From then on every process
//! of droid's tree that loses its parent (`setsid` and double-forked daemons, ones started with
//! `env -i`, ones that rewrote their environment) is re-parented to the supervisor instead of
//! init, so the supervisor finds the whole tree from its own `/proc/<self>/task/*/children`,
//! recursively: no scan of the machine, a cost that depends on the run only, and no settle time
//! (a process in the tree is a child of one of its members or of the supervisor at every instant;
//! a fork racing a SIGKILL fails). When droid exits, the supervisor kills what is left of the
//! tree, reaps it, and exits with droid's own status (the same code, or killed by the same
//! signal), so for the engine the supervisor *is* droid: it reads droid's output from the
//! supervisor's pipes and droid's exit status from the supervisor's. The engine stops the run by
//! writing to the control pipe (`T`: SIGTERM droid's group; `K`: SIGKILL the whole tree), and its
//! end-of-file (the run's future dropped, or the front-end dead, SIGKILL included) kills the tree
//! at once.
//!
//! A supervisor is only as good as droid's inability to end it: a SIGKILLed supervisor leaves
//! the tree to init (or to the nearest subreaper above it), where only the marker sweep finds it,
//! and misses what dropped the marker (`setsid env -i …`). So where the run is confined and the
//! kernel has Landlock's scopes ([`crate::process::sandbox`], ABI 6), the engine starts the supervisor
//! with `--scope` and the supervisor enforces a scope-only Landlock layer on droid between `fork`
//! and `exec`: the supervisor stays in the run's domain, droid's tree is in one nested in it, and
//! a process may signal only its own domain and those nested in it, so the supervisor signals
//! droid's tree and droid's tree cannot signal (stop, kill) the supervisor. Without scopes (a
//! kernel before Linux 6.12, `sandbox = "off"`, a provider confining itself) droid can still kill
//! its supervisor: the engine then sees a supervisor dead of a signal it did not send, does not
//! trust the tree gone, and sweeps the marker, which misses a process that dropped it; a cgroup
//! leaf has no such gap.
//!
//! # The guardian: `guard <marker>`
//! Verification commands run after droid, straight under the engine; a guardian covers them: it
//! reads its stdin until end-of-file and then kills every process carrying the run's marker
//! ([`crate::process::sweep`], a scan of `/proc`, the fallback), in a session of its own with an empty
//! environment. Without a supervisor program configured (the engine used as a library) or when
//! the supervisor cannot start, droid runs straight under the engine with a guardian, and the
//! marker sweep ends its tree (it misses a process that dropped the marker).
//!
//! Key choices: a process per run rather than the front-end itself becoming the subreaper. A
//! long-lived server (`serve`, `mcp`) running several runs at once would inherit every run's
//! orphans with nothing telling whose they are (the marker is exactly what an escaped process may
//! have lost), and a front-end SIGKILLed would take its subreaper role with it, leaving the tree
//! to init. A cgroup v2 leaf (`cgroup.kill`) is preferred where the front-end may write to its
//! hierarchy (no process per run, and nothing can leave it); the subreaper works everywhere on
//! Linux 3.4+, and is the fallback where there is no cgroup to be had.
//!
//! [`EngineConfig::supervisor`]: crate::config::EngineConfig::supervisor

use std::ffi::OsString;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::sys::wait::{WaitPidFlag, waitpid};
use nix::unistd::Pid;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::process::{Child, ChildStdin};

use crate::error::EngineError;
use crate::process::cgroup::{END_BUDGET, Leaf};
use crate::process::child::RunChild;
use crate::process::sandbox::Confinement;
use crate::process::spawn::{SpawnSpec, signal_group, spawn, spawn_inheriting, spawn_supervisor};
use crate::process::sweep;

/// How long a guardian keeps killing what carries its marker.
const SWEEP_BUDGET: Duration = Duration::from_secs(10);

/// The subcommand of the supervisor program that runs a guardian.
pub const GUARD_COMMAND: &str = "guard";

/// A started guardian. Dropping it (the run ended, or its future was dropped) closes the pipe:
/// the guardian sweeps the marker and exits.
#[derive(Debug)]
pub(crate) struct Guardian {
    /// The writer of the guardian's stdin: held, never written.
    _pipe: ChildStdin,
    /// Detached: not killed on drop; tokio reaps it once it exits.
    _child: Child,
}

/// Start the guardian of the run marked `marker` with `program` (`<program> guard <marker>`).
///
/// # Errors
/// [`EngineError::Spawn`] when the program cannot be started.
pub(crate) fn start(program: &Path, marker: &str) -> Result<Guardian, EngineError> {
    let spec = SpawnSpec {
        program: program.to_path_buf(),
        args: vec![GUARD_COMMAND.into(), marker.into()],
        // holds no directory of the run busy
        cwd: "/".into(),
        env: Vec::new(),
        stdin_piped: true,
        stdin_file: None,
        detach_log: Some("/dev/null".into()),
        rlimits: crate::process::limits::Rlimits::NONE,
    };
    let mut child = spawn(&spec)?;
    let pipe = child.stdin.take().ok_or_else(|| EngineError::Spawn {
        program: program.display().to_string(),
        source: std::io::Error::other("the guardian's stdin was not piped"),
    })?;
    Ok(Guardian {
        _pipe: pipe,
        _child: child,
    })
}

/// The guardian's body (`droid-executor guard <marker>`): wait for end-of-file on `owner` (the
/// owner's pipe; anything written is discarded), then kill every process marked `marker`.
/// Returns how many were still alive at the end (0 on success).
///
/// # Errors
/// [`EngineError::InvalidMarker`] for an empty marker or one holding `=` or a NUL (it would
/// match other runs' processes).
pub async fn guard<R: AsyncRead + Unpin>(marker: &str, mut owner: R) -> Result<usize, EngineError> {
    if marker.is_empty() || marker.contains(['=', '\0']) {
        return Err(EngineError::InvalidMarker(marker.to_owned()));
    }
    let mut buf = [0u8; 512];
    loop {
        match owner.read(&mut buf).await {
            // end-of-file, or the pipe broke: the owner is gone either way
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
    }
    Ok(sweep::sweep(marker, SWEEP_BUDGET).await.len())
}

/// What the engine writes to a supervisor's control pipe: SIGTERM droid's process group.
const CONTROL_TERM: u8 = b'T';
/// What the engine writes to a supervisor's control pipe: SIGKILL the whole tree.
const CONTROL_KILL: u8 = b'K';
/// How long a supervisor keeps killing its tree before it gives up (a process stuck in
/// uninterruptible sleep cannot die sooner).
const TREE_BUDGET: Duration = Duration::from_secs(10);
/// The exit code of a supervisor that could not start droid (the shell's "cannot execute").
pub const SUPERVISOR_SPAWN_FAILED: u8 = 126;
/// The supervisor's option that puts droid in a scope-only Landlock layer of its own (see the
/// module docs).
pub const SCOPE_FLAG: &str = "--scope";

/// The engine's hold on droid's whole tree: either the control pipe of droid's supervisor (the
/// child is the supervisor; dropping the pipe makes it kill the tree at once and exit), or the
/// cgroup leaf droid was started in ([`crate::process::cgroup`]; the child is droid).
#[derive(Debug)]
pub(crate) enum TreeControl {
    /// The supervisor's control pipe.
    Supervisor(std::fs::File),
    /// droid's leaf, and droid's process group.
    Cgroup {
        /// The leaf.
        leaf: Leaf,
        /// droid's pid, the leader of its process group.
        group: Option<u32>,
    },
}

impl TreeControl {
    /// droid's process group gets SIGTERM (the start of a graceful stop).
    pub(crate) fn terminate(&self) {
        match self {
            // a supervisor already gone has nothing left to stop
            Self::Supervisor(pipe) => {
                let _ = (&*pipe).write_all(&[CONTROL_TERM]);
            }
            Self::Cgroup { group, .. } => {
                if let Some(g) = group {
                    signal_group(*g, Signal::SIGTERM);
                }
            }
        }
    }

    /// The whole tree gets SIGKILL.
    pub(crate) fn kill(&self) {
        match self {
            Self::Supervisor(pipe) => {
                let _ = (&*pipe).write_all(&[CONTROL_KILL]);
            }
            Self::Cgroup { leaf, .. } => leaf.kill(),
        }
    }

    /// Now that the child exited (with `status`, the engine having `asked` it to stop or not):
    /// is droid's whole tree proven gone? A supervisor exits only once the tree is gone, but one
    /// killed by a signal it was not asked for may have been killed itself (droid's own signal
    /// death looks the same). A leaf is killed and must be found empty within [`END_BUDGET`].
    pub(crate) async fn ended(&self, status: Option<ExitStatus>, asked: bool) -> bool {
        use std::os::unix::process::ExitStatusExt as _;
        match self {
            Self::Supervisor(_) => asked || status.is_some_and(|s| s.signal().is_none()),
            Self::Cgroup { leaf, .. } => leaf.end(END_BUDGET).await,
        }
    }
}

/// Start `program args` (droid) under a supervisor run by `supervisor`
/// (`<supervisor> guard <marker> -- <program> <args…>`), in `cwd`, with `env` (the marker is
/// added by the supervisor, and kept out of its own environment), the supervisor and so droid's
/// whole tree confined by `confine` ([`crate::process::sandbox`]; where it is scoped, droid's side
/// gets a scope-only layer of its own, [`SCOPE_FLAG`]). The child returned is the supervisor:
/// droid's output on its stdout and stderr, droid's status as its own.
///
/// # Errors
/// [`EngineError::Spawn`] when the supervisor cannot be started.
pub(crate) fn start_supervised(
    supervisor: &Path,
    marker: &str,
    droid: &SpawnSpec,
    confine: Option<&Confinement>,
) -> Result<(Child, TreeControl), EngineError> {
    let mut args: Vec<OsString> = vec![GUARD_COMMAND.into(), marker.into()];
    if confine.is_some_and(Confinement::scoped) {
        args.push(SCOPE_FLAG.into());
    }
    if let Some(file) = &droid.stdin_file {
        args.extend(["--stdin".into(), file.clone().into_os_string()]);
    }
    args.push("--".into());
    args.push(droid.program.clone().into_os_string());
    args.extend(droid.args.iter().cloned());
    let spec = SpawnSpec {
        program: supervisor.to_path_buf(),
        args,
        cwd: droid.cwd.clone(),
        env: droid
            .env
            .iter()
            .filter(|(k, _)| k != sweep::MARKER_VAR)
            .cloned()
            .collect(),
        stdin_piped: true,
        stdin_file: None,
        detach_log: None,
        rlimits: droid.rlimits,
    };
    let mut child = spawn_supervisor(&spec, confine)?;
    let failed = |source| EngineError::Spawn {
        program: supervisor.display().to_string(),
        source,
    };
    let pipe = child
        .stdin
        .take()
        .ok_or_else(|| {
            failed(std::io::Error::other(
                "the supervisor's stdin was not piped",
            ))
        })?
        .into_owned_fd()
        .map_err(failed)?;
    Ok((child, TreeControl::Supervisor(std::fs::File::from(pipe))))
}

/// The supervisor's stdin as its control pipe, read without a blocking thread: a read pending
/// on a blocking thread would hold the process's exit (the runtime waits for that thread) long
/// after droid's tree is gone, and the engine waits for that exit.
///
/// # Errors
/// When stdin cannot be duplicated or is not a pipe.
pub fn stdin_control() -> std::io::Result<tokio::net::unix::pipe::Receiver> {
    use std::os::fd::AsFd as _;
    let fd = std::io::stdin().as_fd().try_clone_to_owned()?;
    tokio::net::unix::pipe::Receiver::from_owned_fd(fd)
}

/// How long a supervisor asked to SIGKILL its tree may take before the engine kills the
/// supervisor itself and falls back to the marker sweep.
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(5);

/// Stop a run whose tree is `tree` (`child` is droid's supervisor, or droid in its leaf):
/// SIGTERM droid's group, wait up to `grace`, SIGKILL the tree, wait for the child to exit (a
/// supervisor does once the tree is gone; a leaf must then be found empty). A child that does not
/// exit then is SIGKILLed, and what is left without proof is found by the marker sweep. Returns
/// the exit status (droid's, as the supervisor reports it).
pub(crate) async fn stop(
    child: &mut RunChild,
    tree: &TreeControl,
    grace: Duration,
    marker: &str,
) -> Option<ExitStatus> {
    tree.terminate();
    let waited = match tokio::time::timeout(grace, child.wait()).await {
        Ok(status) => Some(status.ok()),
        Err(_) => {
            tree.kill();
            tokio::time::timeout(KILL_WAIT, child.wait())
                .await
                .ok()
                .map(Result::ok)
        }
    };
    let status = match waited {
        Some(status) if tree.ended(status, true).await => return status,
        Some(status) => status,
        None => {
            if let Some(pid) = child.id() {
                signal_group(pid, Signal::SIGKILL);
            }
            child.wait().await.ok()
        }
    };
    sweep::sweep(marker, Duration::from_secs(3)).await;
    status
}

/// The supervisor's body (`droid-executor guard <marker> [--scope] [--stdin FILE] -- <program>
/// <args…>`): become a child subreaper, start `program` with this process's environment plus the
/// marker, in this process's directory, its stdin `stdin_file` (else `/dev/null`), writing to
/// this process's stdout and stderr, with `scoped` in a scope-only Landlock layer of its own
/// (nothing of its tree can signal this process); obey `control` (`T`:
/// SIGTERM droid's group; `K`: SIGKILL the tree; end-of-file kills the tree); when `program` exits, kill and reap whatever
/// is left of its tree. Returns `program`'s exit status and how many processes of the tree
/// could not be ended.
///
/// # Errors
/// [`EngineError::InvalidMarker`] as for [`guard`]; [`EngineError::Spawn`] when `program`
/// cannot be started (or, `scoped`, not in its own layer) or this process cannot become a
/// subreaper.
pub async fn supervise_tree<R: AsyncRead + Unpin>(
    marker: &str,
    program: PathBuf,
    args: Vec<OsString>,
    stdin_file: Option<PathBuf>,
    scoped: bool,
    mut control: R,
) -> Result<(ExitStatus, usize), EngineError> {
    if marker.is_empty() || marker.contains(['=', '\0']) {
        return Err(EngineError::InvalidMarker(marker.to_owned()));
    }
    let failed = |source| EngineError::Spawn {
        program: program.display().to_string(),
        source,
    };
    nix::sys::prctl::set_child_subreaper(true).map_err(|e| failed(e.into()))?;
    let mut env: Vec<(OsString, OsString)> = std::env::vars_os()
        .filter(|(k, _)| k != sweep::MARKER_VAR)
        .collect();
    env.push((sweep::MARKER_VAR.into(), marker.into()));
    let spec = SpawnSpec {
        program: program.clone(),
        args,
        cwd: std::env::current_dir().map_err(failed)?,
        env,
        stdin_piped: false,
        stdin_file,
        detach_log: None,
        rlimits: crate::process::limits::Rlimits::NONE,
    };
    let mut child = spawn_inheriting(&spec, scoped)?;
    let group = child.id();
    let mut buf = [0u8; 64];
    let mut owner_gone = false;
    let status = loop {
        tokio::select! {
            status = child.wait() => break status.map_err(failed)?,
            read = control.read(&mut buf), if !owner_gone => match read {
                Ok(0) | Err(_) => {
                    // the engine let go, or died: nothing of the run may outlive it
                    owner_gone = true;
                    kill_tree(group);
                }
                Ok(n) => {
                    if buf[..n].contains(&CONTROL_KILL) {
                        kill_tree(group);
                    } else if buf[..n].contains(&CONTROL_TERM) && let Some(g) = group {
                        signal_group(g, Signal::SIGTERM);
                    }
                }
            },
        }
    };
    let left = end_tree(group).await;
    Ok((status, left))
}

/// End this process the way `status` says a program ended: killed by the same signal (this
/// process handles none of the signals that end a program), else the exit code to exit with
/// (`128 + signal` should the signal not end it).
pub fn exit_as(status: ExitStatus) -> u8 {
    use std::os::unix::process::ExitStatusExt as _;
    if let Some(signal) = status.signal() {
        if let Ok(sig) = Signal::try_from(signal) {
            let _ = kill(nix::unistd::getpid(), sig);
        }
        return u8::try_from(128 + signal).unwrap_or(u8::MAX);
    }
    status
        .code()
        .and_then(|c| u8::try_from(c).ok())
        .unwrap_or(u8::MAX)
}

/// SIGKILL droid's process group and every descendant of this process.
fn kill_tree(group: Option<u32>) {
    if let Some(g) = group {
        signal_group(g, Signal::SIGKILL);
    }
    for pid in descendants() {
        let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

/// Kill every descendant of this process and reap the ones re-parented to it, until it has no
/// child left or [`TREE_BUDGET`] passes. Returns how many descendants were still there.
async fn end_tree(group: Option<u32>) -> usize {
    let until = Instant::now() + TREE_BUDGET;
    loop {
        kill_tree(group);
        let children = children_of(std::process::id());
        if children.is_empty() {
            return 0;
        }
        let mut reaped = false;
        for pid in &children {
            // only our own children, each by pid: never `waitpid(-1)`, which could take a status
            // tokio waits for
            if let Ok(status) = waitpid(Pid::from_raw(*pid), Some(WaitPidFlag::WNOHANG)) {
                reaped |= status != nix::sys::wait::WaitStatus::StillAlive;
            }
        }
        if Instant::now() >= until {
            return descendants().len();
        }
        if !reaped {
            // SIGKILL takes effect when the process next runs; give it the CPU
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// The children of `pid`: the union of `/proc/<pid>/task/*/children` (each thread's).
pub(crate) fn children_of(pid: u32) -> Vec<i32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for task in tasks.flatten() {
        if let Ok(text) = std::fs::read_to_string(task.path().join("children")) {
            out.extend(
                text.split_whitespace()
                    .filter_map(|p| p.parse::<i32>().ok()),
            );
        }
    }
    out
}

/// Every descendant of this process, parents before their children.
fn descendants() -> Vec<i32> {
    let mut out = children_of(std::process::id());
    let mut i = 0;
    while i < out.len() {
        if let Ok(pid) = u32::try_from(out[i]) {
            out.extend(children_of(pid));
        }
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_marker_that_would_match_other_runs_is_refused() {
        for marker in ["", "a=b", "a\0b"] {
            let err = guard(marker, tokio::io::empty()).await.unwrap_err();
            assert!(matches!(err, EngineError::InvalidMarker(_)), "{marker:?}");
        }
    }

    #[tokio::test]
    async fn the_owner_s_end_of_file_sweeps_the_marker() {
        let marker = format!("guard-test-{}", std::process::id());
        let spec = SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "setsid sleep 300 & wait".into()],
            cwd: std::env::temp_dir(),
            env: vec![
                (sweep::MARKER_VAR.into(), marker.clone().into()),
                ("PATH".into(), "/usr/bin:/bin".into()),
            ],
            stdin_piped: false,
            stdin_file: None,
            detach_log: None,
            rlimits: crate::process::limits::Rlimits::NONE,
        };
        let _sh = spawn(&spec).unwrap();
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while sweep::marked_pids(&marker).len() < 2 {
            assert!(
                std::time::Instant::now() < until,
                "sh and sleep never came up"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (writer, reader) = tokio::io::duplex(64);
        let guarding = tokio::spawn({
            let marker = marker.clone();
            async move { guard(&marker, reader).await }
        });
        drop(writer);
        let left = tokio::time::timeout(Duration::from_secs(20), guarding)
            .await
            .unwrap()
            .unwrap()
            .unwrap();
        assert_eq!(left, 0);
        assert_eq!(sweep::marked_pids(&marker), Vec::<i32>::new());
    }
}
