//! 2025-11-25 Tasks (docs/architecture.md#mcp-server) on the engine's task store: a task-augmented
//! `tools/call`
//! of `execute_droid_task` is a background task like `droid_submit`'s, so `tasks/get`,
//! `tasks/result`, `tasks/list` and `tasks/cancel` see the same tasks as `droid_pend`, the CLI's
//! `tasks` and the HTTP bridge, and a task outlives the server that created it.
//!
//! Mapping:
//! - MCP `taskId` = the store's id (`droid-<unix seconds>-<4 hex>`). A deliberate deviation: the
//!   spec wants cryptographically random (unguessable) ids where requestors are not
//!   authenticated, and these are not: the creation second plus 16 random bits. What guards a
//!   task instead is who can reach it. A stdio server has exactly one requestor, the user whose
//!   client spawned it, and the store is that user's private directory (0700, files 0600), so
//!   nobody who could guess an id can use it, and that user sees every task in `tasks/list`
//!   anyway. The same id names the task everywhere (`droid_pend`, the CLI's `tasks`, the HTTP
//!   bridge, whose non-loopback use needs a token), and an id is only accepted in its exact shape,
//!   so it can never name a path outside the store;
//! - status: `queued`/`running` → `working`; `success`/`partial` → `completed` (the tool result
//!   is not an error); `failed`/`timeout`/`error` → `failed` (its result has `isError: true`);
//!   `cancelled` → `cancelled`. droid runs non-interactively: never `input_required`;
//! - `ttl`: the store's retention (`task_ttl`, counted from the result, so a task lives at least
//!   that long from its creation); a requested `ttl` is overridden, as the spec allows;
//! - `tasks/result` blocks until the task has a result and answers the `CallToolResult`
//!   `execute_droid_task` would have (with `_meta` `io.modelcontextprotocol/related-task`);
//! - arguments the contract rejects: a deliberate deviation from "invalid arguments are tool
//!   results with `isError`" (SEP-1303). A task-augmented call is answered `-32602` at creation,
//!   naming every violation, instead of creating a task that fails at once: the TypeScript SDK
//!   shows a `failed` task only as `"Task <id> failed"` and never fetches `tasks/result`, so the
//!   `isError` text saying what to fix would be lost for its users, while a JSON-RPC error
//!   message reaches them (and no task exists that could be listed or fetched for them);
//! - `tasks/list`: every task of the store, newest first, in pages; the cursor is the id of the
//!   last task of the previous page (`-32602` once that task is gone), and a page reads only its
//!   own tasks (and a second's worth around it), never the pages before it;
//! - `tasks/cancel`: `-32602` for a finished task; otherwise the cancel request goes to the task's
//!   supervisor and the answer waits (bounded) until the task is `cancelled`, as the spec wants
//!   the task cancelled before the response.
//!
//! While the server runs, a watcher per created task relays progress (on the call's original
//! `progressToken`, valid until the task ends), log messages, and `notifications/tasks/status`
//! when the status changes. Its heartbeat counts from the last progress notification sent, so
//! with a poll every `WATCH_EVERY` (0.5 s) the longest gap is `HEARTBEAT` + 0.5 s (10.5 s,
//! within the 15 s), whatever events the task records.

use std::sync::Arc;
use std::time::Duration;

use droid_contract::{TaskRecord, TaskState};
use droid_exec::{EngineError, EventCursor, RunEvent, TaskFilter, Tasks};
use serde_json::{Map, Value, json};
use tokio_util::sync::CancellationToken;

use crate::jsonrpc::{INTERNAL_ERROR, RpcError, notification};
use crate::logging::Level;
use crate::relay::Relay;
use crate::server::{Outbox, Server};
use crate::tools::task_result_answer;

/// Suggested `pollInterval`, in milliseconds: a droid task takes seconds to minutes.
pub const POLL_INTERVAL_MS: u64 = 1000;

/// Tasks per `tasks/list` page.
pub const PAGE_SIZE: usize = 50;

/// How long `tasks/cancel` waits for the supervisor to stop droid and record `cancelled` (it
/// looks every 100 ms, then SIGTERM, a grace, SIGKILL).
const CANCEL_SETTLE: Duration = Duration::from_secs(15);

/// How often a watcher reads its task's events and status.
const WATCH_EVERY: Duration = Duration::from_millis(500);

const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";
const IMMEDIATE_RESPONSE: &str = "io.modelcontextprotocol/model-immediate-response";

/// The MCP status of a task in `state`.
pub fn status(state: TaskState) -> &'static str {
    match state {
        TaskState::Queued | TaskState::Running => "working",
        TaskState::Success | TaskState::Partial => "completed",
        TaskState::Failed | TaskState::Timeout | TaskState::Error => "failed",
        TaskState::Cancelled => "cancelled",
    }
}

fn is_terminal(state: TaskState) -> bool {
    status(state) != "working"
}

fn status_message(rec: &TaskRecord) -> String {
    let text = match (&rec.result, rec.state) {
        (Some(r), _) => format!("{}: {}", r.status.as_str(), r.summary),
        (None, TaskState::Queued) => {
            "queued: waiting for a run slot or for the repository to be free".to_owned()
        }
        (None, _) => "droid is working".to_owned(),
    };
    let line = text.lines().next().unwrap_or_default();
    let mut short: String = line.chars().take(200).collect();
    if short.len() < line.len() {
        short.push('…');
    }
    short
}

/// The `Task` object of `rec`.
pub fn task(rec: &TaskRecord, ttl_ms: u64) -> Value {
    json!({
        "taskId": rec.task_id,
        "status": status(rec.state),
        "statusMessage": status_message(rec),
        "createdAt": rec.created_at,
        "lastUpdatedAt": rec.updated_at,
        "ttl": ttl_ms,
        "pollInterval": POLL_INTERVAL_MS,
    })
}

fn ttl_ms(server: &Server) -> u64 {
    u64::try_from(server.engine().config().task_ttl.as_millis()).unwrap_or(u64::MAX)
}

fn store(server: &Server) -> Result<&Tasks, RpcError> {
    server.tasks().ok_or_else(|| {
        RpcError::new(
            INTERNAL_ERROR,
            "no task store (set HOME, XDG_STATE_HOME or store_dir)",
        )
    })
}

fn task_id_param(params: &Value, method: &str) -> Result<String, RpcError> {
    params
        .get("taskId")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| RpcError::invalid_params(format!("{method} needs a string \"taskId\"")))
}

fn lookup_error(e: &EngineError) -> RpcError {
    match e {
        EngineError::NoSuchTask { .. } => {
            RpcError::invalid_params(format!("Failed to retrieve task: Task not found ({e})"))
        }
        _ => RpcError::new(INTERNAL_ERROR, format!("the task store failed: {e}")),
    }
}

/// Create a task for `execute_droid_task` with `args`: the `CreateTaskResult` and the task id.
///
/// # Errors
/// `-32602` for arguments the contract rejects, `-32603` when the task cannot be submitted.
pub async fn create(
    server: &Arc<Server>,
    args: Map<String, Value>,
    relay: &Relay,
) -> Result<(Value, String), RpcError> {
    let tasks = store(server)?;
    let req = server.engine().admit(&Value::Object(args)).map_err(|v| {
        let all: Vec<String> = v.as_slice().iter().map(ToString::to_string).collect();
        RpcError::invalid_params(format!(
            "Invalid arguments for tool execute_droid_task: {}",
            all.join("; ")
        ))
    })?;
    let key = tasks
        .submit(&req)
        .await
        .map_err(|e| RpcError::new(INTERNAL_ERROR, format!("could not start the task: {e}")))?;
    server.remember(&key);
    let rec = tasks
        .status(key.as_str())
        .await
        .map_err(|e| lookup_error(&e))?;
    relay
        .log(
            Level::Notice,
            json!({"message": format!("created task {key}"), "event": "task_created", "task_id": key.as_str()}),
        )
        .await;
    // a task begins `working` (spec); a run fast enough to have ended already shows its final
    // status at the first tasks/get and in the watcher's status notification
    let mut created = task(&rec, ttl_ms(server));
    if is_terminal(rec.state) {
        created["status"] = json!("working");
        created["statusMessage"] = json!("started");
    }
    let result = json!({
        "task": created,
        "_meta": {IMMEDIATE_RESPONSE: format!(
            "Started droid task {key} in the background; its result comes with tasks/result (or droid_pend with task_id {key})."
        )},
    });
    Ok((result, key.as_str().to_owned()))
}

/// `tasks/get`.
///
/// # Errors
/// `-32602` for a missing or unknown `taskId`.
pub async fn get(server: &Server, params: &Value) -> Result<Value, RpcError> {
    let id = task_id_param(params, "tasks/get")?;
    let rec = store(server)?
        .status(&id)
        .await
        .map_err(|e| lookup_error(&e))?;
    Ok(task(&rec, ttl_ms(server)))
}

/// `tasks/result`: waits until the task has a result.
///
/// # Errors
/// `-32602` for a missing or unknown `taskId` (or one that expired while waited for).
pub async fn result(server: &Server, params: &Value) -> Result<Value, RpcError> {
    let id = task_id_param(params, "tasks/result")?;
    let tasks = store(server)?;
    loop {
        let rec = tasks
            .wait(&id, Duration::from_secs(60))
            .await
            .map_err(|e| lookup_error(&e))?;
        if let Some(r) = rec.result {
            let mut answer = task_result_answer(server, &id, &r);
            if let Some(obj) = answer.as_object_mut() {
                obj.insert("_meta".into(), json!({RELATED_TASK: {"taskId": id}}));
            }
            return Ok(answer);
        }
    }
}

/// `tasks/list`.
///
/// # Errors
/// `-32602` for a malformed or stale cursor, `-32603` when the store cannot be read.
pub async fn list(server: &Server, params: &Value) -> Result<Value, RpcError> {
    let cursor = match params.get("cursor") {
        None | Some(Value::Null) => None,
        Some(Value::String(c)) => Some(c.as_str()),
        Some(other) => {
            return Err(RpcError::invalid_params(format!(
                "cursor must be a string from nextCursor, got {other}"
            )));
        }
    };
    // one more than a page: whether there is a next page, without reading past it
    let filter = TaskFilter {
        limit: Some(PAGE_SIZE + 1),
        after: cursor.map(str::to_owned),
        ..TaskFilter::default()
    };
    let fetched = store(server)?.list(&filter).await.map_err(|e| match e {
        EngineError::NoSuchTask { .. } => RpcError::invalid_params(format!(
            "invalid or expired cursor {:?}: list again without a cursor",
            cursor.unwrap_or_default()
        )),
        e => RpcError::new(INTERNAL_ERROR, format!("the task store failed: {e}")),
    })?;
    let (records, next) = page(fetched, PAGE_SIZE);
    let ttl = ttl_ms(server);
    let mut answer = json!({"tasks": records.iter().map(|r| task(r, ttl)).collect::<Vec<_>>()});
    if let (Some(next), Some(obj)) = (next, answer.as_object_mut()) {
        obj.insert("nextCursor".into(), json!(next));
    }
    Ok(answer)
}

/// A page of at most `size` from `fetched` (the tasks after the cursor, newest first, up to one
/// more than a page), and the cursor of the next page (the page's last task id) when `fetched`
/// held more.
pub fn page(mut fetched: Vec<TaskRecord>, size: usize) -> (Vec<TaskRecord>, Option<String>) {
    let more = fetched.len() > size;
    fetched.truncate(size);
    let next = if more {
        fetched.last().map(|r| r.task_id.clone())
    } else {
        None
    };
    (fetched, next)
}

/// `tasks/cancel`.
///
/// # Errors
/// `-32602` for a missing or unknown `taskId` or a task already finished (or that finished
/// before the cancel took effect); `-32603` when it has not stopped within 15 s.
pub async fn cancel(server: &Server, params: &Value) -> Result<Value, RpcError> {
    let id = task_id_param(params, "tasks/cancel")?;
    let tasks = store(server)?;
    let terminal = |rec: &TaskRecord| {
        RpcError::invalid_params(format!(
            "Cannot cancel task: already in terminal status '{}' ({})",
            status(rec.state),
            rec.state.as_str()
        ))
    };
    let rec = tasks.status(&id).await.map_err(|e| lookup_error(&e))?;
    if is_terminal(rec.state) {
        return Err(terminal(&rec));
    }
    tasks.cancel(&id).await.map_err(|e| lookup_error(&e))?;
    let rec = tasks
        .wait(&id, CANCEL_SETTLE)
        .await
        .map_err(|e| lookup_error(&e))?;
    if rec.state == TaskState::Cancelled {
        let mut t = task(&rec, ttl_ms(server));
        t["statusMessage"] = json!("The task was cancelled by request.");
        Ok(t)
    } else if is_terminal(rec.state) {
        Err(terminal(&rec))
    } else {
        Err(RpcError::new(
            INTERNAL_ERROR,
            format!(
                "cancellation of task {id} was requested but it has not stopped within {} s; poll tasks/get",
                CANCEL_SETTLE.as_secs()
            ),
        ))
    }
}

/// Relay task `id`'s events (progress, log messages) and status changes until it ends or `stop`.
pub async fn watch(
    server: Arc<Server>,
    id: String,
    mut relay: Relay,
    out: Outbox,
    stop: CancellationToken,
) {
    let Some(tasks) = server.tasks() else {
        return;
    };
    let ttl = ttl_ms(&server);
    let started = tokio::time::Instant::now();
    let mut cursor = EventCursor::default();
    let mut last = "working";
    loop {
        relay_events(tasks, &id, &mut cursor, &mut relay).await;
        // from the last progress sent: recorded events that make no line do not delay it
        relay.heartbeat_if_due(started.elapsed()).await;
        let Ok(rec) = tasks.status(&id).await else {
            return;
        };
        let now = status(rec.state);
        if now != last {
            if is_terminal(rec.state) {
                // what the run recorded before it ended goes out before the final status
                relay_events(tasks, &id, &mut cursor, &mut relay).await;
            }
            out.send(notification("notifications/tasks/status", task(&rec, ttl)))
                .await;
            last = now;
        }
        if is_terminal(rec.state) {
            return;
        }
        tokio::select! {
            () = stop.cancelled() => return,
            () = tokio::time::sleep(WATCH_EVERY) => {}
        }
    }
}

/// Relay the task's events not relayed yet.
async fn relay_events(tasks: &Tasks, id: &str, cursor: &mut EventCursor, relay: &mut Relay) {
    let events = tasks.events_from(id, cursor).unwrap_or_default();
    for ev in events {
        // the log's lines are RunEvents plus `seq` and `at`; others are skipped
        if let Ok(ev) = serde_json::from_value::<RunEvent>(ev) {
            relay.event(&ev).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    fn rec(id: &str) -> TaskRecord {
        TaskRecord {
            task_id: id.into(),
            state: TaskState::Running,
            created_at: "2026-11-22T12:04:05.123Z".into(),
            updated_at: "2026-11-22T12:04:05.123Z".into(),
            result: None,
        }
    }

    fn ids(v: &[TaskRecord]) -> Vec<&str> {
        v.iter().map(|r| r.task_id.as_str()).collect()
    }

    #[test]
    fn every_state_has_a_status_and_only_working_is_not_terminal() {
        for st in TaskState::ALL {
            let s = status(st);
            assert!(
                ["working", "completed", "failed", "cancelled"].contains(&s),
                "{st:?}"
            );
            assert_eq!(is_terminal(st), st.is_finished(), "{st:?}");
        }
        assert_eq!(status(TaskState::Partial), "completed");
        assert_eq!(status(TaskState::Timeout), "failed");
    }

    #[test]
    fn a_page_holds_at_most_its_size_and_points_at_the_next() {
        let all: Vec<TaskRecord> = ["e", "d", "c"].into_iter().map(rec).collect();
        let (p1, c1) = page(all.clone(), 2);
        assert_eq!((ids(&p1), c1.as_deref()), (vec!["e", "d"], Some("d")));
        let (exact, none) = page(all[..2].to_vec(), 2);
        assert_eq!((ids(&exact), none), (vec!["e", "d"], None));
        let (empty, none) = page(Vec::new(), 2);
        assert_eq!((ids(&empty), none), (Vec::<&str>::new(), None));
    }

    #[test]
    fn a_task_object_has_every_required_field() {
        let t = task(&rec("droid-1-abcd"), 86_400_000);
        assert_eq!(
            t,
            json!({"taskId": "droid-1-abcd", "status": "working", "statusMessage": "droid is working",
                   "createdAt": "2026-11-22T12:04:05.123Z", "lastUpdatedAt": "2026-11-22T12:04:05.123Z",
                   "ttl": 86_400_000, "pollInterval": POLL_INTERVAL_MS})
        );
    }
}
