//! `droid-executor mcp`: the MCP server on stdio (see the `mcp-stdio` crate). stdout carries only
//! protocol lines; this module prints nothing there. SIGTERM, SIGINT and SIGHUP stop it like stdin
//! EOF: running calls are cancelled and their droid processes killed.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use droid_exec::Engine;
use droid_exec::config::default_config_path;
use mcp_stdio::Server;
use tokio_util::sync::CancellationToken;

use crate::cli::{engine_config, env_map, settings};

/// droid's grace between SIGTERM and SIGKILL here: a client closing stdin waits about 2 s before
/// it signals us, and everything must be gone by then.
const KILL_GRACE: Duration = Duration::from_secs(1);

pub(crate) async fn mcp(config: Option<&PathBuf>) -> ExitCode {
    let env = env_map();
    let settings = match settings(config, &env) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("droid-executor mcp: {e:#}");
            return ExitCode::from(2);
        }
    };
    let mut cfg = engine_config(&settings, &env);
    cfg.kill_grace = KILL_GRACE;
    let path = config.cloned().or_else(|| default_config_path(&env));
    let server = Server::new(Engine::new(cfg), env, path);
    let shutdown = CancellationToken::new();
    // the same handling as `run` (SIGINT, SIGTERM, SIGHUP; one line on stderr)
    match crate::run::cancel_on_signals(
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
