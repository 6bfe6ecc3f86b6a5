//! `droid-executor`: one binary carrying every front-end of the executor (`run`, `tasks`, seed
//! 002's `ask`/`pend`/`ping` shortcuts over them, `mcp`, `serve` and `bridge`, `setup`,
//! `config`, `schema`, `doctor`, the hidden `worker` that supervises a background task, and the
//! hidden `guard` that ends what a run leaves behind when the process running it dies; `acp`
//! when its issue lands). It decodes the command line, calls the `droid-exec` engine, and
//! encodes the answer; it spawns nothing itself.
//!
//! Exit codes: 0 success, 1 the task ran but did not succeed (failed, partial, timeout, cancelled),
//! 2 usage errors and `error` results (nothing ran), 3 `tasks wait` or `pend` on an unfinished
//! task, 4 the answer could not be written to stdout (a pipe whose reader has gone: the result is
//! lost, a background task keeps it in the store). `ping`, like `doctor`: 0 no check failed, 1
//! one did.

mod acp;
mod ask;
mod bridge;
mod cli;
mod config_cmd;
mod doctor;
mod mcp;
mod pend;
mod ping;
mod render;
mod run;
mod serve;
mod setup;
mod skill_bundle;
mod tasks;
mod worker;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = <cli::Cli as clap::Parser>::parse();
    cli::init_logging();
    // a run's supervisor or guardian starts with every run, a reaper with every front-end: one
    // thread starts fastest
    let mut builder = if matches!(
        args.command,
        cli::Command::Guard { .. } | cli::Command::Reap { .. }
    ) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    match builder.enable_all().build() {
        Ok(rt) => {
            let code = rt.block_on(cli::dispatch(args));
            // a blocking stdin read (the MCP server stopped by a signal) must not hold the exit
            rt.shutdown_timeout(std::time::Duration::from_millis(200));
            code
        }
        Err(e) => {
            eprintln!("droid-executor: cannot start the async runtime: {e}");
            ExitCode::from(2)
        }
    }
}
