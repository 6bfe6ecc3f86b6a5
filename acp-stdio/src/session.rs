//! One ACP session: its droid (an interactive session of the engine), its mode and settings,
//! the permissions remembered for it, and its turns. Opening one (`session/new`, `load`,
//! `resume`) and its settings are here; the parameters it opens with in `params`, a turn in
//! `turn`, droid's permission requests in `permission`, a slash command in `command`, a
//! loaded conversation's replay in `replay`.
//!
//! droid runs at its lowest autonomy level (`off`), so it asks before every edit and command,
//! and this agent decides: the mode is ours, not droid's (droid trusts the model's own risk
//! label; see `droid_exec::session::tools`).

mod command;
mod params;
mod permission;
mod replay;
pub(crate) mod state;
mod turn;

use std::collections::HashSet;
use std::sync::Arc;

use droid_contract::{Autonomy, ProviderId};
use droid_exec::session::history;
use droid_exec::session::measure::TurnMeter;
use droid_exec::session::options::{OptionsStore, SavedOptions};
use droid_exec::session::{DroidSession, SessionError, SessionSpec};
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::commands;
use crate::connection::Agent;
use crate::jsonrpc::{self, RpcError};
use crate::modes::{self, EFFORTS, Mode};
use crate::prompt;
use params::{NewParams, new_params, str_param};
pub use state::Session;
use state::{Live, Settings};

/// droid's autonomy level in every session: it asks, we decide.
const DROID_AUTONOMY: &str = "off";
/// Prompts that may wait for a session's running turn.
const MAX_WAITING_PROMPTS: usize = 8;

/// The error a session that cannot open gets.
fn open_error(e: &SessionError) -> RpcError {
    match e {
        SessionError::DroidMissing(_) => RpcError::new(jsonrpc::DROID_NOT_AVAILABLE, e.to_string())
            .with_data(json!({
                "install": droid_exec::providers::provider(ProviderId::Droid).install_hint(),
                "setting": "droid_bin in config.toml, or DROID_CLI_CMD",
                "check": "droid-executor doctor",
            })),
        SessionError::Refused(m) => RpcError::invalid_params(m.clone()),
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
                crate::connection::MAX_SESSIONS
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
            RpcError::invalid_params(format!(
                "unknown mode {id:?}; the modes are {}",
                modes::modes_under(self.cap)
                    .into_iter()
                    .map(Mode::id)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))
        })?;
        if mode.0 > self.cap {
            return Err(RpcError::invalid_params(format!(
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
                    return Err(RpcError::invalid_params(format!(
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
                    return Err(RpcError::invalid_params(format!(
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
                return Err(RpcError::invalid_params(format!(
                    "unknown configId {other:?}; the options are mode, model, reasoning_effort"
                )));
            }
        }
        Ok(json!({"configOptions": self.config_options()}))
    }

    /// `session/prompt`: run one turn.
    pub async fn prompt(&self, agent: &Arc<Agent>, params: &Value) -> Result<Value, RpcError> {
        let blocks = params.get("prompt").ok_or_else(|| {
            RpcError::invalid_params("prompt (an array of content blocks) is required")
        })?;
        let built = prompt::build(blocks, &self.root)?;
        if !built.images.is_empty() {
            let model = self
                .settings
                .lock()
                .map(|s| s.model.clone())
                .unwrap_or_default();
            if !self.image_models.contains(&model) {
                return Err(RpcError::invalid_params(format!(
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
}
