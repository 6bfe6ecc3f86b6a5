//! Readiness checks shared by every front-end (`droid-executor doctor`, MCP `droid_ping`):
//! configuration valid, droid found and its version, authentication (a Factory key or custom
//! models), allowed roots, the task store; and for `doctor` only, droid actually run (`droid
//! --version`, not only its package.json read), a `--config` file that must exist, the bridge's
//! port on the configured host. Each check says OK, WARN or FAIL, with the
//! fix.

use std::net::SocketAddr;
use std::path::Path;

use droid_contract::ProviderId;
use serde::Serialize;

use crate::bind_address;
use crate::config::env_names;
use crate::config::{EngineConfig, EnvMap, Settings, default_config_path};
use crate::error::EngineError;
use crate::process::sandbox::SandboxMode;
use crate::process::scratch::unique_id;
use crate::providers::droid::{custom_models, install};
use crate::run::engine::Engine;
use crate::tasks::daemon::{Daemon, DaemonState};

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
pub const TESTED_DROID: &str = ProviderId::Droid.info().version;

/// Run every check for a process whose environment is `env`, with the config file `config`
/// (default: [`default_config_path`]). This is MCP's `droid_ping`: droid's version comes from
/// [`Engine::droid_version`] (its npm package.json when there is one, read without starting
/// droid); [`doctor_checks`] runs droid instead.
pub async fn checks(config: Option<&Path>, env: &EnvMap) -> Vec<Check> {
    readiness(config, env, Mode::Ping).await.0
}

/// Who asks: `droid_ping` (fast, called by agents) or `doctor` (thorough, called by a person).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// MCP `droid_ping`: the config file may be absent; droid's version may come from its
    /// package.json.
    Ping,
    /// `droid-executor doctor`: a config file named with `--config` must exist; droid is run.
    Doctor,
}

/// The readiness checks, and the settings the later checks used.
async fn readiness(config: Option<&Path>, env: &EnvMap, mode: Mode) -> (Vec<Check>, Settings) {
    let mut checks = Vec::new();
    let settings = config_check(config, env, mode, &mut checks);
    let cfg = settings.engine_config(env);
    checks.push(droid_check(&cfg, mode).await);
    for w in &cfg.droid_warnings {
        checks.push(Check {
            name: "droid",
            level: Level::Warn,
            detail: w.clone(),
            fix: "set DROID_CLI_CMD to the program only".into(),
        });
    }
    checks.push(auth_check(env, cfg.default_model.as_deref()));
    for id in ProviderId::ALL.into_iter().skip(1) {
        checks.push(agent_check(&cfg, env, id, mode).await);
    }
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
    (amended(checks, &cfg.client_env), settings)
}

/// `checks` with each fix that asks for a variable the MCP client that started this process
/// dropped naming the client's filter first ([`crate::client_env::ClientEnv::amend`]).
fn amended(mut checks: Vec<Check>, client: &crate::client_env::ClientEnv) -> Vec<Check> {
    for c in &mut checks {
        if let Some(fix) = client.amend(&c.fix, |n| client.missing(n)) {
            c.fix = fix;
        }
    }
    checks
}

/// The `config` line(s): the file valid, absent (defaults), or invalid; and the settings the
/// other checks go on with (the environment's values over defaults when the file is unusable,
/// so they still mean something).
fn config_check(config: Option<&Path>, env: &EnvMap, mode: Mode, out: &mut Vec<Check>) -> Settings {
    // the line for an error of `Settings::load`, with the fix for where it came from
    let failed = |e: &EngineError| {
        let fix = match e {
            // a variable (upper case) or a key of the file with a value out of range
            EngineError::Setting { name, .. } if name.chars().any(|c| c.is_ascii_lowercase()) => {
                format!("fix {name} in the config file (or the variable that sets it)")
            }
            EngineError::Setting { name, .. } => {
                format!("fix {name}, or unset it (a variable set to \"\" counts as unset)")
            }
            _ => {
                let keys: Vec<&str> = env_names().iter().map(|(k, _)| *k).collect();
                format!("fix the file (keys: {})", keys.join(", "))
            }
        };
        Check {
            name: "config",
            level: Level::Fail,
            detail: e.to_string(),
            fix,
        }
    };
    // without the file: the environment's values over defaults, so that the other checks still
    // mean something; a bad variable is reported once
    let without_file = |out: &mut Vec<Check>| match Settings::load(None, env) {
        Ok(s) => s,
        Err(e) => {
            let line = failed(&e);
            if out.last() != Some(&line) {
                out.push(line);
            }
            Settings::default()
        }
    };
    if mode == Mode::Doctor
        && let Some(p) = config
        && std::fs::metadata(p).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
    {
        // `run`, `config show` and every other command refuse a named file that is not there
        let default = default_config_path(env).map_or_else(
            || "no default file, since HOME is unset".to_owned(),
            |d| format!("the default is {}", d.display()),
        );
        out.push(Check {
            name: "config",
            level: Level::Fail,
            detail: format!(
                "{} does not exist (named with --config; every other command refuses it)",
                p.display()
            ),
            fix: format!("create it, or leave out --config ({default})"),
        });
        return without_file(out);
    }
    let path = config
        .map(Path::to_path_buf)
        .or_else(|| default_config_path(env));
    match Settings::load(path.as_deref(), env) {
        Ok(s) => {
            let detail = match &path {
                Some(p) if p.exists() => format!("{} is valid", p.display()),
                Some(p) => format!("{} not present; using defaults", p.display()),
                None => "no config path (HOME unset); using defaults".to_owned(),
            };
            out.push(Check {
                name: "config",
                level: Level::Ok,
                detail,
                fix: String::new(),
            });
            s
        }
        Err(e) => {
            out.push(failed(&e));
            without_file(out)
        }
    }
}

/// The `droid` line: found, and its version (a WARN outside the tested one, with the line that
/// pins it). `doctor` runs `droid --version` itself, so a droid that is installed but does not
/// run is a FAIL. Each fix is a step other than the one that led there: the `@factory/cli`
/// launcher without the package that holds the binary gets that package's line, not the
/// launcher's again (`crate::providers::droid::install`).
async fn droid_check(cfg: &EngineConfig, mode: Mode) -> Check {
    let line = crate::providers::provider(ProviderId::Droid).install_hint();
    let Some(bin) = &cfg.droid_bin else {
        return Check {
            name: "droid",
            level: Level::Fail,
            detail: format!("not found ({})", cfg.droid_source),
            fix: format!(
                "install it: {line} (droid-executor finds it under npm's global prefix), or set \
                 droid_bin in the config, or DROID_CLI_CMD"
            ),
        };
    };
    let engine = Engine::new(cfg.clone());
    let found = format!("{} (from {})", bin.display(), cfg.droid_source);
    // the launcher without its binary cannot run: said as such, with the package it lacks
    let launcher = install::launcher(bin).filter(|l| l.script && l.binary.is_none());
    let without_binary = |why: &str| {
        launcher.as_ref().map(|l| Check {
            name: "droid",
            level: Level::Fail,
            detail: format!(
                "{found} is the {} launcher{}, without the package that holds droid itself \
                 ({}){why}",
                install::LAUNCHER,
                l.version
                    .as_deref()
                    .map(|v| format!(" {v}"))
                    .unwrap_or_default(),
                install::platform_package()
            ),
            fix: format!(
                "install that package, pinned: {line} (reinstalling {} does not bring it)",
                install::LAUNCHER
            ),
        })
    };
    if mode == Mode::Ping
        && let Some(check) = without_binary("")
    {
        return check;
    }
    let version = match mode {
        Mode::Ping => engine
            .droid_version()
            .await
            .ok_or_else(|| "does not answer --version".to_owned()),
        Mode::Doctor => engine
            .run_droid_version()
            .await
            .map_err(|why| format!("found but does not run: {why}")),
    };
    match version {
        Ok(v) if v == TESTED_DROID => Check {
            name: "droid",
            level: Level::Ok,
            detail: format!("{found}, version {v}"),
            fix: String::new(),
        },
        Ok(v) => Check {
            name: "droid",
            level: Level::Warn,
            detail: format!("{found}, version {v}"),
            fix: format!(
                "this release was tested with droid {TESTED_DROID}; other versions may change its \
                 output. To pin it: {line}{}",
                if cfg.droid_source.starts_with("npm global prefix") {
                    String::new()
                } else {
                    format!(
                        ", then set droid_bin to $(npm prefix -g)/lib/node_modules/{}/bin/droid \
                         (the droid found now would still come first)",
                        install::platform_package()
                    )
                }
            ),
        },
        Err(why) => without_binary(&format!("; {why}")).unwrap_or_else(|| Check {
            name: "droid",
            level: Level::Fail,
            detail: format!("{found} {why}"),
            fix: format!(
                "check that {} is droid's binary; to install it again, pinned: {line}{}",
                bin.display(),
                install::PLATFORM
                    .get(1)
                    .map(|b| format!(" (a CPU without AVX2 needs @factory/{b}@{TESTED_DROID})"))
                    .unwrap_or_default()
            ),
        }),
    }
}

/// What `ping` says of one provider (MCP `ping_<provider>`, `droid-executor ping <provider>`):
/// for droid its program and version, and its authentication; for the others their one line
/// (found, version, endpoint or credentials configured, or what to do). Fast: the version comes
/// from the npm package when there is one.
pub async fn provider_checks(cfg: &EngineConfig, env: &EnvMap, id: ProviderId) -> Vec<Check> {
    let checks = if id == ProviderId::Droid {
        vec![
            droid_check(cfg, Mode::Ping).await,
            auth_check(env, cfg.default_model.as_deref()),
        ]
    } else {
        vec![agent_check(cfg, env, id, Mode::Ping).await]
    };
    amended(checks, &cfg.client_env)
}

/// The line of a provider other than droid: its program found, its version, and whether its
/// endpoint or credentials are configured (one of its variables set, or one of its files under
/// `$HOME`). Never a FAIL: a provider nobody asks for needs nothing; a request naming a missing
/// one ends `error` with the same fix.
async fn agent_check(cfg: &EngineConfig, env: &EnvMap, id: ProviderId, mode: Mode) -> Check {
    let provider = crate::providers::provider(id);
    let name = provider.name();
    let (program, source) = cfg.program_of(id);
    let Some(bin) = program else {
        return Check {
            name,
            level: Level::Warn,
            detail: format!("not found ({source}); tasks with provider {name} cannot run"),
            fix: format!(
                "install it if you want it: {} (or set {} in the config, or {})",
                provider.install_hint(),
                id.info().bin_setting,
                id.info().bin_vars.join(" or ")
            ),
        };
    };
    let engine = Engine::new(cfg.clone());
    let found = format!("{} (from {source})", bin.display());
    let version = match mode {
        Mode::Ping => engine
            .agent_version(id)
            .await
            .ok_or_else(|| "does not answer --version".to_owned()),
        Mode::Doctor => engine
            .run_agent_version(id)
            .await
            .map_err(|why| format!("found but does not run: {why}")),
    };
    let auth = credential_found(env, provider);
    let tested = provider.package().1;
    match (version, auth) {
        (Err(why), _) => Check {
            name,
            level: Level::Warn,
            detail: format!("{found} {why}"),
            fix: format!("reinstall it: {}", provider.install_hint()),
        },
        (Ok(v), auth) => {
            let mut detail = format!("{found}, version {v}");
            let mut fix = Vec::new();
            if v != tested {
                fix.push(format!(
                    "this release was tested with {name} {tested}; other versions may change its output"
                ));
            }
            match &auth {
                Some(a) => detail.push_str(&format!("; {a}")),
                None if provider.auth_vars().is_empty() && provider.auth_files().is_empty() => {}
                None => {
                    detail.push_str("; no endpoint or credentials configured");
                    let mut ways: Vec<String> = provider
                        .auth_vars()
                        .iter()
                        .map(|v| format!("set {v}"))
                        .collect();
                    ways.extend(provider.auth_files().iter().map(|f| format!("write ~/{f}")));
                    fix.push(ways.join(", or "));
                }
            }
            Check {
                name,
                level: if fix.is_empty() {
                    Level::Ok
                } else {
                    Level::Warn
                },
                detail,
                fix: fix.join("; "),
            }
        }
    }
}

/// Whether provider `id` has an endpoint or credentials configured (MCP `ping`'s `endpoint`):
/// for droid, its `auth` line is OK (a Factory key, or custom models a run can use); for the
/// others, one of its variables is set or one of its files is under `$HOME`, or it needs none.
/// The same answer `ping`'s lines give, so a front-end never computes it itself.
pub fn credentials_configured(cfg: &EngineConfig, env: &EnvMap, id: ProviderId) -> bool {
    if id == ProviderId::Droid {
        return auth_check(env, cfg.default_model.as_deref()).level == Level::Ok;
    }
    let provider = crate::providers::provider(id);
    (provider.auth_vars().is_empty() && provider.auth_files().is_empty())
        || credential_found(env, provider).is_some()
}

/// How `provider`'s credentials are configured (`X is set`, `~/f exists`), if they are.
fn credential_found(env: &EnvMap, provider: &dyn crate::providers::Provider) -> Option<String> {
    let home = crate::config::var(env, "HOME").map(Path::new);
    let var_set = provider
        .auth_vars()
        .iter()
        .find(|v| crate::config::var(env, v).is_some());
    let file = provider
        .auth_files()
        .iter()
        .find(|f| home.is_some_and(|h| h.join(f).exists()));
    match (var_set, file) {
        (Some(v), _) => Some(format!("{v} is set")),
        (None, Some(f)) => Some(format!("~/{f} exists")),
        (None, None) => None,
    }
}

/// The `auth` line: a Factory key, or custom models droid can use without one, each with the id
/// to pass as the model (`custom:<displayName>-<n>`, as droid numbers them:
/// `crate::providers::droid::custom_models`), and whether a run given no model works: the
/// config's `model` (`default_model`), airgap mode (the first custom model) or a key (droid's
/// built-in default). Never a FAIL: droid may be logged in (`droid` then `/login`), which we
/// cannot see.
fn auth_check(env: &EnvMap, default_model: Option<&str>) -> Check {
    let var = |name| crate::config::var(env, name).map(String::as_str);
    let key = var("FACTORY_API_KEY").is_some();
    let airgap = custom_models::airgap(var("FACTORY_AIRGAP_ENABLED"));
    let found = var("HOME")
        .map(|h| custom_models::read(Path::new(h)))
        .unwrap_or_default();
    let notes: String = found.notes.iter().map(|n| format!("\nnote: {n}")).collect();
    let check = |level, detail: String, fix: String| Check {
        name: "auth",
        level,
        detail: format!("{detail}{notes}"),
        fix,
    };
    let Some(first) = found.models.first().map(|m| m.id.as_str()) else {
        return match (airgap, key) {
            (true, _) => check(
                Level::Warn,
                "FACTORY_AIRGAP_ENABLED is set and there is no custom model: droid can use no \
                 model (airgap mode keeps it off Factory's)"
                    .into(),
                "add a custom model to ~/.factory/settings.json (docs/models.md), or unset \
                 FACTORY_AIRGAP_ENABLED"
                    .into(),
            ),
            (false, true) => check(Level::Ok, "FACTORY_API_KEY is set".into(), String::new()),
            (false, false) => check(
                Level::Warn,
                "no FACTORY_API_KEY and no custom models".into(),
                "export FACTORY_API_KEY=fk-… (or log in with droid, or add customModels to \
                 ~/.factory/settings.json)"
                    .into(),
            ),
        };
    };
    let listing: String = found
        .models
        .iter()
        .map(|m| format!("\n{}  (model {})", m.id, m.model))
        .collect();
    let head = format!(
        "{}; custom models in {}, each passed as the model by its id:{listing}",
        if key {
            "FACTORY_API_KEY is set"
        } else {
            "no FACTORY_API_KEY"
        },
        found.file
    );
    let set_model = format!(
        "pass one as the model (run --model {first}, the request's model), or set model = \
         \"{first}\" in the config (DROID_EXECUTOR_MODEL)"
    );
    match default_model {
        Some(m) if found.knows(m) => check(
            Level::Ok,
            format!("{head}\nruns given no model use {m} (the config's model)"),
            String::new(),
        ),
        Some(m) if m.starts_with("custom:") => check(
            Level::Warn,
            format!(
                "{head}\nthe config's model {m} is none of them: droid refuses it (Invalid model)"
            ),
            "set model in the config to one of these ids".into(),
        ),
        Some(m) if airgap || !key => check(
            Level::Warn,
            format!(
                "{head}\nthe config's model {m} is one of Factory's, which {}",
                if airgap {
                    "airgap mode refuses (FACTORY_AIRGAP_ENABLED is set)"
                } else {
                    "needs a Factory account"
                }
            ),
            set_model,
        ),
        Some(_) => check(Level::Ok, head, String::new()),
        None if airgap => check(
            Level::Ok,
            format!("{head}\nruns given no model use {first} (FACTORY_AIRGAP_ENABLED is set)"),
            String::new(),
        ),
        None if key => check(Level::Ok, head, String::new()),
        None => check(
            Level::Warn,
            format!(
                "{head}\na run given no model fails: droid's built-in default needs a Factory \
                 account"
            ),
            format!(
                "{set_model}; or set FACTORY_AIRGAP_ENABLED=1, and droid uses {first} when given \
                 no model"
            ),
        ),
    }
}

/// What `droid-executor doctor` reports of the engine: [`checks`] (but every agent CLI is run,
/// and a config file named with `--config`, `config` here, must exist), then git and the
/// bridge's port on the configured host. (The Agent Skill's check is the front-end's:
/// `client_setup::skill_check`.)
pub async fn doctor_checks(config: Option<&Path>, env: &EnvMap, cwd: Option<&Path>) -> Vec<Check> {
    let (mut out, settings) = readiness(config, env, Mode::Doctor).await;
    let store = settings
        .store_dir
        .clone()
        .or_else(|| crate::config::default_store_dir(env));
    out.push(git_check(&settings.engine_config(env).env).await);
    out.push(sandbox_check(
        settings.sandbox,
        crate::process::sandbox::kernel_abi(),
    ));
    if let Some(cwd) = cwd {
        let home = env.get("HOME").map(Path::new);
        out.push(location_check(cwd, home, &settings.sandbox_writable));
    }
    out.push(reach_check(
        settings.port,
        crate::process::sandbox::kernel_abi(),
    ));
    out.push(limits_check(
        settings.cgroups,
        crate::process::limits::RunLimits {
            max_pids: settings.max_pids,
            max_memory_mb: settings.max_memory_mb,
        },
    ));
    out.push(bridge_check(&settings.host, settings.port, store.as_deref()).await);
    out.push(worktrees_check(&settings.engine_config(env)));
    out
}

/// The `worktrees` line: how many worktrees of worktree tasks there are, in which state, and
/// the disk they use (a WARN at `max_worktrees`, when the next worktree task is refused).
fn worktrees_check(cfg: &EngineConfig) -> Check {
    let max = cfg.worktrees.max_worktrees;
    let list = match crate::tasks::Tasks::open(cfg).and_then(|t| t.worktrees()) {
        Ok(l) => l,
        Err(e) => {
            return Check {
                name: "worktrees",
                level: Level::Warn,
                detail: format!("cannot be listed: {e}"),
                fix: "check the task store (store_dir)".into(),
            };
        }
    };
    let live = list
        .iter()
        .filter(|w| w.running || w.state.is_none_or(droid_contract::WorktreeState::is_live))
        .count();
    let bytes = list.iter().map(|w| w.disk.bytes).sum();
    let disk = crate::worktree::DiskUse {
        bytes,
        entries: 0,
        partial: list.iter().any(|w| w.disk.partial),
    };
    let mut states: Vec<(&str, usize)> = Vec::new();
    for w in &list {
        let s = match (w.running, w.state) {
            (true, _) => "running",
            (false, Some(s)) => s.as_str(),
            (false, None) => "ended",
        };
        match states.iter_mut().find(|(n, _)| *n == s) {
            Some((_, c)) => *c += 1,
            None => states.push((s, 1)),
        }
    }
    // in a fixed order: those holding a checkout first
    const ORDER: [&str; 6] = [
        "running",
        "ready",
        "conflicted",
        "ended",
        "applied",
        "discarded",
    ];
    states.sort_by_key(|(s, _)| ORDER.iter().position(|o| o == s));
    let said: Vec<String> = states.iter().map(|(s, n)| format!("{n} {s}")).collect();
    let detail = if list.is_empty() {
        format!("none (at most {max}: max_worktrees)")
    } else {
        format!(
            "{live} of at most {max} (max_worktrees) hold a checkout ({}), {} on disk",
            said.join(", "),
            disk.human()
        )
    };
    let full = live >= max;
    Check {
        name: "worktrees",
        level: if full { Level::Warn } else { Level::Ok },
        detail,
        fix: if full {
            "the next worktree task is refused: apply or discard some (droid-executor tasks \
             list shows them), or raise max_worktrees"
                .into()
        } else {
            String::new()
        },
    }
}

/// What a run can still reach outside its confinement (docs/operations.md#requests-from-inside-a-run):
/// the bridge's port is refused to runs where the kernel has Landlock network rules (ABI 4);
/// reads, the rest of the network and pathname Unix sockets of other daemons are not confined
/// by any kernel yet.
pub fn reach_check(port: u16, abi: Option<u32>) -> Check {
    const NOT_CONFINED: &str = "not confined: reads, the network but for that port, and \
         pathname Unix sockets of other daemons (tmux, systemd --user, ssh-agent, docker), which \
         a run can ask to act outside it";
    match abi {
        Some(n) if n >= 4 => Check {
            name: "reach",
            level: Level::Ok,
            detail: format!(
                "runs cannot connect to the bridge's port {port} (Landlock ABI {n}); \
                 {NOT_CONFINED}"
            ),
            fix: String::new(),
        },
        _ => Check {
            name: "reach",
            level: Level::Warn,
            detail: format!(
                "this kernel has no Landlock network rules (ABI 4): a run can send the bridge on \
                 port {port} a request with more rights than its own; {NOT_CONFINED}"
            ),
            fix: "use Linux 6.7 or later, or do not run the bridge while tasks run".into(),
        },
    }
}

/// Whether the current directory, as a repository, lies where confinement is weaker: under a
/// directory every run may write (`sandbox_writable`), where another run can write it and a run
/// in it can write its siblings; or the home directory itself, whose every file (shell rc files,
/// `~/.ssh`) a run there may write. `/tmp` is not such a directory: no run may write it.
pub fn location_check(cwd: &Path, home: Option<&Path>, writable: &[std::path::PathBuf]) -> Check {
    let real = |p: &Path| crate::real_path::canonical(p).unwrap_or_else(|_| p.to_path_buf());
    let here = real(cwd);
    let shared: Vec<std::path::PathBuf> = writable.iter().map(|p| real(p)).collect();
    if let Some(under) = shared.iter().find(|s| here.starts_with(s)) {
        return Check {
            name: "location",
            level: Level::Warn,
            detail: format!(
                "{} lies under {}, which every run may write: a run in another repository can \
                 write this one, and a run here can write its siblings",
                here.display(),
                under.display()
            ),
            fix: "clone the repository outside it (under your home) for a run of its own".into(),
        };
    }
    if home.map(real).is_some_and(|h| h == here) {
        return Check {
            name: "location",
            level: Level::Warn,
            detail: format!(
                "{} is your home: a run with it as repo_root may write every file in it (shell rc \
                 files, ~/.ssh)",
                here.display()
            ),
            fix: "run tasks in a repository below your home, not in your home itself".into(),
        };
    }
    Check {
        name: "location",
        level: Level::Ok,
        detail: format!(
            "{}: only a run whose repo_root it is may write it",
            here.display()
        ),
        fix: String::new(),
    }
}

/// How a run's tasks and memory are bounded here ([`crate::process::limits`]).
pub fn limits_check(cgroups: bool, limits: crate::process::limits::RunLimits) -> Check {
    let here = crate::process::cgroup::process_limits(cgroups, limits);
    let ok = here.complete();
    Check {
        name: "limits",
        level: if ok { Level::Ok } else { Level::Warn },
        detail: here.to_string(),
        fix: if ok {
            String::new()
        } else {
            "run droid-executor as a user other than root, or in a cgroup whose \
             cgroup.subtree_control passes pids and memory down"
                .into()
        },
    }
}

/// What the kernel offers for write confinement (`crate::process::sandbox`) under the `sandbox`
/// setting `mode`, with the kernel's Landlock ABI `abi` (`None`: no Landlock), and whether a
/// run's signals are scoped to it (ABI 6 and later; before, a run can signal, stop or kill any
/// process of the user: the front-ends, other runs, its own supervisor).
pub fn sandbox_check(mode: SandboxMode, abi: Option<u32>) -> Check {
    use crate::process::sandbox::SCOPE_ABI;
    let offered = abi.map_or_else(
        || "this kernel offers no Landlock".to_owned(),
        |n| format!("Landlock ABI {n}"),
    );
    let (level, detail, fix) = match (mode, abi) {
        (SandboxMode::Auto | SandboxMode::Landlock, Some(n)) if n >= SCOPE_ABI => (
            Level::Ok,
            format!(
                "{offered}; runs are confined (sandbox = \"{}\"): writes, and signals and \
                 abstract sockets scoped to the run",
                mode.as_str()
            ),
            String::new(),
        ),
        (SandboxMode::Auto | SandboxMode::Landlock, Some(_)) => (
            Level::Warn,
            format!(
                "{offered}; runs are confined (sandbox = \"{}\"): writes only; signals are not \
                 scoped (ABI {SCOPE_ABI} needed): a run can stop or kill any of your processes, \
                 its own supervisor included",
                mode.as_str()
            ),
            format!("use Linux 6.12 or later (Landlock ABI {SCOPE_ABI})"),
        ),
        (SandboxMode::Off, _) => (
            Level::Warn,
            format!(
                "{offered}; sandbox = \"off\": agents write wherever the user can, and \
                 signals are not scoped"
            ),
            "set sandbox = \"auto\" (DROID_EXECUTOR_SANDBOX=auto)".to_owned(),
        ),
        (SandboxMode::Auto, None) => (
            Level::Warn,
            format!("{offered}; runs go unconfined (sandbox = \"auto\"), signals are not scoped"),
            "use a kernel with Landlock (Linux 5.13 or later, landlock in the lsm= boot list)"
                .to_owned(),
        ),
        (SandboxMode::Landlock, None) => (
            Level::Fail,
            format!("{offered}; sandbox = \"landlock\" refuses every run"),
            "use a kernel with Landlock, or set sandbox = \"auto\" to run unconfined".to_owned(),
        ),
    };
    Check {
        name: "sandbox",
        level,
        detail,
        fix,
    }
}

/// Is git there, and new enough for the snapshot ([`crate::snapshot::GIT_MIN`])? A plain
/// work tree is read in-process without git (but for the old content of changed files); the
/// layouts that are not (a split or sparse index, `GIT_DIR`, configuration includes) are then
/// measured by walking the directory: `.gitignore` is ignored and the walk stops after 10 s or
/// 1,000,000 files. A WARN, not a FAIL: runs still work.
pub async fn git_check(child_env: &[(std::ffi::OsString, std::ffi::OsString)]) -> Check {
    let (major, minor) = crate::snapshot::GIT_MIN;
    let walk = "work trees not read in-process (a split or sparse index, GIT_DIR set, \
                configuration includes) are measured by walking the directory (.gitignore \
                ignored, at most 10 s or 1,000,000 files), and changed files' old content \
                comes from git";
    let fix = format!("install git {major}.{minor} or later on droid's PATH");
    match crate::snapshot::git_version(Path::new("/"), child_env).await {
        Ok((v, text)) if v >= (major, minor) => Check {
            name: "git",
            level: Level::Ok,
            detail: text,
            fix: String::new(),
        },
        Ok((_, text)) => Check {
            name: "git",
            level: Level::Warn,
            detail: format!("{text} is older than {major}.{minor}: {walk}"),
            fix,
        },
        Err(why) => Check {
            name: "git",
            level: Level::Warn,
            detail: format!("git cannot be used ({why}): {walk}"),
            fix,
        },
    }
}

/// How long `doctor` waits for the bridge's address to resolve and for a connection.
const PROBE_LIMIT: std::time::Duration = std::time::Duration::from_millis(500);

/// Where a client reaches a bridge bound to `host` ([`bind_address`]), the name's resolution
/// bounded by [`PROBE_LIMIT`].
async fn bridge_addr(host: &str, port: u16) -> Result<SocketAddr, String> {
    let bind = tokio::time::timeout(PROBE_LIMIT, bind_address::resolve(host, port))
        .await
        .map_err(|_| format!("host {host:?} did not resolve within {PROBE_LIMIT:?}"))??;
    Ok(bind_address::client_addr(bind))
}

/// Is the bridge's port on `host` (the configured bind address) free, held by our bridge, or
/// taken by something else? Looks only.
pub async fn bridge_check(host: &str, port: u16, store: Option<&Path>) -> Check {
    let addr = match bridge_addr(host, port).await {
        Ok(a) => a,
        Err(why) => {
            return Check {
                name: "bridge",
                level: Level::Warn,
                detail: why,
                fix:
                    "set host in the config (or DROID_EXECUTOR_HOST) to an address of this machine"
                        .into(),
            };
        }
    };
    let listening = matches!(
        tokio::time::timeout(PROBE_LIMIT, tokio::net::TcpStream::connect(addr)).await,
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

/// Can the task store be written (or created)? Nothing is left behind: the nearest existing
/// directory gets a probe file that is removed at once. Permission bits are not asked
/// (`access(2)`), since they do not tell what root may do, nor a file system that refuses new
/// files whatever the bits say.
fn store_check(dir: Option<&Path>) -> Check {
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
    let fix = "fix its permissions, or set store_dir in the config (or DROID_EXECUTOR_STORE_DIR)";
    let existing = dir.ancestors().find(|p| p.exists()).unwrap_or(dir);
    if !existing.is_dir() {
        return Check {
            name: "store",
            level: Level::Fail,
            detail: format!(
                "{} cannot be created: {} is not a directory",
                dir.display(),
                existing.display()
            ),
            fix: "set store_dir in the config (or DROID_EXECUTOR_STORE_DIR) to a directory".into(),
        };
    }
    let probe = existing.join(format!(".droid-executor-doctor-{}", unique_id()));
    if let Err(e) = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&probe)
    {
        return Check {
            name: "store",
            level: Level::Fail,
            detail: format!(
                "{} is not writable: cannot create a file in it ({e})",
                existing.display()
            ),
            fix: fix.into(),
        };
    }
    let _ = std::fs::remove_file(&probe);
    let what = if existing == dir {
        format!("{} is writable", dir.display())
    } else {
        format!(
            "{} will be created (under {}, writable)",
            dir.display(),
            existing.display()
        )
    };
    Check {
        name: "store",
        level: Level::Ok,
        detail: what,
        fix: String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_sandbox_line_says_whether_signals_are_scoped() {
        let line = |mode, abi| {
            let c = sandbox_check(mode, abi);
            (c.level, c.detail)
        };
        assert_eq!(
            line(SandboxMode::Auto, Some(6)),
            (
                Level::Ok,
                "Landlock ABI 6; runs are confined (sandbox = \"auto\"): writes, and signals and \
                 abstract sockets scoped to the run"
                    .to_owned()
            )
        );
        assert_eq!(
            line(SandboxMode::Landlock, Some(5)),
            (
                Level::Warn,
                "Landlock ABI 5; runs are confined (sandbox = \"landlock\"): writes only; signals \
                 are not scoped (ABI 6 needed): a run can stop or kill any of your processes, its \
                 own supervisor included"
                    .to_owned()
            )
        );
        assert_eq!(
            sandbox_check(SandboxMode::Landlock, Some(5)).fix,
            "use Linux 6.12 or later (Landlock ABI 6)"
        );
        for (mode, abi) in [(SandboxMode::Off, Some(7)), (SandboxMode::Auto, None)] {
            let (level, detail) = line(mode, abi);
            assert_eq!(level, Level::Warn);
            assert!(detail.ends_with("signals are not scoped"), "{detail}");
        }
        assert_eq!(line(SandboxMode::Landlock, None).0, Level::Fail);
    }
}

#[cfg(test)]
mod location_tests {
    use super::*;

    #[test]
    fn a_repository_under_a_directory_every_run_may_write_is_flagged() {
        // no run may write /tmp: a repository there is as confined as anywhere
        let under_tmp = location_check(Path::new("/tmp/repo"), None, &[]);
        assert_eq!(under_tmp.level, Level::Ok, "{under_tmp:?}");
        let shared = std::path::PathBuf::from("/srv/shared");
        let under_extra = location_check(Path::new("/srv/shared/repo"), None, &[shared]);
        assert_eq!(under_extra.level, Level::Warn);
        assert!(
            under_extra.detail.contains("every run may write"),
            "{under_extra:?}"
        );
        let home = location_check(Path::new("/home/u"), Some(Path::new("/home/u")), &[]);
        assert_eq!(home.level, Level::Warn);
        assert!(home.detail.contains("your home"), "{home:?}");
        let fine = location_check(Path::new("/home/u/repo"), Some(Path::new("/home/u")), &[]);
        assert_eq!(fine.level, Level::Ok);
    }
}
