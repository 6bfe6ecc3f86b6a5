//! Running commands from xtask.

use std::path::PathBuf;
use std::process::Command;

use anyhow::{Context, Result, bail};

/// The workspace root (xtask lives one level below it).
pub(crate) fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map_or(here.clone(), PathBuf::from)
}

/// `cargo` as invoked us (or the one on PATH), in the workspace root.
pub(crate) fn cargo() -> Command {
    let mut c = Command::new(std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into()));
    c.current_dir(workspace_root());
    c
}

/// Run to completion; a non-zero exit is an error naming the command.
pub(crate) fn run(cmd: &mut Command) -> Result<()> {
    let status = cmd
        .status()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !status.success() {
        bail!("{cmd:?} exited with {status}");
    }
    Ok(())
}

/// Run and capture stdout.
pub(crate) fn output(cmd: &mut Command) -> Result<String> {
    let out = cmd
        .output()
        .with_context(|| format!("could not start {cmd:?}"))?;
    if !out.status.success() {
        bail!(
            "{cmd:?} exited with {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Build `droid-executor` and the test binaries (fake droid, scripted model) in `profile`
/// (`debug` or `release`); the directory they are in.
pub(crate) fn build_bins(profile: &str) -> Result<PathBuf> {
    let mut cmd = cargo();
    cmd.args(["build", "--quiet"]);
    if profile == "release" {
        cmd.arg("--release");
    }
    run(cmd.args(["-p", "wrapper-cli", "-p", "tests", "--bins"]))
        .context("building droid-executor and the test binaries")?;
    Ok(workspace_root().join("target").join(profile))
}

/// Make `repo` a git repository with everything in it committed as `message`.
pub(crate) fn git_commit_all(repo: &std::path::Path, message: &str) -> Result<()> {
    for args in [
        &["init", "-q"][..],
        &["add", "-A"][..],
        &["commit", "-qm", message][..],
    ] {
        output(
            Command::new("git")
                .args([
                    "-c",
                    "user.name=xtask",
                    "-c",
                    "user.email=xtask@example.invalid",
                    // no automatic gc after the commit: on a 100k-file repository it packed
                    // 100,000 objects in a detached process, competing for the CPUs with the
                    // measurement that followed
                    "-c",
                    "gc.auto=0",
                    "-c",
                    "maintenance.auto=false",
                ])
                .args(args)
                .current_dir(repo),
        )?;
    }
    Ok(())
}
