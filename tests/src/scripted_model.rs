//! A scripted OpenAI-compatible chat-completions server on 127.0.0.1 that the **real** droid talks
//! to as a BYOK custom model (`provider: "generic-chat-completion-api"`, see [`crate::droid_home`]).
//!
//! It is a port of the chat-completions half of the mock server the recordings in
//! `tests/fixtures/droid/` were made with (`mock.py`), so a script that produced a recorded
//! fixture produces the same droid behaviour here.
//!
//! It also answers the agent CLIs whose MCP clients `setup mcp` configures, in the shapes the
//! mock server of the agent-CLI recordings sent: OpenAI's Responses API (`POST …/responses`,
//! Codex) and Anthropic's Messages API (`POST …/messages`, Claude Code; `HEAD` answers 200). A
//! turn for those gives the model's output verbatim, so a test can send what the real model
//! would (Codex's `tool_search_call`, a namespaced `function_call`, Claude's `tool_use`):
//!
//! | key | effect |
//! |---|---|
//! | `output` | Responses: the response's output items (streamed as `response.output_item.done` each, then `response.completed`) |
//! | `content` | Messages: the message's content blocks (streamed block by block; `stop_reason` is `tool_use` when one is a `tool_use`) |
//! | `hang`, `status`, `error_message`, `error_type`, `fail_times` | as in the chat-completions script below |
//!
//! The turn of a Responses request is the number of model outputs in its `input` since the last
//! user message (consecutive output items count once); of a Messages request, the number of
//! `assistant` messages. `sleep`, `hang`, `status`, `error_message` and `fail_times` work there too; a
//! Messages error body is Anthropic's (`{"type":"error","error":{"type","message"}}`).
//!
//! And Google's Gemini API (`POST …/models/M:streamGenerateContent?alt=sse` and
//! `…:generateContent`, Gemini CLI with `GOOGLE_GEMINI_BASE_URL`), in the shape of the agent-CLI
//! recordings' mock: one SSE chunk (or one JSON body) `{"candidates": [{"content": {"role":
//! "model", "parts": PARTS}, "finishReason": "STOP"}], "usageMetadata": …}`. Its turn is the
//! number of `role: "model"` contents after the last user content that is not a
//! `functionResponse` (so a resumed session, a new prompt, starts again at turn 0). Keys:
//!
//! | key | effect |
//! |---|---|
//! | `parts` | the candidate's parts verbatim (`{"text"}`, `{"functionCall": {"name", "args"}}`, `{"text", "thought": true}`) |
//! | `status` | answer with this HTTP status and Google's error body `{"error": {"code", "message", "status"}}` (`error_message` sets the message; `status` is Google's name for the code, `RESOURCE_EXHAUSTED` for 429) |
//! | `hang` | never answer (not even headers) |
//!
//! A request that asks for JSON (`generationConfig.responseJsonSchema`: the model router of model
//! `auto`, the next-speaker check) gets a fixed JSON text instead of the script; `:countTokens`
//! answers `{"totalTokens": 100}`.
//!
//! # Script
//! A JSON array of turns. The turn for a request is the number of `role: "assistant"` messages in
//! its `messages` (each tool round-trip adds one), capped at the last turn:
//! `script[min(turn, len - 1)]`. Keys of a turn (all optional):
//!
//! | key | effect |
//! |---|---|
//! | `text` | the assistant text (`""` when absent) |
//! | `tool` | `[{"name": N, "args": {...}}]` tool calls, ids `call_<turn>_<i>` (`raw_args`: a string sent as is) |
//! | `sleep` | seconds to wait before the response headers |
//! | `chunk_sleep` | seconds to wait after each SSE chunk |
//! | `status` | answer with this HTTP status and `{"error":{"message","type":"mock_error","code"}}` |
//! | `fail_times` | only the first n attempts of this turn get `status`, later ones succeed |
//! | `headers` | extra headers on the `status` answer (e.g. `retry-after`) |
//! | `error_message` | the error message (default `mock error <status>`) |
//! | `error_type` | the error body's `type` and `code` instead of `mock_error` and the status (OpenAI's `insufficient_quota`; on the Messages wire its `type`, by default Anthropic's name for the status) |
//! | `malformed` | send `data: {this is not json`, a garbage line, `data: [DONE]` |
//! | `close_mid` | send one chunk `"partial answer "` and drop the socket (no finish, no `[DONE]`) |
//! | `hang` | never answer (not even headers) |
//! | `hang_after_headers` | send `200` and the SSE headers, then nothing |
//! | `split_text` | stream the text one word per chunk |
//! | `reasoning` | reasoning text streamed before the text and tool calls as `delta.reasoning_content` chunks (one word per chunk with `split_text`); in a non-streamed answer, `message.reasoning_content` |
//! | `reasoning_field` | the delta field the reasoning goes in instead (e.g. `reasoning`) |
//! | `usage` | the answer's token counts `{"input", "output", "cache_read", "cache_write"}` (see below) |
//!
//! # Usage
//! Every answer reports token usage, by default 10 prompt and 5 completion tokens. A turn's
//! `usage` key (on every wire) sets it from one neutral shape: `input` is the prompt tokens NOT
//! read from the cache, `cache_read` those read from it, `cache_write` those written to it, and
//! `output` the completion tokens (absent keys are 0, `output` 5). Each wire reports it its
//! own way, as the real API does: chat completions `prompt_tokens = input + cache_read` with
//! `prompt_tokens_details.cached_tokens`; Responses `input_tokens = input + cache_read` with
//! `input_tokens_details.cached_tokens`; Messages `input_tokens = input` beside
//! `cache_read_input_tokens` and `cache_creation_input_tokens` (`message_start` says
//! `output_tokens: 1`, `message_delta` the real count); Gemini `promptTokenCount = input +
//! cache_read` with `cachedContentTokenCount`.
//!
//! A streamed answer is `data: <chunk json>\n\n` lines ending with `data: [DONE]\n\n` and a closed
//! connection (`connection: close`); the last chunk carries `finish_reason` (`stop` or
//! `tool_calls`) and `usage: {prompt_tokens: 10, completion_tokens: 5, total_tokens: 15}`. The
//! JSON is compact (`mock.py` puts spaces after `:` and `,`; droid does not care). Attempts are
//! counted per turn; [`ScriptedModel::set_script`] resets the counts. `GET` on any path answers a
//! model list; `POST …/__reset` resets the attempt counts.
//!
//! # Side calls
//! [`ScriptedModel::set_aux_text`] turns on one more rule: a chat-completions request that offers
//! **no tools** (`tools` absent or empty) is a side call, such as OpenCode's title generation,
//! which it sends beside every new session's first turn. It is answered with that plain text
//! (streamed or not, as asked), recorded with `"aux": true`, and consumes nothing: it is no turn
//! of the script and counts as no attempt. Off by default (droid's requests always offer tools,
//! and the self-tests post bare requests).
//!
//! # Records
//! Every request is recorded as
//! `{"method","path","turn","attempt","headers","auth_present","body"}` (chat completions; headers
//! lowercased, without `authorization`) or `{"method","path"}` (GET, reset, other). See
//! [`ScriptedModel::requests`].

use std::collections::HashMap;
use std::io::{self, Write as _};
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{oneshot, watch};
use tokio::task::JoinSet;

use crate::http1::{self, Request};

/// Pause after a failed `accept` (e.g. out of file descriptors) before trying again.
const ACCEPT_BACKOFF: Duration = Duration::from_millis(50);

/// Where and how to serve; [`ScriptedModel::start`] uses the defaults.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Port on 127.0.0.1; 0 picks a free one.
    pub port: u16,
    /// Re-read the script from this file whenever its modification time changes (as `mock.py`
    /// does), resetting the attempt counts. A file that does not parse keeps the previous script.
    pub script_file: Option<PathBuf>,
    /// Append every record, with a `t` field (Unix seconds), as one JSON line to this file.
    pub log_file: Option<PathBuf>,
}

/// A running server; dropping it stops it and closes every connection, hanging ones included.
#[derive(Debug)]
pub struct ScriptedModel {
    port: u16,
    shared: Arc<Shared>,
    request_count: watch::Receiver<usize>,
    /// Dropping the sender tells the server thread to stop.
    stop: Option<oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl ScriptedModel {
    /// Starts a server on an ephemeral port of 127.0.0.1 that answers from `script`.
    ///
    /// # Errors
    /// When the port cannot be bound or the server thread cannot start.
    pub async fn start(script: Value) -> io::Result<ScriptedModel> {
        Self::start_with(script, Options::default()).await
    }

    /// Starts a server with explicit [`Options`].
    ///
    /// # Errors
    /// When the port cannot be bound or the server thread cannot start.
    pub async fn start_with(script: Value, options: Options) -> io::Result<ScriptedModel> {
        let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, options.port))?;
        listener.set_nonblocking(true)?;
        let port = listener.local_addr()?.port();
        let script_mtime = options.script_file.as_ref().and_then(|f| mtime(f));
        let (count_tx, request_count) = watch::channel(0);
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                script,
                script_mtime,
                attempts: HashMap::new(),
                requests: Vec::new(),
                aux_text: None,
            }),
            request_count: count_tx,
            options,
        });
        let (stop, stopped) = oneshot::channel();
        let (ready_tx, ready_rx) = oneshot::channel();
        let server_shared = Arc::clone(&shared);
        // Its own thread and runtime: the server must keep answering while a test blocks its own
        // thread (e.g. waiting on a droid child), and must not depend on the caller's runtime
        // flavour or lifetime.
        let thread = std::thread::Builder::new()
            .name(format!("scripted-model-{port}"))
            .spawn(move || serve(listener, server_shared, stopped, ready_tx))?;
        match ready_rx.await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Err(io::Error::other("scripted model thread ended early")),
        }
        Ok(ScriptedModel {
            port,
            shared,
            request_count,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// The port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `http://127.0.0.1:PORT/v1`, the `baseUrl` for droid's settings.
    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}/v1", self.port)
    }

    /// Every request received so far, in arrival order (see the module doc for the shape).
    pub fn requests(&self) -> Vec<Value> {
        self.shared.lock().requests.clone()
    }

    /// Replaces the script for the following requests and resets the per-turn attempt counts.
    pub fn set_script(&self, script: Value) {
        let mut state = self.shared.lock();
        state.script = script;
        state.attempts.clear();
    }

    /// Answers every chat-completions request that offers no tools with `text`, outside the
    /// script (see the module doc's "Side calls").
    pub fn set_aux_text(&self, text: impl Into<String>) {
        self.shared.lock().aux_text = Some(text.into());
    }

    /// Waits until at least `n` requests were recorded; false if `timeout` passed first.
    pub async fn wait_for_requests(&self, n: usize, timeout: Duration) -> bool {
        let mut count = self.request_count.clone();
        tokio::time::timeout(timeout, count.wait_for(|c| *c >= n))
            .await
            .is_ok_and(|r| r.is_ok())
    }
}

impl Drop for ScriptedModel {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(thread) = self.thread.take() {
            // The thread only finishes its select loop and drops its runtime: quick.
            let _ = thread.join();
        }
    }
}

#[derive(Debug)]
struct Shared {
    state: Mutex<State>,
    /// Number of records, for [`ScriptedModel::wait_for_requests`].
    request_count: watch::Sender<usize>,
    options: Options,
}

#[derive(Debug)]
struct State {
    script: Value,
    script_mtime: Option<SystemTime>,
    /// Requests seen per turn since the script was last set.
    attempts: HashMap<usize, u64>,
    requests: Vec<Value>,
    /// The answer to requests that offer no tools, when set ([`ScriptedModel::set_aux_text`]).
    aux_text: Option<String>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the state half-updated in a way that
        // matters to a test double; keep serving.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The current script, re-read first if it comes from a file that changed.
    fn script(&self) -> Value {
        let mut state = self.lock();
        if let Some(file) = &self.options.script_file {
            let now = mtime(file);
            if now != state.script_mtime {
                let parsed = std::fs::read(file)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
                if let Some(script) = parsed {
                    state.script = script;
                    state.script_mtime = now;
                    state.attempts.clear();
                }
            }
        }
        state.script.clone()
    }

    fn next_attempt(&self, turn: usize) -> u64 {
        let mut state = self.lock();
        let attempt = state.attempts.entry(turn).or_insert(0);
        *attempt += 1;
        *attempt
    }

    fn reset_attempts(&self) {
        self.lock().attempts.clear();
    }

    fn record(&self, record: Value) {
        let count = {
            let mut state = self.lock();
            if let Some(log) = &self.options.log_file {
                let mut line = json!({ "t": unix_seconds_f64() });
                if let (Some(line), Some(fields)) = (line.as_object_mut(), record.as_object()) {
                    line.extend(fields.clone());
                }
                // Under the lock, so lines from parallel requests never interleave. A log that
                // cannot be written is not worth failing the request for.
                let _ = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(log)
                    .and_then(|mut f| writeln!(f, "{line}"));
            }
            state.requests.push(record);
            state.requests.len()
        };
        self.request_count.send_replace(count);
    }
}

fn mtime(path: &std::path::Path) -> Option<SystemTime> {
    std::fs::metadata(path).and_then(|m| m.modified()).ok()
}

fn unix_seconds() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn unix_seconds_f64() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// The server thread: accept until told to stop, one task per connection. Dropping the
/// `JoinSet` and then the runtime aborts every connection task, hanging ones included.
fn serve(
    listener: std::net::TcpListener,
    shared: Arc<Shared>,
    mut stop: oneshot::Receiver<()>,
    ready: oneshot::Sender<io::Result<()>>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(e) => {
                let _ = ready.send(Err(e));
                return;
            }
        };
        let _ = ready.send(Ok(()));
        let mut connections = JoinSet::new();
        loop {
            tokio::select! {
                _ = &mut stop => break,
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => {
                        connections.spawn(connection(Arc::clone(&shared), stream));
                    }
                    Err(_) => tokio::time::sleep(ACCEPT_BACKOFF).await,
                },
                Some(_) = connections.join_next() => {}
            }
        }
    });
}

/// What to do with a connection after answering one request.
enum After {
    KeepAlive,
    Close,
}

/// Serves requests on one connection until either side closes it. I/O errors just end it.
async fn connection(shared: Arc<Shared>, mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = Vec::new();
    loop {
        let request = match http1::read_request(&mut stream, &mut buf).await {
            Ok(Some(request)) => request,
            Ok(None) | Err(_) => return,
        };
        let wants_close = request.wants_close();
        match answer(&shared, &mut stream, request).await {
            Ok(After::KeepAlive) if !wants_close => {}
            Ok(_) => {
                let _ = stream.shutdown().await;
                return;
            }
            Err(_) => return,
        }
    }
}

async fn answer(shared: &Shared, stream: &mut TcpStream, request: Request) -> io::Result<After> {
    match request.method.as_str() {
        "GET" => {
            shared.record(json!({"method": "GET", "path": request.path}));
            let body = json!({"object": "list", "data": [{"id": "scripted", "object": "model"}]});
            write_json(stream, 200, &[], &body).await?;
            Ok(After::KeepAlive)
        }
        "POST" if request.path.ends_with("/__reset") => {
            shared.record(json!({"method": "POST", "path": request.path}));
            shared.reset_attempts();
            let head = http1::response_head(204, &[("content-length", "0".to_owned())]);
            stream.write_all(&head).await?;
            Ok(After::KeepAlive)
        }
        "HEAD" => {
            // Claude Code's reachability probe (`HEAD /api/hello`)
            shared.record(json!({"method": "HEAD", "path": request.path}));
            let head = http1::response_head(200, &[("content-length", "0".to_owned())]);
            stream.write_all(&head).await?;
            Ok(After::KeepAlive)
        }
        "POST"
            if request
                .path
                .split('?')
                .next()
                .is_some_and(|p| p.ends_with("/responses")) =>
        {
            agent_turn(shared, stream, request, Wire::Responses).await
        }
        "POST"
            if request
                .path
                .split('?')
                .next()
                .is_some_and(|p| p.ends_with("/messages")) =>
        {
            agent_turn(shared, stream, request, Wire::Messages).await
        }
        "POST" if gemini_path(&request.path) => gemini_turn(shared, stream, request).await,
        "POST" => chat_completions(shared, stream, request).await,
        _ => {
            shared.record(json!({"method": request.method, "path": request.path}));
            let head = http1::response_head(501, &[("content-length", "0".to_owned())]);
            stream.write_all(&head).await?;
            Ok(After::Close)
        }
    }
}

async fn write_json(
    stream: &mut TcpStream,
    status: u16,
    extra_headers: &[(&str, String)],
    body: &Value,
) -> io::Result<()> {
    let body = body.to_string().into_bytes();
    let mut headers = vec![
        ("content-type", "application/json".to_owned()),
        ("content-length", body.len().to_string()),
    ];
    headers.extend(extra_headers.iter().cloned());
    let mut bytes = http1::response_head(status, &headers);
    bytes.extend_from_slice(&body);
    stream.write_all(&bytes).await?;
    stream.flush().await
}

/// OpenAI's error body; a turn's `error_type` (`insufficient_quota`, `rate_limit_exceeded`) is
/// its `type` and `code`, as OpenAI sends them.
fn error_body(status: u16, message: &str, error_type: Option<&str>) -> Value {
    match error_type {
        Some(t) => json!({"error": {"message": message, "type": t, "param": null, "code": t}}),
        None => json!({"error": {"message": message, "type": "mock_error", "code": status}}),
    }
}

/// Python truthiness, which `mock.py` uses for every flag.
fn truthy(value: Option<&Value>) -> bool {
    match value {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_f64().is_some_and(|f| f != 0.0),
        Some(Value::String(s)) => !s.is_empty(),
        Some(Value::Array(a)) => !a.is_empty(),
        Some(Value::Object(o)) => !o.is_empty(),
    }
}

/// A positive number of seconds under `key`, if any.
fn seconds(step: &Value, key: &str) -> Option<Duration> {
    step.get(key)
        .and_then(Value::as_f64)
        .filter(|s| s.is_finite() && *s > 0.0)
        .map(Duration::from_secs_f64)
}

/// A turn's `usage` key in the neutral shape (see the module doc's "Usage").
#[derive(Debug, Clone, Copy)]
struct TurnUsage {
    input: u64,
    output: u64,
    cache_read: u64,
    cache_write: u64,
}

impl TurnUsage {
    /// The turn's `usage`, or `None` for the default (10 prompt, 5 completion tokens).
    fn of(step: &Value) -> Option<TurnUsage> {
        let u = step.get("usage").filter(|u| u.is_object())?;
        let n = |k: &str, default: u64| u.get(k).and_then(Value::as_u64).unwrap_or(default);
        Some(TurnUsage {
            input: n("input", 0),
            output: n("output", 5),
            cache_read: n("cache_read", 0),
            cache_write: n("cache_write", 0),
        })
    }

    /// OpenAI counts cached prompt tokens inside the prompt tokens.
    fn prompt_with_cache(self) -> u64 {
        self.input + self.cache_read
    }
}

/// The turn of a request: the number of assistant messages in it.
fn turn_of(body: &Value) -> usize {
    body.get("messages")
        .and_then(Value::as_array)
        .map_or(0, |messages| {
            messages
                .iter()
                .filter(|m| m.get("role").and_then(Value::as_str) == Some("assistant"))
                .count()
        })
}

/// `script[min(turn, len - 1)]`; an empty or non-array script acts as one empty turn.
fn step_for(script: &Value, turn: usize) -> Value {
    match script {
        Value::Array(turns) if !turns.is_empty() => turns[turn.min(turns.len() - 1)].clone(),
        Value::Array(_) => json!({}),
        other => other.clone(),
    }
}

fn header_text(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

async fn chat_completions(
    shared: &Shared,
    stream: &mut TcpStream,
    request: Request,
) -> io::Result<After> {
    let body: Value = serde_json::from_slice(&request.body)
        .unwrap_or_else(|_| json!({"_unparsed": String::from_utf8_lossy(&request.body)}));
    let script = shared.script();
    let turn = turn_of(&body);
    let offers_tools = body
        .get("tools")
        .and_then(Value::as_array)
        .is_some_and(|t| !t.is_empty());
    let aux = shared.lock().aux_text.clone().filter(|_| !offers_tools);
    let (step, attempt) = match &aux {
        Some(text) => (json!({"text": text}), 0),
        None => (step_for(&script, turn), shared.next_attempt(turn)),
    };
    let headers: serde_json::Map<String, Value> = request
        .headers
        .iter()
        .filter(|(k, _)| k != "authorization")
        .map(|(k, v)| (k.clone(), Value::String(v.clone())))
        .collect();
    let auth_present = request.header("authorization").is_some();
    let mut record = json!({
        "method": "POST",
        "path": request.path,
        "turn": turn,
        "attempt": attempt,
        "headers": headers,
        "auth_present": auth_present,
        "body": body,
    });
    if aux.is_some() {
        record["aux"] = Value::Bool(true);
    }
    shared.record(record);

    if let Some(sleep) = seconds(&step, "sleep") {
        tokio::time::sleep(sleep).await;
    }
    if truthy(step.get("hang")) {
        std::future::pending::<()>().await;
    }
    if truthy(step.get("status")) {
        let fail_times = step.get("fail_times").filter(|v| !v.is_null());
        // Python compares numbers, so `fail_times: 1.0` works too.
        #[allow(clippy::cast_precision_loss)]
        let failing = fail_times.is_none_or(|n| n.as_f64().is_some_and(|n| attempt as f64 <= n));
        if failing {
            let status = step
                .get("status")
                .and_then(Value::as_u64)
                .and_then(|s| u16::try_from(s).ok())
                .unwrap_or(500);
            let default_message = format!("mock error {status}");
            let message = step
                .get("error_message")
                .and_then(Value::as_str)
                .unwrap_or(&default_message);
            let extra: Vec<(&str, String)> = step
                .get("headers")
                .and_then(Value::as_object)
                .map(|h| {
                    h.iter()
                        .map(|(k, v)| (k.as_str(), header_text(v)))
                        .collect()
                })
                .unwrap_or_default();
            let error_type = step.get("error_type").and_then(Value::as_str);
            write_json(
                stream,
                status,
                &extra,
                &error_body(status, message, error_type),
            )
            .await?;
            return Ok(After::KeepAlive);
        }
    }

    let base = json!({
        "id": format!("c{turn}"),
        "object": "chat.completion.chunk",
        "created": unix_seconds(),
        "model": body.get("model").cloned().unwrap_or(Value::Null),
    });
    let usage = match TurnUsage::of(&step) {
        None => json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}),
        Some(u) => json!({"prompt_tokens": u.prompt_with_cache(), "completion_tokens": u.output,
                          "total_tokens": u.prompt_with_cache() + u.output,
                          "prompt_tokens_details": {"cached_tokens": u.cache_read}}),
    };
    let calls: Vec<Value> = step
        .get("tool")
        .and_then(Value::as_array)
        .map(|tools| {
            tools
                .iter()
                .enumerate()
                .map(|(i, t)| {
                    let arguments = match t.get("raw_args") {
                        Some(raw) => raw.clone(),
                        None => Value::String(
                            t.get("args").cloned().unwrap_or_else(|| json!({})).to_string(),
                        ),
                    };
                    json!({
                        "index": i,
                        "id": format!("call_{turn}_{i}"),
                        "type": "function",
                        "function": {"name": t.get("name").cloned().unwrap_or(Value::Null), "arguments": arguments},
                    })
                })
                .collect()
        })
        .unwrap_or_default();

    if !body.get("stream").and_then(Value::as_bool).unwrap_or(false) {
        let mut message = json!({"role": "assistant", "content": step.get("text").cloned().unwrap_or(Value::Null)});
        if let Some(reasoning) = step.get("reasoning").filter(|r| r.is_string()) {
            message["reasoning_content"] = reasoning.clone();
        }
        if !calls.is_empty() {
            let without_index: Vec<Value> = calls
                .iter()
                .map(|c| {
                    let mut c = c.clone();
                    if let Some(o) = c.as_object_mut() {
                        o.remove("index");
                    }
                    c
                })
                .collect();
            message["tool_calls"] = Value::Array(without_index);
        }
        let finish = if calls.is_empty() {
            "stop"
        } else {
            "tool_calls"
        };
        let answer = json!({
            "id": base["id"],
            "object": "chat.completion",
            "created": base["created"],
            "model": base["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": usage,
        });
        write_json(stream, 200, &[], &answer).await?;
        return Ok(After::KeepAlive);
    }

    let head = http1::response_head(
        200,
        &[
            ("content-type", "text/event-stream".to_owned()),
            ("cache-control", "no-cache".to_owned()),
            ("connection", "close".to_owned()),
        ],
    );
    stream.write_all(&head).await?;
    stream.flush().await?;
    if truthy(step.get("hang_after_headers")) {
        std::future::pending::<()>().await;
    }
    let mut sse = Sse {
        stream,
        chunk_sleep: seconds(&step, "chunk_sleep"),
    };
    if truthy(step.get("malformed")) {
        sse.raw(b"data: {this is not json\n\ngarbage line without prefix\n\ndata: [DONE]\n\n")
            .await?;
        return Ok(After::Close);
    }
    let chunk = |choice: Value, usage: Option<&Value>| {
        let mut c = base.clone();
        c["choices"] = json!([choice]);
        if let Some(usage) = usage {
            c["usage"] = usage.clone();
        }
        c
    };
    if truthy(step.get("close_mid")) {
        let delta = json!({"role": "assistant", "content": "partial answer "});
        sse.event(&chunk(
            json!({"index": 0, "delta": delta, "finish_reason": null}),
            None,
        ))
        .await?;
        // Drop the socket abruptly: no finishing chunk, no [DONE].
        return Ok(After::Close);
    }
    if let Some(reasoning) = step.get("reasoning").and_then(Value::as_str) {
        let field = step
            .get("reasoning_field")
            .and_then(Value::as_str)
            .unwrap_or("reasoning_content");
        for (i, part) in words(reasoning, truthy(step.get("split_text")))
            .iter()
            .enumerate()
        {
            let mut delta = json!({ field: part });
            if i == 0 {
                delta["role"] = json!("assistant");
            }
            sse.event(&chunk(
                json!({"index": 0, "delta": delta, "finish_reason": null}),
                None,
            ))
            .await?;
        }
    }
    if calls.is_empty() {
        let text = step.get("text").and_then(Value::as_str).unwrap_or_default();
        let parts: Vec<String> = if truthy(step.get("split_text")) {
            let words: Vec<&str> = text.split(' ').collect();
            let last = words.len() - 1;
            words
                .iter()
                .enumerate()
                .map(|(i, w)| {
                    if i < last {
                        format!("{w} ")
                    } else {
                        (*w).to_owned()
                    }
                })
                .collect()
        } else {
            vec![text.to_owned()]
        };
        for (i, part) in parts.iter().enumerate() {
            let delta = if i == 0 {
                json!({"role": "assistant", "content": part})
            } else {
                json!({"content": part})
            };
            sse.event(&chunk(
                json!({"index": 0, "delta": delta, "finish_reason": null}),
                None,
            ))
            .await?;
        }
        let stop = json!({"index": 0, "delta": {}, "finish_reason": "stop"});
        sse.event(&chunk(stop, Some(&usage))).await?;
    } else {
        let delta = json!({
            "role": "assistant",
            "content": step.get("text").cloned().unwrap_or(Value::Null),
            "tool_calls": calls,
        });
        sse.event(&chunk(
            json!({"index": 0, "delta": delta, "finish_reason": null}),
            None,
        ))
        .await?;
        let finish = json!({"index": 0, "delta": {}, "finish_reason": "tool_calls"});
        sse.event(&chunk(finish, Some(&usage))).await?;
    }
    sse.raw(b"data: [DONE]\n\n").await?;
    Ok(After::Close)
}

/// `text` as streamed: one word per part (each but the last with its space) when `split`, else
/// whole.
fn words(text: &str, split: bool) -> Vec<String> {
    if !split {
        return vec![text.to_owned()];
    }
    let words: Vec<&str> = text.split(' ').collect();
    let last = words.len() - 1;
    words
        .iter()
        .enumerate()
        .map(|(i, w)| {
            if i < last {
                format!("{w} ")
            } else {
                (*w).to_owned()
            }
        })
        .collect()
}

/// The agent-CLI wire formats.
#[derive(Debug, Clone, Copy)]
enum Wire {
    /// OpenAI Responses API (Codex).
    Responses,
    /// Anthropic Messages API (Claude Code).
    Messages,
}

/// The turn of a Responses request: model outputs in `input` after the last user message, a run
/// of consecutive output items counting once (one response may hold several).
fn responses_turn(body: &Value) -> usize {
    let Some(items) = body.get("input").and_then(Value::as_array) else {
        return 0;
    };
    let kind = |item: &Value| {
        item.get("type")
            .and_then(Value::as_str)
            .unwrap_or("message")
            .to_owned()
    };
    let last_user = items
        .iter()
        .rposition(|i| {
            kind(i) == "message" && i.get("role").and_then(Value::as_str) == Some("user")
        })
        .map_or(0, |i| i + 1);
    let mut turns = 0;
    let mut in_output = false;
    for item in &items[last_user..] {
        let t = kind(item);
        let is_output = matches!(
            t.as_str(),
            "function_call" | "custom_tool_call" | "tool_search_call" | "reasoning"
        ) || (t == "message"
            && item.get("role").and_then(Value::as_str) == Some("assistant"));
        if is_output && !in_output {
            turns += 1;
        }
        in_output = is_output;
    }
    turns
}

/// Answers a Responses or Messages request from the script (always streamed: both CLIs ask so).
async fn agent_turn(
    shared: &Shared,
    stream: &mut TcpStream,
    request: Request,
    wire: Wire,
) -> io::Result<After> {
    let body: Value = serde_json::from_slice(&request.body)
        .unwrap_or_else(|_| json!({"_unparsed": String::from_utf8_lossy(&request.body)}));
    let turn = match wire {
        Wire::Responses => responses_turn(&body),
        Wire::Messages => turn_of(&body),
    };
    let step = step_for(&shared.script(), turn);
    let attempt = shared.next_attempt(turn);
    shared.record(json!({
        "method": "POST",
        "path": request.path,
        "turn": turn,
        "attempt": attempt,
        "body": body,
    }));
    if let Some(sleep) = seconds(&step, "sleep") {
        tokio::time::sleep(sleep).await;
    }
    if truthy(step.get("hang")) {
        std::future::pending::<()>().await;
    }
    // `fail_times: n`: only the first n attempts of this turn fail
    #[allow(clippy::cast_precision_loss)]
    let failing = step
        .get("fail_times")
        .filter(|v| !v.is_null())
        .is_none_or(|n| n.as_f64().is_some_and(|n| attempt as f64 <= n));
    if let Some(status) = step
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
        .filter(|_| failing)
    {
        let default_message = format!("mock error {status}");
        let message = step
            .get("error_message")
            .and_then(Value::as_str)
            .unwrap_or(&default_message);
        let error_type = step.get("error_type").and_then(Value::as_str);
        let body = match wire {
            Wire::Responses => error_body(status, message, error_type),
            Wire::Messages => json!({"type": "error",
                                     "error": {"type": error_type.unwrap_or(anthropic_error_type(status)), "message": message}}),
        };
        write_json(stream, status, &[], &body).await?;
        return Ok(After::KeepAlive);
    }
    let head = http1::response_head(
        200,
        &[
            ("content-type", "text/event-stream".to_owned()),
            ("cache-control", "no-cache".to_owned()),
            ("connection", "close".to_owned()),
        ],
    );
    stream.write_all(&head).await?;
    let mut sse = Sse {
        stream,
        chunk_sleep: None,
    };
    let model = body.get("model").cloned().unwrap_or(Value::Null);
    match wire {
        Wire::Responses => {
            let output = step.get("output").cloned().unwrap_or_else(|| json!([]));
            let items = output.as_array().cloned().unwrap_or_default();
            let mut seq = 0;
            for (i, item) in items.iter().enumerate() {
                seq += 1;
                sse.named(
                    "response.output_item.done",
                    &json!({"type": "response.output_item.done", "sequence_number": seq,
                            "output_index": i, "item": item}),
                )
                .await?;
            }
            let u = TurnUsage::of(&step).unwrap_or(TurnUsage {
                input: 10,
                output: 5,
                cache_read: 0,
                cache_write: 0,
            });
            let usage = json!({"input_tokens": u.prompt_with_cache(),
                               "input_tokens_details": {"cached_tokens": u.cache_read},
                               "output_tokens": u.output, "output_tokens_details": {"reasoning_tokens": 0},
                               "total_tokens": u.prompt_with_cache() + u.output});
            sse.named(
                "response.completed",
                &json!({"type": "response.completed", "sequence_number": seq + 1,
                        "response": {"id": format!("resp_{turn}"), "object": "response",
                                     "created_at": unix_seconds(), "status": "completed",
                                     "model": model, "output": output, "usage": usage}}),
            )
            .await?;
        }
        Wire::Messages => {
            let blocks = step
                .get("content")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            let stop = if blocks
                .iter()
                .any(|b| b.get("type").and_then(Value::as_str) == Some("tool_use"))
            {
                "tool_use"
            } else {
                "end_turn"
            };
            let u = TurnUsage::of(&step).unwrap_or(TurnUsage {
                input: 10,
                output: 5,
                cache_read: 0,
                cache_write: 0,
            });
            let usage = json!({"input_tokens": u.input, "output_tokens": 1,
                               "cache_creation_input_tokens": u.cache_write,
                               "cache_read_input_tokens": u.cache_read});
            sse.named(
                "message_start",
                &json!({"type": "message_start", "message": {
                    "id": format!("msg_{turn}"), "type": "message", "role": "assistant",
                    "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
                    "usage": usage}}),
            )
            .await?;
            for (i, block) in blocks.iter().enumerate() {
                let (start, delta) = match block.get("type").and_then(Value::as_str) {
                    Some("tool_use") => (
                        json!({"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}),
                        json!({"type": "input_json_delta",
                               "partial_json": block.get("input").cloned().unwrap_or_else(|| json!({})).to_string()}),
                    ),
                    _ => (
                        json!({"type": "text", "text": ""}),
                        json!({"type": "text_delta", "text": block.get("text").cloned().unwrap_or_else(|| json!(""))}),
                    ),
                };
                sse.named(
                    "content_block_start",
                    &json!({"type": "content_block_start", "index": i, "content_block": start}),
                )
                .await?;
                sse.named(
                    "content_block_delta",
                    &json!({"type": "content_block_delta", "index": i, "delta": delta}),
                )
                .await?;
                sse.named(
                    "content_block_stop",
                    &json!({"type": "content_block_stop", "index": i}),
                )
                .await?;
            }
            sse.named(
                "message_delta",
                &json!({"type": "message_delta",
                        "delta": {"stop_reason": stop, "stop_sequence": null},
                        "usage": {"output_tokens": u.output}}),
            )
            .await?;
            sse.named("message_stop", &json!({"type": "message_stop"}))
                .await?;
        }
    }
    Ok(After::Close)
}

/// The Anthropic error `type` for an HTTP status (as the Messages API names them).
fn anthropic_error_type(status: u16) -> &'static str {
    match status {
        400 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

/// The `status` of Google's error body for an HTTP status (as the Gemini API names them: a rate
/// limit or spent quota is `RESOURCE_EXHAUSTED`).
fn google_status(status: u16) -> &'static str {
    match status {
        401 => "UNAUTHENTICATED",
        403 => "PERMISSION_DENIED",
        404 => "NOT_FOUND",
        429 => "RESOURCE_EXHAUSTED",
        500 => "INTERNAL",
        503 => "UNAVAILABLE",
        _ => "INVALID_ARGUMENT",
    }
}

/// A Gemini API path: `…/models/M:streamGenerateContent`, `:generateContent` or `:countTokens`.
fn gemini_path(path: &str) -> bool {
    let p = path.split('?').next().unwrap_or("");
    p.ends_with(":streamGenerateContent")
        || p.ends_with(":generateContent")
        || p.ends_with(":countTokens")
}

/// The turn of a Gemini request: `model` contents after the last user content that is not a
/// function response.
fn gemini_turn_of(body: &Value) -> usize {
    let Some(contents) = body.get("contents").and_then(Value::as_array) else {
        return 0;
    };
    let is_prompt = |c: &Value| {
        c.get("role").and_then(Value::as_str).unwrap_or("user") == "user"
            && !c
                .get("parts")
                .and_then(Value::as_array)
                .is_some_and(|ps| ps.iter().any(|p| p.get("functionResponse").is_some()))
    };
    let start = contents.iter().rposition(is_prompt).map_or(0, |i| i + 1);
    contents[start..]
        .iter()
        .filter(|c| c.get("role").and_then(Value::as_str) == Some("model"))
        .count()
}

/// Answers a Gemini API request from the script (see the module doc).
async fn gemini_turn(
    shared: &Shared,
    stream: &mut TcpStream,
    request: Request,
) -> io::Result<After> {
    let body: Value = serde_json::from_slice(&request.body)
        .unwrap_or_else(|_| json!({"_unparsed": String::from_utf8_lossy(&request.body)}));
    let path = request.path.split('?').next().unwrap_or("");
    if path.ends_with(":countTokens") {
        shared.record(json!({"method": "POST", "path": request.path, "body": body}));
        write_json(stream, 200, &[], &json!({"totalTokens": 100})).await?;
        return Ok(After::KeepAlive);
    }
    let config = body
        .get("generationConfig")
        .or_else(|| body.get("config"))
        .cloned()
        .unwrap_or(Value::Null);
    let wants_json = ["responseJsonSchema", "responseSchema"]
        .iter()
        .any(|k| config.get(k).is_some())
        || config.get("responseMimeType").and_then(Value::as_str) == Some("application/json");
    let turn = gemini_turn_of(&body);
    let step = if wants_json {
        let answer = json!({"complexity_reasoning": "scripted", "complexity_score": 10,
                            "reasoning": "scripted", "next_speaker": "user"});
        json!({"parts": [{"text": answer.to_string()}]})
    } else {
        step_for(&shared.script(), turn)
    };
    let attempt = shared.next_attempt(turn);
    shared.record(json!({
        "method": "POST",
        "path": request.path,
        "turn": turn,
        "attempt": attempt,
        "aux": wants_json,
        "body": body,
    }));
    if truthy(step.get("hang")) {
        std::future::pending::<()>().await;
    }
    if let Some(status) = step
        .get("status")
        .and_then(Value::as_u64)
        .and_then(|s| u16::try_from(s).ok())
    {
        let default_message = format!("mock error {status}");
        let message = step
            .get("error_message")
            .and_then(Value::as_str)
            .unwrap_or(&default_message);
        let error =
            json!({"error": {"code": status, "message": message, "status": google_status(status)}});
        write_json(stream, status, &[], &error).await?;
        return Ok(After::KeepAlive);
    }
    let answer = json!({
        "candidates": [{"content": {"role": "model", "parts": step.get("parts").cloned().unwrap_or_else(|| json!([]))},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": match TurnUsage::of(&step) {
            None => json!({"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15}),
            Some(u) => json!({"promptTokenCount": u.prompt_with_cache(),
                              "cachedContentTokenCount": u.cache_read,
                              "candidatesTokenCount": u.output,
                              "totalTokenCount": u.prompt_with_cache() + u.output}),
        },
        "modelVersion": "scripted",
        "responseId": format!("r{turn}"),
    });
    if !path.ends_with(":streamGenerateContent") {
        write_json(stream, 200, &[], &answer).await?;
        return Ok(After::KeepAlive);
    }
    let head = http1::response_head(
        200,
        &[
            ("content-type", "text/event-stream".to_owned()),
            ("cache-control", "no-cache".to_owned()),
            ("connection", "close".to_owned()),
        ],
    );
    stream.write_all(&head).await?;
    let mut sse = Sse {
        stream,
        chunk_sleep: None,
    };
    sse.event(&answer).await?;
    Ok(After::Close)
}

/// Writes server-sent events, pausing after each when the turn says so.
struct Sse<'a> {
    stream: &'a mut TcpStream,
    chunk_sleep: Option<Duration>,
}

impl Sse<'_> {
    async fn event(&mut self, data: &Value) -> io::Result<()> {
        self.raw(format!("data: {data}\n\n").as_bytes()).await?;
        if let Some(pause) = self.chunk_sleep {
            tokio::time::sleep(pause).await;
        }
        Ok(())
    }

    /// An event with an `event:` line (the Responses and Messages APIs name every event).
    async fn named(&mut self, name: &str, data: &Value) -> io::Result<()> {
        self.raw(format!("event: {name}\ndata: {data}\n\n").as_bytes())
            .await
    }

    async fn raw(&mut self, bytes: &[u8]) -> io::Result<()> {
        self.stream.write_all(bytes).await?;
        self.stream.flush().await
    }
}
