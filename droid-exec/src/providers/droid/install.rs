//! droid as npm installs it. Two kinds of package (measured with 0.225.1 and 0.225.2):
//! - the launcher `@factory/cli`: its `bin/droid` (linked onto `PATH` by npm) is a Node script
//!   that runs the binary of a platform package it lists as an optional dependency, found the
//!   way Node resolves modules: in its own `node_modules`, then in the `node_modules` around it.
//!   Without it, it prints `Error: Could not find the droid binary for linux-x64.` and exits 1
//!   (`@factory/cli` 0.225.1 from a registry without `@factory/cli-linux-x64@0.225.1`);
//!   reinstalling the launcher does not help;
//! - the platform package (`@factory/cli-linux-x64`, and `-baseline` for x86-64 CPUs without
//!   AVX2, `@factory/cli-linux-arm64`): the binary itself in `bin/droid`, but its `package.json`
//!   declares no program, so `npm install -g` of it alone links nothing onto `PATH`.
//!
//! So the one pinned install line is the platform package's ([`install_line`]), and droid is
//! looked for where npm puts it under a global prefix ([`in_prefix`]), or beside the launcher
//! `PATH` names ([`launcher`]), whose binary is then run directly.
//!
//! Everything under the prefix or the launcher's directory is looked up one component at a time
//! without following a symlink, and must be owned by root or by us and writable by no one else
//! (group-writable only for root's group or ours): npm creates real directories there, so
//! a symlink or a file another user could have put there is not droid's. The walk is bounded
//! (two layouts, at most two packages, nine components).

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use nix::fcntl::OFlag;
use nix::sys::stat::{FileStat, Mode, fstat};

use crate::no_follow::{self, Kind};

/// The launcher package.
pub(crate) const LAUNCHER: &str = "@factory/cli";

/// The scope of droid's packages.
const SCOPE: &str = "@factory";

/// The platform packages that hold droid's binary for this machine, the one to install first
/// (names within [`SCOPE`]).
#[cfg(target_arch = "x86_64")]
pub(crate) const PLATFORM: &[&str] = &["cli-linux-x64", "cli-linux-x64-baseline"];
/// The platform packages that hold droid's binary for this machine, the one to install first
/// (names within [`SCOPE`]).
#[cfg(target_arch = "aarch64")]
pub(crate) const PLATFORM: &[&str] = &["cli-linux-arm64"];
/// The platform packages that hold droid's binary for this machine (none is published for it).
#[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
pub(crate) const PLATFORM: &[&str] = &[];

/// The platform package to install here (`@factory/cli-linux-x64`).
pub(crate) fn platform_package() -> String {
    format!("{SCOPE}/{}", PLATFORM.first().copied().unwrap_or("cli"))
}

/// The line that installs droid `version` so that it works: its platform package, pinned.
pub(crate) fn install_line(version: &str) -> String {
    format!("npm install -g {}@{version}", platform_package())
}

/// droid's binary in a platform package installed under the npm global prefix `prefix`: on its
/// own (`<prefix>/lib/node_modules/@factory/cli-linux-x64/bin/droid`, what [`install_line`]
/// makes), else in the launcher's own dependencies
/// (`<prefix>/lib/node_modules/@factory/cli/node_modules/@factory/cli-linux-x64/bin/droid`).
pub(crate) fn in_prefix(prefix: &Path) -> Option<PathBuf> {
    PLATFORM.iter().find_map(|p| {
        trusted(prefix, &["lib", "node_modules", SCOPE, p, "bin", "droid"]).or_else(|| {
            trusted(
                prefix,
                &[
                    "lib",
                    "node_modules",
                    SCOPE,
                    "cli",
                    "node_modules",
                    SCOPE,
                    p,
                    "bin",
                    "droid",
                ],
            )
        })
    })
}

/// The launcher a program found on `PATH` is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Launcher {
    /// Its package directory (`…/node_modules/@factory/cli`), symlinks resolved.
    pub(crate) dir: PathBuf,
    /// Its version, from its `package.json`.
    pub(crate) version: Option<String>,
    /// The platform binary it runs, when installed where it looks first: in its own
    /// `node_modules`, else beside it.
    pub(crate) binary: Option<PathBuf>,
    /// Its `bin/droid` is still the Node script (its install script did not replace it with the
    /// binary): without a platform package it cannot run.
    pub(crate) script: bool,
}

/// `program` as the `@factory/cli` launcher: `None` when its real path is not `bin/droid` of a
/// package named `@factory/cli`.
pub(crate) fn launcher(program: &Path) -> Option<Launcher> {
    let real = crate::real_path::canonical(program).ok()?;
    let bin = real.parent()?;
    if real.file_name()? != "droid" || bin.file_name()? != "bin" {
        return None;
    }
    let dir = bin.parent()?.to_path_buf();
    let (name, version) = crate::providers::npm::manifest(&dir.join("package.json"))?;
    if name != LAUNCHER {
        return None;
    }
    let node_modules = dir.parent().and_then(Path::parent);
    let binary = PLATFORM.iter().find_map(|p| {
        trusted(&dir, &["node_modules", SCOPE, p, "bin", "droid"])
            .or_else(|| node_modules.and_then(|nm| trusted(nm, &[SCOPE, p, "bin", "droid"])))
    });
    Some(Launcher {
        script: starts_with_shebang(&real),
        dir,
        version,
        binary,
    })
}

fn starts_with_shebang(path: &Path) -> bool {
    use std::io::Read as _;
    let mut head = [0u8; 2];
    std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut head))
        .is_ok()
        && head == *b"#!"
}

/// Owned by root or by us, writable by no one else (group-writable only for root's group or
/// ours: npm under a umask of 002 makes directories group-writable).
fn owned_safely(st: &FileStat) -> bool {
    let me = nix::unistd::geteuid().as_raw();
    let my_group = nix::unistd::getegid().as_raw();
    let mode = st.st_mode;
    (st.st_uid == 0 || st.st_uid == me)
        && mode & 0o002 == 0
        && (mode & 0o020 == 0 || st.st_gid == 0 || st.st_gid == my_group)
}

/// `base` joined with `rel`, when `base` is a directory and every component of `rel` is found
/// without following a symlink and [`owned_safely`], the last an executable regular file.
fn trusted(base: &Path, rel: &[&str]) -> Option<PathBuf> {
    let (last, dirs) = rel.split_last()?;
    let mut dir: OwnedFd = nix::fcntl::open(
        base,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .ok()?;
    if !owned_safely(&fstat(&dir).ok()?) {
        return None;
    }
    for name in dirs {
        let next = no_follow::open_dir(&dir, OsStr::new(name)).ok()?;
        if !owned_safely(&fstat(&next).ok()?) {
            return None;
        }
        dir = next;
    }
    let st = no_follow::stat_at(&dir, OsStr::new(last)).ok()??;
    (Kind::of(&st) == Kind::File && st.st_mode & 0o111 != 0 && owned_safely(&st))
        .then(|| rel.iter().fold(base.to_path_buf(), |p, n| p.join(n)))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt as _;

    use pretty_assertions::assert_eq;

    use super::*;

    struct Dir(PathBuf);

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn temp(name: &str) -> Dir {
        let d = std::env::temp_dir().join(format!("droid-install-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        Dir(d)
    }

    /// An executable file at `path` (its directories made 0755).
    fn program(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn the_install_line_is_the_platform_package_pinned() {
        assert_eq!(
            install_line("0.225.2"),
            format!("npm install -g @factory/{}@0.225.2", PLATFORM[0])
        );
    }

    #[test]
    fn a_platform_package_is_found_on_its_own_or_nested_in_the_launcher() {
        let p = temp("prefix");
        let plat = PLATFORM[0];
        assert_eq!(in_prefix(&p.0), None);
        let nested = p.0.join(format!(
            "lib/node_modules/@factory/cli/node_modules/@factory/{plat}/bin/droid"
        ));
        program(&nested, "#!/bin/sh\n");
        assert_eq!(in_prefix(&p.0), Some(nested));
        let own =
            p.0.join(format!("lib/node_modules/@factory/{plat}/bin/droid"));
        program(&own, "#!/bin/sh\n");
        assert_eq!(in_prefix(&p.0), Some(own.clone()));
        // not executable: not a program
        std::fs::set_permissions(&own, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_ne!(in_prefix(&p.0).as_deref(), Some(own.as_path()));
    }

    #[test]
    fn a_symlink_or_a_directory_anyone_may_write_is_not_followed() {
        let p = temp("unsafe");
        let plat = PLATFORM[0];
        let elsewhere = p.0.join("elsewhere/bin/droid");
        program(&elsewhere, "#!/bin/sh\n");
        let scope = p.0.join("prefix/lib/node_modules/@factory");
        std::fs::create_dir_all(&scope).unwrap();
        std::os::unix::fs::symlink(p.0.join("elsewhere"), scope.join(plat)).unwrap();
        assert_eq!(in_prefix(&p.0.join("prefix")), None);

        let open = p.0.join("open");
        let bin = open.join(format!("lib/node_modules/@factory/{plat}/bin/droid"));
        program(&bin, "#!/bin/sh\n");
        assert_eq!(in_prefix(&open), Some(bin.clone()));
        let lib = open.join("lib");
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(in_prefix(&open), None);
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o757)).unwrap();
        assert_eq!(in_prefix(&open), None);
    }

    #[test]
    fn a_launcher_is_known_by_its_package_and_finds_its_binary_as_node_would() {
        let p = temp("launcher");
        let plat = PLATFORM[0];
        let nm = p.0.join("lib/node_modules");
        let dir = nm.join("@factory/cli");
        program(&dir.join("bin/droid"), "#!/usr/bin/env node\n");
        std::fs::write(
            dir.join("package.json"),
            r#"{"name":"@factory/cli","version":"0.225.1"}"#,
        )
        .unwrap();
        let link = p.0.join("bin/droid");
        std::fs::create_dir_all(link.parent().unwrap()).unwrap();
        std::os::unix::fs::symlink("../lib/node_modules/@factory/cli/bin/droid", &link).unwrap();
        let real = |p: &Path| crate::real_path::canonical(p).unwrap();
        assert_eq!(
            launcher(&link),
            Some(Launcher {
                dir: real(&dir),
                version: Some("0.225.1".into()),
                binary: None,
                script: true,
            })
        );
        let sibling = nm.join(format!("@factory/{plat}/bin/droid"));
        program(&sibling, "\x7fELF");
        assert_eq!(
            launcher(&link).and_then(|l| l.binary),
            Some(real(&nm).join(format!("@factory/{plat}/bin/droid")))
        );
        let nested = dir.join(format!("node_modules/@factory/{plat}/bin/droid"));
        program(&nested, "\x7fELF");
        assert_eq!(
            launcher(&link).and_then(|l| l.binary),
            Some(real(&dir).join(format!("node_modules/@factory/{plat}/bin/droid")))
        );
        // another package's bin/droid is no launcher
        std::fs::write(
            dir.join("package.json"),
            r#"{"name":"@factory/cli-linux-x64","version":"0.225.2"}"#,
        )
        .unwrap();
        assert_eq!(launcher(&link), None);
    }
}
