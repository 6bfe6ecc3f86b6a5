//! `droid-executor setup mcp --client droid|claude|codex [--allow-tools] [--dry-run]`: register
//! this binary's MCP server (`<this executable> mcp`) with an MCP client (the engine's `setup`
//! module does the work; the tool names and the longest call come from `mcp-stdio`). `droid-executor setup skill [--dir SKILLS_ROOT] [--force] [--dry-run]`: install the
//! Agent Skill built into this binary into `SKILLS_ROOT/droid-executor` (default
//! `~/.claude/skills`; the engine's `skill_install` module does the work).

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use client_setup::register::{McpClient, Plan, Registration, apply, plan};
use client_setup::skill::{FileAction, install_skill, plan_skill};

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
        /// Claude Code: also allow the tools in ~/.claude/settings.json (headless `claude -p`
        /// denies MCP tools no permission rule allows).
        #[arg(long)]
        allow_tools: bool,
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
                client_setup::skill::SKILL_NAME,
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
    let (client, allow_tools, dry_run) = match args.command {
        SetupCommand::Mcp {
            client,
            allow_tools,
            dry_run,
        } => (client, allow_tools, dry_run),
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
    if allow_tools && !matches!(client, Client::Claude) {
        eprintln!("droid-executor: --allow-tools is for --client claude");
        return ExitCode::from(2);
    }
    let client = match client {
        Client::Droid => McpClient::Droid,
        Client::Claude => McpClient::Claude,
        Client::Codex => McpClient::Codex,
    };
    let registration = Registration {
        program: &exe,
        tools: &mcp_stdio::tools::NAMES,
        env_vars: droid_exec::config::server_env_names(&settings),
        tool_timeout_secs: tool_timeout_secs(settings.default_timeout),
        allow_tools,
    };
    let steps = match plan(client, &registration, cfg.droid_bin.as_deref(), &env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("droid-executor: {e}");
            return ExitCode::from(2);
        }
    };
    if dry_run {
        for step in &steps {
            match step {
                Plan::Note(text) => crate::cli::say(text),
                _ => crate::cli::say(&format!("would {step}")),
            }
        }
        return ExitCode::SUCCESS;
    }
    for step in &steps {
        match apply(step, &cfg).await {
            Ok(done) => crate::cli::say(&done),
            Err(e) => {
                eprintln!("droid-executor: {e}");
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}

/// Time a client should give one tool call: `execute_droid_task` without `max_runtime_seconds`
/// runs up to `default_timeout` (verification included) and `droid_pend` waits up to
/// `MAX_WAIT_SECONDS`; a minute more covers droid's stop grace, reading the repository and a
/// wait for a run slot.
fn tool_timeout_secs(default_timeout: u32) -> u64 {
    u64::from(default_timeout).max(mcp_stdio::tools::MAX_WAIT_SECONDS) + 60
}
