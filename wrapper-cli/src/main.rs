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
mod bridge_client;
mod bridge_site;
mod cancel;
mod cli;
mod config_cmd;
mod context;
mod doctor;
mod expired;
mod in_process;
mod mcp;
mod mcp_http;
mod output;
mod pend;
mod ping;
mod provider_arg;
mod provider_task;
mod render;
mod run;
mod serve;
mod setup;
mod signals;
mod skill_bundle;
mod skills_root;
mod tasks;
mod worker;

use std::process::ExitCode;

fn main() -> ExitCode {
    let args = <cli::Cli as clap::Parser>::parse();
    cli::init_logging();
    let ctx = context::Context::of_process(args.config);
    // before any other thread exists: the runs this process starts cannot connect to our own
    // bridge (a request from inside a run never gets more than the run has); an error in the
    // settings is reported by the command that needs them
    if let Ok(settings) = ctx.settings()
        && let Some((ports, always)) = args.command.bridge_ports(settings)
    {
        if always {
            droid_exec::process::net_confine::refuse_tcp_connect_to(&ports);
        } else {
            droid_exec::process::net_confine::refuse_if_listening(&ports);
        }
    }
    // a command that answers once and exits (a run's supervisor or guardian starts with every
    // run, a reaper with every front-end, `run` with every task) starts fastest on one thread;
    // the servers get a thread per core
    let one_shot = args.command.one_shot();
    let mut builder = if one_shot {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    match builder.enable_all().build() {
        Ok(rt) => {
            let code = rt.block_on(cli::dispatch(args.command, ctx));
            if one_shot {
                // its answer is out and its runs are settled: the idle threads of the blocking
                // pool are not waited for (joining them cost `run` a quarter of a millisecond)
                rt.shutdown_background();
            } else {
                // a blocking stdin read (the MCP server stopped by a signal) must not hold the
                // exit
                rt.shutdown_timeout(std::time::Duration::from_millis(200));
            }
            code
        }
        Err(e) => {
            eprintln!("droid-executor: cannot start the async runtime: {e}");
            ExitCode::from(2)
        }
    }
}
