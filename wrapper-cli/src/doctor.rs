//! `droid-executor doctor`: is this machine ready? Each check prints OK, WARN or FAIL with the fix.
//! Besides the engine's checks: the Agent Skill, and droid's registration of the MCP server
//! (`droid mcp`: whether droid's model is told of the tools, and what autonomy each needs).
//! Exit 0 when nothing failed, 1 otherwise. `--skills-dir DIR` looks for the skill under another
//! skills root (the meaning of `setup skill --dir`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use client_setup::SkillsRoot;
use droid_exec::check_text::{self, Layout};
use droid_exec::health::{self, Level};

use crate::context::Context;
use crate::output::say;
use crate::skills_root::default_skills_root;

/// `doctor [--json] [--skills-dir DIR]`, with the global `--config FILE` (which, as for every
/// other command, must exist: a FAIL line says so).
pub(crate) async fn doctor(ctx: &Context, skills_dir: Option<&Path>, json_out: bool) -> ExitCode {
    let env = ctx.env();
    let default_root = default_skills_root(env);
    let skills = match skills_dir {
        Some(dir) => SkillsRoot::Named(dir),
        None => SkillsRoot::Default(default_root.as_deref()),
    };
    let cwd = std::env::current_dir().ok();
    let mut checks =
        health::doctor_checks(ctx.config_arg().map(PathBuf::as_path), env, cwd.as_deref()).await;
    checks.push(client_setup::skill_check(
        skills,
        crate::skill_bundle::FILES,
    ));
    // droid as an MCP client: registered, its model told of the tools, each tool's autonomy
    let exe = std::env::current_exe().ok();
    checks.push(client_setup::droid_settings::droid_mcp_check(
        env,
        exe.as_deref(),
        &client_setup::register::every_tool(&mcp_stdio::tools::NAMES),
    ));
    let failed = checks.iter().any(|c| c.level == Level::Fail);
    let out = if json_out {
        check_text::json(&checks)
    } else {
        check_text::render(&checks, Layout::Columns)
    };
    say(&out);
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
