//! How many tasks (processes and threads) and how much memory a run's processes may take: the
//! agent's tree, and each verification command's (settings `max_pids` and `max_memory_mb`,
//! 0 = no limit). A fork bomb or a runaway build stops there, not at the machine's end.
//!
//! Where the run's cgroup leaf ([`crate::process::cgroup`]) has the `pids` and `memory` controllers
//! (the host enables them in its `cgroup.subtree_control` when its `cgroup.controllers` offers
//! them, that is when the front-end's own cgroup passes them down), the leaf gets `pids.max` and
//! `memory.max`: the count and the memory of the whole tree, `setsid` children and daemons
//! included. Elsewhere, for each resource the leaf does not bound, the child sets a resource
//! limit on itself between fork and exec ([`Rlimits::set_on_self`]), which everything it starts
//! inherits:
//! - memory: `RLIMIT_DATA` at `max_memory_mb` MiB, **per process** (a tree of n processes may
//!   hold n times as much). Not `RLIMIT_AS`: JavaScript engines reserve address space they never
//!   touch, and node 20 under an 8 GiB `RLIMIT_AS` cannot make a `WebAssembly.Memory` (measured:
//!   `RangeError: could not allocate memory`), while `RLIMIT_DATA` (Linux 4.7+) counts only the
//!   private writable mappings, reservations made `PROT_NONE` excluded.
//! - tasks: `RLIMIT_NPROC`, which the kernel compares with **every** task of the user, not the
//!   run's: a limit of `max_pids` would refuse every fork to a user whose browser already holds
//!   that many threads. It is set to the tasks on the machine when the child starts (the total of
//!   `/proc/loadavg`, read in constant time) plus `max_pids`: the run's tree may start at least
//!   `max_pids` tasks, and a fork bomb stops after about that many. The kernel does not apply it
//!   to root (`CAP_SYS_RESOURCE`, `CAP_SYS_ADMIN`), so as root nothing is set and a run without
//!   the `pids` controller has no task limit.
//!
//! [`crate::process::cgroup::process_limits`] says which applies on this machine (`doctor`).

use std::fmt;

use serde::{Deserialize, Serialize};

/// `max_pids`' default: far above what an agent and a parallel build start.
pub const DEFAULT_MAX_PIDS: u32 = 4096;
/// `max_memory_mb`' default: 8 GiB, room for a large build on a laptop of 16 GiB.
pub const DEFAULT_MAX_MEMORY_MB: u64 = 8192;
/// Bytes in a MiB.
const MIB: u64 = 1024 * 1024;

/// The settings: the most tasks and memory a run's processes may take (0: no limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunLimits {
    /// Tasks (processes and threads) of the agent's tree, and of each verification command's.
    pub max_pids: u32,
    /// Memory in MiB of the agent's tree (per process where only an rlimit applies), and of
    /// each verification command's.
    pub max_memory_mb: u64,
}

impl Default for RunLimits {
    fn default() -> Self {
        Self {
            max_pids: DEFAULT_MAX_PIDS,
            max_memory_mb: DEFAULT_MAX_MEMORY_MB,
        }
    }
}

impl RunLimits {
    /// `max_memory_mb` in bytes (`None`: no limit).
    pub(crate) fn memory_bytes(self) -> Option<u64> {
        (self.max_memory_mb > 0).then(|| self.max_memory_mb.saturating_mul(MIB))
    }

    /// `max_pids` (`None`: no limit).
    pub(crate) fn pids(self) -> Option<u64> {
        (self.max_pids > 0).then_some(u64::from(self.max_pids))
    }
}

/// The controllers a cgroup leaf has, with its limits written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Controllers {
    /// `pids.max` bounds the leaf.
    pub pids: bool,
    /// `memory.max` bounds the leaf.
    pub memory: bool,
}

/// The resource limits a child sets on itself before it executes its program (soft = hard, so
/// nothing it starts may raise them again).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Rlimits {
    /// `RLIMIT_NPROC`.
    pub nproc: Option<u64>,
    /// `RLIMIT_DATA`, bytes.
    pub data: Option<u64>,
}

impl Rlimits {
    /// No limit set.
    pub const NONE: Rlimits = Rlimits {
        nproc: None,
        data: None,
    };

    /// What a child of this process sets for `limits` when its cgroup leaf bounds what `leaf`
    /// says (`Controllers::default()`: no leaf): the tasks of the machine now and this
    /// process's own limits are read here.
    pub(crate) fn for_child(limits: RunLimits, leaf: Controllers) -> Self {
        let root = nix::unistd::geteuid().is_root();
        let plan = Self::plan(limits, leaf, root, tasks_now());
        Self {
            nproc: plan
                .nproc
                .map(|n| n.min(hard(nix::sys::resource::Resource::RLIMIT_NPROC))),
            data: plan
                .data
                .map(|n| n.min(hard(nix::sys::resource::Resource::RLIMIT_DATA))),
        }
    }

    /// The limits for `limits` with a leaf bounding what `leaf` says, as root or not, with
    /// `tasks` on the machine (`None`: unknown, and no task limit is set rather than a wrong
    /// one).
    pub(crate) fn plan(
        limits: RunLimits,
        leaf: Controllers,
        root: bool,
        tasks: Option<u64>,
    ) -> Self {
        Self {
            nproc: limits
                .pids()
                .filter(|_| !leaf.pids && !root)
                .and_then(|n| tasks.map(|t| t.saturating_add(n))),
            data: limits.memory_bytes().filter(|_| !leaf.memory),
        }
    }

    /// Set them on this process. Called in the child between fork and exec: two system calls
    /// each, no allocation, no lock.
    ///
    /// # Errors
    /// The errno of a refused `setrlimit`.
    pub(crate) fn set_on_self(&self) -> std::io::Result<()> {
        use nix::sys::resource::{Resource, setrlimit};
        if let Some(n) = self.nproc {
            setrlimit(Resource::RLIMIT_NPROC, n, n)?;
        }
        if let Some(n) = self.data {
            setrlimit(Resource::RLIMIT_DATA, n, n)?;
        }
        Ok(())
    }
}

/// This process's hard limit of `resource` (unlimited when it cannot be read): a child cannot
/// raise its own.
fn hard(resource: nix::sys::resource::Resource) -> u64 {
    nix::sys::resource::getrlimit(resource).map_or(u64::MAX, |(_, hard)| hard)
}

/// The tasks (threads) on the machine now: the total of `/proc/loadavg`'s fourth field
/// (`runnable/total`), one small read.
fn tasks_now() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    parse_loadavg_tasks(&text)
}

fn parse_loadavg_tasks(text: &str) -> Option<u64> {
    text.split_whitespace()
        .nth(3)?
        .split_once('/')?
        .1
        .parse()
        .ok()
}

/// How one resource of a run is bounded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Bound {
    /// By the run's cgroup leaf: `pids.max` or `memory.max` at this value.
    Cgroup(u64),
    /// By a resource limit of each process: `RLIMIT_NPROC` (tasks of the user on the machine
    /// plus `max_pids`) or `RLIMIT_DATA` at this value.
    Rlimit(u64),
    /// Not at all: the setting is 0.
    Off,
    /// Not at all, though the setting asks for it, and why.
    Unbounded(String),
}

/// How the runs of a front-end are bounded on this machine (`doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessLimits {
    /// Tasks.
    pub pids: Bound,
    /// Memory, bytes.
    pub memory: Bound,
    /// Why a run's leaf lacks a controller (empty when it has both, or when neither is wanted).
    pub why_no_cgroup: String,
}

impl ProcessLimits {
    /// Every resource with a non-zero setting is bounded.
    pub fn complete(&self) -> bool {
        !matches!(self.pids, Bound::Unbounded(_)) && !matches!(self.memory, Bound::Unbounded(_))
    }
}

impl fmt::Display for ProcessLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pids {
            Bound::Cgroup(n) => write!(f, "tasks: pids.max {n} on each run's cgroup")?,
            Bound::Rlimit(n) => write!(
                f,
                "tasks: RLIMIT_NPROC (the user's tasks on the machine + {n}; it counts every \
                 process of the user)"
            )?,
            Bound::Off => write!(f, "tasks: no limit (max_pids = 0)")?,
            Bound::Unbounded(why) => write!(f, "tasks: no limit ({why})")?,
        }
        match &self.memory {
            Bound::Cgroup(n) => write!(
                f,
                "; memory: memory.max {} MiB on each run's cgroup",
                n / MIB
            )?,
            Bound::Rlimit(n) => write!(f, "; memory: RLIMIT_DATA {} MiB per process", n / MIB)?,
            Bound::Off => write!(f, "; memory: no limit (max_memory_mb = 0)")?,
            Bound::Unbounded(why) => write!(f, "; memory: no limit ({why})")?,
        }
        if !self.why_no_cgroup.is_empty() {
            write!(f, "; {}", self.why_no_cgroup)?;
        }
        Ok(())
    }
}

/// [`crate::process::cgroup::process_limits`] for a leaf with `leaf`'s controllers, as root or not; `cgroup`: the
/// front-end's own cgroup, which passes the controllers down to the host, or why there is no
/// leaf at all.
pub(crate) fn describe(
    limits: RunLimits,
    leaf: Controllers,
    root: bool,
    cgroup: Result<&std::path::Path, String>,
) -> ProcessLimits {
    let pids = match limits.pids() {
        None => Bound::Off,
        Some(n) if leaf.pids => Bound::Cgroup(n),
        Some(_) if root => {
            Bound::Unbounded("no pids controller, and RLIMIT_NPROC does not bind root".into())
        }
        Some(n) => Bound::Rlimit(n),
    };
    let memory = match limits.memory_bytes() {
        None => Bound::Off,
        Some(n) if leaf.memory => Bound::Cgroup(n),
        Some(n) => Bound::Rlimit(n),
    };
    let lacking = matches!(pids, Bound::Rlimit(_) | Bound::Unbounded(_))
        || matches!(memory, Bound::Rlimit(_));
    let why_no_cgroup = match cgroup {
        Err(why) => format!("no cgroup for runs: {why}"),
        Ok(own) if lacking => format!(
            "{} does not pass both pids and memory down",
            own.join("cgroup.subtree_control").display()
        ),
        Ok(_) => String::new(),
    };
    ProcessLimits {
        pids,
        memory,
        why_no_cgroup,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    const BOTH: Controllers = Controllers {
        pids: true,
        memory: true,
    };

    #[test]
    fn a_leaf_with_both_controllers_needs_no_rlimit() {
        let limits = RunLimits::default();
        assert_eq!(Rlimits::plan(limits, BOTH, false, Some(900)), Rlimits::NONE);
    }

    #[test]
    fn without_controllers_the_child_gets_rlimits_relative_to_the_machine() {
        let limits = RunLimits {
            max_pids: 20,
            max_memory_mb: 512,
        };
        let none = Controllers::default();
        assert_eq!(
            Rlimits::plan(limits, none, false, Some(900)),
            Rlimits {
                nproc: Some(920),
                data: Some(512 * MIB),
            }
        );
        // root: RLIMIT_NPROC would not bind, so it is not set
        assert_eq!(
            Rlimits::plan(limits, none, true, Some(900)),
            Rlimits {
                nproc: None,
                data: Some(512 * MIB),
            }
        );
        // the machine's count unknown: no task limit rather than a wrong one
        assert_eq!(Rlimits::plan(limits, none, false, None).nproc, None);
        // only what the leaf lacks
        let pids_only = Controllers {
            pids: true,
            memory: false,
        };
        assert_eq!(
            Rlimits::plan(limits, pids_only, false, Some(900)),
            Rlimits {
                nproc: None,
                data: Some(512 * MIB),
            }
        );
        // 0 is no limit
        let off = RunLimits {
            max_pids: 0,
            max_memory_mb: 0,
        };
        assert_eq!(Rlimits::plan(off, none, false, Some(900)), Rlimits::NONE);
    }

    #[test]
    fn the_machines_tasks_come_from_loadavg() {
        assert_eq!(
            parse_loadavg_tasks("0.52 0.58 0.59 3/1186 123456\n"),
            Some(1186)
        );
        assert_eq!(parse_loadavg_tasks("garbage"), None);
        assert!(tasks_now().is_some_and(|n| n > 0));
    }

    #[test]
    fn the_report_says_which_limit_applies() {
        let limits = RunLimits::default();
        let own = std::path::Path::new("/sys/fs/cgroup/user.slice");
        let cgroup = describe(limits, BOTH, true, Ok(own));
        assert_eq!(
            cgroup.to_string(),
            "tasks: pids.max 4096 on each run's cgroup; memory: memory.max 8192 MiB on each \
             run's cgroup"
        );
        assert!(cgroup.complete());
        let user = describe(limits, Controllers::default(), false, Ok(own));
        assert_eq!(
            user.to_string(),
            "tasks: RLIMIT_NPROC (the user's tasks on the machine + 4096; it counts every \
             process of the user); memory: RLIMIT_DATA 8192 MiB per process; \
             /sys/fs/cgroup/user.slice/cgroup.subtree_control does not pass both pids and \
             memory down"
        );
        assert!(user.complete());
        let root = describe(
            limits,
            Controllers::default(),
            true,
            Err("cgroups = false".into()),
        );
        assert_eq!(
            root.to_string(),
            "tasks: no limit (no pids controller, and RLIMIT_NPROC does not bind root); \
             memory: RLIMIT_DATA 8192 MiB per process; no cgroup for runs: cgroups = false"
        );
        assert!(!root.complete());
        let off = RunLimits {
            max_pids: 0,
            max_memory_mb: 0,
        };
        let off = describe(off, Controllers::default(), true, Ok(own));
        assert_eq!(
            off.to_string(),
            "tasks: no limit (max_pids = 0); memory: no limit (max_memory_mb = 0)"
        );
        assert!(off.complete());
    }
}
