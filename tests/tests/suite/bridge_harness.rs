//! A `droid-executor serve` process for the bridge suites: started on a free port (`--port 0`;
//! its first stderr line names the address), stopped with SIGTERM, killed with its process
//! group if a test ends early.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, ChildStderr};

use super::binary::{CLI_LIMIT, command};

/// A running bridge.
pub struct ServeProc {
    child: Child,
    pub addr: SocketAddr,
    stderr: Option<BufReader<ChildStderr>>,
    /// stderr lines read so far.
    pub log: Vec<String>,
}

impl ServeProc {
    /// `droid-executor serve --port 0 ARGS` with exactly `env`, in `cwd`; returns once it
    /// listens.
    pub async fn start(args: &[&str], env: &[(OsString, OsString)], cwd: &Path) -> ServeProc {
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
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The server's pid.
    pub fn pid(&self) -> i32 {
        i32::try_from(self.child.id().expect("running")).expect("pid fits")
    }

    /// Send `sig` to the server.
    pub fn signal(&self, sig: Signal) {
        kill(Pid::from_raw(self.pid()), sig).expect("signal serve");
    }

    /// SIGTERM, then wait for the exit; its exit code and the rest of its stderr.
    pub async fn stop(mut self) -> (Option<i32>, String) {
        self.signal(Signal::SIGTERM);
        self.wait().await
    }

    /// Wait for the exit; its exit code and the whole stderr.
    pub async fn wait(&mut self) -> (Option<i32>, String) {
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
