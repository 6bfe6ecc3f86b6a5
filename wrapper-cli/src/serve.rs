//! `droid-executor serve`: the HTTP bridge in the foreground (what `bridge start`, pm2 and the
//! systemd unit run). SIGTERM or SIGINT drain it (see `bridge_http::serve`). With a task store
//! it holds the daemon lock `bridge-<port>` there, so `bridge status|stop` and `run --via
//! bridge` find it however it was started, and a second bridge on the same port is refused.
//! `--port 0` binds any free port (the first stderr line names it) and claims no daemon lock.
//! A task store that cannot be used is said once on stderr at start-up; the task routes then
//! answer 503 with the same words. `/mcp` serves the MCP server (the tools of `droid-executor
//! mcp`, with the settings `toolsets` and `providers`) over Streamable HTTP ([`crate::mcp_http`]).
//! The hidden `--header-timeout` and `--body-timeout` (seconds) shorten the slow-client limits
//! so the suites need not wait the defaults (10 s and 30 s) out. The connection and event-stream
//! limits (`--max-connections`, `--reserved-connections`, `--max-streams`, `--stream-max-life`,
//! …) are described in `bridge_http`'s `conns` and `events` modules and docs/operations.md.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use bridge_http::{Bridge, BridgeConfig, check_bind};
use clap::Args;
use droid_exec::Engine;
use mcp_stdio::Server;
use tokio_util::sync::CancellationToken;

use crate::bridge_site::{address, daemon, token};
use crate::context::Context;
use crate::expired::clean_expired;
use crate::signals::cancel_on_signals;

/// How often expired task results are removed while the bridge runs.
const JANITOR_EVERY: Duration = Duration::from_secs(3600);

#[derive(Debug, Args)]
pub(crate) struct ServeArgs {
    /// Address to bind (default 127.0.0.1; anything else needs a token).
    #[arg(long)]
    pub host: Option<String>,
    /// Port (default 53002, or PORT).
    #[arg(long)]
    pub port: Option<u16>,
    /// File holding the bearer token clients must send (or set DROID_EXECUTOR_TOKEN).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// Seconds sync runs get to finish at shutdown before they are cancelled. Whatever stops the
    /// bridge should wait this plus 20 s (to cancel the runs and send the answers) before SIGKILL.
    #[arg(long, value_name = "SECONDS", default_value_t = bridge_http::DRAIN_GRACE.as_secs())]
    pub drain_grace: u64,
    /// Seconds a client gets to send a request's head (default 10). Hidden: the default suits
    /// every real client; the slow-client tests shorten it rather than wait 10 s.
    #[arg(long, value_name = "SECONDS", hide = true)]
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    pub header_timeout: Option<u64>,
    /// Seconds a client gets to send a request's body once its head arrived (default 30).
    /// Hidden, for the stalled-body tests, like `--header-timeout`.
    #[arg(long, value_name = "SECONDS", hide = true)]
    #[arg(value_parser = clap::value_parser!(u64).range(1..))]
    pub body_timeout: Option<u64>,
    /// Most connections held at once (default 1024); a new one closes the oldest idle one.
    #[arg(long, value_name = "N")]
    #[arg(value_parser = clap::value_parser!(u64).range(2..=1_000_000))]
    pub max_connections: Option<u64>,
    /// Most connections one remote address holds (default 128; loopback clients are exempt).
    #[arg(long, value_name = "N")]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_connections_per_client: Option<u64>,
    /// Connections kept for short requests (/health, /metrics, task status): event streams and
    /// sync runs take at most max-connections minus this many (default 64).
    #[arg(long, value_name = "N")]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub reserved_connections: Option<u64>,
    /// Most event streams open at once (default 256).
    #[arg(long, value_name = "N")]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_streams: Option<u64>,
    /// Most event streams of one task (default 16).
    #[arg(long, value_name = "N")]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub max_streams_per_task: Option<u64>,
    /// Seconds of quiet after which an event stream sends a keep-alive comment (default 15).
    #[arg(long, value_name = "SECONDS")]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub stream_keep_alive: Option<u64>,
    /// Seconds an event stream lives at most (default 3600); it then ends with `event: resume`
    /// and the client reconnects with Last-Event-ID.
    #[arg(long, value_name = "SECONDS")]
    #[arg(value_parser = clap::value_parser!(u64).range(1..=604_800))]
    pub stream_max_life: Option<u64>,
}

/// The connection and stream limits of `args` over `defaults`.
///
/// # Errors
/// A reserve that leaves no connection to event streams and sync runs.
fn limits(args: &ServeArgs, defaults: BridgeConfig) -> anyhow::Result<BridgeConfig> {
    let n = |v: Option<u64>, d: usize| v.map_or(d, |v| usize::try_from(v).unwrap_or(usize::MAX));
    let secs = |v: Option<u64>, d: Duration| v.map_or(d, Duration::from_secs);
    let cfg = BridgeConfig {
        max_connections: n(args.max_connections, defaults.max_connections),
        max_connections_per_client: n(
            args.max_connections_per_client,
            defaults.max_connections_per_client,
        ),
        reserved_connections: n(args.reserved_connections, defaults.reserved_connections),
        max_streams: n(args.max_streams, defaults.max_streams),
        max_streams_per_task: n(args.max_streams_per_task, defaults.max_streams_per_task),
        stream_keep_alive: secs(args.stream_keep_alive, defaults.stream_keep_alive),
        stream_max_life: secs(args.stream_max_life, defaults.stream_max_life),
        ..defaults
    };
    if cfg.reserved_connections >= cfg.max_connections {
        anyhow::bail!(
            "--reserved-connections {} must be below --max-connections {}: event streams and \
             sync runs need a connection too",
            cfg.reserved_connections,
            cfg.max_connections
        );
    }
    Ok(cfg)
}

pub(crate) async fn serve(args: ServeArgs, ctx: &Context) -> ExitCode {
    match serve_inner(args, ctx).await {
        Ok(code) => code,
        Err(e) => {
            eprintln!("droid-executor serve: {e:#}");
            ExitCode::from(2)
        }
    }
}

async fn serve_inner(args: ServeArgs, ctx: &Context) -> anyhow::Result<ExitCode> {
    let settings = ctx.settings()?;
    let host = args.host.clone().unwrap_or_else(|| settings.host.clone());
    let port = args.port.unwrap_or(settings.port);
    let token = token(args.token_file.as_ref(), settings, ctx.env())?;
    let addr = address(&host, port).await?;
    check_bind(addr, token.as_ref())?;
    let mut cfg = ctx.engine_config()?.clone();
    // the bridge's own token never reaches the store, a result or a log, even when a caller
    // writes it into a request
    cfg.redact
        .extend(token.as_ref().map(|t| t.expose().to_owned()));
    for w in &cfg.droid_warnings {
        eprintln!("droid-executor serve: warning: {w}");
    }
    // port 0 (any free port, for tests) has no stable name to be found by
    let _claim = match daemon(&cfg, port).filter(|_| port != 0) {
        Some(d) => match d.claim()? {
            Some(g) => Some(g),
            None => anyhow::bail!(
                "a bridge already runs on port {port} (pid file {}); stop it with \
                 `droid-executor bridge stop --port {port}`",
                d.pid_path().display()
            ),
        },
        None => None,
    };
    let limits = limits(&args, BridgeConfig::default())?;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|reason| bridge_http::BridgeError::Listen { addr, reason })?;
    let defaults = limits;
    let bridge_cfg = BridgeConfig {
        body_limit: settings.body_limit,
        max_queue: settings.max_queue,
        header_timeout: args
            .header_timeout
            .map_or(defaults.header_timeout, Duration::from_secs),
        body_timeout: args
            .body_timeout
            .map_or(defaults.body_timeout, Duration::from_secs),
        drain_grace: Duration::from_secs(args.drain_grace),
        token,
        allowed_hosts: settings.allowed_hosts.clone(),
        allowed_origins: settings.allowed_origins.clone(),
        ..defaults
    };
    let shutdown = CancellationToken::new();
    let _signals = cancel_on_signals(shutdown.clone(), "shutting down (draining)…")
        .map_err(|e| anyhow::anyhow!("cannot watch for signals: {e}"))?;
    // `/mcp` runs on the bridge's own engine: one engine per process, drained together
    let engine = Arc::new(Engine::new(cfg));
    let mcp = Server::with_toolsets(
        Arc::clone(&engine),
        engine.config(),
        ctx.env().clone(),
        ctx.config_path(),
        None,
    );
    let bridge = Bridge::with_mcp(engine, bridge_cfg, crate::mcp_http::Endpoint::new(mcp));
    let stop_janitor = CancellationToken::new();
    match (bridge.tasks(), bridge.tasks_unavailable()) {
        (Some(tasks), _) => {
            let tasks = tasks.clone();
            clean_expired(&tasks).await;
            let stop = stop_janitor.clone();
            tokio::spawn(async move { tasks.janitor(JANITOR_EVERY, stop).await });
        }
        // said once here; the task routes answer 503 with the same words
        (None, why) => eprintln!(
            "droid-executor serve: warning: {}; the task routes answer 503",
            why.unwrap_or("background tasks are not available")
        ),
    }
    let bound = listener.local_addr().unwrap_or(addr);
    eprintln!(
        "droid-executor serve: listening on http://{bound} (pid {})",
        std::process::id()
    );
    bridge_http::serve(listener, bridge, shutdown).await;
    stop_janitor.cancel();
    eprintln!("droid-executor serve: stopped");
    Ok(ExitCode::SUCCESS)
}
