//! The accept loop, one hyper HTTP/1.1 connection per client, the checks and routing of each
//! request, and graceful shutdown.
//!
//! Shutdown (the `shutdown` token: SIGTERM or SIGINT in `droid-executor serve`): from then on
//! every request is answered 503 with `Retry-After` (the listener stays open during the drain,
//! so clients get an answer rather than a refused connection), event streams end, sync runs (and
//! MCP requests being answered on `/mcp`) get `drain_grace` to finish and are then cancelled
//! (their clients get the `cancelled` result), every MCP session is closed, and once the last
//! one has answered the connections are closed and [`serve`] returns.
//! Background tasks are not touched: each lives in its own supervisor process.
//!
//! Connections are admitted by `conns` (idle ones shed when the table is full, a reserve left to
//! short requests); a connection counts as busy from its request head to the end of its answer.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{CACHE_CONTROL, CONNECTION, HeaderValue, X_CONTENT_TYPE_OPTIONS};
use http::{Request, Response};
use http_body::Frame;
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::DRAIN_GRACE;
use crate::conns::{Busy, Full};
use crate::execute::execute;
use crate::reply::{Body, full, shutting_down};
use crate::routes::Route;
use crate::state::Bridge;
use crate::{events, guard, health, mcp_routes, openapi, task_routes, worktree_routes};

/// Largest request head, request line included: hyper answers 431 beyond it. (Its read buffer
/// limit alone is not exact: a head that arrives in one large read can exceed it, up to about
/// twice the size, so the head's own limit is set as well.)
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Longest a shed connection gets to write the end of its last answer (a slow reader).
const SHED_FLUSH: Duration = Duration::from_secs(2);
/// Time cancelled runs get to stop (droid's kill grace plus clean-up) before the bridge gives
/// up waiting for them.
pub const CANCEL_BUDGET: Duration = Duration::from_secs(15);
/// Time answers get to reach their clients once the drain is over.
pub const FLUSH_BUDGET: Duration = Duration::from_secs(5);
/// What a supervisor adds to [`worst_case_drain`] before it SIGKILLs the bridge: the process's
/// own exit (the runtime winding down, blocking file reads finishing) and a loaded machine.
pub const STOP_MARGIN: Duration = Duration::from_secs(10);
/// How long a supervisor (`bridge stop`, pm2's `kill_timeout`, systemd's `TimeoutStopSec`) waits
/// after SIGTERM before SIGKILL for a bridge with the default drain grace:
/// [`worst_case_drain`]`(`[`DRAIN_GRACE`]`)` + [`STOP_MARGIN`] = 30 + 15 + 5 + 10 = 60 s. A
/// SIGKILL before the drain is over would leave sync runs' droid processes behind.
pub const STOP_TIMEOUT: Duration = worst_case_drain(DRAIN_GRACE).saturating_add(STOP_MARGIN);

/// The longest a bridge with `drain_grace` takes from SIGTERM to its exit: the grace, then
/// [`CANCEL_BUDGET`] for the cancelled runs to stop, then [`FLUSH_BUDGET`] for the answers.
pub const fn worst_case_drain(drain_grace: Duration) -> Duration {
    drain_grace
        .saturating_add(CANCEL_BUDGET)
        .saturating_add(FLUSH_BUDGET)
}

/// Serve `listener` until `shutdown` is cancelled and the drain is over.
pub async fn serve(listener: TcpListener, bridge: Arc<Bridge>, shutdown: CancellationToken) {
    let mut builder = http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(bridge.config().header_timeout)
        .max_header_size(MAX_HEAD_BYTES)
        .max_buf_size(MAX_HEAD_BYTES);
    // cancelled once the drain is over: every connection finishes its exchange and closes
    let closing = CancellationToken::new();
    {
        let bridge = Arc::clone(&bridge);
        let closing = closing.clone();
        tokio::spawn(async move {
            shutdown.cancelled().await;
            drain(&bridge).await;
            closing.cancel();
        });
    }
    loop {
        // never waits for a free slot: a full table sheds its oldest idle connection instead
        // (see `conns`), so a new client is answered even while every slot is held
        let (stream, peer) = tokio::select! {
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // EMFILE and friends: wait a little rather than spin
                    tracing::warn!("accept failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            () = closing.cancelled() => break,
        };
        let held = match bridge.conns().admit(peer.ip()) {
            Ok(h) => h,
            Err(full) => {
                refuse_connection(&bridge, &stream, full);
                continue;
            }
        };
        let local = stream.local_addr().unwrap_or(peer);
        let _ = stream.set_nodelay(true);
        let b = Arc::clone(&bridge);
        let held = Arc::new(held);
        let h = Arc::clone(&held);
        let service = service_fn(move |req: Request<Incoming>| {
            let b = Arc::clone(&b);
            let busy = h.busy();
            async move {
                let res = handle(&b, req, local).await;
                // the connection stays busy until the answer's body (an event stream: its whole
                // life) has been sent
                Ok::<_, Infallible>(res.map(|body| BusyBody { body, _busy: busy }.boxed()))
            }
        });
        let conn = builder.serve_connection(TokioIo::new(stream), service);
        let closing = closing.clone();
        tokio::spawn(async move {
            let mut conn = std::pin::pin!(conn);
            let ended = tokio::select! {
                r = conn.as_mut() => r,
                // shed to make room: it was idle. One that never had a request is closed at
                // once; after an exchange, the end of the last answer may still be in hyper's
                // buffer: it closes once that is written, or after SHED_FLUSH
                () = held.shed().cancelled() => {
                    if held.answered() {
                        conn.as_mut().graceful_shutdown();
                        let _ = tokio::time::timeout(SHED_FLUSH, conn).await;
                    }
                    return;
                }
                () = closing.cancelled() => {
                    conn.as_mut().graceful_shutdown();
                    conn.await
                }
            };
            if let Err(e) = ended {
                tracing::debug!("connection from {peer}: {e}");
            }
            drop(held);
        });
    }
    drop(listener);
    let flushed = async {
        while bridge.conns().held() > 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    if tokio::time::timeout(FLUSH_BUDGET, flushed).await.is_err() {
        tracing::warn!("some connections were still open after the drain; closing them");
    }
}

/// The raw answer to a connection no place was found for, written without waiting (it fits
/// in a fresh socket's buffer); the connection is then closed.
fn refuse_connection(bridge: &Bridge, stream: &TcpStream, full: Full) {
    let (code, message) = match full {
        Full::Total => (
            "connection_limit",
            "every connection this bridge holds is busy (max_connections); retry later",
        ),
        Full::Client => (
            "client_connection_limit",
            "every connection of this client is busy (max_connections_per_client); retry \
             later",
        ),
    };
    let body = serde_json::json!({"error": {"status": 503, "code": code, "message": message}});
    let body = format!("{body}\n");
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\n\
         retry-after: {}\r\ncache-control: no-store\r\nconnection: close\r\n\
         content-length: {}\r\n\r\n",
        bridge.config().retry_after,
        body.len()
    );
    let _ = stream.try_write(format!("{head}{body}").as_bytes());
    bridge.metrics().response(503);
}

/// An answer's body holding its connection busy until hyper drops it (sent, or the client
/// gone).
struct BusyBody {
    body: Body,
    _busy: Busy,
}

impl http_body::Body for BusyBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// Stop taking work, give sync runs (and MCP requests being answered) their grace, then cancel
/// what is left and close the MCP sessions.
async fn drain(bridge: &Bridge) {
    bridge.begin_drain();
    let going = || bridge.sync_in_flight() + bridge.mcp().in_flight();
    // "1 run(s)", or "1 run(s) and 2 MCP request(s)" while MCP requests are being answered
    let what = || match bridge.mcp().in_flight() {
        0 => format!("{} run(s)", bridge.sync_in_flight()),
        mcp => format!(
            "{} run(s) and {mcp} MCP request(s)",
            bridge.sync_in_flight()
        ),
    };
    if going() > 0 {
        eprintln!(
            "droid-executor serve: shutting down; waiting up to {} s for {}",
            bridge.config().drain_grace.as_secs(),
            what()
        );
    }
    let grace_end = Instant::now() + bridge.config().drain_grace;
    while going() > 0 && Instant::now() < grace_end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // cancelled runs stopping and droids being reaped share one budget
    let end = Instant::now() + CANCEL_BUDGET;
    if going() > 0 {
        eprintln!("droid-executor serve: cancelling {} still going", what());
        bridge.cancel_runs();
    }
    // every MCP session ends here, whether or not a request of it is being answered (a call
    // whose stream dropped still runs until its session ends)
    let _ = tokio::time::timeout(
        end.saturating_duration_since(Instant::now()),
        bridge.mcp().close_all(),
    )
    .await;
    while going() > 0 && Instant::now() < end {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // droids stopped after their completion events, still being reaped (droid's kill grace at
    // most)
    let left = end.saturating_duration_since(Instant::now());
    let _ = tokio::time::timeout(left, bridge.engine().settled()).await;
}

/// One request, with the headers every answer carries, counted.
async fn handle(bridge: &Arc<Bridge>, req: Request<Incoming>, local: SocketAddr) -> Response<Body> {
    let mut res = route(bridge, req, local).await;
    let h = res.headers_mut();
    h.entry(CACHE_CONTROL)
        .or_insert(HeaderValue::from_static("no-store"));
    h.insert(X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    if bridge.is_draining() {
        h.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    bridge.metrics().response(res.status().as_u16());
    res
}

fn openapi_text() -> Bytes {
    static DOC: OnceLock<Bytes> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut v = serde_json::to_vec_pretty(&openapi::document()).unwrap_or_default();
        v.push(b'\n');
        Bytes::from(v)
    })
    .clone()
}

async fn route<B>(bridge: &Arc<Bridge>, req: Request<B>, local: SocketAddr) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    if bridge.is_draining() {
        return shutting_down(bridge.config().retry_after);
    }
    if let Some(refusal) = guard::refuse(req.uri(), req.headers(), local, bridge.config()) {
        return refusal;
    }
    let route = match Route::find(req.method(), req.uri().path()) {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    let query = req.uri().query().map(str::to_owned);
    let query = query.as_deref();
    match route {
        Route::Execute => execute(bridge, req).await,
        Route::Submit => task_routes::submit(bridge, req).await,
        Route::List => task_routes::list(bridge, query).await,
        Route::Show(id) => task_routes::show(bridge, &id).await,
        Route::Cancel(id) => task_routes::cancel(bridge, &id).await,
        Route::Events(id) => events::events(bridge, &id, req.headers(), query).await,
        Route::Apply(id) => worktree_routes::apply(bridge, &id, query).await,
        Route::Discard(id) => worktree_routes::discard(bridge, &id).await,
        Route::Health => health::health(bridge).await,
        Route::Metrics => health::metrics(bridge).await,
        Route::McpPost => mcp_routes::post(bridge, req).await,
        Route::McpListen => mcp_routes::listen(bridge, req.headers()).await,
        Route::McpDelete => mcp_routes::delete(bridge, req.headers()).await,
        Route::OpenApi => {
            let mut res = Response::new(full(openapi_text()));
            res.headers_mut().insert(
                http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            res
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn supervisors_wait_longer_than_the_worst_drain() {
        assert_eq!(worst_case_drain(DRAIN_GRACE), Duration::from_secs(50));
        assert_eq!(
            worst_case_drain(Duration::from_secs(3)),
            Duration::from_secs(23)
        );
        assert_eq!(STOP_TIMEOUT, Duration::from_secs(60));
        assert!(STOP_TIMEOUT > worst_case_drain(DRAIN_GRACE));
    }
}
