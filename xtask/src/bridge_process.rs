//! An HTTP bridge process started by xtask (`droid-executor serve --port 0`, or the seed's
//! Python bridge): its stderr goes to a log file, its address is read from the `listening on
//! http://ADDR` line there, and it is killed (by its pid) when dropped. Shared by
//! `bench bridge` and `soak`.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bridge_http::client::Client;

use crate::procfs;

/// Time a bridge gets to print its listening line.
const START_LIMIT: Duration = Duration::from_secs(20);

/// A bridge process, its stderr in a log file; killed (by its pid) when dropped.
pub(crate) struct Server {
    /// What the reports call it.
    pub(crate) name: &'static str,
    child: Child,
    /// A client of its address.
    pub(crate) client: Client,
    /// Where it listens.
    pub(crate) addr: SocketAddr,
    /// Its stderr.
    pub(crate) log: PathBuf,
}

impl Server {
    /// Start `cmd` and wait for its `listening on http://ADDR` line.
    pub(crate) fn start(name: &'static str, cmd: &mut Command, log: &Path) -> Result<Self> {
        let file = std::fs::File::create(log)?;
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(file)
            .spawn()
            .with_context(|| format!("could not start {name}"))?;
        let until = Instant::now() + START_LIMIT;
        let addr = loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            if let Some(addr) = listening(&text) {
                break addr;
            }
            if let Some(status) = child.try_wait()? {
                bail!("{name} exited ({status}) before listening:\n{text}");
            }
            if Instant::now() > until {
                let _ = child.kill();
                let _ = child.wait();
                bail!("{name} did not listen within {START_LIMIT:?}:\n{text}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        Ok(Self {
            name,
            child,
            client: Client::new(addr, None),
            addr,
            log: log.to_path_buf(),
        })
    }

    /// Its process id.
    pub(crate) fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A `/proc/<pid>/status` memory figure (`VmRSS`, `VmHWM`) in KiB.
    pub(crate) fn memory(&self, field: &str) -> Result<u64> {
        procfs::status_kib(self.pid(), field).with_context(|| format!("memory of {}", self.name))
    }

    /// The last `n` lines of its log.
    pub(crate) fn log_tail(&self, n: usize) -> String {
        let log = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = log.lines().rev().take(n).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

/// The address in a `… listening on http://ADDR …` line of `log`.
fn listening(log: &str) -> Option<SocketAddr> {
    let rest = log.split("listening on http://").nth(1)?;
    rest.split_whitespace().next()?.parse().ok()
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_line() {
        let log = "warning: x\ndroid-executor serve: listening on http://127.0.0.1:4000 (pid 7)\n";
        assert_eq!(listening(log), "127.0.0.1:4000".parse().ok());
        assert_eq!(
            listening("droid bridge: listening on http://127.0.0.1:9\n"),
            "127.0.0.1:9".parse().ok()
        );
        assert_eq!(listening("starting\n"), None);
    }
}
