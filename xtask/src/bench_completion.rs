//! `cargo xtask bench completion [--runs N] [--real] [--executor PATH]`: how long the result
//! takes once droid has completed, when droid lingers after its `completion` event (the real
//! droid flushes telemetry for ~6 s outside airgap mode).
//!
//! The same task runs N times as a bare `droid exec -o stream-json` (timed from spawn to its
//! `completion` line, and to its exit) and as `droid-executor run --json` (timed from spawn to
//! the last line of the result on stdout, and to its exit), alternating. The driver is the fake
//! droid playing `completion` then a 6 s linger (default), or with `--real` the real droid
//! against the scripted model, outside airgap mode.
//!
//! `completion → result`, issue 17's goal (≤ 20 ms plus the verification commands, none here),
//! is timed directly: in a third series droid runs behind `stamp-relay` (a test binary that
//! copies droid's output line by line and writes the wall-clock time at which it passed the
//! `completion` line on), and the figure is the time from that stamp to the moment the bench
//! reads the result's last line, a median over the runs. The relay's one pipe hop counts
//! against us. The older figure is kept beside it: the median time to the result minus the bare
//! droid's median time to `completion`, an upper bound that also holds the run's own work
//! before droid starts. The same run is also timed with a droid that exits at its completion
//! (the fake droid without the linger; the real droid in airgap mode): the difference of the two
//! medians is what a lingering droid costs the result. `--executor` times another
//! `droid-executor` binary (an older build, for a before and after). Measured and reported,
//! never asserted.

use std::io::{BufRead as _, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant, SystemTime};

use anyhow::{Context, Result, bail};
use serde_json::json;

use crate::agents::MODEL;
use crate::droid;
use crate::figures::{ms, percentile};
use crate::sandbox::Sandbox;
use crate::sh::{build_bins, git_commit_all};

const USAGE: &str = "usage: cargo xtask bench completion [--runs N] [--real] [--executor PATH]";
const OBJECTIVE: &str = "Create notes.txt containing one line: benchmark";
/// How long the fake droid lingers after its completion event.
const LINGER_MS: u64 = 6000;

/// When a line matching the caller's test came, and when the process exited.
struct Timed {
    line: Duration,
    /// The wall-clock time the line was read (against the relay's stamp).
    line_at: SystemTime,
    exit: Duration,
}

/// Spawn `cmd` (stdout piped), note when the first stdout line satisfying `is_mark` comes, read
/// to the end and wait for the exit.
fn time_line(mut cmd: Command, is_mark: impl Fn(&str) -> bool) -> Result<Timed> {
    let t = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .with_context(|| format!("could not start {cmd:?}"))?;
    let stdout = child.stdout.take().context("stdout was not piped")?;
    let mut line_at = None;
    for line in BufReader::new(stdout).lines() {
        let line = line?;
        if line_at.is_none() && is_mark(&line) {
            line_at = Some((t.elapsed(), SystemTime::now()));
        }
    }
    let status = child.wait()?;
    let exit = t.elapsed();
    let Some((line, line_at)) = line_at else {
        bail!("{cmd:?} never printed the line looked for (exit {status})");
    };
    Ok(Timed {
        line,
        line_at,
        exit,
    })
}

/// The nearest-rank 25th and 75th percentiles of `v`, in ms.
pub(crate) fn quartiles(v: &mut [Duration]) -> (f64, f64) {
    v.sort();
    (ms(percentile(v, 25.0)), ms(percentile(v, 75.0)))
}

fn median(v: &mut [Duration]) -> f64 {
    v.sort();
    v[v.len() / 2].as_secs_f64() * 1e3
}

/// The world a run happens in: a command maker for droid and for the executor, and a reset.
struct World {
    droid: PathBuf,
    executor: PathBuf,
    repo: PathBuf,
    prompt: PathBuf,
    env: Vec<(String, String)>,
    /// The environment of a droid that exits at its completion event.
    prompt_env: Vec<(String, String)>,
    home: PathBuf,
    /// An `sh` wrapper running droid behind `stamp-relay`, and the stamp file it writes.
    relayed: PathBuf,
    stamp: PathBuf,
    _sandbox: Option<Sandbox>,
    _dir: Option<TempWorld>,
}

/// A temp directory removed on drop.
struct TempWorld(PathBuf);

impl Drop for TempWorld {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

impl World {
    fn command(&self, program: &Path, prompt_exit: bool) -> Command {
        let env = if prompt_exit {
            &self.prompt_env
        } else {
            &self.env
        };
        let mut c = Command::new(program);
        c.env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DROID_CLI_CMD", &self.droid)
            .current_dir(&self.repo);
        c
    }

    fn reset(&self) -> Result<()> {
        let _ = std::fs::remove_file(self.repo.join("notes.txt"));
        Ok(())
    }

    fn bare(&self) -> Result<Timed> {
        self.reset()?;
        let mut cmd = self.command(&self.droid, false);
        cmd.args(["exec", "--output-format", "stream-json", "--auto", "low"]);
        if self.env.iter().all(|(k, _)| k != "FAKE_DROID_SCENARIO") {
            cmd.args(["-m", MODEL]);
        }
        cmd.arg("--cwd").arg(&self.repo).arg("-f").arg(&self.prompt);
        time_line(cmd, |l| l.contains("\"type\":\"completion\""))
    }

    fn executor(&self, prompt_exit: bool) -> Result<Timed> {
        self.reset()?;
        let mut cmd = self.command(&self.executor, prompt_exit);
        cmd.args(["run", "--json", "--mode", "code"]);
        if self.env.iter().all(|(k, _)| k != "FAKE_DROID_SCENARIO") {
            cmd.args(["--model", MODEL]);
        }
        cmd.arg("--repo").arg(&self.repo).arg(OBJECTIVE);
        // the pretty-printed result ends with a lone `}`
        time_line(cmd, |l| l == "}")
    }

    /// A run with droid behind the relay (lingering): from droid's completion line passing the
    /// relay to the result's last line read here.
    fn completion_to_result(&self) -> Result<Duration> {
        self.reset()?;
        let _ = std::fs::remove_file(&self.stamp);
        let mut cmd = self.command(&self.executor, false);
        cmd.env("DROID_CLI_CMD", &self.relayed);
        cmd.args(["run", "--json", "--mode", "code"]);
        if self.env.iter().all(|(k, _)| k != "FAKE_DROID_SCENARIO") {
            cmd.args(["--model", MODEL]);
        }
        cmd.arg("--repo").arg(&self.repo).arg(OBJECTIVE);
        let timed = time_line(cmd, |l| l == "}")?;
        let at = read_stamp(&self.stamp)?;
        timed.line_at.duration_since(at).with_context(|| {
            "the result was read before the relay stamped droid's completion line".to_owned()
        })
    }
}

/// Write the `sh` wrapper that runs `agent` behind `relay` (`stamp-relay`), stamping into
/// `dir/completion.stamp` (and `.start`, `.exit` beside it); returns (wrapper, stamp). The
/// `package.json` of the npm package `agent` belongs to is copied beside the wrapper, so the
/// engine reads the agent's version from it as it does for the agent itself, instead of
/// starting the agent a second time with `--version` during the timed run.
pub(crate) fn relay_wrapper(dir: &Path, relay: &Path, agent: &Path) -> Result<(PathBuf, PathBuf)> {
    use std::os::unix::fs::PermissionsExt as _;
    let real = std::fs::canonicalize(agent)
        .with_context(|| format!("the agent {} is not there", agent.display()))?;
    if let Some(manifest) = real
        .ancestors()
        .skip(1)
        .take(4)
        .map(|d| d.join("package.json"))
        .find(|m| m.is_file())
    {
        std::fs::copy(&manifest, dir.join("package.json"))
            .with_context(|| format!("copying {}", manifest.display()))?;
    }
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', "'\\''"));
    let stamp = dir.join("completion.stamp");
    let wrapper = dir.join("relayed-agent");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\nexec {} {} {} \"$@\"\n",
            quote(relay),
            quote(&stamp),
            quote(agent)
        ),
    )?;
    std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))?;
    Ok((wrapper, stamp))
}

fn fake_world(bins: &Path, executor: PathBuf) -> Result<World> {
    let dir = std::env::temp_dir().join(format!(
        "droid-executor-bench-completion-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    let guard = TempWorld(dir.clone());
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
    let steps = [
        json!({"write_file": {"path": "notes.txt", "content": "benchmark\n"}}),
        json!({"completion": "Created notes.txt."}),
    ];
    let mut lingering = steps.to_vec();
    lingering.push(json!({"sleep_ms": LINGER_MS}));
    std::fs::write(&scenario, json!({ "steps": lingering }).to_string())?;
    let prompt_scenario = home.join("scenario-exit.json");
    std::fs::write(&prompt_scenario, json!({ "steps": steps }).to_string())?;
    let prompt = home.join("prompt.txt");
    std::fs::write(&prompt, OBJECTIVE)?;
    let droid = bins.join("fake-droid");
    let (relayed, stamp) = relay_wrapper(&dir, &bins.join("stamp-relay"), &droid)?;
    Ok(World {
        droid,
        relayed,
        stamp,
        executor,
        repo: std::fs::canonicalize(&repo)?,
        prompt,
        env: vec![("FAKE_DROID_SCENARIO".into(), scenario.display().to_string())],
        prompt_env: vec![(
            "FAKE_DROID_SCENARIO".into(),
            prompt_scenario.display().to_string(),
        )],
        home: std::fs::canonicalize(&home)?,
        _sandbox: None,
        _dir: Some(guard),
    })
}

fn real_world(bins: &Path, executor: PathBuf) -> Result<World> {
    let droid = droid::fetch()?;
    let sandbox = Sandbox::new(bins, |repo| {
        json!([
            {"text": "Creating notes.txt.", "tool": [{"name": "Create", "args": {
                "file_path": repo.join("notes.txt").display().to_string(), "content": "benchmark\n"}}]},
            {"text": "Created notes.txt."}
        ])
    })?;
    let prompt = sandbox.dir.join("prompt.txt");
    std::fs::write(&prompt, OBJECTIVE)?;
    let (relayed, stamp) = relay_wrapper(&sandbox.dir, &bins.join("stamp-relay"), &droid)?;
    Ok(World {
        droid,
        relayed,
        stamp,
        executor,
        repo: sandbox.repo.clone(),
        prompt,
        // outside airgap mode: droid lingers after `completion` as it does for users
        env: vec![("LANG".into(), "C.UTF-8".into())],
        prompt_env: vec![
            ("LANG".into(), "C.UTF-8".into()),
            ("FACTORY_AIRGAP_ENABLED".into(), "1".into()),
        ],
        home: sandbox.home.clone(),
        _sandbox: Some(sandbox),
        _dir: None,
    })
}

pub(crate) fn completion(args: &[&str]) -> Result<()> {
    let (mut runs, mut real, mut executor) = (5usize, false, None);
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "--runs" => {
                runs = it
                    .next()
                    .context(USAGE)?
                    .parse()
                    .context("--runs takes a number")?;
            }
            "--real" => real = true,
            "--executor" => executor = Some(PathBuf::from(it.next().context(USAGE)?)),
            _ => bail!(USAGE),
        }
    }
    if runs == 0 {
        bail!("--runs must be at least 1");
    }
    let bins = build_bins("release")?;
    let executor = executor.unwrap_or_else(|| bins.join("droid-executor"));
    let f = measure(&bins, executor, real, runs)?;
    let driver = if real {
        "the real droid, outside airgap mode".to_owned()
    } else {
        format!("the fake droid lingering {LINGER_MS} ms after completion")
    };
    println!("bench completion: {runs} runs each, {driver}");
    println!(
        "  bare droid: completion line       median {:>8.1} ms",
        f.bare_completion_ms
    );
    println!(
        "  bare droid: exit                  median {:>8.1} ms",
        f.bare_exit_ms
    );
    println!(
        "  droid-executor run: result out    median {:>8.1} ms",
        f.result_ms
    );
    println!(
        "  droid-executor run: exit          median {:>8.1} ms",
        f.exit_ms
    );
    println!(
        "  droid exiting at completion: result out median {:>8.1} ms",
        f.prompt_result_ms
    );
    println!(
        "  completion -> result (timed)       median {:>8.1} ms  (p25-p75 {:.1}-{:.1}; goal <= 20 ms + verification)",
        f.completion_to_result_ms,
        f.completion_to_result_quartiles.0,
        f.completion_to_result_quartiles.1
    );
    println!(
        "  completion -> result (upper bound) {:>8.1} ms",
        f.upper_bound_ms()
    );
    println!(
        "  what the linger costs the result   {:>8.1} ms",
        f.linger_cost_ms()
    );
    Ok(())
}

/// The medians of one `bench completion`, in milliseconds from spawn.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct CompletionFigures {
    pub(crate) runs: usize,
    /// The bare droid's `completion` line.
    pub(crate) bare_completion_ms: f64,
    /// The bare droid's exit.
    pub(crate) bare_exit_ms: f64,
    /// `droid-executor run --json`: the result's last line.
    pub(crate) result_ms: f64,
    /// `droid-executor run --json`: its exit.
    pub(crate) exit_ms: f64,
    /// The result's last line when droid exits at its completion event.
    pub(crate) prompt_result_ms: f64,
    /// The quartiles (p25, p75) of the bare droid's completion line: how much runs vary.
    pub(crate) bare_completion_quartiles: (f64, f64),
    /// The quartiles of the result's last line, droid lingering.
    pub(crate) result_quartiles: (f64, f64),
    /// Droid's completion line (stamped by the relay) to the result's last line, median.
    pub(crate) completion_to_result_ms: f64,
    /// Its quartiles.
    pub(crate) completion_to_result_quartiles: (f64, f64),
}

impl CompletionFigures {
    /// The time from droid's completion to our result, at most: spawn to the result minus the
    /// bare droid's spawn to its completion line (it also holds the run's own work before droid
    /// starts).
    pub(crate) fn upper_bound_ms(&self) -> f64 {
        self.result_ms - self.bare_completion_ms
    }

    /// What a droid lingering after its completion costs the result.
    pub(crate) fn linger_cost_ms(&self) -> f64 {
        self.result_ms - self.prompt_result_ms
    }
}

/// `runs` alternating runs of each (after one warm-up), with the fake droid lingering or, with
/// `real`, the real droid outside airgap mode; `executor` is the `droid-executor` timed.
pub(crate) fn measure(
    bins: &Path,
    executor: PathBuf,
    real: bool,
    runs: usize,
) -> Result<CompletionFigures> {
    let world = if real {
        real_world(bins, executor)?
    } else {
        fake_world(bins, executor)?
    };
    // one warm-up of each (page cache, droid's first-run work)
    world.bare()?;
    world.executor(false)?;
    world.executor(true)?;
    world.completion_to_result()?;
    let (mut bc, mut bx, mut er, mut ex) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut pr, mut cr) = (Vec::new(), Vec::new());
    for i in 0..runs {
        let (b, e, p) = if i % 2 == 0 {
            let b = world.bare()?;
            let e = world.executor(false)?;
            (b, e, world.executor(true)?)
        } else {
            let p = world.executor(true)?;
            let e = world.executor(false)?;
            (world.bare()?, e, p)
        };
        cr.push(world.completion_to_result()?);
        bc.push(b.line);
        bx.push(b.exit);
        er.push(e.line);
        ex.push(e.exit);
        pr.push(p.line);
    }
    Ok(CompletionFigures {
        runs,
        bare_completion_quartiles: quartiles(&mut bc),
        result_quartiles: quartiles(&mut er),
        bare_completion_ms: median(&mut bc),
        bare_exit_ms: median(&mut bx),
        result_ms: median(&mut er),
        exit_ms: median(&mut ex),
        prompt_result_ms: median(&mut pr),
        completion_to_result_quartiles: quartiles(&mut cr),
        completion_to_result_ms: median(&mut cr),
    })
}

/// A relay's stamp: the wall-clock time it holds (ns since the Unix epoch).
pub(crate) fn read_stamp(path: &Path) -> Result<std::time::SystemTime> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("the relay wrote no stamp at {}", path.display()))?;
    let ns: u64 = text
        .trim()
        .parse()
        .with_context(|| format!("the relay's stamp {text:?} is not a number"))?;
    Ok(std::time::UNIX_EPOCH + Duration::from_nanos(ns))
}
