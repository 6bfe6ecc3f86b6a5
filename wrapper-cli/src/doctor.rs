//! `droid-executor doctor`: is this machine ready? Each check prints OK, WARN or FAIL with the fix.
//! Exit 0 when nothing failed, 1 otherwise.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use droid_exec::{Engine, Settings};
use serde_json::json;

use crate::cli::env_map;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Level {
    Ok,
    Warn,
    Fail,
}

struct Check {
    name: &'static str,
    level: Level,
    detail: String,
    fix: String,
}

/// The droid versions this release was tested against.
const TESTED_DROID: &str = "0.225.2";

fn custom_models(home: Option<&String>) -> usize {
    let Some(home) = home else { return 0 };
    let path = Path::new(home).join(".factory").join("settings.json");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("customModels")?.as_array().map(Vec::len))
        .unwrap_or(0)
}

pub(crate) async fn doctor(config: Option<&PathBuf>, json_out: bool) -> ExitCode {
    let env = env_map();
    let mut checks = Vec::new();
    let path = config
        .cloned()
        .or_else(|| droid_exec::config::default_config_path(&env));
    let settings = match Settings::load(path.as_deref(), &env) {
        Ok(s) => {
            let detail = match &path {
                Some(p) if p.exists() => format!("{} is valid", p.display()),
                Some(p) => format!("{} not present; using defaults", p.display()),
                None => "no config path (HOME unset); using defaults".to_owned(),
            };
            checks.push(Check {
                name: "config",
                level: Level::Ok,
                detail,
                fix: String::new(),
            });
            s
        }
        Err(e) => {
            checks.push(Check {
                name: "config",
                level: Level::Fail,
                detail: e.to_string(),
                fix: "fix the file (keys: droid_bin, port, host, allowed_roots, max_autonomy, allow_unsafe, max_concurrent, verify, default_timeout, task_ttl, excerpt_bytes, body_limit, model, env_passthrough)".into(),
            });
            // keep going with what the environment says, so the other checks still mean something
            Settings::load(None, &env).unwrap_or_default()
        }
    };
    let cfg = settings.engine_config(&env);
    match &cfg.droid_bin {
        None => checks.push(Check {
            name: "droid",
            level: Level::Fail,
            detail: format!("not found ({})", cfg.droid_source),
            fix: "install it: npm install -g @factory/cli (or set droid_bin in the config, or DROID_CLI_CMD)".into(),
        }),
        Some(bin) => {
            let engine = Engine::new(cfg.clone());
            match engine.droid_version().await {
                Some(v) => checks.push(Check {
                    name: "droid",
                    level: if v == TESTED_DROID { Level::Ok } else { Level::Warn },
                    detail: format!("{} (from {}), version {v}", bin.display(), cfg.droid_source),
                    fix: if v == TESTED_DROID {
                        String::new()
                    } else {
                        format!("this release was tested with droid {TESTED_DROID}; other versions may change its output")
                    },
                }),
                None => checks.push(Check {
                    name: "droid",
                    level: Level::Fail,
                    detail: format!("{} does not answer --version", bin.display()),
                    fix: "reinstall droid; check that the file is the droid binary".into(),
                }),
            }
        }
    }
    for w in &cfg.droid_warnings {
        checks.push(Check {
            name: "droid",
            level: Level::Warn,
            detail: w.clone(),
            fix: "set DROID_CLI_CMD to the program only".into(),
        });
    }
    let key = env.get("FACTORY_API_KEY").is_some_and(|k| !k.is_empty());
    let models = custom_models(env.get("HOME"));
    checks.push(match (key, models) {
        (true, _) => Check {
            name: "auth",
            level: Level::Ok,
            detail: "FACTORY_API_KEY is set".into(),
            fix: String::new(),
        },
        (false, n) if n > 0 => Check {
            name: "auth",
            level: Level::Ok,
            detail: format!("no FACTORY_API_KEY; {n} custom model(s) in ~/.factory/settings.json"),
            fix: String::new(),
        },
        _ => Check {
            name: "auth",
            level: Level::Warn,
            detail: "no FACTORY_API_KEY and no custom models".into(),
            fix: "export FACTORY_API_KEY=fk-… (or log in with droid, or add customModels to ~/.factory/settings.json)".into(),
        },
    });
    let roots: Vec<String> = cfg
        .allowed_roots
        .iter()
        .map(|p| p.display().to_string())
        .collect();
    checks.push(Check {
        name: "allowed_roots",
        level: if roots.is_empty() {
            Level::Warn
        } else {
            Level::Ok
        },
        detail: if roots.is_empty() {
            "none configured: any directory may be a repo_root".into()
        } else {
            roots.join(", ")
        },
        fix: if roots.is_empty() {
            "set allowed_roots in the config".into()
        } else {
            String::new()
        },
    });

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
                let tag = match c.level {
                    Level::Ok => "OK  ",
                    Level::Warn => "WARN",
                    Level::Fail => "FAIL",
                };
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
    #[allow(clippy::print_stdout)] // the CLI's output
    {
        println!("{out}");
    }
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
