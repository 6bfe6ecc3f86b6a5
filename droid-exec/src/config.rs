//! Configuration: defaults < config file (`$XDG_CONFIG_HOME/droid-executor/config.toml`) <
//! environment (`DROID_EXECUTOR_<KEY>`, plus seed 000's `PORT`, `DROID_TIMEOUT`, `DROID_CLI_CMD`,
//! docs/architecture.md#origin) < command-line flags (applied by the front-end). The environment is
//! passed in as a map, never read here, so tests and front-ends decide what the engine sees.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{Autonomy, Isolation, PROVIDERS, ProviderId};
use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::locate::{Located, locate_agent, locate_droid};
pub use crate::process::limits::RunLimits;
pub use crate::process::sandbox::SandboxMode;
pub use crate::worktree::config::WorktreeConfig;

pub use crate::env_map::EnvMap;
pub(crate) use crate::env_map::var;

/// The settings file and environment, merged (docs/architecture.md#configuration).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Settings {
    /// The droid program (else `DROID_CLI_CMD`, else `PATH`).
    pub droid_bin: Option<PathBuf>,
    /// The Codex CLI (else `DROID_EXECUTOR_CODEX_BIN`, else `codex` on `PATH`).
    pub codex_bin: Option<PathBuf>,
    /// Claude Code (else `DROID_EXECUTOR_CLAUDE_BIN`, else `claude` on `PATH`).
    pub claude_bin: Option<PathBuf>,
    /// The Gemini CLI (else `DROID_EXECUTOR_GEMINI_BIN`, else `gemini` on `PATH`).
    pub gemini_bin: Option<PathBuf>,
    /// OpenCode (else `DROID_EXECUTOR_OPENCODE_BIN`, else `opencode` on `PATH`).
    pub opencode_bin: Option<PathBuf>,
    /// HTTP bridge port.
    pub port: u16,
    /// HTTP bridge bind address.
    pub host: String,
    /// Directories under which a repo_root may lie (default: the user's home).
    pub allowed_roots: Vec<PathBuf>,
    /// Highest autonomy a request may get.
    pub max_autonomy: Autonomy,
    /// Allow `--skip-permissions-unsafe` (never used by default).
    pub allow_unsafe: bool,
    /// Runs at once.
    pub max_concurrent: usize,
    /// Re-run `suggested_commands` after droid finishes.
    pub verify: bool,
    /// Write confinement of the agent and the verification commands: `auto` (Landlock where
    /// the kernel offers it), `landlock` (refuse to run without it), `off`.
    pub sandbox: SandboxMode,
    /// Extra paths a confined run may write under (besides repo_root, scratch, temp, the
    /// agent's state and the package caches: docs/operations.md#security-model).
    pub sandbox_writable: Vec<PathBuf>,
    /// Each run's processes in a cgroup v2 leaf where this process may make one (ended with
    /// `cgroup.kill`); `false`, or where there is none: a supervisor process per run.
    pub cgroups: bool,
    /// Most tasks (processes and threads) of a run's agent tree, and of each verification
    /// command's: `pids.max` of its cgroup, else `RLIMIT_NPROC` (docs/operations.md#limits);
    /// 0: no limit.
    pub max_pids: u32,
    /// Most memory in MiB of a run's agent tree, and of each verification command's:
    /// `memory.max` of its cgroup, else `RLIMIT_DATA` per process; 0: no limit.
    pub max_memory_mb: u64,
    /// Default `max_runtime_seconds`.
    pub default_timeout: u32,
    /// Seconds a finished task's result is kept.
    pub task_ttl: u64,
    /// Bytes kept of each command's stdout and stderr.
    pub excerpt_bytes: usize,
    /// Largest HTTP request body.
    pub body_limit: usize,
    /// Sync HTTP requests that may wait for a run slot before the bridge answers 429.
    pub max_queue: usize,
    /// File holding the bridge's bearer token (or set `DROID_EXECUTOR_TOKEN`); required for a
    /// non-loopback `host`.
    pub token_file: Option<PathBuf>,
    /// Host names the bridge accepts in the `Host` header besides the loopback names.
    pub allowed_hosts: Vec<String>,
    /// Browser origins allowed to call the bridge (none by default).
    pub allowed_origins: Vec<String>,
    /// Model used when a request names none (`-m`); droid's own default otherwise.
    pub model: Option<String>,
    /// Extra environment variables passed to droid and to verification commands.
    pub env_passthrough: Vec<String>,
    /// The task store (default `$XDG_STATE_HOME/droid-executor`, else
    /// `$HOME/.local/state/droid-executor`).
    pub store_dir: Option<PathBuf>,
    /// The providers the MCP server delegates to: the `provider` values its `ask` family takes,
    /// and the per-provider families (`ask_<p>`, …) of the toolset `per_provider` (default all
    /// five; `[]` leaves only the droid tools).
    pub providers: Vec<ProviderId>,
    /// The MCP server's toolsets (`droid`, `delegate`, `per_provider`, or the keywords
    /// `default` and `all`; [`crate::toolset`]); `mcp --toolsets` overrides it.
    pub toolsets: crate::toolset::Toolsets,
    /// Where a request that names none runs: `none` (in place) or `worktree` (a git worktree
    /// of its own under the store; docs/worktrees.md).
    pub isolation: Isolation,
    /// Commands run in a new worktree before the agent (`npm ci`), when the request names none.
    pub setup_commands: Vec<String>,
    /// Untracked paths of repo_root copied into a new worktree (`.env`), when the request names
    /// none.
    pub worktree_copy: Vec<String>,
    /// Most worktrees at once (running, or waiting for apply or discard); a submission beyond
    /// is refused.
    pub max_worktrees: usize,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            droid_bin: None,
            codex_bin: None,
            claude_bin: None,
            gemini_bin: None,
            opencode_bin: None,
            port: 53002,
            host: "127.0.0.1".into(),
            allowed_roots: Vec::new(),
            max_autonomy: Autonomy::Medium,
            allow_unsafe: false,
            max_concurrent: 4,
            verify: true,
            sandbox: SandboxMode::Auto,
            sandbox_writable: Vec::new(),
            cgroups: true,
            max_pids: crate::process::limits::DEFAULT_MAX_PIDS,
            max_memory_mb: crate::process::limits::DEFAULT_MAX_MEMORY_MB,
            default_timeout: 600,
            task_ttl: 24 * 3600,
            excerpt_bytes: 4096,
            body_limit: 1024 * 1024,
            max_queue: 64,
            token_file: None,
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            model: None,
            env_passthrough: Vec::new(),
            store_dir: None,
            providers: ProviderId::ALL.to_vec(),
            toolsets: crate::toolset::Toolsets::default(),
            isolation: Isolation::None,
            setup_commands: Vec::new(),
            worktree_copy: Vec::new(),
            max_worktrees: crate::worktree::config::DEFAULT_MAX_WORKTREES,
        }
    }
}

/// Where the task store is by default: `$XDG_STATE_HOME/droid-executor`, else
/// `$HOME/.local/state/droid-executor`.
pub fn default_store_dir(env: &EnvMap) -> Option<PathBuf> {
    let base = var(env, "XDG_STATE_HOME")
        .map(PathBuf::from)
        .or_else(|| var(env, "HOME").map(|h| Path::new(h).join(".local/state")))?;
    Some(base.join("droid-executor"))
}

/// Where the config file is: `$XDG_CONFIG_HOME/droid-executor/config.toml`, else
/// `$HOME/.config/droid-executor/config.toml`; `None` when both are unset or empty (an empty
/// `HOME` would make the path relative to whatever directory the command runs in).
pub fn default_config_path(env: &EnvMap) -> Option<PathBuf> {
    let base = var(env, "XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| var(env, "HOME").map(|h| Path::new(h).join(".config")))?;
    Some(base.join("droid-executor").join("config.toml"))
}

/// The directories a `:`-separated list names; empty items are dropped (an empty root is a
/// prefix of every path: it would switch the restriction off).
pub(crate) fn root_list(v: &str) -> Vec<PathBuf> {
    std::env::split_paths(v)
        .filter(|p| !p.as_os_str().is_empty())
        .collect()
}

fn parse_env<T: std::str::FromStr>(env: &EnvMap, name: &str) -> Result<Option<T>, EngineError>
where
    T::Err: std::fmt::Display,
{
    match var(env, name) {
        None => Ok(None),
        Some(v) => v
            .trim()
            .parse::<T>()
            .map(Some)
            .map_err(|e| EngineError::Setting {
                name: name.into(),
                message: format!("{v:?}: {e}"),
            }),
    }
}

/// The largest config file read (`/dev/zero` or a FIFO as `--config` must not hang or grow).
pub const CONFIG_LIMIT: usize = 1024 * 1024;

/// The config file's text, bounded by [`CONFIG_LIMIT`] (see [`crate::input`]).
fn read_config(path: &Path) -> Result<String, EngineError> {
    let what = format!("the config file {}", path.display());
    let bytes = crate::input::read_input(
        crate::input::Input::Path(path),
        &what,
        CONFIG_LIMIT,
        "a config file holds at most 1 MiB",
    )?;
    String::from_utf8(bytes).map_err(|e| EngineError::Config {
        path: path.to_path_buf(),
        message: format!("it is not UTF-8 text ({e})"),
    })
}

/// A comma-separated list, items trimmed, empty ones dropped.
fn split_list(v: &str) -> Vec<String> {
    v.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect()
}

/// The verbs of a delegation tool family, in `tools/list` order: `<verb>_<provider>`.
pub const DELEGATION_VERBS: [&str; 4] = ["ask", "pend", "ping", "cancel"];

/// Every MCP delegation tool the server may list for `providers` (setting `providers`): the
/// per-provider families `ask_codex`, `pend_codex`, … (toolset `per_provider`), by provider in
/// [`ProviderId::ALL`] order, then verb; then the one family taking a `provider` argument,
/// `ask`, `pend`, `ping`, `cancel` (toolset `delegate`), when `providers` is not empty. `setup
/// mcp` approves all of them in the clients, whichever toolsets the server offers today.
pub fn delegation_tools(providers: &[ProviderId]) -> Vec<String> {
    let mut all: Vec<String> = ProviderId::ALL
        .into_iter()
        .filter(|p| providers.contains(p))
        .flat_map(|p| DELEGATION_VERBS.map(|v| format!("{v}_{}", p.as_str())))
        .collect();
    if !providers.is_empty() {
        all.extend(DELEGATION_VERBS.map(str::to_owned));
    }
    all
}

/// The providers a comma-separated `DROID_EXECUTOR_PROVIDERS` names, each once; an unknown
/// name is refused by name.
fn provider_list(v: &str) -> Result<Vec<ProviderId>, EngineError> {
    let mut out = Vec::new();
    for name in split_list(v) {
        let Some(id) = ProviderId::parse(&name) else {
            return Err(EngineError::Setting {
                name: "DROID_EXECUTOR_PROVIDERS".into(),
                message: format!(
                    "{name:?} is not a provider; expected a comma-separated list of {}",
                    ProviderId::choices()
                ),
            });
        };
        if !out.contains(&id) {
            out.push(id);
        }
    }
    Ok(out)
}

impl Settings {
    /// Load the file at `path` (a missing file means defaults), then apply the environment.
    ///
    /// # Errors
    /// [`EngineError::Config`] for an unreadable or invalid file (with line and column),
    /// [`EngineError::Setting`] for an invalid environment value.
    pub fn load(path: Option<&Path>, env: &EnvMap) -> Result<Self, EngineError> {
        let mut s = match path {
            Some(p) => match read_config(p) {
                Ok(text) => toml::from_str::<Settings>(&text).map_err(|e| EngineError::Config {
                    path: p.to_path_buf(),
                    message: e.to_string().trim().to_owned(),
                })?,
                Err(EngineError::Input { source, .. })
                    if source.kind() == std::io::ErrorKind::NotFound =>
                {
                    Settings::default()
                }
                Err(EngineError::Input { source, .. }) => {
                    return Err(EngineError::Io {
                        action: "read",
                        path: p.to_path_buf(),
                        source,
                    });
                }
                Err(e) => return Err(e),
            },
            None => Settings::default(),
        };
        s.apply_env(env)?;
        // an empty root is a prefix of every path: it would switch the restriction off
        s.allowed_roots.retain(|p| !p.as_os_str().is_empty());
        if s.allowed_roots.is_empty()
            && let Some(home) = var(env, "HOME")
        {
            s.allowed_roots.push(PathBuf::from(home));
        }
        Ok(s)
    }

    fn apply_env(&mut self, env: &EnvMap) -> Result<(), EngineError> {
        // a variable set to "" counts as unset (an empty allowed_roots would allow every path)
        for row in PROVIDERS {
            for name in row.bin_vars {
                if let Some(v) = var(env, name) {
                    *self.bin_slot(row.id) = Some(PathBuf::from(v));
                }
            }
        }
        if let Some(v) = parse_env::<u16>(env, "PORT")? {
            self.port = v;
        }
        if let Some(v) = parse_env::<u16>(env, "DROID_EXECUTOR_PORT")? {
            self.port = v;
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_HOST") {
            self.host.clone_from(v);
        }
        // a list that names no directory (`:`) is as good as unset, like ""
        if let Some(roots) = var(env, "DROID_EXECUTOR_ALLOWED_ROOTS")
            .map(|v| root_list(v))
            .filter(|r| !r.is_empty())
        {
            self.allowed_roots = roots;
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_MAX_AUTONOMY") {
            self.max_autonomy = serde_json::from_value(serde_json::Value::String(
                v.trim().to_owned(),
            ))
            .map_err(|_| EngineError::Setting {
                name: "DROID_EXECUTOR_MAX_AUTONOMY".into(),
                message: format!("{v:?}: expected read_only, low, medium or high"),
            })?;
        }
        if let Some(v) = parse_env::<bool>(env, "DROID_EXECUTOR_ALLOW_UNSAFE")? {
            self.allow_unsafe = v;
        }
        if let Some(v) = parse_env::<usize>(env, "DROID_EXECUTOR_MAX_CONCURRENT")? {
            self.max_concurrent = v;
        }
        if let Some(v) = parse_env::<bool>(env, "DROID_EXECUTOR_VERIFY")? {
            self.verify = v;
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_SANDBOX") {
            self.sandbox = SandboxMode::parse(v).map_err(|message| EngineError::Setting {
                name: "DROID_EXECUTOR_SANDBOX".into(),
                message,
            })?;
        }
        if let Some(v) = parse_env::<bool>(env, "DROID_EXECUTOR_CGROUPS")? {
            self.cgroups = v;
        }
        if let Some(v) = parse_env::<u32>(env, "DROID_EXECUTOR_MAX_PIDS")? {
            self.max_pids = v;
        }
        if let Some(v) = parse_env::<u64>(env, "DROID_EXECUTOR_MAX_MEMORY_MB")? {
            self.max_memory_mb = v;
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_SANDBOX_WRITABLE") {
            self.sandbox_writable = root_list(v);
        }
        if let Some(p) = self.sandbox_writable.iter().find(|p| !p.is_absolute()) {
            return Err(EngineError::Setting {
                name: "sandbox_writable".into(),
                message: format!("{} is not an absolute path", p.display()),
            });
        }
        if let Some(v) = parse_env::<u32>(env, "DROID_TIMEOUT")? {
            self.default_timeout = v;
        }
        if let Some(v) = parse_env::<u32>(env, "DROID_EXECUTOR_DEFAULT_TIMEOUT")? {
            self.default_timeout = v;
        }
        if let Some(v) = parse_env::<u64>(env, "DROID_EXECUTOR_TASK_TTL")? {
            self.task_ttl = v;
        }
        if let Some(v) = parse_env::<usize>(env, "DROID_EXECUTOR_EXCERPT_BYTES")? {
            self.excerpt_bytes = v;
        }
        if let Some(v) = parse_env::<usize>(env, "DROID_EXECUTOR_BODY_LIMIT")? {
            self.body_limit = v;
        }
        if let Some(v) = parse_env::<usize>(env, "DROID_EXECUTOR_MAX_QUEUE")? {
            self.max_queue = v;
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_TOKEN_FILE") {
            self.token_file = Some(PathBuf::from(v));
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_ALLOWED_HOSTS") {
            self.allowed_hosts = split_list(v);
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_ALLOWED_ORIGINS") {
            self.allowed_origins = split_list(v);
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_MODEL") {
            self.model = Some(v.clone());
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_STORE_DIR") {
            self.store_dir = Some(PathBuf::from(v));
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_PROVIDERS") {
            self.providers = provider_list(v)?;
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_TOOLSETS") {
            self.toolsets =
                crate::toolset::Toolsets::parse(v).map_err(|message| EngineError::Setting {
                    name: "DROID_EXECUTOR_TOOLSETS".into(),
                    message,
                })?;
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_ISOLATION") {
            self.isolation = Isolation::parse(v).map_err(|message| EngineError::Setting {
                name: "DROID_EXECUTOR_ISOLATION".into(),
                message,
            })?;
        }
        if let Some(v) = parse_env::<usize>(env, "DROID_EXECUTOR_MAX_WORKTREES")? {
            self.max_worktrees = v;
        }
        if let Some(v) = var(env, "DROID_EXECUTOR_WORKTREE_COPY") {
            self.worktree_copy = v
                .split(':')
                .filter(|p| !p.is_empty())
                .map(str::to_owned)
                .collect();
        }
        if let Some(p) = self
            .worktree_copy
            .iter()
            .find(|p| droid_contract::RelPath::parse(p, None).is_err() || p.is_empty())
        {
            return Err(EngineError::Setting {
                name: "worktree_copy".into(),
                message: format!(
                    "{p:?} is not a path inside the repository (relative, without '..')"
                ),
            });
        }
        if let Some(c) = self
            .setup_commands
            .iter()
            .find(|c| droid_contract::ShellCommand::try_from((*c).clone()).is_err())
        {
            return Err(EngineError::Setting {
                name: "setup_commands".into(),
                message: format!("{c:?} is not a command (blank, NUL, or too long)"),
            });
        }
        if self.max_concurrent == 0 {
            return Err(EngineError::Setting {
                name: "max_concurrent".into(),
                message: "must be at least 1".into(),
            });
        }
        if !(1..=86_400).contains(&self.default_timeout) {
            return Err(EngineError::Setting {
                name: "default_timeout".into(),
                message: format!("{} is outside 1..=86400 seconds", self.default_timeout),
            });
        }
        Ok(())
    }

    /// Find droid per these settings and `env` (`DROID_CLI_CMD`, `PATH`, npm's global prefixes).
    pub fn locate_droid(&self, env: &EnvMap) -> Located {
        locate_droid(
            self.droid_bin.as_deref(),
            env.get("DROID_CLI_CMD").map(String::as_str),
            env.get("PATH").map(|p| std::ffi::OsStr::new(p.as_str())),
            || crate::npm_prefix::global_prefixes(env),
        )
    }

    /// The configured program of a provider other than droid (`<provider>_bin`).
    pub fn agent_bin(&self, id: ProviderId) -> Option<&Path> {
        match id {
            ProviderId::Droid => self.droid_bin.as_deref(),
            ProviderId::Codex => self.codex_bin.as_deref(),
            ProviderId::Claude => self.claude_bin.as_deref(),
            ProviderId::Gemini => self.gemini_bin.as_deref(),
            ProviderId::Opencode => self.opencode_bin.as_deref(),
        }
    }

    /// The field of the setting `<provider>_bin` ([`droid_contract::ProviderInfo::bin_setting`]).
    /// The programs' settings are the one part of a provider's row that is also a field here:
    /// the file is read with `deny_unknown_fields` (a typo is an error, with its line and
    /// column), which serde's `flatten` cannot keep; the compiler names a new provider's arm,
    /// and a test checks every row's key is a key of the file.
    fn bin_slot(&mut self, id: ProviderId) -> &mut Option<PathBuf> {
        match id {
            ProviderId::Droid => &mut self.droid_bin,
            ProviderId::Codex => &mut self.codex_bin,
            ProviderId::Claude => &mut self.claude_bin,
            ProviderId::Gemini => &mut self.gemini_bin,
            ProviderId::Opencode => &mut self.opencode_bin,
        }
    }

    /// Find the other providers' programs per these settings and `env`: `<provider>_bin` (set
    /// in the file or by `DROID_EXECUTOR_<PROVIDER>_BIN`, which wins as every variable does),
    /// then the program's name on `PATH`.
    pub fn locate_agents(&self, env: &EnvMap) -> Vec<AgentProgram> {
        let path = env.get("PATH").map(|p| std::ffi::OsStr::new(p.as_str()));
        ProviderId::ALL
            .into_iter()
            .filter(|id| *id != ProviderId::Droid)
            .map(|id| {
                let located = locate_agent(id.as_str(), self.agent_bin(id), path);
                AgentProgram {
                    provider: id,
                    program: located.program,
                    source: located.source,
                }
            })
            .collect()
    }

    /// The engine configuration these settings describe, for a process whose environment is `env`.
    pub fn engine_config(&self, env: &EnvMap) -> EngineConfig {
        let located = self.locate_droid(env);
        EngineConfig {
            droid_bin: located.program,
            droid_source: located.source,
            droid_warnings: located.warnings,
            agents: self.locate_agents(env),
            env: child_env(env, &self.env_passthrough),
            allowed_roots: self.allowed_roots.clone(),
            max_autonomy: self.max_autonomy,
            default_timeout: Duration::from_secs(u64::from(self.default_timeout)),
            default_model: self.model.clone(),
            verify: self.verify,
            sandbox: self.sandbox,
            sandbox_writable: self.sandbox_writable.clone(),
            excerpt_bytes: self.excerpt_bytes,
            kill_grace: Duration::from_secs(5),
            scratch_root: env
                .get("TMPDIR")
                .filter(|t| !t.is_empty())
                .map_or_else(|| PathBuf::from("/tmp"), PathBuf::from),
            store_dir: self.store_dir.clone().or_else(|| default_store_dir(env)),
            max_concurrent: self.max_concurrent,
            task_ttl: Duration::from_secs(self.task_ttl),
            supervisor: None,
            cgroups: self.cgroups,
            limits: RunLimits {
                max_pids: self.max_pids,
                max_memory_mb: self.max_memory_mb,
            },
            redact: Vec::new(),
            worktrees: WorktreeConfig {
                isolation: self.isolation,
                setup_commands: self.setup_commands.clone(),
                worktree_copy: self.worktree_copy.clone(),
                max_worktrees: self.max_worktrees,
            },
            client_env: crate::client_env::ClientEnv::of(
                env,
                server_env_names(self),
                &self.providers,
            ),
        }
    }
}

/// Variables passed to droid and to verification commands (a minimal environment:
/// docs/architecture.md#security).
/// Toolchain homes are included so that droid's commands and our verification find the same
/// `cargo`, `npm` or `python` the user has.
const PASS_EXACT: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "TZ",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "NODE_EXTRA_CA_CERTS",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "GOPATH",
    "GOROOT",
    "JAVA_HOME",
    "PYENV_ROOT",
    "VIRTUAL_ENV",
    "NVM_DIR",
    "XDG_CONFIG_HOME",
    "XDG_DATA_HOME",
    "XDG_CACHE_HOME",
    "XDG_STATE_HOME",
];
const PASS_PREFIX: &[&str] = &["FACTORY_", "LC_"];

/// The child environment: the allow-listed variables of `env` plus `extra` names.
/// Each provider's own variables are in it too; a run passes them only to their provider
/// (`crate::providers::env_allowed`).
pub fn child_env(env: &EnvMap, extra: &[String]) -> Vec<(OsString, OsString)> {
    let agents = crate::providers::all_env_names();
    env.iter()
        // a variable set to "" counts as unset, as it does for our settings: a client that
        // expands `$NAME` of an unset variable passes `NAME=` (Gemini CLI), and an empty
        // `SSL_CERT_FILE` or API key means nothing to the child but trouble
        .filter(|(_, v)| !v.is_empty())
        .filter(|(k, _)| {
            PASS_EXACT.contains(&k.as_str())
                || PASS_PREFIX.iter().any(|p| k.starts_with(p))
                || agents.iter().any(|a| a.contains(k))
                || extra.iter().any(|e| e == *k)
        })
        .map(|(k, v)| (OsString::from(k), OsString::from(v)))
        .collect()
}

/// The environment variables that set each key, in the order they are applied (a later one
/// wins): the providers' `<provider>_bin` from their rows ([`droid_contract::PROVIDERS`]), then
/// [`SETTING_ENV_NAMES`]. Every key of [`Settings`] is listed (a test in `provenance` checks
/// it); `env_passthrough` has none.
pub fn env_names() -> Vec<(&'static str, &'static [&'static str])> {
    PROVIDERS
        .iter()
        .map(|row| (row.bin_setting, row.bin_vars))
        .chain(SETTING_ENV_NAMES.iter().copied())
        .collect()
}

/// The variables of every key that is not a provider's program, as [`env_names`] lists them.
pub const SETTING_ENV_NAMES: &[(&str, &[&str])] = &[
    ("port", &["PORT", "DROID_EXECUTOR_PORT"]),
    ("host", &["DROID_EXECUTOR_HOST"]),
    ("allowed_roots", &["DROID_EXECUTOR_ALLOWED_ROOTS"]),
    ("max_autonomy", &["DROID_EXECUTOR_MAX_AUTONOMY"]),
    ("allow_unsafe", &["DROID_EXECUTOR_ALLOW_UNSAFE"]),
    ("max_concurrent", &["DROID_EXECUTOR_MAX_CONCURRENT"]),
    ("verify", &["DROID_EXECUTOR_VERIFY"]),
    ("sandbox", &["DROID_EXECUTOR_SANDBOX"]),
    ("sandbox_writable", &["DROID_EXECUTOR_SANDBOX_WRITABLE"]),
    ("cgroups", &["DROID_EXECUTOR_CGROUPS"]),
    ("max_pids", &["DROID_EXECUTOR_MAX_PIDS"]),
    ("max_memory_mb", &["DROID_EXECUTOR_MAX_MEMORY_MB"]),
    (
        "default_timeout",
        &["DROID_TIMEOUT", "DROID_EXECUTOR_DEFAULT_TIMEOUT"],
    ),
    ("task_ttl", &["DROID_EXECUTOR_TASK_TTL"]),
    ("excerpt_bytes", &["DROID_EXECUTOR_EXCERPT_BYTES"]),
    ("body_limit", &["DROID_EXECUTOR_BODY_LIMIT"]),
    ("max_queue", &["DROID_EXECUTOR_MAX_QUEUE"]),
    ("token_file", &["DROID_EXECUTOR_TOKEN_FILE"]),
    ("allowed_hosts", &["DROID_EXECUTOR_ALLOWED_HOSTS"]),
    ("allowed_origins", &["DROID_EXECUTOR_ALLOWED_ORIGINS"]),
    ("model", &["DROID_EXECUTOR_MODEL"]),
    ("env_passthrough", &[]),
    ("store_dir", &["DROID_EXECUTOR_STORE_DIR"]),
    ("providers", &["DROID_EXECUTOR_PROVIDERS"]),
    ("toolsets", &["DROID_EXECUTOR_TOOLSETS"]),
    ("isolation", &["DROID_EXECUTOR_ISOLATION"]),
    ("setup_commands", &[]),
    ("worktree_copy", &["DROID_EXECUTOR_WORKTREE_COPY"]),
    ("max_worktrees", &["DROID_EXECUTOR_MAX_WORKTREES"]),
];

/// Droid's own variables worth passing on by name where a prefix cannot be given (a client's
/// pass-through list, e.g. Codex's `env_vars`); droid gets every `FACTORY_*` variable it is given.
const FACTORY_NAMES: &[&str] = &[
    "FACTORY_API_KEY",
    "FACTORY_API_BASE_URL",
    "FACTORY_HOME",
    "FACTORY_AIRGAP_ENABLED",
    "FACTORY_DISABLE_SETTINGS_PERSISTENCE",
    "FACTORY_TELEMETRY_INGEST_BASE_URL",
];

/// Every variable a front-end started with a bare environment needs to behave as it does from
/// the user's shell: the settings' variables, `DROID_CLI_CMD`, `TMPDIR`, what droid is given
/// ([`child_env`]'s list, droid's `FACTORY_*` names) and the settings' `env_passthrough`. In
/// order, each once.
pub fn server_env_names(settings: &Settings) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let setting_names = env_names().into_iter().flat_map(|(_, names)| names.iter());
    let all = ["DROID_CLI_CMD", "TMPDIR", "LC_ALL"]
        .iter()
        .chain(setting_names)
        .chain(FACTORY_NAMES)
        .chain(PASS_EXACT)
        .map(|n| (*n).to_owned())
        .chain(settings.env_passthrough.iter().cloned());
    for name in all {
        if !names.contains(&name) {
            names.push(name);
        }
    }
    names
}

fn cgroups_default() -> bool {
    true
}

/// What the engine needs to run. Serializable so that a background task's supervisor process runs
/// with exactly the configuration of the front-end that submitted it (sent over its stdin, never
/// written to disk: it holds droid's environment).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct EngineConfig {
    /// The droid program; `None` means not found (runs end `error` / `droid_not_found`).
    pub droid_bin: Option<PathBuf>,
    /// Where droid was looked for.
    pub droid_source: String,
    /// Warnings from locating droid.
    pub droid_warnings: Vec<String>,
    /// The other providers' programs, where they were found.
    #[serde(default)]
    pub agents: Vec<AgentProgram>,
    /// The base environment of droid and of verification commands.
    pub env: Vec<(OsString, OsString)>,
    /// Directories a repo_root must lie under (empty: any).
    pub allowed_roots: Vec<PathBuf>,
    /// Highest autonomy granted.
    pub max_autonomy: Autonomy,
    /// Budget when a request names none.
    pub default_timeout: Duration,
    /// Model when a request names none.
    pub default_model: Option<String>,
    /// Re-run suggested commands.
    pub verify: bool,
    /// Write confinement ([`crate::process::sandbox`]).
    #[serde(default)]
    pub sandbox: SandboxMode,
    /// Extra writable paths of a confined run.
    #[serde(default)]
    pub sandbox_writable: Vec<PathBuf>,
    /// Bytes kept per output excerpt.
    pub excerpt_bytes: usize,
    /// Time between SIGTERM and SIGKILL. droid gets SIGTERM as soon as its completion event
    /// arrives, and is reaped in the background (the result does not wait for it).
    pub kill_grace: Duration,
    /// Where per-run private directories are made.
    pub scratch_root: PathBuf,
    /// The task store; also where run slots are kept. `None`: no background tasks, and runs are
    /// not limited across processes.
    pub store_dir: Option<PathBuf>,
    /// Runs at once, across every process sharing the store.
    pub max_concurrent: usize,
    /// How long a finished task's result is kept.
    pub task_ttl: Duration,
    /// The program that supervises a background task, started as `<program> worker <id> --store
    /// <dir>`, and guards each run, started as `<program> guard <marker>` ([`crate::process::guard`]);
    /// the front-end sets it to its own executable. `None`: no background tasks, and no guardian
    /// (what a run leaves behind is still swept, unless the process running it dies first).
    pub supervisor: Option<PathBuf>,
    /// Run each run's processes in a cgroup v2 leaf where this process may make one
    /// ([`crate::process::cgroup`]; needs `supervisor`, which runs the leaves' reaper); `false`, or
    /// where there is none: a supervisor process per run ([`crate::process::guard`]).
    #[serde(default = "cgroups_default")]
    pub cgroups: bool,
    /// The most tasks and memory of a run's processes ([`crate::process::limits`]).
    #[serde(default)]
    pub limits: RunLimits,
    /// Values hidden wherever they would be stored or logged, besides the credentials of `env`
    /// (the bridge sets its own token here). Never passed to droid.
    #[serde(default)]
    pub redact: Vec<String>,
    /// Worktree tasks: the default isolation, a new worktree's set-up, `max_worktrees`.
    #[serde(default)]
    pub worktrees: WorktreeConfig,
    /// Who started this process and what it did to its environment: the MCP client whose
    /// filter a hint names instead of "set X" ([`crate::client_env`]).
    #[serde(default)]
    pub client_env: crate::client_env::ClientEnv,
}

/// Where a provider's program was found, or why not.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentProgram {
    /// Which provider.
    pub provider: ProviderId,
    /// The program; `None` means not found (its runs end `error` / `droid_not_found`).
    pub program: Option<PathBuf>,
    /// Where it came from, or what was tried.
    pub source: String,
}

impl EngineConfig {
    /// The program of `id`, and where it was looked for.
    pub fn program_of(&self, id: ProviderId) -> (Option<&Path>, &str) {
        if id == ProviderId::Droid {
            return (self.droid_bin.as_deref(), &self.droid_source);
        }
        self.agents
            .iter()
            .find(|a| a.provider == id)
            .map_or((None, "not looked for"), |a| {
                (a.program.as_deref(), a.source.as_str())
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> EnvMap {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn precedence_file_then_env() {
        let dir = std::env::temp_dir().join(format!("dx-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.toml");
        std::fs::write(
            &file,
            "port = 1234\ndefault_timeout = 30\nmax_autonomy = \"low\"\n",
        )
        .unwrap();
        let s = Settings::load(
            Some(&file),
            &env(&[("HOME", "/home/u"), ("DROID_TIMEOUT", "45")]),
        )
        .unwrap();
        assert_eq!(s.port, 1234);
        assert_eq!(s.default_timeout, 45);
        assert_eq!(s.max_autonomy, Autonomy::Low);
        assert_eq!(s.allowed_roots, vec![PathBuf::from("/home/u")]);
        std::fs::write(&file, "port = \"x\"\n").unwrap();
        let err = Settings::load(Some(&file), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1, column 8"), "{err}");
        std::fs::write(&file, "bogus_key = 1\n").unwrap();
        let err = Settings::load(Some(&file), &env(&[]))
            .unwrap_err()
            .to_string();
        assert!(err.contains("unknown field `bogus_key`"), "{err}");
        std::fs::remove_dir_all(&dir).unwrap();
        let missing =
            Settings::load(Some(Path::new("/nonexistent/config.toml")), &env(&[])).unwrap();
        assert_eq!(missing.port, 53002);
        let bad = Settings::load(None, &env(&[("DROID_TIMEOUT", "soon")])).unwrap_err();
        assert_eq!(
            bad.to_string(),
            "invalid value for DROID_TIMEOUT: \"soon\": invalid digit found in string"
        );
    }

    #[test]
    fn an_empty_variable_counts_as_unset_for_every_setting() {
        let file =
            std::env::temp_dir().join(format!("dx-config-empty-{}.toml", std::process::id()));
        std::fs::write(
            &file,
            "port = 1234\nmax_autonomy = \"low\"\nallowed_roots = [\"/srv/repos\"]\n",
        )
        .unwrap();
        let empty = [
            "PORT",
            "DROID_EXECUTOR_PORT",
            "DROID_EXECUTOR_MAX_AUTONOMY",
            "DROID_EXECUTOR_ALLOW_UNSAFE",
            "DROID_EXECUTOR_MAX_CONCURRENT",
            "DROID_EXECUTOR_VERIFY",
            "DROID_TIMEOUT",
            "DROID_EXECUTOR_DEFAULT_TIMEOUT",
            "DROID_EXECUTOR_TASK_TTL",
            "DROID_EXECUTOR_EXCERPT_BYTES",
            "DROID_EXECUTOR_BODY_LIMIT",
            "DROID_EXECUTOR_MAX_QUEUE",
            "DROID_EXECUTOR_MAX_PIDS",
            "DROID_EXECUTOR_MAX_MEMORY_MB",
            "DROID_EXECUTOR_HOST",
            "DROID_EXECUTOR_MODEL",
        ];
        let mut e = env(&[("HOME", "/home/u")]);
        for name in empty {
            e.insert(name.into(), String::new());
        }
        // `:` names no directory: as good as unset too
        e.insert("DROID_EXECUTOR_ALLOWED_ROOTS".into(), ":".into());
        let with_empty = Settings::load(Some(&file), &e).unwrap();
        let without = Settings::load(Some(&file), &env(&[("HOME", "/home/u")])).unwrap();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(with_empty, without);
        assert_eq!(with_empty.port, 1234);
        assert_eq!(with_empty.max_autonomy, Autonomy::Low);
        assert_eq!(with_empty.allowed_roots, vec![PathBuf::from("/srv/repos")]);
        // a bad value that is not empty is still an error naming the variable
        let err =
            Settings::load(None, &env(&[("DROID_EXECUTOR_MAX_AUTONOMY", "max")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value for DROID_EXECUTOR_MAX_AUTONOMY: \"max\": expected read_only, low, medium or high"
        );
    }

    #[test]
    fn run_limits_come_from_the_file_or_the_variables_and_reach_the_engine() {
        let defaults = Settings::load(None, &env(&[])).unwrap();
        assert_eq!((defaults.max_pids, defaults.max_memory_mb), (4096, 8192));
        assert_eq!(
            defaults.engine_config(&env(&[])).limits,
            RunLimits::default()
        );
        let file =
            std::env::temp_dir().join(format!("dx-config-limits-{}.toml", std::process::id()));
        std::fs::write(&file, "max_pids = 100\nmax_memory_mb = 0\n").unwrap();
        let from_file = Settings::load(Some(&file), &env(&[])).unwrap();
        assert_eq!((from_file.max_pids, from_file.max_memory_mb), (100, 0));
        let e = env(&[
            ("DROID_EXECUTOR_MAX_PIDS", "20"),
            ("DROID_EXECUTOR_MAX_MEMORY_MB", "256"),
        ]);
        let from_env = Settings::load(Some(&file), &e).unwrap();
        std::fs::remove_file(&file).unwrap();
        assert_eq!(
            from_env.engine_config(&e).limits,
            RunLimits {
                max_pids: 20,
                max_memory_mb: 256
            }
        );
        let bad = Settings::load(None, &env(&[("DROID_EXECUTOR_MAX_PIDS", "-1")])).unwrap_err();
        assert_eq!(
            bad.to_string(),
            "invalid value for DROID_EXECUTOR_MAX_PIDS: \"-1\": invalid digit found in string"
        );
        // a configuration sent to a background task's worker by an older front-end has none
        let mut old = serde_json::to_value(defaults.engine_config(&env(&[]))).unwrap();
        old.as_object_mut().unwrap().remove("limits");
        let old: EngineConfig = serde_json::from_value(old).unwrap();
        assert_eq!(old.limits, RunLimits::default());
    }

    #[test]
    fn the_default_config_path_ignores_empty_variables() {
        assert_eq!(default_config_path(&env(&[("HOME", "")])), None);
        assert_eq!(
            default_config_path(&env(&[("HOME", "/home/u"), ("XDG_CONFIG_HOME", "")])),
            Some(PathBuf::from("/home/u/.config/droid-executor/config.toml"))
        );
        assert_eq!(
            default_config_path(&env(&[("HOME", ""), ("XDG_CONFIG_HOME", "/xdg")])),
            Some(PathBuf::from("/xdg/droid-executor/config.toml"))
        );
        assert_eq!(default_store_dir(&env(&[("HOME", "")])), None);
    }

    #[test]
    fn child_env_is_minimal() {
        let e = env(&[
            ("PATH", "/bin"),
            ("FACTORY_API_KEY", "fk-1"),
            ("AWS_SECRET", "x"),
            ("KEEP", "1"),
        ]);
        let names: Vec<String> = child_env(&e, &["KEEP".into()])
            .into_iter()
            .map(|(k, _)| k.to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, ["FACTORY_API_KEY", "KEEP", "PATH"]);
    }

    #[test]
    fn providers_come_from_the_file_or_the_variable_and_unknown_names_are_refused() {
        let all = Settings::load(None, &env(&[])).unwrap();
        assert_eq!(all.providers, ProviderId::ALL.to_vec());
        let e = env(&[("DROID_EXECUTOR_PROVIDERS", " codex, gemini ,codex")]);
        let two = Settings::load(None, &e).unwrap();
        assert_eq!(two.providers, vec![ProviderId::Codex, ProviderId::Gemini]);
        let err =
            Settings::load(None, &env(&[("DROID_EXECUTOR_PROVIDERS", "codex,gpt")])).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid value for DROID_EXECUTOR_PROVIDERS: \"gpt\" is not a provider; expected a comma-separated list of \"droid\", \"codex\", \"claude\", \"gemini\", \"opencode\""
        );
        let dir = std::env::temp_dir().join(format!("de-providers-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("config.toml");
        std::fs::write(&file, "providers = [\"claude\"]\n").unwrap();
        let from_file = Settings::load(Some(&file), &env(&[])).unwrap();
        std::fs::write(&file, "providers = [\"claude\", \"gpt\"]\n").unwrap();
        let bad_file = Settings::load(Some(&file), &env(&[])).unwrap_err();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(from_file.providers, vec![ProviderId::Claude]);
        assert!(
            bad_file.to_string().contains("unknown variant `gpt`"),
            "{bad_file}"
        );
    }
}
