//! `cargo xtask fuzz [--time SECS] [--target NAME] [--stable]`: run the cargo-fuzz targets in
//! `fuzz/` one after the other, each for a bounded time, and report what they did.
//!
//! - cargo-fuzz is installed under `target/tools` when missing (`cargo install --locked`);
//! - libFuzzer needs unstable compiler flags (sanitizers, coverage): a nightly toolchain is used
//!   when rustup lists one, otherwise (or with `--stable`) the current toolchain with
//!   `RUSTC_BOOTSTRAP=1`; the report says which;
//! - the seeds in `fuzz/seeds/<target>/` are copied into a working corpus under
//!   `target/fuzz/corpus/<target>/` that grows from run to run; crash inputs go to
//!   `target/fuzz/artifacts/<target>/`, the fuzz build to `target/fuzz-build/`, each run's
//!   output to `target/fuzz/logs/<target>.log`;
//! - per target it prints seconds, executions, executions per second, corpus size, peak RSS and
//!   OK or the crash input's path; it fails when any target crashed.

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{Context, Result, bail};

use crate::sh::{cargo, output, run, workspace_root};

/// The targets, in the order they run (`fuzz/fuzz_targets/<name>.rs`).
const TARGETS: &[&str] = &[
    "contract_request",
    "stream_json",
    "jsonrpc_framing",
    "http_request",
];
/// Seconds per target when `--time` is not given.
const DEFAULT_SECONDS: u64 = 60;
/// The cargo-fuzz release installed when missing.
const CARGO_FUZZ_VERSION: &str = "0.13.2";
/// libFuzzer's per-input limit. The targets bound their own waits (20 to 30 s) and fail with a
/// message first; this only catches a hang outside those bounds.
const INPUT_TIMEOUT_SECS: u64 = 60;
/// libFuzzer's memory limit: the AddressSanitizer builds peak near 500 MiB.
const RSS_LIMIT_MB: u64 = 2048;

const USAGE: &str = "usage: cargo xtask fuzz [--time SECS] [--target NAME] [--stable]";

/// How the fuzz build gets its unstable flags.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Toolchain {
    /// A nightly toolchain rustup knows, by name.
    Nightly(String),
    /// The toolchain that runs xtask, with `RUSTC_BOOTSTRAP=1`; `forced` by `--stable` rather
    /// than for want of a nightly.
    Bootstrap { forced: bool },
}

impl Toolchain {
    /// A nightly when rustup lists one (unless `force_stable`), else the bootstrap fallback.
    fn pick(force_stable: bool) -> Toolchain {
        if force_stable {
            return Toolchain::Bootstrap { forced: true };
        }
        let listed = output(Command::new("rustup").args(["toolchain", "list"])).unwrap_or_default();
        listed
            .lines()
            .filter_map(|l| l.split_whitespace().next())
            .find(|name| name.starts_with("nightly"))
            .map_or(Toolchain::Bootstrap { forced: false }, |name| {
                Toolchain::Nightly(name.to_owned())
            })
    }

    fn describe(&self) -> String {
        match self {
            Toolchain::Nightly(name) => format!("toolchain {name}"),
            Toolchain::Bootstrap { forced } => format!(
                "the stable toolchain with RUSTC_BOOTSTRAP=1 ({})",
                if *forced {
                    "--stable"
                } else {
                    "rustup lists no nightly"
                }
            ),
        }
    }
}

/// What one target's run did.
#[derive(Debug, Default)]
struct Outcome {
    seconds: u64,
    execs: u64,
    execs_per_sec: u64,
    peak_rss_mb: Option<u64>,
    corpus_files: usize,
    corpus_bytes: u64,
    /// The input libFuzzer saved (crash, timeout or out-of-memory).
    artifact: Option<String>,
    /// Set when the run failed without saving an input.
    failure: Option<String>,
}

/// Entry point: parse the arguments, build once, run each target in turn, report.
pub(crate) fn fuzz(args: &[&str]) -> Result<()> {
    let mut seconds = DEFAULT_SECONDS;
    let mut only: Option<&str> = None;
    let mut force_stable = false;
    let mut rest = args.iter();
    while let Some(arg) = rest.next() {
        match *arg {
            "--time" => {
                let v = rest.next().context(USAGE)?;
                seconds =
                    v.parse().ok().filter(|s| *s > 0).with_context(|| {
                        format!("--time {v:?}: a whole number of seconds above 0")
                    })?;
            }
            "--target" => {
                let v = rest.next().context(USAGE)?;
                if !TARGETS.contains(v) {
                    bail!("no fuzz target {v:?}; targets: {}", TARGETS.join(", "));
                }
                only = Some(v);
            }
            "--stable" => force_stable = true,
            other => bail!("unknown argument {other:?}\n{USAGE}"),
        }
    }
    let targets: Vec<&str> = match only {
        Some(t) => vec![t],
        None => TARGETS.to_vec(),
    };

    let root = workspace_root();
    let cargo_fuzz = ensure_cargo_fuzz(&root)?;
    let toolchain = Toolchain::pick(force_stable);
    println!("fuzz: building with {}", toolchain.describe());
    let build_dir = root.join("target/fuzz-build");
    let mut build = cargo_fuzz_cmd(&cargo_fuzz, &toolchain);
    build.args(["build", "--target-dir"]).arg(&build_dir);
    if let Some(t) = only {
        build.arg(t);
    }
    run(&mut build).context("building the fuzz targets")?;

    let mut outcomes = Vec::new();
    for target in &targets {
        outcomes.push((
            *target,
            run_target(&root, &cargo_fuzz, &toolchain, target, seconds)?,
        ));
    }
    print_report(&toolchain, &outcomes);
    let crashed: Vec<String> = outcomes
        .iter()
        .filter_map(|(t, o)| match (&o.artifact, &o.failure) {
            (Some(a), _) => Some(format!("{t}: {a}")),
            (None, Some(f)) => Some(format!("{t}: {f}")),
            (None, None) => None,
        })
        .collect();
    if !crashed.is_empty() {
        bail!(
            "fuzzing failed:\n  {}\nreproduce one with `target/tools/bin/cargo-fuzz fuzz run --target-dir target/fuzz-build <target> <input>` (with the toolchain above: RUSTUP_TOOLCHAIN=nightly…, or RUSTC_BOOTSTRAP=1)",
            crashed.join("\n  ")
        );
    }
    Ok(())
}

/// `target/tools/bin/cargo-fuzz`, installed there first when missing.
fn ensure_cargo_fuzz(root: &Path) -> Result<PathBuf> {
    let tools = root.join("target/tools");
    let bin = tools.join("bin/cargo-fuzz");
    if bin.is_file() {
        return Ok(bin);
    }
    println!(
        "fuzz: installing cargo-fuzz {CARGO_FUZZ_VERSION} under {}",
        tools.display()
    );
    run(cargo()
        .args([
            "install",
            "cargo-fuzz",
            "--locked",
            "--version",
            CARGO_FUZZ_VERSION,
            "--root",
        ])
        .arg(&tools))
    .context("installing cargo-fuzz (it comes from crates.io)")?;
    if !bin.is_file() {
        bail!("cargo install did not produce {}", bin.display());
    }
    Ok(bin)
}

/// `cargo-fuzz fuzz …` in the workspace root with the toolchain chosen. cargo-fuzz runs `cargo`
/// from PATH (rustup's proxy), so the toolchain is picked through `RUSTUP_TOOLCHAIN`; what the
/// outer `cargo xtask` set for its own build is removed so that it cannot pin the inner one.
fn cargo_fuzz_cmd(cargo_fuzz: &Path, toolchain: &Toolchain) -> Command {
    let mut cmd = Command::new(cargo_fuzz);
    cmd.arg("fuzz").current_dir(workspace_root());
    for var in [
        "CARGO",
        "RUSTC",
        "RUSTDOC",
        "RUSTC_WRAPPER",
        "CARGO_TARGET_DIR",
        "RUSTFLAGS",
    ] {
        cmd.env_remove(var);
    }
    match toolchain {
        Toolchain::Nightly(name) => {
            cmd.env("RUSTUP_TOOLCHAIN", name)
                .env_remove("RUSTC_BOOTSTRAP");
        }
        Toolchain::Bootstrap { .. } => {
            // the toolchain running xtask stays (rustup passes it down in RUSTUP_TOOLCHAIN),
            // unless that is a nightly (`cargo +nightly xtask fuzz --stable`): then stable
            if std::env::var("RUSTUP_TOOLCHAIN").is_ok_and(|t| t.starts_with("nightly")) {
                cmd.env("RUSTUP_TOOLCHAIN", "stable");
            }
            cmd.env("RUSTC_BOOTSTRAP", "1");
        }
    }
    cmd
}

/// Seed the working corpus, run `cargo fuzz run` for `seconds`, read its figures.
fn run_target(
    root: &Path,
    cargo_fuzz: &Path,
    toolchain: &Toolchain,
    target: &str,
    seconds: u64,
) -> Result<Outcome> {
    let seeds = root.join("fuzz/seeds").join(target);
    let corpus = root.join("target/fuzz/corpus").join(target);
    let artifacts = root.join("target/fuzz/artifacts").join(target);
    let logs = root.join("target/fuzz/logs");
    for dir in [&corpus, &artifacts, &logs] {
        std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    }
    let mut seeded = 0;
    for entry in std::fs::read_dir(&seeds).with_context(|| format!("read {}", seeds.display()))? {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), corpus.join(entry.file_name()))
                .with_context(|| format!("copy {}", entry.path().display()))?;
            seeded += 1;
        }
    }
    let log_path = logs.join(format!("{target}.log"));
    let log = File::create(&log_path).with_context(|| format!("create {}", log_path.display()))?;
    println!(
        "fuzz: {target} for {seconds} s ({seeded} seeds; corpus {}; log {})",
        corpus.display(),
        log_path.display()
    );
    let mut cmd = cargo_fuzz_cmd(cargo_fuzz, toolchain);
    cmd.args(["run", "--target-dir"])
        .arg(root.join("target/fuzz-build"))
        .arg(target)
        .arg(&corpus)
        .arg("--")
        .arg(format!("-max_total_time={seconds}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_SECS}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        .arg("-print_final_stats=1")
        // after cargo-fuzz's own -artifact_prefix (inside fuzz/): libFuzzer takes the last one
        .arg(format!("-artifact_prefix={}/", artifacts.display()))
        .stdin(Stdio::null())
        .stdout(log.try_clone()?)
        .stderr(log);
    let started = Instant::now();
    let status = cmd
        .status()
        .with_context(|| format!("could not start {}", cargo_fuzz.display()))?;
    let wall = started.elapsed().as_secs();
    let text = std::fs::read_to_string(&log_path).unwrap_or_default();
    let mut out = parse_log(&text);
    if out.seconds == 0 {
        out.seconds = wall;
    }
    (out.corpus_files, out.corpus_bytes) = dir_size(&corpus)?;
    if !status.success() && out.artifact.is_none() {
        out.failure = Some(format!("exited with {status}; see {}", log_path.display()));
    }
    Ok(out)
}

/// The figures libFuzzer prints at the end (`-print_final_stats=1`) and the saved input, if any.
fn parse_log(text: &str) -> Outcome {
    let mut out = Outcome::default();
    let number = |s: &str| s.trim().parse::<u64>().ok();
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("stat::number_of_executed_units:") {
            out.execs = number(v).unwrap_or(out.execs);
        } else if let Some(v) = line.strip_prefix("stat::average_exec_per_sec:") {
            out.execs_per_sec = number(v).unwrap_or(out.execs_per_sec);
        } else if let Some(v) = line.strip_prefix("stat::peak_rss_mb:") {
            out.peak_rss_mb = number(v);
        } else if let Some(rest) = line.strip_prefix("Done ") {
            // "Done 180489 runs in 61 second(s)"
            let words: Vec<&str> = rest.split_whitespace().collect();
            if let [runs, "runs", "in", secs, ..] = words.as_slice() {
                out.execs = number(runs).unwrap_or(out.execs);
                out.seconds = number(secs).unwrap_or(out.seconds);
            }
        } else if let Some((_, path)) = line.split_once("Test unit written to ") {
            out.artifact = Some(path.trim().to_owned());
        }
    }
    out
}

/// Files and bytes in `dir` (not recursive: libFuzzer keeps a flat corpus).
fn dir_size(dir: &Path) -> Result<(usize, u64)> {
    let mut files = 0;
    let mut bytes = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("read {}", dir.display()))? {
        let meta = entry?.metadata()?;
        if meta.is_file() {
            files += 1;
            bytes += meta.len();
        }
    }
    Ok((files, bytes))
}

fn print_report(toolchain: &Toolchain, outcomes: &[(&str, Outcome)]) {
    println!();
    println!("fuzz results ({}):", toolchain.describe());
    println!(
        "{:<18} {:>7} {:>12} {:>9} {:>8} {:>10} {:>9}  result",
        "target", "seconds", "execs", "execs/s", "corpus", "corpus KiB", "peak RSS"
    );
    for (target, o) in outcomes {
        let result = match (&o.artifact, &o.failure) {
            (Some(a), _) => format!("CRASH {a}"),
            (None, Some(f)) => format!("FAILED {f}"),
            (None, None) => "OK".into(),
        };
        let rss = o
            .peak_rss_mb
            .map_or_else(|| "?".into(), |m| format!("{m} MiB"));
        println!(
            "{:<18} {:>7} {:>12} {:>9} {:>8} {:>10} {:>9}  {result}",
            target,
            o.seconds,
            o.execs,
            o.execs_per_sec,
            o.corpus_files,
            o.corpus_bytes / 1024,
            rss
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_libfuzzer_final_stats_and_the_crash_input() {
        let log = "#180489\tDONE   cov: 2081 ft: 8449 corp: 913/2369Kb\n\
                   Done 180489 runs in 61 second(s)\n\
                   stat::number_of_executed_units: 180489\n\
                   stat::average_exec_per_sec:     2958\n\
                   stat::new_units_added:          3180\n\
                   stat::peak_rss_mb:              505\n";
        let o = parse_log(log);
        assert_eq!(
            (o.execs, o.seconds, o.execs_per_sec, o.peak_rss_mb),
            (180_489, 61, 2958, Some(505))
        );
        assert_eq!(o.artifact, None);

        let crash = "SUMMARY: libFuzzer: deadly signal\n\
                     artifact_prefix='/w/target/fuzz/artifacts/x/'; Test unit written to /w/target/fuzz/artifacts/x/crash-7fd7\n\
                     stat::number_of_executed_units: 2\n";
        let o = parse_log(crash);
        assert_eq!(
            o.artifact.as_deref(),
            Some("/w/target/fuzz/artifacts/x/crash-7fd7")
        );
        assert_eq!(o.execs, 2);
    }
}
