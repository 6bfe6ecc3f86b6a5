//! A `droid-executor serve` process for the bridge suites: started on a free port (`--port 0`;
//! its first stderr line names the address), stopped with SIGTERM, killed with its process
//! group if a test ends early. And [`DaemonGuard`], which kills a daemon a test started with
//! `bridge start` (or `run --via bridge`) if the test ends before stopping it.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Mutex;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tests::procs::is_alive;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr};

use super::binary::{CLI_LIMIT, command};

/// A running bridge.
pub(super) struct ServeProc {
    child: Child,
    pub addr: SocketAddr,
    stderr: Option<BufReader<ChildStderr>>,
    /// stderr lines read so far.
    pub log: Vec<String>,
}

impl ServeProc {
    /// `droid-executor serve --port 0 ARGS` with exactly `env`, in `cwd`; returns once it
    /// listens.
    pub(super) async fn start(
        args: &[&str],
        env: &[(OsString, OsString)],
        cwd: &Path,
    ) -> ServeProc {
        let mut all: Vec<&str> = vec!["serve", "--port", "0"];
        all.extend_from_slice(args);
        let mut cmd = command(&all, env, cwd);
        cmd.stdout(Stdio::null()).process_group(0);
        let mut child = cmd.spawn().expect("spawn droid-executor serve");
        let mut stderr = BufReader::new(child.stderr.take().expect("stderr piped"));
        let mut log = Vec::new();
        let addr = tokio::time::timeout(Duration::from_secs(20), async {
            loop {
                let mut line = String::new();
                let n = stderr.read_line(&mut line).await.expect("read stderr");
                assert!(n > 0, "serve exited before listening:\n{}", log.join(""));
                log.push(line.clone());
                if let Some(rest) = line.split("listening on http://").nth(1) {
                    let a = rest.split_whitespace().next().unwrap_or_default();
                    return a
                        .parse::<SocketAddr>()
                        .expect("address in the listening line");
                }
            }
        })
        .await
        .expect("serve did not listen within 20 s");
        ServeProc {
            child,
            addr,
            stderr: Some(stderr),
            log,
        }
    }

    /// `http://127.0.0.1:PORT` + `path`.
    pub(super) fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The server's pid.
    pub(super) fn pid(&self) -> i32 {
        i32::try_from(self.child.id().expect("running")).expect("pid fits")
    }

    /// Send `sig` to the server.
    pub(super) fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.pid()), sig).expect("signal serve");
    }

    /// SIGTERM, then wait for the exit; its exit code and the rest of its stderr.
    pub(super) async fn stop(mut self) -> (Option<i32>, String) {
        self.signal(Signal::SIGTERM);
        self.wait().await
    }

    /// Wait for the exit; its exit code and the whole stderr.
    pub(super) async fn wait(&mut self) -> (Option<i32>, String) {
        let mut rest = String::new();
        if let Some(mut s) = self.stderr.take() {
            let _ = tokio::time::timeout(CLI_LIMIT, async {
                let mut line = String::new();
                while s.read_line(&mut line).await.unwrap_or(0) > 0 {
                    rest.push_str(&line);
                    line.clear();
                }
            })
            .await;
        }
        let status = tokio::time::timeout(CLI_LIMIT, self.child.wait())
            .await
            .expect("serve did not exit")
            .expect("wait serve");
        (status.code(), self.log.concat() + &rest)
    }
}

impl Drop for ServeProc {
    fn drop(&mut self) {
        if let Some(pid) = self.child.id() {
            let _ = kill(Pid::from_raw(-(pid as i32)), Signal::SIGKILL);
        }
    }
}

/// The bridge daemon on one port of one task store. Dropping it SIGKILLs the daemon (its
/// process group: it leads its own session) named by the pid file or seen by the test, when that
/// pid still runs `droid-executor serve`; a passing test has stopped it already.
pub(super) struct DaemonGuard {
    pid_file: PathBuf,
    seen: Mutex<Vec<i32>>,
}

impl DaemonGuard {
    /// The daemon of `port` whose files are in `store`.
    pub(super) fn new(store: &Path, port: u16) -> DaemonGuard {
        DaemonGuard {
            pid_file: store.join(format!("bridge-{port}.pid")),
            seen: Mutex::new(Vec::new()),
        }
    }

    /// The pid file.
    pub(super) fn pid_file(&self) -> &Path {
        &self.pid_file
    }

    /// The pid the pid file holds.
    pub(super) fn pid(&self) -> Option<i32> {
        std::fs::read_to_string(&self.pid_file)
            .ok()
            .and_then(|s| s.trim().parse().ok())
    }

    /// Remember `pid` for the clean-up (a daemon whose pid file is not written yet).
    pub(super) fn saw(&self, pid: i32) {
        self.seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(pid);
    }
}

/// Whether `pid` runs `droid-executor serve` (a reused pid is left alone).
pub(super) fn runs_serve(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
        let args: Vec<&[u8]> = c.split(|b| *b == 0).collect();
        args.first().is_some_and(|a| a.ends_with(b"droid-executor"))
            && args.contains(&&b"serve"[..])
    })
}

impl Drop for DaemonGuard {
    fn drop(&mut self) {
        let mut pids = self
            .seen
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone();
        pids.extend(self.pid());
        for pid in pids {
            if pid > 1 && is_alive(pid) && runs_serve(pid) {
                let _ = kill(Pid::from_raw(-pid), Signal::SIGKILL);
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}
