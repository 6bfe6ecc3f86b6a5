//! `droid-executor bridge start|stop|status`: the HTTP bridge as a detached daemon (no pm2
//! needed): `serve` started in its own session, its output appended to
//! `<store>/bridge-<port>.log`, found again through `<store>/bridge-<port>.pid` and its lock.
//! `run --via bridge` uses [`ensure`] to start it when nothing listens on the port; a bridge
//! that cannot start is reported at once, in `serve`'s words. `bridge stop` waits
//! `bridge_http::STOP_TIMEOUT` before SIGKILL, longer than the worst-case drain.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{ExitCode, ExitStatus};
use std::time::Duration;

use anyhow::{Context, bail};
use bridge_http::client::{Client, probe};
use bridge_http::{Token, check_bind};
use clap::{Args, Subcommand};
use droid_exec::tasks::daemon::{Daemon, DaemonState, Started, Stopped};
use droid_exec::{EnvMap, Settings};
use serde_json::{Value, json};

use crate::cli::{engine_config, env_map, settings};
use crate::serve::{address, daemon, token};

/// How long a started bridge gets to answer `/health`.
const START_WAIT: Duration = Duration::from_secs(15);

#[derive(Debug, Args)]
pub(crate) struct BridgeArgs {
    #[command(subcommand)]
    pub action: BridgeAction,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BridgeAction {
    /// Start the bridge in the background (nothing happens when it already runs).
    Start(Where),
    /// Stop it: SIGTERM (sync runs get their drain grace), SIGKILL after --grace.
    Stop {
        #[command(flatten)]
        at: Where,
        /// Seconds to wait before SIGKILL: by default 10 s more than the longest drain of a bridge
        /// with the default drain grace (30 s grace, 15 s to cancel, 5 s to answer).
        #[arg(long, value_name = "SECONDS", default_value_t = bridge_http::STOP_TIMEOUT.as_secs())]
        grace: u64,
    },
    /// Whether it runs, and its health. Exit 0 running, 3 stopped.
    Status {
        #[command(flatten)]
        at: Where,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

/// Which bridge.
#[derive(Debug, Args, Clone)]
pub(crate) struct Where {
    /// Address (default 127.0.0.1).
    #[arg(long)]
    pub host: Option<String>,
    /// Port (default 53002, or PORT).
    #[arg(long)]
    pub port: Option<u16>,
}

/// A bridge as the client sees it.
pub(crate) struct Target {
    pub addr: SocketAddr,
    pub port: u16,
    pub host: String,
    pub token: Option<Token>,
}

pub(crate) async fn target(
    at: &Where,
    settings: &Settings,
    env: &EnvMap,
) -> anyhow::Result<Target> {
    let host = at.host.clone().unwrap_or_else(|| settings.host.clone());
    let port = at.port.unwrap_or(settings.port);
    // a client talks to the bridge's address; 0.0.0.0 and :: mean "this machine" here
    let addr = droid_exec::bind_address::client_addr(address(&host, port).await?);
    Ok(Target {
        addr,
        port,
        host,
        token: token(None, settings, env)?,
    })
}

/// The last `n` lines of `text`, without the final newline.
fn last_lines(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// Make sure a bridge answers at `t`: nothing to do when one does; otherwise start one and wait
/// for its `/health`. Returns the pid when it started one.
///
/// Fails fast: what `serve` would refuse at once (a non-loopback bind without a token) is
/// refused before anything starts, in `serve`'s words; and a bridge that exits before it
/// answers (its port lock held, an address it cannot bind…) is reported as soon as it exits,
/// with the lines it wrote to its log, rather than after the whole start-up wait.
pub(crate) async fn ensure(
    t: &Target,
    settings: &Settings,
    env: &EnvMap,
    config: Option<&PathBuf>,
) -> anyhow::Result<Option<u32>> {
    let client = Client::new(t.addr, t.token.clone());
    if probe(t.addr).await {
        ours(t, &engine_config(settings, env))?;
        return match client.health().await {
            Ok(_) => Ok(None),
            // the bridge answered and refused (a token, Host…): its own words say why
            Err(e @ bridge_http::BridgeError::Answer { .. }) => Err(e.into()),
            Err(e) => Err(anyhow::Error::new(e)
                .context("something listens on the bridge's port but does not answer /health")),
        };
    }
    // the address serve will bind (t.addr is where a client talks to it: 0.0.0.0 → 127.0.0.1)
    let bind = address(&t.host, t.port).await?;
    check_bind(bind, t.token.as_ref())?;
    let cfg = engine_config(settings, env);
    let d = daemon(&cfg, t.port).context(
        "the bridge daemon keeps its pid file in the task store: set store_dir, \
         XDG_STATE_HOME or HOME",
    )?;
    let program = std::env::current_exe().context("cannot find this program to start it")?;
    let mut args: Vec<OsString> = vec![
        "serve".into(),
        "--host".into(),
        t.host.clone().into(),
        "--port".into(),
        t.port.to_string().into(),
    ];
    if let Some(c) = config {
        args.push("--config".into());
        args.push(std::path::absolute(c).unwrap_or_else(|_| c.clone()).into());
    }
    let full_env: Vec<(OsString, OsString)> = std::env::vars_os().collect();
    let cwd = cfg.store_dir.clone().unwrap_or_else(|| PathBuf::from("/"));
    let mut started = d.start(&program, args, full_env, &cwd)?;
    let pid = started.pid();
    let until = tokio::time::Instant::now() + START_WAIT;
    loop {
        // nothing is sent before the one listening is proven to be a bridge of ours: another
        // process may have taken the port before the one just started could bind it
        if ours(t, &cfg).is_err() {
            if let Some(status) = started.exited() {
                return exited_at_start(&d, &client, &started, Some(status), until).await;
            }
            if tokio::time::Instant::now() >= until {
                ours(t, &cfg)?;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
            continue;
        }
        // its exit is watched while /health is asked: a connection to an address that drops
        // packets can take seconds to fail
        let health = tokio::select! {
            health = client.health() => health,
            status = started.wait_exit() => {
                return exited_at_start(&d, &client, &started, status, until).await;
            }
        };
        match health {
            // the one answering may be another start's, made at the same moment (its serve won
            // the port's lock; ours exits): then this start started nothing
            Ok(_) => {
                return Ok(match d.state() {
                    Ok(DaemonState::Running(Some(p))) if p != pid => None,
                    _ => Some(pid),
                });
            }
            // it is up and refuses (a token, Host…): its own words say why
            Err(e @ bridge_http::BridgeError::Answer { .. }) => return Err(e.into()),
            Err(_) => {}
        }
        if let Some(status) = started.exited() {
            return exited_at_start(&d, &client, &started, Some(status), until).await;
        }
        if tokio::time::Instant::now() >= until {
            bail!(
                "the bridge (pid {pid}) did not answer /health within {} s; its log {} ends \
                 with:\n{}",
                START_WAIT.as_secs(),
                d.log_path().display(),
                last_lines(&started.log_lines(), 10)
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Whether what listens at `t` is provably a bridge of ours (its lock in the store, its pid
/// holding the listening socket: `droid_exec::tasks::listener`), before a request or the token
/// is sent there. A bridge on another machine (a host that is not loopback) cannot be checked
/// this way and is taken at the user's word.
fn ours(t: &Target, cfg: &droid_exec::EngineConfig) -> anyhow::Result<()> {
    if !t.addr.ip().is_loopback() {
        return Ok(());
    }
    let d = daemon(cfg, t.port).context(
        "no task store: a bridge's lock and pid file live there, and without them the one \
         listening cannot be proven to be droid-executor's",
    )?;
    droid_exec::tasks::listener::ours(&d, t.port)
        .map(|_| ())
        .map_err(|e| anyhow::anyhow!("{e}: not sending it the request or the token"))
}

/// The bridge `ensure` started exited before it answered. When another instance holds the
/// port's lock, that one was started at the same moment (two `run --via bridge` at once): it is
/// waited for, and `None` returned as for a bridge found running. Otherwise the error says what
/// the bridge wrote to its log (`serve`'s own error line).
async fn exited_at_start(
    d: &Daemon,
    client: &Client,
    started: &Started,
    status: Option<ExitStatus>,
    until: tokio::time::Instant,
) -> anyhow::Result<Option<u32>> {
    let other = matches!(d.state(), Ok(DaemonState::Running(p)) if p != Some(started.pid()));
    while other && tokio::time::Instant::now() < until {
        if client.health().await.is_ok() {
            return Ok(None);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let how = status.map_or_else(
        || "its exit status is unknown".to_owned(),
        |s| s.to_string(),
    );
    let said = last_lines(&started.log_lines(), 10);
    let said = if said.trim().is_empty() {
        "(nothing)".to_owned()
    } else {
        said
    };
    bail!(
        "the bridge (pid {}) exited before it answered ({how}); its log {} says:\n{said}",
        started.pid(),
        d.log_path().display(),
    )
}

pub(crate) async fn bridge(args: BridgeArgs, config: Option<&PathBuf>) -> ExitCode {
    match bridge_inner(args, config).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("droid-executor bridge: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn bridge_inner(args: BridgeArgs, config: Option<&PathBuf>) -> anyhow::Result<ExitCode> {
    let env = env_map();
    let settings = settings(config, &env)?;
    match args.action {
        BridgeAction::Start(at) => {
            let t = target(&at, &settings, &env).await?;
            match ensure(&t, &settings, &env, config).await? {
                Some(pid) => {
                    let cfg = engine_config(&settings, &env);
                    let log = daemon(&cfg, t.port).map(|d| d.log_path().display().to_string());
                    crate::cli::say(&format!(
                        "bridge started on http://{} (pid {pid}); log: {}",
                        t.addr,
                        log.unwrap_or_default()
                    ));
                }
                None => crate::cli::say(&format!("bridge already running on http://{}", t.addr)),
            }
            Ok(ExitCode::SUCCESS)
        }
        BridgeAction::Stop { at, grace } => {
            let t = target(&at, &settings, &env).await?;
            let cfg = engine_config(&settings, &env);
            let d = daemon(&cfg, t.port).context("no task store: no bridge daemon to stop")?;
            match d.stop(Duration::from_secs(grace)).await? {
                Stopped::NotRunning => {
                    crate::cli::say(&format!("no bridge runs on port {}", t.port))
                }
                Stopped::Terminated(pid) => crate::cli::say(&format!("bridge stopped (pid {pid})")),
                Stopped::Killed(pid) => crate::cli::say(&format!(
                    "bridge (pid {pid}) did not stop within {grace} s and was killed"
                )),
            }
            Ok(ExitCode::SUCCESS)
        }
        BridgeAction::Status { at, json } => {
            let t = target(&at, &settings, &env).await?;
            let cfg = engine_config(&settings, &env);
            let state = match daemon(&cfg, t.port) {
                Some(d) => d.state()?,
                None => DaemonState::Stopped,
            };
            let listens = probe(t.addr).await;
            let health = match ours(&t, &cfg) {
                _ if !listens => Err(anyhow::anyhow!(
                    "bridge at {}: nothing listens there (connection refused)",
                    t.addr
                )),
                Ok(()) => Client::new(t.addr, t.token.clone())
                    .health()
                    .await
                    .map_err(anyhow::Error::new),
                Err(e) => Err(e),
            };
            let running = matches!(state, DaemonState::Running(_)) || health.is_ok();
            let pid = match state {
                DaemonState::Running(p) => p,
                DaemonState::Stopped => None,
            };
            let report = json!({
                "running": running,
                "pid": pid,
                "url": format!("http://{}", t.addr),
                "health": health.as_ref().ok(),
                "error": health.as_ref().err().map(ToString::to_string),
            });
            if json {
                crate::cli::say(&report.to_string());
            } else if running {
                let h = health.as_ref().ok();
                let droid = h
                    .and_then(|h| h["droid"]["version"].as_str())
                    .unwrap_or("unknown");
                let pid = pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
                let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
                crate::cli::say(&format!(
                    "bridge running on http://{} (pid {pid}); droid {droid}; sync runs: {} \
                     running, {} queued; tasks: {} running, {} queued",
                    t.addr,
                    n(h.map(|h| &h["runs"]["running"])),
                    n(h.map(|h| &h["runs"]["queued"])),
                    n(h.map(|h| &h["tasks"]["running"])),
                    n(h.map(|h| &h["tasks"]["queued"])),
                ));
                if let Err(e) = &health {
                    crate::cli::say(&format!("but /health fails: {e}"));
                }
            } else {
                crate::cli::say(&format!("bridge not running on http://{}", t.addr));
                // something else answers there: say what, having sent it nothing
                if let Err(e) = &health
                    && listens
                {
                    crate::cli::say(&format!("{e:#}"));
                }
            }
            Ok(if running {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(3)
            })
        }
    }
}
