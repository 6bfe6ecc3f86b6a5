//! The seam between the engine and the agent CLIs: how to invoke each one, what environment it
//! gets, how to read its output as normalized [`AgentEvent`]s, how to read its failures as issues,
//! and how to learn its version. One folder per CLI; nothing provider-specific lives outside
//! this module (docs/architecture.md#providers).
//!
//! The engine never trusts what a provider's CLI says about itself where it can measure:
//! `files_changed` comes from the repository and `tests` from our own re-run whatever the
//! provider. What the provider decides is only what the CLI's own words mean: which event is the
//! final one (success comes from it, never from the exit code), which tool calls were shell
//! commands and with which exit code, which were file writes, and which texts mean an
//! authentication, model or permission failure.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use droid_contract::{Autonomy, ProviderId, Usage};
use serde_json::Value;

use crate::providers::findings::Findings;

pub mod claude;
pub mod codex;
pub mod droid;
pub mod findings;
pub mod gemini;
pub mod npm;
pub mod opencode;

/// Everything a provider needs to build its command line.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    /// Absolute working directory (the repository).
    pub cwd: &'a Path,
    /// The prompt file (the prompt never goes on argv: one argument is capped at 128 KiB). A
    /// provider whose [`Provider::prompt_input`] is [`PromptInput::Stdin`] gets this file as its
    /// standard input instead.
    pub prompt_file: &'a Path,
    /// A private directory of this run the provider may write its own files into (a generated
    /// config, a last-message file); removed with the run.
    pub run_dir: &'a Path,
    /// Autonomy after the server's cap.
    pub autonomy: Autonomy,
    /// Model id.
    pub model: Option<&'a str>,
    /// Reasoning effort.
    pub reasoning_effort: Option<&'a str>,
    /// Session to continue.
    pub session_id: Option<&'a str>,
    /// The engine runs as root (Claude Code refuses `bypassPermissions` as root unless told it
    /// is sandboxed).
    pub as_root: bool,
    /// The run's own confinement (Landlock, [`crate::process::sandbox`]) holds the agent and keeps
    /// `autonomy`: a read-only repository is read-only to the kernel. A CLI with a sandbox of its
    /// own that cannot work inside ours (Codex's bubblewrap) then runs without it.
    pub confined: bool,
    /// The environment the run passes on to the CLI before [`Provider::env`] is added (the
    /// provider's own variables included): what the caller has set, for a provider whose fixed
    /// variables are only defaults.
    pub env: &'a [(OsString, OsString)],
}

impl Invocation<'_> {
    /// The caller set `name` for this run.
    pub fn has_env(&self, name: &str) -> bool {
        self.env.iter().any(|(k, _)| k == name)
    }
}

/// How the prompt reaches the CLI.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptInput {
    /// The argv names [`Invocation::prompt_file`]; stdin is `/dev/null`.
    File,
    /// [`Invocation::prompt_file`] is opened as the CLI's stdin: it reads the prompt, then EOF
    /// (never an open pipe: Codex and OpenCode wait forever on one).
    Stdin,
}

/// A request the provider cannot honour (an autonomy level it lacks, a flag it has no
/// equivalent for): the run ends `error` before anything starts, naming the field. Never a
/// silent downgrade.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The request field (`reasoning_effort`, `session_id`, `autonomy`, `model`).
    pub field: &'static str,
    /// Why, and what to do instead.
    pub message: String,
}

/// What a tool call does, as far as ground truth cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolKind {
    /// A shell command (its result carries the exit code when the CLI reports one).
    Shell {
        /// The command as the model gave it (unwrapped from `bash -lc '…'` where the CLI wraps).
        command: String,
    },
    /// A file write: create, edit, delete or patch.
    Write {
        /// Paths as the agent named them (absolute, or relative to the working directory).
        paths: Vec<String>,
        /// What kind of write.
        change: WriteChange,
    },
    /// Anything else (reads, searches, plans).
    Other,
}

/// The kind of a file write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteChange {
    /// A new file, with its line count when known.
    Create {
        /// Lines written.
        lines: Option<usize>,
    },
    /// An edit of an existing file.
    Edit,
    /// A deletion.
    Delete,
    /// A patch that may touch several files.
    Patch,
}

/// One thing the agent did or said, normalised across providers.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// The session started.
    Init {
        /// Session id.
        session_id: Option<String>,
        /// Model the agent claims to use.
        model: Option<String>,
    },
    /// A complete message.
    Message {
        /// `user` or `assistant`.
        role: String,
        /// Its text.
        text: String,
    },
    /// A tool call.
    ToolCall {
        /// Call id (pairs with its result).
        id: String,
        /// The CLI's own tool name (`Execute`, `Bash`, `write_file`, …), for logs.
        tool: String,
        /// What it does.
        kind: ToolKind,
        /// Arguments as the model gave them.
        parameters: Value,
        /// Epoch milliseconds, when the agent reports it.
        timestamp_ms: Option<u64>,
    },
    /// A tool's result.
    ToolResult {
        /// Call id.
        id: String,
        /// Tool name.
        tool: String,
        /// The tool failed (for a shell command: it could not run, or exited non-zero).
        is_error: bool,
        /// Its output (or error message), without the CLI's framing.
        text: String,
        /// A shell command's exit code, when the CLI reports one.
        exit_code: Option<i32>,
        /// Lines added and removed by a file edit, when the CLI reports them.
        diffstat: Option<(u64, u64)>,
        /// Epoch milliseconds, when the agent reports it.
        timestamp_ms: Option<u64>,
    },
    /// The agent finished its turn successfully: the only proof of success.
    Completion {
        /// Final assistant text.
        final_text: String,
        /// Model turns.
        num_turns: Option<u64>,
        /// Session id.
        session_id: Option<String>,
        /// Token usage.
        usage: Option<Usage>,
    },
    /// Token usage so far in this run, as soon as the CLI reports it (after a model call, where
    /// it does: docs/providers.md#token-usage): the running total, which replaces the previous
    /// one; normalised so `input_tokens` excludes cache reads. A token budget (`max_tokens`)
    /// is checked against it.
    Usage(Usage),
    /// The agent reported an error.
    Error {
        /// Where it came from (the CLI's own word: `agent_loop`, `cli`, `turn`, `api`, …).
        source: String,
        /// The message.
        message: String,
    },
    /// A line the provider does not understand (kept as a log line, never fatal).
    Unknown(String),
}

/// Reads one run's output, line by line. Stateful: some CLIs spread the final answer over
/// several lines (Gemini's assistant deltas) or have no final event at all (OpenCode).
pub trait EventParser: Send {
    /// Parse one output line (without its newline), appending what it means to `out`.
    fn line(&mut self, line: &[u8], out: &mut Vec<AgentEvent>);
    /// The output ended: append what only the end reveals (none by default).
    fn end(&mut self, out: &mut Vec<AgentEvent>) {
        let _ = out;
    }
}

/// Environment variable names that belong to one provider: passed to that provider's runs (when
/// the engine's environment has them) and to no other provider's.
#[derive(Debug, Clone, Copy, Default)]
pub struct EnvNames {
    /// Exact names.
    pub exact: &'static [&'static str],
    /// Name prefixes.
    pub prefixes: &'static [&'static str],
}

impl EnvNames {
    /// `name` is one of these.
    pub fn contains(&self, name: &str) -> bool {
        self.exact.contains(&name) || self.prefixes.iter().any(|p| name.starts_with(p))
    }
}

/// An agent CLI the engine can drive.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// Which one.
    fn id(&self) -> ProviderId;
    /// Short name (`droid`, `codex`, …).
    fn name(&self) -> &'static str {
        self.id().as_str()
    }
    /// The program name looked up on `PATH`.
    fn program(&self) -> &'static str {
        self.id().as_str()
    }
    /// The npm package that installs it, and the version this release is tested with (its row
    /// of the provider table, [`droid_contract::PROVIDERS`]).
    fn package(&self) -> (&'static str, &'static str) {
        let row = self.id().info();
        (row.npm_package, row.version)
    }
    /// How a user installs it.
    fn install_hint(&self) -> String {
        let (package, version) = self.package();
        format!("npm install -g {package}@{version}")
    }
    /// How the prompt reaches it.
    fn prompt_input(&self) -> PromptInput;
    /// Arguments (after the program) for one run.
    ///
    /// # Errors
    /// A request field this CLI cannot honour.
    fn args(&self, inv: &Invocation<'_>) -> Result<Vec<OsString>, Unsupported>;
    /// Variables this run needs set whatever the caller's environment (added after the
    /// pass-through ones).
    fn env(&self, inv: &Invocation<'_>) -> Vec<(OsString, OsString)> {
        let _ = inv;
        Vec::new()
    }
    /// The variables it documents for its endpoint, keys and config directories.
    fn env_names(&self) -> EnvNames;
    /// Where it keeps its own state (sessions, settings, logs, caches), which a confined run may
    /// write ([`crate::process::sandbox`]): directories and single files under `home`, or named by
    /// its variables in `env` (the run's environment). None by default (a CLI without state).
    fn state_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<PathBuf> {
        let _ = (home, env);
        Vec::new()
    }
    /// What in its state a run must leave as it was, because the CLI executes or obeys it in a
    /// later run or in the user's own use of it (issue 29 item 3): settings with hooks and MCP
    /// servers, plugins, extensions, instruction files. Files and directories (guarded whole)
    /// under `home` or its variables' directories; [`crate::run::state_guard`] records them
    /// before every run and puts them back after it. None by default.
    fn config_paths(&self, home: &Path, env: &[(OsString, OsString)]) -> Vec<ConfigPath> {
        let _ = (home, env);
        Vec::new()
    }
    /// Arguments that make the program print its version.
    fn version_args(&self) -> Vec<OsString> {
        vec!["--version".into()]
    }
    /// The version in what `version_args` printed.
    fn parse_version(&self, stdout: &str) -> Option<String> {
        let first = stdout.lines().next()?.trim();
        (!first.is_empty()).then(|| first.to_owned())
    }
    /// A parser for one run's stdout.
    fn parser(&self) -> Box<dyn EventParser>;
    /// What the run's events and stderr say went wrong. `completed`: a completion event arrived.
    fn findings(&self, events: &[AgentEvent], stderr: &str, completed: bool) -> Findings;
    /// Variables any one of which configures the CLI's endpoint or credentials (`doctor` checks
    /// that one is set, or that one of [`Provider::auth_files`] exists).
    fn auth_vars(&self) -> &'static [&'static str] {
        &[]
    }
    /// Files under `$HOME` any one of which configures the CLI's endpoint or credentials.
    fn auth_files(&self) -> &'static [&'static str] {
        &[]
    }
    /// Why a run that ended without a completion event ended, when the exit code says more than
    /// nothing (Gemini's exit codes name the failure; droid's log file is worth pointing at).
    fn exit_note(&self, exit_code: Option<i32>) -> Option<String> {
        let _ = exit_code;
        None
    }
    /// The model that answered the run: by default the one its events name, else the one it
    /// was started with. droid's events name its built-in default where airgap mode ran a
    /// custom model: its own record of the session says which.
    fn model_used(&self, run: &RunFacts<'_>) -> ModelUsed {
        ModelUsed {
            model: run.reported_model.or(run.model).map(str::to_owned),
            note: None,
        }
    }
    /// The run's token usage so far from where the CLI keeps it outside its events, read while
    /// it runs when a token budget is set (droid's record of the session, which it rewrites
    /// after every model call while its stream-json says usage only at the end). `None` by
    /// default: the events say all there is (docs/providers.md#token-usage).
    fn usage_so_far(&self, run: &RunFacts<'_>) -> Option<Usage> {
        let _ = run;
        None
    }
    /// Make the suggested actions of the run's `issues` name what this setup needs (droid: an
    /// authentication failure names the custom model ids to pass). Nothing by default.
    fn advise(&self, run: &RunFacts<'_>, issues: &mut [droid_contract::Issue]) {
        let _ = (run, issues);
    }
}

/// What a provider may read of a finished run to say more than the CLI's events do
/// ([`Provider::model_used`], [`Provider::advise`]).
#[derive(Debug, Clone, Copy)]
pub struct RunFacts<'a> {
    /// The repository: the CLI's working directory.
    pub cwd: &'a Path,
    /// The model the run was started with (`None`: the CLI's own default).
    pub model: Option<&'a str>,
    /// The model the CLI's events named.
    pub reported_model: Option<&'a str>,
    /// The CLI's session, as its events named it.
    pub session_id: Option<&'a str>,
    /// The environment the CLI ran with.
    pub env: &'a [(OsString, OsString)],
}

impl RunFacts<'_> {
    /// The value of `name` in the CLI's environment, when set and not empty.
    pub fn var(&self, name: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == name)
            .and_then(|(_, v)| v.to_str())
            .filter(|v| !v.is_empty())
    }
}

/// The model that answered a run, as far as the provider can tell.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ModelUsed {
    /// The model; `None` when it is not known.
    pub model: Option<String>,
    /// A line for the result's logs: where the model came from when the CLI's events said
    /// otherwise, or why it is unknown.
    pub note: Option<String>,
}

/// The provider for `id`.
pub fn provider(id: ProviderId) -> &'static dyn Provider {
    match id {
        ProviderId::Droid => &droid::Droid,
        ProviderId::Codex => &codex::Codex,
        ProviderId::Claude => &claude::Claude,
        ProviderId::Gemini => &gemini::Gemini,
        ProviderId::Opencode => &opencode::Opencode,
    }
}

/// Whether `name` may be passed to a run of `id`: its own variables are; a variable that
/// belongs only to other providers ([`Provider::env_names`]) never is (two CLIs may document
/// the same key, OpenCode reading `ANTHROPIC_API_KEY` as Claude Code does).
pub fn env_allowed(id: ProviderId, name: &str) -> bool {
    provider(id).env_names().contains(name)
        || ProviderId::ALL
            .into_iter()
            .filter(|other| *other != id)
            .all(|other| !provider(other).env_names().contains(name))
}

/// A file or directory of an agent CLI's configuration that a run must leave as it was
/// ([`Provider::config_paths`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigPath {
    /// The absolute path.
    pub path: PathBuf,
    /// Only these parts of a JSON file are compared (JSON pointers, `*` for any key: the CLI
    /// rewrites the rest on every run, Claude Code's `~/.claude.json`); empty: the whole file or
    /// directory.
    pub json_keys: &'static [&'static str],
    /// Names in a guarded directory that the CLI itself writes on every run and that are left as
    /// they are (Codex's `skills/.system`).
    pub keep: &'static [&'static str],
}

impl ConfigPath {
    /// The whole of `path`.
    pub fn whole(path: PathBuf) -> Self {
        Self {
            path,
            json_keys: &[],
            keep: &[],
        }
    }
}

/// Every provider's configuration a run must leave as it was, for a run's HOME and environment.
pub fn all_config_paths(home: &Path, env: &[(OsString, OsString)]) -> Vec<ConfigPath> {
    ProviderId::ALL
        .into_iter()
        .flat_map(|p| provider(p).config_paths(home, env))
        .collect()
}

/// Every provider's own variable names, for the engine's pass-through list.
pub fn all_env_names() -> Vec<EnvNames> {
    ProviderId::ALL
        .into_iter()
        .map(|p| provider(p).env_names())
        .collect()
}

/// A path under the run directory, for providers that write their own files there.
pub fn run_file(inv: &Invocation<'_>, name: &str) -> PathBuf {
    inv.run_dir.join(name)
}

/// A generic line parser for providers whose lines map one-to-one onto events.
pub(crate) fn lossy(line: &[u8]) -> String {
    String::from_utf8_lossy(line).into_owned()
}
