//! `droid-executor setup mcp --client droid|claude|codex [--dry-run]`: register this binary's MCP
//! server (`<this executable> mcp`) with an MCP client (the engine's `setup` module does the work).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use droid_exec::setup::{McpClient, apply, plan};

use crate::cli::{engine_config, env_map, settings};

#[derive(Debug, Args)]
pub(crate) struct SetupArgs {
    #[command(subcommand)]
    command: SetupCommand,
}

#[derive(Debug, Subcommand)]
enum SetupCommand {
    /// Register `droid-executor mcp` with an MCP client.
    Mcp {
        /// The client.
        #[arg(long, value_enum)]
        client: Client,
        /// Print what would be done, change nothing.
        #[arg(long)]
        dry_run: bool,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Client {
    /// Factory's droid (`droid mcp add`).
    Droid,
    /// Claude Code (`~/.claude.json`, user scope).
    Claude,
    /// Codex (`~/.codex/config.toml`).
    Codex,
}

pub(crate) async fn setup(args: SetupArgs, config: Option<&PathBuf>) -> ExitCode {
    let SetupCommand::Mcp { client, dry_run } = args.command;
    let env = env_map();
    let settings = match settings(config, &env) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("droid-executor: {e:#}");
            return ExitCode::from(2);
        }
    };
    let cfg = engine_config(&settings, &env);
    let Some(exe) = cfg.supervisor.clone() else {
        eprintln!("droid-executor: cannot tell where this executable is");
        return ExitCode::from(2);
    };
    let client = match client {
        Client::Droid => McpClient::Droid,
        Client::Claude => McpClient::Claude,
        Client::Codex => McpClient::Codex,
    };
    let plan = match plan(client, &exe, cfg.droid_bin.as_deref(), &env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("droid-executor: {e}");
            return ExitCode::from(2);
        }
    };
    if dry_run {
        println_out(&format!("would {plan}"));
        return ExitCode::SUCCESS;
    }
    match apply(&plan, &cfg).await {
        Ok(done) => {
            println_out(&done);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("droid-executor: {e}");
            ExitCode::from(2)
        }
    }
}

fn println_out(text: &str) {
    use std::io::Write as _;
    let mut o = std::io::stdout().lock();
    let _ = writeln!(o, "{text}");
}
