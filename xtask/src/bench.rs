//! `cargo xtask bench engine [--runs N]`: what the engine costs on top of droid. The same scripted
//! task runs as a bare `droid exec -o stream-json` and as `droid-executor run --json` (release
//! build), alternating, N times each; the report gives both medians and their ratio (goal ≤ 1.05).
//! Measured, never asserted.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::droid;
use crate::sandbox::{MODEL, Sandbox};
use crate::sh::{cargo, output, run, workspace_root};

const OBJECTIVE: &str = "Create notes.txt containing one line: benchmark";

fn script(repo: &Path) -> serde_json::Value {
    json!([
        {"text": "Creating notes.txt.", "tool": [{"name": "Create", "args": {
            "file_path": repo.join("notes.txt").display().to_string(), "content": "benchmark\n"}}]},
        {"text": "Created notes.txt."}
    ])
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

pub(crate) fn engine(args: &[&str]) -> Result<()> {
    let runs = match args {
        [] => 10,
        ["--runs", n] => n.parse::<usize>().context("--runs takes a number")?,
        _ => bail!("usage: cargo xtask bench engine [--runs N]"),
    };
    let droid = droid::fetch()?;
    run(cargo().args([
        "build",
        "--quiet",
        "--release",
        "-p",
        "wrapper-cli",
        "-p",
        "tests",
        "--bins",
    ]))?;
    let bins = workspace_root().join("target/release");
    let sandbox = Sandbox::new(&bins, script)?;
    let prompt = sandbox.dir.join("prompt.txt");
    std::fs::write(&prompt, OBJECTIVE)?;
    let bare = || -> Result<Duration> {
        sandbox.reset()?;
        let t = Instant::now();
        let out = output(
            sandbox
                .command(&droid)
                .args([
                    "exec",
                    "--output-format",
                    "stream-json",
                    "--auto",
                    "low",
                    "-m",
                    MODEL,
                    "--cwd",
                ])
                .arg(&sandbox.repo)
                .arg("-f")
                .arg(&prompt),
        )?;
        let d = t.elapsed();
        if !out.contains("\"type\":\"completion\"") {
            bail!("bare droid run did not complete: {out}");
        }
        Ok(d)
    };
    let engine = || -> Result<Duration> {
        sandbox.reset()?;
        let t = Instant::now();
        let out = output(
            sandbox
                .command(&bins.join("droid-executor"))
                .env("DROID_CLI_CMD", &droid)
                .args([
                    "run", "--json", "--mode", "code", "--model", MODEL, "--repo",
                ])
                .arg(&sandbox.repo)
                .arg(OBJECTIVE),
        )?;
        let d = t.elapsed();
        if !out.contains("\"status\": \"success\"") {
            bail!("droid-executor run did not succeed: {out}");
        }
        Ok(d)
    };
    // one warm-up of each (page cache, droid's first-run work)
    bare()?;
    engine()?;
    let (mut b, mut e) = (Vec::new(), Vec::new());
    for i in 0..runs {
        if i % 2 == 0 {
            b.push(bare()?);
            e.push(engine()?);
        } else {
            e.push(engine()?);
            b.push(bare()?);
        }
    }
    let (mb, me) = (median(&mut b), median(&mut e));
    println!("bench engine: {runs} runs each, same scripted task (create one file, 2 model turns)");
    println!(
        "  bare droid exec -o stream-json   median {:>7.1} ms",
        mb.as_secs_f64() * 1e3
    );
    println!(
        "  droid-executor run --json        median {:>7.1} ms",
        me.as_secs_f64() * 1e3
    );
    println!(
        "  ratio engine/bare                {:>9.3}   (goal <= 1.05)",
        me.as_secs_f64() / mb.as_secs_f64()
    );
    Ok(())
}
