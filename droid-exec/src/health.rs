//! Readiness checks shared by every front-end (`droid-executor doctor`, later MCP `droid_ping` and
//! the bridge's `/health`): configuration valid, droid found and its version, authentication (a
//! Factory key or custom models), allowed roots, the task store. Each check says OK, WARN or FAIL, with the fix.

use std::path::Path;

use serde::Serialize;

use crate::config::{EnvMap, Settings, default_config_path};
use crate::engine::Engine;

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Level {
    /// Fine.
    Ok,
    /// Works, but worth a look.
    Warn,
    /// Runs will fail until this is fixed.
    Fail,
}

impl Level {
    /// `OK`, `WARN` or `FAIL`.
    pub fn tag(self) -> &'static str {
        match self {
            Self::Ok => "OK",
            Self::Warn => "WARN",
            Self::Fail => "FAIL",
        }
    }
}

/// One readiness check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Check {
    /// What was checked (`config`, `droid`, `auth`, `allowed_roots`).
    #[serde(rename = "check")]
    pub name: &'static str,
    /// The outcome.
    pub level: Level,
    /// What was found.
    pub detail: String,
    /// What to do (empty when nothing is needed).
    pub fix: String,
}

/// The droid version this release was tested against.
pub const TESTED_DROID: &str = "0.225.2";

fn custom_models(home: Option<&String>) -> usize {
    let Some(home) = home else { return 0 };
    let path = Path::new(home).join(".factory").join("settings.json");
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        .and_then(|v| v.get("customModels")?.as_array().map(Vec::len))
        .unwrap_or(0)
}

/// Run every check for a process whose environment is `env`, with the config file `config`
/// (default: [`default_config_path`]).
pub async fn checks(config: Option<&Path>, env: &EnvMap) -> Vec<Check> {
    let path = config
        .map(Path::to_path_buf)
        .or_else(|| default_config_path(env));
    let mut checks = Vec::new();
    let settings = match Settings::load(path.as_deref(), env) {
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
                fix: "fix the file (keys: droid_bin, port, host, allowed_roots, max_autonomy, allow_unsafe, max_concurrent, verify, default_timeout, task_ttl, excerpt_bytes, body_limit, max_queue, token_file, allowed_hosts, allowed_origins, model, env_passthrough, store_dir)".into(),
            });
            // keep going with what the environment says, so the other checks still mean something
            Settings::load(None, env).unwrap_or_default()
        }
    };
    let cfg = settings.engine_config(env);
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
    checks.push(store_check(cfg.store_dir.as_deref()));
    checks
}

/// Can the task store be written (or created)? Looks only: nothing is created.
fn store_check(dir: Option<&Path>) -> Check {
    use nix::unistd::{AccessFlags, access};
    let Some(dir) = dir else {
        return Check {
            name: "store",
            level: Level::Warn,
            detail:
                "no task store (HOME and XDG_STATE_HOME unset): no background tasks, no run slots"
                    .into(),
            fix: "set store_dir in the config (or DROID_EXECUTOR_STORE_DIR)".into(),
        };
    };
    let existing = dir.ancestors().find(|p| p.exists()).unwrap_or(dir);
    let writable = access(existing, AccessFlags::W_OK | AccessFlags::X_OK).is_ok();
    let what = if existing == dir {
        format!("{} is writable", dir.display())
    } else {
        format!(
            "{} will be created (under {}, writable)",
            dir.display(),
            existing.display()
        )
    };
    if writable {
        Check {
            name: "store",
            level: Level::Ok,
            detail: what,
            fix: String::new(),
        }
    } else {
        Check {
            name: "store",
            level: Level::Fail,
            detail: format!("{} is not writable", existing.display()),
            fix:
                "fix its permissions, or set store_dir in the config (or DROID_EXECUTOR_STORE_DIR)"
                    .into(),
        }
    }
}
