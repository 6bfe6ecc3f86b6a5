//! The agent: the read loop, the single writer, the dispatch of requests, and the requests we
//! send the client (permissions).
//!
//! Every request is handled in its own task, so a running `session/prompt` never holds the
//! loop: `session/cancel`, the client's answers to our permission requests and requests for
//! other sessions are read while a turn runs. One writer task serializes every message, so
//! stdout only ever carries whole protocol lines; logs go to stderr.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use droid_exec::Engine;
use droid_exec::run::redact::Redactor;
use droid_exec::session::history;
use jsonrpc_lines::{Frame, Reader};
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::connection::{Agent, MAX_SESSIONS};
use crate::jsonrpc::{self, Incoming, RpcError};
use crate::session::{self, Session};

/// The longest line read from the client; longer ones are answered `-32600` and skipped.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Messages queued for the writer.
const OUTBOX: usize = 1024;
/// How long running turns get to answer `cancelled` when the client goes away.
const SHUTDOWN_DRAIN: Duration = Duration::from_secs(2);
/// Sessions listed per page of `session/list`.
pub const LIST_PAGE: usize = 50;
/// Requests handled at once (prompts included: at most 16 sessions × 9); beyond, `-32000`
/// busy, so a client flooding requests cannot grow the agent without bound.
pub const MAX_IN_FLIGHT: usize = 512;

impl Agent {
    async fn session(&self, params: &Value) -> Result<Arc<Session>, RpcError> {
        let id = params
            .get("sessionId")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("sessionId (a string) is required"))?;
        self.sessions.lock().await.get(id).cloned().ok_or_else(|| {
            RpcError::new(
                jsonrpc::SESSION_NOT_FOUND,
                format!("Session not found: {id} (not open in this connection; session/load reopens a stored one)"),
            )
            .with_data(json!({"sessionId": id}))
        })
    }

    async fn dispatch(self: &Arc<Self>, method: &str, params: Value) -> Result<Value, RpcError> {
        match method {
            "initialize" => self.initialize(&params),
            "authenticate" => self.authenticate(&params),
            "session/new" => session::new(self, &params).await,
            "session/load" => session::load(self, &params).await,
            "session/resume" => session::resume(self, &params).await,
            "session/list" => self.list(&params),
            "session/prompt" => {
                let s = self.session(&params).await?;
                s.prompt(self, &params).await
            }
            "session/set_mode" => {
                let s = self.session(&params).await?;
                s.set_mode(&params).map(|()| json!({}))
            }
            "session/set_config_option" => {
                let s = self.session(&params).await?;
                s.set_config_option(&params).await
            }
            "session/close" => {
                let s = self.session(&params).await?;
                self.sessions.lock().await.remove(s.id());
                s.close().await;
                Ok(json!({}))
            }
            other => Err(RpcError::new(
                jsonrpc::METHOD_NOT_FOUND,
                format!("Method not found: {other}"),
            )
            .with_data(json!({"method": other}))),
        }
    }

    fn initialize(&self, params: &Value) -> Result<Value, RpcError> {
        let asked = params
            .get("protocolVersion")
            .and_then(Value::as_u64)
            .ok_or_else(|| RpcError::invalid_params("protocolVersion (an integer) is required"))?;
        let terminal = params
            .pointer("/clientCapabilities/terminal")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        if let Ok(mut c) = self.client.lock() {
            c.terminal = terminal;
        }
        // we speak v1: a client asking for a later one gets 1 and decides
        let _ = asked;
        Ok(json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": true, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": false, "sse": false},
                "sessionCapabilities": {"list": {}, "close": {}, "resume": {}},
            },
            "authMethods": [
                {
                    "id": "factory-api-key",
                    "name": "Factory API key",
                    "description": "Set FACTORY_API_KEY in the environment droid-executor starts droid with",
                },
                {
                    "id": "custom-models",
                    "name": "Custom models (BYOK)",
                    "description": "customModels in ~/.factory/settings.json: droid talks to your own model server, no Factory account",
                },
            ],
            "agentInfo": {
                "name": "droid-executor",
                "title": "droid (droid-executor)",
                "version": env!("CARGO_PKG_VERSION"),
            },
        }))
    }

    fn authenticate(&self, params: &Value) -> Result<Value, RpcError> {
        let method = params
            .get("methodId")
            .and_then(Value::as_str)
            .ok_or_else(|| RpcError::invalid_params("methodId (a string) is required"))?;
        let env = &self.engine.config().env;
        match method {
            "factory-api-key" => {
                let set = env
                    .iter()
                    .any(|(k, v)| k == "FACTORY_API_KEY" && !v.is_empty());
                if set {
                    Ok(json!({}))
                } else {
                    Err(RpcError::new(
                        jsonrpc::AUTHENTICATION_FAILED,
                        "Authentication failed: FACTORY_API_KEY is not set in droid-executor's environment",
                    )
                    .with_data(json!({"envVar": "FACTORY_API_KEY"})))
                }
            }
            "custom-models" => {
                let file = self.home().map(|h| h.join(".factory/settings.json"));
                let has = file.as_ref().is_some_and(|f| {
                    std::fs::metadata(f).is_ok_and(|m| m.len() <= 1 << 20)
                        && std::fs::read(f)
                            .ok()
                            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                            .and_then(|v| {
                                v.get("customModels")
                                    .and_then(Value::as_array)
                                    .map(|a| !a.is_empty())
                            })
                            .unwrap_or(false)
                });
                if has {
                    Ok(json!({}))
                } else {
                    Err(RpcError::new(
                        jsonrpc::AUTHENTICATION_FAILED,
                        format!(
                            "Authentication failed: no customModels in {}",
                            file.map_or_else(
                                || "$HOME/.factory/settings.json".into(),
                                |f| f.display().to_string()
                            )
                        ),
                    ))
                }
            }
            other => Err(RpcError::invalid_params(format!(
                "unknown methodId {other:?}; the methods are factory-api-key and custom-models"
            ))),
        }
    }

    fn list(&self, params: &Value) -> Result<Value, RpcError> {
        let cwd = match params.get("cwd") {
            None | Some(Value::Null) => None,
            Some(Value::String(c)) => Some(PathBuf::from(c)),
            Some(_) => return Err(RpcError::invalid_params("cwd must be a string")),
        };
        let start = match params.get("cursor") {
            None | Some(Value::Null) => 0,
            Some(Value::String(c)) => c.parse::<usize>().map_err(|_| {
                RpcError::invalid_params(format!("cursor {c:?} is not one this agent gave"))
            })?,
            Some(_) => return Err(RpcError::invalid_params("cursor must be a string")),
        };
        let Some(home) = self.home() else {
            return Ok(json!({"sessions": []}));
        };
        let cwd = cwd.map(|c| std::fs::canonicalize(&c).unwrap_or(c));
        let all = history::list(&home, cwd.as_deref());
        let page: Vec<Value> = all
            .iter()
            .skip(start)
            .take(LIST_PAGE)
            .map(|s| {
                let mut v = json!({
                    "sessionId": s.id,
                    "cwd": s.cwd,
                    "updatedAt": droid_exec::timestamp::rfc3339(s.updated),
                });
                if let Some(t) = &s.title {
                    v["title"] = json!(t);
                }
                v
            })
            .collect();
        let mut out = json!({"sessions": page});
        if start + LIST_PAGE < all.len() {
            out["nextCursor"] = json!((start + LIST_PAGE).to_string());
        }
        Ok(out)
    }
}

/// Serve ACP on `input`/`output` until the input ends or `shutdown` fires; then every turn is
/// cancelled and every session's droid ended.
pub async fn serve<R, W>(input: R, output: W, engine: Engine, shutdown: CancellationToken)
where
    R: AsyncRead + Unpin + Send + 'static,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Value>(OUTBOX);
    let gone = CancellationToken::new();
    let writer_gone = gone.clone();
    let writer = tokio::spawn(async move {
        let mut output = output;
        while let Some(msg) = rx.recv().await {
            if jsonrpc_lines::write_message(&mut output, &msg)
                .await
                .is_err()
            {
                writer_gone.cancel();
                break;
            }
        }
    });
    let redact = Redactor::for_config(engine.config());
    let agent = Arc::new(Agent {
        redact,
        engine,
        out: tx,
        client: std::sync::Mutex::default(),
        sessions: tokio::sync::Mutex::default(),
        pending: std::sync::Mutex::default(),
        next_request: AtomicU64::new(0),
        closing: AtomicBool::new(false),
        slots: Arc::new(tokio::sync::Semaphore::new(MAX_SESSIONS)),
    });
    let mut tasks = JoinSet::new();
    let mut lines = Reader::new(input, MAX_LINE_BYTES);
    loop {
        let frame = tokio::select! {
            f = lines.next() => f,
            () = shutdown.cancelled() => None,
            () = gone.cancelled() => None,
        };
        let Some(frame) = frame else { break };
        // reap finished request tasks as we go
        while tasks.try_join_next().is_some() {}
        let refused = |e: RpcError| jsonrpc::response(&Value::Null, Err(e));
        let incoming = match frame {
            Frame::Oversized(n) => Err(refused(jsonrpc::invalid_request(format!(
                "a line of {n} bytes; at most {MAX_LINE_BYTES}"
            )))),
            Frame::Unparsable(e) => Err(refused(RpcError::new(
                jsonrpc::PARSE_ERROR,
                format!("Parse error: {e}"),
            ))),
            Frame::Message(Value::Array(_)) => Err(refused(jsonrpc::invalid_request(
                "batches are not part of ACP; send one JSON-RPC object per line",
            ))),
            Frame::Message(msg) => Ok(jsonrpc::classify(&msg)),
        };
        let incoming = match incoming {
            Ok(incoming) => incoming,
            Err(answer) => {
                agent.send(answer).await;
                continue;
            }
        };
        match incoming {
            Incoming::Invalid { id, fault } => {
                agent
                    .send(jsonrpc::response(&id, Err(jsonrpc::invalid_request(fault))))
                    .await;
            }
            Incoming::Response { id, outcome } => agent.answered(&id, outcome),
            Incoming::Notification { method, params } => match method.as_str() {
                "session/cancel" => {
                    if let Ok(s) = agent.session(&params).await {
                        s.cancel();
                    }
                }
                other => tracing::debug!("notification {other} ignored"),
            },
            Incoming::Request { id, method, params } => {
                if tasks.len() >= MAX_IN_FLIGHT {
                    let busy = RpcError::new(
                        jsonrpc::SERVER_BUSY,
                        format!(
                            "busy: {MAX_IN_FLIGHT} requests are being handled; send this one again when some are answered"
                        ),
                    );
                    agent.send(jsonrpc::response(&id, Err(busy))).await;
                    continue;
                }
                let agent = agent.clone();
                let params_session = params.get("sessionId").cloned();
                tasks.spawn(async move {
                    let result = agent.dispatch(&method, params).await;
                    // a session just opened: its commands, once the client knows its id
                    let opened = matches!(
                        method.as_str(),
                        "session/new" | "session/load" | "session/resume"
                    )
                    .then(|| {
                        result.as_ref().ok().and_then(|r| {
                            r.get("sessionId")
                                .cloned()
                                .or_else(|| params_session.clone())
                        })
                    })
                    .flatten();
                    agent.send(jsonrpc::response(&id, result)).await;
                    if let Some(sid) = opened.as_ref().and_then(Value::as_str)
                        && let Some(s) = agent.sessions.lock().await.get(sid).cloned()
                    {
                        agent.update(sid, s.commands_update()).await;
                    }
                });
            }
        }
    }
    // the client is gone (or we are stopped): cancel every turn, let them answer, end droid
    agent.closing.store(true, Ordering::Relaxed);
    if let Ok(mut p) = agent.pending.lock() {
        p.clear();
    }
    for s in agent.sessions.lock().await.values() {
        s.cancel();
    }
    let _ = tokio::time::timeout(SHUTDOWN_DRAIN, async {
        while tasks.join_next().await.is_some() {}
    })
    .await;
    tasks.abort_all();
    while tasks.join_next().await.is_some() {}
    // sessions opened while we waited are in the map too
    let sessions: Vec<Arc<Session>> = agent
        .sessions
        .lock()
        .await
        .drain()
        .map(|(_, s)| s)
        .collect();
    for s in &sessions {
        s.close().await;
    }
    drop(agent);
    let _ = tokio::time::timeout(Duration::from_secs(1), writer).await;
}
