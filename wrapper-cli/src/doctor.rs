//! `droid-executor doctor`: is this machine ready? Each check prints OK, WARN or FAIL with the fix.
//! Besides the engine's checks: the Agent Skill, and droid's registration of the MCP server
//! (`droid mcp`: whether droid's model is told of the tools, and what autonomy each needs).
//! Exit 0 when nothing failed, 1 otherwise. `--skills-dir DIR` looks for the skill under another
//! skills root (the meaning of `setup skill --dir`).

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use client_setup::SkillsRoot;
use droid_exec::health::{self, Check, Level};
use serde_json::json;

use crate::cli::env_map;

/// `doctor [--json] [--skills-dir DIR]`, with the global `--config FILE` (which, as for every
/// other command, must exist: a FAIL line says so).
pub(crate) async fn doctor(
    config: Option<&PathBuf>,
    skills_dir: Option<&Path>,
    json_out: bool,
) -> ExitCode {
    let env = env_map();
    let default_root = crate::setup::default_skills_root(&env);
    let skills = match skills_dir {
        Some(dir) => SkillsRoot::Named(dir),
        None => SkillsRoot::Default(default_root.as_deref()),
    };
    let cwd = std::env::current_dir().ok();
    let mut checks =
        health::doctor_checks(config.map(PathBuf::as_path), &env, cwd.as_deref()).await;
    checks.push(client_setup::skill_check(
        skills,
        crate::skill_bundle::FILES,
    ));
    // droid as an MCP client: registered, its model told of the tools, each tool's autonomy
    let exe = std::env::current_exe().ok();
    checks.push(client_setup::droid_settings::droid_mcp_check(
        &env,
        exe.as_deref(),
        &client_setup::register::every_tool(&mcp_stdio::tools::NAMES),
    ));
    let failed = checks.iter().any(|c| c.level == Level::Fail);
    let out = if json_out {
        checks_json(&checks)
    } else {
        checks_text(&checks)
    };
    crate::cli::say(&out);
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

/// Checks as a JSON array of `{"check", "level", "detail", "fix"}` (`doctor --json`, `ping --json`).
pub(crate) fn checks_json(checks: &[Check]) -> String {
    let v: Vec<serde_json::Value> = checks
        .iter()
        .map(|c| {
            json!({"check": c.name, "level": match c.level { Level::Ok => "ok", Level::Warn => "warn", Level::Fail => "fail" },
                   "detail": c.detail, "fix": c.fix})
        })
        .collect();
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// Checks as lines for people: `OK   name          detail`, the fix indented below (`doctor`,
/// `ping`).
pub(crate) fn checks_text(checks: &[Check]) -> String {
    checks
        .iter()
        .map(|c| {
            let tag = format!("{:<4}", c.level.tag());
            // a detail of several lines (a TOML error quotes the line) stays under its check
            let detail = c.detail.trim_end().replace('\n', &format!("\n{:19}", ""));
            if c.fix.is_empty() {
                format!("{tag} {:<13} {detail}", c.name)
            } else {
                format!(
                    "{tag} {:<13} {detail}\n     {:<13} fix: {}",
                    c.name, "", c.fix
                )
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}
