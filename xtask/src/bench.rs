//! Benchmarks (docs/architecture.md#testing): measured and reported as ratios against a baseline
//! taken in the same
//! run, never asserted.
//!
//! - `cargo xtask bench engine [--runs N] [--provider P|all]`: what the engine costs on top of
//!   an agent CLI (P: droid, the default, codex, claude, gemini, opencode; `all` runs the five in
//!   turn). The same scripted task (create one file with the CLI's own write tool, 2 model turns,
//!   in the CLI's wire format) runs as a bare headless run of the CLI in its JSON mode (stdin
//!   `/dev/null`, the same sandbox HOME and variables) and as `droid-executor run --json
//!   --provider P` (release build), alternating, N times each after one warm-up; the report
//!   gives both medians and their ratio (goal ≤ 1.01, issue 17), and with several providers a table of
//!   the ratios. Two more series put the CLI behind `stamp-relay` (ours, and bare) and give the
//!   ratio in the same run: our whole run over the CLI's own time inside it, which the CLI's
//!   run-to-run spread does not drown ([`EngineRuns::in_run`]).
//! - `cargo xtask bench mcp [--calls N] [--starts K]`: the MCP server's cost, against the fake
//!   droid (so droid's own time is near zero and the server's overhead shows). `tools/call`
//!   round trips (request written → response read, one session) of `execute_droid_task` against a
//!   bare fake-droid `exec` of the same scenario, and of `droid_ping` against a bare fake-droid
//!   `--version` (what its health check spawns), p50/p99 over N calls each, alternating with the
//!   baseline; the protocol floor (`ping`); and start-up (spawn → `initialize` answered), median
//!   of K, against `droid-executor --version` (spawn → exit).

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::agents::{self, Agent, AgentCli};
use crate::bench_completion::read_stamp;
use crate::sandbox::Sandbox;
use crate::sh::{build_bins, git_commit_all, output};

const OBJECTIVE: &str = "Create notes.txt containing one line: benchmark";

/// The scripted task for `agent`: create `notes.txt` with the CLI's own write tool, then say so
/// (2 model turns), in the agent's wire format.
fn script(agent: Agent, repo: &Path) -> Value {
    let abs = repo.join("notes.txt").display().to_string();
    let done = "Created notes.txt.";
    match agent {
        Agent::Droid => json!([
            {"text": "Creating notes.txt.", "tool": [{"name": "Create", "args": {
                "file_path": abs, "content": "benchmark\n"}}]},
            {"text": done}
        ]),
        Agent::Codex => json!([
            {"output": [{"type": "custom_tool_call", "status": "completed", "call_id": "call_0",
                "name": "apply_patch",
                "input": "*** Begin Patch\n*** Add File: notes.txt\n+benchmark\n*** End Patch\n"}]},
            {"output": [{"type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": done, "annotations": []}]}]}
        ]),
        Agent::Claude => json!([
            {"content": [{"type": "tool_use", "id": "toolu_0", "name": "Write",
                "input": {"file_path": abs, "content": "benchmark\n"}}]},
            {"content": [{"type": "text", "text": done}]}
        ]),
        Agent::Gemini => json!([
            {"parts": [{"functionCall": {"name": "write_file",
                "args": {"file_path": "notes.txt", "content": "benchmark\n"}}}]},
            {"parts": [{"text": done}]}
        ]),
        Agent::Opencode => json!([
            {"text": "Creating notes.txt.", "tool": [{"name": "write", "args": {
                "filePath": abs, "content": "benchmark\n"}}]},
            {"text": done}
        ]),
    }
}

fn median(v: &mut [Duration]) -> Duration {
    v.sort();
    v[v.len() / 2]
}

const ENGINE_USAGE: &str = "usage: cargo xtask bench engine [--runs N] [--provider droid|codex|claude|gemini|opencode|all]";

pub(crate) fn engine(args: &[&str]) -> Result<()> {
    let (mut runs, mut agents) = (10, vec![Agent::Droid]);
    let mut rest = args;
    while let [flag, value, tail @ ..] = rest {
        match *flag {
            "--runs" => {
                runs = value
                    .parse::<usize>()
                    .context("--runs takes a number")?
                    .max(1)
            }
            "--provider" if *value == "all" => agents = Agent::ALL.to_vec(),
            "--provider" => agents = vec![agents::parse(value)?],
            _ => bail!("{ENGINE_USAGE}"),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        bail!("{ENGINE_USAGE}");
    }
    crate::preflight::require("bench engine", crate::preflight::PROVIDERS)?;
    let programs = agents::programs(&agents)?;
    let bins = build_bins("release")?;
    let sandbox = Sandbox::with_agents(&bins, &programs, script)?;
    let prompt = sandbox.dir.join("prompt.txt");
    std::fs::write(&prompt, OBJECTIVE)?;
    let mut ratios = Vec::new();
    for (agent, program) in &programs {
        let mut r = engine_one(&sandbox, &bins, *agent, program, &prompt, runs)?;
        let (mb, me) = (median(&mut r.bare), median(&mut r.engine));
        let name = agent.name();
        let ratio = me.as_secs_f64() / mb.as_secs_f64();
        let in_run = match (r.in_run_median(), r.in_run_quartiles()) {
            (Some(m), Some((q1, q3))) => format!(
                "{m:>9.3}   (p25-p75 {q1:.3}-{q3:.3}; droid's completion to exit, bare: {:.1} ms)",
                ms(r.tail)
            ),
            _ => "not measured (the relay saw no end of the agent in our runs)".to_owned(),
        };
        if *agent == Agent::Droid {
            // the format of the droid-only bench, kept for droid
            println!(
                "bench engine: {runs} runs each, same scripted task (create one file, 2 model turns)"
            );
            println!(
                "  bare droid exec -o stream-json   median {:>7.1} ms",
                ms(mb)
            );
            println!(
                "  droid-executor run --json        median {:>7.1} ms",
                ms(me)
            );
            println!("  ratio engine/bare                {ratio:>9.3}   (goal <= 1.01)");
            println!("  ratio in the same run            {in_run}");
        } else {
            println!(
                "bench engine ({name}): {runs} runs each, same scripted task (create one file, 2 model turns)"
            );
            let bare = format!("bare {}", agent.bare_label());
            let ours = format!("droid-executor run --json --provider {name}");
            println!("  {bare:<45} median {:>7.1} ms", ms(mb));
            println!("  {ours:<45} median {:>7.1} ms", ms(me));
            println!(
                "  {:<45} {ratio:>9.3}   (goal <= 1.01)",
                "ratio engine/bare"
            );
            println!("  {:<45} {in_run}", "ratio in the same run");
        }
        ratios.push((*agent, mb, me, ratio));
    }
    if ratios.len() > 1 {
        println!("\nprovider    bare median ms   engine median ms   ratio engine/bare");
        for (agent, mb, me, ratio) in ratios {
            println!(
                "{:<10} {:>15.1} {:>18.1} {:>19.3}",
                agent.name(),
                ms(mb),
                ms(me),
                ratio
            );
        }
    }
    Ok(())
}

/// What `bench engine` measured of one agent.
pub(crate) struct EngineRuns {
    /// The bare agent's runs, spawn to exit, sorted.
    pub(crate) bare: Vec<Duration>,
    /// `droid-executor run`'s, spawn to exit, sorted.
    pub(crate) engine: Vec<Duration>,
    /// Per run with the agent behind `stamp-relay`: our run (spawn to exit) over the agent's own
    /// time inside it, sorted. The agent's own time is from the relay's stamp just before it
    /// starts the agent to droid's completion event passing the relay, plus [`Self::tail`]: we
    /// end droid's tree at that event (relay included), so its way to its exit is taken from
    /// bare runs behind the relay. For an agent without that event, to the agent's exit when the
    /// relay saw it; empty when it did not. The agent's run-to-run spread (tens of ms for the
    /// real droid) is in both terms, so this ratio shows a few ms of ours where the ratio of
    /// two medians cannot.
    pub(crate) in_run: Vec<f64>,
    /// The median time from droid's completion event to its exit, bare, behind the relay.
    pub(crate) tail: Duration,
}

impl EngineRuns {
    /// The median of [`EngineRuns::in_run`], when measured.
    pub(crate) fn in_run_median(&self) -> Option<f64> {
        self.in_run.get(self.in_run.len() / 2).copied()
    }

    /// Nearest-rank p25 and p75 of [`EngineRuns::in_run`], when measured.
    pub(crate) fn in_run_quartiles(&self) -> Option<(f64, f64)> {
        let at = |p: usize| {
            let rank = (self.in_run.len() * p).div_ceil(100).max(1);
            self.in_run.get(rank.min(self.in_run.len()) - 1).copied()
        };
        Some((at(25)?, at(75)?))
    }
}

/// `bench engine` on droid alone (the real droid 0.225.2 against the scripted model): `runs`
/// alternating runs of each series, for `bench report`.
pub(crate) fn droid_runs(runs: usize) -> Result<EngineRuns> {
    crate::preflight::require("bench engine", crate::preflight::PROVIDERS)?;
    let programs = agents::programs(&[Agent::Droid])?;
    let bins = build_bins("release")?;
    let sandbox = Sandbox::with_agents(&bins, &programs, script)?;
    let prompt = sandbox.dir.join("prompt.txt");
    std::fs::write(&prompt, OBJECTIVE)?;
    let (agent, program) = &programs[0];
    engine_one(&sandbox, &bins, *agent, program, &prompt, runs)
}

/// The times of `agent` over `runs` alternating runs of each series (bare, ours, ours with the
/// agent behind `stamp-relay`), after one warm-up of each.
fn engine_one(
    sandbox: &Sandbox,
    bins: &Path,
    agent: Agent,
    program: &Path,
    prompt: &Path,
    runs: usize,
) -> Result<EngineRuns> {
    let name = agent.name();
    let bare = || -> Result<Duration> {
        sandbox.reset()?;
        let mut cmd = sandbox.command(program);
        cmd.args(agent.bare_args(&sandbox.repo, OBJECTIVE, prompt))
            .envs(agent.bare_env().iter().copied())
            .stdin(Stdio::null());
        let t = Instant::now();
        let out = output(&mut cmd).with_context(|| format!("bare {name} run"))?;
        let d = t.elapsed();
        if !agent.bare_succeeded(&out) {
            bail!("bare {name} run did not end in its success event: {out}");
        }
        Ok(d)
    };
    let relay_dir = sandbox.dir.join(format!("relay-{name}"));
    std::fs::create_dir_all(&relay_dir)?;
    let (relayed, stamp) =
        crate::bench_completion::relay_wrapper(&relay_dir, &bins.join("stamp-relay"), program)?;
    let engine_with = |program: &Path| -> Result<Duration> {
        sandbox.reset()?;
        let mut cmd = sandbox.command(&bins.join("droid-executor"));
        cmd.env(agent.bin_var(), program).args([
            "run",
            "--json",
            "--provider",
            name,
            "--mode",
            "code",
        ]);
        if let Some(model) = agent.model() {
            cmd.args(["--model", model]);
        }
        cmd.arg("--repo")
            .arg(&sandbox.repo)
            .arg(OBJECTIVE)
            .stdin(Stdio::null());
        let t = Instant::now();
        let out = cmd
            .output()
            .with_context(|| format!("could not start droid-executor ({})", bins.display()))?;
        let d = t.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !stdout.contains("\"status\": \"success\"") {
            // the result says why (summary and issues come first)
            let result: Value = serde_json::from_str(&stdout).unwrap_or(Value::Null);
            bail!(
                "droid-executor run --provider {name} did not succeed ({}): {} {}{}",
                out.status,
                result["summary"].as_str().unwrap_or(""),
                result["issues"],
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(d)
    };
    let engine = || engine_with(program);
    let relay_stamps = || {
        for suffix in ["", ".start", ".exit"] {
            let _ = std::fs::remove_file(stamped(&stamp, suffix));
        }
    };
    // ours with the agent behind the relay: (our whole run, the agent's time from its start to
    // droid's completion event); `None` when the relay stamped no end (an agent without that
    // event whose tree we ended before the relay saw it exit)
    let relayed_run = || -> Result<(Duration, Option<Duration>)> {
        relay_stamps();
        let whole = engine_with(&relayed)?;
        let start = read_stamp(&stamped(&stamp, ".start"))?;
        let end = read_stamp(&stamp)
            .or_else(|_| read_stamp(&stamped(&stamp, ".exit")))
            .ok();
        Ok((whole, end.and_then(|e| e.duration_since(start).ok())))
    };
    // the bare agent behind the relay: what it takes from droid's completion event to its exit
    // (we end its tree at that event, so a run of ours never shows it)
    let bare_tail = || -> Result<Duration> {
        sandbox.reset()?;
        relay_stamps();
        let mut cmd = sandbox.command(&relayed);
        cmd.args(agent.bare_args(&sandbox.repo, OBJECTIVE, prompt))
            .envs(agent.bare_env().iter().copied())
            .stdin(Stdio::null());
        output(&mut cmd).with_context(|| format!("bare {name} run behind the relay"))?;
        let exit = read_stamp(&stamped(&stamp, ".exit"))?;
        Ok(read_stamp(&stamp)
            .ok()
            .and_then(|c| exit.duration_since(c).ok())
            .unwrap_or_default())
    };
    // one warm-up of each (page cache, the CLI's first-run work)
    bare()?;
    engine()?;
    relayed_run()?;
    bare_tail()?;
    let (mut b, mut e, mut r, mut tails) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..runs {
        if i % 2 == 0 {
            b.push(bare()?);
            e.push(engine()?);
            r.push(relayed_run()?);
            tails.push(bare_tail()?);
        } else {
            tails.push(bare_tail()?);
            r.push(relayed_run()?);
            e.push(engine()?);
            b.push(bare()?);
        }
    }
    b.sort();
    e.sort();
    let tail = median(&mut tails);
    let mut in_run: Vec<f64> = r
        .iter()
        .filter_map(|(whole, own)| own.map(|own| whole.as_secs_f64() / (own + tail).as_secs_f64()))
        .collect();
    if in_run.len() < r.len() {
        // all or nothing: a ratio over the runs whose end was stamped would pick its runs
        in_run.clear();
    }
    in_run.sort_by(f64::total_cmp);
    Ok(EngineRuns {
        bare: b,
        engine: e,
        in_run,
        tail,
    })
}

/// `stamp` with `suffix` appended (the relay's start and exit stamps).
fn stamped(stamp: &Path, suffix: &str) -> PathBuf {
    let mut p = stamp.as_os_str().to_owned();
    p.push(suffix);
    PathBuf::from(p)
}

/// The longest any one MCP answer may take before the benchmark gives up.
const ANSWER_LIMIT: Duration = Duration::from_secs(60);

/// The fake droid installed as npm installs the real one: `<dir>/droid-package/bin/droid` (a
/// copy of `bins/fake-droid`) beside the `package.json` of `@factory/cli-linux-x64` at the
/// version the fake prints. The engine reads a droid's version from that file, as it does for
/// the real droid (0.225.2 comes from npm with its `package.json`), instead of starting the
/// program a second time with `--version`: without it, every `droid-executor run` of a bench
/// starting a process per run also timed a second start of the agent that no real run pays.
/// Returns the program's path.
pub(crate) fn npm_fake_droid(bins: &Path, dir: &Path) -> Result<PathBuf> {
    let package = dir.join("droid-package");
    let bin = package.join("bin");
    std::fs::create_dir_all(&bin).with_context(|| format!("creating {}", bin.display()))?;
    std::fs::write(
        package.join("package.json"),
        json!({"name": "@factory/cli-linux-x64", "version": "0.225.2"}).to_string(),
    )?;
    let droid = bin.join("droid");
    std::fs::copy(bins.join("fake-droid"), &droid)
        .with_context(|| format!("copying the fake droid to {}", droid.display()))?;
    Ok(droid)
}

pub(crate) fn percentile(sorted: &[Duration], p: usize) -> Duration {
    let rank = (sorted.len() * p).div_ceil(100).max(1);
    sorted[rank.min(sorted.len()) - 1]
}

pub(crate) fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

/// A HOME for the release binary driving the fake droid: a git repository, a config passing the
/// fake droid's scenario variable through, and a scenario (one assistant message, a completion).
pub(crate) struct McpWorld {
    dir: PathBuf,
    home: PathBuf,
    pub(crate) repo: PathBuf,
    scenario: PathBuf,
    prompt: PathBuf,
    bins: PathBuf,
}

impl McpWorld {
    pub(crate) fn new(bins: &Path) -> Result<Self> {
        let dir =
            std::env::temp_dir().join(format!("droid-executor-bench-mcp-{}", std::process::id()));
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
        let prompt = home.join("prompt.txt");
        std::fs::write(&prompt, "Look around")?;
        Ok(Self {
            home: std::fs::canonicalize(&home)?,
            repo: std::fs::canonicalize(&repo)?,
            dir,
            scenario,
            prompt,
            bins: bins.to_path_buf(),
        })
    }

    fn fake_droid(&self) -> PathBuf {
        self.bins.join("fake-droid")
    }

    /// `program` with exactly the world's environment.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("DROID_CLI_CMD", self.fake_droid())
            .env("FAKE_DROID_SCENARIO", &self.scenario)
            .current_dir(&self.repo)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// Time `cmd` from spawn to a successful exit.
    fn time_exit(mut cmd: Command) -> Result<Duration> {
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

    pub(crate) fn bare_exec(&self) -> Result<Duration> {
        let mut cmd = self.command(&self.fake_droid());
        cmd.args(["exec", "--output-format", "stream-json", "--cwd"])
            .arg(&self.repo)
            .arg("-f")
            .arg(&self.prompt);
        Self::time_exit(cmd)
    }

    /// `droid-executor run --json` on the fake droid with `DROID_EXECUTOR_SANDBOX=<sandbox>`
    /// (`off` or `landlock`: `bench sandbox`).
    pub(crate) fn executor_run(&self, sandbox: &str) -> Result<Duration> {
        let mut cmd = self.command(&self.bins.join("droid-executor"));
        cmd.env("DROID_EXECUTOR_SANDBOX", sandbox)
            .args(["run", "--json", "--mode", "code", "--repo"])
            .arg(&self.repo)
            .arg("Look around");
        Self::time_exit(cmd)
    }

    /// The `sandbox` field of a `droid-executor run --json` result with
    /// `DROID_EXECUTOR_SANDBOX=<sandbox>` (`bench sandbox` checks what it measures).
    pub(crate) fn executor_sandbox(&self, sandbox: &str) -> Result<Value> {
        let mut cmd = self.command(&self.bins.join("droid-executor"));
        cmd.env("DROID_EXECUTOR_SANDBOX", sandbox)
            .args(["run", "--json", "--mode", "code", "--repo"])
            .arg(&self.repo)
            .arg("Look around")
            .stdout(Stdio::piped());
        let out = cmd
            .output()
            .with_context(|| format!("could not start {cmd:?}"))?;
        let result: Value = serde_json::from_slice(&out.stdout)
            .with_context(|| format!("{cmd:?} printed no result ({})", out.status))?;
        Ok(result["sandbox"].clone())
    }

    fn bare_version(&self) -> Result<Duration> {
        let mut cmd = self.command(&self.fake_droid());
        cmd.arg("--version");
        Self::time_exit(cmd)
    }

    fn executor_version(&self) -> Result<Duration> {
        let mut cmd = self.command(&self.bins.join("droid-executor"));
        cmd.arg("--version");
        Self::time_exit(cmd)
    }
}

impl Drop for McpWorld {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A blocking MCP client over the server's pipes; a reader thread hands over stdout lines so
/// every wait has a limit.
pub(crate) struct McpClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<String>,
}

impl McpClient {
    pub(crate) fn start(world: &McpWorld) -> Result<Self> {
        let mut child = world
            .command(&world.bins.join("droid-executor"))
            .arg("mcp")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .context("could not start droid-executor mcp")?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send(line).is_err() {
                    return;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            lines,
        })
    }

    /// Send request `id` and wait for its response (notifications before it are skipped).
    fn request(&mut self, id: u64, method: &str, params: Value) -> Result<Value> {
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        writeln!(stdin, "{msg}")?;
        stdin.flush()?;
        let until = Instant::now() + ANSWER_LIMIT;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let line = self
                .lines
                .recv_timeout(left)
                .with_context(|| format!("no answer to {method} (id {id})"))?;
            let v: Value = serde_json::from_str(&line)
                .with_context(|| format!("not JSON on the server's stdout: {line}"))?;
            if v.get("method").is_none() && v.get("id") == Some(&json!(id)) {
                if let Some(e) = v.get("error") {
                    bail!("{method} failed: {e}");
                }
                return Ok(v["result"].clone());
            }
        }
    }

    pub(crate) fn initialize(&mut self) -> Result<()> {
        self.request(
            0,
            "initialize",
            json!({"protocolVersion": "2025-11-25", "capabilities": {},
                   "clientInfo": {"name": "xtask-bench", "version": "0"}}),
        )?;
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        writeln!(
            stdin,
            "{}",
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
        )?;
        Ok(())
    }

    /// Close stdin and wait for the server to exit.
    pub(crate) fn finish(mut self) -> Result<()> {
        self.stdin = None;
        self.child.wait()?;
        Ok(())
    }
}

impl Drop for McpClient {
    fn drop(&mut self) {
        self.stdin = None;
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

/// A timed `tools/call` of `tool` whose result must not be an error.
pub(crate) fn timed_call(c: &mut McpClient, id: u64, tool: &str, args: &Value) -> Result<Duration> {
    let t = Instant::now();
    let r = c.request(id, "tools/call", json!({"name": tool, "arguments": args}))?;
    let d = t.elapsed();
    if r["isError"] != false {
        bail!("{tool} returned an error: {r}");
    }
    Ok(d)
}

pub(crate) fn mcp(args: &[&str]) -> Result<()> {
    let (mut calls, mut starts) = (100_usize, 20_usize);
    let mut rest = args;
    while let [flag, n, tail @ ..] = rest {
        let n = n
            .parse::<usize>()
            .context("--calls and --starts take a number")?;
        match *flag {
            "--calls" => calls = n.max(1),
            "--starts" => starts = n.max(1),
            _ => bail!("usage: cargo xtask bench mcp [--calls N] [--starts K]"),
        }
        rest = tail;
    }
    if !rest.is_empty() {
        bail!("usage: cargo xtask bench mcp [--calls N] [--starts K]");
    }
    let bins = build_bins("release")?;
    let world = McpWorld::new(&bins)?;
    let task = json!({"objective": "Look around", "context": {"repo_root": world.repo.display().to_string()}});

    let mut client = McpClient::start(&world)?;
    client.initialize()?;
    let mut id = 1;
    let mut next = || {
        id += 1;
        id
    };
    // warm-up: page cache, droid's version lookup, the first snapshot
    for _ in 0..3 {
        timed_call(&mut client, next(), "execute_droid_task", &task)?;
        timed_call(&mut client, next(), "droid_ping", &json!({}))?;
        world.bare_exec()?;
        world.bare_version()?;
    }
    let (mut exec, mut exec_bare, mut ping_tool, mut ping_bare, mut floor) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for i in 0..calls {
        // alternate which goes first, so drift hits both alike
        if i % 2 == 0 {
            exec_bare.push(world.bare_exec()?);
            exec.push(timed_call(
                &mut client,
                next(),
                "execute_droid_task",
                &task,
            )?);
            ping_bare.push(world.bare_version()?);
            ping_tool.push(timed_call(&mut client, next(), "droid_ping", &json!({}))?);
        } else {
            exec.push(timed_call(
                &mut client,
                next(),
                "execute_droid_task",
                &task,
            )?);
            exec_bare.push(world.bare_exec()?);
            ping_tool.push(timed_call(&mut client, next(), "droid_ping", &json!({}))?);
            ping_bare.push(world.bare_version()?);
        }
        let t = Instant::now();
        client.request(next(), "ping", json!({}))?;
        floor.push(t.elapsed());
    }
    client.finish()?;

    let startup = || -> Result<Duration> {
        let t = Instant::now();
        let mut c = McpClient::start(&world)?;
        c.initialize()?;
        let d = t.elapsed();
        c.finish()?;
        Ok(d)
    };
    startup()?;
    world.executor_version()?;
    let (mut start, mut version) = (Vec::new(), Vec::new());
    for i in 0..starts {
        if i % 2 == 0 {
            start.push(startup()?);
            version.push(world.executor_version()?);
        } else {
            version.push(world.executor_version()?);
            start.push(startup()?);
        }
    }

    for v in [
        &mut exec,
        &mut exec_bare,
        &mut ping_tool,
        &mut ping_bare,
        &mut floor,
        &mut start,
        &mut version,
    ] {
        v.sort();
    }
    let row = |name: &str, v: &[Duration], base_name: &str, base: Option<&[Duration]>| {
        let (p50, p99) = (percentile(v, 50), percentile(v, 99));
        match base {
            Some(b) => {
                let b50 = percentile(b, 50);
                println!(
                    "  {name:<30} {:>8.2} {:>8.2}   {base_name:<28} {:>8.2} {:>8.2}   {:>6.2}",
                    ms(p50),
                    ms(p99),
                    ms(b50),
                    ms(percentile(b, 99)),
                    p50.as_secs_f64() / b50.as_secs_f64()
                );
            }
            None => println!("  {name:<30} {:>8.2} {:>8.2}", ms(p50), ms(p99)),
        }
    };
    println!(
        "bench mcp: release build, fake droid (one message, one completion); {calls} calls each, {starts} start-ups"
    );
    println!(
        "  {:<30} {:>8} {:>8}   {:<28} {:>8} {:>8}   {:>6}",
        "measured", "p50 ms", "p99 ms", "baseline (same run)", "p50 ms", "p99 ms", "ratio"
    );
    row(
        "tools/call execute_droid_task",
        &exec,
        "bare fake-droid exec",
        Some(&exec_bare),
    );
    row(
        "tools/call droid_ping",
        &ping_tool,
        "bare fake-droid --version",
        Some(&ping_bare),
    );
    row("ping (JSON-RPC floor)", &floor, "", None);
    row(
        "start-up: spawn -> initialize",
        &start,
        "droid-executor --version",
        Some(&version),
    );
    println!("  (ratio = p50 / baseline p50; start-up p50 is the median of {starts})");
    Ok(())
}
