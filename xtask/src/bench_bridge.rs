//! `cargo xtask bench bridge [--requests N] [--repos R]`: the HTTP bridge against seed 000's
//! design (docs/architecture.md#origin). `droid-executor serve --port 0` (release build) and
//! `bench/seed_bridge.py` (seed 000's
//! bridge rebuilt on the standard library: ThreadingHTTPServer + `subprocess.run`) run side by
//! side, both driving the fake droid with a scenario that completes at once, so what is measured
//! is the bridge: HTTP, validation, spawning and supervising droid, building the answer.
//!
//! At 1, 8 and 32 concurrent clients each bridge answers N `POST /execute` (one connection per
//! request, as `run --via bridge` does); the report gives requests/s and p50/p99 latency of each
//! and the ratio ours/seed, plus the resident memory of both at rest (before any load) and at
//! peak. Requests go round-robin over R git repositories: the engine serializes runs on one
//! repository (two droids editing one tree would trample each other), the seed does not, so a
//! single repository would measure that lock rather than the bridge. Ours runs with
//! `max_concurrent` 32 (`DROID_EXECUTOR_MAX_CONCURRENT`); the seed has no limit at all. Per run
//! ours does more than the seed: git snapshots before and after (for `files_changed`) and a sweep
//! for processes droid left behind; with a droid that returns at once, that work is most of what
//! is measured. The report also counts SYNs the kernel dropped on a full listen queue during each
//! level (http.server listens with a backlog of 5): each one costs its client a one-second retry.
//! Every request must come back `success`, exactly once: anything else fails the bench.
//! Measured, never asserted.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use bridge_http::client::Method;
use serde_json::{Value, json};

use crate::bridge_process::Server;
use crate::figures::{mib, ms, percentile};
use crate::sh::{build_bins, git_commit_all, workspace_root};

/// Concurrent clients of each measured level.
const LEVELS: [usize; 3] = [1, 8, 32];
/// Our bridge's run slots (the default is 4): as many as the most clients, so the comparison
/// is of bridges and not of admission policies.
const MAX_CONCURRENT: usize = 32;
/// Requests per level and bridge unless `--requests` says otherwise.
const DEFAULT_REQUESTS: usize = 200;
/// Repositories the requests rotate over unless `--repos` says otherwise.
const DEFAULT_REPOS: usize = 32;
/// Requests each bridge answers before anything is measured (page cache, first spawns).
const WARM_UP: usize = 16;
/// Time one request gets; the fake droid answers in milliseconds.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);
/// The fake droid's scenario: a completion event, at once.
const SCENARIO: &str = r#"{"steps": [{"completion": "Done."}]}"#;

const USAGE: &str = "usage: cargo xtask bench bridge [--requests N] [--repos R]";

pub(crate) fn bridge(args: &[&str]) -> Result<()> {
    let (mut requests, mut repos) = (DEFAULT_REQUESTS, DEFAULT_REPOS);
    for pair in args.chunks(2) {
        match pair {
            ["--requests", n] => requests = n.parse().context("--requests takes a number")?,
            ["--repos", n] => repos = n.parse().context("--repos takes a number")?,
            _ => bail!("{USAGE}"),
        }
    }
    if requests == 0 || repos == 0 {
        bail!("--requests and --repos must be at least 1");
    }
    if Command::new("python3").arg("--version").output().is_err() {
        bail!("python3 is needed for the seed bridge (e.g. apt-get install -y python3)");
    }
    let bins = build_bins("release")?;
    let world = World::new(&bins, repos)?;
    let ours = Server::start(
        "droid-executor serve",
        world
            .command(&bins.join("droid-executor"))
            .args(["serve", "--port", "0"])
            .env("DROID_EXECUTOR_MAX_CONCURRENT", MAX_CONCURRENT.to_string()),
        &world.dir.join("ours.log"),
    )?;
    let seed = Server::start(
        "seed_bridge.py",
        world
            .command(Path::new("python3"))
            .arg(workspace_root().join("bench/seed_bridge.py"))
            .env("PORT", "0"),
        &world.dir.join("seed.log"),
    )?;
    // at rest: both listened, neither has served anything yet
    std::thread::sleep(Duration::from_millis(300));
    let idle = (ours.memory("VmRSS")?, seed.memory("VmRSS")?);

    let bodies: Vec<Value> = (0..requests).map(|i| world.request(i)).collect();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut rows = Vec::new();
    rt.block_on(async {
        for server in [&ours, &seed] {
            load(server, &bodies[..WARM_UP.min(requests)], 1).await?;
        }
        for (i, &clients) in LEVELS.iter().enumerate() {
            // alternate who goes first, so neither always meets a freshly loaded machine
            let (o, s) = if i % 2 == 0 {
                let o = load(&ours, &bodies, clients).await?;
                (o, load(&seed, &bodies, clients).await?)
            } else {
                let s = load(&seed, &bodies, clients).await?;
                (load(&ours, &bodies, clients).await?, s)
            };
            rows.push((clients, o, s));
        }
        anyhow::Ok(())
    })?;
    let peak = (ours.memory("VmHWM")?, seed.memory("VmHWM")?);

    println!(
        "bench bridge: {requests} POST /execute per level and bridge, fake droid completing at once"
    );
    println!(
        "  requests rotate over {repos} git repositories (ours serializes runs per repository; \
         enough repositories keep that lock out of the figures)"
    );
    println!(
        "  ours: droid-executor serve (release), max_concurrent {MAX_CONCURRENT}, git snapshots \
         before and after each run (files_changed) and a sweep for processes droid left behind"
    );
    println!(
        "  seed: bench/seed_bridge.py (ThreadingHTTPServer + subprocess.run), no limit on runs, \
         droid only"
    );
    println!(
        "  drops: SYNs dropped on a full listen queue while the level ran (TcpExt \
         ListenOverflows, whole machine); each costs its client a 1 s retry"
    );
    println!();
    println!(
        "  {:>7}  {:<10} {:>9} {:>9} {:>9} {:>6}",
        "clients", "bridge", "req/s", "p50 ms", "p99 ms", "drops"
    );
    for (clients, o, s) in &rows {
        for (name, st) in [("ours", o), ("seed", s)] {
            let drops = st
                .overflows
                .map_or_else(|| "?".to_owned(), |n| n.to_string());
            println!(
                "  {clients:>7}  {name:<10} {:>9.1} {:>9.2} {:>9.2} {drops:>6}",
                st.per_second(),
                ms(st.p50),
                ms(st.p99)
            );
        }
        println!(
            "  {clients:>7}  {:<10} {:>9.2} {:>9.2} {:>9.2}",
            "ours/seed",
            o.per_second() / s.per_second(),
            ms(o.p50) / ms(s.p50),
            ms(o.p99) / ms(s.p99)
        );
    }
    println!();
    println!("  {:<22} {:>12} {:>12}", "memory", "ours", "seed");
    println!(
        "  {:<22} {:>8.1} MiB {:>8.1} MiB",
        "RSS at rest (VmRSS)",
        mib(idle.0),
        mib(idle.1)
    );
    println!(
        "  {:<22} {:>8.1} MiB {:>8.1} MiB",
        "peak RSS (VmHWM)",
        mib(peak.0),
        mib(peak.1)
    );
    Ok(())
}

/// One level's figures.
struct Stats {
    wall: Duration,
    count: usize,
    /// Connections the kernel dropped because the listen queue was full, machine-wide
    /// (`TcpExt ListenOverflows`) while this level ran; `None` where /proc does not say.
    overflows: Option<u64>,
    p50: Duration,
    p99: Duration,
}

impl Stats {
    fn per_second(&self) -> f64 {
        self.count as f64 / self.wall.as_secs_f64()
    }
}

/// `TcpExt ListenOverflows` from `/proc/net/netstat`: SYNs dropped because a listen queue was
/// full (the client retries after a second).
fn listen_overflows() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/net/netstat").ok()?;
    let mut rows = text.lines().filter(|l| l.starts_with("TcpExt:"));
    let (names, values) = (rows.next()?, rows.next()?);
    let at = names
        .split_whitespace()
        .position(|n| n == "ListenOverflows")?;
    values.split_whitespace().nth(at)?.parse().ok()
}

/// Send every body of `bodies` to `server` with `clients` requests in flight; every answer must
/// be 200 with status `success`.
async fn load(server: &Server, bodies: &[Value], clients: usize) -> Result<Stats> {
    let bodies = Arc::new(bodies.to_vec());
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    let overflows_before = listen_overflows();
    let started = Instant::now();
    for _ in 0..clients {
        let (client, bodies, next) = (server.client.clone(), bodies.clone(), next.clone());
        workers.spawn(async move {
            let mut times = Vec::new();
            let mut failures = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(body) = bodies.get(i) else {
                    return (times, failures);
                };
                let t = Instant::now();
                let answer = client
                    .send(Method::POST, "/execute", Some(body), REQUEST_LIMIT)
                    .await;
                times.push(t.elapsed());
                match answer {
                    Ok((200, bytes)) => {
                        let v: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
                        if v["status"] != "success" {
                            failures.push(format!("request {i}: 200 but {v}"));
                        }
                    }
                    Ok((status, bytes)) => failures.push(format!(
                        "request {i}: {status} {}",
                        String::from_utf8_lossy(&bytes)
                    )),
                    Err(e) => failures.push(format!("request {i}: {e}")),
                }
            }
        });
    }
    let (mut times, mut failures) = (Vec::new(), Vec::new());
    while let Some(done) = workers.join_next().await {
        let (t, f) = done.context("a load worker panicked")?;
        times.extend(t);
        failures.extend(f);
    }
    let wall = started.elapsed();
    let overflows = listen_overflows()
        .zip(overflows_before)
        .map(|(after, before)| after.saturating_sub(before));
    if !failures.is_empty() || times.len() != bodies.len() {
        bail!(
            "{}: {} of {} requests failed at {clients} clients; first: {}\nits log ends:\n{}",
            server.name,
            failures.len(),
            bodies.len(),
            failures.first().map_or("none", String::as_str),
            server.log_tail(20)
        );
    }
    times.sort();
    Ok(Stats {
        wall,
        count: times.len(),
        overflows,
        p50: percentile(&times, 50.0),
        p99: percentile(&times, 99.0),
    })
}

/// A throw-away HOME with R committed repositories, the scenario file, and a config passing
/// the scenario variable through to droid.
struct World {
    dir: PathBuf,
    home: PathBuf,
    repos: Vec<PathBuf>,
    scenario: PathBuf,
    fake_droid: PathBuf,
}

impl World {
    fn new(bins: &Path, repos: usize) -> Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "droid-executor-bench-bridge-{}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        let home = dir.join("home");
        let config = home.join(".config/droid-executor");
        std::fs::create_dir_all(&config)?;
        std::fs::write(
            config.join("config.toml"),
            "env_passthrough = [\"FAKE_DROID_SCENARIO\"]\n",
        )?;
        let scenario = dir.join("scenario.json");
        std::fs::write(&scenario, SCENARIO)?;
        let mut me = Self {
            home: std::fs::canonicalize(&home)?,
            scenario,
            fake_droid: bins.join("fake-droid"),
            repos: Vec::new(),
            dir,
        };
        for i in 0..repos {
            let repo = me.home.join(format!("repo-{i:02}"));
            std::fs::create_dir_all(&repo)?;
            std::fs::write(repo.join("notes.txt"), "notes\n")?;
            git_commit_all(&repo, "bench repository")?;
            me.repos.push(repo);
        }
        Ok(me)
    }

    /// A command with only HOME, PATH, LANG, the droid command and the scenario in its
    /// environment.
    fn command(&self, program: &Path) -> Command {
        let mut c = Command::new(program);
        c.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("DROID_CLI_CMD", &self.fake_droid)
            .env("FAKE_DROID_SCENARIO", &self.scenario)
            .current_dir(&self.home);
        c
    }

    /// The seed's request shape (which ours accepts as is), for repository `i % R`.
    fn request(&self, i: usize) -> Value {
        let repo = &self.repos[i % self.repos.len()];
        json!({
            "objective": format!("Append the line 'run {i}' to notes.txt"),
            "instructions": "Open notes.txt, add the line at the end, keep the rest as it is.",
            "context": {"repo_root": repo.display().to_string(), "files_of_interest": ["notes.txt"]},
            "constraints": ["Change no other file"],
            "acceptance_criteria": [format!("notes.txt ends with 'run {i}'")],
        })
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
