//! Finding and killing every process a run started, wherever it went.
//!
//! droid runs each Execute command under a `setsid` supervisor, so its children leave droid's
//! process group, and after droid is SIGKILLed they are re-parented away from us (and
//! `fireAndForget` ones survive for good). A process-group kill cannot reach them. What they all
//! keep is droid's environment: every run sets `DROID_EXECUTOR_RUN_ID=<unique id>` in droid's
//! environment, and the sweep kills every live process whose `/proc/<pid>/environ` carries it.
//! Zombies have no environment left and are already dead.
//!
//! A sweep reads every process's environment on the machine, and misses a process that dropped
//! the marker (`env -i`, an environment rewritten by `exec`): droid's tree is owned by the run's
//! supervisor instead ([`crate::process::guard`]), and the sweep is the fallback where there is none, and
//! how verification commands are ended.

use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// The variable that marks a run's processes.
pub const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";

/// Pids of live processes (other than this one) whose environment has `MARKER_VAR=marker`, or a
/// sub-marker of it, `MARKER_VAR=marker-…` (verification commands are marked
/// `<marker>-verify-<i>`), so a sweep of a run also reaches what its verification started.
pub fn marked_pids(marker: &str) -> Vec<i32> {
    pids_marked(marker, Reach::WithSubMarkers)
}

/// Which processes a sweep of a marker reaches.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Those marked `marker` or `marker-…` (a run and its verification commands).
    WithSubMarkers,
    /// Only those marked exactly `marker`: droid's tree, not the verification commands that
    /// may be running beside its teardown ([`crate::process::reap`]).
    Exact,
}

fn pids_marked(marker: &str, reach: Reach) -> Vec<i32> {
    let needle = format!("{MARKER_VAR}={marker}");
    let sub = format!("{needle}-");
    let me = std::process::id();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if pid == me {
            continue;
        }
        let Ok(environ) = std::fs::read(entry.path().join("environ")) else {
            continue;
        };
        if environ.split(|b| *b == 0).any(|kv| {
            kv == needle.as_bytes()
                || (reach == Reach::WithSubMarkers && kv.starts_with(sub.as_bytes()))
        }) && let Ok(pid) = i32::try_from(pid)
        {
            out.push(pid);
        }
    }
    out
}

/// Time between the two empty scans that end a sweep (an exec transition takes well under 1 ms).
const SETTLE: Duration = Duration::from_millis(10);

/// SIGKILL every process marked with `marker` until none is left or `budget` runs out. Returns
/// the pids still alive at the end (empty on success).
///
/// A process in the middle of `execve` shows an empty `/proc/<pid>/environ` for a moment, so one
/// empty scan is not proof: the sweep ends only after two empty scans [`SETTLE`] apart.
pub async fn sweep(marker: &str, budget: Duration) -> Vec<i32> {
    sweep_reaching(marker, Reach::WithSubMarkers, budget).await
}

/// [`sweep`] reaching only what `reach` says.
pub(crate) async fn sweep_reaching(marker: &str, reach: Reach, budget: Duration) -> Vec<i32> {
    let until = Instant::now() + budget;
    let mut quiet = false;
    loop {
        let pids = pids_marked(marker, reach);
        if pids.is_empty() {
            if quiet || Instant::now() >= until {
                return pids;
            }
            quiet = true;
            tokio::time::sleep(SETTLE).await;
            continue;
        }
        quiet = false;
        for pid in &pids {
            let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            // reap it if it was re-parented to us; ECHILD otherwise, which is fine
            let _ = nix::sys::wait::waitpid(
                Pid::from_raw(*pid),
                Some(nix::sys::wait::WaitPidFlag::WNOHANG),
            );
        }
        if Instant::now() >= until {
            return pids_marked(marker, reach);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::process::spawn::{SpawnSpec, spawn};

    /// A `sleep 300` marked `marker`.
    fn marked_sleep(marker: &str) -> tokio::process::Child {
        spawn(&SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), "exec sleep 300".into()],
            cwd: std::env::temp_dir(),
            env: vec![
                (MARKER_VAR.into(), marker.into()),
                ("PATH".into(), "/usr/bin:/bin".into()),
            ],
            stdin_piped: false,
            stdin_file: None,
            detach_log: None,
            rlimits: crate::process::limits::Rlimits::NONE,
        })
        .unwrap()
    }

    #[tokio::test]
    async fn an_exact_sweep_leaves_the_sub_markers_alone() {
        let run = format!("sweep-test-{}", std::process::id());
        let verify = format!("{run}-verify-0");
        let _droid = marked_sleep(&run);
        let _check = marked_sleep(&verify);
        let until = std::time::Instant::now() + Duration::from_secs(10);
        while marked_pids(&run).len() < 2 {
            assert!(
                std::time::Instant::now() < until,
                "the sleeps never came up"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let left = sweep_reaching(&run, Reach::Exact, Duration::from_secs(10)).await;
        assert_eq!(left, Vec::<i32>::new());
        assert_eq!(pids_marked(&run, Reach::Exact), Vec::<i32>::new());
        assert_eq!(
            marked_pids(&verify).len(),
            1,
            "the sub-marked process was swept"
        );
        assert_eq!(
            sweep(&run, Duration::from_secs(10)).await,
            Vec::<i32>::new()
        );
        assert_eq!(marked_pids(&run), Vec::<i32>::new());
    }
}
