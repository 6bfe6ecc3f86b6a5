//! `droid-executor mcp [--toolsets LIST]`: the MCP server on stdio (see the `mcp-stdio` crate);
//! `--toolsets` chooses the tools it offers over the setting `toolsets` (`droid_exec::toolset`). stdout carries only
//! protocol lines; this module prints nothing there, and logs go to stderr (`RUST_LOG`, `warn` by
//! default). SIGTERM, SIGINT and SIGHUP stop it like stdin EOF: running calls are cancelled and
//! their droid processes killed, and the process is gone within 1.3 s (the budget is in the
//! `mcp-stdio` read loop's docs).
//!
//! Exit status: 0 whenever the session ends, whatever ended it (stdin EOF, one of those signals,
//! or stdout closed: a write failing with EPIPE is how a client that went away looks, and it
//! ends the server quietly, without a panic or an error line); 2 when it cannot start (an
//! invalid config, signals that cannot be watched), with one line on stderr.

use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use droid_exec::Engine;
use droid_exec::toolset::Toolsets;
use mcp_stdio::Server;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::signals::cancel_on_signals;

/// droid's grace between SIGTERM and SIGKILL here: a client closing stdin waits about 2 s before
/// it signals us, and everything must be gone by then. The server's shutdown drain (0.9 s) must
/// outlast this grace plus the sweep of droid's escaped descendants, so that droid is killed
/// before the drain gives up on a call. Background tasks submitted here keep the configured
/// grace: their supervisors outlive the server.
const KILL_GRACE: Duration = Duration::from_millis(500);
const _: () = assert!(
    KILL_GRACE.as_millis() + 300 <= mcp_stdio::SHUTDOWN_DRAIN.as_millis(),
    "droid's kill grace must leave the shutdown drain time to kill and sweep"
);

#[derive(Debug, Args)]
pub(crate) struct McpArgs {
    /// The toolsets to offer, comma-separated: droid (execute_droid_task, droid_submit, …),
    /// delegate (ask, pend, ping, cancel with a provider argument), per_provider (ask_codex,
    /// pend_codex, …), or the keywords default (droid,delegate) and all. Overrides the setting
    /// `toolsets` (DROID_EXECUTOR_TOOLSETS).
    #[arg(long, value_name = "LIST", value_parser = Toolsets::parse)]
    toolsets: Option<Toolsets>,
}

pub(crate) async fn mcp(args: McpArgs, mut ctx: Context) -> ExitCode {
    // an MCP client filtered this environment: which one, `setup mcp` wrote into its entry; an
    // entry that does not say is some other client's (the Inspector's, one written by hand), and
    // a hint asking for a variable it lacks names that filter too (droid_exec::client_env)
    use droid_exec::client_env::{CLIENT_VAR, UNKNOWN_CLIENT};
    if ctx.env().get(CLIENT_VAR).is_none_or(String::is_empty) {
        ctx.env_mut()
            .insert(CLIENT_VAR.to_owned(), UNKNOWN_CLIENT.to_owned());
    }
    let task_cfg = match ctx.engine_config() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("droid-executor mcp: {e:#}");
            return ExitCode::from(2);
        }
    };
    let mut cfg = task_cfg.clone();
    cfg.kill_grace = KILL_GRACE;
    let server = Server::with_toolsets(
        Engine::new(cfg),
        task_cfg,
        ctx.env().clone(),
        ctx.config_path(),
        args.toolsets,
    );
    let shutdown = CancellationToken::new();
    // the same handling as `run` (SIGINT, SIGTERM, SIGHUP; one line on stderr)
    match cancel_on_signals(
        shutdown.clone(),
        "cancelling running calls (stopping droid)…",
    ) {
        Ok(_watcher) => {}
        Err(e) => {
            eprintln!("droid-executor mcp: cannot watch for signals: {e}");
            return ExitCode::from(2);
        }
    }
    mcp_stdio::serve(tokio::io::stdin(), tokio::io::stdout(), server, shutdown).await;
    ExitCode::SUCCESS
}
