//! Installing the real droid CLI from npm, pinned.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

use crate::sh::{output, run, workspace_root};

/// The droid version the suite and the reference recordings are made with.
pub(crate) const VERSION: &str = "0.225.2";
const PACKAGE: &str = "@factory/cli-linux-x64";

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

/// Install droid under `target/droid/<version>/` unless it is already there; returns its path.
pub(crate) fn fetch() -> Result<PathBuf> {
    let bin = droid_path();
    if version_of(&bin).as_deref() == Some(VERSION) {
        return Ok(bin);
    }
    let dir = workspace_root().join("target/droid").join(VERSION);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    if Command::new("npm").arg("--version").output().is_err() {
        bail!(
            "npm is needed to install droid ({PACKAGE}@{VERSION}); install Node.js and npm (e.g. apt-get install -y nodejs npm)"
        );
    }
    eprintln!("xtask: installing {PACKAGE}@{VERSION} with npm pack …");
    let spec = format!("{PACKAGE}@{VERSION}");
    let tgz = output(
        Command::new("npm")
            .args(["pack", &spec, "--silent", "--pack-destination"])
            .arg(&dir),
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
        .arg(&dir))
    .context("could not unpack the droid package")?;
    let _ = std::fs::remove_file(dir.join(&tgz));
    match version_of(&bin) {
        Some(v) if v == VERSION => Ok(bin),
        Some(v) => bail!("{} reports version {v}, expected {VERSION}", bin.display()),
        None => bail!("{} does not run (`--version` failed)", bin.display()),
    }
}
