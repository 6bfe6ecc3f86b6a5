//! `droid-executor doctor`: is this machine ready? Each check prints OK, WARN or FAIL with the fix.
//! Exit 0 when nothing failed, 1 otherwise.

use std::path::PathBuf;
use std::process::ExitCode;

use droid_exec::health::{self, Level};
use serde_json::json;

use crate::cli::env_map;

pub(crate) async fn doctor(config: Option<&PathBuf>, json_out: bool) -> ExitCode {
    let env = env_map();
    let skills_root = crate::setup::default_skills_root(&env);
    let checks = health::doctor_checks(
        config.map(PathBuf::as_path),
        &env,
        skills_root.as_deref(),
        crate::skill_bundle::FILES,
    )
    .await;
    let failed = checks.iter().any(|c| c.level == Level::Fail);
    let out = if json_out {
        let v: Vec<serde_json::Value> = checks
            .iter()
            .map(|c| {
                json!({"check": c.name, "level": match c.level { Level::Ok => "ok", Level::Warn => "warn", Level::Fail => "fail" },
                       "detail": c.detail, "fix": c.fix})
            })
            .collect();
        serde_json::to_string_pretty(&v).unwrap_or_default()
    } else {
        checks
            .iter()
            .map(|c| {
                let tag = format!("{:<4}", c.level.tag());
                if c.fix.is_empty() {
                    format!("{tag} {:<13} {}", c.name, c.detail)
                } else {
                    format!(
                        "{tag} {:<13} {}\n     {:<13} fix: {}",
                        c.name, c.detail, "", c.fix
                    )
                }
            })
            .collect::<Vec<_>>()
            .join("\n")
    };
    crate::cli::say(&out);
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
