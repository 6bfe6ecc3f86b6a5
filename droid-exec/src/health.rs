//! Readiness checks shared by every front-end (`droid-executor doctor`, MCP `droid_ping`):
//! configuration valid, droid found and its version, authentication (a Factory key or custom
//! models), allowed roots, the task store; and for `doctor` only, the bridge's port and the Agent
//! Skill. Each check says OK, WARN or FAIL, with the fix.

use std::path::Path;

use serde::Serialize;

use crate::config::{EnvMap, Settings, default_config_path};
use crate::daemon::{Daemon, DaemonState};
use crate::engine::Engine;
use crate::skill_install::{FileAction, SkillFile, plan_skill};

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

/// [`checks`], then what only `droid-executor doctor` reports: the bridge's port, and the Agent
/// Skill in `skills_root` compared with the bundled `skill` files.
pub async fn doctor_checks(
    config: Option<&Path>,
    env: &EnvMap,
    skills_root: Option<&Path>,
    skill: &[SkillFile],
) -> Vec<Check> {
    let mut out = checks(config, env).await;
    let path = config
        .map(Path::to_path_buf)
        .or_else(|| default_config_path(env));
    let settings = Settings::load(path.as_deref(), env)
        .or_else(|_| Settings::load(None, env))
        .unwrap_or_default();
    let store = settings
        .store_dir
        .clone()
        .or_else(|| crate::config::default_store_dir(env));
    out.push(bridge_check(settings.port, store.as_deref()).await);
    out.push(skill_check(skills_root, skill));
    out
}

/// Is the bridge's port free, held by our bridge, or taken by something else? Looks only.
pub async fn bridge_check(port: u16, store: Option<&Path>) -> Check {
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let listening = matches!(
        tokio::time::timeout(
            std::time::Duration::from_millis(500),
            tokio::net::TcpStream::connect(addr)
        )
        .await,
        Ok(Ok(_))
    );
    let daemon = store.map(|d| Daemon::new(d, &format!("bridge-{port}")));
    let ours = daemon.as_ref().and_then(|d| d.state().ok());
    match (listening, ours) {
        (true, Some(DaemonState::Running(pid))) => Check {
            name: "bridge",
            level: Level::Ok,
            detail: format!(
                "running on http://{addr} (pid {})",
                pid.map_or_else(|| "?".to_owned(), |p| p.to_string())
            ),
            fix: String::new(),
        },
        (true, _) => Check {
            name: "bridge",
            level: Level::Warn,
            detail: format!(
                "port {port} is in use by another program (or a bridge with another store)"
            ),
            fix: "set port in the config (or PORT) to a free port for the bridge".into(),
        },
        (false, _) => Check {
            name: "bridge",
            level: Level::Ok,
            detail: format!(
                "port {port} is free; the bridge is not running (`droid-executor bridge start` or \
                 `run --via bridge` starts it)"
            ),
            fix: String::new(),
        },
    }
}

/// Is the Agent Skill installed in `root`, and is it the bundled version?
pub fn skill_check(root: Option<&Path>, skill: &[SkillFile]) -> Check {
    let Some(root) = root else {
        return Check {
            name: "skill",
            level: Level::Warn,
            detail: "no skills root (HOME unset)".into(),
            fix: "droid-executor setup skill --dir SKILLS_ROOT".into(),
        };
    };
    let plan = match plan_skill(root, skill) {
        Ok(p) => p,
        Err(e) => {
            return Check {
                name: "skill",
                level: Level::Warn,
                detail: e.to_string(),
                fix: "check the permissions of the skills folder".into(),
            };
        }
    };
    let count = |a: FileAction| plan.files.iter().filter(|(_, x)| *x == a).count();
    let dir = plan.dir.display();
    if count(FileAction::Unchanged) == plan.files.len() {
        Check {
            name: "skill",
            level: Level::Ok,
            detail: format!("installed in {dir} (up to date)"),
            fix: String::new(),
        }
    } else if count(FileAction::Create) == plan.files.len() {
        Check {
            name: "skill",
            level: Level::Warn,
            detail: format!("not installed in {dir}"),
            fix: "droid-executor setup skill (Claude Code then offers it to the model)".into(),
        }
    } else if count(FileAction::Conflict) > 0 {
        Check {
            name: "skill",
            level: Level::Warn,
            detail: format!("{dir} has local edits in {}", plan.conflicts().join(", ")),
            fix: "keep them, or replace them with: droid-executor setup skill --force".into(),
        }
    } else {
        Check {
            name: "skill",
            level: Level::Warn,
            detail: format!("{dir} holds another version of the skill"),
            fix: "droid-executor setup skill".into(),
        }
    }
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
