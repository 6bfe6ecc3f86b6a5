//! The read loop and the dispatch of each message.
//!
//! The dispatch ([`dispatch`]) takes the output a message's answer and notifications go to:
//! the read loop passes stdout's, [`crate::session::Session`] (the bridge's `/mcp`) a fresh
//! one per posted message. So both transports are served by this one dispatcher.
//!
//! Lines are framed by `jsonrpc-lines`, the framing the ACP agent shares (bounded lines; a BOM, a
//! trailing `\r` and blank lines are tolerated). Each request is first given its era ([`Era::of`]): legacy requests are served
//! by the revision `initialize` negotiated, modern ones (2026-07-28) statelessly by their own
//! `_meta`. Quick requests are answered inline; `tools/call` and the `tasks/*` methods run as
//! their own tasks, so pings and other calls are answered while a run goes on (and a
//! `notifications/cancelled` can stop them).
//!
//! Batches (a JSON array on one line) exist only in revision 2025-03-26
//! (docs/architecture.md#mcp-server: added
//! there, removed in 2025-06-18). A session that negotiated 2025-03-26 gets them as that revision
//! says: every request of the batch is answered inside one array, sent once all of them are
//! done (a long `tools/call` included; its progress notifications still come on their own lines
//! before it), an `initialize` inside is answered with an error in the array (it MUST NOT be
//! batched), and a batch of notifications only gets nothing. Any other session, and a batch
//! before `initialize`, gets one `-32600` "batches are not supported in revision X" with id
//! `null` and nothing in the batch is processed: no tested client sends batches
//! (docs/architecture.md#mcp-server),
//! and a strict answer tells a client that does what went wrong instead of half-serving it.
//! A 2026-07-28 request (modern `_meta`) inside a 2025-03-26 batch gets `-32600` in the array.
//!
//! Lifecycle: in the legacy era a session starts with `initialize`; before it only `ping` is
//! answered, any other request gets `-32600` naming initialize (docs/architecture.md#mcp-server:
//! a client sends nothing else before the `initialize` response). A modern request needs no
//! `initialize`.
//!
//! Load: one session runs at most [`MAX_RUNNING_CALLS`] `tools/call`s (and `tasks/*` requests)
//! at once and queues [`MAX_QUEUED_CALLS`] more; a call beyond that is answered at once with
//! `-32000` "server busy" naming both limits. Everything else (`ping`, `tools/list`, cancels) is
//! answered inline by the read loop, so it keeps its bound however many calls are in flight, and
//! so does the shutdown below (it has at most that many calls to cancel).
//!
//! Cancellation: a call's progress, log messages and response go through an outbox guarded by
//! the call's token, so from the moment `notifications/cancelled` is read nothing more of that
//! call is written, not even what was already queued ([`Outbox::guarded`]).
//!
//! On stdin EOF, on `shutdown` (SIGTERM) or when stdout is gone (EPIPE), every running call is
//! cancelled (droid and its children are killed), given [`DRAIN`] to finish, the writer
//! [`FLUSH`] to write what is queued, and the loop returns; cancelled calls send no response.
//! The whole shutdown budget: 0.9 s + 0.2 s here, plus the binary's runtime shutdown (0.2 s),
//! is 1.3 s at worst, under the 1.5 s of docs/architecture.md#mcp-server and the 2 s. The
//! drain only has to
//! outlast killing droid (the MCP front-end gives it 0.5 s between SIGTERM and SIGKILL, then the
//! sweep of escaped descendants); a cancelled run still reading the repository after that is
//! dropped, as its result would not be sent anyway.

use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use jsonrpc_lines::{Frame, Reader};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::sync::{OwnedSemaphorePermit, Semaphore, oneshot};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::discover;
use crate::era::{BATCH_VERSION, Era, LEGACY_VERSIONS, Modern, TASKS_VERSION, server_info};
use crate::jsonrpc::{
    INVALID_PARAMS, INVALID_REQUEST, Incoming, METHOD_NOT_FOUND, PARSE_ERROR, RpcError,
    SERVER_BUSY, classify, error, result,
};
use crate::logging::{Level, LogSink, SessionLevel, Threshold};
use crate::progress::ProgressSink;
use crate::relay::Relay;
use crate::server::{Inbox, Outbox, Server};
use crate::tasks;
use crate::tools;

/// Largest message accepted (a request is at most a few hundred KiB).
const MAX_MESSAGE_BYTES: usize = 8 * 1024 * 1024;

/// How long cancelled calls get to stop their runs at shutdown (see the module docs for the
/// whole budget). A front-end's kill grace for droid must be well below it.
pub const DRAIN: Duration = Duration::from_millis(900);

/// How long the writer then gets to write what is queued.
pub const FLUSH: Duration = Duration::from_millis(200);

/// Tool calls (and 2025-11-25 `tasks/*` requests) of one session that run at once. A run of
/// droid holds one for its whole length, and the engine runs at most `max_concurrent` (4) runs
/// at a time anyway: 16 leaves room for pings, pends and cancels beside them.
pub(crate) const MAX_RUNNING_CALLS: usize = 16;

/// Calls that wait for one of the [`MAX_RUNNING_CALLS`] slots, in arrival order; a call beyond
/// them is refused at once with [`SERVER_BUSY`] ("server busy", naming both limits). What a
/// session can have in flight is bounded, so a client that fires thousands of calls gets quick
/// errors instead of a server that grows without bound (processes, memory, descriptors).
pub(crate) const MAX_QUEUED_CALLS: usize = 64;

/// How often expired tasks are cleaned while the server runs.
const JANITOR_EVERY: Duration = Duration::from_secs(3600);

const INSTRUCTIONS: &str = "droid-executor hands a decided, well-specified coding task to Factory's droid CLI and returns a verified result (files changed measured from the repository, suggested commands re-run, a status and issues with suggested actions). Call execute_droid_task for short tasks; for anything that may take over a minute call droid_submit, then droid_pend with wait_seconds until the state is final. One task per call, with a clear objective and acceptance criteria. To consult another agent CLI (codex, claude, gemini, opencode, droid), call ask with its provider, then pend for its reply.";

/// One session's state: what the dispatcher of every transport shares (the stdio read loop below,
/// and [`crate::session::Session`] for transports that carry one message per request).
pub(crate) struct State {
    pub(crate) server: Arc<Server>,
    /// The session's own output: every message of stdio; on a transport with a stream per
    /// request, what relates to no request still open (a 2025-11-25 task's status and progress
    /// once its `CreateTaskResult` was sent).
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
    /// Slots for running calls ([`MAX_RUNNING_CALLS`]).
    slots: Arc<Semaphore>,
    /// Calls admitted and not yet answered, running or waiting for a slot.
    admitted: Arc<AtomicUsize>,
}

/// A call admitted past the bound on waiting calls; it runs once it gets a slot.
struct Ticket {
    slots: Arc<Semaphore>,
    admitted: Arc<AtomicUsize>,
}

/// A call that holds a slot; the slot and its admission end when this is dropped.
struct Slot {
    _permit: OwnedSemaphorePermit,
    _ticket: Ticket,
}

impl Ticket {
    /// Wait for a slot; `None` when `token` (the call's cancellation) fires first.
    async fn start(self, token: &CancellationToken) -> Option<Slot> {
        let permit = tokio::select! {
            p = Arc::clone(&self.slots).acquire_owned() => p.ok()?,
            () = token.cancelled() => return None,
        };
        Some(Slot {
            _permit: permit,
            _ticket: self,
        })
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        self.admitted.fetch_sub(1, Ordering::SeqCst);
    }
}

impl State {
    /// The state of a session over `server` writing to `out`. `janitor`: whether this session
    /// cleans expired tasks (after its first real use, then hourly); off where the front-end
    /// cleans them itself (the bridge).
    pub(crate) fn new(
        server: Arc<Server>,
        out: Outbox,
        shutdown: CancellationToken,
        janitor: bool,
    ) -> Arc<Self> {
        Arc::new(State {
            server,
            out,
            calls: Mutex::new(HashMap::new()),
            // "already started" is how a session without one is made
            janitor: AtomicBool::new(!janitor),
            shutdown,
            closing: CancellationToken::new(),
            negotiated: Mutex::new(None),
            log_level: SessionLevel::default(),
            slots: Arc::new(Semaphore::new(MAX_RUNNING_CALLS)),
            admitted: Arc::new(AtomicUsize::new(0)),
        })
    }

    /// Admit one more call, or the `SERVER_BUSY` answer to request `id` when the session already
    /// runs [`MAX_RUNNING_CALLS`] and queues [`MAX_QUEUED_CALLS`].
    fn admit(&self, id: &Value) -> Result<Ticket, Value> {
        let limit = MAX_RUNNING_CALLS + MAX_QUEUED_CALLS;
        match self
            .admitted
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < limit).then_some(n + 1)
            }) {
            Ok(_) => Ok(Ticket {
                slots: Arc::clone(&self.slots),
                admitted: Arc::clone(&self.admitted),
            }),
            Err(_) => Err(error(
                id,
                SERVER_BUSY,
                format!(
                    "server busy: this session already runs {MAX_RUNNING_CALLS} tool calls and queues {MAX_QUEUED_CALLS} more (the limit); try again once some are answered"
                ),
            )),
        }
    }

    fn calls(&self) -> std::sync::MutexGuard<'_, HashMap<String, CancellationToken>> {
        self.calls.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Cancel request `id` as `notifications/cancelled` does: its run is stopped and nothing
    /// more of it is sent. An id that is not running is ignored.
    pub(crate) fn cancel(&self, id: &Value) {
        if let Some(token) = self.calls().remove(&id.to_string()) {
            tracing::debug!("request {id} cancelled by the client");
            token.cancel();
        }
    }

    /// End the session: task watchers stop and every running request is cancelled (its run
    /// stopped, its answer withdrawn).
    pub(crate) fn close(&self) {
        self.closing.cancel();
        let pending: Vec<CancellationToken> = self.calls().drain().map(|(_, t)| t).collect();
        tracing::debug!("cancelling {} running call(s)", pending.len());
        for t in pending {
            t.cancel();
        }
    }

    /// The revision `initialize` negotiated, if it was called.
    pub(crate) fn negotiated(&self) -> Option<&'static str> {
        *self
            .negotiated
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether the session has 2025-11-25 Tasks: that revision was negotiated and there is a
    /// task store to keep them in.
    fn tasks_enabled(&self) -> bool {
        self.negotiated() == Some(TASKS_VERSION) && self.server.tasks().is_some()
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

    /// The log sink of a request writing to `out`: the session's level (legacy), the request's
    /// own (modern), none for a modern request that asked for no messages.
    fn log_sink(&self, modern: Option<&Modern>, out: &Outbox) -> Option<LogSink> {
        let threshold = match modern {
            None => Threshold::Session(self.log_level.clone()),
            Some(m) => Threshold::Request(m.log_level?),
        };
        Some(LogSink {
            out: out.clone(),
            threshold,
        })
    }
}

/// The answer to one message of a line: known now, or sent later by the task running it.
enum Answer {
    /// Ready.
    Now(Value),
    /// The running request's answer; nothing comes when it was cancelled.
    Later(oneshot::Receiver<Value>),
}

/// Where a request that runs as its own task sends its answer.
enum Reply {
    /// Its own line, through the request's guarded outbox (in order after its notifications).
    Line(Outbox),
    /// Its place in the answer array of its batch.
    Batch(oneshot::Sender<Value>),
}

impl Reply {
    /// The reply of a request that writes through `out`, and the answer its line waits for (a
    /// batch's).
    fn new(out: Outbox, batch: bool) -> (Reply, Option<Answer>) {
        if batch {
            let (tx, rx) = oneshot::channel();
            (Reply::Batch(tx), Some(Answer::Later(rx)))
        } else {
            (Reply::Line(out), None)
        }
    }

    async fn send(self, answer: Value) {
        match self {
            Reply::Line(out) => out.send(answer).await,
            Reply::Batch(slot) => {
                let _ = slot.send(answer);
            }
        }
    }
}

/// Serve MCP on `input`/`output` until EOF, `shutdown`, or a closed output (EPIPE); returns
/// within [`DRAIN`] + [`FLUSH`] of that, every run it started stopped.
pub async fn serve<R, W>(input: R, output: W, server: Arc<Server>, shutdown: CancellationToken)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out, inbox) = Outbox::new();
    let closed = CancellationToken::new();
    let writer = tokio::spawn(write_loop(output, inbox, closed.clone()));
    let state = State::new(server, out, shutdown.clone(), true);
    let mut lines = Reader::new(input, MAX_MESSAGE_BYTES);
    let mut running = JoinSet::new();
    let why = loop {
        tokio::select! {
            line = lines.next() => {
                let Some(line) = line else {
                    break "stdin closed";
                };
                // answering waits for room in the outbox: a client that stopped reading stdout
                // must not keep a signal (or EPIPE) from ending the session
                tokio::select! {
                    () = handle_input(&state, line, &mut running) => {}
                    () = shutdown.cancelled() => break "shutdown requested",
                    () = closed.cancelled() => break "stdout closed",
                }
            }
            () = shutdown.cancelled() => break "shutdown requested",
            () = closed.cancelled() => break "stdout closed",
            Some(_) = running.join_next(), if !running.is_empty() => {}
        }
    };
    tracing::debug!("{why}: ending the session");
    state.close();
    let _ = tokio::time::timeout(DRAIN, async {
        while running.join_next().await.is_some() {}
        // droids stopped after their completion events, still being reaped
        state.server.engine().settled().await;
    })
    .await;
    running.abort_all();
    shutdown.cancel();
    drop(state);
    let _ = tokio::time::timeout(FLUSH, writer).await;
}

async fn write_loop<W: AsyncWrite + Unpin>(mut w: W, mut inbox: Inbox, closed: CancellationToken) {
    while let Some(msg) = inbox.recv().await {
        if let Err(e) = jsonrpc_lines::write_message(&mut w, &msg).await {
            // the client is gone (EPIPE): stop quietly
            tracing::debug!("cannot write to stdout ({e}); stopping");
            closed.cancel();
            return;
        }
    }
}

async fn handle_input(state: &Arc<State>, frame: Frame, running: &mut JoinSet<()>) {
    let answer = match frame {
        Frame::Oversized(n) => error(
            &Value::Null,
            INVALID_REQUEST,
            format!("message of {n} bytes is over the {MAX_MESSAGE_BYTES}-byte limit"),
        ),
        Frame::Unparsable(e) => error(&Value::Null, PARSE_ERROR, format!("parse error: {e}")),
        Frame::Message(msg) => {
            dispatch(state, msg, &state.out, running)
                .send(&state.out)
                .await;
            return;
        }
    };
    state.out.send(answer).await;
}

/// The answers of one message (or batch) known at once, to be sent in order before anything
/// else of the session: nothing, the answer to one message, or a batch's array.
pub(crate) struct Ready {
    values: Vec<Value>,
    batch: bool,
}

impl Ready {
    fn nothing() -> Self {
        Self {
            values: Vec::new(),
            batch: false,
        }
    }

    fn one(v: Value) -> Self {
        Self {
            values: vec![v],
            batch: false,
        }
    }

    /// Send them to `out`.
    pub(crate) async fn send(self, out: &Outbox) {
        send_answers(out, self.values, self.batch).await;
    }
}

/// Dispatch one JSON-RPC message, or one batch, that arrived on its own (a line of stdio, the
/// body of an HTTP POST). Everything it answers goes to `out`: what is known now is returned
/// (the caller sends it, in arrival order), the rest comes from the tasks it spawned on
/// `running`, each holding a clone of `out` until it is done. So once the caller has sent what
/// is returned and dropped its own `out`, the receiving end of `out` ends exactly when the
/// message has nothing more to say.
pub(crate) fn dispatch(
    state: &Arc<State>,
    msg: Value,
    out: &Outbox,
    running: &mut JoinSet<()>,
) -> Ready {
    match msg {
        Value::Array(items) if items.is_empty() => {
            Ready::one(error(&Value::Null, INVALID_REQUEST, "empty batch"))
        }
        Value::Array(items) => {
            let negotiated = state.negotiated();
            if negotiated != Some(BATCH_VERSION) {
                let session = match negotiated {
                    Some(v) => format!("in protocol revision {v}, which this session negotiated"),
                    None => "before initialize".to_owned(),
                };
                return Ready::one(error(
                    &Value::Null,
                    INVALID_REQUEST,
                    format!(
                        "batches are not supported {session}: JSON-RPC batches exist only in revision {BATCH_VERSION}; send each message on its own line"
                    ),
                ));
            }
            let answers: Vec<Answer> = items
                .into_iter()
                .filter_map(|m| handle_message(state, m, out, running, true))
                .collect();
            deliver(out, answers, true, running)
        }
        single => {
            let answers = handle_message(state, single, out, running, false)
                .into_iter()
                .collect();
            deliver(out, answers, false, running)
        }
    }
}

/// The answers of one line: a single message's on its own, a batch's as one array once every
/// request in it is done (sent to `out` from a task of its own when some still run; otherwise
/// returned, to be sent before the next line is read).
fn deliver(out: &Outbox, answers: Vec<Answer>, batch: bool, running: &mut JoinSet<()>) -> Ready {
    if !answers.iter().any(|a| matches!(a, Answer::Later(_))) {
        let values = answers
            .into_iter()
            .filter_map(|a| match a {
                Answer::Now(v) => Some(v),
                Answer::Later(_) => None,
            })
            .collect();
        return Ready { values, batch };
    }
    let out = out.clone();
    running.spawn(async move {
        let mut values = Vec::with_capacity(answers.len());
        for a in answers {
            match a {
                Answer::Now(v) => values.push(v),
                // a cancelled request has no answer
                Answer::Later(rx) => values.extend(rx.await.ok()),
            }
        }
        send_answers(&out, values, batch).await;
    });
    Ready::nothing()
}

async fn send_answers(out: &Outbox, mut values: Vec<Value>, batch: bool) {
    if values.is_empty() {
        return;
    }
    if batch {
        out.send(Value::Array(values)).await;
    } else {
        for v in values.drain(..) {
            out.send(v).await;
        }
    }
}

/// Handle one message (`batch`: an element of a batch) whose answer and notifications go to
/// `out`; its answer, if one is due.
fn handle_message(
    state: &Arc<State>,
    msg: Value,
    out: &Outbox,
    running: &mut JoinSet<()>,
    batch: bool,
) -> Option<Answer> {
    match classify(&msg) {
        Incoming::Response { .. } => None,
        Incoming::Invalid { id, fault } => {
            Some(Answer::Now(error(&id, INVALID_REQUEST, fault.to_string())))
        }
        Incoming::Notification { method, params } => {
            if method == "notifications/cancelled"
                && let Some(req) = params.get("requestId")
            {
                state.cancel(req);
            }
            None
        }
        Incoming::Request { id, method, .. } if batch && method == "initialize" => {
            Some(Answer::Now(error(
                &id,
                INVALID_REQUEST,
                format!(
                    "initialize must not be part of a JSON-RPC batch (revision {BATCH_VERSION}); send it on its own line"
                ),
            )))
        }
        Incoming::Request { id, method, params } => match Era::of(&method, &params) {
            Err(e) => Some(Answer::Now(e.to_response(&id))),
            Ok(Era::Modern(m)) if batch => Some(Answer::Now(error(
                &id,
                INVALID_REQUEST,
                format!(
                    "JSON-RPC batches are not part of protocol revision {}; send this request on its own line",
                    m.version
                ),
            ))),
            Ok(Era::Legacy) => legacy(state, id, &method, params, out, running, batch),
            Ok(Era::Modern(m)) => modern(state, id, &method, params, m, out, running),
        },
    }
}

/// A request of the legacy era (2024-11-05 … 2025-11-25).
fn legacy(
    state: &Arc<State>,
    id: Value,
    method: &str,
    params: Value,
    out: &Outbox,
    running: &mut JoinSet<()>,
    batch: bool,
) -> Option<Answer> {
    let tasks_method = matches!(
        method,
        "tasks/get" | "tasks/result" | "tasks/list" | "tasks/cancel"
    );
    let now = |v: Value| Some(Answer::Now(v));
    if state.negotiated().is_none() && !matches!(method, "initialize" | "ping") {
        return now(error(
            &id,
            INVALID_REQUEST,
            format!(
                "{method} before initialize: a session starts with initialize (only ping is answered before it; a protocol revision 2026-07-28 request carries its own _meta instead)"
            ),
        ));
    }
    match method {
        "initialize" => now(result(&id, initialize(state, &params))),
        "ping" => now(result(&id, json!({}))),
        "tools/list" => now(match check_cursor(&params) {
            Ok(()) => result(
                &id,
                json!({"tools": tools::listed(state.tasks_enabled(), state.server.catalog())}),
            ),
            Err(e) => e.to_response(&id),
        }),
        "tools/call" => start_call(state, id, &params, None, out, running, batch),
        "logging/setLevel" => now(match Level::from_value(params.get("level")) {
            Ok(level) => {
                state.log_level.set(level);
                result(&id, json!({}))
            }
            Err(why) => error(&id, INVALID_PARAMS, why),
        }),
        _ if tasks_method && state.tasks_enabled() => {
            let server = Arc::clone(&state.server);
            match method {
                "tasks/get" => spawn_request(state, id, out, running, batch, async move {
                    tasks::get(&server, &params).await
                }),
                "tasks/result" => spawn_request(state, id, out, running, batch, async move {
                    tasks::result(&server, &params).await
                }),
                "tasks/list" => spawn_request(state, id, out, running, batch, async move {
                    tasks::list(&server, &params).await
                }),
                _ => spawn_request(state, id, out, running, batch, async move {
                    tasks::cancel(&server, &params).await
                }),
            }
        }
        _ if tasks_method => now(error(
            &id,
            METHOD_NOT_FOUND,
            format!(
                "method not found: {method} (tasks need protocol revision {TASKS_VERSION}, negotiated through initialize)"
            ),
        )),
        other => now(error(
            &id,
            METHOD_NOT_FOUND,
            format!("method not found: {other}"),
        )),
    }
}

/// A request of the modern era (2026-07-28): `server/discover`, `tools/list`, `tools/call`.
/// `ping`, `logging/setLevel` and the core `tasks/*` are not part of that revision. Never part
/// of a batch (that revision has none).
fn modern(
    state: &Arc<State>,
    id: Value,
    method: &str,
    params: Value,
    m: Modern,
    out: &Outbox,
    running: &mut JoinSet<()>,
) -> Option<Answer> {
    let answer = match method {
        "server/discover" => result(&id, discover::discover(&m, INSTRUCTIONS)),
        "tools/list" => match check_cursor(&params) {
            Ok(()) => result(&id, discover::tools_list(&m, state.server.catalog())),
            Err(e) => e.to_response(&id),
        },
        "tools/call" => {
            state.start_janitor();
            return start_call(state, id, &params, Some(m), out, running, false);
        }
        other => error(
            &id,
            METHOD_NOT_FOUND,
            format!(
                "method not found: {other} (not part of protocol revision {})",
                m.version
            ),
        ),
    };
    Some(Answer::Now(answer))
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
    out: &Outbox,
    running: &mut JoinSet<()>,
    batch: bool,
    work: F,
) -> Option<Answer>
where
    F: Future<Output = Result<Value, RpcError>> + Send + 'static,
{
    let ticket = match state.admit(&id) {
        Ok(t) => t,
        Err(answer) => return Some(Answer::Now(answer)),
    };
    let (key, token) = match state.register(&id) {
        Ok(k) => k,
        Err(answer) => return Some(Answer::Now(answer)),
    };
    let (reply, later) = Reply::new(out.guarded(token.clone()), batch);
    let state = Arc::clone(state);
    running.spawn(async move {
        let Some(_slot) = ticket.start(&token).await else {
            state.calls().remove(&key);
            return;
        };
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
            reply.send(answer).await;
        }
    });
    later
}

/// Check a `tools/call` and start it (a run, or with `task` a 2025-11-25 task); a protocol error
/// to answer now otherwise. `modern` is the request's checked `_meta` in the 2026 era; `batch`
/// says the answer goes into a batch's array.
fn start_call(
    state: &Arc<State>,
    id: Value,
    params: &Value,
    modern: Option<Modern>,
    out: &Outbox,
    running: &mut JoinSet<()>,
    batch: bool,
) -> Option<Answer> {
    let refuse = |code: i64, message: String| Some(Answer::Now(error(&id, code, message)));
    let Some(p) = params.as_object() else {
        return refuse(INVALID_PARAMS, "tools/call params must be an object".into());
    };
    let Some(name) = p.get("name").and_then(Value::as_str) else {
        return refuse(INVALID_PARAMS, "tools/call needs a string \"name\"".into());
    };
    if !tools::known(name, state.server.catalog()) {
        return refuse(
            INVALID_PARAMS,
            format!(
                "unknown tool {name:?}; tools: {}",
                tools::names(state.server.catalog()).join(", ")
            ),
        );
    }
    let args: Map<String, Value> = match p.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return refuse(
                INVALID_PARAMS,
                format!("tools/call \"arguments\" must be an object, got {other}"),
            );
        }
    };
    // `task` only means something where Tasks were negotiated; elsewhere the spec says to
    // process the request normally, ignoring it
    let as_task = match p.get("task") {
        Some(task) if !task.is_null() && modern.is_none() && state.tasks_enabled() => {
            if !task.is_object() {
                return refuse(
                    INVALID_PARAMS,
                    format!(
                        "tools/call \"task\" must be an object like {{\"ttl\": 60000}}, got {task}"
                    ),
                );
            }
            if tools::task_support(name) != "optional" {
                return refuse(
                    METHOD_NOT_FOUND,
                    format!(
                        "tool {name} cannot run as a task (execution.taskSupport is \"forbidden\"); call it without \"task\""
                    ),
                );
            }
            true
        }
        _ => false,
    };
    let ticket = match state.admit(&id) {
        Ok(t) => t,
        Err(answer) => return Some(Answer::Now(answer)),
    };
    let (key, token) = match state.register(&id) {
        Ok(k) => k,
        Err(answer) => return Some(Answer::Now(answer)),
    };
    // everything this call sends is withdrawn the moment it is cancelled
    let out = out.guarded(token.clone());
    let relay = Relay::new(
        Arc::clone(&state.server),
        ProgressSink::from_params(params, &out),
        state.log_sink(modern.as_ref(), &out),
        token.clone(),
    );
    let (reply, later) = Reply::new(out, batch);
    let state = Arc::clone(state);
    if as_task {
        running.spawn(run_task(
            state,
            id,
            args,
            relay,
            (key, token, ticket),
            reply,
        ));
        return later;
    }
    let name = name.to_owned();
    running.spawn(async move {
        let Some(_slot) = ticket.start(&token).await else {
            state.calls().remove(&key);
            return;
        };
        let started = tokio::time::Instant::now();
        let answer = tools::call(&state.server, &name, args, relay, token.clone()).await;
        let answer = match &modern {
            Some(m) => m.finish(answer),
            None => answer,
        };
        let ours = state.calls().remove(&key).is_some();
        if ours && !token.is_cancelled() {
            tracing::info!(
                tool = %name,
                id = %key,
                ms = started.elapsed().as_millis(),
                is_error = answer["isError"].as_bool().unwrap_or(false),
                status = answer["structuredContent"]["status"].as_str().unwrap_or("-"),
                "tools/call answered"
            );
            reply.send(result(&id, answer)).await;
        } else {
            tracing::info!(tool = %name, id = %key, "tools/call cancelled: no response");
        }
    });
    later
}

/// A task-augmented `execute_droid_task` (registered as `key` with `token`): submit it, answer
/// the `CreateTaskResult`, then relay the task's progress and status until it ends (or the
/// server stops).
async fn run_task(
    state: Arc<State>,
    id: Value,
    args: Map<String, Value>,
    mut relay: Relay,
    (key, token, ticket): (String, CancellationToken, Ticket),
    reply: Reply,
) {
    // the slot is held while the task is created, not while it is watched afterwards
    let created = match ticket.start(&token).await {
        Some(_slot) => tokio::select! {
            created = tasks::create(&state.server, args, &relay) => Some(created),
            () = token.cancelled() => None,
        },
        None => None,
    };
    let ours = state.calls().remove(&key).is_some();
    match created {
        Some(Ok((answer, task_id))) if ours => {
            reply.send(result(&id, answer)).await;
            // the request is answered: on a transport with a stream per request that stream is
            // over, so the task's progress and status go to the session's own output (stdio:
            // the same one)
            relay.redirect(&state.out.guarded(token));
            tasks::watch(
                Arc::clone(&state.server),
                task_id,
                relay,
                state.out.clone(),
                state.closing.clone(),
            )
            .await;
        }
        Some(Err(e)) if ours => reply.send(e.to_response(&id)).await,
        Some(_) | None => {}
    }
}
