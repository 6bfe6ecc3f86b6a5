//! The command line: clap definitions and dispatch.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use droid_exec::Settings;

use crate::context::Context;
use crate::output::say;

/// Hand a decided, well-specified coding task to Factory's droid CLI and get back a verified,
/// structured result.
#[derive(Debug, Parser)]
#[command(name = "droid-executor", version, about)]
pub(crate) struct Cli {
    /// Config file (default: $XDG_CONFIG_HOME/droid-executor/config.toml).
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run one task through droid and print the result.
    Run(Box<crate::run::RunArgs>),
    /// Ask a provider (codex, claude, gemini, opencode, droid) in your own words; with
    /// --background, print a task id at once (fetch the reply with `pend`).
    Ask(Box<crate::ask::AskArgs>),
    /// Fetch a provider's task (default: its latest): the agent's reply, then the result.
    Pend(crate::pend::PendArgs),
    /// Is each provider's CLI found, which version, is an endpoint or key configured?
    Ping(crate::ping::PingArgs),
    /// Cancel a provider's task (default: its latest in this repository).
    Cancel(crate::cancel::CancelArgs),
    /// Print the JSON Schema (draft 2020-12) of the request or the result.
    Schema {
        /// Which schema.
        which: SchemaKind,
    },
    /// Check the setup: droid found and its version, authentication, configuration.
    Doctor {
        /// Print the checks as JSON.
        #[arg(long)]
        json: bool,
        /// The skills root to look for the skill in, as `setup skill --dir` (default:
        /// ~/.claude/skills).
        #[arg(long, value_name = "SKILLS_ROOT")]
        skills_dir: Option<PathBuf>,
    },
    /// Serve MCP on stdio (for Claude Code, Codex, Cursor, droid…).
    Mcp(crate::mcp::McpArgs),
    /// Serve the Agent Client Protocol on stdio: droid as the agent of Zed and other ACP
    /// editors (`setup acp --client zed` registers it).
    Acp,
    /// Serve the HTTP bridge in the foreground (default http://127.0.0.1:53002).
    Serve(crate::serve::ServeArgs),
    /// The HTTP bridge as a background daemon: start, stop, status.
    Bridge(crate::bridge::BridgeArgs),
    /// The effective configuration: `config show`.
    Config(crate::config_cmd::ConfigArgs),
    /// Register droid-executor with other tools.
    Setup(crate::setup::SetupArgs),
    /// Background tasks: list, show, wait for, cancel, clean; apply or discard a worktree task.
    Tasks(crate::tasks::TasksArgs),
    /// Supervise one background task (started by `run --background`; not for direct use).
    #[command(hide = true)]
    Worker {
        /// The task id.
        id: String,
        /// The task store.
        #[arg(long, value_name = "DIR")]
        store: PathBuf,
    },
    /// Guard one run (started by the engine; not for direct use). With a command after `--`:
    /// supervise it as a child subreaper and end its whole process tree when it exits or stdin
    /// says so; without: when stdin reaches its end (the run ended, or the process running it
    /// died), kill every process still carrying the run's marker.
    #[command(hide = true)]
    Guard {
        /// The run's marker (`DROID_EXECUTOR_RUN_ID`).
        marker: String,
        /// Start the supervised program in a Landlock layer of scopes only (signals, abstract
        /// Unix sockets), so that nothing it starts can signal this process.
        #[arg(long)]
        scope: bool,
        /// The supervised program's stdin (an agent's prompt file); `/dev/null` without.
        #[arg(long, value_name = "FILE")]
        stdin: Option<std::path::PathBuf>,
        /// The program to supervise and its arguments.
        #[arg(last = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Reap a front-end's cgroup (started by the engine; not for direct use): when stdin
    /// reaches its end (the front-end exited or died), kill every process in the cgroup and
    /// remove it.
    #[command(hide = true)]
    Reap {
        /// The cgroup (`…/droid-executor-<pid>-<id>` on a cgroup v2 file system).
        host: std::path::PathBuf,
        /// Where the front-end's scratch directories are (removed after the host).
        #[arg(long)]
        scratch: Option<std::path::PathBuf>,
    },
}

impl Command {
    /// The TCP ports of our own bridge that the runs this command starts must not reach
    /// (`droid_exec::process::net_confine`), and whether the rule applies always (a server) or only
    /// while something listens there (a one-shot command). `None`: the command starts no run,
    /// or is the bridge's own client.
    pub(crate) fn bridge_ports(&self, settings: &Settings) -> Option<(Vec<u16>, bool)> {
        match self {
            Self::Run(args) if args.via == crate::run::Via::InProcess => {
                Some((vec![settings.port], false))
            }
            Self::Ask(_) | Self::Worker { .. } => Some((vec![settings.port], false)),
            Self::Mcp(_) | Self::Acp => Some((vec![settings.port], true)),
            Self::Serve(args) => {
                let own = args.port.unwrap_or(settings.port);
                Some((vec![settings.port, own], true))
            }
            _ => None,
        }
    }

    /// Whether the command answers once and exits, all its work done when its dispatch
    /// returns (its runs settled: `run` and `ask` wait for the agent's tree to end): it runs on
    /// one thread, and its exit does not wait for idle threads. The servers (`mcp`, `acp`,
    /// `serve`) are not, nor a background task's `worker`, nor `ping` and `doctor`, which ask
    /// every agent CLI at once.
    pub(crate) fn one_shot(&self) -> bool {
        matches!(
            self,
            Self::Run(_)
                | Self::Ask(_)
                | Self::Pend(_)
                | Self::Cancel(_)
                | Self::Tasks(_)
                | Self::Schema { .. }
                | Self::Config(_)
                | Self::Guard { .. }
                | Self::Reap { .. }
        )
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub(crate) enum SchemaKind {
    /// The ExecutionRequest.
    Request,
    /// The ExecutionResult.
    Result,
    /// A background task's record (`tasks show --json`).
    TaskRecord,
}

/// Logs go to stderr (stdout carries results); `RUST_LOG` sets the level, default `warn`.
pub(crate) fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // colours only on a terminal: MCP clients and service managers keep stderr in files
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .try_init();
}

/// Run `command` in `ctx` (built by `main` from `--config` and the environment).
pub(crate) async fn dispatch(command: Command, ctx: Context) -> ExitCode {
    match command {
        Command::Run(args) => crate::run::run(*args, &ctx).await,
        Command::Ask(args) => crate::ask::ask(*args, &ctx).await,
        Command::Pend(args) => crate::pend::pend(args, &ctx).await,
        Command::Ping(args) => crate::ping::ping(args, &ctx).await,
        Command::Cancel(args) => crate::cancel::cancel(args, &ctx).await,
        Command::Schema { which } => {
            let schema = match which {
                SchemaKind::Request => droid_contract::request_schema(),
                SchemaKind::Result => droid_contract::result_schema(),
                SchemaKind::TaskRecord => droid_contract::task_record_schema(),
            };
            match serde_json::to_string_pretty(&schema) {
                Ok(s) => {
                    say(&s);
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("droid-executor: {e}");
                    ExitCode::from(2)
                }
            }
        }
        Command::Doctor { json, skills_dir } => {
            crate::doctor::doctor(&ctx, skills_dir.as_deref(), json).await
        }
        Command::Mcp(args) => crate::mcp::mcp(args, ctx).await,
        Command::Acp => crate::acp::acp(&ctx).await,
        Command::Serve(args) => crate::serve::serve(args, &ctx).await,
        Command::Bridge(args) => crate::bridge::bridge(args, &ctx).await,
        Command::Config(args) => crate::config_cmd::config(args, &ctx),
        Command::Setup(args) => crate::setup::setup(args, &ctx).await,
        Command::Tasks(args) => crate::tasks::tasks(args, &ctx).await,
        Command::Worker { id, store } => crate::worker::worker(&id, &store).await,
        Command::Guard {
            marker,
            scope,
            stdin,
            command,
        } => match command.split_first() {
            Some((program, args)) => {
                supervise(&marker, program.into(), args.to_vec(), stdin, scope).await
            }
            None => guard(&marker).await,
        },
        Command::Reap { host, scratch } => reap(&host, scratch.as_deref()).await,
    }
}

/// `droid-executor reap <host>`: see `droid_exec::process::cgroup`. Exit 0 when the cgroup was
/// emptied and removed, 1 when some process outlived the budget, 2 for a directory it refuses.
async fn reap(host: &std::path::Path, scratch: Option<&std::path::Path>) -> ExitCode {
    let owner = match droid_exec::process::guard::stdin_control() {
        Ok(pipe) => pipe,
        Err(e) => {
            eprintln!("droid-executor reap: stdin is not the front-end's pipe: {e}");
            return ExitCode::from(2);
        }
    };
    match droid_exec::process::cgroup::reap_host(host, owner, scratch).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            eprintln!(
                "droid-executor reap: {} could not be emptied",
                host.display()
            );
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("droid-executor reap: {e}");
            ExitCode::from(2)
        }
    }
}

/// `droid-executor guard <marker> -- <program> <args…>`: see `droid_exec::process::guard`. Exits as the
/// program did (its code, or killed by the same signal) once its whole tree is gone; 126 when it
/// could not be started (the reason on stderr, which is the program's), 2 for a refused marker.
async fn supervise(
    marker: &str,
    program: std::path::PathBuf,
    args: Vec<std::ffi::OsString>,
    stdin: Option<std::path::PathBuf>,
    scope: bool,
) -> ExitCode {
    let control = match droid_exec::process::guard::stdin_control() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("droid-executor guard: stdin is not the engine's control pipe: {e}");
            return ExitCode::from(droid_exec::process::guard::SUPERVISOR_SPAWN_FAILED);
        }
    };
    match droid_exec::process::guard::supervise_tree(marker, program, args, stdin, scope, control)
        .await
    {
        Ok((status, left)) => {
            if left > 0 {
                eprintln!("droid-executor guard: {left} process(es) of run {marker} survived");
            }
            ExitCode::from(droid_exec::process::guard::exit_as(status))
        }
        Err(droid_exec::EngineError::InvalidMarker(m)) => {
            eprintln!("droid-executor guard: invalid marker {m:?}");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("droid-executor guard: {e}");
            ExitCode::from(droid_exec::process::guard::SUPERVISOR_SPAWN_FAILED)
        }
    }
}

/// `droid-executor guard <marker>`: see `droid_exec::process::guard`. Exit 0 when nothing of the run is
/// left, 1 when some process survived the sweep, 2 for a marker it refuses.
async fn guard(marker: &str) -> ExitCode {
    match droid_exec::process::guard::guard(marker, tokio::io::stdin()).await {
        Ok(0) => ExitCode::SUCCESS,
        Ok(left) => {
            eprintln!("droid-executor guard: {left} process(es) of run {marker} survived");
            ExitCode::from(1)
        }
        Err(e) => {
            eprintln!("droid-executor guard: {e}");
            ExitCode::from(2)
        }
    }
}
