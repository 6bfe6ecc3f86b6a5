//! `droid-executor acp`: the Agent Client Protocol agent on stdio (see the `acp-stdio` crate),
//! for Zed and other ACP editors. stdout carries only protocol lines; logs go to stderr
//! (`RUST_LOG`, `warn` by default). SIGTERM, SIGINT and SIGHUP end it like stdin EOF: running
//! turns are cancelled, and every session's droid, with all it started, is ended.
//!
//! Exit status: 0 whenever the connection ends; 2 when it cannot start (an invalid config,
//! signals that cannot be watched), with one line on stderr.

use std::process::ExitCode;

use droid_exec::Engine;
use tokio_util::sync::CancellationToken;

use crate::context::Context;
use crate::signals::cancel_on_signals;

pub(crate) async fn acp(ctx: &Context) -> ExitCode {
    let engine = match ctx.engine_config() {
        Ok(cfg) => Engine::new(cfg.clone()),
        Err(e) => {
            eprintln!("droid-executor acp: {e:#}");
            return ExitCode::from(2);
        }
    };
    let shutdown = CancellationToken::new();
    match cancel_on_signals(
        shutdown.clone(),
        "ending the ACP sessions (stopping droid)…",
    ) {
        Ok(_watcher) => {
            acp_stdio::serve(tokio::io::stdin(), tokio::io::stdout(), engine, shutdown).await;
        }
        Err(e) => {
            eprintln!("droid-executor acp: cannot watch for signals: {e}");
            return ExitCode::from(2);
        }
    }
    ExitCode::SUCCESS
}
