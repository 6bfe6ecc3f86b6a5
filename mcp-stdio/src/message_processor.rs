//! The read loop and the dispatch of each message.
//!
//! Lines are framed with the engine's bounded line reader (a BOM, a trailing `\r` and blank lines
//! are tolerated). Requests other than `tools/call` are answered inline; each `tools/call` runs as
//! its own task, so pings and other calls are answered while a run goes on. A batch (a JSON array,
//! revision 2025-03-26) is answered with an array of the inline answers; its `tools/call`s answer
//! on their own lines when they finish.
//!
//! On stdin EOF, on `shutdown` (SIGTERM) or when stdout is gone (EPIPE), every running call is
//! cancelled (droid and its children are killed), given a short time to finish, and the loop
//! returns; cancelled calls send no response.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use droid_exec::lines::{Line, Lines};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::{
    INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, PARSE_ERROR, classify, error,
    result,
};
use crate::progress::ProgressSink;
use crate::server::{Outbox, Server};
use crate::tools;

/// Revisions answered through `initialize`, newest first; an unknown one gets the first.
pub const SUPPORTED_VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];

/// Largest message accepted (a request is at most a few hundred KiB).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// How long cancelled calls get to stop their runs at shutdown (the budget is 2 s).
const DRAIN: Duration = Duration::from_millis(1700);

/// How often expired tasks are cleaned while the server runs.
const JANITOR_EVERY: Duration = Duration::from_secs(3600);

const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

const INSTRUCTIONS: &str = "droid-executor hands a decided, well-specified coding task to Factory's droid CLI and returns a verified result (files changed measured from the repository, suggested commands re-run, a status and issues with suggested actions). Call execute_droid_task for short tasks; for anything that may take over a minute call droid_submit, then droid_pend with wait_seconds until the state is final. One task per call, with a clear objective and acceptance criteria.";

struct State {
    server: Arc<Server>,
    out: Outbox,
    /// Running `tools/call`s by the JSON text of their id; removed when answered or cancelled.
    calls: Mutex<HashMap<String, CancellationToken>>,
    janitor: AtomicBool,
    shutdown: CancellationToken,
}

impl State {
    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
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
        Incoming::Request { id, method, params } => match method.as_str() {
            "initialize" => Some(result(&id, initialize(state, &params))),
            "ping" => Some(result(&id, json!({}))),
            "tools/list" => Some(match params.get("cursor") {
                None | Some(Value::Null) => result(&id, json!({"tools": tools::definitions()})),
                Some(c) => error(
                    &id,
                    INVALID_PARAMS,
                    format!("invalid cursor {c}: the tool list has one page"),
                ),
            }),
            "tools/call" => start_call(state, id, &params, running),
            "logging/setLevel" => Some(match params.get("level").and_then(Value::as_str) {
                Some(l) if LOG_LEVELS.contains(&l) => result(&id, json!({})),
                _ => error(
                    &id,
                    INVALID_PARAMS,
                    format!("level must be one of {}", LOG_LEVELS.join(", ")),
                ),
            }),
            "server/discover" => Some(error(
                &id,
                METHOD_NOT_FOUND,
                "server/discover is not supported: use initialize (protocol revisions 2024-11-05 to 2025-11-25)",
            )),
            other => Some(error(
                &id,
                METHOD_NOT_FOUND,
                format!("method not found: {other}"),
            )),
        },
    }
}

fn initialize(state: &Arc<State>, params: &Value) -> Value {
    let asked = params.get("protocolVersion").and_then(Value::as_str);
    let version = asked
        .filter(|v| SUPPORTED_VERSIONS.contains(v))
        .unwrap_or(SUPPORTED_VERSIONS[0]);
    if !state.janitor.swap(true, Ordering::SeqCst)
        && let Some(tasks) = state.server.tasks()
    {
        let tasks = tasks.clone();
        let stop = state.shutdown.clone();
        tokio::spawn(async move { tasks.janitor(JANITOR_EVERY, stop).await });
    }
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}, "logging": {}},
        "serverInfo": {"name": "droid-executor", "title": "droid-executor", "version": env!("CARGO_PKG_VERSION")},
        "instructions": INSTRUCTIONS,
    })
}

/// Check a `tools/call` and start it; a protocol error to answer now otherwise.
fn start_call(
    state: &Arc<State>,
    id: Value,
    params: &Value,
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
    let progress = p
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
        .map(|token| ProgressSink {
            token: token.clone(),
            out: state.out.clone(),
        });
    let key = id.to_string();
    let token = CancellationToken::new();
    {
        let mut calls = state.calls();
        if calls.contains_key(&key) {
            return Some(error(
                &id,
                INVALID_REQUEST,
                format!("request id {key} is already in use by a running call"),
            ));
        }
        calls.insert(key.clone(), token.clone());
    }
    let state = Arc::clone(state);
    let name = name.to_owned();
    running.spawn(async move {
        let answer = tools::call(&state.server, &name, args, progress, token.clone()).await;
        let ours = state.calls().remove(&key).is_some();
        if ours && !token.is_cancelled() {
            state.out.send(result(&id, answer)).await;
        }
    });
    None
}
