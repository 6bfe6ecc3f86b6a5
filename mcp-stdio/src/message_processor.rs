//! The read loop and the dispatch of each message.
//!
//! Lines are framed with the engine's bounded line reader (a BOM, a trailing `\r` and blank lines
//! are tolerated). Each request is first given its era ([`Era::of`]): legacy requests are served
//! by the revision `initialize` negotiated, modern ones (2026-07-28) statelessly by their own
//! `_meta`. Quick requests are answered inline; `tools/call` and the `tasks/*` methods run as
//! their own tasks, so pings and other calls are answered while a run goes on (and a
//! `notifications/cancelled` can stop them). A batch (a JSON array, revision 2025-03-26) is
//! answered with an array of the inline answers; its long requests answer on their own lines
//! when they finish.
//!
//! On stdin EOF, on `shutdown` (SIGTERM) or when stdout is gone (EPIPE), every running call is
//! cancelled (droid and its children are killed), given a short time to finish, and the loop
//! returns; cancelled calls send no response.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use droid_exec::lines::{Line, Lines};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::discover;
use crate::era::{Era, LEGACY_VERSIONS, Modern, TASKS_VERSION, server_info};
use crate::jsonrpc::{
    INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, PARSE_ERROR, RpcError, classify,
    error, result,
};
use crate::logging::{Level, LogSink, SessionLevel, Threshold};
use crate::progress::ProgressSink;
use crate::relay::Relay;
use crate::server::{Outbox, Server};
use crate::tasks;
use crate::tools;

/// Largest message accepted (a request is at most a few hundred KiB).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// How long cancelled calls get to stop their runs at shutdown (the budget is 2 s).
const DRAIN: Duration = Duration::from_millis(1700);

/// How often expired tasks are cleaned while the server runs.
const JANITOR_EVERY: Duration = Duration::from_secs(3600);

const INSTRUCTIONS: &str = "droid-executor hands a decided, well-specified coding task to Factory's droid CLI and returns a verified result (files changed measured from the repository, suggested commands re-run, a status and issues with suggested actions). Call execute_droid_task for short tasks; for anything that may take over a minute call droid_submit, then droid_pend with wait_seconds until the state is final. One task per call, with a clear objective and acceptance criteria.";

struct State {
    server: Arc<Server>,
    out: Outbox,
    /// Running `tools/call`s by the JSON text of their id; removed when answered or cancelled.
    calls: Mutex<HashMap<String, CancellationToken>>,
    janitor: AtomicBool,
    shutdown: CancellationToken,
    /// Cancelled when the read loop ends: task watchers stop.
    closing: CancellationToken,
    /// The revision `initialize` negotiated (legacy era).
    negotiated: Mutex<Option<&'static str>>,
    /// The level `logging/setLevel` set (legacy era).
    log_level: SessionLevel,
}

impl State {
    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the session has 2025-11-25 Tasks: that revision was negotiated and there is a
    /// task store to keep them in.
    fn tasks_enabled(&self) -> bool {
        let negotiated = *self
            .negotiated
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        negotiated == Some(TASKS_VERSION) && self.server.tasks().is_some()
    }

    /// Clean expired tasks now and hourly, once per process, after the first real use (never at
    /// start-up: clients spawn throw-away probe instances).
    fn start_janitor(&self) {
        if !self.janitor.swap(true, Ordering::SeqCst)
            && let Some(tasks) = self.server.tasks()
        {
            let tasks = tasks.clone();
            let stop = self.shutdown.clone();
            tokio::spawn(async move { tasks.janitor(JANITOR_EVERY, stop).await });
        }
    }

    /// Register a long request under its id; the `-32600` answer when the id is in use.
    fn register(&self, id: &Value) -> Result<(String, CancellationToken), Value> {
        let key = id.to_string();
        let token = CancellationToken::new();
        let mut calls = self.calls();
        if calls.contains_key(&key) {
            return Err(error(
                id,
                INVALID_REQUEST,
                format!("request id {key} is already in use by a running request"),
            ));
        }
        calls.insert(key.clone(), token.clone());
        Ok((key, token))
    }

    /// The log sink of a request: the session's level (legacy), the request's own (modern), none
    /// for a modern request that asked for no messages.
    fn log_sink(&self, modern: Option<&Modern>) -> Option<LogSink> {
        let threshold = match modern {
            None => Threshold::Session(self.log_level.clone()),
            Some(m) => Threshold::Request(m.log_level?),
        };
        Some(LogSink {
            out: self.out.clone(),
            threshold,
        })
    }
}

/// Serve MCP on `input`/`output` until EOF, `shutdown`, or a closed output.
pub async fn serve<R, W>(input: R, output: W, server: Arc<Server>, shutdown: CancellationToken)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, rx) = Outbox::new();
    let closed = CancellationToken::new();
    let writer = tokio::spawn(write_loop(output, rx, closed.clone()));
    let state = Arc::new(State {
        server,
        out,
        calls: Mutex::new(HashMap::new()),
        janitor: AtomicBool::new(false),
        shutdown: shutdown.clone(),
        closing: CancellationToken::new(),
        negotiated: Mutex::new(None),
        log_level: SessionLevel::default(),
    });
    let mut lines = Lines::new(BufReader::new(input), MAX_MESSAGE_BYTES);
    let mut running = JoinSet::new();
    loop {
        tokio::select! {
            line = lines.next() => match line {
                None => break,
                Some(Line::Oversized(n)) => {
                    state.out.send(error(
                        &Value::Null,
                        INVALID_REQUEST,
                        format!("message of {n} bytes is over the {MAX_MESSAGE_BYTES}-byte limit"),
                    )).await;
                }
                Some(Line::Text(bytes)) => handle_line(&state, &bytes, &mut running).await,
            },
            () = shutdown.cancelled() => break,
            () = closed.cancelled() => break,
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    }
    state.closing.cancel();
    let pending: Vec<CancellationToken> = state.calls().drain().map(|(_, t)| t).collect();
    for t in pending {
        t.cancel();
    }
    let _ = tokio::time::timeout(DRAIN, async {
        while running.join_next().await.is_some() {}
    })
    .await;
    running.abort_all();
    shutdown.cancel();
    drop(state);
    let _ = tokio::time::timeout(Duration::from_millis(300), writer).await;
}

async fn write_loop<W: AsyncWrite + Unpin>(
    mut w: W,
    mut rx: mpsc::Receiver<Value>,
    closed: CancellationToken,
) {
    while let Some(msg) = rx.recv().await {
        // compact serde_json escapes newlines inside strings: one message, one line
        let mut line = msg.to_string();
        line.push('\n');
        if w.write_all(line.as_bytes()).await.is_err() || w.flush().await.is_err() {
            closed.cancel();
            return;
        }
    }
}

async fn handle_line(state: &Arc<State>, raw: &[u8], running: &mut JoinSet<()>) {
    let raw = raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw);
    let text = String::from_utf8_lossy(raw);
    let text = text.trim();
    if text.is_empty() {
        return;
    }
    let msg: Value = match serde_json::from_str(text) {
        Ok(v) => v,
        Err(e) => {
            state
                .out
                .send(error(
                    &Value::Null,
                    PARSE_ERROR,
                    format!("parse error: {e}"),
                ))
                .await;
            return;
        }
    };
    match msg {
        Value::Array(items) if items.is_empty() => {
            state
                .out
                .send(error(&Value::Null, INVALID_REQUEST, "empty batch"))
                .await;
        }
        Value::Array(items) => {
            let answers: Vec<Value> = items
                .into_iter()
                .filter_map(|m| handle_message(state, m, running))
                .collect();
            if !answers.is_empty() {
                state.out.send(Value::Array(answers)).await;
            }
        }
        single => {
            if let Some(answer) = handle_message(state, single, running) {
                state.out.send(answer).await;
            }
        }
    }
}

/// Handle one message; the answer to send now, if any.
fn handle_message(state: &Arc<State>, msg: Value, running: &mut JoinSet<()>) -> Option<Value> {
    match classify(&msg) {
        Incoming::Response => None,
        Incoming::Invalid { id, why } => Some(error(&id, INVALID_REQUEST, why)),
        Incoming::Notification { method, params } => {
            if method == "notifications/cancelled"
                && let Some(req) = params.get("requestId")
                && let Some(token) = state.calls().remove(&req.to_string())
            {
                token.cancel();
            }
            None
        }
        Incoming::Request { id, method, params } => match Era::of(&method, &params) {
            Err(e) => Some(e.to_response(&id)),
            Ok(Era::Legacy) => legacy(state, id, &method, params, running),
            Ok(Era::Modern(m)) => modern(state, id, &method, params, m, running),
        },
    }
}

/// A request of the legacy era (2024-11-05 … 2025-11-25).
fn legacy(
    state: &Arc<State>,
    id: Value,
    method: &str,
    params: Value,
    running: &mut JoinSet<()>,
) -> Option<Value> {
    let tasks_method = matches!(
        method,
        "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel"
    );
    match method {
        "initialize" => Some(result(&id, initialize(state, &params))),
        "ping" => Some(result(&id, json!({}))),
        "tools/list" => Some(match check_cursor(&params) {
            Ok(()) => result(
                &id,
                json!({"tools": tools::definitions(state.tasks_enabled())}),
            ),
            Err(e) => e.to_response(&id),
        }),
        "tools/call" => start_call(state, id, &params, None, running),
        "logging/setLevel" => Some(match Level::from_value(params.get("level")) {
            Ok(level) => {
                state.log_level.set(level);
                result(&id, json!({}))
            }
            Err(why) => error(&id, INVALID_PARAMS, why),
        }),
        _ if tasks_method && state.tasks_enabled() => {
            let server = Arc::clone(&state.server);
            match method {
                "tasks/get" => spawn_request(state, id, running, async move {
                    tasks::get(&server, &params).await
                }),
                "tasks/result" => spawn_request(state, id, running, async move {
                    tasks::result(&server, &params).await
                }),
                "tasks/list" => spawn_request(state, id, running, async move {
                    tasks::list(&server, &params).await
                }),
                _ => spawn_request(state, id, running, async move {
                    tasks::cancel(&server, &params).await
                }),
            }
        }
        _ if tasks_method => Some(error(
            &id,
            METHOD_NOT_FOUND,
            format!(
                "method not found: {method} (tasks need protocol revision {TASKS_VERSION}, negotiated through initialize)"
            ),
        )),
        other => Some(error(
            &id,
            METHOD_NOT_FOUND,
            format!("method not found: {other}"),
        )),
    }
}

/// A request of the modern era (2026-07-28): `server/discover`, `tools/list`, `tools/call`.
/// `ping`, `logging/setLevel` and the core `tasks/*` are not part of that revision.
fn modern(
    state: &Arc<State>,
    id: Value,
    method: &str,
    params: Value,
    m: Modern,
    running: &mut JoinSet<()>,
) -> Option<Value> {
    match method {
        "server/discover" => Some(result(&id, discover::discover(&m, INSTRUCTIONS))),
        "tools/list" => Some(match check_cursor(&params) {
            Ok(()) => result(&id, discover::tools_list(&m)),
            Err(e) => e.to_response(&id),
        }),
        "tools/call" => {
            state.start_janitor();
            start_call(state, id, &params, Some(m), running)
        }
        other => Some(error(
            &id,
            METHOD_NOT_FOUND,
            format!(
                "method not found: {other} (not part of protocol revision {})",
                m.version
            ),
        )),
    }
}

/// `tools/list` has one page: no cursor is valid.
fn check_cursor(params: &Value) -> Result<(), RpcError> {
    match params.get("cursor") {
        None | Some(Value::Null) => Ok(()),
        Some(c) => Err(RpcError::invalid_params(format!(
            "invalid cursor {c}: the tool list has one page"
        ))),
    }
}

fn initialize(state: &Arc<State>, params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = LEGACY_VERSIONS
        .into_iter()
        .find(|v| Some(*v) == asked)
        .unwrap_or(LEGACY_VERSIONS[0]);
    *state
        .negotiated
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = Some(version);
    state.start_janitor();
    let mut capabilities = json!({"tools": {"listChanged": false}, "logging": {}});
    if state.tasks_enabled()
        && let Some(caps) = capabilities.as_object_mut()
    {
        caps.insert(
            "tasks".into(),
            json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}),
        );
    }
    json!({
        "protocolVersion": version,
        "capabilities": capabilities,
        "serverInfo": server_info(),
        "instructions": INSTRUCTIONS,
    })
}

/// Run `work` as its own task under request `id` (so `notifications/cancelled` and shutdown can
/// drop it) and answer with its outcome; a `-32600` to answer now if the id is in use.
fn spawn_request<F>(
    state: &Arc<State>,
    id: Value,
    running: &mut JoinSet<()>,
    work: F,
) -> Option<Value>
where
    F: Future<Output = Result<Value, RpcError>> + Send + 'static,
{
    let (key, token) = match state.register(&id) {
        Ok(k) => k,
        Err(answer) => return Some(answer),
    };
    let state = Arc::clone(state);
    running.spawn(async move {
        let outcome = tokio::select! {
            outcome = work => Some(outcome),
            () = token.cancelled() => None,
        };
        let ours = state.calls().remove(&key).is_some();
        if let Some(outcome) = outcome
            && ours
        {
            let answer = match outcome {
                Ok(v) => result(&id, v),
                Err(e) => e.to_response(&id),
            };
            state.out.send(answer).await;
        }
    });
    None
}

/// Check a `tools/call` and start it (a run, or with `task` a 2025-11-25 task); a protocol error
/// to answer now otherwise. `modern` is the request's checked `_meta` in the 2026 era.
fn start_call(
    state: &Arc<State>,
    id: Value,
    params: &Value,
    modern: Option<Modern>,
    running: &mut JoinSet<()>,
) -> Option<Value> {
    let Some(p) = params.as_object() else {
        return Some(error(
            &id,
            INVALID_PARAMS,
            "tools/call params must be an object",
        ));
    };
    let Some(name) = p.get("name").and_then(Value::as_str) else {
        return Some(error(
            &id,
            INVALID_PARAMS,
            "tools/call needs a string \"name\"",
        ));
    };
    if !tools::NAMES.contains(&name) {
        return Some(error(
            &id,
            INVALID_PARAMS,
            format!("unknown tool {name:?}; tools: {}", tools::NAMES.join(", ")),
        ));
    }
    let args: Map<String, Value> = match p.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Some(error(
                &id,
                INVALID_PARAMS,
                format!("tools/call \"arguments\" must be an object, got {other}"),
            ));
        }
    };
    let relay = Relay::new(
        Arc::clone(&state.server),
        ProgressSink::from_params(params, &state.out),
        state.log_sink(modern.as_ref()),
    );
    // `task` only means something where Tasks were negotiated; elsewhere the spec says to
    // process the request normally, ignoring it
    match p.get("task") {
        Some(task) if !task.is_null() && modern.is_none() && state.tasks_enabled() => {
            if !task.is_object() {
                return Some(error(
                    &id,
                    INVALID_PARAMS,
                    format!(
                        "tools/call \"task\" must be an object like {{\"ttl\": 60000}}, got {task}"
                    ),
                ));
            }
            if tools::task_support(name) != "optional" {
                return Some(error(
                    &id,
                    METHOD_NOT_FOUND,
                    format!(
                        "tool {name} cannot run as a task (execution.taskSupport is \"forbidden\"); call it without \"task\""
                    ),
                ));
            }
            return start_task(state, id, args, relay, running);
        }
        _ => {}
    }
    let (key, token) = match state.register(&id) {
        Ok(k) => k,
        Err(answer) => return Some(answer),
    };
    let state = Arc::clone(state);
    let name = name.to_owned();
    running.spawn(async move {
        let answer = tools::call(&state.server, &name, args, relay, token.clone()).await;
        let answer = match &modern {
            Some(m) => m.finish(answer),
            None => answer,
        };
        let ours = state.calls().remove(&key).is_some();
        if ours && !token.is_cancelled() {
            state.out.send(result(&id, answer)).await;
        }
    });
    None
}

/// A task-augmented `execute_droid_task`: submit it, answer the `CreateTaskResult`, then relay
/// the task's progress and status until it ends (or the server stops).
fn start_task(
    state: &Arc<State>,
    id: Value,
    args: Map<String, Value>,
    relay: Relay,
    running: &mut JoinSet<()>,
) -> Option<Value> {
    let (key, token) = match state.register(&id) {
        Ok(k) => k,
        Err(answer) => return Some(answer),
    };
    let state = Arc::clone(state);
    running.spawn(async move {
        let created = tokio::select! {
            created = tasks::create(&state.server, args, &relay) => Some(created),
            () = token.cancelled() => None,
        };
        let ours = state.calls().remove(&key).is_some();
        match created {
            Some(Ok((answer, task_id))) if ours => {
                state.out.send(result(&id, answer)).await;
                tasks::watch(
                    Arc::clone(&state.server),
                    task_id,
                    relay,
                    state.out.clone(),
                    state.closing.clone(),
                )
                .await;
            }
            Some(Err(e)) if ours => state.out.send(e.to_response(&id)).await,
            Some(_) | None => {}
        }
    });
    None
}
