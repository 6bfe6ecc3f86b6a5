//! Whether what listens on a bridge port of this machine is provably our own bridge, before a
//! client (`run --via bridge`, `bridge status`, `bridge start`'s wait) sends it a request or the
//! bearer token (issue 29 item 10: a listener of another user took both and answered a forged
//! `success`).
//!
//! The proof: the bridge for port P holds the lock `bridge-P.lock` in the task store and wrote
//! its pid beside it ([`crate::tasks::daemon::Daemon`]; the store is the user's, 0700, and no
//! run may write it); the kernel's table of TCP sockets (`/proc/net/tcp`, `tcp6`) gives the
//! inode of every socket listening on P; and that process holds one of those inodes among its
//! open files (`/proc/<pid>/fd`, readable only for a process of the same user). A listener of
//! another user, or one of this user's started by anything else (an agent inside a run binding
//! the port while no bridge runs), fails one of the three. Reading the socket table is bounded
//! (at most [`MAX_TABLE_BYTES`] of it) and happens once per client command, never on a run's
//! path.

use std::io::Read as _;
use std::path::Path;

use crate::tasks::daemon::{Daemon, DaemonState};

/// Most bytes of `/proc/net/tcp{,6}` read (about 150 bytes a socket: 100,000 sockets).
const MAX_TABLE_BYTES: u64 = 16 * 1024 * 1024;
/// Most open files of the bridge looked through.
const MAX_FDS: usize = 65_536;
/// TCP state LISTEN in the socket table.
const LISTEN: &str = "0A";

/// Why a listener is not provably ours.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotOurs {
    /// No bridge of ours holds the port's lock.
    #[error(
        "no droid-executor bridge of this user holds the lock for port {port} ({lock}), yet \
         something listens there"
    )]
    NoBridge {
        /// The port.
        port: u16,
        /// The lock file.
        lock: String,
    },
    /// The process holding the lock does not hold the listening socket.
    #[error(
        "the bridge holding port {port}'s lock (pid {pid}) does not hold the socket listening \
         there{owner}"
    )]
    Impostor {
        /// The port.
        port: u16,
        /// The bridge's pid.
        pid: u32,
        /// Who owns the listening socket, when another user does.
        owner: String,
    },
    /// The tables could not be read.
    #[error("cannot tell who listens on port {port}: {why}")]
    Unknown {
        /// The port.
        port: u16,
        /// Why.
        why: String,
    },
}

/// The pid of our bridge listening on `port`, the daemon `daemon` (its lock and pid file).
///
/// # Errors
/// [`NotOurs`] saying why the listener is not provably ours.
pub fn ours(daemon: &Daemon, port: u16) -> Result<u32, NotOurs> {
    let pid = match daemon.state() {
        Ok(DaemonState::Running(Some(pid))) => pid,
        Ok(_) => {
            return Err(NotOurs::NoBridge {
                port,
                lock: daemon
                    .pid_path()
                    .with_extension("lock")
                    .display()
                    .to_string(),
            });
        }
        Err(e) => {
            return Err(NotOurs::Unknown {
                port,
                why: e.to_string(),
            });
        }
    };
    let sockets = listening(port).map_err(|why| NotOurs::Unknown { port, why })?;
    if sockets.is_empty() {
        return Err(NotOurs::Unknown {
            port,
            why: "no socket listens there".to_owned(),
        });
    }
    if holds_any(pid, &sockets) {
        return Ok(pid);
    }
    let me = nix::unistd::geteuid().as_raw();
    let others: Vec<String> = sockets
        .iter()
        .filter(|s| s.uid != me)
        .map(|s| s.uid.to_string())
        .collect();
    Err(NotOurs::Impostor {
        port,
        pid,
        owner: if others.is_empty() {
            String::new()
        } else {
            format!(" (it belongs to uid {})", others.join(", "))
        },
    })
}

/// One listening socket in the kernel's table.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Socket {
    pub(crate) uid: u32,
    pub(crate) inode: u64,
}

/// The sockets listening on TCP `port` (IPv4 and IPv6).
fn listening(port: u16) -> Result<Vec<Socket>, String> {
    let mut out = Vec::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        let mut text = String::new();
        match std::fs::File::open(table) {
            Ok(f) => {
                f.take(MAX_TABLE_BYTES)
                    .read_to_string(&mut text)
                    .map_err(|e| format!("{table}: {e}"))?;
            }
            // a kernel without IPv6 has no tcp6
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(format!("{table}: {e}")),
        }
        out.extend(parse_table(&text, port));
    }
    Ok(out)
}

/// The LISTEN sockets on `port` in one table's text: `sl local_address rem_address st tx_queue
/// rx_queue tr tm->when retrnsmt uid timeout inode …`, addresses as `HEXADDR:HEXPORT`.
pub(crate) fn parse_table(text: &str, port: u16) -> Vec<Socket> {
    text.lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let local_port = f.get(1)?.rsplit_once(':')?.1;
            (u16::from_str_radix(local_port, 16).ok()? == port && *f.get(3)? == LISTEN)
                .then_some(())?;
            Some(Socket {
                uid: f.get(7)?.parse().ok()?,
                inode: f.get(9)?.parse().ok()?,
            })
        })
        .collect()
}

/// Whether process `pid` holds one of `sockets` among its open files.
fn holds_any(pid: u32, sockets: &[Socket]) -> bool {
    let dir = Path::new("/proc").join(pid.to_string()).join("fd");
    let Ok(entries) = std::fs::read_dir(&dir) else {
        return false;
    };
    entries.flatten().take(MAX_FDS).any(|e| {
        std::fs::read_link(e.path()).is_ok_and(|target| {
            let t = target.to_string_lossy();
            t.strip_prefix("socket:[")
                .and_then(|r| r.strip_suffix(']'))
                .and_then(|n| n.parse::<u64>().ok())
                .is_some_and(|inode| sockets.iter().any(|s| s.inode == inode))
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_socket_table_is_read_for_listeners_on_the_port() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:CF0A 00000000:0000 0A 00000000:00000000 00:00000000 00000000  1000        0 4242 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:CF0A 0100007F:9C40 01 00000000:00000000 00:00000000 00000000  1000        0 4343 1 0000000000000000 100 0 0 10 0\n\
   2: 00000000:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 77 1 0000000000000000 100 0 0 10 0\n";
        assert_eq!(
            parse_table(table, 0xCF0A),
            vec![Socket {
                uid: 1000,
                inode: 4242
            }]
        );
        assert_eq!(parse_table(table, 8080), vec![Socket { uid: 0, inode: 77 }]);
        assert_eq!(parse_table(table, 1), Vec::new());
    }

    #[test]
    fn a_listener_this_process_holds_is_found_and_one_it_does_not_is_not() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = l.local_addr().unwrap().port();
        let sockets = listening(port).unwrap();
        assert_eq!(sockets.len(), 1, "{sockets:?}");
        assert!(holds_any(std::process::id(), &sockets));
        // pid 1 does not hold it
        assert!(!holds_any(1, &sockets));
    }
}
