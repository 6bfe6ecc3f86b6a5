//! Looking at processes through `/proc` (Linux): is one alive, wait until it is gone, which ones
//! carry a marker variable in their environment (how the engine finds droid's `setsid`
//! grandchildren, and how a test checks that none survived).
//!
//! A zombie counts as dead: it runs nothing, and in a container pid 1 may never reap the orphans
//! re-parented to it.

use std::time::Duration;

/// How often [`wait_gone`] looks again.
const POLL_INTERVAL: Duration = Duration::from_millis(10);

/// The state letter of `/proc/<pid>/stat` (`R`, `S`, `D`, `Z`, ...), if the process exists.
pub fn state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    state_from_stat(&stat)
}

/// The state field follows the command name, which is in parentheses and may itself contain
/// spaces and parentheses, so look after the last `)`.
fn state_from_stat(stat: &str) -> Option<char> {
    let after_comm = &stat[stat.rfind(')')? + 1..];
    after_comm.split_whitespace().next()?.chars().next()
}

/// Whether `pid` is a live process: it has a `/proc` entry and is neither a zombie (`Z`) nor
/// dead (`X`).
pub fn is_alive(pid: i32) -> bool {
    pid > 0 && state(pid).is_some_and(|s| s != 'Z' && s != 'X')
}

/// Waits (polling every 10 ms) until `pid` is no longer alive; false if it still is after
/// `timeout`.
pub async fn wait_gone(pid: i32, timeout: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if !is_alive(pid) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Live processes whose environment holds exactly `var=value`, sorted; the calling process is
/// included if it matches. Processes whose environment cannot be read (other users) are skipped.
pub fn pids_with_env(var: &str, value: &str) -> Vec<i32> {
    let needle = format!("{var}={value}");
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut pids: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|environ| environ.split(|b| *b == 0).any(|kv| kv == needle.as_bytes()))
        })
        .filter(|pid| is_alive(*pid))
        .collect();
    pids.sort_unstable();
    pids
}

/// The value of `var` in `pid`'s environment, if the process exists and carries it.
pub fn env_value(pid: i32, var: &str) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let prefix = format!("{var}=");
    environ
        .split(|b| *b == 0)
        .find_map(|kv| kv.strip_prefix(prefix.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// The value of `var` in `pid`'s environment, polled for up to `timeout`: a process in the middle
/// of `execve` (a fresh `setsid sh -c`, which execs twice) shows an empty `/proc/<pid>/environ`
/// for a moment. Panics, naming the process and the variable, if it never shows up.
pub async fn wait_env_value(pid: i32, var: &str, timeout: Duration) -> String {
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(value) = env_value(pid, var) {
            return value;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "process {pid} carries no {var} (state {:?})",
            state(pid)
        );
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Waits until no process carries `var=value` (a run's or a session's marker), failing after
/// `limit` with each survivor's command line; the survivors are SIGKILLed first, so a failed
/// test leaves nothing behind. `what` names whose processes they are, for the message.
///
/// # Panics
/// When a process carrying the marker outlived `limit`.
pub async fn no_survivors_of(var: &str, value: &str, limit: Duration, what: &str) {
    let until = tokio::time::Instant::now() + limit;
    loop {
        let pids = pids_with_env(var, value);
        if pids.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= until {
            let commands: Vec<String> = pids
                .iter()
                .map(|pid| {
                    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    format!(
                        "{pid}: {}",
                        String::from_utf8_lossy(&cmdline).replace('\0', " ")
                    )
                })
                .collect();
            for pid in &pids {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(*pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
            panic!(
                "processes of {what} outlived the client by {limit:?}:\n{}",
                commands.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn state_is_read_after_the_last_parenthesis() {
        assert_eq!(state_from_stat("42 (a) b) c) S 1 42"), Some('S'));
        assert_eq!(state_from_stat("7 (sleep) Z 1 7 7"), Some('Z'));
        assert_eq!(state_from_stat("garbage"), None);
    }

    #[test]
    fn no_such_pid_is_dead() {
        assert!(!is_alive(0));
        assert!(!is_alive(-1));
        assert!(!is_alive(i32::MAX));
    }
}
