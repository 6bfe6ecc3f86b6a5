//! The bridge as its clients find it (`bridge start|stop|status`, `run --via bridge`): where it
//! is ([`target`]), whether what listens there is a bridge of ours ([`ours`]), and [`ensure`],
//! which starts one in the background when nothing listens on the port, reporting at once, in
//! `serve`'s words, a bridge that cannot start.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitStatus;
use std::time::Duration;

use anyhow::{Context, bail};
use bridge_http::client::{Client, probe};
use bridge_http::{Token, check_bind};
use clap::Args;
use droid_exec::tasks::daemon::{Daemon, DaemonState, Started};
use droid_exec::{EngineConfig, EnvMap, Settings};

use crate::bridge_site::{address, daemon, token};

/// How long a started bridge gets to answer `/health`.
const START_WAIT: Duration = Duration::from_secs(15);

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
    cfg: &EngineConfig,
    config: Option<&PathBuf>,
) -> anyhow::Result<Option<u32>> {
    let client = Client::new(t.addr, t.token.clone());
    if probe(t.addr).await {
        ours(t, cfg)?;
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
    let d = daemon(cfg, t.port).context(
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
        if ours(t, cfg).is_err() {
            if let Some(status) = started.exited() {
                return exited_at_start(&d, &client, &started, Some(status), until).await;
            }
            if tokio::time::Instant::now() >= until {
                ours(t, cfg)?;
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
pub(crate) fn ours(t: &Target, cfg: &EngineConfig) -> anyhow::Result<()> {
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
