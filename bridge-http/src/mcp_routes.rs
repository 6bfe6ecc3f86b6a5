//! `/mcp`: MCP over Streamable HTTP, for remote clients (docs/protocol.md#mcp-over-http). The
//! checks every route passes (`guard`: Host, browser Origin, bearer token) come first; this
//! module is the transport, and the MCP server behind it is the one stdio serves
//! ([`crate::mcp`]).
//!
//! Both eras of the server, decided per POST:
//! - **legacy** (2024-11-05 … 2025-11-25, the 2025-11-25 transport): `initialize` opens a session
//!   whose id comes back in `Mcp-Session-Id`; every later request names it (400 without, 404
//!   for one that ended). A request is answered with `application/json` when its answer is
//!   known at once, else with an event stream (`text/event-stream`: its progress and log
//!   notifications, then its answer, then the stream ends). `GET` opens the session's own
//!   stream (a task's status once its `CreateTaskResult` was sent), one at a time (409 for a
//!   second); `DELETE` ends the session and cancels what it runs. A stream that drops does not
//!   cancel its request (the transport's rule: a client cancels with `notifications/cancelled`
//!   or DELETE), and no stream is resumable: events carry no id, so clients do not try to
//!   resume one with `Last-Event-ID`.
//! - **modern** (2026-07-28): a request whose body names that revision in `_meta` (or
//!   `server/discover`) is served statelessly: no session, `MCP-Protocol-Version`, `Mcp-Method`
//!   and, for `tools/call`, `Mcp-Name` must match the body (400 with `-32020` otherwise),
//!   an unsupported revision is a 400 with `-32022`, an unknown method a 404 with `-32601`, and
//!   closing the response stream cancels the request.
//!
//! `MCP-Protocol-Version` naming no revision the server speaks is a 400 in both eras. The
//! transport's own refusals carry a JSON-RPC error with a `null` id, as the transport allows;
//! the checks shared with every route keep the bridge's error object. A client that accepts
//! only `application/json` gets the answer of a streamed request as one JSON object once it is
//! there (its notifications dropped); one that accepts neither is refused with 406.
//!
//! Event streams are long requests (`conns`): past the connection reserve a streamed answer is
//! refused 503 and its request cancelled. A quiet stream gets a `: keep-alive` comment every
//! `stream_keep_alive`; a GET stream ends at `stream_max_life` (the client opens another).

use std::sync::Arc;

use bytes::Bytes;
use http::header::{ACCEPT, CONTENT_TYPE, HeaderName, HeaderValue};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::events::ChannelBody;
use crate::guard::require_json;
use crate::mcp::{McpMessages, McpPosted, McpServer, McpSession};
use crate::mcp_sessions::{Busy, Held, InFlight, LISTEN_CAPACITY, MAX_SESSIONS, Refused};
use crate::reply::{Body, connections_reserved, full, retry_later};
use crate::request_body;
use crate::state::Bridge;

const SESSION_ID: HeaderName = HeaderName::from_static("mcp-session-id");
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const MCP_METHOD: &str = "mcp-method";
const MCP_NAME: &str = "mcp-name";
/// Where a modern request names its revision.
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";

/// JSON-RPC codes of the transport's refusals.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
/// A session id that names no held session (the TypeScript SDK's server uses the same).
const SESSION_NOT_FOUND: i64 = -32001;
/// 2026-07-28: the headers do not match the body, or a required one is missing.
const HEADER_MISMATCH: i64 = -32020;
/// 2026-07-28: a client capability the request needs was not declared.
const MISSING_CAPABILITY: i64 = -32021;
/// 2026-07-28: a protocol revision not served.
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

const KEEP_ALIVE: &[u8] = b": keep-alive\n\n";
/// Frames waiting for a slow reader of an event stream.
const STREAM_CAPACITY: usize = 16;

/// A JSON-RPC error with a `null` id, answered with `status`.
fn refusal(status: StatusCode, code: i64, message: impl Into<String>) -> Response<Body> {
    refusal_with(status, code, message, None)
}

fn refusal_with(
    status: StatusCode,
    code: i64,
    message: impl Into<String>,
    data: Option<Value>,
) -> Response<Body> {
    let mut error = json!({"code": code, "message": message.into()});
    if let Some(d) = data {
        error["data"] = d;
    }
    json_answer(
        status,
        &json!({"jsonrpc": "2.0", "id": null, "error": error}),
    )
}

fn json_answer(status: StatusCode, v: &Value) -> Response<Body> {
    let mut text = v.to_string().into_bytes();
    text.push(b'\n');
    let mut res = Response::new(full(text));
    *res.status_mut() = status;
    res.headers_mut()
        .insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    res
}

/// 404 when this bridge was built without an MCP server.
fn not_served() -> Response<Body> {
    crate::reply::error(
        StatusCode::NOT_FOUND,
        "not_found",
        "this bridge serves no MCP endpoint (it was built without an MCP server); \
         `droid-executor serve` serves one on /mcp",
    )
}

/// The media types a client takes, from `Accept` (none: both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Accept {
    json: bool,
    events: bool,
}

impl Accept {
    fn of(headers: &HeaderMap) -> Self {
        let mut values = headers.get_all(ACCEPT).iter().peekable();
        if values.peek().is_none() {
            return Self {
                json: true,
                events: true,
            };
        }
        let mut a = Self {
            json: false,
            events: false,
        };
        for range in values
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
        {
            let media = range
                .split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase();
            match media.as_str() {
                "*/*" => {
                    a.json = true;
                    a.events = true;
                }
                "application/json" | "application/*" => a.json = true,
                "text/event-stream" | "text/*" => a.events = true,
                _ => {}
            }
        }
        a
    }
}

/// A header's value as text; `Err` with the 400 to answer when it is not text.
fn header<'h>(headers: &'h HeaderMap, name: &str) -> Result<Option<&'h str>, Response<Body>> {
    match headers.get(name) {
        None => Ok(None),
        Some(v) => v.to_str().map(|s| Some(s.trim())).map_err(|_| {
            refusal(
                StatusCode::BAD_REQUEST,
                INVALID_REQUEST,
                format!("the {name} header is not visible ASCII"),
            )
        }),
    }
}

/// The revision named in `MCP-Protocol-Version`, checked to be one the server speaks.
fn named_revision<'h>(
    headers: &'h HeaderMap,
    server: &dyn McpServer,
) -> Result<Option<&'h str>, Response<Body>> {
    let Some(v) = header(headers, PROTOCOL_VERSION)? else {
        return Ok(None);
    };
    let legacy = server.legacy_revisions();
    let modern = server.modern_revisions();
    if legacy.contains(&v) || modern.contains(&v) {
        return Ok(Some(v));
    }
    let supported: Vec<&str> = modern.iter().chain(legacy).copied().collect();
    Err(refusal_with(
        StatusCode::BAD_REQUEST,
        UNSUPPORTED_PROTOCOL_VERSION,
        format!(
            "MCP-Protocol-Version {v:?} is not a revision this server speaks ({})",
            supported.join(", ")
        ),
        Some(json!({"supported": supported, "requested": v})),
    ))
}

/// The held session `Mcp-Session-Id` names; the 400 or 404 to answer otherwise.
fn session_of(bridge: &Bridge, headers: &HeaderMap) -> Result<Arc<Held>, Response<Body>> {
    let Some(id) = header(headers, SESSION_ID.as_str())? else {
        return Err(refusal(
            StatusCode::BAD_REQUEST,
            INVALID_REQUEST,
            "this request needs the Mcp-Session-Id header that its session's initialize was \
             answered with; a new client sends initialize first (or names protocol revision \
             2026-07-28 in each request's _meta, which needs no session)",
        ));
    };
    bridge.mcp().get(id).ok_or_else(|| {
        refusal(
            StatusCode::NOT_FOUND,
            SESSION_NOT_FOUND,
            format!(
                "session {id:?} is not open (it was deleted, closed after an hour idle to make \
                 room, or the bridge restarted): start a new one with initialize"
            ),
        )
    })
}

/// The id of `msg` when it is a request (a JSON-RPC object with a method and an id).
fn request_id(msg: &Value) -> Option<&Value> {
    msg.get("method").and(msg.get("id"))
}

/// Whether `msg` is a request's answer (a batch's: the array): the last message of its stream.
fn is_answer(msg: &Value) -> bool {
    msg.is_array()
        || (msg.get("method").is_none()
            && (msg.get("result").is_some() || msg.get("error").is_some()))
}

/// The code of `answer` when it is a JSON-RPC error.
fn error_code(answer: &Value) -> Option<i64> {
    answer.get("error")?.get("code")?.as_i64()
}

/// One event of a stream: a JSON-RPC message.
fn frame(msg: &Value) -> Bytes {
    Bytes::from(format!("event: message\ndata: {msg}\n\n"))
}

fn event_stream(rx: mpsc::Receiver<Bytes>) -> Response<Body> {
    let mut res = Response::new(ChannelBody(rx).boxed());
    let h = res.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    // reverse proxies (nginx) must pass each event on at once
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    res
}

/// How a request's stream ending early is taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum OnDrop {
    /// Legacy: the request goes on (its client cancels with `notifications/cancelled`).
    Continue,
    /// Modern: closing the stream cancels the request, and the one-request session is closed
    /// once the exchange is over.
    CancelAndClose,
}

/// What an exchange holds until its answer is sent.
struct Exchange {
    session: Arc<dyn McpSession>,
    request: Option<Value>,
    on_drop: OnDrop,
    /// The held session's exchange going, for legacy sessions.
    _busy: Option<Busy>,
    _counted: InFlight,
}

impl Exchange {
    /// The exchange is over: `cut` says whether the client went before the answer.
    fn end(self, cut: bool) {
        if self.on_drop == OnDrop::CancelAndClose {
            if cut && let Some(id) = &self.request {
                self.session.cancel(id);
            }
            let session = Arc::clone(&self.session);
            tokio::spawn(async move { session.close().await });
        }
    }
}

/// A cut-short exchange is ended when dropped (hyper drops an answer whose client went away).
struct EndOnDrop(Option<Exchange>);

impl EndOnDrop {
    fn done(mut self) {
        if let Some(x) = self.0.take() {
            x.end(false);
        }
    }
}

impl Drop for EndOnDrop {
    fn drop(&mut self) {
        if let Some(x) = self.0.take() {
            x.end(true);
        }
    }
}

/// `POST /mcp`.
pub(crate) async fn post<B>(bridge: &Arc<Bridge>, req: Request<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let Some(server) = bridge.mcp().server().cloned() else {
        return not_served();
    };
    if let Some(r) = require_json(req.headers()) {
        return r;
    }
    let accept = Accept::of(req.headers());
    if !accept.json && !accept.events {
        return refusal(
            StatusCode::NOT_ACCEPTABLE,
            INVALID_REQUEST,
            "the client must accept application/json and text/event-stream (the Accept header \
             of Streamable HTTP)",
        );
    }
    let headers = req.headers().clone();
    let cfg = bridge.config();
    let bytes = match request_body::read(req, cfg.body_limit, cfg.body_timeout).await {
        Ok(b) => b,
        Err(r) => return r,
    };
    let message: Value = match serde_json::from_slice(&bytes) {
        Ok(v) => v,
        Err(e) => {
            return refusal(
                StatusCode::BAD_REQUEST,
                PARSE_ERROR,
                format!("parse error: {e}"),
            );
        }
    };
    let named = match named_revision(&headers, server.as_ref()) {
        Ok(v) => v,
        Err(r) => return r,
    };
    let body_revision = message
        .get("params")
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(VERSION_KEY));
    let method = message.get("method").and_then(Value::as_str);
    let modern = method == Some("server/discover")
        || body_revision.is_some()
        || named.is_some_and(|v| server.modern_revisions().contains(&v));
    if modern && message.is_object() {
        if request_id(&message).is_some()
            && let Err(r) = check_mirrored(&headers, &message)
        {
            return r;
        }
        let session: Arc<dyn McpSession> = Arc::from(server.open());
        let x = Exchange {
            session,
            request: request_id(&message).cloned(),
            on_drop: OnDrop::CancelAndClose,
            _busy: None,
            _counted: bridge.mcp().exchange(),
        };
        return answer(bridge, message, accept, x, true).await;
    }
    if method == Some("initialize") && request_id(&message).is_some() {
        let (id, held) = match bridge.mcp().create(server.as_ref()) {
            Ok(s) => s,
            Err(Refused::Full) => {
                return retry_later(
                    StatusCode::SERVICE_UNAVAILABLE,
                    "mcp_sessions_full",
                    format!(
                        "{} MCP sessions are open and busy, as many as this bridge holds; \
                         retry later",
                        MAX_SESSIONS
                    ),
                    cfg.retry_after,
                );
            }
            Err(Refused::NoId(e)) => {
                return crate::reply::error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    format!("cannot make a session id (reading /dev/urandom: {e})"),
                );
            }
        };
        let x = Exchange {
            session: Arc::clone(&held.session),
            request: request_id(&message).cloned(),
            on_drop: OnDrop::Continue,
            _busy: Some(held.busy()),
            _counted: bridge.mcp().exchange(),
        };
        let mut res = answer(bridge, message, accept, x, false).await;
        if res.status().is_success() {
            if let Ok(v) = HeaderValue::from_str(&id) {
                res.headers_mut().insert(SESSION_ID, v);
            }
        } else {
            // an initialize that failed opens nothing
            if let Some(h) = bridge.mcp().remove(&id) {
                tokio::spawn(async move { h.close().await });
            }
        }
        return res;
    }
    let held = match session_of(bridge, &headers) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let x = Exchange {
        session: Arc::clone(&held.session),
        request: request_id(&message).cloned(),
        on_drop: OnDrop::Continue,
        _busy: Some(held.busy()),
        _counted: bridge.mcp().exchange(),
    };
    answer(bridge, message, accept, x, false).await
}

/// Revision 2026-07-28's mirrored headers: `MCP-Protocol-Version` and `Mcp-Method` on every
/// request, `Mcp-Name` on `tools/call`, `resources/read` and `prompts/get`, each equal to the
/// body's value (`Mcp-Name` possibly in the `=?base64?…?=` form).
fn check_mirrored(headers: &HeaderMap, msg: &Value) -> Result<(), Response<Body>> {
    let mismatch = |m: String| {
        Err(refusal(
            StatusCode::BAD_REQUEST,
            HEADER_MISMATCH,
            format!("header mismatch: {m}"),
        ))
    };
    let params = msg.get("params");
    let body_revision = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get(VERSION_KEY))
        .and_then(Value::as_str);
    let method = msg.get("method").and_then(Value::as_str).unwrap_or("");
    match (header(headers, PROTOCOL_VERSION)?, body_revision) {
        (None, _) => return mismatch("the MCP-Protocol-Version header is required".into()),
        (Some(h), Some(b)) if h == b => {}
        (Some(h), Some(b)) => {
            return mismatch(format!(
                "MCP-Protocol-Version header value {h:?} does not match body value {b:?}"
            ));
        }
        // server/discover without _meta: the dispatcher names what is missing
        (Some(_), None) if method == "server/discover" => {}
        (Some(h), None) => {
            return mismatch(format!(
                "MCP-Protocol-Version header value {h:?}, but the body names no revision in \
                 params._meta[\"{VERSION_KEY}\"]"
            ));
        }
    }
    match header(headers, MCP_METHOD)? {
        None => return mismatch("the Mcp-Method header is required".into()),
        Some(h) if h == method => {}
        Some(h) => {
            return mismatch(format!(
                "Mcp-Method header value {h:?} does not match body value {method:?}"
            ));
        }
    }
    let named = match method {
        "tools/call" | "prompts/get" => params.and_then(|p| p.get("name")),
        "resources/read" => params.and_then(|p| p.get("uri")),
        _ => return Ok(()),
    };
    let Some(body_name) = named.and_then(Value::as_str) else {
        // a missing name is the dispatcher's -32602
        return Ok(());
    };
    let Some(h) = header(headers, MCP_NAME)? else {
        return mismatch("the Mcp-Name header is required".into());
    };
    let shown = match h
        .strip_prefix("=?base64?")
        .and_then(|rest| rest.strip_suffix("?="))
    {
        Some(encoded) => match base64_decode(encoded).and_then(|b| String::from_utf8(b).ok()) {
            Some(s) => s,
            None => return mismatch(format!("Mcp-Name header value {h:?} is not valid base64")),
        },
        None => h.to_owned(),
    };
    if shown != body_name {
        return mismatch(format!(
            "Mcp-Name header value {shown:?} does not match body value {body_name:?}"
        ));
    }
    Ok(())
}

/// Standard base64 (with or without padding); `None` for anything else.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let s = s.trim_end_matches('=').as_bytes();
    if s.len() % 4 == 1 {
        return None;
    }
    let mut out = Vec::with_capacity(s.len() * 3 / 4);
    for chunk in s.chunks(4) {
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        let bytes = n.to_be_bytes();
        out.extend_from_slice(&bytes[1..chunk.len()]);
    }
    Some(out)
}

/// The HTTP status of an answer known at once: a refusal the transport makes an HTTP error
/// (modern: an unsupported revision or a missing capability 400, an unknown method 404; both
/// eras: a message that could not be taken at all, answered with a `null` id, 400), else 200.
fn status_of(answer: &Value, modern: bool) -> StatusCode {
    let code = error_code(answer);
    if modern {
        match code {
            Some(UNSUPPORTED_PROTOCOL_VERSION | MISSING_CAPABILITY | HEADER_MISMATCH) => {
                return StatusCode::BAD_REQUEST;
            }
            Some(METHOD_NOT_FOUND) => return StatusCode::NOT_FOUND,
            _ => {}
        }
    }
    if code.is_some() && answer.get("id").is_some_and(Value::is_null) {
        return StatusCode::BAD_REQUEST;
    }
    StatusCode::OK
}

/// Post `message` to the exchange's session and answer: 202 for nothing, JSON for an answer
/// known at once, an event stream (or JSON, for a client that takes only JSON) for the rest.
async fn answer(
    bridge: &Arc<Bridge>,
    message: Value,
    accept: Accept,
    x: Exchange,
    modern: bool,
) -> Response<Body> {
    let session = Arc::clone(&x.session);
    let request = x.request.clone();
    let x = EndOnDrop(Some(x));
    match session.post(message).await {
        McpPosted::Nothing => {
            x.done();
            let mut res = Response::new(full(Bytes::new()));
            *res.status_mut() = StatusCode::ACCEPTED;
            res
        }
        McpPosted::Answer(v) => {
            x.done();
            json_answer(status_of(&v, modern), &v)
        }
        McpPosted::Stream(mut messages) => {
            // a long request either way: the answer may take as long as a run
            let Some(long) = bridge.conns().long() else {
                // its answer could go nowhere: the request is cancelled (and a stateless
                // session closed, as `x` is dropped)
                if let Some(id) = &request {
                    session.cancel(id);
                }
                return connections_reserved(
                    bridge.conns().long_cap(),
                    bridge.config().retry_after,
                );
            };
            if !accept.events {
                // the answer alone, once it is there; going away meanwhile drops `x`
                let answer = loop {
                    match messages.next().await {
                        None => break None,
                        Some(v) if is_answer(&v) => break Some(v),
                        Some(_) => {}
                    }
                };
                drop(long);
                x.done();
                return match answer {
                    Some(v) => json_answer(status_of(&v, modern), &v),
                    None => {
                        let mut res = Response::new(full(Bytes::new()));
                        *res.status_mut() = StatusCode::ACCEPTED;
                        res
                    }
                };
            }
            let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
            let keep_alive = bridge.config().stream_keep_alive;
            tokio::spawn(async move {
                let _long = long;
                let cut = feed(messages, &tx, keep_alive).await;
                if cut {
                    drop(x);
                } else {
                    x.done();
                }
            });
            event_stream(rx)
        }
    }
}

/// Send `messages` as events until the answer; `true` when the client went away first.
async fn feed(
    mut messages: Box<dyn McpMessages>,
    tx: &mpsc::Sender<Bytes>,
    keep_alive: std::time::Duration,
) -> bool {
    loop {
        let next = tokio::select! {
            m = messages.next() => m,
            () = tx.closed() => return true,
            () = tokio::time::sleep(keep_alive) => {
                if tx.send(Bytes::from_static(KEEP_ALIVE)).await.is_err() {
                    return true;
                }
                continue;
            }
        };
        let Some(msg) = next else {
            // cancelled: no answer comes
            return false;
        };
        if tx.send(frame(&msg)).await.is_err() {
            return true;
        }
        if is_answer(&msg) {
            return false;
        }
    }
}

/// `GET /mcp`: the session's own stream.
pub(crate) async fn listen(bridge: &Arc<Bridge>, headers: &HeaderMap) -> Response<Body> {
    let Some(server) = bridge.mcp().server().cloned() else {
        return not_served();
    };
    if !Accept::of(headers).events {
        return refusal(
            StatusCode::NOT_ACCEPTABLE,
            INVALID_REQUEST,
            "GET /mcp opens an event stream: the client must accept text/event-stream",
        );
    }
    if let Err(r) = named_revision(headers, server.as_ref()) {
        return r;
    }
    let held = match session_of(bridge, headers) {
        Ok(h) => h,
        Err(r) => return r,
    };
    let cfg = bridge.config();
    let Some(long) = bridge.conns().long() else {
        return connections_reserved(bridge.conns().long_cap(), cfg.retry_after);
    };
    let (to_stream, mut own) = mpsc::channel(LISTEN_CAPACITY);
    if !held.listen(to_stream.clone()) {
        return refusal(
            StatusCode::CONFLICT,
            INVALID_REQUEST,
            "this session's GET stream is open already: a session has one (close it first)",
        );
    }
    let (tx, rx) = mpsc::channel(STREAM_CAPACITY);
    let keep_alive = cfg.stream_keep_alive;
    let max_life = cfg.stream_max_life;
    let closing = bridge.closing().clone();
    let busy = held.busy();
    tokio::spawn(async move {
        let _long = long;
        let _busy = busy;
        let end = tokio::time::Instant::now() + max_life;
        loop {
            let bytes = tokio::select! {
                m = own.recv() => match m {
                    Some(msg) => frame(&msg),
                    None => break,
                },
                () = tokio::time::sleep(keep_alive) => Bytes::from_static(KEEP_ALIVE),
                () = tokio::time::sleep_until(end) => break,
                () = tx.closed() => break,
                () = closing.cancelled() => break,
                () = held.gone().cancelled() => break,
            };
            if tx.send(bytes).await.is_err() {
                break;
            }
        }
        held.unlisten(&to_stream);
    });
    event_stream(rx)
}

/// `DELETE /mcp`: end the session, cancelling what it runs.
pub(crate) async fn delete(bridge: &Arc<Bridge>, headers: &HeaderMap) -> Response<Body> {
    let Some(server) = bridge.mcp().server().cloned() else {
        return not_served();
    };
    if let Err(r) = named_revision(headers, server.as_ref()) {
        return r;
    }
    if let Err(r) = session_of(bridge, headers) {
        return r;
    }
    let id = headers
        .get(SESSION_ID)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
        .unwrap_or_default();
    if let Some(held) = bridge.mcp().remove(id) {
        held.close().await;
    }
    let mut res = Response::new(full(Bytes::new()));
    *res.status_mut() = StatusCode::NO_CONTENT;
    res
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_str(v).unwrap());
        }
        h
    }

    #[test]
    fn accept_headers() {
        let both = Accept {
            json: true,
            events: true,
        };
        assert_eq!(Accept::of(&HeaderMap::new()), both);
        assert_eq!(
            Accept::of(&headers(&[(
                "accept",
                "application/json, text/event-stream"
            )])),
            both
        );
        assert_eq!(Accept::of(&headers(&[("accept", "*/*")])), both);
        assert_eq!(
            Accept::of(&headers(&[("accept", "application/json;q=0.9")])),
            Accept {
                json: true,
                events: false
            }
        );
        assert_eq!(
            Accept::of(&headers(&[("accept", "text/html")])),
            Accept {
                json: false,
                events: false
            }
        );
    }

    #[test]
    fn base64_as_the_transport_encodes_names() {
        assert_eq!(
            base64_decode("SGVsbG8sIOS4lueVjA==").as_deref(),
            Some("Hello, 世界".as_bytes())
        );
        assert_eq!(
            base64_decode("IHBhZGRlZCA=").as_deref(),
            Some(&b" padded "[..])
        );
        assert_eq!(
            base64_decode("bGluZTEKbGluZTI").as_deref(),
            Some(&b"line1\nline2"[..])
        );
        assert_eq!(base64_decode("a"), None);
        assert_eq!(base64_decode("a*bc"), None);
    }

    fn modern_call(name: &str) -> Value {
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": name, "arguments": {},
            "_meta": {VERSION_KEY: "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}},
        }})
    }

    #[test]
    fn modern_headers_must_mirror_the_body() {
        let msg = modern_call("ping");
        let ok = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "ping"),
        ];
        assert!(check_mirrored(&headers(&ok), &msg).is_ok());
        let encoded = [
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-name", "=?base64?cGluZw==?="),
        ];
        assert!(check_mirrored(&headers(&encoded), &msg).is_ok());
        for bad in [
            &ok[1..],
            &[ok[0], ok[1]][..],
            &[ok[0], ok[2]][..],
            &[("mcp-protocol-version", "2025-11-25"), ok[1], ok[2]][..],
            &[ok[0], ("mcp-method", "tools/list"), ok[2]][..],
            &[ok[0], ok[1], ("mcp-name", "ask")][..],
            &[ok[0], ok[1], ("mcp-name", "=?base64?*?=")][..],
        ] {
            let r = check_mirrored(&headers(bad), &msg).unwrap_err();
            assert_eq!(r.status(), 400, "{bad:?}");
        }
    }

    #[test]
    fn answers_and_their_statuses() {
        let err = |id: Value, code: i64| json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": "x"}});
        assert_eq!(
            status_of(&json!({"jsonrpc": "2.0", "id": 1, "result": {}}), true),
            200
        );
        assert_eq!(status_of(&err(json!(1), -32022), true), 400);
        assert_eq!(status_of(&err(json!(1), -32601), true), 404);
        assert_eq!(status_of(&err(json!(1), -32601), false), 200);
        assert_eq!(status_of(&err(json!(1), -32602), true), 200);
        assert_eq!(status_of(&err(Value::Null, -32600), false), 400);
        assert!(is_answer(&json!({"id": 1, "result": {}})));
        assert!(is_answer(&json!([{"id": 1, "result": {}}])));
        assert!(!is_answer(
            &json!({"method": "notifications/progress", "params": {}})
        ));
        assert_eq!(
            request_id(&json!({"id": 3, "method": "ping"})),
            Some(&json!(3))
        );
        assert_eq!(
            request_id(&json!({"method": "notifications/initialized"})),
            None
        );
        assert_eq!(request_id(&json!({"id": 3, "result": {}})), None);
    }
}
