//! `droid-executor setup mcp --client droid|claude|codex|gemini|opencode [--allow-tools]
//! [--dry-run]`: register this binary's MCP server (`<this executable> mcp`) with an MCP client
//! (`client_setup::register` does the work; the tool names and the longest call come from
//! `mcp-stdio`, the variables a filtering client is asked to pass from
//! `droid_exec::client_env::pass_names`).
//! `droid-executor setup skill [--client claude|droid] [--dir SKILLS_ROOT] [--force]
//! [--dry-run]`: install the Agent Skill built into this binary into
//! `SKILLS_ROOT/droid-executor`, and the client's fallback skills (`ask-<provider>`, every
//! provider but the client's own) into `SKILLS_ROOT/ask-<provider>` (default root: the client's,
//! `~/.claude/skills` or `~/.factory/skills`; `client_setup::skill` does the work).
//! `droid-executor setup acp --client zed [--settings FILE] [--name NAME] [--print]`: register
//! `<this executable> acp` as an agent server in Zed's settings, with droid's program as this
//! process finds it (`client_setup::zed` edits the JSONC file, keeping its comments); `--print`
//! prints the entry and writes nothing.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Subcommand, ValueEnum};
use client_setup::register::{Plan, Registration, apply, plan};
use client_setup::skill::{FileAction, SkillFile, SkillPlan, install_skill, plan_skill_named};
use droid_contract::ProviderId;

use crate::context::Context;
use crate::output::say;
use crate::skills_root::{SkillClient, skills_root_of};

#[derive(Debug, Args)]
pub(crate) struct SetupArgs {
    #[command(subcommand)]
    command: SetupCommand,
}

#[derive(Debug, Subcommand)]
enum SetupCommand {
    /// Register `droid-executor mcp` with an MCP client (droid: also the settings its model needs
    /// to see the tools and call them at its default autonomy).
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
    /// Register `droid-executor acp` as an ACP agent server with an editor (Zed), naming droid's
    /// program in the entry's environment (an editor started from the desktop has another PATH).
    Acp {
        /// The editor.
        #[arg(long, value_enum)]
        client: AcpClient,
        /// Zed's settings file (default: $XDG_CONFIG_HOME/zed/settings.json, else
        /// ~/.config/zed/settings.json).
        #[arg(long, value_name = "FILE")]
        settings: Option<PathBuf>,
        /// The entry's name, shown in Zed's agent panel.
        #[arg(long, default_value = client_setup::zed::DEFAULT_NAME)]
        name: String,
        /// Print the `agent_servers` entry to paste, change nothing.
        #[arg(long)]
        print: bool,
    },
    /// Install the Agent Skill into SKILLS_ROOT/droid-executor, and the fallback skills
    /// (ask-codex, ask-gemini, …: delegating through the CLI when MCP is not registered) beside
    /// it.
    Skill {
        /// The client whose skills root is the default, and whose own fallback skill is left out:
        /// claude (~/.claude/skills) or droid (~/.factory/skills).
        #[arg(long, value_enum, default_value_t = SkillClient::Claude)]
        client: SkillClient,
        /// The skills root (default: the client's, ~/.claude/skills).
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

/// An editor that runs ACP agents.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum AcpClient {
    /// Zed (`agent_servers` in its settings.json).
    Zed,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum Client {
    /// Factory's droid (`droid mcp add`, then `~/.factory/settings.json`).
    Droid,
    /// Claude Code (`~/.claude.json`, user scope).
    Claude,
    /// Codex (`~/.codex/config.toml`).
    Codex,
    /// Gemini CLI (`~/.gemini/settings.json`).
    Gemini,
    /// OpenCode (`~/.config/opencode/opencode.json`).
    Opencode,
}

/// `setup skill`: the main skill and the client's fallback skills, each in its own folder under
/// the root. Every skill is planned first; a local edit in any of them refuses the whole install
/// (nothing written) unless `force`.
fn skill(
    client: SkillClient,
    dir: Option<PathBuf>,
    force: bool,
    dry_run: bool,
    ctx: &Context,
) -> ExitCode {
    let own_root = dir.is_none();
    let Some(root) = dir.or_else(|| skills_root_of(client, ctx.env())) else {
        eprintln!("droid-executor: HOME is not set; name the skills root with --dir");
        return ExitCode::from(2);
    };
    // the client's own root: tell when the client that reads it is not installed (a root named
    // with --dir may be read by anyone)
    if own_root && let Ok(cfg) = ctx.engine_config() {
        let id = match client {
            SkillClient::Claude => ProviderId::Claude,
            SkillClient::Droid => ProviderId::Droid,
        };
        if let Some(why) = not_installed(cfg, id) {
            eprintln!("droid-executor: note: {why}; it reads these skills once installed");
        }
    }
    let client_name = match client {
        SkillClient::Claude => "claude",
        SkillClient::Droid => "droid",
    };
    let mut skills: Vec<(&str, &[SkillFile])> =
        vec![(client_setup::skill::SKILL_NAME, crate::skill_bundle::FILES)];
    skills.extend(
        client_setup::fallback_skills::for_client(client_name)
            .map(|f| (f.name, std::slice::from_ref(&f.file))),
    );
    let mut plans = Vec::new();
    for (name, files) in &skills {
        match plan_skill_named(&root, name, files) {
            Ok(p) => plans.push(p),
            Err(e) => {
                eprintln!("droid-executor: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let print_plan = |plan: &SkillPlan, done: bool| {
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
            say(&format!("{verb:<14} {}", plan.dir.join(rel).display()));
        }
    };
    if dry_run {
        for plan in &plans {
            print_plan(plan, false);
        }
        return ExitCode::SUCCESS;
    }
    // a refusal changes nothing, in any of the skills
    if !force && let Some(plan) = plans.iter().find(|p| !p.conflicts().is_empty()) {
        eprintln!(
            "droid-executor: {}",
            droid_exec::EngineError::LocalEdits {
                dir: plan.dir.clone(),
                files: plan.conflicts().iter().map(|c| (*c).to_owned()).collect(),
            }
        );
        return ExitCode::from(2);
    }
    // what was done is printed once it is done
    for (plan, (name, files)) in plans.iter().zip(&skills) {
        match install_skill(plan, files, env!("CARGO_PKG_VERSION"), force) {
            Ok(()) => {
                print_plan(plan, true);
                say(&format!("skill {name} installed in {}", plan.dir.display()));
            }
            Err(e) => {
                eprintln!("droid-executor: {e}");
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}

pub(crate) async fn setup(args: SetupArgs, ctx: &Context) -> ExitCode {
    let (client, allow_tools, dry_run) = match args.command {
        SetupCommand::Mcp {
            client,
            allow_tools,
            dry_run,
        } => (client, allow_tools, dry_run),
        SetupCommand::Skill {
            client,
            dir,
            force,
            dry_run,
        } => return skill(client, dir, force, dry_run, ctx),
        SetupCommand::Acp {
            client: AcpClient::Zed,
            settings,
            name,
            print,
        } => return zed(settings, &name, print, ctx),
    };
    let env = ctx.env();
    let (settings, cfg) = match ctx.settings().and_then(|s| Ok((s, ctx.engine_config()?))) {
        Ok(both) => both,
        Err(e) => {
            eprintln!("droid-executor: {e:#}");
            return ExitCode::from(2);
        }
    };
    let Some(exe) = cfg.supervisor.clone() else {
        eprintln!("droid-executor: cannot tell where this executable is");
        return ExitCode::from(2);
    };
    if allow_tools && !matches!(client, Client::Claude) {
        eprintln!("droid-executor: --allow-tools is for --client claude");
        return ExitCode::from(2);
    }
    let client = match client {
        Client::Droid => ProviderId::Droid,
        Client::Claude => ProviderId::Claude,
        Client::Codex => ProviderId::Codex,
        Client::Gemini => ProviderId::Gemini,
        Client::Opencode => ProviderId::Opencode,
    };
    // droid registers through `droid mcp add`: without it nothing can be done but say what to
    // install; the others read the files written here once they are installed
    let missing = not_installed(cfg, client);
    let note = match (&missing, client) {
        (Some(why), ProviderId::Droid) if !dry_run => {
            eprintln!(
                "droid-executor: {why}, then run `droid-executor setup mcp --client droid` again \
                 (it registers through `droid mcp add`)"
            );
            return ExitCode::from(2);
        }
        (Some(why), ProviderId::Droid) => Some(format!(
            "{why}: `droid mcp add` needs it, so install it before running this without --dry-run"
        )),
        (Some(why), _) => Some(format!("{why}; it reads this registration once installed")),
        (None, _) => None,
    };
    let registration = Registration {
        program: &exe,
        tools: &mcp_stdio::tools::NAMES,
        env_vars: droid_exec::client_env::pass_names(
            droid_exec::config::server_env_names(settings),
            &settings.providers,
            env,
        ),
        tool_timeout_secs: tool_timeout_secs(settings.default_timeout),
        allow_tools,
    };
    let steps = match plan(client, &registration, cfg.droid_bin.as_deref(), env) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("droid-executor: {e}");
            return ExitCode::from(2);
        }
    };
    if let Some(note) = &note {
        eprintln!("droid-executor: note: {note}");
    }
    if dry_run {
        for step in &steps {
            match step {
                Plan::Note(text) => say(text),
                _ => say(&format!("would {step}")),
            }
        }
        return ExitCode::SUCCESS;
    }
    for step in &steps {
        match apply(step, cfg).await {
            Ok(done) => say(&done),
            Err(e) => {
                eprintln!("droid-executor: {e}");
                return ExitCode::from(2);
            }
        }
    }
    ExitCode::SUCCESS
}

/// Why the agent CLI `id` cannot be used here, when it is not installed: where it was looked
/// for, and the pinned line that installs the version this release is tested with (the same
/// line `doctor` gives).
fn not_installed(cfg: &droid_exec::EngineConfig, id: ProviderId) -> Option<String> {
    let (program, looked) = cfg.program_of(id);
    if program.is_some() {
        return None;
    }
    let provider = droid_exec::providers::provider(id);
    let name = match (id.display_name(), provider.program()) {
        (shown, program) if shown == program => shown.to_owned(),
        (shown, program) => format!("{shown} ({program})"),
    };
    Some(format!(
        "{name} is not installed here (looked for: {looked}); install it with: {}",
        provider.install_hint()
    ))
}

/// `setup acp --client zed`: plan the edit of Zed's settings, then write it (or print the entry).
fn zed(zed_settings: Option<PathBuf>, name: &str, print: bool, ctx: &Context) -> ExitCode {
    use client_setup::zed::{ZedEntry, apply, plan, settings_path};
    let Ok(exe) = std::env::current_exe() else {
        eprintln!("droid-executor: cannot tell where this executable is");
        return ExitCode::from(2);
    };
    if name.trim().is_empty() {
        eprintln!("droid-executor: --name must not be empty");
        return ExitCode::from(2);
    }
    // droid as this process finds it (DROID_CLI_CMD, droid_bin, PATH, npm's global prefix): Zed
    // started from the desktop has the session's PATH, not the shell's (issue 32)
    let env = ctx.env();
    let cfg = match ctx.engine_config() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("droid-executor: {e:#}");
            return ExitCode::from(2);
        }
    };
    let entry = ZedEntry {
        name,
        program: &exe,
        droid: cfg.droid_bin.as_deref(),
    };
    if let Some(why) = not_installed(cfg, ProviderId::Droid) {
        eprintln!(
            "droid-executor: note: {why}; the entry names no droid, so the agent looks for it on \
             Zed's PATH: run `droid-executor setup acp --client zed` again once it is installed"
        );
    }
    if env.get("FACTORY_API_KEY").is_some_and(|v| !v.is_empty()) {
        eprintln!(
            "droid-executor: note: the entry holds no credential; a Zed started from the desktop \
             does not see FACTORY_API_KEY from your shell profile: log in with droid (run droid, \
             then /login), or start Zed from a shell that has it"
        );
    }
    if print {
        say(&entry.snippet());
        return ExitCode::SUCCESS;
    }
    let named = zed_settings.is_some();
    let path = match zed_settings.map_or_else(|| settings_path(env), Ok) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("droid-executor: {e}");
            return ExitCode::from(2);
        }
    };
    // Zed reads the entry once installed; say so when nothing of it is here (no settings
    // folder, no program on PATH: `zed` from zed.dev's installer, `zeditor` from distributions)
    let path_var = env.get("PATH").map(std::ffi::OsStr::new);
    let folder = path.parent().unwrap_or(&path);
    if !named
        && !folder.exists()
        && ["zed", "zeditor"].iter().all(|p| {
            droid_exec::process::spawn::resolve_program(std::path::Path::new(p), path_var).is_none()
        })
    {
        eprintln!(
            "droid-executor: note: Zed is not installed here (no zed or zeditor on PATH, no {}); \
             it reads this entry once installed: https://zed.dev/download",
            folder.display()
        );
    }
    match plan(&path, &entry).and_then(|p| apply(&p)) {
        Ok(done) => {
            say(&done);
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("droid-executor: {e}");
            ExitCode::from(2)
        }
    }
}

/// Time a client should give one tool call: `execute_droid_task` without `max_runtime_seconds`
/// runs up to `default_timeout` (verification included) and `droid_pend` waits up to
/// `MAX_WAIT_SECONDS`; a minute more covers droid's stop grace, reading the repository and a
/// wait for a run slot.
fn tool_timeout_secs(default_timeout: u32) -> u64 {
    u64::from(default_timeout).max(mcp_stdio::tools::MAX_WAIT_SECONDS) + 60
}
