//! `cargo xtask bench processes [--runs N] [--idle K,K,…] [--bins DIR]`: what a run costs on top
//! of droid as the machine's process count grows (issue 17: "a run's cost depends on the run,
//! not on how many processes the machine holds").
//!
//! For each idle count K (default 0, 100 and 2,000), K idle `sleep` processes are started (and
//! ended by pid afterwards); then N `tools/call execute_droid_task` round trips through one
//! `droid-executor mcp` session (the engine's whole per-run cost without a process start-up)
//! alternate with N bare fake-droid `exec`s of the same scenario (its answer takes well under a
//! millisecond). The report gives both medians, their difference (the overhead) and ratio.
//! Measured and reported, never asserted. `--bins DIR` measures other release binaries
//! (`droid-executor` and `fake-droid`, e.g. a build of an older commit) in the same way.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::bench::{McpClient, McpWorld, ms, percentile, timed_call};
use crate::sh::build_bins;

const USAGE: &str = "usage: cargo xtask bench processes [--runs N] [--idle K,K,...] [--bins DIR]";

/// Idle processes started for one measurement; ended (SIGKILL, by pid) and reaped on drop.
struct Idle(Vec<Child>);

impl Idle {
    fn start(n: usize) -> Result<Self> {
        let mut idle = Idle(Vec::with_capacity(n));
        for _ in 0..n {
            idle.0.push(
                Command::new("sleep")
                    .arg("3600")
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
                    .context("starting an idle sleep")?,
            );
        }
        Ok(idle)
    }
}

impl Drop for Idle {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
        }
        for child in &mut self.0 {
            let _ = child.wait();
        }
    }
}

pub(crate) fn processes(args: &[&str]) -> Result<()> {
    let (mut runs, mut idle, mut bins) = (30_usize, vec![0_usize, 100, 2000], None);
    let mut rest = args;
    while let [flag, value, tail @ ..] = rest {
        match *flag {
            "--runs" => {
                runs = value
                    .parse::<usize>()
                    .context("--runs takes a number")?
                    .max(1)
            }
            "--idle" => {
                idle = value
                    .split(',')
                    .map(str::parse::<usize>)
                    .collect::<Result<_, _>>()
                    .context("--idle takes numbers separated by commas")?;
            }
            "--bins" => bins = Some(PathBuf::from(value)),
            _ => bail!(USAGE),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        bail!(USAGE);
    }
    let bins = match bins {
        Some(dir) => {
            std::fs::canonicalize(&dir).with_context(|| format!("--bins {}", dir.display()))?
        }
        None => build_bins("release")?,
    };
    println!(
        "bench processes: {} ({runs} runs per row; fake droid: one message, one completion)",
        bins.join("droid-executor").display()
    );
    println!(
        "  {:>6}  {:>14}  {:>14}  {:>12}  {:>6}",
        "idle", "run p50 ms", "bare p50 ms", "overhead ms", "ratio"
    );
    measure(&bins, &idle, runs, |row| {
        println!(
            "  {:>6}  {:>14.2}  {:>14.2}  {:>12.2}  {:>6.2}",
            row.idle,
            row.run_ms,
            row.bare_ms,
            row.overhead_ms(),
            row.run_ms / row.bare_ms.max(1e-3)
        );
    })?;
    println!("  (goal: overhead <= 3 ms on a tiny repository whatever the idle count)");
    Ok(())
}

/// One idle count's figures: p50 of `runs` round trips each.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct IdleRow {
    /// Extra idle processes on the machine while it was measured.
    pub(crate) idle: usize,
    pub(crate) runs: usize,
    /// `tools/call execute_droid_task` through one MCP session.
    pub(crate) run_ms: f64,
    /// The bare fake-droid `exec` of the same scenario.
    pub(crate) bare_ms: f64,
    /// Processes on the whole machine while it was measured (the idle ones included).
    pub(crate) machine_processes: usize,
}

impl IdleRow {
    /// What a run costs on top of droid.
    pub(crate) fn overhead_ms(&self) -> f64 {
        (self.run_ms - self.bare_ms).max(0.0)
    }
}

/// The processes on this machine now (`/proc`'s numeric entries).
pub(crate) fn machine_processes() -> usize {
    std::fs::read_dir("/proc").map_or(0, |dir| {
        dir.flatten()
            .filter(|e| {
                e.file_name()
                    .to_str()
                    .is_some_and(|n| n.parse::<u32>().is_ok())
            })
            .count()
    })
}

/// Measure each idle count of `idle`, `runs` round trips each; each row goes to `each` as soon as
/// it is measured.
pub(crate) fn measure(
    bins: &Path,
    idle: &[usize],
    runs: usize,
    mut each: impl FnMut(&IdleRow),
) -> Result<Vec<IdleRow>> {
    let world = McpWorld::new(bins)?;
    let task = json!({"objective": "Look around",
                      "context": {"repo_root": world.repo.display().to_string()}});
    let mut rows = Vec::new();
    for &k in idle {
        let _idle = Idle::start(k)?;
        let machine = machine_processes();
        let mut client = McpClient::start(&world)?;
        client.initialize()?;
        let mut id = 1;
        // warm-up: page cache, droid's version lookup, the first snapshot
        for _ in 0..3 {
            id += 1;
            timed_call(&mut client, id, "execute_droid_task", &task)?;
            world.bare_exec()?;
        }
        let (mut run, mut bare) = (Vec::new(), Vec::new());
        for i in 0..runs {
            id += 1;
            // alternate which goes first, so drift hits both alike
            if i % 2 == 0 {
                bare.push(world.bare_exec()?);
                run.push(timed_call(&mut client, id, "execute_droid_task", &task)?);
            } else {
                run.push(timed_call(&mut client, id, "execute_droid_task", &task)?);
                bare.push(world.bare_exec()?);
            }
        }
        client.finish()?;
        run.sort();
        bare.sort();
        let row = IdleRow {
            idle: k,
            runs,
            run_ms: ms(percentile(&run, 50)),
            bare_ms: ms(percentile(&bare, 50)),
            machine_processes: machine,
        };
        each(&row);
        rows.push(row);
    }
    Ok(rows)
}
