//! What `/proc` says about a process (Linux): its memory figures, its open file descriptors, and
//! which live processes carry a given environment entry (how the soak finds what a server left
//! behind: every process of a run inherits the server's `HOME`, and droid's also carry the
//! engine's run marker).

use anyhow::{Context, Result};

/// A `/proc/<pid>/status` memory figure (`VmRSS`, `VmHWM`) in KiB.
pub(crate) fn status_kib(pid: u32, field: &str) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))
        .with_context(|| format!("read /proc/{pid}/status"))?;
    status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .with_context(|| format!("no {field} in /proc/{pid}/status"))
}

/// What each open descriptor of `pid` points at (`socket:[…]`, `pipe:[…]`, a path), sorted; its
/// length is the number of open descriptors.
pub(crate) fn fd_targets(pid: u32) -> Result<Vec<String>> {
    let dir = format!("/proc/{pid}/fd");
    let mut targets = Vec::new();
    for entry in std::fs::read_dir(&dir).with_context(|| format!("read {dir}"))? {
        let entry = entry.with_context(|| format!("read {dir}"))?;
        // a descriptor closed between the listing and the readlink is simply gone
        if let Ok(target) = std::fs::read_link(entry.path()) {
            targets.push(target.display().to_string());
        }
    }
    targets.sort();
    Ok(targets)
}

/// `pid`'s command line, its arguments joined by spaces (empty when it is gone).
pub(crate) fn cmdline(pid: u32) -> String {
    let raw = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    raw.split(|b| *b == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect::<Vec<_>>()
        .join(" ")
}

/// Whether `pid` is running: it has a `/proc` entry and is neither a zombie nor dead (a zombie
/// runs nothing, and in a container pid 1 may never reap the orphans re-parented to it).
fn is_alive(pid: u32) -> bool {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return false;
    };
    // the state follows the command name, which is in parentheses and may contain anything
    let state = stat
        .rfind(')')
        .and_then(|i| stat[i + 1..].split_whitespace().next());
    !matches!(state, None | Some("Z" | "X"))
}

/// A live process whose environment holds an entry, and whether it also carries `marker`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Found {
    /// Its pid.
    pub(crate) pid: u32,
    /// Whether its environment sets the marker variable.
    pub(crate) marked: bool,
}

/// Live processes whose environment holds exactly `entry` (`NAME=value`), sorted by pid, each
/// with whether it also sets `marker` (a variable name). Processes whose environment cannot be
/// read (other users) are skipped.
pub(crate) fn with_env(entry: &str, marker: &str) -> Vec<Found> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let marker = format!("{marker}=");
    let mut found: Vec<Found> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
            let mut vars = environ.split(|b| *b == 0);
            vars.clone()
                .any(|kv| kv == entry.as_bytes())
                .then(|| Found {
                    pid,
                    marked: vars.any(|kv| kv.starts_with(marker.as_bytes())),
                })
        })
        .filter(|f| is_alive(f.pid))
        .collect();
    found.sort_by_key(|f| f.pid);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = std::process::id();
        assert!(status_kib(me, "VmRSS").unwrap() > 0);
        assert!(status_kib(me, "VmNope").is_err());
        // stdin, stdout and stderr at least (the test harness may redirect them)
        assert!(fd_targets(me).unwrap().len() >= 3);
        assert!(is_alive(me));
        assert!(!cmdline(me).is_empty());
        assert_eq!(cmdline(u32::MAX), "");
        assert!(!is_alive(u32::MAX));
    }

    #[test]
    fn finds_processes_by_environment() {
        let me = std::process::id();
        let path = std::env::var("PATH").unwrap_or_default();
        let found = with_env(&format!("PATH={path}"), "PATH");
        assert!(
            found.contains(&Found {
                pid: me,
                marked: true
            }),
            "{found:?}"
        );
        assert!(with_env("XTASK_NO_SUCH_VARIABLE=1", "PATH").is_empty());
    }
}
