//! Preflight: every program outside the workspace that the test suite and xtask's own commands
//! run, checked before anything is fetched or built, so a fresh machine learns in one message
//! all that is missing and the one `apt-get install` line that provides it (instead of a few
//! tests failing at the end of a long build).
//!
//! The list is the programs the `tests` crate and xtask start (grep `Command::new` and the
//! `sh -c` scripts there): keep it, the README's "Prerequisites" and `.ci/run` (which installs
//! them on a fresh machine) in step.

use std::ffi::OsString;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Result, bail};

/// The oldest git the engine works with: the snapshot asks `git rev-parse --path-format=absolute`
/// (git 2.31).
const GIT_MIN: (u32, u32) = (2, 31);
/// The oldest Node.js the Node MCP clients (TypeScript SDK v2, Inspector 2) run on.
const NODE_MIN: (u32, u32) = (20, 0);
/// The library the clock-jump fault tests preload (`LD_PRELOAD`), and where they look for it
/// (the same directories as `libfaketime()` in `tests/tests/suite/faults_store.rs`).
const FAKETIME_LIB: &str = "libfaketimeMT.so.1";
const FAKETIME_DIRS: &[&str] = &[
    "/usr/lib/x86_64-linux-gnu/faketime",
    "/usr/lib/aarch64-linux-gnu/faketime",
    "/usr/lib64/faketime",
    "/usr/lib/faketime",
    "/usr/local/lib/faketime",
];
/// How Node.js 20 or later is had where the distribution's `nodejs` is older (what `.ci/run`
/// does).
const NODE_UPGRADE: &str = "Node.js 20 or later is needed and the distribution's nodejs may be \
    older: `npm install -g node@22` (puts node 22 first on PATH), or Node.js from nodejs.org";
/// How to allow the unprivileged user namespaces `unshare -rm` needs.
const USERNS_FIX: &str = "allow unprivileged user namespaces: `sysctl -w \
    kernel.unprivileged_userns_clone=1` (Debian), `sysctl -w \
    kernel.apparmor_restrict_unprivileged_userns=0` (Ubuntu 23.10 and later), or run as root";

/// One thing a command needs from the machine.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Need {
    /// `git`, 2.31 or later: snapshots, the sample repositories.
    Git,
    /// `node`, 20 or later: the Node MCP and ACP clients, the pm2 file check.
    Node,
    /// `npm`: fetches droid and the Node MCP and ACP clients.
    Npm,
    /// `tar`: unpacks the droid package.
    Tar,
    /// `python3`: the Python MCP and ACP SDK sessions, the ACP transcript tee and validator, the
    /// demo's sample repository.
    Python3,
    /// `python3 -m venv` with ensurepip: the Python MCP and ACP SDK venvs.
    PythonVenv,
    /// `curl`: the bridge suite's real HTTP client.
    Curl,
    /// libfaketime: the clock-jump fault tests.
    Faketime,
    /// `strace`: the store suite proves a task is fsynced before its id is handed out.
    Strace,
    /// `systemd-analyze`: the packaging suite verifies the systemd unit.
    SystemdAnalyze,
    /// `unshare`: the store fault tests mount file systems in a user + mount namespace.
    Unshare,
    /// Unprivileged user namespaces (`unshare -rm true` runs).
    UserNamespaces,
    /// `mount`: the same tests, inside the namespace.
    Mount,
    /// `setsid`: the fake droid starts grandchildren in their own session.
    Setsid,
    /// `sh`: verification commands, the fake droid's grandchildren, test scripts.
    Sh,
    /// `sleep` (coreutils): the processes the tests leave for the engine to kill.
    Sleep,
    /// `kill` (procps): the soak ends what it started.
    Kill,
    /// `wrk`: the load generator of `bench bridge` and `bench report`.
    Wrk,
}

/// What `cargo xtask test` and `ci` need: everything the whole suite runs.
pub(crate) const TEST: &[Need] = &[
    Need::Git,
    Need::Node,
    Need::Npm,
    Need::Tar,
    Need::Python3,
    Need::PythonVenv,
    Need::Curl,
    Need::Faketime,
    Need::Strace,
    Need::SystemdAnalyze,
    Need::Unshare,
    Need::UserNamespaces,
    Need::Mount,
    Need::Setsid,
    Need::Sh,
    Need::Sleep,
];
/// What `cargo xtask demo` needs: droid from npm, the sample Python repository under git.
pub(crate) const DEMO: &[Need] = &[Need::Git, Need::Npm, Need::Tar, Need::Python3, Need::Sh];
/// What `cargo xtask demo --providers` and `bench engine` need: the demo's, plus Node.js for the
/// agent CLIs from npm (Codex's launcher and Gemini CLI are Node programs).
pub(crate) const PROVIDERS: &[Need] = &[
    Need::Git,
    Need::Node,
    Need::Npm,
    Need::Tar,
    Need::Python3,
    Need::Sh,
];
/// What `cargo xtask soak` needs: the fake droid's world.
pub(crate) const SOAK: &[Need] = &[Need::Git, Need::Sh, Need::Kill];
/// What `cargo xtask bench bridge` (and `bench report`) needs: the repositories, the seed's
/// Python bridge, the load generator.
pub(crate) const BENCH_BRIDGE: &[Need] = &[Need::Git, Need::Python3, Need::Wrk];
/// What `cargo xtask reliability` needs: droid from npm and the fault suites.
pub(crate) const RELIABILITY: &[Need] = &[
    Need::Git,
    Need::Npm,
    Need::Tar,
    Need::Faketime,
    Need::Unshare,
    Need::UserNamespaces,
    Need::Mount,
    Need::Setsid,
    Need::Sh,
    Need::Sleep,
];

impl Need {
    /// The name a user knows it by.
    fn name(self) -> &'static str {
        match self {
            Need::Git => "git",
            Need::Node => "node",
            Need::Npm => "npm",
            Need::Tar => "tar",
            Need::Python3 => "python3",
            Need::PythonVenv => "python3 venv",
            Need::Curl => "curl",
            Need::Faketime => "libfaketime",
            Need::Strace => "strace",
            Need::SystemdAnalyze => "systemd-analyze",
            Need::Unshare => "unshare",
            Need::UserNamespaces => "user namespaces",
            Need::Mount => "mount",
            Need::Setsid => "setsid",
            Need::Sh => "sh",
            Need::Sleep => "sleep",
            Need::Kill => "kill",
            Need::Wrk => "wrk",
        }
    }

    /// The program looked up on PATH (none for the library and the kernel setting).
    fn program(self) -> Option<&'static str> {
        match self {
            Need::Git => Some("git"),
            Need::Node => Some("node"),
            Need::Npm => Some("npm"),
            Need::Tar => Some("tar"),
            Need::Python3 | Need::PythonVenv => Some("python3"),
            Need::Curl => Some("curl"),
            Need::Strace => Some("strace"),
            Need::SystemdAnalyze => Some("systemd-analyze"),
            Need::Unshare | Need::UserNamespaces => Some("unshare"),
            Need::Mount => Some("mount"),
            Need::Setsid => Some("setsid"),
            Need::Sh => Some("sh"),
            Need::Sleep => Some("sleep"),
            Need::Kill => Some("kill"),
            Need::Wrk => Some("wrk"),
            Need::Faketime => None,
        }
    }

    /// The Debian/Ubuntu package that provides it (none for the kernel setting).
    fn package(self) -> Option<&'static str> {
        match self {
            Need::Git => Some("git"),
            Need::Node => Some("nodejs"),
            Need::Npm => Some("npm"),
            Need::Tar => Some("tar"),
            Need::Python3 => Some("python3"),
            Need::PythonVenv => Some("python3-venv"),
            Need::Curl => Some("curl"),
            Need::Faketime => Some("faketime"),
            Need::Strace => Some("strace"),
            Need::SystemdAnalyze => Some("systemd"),
            Need::Unshare | Need::Setsid => Some("util-linux"),
            Need::Mount => Some("mount"),
            Need::Sh => Some("dash"),
            Need::Sleep => Some("coreutils"),
            Need::Kill => Some("procps"),
            Need::Wrk => Some("wrk"),
            Need::UserNamespaces => None,
        }
    }

    /// The need this one is checked through (not checked when that one is missing).
    fn depends_on(self) -> Option<Need> {
        match self {
            Need::PythonVenv => Some(Need::Python3),
            Need::UserNamespaces => Some(Need::Unshare),
            Need::Git
            | Need::Node
            | Need::Npm
            | Need::Tar
            | Need::Python3
            | Need::Curl
            | Need::Faketime
            | Need::Strace
            | Need::SystemdAnalyze
            | Need::Unshare
            | Need::Mount
            | Need::Setsid
            | Need::Sh
            | Need::Sleep
            | Need::Kill
            | Need::Wrk => None,
        }
    }

    /// What in the suite uses it.
    fn used_for(self) -> &'static str {
        match self {
            Need::Git => "snapshots and the sample repositories",
            Need::Node => "the Node MCP and ACP clients and the pm2 file check",
            Need::Npm => "fetching droid 0.225.2 and the Node MCP and ACP clients",
            Need::Tar => "unpacking the droid package",
            Need::Python3 => {
                "the Python MCP and ACP SDK sessions, the ACP transcript tee and validator, and the \
                 demo's sample repository"
            }
            Need::PythonVenv => "the venvs of the Python MCP and ACP SDKs",
            Need::Curl => "the bridge suite's HTTP client",
            Need::Faketime => "the clock-jump fault tests",
            Need::Strace => "the store suite's proof that a task is durable before its id is given",
            Need::SystemdAnalyze => "the packaging suite's check of the systemd unit",
            Need::Unshare | Need::UserNamespaces | Need::Mount => {
                "the store fault tests (file systems mounted in a user + mount namespace)"
            }
            Need::Setsid => "the fake droid's grandchildren",
            Need::Sh => "verification commands and test scripts",
            Need::Sleep => "processes the tests leave for the engine to kill",
            Need::Kill => "the soak's clean-up",
            Need::Wrk => "the load generator of bench bridge and bench report (not the suite)",
        }
    }
}

/// Where programs and libraries are looked for: the real machine, or a test's fake one.
pub(crate) struct Host {
    /// The PATH programs are found on (and run with).
    pub(crate) path: OsString,
    /// The directories searched for libfaketime.
    pub(crate) lib_dirs: Vec<PathBuf>,
}

impl Host {
    /// This machine, as the test suite will see it.
    pub(crate) fn current() -> Host {
        Host {
            path: std::env::var_os("PATH").unwrap_or_default(),
            lib_dirs: FAKETIME_DIRS.iter().map(PathBuf::from).collect(),
        }
    }

    /// The first executable file named `program` on PATH.
    fn find(&self, program: &str) -> Option<PathBuf> {
        std::env::split_paths(&self.path)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join(program))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }

    /// Runs `program ARGS` with this host's PATH (the rest of the environment as the suite will
    /// have it: a pyenv shim, say, needs HOME); its stdout when it exits 0.
    fn run(&self, program: &Path, args: &[&str]) -> Option<String> {
        let out = Command::new(program)
            .args(args)
            .env("PATH", &self.path)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

/// Something needed that this host lacks, and why it does not do.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Missing {
    pub(crate) need: Need,
    pub(crate) problem: String,
}

/// The first `major.minor` in `text` (`git version 2.47.3`, `v20.20.2`).
fn version_in(text: &str) -> Option<(u32, u32)> {
    let start = text.find(|c: char| c.is_ascii_digit())?;
    let mut parts = text[start..]
        .split(|c: char| !c.is_ascii_digit())
        .map(str::parse::<u32>);
    let major = parts.next()?.ok()?;
    let minor = parts.next().and_then(Result::ok).unwrap_or(0);
    Some((major, minor))
}

/// Whether `program --version` reports at least `min`; the problem otherwise.
fn check_version(host: &Host, program: &Path, min: (u32, u32)) -> Result<(), String> {
    let Some(out) = host.run(program, &["--version"]) else {
        return Err(format!("`{} --version` failed", program.display()));
    };
    match version_in(&out) {
        Some(v) if v >= min => Ok(()),
        Some((major, minor)) => Err(format!(
            "version {major}.{minor} is too old, {}.{} or later is needed",
            min.0, min.1
        )),
        None => Err(format!(
            "`{} --version` printed no version: {:?}",
            program.display(),
            out.trim()
        )),
    }
}

/// Checks one need on `host`.
fn check(host: &Host, need: Need) -> Result<(), String> {
    if need == Need::Faketime {
        return match host.lib_dirs.iter().any(|d| d.join(FAKETIME_LIB).is_file()) {
            true => Ok(()),
            false => Err(format!("{FAKETIME_LIB} not found in {}", {
                let dirs: Vec<String> = host
                    .lib_dirs
                    .iter()
                    .map(|d| d.display().to_string())
                    .collect();
                dirs.join(", ")
            })),
        };
    }
    let program = need.program().unwrap_or(need.name());
    let Some(path) = host.find(program) else {
        return Err("not found on PATH".to_owned());
    };
    match need {
        Need::Git => check_version(host, &path, GIT_MIN),
        Need::Node => check_version(host, &path, NODE_MIN),
        Need::PythonVenv => match host.run(&path, &["-c", "import ensurepip, venv"]) {
            Some(_) => Ok(()),
            None => Err("`python3 -c 'import ensurepip, venv'` failed".to_owned()),
        },
        Need::UserNamespaces => match host.run(&path, &["-rm", "true"]) {
            Some(_) => Ok(()),
            None => Err(
                "`unshare -rm true` failed: unprivileged user namespaces are not allowed"
                    .to_owned(),
            ),
        },
        Need::Npm
        | Need::Tar
        | Need::Python3
        | Need::Curl
        | Need::Faketime
        | Need::Strace
        | Need::SystemdAnalyze
        | Need::Unshare
        | Need::Mount
        | Need::Setsid
        | Need::Sh
        | Need::Sleep
        | Need::Kill
        | Need::Wrk => Ok(()),
    }
}

/// Every need of `needs` that `host` does not meet. A need checked through a missing program is
/// not checked: user namespaces are not reported when unshare is missing, python3's venv is
/// (its package is needed as well as python3's).
pub(crate) fn missing(host: &Host, needs: &[Need]) -> Vec<Missing> {
    let mut found: Vec<Missing> = Vec::new();
    for &need in needs {
        if need
            .depends_on()
            .is_some_and(|d| found.iter().any(|m| m.need == d))
        {
            // Debian's python3 comes without venv: installing python3 alone would not do
            if need == Need::PythonVenv {
                found.push(Missing {
                    need,
                    problem: "needs python3 (which Debian and Ubuntu ship without venv)".to_owned(),
                });
            }
            continue;
        }
        if let Err(problem) = check(host, need) {
            found.push(Missing { need, problem });
        }
    }
    found
}

/// The one message naming everything missing for `what` and how to install it.
pub(crate) fn message(what: &str, missing: &[Missing]) -> String {
    let mut text = format!(
        "`cargo xtask {what}` needs {} more {} on this machine (checked before building):\n",
        missing.len(),
        if missing.len() == 1 {
            "thing"
        } else {
            "things"
        }
    );
    let width = missing
        .iter()
        .map(|m| m.need.name().len())
        .max()
        .unwrap_or(0);
    for m in missing {
        let source = match m.need.package() {
            Some(p) => format!("package {p}"),
            None => "a kernel setting".to_owned(),
        };
        text.push_str(&format!(
            "  {:<width$}  {}; {source}; needed for {}\n",
            m.need.name(),
            m.problem,
            m.need.used_for(),
        ));
    }
    let mut packages: Vec<&str> = Vec::new();
    let mut notes: Vec<&str> = Vec::new();
    for m in missing {
        if m.need == Need::Node {
            // a distribution's nodejs may be older than 20: say how to get a newer one either way
            notes.push(NODE_UPGRADE);
            if m.problem.contains("too old") {
                continue;
            }
        }
        match m.need.package() {
            Some(p) if !packages.contains(&p) => packages.push(p),
            Some(_) => {}
            None => notes.push(USERNS_FIX),
        }
    }
    if !packages.is_empty() {
        text.push_str(&format!(
            "install (Debian/Ubuntu): sudo apt-get install -y {}\n",
            packages.join(" ")
        ));
    }
    for note in notes {
        text.push_str(&format!("and: {note}\n"));
    }
    text.push_str("(README.md, Prerequisites, lists what provides what; .ci/run installs them)");
    text
}

/// Fails with [`message`] unless this machine has every need of `needs`.
pub(crate) fn require(what: &str, needs: &[Need]) -> Result<()> {
    let missing = missing(&Host::current(), needs);
    if missing.is_empty() {
        return Ok(());
    }
    bail!("{}", message(what, &missing))
}

/// The commands beyond the suite whose needs `cargo xtask preflight` checks too, by name.
const OTHERS: &[(&str, &[Need])] = &[
    ("demo", DEMO),
    ("soak", SOAK),
    ("reliability", RELIABILITY),
    ("bench bridge", BENCH_BRIDGE),
];

/// `cargo xtask preflight`: every need of every command, one line each (OK or what is wrong),
/// then the install line for what `cargo xtask test` lacks; what only other commands need
/// (`wrk`, `kill`) is said apart and does not fail the check.
pub(crate) fn report() -> Result<()> {
    let (lines, lacking) = check_all(&Host::current());
    print!("{lines}");
    match lacking {
        Ok(()) => Ok(()),
        Err(message) => bail!("{message}"),
    }
}

/// What [`report`] prints for `host`, and the message it fails with (`Err`) when the suite
/// (`cargo xtask test`) lacks something.
fn check_all(host: &Host) -> (String, std::result::Result<(), String>) {
    let mut all: Vec<Need> = Vec::new();
    for &need in TEST.iter().chain(OTHERS.iter().flat_map(|(_, n)| n.iter())) {
        if !all.contains(&need) {
            all.push(need);
        }
    }
    let missing = missing(host, &all);
    let mut text = String::new();
    for need in &all {
        let unchecked = need
            .depends_on()
            .filter(|d| missing.iter().any(|m| m.need == *d));
        let line = match (missing.iter().find(|m| m.need == *need), unchecked) {
            (Some(m), _) => format!("MISSING {:<16} {}", need.name(), m.problem),
            (None, Some(d)) => format!(
                "-       {:<16} not checked: {} is missing",
                need.name(),
                d.name()
            ),
            (None, None) => format!("OK      {:<16} {}", need.name(), need.used_for()),
        };
        text.push_str(&line);
        text.push('\n');
    }
    // what only other commands need: said with the commands and its package, never counted
    // among what the suite needs
    for m in missing.iter().filter(|m| !TEST.contains(&m.need)) {
        let commands: Vec<String> = OTHERS
            .iter()
            .filter(|(_, needs)| needs.contains(&m.need))
            .map(|(name, _)| format!("`cargo xtask {name}`"))
            .collect();
        let install = m.need.package().map_or_else(String::new, |p| {
            format!("; install (Debian/Ubuntu): sudo apt-get install -y {p}")
        });
        text.push_str(&format!(
            "not needed by `cargo xtask test`: {} is missing for {} only{install}\n",
            m.need.name(),
            commands.join(", ")
        ));
    }
    let for_the_suite: Vec<Missing> = missing
        .into_iter()
        .filter(|m| TEST.contains(&m.need))
        .collect();
    if for_the_suite.is_empty() {
        return (text, Ok(()));
    }
    (text, Err(message("test", &for_the_suite)))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A fake machine: a PATH directory of scripts and a library directory, removed on drop.
    struct FakeHost {
        dir: PathBuf,
    }

    impl FakeHost {
        /// Every need met: each program a script that prints a recent version and exits 0,
        /// libfaketime present.
        fn complete(name: &str) -> FakeHost {
            let dir = std::env::temp_dir().join(format!(
                "droid-executor-preflight-{}-{name}",
                std::process::id()
            ));
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(dir.join("bin")).unwrap();
            std::fs::create_dir_all(dir.join("lib")).unwrap();
            std::fs::write(dir.join("lib").join(FAKETIME_LIB), "").unwrap();
            let fake = FakeHost { dir };
            for program in [
                "npm",
                "tar",
                "python3",
                "curl",
                "strace",
                "systemd-analyze",
                "unshare",
                "mount",
                "setsid",
                "sh",
                "sleep",
                "kill",
                "wrk",
            ] {
                fake.program(program, "echo 1.0.0");
            }
            fake.program("git", "echo 'git version 2.47.3'");
            fake.program("node", "echo v22.1.0");
            fake
        }

        /// (Re)writes `bin/NAME` as a script running `body` (the real `sh` runs it).
        fn program(&self, name: &str, body: &str) {
            let path = self.dir.join("bin").join(name);
            std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
        }

        fn remove(&self, name: &str) {
            std::fs::remove_file(self.dir.join("bin").join(name)).unwrap();
        }

        fn host(&self) -> Host {
            Host {
                path: self.dir.join("bin").into_os_string(),
                lib_dirs: vec![self.dir.join("lib")],
            }
        }
    }

    impl Drop for FakeHost {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn names(missing: &[Missing]) -> Vec<&'static str> {
        missing.iter().map(|m| m.need.name()).collect()
    }

    #[test]
    fn versions_are_read_from_what_the_programs_print() {
        assert_eq!(version_in("git version 2.47.3"), Some((2, 47)));
        assert_eq!(version_in("v20.20.2\n"), Some((20, 20)));
        assert_eq!(
            version_in("git version 2.30.1 (Apple Git-130)"),
            Some((2, 30))
        );
        assert_eq!(version_in("22"), Some((22, 0)));
        assert_eq!(version_in("no digits"), None);
    }

    /// One test for every fake machine (the scripts it writes are run in it, so no other
    /// test thread forks while one is open for writing).
    #[test]
    fn preflight_reports_everything_missing_at_once_with_its_package() {
        let fake = FakeHost::complete("decisions");
        assert_eq!(missing(&fake.host(), TEST), Vec::new());
        assert_eq!(missing(&fake.host(), SOAK), Vec::new());

        // a non-executable file of the right name is not the program
        std::fs::set_permissions(
            fake.dir.join("bin/curl"),
            std::fs::Permissions::from_mode(0o644),
        )
        .unwrap();
        // libfaketime, systemd-analyze and curl missing: all three in one answer
        std::fs::remove_file(fake.dir.join("lib").join(FAKETIME_LIB)).unwrap();
        fake.remove("systemd-analyze");
        let found = missing(&fake.host(), TEST);
        assert_eq!(names(&found), ["curl", "libfaketime", "systemd-analyze"]);
        let text = message("test", &found);
        assert!(
            text.contains("needs 3 more things on this machine"),
            "{text}"
        );
        assert!(
            text.contains("sudo apt-get install -y curl faketime systemd\n"),
            "{text}"
        );
        assert!(
            text.contains("libfaketime      libfaketimeMT.so.1 not found in"),
            "{text}"
        );
        assert!(
            text.contains("package faketime; needed for the clock-jump fault tests"),
            "{text}"
        );
        // what the soak needs is still there
        assert_eq!(missing(&fake.host(), SOAK), Vec::new());

        // too old a git and node; node's fix is not apt's nodejs
        fake.program("git", "echo 'git version 2.30.1'");
        fake.program("node", "echo v18.19.1");
        let found = missing(&fake.host(), &[Need::Git, Need::Node]);
        assert_eq!(
            found,
            [
                Missing {
                    need: Need::Git,
                    problem: "version 2.30 is too old, 2.31 or later is needed".to_owned(),
                },
                Missing {
                    need: Need::Node,
                    problem: "version 18.19 is too old, 20.0 or later is needed".to_owned(),
                },
            ]
        );
        let text = message("test", &found);
        assert!(text.contains("sudo apt-get install -y git\n"), "{text}");
        assert!(text.contains("`npm install -g node@22`"), "{text}");

        // a program that does not run is not there either
        fake.program("git", "exit 127");
        let found = missing(&fake.host(), &[Need::Git]);
        assert!(found[0].problem.contains("--version` failed"), "{found:?}");

        // python3 without venv; user namespaces refused (a kernel setting, no package)
        fake.program("python3", "[ \"$1\" = -c ] && exit 1; echo Python 3.12.3");
        fake.program("unshare", "[ \"$1\" = -rm ] && exit 1; exit 0");
        let found = missing(
            &fake.host(),
            &[
                Need::Python3,
                Need::PythonVenv,
                Need::Unshare,
                Need::UserNamespaces,
            ],
        );
        assert_eq!(names(&found), ["python3 venv", "user namespaces"]);
        let text = message("test", &found);
        assert!(
            text.contains("sudo apt-get install -y python3-venv\n"),
            "{text}"
        );
        assert!(text.contains("a kernel setting"), "{text}");
        assert!(
            text.contains("kernel.unprivileged_userns_clone=1"),
            "{text}"
        );

        // no python3 or unshare at all: one line each, not one more for what hangs off them
        fake.remove("python3");
        fake.remove("unshare");
        let found = missing(
            &fake.host(),
            &[
                Need::Python3,
                Need::PythonVenv,
                Need::Unshare,
                Need::UserNamespaces,
            ],
        );
        assert_eq!(names(&found), ["python3", "python3 venv", "unshare"]);
        assert!(
            message("test", &found)
                .contains("sudo apt-get install -y python3 python3-venv util-linux\n")
        );

        // an empty PATH: every program is missing, each package named once
        let empty = Host {
            path: OsString::new(),
            lib_dirs: Vec::new(),
        };
        let found = missing(&empty, TEST);
        assert_eq!(
            names(&found),
            [
                "git",
                "node",
                "npm",
                "tar",
                "python3",
                "python3 venv",
                "curl",
                "libfaketime",
                "strace",
                "systemd-analyze",
                "unshare",
                "mount",
                "setsid",
                "sh",
                "sleep",
            ]
        );
        let text = message("test", &found);
        assert!(
            text.contains(
                "sudo apt-get install -y git nodejs npm tar python3 python3-venv curl faketime \
                 strace systemd util-linux mount dash coreutils\n"
            ),
            "{text}"
        );
        // the distribution's nodejs may be too old: the way to a newer one is said at once
        assert!(text.contains("`npm install -g node@22`"), "{text}");

        // `preflight` counts among what `cargo xtask test` needs only what the suite runs: `wrk`
        // (bench bridge) and `kill` (soak) missing are said apart, with their commands, and do
        // not fail the check; with `curl` missing too, the suite needs exactly one thing
        drop(fake);
        let fake = FakeHost::complete("others");
        let (_, lacking) = check_all(&fake.host());
        assert_eq!(lacking, Ok(()));
        fake.remove("wrk");
        fake.remove("kill");
        let (text, lacking) = check_all(&fake.host());
        assert_eq!(lacking, Ok(()), "{text}");
        assert!(text.contains("MISSING wrk"), "{text}");
        assert!(
            text.contains(
                "not needed by `cargo xtask test`: wrk is missing for `cargo xtask bench bridge` \
                 only; install (Debian/Ubuntu): sudo apt-get install -y wrk\n"
            ),
            "{text}"
        );
        assert!(
            text.contains(
                "not needed by `cargo xtask test`: kill is missing for `cargo xtask soak` only"
            ),
            "{text}"
        );
        fake.remove("curl");
        let (_, lacking) = check_all(&fake.host());
        let message = lacking.unwrap_err();
        assert!(
            message.starts_with("`cargo xtask test` needs 1 more thing on this machine"),
            "{message}"
        );
        assert!(
            message.contains("sudo apt-get install -y curl\n"),
            "{message}"
        );
        assert!(
            !message.contains("wrk") && !message.contains("kill"),
            "{message}"
        );
    }
}
