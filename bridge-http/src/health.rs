//! `GET /health` and `GET /metrics`: what a supervisor (the daemon starter, pm2, systemd, a
//! probe) and a metrics scraper read.

use std::time::Duration;

use droid_contract::{TaskRecord, TaskState};
use http::header::{CONTENT_TYPE, HeaderValue};
use http::{Response, StatusCode};
use serde_json::json;

use crate::metrics::Gauges;
use crate::reply::{Body, full, json};
use crate::state::Bridge;

/// Background tasks by unfinished state (finished ones are not counted: they are history, and
/// their results are not even read, so a scrape costs the same with 10 or 10 000 stored tasks),
/// and how many entries of the store were skipped as damaged.
async fn task_counts(bridge: &Bridge) -> (Vec<(TaskState, usize)>, Option<usize>) {
    let Some(tasks) = bridge.tasks() else {
        return (Vec::new(), None);
    };
    match tasks.counts().await {
        Ok(c) => (
            vec![
                (TaskState::Queued, c.queued),
                (TaskState::Running, c.running),
            ],
            Some(c.damaged),
        ),
        Err(e) => {
            tracing::warn!("counting the stored tasks: {e}");
            (Vec::new(), None)
        }
    }
}

/// `{status, version, droid{found, path, version}, runs{running, queued}, tasks{running,
/// queued}}`: 200 while serving. (While shutting down every route, this one included, answers
/// 503.)
pub(crate) async fn health(bridge: &Bridge) -> Response<Body> {
    let cfg = bridge.engine().config();
    let version = bridge.engine().droid_version().await;
    let (counts, damaged) = task_counts(bridge).await;
    let count = |s: TaskState| counts.iter().find(|(t, _)| *t == s).map(|(_, n)| *n);
    let in_flight = bridge.sync_in_flight();
    let waiting = bridge.sync_waiting();
    json(
        StatusCode::OK,
        &json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "droid": {
                "found": cfg.droid_bin.is_some(),
                "path": cfg.droid_bin.as_ref().map(|p| p.display().to_string()),
                "source": cfg.droid_source,
                "version": version,
            },
            "runs": {"running": in_flight.saturating_sub(waiting), "queued": waiting},
            "tasks": {
                "store": bridge.tasks().map(|t| t.store_dir().display().to_string()),
                "running": count(TaskState::Running),
                "queued": count(TaskState::Queued),
                "damaged": damaged,
            },
            "limits": {
                "max_concurrent": cfg.max_concurrent,
                "max_queue": bridge.config().max_queue,
                "body_limit": bridge.config().body_limit,
            },
        }),
    )
}

/// Count the background tasks found finished since the last look, each once (see
/// [`crate::metrics`]): the store is listed, and only the results new since then are read.
async fn count_task_ends(bridge: &Bridge) {
    let Some(tasks) = bridge.tasks() else {
        return;
    };
    let Ok(scan) = tasks.scan() else {
        return;
    };
    for id in bridge.metrics().newly_finished(&scan) {
        // gone (expired) in between: nothing to count
        if let Ok(TaskRecord {
            result: Some(r), ..
        }) = tasks.status(&id).await
        {
            bridge
                .metrics()
                .task_finished(r.status, Duration::from_millis(r.duration_ms));
            bridge.metrics().agents(&r);
        }
    }
}

pub(crate) async fn metrics(bridge: &Bridge) -> Response<Body> {
    // before the gauges: a task whose supervisor died is finalized by the gauges' look, and
    // counted at the next scrape
    count_task_ends(bridge).await;
    let gauges = Gauges {
        sync_in_flight: bridge.sync_in_flight(),
        sync_waiting: bridge.sync_waiting(),
        tasks: task_counts(bridge).await.0,
        connections: bridge.conns().held(),
        connections_shed: bridge.conns().shed_total(),
        streams: bridge.streams().open_count(),
    };
    let mut res = Response::new(full(bridge.metrics().render(&gauges)));
    res.headers_mut().insert(
        CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    res
}
