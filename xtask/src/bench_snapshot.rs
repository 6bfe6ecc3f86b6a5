//! `cargo xtask bench snapshot [--runs N] [--files N,N,…] [--bins DIR]`: what measuring
//! `files_changed` costs a run, next to `git status` on the same repository.
//!
//! For each generated repository (N files committed, 1k/10k/100k by default) the benchmark
//! times, alternating, N times each: a bare fake-droid `exec` (the agent, answering at once),
//! `droid-executor run --json` driving that fake droid (release build; the difference of the
//! medians is the run's overhead), and `git status --porcelain=v2 -z --untracked-files=all`. It
//! does so clean, dirty (min(5,000, N/10), at least 1, tracked files modified and as many untracked added
//! before the run), and with one untracked 1 GiB file of real (not sparse) data beside the
//! smallest repository. `--bins DIR` measures another build (a `target/release` of an older
//! commit) for before/after figures. Figures are printed, never asserted.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::sh::{build_bins, git_commit_all, output};

/// How many files the dirty scenario modifies (and adds) at most.
const DIRTY: usize = 5_000;
/// The size of the large untracked file.
const BIG: usize = 1 << 30;

pub(crate) fn snapshot(args: &[&str]) -> Result<()> {
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
            _ => {
                bail!("usage: cargo xtask bench snapshot [--runs N] [--files N,N,...] [--bins DIR]")
            }
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
        "bench snapshot: {} (release), fake droid answering at once; median of {runs} runs each",
        bins.join("droid-executor").display()
    );
    println!(
        "  {:<34} {:>10} {:>10} {:>10} {:>8}",
        "repository", "overhead", "git status", "bare agent", "ratio"
    );
    measure(&bins, &sizes, runs, true, |row| {
        println!(
            "  {:<34} {:>7.1} ms {:>7.1} ms {:>7.1} ms {:>7.2}x",
            row.label(),
            row.overhead_ms(),
            row.git_status_ms,
            row.bare_ms,
            row.overhead_ms() / row.git_status_ms
        );
    })?;
    Ok(())
}

/// What a repository held when it was measured.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum RepoState {
    /// Exactly the commit.
    Clean,
    /// This many tracked files modified and as many untracked added.
    Dirty(usize),
    /// The commit plus one untracked 1 GiB file of pseudo-random bytes.
    BigFile,
}

/// One measured repository: medians of `runs` runs each.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct RepoRow {
    /// Files committed.
    pub(crate) files: usize,
    pub(crate) state: RepoState,
    pub(crate) runs: usize,
    /// `droid-executor run --json` on the fake droid.
    pub(crate) engine_ms: f64,
    /// The bare fake-droid `exec`.
    pub(crate) bare_ms: f64,
    /// `git status --porcelain=v2 -z --untracked-files=all`.
    pub(crate) git_status_ms: f64,
}

impl RepoRow {
    /// What the run costs on top of the agent: the difference of the medians.
    pub(crate) fn overhead_ms(&self) -> f64 {
        self.engine_ms - self.bare_ms
    }

    pub(crate) fn label(&self) -> String {
        let files = self.files;
        match self.state {
            RepoState::Clean => format!("{files} files, clean"),
            RepoState::Dirty(n) => format!("{files} files, {n} modified + {n} new"),
            RepoState::BigFile => format!("{files} files + untracked 1 GiB"),
        }
    }
}

/// Measure each repository of `sizes` files clean and dirty (and, with `big`, the smallest with
/// one untracked 1 GiB file beside it), `runs` runs each (at most 3 for the big file); each row
/// goes to `each` as soon as it is measured.
pub(crate) fn measure(
    bins: &Path,
    sizes: &[usize],
    runs: usize,
    big: bool,
    mut each: impl FnMut(&RepoRow),
) -> Result<Vec<RepoRow>> {
    let mut rows = Vec::new();
    let mut keep = |row: RepoRow| {
        each(&row);
        rows.push(row);
    };
    let smallest = sizes.iter().copied().min().unwrap_or(1_000);
    for &files in sizes {
        let world = World::new(bins, files)?;
        keep(world.measure(files, RepoState::Clean, runs)?);
        // a tiny repository still gets one file changed and one added
        let dirty = DIRTY.min(files / 10).max(1);
        world.dirty(dirty)?;
        keep(world.measure(files, RepoState::Dirty(dirty), runs)?);
        if big && files == smallest {
            world.reset()?;
            world.big_file()?;
            keep(world.measure(files, RepoState::BigFile, runs.min(3))?);
        }
    }
    Ok(rows)
}

/// The machine's busy and total CPU time so far (`/proc/stat`'s first line, in ticks).
fn cpu_ticks() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: u64 = fields.iter().sum();
    // idle and iowait
    let idle = fields.get(3).copied().unwrap_or(0) + fields.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// Wait until the CPUs were at least 90 % idle over half a second, or `limit` passed.
fn settle(limit: Duration) {
    let until = Instant::now() + limit;
    while Instant::now() < until {
        let Some((busy0, total0)) = cpu_ticks() else {
            return;
        };
        std::thread::sleep(Duration::from_millis(500));
        let Some((busy1, total1)) = cpu_ticks() else {
            return;
        };
        let (busy, total) = (busy1.saturating_sub(busy0), total1.saturating_sub(total0));
        if total > 0 && busy * 10 <= total {
            return;
        }
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// A HOME with a config passing the fake droid's scenario through, and a repository of `files`
/// committed files in directories of 100.
struct World {
    dir: PathBuf,
    home: PathBuf,
    repo: PathBuf,
    scenario: PathBuf,
    prompt: PathBuf,
    bins: PathBuf,
    /// The fake droid, installed as npm installs droid ([`crate::bench::npm_fake_droid`]).
    droid: PathBuf,
}

impl World {
    fn new(bins: &Path, files: usize) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "droid-executor-bench-snapshot-{}",
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
            let path = repo.join(Self::name(i));
            if i % 100 == 0 {
                std::fs::create_dir_all(path.parent().context("a file has a parent")?)?;
            }
            std::fs::write(&path, format!("line one of {i}\nline two\n"))?;
        }
        git_commit_all(&repo, "bench repository")?;
        let scenario = home.join("scenario.json");
        std::fs::write(
            &scenario,
            json!({"steps": [{"completion": "Nothing to change."}]}).to_string(),
        )?;
        let prompt = home.join("prompt.txt");
        std::fs::write(&prompt, "Look around")?;
        let droid = crate::bench::npm_fake_droid(bins, &dir)?;
        Ok(Self {
            home: std::fs::canonicalize(&home)?,
            repo: std::fs::canonicalize(&repo)?,
            dir,
            scenario,
            prompt,
            bins: bins.to_path_buf(),
            droid,
        })
    }

    fn name(i: usize) -> String {
        format!("d{:03}/s{:02}/f{i}.txt", i / 10_000, (i / 100) % 100)
    }

    /// Modify `n` tracked files and add `n` untracked ones.
    fn dirty(&self, n: usize) -> Result<()> {
        for i in 0..n {
            std::fs::write(self.repo.join(Self::name(i)), format!("changed {i}\n"))?;
            std::fs::write(self.repo.join(format!("{}.new", Self::name(i))), "new\n")?;
        }
        Ok(())
    }

    /// Back to the commit.
    fn reset(&self) -> Result<()> {
        output(
            Command::new("git")
                .args(["checkout", "-q", "--", "."])
                .current_dir(&self.repo),
        )?;
        output(
            Command::new("git")
                .args(["clean", "-fdq"])
                .current_dir(&self.repo),
        )?;
        Ok(())
    }

    /// One untracked 1 GiB file of pseudo-random bytes (compressible data would flatter git).
    fn big_file(&self) -> Result<()> {
        let mut file = std::io::BufWriter::new(std::fs::File::create(self.repo.join("big.bin"))?);
        let mut state: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut block = vec![0_u8; 1 << 20];
        for _ in 0..BIG / block.len() {
            for chunk in block.chunks_mut(8) {
                // xorshift64: fast, and no two blocks alike
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                chunk.copy_from_slice(&state.to_le_bytes()[..chunk.len()]);
            }
            file.write_all(&block)?;
        }
        file.flush()?;
        Ok(())
    }

    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DROID_CLI_CMD", &self.droid)
            .env("FAKE_DROID_SCENARIO", &self.scenario)
            .current_dir(&self.repo)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    fn time(mut cmd: Command) -> Result<Duration> {
        let t = Instant::now();
        let status = cmd
            .status()
            .with_context(|| format!("could not start {cmd:?}"))?;
        let d = t.elapsed();
        if !status.success() {
            bail!("{cmd:?} exited with {status}");
        }
        Ok(d)
    }

    fn bare(&self) -> Result<Duration> {
        let mut cmd = self.command(&self.droid);
        cmd.args(["exec", "--output-format", "stream-json", "--cwd"])
            .arg(&self.repo)
            .arg("-f")
            .arg(&self.prompt);
        Self::time(cmd)
    }

    fn engine(&self) -> Result<Duration> {
        let mut cmd = self.command(&self.bins.join("droid-executor"));
        cmd.args(["run", "--json", "--mode", "code", "--repo"])
            .arg(&self.repo)
            .arg("Look around");
        Self::time(cmd)
    }

    fn git_status(&self) -> Result<Duration> {
        let mut cmd = self.command(Path::new("git"));
        cmd.args(["status", "--porcelain=v2", "-z", "--untracked-files=all"]);
        Self::time(cmd)
    }

    fn measure(&self, files: usize, state: RepoState, runs: usize) -> Result<RepoRow> {
        // the files just written are flushed first, and the machine left to go idle (at most
        // 30 s): after 100,000 files are created the kernel keeps a CPU busy for 20 s or so,
        // and the first runs measured at half speed, whichever they were
        let synced = Command::new("sync").status().context("running sync")?;
        if !synced.success() {
            bail!("sync failed: {synced}");
        }
        settle(Duration::from_secs(30));
        // one warm-up of each: page cache, the index's stat cache
        self.git_status()?;
        self.bare()?;
        self.engine()?;
        let (mut bare, mut engine, mut status) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs {
            bare.push(self.bare()?);
            engine.push(self.engine()?);
            status.push(self.git_status()?);
        }
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        Ok(RepoRow {
            files,
            state,
            runs,
            engine_ms: ms(median(&mut engine)),
            bare_ms: ms(median(&mut bare)),
            git_status_ms: ms(median(&mut status)),
        })
    }
}

impl Drop for World {
    fn drop(&mut self) {
        // a repository of 100,000 files is a quarter of a GiB: a failed removal is said, not
        // left silently in the temp directory (once more first: something may have been
        // writing into it a moment ago)
        if std::fs::remove_dir_all(&self.dir).is_err()
            && let Err(e) = std::fs::remove_dir_all(&self.dir)
            && e.kind() != std::io::ErrorKind::NotFound
        {
            eprintln!(
                "bench snapshot: could not remove {}: {e}",
                self.dir.display()
            );
        }
    }
}
