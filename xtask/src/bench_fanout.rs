//! `cargo xtask bench fanout [--runs N] [--files N] [--bins DIR]`: what running one task on
//! three agents at once costs (issue 31, docs/protocol.md#best-of-n).
//!
//! Alternating, `--runs` times each, on a generated repository of `--files` committed files
//! (1,000): a worktree task of the fake droid, which sleeps 2 s and writes one file, verified by
//! one command (`droid-executor run --isolation worktree --request FILE --json`, then `tasks
//! discard` of its task), against a `best_of` of three fake-droid candidates doing the same
//! (`droid-executor run --request FILE --json` with three models of droid, the losers discarded
//! by the run, then `tasks discard` of the winner). The ratio of the medians is the figure
//! (goal: at most 1.3 times).
//!
//! Release build (`--bins DIR` measures another one). Figures are printed, never asserted.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::sh::{build_bins, git_commit_all, output};

const USAGE: &str = "usage: cargo xtask bench fanout [--runs N] [--files N] [--bins DIR]";
/// How long each fake agent works.
const AGENT_SLEEP_MS: u64 = 2_000;
/// The candidates of the best_of (three models of the fake droid).
const CANDIDATES: [&str; 3] = ["droid:custom:A", "droid:custom:B", "droid:custom:C"];
/// The verification command every run is judged by.
const CHECK: &str = "test -f out.txt";

pub(crate) fn fanout(args: &[&str]) -> Result<()> {
    let mut runs = 3_usize;
    let mut files = 1_000_usize;
    let mut bins = None;
    let mut rest = args;
    loop {
        match rest {
            [] => break,
            ["--runs", n, tail @ ..] => {
                runs = n.parse().context("--runs takes a number")?;
                rest = tail;
            }
            ["--files", n, tail @ ..] => {
                files = n.parse().context("--files takes a number")?;
                rest = tail;
            }
            ["--bins", dir, tail @ ..] => {
                bins = Some(PathBuf::from(dir));
                rest = tail;
            }
            _ => bail!("{USAGE}"),
        }
    }
    if runs == 0 {
        bail!("--runs must not be zero");
    }
    let bins = match bins {
        Some(dir) => dir,
        None => build_bins("release")?,
    };
    let world = World::new(&bins, files)?;
    world.play(&json!([
        {"sleep_ms": AGENT_SLEEP_MS},
        {"sh": "printf 'done\\n' > out.txt"},
        {"completion": "Slept, then wrote out.txt."}
    ]))?;
    println!(
        "bench fanout: {} (release), fake droid sleeping {:.0} s, {files} files; median of \
         {runs} runs each",
        bins.join("droid-executor").display(),
        AGENT_SLEEP_MS as f64 / 1000.0
    );
    let (mut one, mut three) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        one.push(world.one()?);
        three.push(world.best_of()?);
    }
    let (a, b) = (median(&mut one), median(&mut three));
    let range = |v: &[Duration]| {
        format!(
            "{:.2}–{:.2} s",
            v.first().map_or(0.0, Duration::as_secs_f64),
            v.last().map_or(0.0, Duration::as_secs_f64)
        )
    };
    println!(
        "  one worktree task:        {:.2} s (range {})",
        a.as_secs_f64(),
        range(&one)
    );
    println!(
        "  best_of {} candidates:     {:.2} s (range {})",
        CANDIDATES.len(),
        b.as_secs_f64(),
        range(&three)
    );
    println!(
        "  ratio: {:.2}x (goal at most 1.3x)",
        b.as_secs_f64() / a.as_secs_f64()
    );
    Ok(())
}

/// The median of `v`, which it leaves sorted.
fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
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
            "droid-executor-bench-fanout-{}-{files}",
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
            let path = repo.join(format!("d{:02}/f{i}.txt", i / 100));
            if i % 100 == 0 {
                std::fs::create_dir_all(path.parent().context("a file has a parent")?)?;
            }
            std::fs::write(&path, format!("line one of {i}\nline two\n"))?;
        }
        git_commit_all(&repo, "bench repository")?;
        Ok(Self {
            home: std::fs::canonicalize(&home)?,
            repo: std::fs::canonicalize(&repo)?,
            scenario: home.join("scenario.json"),
            dir,
            bins: bins.to_path_buf(),
        })
    }

    fn play(&self, steps: &Value) -> Result<()> {
        std::fs::write(&self.scenario, json!({ "steps": steps }).to_string())?;
        Ok(())
    }

    /// `droid-executor ARGS`; its stdout as JSON.
    fn json(&self, args: &[&str]) -> Result<Value> {
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
        let out = output(&mut c)?;
        serde_json::from_str(&out).with_context(|| format!("{args:?} printed {out:?}"))
    }

    /// `droid-executor run --request <request> --json` (and `extra` flags), then `tasks discard`
    /// of its task; the time of both, and the result.
    fn run(&self, request: &Value, extra: &[&str]) -> Result<(Duration, Value)> {
        let file = self.dir.join("request.json");
        std::fs::write(&file, request.to_string())?;
        let file = file.display().to_string();
        let mut args = vec!["run", "--request", file.as_str(), "--json"];
        args.extend(extra);
        let t = Instant::now();
        let r = self.json(&args)?;
        let id = r["task_id"]
            .as_str()
            .with_context(|| format!("no task id: {r}"))?
            .to_owned();
        let gone = self.json(&["tasks", "discard", &id, "--json"])?;
        let d = t.elapsed();
        if r["status"] != "success" || gone["outcome"] != "discarded" {
            bail!("the run did not succeed and go: {r}\n{gone}");
        }
        Ok((d, r))
    }

    fn request(&self, extra: Value) -> Value {
        let mut v = json!({
            "objective": "Sleep, then write out.txt",
            "context": {"repo_root": self.repo.display().to_string()},
            "suggested_commands": [CHECK],
        });
        if let (Value::Object(base), Value::Object(more)) = (&mut v, extra) {
            base.extend(more);
        }
        v
    }

    /// One worktree task, made, run, verified and discarded.
    fn one(&self) -> Result<Duration> {
        let (d, _) = self.run(
            &self.request(json!({"isolation": "worktree", "model": "custom:A"})),
            &[],
        )?;
        Ok(d)
    }

    /// A best_of of the three candidates, its winner discarded after.
    fn best_of(&self) -> Result<Duration> {
        let (d, r) = self.run(&self.request(json!({"best_of": CANDIDATES})), &[])?;
        let attempts = r["attempts"].as_array().map_or(0, Vec::len);
        if attempts != CANDIDATES.len() {
            bail!("the best_of lists {attempts} attempts: {r}");
        }
        Ok(d)
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
