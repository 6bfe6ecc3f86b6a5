//! Interactive droid sessions: one long-lived `droid exec --input-format stream-jsonrpc
//! --output-format stream-jsonrpc` process per conversation, for front-ends that hold a
//! conversation open (the ACP agent, `droid-executor acp`).
//!
//! Why this mode and not droid's own ACP mode (`-o acp`): it is the only one that streams the
//! model's tokens as they come (`assistant_text_delta`), reports tool results live, shows
//! retries, takes several prompts in one process, and asks for permissions as requests we
//! answer (`droid.request_permission`); droid's ACP mode sends one chunk per message, tool
//! updates without output, and schema-invalid answers (docs/acp.md has the comparison).
//!
//! What the engine adds, as for a one-shot run: the working directory is checked against
//! `allowed_roots` and resolved once; droid gets its own process group, a parent-death signal,
//! the configured environment (no other provider's keys) and a marker variable that every
//! process it starts inherits; droid is born in a cgroup leaf of the session, or runs under a
//! supervisor that is a child subreaper ([`tree`]), so the session owns everything droid's tools
//! start, `setsid` daemons included; what a turn started is ended when the turn ends, before
//! the repository is measured ([`DroidSession::end_turn_processes`]); each turn is measured from
//! the repository, what it changed under `.git` that git runs later put back ([`measure`]);
//! what the client is sent is masked, across chunk boundaries too ([`mask`]); and closing a
//! session ends droid and everything it started.
//!
//! Recorded behaviour this relies on (droid 0.225.2, interactive mode): `droid.initialize_session
//! {machineId, cwd, modelId?, autonomyLevel?, mcpServers?}` and `droid.load_session {sessionId,
//! mcpServers?}` (works offline, unlike `-s`) answer with the session, its settings and
//! `availableModels`; the `mcpServers` (ACP's shape, `env` an object) are started by droid for
//! that session only, nothing written to `~/.factory/mcp.json` (measured, issue 33);
//! `droid.add_user_message {text, images?}` is acknowledged at once and the turn ends with
//! `agent_turn_completed`; `droid.interrupt_session {}` ends a running turn with reason
//! `cancelled` within ~20 ms and leaves the session usable; `droid.update_session_settings
//! {modelId?, autonomyLevel?, reasoningEffort?}` answers after `settings_updated`;
//! `droid.get_context_stats {}` answers `{used, remaining, limit, accuracy}`.

pub mod event;
pub mod history;
pub mod mask;
pub mod measure;
pub mod options;
pub mod tools;
pub mod tree;
pub mod wire;

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use droid_contract::{HostCheck, ProviderId};
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::sync::{Mutex, mpsc, oneshot};

pub use event::{PermissionRequest, PermissionTool, SessionEvent, TokenUsage};
pub use tree::TurnEnded;

use crate::host::FsFacts;
use crate::process::child::RunChild;
use crate::process::guard::{self, TreeControl};
use crate::process::sandbox::{self, Confinement, Writable};
use crate::process::scratch::{Scratch, unique_id};
use crate::process::spawn::{SpawnSpec, signal_group};
use crate::process::sweep::{self, MARKER_VAR};
use crate::providers;
use crate::run::Engine;
use crate::run::lines::{Line, Lines, MAX_LINE_BYTES};
use crate::session::tree::{Fifo, Input};

/// How long droid may take to open a session (it starts in ~0.4 s; a cold disk cache, much
/// more).
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(60);
/// How long droid may take to acknowledge a request during a session.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(30);
/// How long droid may take to say how full the context is (asked at the end of every turn,
/// which waits for it: a slow answer is no answer).
pub const STATS_TIMEOUT: Duration = Duration::from_secs(2);
/// Events buffered between droid's reader and the front-end.
const EVENTS: usize = 1024;
/// stderr kept for error messages.
const STDERR_KEEP: usize = 8 * 1024;
/// Between SIGTERM and SIGKILL when a session closes.
const CLOSE_GRACE: Duration = Duration::from_millis(500);

/// Why a session could not be opened or used.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// No droid program.
    #[error(
        "droid is not installed or not found ({0}); install it, pinned, with `{install}` \
         (droid-executor finds it under npm's global prefix) or set droid_bin / DROID_CLI_CMD",
        install = crate::providers::provider(ProviderId::Droid).install_hint()
    )]
    DroidMissing(String),
    /// The directory may not be used.
    #[error("{0}")]
    Refused(String),
    /// droid could not be started.
    #[error("droid could not be started: {0}")]
    Spawn(String),
    /// droid refused the session (its message; authentication problems say so).
    #[error("droid refused: {0}")]
    Droid(String),
    /// droid did not answer in time.
    #[error("droid did not answer {what} within {secs} s")]
    Timeout {
        /// The request.
        what: String,
        /// The limit.
        secs: u64,
    },
    /// droid's process is gone.
    #[error("droid exited{0}")]
    Exited(String),
}

impl SessionError {
    /// Whether droid's message says it is not authenticated.
    pub fn is_auth(&self) -> bool {
        match self {
            SessionError::Droid(m) | SessionError::Exited(m) => {
                let m = m.to_ascii_lowercase();
                m.contains("authentication") || m.contains("api key") || m.contains("login")
            }
            _ => false,
        }
    }
}

/// What to open.
#[derive(Debug, Clone, Default)]
pub struct SessionSpec {
    /// The working directory (checked against `allowed_roots`, resolved once).
    pub cwd: PathBuf,
    /// Resume droid's session with this id instead of starting one.
    pub load: Option<String>,
    /// The model to start with.
    pub model: Option<String>,
    /// droid's autonomy level to start with (`off`, `low`, `medium`, `high`).
    pub autonomy_level: Option<String>,
    /// MCP servers for this session only (droid starts them; nothing is written to the user's
    /// `~/.factory/mcp.json`).
    pub mcp_servers: Vec<McpServer>,
}

/// A stdio MCP server given to droid for one session (`droid.initialize_session` and
/// `droid.load_session` take `mcpServers`; droid starts each as its own child, in its process
/// group, so it lives as long as droid and is confined as droid is: a server that cannot write
/// where it wants to fails as droid's own tools would). They are given with `blockOnMcpLoad`,
/// so droid answers once they are started rather than starting them in the background.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct McpServer {
    /// Its name (droid names its tools `<name>___<tool>`).
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables added to its environment.
    pub env: Vec<(String, String)>,
}

impl McpServer {
    /// droid's shape of it: `{name, command, args, env: {NAME: value}}`.
    fn to_droid(&self) -> Value {
        let env: serde_json::Map<String, Value> = self
            .env
            .iter()
            .map(|(k, v)| (k.clone(), Value::String(v.clone())))
            .collect();
        json!({"name": self.name, "command": self.command, "args": self.args, "env": env})
    }
}

/// An image attached to a prompt (droid's `images` of `droid.add_user_message`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PromptImage {
    /// `image/png`, `image/jpeg`, `image/gif` or `image/webp`.
    pub media_type: String,
    /// The image, base64.
    pub data: String,
}

/// How full the model's context is, as droid estimates it (`droid.get_context_stats`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextStats {
    /// Tokens in the context now.
    pub used: u64,
    /// The model's context window, in tokens.
    pub limit: u64,
}

/// What droid said when the session opened.
#[derive(Debug, Clone)]
pub struct Opened {
    /// droid's session id (what [`SessionSpec::load`] takes).
    pub droid_session_id: String,
    /// The resolved working directory.
    pub root: PathBuf,
    /// The session's settings (`modelId`, `reasoningEffort`, `autonomyLevel`, …).
    pub settings: Value,
    /// `(model id, display name)` of every model droid offers.
    pub models: Vec<(String, String)>,
    /// The ids of those models that take images (droid lists the others with
    /// `noImageSupport`).
    pub image_models: Vec<String>,
    /// The conversation so far (a loaded session): droid's message records.
    pub history: Vec<Value>,
}

type Pending = Arc<std::sync::Mutex<HashMap<String, oneshot::Sender<Result<Value, String>>>>>;

/// A running droid session. Dropping it kills droid and, in a leaf or under a supervisor,
/// everything droid started; [`DroidSession::close`] ends them gracefully and waits for it.
#[derive(Debug)]
pub struct DroidSession {
    stdin: Mutex<Option<Input>>,
    /// droid's stdin by name until droid has read from it (see [`tree`]).
    fifo: std::sync::Mutex<Option<Fifo>>,
    child: Mutex<Option<RunChild>>,
    /// Our hold on droid's whole tree (`None`: droid is our plain child; the marker sweep).
    tree: Option<TreeControl>,
    /// droid's pid, or its supervisor's.
    pid: Option<u32>,
    /// Where the verification commands' cgroup leaves come from (`None`: the marker sweep).
    leaves: Option<Arc<crate::process::cgroup::Host>>,
    pending: Pending,
    next_id: AtomicU64,
    marker: String,
    root: PathBuf,
    env: Vec<(OsString, OsString)>,
    stderr: Arc<std::sync::Mutex<String>>,
    confinement: Option<Confinement>,
    sandbox: droid_contract::SandboxInfo,
    /// droid's TMPDIR, removed with the session.
    _scratch: Scratch,
}

impl Engine {
    /// Start droid in interactive mode in `spec.cwd` and open (or load) its session. Events
    /// arrive on the returned receiver until droid's output ends ([`SessionEvent::Exited`]).
    ///
    /// # Errors
    /// [`SessionError`] when droid is missing, the directory is refused, droid cannot start,
    /// refuses the session or does not answer within [`OPEN_TIMEOUT`].
    pub async fn open_session(
        &self,
        spec: &SessionSpec,
    ) -> Result<(DroidSession, Opened, mpsc::Receiver<SessionEvent>), SessionError> {
        let cfg = self.config();
        let (program, source) = cfg.program_of(ProviderId::Droid);
        let program = program
            .map(Path::to_path_buf)
            .ok_or_else(|| SessionError::DroidMissing(source.to_owned()))?;
        let root = self.resolve_dir(&spec.cwd)?;
        let marker = format!("acp-{}", unique_id());
        let scratch = Scratch::create(&cfg.scratch_root, &marker).map_err(|e| {
            SessionError::Spawn(format!("cannot make the session's directory: {e}"))
        })?;
        let env: Vec<(OsString, OsString)> = cfg
            .env
            .iter()
            .filter(|(k, _)| k != MARKER_VAR && k != "TMPDIR")
            .filter(|(k, _)| providers::env_allowed(ProviderId::Droid, &k.to_string_lossy()))
            .cloned()
            .chain([
                (MARKER_VAR.into(), marker.clone().into()),
                ("TMPDIR".into(), scratch.tmp().into()),
            ])
            .collect();
        // the same write confinement as a one-shot run of droid: the repository, droid's
        // state under HOME, the session's scratch, `sandbox_writable`
        let home = sandbox::env_path(&env, "HOME");
        let state = home
            .as_deref()
            .map(|h| providers::provider(ProviderId::Droid).state_paths(h, &env))
            .unwrap_or_default();
        let writable = Writable {
            repo_root: root.clone(),
            // the mode changes within a session, its droid stays: droid's own modes keep it
            repo_read_only: false,
            scratch: scratch.path().to_path_buf(),
            home,
            state,
            extra: cfg.sandbox_writable.clone(),
        };
        let plan = sandbox::plan(cfg.sandbox, sandbox::kernel_abi(), &writable)
            .map_err(SessionError::Refused)?;
        if let Some(w) = &plan.warning {
            tracing::warn!("{w}");
        }
        let confinement = plan.confinement;
        let sandbox_info = plan.info;
        let spawn_spec = SpawnSpec {
            program,
            args: [
                "exec",
                "--input-format",
                "stream-jsonrpc",
                "--output-format",
                "stream-jsonrpc",
                "--cwd",
            ]
            .into_iter()
            .map(OsString::from)
            .chain([root.clone().into_os_string()])
            .collect(),
            cwd: root.clone(),
            env: env.clone(),
            stdin_piped: true,
            stdin_file: None,
            detach_log: None,
            rlimits: crate::process::limits::Rlimits::for_child(
                cfg.limits,
                crate::process::limits::Controllers::default(),
            ),
        };
        let started = tree::start(
            self,
            &spawn_spec,
            confinement.as_ref(),
            &marker,
            scratch.path(),
        )
        .map_err(|e| match e {
            crate::EngineError::Spawn { ref source, .. }
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                SessionError::DroidMissing(e.to_string())
            }
            other => SessionError::Spawn(other.to_string()),
        })?;
        let mut child = started.child;
        let pid = child.id();
        let stdout = child.take_stdout();
        let stderr_pipe = child.take_stderr();
        let pending: Pending = Arc::default();
        let stderr = Arc::new(std::sync::Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel(EVENTS);
        if let Some(out) = stdout {
            tokio::spawn(read_events(BufReader::new(out), pending.clone(), tx));
        }
        if let Some(err) = stderr_pipe {
            tokio::spawn(keep_stderr(err, stderr.clone()));
        }
        let session = DroidSession {
            stdin: Mutex::new(started.input),
            fifo: std::sync::Mutex::new(started.fifo),
            child: Mutex::new(Some(child)),
            tree: started.tree,
            pid,
            leaves: self.leaf_host().cloned(),
            pending,
            next_id: AtomicU64::new(0),
            marker,
            root: root.clone(),
            env,
            stderr,
            confinement,
            sandbox: sandbox_info,
            _scratch: scratch,
        };
        let opened = match &spec.load {
            Some(id) => {
                let mut params = json!({"sessionId": id});
                if !spec.mcp_servers.is_empty() {
                    params["mcpServers"] =
                        spec.mcp_servers.iter().map(McpServer::to_droid).collect();
                    // droid answers once they are up: the first prompt finds their tools
                    params["blockOnMcpLoad"] = json!(true);
                }
                session
                    .call("droid.load_session", params, OPEN_TIMEOUT)
                    .await
            }
            None => {
                let mut params = json!({
                    "machineId": "droid-executor",
                    "cwd": root.display().to_string(),
                });
                if let Some(m) = &spec.model {
                    params["modelId"] = json!(m);
                }
                if let Some(a) = &spec.autonomy_level {
                    params["autonomyLevel"] = json!(a);
                }
                if !spec.mcp_servers.is_empty() {
                    params["mcpServers"] =
                        spec.mcp_servers.iter().map(McpServer::to_droid).collect();
                    // droid answers once they are up: the first prompt finds their tools
                    params["blockOnMcpLoad"] = json!(true);
                }
                session
                    .call("droid.initialize_session", params, OPEN_TIMEOUT)
                    .await
            }
        };
        // droid answered: it reads its stdin, which needs no name any more
        session.let_go_of_fifo();
        let result = match opened {
            Ok(r) => r,
            Err(e) => {
                session.close().await;
                return Err(e);
            }
        };
        let opened = Opened {
            droid_session_id: result
                .get("sessionId")
                .and_then(Value::as_str)
                .map(str::to_owned)
                .or_else(|| spec.load.clone())
                .unwrap_or_default(),
            root,
            settings: result.get("settings").cloned().unwrap_or(Value::Null),
            models: result
                .get("availableModels")
                .and_then(Value::as_array)
                .map(|ms| {
                    ms.iter()
                        .filter_map(|m| {
                            let id = m
                                .get("id")
                                .or_else(|| m.get("modelId"))
                                .and_then(Value::as_str)?;
                            let name = m
                                .get("displayName")
                                .or_else(|| m.get("name"))
                                .and_then(Value::as_str)
                                .unwrap_or(id);
                            Some((id.to_owned(), name.to_owned()))
                        })
                        .collect()
                })
                .unwrap_or_default(),
            image_models: result
                .get("availableModels")
                .and_then(Value::as_array)
                .map(|ms| {
                    ms.iter()
                        .filter(|m| m.get("noImageSupport").and_then(Value::as_bool) != Some(true))
                        .filter_map(|m| m.get("id").or_else(|| m.get("modelId"))?.as_str())
                        .map(str::to_owned)
                        .collect()
                })
                .unwrap_or_default(),
            history: result
                .pointer("/session/messages")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default(),
        };
        Ok((session, opened, rx))
    }

    /// `asked` resolved (symlinks followed) and checked against `allowed_roots`.
    fn resolve_dir(&self, asked: &Path) -> Result<PathBuf, SessionError> {
        if !asked.is_absolute() {
            return Err(SessionError::Refused(format!(
                "cwd {asked:?} is not an absolute path"
            )));
        }
        let path = std::fs::canonicalize(asked)
            .map_err(|e| SessionError::Refused(format!("cwd {asked:?} cannot be used: {e}")))?;
        if path.to_str().is_none() {
            return Err(SessionError::Refused(format!(
                "cwd {asked:?} is not valid UTF-8; droid cannot be given it exactly"
            )));
        }
        let check = HostCheck {
            facts: &FsFacts,
            allowed_roots: &self.config().allowed_roots,
        };
        match check.repo_root_problem(&path) {
            Some(problem) => Err(SessionError::Refused(format!("cwd: {problem}"))),
            None => Ok(path),
        }
    }
}

impl DroidSession {
    /// The session's resolved working directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The environment droid runs with (for the measurement's git and verification commands).
    pub fn env(&self) -> &[(OsString, OsString)] {
        &self.env
    }

    /// The write confinement droid and the verification commands run under (`None`: none).
    pub fn confinement(&self) -> Option<&Confinement> {
        self.confinement.as_ref()
    }

    /// How droid is confined, as a result reports it.
    pub fn sandbox(&self) -> &droid_contract::SandboxInfo {
        &self.sandbox
    }

    /// The marker variable's value every process of this session carries.
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// droid's pid, or its supervisor's.
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// Whether the session owns droid's whole tree (a cgroup leaf or a supervisor), not only
    /// what carries its marker.
    pub fn owns_tree(&self) -> bool {
        self.tree.is_some()
    }

    /// Where the verification commands' cgroup leaves come from.
    pub(crate) fn leaves(&self) -> Option<&Arc<crate::process::cgroup::Host>> {
        self.leaves.as_ref()
    }

    fn let_go_of_fifo(&self) {
        if let Ok(mut f) = self.fifo.lock() {
            f.take();
        }
    }

    /// The last of what droid wrote on stderr (at most 8 KiB).
    pub fn stderr_tail(&self) -> String {
        self.stderr.lock().map(|s| s.clone()).unwrap_or_default()
    }

    async fn write_line(&self, line: String) -> Result<(), SessionError> {
        let mut guard = self.stdin.lock().await;
        let Some(stdin) = guard.as_mut() else {
            return Err(SessionError::Exited(" (its input is closed)".into()));
        };
        let mut bytes = line.into_bytes();
        bytes.push(b'\n');
        let stdin = &mut stdin.0;
        match stdin.write_all(&bytes).await {
            Ok(()) => stdin
                .flush()
                .await
                .map_err(|e| SessionError::Exited(format!(": {e}"))),
            Err(e) => Err(SessionError::Exited(format!(": {e}"))),
        }
    }

    /// Send `method` and wait for droid's answer.
    async fn call(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, SessionError> {
        let id = format!("de-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id.clone(), tx);
        }
        self.write_line(wire::request(&id, method, &params)).await?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(Ok(v))) => Ok(v),
            Ok(Ok(Err(message))) => Err(SessionError::Droid(message)),
            Ok(Err(_)) => {
                let tail = self.stderr_tail();
                let tail = tail.trim();
                Err(SessionError::Exited(if tail.is_empty() {
                    String::new()
                } else {
                    format!(": {tail}")
                }))
            }
            Err(_) => {
                if let Ok(mut p) = self.pending.lock() {
                    p.remove(&id);
                }
                Err(SessionError::Timeout {
                    what: method.to_owned(),
                    secs: timeout.as_secs(),
                })
            }
        }
    }

    /// Start a turn with the user's `text`; its events follow, ending with
    /// [`SessionEvent::TurnCompleted`].
    ///
    /// # Errors
    /// When droid is gone or does not acknowledge the message.
    pub async fn prompt(&self, text: &str) -> Result<(), SessionError> {
        self.prompt_with_images(text, &[]).await
    }

    /// [`DroidSession::prompt`] with images attached (the model must take images: see
    /// [`Opened::image_models`]).
    ///
    /// # Errors
    /// When droid is gone or does not acknowledge the message.
    pub async fn prompt_with_images(
        &self,
        text: &str,
        images: &[PromptImage],
    ) -> Result<(), SessionError> {
        let mut params = json!({"text": text});
        if !images.is_empty() {
            params["images"] = images
                .iter()
                .map(|i| json!({"type": "base64", "data": i.data, "mediaType": i.media_type}))
                .collect();
        }
        self.call("droid.add_user_message", params, CALL_TIMEOUT)
            .await
            .map(drop)
    }

    /// How full the model's context is now, as droid estimates it.
    ///
    /// # Errors
    /// When droid is gone, refuses or does not answer, or answers without the numbers.
    pub async fn context_stats(&self) -> Result<ContextStats, SessionError> {
        let r = self
            .call("droid.get_context_stats", json!({}), STATS_TIMEOUT)
            .await?;
        let number = |k: &str| r.get(k).and_then(Value::as_u64);
        match (number("used"), number("limit")) {
            (Some(used), Some(limit)) => Ok(ContextStats { used, limit }),
            _ => Err(SessionError::Droid(format!(
                "droid.get_context_stats answered without used and limit: {r}"
            ))),
        }
    }

    /// Stop the running turn (it ends with reason `cancelled`); the session stays usable.
    ///
    /// # Errors
    /// When droid is gone or does not answer.
    pub async fn interrupt(&self) -> Result<(), SessionError> {
        self.call("droid.interrupt_session", json!({}), CALL_TIMEOUT)
            .await
            .map(drop)
    }

    /// Change the session's settings: any of `modelId`, `autonomyLevel`, `reasoningEffort`.
    ///
    /// # Errors
    /// When droid is gone, refuses or does not answer.
    pub async fn update_settings(&self, patch: Value) -> Result<(), SessionError> {
        self.call("droid.update_session_settings", patch, CALL_TIMEOUT)
            .await
            .map(drop)
    }

    /// Answer droid's permission request `request_id` with one of its option values.
    ///
    /// # Errors
    /// When droid is gone.
    pub async fn answer_permission(
        &self,
        request_id: &Value,
        option: &str,
    ) -> Result<(), SessionError> {
        self.write_line(wire::response(
            request_id,
            &json!({"selectedOption": option}),
        ))
        .await
    }

    /// End what the turn started and left running, and wait until it is gone: every process
    /// of droid's tree outside droid's own process group (droid runs each command in a session
    /// of its own, so a `sleep &`, a server or a `setsid` daemon it started is there). droid
    /// itself and what it keeps in its group (its MCP servers) stay. In a cgroup leaf or under a
    /// supervisor, the tree is the leaf or the supervisor's descendants, however they left their
    /// parents or their environment. Without either, what carries the session's marker is
    /// killed, when `commands_ran` (a turn that ran no command started nothing; the search scans
    /// every process of the machine).
    pub async fn end_turn_processes(&self, commands_ran: bool) -> TurnEnded {
        let Some(pid) = self.pid else {
            return TurnEnded::default();
        };
        // droid (or its supervisor) gone: its pid may be another process's by now
        let alive = match self.child.lock().await.as_mut() {
            Some(child) => matches!(child.try_wait(), Ok(None)),
            None => false,
        };
        match &self.tree {
            Some(tree) if alive => return tree::end_turn(tree, pid).await,
            // without droid, nothing of its leaf stays
            Some(TreeControl::Cgroup { leaf, .. }) => {
                let killed = leaf.pids().map_or(0, |p| p.len());
                let proven = leaf.end(crate::process::cgroup::END_BUDGET).await;
                return TurnEnded {
                    killed,
                    left: usize::from(!proven),
                };
            }
            // a supervisor exits once droid's tree is gone (or, killed, is swept at close)
            Some(TreeControl::Supervisor(_)) => return TurnEnded::default(),
            None => {}
        }
        if !commands_ran {
            return TurnEnded::default();
        }
        let Ok(pid) = i32::try_from(pid) else {
            return TurnEnded::default();
        };
        let marker = self.marker.clone();
        let killed = tokio::task::spawn_blocking(move || {
            let mut killed = std::collections::HashSet::new();
            // twice: a command's parent killed first can leave a child that was forking
            for _ in 0..2 {
                for p in sweep::marked_pids(&marker) {
                    if p == pid || tree::process_group(p) == Some(pid) {
                        continue;
                    }
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(p),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                    killed.insert(p);
                }
            }
            killed.len()
        })
        .await
        .unwrap_or_default();
        TurnEnded { killed, left: 0 }
    }

    /// Whether droid's process has exited.
    pub async fn exited(&self) -> bool {
        let mut child = self.child.lock().await;
        match child.as_mut() {
            Some(c) => !matches!(c.try_wait(), Ok(None)),
            None => true,
        }
    }

    /// End the session: close droid's input, SIGTERM its group, SIGKILL after a grace, and
    /// end everything it started (its leaf killed and found empty, or its supervisor's tree;
    /// without either, what still carries the session's marker). Idempotent.
    pub async fn close(&self) {
        drop(self.stdin.lock().await.take());
        self.let_go_of_fifo();
        let child = self.child.lock().await.take();
        match (child, &self.tree) {
            (Some(mut child), Some(tree)) => {
                guard::stop(&mut child, tree, CLOSE_GRACE, &self.marker).await;
            }
            (Some(mut child), None) => {
                if let Some(pid) = child.id() {
                    signal_group(pid, nix::sys::signal::Signal::SIGTERM);
                    if tokio::time::timeout(CLOSE_GRACE, child.wait())
                        .await
                        .is_err()
                    {
                        signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                        let _ = child.wait().await;
                    } else {
                        signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                    }
                } else {
                    let _ = child.wait().await;
                }
                sweep::sweep(&self.marker, Duration::from_secs(3)).await;
            }
            (None, _) => {}
        }
        if let Ok(mut p) = self.pending.lock() {
            p.clear();
        }
    }
}

async fn read_events<R: tokio::io::AsyncBufRead + Unpin>(
    reader: R,
    pending: Pending,
    tx: mpsc::Sender<SessionEvent>,
) {
    let mut lines = Lines::new(reader, MAX_LINE_BYTES);
    while let Some(line) = lines.next().await {
        let Line::Text(bytes) = line else {
            tracing::warn!("droid wrote an oversized line; skipped");
            continue;
        };
        let text = String::from_utf8_lossy(&bytes);
        let Some(msg) = wire::decode(&text) else {
            tracing::debug!("droid wrote a line that is not JSON: {text}");
            continue;
        };
        let event = match msg {
            wire::Incoming::Response { id, outcome } => {
                let waiter = pending.lock().ok().and_then(|mut p| p.remove(&id));
                if let Some(w) = waiter {
                    let _ = w.send(outcome);
                }
                continue;
            }
            wire::Incoming::Request { id, method, params } => {
                if method == "droid.request_permission" {
                    SessionEvent::Permission(event::permission(id, &params))
                } else {
                    tracing::debug!("droid asked {method}, which we do not answer");
                    continue;
                }
            }
            wire::Incoming::Notification(n) => event::from_notification(&n),
            wire::Incoming::Other(_) => continue,
        };
        if tx.send(event).await.is_err() {
            // nobody listens any more; keep draining so droid never blocks on its stdout
            continue;
        }
    }
    // droid's output ended: whoever waits for an answer gets none
    if let Ok(mut p) = pending.lock() {
        p.clear();
    }
    let _ = tx.send(SessionEvent::Exited).await;
}

async fn keep_stderr<R: tokio::io::AsyncRead + Unpin>(
    stderr: R,
    keep: Arc<std::sync::Mutex<String>>,
) {
    let mut lines = Lines::new(BufReader::new(stderr), MAX_LINE_BYTES);
    while let Some(line) = lines.next().await {
        if let Line::Text(bytes) = line {
            let text = String::from_utf8_lossy(&bytes);
            tracing::debug!("droid: {text}");
            if let Ok(mut k) = keep.lock() {
                k.push_str(&text);
                k.push('\n');
                if k.len() > STDERR_KEEP {
                    let mut cut = k.len() - STDERR_KEEP;
                    while !k.is_char_boundary(cut) {
                        cut += 1;
                    }
                    k.drain(..cut);
                }
            }
        }
    }
}
