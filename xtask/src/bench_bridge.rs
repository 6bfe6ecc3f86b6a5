//! `cargo xtask bench bridge [--seconds S] [--repos R]`: the HTTP bridge against the design of
//! Python droid bridges (docs/architecture.md#origin; "the seed" below). `droid-executor serve
//! --port 0` (release build) and `bench/python_bridge.py` (that
//! bridge rebuilt on the standard library: ThreadingHTTPServer + `subprocess.run`) run side by
//! side, both driving the fake droid with a scenario that completes at once, so what is measured
//! is the bridge: HTTP, validation, spawning and supervising droid, building the answer.
//!
//! At 1, 8 and 32 concurrent clients each bridge is loaded for S seconds (10) by `wrk` (a C load
//! generator, so the client is never the bottleneck) with `POST /execute` bodies built by a Lua
//! script; the report gives requests/s and p50/p99 latency of each and the ratio ours/seed, plus
//! the resident memory of both at rest (before any load) and at peak. Requests go round-robin
//! over R git repositories: the engine serializes runs on one repository (two droids editing one
//! tree would trample each other), the seed does not, so a single repository would measure that
//! lock rather than the bridge. Ours runs with `max_concurrent` 32
//! (`DROID_EXECUTOR_MAX_CONCURRENT`) and its ground truth on (repository records before and after each
//! run, droid's tree ended); the seed has no limit at all and only starts droid. The report also
//! counts SYNs the kernel dropped on a full listen queue during each level (http.server listens
//! with a backlog of 5): each one costs its client a one-second retry; and after each level,
//! the processes of the world still alive once the bridge has answered (none expected). Every
//! answer must be 200 with status `success`: anything else fails the bench. Measured, never
//! asserted.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::bridge_process::Server;
use crate::figures::{mib, ms};
use crate::procfs;
use crate::sh::{build_bins, git_commit_all, workspace_root};
use crate::soak_world::MARKER_VAR;

/// Concurrent clients of each measured level.
const LEVELS: [usize; 3] = [1, 8, 32];
/// Our bridge's run slots (the default is 4): as many as the most clients, so the comparison
/// is of bridges and not of admission policies.
const MAX_CONCURRENT: usize = 32;
/// Seconds of load per level and bridge unless `--seconds` says otherwise.
const DEFAULT_SECONDS: u64 = 10;
/// Repositories the requests rotate over unless `--repos` says otherwise.
const DEFAULT_REPOS: usize = 32;
/// Seconds of load each bridge takes, one client, before anything is measured (page cache,
/// first spawns).
const WARM_UP_SECONDS: u64 = 2;
/// Time one request gets (wrk's `--timeout`); the fake droid answers in milliseconds.
const REQUEST_LIMIT: Duration = Duration::from_secs(60);
/// How long a level's processes get to be gone once its load ended (a run cancelled by wrk's
/// closing connections is still being ended).
const SURVIVOR_LIMIT: Duration = Duration::from_secs(15);
/// The fake droid's scenario: a completion event, at once.
const SCENARIO: &str = r#"{"steps": [{"completion": "Done."}]}"#;

const USAGE: &str = "usage: cargo xtask bench bridge [--seconds S] [--repos R]";

pub(crate) fn bridge(args: &[&str]) -> Result<()> {
    let (mut seconds, mut repos) = (DEFAULT_SECONDS, DEFAULT_REPOS);
    for pair in args.chunks(2) {
        match pair {
            ["--seconds", n] => seconds = n.parse().context("--seconds takes a number")?,
            ["--repos", n] => repos = n.parse().context("--repos takes a number")?,
            _ => bail!("{USAGE}"),
        }
    }
    let bins = build_bins("release")?;
    let f = measure(&bins, seconds, repos)?;

    println!(
        "bench bridge: wrk, {seconds} s of POST /execute per level and bridge, fake droid completing at once"
    );
    println!(
        "  requests rotate over {repos} git repositories (ours serializes runs per repository; \
         enough repositories keep that lock out of the figures)"
    );
    println!(
        "  ours: droid-executor serve (release), max_concurrent {MAX_CONCURRENT}, repository records \
         before and after each run (files_changed), droid's whole tree ended"
    );
    println!(
        "  seed: bench/python_bridge.py (ThreadingHTTPServer + subprocess.run), no limit on runs, \
         droid only"
    );
    println!(
        "  drops: SYNs dropped on a full listen queue while the level ran (TcpExt \
         ListenOverflows, whole machine); each costs its client a 1 s retry"
    );
    println!("  left: processes of the level still alive once its load ended");
    println!(
        "  starts: the fake droid alone, started as many at a time as there are clients (the \
         most any bridge starting it per request can serve)"
    );
    println!();
    println!(
        "  {:>7}  {:<10} {:>9} {:>9} {:>9} {:>6} {:>5}",
        "clients", "bridge", "req/s", "p50 ms", "p99 ms", "drops", "left"
    );
    for row in &f.levels {
        for (name, st) in [("ours", &row.ours), ("seed", &row.seed)] {
            let drops = st
                .overflows
                .map_or_else(|| "?".to_owned(), |n| n.to_string());
            println!(
                "  {:>7}  {name:<10} {:>9.1} {:>9.2} {:>9.2} {drops:>6} {:>5}",
                row.clients,
                st.per_second(),
                ms(st.p50),
                ms(st.p99),
                st.survivors
            );
        }
        println!(
            "  {:>7}  {:<10} {:>9.1}",
            row.clients, "starts", row.starts_per_second
        );
        println!(
            "  {:>7}  {:<10} {:>9.2} {:>9.2} {:>9.2}",
            row.clients,
            "ours/seed",
            row.ours.per_second() / row.seed.per_second(),
            ms(row.ours.p50) / ms(row.seed.p50),
            ms(row.ours.p99) / ms(row.seed.p99)
        );
    }
    println!();
    println!("  {:<22} {:>12} {:>12}", "memory", "ours", "seed");
    println!(
        "  {:<22} {:>8.1} MiB {:>8.1} MiB",
        "RSS at rest (VmRSS)",
        mib(f.idle_kib.0),
        mib(f.idle_kib.1)
    );
    println!(
        "  {:<22} {:>8.1} MiB {:>8.1} MiB",
        "peak RSS (VmHWM)",
        mib(f.peak_kib.0),
        mib(f.peak_kib.1)
    );
    Ok(())
}

/// Everything one `bench bridge` measured.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BridgeFigures {
    /// Seconds of load per level and bridge.
    pub(crate) seconds: u64,
    /// Repositories the requests rotated over.
    pub(crate) repos: usize,
    /// One row per level of [`LEVELS`].
    pub(crate) levels: Vec<Level>,
    /// Resident memory `(ours, seed)` in KiB before any load.
    pub(crate) idle_kib: (u64, u64),
    /// Peak resident memory `(ours, seed)` in KiB.
    pub(crate) peak_kib: (u64, u64),
}

/// Both bridges at one number of clients.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Level {
    pub(crate) clients: usize,
    pub(crate) ours: Stats,
    pub(crate) seed: Stats,
    /// Starts of the fake droid per second with nothing else running: as many threads as
    /// clients, each starting the seed's command line, reading its output and waiting for it
    /// ([`ceiling`]). No bridge that starts the agent once per request serves more.
    pub(crate) starts_per_second: f64,
}

/// One bridge's figures at one level.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Stats {
    /// How long wrk sent requests.
    pub(crate) wall: Duration,
    /// Answers received (each 200 with status `success`).
    pub(crate) count: u64,
    /// Connections the kernel dropped because the listen queue was full, machine-wide
    /// (`TcpExt ListenOverflows`) while this level ran; `None` where /proc does not say.
    pub(crate) overflows: Option<u64>,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    /// Processes of the world (its HOME in their environment) other than the bridges still
    /// alive [`SURVIVOR_LIMIT`] after the load ended.
    pub(crate) survivors: usize,
}

impl Stats {
    pub(crate) fn per_second(&self) -> f64 {
        self.count as f64 / self.wall.as_secs_f64()
    }
}

/// Both bridges (from `bins`) side by side, loaded by wrk for `seconds` per level, requests
/// rotating over `repos` repositories.
pub(crate) fn measure(bins: &Path, seconds: u64, repos: usize) -> Result<BridgeFigures> {
    if seconds == 0 || repos == 0 {
        bail!("--seconds and --repos must be at least 1");
    }
    crate::preflight::require("bench bridge", crate::preflight::BENCH_BRIDGE)?;
    let world = World::new(bins, repos)?;
    let ours = Server::start(
        "droid-executor serve",
        world
            .command(&bins.join("droid-executor"))
            .args(["serve", "--port", "0"])
            .env("DROID_EXECUTOR_MAX_CONCURRENT", MAX_CONCURRENT.to_string()),
        &world.dir.join("ours.log"),
    )?;
    let seed = Server::start(
        "python_bridge.py",
        world
            .command(Path::new("python3"))
            .arg(workspace_root().join("bench/python_bridge.py"))
            .env("PORT", "0"),
        &world.dir.join("seed.log"),
    )?;
    // at rest: both listened, neither has served anything yet
    std::thread::sleep(Duration::from_millis(300));
    let idle_kib = (ours.memory("VmRSS")?, seed.memory("VmRSS")?);
    let servers = [ours.pid(), seed.pid()];
    for server in [&ours, &seed] {
        load(&world, server, &servers, 1, WARM_UP_SECONDS.min(seconds))?;
    }
    let mut levels = Vec::new();
    for (i, &clients) in LEVELS.iter().enumerate() {
        // alternate who goes first, so neither always meets a freshly loaded machine
        let (o, s) = if i % 2 == 0 {
            let o = load(&world, &ours, &servers, clients, seconds)?;
            (o, load(&world, &seed, &servers, clients, seconds)?)
        } else {
            let s = load(&world, &seed, &servers, clients, seconds)?;
            (load(&world, &ours, &servers, clients, seconds)?, s)
        };
        let starts_per_second = ceiling(&world, clients, seconds)?;
        levels.push(Level {
            clients,
            ours: o,
            seed: s,
            starts_per_second,
        });
    }
    let peak_kib = (ours.memory("VmHWM")?, seed.memory("VmHWM")?);
    Ok(BridgeFigures {
        seconds,
        repos,
        levels,
        idle_kib,
        peak_kib,
    })
}

/// The most requests per second any bridge starting the agent once per request could serve
/// here: `clients` threads, each starting the fake droid with the seed's command line (`exec -o
/// json --auto low <prompt>`, in one of the world's repositories), reading its output to the
/// end and waiting for it, again and again for `seconds`; no HTTP, no JSON, no record of the
/// repository. Starts per second, every one checked to exit 0.
fn ceiling(world: &World, clients: usize, seconds: u64) -> Result<f64> {
    let until = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    let counts = std::thread::scope(|s| {
        let threads: Vec<_> = (0..clients)
            .map(|t| {
                s.spawn(move || -> Result<u64> {
                    let mut n = 0_u64;
                    while Instant::now() < until {
                        let repo =
                            &world.repos[(t + usize::try_from(n).unwrap_or(0)) % world.repos.len()];
                        let out = world
                            .command(&world.fake_droid)
                            .args(["exec", "-o", "json", "--auto", "low", "Append a line"])
                            .current_dir(repo)
                            .stdin(Stdio::null())
                            .output()
                            .context("starting the fake droid")?;
                        if !out.status.success() {
                            bail!("the fake droid exited with {}", out.status);
                        }
                        n += 1;
                    }
                    Ok(n)
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("a thread panicked")))
            })
            .collect::<Result<Vec<u64>>>()
    })?;
    let total: u64 = counts.iter().sum();
    Ok(total as f64 / started.elapsed().as_secs_f64())
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

/// What the Lua script's `done` prints: one line of numbers after this tag.
const RESULT_TAG: &str = "WRK_RESULT";
/// And the first bad answer, if any, after this one.
const FAILURE_TAG: &str = "WRK_FIRST_FAILURE";

/// The wrk script: `bodies` in turn (each thread from its own offset, so threads meet different
/// repositories), every answer checked for 200 and status `success`, and the totals of every
/// thread on one line at the end.
fn lua_script(bodies: &[Value]) -> String {
    let mut s = String::from("-- generated by cargo xtask bench bridge\nlocal bodies = {\n");
    for body in bodies {
        let text = body.to_string().replace('\\', "\\\\").replace('"', "\\\"");
        s.push_str(&format!("  \"{text}\",\n"));
    }
    s.push_str(&format!(
        r#"}}
local threads = {{}}
wrk.method = "POST"
wrk.path = "/execute"
wrk.headers["Content-Type"] = "application/json"

function setup(thread)
  thread:set("offset", #threads * math.floor(#bodies / 2))
  table.insert(threads, thread)
end

function init(args)
  n = offset or 0
  responses = 0
  failures = 0
  first_failure = ""
end

function request()
  n = n + 1
  return wrk.format(nil, nil, nil, bodies[(n % #bodies) + 1])
end

function response(status, headers, body)
  responses = responses + 1
  if status ~= 200 or not string.find(body, '"status"%s*:%s*"success"') then
    failures = failures + 1
    if first_failure == "" then
      first_failure = status .. " " .. string.sub(body, 1, 300)
    end
  end
end

function done(summary, latency, requests)
  local r, f, first = 0, 0, ""
  for _, t in ipairs(threads) do
    r = r + t:get("responses")
    f = f + t:get("failures")
    local ff = t:get("first_failure")
    if first == "" and ff then first = ff end
  end
  local e = summary.errors
  io.write(string.format("{RESULT_TAG} %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f %.0f\n",
    summary.duration, summary.requests, r, f, e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99)))
  io.write("{FAILURE_TAG} " .. string.gsub(first, "\n", " ") .. "\n")
end
"#
    ));
    s
}

/// What wrk's script reported.
#[derive(Debug, PartialEq)]
struct WrkResult {
    duration: Duration,
    requests: u64,
    responses: u64,
    failures: u64,
    /// connect, read, write, status, timeout
    errors: [u64; 5],
    p50: Duration,
    p99: Duration,
    first_failure: String,
}

/// The script's two lines in wrk's output.
fn parse_wrk(out: &str) -> Result<WrkResult> {
    let line = out
        .lines()
        .find_map(|l| l.strip_prefix(RESULT_TAG))
        .with_context(|| format!("wrk printed no {RESULT_TAG} line:\n{out}"))?;
    let n: Vec<u64> = line
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("wrk's {RESULT_TAG} line is not numbers: {line}"))?;
    let [
        duration,
        requests,
        responses,
        failures,
        c,
        r,
        w,
        s,
        t,
        p50,
        p99,
    ] = n[..]
    else {
        bail!("wrk's {RESULT_TAG} line does not hold 11 numbers: {line}");
    };
    let first_failure = out
        .lines()
        .find_map(|l| l.strip_prefix(FAILURE_TAG))
        .unwrap_or_default()
        .trim()
        .to_owned();
    Ok(WrkResult {
        duration: Duration::from_micros(duration),
        requests,
        responses,
        failures,
        errors: [c, r, w, s, t],
        p50: Duration::from_micros(p50),
        p99: Duration::from_micros(p99),
        first_failure,
    })
}

/// Load `server` with `clients` connections for `seconds` (wrk); every answer must be 200 with
/// status `success`. Then wait for the world's processes other than `servers` to be gone.
fn load(
    world: &World,
    server: &Server,
    servers: &[u32],
    clients: usize,
    seconds: u64,
) -> Result<Stats> {
    let overflows_before = listen_overflows();
    let threads = clients.min(2);
    let out = Command::new("wrk")
        .args(["-t", &threads.to_string(), "-c", &clients.to_string()])
        .args(["-d", &format!("{seconds}s")])
        .args(["--timeout", &format!("{}s", REQUEST_LIMIT.as_secs())])
        .arg("-s")
        .arg(&world.script)
        .arg(format!("http://{}/execute", server.addr))
        .output()
        .context("could not start wrk (apt-get install -y wrk)")?;
    let overflows = listen_overflows()
        .zip(overflows_before)
        .map(|(after, before)| after.saturating_sub(before));
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(
            "wrk exited with {}: {}{}",
            out.status,
            text,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let r = parse_wrk(&text)?;
    let errors: u64 = r.errors.iter().sum();
    // wrk counts a request once its answer is read; the script checked each answer
    if r.failures > 0 || errors > 0 || r.responses < r.requests || r.requests == 0 {
        bail!(
            "{}: {} bad answers, errors (connect, read, write, status, timeout) {:?}, {} answers \
             of {} requests at {clients} clients; first bad answer: {}\nits log ends:\n{}",
            server.name,
            r.failures,
            r.errors,
            r.responses,
            r.requests,
            r.first_failure,
            server.log_tail(20)
        );
    }
    let until = Instant::now() + SURVIVOR_LIMIT;
    let survivors = loop {
        let left = world.processes(servers).len();
        if left == 0 || Instant::now() > until {
            break left;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    Ok(Stats {
        wall: r.duration,
        count: r.requests,
        overflows,
        p50: r.p50,
        p99: r.p99,
        survivors,
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
    /// wrk's Lua script, sending the bodies of [`World::request`] in turn.
    script: PathBuf,
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
            script: dir.join("load.lua"),
            dir,
        };
        for i in 0..repos {
            let repo = me.home.join(format!("repo-{i:02}"));
            std::fs::create_dir_all(&repo)?;
            std::fs::write(repo.join("notes.txt"), "notes\n")?;
            git_commit_all(&repo, "bench repository")?;
            me.repos.push(repo);
        }
        let bodies: Vec<Value> = (0..repos * 4).map(|i| me.request(i)).collect();
        std::fs::write(&me.script, lua_script(&bodies))?;
        Ok(me)
    }

    /// Live processes running with this world's HOME, except `servers`.
    fn processes(&self, servers: &[u32]) -> Vec<procfs::Found> {
        let entry = format!("HOME={}", self.home.display());
        procfs::with_env(&entry, MARKER_VAR)
            .into_iter()
            .filter(|f| !servers.contains(&f.pid))
            .collect()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_what_the_script_prints() {
        let out = "Running 1s test @ http://127.0.0.1:4000/execute\n  2 threads and 8 connections\n\
                   WRK_RESULT 1002345 120 120 0 0 0 0 0 0 9876 20456\nWRK_FIRST_FAILURE \n\
                   Requests/sec: 119.72\n";
        assert_eq!(
            parse_wrk(out).unwrap(),
            WrkResult {
                duration: Duration::from_micros(1_002_345),
                requests: 120,
                responses: 120,
                failures: 0,
                errors: [0; 5],
                p50: Duration::from_micros(9_876),
                p99: Duration::from_micros(20_456),
                first_failure: String::new(),
            }
        );
        let bad = "WRK_RESULT 10 2 2 1 0 0 0 1 0 5 6\nWRK_FIRST_FAILURE 500 {\"error\": \"x\"}\n";
        assert_eq!(
            parse_wrk(bad).unwrap().first_failure,
            "500 {\"error\": \"x\"}"
        );
        assert!(parse_wrk("wrk: connection refused\n").is_err());
        assert!(parse_wrk("WRK_RESULT 1 2 3\n").is_err());
    }

    #[test]
    fn the_script_holds_each_body_as_a_lua_string() {
        let script = lua_script(&[json!({"objective": "say \"hi\" \\ there"})]);
        assert!(
            script.contains(r#"  "{\"objective\":\"say \\\"hi\\\" \\\\ there\"}","#),
            "{script}"
        );
        assert!(script.contains("function done(summary, latency, requests)"));
    }
}
