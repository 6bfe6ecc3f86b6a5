//! `cargo xtask bench sandbox [--runs N] [--bins DIR]`: what write confinement costs a run
//! (issue 18, "the bench shows confinement costs under 1 ms per run").
//!
//! The same `droid-executor run --json` on the fake droid (one message, one completion; the
//! world of `bench processes`) with `DROID_EXECUTOR_SANDBOX=off` and with `landlock`,
//! alternating which goes first so drift hits both alike, after three warm-up runs of each (default 100 runs each: on two shared cores 30 runs leave
//! about a millisecond of noise). It first checks from one result of each that `off` ran
//! unconfined and `landlock` under Landlock. The
//! report gives both medians, the difference of the medians and the median of the paired
//! differences (each `landlock` run minus the `off` run beside it): the cost per run. Measured
//! and reported, never asserted. `--bins DIR` measures other release binaries the same way.

use std::path::PathBuf;

use anyhow::{Context, Result, bail};

use crate::bench::{McpWorld, ms, percentile};
use crate::sh::build_bins;

const USAGE: &str = "usage: cargo xtask bench sandbox [--runs N] [--bins DIR]";

pub(crate) fn sandbox(args: &[&str]) -> Result<()> {
    let (mut runs, mut bins) = (100_usize, None);
    let mut rest = args;
    while let [flag, value, tail @ ..] = rest {
        match *flag {
            "--runs" => {
                runs = value
                    .parse::<usize>()
                    .context("--runs takes a number")?
                    .max(1)
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
    let world = McpWorld::new(&bins)?;
    println!(
        "bench sandbox: {} run --json on the fake droid ({runs} runs each, alternating)",
        bins.join("droid-executor").display()
    );
    // what is measured: `off` runs unconfined, `landlock` under Landlock
    for (mode, kind) in [("off", "none"), ("landlock", "landlock")] {
        let sandbox = world.executor_sandbox(mode)?;
        if sandbox["kind"] != kind {
            bail!("DROID_EXECUTOR_SANDBOX={mode}: the result's sandbox is {sandbox}, not {kind}");
        }
        if mode == "landlock" {
            println!(
                "  landlock: ABI {}, writable {}",
                sandbox["abi"], sandbox["writable"]
            );
        }
    }
    // warm-up: page cache, the fake droid's version lookup
    for _ in 0..3 {
        world.executor_run("off")?;
        world
            .executor_run("landlock")
            .context("a run with DROID_EXECUTOR_SANDBOX=landlock failed (no Landlock here?)")?;
    }
    let (mut off, mut on, mut diffs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        let (o, l) = if i % 2 == 0 {
            let o = world.executor_run("off")?;
            (o, world.executor_run("landlock")?)
        } else {
            let l = world.executor_run("landlock")?;
            (world.executor_run("off")?, l)
        };
        off.push(o);
        on.push(l);
        diffs.push(ms(l) - ms(o));
    }
    off.sort();
    on.sort();
    diffs.sort_by(f64::total_cmp);
    let (o50, l50) = (percentile(&off, 50), percentile(&on, 50));
    let paired = diffs[diffs.len() / 2];
    println!("  {:<10}  {:>10}  {:>10}", "sandbox", "p50 ms", "p90 ms");
    println!(
        "  {:<10}  {:>10.2}  {:>10.2}",
        "off",
        ms(o50),
        ms(percentile(&off, 90))
    );
    println!(
        "  {:<10}  {:>10.2}  {:>10.2}",
        "landlock",
        ms(l50),
        ms(percentile(&on, 90))
    );
    println!(
        "  cost per run: {:.3} ms (difference of the medians), {paired:.3} ms (median of the \
         paired differences)",
        ms(l50) - ms(o50)
    );
    println!("  (goal: under 1 ms per run)");
    Ok(())
}
