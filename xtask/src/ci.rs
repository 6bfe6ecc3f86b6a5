//! `cargo xtask ci`: everything CI checks, in one place (`.ci/run` installs the machine's
//! packages and then calls this). The whole suite first, real agent CLIs included (the README's
//! test command, `cargo xtask test`), with the fault tests' observations checked against
//! docs/reliability.md; a short soak of the bridge and the MCP server; the README's and
//! docs/providers.md's tours against what the binary prints now; an install into a fresh root;
//! then the house rules (fmt, clippy, generated files). It ends with the totals of every test
//! binary, the line CI's log is read by.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

use crate::sh::{cargo, run};

/// Passed and failed tests, summed over every `test result:` line of cargo's output.
#[derive(Debug, Default, PartialEq, Eq)]
struct Totals {
    passed: u64,
    failed: u64,
}

impl Totals {
    /// Count one line of cargo test's output (`test result: ok. 12 passed; 0 failed; …`).
    fn count(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("test result: ") else {
            return;
        };
        for part in rest.split(';') {
            let mut words = part.split_whitespace().rev();
            let (Some(kind), Some(n)) = (words.next(), words.next()) else {
                continue;
            };
            let Ok(n) = n.parse::<u64>() else { continue };
            match kind {
                "passed" => self.passed += n,
                "failed" => self.failed += n,
                _ => {}
            }
        }
    }
}

pub(crate) fn ci() -> Result<()> {
    crate::preflight::require("ci", crate::preflight::TEST)?;
    let scratch = tempdir()?;
    let faults = scratch.join("faults.log");
    let totals = suite(&faults)?;
    let checks = (|| -> Result<()> {
        crate::reliability::reliability(&["--check", "--observed", path_str(&faults)?])?;
        crate::soak::soak(&["--time", "20", "--check"])?;
        crate::demo::demo(&["--check-readme"])?;
        crate::demo::demo(&["--providers", "--check-readme"])?;
        install(&scratch.join("root"))?;
        run(cargo().args(["fmt", "--all", "--", "--check"]))
            .context("cargo fmt --check: run `cargo fmt --all`")?;
        run(cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--quiet",
            "--",
            "-D",
            "warnings",
        ]))
        .context("clippy found problems")?;
        crate::codegen(true)
    })();
    drop(std::fs::remove_dir_all(&scratch));
    println!("ci: {} passed, {} failed", totals.passed, totals.failed);
    checks
}

/// The whole suite (`cargo xtask test`), its output streamed and counted; an `Err` when a test
/// failed.
fn suite(faults: &Path) -> Result<Totals> {
    let exe = std::env::current_exe().context("finding xtask's own binary")?;
    let mut child = Command::new(exe)
        .arg("test")
        .env("DROID_EXECUTOR_FAULT_LOG", faults)
        .stdout(Stdio::piped())
        .spawn()
        .context("starting `cargo xtask test`")?;
    let mut totals = Totals::default();
    if let Some(out) = child.stdout.take() {
        let mut stdout = std::io::stdout().lock();
        for line in BufReader::new(out).lines() {
            let line = line.context("reading the suite's output")?;
            totals.count(&line);
            writeln!(stdout, "{line}").context("writing the suite's output")?;
        }
    }
    let status = child.wait().context("waiting for `cargo xtask test`")?;
    if !status.success() {
        println!("ci: {} passed, {} failed", totals.passed, totals.failed);
        bail!("the test suite failed ({status})");
    }
    Ok(totals)
}

/// The binary installs the way the README says, into a fresh root (reusing this build:
/// `--debug`, the workspace's target dir), and runs.
fn install(root: &Path) -> Result<()> {
    let root_s = path_str(root)?;
    run(cargo().args([
        "install",
        "--quiet",
        "--debug",
        "--locked",
        "--path",
        "wrapper-cli",
        "--root",
        root_s,
    ]))
    .context("cargo install of the binary")?;
    let bin = root.join("bin/droid-executor");
    run(Command::new(&bin).arg("--version"))?;
    let skills = root.join("skills");
    run(Command::new(&bin)
        .args(["setup", "skill", "--dir"])
        .arg(&skills))?;
    let skill = skills.join("droid-executor/SKILL.md");
    if !skill.is_file() {
        bail!("`setup skill` wrote no {}", skill.display());
    }
    Ok(())
}

fn tempdir() -> Result<std::path::PathBuf> {
    let dir = std::env::temp_dir().join(format!("xtask-ci-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    Ok(dir)
}

fn path_str(p: &Path) -> Result<&str> {
    p.to_str()
        .with_context(|| format!("{} is not UTF-8", p.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_add_up_every_test_binary() {
        let mut t = Totals::default();
        for line in [
            "test result: ok. 41 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 10.52s",
            "test result: FAILED. 500 passed; 2 failed; 1 ignored; 0 measured; 0 filtered out",
            "running 3 tests",
            "test foo ... ok",
        ] {
            t.count(line);
        }
        assert_eq!(
            t,
            Totals {
                passed: 541,
                failed: 2
            }
        );
    }
}
