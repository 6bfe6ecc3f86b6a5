//! `cargo xtask bench store [--tasks N] [--runs R] [--debug]`: what a large task store costs the
//! commands that read it (issue 17, item 3). Measured, never asserted.
//!
//! One real background task is run against the fake droid (so every file of a task directory is
//! what the engine writes: `task.json`, `request.json`, `result.json`, `events.ndjson`,
//! `owner.json`, `started`, `lock`, `worker.log`), then copied under fresh ids until the store
//! holds N tasks (default 10 000), none expired. Each command is timed from spawn to exit, median
//! of R (default 10) alternating with the same command against a store holding that one task:
//! `tasks show <id>`, `tasks list --limit 10`, `tasks list` (the whole store, fewer runs), and a
//! foreground `run --json` against the fake droid. The report gives both medians and their
//! ratio (goals: `tasks show` ≤ 5 ms and `run` unaffected at 10k tasks). `--debug` uses the
//! debug build (quicker to build; the figures are then only comparable with each other).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::sh::{build_bins, git_commit_all};

const USAGE: &str = "usage: cargo xtask bench store [--tasks N] [--runs R] [--debug]";

/// A HOME whose task store is `<home>/.local/state/droid-executor`, a git repository, and a
/// fake-droid scenario answering at once.
struct World {
    dir: PathBuf,
    home: PathBuf,
    repo: PathBuf,
    scenario: PathBuf,
    bins: PathBuf,
    /// The fake droid, installed as npm installs droid ([`crate::bench::npm_fake_droid`]).
    droid: PathBuf,
}

impl World {
    fn new(bins: &Path, name: &str) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "droid-executor-bench-store-{name}-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let home = dir.join("home");
        let repo = home.join("repo");
        let config = home.join(".config/droid-executor");
        std::fs::create_dir_all(&config)?;
        std::fs::create_dir_all(&repo)?;
        std::fs::write(
            config.join("config.toml"),
            "env_passthrough = [\"FAKE_DROID_SCENARIO\"]\n",
        )?;
        std::fs::write(repo.join("a.txt"), "a\n")?;
        git_commit_all(&repo, "bench repository")?;
        let scenario = home.join("scenario.json");
        let message = json!({"type": "message", "role": "assistant", "id": "m-1",
            "text": "Nothing to change.", "timestamp": 1_795_320_771_553_u64, "session_id": "bench"});
        std::fs::write(
            &scenario,
            json!({"steps": [{"emit": message}, {"completion": "Done."}]}).to_string(),
        )?;
        let droid = crate::bench::npm_fake_droid(bins, &dir)?;
        Ok(Self {
            home: std::fs::canonicalize(&home)?,
            repo: std::fs::canonicalize(&repo)?,
            dir,
            scenario,
            bins: bins.to_path_buf(),
            droid,
        })
    }

    fn tasks_dir(&self) -> PathBuf {
        self.home.join(".local/state/droid-executor/tasks")
    }

    /// `droid-executor <args>` with exactly the world's environment.
    fn executor(&self, args: &[&str]) -> Command {
        let mut c = Command::new(self.bins.join("droid-executor"));
        c.args(args)
            .env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DROID_CLI_CMD", &self.droid)
            .env("FAKE_DROID_SCENARIO", &self.scenario)
            .current_dir(&self.repo)
            .stdin(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    fn stdout(&self, args: &[&str]) -> Result<String> {
        let out = self
            .executor(args)
            .output()
            .with_context(|| format!("droid-executor {args:?}"))?;
        if !out.status.success() {
            bail!("droid-executor {args:?} exited with {}", out.status);
        }
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// Time `droid-executor <args>` from spawn to a successful exit.
    fn time(&self, args: &[&str]) -> Result<Duration> {
        let mut cmd = self.executor(args);
        cmd.stdout(Stdio::null());
        let t = Instant::now();
        let status = cmd
            .status()
            .with_context(|| format!("droid-executor {args:?}"))?;
        let d = t.elapsed();
        if !status.success() {
            bail!("droid-executor {args:?} exited with {status}");
        }
        Ok(d)
    }

    /// Run one real background task to its end; its id.
    fn one_task(&self) -> Result<String> {
        let repo = self.repo.display().to_string();
        let out = self.stdout(&[
            "run",
            "--background",
            "--json",
            "--repo",
            &repo,
            "Look around",
        ])?;
        let v: serde_json::Value = serde_json::from_str(&out)
            .with_context(|| format!("run --background printed {out}"))?;
        let id = v["task_id"]
            .as_str()
            .with_context(|| format!("no task_id in {out}"))?
            .to_owned();
        self.stdout(&["tasks", "wait", &id, "--timeout", "60", "--json"])?;
        Ok(id)
    }

    /// Copy the task `model` under `count` fresh ids, the newest a second before `model`'s.
    fn fill(&self, model: &str, count: usize) -> Result<()> {
        let src = self.tasks_dir().join(model);
        let files: Vec<(String, Vec<u8>)> = std::fs::read_dir(&src)?
            .map(|e| {
                let e = e?;
                Ok((
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path())?,
                ))
            })
            .collect::<Result<_>>()?;
        let now = SystemTime::now().duration_since(SystemTime::UNIX_EPOCH)?;
        let secs = now.as_secs();
        for i in 0..count {
            // four tasks a second, going back in time; distinct hex digits keep ids unique
            let id = format!("droid-{}-{:04x}", secs - 1 - (i / 4) as u64, i & 0xffff);
            let dir = self.tasks_dir().join(&id);
            std::fs::create_dir(&dir)?;
            for (name, bytes) in &files {
                let bytes = match std::str::from_utf8(bytes) {
                    Ok(text) if name == "task.json" => {
                        let mut meta: serde_json::Value = serde_json::from_str(text)?;
                        meta["task_id"] = json!(id);
                        meta["seq"] = json!(count - i);
                        meta["created_unix_ms"] = json!((secs - 1 - (i / 4) as u64) * 1000);
                        serde_json::to_vec_pretty(&meta)?
                    }
                    Ok(text) => text.replace(model, &id).into_bytes(),
                    Err(_) => bytes.clone(),
                };
                std::fs::write(dir.join(name), bytes)?;
            }
        }
        Ok(())
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

pub(crate) fn store(args: &[&str]) -> Result<()> {
    let (mut tasks, mut runs, mut profile) = (10_000_usize, 10_usize, "release");
    let mut rest = args;
    loop {
        match rest {
            [] => break,
            ["--debug", tail @ ..] => {
                profile = "debug";
                rest = tail;
            }
            [flag @ ("--tasks" | "--runs"), n, tail @ ..] => {
                let n = n
                    .parse::<usize>()
                    .context("--tasks and --runs take a number")?;
                if *flag == "--tasks" {
                    tasks = n.clamp(1, 65_536);
                } else {
                    runs = n.max(1);
                }
                rest = tail;
            }
            _ => bail!(USAGE),
        }
    }
    let bins = build_bins(profile)?;
    println!(
        "bench store ({profile} build): median of R runs, 1 stored task against {tasks}\n\
         {:<24} {:>4} {:>12} {:>14} {:>8}",
        "command", "R", "1 task ms", "N tasks ms", "ratio"
    );
    measure(&bins, tasks, runs, |row| {
        println!(
            "{:<24} {:>4} {:>12.1} {:>14.1} {:>8.2}",
            row.command,
            row.runs,
            row.one_ms,
            row.many_ms,
            row.many_ms / row.one_ms
        );
    })?;
    Ok(())
}

/// One command's figures: medians of `runs` runs against each store.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StoreRow {
    /// What was run (`tasks show <id>`, …).
    pub(crate) command: &'static str,
    pub(crate) runs: usize,
    /// Against a store of one task.
    pub(crate) one_ms: f64,
    /// Against a store of `tasks` tasks.
    pub(crate) many_ms: f64,
}

/// `tasks show`, `tasks list --limit 10`, `tasks list` and `run` against a store of one task and
/// one of `tasks` (built from `bins`), `runs` runs each (at most 3 for the whole list); each row
/// goes to `each` as soon as it is measured.
pub(crate) fn measure(
    bins: &Path,
    tasks: usize,
    runs: usize,
    mut each: impl FnMut(&StoreRow),
) -> Result<Vec<StoreRow>> {
    let small = World::new(bins, "small")?;
    let large = World::new(bins, "large")?;
    let small_id = small.one_task()?;
    let large_id = large.one_task()?;
    large.fill(&large_id, tasks.saturating_sub(1))?;
    eprintln!(
        "bench store: {tasks} tasks in {}",
        large.tasks_dir().display()
    );
    let repo_small = small.repo.display().to_string();
    let repo_large = large.repo.display().to_string();
    // the oldest task of the large store: the one a scan of every task would reach last
    let cases: Vec<(&'static str, Vec<&str>, Vec<&str>, usize)> = vec![
        (
            "tasks show <id>",
            vec!["tasks", "show", &small_id, "--json"],
            vec!["tasks", "show", &large_id, "--json"],
            runs,
        ),
        (
            "tasks list --limit 10",
            vec!["tasks", "list", "--limit", "10", "--json"],
            vec!["tasks", "list", "--limit", "10", "--json"],
            runs,
        ),
        (
            "tasks list (all)",
            vec!["tasks", "list", "--json"],
            vec!["tasks", "list", "--json"],
            runs.min(3),
        ),
        (
            "run (fake droid)",
            vec!["run", "--json", "--repo", &repo_small, "Look around"],
            vec!["run", "--json", "--repo", &repo_large, "Look around"],
            runs,
        ),
    ];
    let mut rows = Vec::new();
    for (command, one, many, n) in cases {
        let (mut a, mut b) = (Vec::new(), Vec::new());
        for _ in 0..n {
            a.push(small.time(&one)?);
            b.push(large.time(&many)?);
        }
        let row = StoreRow {
            command,
            runs: n,
            one_ms: ms(median(&mut a)),
            many_ms: ms(median(&mut b)),
        };
        each(&row);
        rows.push(row);
    }
    Ok(rows)
}
