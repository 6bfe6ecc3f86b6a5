//! A background task's supervisor: the body of `droid-executor worker <id> --store <dir>`, a
//! process of its own (new session) that outlives whoever submitted the task.
//!
//! It holds the task's `lock` for its whole life (that lock is how everyone else knows it is
//! alive), receives the request and the engine configuration on stdin (never from disk: the
//! configuration carries droid's environment, secrets included), runs the task through the
//! engine, appends every event to `events.ndjson` as it happens, watches for a `cancel` file, and
//! commits the result. Every process of the run carries `DROID_EXECUTOR_RUN_ID=task-<id>`, so
//! whoever finds this supervisor dead can kill what it left behind.

use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::Duration;

use droid_contract::{ExecutionResult, Issue, IssueType, Status};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::config::EngineConfig;
use crate::engine::Engine;
use crate::error::EngineError;
use crate::event::{EVENT_CHANNEL_CAPACITY, Phase, RunEvent};
use crate::lock;
use crate::redact::Redactor;
use crate::store::{Owner, Store, TaskKey};

/// Largest payload a supervisor reads from stdin (a request is at most a few hundred KiB).
pub const PAYLOAD_LIMIT: usize = 16 * 1024 * 1024;

/// How often the supervisor looks for a `cancel` file.
const CANCEL_POLL: Duration = Duration::from_millis(100);

/// What the submitter sends the supervisor on stdin.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct Payload {
    pub config: EngineConfig,
    pub request: Value,
}

/// How a supervisor ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SupervisorEnd {
    /// It ran the task and committed a result with this status.
    Finished(Status),
    /// The task already had a result (nothing to do).
    AlreadyFinished,
    /// Another supervisor holds the task.
    Owned,
}

/// The sweep marker of a task's run.
pub(crate) fn marker(key: &TaskKey) -> String {
    format!("task-{key}")
}

/// The redactor for a configuration's environment.
pub(crate) fn redactor(cfg: &EngineConfig) -> Redactor {
    Redactor::from_env(
        cfg.env
            .iter()
            .filter_map(|(k, v)| Some((k.to_str()?, v.to_str()?))),
    )
}

/// Supervise task `id` of the store at `store_dir`, with `payload` read from stdin; `cancel` is
/// the front-end's signal handling (SIGTERM, SIGINT, SIGHUP).
///
/// # Errors
/// [`EngineError::NoSuchTask`] for an unknown id, [`EngineError::Io`] when the store cannot be
/// used. An unreadable payload is not an error: it becomes the task's `error` result.
pub async fn supervise_task(
    store_dir: &Path,
    id: &str,
    payload: &[u8],
    cancel: CancellationToken,
) -> Result<SupervisorEnd, EngineError> {
    let key = TaskKey::parse(id)?;
    let store = Store::new(store_dir);
    let meta = store.meta(&key)?;
    let Some(_alive) = lock::try_exclusive(&store.lock_path(&key))? else {
        return Ok(SupervisorEnd::Owned);
    };
    if store.result(&key)?.is_some() {
        return Ok(SupervisorEnd::AlreadyFinished);
    }
    let marker = marker(&key);
    store.write_owner(
        &key,
        &Owner {
            pid: std::process::id(),
            marker: marker.clone(),
            since: crate::timestamp::now(),
        },
    )?;
    let payload: Payload = match serde_json::from_slice(payload) {
        Ok(p) => p,
        Err(e) => {
            let result = ExecutionResult::error(
                Some(key.to_string()),
                "the task's supervisor received an unreadable request; nothing ran",
                vec![Issue::new(
                    IssueType::BridgeFailure,
                    format!("supervisor payload: {e}"),
                    "submit the task again",
                )],
            );
            store.commit_result(&key, &result)?;
            return Ok(SupervisorEnd::Finished(result.status));
        }
    };
    let redact = redactor(&payload.config);
    let watcher = tokio::spawn(watch_cancel(store.clone(), key.clone(), cancel.clone()));
    let (tx, rx) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let writer = tokio::spawn(write_events(store.clone(), key.clone(), redact.clone(), rx));
    let engine = Engine::new(payload.config);
    let mut result = match engine.admit(&payload.request) {
        Ok(req) => {
            engine
                .run_as(&req, &marker, Some(meta.seq), cancel, Some(tx))
                .await
        }
        Err(v) => {
            let task_id = payload
                .request
                .get("task_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            drop(tx);
            ExecutionResult::invalid_request(task_id, &v)
        }
    };
    watcher.abort();
    if result.task_id.is_none() {
        result.task_id = Some(key.to_string());
    }
    // the event stream ends with the run; its writer gets a bounded time to finish
    let _ = tokio::time::timeout(Duration::from_secs(5), writer).await;
    let mut stored = serde_json::to_value(&result).map_err(|e| EngineError::Io {
        action: "encode",
        path: store.dir(&key),
        source: std::io::Error::other(e),
    })?;
    redact.apply_value(&mut stored);
    let result: ExecutionResult = serde_json::from_value(stored).unwrap_or(result);
    if !store.commit_result(&key, &result)? {
        tracing::warn!(task = %key, "a result was already committed; this run's result is dropped");
    }
    Ok(SupervisorEnd::Finished(result.status))
}

async fn watch_cancel(store: Store, key: TaskKey, cancel: CancellationToken) {
    loop {
        if store.cancel_requested(&key) {
            cancel.cancel();
            return;
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(CANCEL_POLL) => {}
        }
    }
}

/// Append each event as one line `{"seq": n, "at": "<RFC 3339>", "type": …, …}`, redacted; mark
/// the task started at its first event past the queue.
async fn write_events(
    store: Store,
    key: TaskKey,
    redact: Redactor,
    mut rx: mpsc::Receiver<RunEvent>,
) {
    let path = store.events_path(&key);
    let mut file = match std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .mode(0o600)
        .open(&path)
    {
        Ok(f) => Some(f),
        Err(e) => {
            tracing::warn!(path = %path.display(), "cannot record events: {e}");
            None
        }
    };
    let mut seq: u64 = 0;
    let mut started = false;
    while let Some(ev) = rx.recv().await {
        let past_queue = !matches!(
            ev,
            RunEvent::Progress {
                phase: Phase::Queued,
                ..
            } | RunEvent::Completed { .. }
        );
        if past_queue && !started {
            started = true;
            if let Err(e) = store.mark_started(&key) {
                tracing::warn!("cannot mark the task started: {e}");
            }
        }
        seq += 1;
        let Ok(mut v) = serde_json::to_value(&ev) else {
            continue;
        };
        redact.apply_value(&mut v);
        let mut line = serde_json::json!({"seq": seq, "at": crate::timestamp::now()});
        if let (Value::Object(head), Value::Object(body)) = (&mut line, v) {
            head.extend(body);
        }
        if let Some(f) = file.as_mut() {
            let mut bytes = line.to_string().into_bytes();
            bytes.push(b'\n');
            // one write per line: O_APPEND keeps concurrent readers from seeing interleaving
            if let Err(e) = f.write_all(&bytes) {
                tracing::warn!(path = %path.display(), "cannot record an event: {e}");
                file = None;
            }
        }
    }
}
