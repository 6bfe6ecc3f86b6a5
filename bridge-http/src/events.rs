//! `GET /tasks/{id}/events`: server-sent events. What the store holds is replayed first (each
//! event with `id: <seq>`, so a client that reconnects with `Last-Event-ID` — or `?after=N` —
//! gets only what it missed), then new events as the supervisor records them, and the stream
//! ends with `event: result` carrying the ExecutionResult. A `: keep-alive` comment after
//! `stream_keep_alive` of quiet (15 s by default) keeps proxies and clients from timing out a
//! quiet run. A stream lives at most `stream_max_life` (1 h by default): it then ends with
//! `id: N` and `event: resume` (data `{"after": N, "message": …}`, N the last event sent), and
//! the client reconnects with `Last-Event-ID: N` (EventSource does so by itself) — so a client
//! that never goes away does not hold its connection forever.
//!
//! Streams are bounded: at most `max_streams` in all and `max_streams_per_task` per task; one
//! more is answered 429 `too_many_streams` with `Retry-After`. A stream is also a long request
//! (see `conns`): past the connection reserve it is answered 503 `connections_reserved`.
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

use crate::conns::Long;
use crate::reply::{Body, connections_reserved, error, retry_later};
use crate::state::Bridge;
use crate::streams::{StreamPlace, TooMany};
use crate::task_routes::{engine_error, store};

/// How often the event log is looked at.
const POLL: Duration = Duration::from_millis(200);

/// What a stream holds while it is open, and its timing.
struct Life {
    _place: StreamPlace,
    _long: Long,
    keep_alive: Duration,
    max_life: Duration,
}

/// A body fed by a channel: each message is one frame; the body ends when the sender is gone.
/// (`/mcp`'s event streams are made of it too.)
pub(crate) struct ChannelBody(pub(crate) mpsc::Receiver<Bytes>);

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
    let cfg = bridge.config();
    let place = match bridge.streams().open(id) {
        Ok(p) => p,
        Err(too_many) => {
            let message = match too_many {
                TooMany::Total(n) => format!(
                    "{n} event streams are open, as many as this bridge serves \
                     (max_streams); retry later"
                ),
                TooMany::Task(n) => format!(
                    "{n} event streams of task {id} are open, as many as one task gets \
                     (max_streams_per_task); close one or retry later"
                ),
            };
            return retry_later(
                StatusCode::TOO_MANY_REQUESTS,
                "too_many_streams",
                message,
                cfg.retry_after,
            );
        }
    };
    let Some(long) = bridge.conns().long() else {
        return connections_reserved(bridge.conns().long_cap(), cfg.retry_after);
    };
    let life = Life {
        _place: place,
        _long: long,
        keep_alive: cfg.stream_keep_alive,
        max_life: cfg.stream_max_life,
    };
    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(feed(
        tasks,
        id.to_owned(),
        after,
        tx,
        bridge.closing().clone(),
        life,
    ));
    let mut res = Response::new(ChannelBody(rx).boxed());
    *res.status_mut() = StatusCode::OK;
    let h = res.headers_mut();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

/// The frame that ends a stream at its maximum life: where to resume.
fn resume(after: u64) -> Bytes {
    let data = serde_json::json!({
        "after": after,
        "message": format!(
            "this stream reached its maximum life; reconnect with Last-Event-ID: {after} \
             for the events after it"
        ),
    });
    frame(Some(after), "resume", &data)
}

/// Send the task's events after `after`, then the new ones, then the result; or, once
/// `life.max_life` is over, [`resume`].
async fn feed(
    tasks: Tasks,
    id: String,
    mut after: u64,
    tx: mpsc::Sender<Bytes>,
    closing: CancellationToken,
    life: Life,
) {
    let born = tokio::time::Instant::now();
    let mut quiet = born;
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
        if quiet.elapsed() >= life.keep_alive {
            if tx
                .send(Bytes::from_static(b": keep-alive\n\n"))
                .await
                .is_err()
            {
                return;
            }
            quiet = tokio::time::Instant::now();
        }
        // after the keep-alive: a stream that reaches its end while quiet has sent one
        if born.elapsed() >= life.max_life {
            let _ = tx.send(resume(after)).await;
            return;
        }
        let wake = POLL.min(life.keep_alive);
        tokio::select! {
            () = tokio::time::sleep(wake) => {}
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
        let r = resume(5);
        let text = std::str::from_utf8(&r).unwrap();
        assert!(
            text.starts_with("id: 5\nevent: resume\ndata: {\"after\":5,"),
            "{text}"
        );
        assert!(text.ends_with("\n\n"), "{text}");
    }
}
