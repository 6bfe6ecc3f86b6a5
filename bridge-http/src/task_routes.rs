//! The background-task routes over the durable task store: `POST /tasks` (202), `GET /tasks`,
//! `GET /tasks/{id}`, `DELETE /tasks/{id}`. A task outlives the bridge: its supervisor is its
//! own process.

use std::time::Duration;

use bytes::Bytes;
use droid_contract::TaskState;
use droid_exec::{EngineError, TaskFilter, Tasks};
use http::header::{HeaderValue, LOCATION};
use http::{Request, Response, StatusCode};
use serde_json::{Value, json};

use crate::admit::admit;
use crate::reply::{Body, error, json, shutting_down};
use crate::state::Bridge;

/// How long `DELETE` waits for the task to stop before answering 202 instead of 200.
const CANCEL_WAIT: Duration = Duration::from_secs(3);
/// Most records `GET /tasks` returns when no `limit` is given.
const DEFAULT_LIMIT: usize = 100;

/// The store, or 503 saying why there is none (no store configured, or its directory could not
/// be made when the bridge started: the path and the OS error).
pub(crate) fn store(bridge: &Bridge) -> Result<&Tasks, Response<Body>> {
    match (bridge.tasks(), bridge.tasks_unavailable()) {
        (Some(t), _) => Ok(t),
        (None, why) => Err(error(
            StatusCode::SERVICE_UNAVAILABLE,
            "tasks_unavailable",
            format!(
                "{} (found when the bridge started; fix it and restart the bridge)",
                why.unwrap_or("background tasks are not available")
            ),
        )),
    }
}

/// The answer for an engine error on a task route.
pub(crate) fn engine_error(e: &EngineError) -> Response<Body> {
    match e {
        EngineError::NoSuchTask { .. } => {
            error(StatusCode::NOT_FOUND, "no_such_task", e.to_string())
        }
        EngineError::TasksUnavailable(_) => error(
            StatusCode::SERVICE_UNAVAILABLE,
            "tasks_unavailable",
            e.to_string(),
        ),
        // max_worktrees reached, or a worktree that cannot be made: the request is fine, the
        // store's state refuses it
        EngineError::Worktree(_) => error(StatusCode::CONFLICT, "worktree", e.to_string()),
        _ => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "store_error",
            e.to_string(),
        ),
    }
}

pub(crate) async fn submit<B>(bridge: &Bridge, req: Request<B>) -> Response<Body>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let tasks = match store(bridge) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let request = match admit(bridge, req).await {
        Ok(r) => r,
        Err(answer) => return answer,
    };
    // the body may have arrived after shutdown began: refuse rather than start a task nobody
    // hears about
    if bridge.is_draining() {
        return shutting_down(bridge.config().retry_after);
    }
    match tasks.submit(&request).await {
        Ok(key) => {
            bridge.metrics().submitted();
            let url = format!("/tasks/{key}");
            let mut res = json(
                StatusCode::ACCEPTED,
                &json!({
                    "task_id": key.as_str(),
                    "status_url": url,
                    "events_url": format!("{url}/events"),
                }),
            );
            if let Ok(v) = HeaderValue::from_str(&url) {
                res.headers_mut().insert(LOCATION, v);
            }
            res
        }
        Err(e) => engine_error(&e),
    }
}

/// `state` and `limit` from a query string, and whether `worktrees=true` asks for the
/// worktrees too; anything else is an error.
fn filter(query: Option<&str>) -> Result<(TaskFilter, bool), String> {
    let mut worktrees = false;
    let mut f = TaskFilter {
        state: None,
        limit: Some(DEFAULT_LIMIT),
        after: None,
        provider: None,
    };
    for pair in query.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        match k {
            "state" => f.state = Some(v.parse::<TaskState>()?),
            "limit" => {
                let n = v
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| format!("limit must be a whole number ≥ 1, got {v:?}"))?;
                f.limit = Some(n);
            }
            "worktrees" => {
                worktrees = match v {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("worktrees must be true or false, got {v:?}")),
                };
            }
            other => {
                return Err(format!(
                    "unknown query parameter {other:?}; use state, limit, worktrees"
                ));
            }
        }
    }
    Ok((f, worktrees))
}

pub(crate) async fn list(bridge: &Bridge, query: Option<&str>) -> Response<Body> {
    let tasks = match store(bridge) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let (f, with_worktrees) = match filter(query) {
        Ok(f) => f,
        Err(msg) => return error(StatusCode::BAD_REQUEST, "bad_query", msg),
    };
    // an entry of the store that is not a readable task is skipped and named, never a 500
    let listing = match tasks.survey(&f).await {
        Ok(listing) => listing,
        Err(e) => return engine_error(&e),
    };
    let mut body = json!({ "tasks": listing.tasks, "damaged": listing.damaged });
    if with_worktrees {
        // the disk of each is counted (bounded): asked for, not on every listing
        let tasks = tasks.clone();
        match tokio::task::spawn_blocking(move || tasks.worktrees_json()).await {
            Ok(Ok(list)) => body["worktrees"] = Value::Array(list),
            Ok(Err(e)) => return engine_error(&e),
            Err(e) => {
                return error(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "internal",
                    format!("listing the worktrees failed: {e}"),
                );
            }
        }
    }
    json(StatusCode::OK, &body)
}

pub(crate) async fn show(bridge: &Bridge, id: &str) -> Response<Body> {
    let tasks = match store(bridge) {
        Ok(t) => t,
        Err(r) => return r,
    };
    match tasks.status(id).await {
        Ok(rec) => json(StatusCode::OK, &rec),
        Err(e) => engine_error(&e),
    }
}

/// Ask the task to stop and wait a little for it: 200 with the final record when it stopped
/// (or had already finished), 202 with the current one when it is still stopping.
pub(crate) async fn cancel(bridge: &Bridge, id: &str) -> Response<Body> {
    let tasks = match store(bridge) {
        Ok(t) => t,
        Err(r) => return r,
    };
    if let Err(e) = tasks.cancel(id).await {
        return engine_error(&e);
    }
    match tasks.wait(id, CANCEL_WAIT).await {
        Ok(rec) if rec.state.is_finished() => json(StatusCode::OK, &rec),
        Ok(rec) => json(StatusCode::ACCEPTED, &rec),
        Err(e) => engine_error(&e),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_filters() {
        let (f, worktrees) = filter(Some("state=running&limit=5")).unwrap();
        assert!(!worktrees);
        assert!(filter(Some("worktrees=true")).unwrap().1);
        assert!(filter(Some("worktrees=yes")).is_err());
        assert_eq!(f.state, Some(TaskState::Running));
        assert_eq!(f.limit, Some(5));
        assert_eq!(filter(None).unwrap().0.limit, Some(DEFAULT_LIMIT));
        assert!(
            filter(Some("state=done"))
                .unwrap_err()
                .contains("unknown task state")
        );
        assert!(filter(Some("limit=0")).unwrap_err().contains("limit"));
        assert!(filter(Some("sort=asc")).unwrap_err().contains("sort"));
    }
}
