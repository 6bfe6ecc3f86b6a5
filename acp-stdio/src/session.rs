//! One ACP session: its droid (an interactive session of the engine), its mode and settings,
//! the permissions remembered for it, and its turns.
//!
//! A turn: the prompt goes to droid; droid's events become `session/update`s as they come (a
//! message chunk per token delta, tool calls with their diffs and output, the plan); droid's
//! permission requests are decided by the mode and what the user allowed "always", or asked;
//! when droid ends the turn, what the turn started and left running is ended (and found gone),
//! what it changed under `.git` that git runs later is put back, the repository is measured
//! (and the session's verification commands run), that measurement is sent as one more update,
//! and the prompt is answered. The answer and the reasoning are masked as they stream
//! ([`StreamMask`]); every message is masked again on its way out (`Agent::send`).
//!
//! droid runs at its lowest autonomy level (`off`), so it asks before every edit and command,
//! and this agent decides: the mode is ours, not droid's (droid trusts the model's own risk
//! label; see `droid_exec::session::tools`).

use std::collections::{HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use droid_contract::{Autonomy, ProviderId, ShellCommand};
use droid_exec::run::redact::Redactor;
use droid_exec::session::event::PermissionRequest;
use droid_exec::session::history;
use droid_exec::session::mask::StreamMask;
use droid_exec::session::measure::TurnMeter;
use droid_exec::session::options::{OptionsStore, SavedOptions};
use droid_exec::session::tools::{self, Risk, ToolView};
use droid_exec::session::{
    DroidSession, McpServer, SessionError, SessionEvent, SessionSpec, TokenUsage,
};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::agent::Agent;
use crate::commands::{self, Command};
use crate::failure::{self, Failure};
use crate::jsonrpc::{self, RpcError};
use crate::modes::{self, EFFORTS, Mode};
use crate::prompt;
use crate::updates;

/// droid's autonomy level in every session: it asks, we decide.
const DROID_AUTONOMY: &str = "off";
/// After an interrupt, how long droid gets to end the turn before it is restarted.
const INTERRUPT_GRACE: Duration = Duration::from_secs(10);
/// Verification commands a session may carry.
const MAX_VERIFY: usize = 16;
/// Prompts that may wait for a session's running turn.
const MAX_WAITING_PROMPTS: usize = 8;
/// droid ends its turn when a tool is rejected (its own ACP mode too); the turn goes on with
/// one more message to droid saying what was rejected, at most this many times per turn.
const MAX_CONTINUATIONS: usize = 3;
/// The start of the messages this agent adds to droid's conversation (left out of replays).
const NOTE_PREFIX: &str = "[droid-executor]";
/// What droid's result of a tool it did not run says, the user having rejected it or the turn
/// being cancelled (its own words, the same in both cases).
const DROID_CANCELLED: &str = "Tool execution cancelled by user";
/// A rejected tool's result, in our words.
const REJECTED: &str = "Rejected by the user: droid did not run it.";
/// A tool stopped by a cancelled turn, in our words.
const CANCELLED: &str = "Cancelled: the turn was stopped before this finished.";
/// MCP servers a session may be given.
const MAX_MCP_SERVERS: usize = 32;

/// droid's result of a tool, in our words where droid's are its own ("cancelled by user" for
/// a tool the user rejected).
fn result_text(content: &str, is_error: bool, rejected: bool, cancelled: bool) -> String {
    let droids = content.trim().trim_start_matches("Error: ").trim();
    if is_error && droids.starts_with(DROID_CANCELLED) {
        if rejected {
            return REJECTED.to_owned();
        }
        if cancelled {
            return CANCELLED.to_owned();
        }
    }
    content.to_owned()
}

/// The permission options offered (ACP option kinds as ids).
fn permission_options() -> Value {
    json!([
        {"optionId": "allow_once", "name": "Allow", "kind": "allow_once"},
        {"optionId": "allow_always", "name": "Always allow this kind of action in this session", "kind": "allow_always"},
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    ])
}

#[derive(Debug)]
struct Settings {
    mode: Mode,
    model: String,
    models: Vec<(String, String)>,
    effort: String,
    /// `(class, risk)` the user allowed always.
    always: HashSet<(&'static str, Risk)>,
}

#[derive(Debug)]
struct Live {
    droid: Arc<DroidSession>,
    events: mpsc::Receiver<SessionEvent>,
}

/// One open session.
#[derive(Debug)]
pub struct Session {
    id: String,
    root: PathBuf,
    cap: Autonomy,
    verify: Vec<ShellCommand>,
    /// The client's MCP servers, given to droid again when it restarts.
    mcp_servers: Vec<McpServer>,
    /// Where the session's options are kept (`None`: no task store, nothing kept).
    store: Option<OptionsStore>,
    /// What is kept (written through on every change).
    saved: std::sync::Mutex<SavedOptions>,
    /// The models that take images.
    image_models: Vec<String>,
    settings: std::sync::Mutex<Settings>,
    /// droid's handle, for requests made while a turn holds [`Session::live`].
    droid: std::sync::Mutex<Arc<DroidSession>>,
    /// Held by the running turn (one at a time; the next prompt waits).
    live: tokio::sync::Mutex<Live>,
    meter: tokio::sync::Mutex<TurnMeter>,
    turn: std::sync::Mutex<Option<CancellationToken>>,
    closed: CancellationToken,
    turns: std::sync::atomic::AtomicU64,
    /// Prompts waiting for the running turn to end.
    waiting: std::sync::atomic::AtomicUsize,
    /// This session's place among the connection's [`crate::agent::MAX_SESSIONS`].
    _slot: tokio::sync::OwnedSemaphorePermit,
}

fn str_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| RpcError::params(format!("{key} (a string) is required")))
}

/// The error a session that cannot open gets.
fn open_error(e: &SessionError) -> RpcError {
    match e {
        SessionError::DroidMissing(_) => RpcError::new(jsonrpc::DROID_NOT_AVAILABLE, e.to_string())
            .with_data(json!({
                "install": droid_exec::providers::provider(ProviderId::Droid).install_hint(),
                "setting": "droid_bin in config.toml, or DROID_CLI_CMD",
                "check": "droid-executor doctor",
            })),
        SessionError::Refused(m) => RpcError::params(m.clone()),
        SessionError::Timeout { .. } => RpcError::new(jsonrpc::TIMEOUT_ERROR, e.to_string()),
        _ if e.is_auth() => {
            RpcError::new(jsonrpc::AUTHENTICATION_FAILED, e.to_string()).with_data(json!({
                "envVar": "FACTORY_API_KEY",
                "alternative": "customModels in ~/.factory/settings.json",
            }))
        }
        SessionError::Spawn(_) | SessionError::Exited(_) => {
            RpcError::new(jsonrpc::DROID_NOT_AVAILABLE, e.to_string())
        }
        SessionError::Droid(_) => RpcError::new(jsonrpc::INTERNAL_ERROR, e.to_string()),
    }
}

struct NewParams {
    cwd: PathBuf,
    verify: Vec<ShellCommand>,
    /// The client's stdio MCP servers, given to droid for this session only.
    mcp_servers: Vec<McpServer>,
    /// The names of its `http` and `sse` servers: not passed (`mcpCapabilities` says we take
    /// neither); the answer names them in `_meta`.
    not_passed: Vec<String>,
}

/// One of `session/new`'s `mcpServers`: a stdio server (`{name, command, args, env: [{name,
/// value}]}`, no `type`), or the name of an `http`/`sse` one.
fn mcp_server(i: usize, s: &Value) -> Result<Result<McpServer, String>, RpcError> {
    let field = |k: &str| format!("mcpServers[{i}].{k}");
    let name = s
        .get("name")
        .and_then(Value::as_str)
        .filter(|n| !n.is_empty())
        .ok_or_else(|| RpcError::params(format!("{} (a string) is required", field("name"))))?;
    match s.get("type").and_then(Value::as_str) {
        None | Some("stdio") => {}
        Some(_) => return Ok(Err(name.to_owned())),
    }
    let command = s
        .get("command")
        .and_then(Value::as_str)
        .filter(|c| !c.is_empty())
        .ok_or_else(|| RpcError::params(format!("{} (a string) is required", field("command"))))?;
    let args = match s.get("args") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| x.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| RpcError::params(format!("{} must hold strings", field("args"))))?,
        Some(_) => {
            return Err(RpcError::params(format!(
                "{} must be an array",
                field("args")
            )));
        }
    };
    let env = match s.get("env") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(vars)) => vars
            .iter()
            .map(|v| {
                Some((
                    v.get("name")?.as_str()?.to_owned(),
                    v.get("value")?.as_str()?.to_owned(),
                ))
            })
            .collect::<Option<Vec<_>>>()
            .ok_or_else(|| {
                RpcError::params(format!(
                    "{} must be an array of {{name, value}} strings",
                    field("env")
                ))
            })?,
        Some(_) => {
            return Err(RpcError::params(format!(
                "{} must be an array",
                field("env")
            )));
        }
    };
    Ok(Ok(McpServer {
        name: name.to_owned(),
        command: command.to_owned(),
        args,
        env,
    }))
}

fn new_params(params: &Value) -> Result<NewParams, RpcError> {
    let cwd = PathBuf::from(str_param(params, "cwd")?);
    if !cwd.is_absolute() {
        return Err(RpcError::params(format!(
            "cwd {cwd:?} must be an absolute path"
        )));
    }
    let (mut mcp_servers, mut not_passed) = (Vec::new(), Vec::new());
    match params.get("mcpServers") {
        Some(Value::Array(servers)) => {
            if servers.len() > MAX_MCP_SERVERS {
                return Err(RpcError::params(format!(
                    "mcpServers has {} servers; at most {MAX_MCP_SERVERS}",
                    servers.len()
                )));
            }
            for (i, s) in servers.iter().enumerate() {
                match mcp_server(i, s)? {
                    Ok(server) => mcp_servers.push(server),
                    Err(name) => not_passed.push(name),
                }
            }
        }
        Some(_) => return Err(RpcError::params("mcpServers must be an array")),
        None => {
            return Err(RpcError::params(
                "mcpServers is required (an array, possibly empty)",
            ));
        }
    }
    let verify = match params.pointer("/_meta/droidExecutor/verify") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(cmds)) => {
            if cmds.len() > MAX_VERIFY {
                return Err(RpcError::params(format!(
                    "_meta.droidExecutor.verify has {} commands; at most {MAX_VERIFY}",
                    cmds.len()
                )));
            }
            cmds.iter()
                .enumerate()
                .map(|(i, c)| {
                    c.as_str()
                        .ok_or_else(|| "is not a string".to_owned())
                        .and_then(|s| ShellCommand::try_from(s.to_owned()))
                        .map_err(|why| {
                            RpcError::params(format!("_meta.droidExecutor.verify[{i}] {why}"))
                        })
                })
                .collect::<Result<_, _>>()?
        }
        Some(_) => {
            return Err(RpcError::params(
                "_meta.droidExecutor.verify must be an array of shell commands",
            ));
        }
    };
    Ok(NewParams {
        cwd,
        verify,
        mcp_servers,
        not_passed,
    })
}

async fn open(
    agent: &Arc<Agent>,
    p: NewParams,
    load: Option<String>,
) -> Result<(Arc<Session>, Vec<Value>), RpcError> {
    let cfg = agent.engine.config();
    let slot = agent.slots.clone().try_acquire_owned().map_err(|_| {
        RpcError::new(
            jsonrpc::INVALID_REQUEST,
            format!(
                "{} sessions are open on this connection, the most it runs at once (each is a droid process); close one with session/close",
                crate::agent::MAX_SESSIONS
            ),
        )
    })?;
    let spec = SessionSpec {
        cwd: p.cwd,
        load,
        model: cfg.default_model.clone(),
        autonomy_level: Some(DROID_AUTONOMY.into()),
        mcp_servers: p.mcp_servers.clone(),
    };
    let (droid, opened, events) = agent
        .engine
        .open_session(&spec)
        .await
        .map_err(|e| open_error(&e))?;
    let droid = Arc::new(droid);
    if spec.load.is_some() {
        // a loaded session keeps droid's stored autonomy: ours is always `off`
        let _ = droid
            .update_settings(json!({"autonomyLevel": DROID_AUTONOMY}))
            .await;
    }
    let meter = match TurnMeter::new(&agent.engine) {
        Ok(m) => m,
        Err(e) => {
            droid.close().await;
            return Err(RpcError::new(
                jsonrpc::INTERNAL_ERROR,
                format!("cannot make the session's scratch directory: {e}"),
            ));
        }
    };
    let text = |k: &str| {
        opened
            .settings
            .get(k)
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned()
    };
    let mut effort = Some(text("reasoningEffort"))
        .filter(|e| EFFORTS.contains(&e.as_str()))
        .unwrap_or_else(|| "none".into());
    let mut model = text("modelId");
    // what the client chose for this session before, kept across restarts (droid's stored
    // settings keep the model and the effort too; ours win where they differ)
    let store = cfg.store_dir.as_deref().map(OptionsStore::new);
    let saved = match (&store, &spec.load) {
        (Some(store), Some(_)) => store.load(&opened.droid_session_id),
        _ => SavedOptions::default(),
    };
    let mode = saved
        .mode
        .as_deref()
        .and_then(Mode::from_id)
        .map_or(Mode(Autonomy::ReadOnly), |m| m.min(Mode(cfg.max_autonomy)));
    let mut patch = serde_json::Map::new();
    if let Some(m) = saved
        .model
        .as_ref()
        .filter(|m| **m != model && opened.models.iter().any(|(id, _)| id == *m))
    {
        patch.insert("modelId".into(), json!(m));
        model.clone_from(m);
    }
    if let Some(e) = saved
        .reasoning_effort
        .as_ref()
        .filter(|e| **e != effort && EFFORTS.contains(&e.as_str()))
    {
        patch.insert("reasoningEffort".into(), json!(e));
        effort.clone_from(e);
    }
    if !patch.is_empty()
        && let Err(e) = droid.update_settings(Value::Object(patch)).await
    {
        tracing::warn!("putting back the session's model and reasoning effort: {e}");
    }
    let session = Arc::new(Session {
        id: opened.droid_session_id.clone(),
        root: opened.root.clone(),
        cap: cfg.max_autonomy,
        verify: p.verify,
        mcp_servers: p.mcp_servers,
        store,
        saved: std::sync::Mutex::new(saved),
        image_models: opened.image_models.clone(),
        settings: std::sync::Mutex::new(Settings {
            mode,
            model,
            models: opened.models.clone(),
            effort,
            always: HashSet::new(),
        }),
        droid: std::sync::Mutex::new(droid.clone()),
        live: tokio::sync::Mutex::new(Live { droid, events }),
        meter: tokio::sync::Mutex::new(meter),
        turn: std::sync::Mutex::new(None),
        closed: CancellationToken::new(),
        turns: std::sync::atomic::AtomicU64::new(0),
        waiting: std::sync::atomic::AtomicUsize::new(0),
        _slot: slot,
    });
    let previous = agent
        .sessions
        .lock()
        .await
        .insert(session.id.clone(), session.clone());
    if let Some(old) = previous {
        old.cancel();
        old.close().await;
    }
    Ok((session, opened.history))
}

/// Why the client's `http` and `sse` MCP servers are not passed to droid.
const MCP_WHY: &str =
    "only stdio MCP servers are passed to droid (mcpCapabilities: http and sse false)";

/// `session/new`.
pub async fn new(agent: &Arc<Agent>, params: &Value) -> Result<Value, RpcError> {
    let p = new_params(params)?;
    let ignored = p.not_passed.clone();
    let (s, _) = open(agent, p, None).await?;
    let mut out = s.describe(true);
    if !ignored.is_empty() {
        tracing::warn!("MCP servers from the client not passed to droid: {ignored:?}");
        out["_meta"]["droidExecutor"]["mcpServersNotPassed"] = json!(ignored);
        out["_meta"]["droidExecutor"]["why"] = json!(MCP_WHY);
    }
    Ok(out)
}

/// `session/load`: droid reopens its stored session; the conversation is replayed as updates
/// before the answer.
pub async fn load(agent: &Arc<Agent>, params: &Value) -> Result<Value, RpcError> {
    reopen(agent, params, true).await
}

/// `session/resume`: `session/load` without the replay (the client has the conversation);
/// `mcpServers` may be left out.
pub async fn resume(agent: &Arc<Agent>, params: &Value) -> Result<Value, RpcError> {
    let mut params = params.clone();
    if let Some(obj) = params.as_object_mut() {
        obj.entry("mcpServers").or_insert_with(|| json!([]));
    }
    reopen(agent, &params, false).await
}

async fn reopen(agent: &Arc<Agent>, params: &Value, replay: bool) -> Result<Value, RpcError> {
    let id = str_param(params, "sessionId")?.to_owned();
    let p = new_params(params)?;
    let cwd = std::fs::canonicalize(&p.cwd).unwrap_or_else(|_| p.cwd.clone());
    let found = agent
        .home()
        .and_then(|home| history::find(&home, &cwd, &id));
    if found.is_none() {
        return Err(RpcError::new(
            jsonrpc::SESSION_NOT_FOUND,
            format!(
                "Session not found: droid has no stored session {id} for {}",
                cwd.display()
            ),
        )
        .with_data(json!({"sessionId": id})));
    }
    let ignored = p.not_passed.clone();
    let (s, history) = open(agent, p, Some(id)).await?;
    if replay {
        s.replay(agent, &history).await;
    }
    let mut out = s.describe(false);
    if !ignored.is_empty() {
        out["_meta"]["droidExecutor"]["mcpServersNotPassed"] = json!(ignored);
        out["_meta"]["droidExecutor"]["why"] = json!(MCP_WHY);
    }
    Ok(out)
}

/// Whether a tool of `class` can leave a process behind (commands, and tools we do not know).
fn may_start_processes(class: tools::ToolClass) -> bool {
    use tools::ToolClass::{Delete, Execute, Other, Think};
    matches!(class, Execute | Delete | Other | Think)
}

/// How a turn ends for the client.
enum Outcome {
    /// Its answer.
    Answer(Value),
    /// Its error, and the cause in our words ([`failure`]) for the chat.
    Failed(RpcError, String),
}

/// How a turn ends for the client: its answer, or its error with the cause in our words.
fn outcome(
    ending: &Ending,
    interrupted: bool,
    timed_out: bool,
    budget: Duration,
    errors: &[String],
    tail: &str,
) -> Outcome {
    if timed_out {
        let secs = budget.as_secs();
        return Outcome::Failed(
            RpcError::new(
                jsonrpc::TIMEOUT_ERROR,
                format!(
                    "the turn ran longer than {secs} s (the default_timeout setting) and was stopped"
                ),
            ),
            failure::message(Failure::TimedOut { secs }),
        );
    }
    if interrupted {
        return Outcome::Answer(json!({"stopReason": "cancelled"}));
    }
    match ending {
        Ending::Droid(reason) => {
            let why = || {
                failure::message(Failure::Droid {
                    reason: reason.as_str(),
                    errors,
                })
            };
            match reason.as_str() {
                "completed" => Outcome::Answer(json!({"stopReason": "end_turn"})),
                "cancelled" => Outcome::Answer(json!({"stopReason": "cancelled"})),
                "max_turns" | "max_turns_reached" => {
                    Outcome::Answer(json!({"stopReason": "max_turn_requests"}))
                }
                "model_authentication_failed" => Outcome::Failed(
                    RpcError::new(
                        jsonrpc::AUTHENTICATION_FAILED,
                        format!("Authentication failed: {}", errors.join("; ")),
                    )
                    .with_data(json!({
                        "envVar": "FACTORY_API_KEY",
                        "alternative": "customModels in ~/.factory/settings.json, or log in with droid",
                    })),
                    why(),
                ),
                other => Outcome::Failed(
                    RpcError::new(
                        jsonrpc::FACTORY_API_ERROR,
                        format!(
                            "the turn failed ({other}){}",
                            if errors.is_empty() {
                                String::new()
                            } else {
                                format!(": {}", errors.join("; "))
                            }
                        ),
                    )
                    .with_data(json!({"reason": other, "errors": errors})),
                    why(),
                ),
            }
        }
        Ending::Exited => Outcome::Failed(
            RpcError::new(
                jsonrpc::PROCESS_ERROR,
                format!(
                    "droid exited during the turn{}; the next prompt restarts it on this session's history",
                    if tail.trim().is_empty() {
                        String::new()
                    } else {
                        format!(": {}", tail.trim())
                    }
                ),
            ),
            failure::message(Failure::Exited { tail }),
        ),
    }
}

/// What a tool call of the running turn is.
#[derive(Debug)]
struct Call {
    input: Value,
    view: ToolView,
    announced: bool,
}

/// How a turn ended.
enum Ending {
    Droid(String),
    Exited,
}

impl Session {
    /// The session id (droid's).
    pub fn id(&self) -> &str {
        &self.id
    }

    /// `modes` and `configOptions` (with `sessionId` for `session/new`).
    fn describe(&self, with_id: bool) -> Value {
        let sandbox = serde_json::to_value(self.droid().sandbox()).unwrap_or(Value::Null);
        let mut v = json!({
            "modes": self.modes_json(),
            "configOptions": self.config_options(),
            "_meta": {"droidExecutor": {"sandbox": sandbox}},
        });
        if with_id {
            v["sessionId"] = json!(self.id);
        }
        v
    }

    fn modes_json(&self) -> Value {
        let mode = self
            .settings
            .lock()
            .map_or(Mode(Autonomy::ReadOnly), |s| s.mode);
        modes::modes_json(mode, self.cap)
    }

    fn config_options(&self) -> Value {
        match self.settings.lock() {
            Ok(s) => modes::config_options(s.mode, self.cap, &s.model, &s.models, &s.effort),
            Err(_) => json!([]),
        }
    }

    fn droid(&self) -> Arc<DroidSession> {
        self.droid
            .lock()
            .map(|d| d.clone())
            .unwrap_or_else(|e| e.into_inner().clone())
    }

    /// Cancel the running turn, if any.
    pub fn cancel(&self) {
        if let Ok(t) = self.turn.lock()
            && let Some(t) = t.as_ref()
        {
            t.cancel();
        }
    }

    /// End the session: its turn is cancelled and droid (with all it started) ended.
    pub async fn close(&self) {
        self.closed.cancel();
        self.cancel();
        self.droid().close().await;
    }

    fn mode_to(&self, id: &str) -> Result<(), RpcError> {
        let mode = Mode::from_id(id).ok_or_else(|| {
            RpcError::params(format!(
                "unknown mode {id:?}; the modes are {}",
                modes::modes_under(self.cap)
                    .into_iter()
                    .map(Mode::id)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if mode.0 > self.cap {
            return Err(RpcError::params(format!(
                "mode {id:?} is above max_autonomy = {:?} (the setting that raises it)",
                self.cap.as_str()
            )));
        }
        if let Ok(mut s) = self.settings.lock() {
            s.mode = mode;
        }
        self.keep(|o| o.mode = Some(mode.id().to_owned()));
        Ok(())
    }

    /// Change what is kept of the session, and write it (a failure is logged: the session
    /// goes on, only a later start would not find the change).
    fn keep(&self, change: impl FnOnce(&mut SavedOptions)) {
        let saved = match self.saved.lock() {
            Ok(mut o) => {
                change(&mut o);
                o.clone()
            }
            Err(_) => return,
        };
        let Some(store) = &self.store else { return };
        if let Err(e) = store.save(&self.id, &saved) {
            tracing::warn!("keeping session {}'s options: {e}", self.id);
        }
    }

    /// Whether the user rejected tool call `id` (this session, kept across restarts).
    fn was_rejected(&self, id: &str) -> bool {
        self.saved
            .lock()
            .is_ok_and(|o| o.rejected.iter().any(|r| r == id))
    }

    /// The `available_commands_update` of this session.
    pub fn commands_update(&self) -> Value {
        let modes: Vec<&str> = modes::modes_under(self.cap)
            .into_iter()
            .map(Mode::id)
            .collect();
        let models: Vec<String> = self
            .settings
            .lock()
            .map(|s| s.models.iter().map(|(id, _)| id.clone()).collect())
            .unwrap_or_default();
        commands::available(&modes, &models, &EFFORTS)
    }

    /// `session/set_mode`.
    pub fn set_mode(&self, params: &Value) -> Result<(), RpcError> {
        self.mode_to(str_param(params, "modeId")?)
    }

    /// `session/set_config_option`: the complete list after the change.
    pub async fn set_config_option(&self, params: &Value) -> Result<Value, RpcError> {
        let config = str_param(params, "configId")?;
        let value = str_param(params, "value")?;
        match config {
            "mode" => self.mode_to(value)?,
            "model" => {
                let known = self
                    .settings
                    .lock()
                    .map(|s| s.models.iter().any(|(id, _)| id == value))
                    .unwrap_or(false);
                if !known {
                    return Err(RpcError::params(format!(
                        "model {value:?} is not one droid offers in this session (see the model option's values)"
                    )));
                }
                self.droid()
                    .update_settings(json!({"modelId": value}))
                    .await
                    .map_err(|e| RpcError::new(jsonrpc::PROCESS_ERROR, e.to_string()))?;
                if let Ok(mut s) = self.settings.lock() {
                    s.model = value.to_owned();
                }
                self.keep(|o| o.model = Some(value.to_owned()));
            }
            "reasoning_effort" => {
                if !EFFORTS.contains(&value) {
                    return Err(RpcError::params(format!(
                        "reasoning_effort {value:?} is not one of {}",
                        EFFORTS.join(", ")
                    )));
                }
                self.droid()
                    .update_settings(json!({"reasoningEffort": value}))
                    .await
                    .map_err(|e| RpcError::new(jsonrpc::PROCESS_ERROR, e.to_string()))?;
                if let Ok(mut s) = self.settings.lock() {
                    s.effort = value.to_owned();
                }
                self.keep(|o| o.reasoning_effort = Some(value.to_owned()));
            }
            other => {
                return Err(RpcError::params(format!(
                    "unknown configId {other:?}; the options are mode, model, reasoning_effort"
                )));
            }
        }
        Ok(json!({"configOptions": self.config_options()}))
    }

    /// Replay a loaded session's stored messages as updates: the user's and droid's text, and
    /// each tool call once, as it ended (its final status, its input and its result: a command
    /// that failed, a tool the user rejected and one a cancelled turn stopped come back
    /// `failed`, each said in our words; a tool without a recorded result `failed` too).
    async fn replay(&self, agent: &Agent, history: &[Value]) {
        // droid's results, by tool-use id (droid's answer to `droid.load_session` spells them
        // `toolUseId`/`isError`; its session file `tool_use_id`/`is_error`)
        let mut results: HashMap<&str, (String, bool)> = HashMap::new();
        for m in history {
            for c in m
                .get("content")
                .and_then(Value::as_array)
                .into_iter()
                .flatten()
            {
                if c.get("type").and_then(Value::as_str) != Some("tool_result") {
                    continue;
                }
                let Some(id) = c
                    .get("toolUseId")
                    .or_else(|| c.get("tool_use_id"))
                    .and_then(Value::as_str)
                else {
                    continue;
                };
                let output = match c.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => String::new(),
                };
                let failed = c
                    .get("isError")
                    .or_else(|| c.get("is_error"))
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                results.insert(id, (output, failed));
            }
        }
        for m in history {
            if m.get("visibility").and_then(Value::as_str) == Some("llm_only") {
                continue;
            }
            let role = m.get("role").and_then(Value::as_str).unwrap_or("");
            let Some(content) = m.get("content").and_then(Value::as_array) else {
                continue;
            };
            for c in content {
                match (role, c.get("type").and_then(Value::as_str)) {
                    ("user", Some("text")) => {
                        let t = c.get("text").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() && !t.starts_with(NOTE_PREFIX) {
                            agent.update(&self.id, updates::user_chunk(t)).await;
                        }
                    }
                    ("assistant", Some("text")) => {
                        let t = c.get("text").and_then(Value::as_str).unwrap_or("");
                        if !t.is_empty() {
                            agent.update(&self.id, updates::message_chunk(t)).await;
                        }
                    }
                    (_, Some("tool_use")) => {
                        let id = c.get("id").and_then(Value::as_str).unwrap_or("");
                        let name = c.get("name").and_then(Value::as_str).unwrap_or("");
                        let input = c.get("input").cloned().unwrap_or(Value::Null);
                        let view = tools::view(name, &input, &self.root);
                        let output = results.get(id).map(|(out, failed)| {
                            // a rejection and a cancel read alike in droid's record
                            let text = result_text(out, *failed, self.was_rejected(id), true);
                            (text, *failed)
                        });
                        agent
                            .update(
                                &self.id,
                                updates::replayed_tool_call(
                                    id,
                                    &view,
                                    &input,
                                    output.as_ref().map(|(t, f)| (t.as_str(), *f)),
                                ),
                            )
                            .await;
                    }
                    _ => {}
                }
            }
        }
    }

    /// `session/prompt`: run one turn.
    pub async fn prompt(&self, agent: &Arc<Agent>, params: &Value) -> Result<Value, RpcError> {
        let blocks = params
            .get("prompt")
            .ok_or_else(|| RpcError::params("prompt (an array of content blocks) is required"))?;
        let built = prompt::build(blocks, &self.root)?;
        if !built.images.is_empty() {
            let model = self
                .settings
                .lock()
                .map(|s| s.model.clone())
                .unwrap_or_default();
            if !self.image_models.contains(&model) {
                return Err(RpcError::params(format!(
                    "the prompt has an image, and the model {model:?} takes none (droid lists it \
                     with noImageSupport); choose a model that does, or set \"noImageSupport\": \
                     false on its customModels entry"
                )));
            }
        }
        let command = commands::parse(&built.first_text);
        use std::sync::atomic::Ordering::SeqCst;
        if self.waiting.fetch_add(1, SeqCst) >= MAX_WAITING_PROMPTS {
            self.waiting.fetch_sub(1, SeqCst);
            return Err(RpcError::new(
                jsonrpc::INVALID_REQUEST,
                format!(
                    "{MAX_WAITING_PROMPTS} prompts already wait for this session's turn; send the next one when a turn ends"
                ),
            ));
        }
        let mut live = self.live.lock().await;
        self.waiting.fetch_sub(1, SeqCst);
        if self.closed.is_cancelled() {
            return Ok(json!({"stopReason": "cancelled"}));
        }
        if let Some(command) = command {
            return self.run_command(agent, command).await;
        }
        let token = CancellationToken::new();
        if let Ok(mut t) = self.turn.lock() {
            *t = Some(token.clone());
        }
        let result = self.turn(agent, &mut live, &built, &token).await;
        if let Ok(mut t) = self.turn.lock() {
            *t = None;
        }
        result
    }

    /// A slash command ([`commands`]): the setting changed (and the client told), and a
    /// message saying what it is now; or, without a value, what it is and what it can be.
    async fn run_command(&self, agent: &Agent, command: Command) -> Result<Value, RpcError> {
        let is_model = matches!(command, Command::Model(_));
        let (text, changed) = match command {
            Command::Mode(None) => {
                let mode = self
                    .settings
                    .lock()
                    .map_or(Mode(Autonomy::ReadOnly), |s| s.mode);
                let all: Vec<String> = modes::modes_under(self.cap)
                    .into_iter()
                    .map(|m| format!("{} ({})", m.id(), m.name()))
                    .collect();
                (
                    format!(
                        "Mode: {} (`{}`): {}. The modes: {}.",
                        mode.name(),
                        mode.id(),
                        mode.description(),
                        all.join(", ")
                    ),
                    false,
                )
            }
            Command::Mode(Some(id)) => match self.mode_to(&id) {
                Ok(()) => {
                    let mode = Mode::from_id(&id).unwrap_or(Mode(Autonomy::ReadOnly));
                    (
                        format!(
                            "Mode: {} (`{}`): {}.",
                            mode.name(),
                            mode.id(),
                            mode.description()
                        ),
                        true,
                    )
                }
                Err(e) => (format!("The mode did not change: {}.", e.message), false),
            },
            Command::Model(None) | Command::Effort(None) => {
                let (model, models, effort) = self
                    .settings
                    .lock()
                    .map(|s| (s.model.clone(), s.models.clone(), s.effort.clone()))
                    .unwrap_or_default();
                let text = if is_model {
                    let all: Vec<String> = models
                        .iter()
                        .map(|(id, name)| format!("{id} ({name})"))
                        .collect();
                    format!("Model: `{model}`. The models: {}.", all.join(", "))
                } else {
                    format!(
                        "Reasoning effort: `{effort}`. The values: {}.",
                        EFFORTS.join(", ")
                    )
                };
                (text, false)
            }
            Command::Model(Some(value)) | Command::Effort(Some(value)) => {
                let (config, name) = if is_model {
                    ("model", "Model")
                } else {
                    ("reasoning_effort", "Reasoning effort")
                };
                let params = json!({"configId": config, "value": value});
                match self.set_config_option(&params).await {
                    Ok(_) => (format!("{name}: `{value}`."), true),
                    Err(e) => (
                        format!("The {config} did not change: {}.", e.message),
                        false,
                    ),
                }
            }
        };
        if changed {
            let mode = self
                .settings
                .lock()
                .map_or(Mode(Autonomy::ReadOnly), |s| s.mode);
            agent
                .update(&self.id, updates::current_mode(mode.id()))
                .await;
            agent
                .update(&self.id, updates::config_options(self.config_options()))
                .await;
        }
        agent.update(&self.id, updates::message_chunk(&text)).await;
        Ok(json!({"stopReason": "end_turn"}))
    }

    /// Restart droid on its stored session after it died (the conversation continues).
    async fn revive(&self, agent: &Agent, live: &mut Live) -> Result<(), RpcError> {
        let cfg = agent.engine.config();
        let spec = SessionSpec {
            cwd: self.root.clone(),
            load: Some(self.id.clone()),
            model: None,
            autonomy_level: None,
            mcp_servers: self.mcp_servers.clone(),
        };
        let (droid, _, events) = agent.engine.open_session(&spec).await.map_err(|e| {
            RpcError::new(
                jsonrpc::PROCESS_ERROR,
                format!("droid exited and could not be restarted: {e}"),
            )
        })?;
        let droid = Arc::new(droid);
        let (model, effort) = self
            .settings
            .lock()
            .map(|s| (s.model.clone(), s.effort.clone()))
            .unwrap_or_default();
        let mut patch = json!({"autonomyLevel": DROID_AUTONOMY, "reasoningEffort": effort});
        if !model.is_empty() {
            patch["modelId"] = json!(model);
        }
        let _ = droid.update_settings(patch).await;
        let _ = cfg;
        live.droid.close().await;
        live.droid = droid.clone();
        live.events = events;
        if let Ok(mut d) = self.droid.lock() {
            *d = droid;
        }
        Ok(())
    }

    async fn turn(
        &self,
        agent: &Arc<Agent>,
        live: &mut Live,
        built: &prompt::Prompt,
        token: &CancellationToken,
    ) -> Result<Value, RpcError> {
        if live.droid.exited().await {
            self.revive(agent, live).await?;
        }
        let n = self
            .turns
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // events left from before (settings echoes) are not this turn's
        while let Ok(ev) = live.events.try_recv() {
            if ev == SessionEvent::Exited {
                self.revive(agent, live).await?;
            }
        }
        let droid = live.droid.clone();
        // the repository is recorded while droid starts on the prompt: droid (at autonomy
        // `off`) changes nothing without asking, and no permission is answered before the
        // recording is done, so the first token is not held up by it
        let meter = &self.meter;
        let begin_droid = droid.clone();
        let mut begin = std::pin::pin!(async move { meter.lock().await.begin(&begin_droid).await });
        let mut measuring: Option<Result<(), String>> = None;
        if let Err(e) = droid.prompt_with_images(&built.text, &built.images).await {
            return Err(match e {
                SessionError::Timeout { .. } => {
                    RpcError::new(jsonrpc::TIMEOUT_ERROR, e.to_string())
                }
                other => RpcError::new(jsonrpc::PROCESS_ERROR, other.to_string()),
            });
        }
        let budget = agent.engine.config().default_timeout;
        let deadline = tokio::time::Instant::now() + budget;
        let mut calls: HashMap<String, Call> = HashMap::new();
        let mut errors: Vec<String> = Vec::new();
        let mut interrupted = false;
        let mut timed_out = false;
        let mut grace: Option<tokio::time::Instant> = None;
        let mut rejected: Vec<String> = Vec::new();
        // the tool calls the user rejected in this turn
        let mut rejected_ids: HashSet<String> = HashSet::new();
        let mut continuations = 0;
        // tokens: the session's so far (droid's last count), this turn's
        let mut session_tokens: Option<TokenUsage> = None;
        let mut turn_tokens: Option<TokenUsage> = None;
        // whether the answer streamed any text (a failure's message starts a new paragraph)
        let mut said = false;
        let mut streams = Streams::new(agent.redact());
        // whether a tool that can start processes ran
        let mut started = false;
        let ending = loop {
            let ev = tokio::select! {
                ev = live.events.recv() => ev,
                r = &mut begin, if measuring.is_none() => {
                    measuring = Some(r);
                    continue;
                }
                () = token.cancelled(), if !interrupted => {
                    interrupted = true;
                    grace = Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
                    if let Err(e) = droid.interrupt().await {
                        tracing::warn!("interrupting droid: {e}");
                    }
                    continue;
                }
                () = tokio::time::sleep_until(deadline), if !timed_out && !interrupted => {
                    timed_out = true;
                    interrupted = true;
                    grace = Some(tokio::time::Instant::now() + INTERRUPT_GRACE);
                    let _ = droid.interrupt().await;
                    continue;
                }
                () = async { match grace { Some(g) => tokio::time::sleep_until(g).await, None => std::future::pending().await } } => {
                    // droid did not end the turn: it is restarted on its stored session next time
                    droid.close().await;
                    break Ending::Exited;
                }
            };
            let Some(ev) = ev else { break Ending::Exited };
            // what the streams kept back goes out before anything else (see `Streams`)
            match &ev {
                SessionEvent::TextDelta { .. } => streams.flush_thought(agent, &self.id).await,
                SessionEvent::ThinkingDelta { .. } => {
                    streams.flush_message(agent, &self.id).await;
                }
                _ => streams.flush(agent, &self.id).await,
            }
            match ev {
                SessionEvent::TextDelta { text, .. } => {
                    said |= !text.is_empty();
                    let text = streams.message.push(&text);
                    if !text.is_empty() {
                        agent.update(&self.id, updates::message_chunk(&text)).await;
                    }
                }
                SessionEvent::ThinkingDelta { text } => {
                    let text = streams.thought.push(&text);
                    if !text.is_empty() {
                        agent.update(&self.id, updates::thought_chunk(&text)).await;
                    }
                }
                SessionEvent::ToolUse { id, name, input } => {
                    let complete = input.as_object().is_some_and(|o| !o.is_empty());
                    let view = tools::view(&name, &input, &self.root);
                    // the file is not changed yet: where the edit lands, for "follow the agent"
                    let view = if complete {
                        view.with_edit_line()
                    } else {
                        view
                    };
                    if name == "TodoWrite" && complete {
                        agent
                            .update(&self.id, updates::plan(&tools::plan(&input)))
                            .await;
                    }
                    let call = calls.entry(id.clone()).or_insert_with(|| Call {
                        input: input.clone(),
                        view: view.clone(),
                        announced: false,
                    });
                    if complete {
                        call.input = input;
                        call.view = view;
                        if call.announced {
                            agent
                                .update(
                                    &self.id,
                                    updates::tool_call_refined(&id, &call.view, &call.input),
                                )
                                .await;
                        } else {
                            call.announced = true;
                            agent
                                .update(
                                    &self.id,
                                    updates::tool_call(&id, &call.view, &call.input, "pending"),
                                )
                                .await;
                        }
                    }
                }
                SessionEvent::ToolExecuting { id } => {
                    self.announce(agent, &mut calls, &id).await;
                    started |= calls
                        .get(&id)
                        .is_none_or(|c| may_start_processes(c.view.class));
                    agent
                        .update(&self.id, updates::tool_status(&id, "in_progress"))
                        .await;
                }
                SessionEvent::ToolResult {
                    id,
                    content,
                    is_error,
                } => {
                    self.announce(agent, &mut calls, &id).await;
                    started |= calls
                        .get(&id)
                        .is_none_or(|c| may_start_processes(c.view.class));
                    let view = calls.get(&id).map(|c| &c.view);
                    let content =
                        result_text(&content, is_error, rejected_ids.contains(&id), interrupted);
                    agent
                        .update(
                            &self.id,
                            updates::tool_result(&id, view, &content, is_error),
                        )
                        .await;
                }
                SessionEvent::Permission(req) => {
                    if measuring.is_none() {
                        measuring = Some((&mut begin).await);
                    }
                    let option = if interrupted {
                        "cancel"
                    } else {
                        self.decide(agent, &mut calls, &req, token, deadline).await
                    };
                    if option == "cancel" && !token.is_cancelled() {
                        rejected.extend(
                            req.tools
                                .iter()
                                .filter_map(|t| calls.get(&t.id).map(|c| c.view.title.clone())),
                        );
                        for t in &req.tools {
                            rejected_ids.insert(t.id.clone());
                        }
                        self.keep(|o| {
                            for t in &req.tools {
                                o.reject(&t.id);
                            }
                        });
                    }
                    if let Err(e) = droid.answer_permission(&req.request_id, option).await {
                        tracing::warn!("answering droid's permission request: {e}");
                    }
                }
                SessionEvent::TurnCompleted { reason, tokens } => {
                    if let Some((input, output)) = tokens {
                        let t = turn_tokens.get_or_insert_with(TokenUsage::default);
                        t.input += input;
                        t.output += output;
                    }
                    // droid stops at a rejected tool; the user only said no to that tool
                    if reason == "completed"
                        && !rejected.is_empty()
                        && !interrupted
                        && continuations < MAX_CONTINUATIONS
                    {
                        continuations += 1;
                        let note = format!(
                            "{NOTE_PREFIX} The user rejected: {}. Do not do that; go on with the rest of the task, or say what you need instead.",
                            rejected.join("; ")
                        );
                        rejected.clear();
                        match droid.prompt(&note).await {
                            Ok(()) => continue,
                            Err(e) => tracing::warn!("continuing after a rejection: {e}"),
                        }
                    }
                    break Ending::Droid(reason);
                }
                SessionEvent::Error { message } => {
                    if !errors.contains(&message) {
                        errors.push(message);
                    }
                }
                SessionEvent::Retry { attempt, reason } => {
                    tracing::info!("droid retries the model (attempt {attempt}, {reason})");
                }
                SessionEvent::Settings(s) => {
                    if let Ok(mut st) = self.settings.lock()
                        && let Some(m) = s.get("modelId").and_then(Value::as_str)
                    {
                        st.model = m.to_owned();
                    }
                }
                SessionEvent::Usage(u) => session_tokens = Some(u),
                SessionEvent::Exited => break Ending::Exited,
                SessionEvent::Title(_) | SessionEvent::Ignored(_) => {}
            }
        };
        streams.flush(agent, &self.id).await;
        let tail = match ending {
            Ending::Exited => droid.stderr_tail(),
            Ending::Droid(_) => String::new(),
        };
        let outcome = outcome(&ending, interrupted, timed_out, budget, &errors, &tail);
        // a failed turn says why in the chat too, in our words (some clients show no error)
        if let Outcome::Failed(_, why) = &outcome {
            let text = if said {
                format!("\n\n{why}")
            } else {
                why.clone()
            };
            agent.update(&self.id, updates::message_chunk(&text)).await;
        }
        if measuring.is_none() {
            measuring = Some((&mut begin).await);
        }
        // droid gone: it and everything it started end before the repository is measured
        if matches!(ending, Ending::Exited) {
            droid.close().await;
        }
        // nothing the turn started outlives it (droid itself and its MCP servers stay), and the
        // repository is measured once it is gone
        let measure = {
            let mut meter = self.meter.lock().await;
            let mut m = meter.finish(&droid, started, &self.verify, token).await;
            if let Some(Err(e)) = measuring {
                m.warnings.push(format!(
                    "the repository could not be recorded when the turn started: {e}"
                ));
            }
            m
        };
        // only a turn that changed something (or has something to say) gets the tool call
        if updates::worth_reporting(&measure) {
            agent
                .update(
                    &self.id,
                    updates::measured(
                        &format!("measured-{n}"),
                        &self.root.display().to_string(),
                        &measure,
                    ),
                )
                .await;
        }
        if !matches!(ending, Ending::Exited) {
            match droid.context_stats().await {
                Ok(stats) => {
                    agent
                        .update(&self.id, updates::usage(stats, turn_tokens, session_tokens))
                        .await;
                }
                Err(e) => tracing::debug!("no usage_update: {e}"),
            }
        }
        match outcome {
            Outcome::Answer(answer) => Ok(answer),
            Outcome::Failed(error, _) => Err(error),
        }
    }

    /// Send the `tool_call` of `id` if it was not sent yet (droid reported its execution or
    /// result before its complete input).
    async fn announce(&self, agent: &Agent, calls: &mut HashMap<String, Call>, id: &str) {
        let call = calls.entry(id.to_owned()).or_insert_with(|| Call {
            input: Value::Null,
            view: tools::view("", &Value::Null, &self.root),
            announced: false,
        });
        if !call.announced {
            call.announced = true;
            agent
                .update(
                    &self.id,
                    updates::tool_call(id, &call.view, &call.input, "pending"),
                )
                .await;
        }
    }

    /// Decide droid's permission request: droid's option value to answer with.
    async fn decide(
        &self,
        agent: &Agent,
        calls: &mut HashMap<String, Call>,
        req: &PermissionRequest,
        token: &CancellationToken,
        deadline: tokio::time::Instant,
    ) -> &'static str {
        let (mode, always) = self
            .settings
            .lock()
            .map(|s| (s.mode, s.always.clone()))
            .unwrap_or((Mode(Autonomy::ReadOnly), HashSet::new()));
        let mut ask: Vec<(String, ToolView, Value)> = Vec::new();
        for t in &req.tools {
            let mut input = t.input.clone();
            if let (Some(obj), Some(impact)) = (input.as_object_mut(), &t.impact) {
                obj.entry("riskLevel").or_insert_with(|| json!(impact));
            }
            let view = tools::view(&t.name, &input, &self.root);
            let call = calls.entry(t.id.clone()).or_insert_with(|| Call {
                input: t.input.clone(),
                view: view.clone(),
                announced: false,
            });
            if !call.announced {
                call.announced = true;
                call.input = t.input.clone();
                call.view = view.clone();
                agent
                    .update(
                        &self.id,
                        updates::tool_call(&t.id, &view, &t.input, "pending"),
                    )
                    .await;
            }
            let auto = mode.auto_approves(view.class, view.risk)
                || always.contains(&(view.class.as_str(), view.risk));
            if !auto {
                ask.push((t.id.clone(), view, t.input.clone()));
            }
        }
        let Some((id, view, input)) = ask.first() else {
            return "proceed_once";
        };
        let params = json!({
            "sessionId": self.id,
            "toolCall": {
                "toolCallId": id,
                "title": view.title,
                "kind": view.class.as_str(),
                "status": "pending",
                "rawInput": input,
                "content": updates::tool_call(id, view, input, "pending")["content"],
                "locations": updates::tool_call(id, view, input, "pending")["locations"],
            },
            "options": permission_options(),
            "_meta": {"droidExecutor": {"risk": view.risk.as_str(), "reason": view.risk_reason}},
        });
        let answer = tokio::select! {
            a = agent.ask("session/request_permission", params) => a,
            () = token.cancelled() => return "cancel",
            // a question never answered does not hold the turn past its budget
            () = tokio::time::sleep_until(deadline) => return "cancel",
        };
        let chosen = answer
            .ok()
            .filter(|a| a.pointer("/outcome/outcome").and_then(Value::as_str) == Some("selected"))
            .and_then(|a| {
                a.pointer("/outcome/optionId")
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            });
        match chosen.as_deref() {
            Some("allow_once") => "proceed_once",
            Some("allow_always") => {
                if let Ok(mut s) = self.settings.lock() {
                    for (_, v, _) in &ask {
                        s.always.insert((v.class.as_str(), v.risk));
                    }
                }
                "proceed_once"
            }
            _ => "cancel",
        }
    }
}

/// The turn's answer and reasoning, each masked as it streams ([`StreamMask`]): what one kept
/// back goes out before any other update, so the client sees everything in order.
struct Streams {
    message: StreamMask,
    thought: StreamMask,
}

impl Streams {
    fn new(redact: Redactor) -> Self {
        Self {
            message: StreamMask::new(redact.clone()),
            thought: StreamMask::new(redact),
        }
    }

    async fn flush_message(&mut self, agent: &Agent, id: &str) {
        let text = self.message.flush();
        if !text.is_empty() {
            agent.update(id, updates::message_chunk(&text)).await;
        }
    }

    async fn flush_thought(&mut self, agent: &Agent, id: &str) {
        let text = self.thought.flush();
        if !text.is_empty() {
            agent.update(id, updates::thought_chunk(&text)).await;
        }
    }

    async fn flush(&mut self, agent: &Agent, id: &str) {
        self.flush_thought(agent, id).await;
        self.flush_message(agent, id).await;
    }
}
