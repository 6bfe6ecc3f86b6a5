//! Runs cannot reach droid-executor's own HTTP bridge (issue 29 item 2: the bridge as a
//! deputy). A request that comes from inside a run must never get more than that run has; the
//! bridge runs outside every run, so an agent that could `curl -X POST 127.0.0.1:53002/tasks`
//! with `repo_root = $HOME` would get a second task with the whole home writable.
//!
//! Landlock (ABI 4, Linux 6.7) handles TCP `connect` by port: with the right handled, only the
//! ports a rule names may be connected to. There is no rule for "every port but one", so the
//! ruleset names the other 65,534 ports. Measured on this project's CI machine (Linux, ABI 7, a
//! release build): building it takes 30-50 ms and `landlock_restrict_self` about 25 ms (the
//! kernel copies each rule into the new domain), far too much per spawn (the bridge spends about
//! 1.3 ms of CPU per request). So a front-end that starts runs (`run`, `ask`, the task worker, `serve`, `mcp`,
//! `acp`) confines **itself** once, on its main thread before any other thread exists
//! ([`refuse_tcp_connect_to`]): every thread and process it starts from then on, each run's
//! agent and verification commands included, inherits the domain for free, and a run's own
//! file-system layer stacks on it. The front-end never connects to the bridge itself (the
//! bridge's clients, `run --via bridge`, `bridge status`, `doctor`, are not confined).
//!
//! The ports left out: the configured bridge port (`port`, `PORT`, `DROID_EXECUTOR_PORT`;
//! 53002 by default), and for `serve` the port it listens on. A bridge the user starts on
//! another port while a run is going is not covered (docs/operations.md#security-model); an
//! agent that starts a bridge itself gains nothing, since that bridge inherits the run's
//! confinement and ends with it. Where the kernel has no Landlock network rules (ABI < 4) nothing
//! is enforced, and `doctor` says so.
//!
//! A side effect of a front-end in a Landlock domain: the kernel treats reading another
//! process's `/proc/<pid>/root`, `fd` or `environ` as ptrace access, which a domain allows only
//! towards processes in it or nested in it (the front-end's own runs). Nothing the front-ends
//! do needs more; the fault suites, which reach their private mounts that way, set
//! [`TEST_NO_NET_CONFINE_VAR`].

use std::sync::OnceLock;

use landlock::{
    AccessNet, CompatLevel, Compatible, NetPort, Ruleset, RulesetAttr, RulesetCreatedAttr,
    RulesetStatus,
};

/// What [`refuse_tcp_connect_to`] did for this process.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NetConfinement {
    /// TCP connections to these ports are refused to this process and all it starts.
    Refused(Vec<u16>),
    /// Not enforced, with why (a kernel without Landlock network rules, or a failure).
    Open(String),
}

static APPLIED: OnceLock<NetConfinement> = OnceLock::new();

/// What this process's runs may not connect to, if it confined itself (`None`: it did not try).
pub fn applied() -> Option<&'static NetConfinement> {
    APPLIED.get()
}

/// Confine this process, and everything it starts from now on, so that no TCP connection to
/// `ports` can be made. Call it on the main thread before any other thread is started (a
/// Landlock domain is per thread, inherited by the threads and processes started after it);
/// once per process (a second call does nothing and returns the first answer).
pub fn refuse_tcp_connect_to(ports: &[u16]) -> &'static NetConfinement {
    APPLIED.get_or_init(|| apply(ports))
}

/// [`refuse_tcp_connect_to`] when something listens on one of `ports` on the loopback
/// interface now (a connection attempt each, answered at once by the kernel), else nothing: what
/// a one-shot command (`run`, `ask`, a task's worker) does, so that it pays for the rules only
/// while a bridge runs.
pub fn refuse_if_listening(ports: &[u16]) -> &'static NetConfinement {
    let listening = ports.iter().any(|p| {
        [
            std::net::Ipv4Addr::LOCALHOST.into(),
            std::net::Ipv6Addr::LOCALHOST.into(),
        ]
        .into_iter()
        .any(|ip: std::net::IpAddr| {
            std::net::TcpStream::connect_timeout(
                &(ip, *p).into(),
                std::time::Duration::from_millis(200),
            )
            .is_ok()
        })
    });
    if listening {
        return refuse_tcp_connect_to(ports);
    }
    APPLIED.get_or_init(|| {
        NetConfinement::Open(format!(
            "nothing listened on port(s) {} when this process started",
            ports
                .iter()
                .map(u16::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ))
    })
}

/// The variable that, in debug builds only, keeps a front-end from confining itself: the fault
/// suites reach private mounts through `/proc/<pid>/root` of a process outside any Landlock
/// domain, which Landlock refuses to a confined process (it treats that as ptrace access).
/// Release builds ignore it.
pub const TEST_NO_NET_CONFINE_VAR: &str = "DROID_EXECUTOR_TEST_NO_NET_CONFINE";

#[cfg(debug_assertions)]
fn skipped_for_tests() -> bool {
    std::env::var_os(TEST_NO_NET_CONFINE_VAR).is_some_and(|v| v == "1")
}

#[cfg(not(debug_assertions))]
fn skipped_for_tests() -> bool {
    false
}

fn apply(ports: &[u16]) -> NetConfinement {
    if skipped_for_tests() {
        return NetConfinement::Open(format!("{TEST_NO_NET_CONFINE_VAR}=1 (a debug build)"));
    }
    if super::sandbox::kernel_abi().is_none_or(|abi| abi < 4) {
        return NetConfinement::Open(
            "this kernel offers no Landlock network rules (ABI 4, Linux 6.7)".to_owned(),
        );
    }
    let connect = AccessNet::ConnectTcp;
    let ruleset = Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(connect)
        .and_then(|r| r.create())
        .and_then(|r| {
            r.add_rules(
                (1..=u16::MAX)
                    .filter(|p| !ports.contains(p))
                    .map(|p| Ok::<_, landlock::RulesetError>(NetPort::new(p, connect))),
            )
        });
    let restricted = ruleset.and_then(|r| r.no_new_privs(true).restrict_self());
    match restricted {
        Ok(status) if status.ruleset == RulesetStatus::FullyEnforced => {
            let mut ports = ports.to_vec();
            ports.sort_unstable();
            ports.dedup();
            NetConfinement::Refused(ports)
        }
        Ok(status) => NetConfinement::Open(format!(
            "Landlock did not enforce the network rules ({:?})",
            status.ruleset
        )),
        Err(e) => NetConfinement::Open(format!("Landlock network rules: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// In a child process (the domain cannot be left): a connection to the refused port fails
    /// with EACCES, one to another port reaches the listener.
    #[test]
    fn a_refused_port_cannot_be_connected_to_and_others_can() {
        if super::super::sandbox::kernel_abi().is_none_or(|abi| abi < 4) {
            return;
        }
        let refused = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let refused_port = refused.local_addr().unwrap().port();
        let open_port = open.local_addr().unwrap().port();
        let started = std::time::Instant::now();
        // a thread of its own: the domain stays with it and the threads it starts
        let outcome = std::thread::spawn(move || {
            let applied = apply(&[refused_port]);
            let spent = started.elapsed();
            let to_refused =
                std::net::TcpStream::connect(("127.0.0.1", refused_port)).map_err(|e| e.kind());
            let to_open = std::net::TcpStream::connect(("127.0.0.1", open_port)).map(|_| ());
            (applied, spent, to_refused.map(|_| ()), to_open.is_ok())
        })
        .join()
        .unwrap();
        assert_eq!(outcome.0, NetConfinement::Refused(vec![refused_port]));
        assert_eq!(
            outcome.2,
            Err(std::io::ErrorKind::PermissionDenied),
            "refused port"
        );
        assert!(outcome.3, "another port is reachable");
        eprintln!("building and enforcing the rules took {:?}", outcome.1);
    }
}
