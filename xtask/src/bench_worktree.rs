//! `cargo xtask bench worktree [--runs N] [--files N,N,…] [--bins DIR]`: what running a task in a
//! worktree of its own costs (issue 30, docs/worktrees.md#performance).
//!
//! 1. For each generated repository (N files committed, 1k/10k/100k by default) it times,
//!    alternating, `--runs` times each: `droid-executor run --json` in place (the fake droid
//!    answering at once), `droid-executor run --isolation worktree --json` followed by `tasks
//!    discard` of its task (a worktree run from its making to its removal), and `git worktree add
//!    --detach` plus `git worktree remove --force` of the same repository. The worktree's
//!    overhead is the difference of the first two medians, set against the third (goal: at most
//!    1.2 times).
//! 2. On the smallest repository: four worktree tasks of a fake agent that sleeps 2 s, submitted
//!    together (`run --background`) and waited for, against one such task (goal: at most 1.3
//!    times the time of one); `--runs` times each, alternating, medians. Beside it, for
//!    reference: four `git worktree add`s of the repository at once against one (how the
//!    machine's cores and disk take four checkouts at once).
//!
//! Each timed step starts after a `sync`, so that what the step before wrote is not written
//! back on the next one's time.
//!
//! Release build (`--bins DIR` measures another one). Figures are printed, never asserted.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::sh::{build_bins, git_commit_all, output};

const USAGE: &str = "usage: cargo xtask bench worktree [--runs N] [--files N,N,...] [--bins DIR]";
/// How long the fake agent of the parallel measurement works.
const AGENT_SLEEP_MS: u64 = 2_000;
/// Tasks handed out at once in the parallel measurement.
const PARALLEL: usize = 4;

pub(crate) fn worktree(args: &[&str]) -> Result<()> {
    let mut runs = 5_usize;
    let mut sizes = vec![1_000_usize, 10_000, 100_000];
    let mut bins = None;
    let mut rest = args;
    loop {
        match rest {
            [] => break,
            ["--runs", n, tail @ ..] => {
                runs = n.parse().context("--runs takes a number")?;
                rest = tail;
            }
            ["--files", list, tail @ ..] => {
                sizes = list
                    .split(',')
                    .map(str::parse)
                    .collect::<Result<_, _>>()
                    .context("--files takes numbers separated by commas")?;
                rest = tail;
            }
            ["--bins", dir, tail @ ..] => {
                bins = Some(PathBuf::from(dir));
                rest = tail;
            }
            _ => bail!("{USAGE}"),
        }
    }
    if runs == 0 || sizes.is_empty() {
        bail!("--runs and --files must not be zero or empty");
    }
    let bins = match bins {
        Some(dir) => dir,
        None => build_bins("release")?,
    };
    println!(
        "bench worktree: {} (release), fake droid; median of {runs} runs each",
        bins.join("droid-executor").display()
    );
    println!(
        "  {:<14} {:>10} {:>12} {:>10} {:>18} {:>7}",
        "repository", "in place", "in worktree", "overhead", "git wt add+remove", "ratio"
    );
    for &files in &sizes {
        let world = World::new(&bins, files)?;
        let (mut inplace, mut isolated, mut git) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            settle()?;
            inplace.push(world.in_place()?);
            settle()?;
            isolated.push(world.in_worktree()?);
            settle()?;
            git.push(world.git_add_remove()?);
        }
        let (a, b, g) = (
            median(&mut inplace),
            median(&mut isolated),
            median(&mut git),
        );
        let overhead = b.saturating_sub(a);
        println!(
            "  {:<14} {:>7.1} ms {:>9.1} ms {:>7.1} ms {:>15.1} ms {:>6.2}x",
            format!("{files} files"),
            ms(a),
            ms(b),
            ms(overhead),
            ms(g),
            ms(overhead) / ms(g)
        );
    }
    let smallest = sizes.iter().copied().min().unwrap_or(1_000);
    let world = World::new(&bins, smallest)?;
    world.play(&json!([{"sleep_ms": AGENT_SLEEP_MS}, {"completion": "Slept."}]))?;
    let (mut ones, mut fours) = (Vec::new(), Vec::new());
    let (mut git_ones, mut git_fours) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        settle()?;
        ones.push(world.parallel(1)?);
        settle()?;
        fours.push(world.parallel(PARALLEL)?);
        settle()?;
        git_ones.push(world.git_adds(1)?);
        settle()?;
        git_fours.push(world.git_adds(PARALLEL)?);
    }
    let (one, four) = (median(&mut ones), median(&mut fours));
    let (git_one, git_four) = (median(&mut git_ones), median(&mut git_fours));
    println!(
        "  {PARALLEL} worktree tasks at once (an agent sleeping {:.0} s, {smallest} files): \
         {:.2} s, one alone {:.2} s: {:.2}x",
        AGENT_SLEEP_MS as f64 / 1000.0,
        four.as_secs_f64(),
        one.as_secs_f64(),
        four.as_secs_f64() / one.as_secs_f64()
    );
    println!(
        "  git alone: {PARALLEL} `git worktree add` at once {:.0} ms, one {:.0} ms: {:.2}x \
         (how this machine's cores and disk take four checkouts at once)",
        ms(git_four),
        ms(git_one),
        ms(git_four) / ms(git_one)
    );
    Ok(())
}

/// Write the page cache out (`sync`) before a timed step: the files the step before wrote (a
/// checkout of 1,000 files or more) are otherwise written back while the next step runs, and
/// charged to it; on a small virtual disk that alone moved a ratio by ±0.3.
fn settle() -> Result<()> {
    output(&mut Command::new("sync")).map(drop)
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// A HOME with a config passing the fake droid's scenario through, its task store, and a
/// repository of `files` committed files in directories of 100.
struct World {
    dir: PathBuf,
    home: PathBuf,
    repo: PathBuf,
    scenario: PathBuf,
    bins: PathBuf,
}

impl World {
    fn new(bins: &Path, files: usize) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "droid-executor-bench-worktree-{}-{files}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let home = dir.join("home");
        let repo = home.join("repo");
        let config = home.join(".config/droid-executor");
        std::fs::create_dir_all(&config)?;
        std::fs::write(
            config.join("config.toml"),
            "env_passthrough = [\"FAKE_DROID_SCENARIO\"]\n",
        )?;
        for i in 0..files {
            let path = repo.join(format!(
                "d{:03}/s{:02}/f{i}.txt",
                i / 10_000,
                (i / 100) % 100
            ));
            if i % 100 == 0 {
                std::fs::create_dir_all(path.parent().context("a file has a parent")?)?;
            }
            std::fs::write(&path, format!("line one of {i}\nline two\n"))?;
        }
        git_commit_all(&repo, "bench repository")?;
        let world = Self {
            home: std::fs::canonicalize(&home)?,
            repo: std::fs::canonicalize(&repo)?,
            scenario: home.join("scenario.json"),
            dir,
            bins: bins.to_path_buf(),
        };
        world.play(&json!([{"completion": "Nothing to change."}]))?;
        Ok(world)
    }

    fn play(&self, steps: &Value) -> Result<()> {
        std::fs::write(&self.scenario, json!({ "steps": steps }).to_string())?;
        Ok(())
    }

    fn executor(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.bins.join("droid-executor"));
        c.args(args)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DROID_CLI_CMD", self.bins.join("fake-droid"))
            .env("FAKE_DROID_SCENARIO", &self.scenario)
            .current_dir(&self.repo)
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// `droid-executor ARGS`; its stdout as JSON.
    fn json(&self, args: &[&str]) -> Result<Value> {
        let out = output(&mut self.executor(args))?;
        serde_json::from_str(&out).with_context(|| format!("{args:?} printed {out:?}"))
    }

    fn in_place(&self) -> Result<Duration> {
        let t = Instant::now();
        let r = self.json(&["run", "--json", "Look around"])?;
        let d = t.elapsed();
        if r["status"] != "success" {
            bail!("the in-place run did not succeed: {r}");
        }
        Ok(d)
    }

    /// A worktree run and the discard of its worktree.
    fn in_worktree(&self) -> Result<Duration> {
        let t = Instant::now();
        let r = self.json(&["run", "--isolation", "worktree", "--json", "Look around"])?;
        let id = r["task_id"]
            .as_str()
            .with_context(|| format!("no task id: {r}"))?
            .to_owned();
        let a = self.json(&["tasks", "discard", &id, "--json"])?;
        let d = t.elapsed();
        if r["status"] != "success" || a["outcome"] != "discarded" {
            bail!("the worktree run did not succeed and go: {r}\n{a}");
        }
        Ok(d)
    }

    fn git_add_remove(&self) -> Result<Duration> {
        let at = self.dir.join("git-worktree");
        let path = at.display().to_string();
        let t = Instant::now();
        output(&mut self.git(&["worktree", "add", "--quiet", "--detach", &path, "HEAD"]))?;
        output(&mut self.git(&["worktree", "remove", "--force", &path]))?;
        Ok(t.elapsed())
    }

    /// `n` `git worktree add --detach`s of the repository at once, timed from the first start
    /// to the last end; the worktrees are removed after (untimed).
    fn git_adds(&self, n: usize) -> Result<Duration> {
        let paths: Vec<String> = (0..n)
            .map(|i| {
                self.dir
                    .join(format!("git-at-once-{i}"))
                    .display()
                    .to_string()
            })
            .collect();
        let t = Instant::now();
        let children = paths
            .iter()
            .map(|path| {
                self.git(&["worktree", "add", "--quiet", "--detach", path, "HEAD"])
                    .stdout(Stdio::null())
                    .spawn()
                    .context("starting git worktree add")
            })
            .collect::<Result<Vec<_>>>()?;
        for mut child in children {
            let status = child.wait()?;
            if !status.success() {
                bail!("git worktree add failed: {status}");
            }
        }
        let d = t.elapsed();
        for path in &paths {
            output(&mut self.git(&["worktree", "remove", "--force", path]))?;
        }
        Ok(d)
    }

    /// git in the repository, its hooks off.
    fn git(&self, args: &[&str]) -> Command {
        let mut c = Command::new("git");
        c.args(["-c", "core.hooksPath=/dev/null"])
            .args(args)
            .current_dir(&self.repo);
        c
    }

    /// `n` worktree tasks submitted together and waited for, then discarded; the time from the
    /// first submission to the last result.
    fn parallel(&self, n: usize) -> Result<Duration> {
        let t = Instant::now();
        let mut ids = Vec::new();
        for i in 0..n {
            let objective = format!("Sleep {i}");
            let v = self.json(&[
                "run",
                "--isolation",
                "worktree",
                "--background",
                "--json",
                &objective,
            ])?;
            ids.push(
                v["task_id"]
                    .as_str()
                    .with_context(|| format!("no task id: {v}"))?
                    .to_owned(),
            );
        }
        for id in &ids {
            let rec = self.json(&["tasks", "wait", id, "--json"])?;
            if rec["state"] != "success" {
                bail!("task {id} did not succeed: {rec}");
            }
        }
        let d = t.elapsed();
        for id in &ids {
            self.json(&["tasks", "discard", id, "--json"])?;
        }
        Ok(d)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
