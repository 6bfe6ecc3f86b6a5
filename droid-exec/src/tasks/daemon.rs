//! A detached daemon (the HTTP bridge of `droid-executor bridge start`): started in its own
//! session with stdout and stderr appended to a log file, found again through a pid file, and
//! alive exactly as long as it holds its lock file. Liveness is the lock, never `kill(pid, 0)`: a
//! pid file outlives its process and pids are reused.
//!
//! Files, for a daemon named `N` in directory `D` (0700): `D/N.lock`, `D/N.pid`, `D/N.log`
//! (0600).

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::process::Child;

use crate::error::EngineError;
use crate::lock::{Held, is_held, try_exclusive};
use crate::process::spawn::{SpawnSpec, spawn};
use crate::state_file::write_atomic;

/// What is known of a daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DaemonState {
    /// It holds its lock; its pid when the pid file names one.
    Running(Option<u32>),
    /// Nothing holds the lock.
    Stopped,
}

/// How a stop went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Stopped {
    /// It was not running.
    NotRunning,
    /// It exited after SIGTERM.
    Terminated(u32),
    /// It outlived the grace and was killed.
    Killed(u32),
}

/// The lock a running daemon holds for its whole life; dropping it removes the pid file.
#[derive(Debug)]
pub struct DaemonGuard {
    pid_path: PathBuf,
    _held: Held,
}

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pid_path);
    }
}

/// A daemon [`Daemon::start`] just started. Dropping it leaves the daemon running (it is not
/// killed on drop; tokio reaps it in the background if it exits while this process still runs).
#[derive(Debug)]
pub struct Started {
    pid: u32,
    child: Child,
    log: PathBuf,
    log_from: u64,
}

impl Started {
    /// Its pid.
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Its exit status once it has exited; `None` while it runs.
    pub fn exited(&mut self) -> Option<ExitStatus> {
        self.child.try_wait().ok().flatten()
    }

    /// Wait until it exits (for a `select!` against its coming up).
    pub async fn wait_exit(&mut self) -> Option<ExitStatus> {
        self.child.wait().await.ok()
    }

    /// What it has written to the log (the log is appended to by every start: only this
    /// start's lines), lossily decoded, at most the last 64 KiB.
    pub fn log_lines(&self) -> String {
        use std::io::{Read as _, Seek as _, SeekFrom};
        const MOST: u64 = 64 * 1024;
        let Ok(mut file) = std::fs::File::open(&self.log) else {
            return String::new();
        };
        let len = file.metadata().map_or(0, |m| m.len());
        let from = self.log_from.max(len.saturating_sub(MOST)).min(len);
        let mut bytes = Vec::new();
        if file.seek(SeekFrom::Start(from)).is_err()
            || file.take(MOST).read_to_end(&mut bytes).is_err()
        {
            return String::new();
        }
        String::from_utf8_lossy(&bytes).into_owned()
    }
}

/// One daemon's files.
#[derive(Debug, Clone)]
pub struct Daemon {
    dir: PathBuf,
    name: String,
}

impl Daemon {
    /// The daemon `name` with its files in `dir`.
    pub fn new(dir: &Path, name: &str) -> Self {
        Self {
            dir: dir.to_path_buf(),
            name: name.to_owned(),
        }
    }

    fn file(&self, ext: &str) -> PathBuf {
        self.dir.join(format!("{}.{ext}", self.name))
    }

    /// The pid file.
    pub fn pid_path(&self) -> PathBuf {
        self.file("pid")
    }

    /// The log file.
    pub fn log_path(&self) -> PathBuf {
        self.file("log")
    }

    fn lock_path(&self) -> PathBuf {
        self.file("lock")
    }

    fn ensure_dir(&self) -> Result<(), EngineError> {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.dir)
            .map_err(EngineError::io("create", &self.dir))
    }

    fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.pid_path())
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    /// Whether it runs.
    ///
    /// # Errors
    /// [`EngineError::Io`] when the lock cannot be tested.
    pub fn state(&self) -> Result<DaemonState, EngineError> {
        if is_held(&self.lock_path())? {
            Ok(DaemonState::Running(self.pid()))
        } else {
            Ok(DaemonState::Stopped)
        }
    }

    /// Called by the daemon itself: take the lock and write the pid file. `None` when another
    /// instance holds the lock.
    ///
    /// # Errors
    /// [`EngineError::Io`] when the files cannot be made.
    pub fn claim(&self) -> Result<Option<DaemonGuard>, EngineError> {
        self.ensure_dir()?;
        let Some(held) = try_exclusive(&self.lock_path())? else {
            return Ok(None);
        };
        let pid_path = self.pid_path();
        write_atomic(&pid_path, format!("{}\n", std::process::id()).as_bytes())?;
        Ok(Some(DaemonGuard {
            pid_path,
            _held: held,
        }))
    }

    /// Start `program args` detached (new session, output appended to the log file) with the
    /// complete environment `env`, in `cwd`. Whether it came up is the caller's to check (its
    /// lock, or its own health check); the handle returned tells at once when it exited instead
    /// (a daemon that refuses its configuration exits at once, and waiting out a start-up
    /// timeout for it would only hide why), and where its own lines begin in the log.
    ///
    /// # Errors
    /// [`EngineError::Spawn`] when it cannot be started, [`EngineError::Io`] when the
    /// directory cannot be made.
    pub fn start(
        &self,
        program: &Path,
        args: Vec<OsString>,
        env: Vec<(OsString, OsString)>,
        cwd: &Path,
    ) -> Result<Started, EngineError> {
        self.ensure_dir()?;
        let log = self.log_path();
        let log_from = std::fs::metadata(&log).map_or(0, |m| m.len());
        let spec = SpawnSpec {
            program: program.to_path_buf(),
            args,
            cwd: cwd.to_path_buf(),
            env,
            stdin_piped: false,
            stdin_file: None,
            detach_log: Some(log.clone()),
            rlimits: crate::process::limits::Rlimits::NONE,
        };
        let child = spawn(&spec)?;
        Ok(Started {
            pid: child.id().unwrap_or(0),
            child,
            log,
            log_from,
        })
    }

    /// Wait up to `timeout` for the daemon to hold its lock.
    ///
    /// # Errors
    /// As [`Daemon::state`].
    pub async fn wait_running(&self, timeout: Duration) -> Result<bool, EngineError> {
        let until = tokio::time::Instant::now() + timeout;
        loop {
            if matches!(self.state()?, DaemonState::Running(_)) {
                return Ok(true);
            }
            if tokio::time::Instant::now() >= until {
                return Ok(false);
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// SIGTERM, then SIGKILL after `grace`; returns once the lock is free.
    ///
    /// # Errors
    /// As [`Daemon::state`], and [`EngineError::Corrupt`] when the daemon runs but its pid
    /// file names no process to signal.
    pub async fn stop(&self, grace: Duration) -> Result<Stopped, EngineError> {
        let pid = match self.state()? {
            DaemonState::Stopped => return Ok(Stopped::NotRunning),
            DaemonState::Running(Some(pid)) if pid > 1 => pid,
            DaemonState::Running(_) => {
                return Err(EngineError::Corrupt {
                    path: self.pid_path(),
                    message: "the daemon holds its lock but its pid file names no process".into(),
                });
            }
        };
        let target = Pid::from_raw(i32::try_from(pid).unwrap_or(i32::MAX));
        let _ = kill(target, Signal::SIGTERM);
        let until = tokio::time::Instant::now() + grace;
        while tokio::time::Instant::now() < until {
            if self.state()? == DaemonState::Stopped {
                return Ok(Stopped::Terminated(pid));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let _ = kill(target, Signal::SIGKILL);
        let until = tokio::time::Instant::now() + Duration::from_secs(5);
        while self.state()? != DaemonState::Stopped && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Ok(Stopped::Killed(pid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn claim_is_exclusive_and_the_pid_file_goes_with_the_guard() {
        let dir = std::env::temp_dir().join(format!("dx-daemon-{}", std::process::id()));
        let d = Daemon::new(&dir, "bridge-1");
        assert_eq!(d.state().unwrap(), DaemonState::Stopped);
        let g = d.claim().unwrap().expect("free");
        assert_eq!(
            d.state().unwrap(),
            DaemonState::Running(Some(std::process::id()))
        );
        assert!(d.claim().unwrap().is_none(), "a second instance is refused");
        drop(g);
        assert_eq!(d.state().unwrap(), DaemonState::Stopped);
        assert!(!d.pid_path().exists());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[tokio::test]
    async fn a_start_that_exits_at_once_is_seen_with_its_own_log_lines() {
        let dir = std::env::temp_dir().join(format!("dx-daemon-exit-{}", std::process::id()));
        let d = Daemon::new(&dir, "bridge-2");
        d.ensure_dir().unwrap();
        std::fs::write(d.log_path(), "an earlier start\n").unwrap();
        let env = vec![(OsString::from("PATH"), OsString::from("/usr/bin:/bin"))];
        let args = vec!["-c".into(), "echo refused >&2; exit 2".into()];
        let mut started = d.start(Path::new("/bin/sh"), args, env, &dir).unwrap();
        assert!(started.pid() > 1);
        let status = started.wait_exit().await.expect("an exit status");
        assert_eq!(status.code(), Some(2));
        assert_eq!(started.exited().map(|s| s.code()), Some(Some(2)));
        assert_eq!(started.log_lines(), "refused\n");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
