//! Installing the real droid CLI from npm, pinned: its platform package (the binary; the line
//! docs/operations.md gives users is `npm install -g` of the same package and version), and for
//! the suites that check what `doctor` says of it, the `@factory/cli` launcher of
//! [`LAUNCHER_VERSION`] (a Node script that runs a platform package's binary) on its own.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::sh::{output, run, workspace_root};

/// The droid version the suite and the reference recordings are made with.
pub(crate) const VERSION: &str = "0.225.2";
const PACKAGE: &str = "@factory/cli-linux-x64";
/// The launcher package.
const LAUNCHER: &str = "@factory/cli";
/// The launcher the suites lay out without its platform package: the one the registry gave a new
/// user, which then failed with "Could not find the droid binary for linux-x64".
pub(crate) const LAUNCHER_VERSION: &str = "0.225.1";

/// Where the binary lives once fetched.
pub(crate) fn droid_path() -> PathBuf {
    workspace_root()
        .join("target/droid")
        .join(VERSION)
        .join("package/bin/droid")
}

fn version_of(bin: &std::path::Path) -> Option<String> {
    let out = Command::new(bin).arg("--version").output().ok()?;
    out.status
        .success()
        .then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// Where the launcher's package directory is once fetched (`package/bin/droid`,
/// `package/package.json`, …).
pub(crate) fn launcher_path() -> PathBuf {
    workspace_root()
        .join("target/droid")
        .join(format!("launcher-{LAUNCHER_VERSION}"))
        .join("package")
}

/// The pinned install line users are given (docs/operations.md, `doctor`).
pub(crate) fn install_line() -> String {
    format!("npm install -g {PACKAGE}@{VERSION}")
}

/// Install droid under `target/droid/<version>/` unless it is already there, and the launcher
/// beside it; returns droid's path.
pub(crate) fn fetch() -> Result<PathBuf> {
    let bin = fetch_binary()?;
    if !launcher_path().join("package.json").is_file() {
        let dir = launcher_path();
        let dir = dir.parent().unwrap_or(&dir);
        unpack(LAUNCHER, LAUNCHER_VERSION, dir)?;
    }
    Ok(bin)
}

fn fetch_binary() -> Result<PathBuf> {
    let bin = droid_path();
    if version_of(&bin).as_deref() == Some(VERSION) {
        return Ok(bin);
    }
    let dir = workspace_root().join("target/droid").join(VERSION);
    unpack(PACKAGE, VERSION, &dir)?;
    match version_of(&bin) {
        Some(v) if v == VERSION => Ok(bin),
        Some(v) => bail!("{} reports version {v}, expected {VERSION}", bin.display()),
        None => bail!("{} does not run (`--version` failed)", bin.display()),
    }
}

/// `npm pack` of `package@version`, unpacked into `dir` (as `dir/package/`).
fn unpack(package: &str, version: &str, dir: &Path) -> Result<()> {
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let spec = format!("{package}@{version}");
    if Command::new("npm").arg("--version").output().is_err() {
        bail!(
            "npm is needed to install droid ({spec}; users install it with `{}`); install \
             Node.js and npm",
            install_line()
        );
    }
    eprintln!("xtask: installing {spec} with npm pack …");
    let tgz = output(
        Command::new("npm")
            .args(["pack", &spec, "--silent", "--pack-destination"])
            .arg(dir),
    )
    .with_context(|| format!("npm pack {spec} failed (is the npm registry reachable?)"))?;
    let tgz = tgz.lines().last().unwrap_or("").trim().to_owned();
    if tgz.is_empty() {
        bail!("npm pack {spec} printed no file name");
    }
    run(Command::new("tar")
        .arg("xzf")
        .arg(dir.join(&tgz))
        .arg("-C")
        .arg(dir))
    .with_context(|| format!("could not unpack {spec}"))?;
    let _ = std::fs::remove_file(dir.join(&tgz));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The line users are given is the package and version this fetches and the suites test.
    #[test]
    fn the_documented_install_line_is_the_package_fetched_here() {
        let line = install_line();
        assert_eq!(line, "npm install -g @factory/cli-linux-x64@0.225.2");
        let docs = std::fs::read_to_string(workspace_root().join("docs/operations.md")).unwrap();
        assert!(
            docs.lines().any(|l| l.trim() == line),
            "docs/operations.md does not give the install line `{line}` on a line of its own"
        );
    }
}
