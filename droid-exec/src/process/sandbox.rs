//! Write confinement of a run by Landlock (docs/operations.md#security-model): the agent, every
//! process it starts (`setsid` and double-forked ones included: a Landlock domain is inherited
//! across `fork` and `exec` and cannot be left), and the verification commands may write only
//! under the paths of a [`Confinement`]; reads stay open (an agent must read toolchains and
//! libraries).
//!
//! The ruleset is built in the engine, once per spawn ([`Confinement::ruleset`]: a handful of
//! `open(O_PATH)` calls and one `landlock_add_rule` each), and enforced in the child between
//! `fork` and `exec` ([`crate::process::spawn`]), where only `prctl(PR_SET_NO_NEW_PRIVS)` and
//! `landlock_restrict_self` run: no allocation, no path resolution. A run with a supervisor has
//! the ruleset enforced on the supervisor itself, before it executes: the supervisor writes
//! nothing (it reads `/proc`, signals and reaps), and everything it starts inherits the domain,
//! so no rule has to cross a process boundary.
//!
//! Where the kernel has Landlock's scopes (ABI 6, Linux 6.12), the same ruleset also scopes
//! signals and abstract Unix sockets ([`SCOPE_ABI`]): a confined process may signal, and connect
//! to an abstract socket of, only processes in its own domain or one nested in it. So a run
//! cannot stop or kill the front-ends, other runs or the user's processes, nor talk to their
//! abstract sockets; the engine, outside the run's domain (in none, or in one the run's is
//! nested in), still signals the run. Under a supervisor, droid gets one more layer, scopes only
//! ([`scope_ruleset`]), enforced by the supervisor between `fork` and `exec` of droid: the
//! supervisor is then outside droid's domain, and droid's tree cannot signal (stop, kill) the
//! process that ends it. Without scopes (ABI 1 to 5, or `sandbox = "off"`), a run can signal any
//! process of the user, its supervisor included (`doctor` says so).
//!
//! What a run may write ([`Writable`]): `repo_root` (not at autonomy `read_only`), the run's
//! scratch directory (its private `TMPDIR`; not `/tmp` or `/var/tmp`), the provider's own state
//! ([`crate::providers::Provider::state_paths`]), the data-only package caches builds and tests
//! fill ([`CACHE_DIRS`], [`CACHE_FILES`]), the configured
//! `sandbox_writable`, and the terminal-like devices ([`DEVICE_FILES`], [`DEVICE_DIRS`]).
//! Shell rc files, `~/.ssh`, `~/.config` outside the agents' own, `~/.local/bin`, `~/.cargo/bin`
//! and every other repository are not among them. Paths that do not exist when the run starts are
//! left out (Landlock rules hold open files, not names), except the provider's state directories,
//! which are created first (the agent would create them itself).
//!
//! Compatibility is best effort: on a kernel whose Landlock ABI predates a write right
//! (`REFER` in ABI 2, `TRUNCATE` in ABI 3, `IOCTL_DEV` in ABI 5), that right is left unhandled, so
//! the rest is still enforced. Without Landlock at all, `auto` runs unconfined with a warning and
//! `landlock` refuses the run. In debug builds, `DROID_EXECUTOR_TEST_NO_LANDLOCK=1` in the
//! process's environment makes this process behave as on a kernel without Landlock (the tests
//! of that path; release builds ignore the variable).

use std::path::{Path, PathBuf};

use droid_contract::{SandboxInfo, SandboxKind};
use landlock::{
    ABI, Access, AccessFs, CompatLevel, Compatible, PathBeneath, PathFd, RestrictSelf,
    RestrictSelfAttr, Ruleset, RulesetAttr, RulesetCreated, RulesetCreatedAttr, Scope,
};
use serde::{Deserialize, Serialize};

/// The `sandbox` setting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SandboxMode {
    /// Landlock where the kernel offers it; otherwise unconfined, with a warning in the result.
    #[default]
    Auto,
    /// Landlock or nothing: a run on a kernel without Landlock is refused (`error`).
    Landlock,
    /// Unconfined: the agent writes wherever the user can.
    Off,
}

impl SandboxMode {
    /// The setting's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Auto => "auto",
            Self::Landlock => "landlock",
            Self::Off => "off",
        }
    }

    /// Parse the setting's spelling.
    ///
    /// # Errors
    /// What was expected, for anything else.
    pub fn parse(v: &str) -> Result<Self, String> {
        match v.trim() {
            "auto" => Ok(Self::Auto),
            "landlock" => Ok(Self::Landlock),
            "off" => Ok(Self::Off),
            other => Err(format!("{other:?}: expected auto, landlock or off")),
        }
    }
}

/// The variable that, in debug builds only, makes this process act as on a kernel without
/// Landlock (tests of `auto`'s warning and `landlock`'s refusal).
pub const TEST_NO_LANDLOCK_VAR: &str = "DROID_EXECUTOR_TEST_NO_LANDLOCK";

/// Package caches under the home directory that builds and tests write (relative to `$HOME`),
/// data only (issue 29 item 4): what a program later executes or loads as code is not among
/// them, so a run cannot plant code there that the user's own tools run later. Cargo's
/// downloaded `.crate` archives and its registry index (`~/.cargo/registry/cache`, `index`) and
/// git databases (`~/.cargo/git/db`), npm's content-addressed cache (`~/.npm/_cacache`, every
/// entry checked against its integrity hash when read) and logs, rustup's downloads and
/// temporary files. Not `~/.cargo/registry/src` or `~/.cargo/git/checkouts` (unpacked sources
/// whose `build.rs` runs at the next build), `~/.npm/_npx` (packages `npx` runs),
/// `~/.rustup/toolchains` (the user's `cargo` itself), `~/.cache` (go-build objects, pip wheels,
/// every XDG-cache user), `~/.cargo/bin`, `~/.local` or `~/.config`. A build that must unpack a
/// new crate or install a toolchain needs `sandbox_writable` (config or request); the result's
/// `sandbox.writable` lists every grant.
pub const CACHE_DIRS: &[&str] = &[
    ".cargo/registry/cache",
    ".cargo/registry/index",
    ".cargo/git/db",
    ".npm/_cacache",
    ".npm/_logs",
    ".rustup/downloads",
    ".rustup/tmp",
];

/// Single files cargo locks or updates in `$CARGO_HOME` itself (granted one by one, so the rest
/// of `~/.cargo`, `bin/` included, stays read-only).
pub const CACHE_FILES: &[&str] = &[
    ".cargo/.package-cache",
    ".cargo/.package-cache-mutate",
    ".cargo/.global-cache",
];

/// Devices any program may write: the bit buckets, randomness, the controlling terminal.
pub const DEVICE_FILES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/full",
    "/dev/random",
    "/dev/urandom",
    "/dev/tty",
    "/dev/ptmx",
];

/// Device directories: pseudo-terminals and POSIX shared memory.
pub const DEVICE_DIRS: &[&str] = &["/dev/pts", "/dev/shm"];

/// The newest ABI whose file-system rights this code asks for (`IOCTL_DEV`); newer ABIs add no
/// write right.
const FS_ABI: ABI = ABI::V5;

/// The first Landlock ABI with scopes (Linux 6.12): signals and abstract Unix sockets limited to
/// the sender's own domain and those nested in it.
pub const SCOPE_ABI: u32 = 6;

/// The Landlock ABI the running kernel offers, `None` without Landlock (not built in, or not
/// enabled at boot). A few version queries (`landlock_create_ruleset` with the version flag), no
/// ruleset is created; made once per process (the kernel's answer cannot change while it runs),
/// since every run asks.
pub fn kernel_abi() -> Option<u32> {
    static PROBED: std::sync::OnceLock<Option<u32>> = std::sync::OnceLock::new();
    if simulated_absent() {
        return None;
    }
    *PROBED.get_or_init(probe_abi)
}

fn probe_abi() -> Option<u32> {
    // the crate keeps the kernel's number to itself (it wants callers to ask for rights, not
    // versions): each probe asks for the first feature of an ABI as a hard requirement
    let fs = |rights| {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(rights)
            .is_ok()
    };
    let net = || {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .handle_access(landlock::AccessNet::from_all(ABI::V4))
            .is_ok()
    };
    let scope = || {
        Ruleset::default()
            .set_compatibility(CompatLevel::HardRequirement)
            .scope(Scope::from_all(ABI::V6))
            .is_ok()
    };
    let flag = |abi: ABI| {
        let r = RestrictSelf::default().set_compatibility(CompatLevel::HardRequirement);
        match abi {
            ABI::V7 => r.log_subdomains(false).is_ok(),
            _ => r.all_threads(true).is_ok(),
        }
    };
    let probes: [(u32, &dyn Fn() -> bool); 8] = [
        (1, &|| fs(AccessFs::from_all(ABI::V1))),
        (2, &|| fs(AccessFs::Refer.into())),
        (3, &|| fs(AccessFs::Truncate.into())),
        (4, &net),
        (5, &|| fs(AccessFs::IoctlDev.into())),
        (6, &scope),
        (7, &|| flag(ABI::V7)),
        (8, &|| flag(ABI::V8)),
    ];
    let mut abi = None;
    for (n, probe) in probes {
        if !probe() {
            break;
        }
        abi = Some(n);
    }
    abi
}

#[cfg(debug_assertions)]
fn simulated_absent() -> bool {
    std::env::var_os(TEST_NO_LANDLOCK_VAR).is_some_and(|v| v == "1")
}

#[cfg(not(debug_assertions))]
fn simulated_absent() -> bool {
    false
}

/// What a run may write, before it is resolved against the file system.
#[derive(Debug, Clone, Default)]
pub(crate) struct Writable {
    /// The repository (listed first), canonical already: the engine resolved it when the run
    /// began.
    pub(crate) repo_root: PathBuf,
    /// The repository is left out of what may be written (autonomy `read_only`: the kernel keeps
    /// the run from changing it, whatever the agent CLI does).
    pub(crate) repo_read_only: bool,
    /// The run's scratch directory.
    pub(crate) scratch: PathBuf,
    /// The home directory the agent runs with (caches are under it), if any.
    pub(crate) home: Option<PathBuf>,
    /// The provider's own state directories and files.
    pub(crate) state: Vec<PathBuf>,
    /// `sandbox_writable`.
    pub(crate) extra: Vec<PathBuf>,
}

/// The resolved write rules of one run: existing paths, canonical, each once.
#[derive(Debug, Clone)]
pub struct Confinement {
    abi: u32,
    paths: Vec<PathBuf>,
}

impl Confinement {
    /// Resolve `w` on a kernel offering Landlock `abi`: the provider's state directories are
    /// created when missing; every other path that does not exist is left out.
    pub(crate) fn resolve(abi: u32, w: &Writable) -> Self {
        let devices = system_devices();
        let mut rest: Vec<PathBuf> = Vec::new();
        for p in &w.state {
            // a state file (`~/.claude.json`) is never created here: the agent writes it whole
            if p.extension().is_none() && !p.exists() {
                let _ = std::fs::create_dir_all(p);
            }
            rest.push(p.clone());
        }
        if let Some(home) = &w.home {
            rest.extend(CACHE_DIRS.iter().map(|c| home.join(c)));
            rest.extend(CACHE_FILES.iter().map(|c| home.join(c)));
        }
        rest.extend(w.extra.iter().cloned());
        // the order the result lists them in: the run's own paths, the agent's state, the
        // caches, `sandbox_writable`, the devices; the repository was resolved when the run
        // began (and is checked again before the agent starts). Neither /tmp nor /var/tmp: the
        // run's TMPDIR is its scratch directory, and a shared temp directory would let a run
        // write every repository and file under it (docs/operations.md#what-a-run-may-write)
        let own = [
            (!w.repo_read_only).then(|| w.repo_root.clone()),
            crate::real_path::canonical(&w.scratch).ok(),
        ];
        let resolved = own
            .into_iter()
            .flatten()
            .chain(
                rest.iter()
                    .filter_map(|p| crate::real_path::canonical(p).ok()),
            )
            .chain(devices.iter().cloned());
        let mut paths: Vec<PathBuf> = Vec::new();
        for real in resolved {
            if !paths.contains(&real) {
                paths.push(real);
            }
        }
        Self { abi, paths }
    }

    /// The Landlock ABI the kernel offered.
    pub fn abi(&self) -> u32 {
        self.abi
    }

    /// The writable paths, `repo_root` first (when writable).
    pub fn paths(&self) -> &[PathBuf] {
        &self.paths
    }

    /// Whether the run's signals and abstract Unix sockets are scoped too (the kernel has
    /// [`SCOPE_ABI`]).
    pub fn scoped(&self) -> bool {
        self.abi >= SCOPE_ABI
    }

    /// The ruleset for one child, ready to be enforced between `fork` and `exec`
    /// ([`RulesetCreated::restrict_self`]): the write rules, and the scopes where the kernel
    /// has them ([`Confinement::scoped`]).
    ///
    /// # Errors
    /// When the kernel refuses to create the ruleset or a rule (a path that vanished since
    /// [`Confinement::resolve`] is skipped).
    pub fn ruleset(&self) -> std::io::Result<RulesetCreated> {
        let failed = |e: landlock::RulesetError| std::io::Error::other(e.to_string());
        let write = AccessFs::from_write(FS_ABI);
        let mut rules = Ruleset::default().handle_access(write).map_err(failed)?;
        if self.scoped() {
            rules = rules.scope(Scope::from_all(ABI::V6)).map_err(failed)?;
        }
        let mut rules = rules.create().map_err(failed)?;
        for p in &self.paths {
            let Ok(fd) = PathFd::new(p) else { continue };
            // the crate reads the descriptor's type and, best effort, keeps only the file
            // rights for a file: one `fstat` on the descriptor, no second look-up by path
            rules = rules
                .add_rule(PathBeneath::new(fd, write))
                .map_err(failed)?;
        }
        Ok(rules.no_new_privs(true))
    }
}

/// A ruleset of scopes only (signals, abstract Unix sockets; no file-system right): the layer a
/// run's supervisor adds on droid's side, so that the supervisor is outside droid's domain and
/// droid's tree cannot signal it. Enforced between `fork` and `exec` like
/// [`Confinement::ruleset`]; one `landlock_create_ruleset` to build.
///
/// # Errors
/// When the kernel lacks scopes ([`SCOPE_ABI`]) or refuses the ruleset: the agent must not start
/// with its supervisor within reach.
pub fn scope_ruleset() -> std::io::Result<RulesetCreated> {
    let failed = |e: landlock::RulesetError| std::io::Error::other(e.to_string());
    Ok(Ruleset::default()
        .set_compatibility(CompatLevel::HardRequirement)
        .scope(Scope::from_all(ABI::V6))
        .map_err(failed)?
        .create()
        .map_err(failed)?
        .no_new_privs(true))
}

/// The devices ([`DEVICE_FILES`], [`DEVICE_DIRS`]), resolved once per process (those that
/// exist): fixed system paths, asked for by every run. Each run's ruleset opens them again by
/// these names, so one that vanished since is left out then.
fn system_devices() -> &'static Vec<PathBuf> {
    static RESOLVED: std::sync::OnceLock<Vec<PathBuf>> = std::sync::OnceLock::new();
    RESOLVED.get_or_init(|| {
        let real = |p: &&str| crate::real_path::canonical(Path::new(p)).ok();
        DEVICE_FILES
            .iter()
            .chain(DEVICE_DIRS)
            .filter_map(real)
            .collect()
    })
}

/// Whether a run under `mode` on a kernel offering Landlock `abi` is confined by it (what
/// [`plan`] decides, known before the run's paths are).
pub(crate) fn confines(mode: SandboxMode, abi: Option<u32>) -> bool {
    mode != SandboxMode::Off && abi.is_some()
}

/// How one run is confined, decided when it starts.
#[derive(Debug, Clone)]
pub(crate) struct Plan {
    /// The rules, when Landlock confines the run.
    pub(crate) confinement: Option<Confinement>,
    /// What the result says.
    pub(crate) info: SandboxInfo,
    /// A warning for the result's logs (`auto` on a kernel without Landlock).
    pub(crate) warning: Option<String>,
}

/// Decide how a run is confined under `mode` with Landlock ABI `abi` (`None`: not offered).
///
/// # Errors
/// The refusal, for `landlock` on a kernel without Landlock: the run must not start.
pub(crate) fn plan(mode: SandboxMode, abi: Option<u32>, w: &Writable) -> Result<Plan, String> {
    let none = |reason: &str| SandboxInfo {
        kind: SandboxKind::None,
        abi: None,
        writable: Vec::new(),
        reason: Some(reason.to_owned()),
    };
    match (mode, abi) {
        (SandboxMode::Off, _) => Ok(Plan {
            confinement: None,
            info: none("off by config"),
            warning: None,
        }),
        (SandboxMode::Landlock, None) => Err(
            "sandbox = \"landlock\" but this kernel offers no Landlock (not built in, or not \
             enabled at boot: see /sys/kernel/security/lsm)"
                .to_owned(),
        ),
        (SandboxMode::Auto, None) => Ok(Plan {
            confinement: None,
            info: none("kernel without Landlock"),
            warning: Some(
                "sandbox: this kernel offers no Landlock; the agent ran unconfined (sandbox = \
                 \"auto\"; set sandbox = \"landlock\" to refuse such runs)"
                    .to_owned(),
            ),
        }),
        (SandboxMode::Auto | SandboxMode::Landlock, Some(abi)) => {
            let c = Confinement::resolve(abi, w);
            Ok(Plan {
                info: SandboxInfo {
                    kind: SandboxKind::Landlock,
                    abi: Some(abi),
                    writable: c.paths().iter().map(|p| p.display().to_string()).collect(),
                    reason: None,
                },
                confinement: Some(c),
                warning: None,
            })
        }
    }
}

/// The paths a denied write names in an agent's tool output or a command's stderr: node's
/// `EACCES: permission denied, open '/p'`, the shells' `cannot create /p: Permission denied`
/// and `/p: Permission denied`, coreutils' `cannot touch '/p': Permission denied`. Each once,
/// in order, at most `limit`.
pub(crate) fn denied_paths(text: &str, limit: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in text.lines() {
        if out.len() >= limit {
            break;
        }
        let lower = line.to_ascii_lowercase();
        if !lower.contains("permission denied")
            && !lower.contains("eacces")
            && !lower.contains("operation not permitted")
        {
            continue;
        }
        if let Some(p) = path_in(line)
            && !out.contains(&p)
        {
            out.push(p);
        }
    }
    out
}

/// The path a denial in `line` names: a quoted absolute path (node's `open '/p'`, coreutils'
/// `'/p'`), else the last unquoted one (`/bin/sh: 1: cannot create /p: Permission denied` names
/// the shell first), without trailing punctuation, and with an atomic writer's temporary name
/// (`/d/.name.1a2b3c.tmp`) turned back into the file it stood for (`/d/name`).
fn path_in(line: &str) -> Option<String> {
    let quoted = ['\'', '"', '`'].into_iter().find_map(|q| {
        line.split(q)
            .skip(1)
            .step_by(2)
            .find(|c| c.starts_with('/') && c.len() > 1)
            .map(str::to_owned)
    });
    let path = quoted.or_else(|| {
        without_shell_prefix(line)
            .split(char::is_whitespace)
            .map(|w| w.trim_end_matches([':', ',', ';', ')', '.', '\'', '"']))
            .rfind(|w| w.starts_with('/') && w.len() > 1)
            .map(str::to_owned)
    })?;
    Some(untemp(&path))
}

/// `line` without the shell's own prefix, `<shell>: <n>: ` (dash) or `<shell>: line <n>: `
/// (bash): the shell names itself, not the denied path (`/bin/sh: 1: ./check.sh: Permission
/// denied` is a script the shell could not execute, nothing about `/bin/sh`).
fn without_shell_prefix(line: &str) -> &str {
    let Some((_, rest)) = line.split_once(": ") else {
        return line;
    };
    let rest_after_line = rest.strip_prefix("line ").unwrap_or(rest);
    match rest_after_line.split_once(": ") {
        Some((n, after)) if !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()) => after,
        _ => line,
    }
}

/// `/d/.name.<hex>.tmp` → `/d/name` (droid's file tools write a hidden temporary beside the
/// target, then rename it); anything else unchanged.
fn untemp(path: &str) -> String {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    let inner = name
        .strip_prefix('.')
        .and_then(|n| n.strip_suffix(".tmp"))
        .and_then(|n| n.rsplit_once('.'))
        .filter(|(_, hex)| !hex.is_empty() && hex.chars().all(|c| c.is_ascii_hexdigit()));
    match inner {
        Some((orig, _)) if !orig.is_empty() => format!("{dir}/{orig}"),
        _ => path.to_owned(),
    }
}

/// Where a provider keeps state under `home` or in variables of `env`.
pub(crate) fn env_path(
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    name: &str,
) -> Option<PathBuf> {
    env.iter()
        .find(|(k, v)| k == name && !v.is_empty())
        .map(|(_, v)| PathBuf::from(v))
}

/// `home` joined with each of `rel`.
pub(crate) fn under(home: &Path, rel: &[&str]) -> Vec<PathBuf> {
    rel.iter().map(|r| home.join(r)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn denied_paths_are_read_from_the_usual_messages() {
        let text = "Error: EACCES: permission denied, open '/home/u/..bashrc-planted.2c58a66773a5.tmp'\n\
                    /bin/sh: 1: cannot create /home/u/escaped: Permission denied\n\
                    touch: cannot touch '/srv/other/x': Permission denied\n\
                    /home/u/escaped: Permission denied\n\
                    all fine: /not/a/denial\n\
                    /bin/sh: 1: ./check.sh: Permission denied\n\
                    /bin/bash: line 1: ./check.sh: Permission denied\n";
        assert_eq!(
            denied_paths(text, 10),
            vec![
                "/home/u/.bashrc-planted".to_owned(),
                "/home/u/escaped".to_owned(),
                "/srv/other/x".to_owned(),
            ]
        );
    }

    /// A child in a scoped layer (the run's ruleset, or the supervisor's scope-only layer for
    /// droid) cannot signal this process, outside its domain; this process still signals it.
    #[tokio::test]
    async fn a_scoped_child_cannot_signal_out_of_its_domain_but_is_signalled() {
        use crate::process::spawn::{SpawnSpec, spawn_confined, spawn_inheriting};
        use std::os::unix::process::ExitStatusExt as _;
        // the kernel's own answer, whatever this process's environment simulates
        let Some(abi) = probe_abi().filter(|abi| *abi >= SCOPE_ABI) else {
            assert!(scope_ruleset().is_err(), "scopes on a kernel before ABI 6");
            return;
        };
        let sh = |command: String| SpawnSpec {
            program: "/bin/sh".into(),
            args: vec!["-c".into(), command.into()],
            cwd: std::env::temp_dir(),
            env: vec![("PATH".into(), "/usr/bin:/bin".into())],
            stdin_piped: false,
            stdin_file: None,
            detach_log: None,
            rlimits: crate::process::limits::Rlimits::NONE,
        };
        let probe = sh(format!("kill -0 {} 2>/dev/null", std::process::id()));
        let code =
            |mut child: tokio::process::Child| async move { child.wait().await.unwrap().code() };
        let w = Writable {
            repo_root: std::env::temp_dir(),
            ..Writable::default()
        };
        let confined = Confinement::resolve(abi, &w);
        assert!(confined.scoped());
        assert_eq!(
            code(spawn_confined(&probe, Some(&confined)).unwrap()).await,
            Some(1)
        );
        assert_eq!(code(spawn_inheriting(&probe, true).unwrap()).await, Some(1));
        assert_eq!(
            code(spawn_inheriting(&probe, false).unwrap()).await,
            Some(0)
        );
        // below ABI 6 the same rules scope nothing
        let unscoped = Confinement::resolve(5, &w);
        assert!(!unscoped.scoped());
        assert_eq!(
            code(spawn_confined(&probe, Some(&unscoped)).unwrap()).await,
            Some(0)
        );

        let mut held = spawn_inheriting(&sh("exec sleep 30".into()), true).unwrap();
        let pid = nix::unistd::Pid::from_raw(i32::try_from(held.id().unwrap()).unwrap());
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM).unwrap();
        assert_eq!(held.wait().await.unwrap().signal(), Some(15));
    }

    #[test]
    fn the_setting_parses_its_three_spellings() {
        for m in [SandboxMode::Auto, SandboxMode::Landlock, SandboxMode::Off] {
            assert_eq!(SandboxMode::parse(m.as_str()), Ok(m));
        }
        assert!(SandboxMode::parse("on").is_err());
    }

    #[test]
    fn off_and_a_missing_kernel_feature_say_why() {
        let w = Writable::default();
        let off = plan(SandboxMode::Off, Some(7), &w).unwrap();
        assert_eq!(off.info.reason.as_deref(), Some("off by config"));
        assert!(off.confinement.is_none());
        let auto = plan(SandboxMode::Auto, None, &w).unwrap();
        assert_eq!(auto.info.kind, SandboxKind::None);
        assert!(auto.warning.is_some());
        assert!(plan(SandboxMode::Landlock, None, &w).is_err());
    }
}
