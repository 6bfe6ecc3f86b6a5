//! `cargo xtask soak [--time SECS] [--check]`: the HTTP bridge and the MCP server under bounded
//! mixed traffic against the fake droid, at the same time, and whether either grows.
//!
//! `droid-executor serve --port 0` and `droid-executor mcp` (debug build, the one `cargo xtask
//! test` builds) run side by side, each with its own HOME (config, task store, run slots:
//! `max_concurrent` 4) from [`crate::soak_world`]. Six HTTP clients ([`crate::soak_bridge`]) and
//! four MCP clients sharing one stdio session ([`crate::soak_mcp`]) run sync, background and
//! cancelled work, health and metrics, and bad requests, every answer checked, for `--time`
//! seconds (default 300):
//!
//! 1. warm-up: the first 10% of the time, and at least one full cycle of operations per client
//!    (so every lazily opened resource exists before the baseline);
//! 2. drain, then the baseline: each server's VmRSS, VmHWM and open descriptors, taken idle (no
//!    run, no task, no process of the run left; the smallest set of descriptors over a second);
//! 3. the measured phase, the rest of the time, with the servers' RSS and descriptor count
//!    sampled every 250 ms for the peaks;
//! 4. drain, the same figures idle again, the processes left carrying either HOME (droid carries
//!    the engine's run marker too), the bridge's counters against the clients'.
//!
//! Without `--check` it reports; with it, errors, processes left, more descriptors at the end
//! than after the warm-up, RSS growth beyond the margin of [`crate::soak_report`], or too little
//! traffic of some kind to judge make it exit non-zero. Everything it started is killed by pid
//! and its temp directory removed, on success, on error, and on SIGINT or SIGTERM.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tokio::sync::oneshot;
use tokio::task::JoinSet;

use crate::bridge_process::Server;
use crate::procfs;
use crate::sh::build_bins;
use crate::soak_bridge::{self, BridgeLoad};
use crate::soak_mcp::{self, McpLoad};
use crate::soak_report::{self, Front, Outcome, Sample};
use crate::soak_tally::Tally;
use crate::soak_world::World;

const USAGE: &str = "usage: cargo xtask soak [--time SECS] [--check]";
/// `--time` unless given.
const DEFAULT_SECS: u64 = 300;
/// Shortest `--time` (a warm-up and a measured phase need a few operations each).
const MIN_SECS: u64 = 5;
/// Concurrent HTTP clients.
const BRIDGE_CLIENTS: usize = 6;
/// Concurrent MCP clients (one session).
const MCP_CLIENTS: usize = 4;
/// The warm-up's share of `--time`.
const WARM_UP_SHARE: f64 = 0.1;
/// Longest wait for in-flight work to end after the traffic stopped.
const DRAIN_LIMIT: Duration = Duration::from_secs(90);
/// Looks at an idle server's descriptors, 200 ms apart (see [`idle_figures`]).
const IDLE_LOOKS: usize = 6;
/// How often the peaks are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

pub(crate) fn soak(args: &[&str]) -> Result<()> {
    let (mut secs, mut check) = (DEFAULT_SECS, false);
    let mut rest = args;
    loop {
        match rest {
            [] => break,
            ["--check", tail @ ..] => (check, rest) = (true, tail),
            ["--time", n, tail @ ..] => {
                secs = n
                    .parse()
                    .with_context(|| format!("--time takes whole seconds, got {n:?}"))?;
                rest = tail;
            }
            _ => bail!("{USAGE}"),
        }
    }
    if secs < MIN_SECS {
        bail!("--time must be at least {MIN_SECS} s, got {secs}");
    }
    crate::preflight::require("soak", crate::preflight::SOAK)?;
    let bins = build_bins("debug")?;
    let world = World::new(&bins, BRIDGE_CLIENTS, MCP_CLIENTS)?;
    let bridge = Server::start(
        "droid-executor serve",
        world
            .command(&world.bridge, &bins.join("droid-executor"))
            .args(["serve", "--port", "0"]),
        &world.log("bridge.log"),
    )?;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let outcome = rt.block_on(async {
        tokio::select! {
            outcome = run(&world, &bins, &bridge, Duration::from_secs(secs)) => outcome,
            signal = interrupted() => bail!("stopped by {}; killed what it started", signal?),
        }
    })?;
    let failures = outcome.report();
    if !failures.is_empty() {
        println!();
        println!("  bridge log ends:\n{}", bridge.log_tail(10));
        let mcp_log = std::fs::read_to_string(world.log("mcp.log")).unwrap_or_default();
        let tail: Vec<&str> = mcp_log.lines().rev().take(10).collect();
        println!(
            "  mcp log ends:\n{}",
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    if check && !failures.is_empty() {
        bail!("soak --check failed:\n  {}", failures.join("\n  "));
    }
    Ok(())
}

/// The first SIGINT or SIGTERM: the soak then returns, so that dropping the servers and the
/// world kills what it started rather than leaving it running.
async fn interrupted() -> Result<&'static str> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    tokio::select! {
        _ = int.recv() => Ok("SIGINT"),
        _ = term.recv() => Ok("SIGTERM"),
    }
}

/// The two tallies of one phase.
struct Phase {
    bridge: Arc<Tally>,
    mcp: Arc<Tally>,
}

impl Phase {
    fn new() -> Self {
        Self {
            bridge: Arc::default(),
            mcp: Arc::default(),
        }
    }
}

async fn run(
    world: &World,
    bins: &std::path::Path,
    bridge: &Server,
    time: Duration,
) -> Result<Outcome> {
    let started = Instant::now();
    let (mcp, mcp_load) = soak_mcp::start(
        world,
        &bins.join("droid-executor"),
        &world.log("mcp.log"),
        MCP_CLIENTS,
    )
    .await?;
    let bridge_load = Arc::new(BridgeLoad::new(
        bridge.client.clone(),
        bridge.addr,
        &world.bridge,
        BRIDGE_CLIENTS,
    ));
    let servers = [("bridge", bridge.pid()), ("mcp", mcp.pid)];
    let pids = servers.map(|(_, pid)| pid);
    let checks = Tally::default();

    let warm = Phase::new();
    let warm_for = time.mul_f64(WARM_UP_SHARE);
    traffic(
        &bridge_load,
        &mcp_load,
        &warm,
        Instant::now() + warm_for,
        true,
    )
    .await;
    let warm_took = started.elapsed();
    if let Err(e) = drain(&bridge_load, &mcp_load, world, &pids).await {
        checks.error("drain after the warm-up", &e);
    }
    let start = idle_figures(pids).await;

    let main = Phase::new();
    let main_started = Instant::now();
    let (stop, stopped) = oneshot::channel();
    let sampler = tokio::spawn(peaks(pids, stopped));
    traffic(
        &bridge_load,
        &mcp_load,
        &main,
        main_started + (time - warm_for),
        false,
    )
    .await;
    let main_took = main_started.elapsed();
    let _ = stop.send(());
    let peak = sampler.await.context("the sampler panicked")?;
    if let Err(e) = drain(&bridge_load, &mcp_load, world, &pids).await {
        checks.error("drain at the end", &e);
    }
    let end = idle_figures(pids).await;
    let left = [&world.bridge, &world.mcp]
        .iter()
        .flat_map(|home| home.processes(&pids))
        .map(|f| (f, procfs::cmdline(f.pid)))
        .collect();
    bridge_load.cross_check(&checks).await;
    mcp_load.session().strays(&checks);
    match mcp.stop(mcp_load.session()).await {
        Ok(status) if status.success() => {}
        Ok(status) => checks.error("mcp", &format!("exited with {status} once stdin closed")),
        Err(e) => checks.error("mcp", &e),
    }
    let mut figures = Vec::new();
    for (((name, pid), (start, end)), peak) in servers
        .into_iter()
        .zip(start.into_iter().zip(end))
        .zip(peak)
    {
        figures.push(soak_report::Server {
            name,
            pid,
            start: start.with_context(|| format!("{name} after the warm-up"))?,
            end: end.with_context(|| format!("{name} at the end"))?,
            peak,
        });
    }
    let stored = [&world.bridge, &world.mcp].map(|h| {
        std::fs::read_dir(h.path.join(".local/state/droid-executor/tasks")).map_or(0, |d| d.count())
    });
    Ok(Outcome {
        time,
        took: (warm_took, main_took, started.elapsed()),
        fronts: [
            Front {
                name: "bridge",
                clients: BRIDGE_CLIENTS,
                kinds: soak_bridge::KINDS,
                warm: warm.bridge,
                main: main.bridge,
            },
            Front {
                name: "mcp",
                clients: MCP_CLIENTS,
                kinds: soak_mcp::KINDS,
                warm: warm.mcp,
                main: main.mcp,
            },
        ],
        checks,
        servers: figures,
        left,
        stored,
    })
}

/// Both front-ends' clients until `until`; with `whole_cycle`, each client also runs every
/// kind of operation at least once.
async fn traffic(
    bridge: &Arc<BridgeLoad>,
    mcp: &Arc<McpLoad>,
    phase: &Phase,
    until: Instant,
    whole_cycle: bool,
) {
    let mut clients = JoinSet::new();
    for c in 0..BRIDGE_CLIENTS {
        let (load, tally) = (Arc::clone(bridge), Arc::clone(&phase.bridge));
        clients.spawn(async move {
            let start = c * soak_bridge::KINDS.len() / BRIDGE_CLIENTS;
            let op = |kind| load.op(&tally, c, kind);
            client(soak_bridge::KINDS, start, until, whole_cycle, &tally, op).await;
        });
    }
    for c in 0..MCP_CLIENTS {
        let (load, tally) = (Arc::clone(mcp), Arc::clone(&phase.mcp));
        clients.spawn(async move {
            let start = c * soak_mcp::KINDS.len() / MCP_CLIENTS;
            let op = |kind| load.op(&tally, c, kind);
            client(soak_mcp::KINDS, start, until, whole_cycle, &tally, op).await;
        });
    }
    while let Some(done) = clients.join_next().await {
        if let Err(e) = done {
            phase
                .bridge
                .error("client", &format!("a client task failed: {e}"));
        }
    }
}

/// One client: operations of `kinds` in turn from index `start`, each timed and its outcome
/// counted, until `until` (and, with `whole_cycle`, one whole cycle).
async fn client<F, Fut>(
    kinds: &'static [&'static str],
    start: usize,
    until: Instant,
    whole_cycle: bool,
    tally: &Tally,
    op: F,
) where
    F: Fn(&'static str) -> Fut,
    Fut: Future<Output = Result<(), String>>,
{
    let mut done = 0;
    while Instant::now() < until || (whole_cycle && done < kinds.len()) {
        let kind = kinds[(start + done) % kinds.len()];
        let t = Instant::now();
        let outcome = op(kind).await;
        tally.op(kind, t.elapsed(), outcome);
        done += 1;
    }
}

/// Wait until neither server runs anything, no MCP call waits, and no process of either HOME
/// but the servers is left.
async fn drain(
    bridge: &BridgeLoad,
    mcp: &McpLoad,
    world: &World,
    servers: &[u32],
) -> Result<(), String> {
    let until = Instant::now() + DRAIN_LIMIT;
    loop {
        let idle = bridge.idle().await;
        let waiting = mcp.session().pending();
        let left: Vec<u32> = [&world.bridge, &world.mcp]
            .iter()
            .flat_map(|h| h.processes(servers))
            .map(|f| f.pid)
            .collect();
        if idle == Ok(true) && waiting == 0 && left.is_empty() {
            break;
        }
        if Instant::now() > until {
            return Err(format!(
                "still busy {DRAIN_LIMIT:?} after the traffic stopped: bridge idle {idle:?}, \
                 {waiting} MCP request(s) unanswered, processes {left:?}"
            ));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(())
}

/// Each of the idle `pids`' figures: RSS and VmHWM, and the smallest set of descriptors seen
/// over [`IDLE_LOOKS`] looks a second apart in all. The connection of the drain's last
/// `/health` may still be closing at the first look; a leaked descriptor is in every look.
async fn idle_figures(pids: [u32; 2]) -> Vec<Result<Sample>> {
    let mut fewest: [Option<Vec<String>>; 2] = [None, None];
    for look in 0..IDLE_LOOKS {
        if look > 0 {
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        for (f, pid) in fewest.iter_mut().zip(pids) {
            if let Ok(fds) = procfs::fd_targets(pid)
                && f.as_ref().is_none_or(|least| fds.len() < least.len())
            {
                *f = Some(fds);
            }
        }
    }
    pids.iter()
        .zip(fewest)
        .map(|(&pid, fds)| {
            Ok(Sample {
                rss: procfs::status_kib(pid, "VmRSS")?,
                hwm: procfs::status_kib(pid, "VmHWM")?,
                fds: fds.with_context(|| format!("/proc/{pid}/fd cannot be read"))?,
            })
        })
        .collect()
}

/// The highest RSS (KiB) and descriptor count of each of `pids`, sampled until `stop`.
async fn peaks(pids: [u32; 2], mut stop: oneshot::Receiver<()>) -> [(u64, usize); 2] {
    let mut peak = [(0, 0); 2];
    loop {
        for (p, pid) in peak.iter_mut().zip(pids) {
            if let Ok(rss) = procfs::status_kib(pid, "VmRSS") {
                p.0 = p.0.max(rss);
            }
            if let Ok(fds) = procfs::fd_targets(pid) {
                p.1 = p.1.max(fds.len());
            }
        }
        tokio::select! {
            _ = &mut stop => return peak,
            () = tokio::time::sleep(SAMPLE_EVERY) => {}
        }
    }
}
