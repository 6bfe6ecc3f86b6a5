//! `GET /tasks/{id}/events`: server-sent events. What the store holds is replayed first (each
//! event with `id: <seq>`, so a client that reconnects with `Last-Event-ID` — or `?after=N` —
//! gets only what it missed), then new events as the supervisor records them, and the stream
//! ends with `event: result` carrying the ExecutionResult. A comment line every 15 s keeps
//! proxies and clients from timing out a quiet run.
//!
//! The supervisor is another process, so new events are found by reading the task's event log
//! every 200 ms (a few hundred bytes per look).

use std::convert::Infallible;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use droid_exec::Tasks;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, HeaderValue};
use http::{HeaderMap, Response, StatusCode};
use http_body::Frame;
use http_body_util::BodyExt;
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::reply::{Body, error};
use crate::state::Bridge;
use crate::task_routes::{engine_error, store};

/// How often the event log is looked at.
const POLL: Duration = Duration::from_millis(200);
/// Longest quiet time before a keep-alive comment.
const KEEP_ALIVE: Duration = Duration::from_secs(15);

/// A body fed by a channel: each message is one frame; the body ends when the sender is gone.
struct ChannelBody(mpsc::Receiver<Bytes>);

impl http_body::Body for ChannelBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        self.0.poll_recv(cx).map(|m| m.map(|b| Ok(Frame::data(b))))
    }
}

/// One SSE frame.
fn frame(id: Option<u64>, event: &str, data: &Value) -> Bytes {
    let mut s = String::new();
    if let Some(id) = id {
        s.push_str(&format!("id: {id}\n"));
    }
    s.push_str(&format!("event: {event}\ndata: {data}\n\n"));
    Bytes::from(s)
}

/// Where to resume: `Last-Event-ID`, else `?after=N`, else the start.
fn resume_after(headers: &HeaderMap, query: Option<&str>) -> Result<u64, String> {
    if let Some(v) = headers.get("last-event-id") {
        return v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| "Last-Event-ID must be an event number".to_owned());
    }
    match query.filter(|q| !q.is_empty()).map(|q| q.split_once('=')) {
        None => {}
        Some(Some(("after", v))) => {
            return v
                .parse()
                .map_err(|_| format!("after must be an event number, got {v:?}"));
        }
        Some(_) => {
            return Err(format!(
                "unknown query {:?}; use after=N",
                query.unwrap_or("")
            ));
        }
    }
    Ok(0)
}

pub(crate) async fn events(
    bridge: &Bridge,
    id: &str,
    headers: &HeaderMap,
    query: Option<&str>,
) -> Response<Body> {
    let tasks = match store(bridge) {
        Ok(t) => t.clone(),
        Err(r) => return r,
    };
    if let Err(e) = tasks.status(id).await {
        return engine_error(&e);
    }
    let after = match resume_after(headers, query) {
        Ok(n) => n,
        Err(msg) => return error(StatusCode::BAD_REQUEST, "bad_query", msg),
    };
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(feed(
        tasks,
        id.to_owned(),
        after,
        tx,
        bridge.closing().clone(),
    ));
    let mut res = Response::new(ChannelBody(rx).boxed());
    *res.status_mut() = StatusCode::OK;
    let h = res.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// Send the task's events after `after`, then the new ones, then the result.
async fn feed(
    tasks: Tasks,
    id: String,
    mut after: u64,
    tx: mpsc::Sender<Bytes>,
    closing: CancellationToken,
) {
    let mut quiet = tokio::time::Instant::now();
    let mut cursor = droid_exec::EventCursor::after(after);
    loop {
        // the state first: events recorded before a finish are all read below
        let record = match tasks.status(&id).await {
            Ok(r) => r,
            Err(e) => {
                let v = serde_json::json!({"error": e.to_string()});
                let _ = tx.send(frame(None, "error", &v)).await;
                return;
            }
        };
        let t = tasks.clone();
        let i = id.clone();
        let (batch, moved) = tokio::task::spawn_blocking(move || {
            let batch = t.events_from(&i, &mut cursor).unwrap_or_default();
            (batch, cursor)
        })
        .await
        .unwrap_or((Vec::new(), cursor));
        cursor = moved;
        for ev in batch {
            let seq = ev.get("seq").and_then(Value::as_u64).unwrap_or(after);
            let kind = ev.get("type").and_then(Value::as_str).unwrap_or("event");
            let kind = kind.to_owned();
            if tx.send(frame(Some(seq), &kind, &ev)).await.is_err() {
                return;
            }
            after = after.max(seq);
            quiet = tokio::time::Instant::now();
        }
        if let Some(result) = record.result {
            let v = serde_json::to_value(&result).unwrap_or(Value::Null);
            let _ = tx.send(frame(None, "result", &v)).await;
            return;
        }
        if quiet.elapsed() >= KEEP_ALIVE {
            if tx
                .send(Bytes::from_static(b": keep-alive\n\n"))
                .await
                .is_err()
            {
                return;
            }
            quiet = tokio::time::Instant::now();
        }
        tokio::select! {
            () = tokio::time::sleep(POLL) => {}
            () = closing.cancelled() => return,
            () = tx.closed() => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_and_resume_points() {
        let f = frame(Some(3), "message", &serde_json::json!({"a": 1}));
        assert_eq!(&f[..], b"id: 3\nevent: message\ndata: {\"a\":1}\n\n");
        let mut h = HeaderMap::new();
        assert_eq!(resume_after(&h, None), Ok(0));
        assert_eq!(resume_after(&h, Some("after=7")), Ok(7));
        assert!(resume_after(&h, Some("after=x")).is_err());
        assert!(resume_after(&h, Some("from=1")).is_err());
        h.insert("last-event-id", HeaderValue::from_static("12"));
        assert_eq!(resume_after(&h, Some("after=7")), Ok(12));
    }
}
