//! `POST /execute`: one sync run. The answer is 200 with the ExecutionResult whatever its status
//! (the outcome is data), 400 for an invalid request, 429 when the queue of sync requests is
//! full, 503 `connections_reserved` when as many long requests go as the connection reserve
//! allows (see `conns`).
//!
//! The run is spawned on its own task; this handler holds a drop guard of its cancel token.
//! When the client disconnects hyper drops the handler, the guard cancels the run, and the
//! engine stops droid and everything it started (the run itself is never dropped mid-flight, so
//! its clean-up always happens).

use std::sync::Arc;
use std::time::Instant;

use bytes::Bytes;
use droid_contract::{ExecutionResult, Issue, IssueType};
use droid_exec::run::event::Phase;
use droid_exec::{EVENT_CHANNEL_CAPACITY, RunEvent};
use http::{Request, Response, StatusCode};
use tokio::sync::mpsc;

use crate::admit::admit;
use crate::reply::{Body, connections_reserved, json, retry_later, shutting_down};
use crate::state::{Bridge, Refused};

pub(crate) async fn execute<B>(bridge: &Arc<Bridge>, req: Request<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let request = match admit(bridge, req).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    // the body may have arrived after shutdown began: such a request is refused, never started
    let mut ticket = match bridge.admit_sync() {
        Ok(t) => t,
        Err(Refused::Draining) => return shutting_down(bridge.config().retry_after),
        Err(Refused::Full) => {
            return retry_later(
                StatusCode::TOO_MANY_REQUESTS,
                "queue_full",
                format!(
                    "{} sync runs are already running or waiting (max_concurrent + max_queue); \
                     retry later, or submit a background task with POST /tasks",
                    bridge.engine().config().max_concurrent + bridge.config().max_queue
                ),
                bridge.config().retry_after,
            );
        }
    };
    // held until the answer is built: a sync run keeps its connection for its whole length
    let Some(_long) = bridge.conns().long() else {
        return connections_reserved(bridge.conns().long_cap(), bridge.config().retry_after);
    };
    let cancel = bridge.run_token();
    let guard = cancel.clone().drop_guard();
    let task_id = request.task_id.as_ref().map(|t| t.as_str().to_owned());
    let b = Arc::clone(bridge);
    let started = Instant::now();
    let run = tokio::spawn(async move {
        let (tx, mut rx) = mpsc::channel::<RunEvent>(EVENT_CHANNEL_CAPACITY);
        let watch = async {
            while let Some(ev) = rx.recv().await {
                let queued = matches!(
                    ev,
                    RunEvent::Progress {
                        phase: Phase::Queued,
                        ..
                    }
                );
                if !queued {
                    ticket.started();
                }
            }
        };
        let (result, ()) = tokio::join!(b.engine().run(&request, cancel, Some(tx)), watch);
        b.metrics().run(result.status, started.elapsed());
        b.metrics().agents(&result);
        drop(ticket);
        result
    });
    let result = run.await.unwrap_or_else(|e| {
        ExecutionResult::error(
            task_id,
            "the run ended abnormally inside the bridge",
            vec![Issue::new(
                IssueType::BridgeFailure,
                format!("run task failed: {e}"),
                "see the bridge's log; the run was stopped",
            )],
        )
    });
    guard.disarm();
    json(StatusCode::OK, &result)
}
