//! `droid-executor bridge start|stop|status`: the HTTP bridge as a detached daemon (no pm2
//! needed): `serve` started in its own session, its output appended to
//! `<store>/bridge-<port>.log`, found again through `<store>/bridge-<port>.pid` and its lock.
//! `run --via bridge` starts it the same way when nothing listens on the port
//! ([`crate::bridge_client::ensure`]). `bridge stop` waits
//! `bridge_http::STOP_TIMEOUT` before SIGKILL, longer than the worst-case drain.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use bridge_http::client::{Client, probe};
use clap::{Args, Subcommand};
use droid_exec::tasks::daemon::{DaemonState, Stopped};
use serde_json::{Value, json};

use crate::bridge_client::{Where, ensure, ours, target};
use crate::bridge_site::daemon;
use crate::context::Context;
use crate::output::say;

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

pub(crate) async fn bridge(args: BridgeArgs, ctx: &Context) -> ExitCode {
    match bridge_inner(args, ctx).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("droid-executor bridge: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn bridge_inner(args: BridgeArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let settings = ctx.settings()?;
    let cfg = ctx.engine_config()?;
    match args.action {
        BridgeAction::Start(at) => {
            let t = target(&at, settings, ctx.env()).await?;
            match ensure(&t, cfg, ctx.config_arg()).await? {
                Some(pid) => {
                    let log = daemon(cfg, t.port).map(|d| d.log_path().display().to_string());
                    say(&format!(
                        "bridge started on http://{} (pid {pid}); log: {}",
                        t.addr,
                        log.unwrap_or_default()
                    ));
                }
                None => say(&format!("bridge already running on http://{}", t.addr)),
            }
            Ok(ExitCode::SUCCESS)
        }
        BridgeAction::Stop { at, grace } => {
            let t = target(&at, settings, ctx.env()).await?;
            let d = daemon(cfg, t.port).context("no task store: no bridge daemon to stop")?;
            match d.stop(Duration::from_secs(grace)).await? {
                Stopped::NotRunning => say(&format!("no bridge runs on port {}", t.port)),
                Stopped::Terminated(pid) => say(&format!("bridge stopped (pid {pid})")),
                Stopped::Killed(pid) => say(&format!(
                    "bridge (pid {pid}) did not stop within {grace} s and was killed"
                )),
            }
            Ok(ExitCode::SUCCESS)
        }
        BridgeAction::Status { at, json } => {
            let t = target(&at, settings, ctx.env()).await?;
            let state = match daemon(cfg, t.port) {
                Some(d) => d.state()?,
                None => DaemonState::Stopped,
            };
            let listens = probe(t.addr).await;
            let health = match ours(&t, cfg) {
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
                say(&report.to_string());
            } else if running {
                let h = health.as_ref().ok();
                let droid = h
                    .and_then(|h| h["droid"]["version"].as_str())
                    .unwrap_or("unknown");
                let pid = pid.map_or_else(|| "?".to_owned(), |p| p.to_string());
                let n = |v: Option<&Value>| v.and_then(Value::as_u64).unwrap_or(0);
                say(&format!(
                    "bridge running on http://{} (pid {pid}); droid {droid}; sync runs: {} \
                     running, {} queued; tasks: {} running, {} queued",
                    t.addr,
                    n(h.map(|h| &h["runs"]["running"])),
                    n(h.map(|h| &h["runs"]["queued"])),
                    n(h.map(|h| &h["tasks"]["running"])),
                    n(h.map(|h| &h["tasks"]["queued"])),
                ));
                if let Err(e) = &health {
                    say(&format!("but /health fails: {e}"));
                }
            } else {
                say(&format!("bridge not running on http://{}", t.addr));
                // something else answers there: say what, having sent it nothing
                if let Err(e) = &health
                    && listens
                {
                    say(&format!("{e:#}"));
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
