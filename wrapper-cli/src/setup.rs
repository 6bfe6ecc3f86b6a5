//! `droid-executor setup mcp --client droid|claude|codex [--dry-run]`: register this binary's MCP
//! server (`<this executable> mcp`) with an MCP client (the engine's `setup` module does the
//! work). `droid-executor setup skill [--dir SKILLS_ROOT] [--force] [--dry-run]`: install the
//! Agent Skill built into this binary into `SKILLS_ROOT/droid-executor` (default
//! `~/.claude/skills`; the engine's `skill_install` module does the work).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use droid_exec::setup::{McpClient, apply, plan};
use droid_exec::skill_install::{FileAction, install_skill, plan_skill};

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
    /// Install the Agent Skill into SKILLS_ROOT/droid-executor.
    Skill {
        /// The skills root (default: ~/.claude/skills).
        #[arg(long, value_name = "SKILLS_ROOT")]
        dir: Option<PathBuf>,
        /// Replace files edited since they were installed (the edited ones are kept as .bak).
        #[arg(long)]
        force: bool,
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

/// The default skills root: Claude Code's user skills.
pub(crate) fn default_skills_root(env: &droid_exec::EnvMap) -> Option<PathBuf> {
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".claude/skills"))
}

fn skill(dir: Option<PathBuf>, force: bool, dry_run: bool) -> ExitCode {
    let env = env_map();
    let Some(root) = dir.or_else(|| default_skills_root(&env)) else {
        eprintln!("droid-executor: HOME is not set; name the skills root with --dir");
        return ExitCode::from(2);
    };
    let files = crate::skill_bundle::FILES;
    let plan = match plan_skill(&root, files) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("droid-executor: {e}");
            return ExitCode::from(2);
        }
    };
    let print_plan = |done: bool| {
        for (rel, action) in &plan.files {
            let verb = match (action, done) {
                (FileAction::Create, true) => "created",
                (FileAction::Create, false) => "would create",
                (FileAction::Update, true) => "updated",
                (FileAction::Update, false) => "would update",
                (FileAction::Unchanged, _) => "unchanged",
                (FileAction::Conflict, true) => "replaced (edits kept as .bak)",
                (FileAction::Conflict, false) if force => "would replace (edits kept as .bak)",
                (FileAction::Conflict, false) => "edited locally",
            };
            crate::cli::say(&format!("{verb:<14} {}", plan.dir.join(rel).display()));
        }
    };
    if dry_run {
        print_plan(false);
        return ExitCode::SUCCESS;
    }
    // what was done is printed once it is done; a refusal or failure changes nothing
    match install_skill(&plan, files, env!("CARGO_PKG_VERSION"), force) {
        Ok(()) => {
            print_plan(true);
            crate::cli::say(&format!(
                "skill {} installed in {}",
                droid_exec::skill_install::SKILL_NAME,
                plan.dir.display()
            ));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("droid-executor: {e}");
            ExitCode::from(2)
        }
    }
}

pub(crate) async fn setup(args: SetupArgs, config: Option<&PathBuf>) -> ExitCode {
    let (client, dry_run) = match args.command {
        SetupCommand::Mcp { client, dry_run } => (client, dry_run),
        SetupCommand::Skill {
            dir,
            force,
            dry_run,
        } => return skill(dir, force, dry_run),
    };
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
        crate::cli::say(&format!("would {plan}"));
        return ExitCode::SUCCESS;
    }
    match apply(&plan, &cfg).await {
        Ok(done) => {
            crate::cli::say(&done);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("droid-executor: {e}");
            ExitCode::from(2)
        }
    }
}
