//! A run's processes in a cgroup v2 leaf, where this process may make cgroups: the tree of the
//! agent, whatever it does (`setsid`, a double fork, `env -i`, a rewritten environment), is the
//! leaf's members, `cgroup.kill` ends it at once, and `populated 0` in `cgroup.events` is the
//! proof that nothing is left. No scan of the machine and no process of ours per run.
//!
//! # Layout
//! The first run of a front-end makes a *host* cgroup beside it,
//! `<its own cgroup>/droid-executor-<pid>-<unique>`, and one *leaf* per run under it (the agent,
//! then one for the verification commands). A child is born in its leaf
//! (`clone3(CLONE_INTO_CGROUP)`, [`crate::process::spawn::leaf`], rather than moved there, which can
//! cost an RCU grace period per run), so everything it starts is born inside. A leaf found empty
//! when its run lets go of it is kept for the next run (making and removing one costs ~0.1 ms),
//! unless it was ever killed; one still populated is killed and left for the reaper.
//!
//! A killed leaf is never given another process: on Linux 6.18 (measured), a process created
//! with `CLONE_INTO_CGROUP` in a cgroup that was ever killed through `cgroup.kill` (itself or an
//! ancestor) is SIGKILLed at birth, while one moved there later lives. A leaf made afterwards
//! is not affected, so each verification command takes a leaf of its own.
//!
//! # The reaper
//! A front-end may die (SIGKILL included) while runs are under way. With the host comes one
//! process per front-end, not per run: `<program> reap <host>` ([`reap_host`]), in a session of
//! its own, whose stdin is a pipe only the front-end holds. At its end-of-file (the front-end
//! exited or died, or dropped its engine) it kills the whole host with `cgroup.kill`, waits for
//! it to empty and removes it. Where the host cannot be made (no cgroup v2 hierarchy, no write
//! access to it, a read-only mount, no `cgroup.kill`), or the kernel refuses the first child born
//! in a leaf (a cgroup namespace boundary, no `CLONE_INTO_CGROUP`), runs fall back to the per-run
//! supervisor ([`crate::process::guard`]). A host left by a front-end whose reaper died too is removed
//! by the next front-end that starts beside it.
//!
//! Key choices: the host lives under the front-end's own cgroup, the only place an unprivileged
//! user with a delegated cgroup (systemd `Delegate=`, a user session) may write, and the moves
//! stay under one common ancestor, as cgroup v2 requires (creating a process in a leaf asks the
//! same rights as moving one there). `cgroup.kill` needs no controller, and the front-end's own
//! cgroup is never changed (enabling a controller there would forbid its processes in it). The
//! host holds no process itself, so it may pass the `pids` and `memory` controllers down to its
//! leaves when its own `cgroup.controllers` offers them: each leaf then gets `pids.max` and
//! `memory.max` ([`crate::process::limits`]; elsewhere the children set rlimits on themselves).
//! `cgroup.kill` needs Linux 5.14; older kernels use the supervisor.

use std::fs::File;
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd as _, BorrowedFd, OwnedFd};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncRead, AsyncReadExt as _};

use crate::error::EngineError;
use crate::process::limits::{Controllers, ProcessLimits, RunLimits};
use crate::process::spawn::{SpawnSpec, spawn};

/// The start of every host's name; the reaper refuses to touch anything else.
pub const HOST_PREFIX: &str = "droid-executor-";
/// The subcommand of the supervisor program that runs a host's reaper.
pub const REAP_COMMAND: &str = "reap";
/// How long the end of a leaf or a host may take (a process in uninterruptible sleep dies only
/// when it wakes).
pub(crate) const END_BUDGET: Duration = Duration::from_secs(10);
/// `statfs` magic of a cgroup v2 file system.
const CGROUP2_MAGIC: i64 = 0x6367_7270;
/// Empty leaves kept for later runs.
const KEEP_FREE: usize = 16;

/// The cgroup of this front-end's runs, and the pipe that keeps its reaper waiting.
#[derive(Debug)]
pub(crate) struct Host {
    dir: PathBuf,
    next: AtomicU64,
    /// Empty leaves, never killed, ready for a run (paths only: a long-lived front-end holds
    /// no descriptor for them).
    free: Mutex<Vec<PathBuf>>,
    /// What each leaf is given.
    limits: RunLimits,
    /// The controllers the host passes down to its leaves, whose limits each leaf gets.
    controllers: Controllers,
    /// The reaper's stdin, never written: closed with the host (or by the kernel when this
    /// process dies), which is the reaper's signal.
    _reaper: File,
}

impl Host {
    /// Make this process's host and start its reaper with `program` (`<program> reap <host>`);
    /// each leaf is bounded by `limits` as far as the host's controllers allow.
    ///
    /// # Errors
    /// Why there can be no host here (no cgroup v2 hierarchy, no write access, no `cgroup.kill`,
    /// the reaper could not start or move): runs use the supervisor instead.
    pub(crate) fn start(
        program: &Path,
        scratch_root: &Path,
        limits: RunLimits,
    ) -> Result<Arc<Self>, String> {
        let own = own_cgroup()?;
        remove_stale_hosts(&own);
        // `<pid>-<time>-<count>`: the pid first, for `remove_stale_hosts`
        let dir = own.join(format!(
            "{HOST_PREFIX}{}",
            crate::process::scratch::unique_id()
        ));
        std::fs::create_dir(&dir).map_err(|e| format!("cannot make {}: {e}", dir.display()))?;
        match Self::reaper(program, &dir, scratch_root) {
            Ok(reaper) => {
                let controllers = pass_down(&dir, limits);
                tracing::info!(
                    "runs are bounded so: {}",
                    crate::process::limits::describe(
                        limits,
                        controllers,
                        nix::unistd::geteuid().is_root(),
                        Ok(&own)
                    )
                );
                Ok(Arc::new(Self {
                    dir,
                    next: AtomicU64::new(0),
                    free: Mutex::new(Vec::new()),
                    limits,
                    controllers,
                    _reaper: reaper,
                }))
            }
            Err(why) => {
                let _ = remove_tree(&dir);
                Err(why)
            }
        }
    }

    /// Start the host's reaper; the pipe returned is its stdin.
    fn reaper(program: &Path, dir: &Path, scratch_root: &Path) -> Result<File, String> {
        if !dir.join("cgroup.kill").exists() {
            return Err("the kernel has no cgroup.kill (Linux 5.14 or later)".into());
        }
        let spec = SpawnSpec {
            program: program.to_path_buf(),
            args: vec![
                REAP_COMMAND.into(),
                dir.as_os_str().to_owned(),
                "--scratch".into(),
                scratch_root.as_os_str().to_owned(),
            ],
            // holds no directory of a run busy
            cwd: "/".into(),
            env: Vec::new(),
            stdin_piped: true,
            stdin_file: None,
            detach_log: Some("/dev/null".into()),
            rlimits: crate::process::limits::Rlimits::NONE,
        };
        let mut child = spawn(&spec).map_err(|e| format!("the reaper could not start: {e}"))?;
        let pipe = child
            .stdin
            .take()
            .ok_or("the reaper's stdin was not piped")?
            .into_owned_fd()
            .map_err(|e| e.to_string())?;
        // tokio reaps it once it exits
        drop(child);
        Ok(File::from(pipe))
    }

    /// A leaf for one run's processes: an empty one kept from an earlier run, else a new one.
    ///
    /// # Errors
    /// When the leaf cannot be made or its `cgroup.procs` opened.
    pub(crate) fn leaf(self: &Arc<Self>) -> std::io::Result<Leaf> {
        let kept = self.free.lock().ok().and_then(|mut f| f.pop());
        let dir = match kept {
            // it has its limits already (they do not change with the host)
            Some(dir) => dir,
            None => {
                let n = self.next.fetch_add(1, Ordering::Relaxed);
                let dir = self.dir.join(format!("run-{n}"));
                std::fs::create_dir(&dir)?;
                // a leaf without the limits its host promises is not used
                if let Err(e) = write_limits(&dir, self.controllers, self.limits) {
                    let _ = std::fs::remove_dir(&dir);
                    return Err(e);
                }
                dir
            }
        };
        let fd = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags(nix::libc::O_DIRECTORY)
            .open(&dir)
            .map(OwnedFd::from)?;
        // read again from its start for each look (the kernel writes it anew per read): no
        // look-up of the leaf's path per look; without it, each look opens it by path
        let events = nix::fcntl::openat(
            fd.as_fd(),
            "cgroup.events",
            nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()
        .map(File::from);
        Ok(Leaf {
            host: Arc::clone(self),
            dir,
            fd: Some(fd),
            events,
            killed: std::sync::atomic::AtomicBool::new(false),
        })
    }
}

/// One run's cgroup: what is born in it (see [`Leaf::dir`]) and all it starts.
#[derive(Debug)]
pub(crate) struct Leaf {
    host: Arc<Host>,
    dir: PathBuf,
    /// The leaf's directory, open (`Some` until the leaf is dropped).
    fd: Option<OwnedFd>,
    /// Its `cgroup.events`, open (`None` if it could not be opened, and once dropped).
    events: Option<File>,
    /// `cgroup.kill` was written: no process may be born here any more (see the module docs).
    killed: std::sync::atomic::AtomicBool,
}

impl Leaf {
    /// The limits the leaf itself enforces (`pids.max`, `memory.max`); a child born in it sets
    /// rlimits for the rest ([`crate::process::limits::Rlimits::for_child`]).
    pub(crate) fn controllers(&self) -> Controllers {
        self.host.controllers
    }

    /// The leaf's directory, open: what `clone3(CLONE_INTO_CGROUP)` is given.
    pub(crate) fn dir(&self) -> BorrowedFd<'_> {
        match &self.fd {
            Some(fd) => fd.as_fd(),
            // `fd` is taken only by `drop`
            None => unreachable!("a leaf's directory is open until it is dropped"),
        }
    }

    /// SIGKILL every process in the leaf, at once (`cgroup.kill`). The leaf is not used for
    /// another process after that.
    pub(crate) fn kill(&self) {
        self.killed.store(true, Ordering::Relaxed);
        kill_dir(&self.dir);
    }

    /// The processes in the leaf now (`cgroup.procs`).
    ///
    /// # Errors
    /// When `cgroup.procs` cannot be read.
    pub(crate) fn pids(&self) -> std::io::Result<Vec<i32>> {
        let text = std::fs::read_to_string(self.dir.join("cgroup.procs"))?;
        Ok(text
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect())
    }

    /// Is any process still in the leaf? (An unreadable `cgroup.events` says yes: no proof.)
    pub(crate) fn populated(&self) -> bool {
        match &self.events {
            Some(events) => {
                use std::os::unix::fs::FileExt as _;
                let mut buf = [0u8; 128];
                events
                    .read_at(&mut buf, 0)
                    .map_or(true, |n| says_populated(&buf[..n]))
            }
            None => populated(&self.dir),
        }
    }

    /// Kill what is in the leaf and wait, up to `budget`, for it to be empty. `true`: the
    /// leaf is empty, the proof that nothing of it is left.
    pub(crate) async fn end(&self, budget: Duration) -> bool {
        if !self.populated() {
            return true;
        }
        self.kill();
        let until = Instant::now() + budget;
        let mut polls = 0_u32;
        while self.populated() {
            if Instant::now() >= until {
                return false;
            }
            // SIGKILL takes effect when each process next runs: give them the CPU first
            if polls < 8 {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(Duration::from_millis(1)).await;
            }
            polls += 1;
        }
        true
    }
}

impl Drop for Leaf {
    fn drop(&mut self) {
        if self.fd.is_none() {
            return;
        }
        let populated = self.populated();
        self.fd = None;
        self.events = None;
        if populated {
            // the run's future was dropped with its processes still there: nothing of it may
            // outlive it; the leaf itself goes with the host
            self.kill();
            return;
        }
        if let Ok(mut free) = self.host.free.lock()
            && free.len() < KEEP_FREE
            && !self.killed.load(Ordering::Relaxed)
        {
            free.push(std::mem::take(&mut self.dir));
            return;
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// Enable in the host `dir`'s `cgroup.subtree_control` the controllers `limits` needs that its
/// `cgroup.controllers` offers (`pids` for `max_pids`, `memory` for `max_memory_mb`), each on
/// its own; the ones now enabled.
fn pass_down(dir: &Path, limits: RunLimits) -> Controllers {
    let offered = std::fs::read_to_string(dir.join("cgroup.controllers")).unwrap_or_default();
    let enable = |name: &str, wanted: bool| {
        wanted
            && offered.split_whitespace().any(|c| c == name)
            && std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("cgroup.subtree_control"))
                .and_then(|mut f| f.write_all(format!("+{name}").as_bytes()))
                .inspect_err(|e| tracing::warn!("cannot enable {name} in {}: {e}", dir.display()))
                .is_ok()
    };
    Controllers {
        pids: enable("pids", limits.pids().is_some()),
        memory: enable("memory", limits.memory_bytes().is_some()),
    }
}

/// Write a new leaf's `pids.max` and `memory.max` for the controllers its host passes down.
fn write_limits(dir: &Path, controllers: Controllers, limits: RunLimits) -> std::io::Result<()> {
    let write = |file: &str, value: u64| {
        std::fs::OpenOptions::new()
            .write(true)
            .open(dir.join(file))
            .and_then(|mut f| f.write_all(value.to_string().as_bytes()))
    };
    if let Some(n) = limits.pids().filter(|_| controllers.pids) {
        write("pids.max", n)?;
    }
    if let Some(n) = limits.memory_bytes().filter(|_| controllers.memory) {
        write("memory.max", n)?;
    }
    Ok(())
}

/// How a run's processes would be bounded under `limits` here: with cgroups on (`cgroups`,
/// the setting), what this process's cgroup passes down to the host it would make; as root or
/// not. Makes nothing, changes nothing.
pub fn process_limits(cgroups: bool, limits: RunLimits) -> ProcessLimits {
    let offered = if cgroups {
        offered_controllers()
    } else {
        Err("cgroups = false".to_owned())
    };
    let root = nix::unistd::geteuid().is_root();
    match offered {
        Ok((leaf, own)) => crate::process::limits::describe(limits, leaf, root, Ok(&own)),
        Err(why) => {
            crate::process::limits::describe(limits, Controllers::default(), root, Err(why))
        }
    }
}

/// The controllers among `pids` and `memory` a host made beside this process would have: its
/// own cgroup's `cgroup.subtree_control` (what it passes down to its children), where this
/// process may make a host at all, and that cgroup (`doctor`; nothing is made or changed).
///
/// # Errors
/// Why there would be no host (no cgroup v2 hierarchy, its directory not writable, no
/// `cgroup.kill`).
pub(crate) fn offered_controllers() -> Result<(Controllers, PathBuf), String> {
    let own = own_cgroup()?;
    nix::unistd::access(&own, nix::unistd::AccessFlags::W_OK)
        .map_err(|e| format!("{} is not writable: {e}", own.display()))?;
    // the root cgroup (no `cgroup.type`) has no `cgroup.kill` of its own; the host would
    if own.join("cgroup.type").exists() && !own.join("cgroup.kill").exists() {
        return Err("the kernel has no cgroup.kill (Linux 5.14 or later)".into());
    }
    let passed = std::fs::read_to_string(own.join("cgroup.subtree_control"))
        .map_err(|e| format!("cannot read {}/cgroup.subtree_control: {e}", own.display()))?;
    let has = |name: &str| passed.split_whitespace().any(|c| c == name);
    let offered = Controllers {
        pids: has("pids"),
        memory: has("memory"),
    };
    Ok((offered, own))
}

/// Does `dir`'s `cgroup.events` say `populated 1`, or can it not be read?
fn populated(dir: &Path) -> bool {
    let mut buf = [0u8; 128];
    let Ok(n) = File::open(dir.join("cgroup.events")).and_then(|mut f| f.read(&mut buf)) else {
        return true;
    };
    says_populated(&buf[..n])
}

/// Does this content of `cgroup.events` fail to say `populated 0`?
fn says_populated(events: &[u8]) -> bool {
    !events
        .split(|b| *b == b'\n')
        .any(|line| line == b"populated 0")
}

/// This process's cgroup v2 directory: its path in `/proc/self/cgroup` (`0::<path>`) under the
/// cgroup2 mount of `/proc/self/mountinfo`.
fn own_cgroup() -> Result<PathBuf, String> {
    let cgroup = std::fs::read_to_string("/proc/self/cgroup")
        .map_err(|e| format!("cannot read /proc/self/cgroup: {e}"))?;
    let path = cgroup
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .ok_or("no cgroup v2 hierarchy (/proc/self/cgroup has no 0:: line)")?;
    let mounts = std::fs::read_to_string("/proc/self/mountinfo")
        .map_err(|e| format!("cannot read /proc/self/mountinfo: {e}"))?;
    // `<id> <parent> <dev> <root> <mount point> <options> [<optional>…] - <type> <source> …`
    let (root, point) = mounts
        .lines()
        .find_map(|l| {
            let (head, tail) = l.split_once(" - ")?;
            if !tail.starts_with("cgroup2 ") {
                return None;
            }
            let mut f = head.split(' ');
            Some((f.nth(3)?, f.next()?))
        })
        .ok_or("no cgroup2 file system is mounted")?;
    if point.contains('\\') || path.contains("(deleted)") {
        return Err(format!("cgroup {path} under mount {point} is not usable"));
    }
    let inside = Path::new(path)
        .strip_prefix(root)
        .map_err(|_| format!("this process's cgroup {path} is outside the mount of {root}"))?;
    let dir = Path::new(point).join(inside);
    if !is_cgroup2(&dir) {
        return Err(format!("{} is not a cgroup v2 directory", dir.display()));
    }
    Ok(dir)
}

fn is_cgroup2(dir: &Path) -> bool {
    nix::sys::statfs::statfs(dir).is_ok_and(|s| {
        #[allow(clippy::useless_conversion)] // the field's width differs between targets
        let magic = i64::from(s.filesystem_type().0);
        magic == CGROUP2_MAGIC
    })
}

/// Remove the hosts beside `own` whose front-end is gone (its pid no longer alive) and whose
/// reaper died with it: what is still in them is killed, the empty ones removed now, the others
/// by a later front-end (nothing here waits).
fn remove_stale_hosts(own: &Path) {
    let Ok(entries) = std::fs::read_dir(own) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(HOST_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|p| p.parse::<i32>().ok())
        else {
            continue;
        };
        let gone = matches!(
            nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
            Err(nix::errno::Errno::ESRCH)
        );
        if gone {
            let dir = entry.path();
            if populated(&dir) {
                kill_dir(&dir);
            } else {
                let _ = remove_tree(&dir);
            }
        }
    }
}

/// SIGKILL everything in the cgroup `dir` and below (`cgroup.kill`).
fn kill_dir(dir: &Path) {
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .open(dir.join("cgroup.kill"))
        .and_then(|mut f| f.write_all(b"1"));
}

/// Remove an empty host: its leaves, then itself.
fn remove_tree(dir: &Path) -> std::io::Result<()> {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            if entry.file_type().is_ok_and(|t| t.is_dir()) {
                let _ = std::fs::remove_dir(entry.path());
            }
        }
    }
    std::fs::remove_dir(dir)
}

/// The reaper's body (`droid-executor reap <host> [--scratch <root>]`): wait for end-of-file on
/// `owner` (the front-end's pipe), then kill everything in `host`, wait for it to empty and
/// remove it, and remove the front-end's scratch directories under `scratch` (runs under way
/// when it died, and the emptied ones its engine kept: [`crate::process::scratch`]). Returns
/// whether the host was emptied.
///
/// # Errors
/// [`EngineError::InvalidCgroup`] when `host` is not a host of ours on a cgroup v2 file system
/// (nothing is touched).
pub async fn reap_host<R: AsyncRead + Unpin>(
    host: &Path,
    mut owner: R,
    scratch: Option<&Path>,
) -> Result<bool, EngineError> {
    let ours = host
        .file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with(HOST_PREFIX));
    if !ours || !host.is_absolute() || !is_cgroup2(host) {
        return Err(EngineError::InvalidCgroup(host.display().to_string()));
    }
    let mut buf = [0u8; 64];
    // end-of-file, or the pipe broke: the front-end is gone either way
    while let Ok(n) = owner.read(&mut buf).await
        && n > 0
    {}
    let until = Instant::now() + END_BUDGET;
    kill_dir(host);
    while populated(host) {
        if Instant::now() >= until {
            return Ok(false);
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let _ = remove_tree(host);
    if let Some(root) = scratch
        && let Some(pid) = host_pid(host)
    {
        crate::process::scratch::remove_of(root, pid);
    }
    Ok(true)
}

/// The pid of the front-end that made `host` (`droid-executor-<pid>-…`).
fn host_pid(host: &Path) -> Option<u32> {
    host.file_name()?
        .to_str()?
        .strip_prefix(HOST_PREFIX)?
        .split('-')
        .next()?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_reaper_refuses_what_is_not_a_host() {
        for dir in ["/tmp", "relative/droid-executor-1", "/sys/fs/cgroup"] {
            let err = reap_host(Path::new(dir), tokio::io::empty(), None)
                .await
                .unwrap_err();
            assert!(matches!(err, EngineError::InvalidCgroup(_)), "{dir}");
        }
    }

    /// A directory standing for a host: its `cgroup.controllers` saying `offered`, an empty
    /// `cgroup.subtree_control`.
    fn fake_host(name: &str, offered: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("cgroup-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("cgroup.controllers"), offered).unwrap();
        std::fs::write(dir.join("cgroup.subtree_control"), "").unwrap();
        dir
    }

    #[test]
    fn the_host_passes_down_the_controllers_it_is_offered_and_needs() {
        let limits = RunLimits::default();
        let dir = fake_host("both", "cpuset cpu io memory hugetlb pids rdma misc\n");
        assert_eq!(
            pass_down(&dir, limits),
            Controllers {
                pids: true,
                memory: true
            }
        );
        // a real cgroup.subtree_control takes one write per controller; this file keeps the last
        let written = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap();
        assert_eq!(written, "+memory");
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = fake_host("hugetlb", "hugetlb\n");
        assert_eq!(pass_down(&dir, limits), Controllers::default());
        let written = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap();
        assert_eq!(written, "", "nothing offered, nothing enabled");
        std::fs::remove_dir_all(&dir).unwrap();

        let dir = fake_host("unwanted", "memory pids\n");
        let off = RunLimits {
            max_pids: 0,
            max_memory_mb: 0,
        };
        assert_eq!(pass_down(&dir, off), Controllers::default());
        let written = std::fs::read_to_string(dir.join("cgroup.subtree_control")).unwrap();
        assert_eq!(written, "", "a setting of 0 enables nothing");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_leaf_gets_the_limits_of_its_hosts_controllers() {
        let dir = fake_host("leaf", "");
        let limits = RunLimits {
            max_pids: 20,
            max_memory_mb: 256,
        };
        for f in ["pids.max", "memory.max"] {
            std::fs::write(dir.join(f), "").unwrap();
        }
        write_limits(&dir, Controllers::default(), limits).unwrap();
        for f in ["pids.max", "memory.max"] {
            assert_eq!(std::fs::read_to_string(dir.join(f)).unwrap(), "", "{f}");
        }
        let both = Controllers {
            pids: true,
            memory: true,
        };
        write_limits(&dir, both, limits).unwrap();
        assert_eq!(std::fs::read_to_string(dir.join("pids.max")).unwrap(), "20");
        assert_eq!(
            std::fs::read_to_string(dir.join("memory.max")).unwrap(),
            (256 * 1024 * 1024).to_string()
        );
        // a limit that cannot be written fails the leaf
        std::fs::remove_file(dir.join("pids.max")).unwrap();
        std::fs::create_dir(dir.join("pids.max")).unwrap();
        assert!(write_limits(&dir, both, limits).is_err());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn events_say_populated_unless_they_say_otherwise() {
        let dir = std::env::temp_dir().join(format!("cgroup-events-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        assert!(populated(&dir), "no cgroup.events is no proof");
        std::fs::write(dir.join("cgroup.events"), "populated 1\nfrozen 0\n").unwrap();
        assert!(populated(&dir));
        std::fs::write(dir.join("cgroup.events"), "populated 0\nfrozen 0\n").unwrap();
        assert!(!populated(&dir));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
