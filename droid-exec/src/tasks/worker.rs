//! A background task's supervisor: the body of `droid-executor worker <id> --store <dir>`, a
//! process of its own (new session) that outlives whoever submitted the task.
//!
//! It holds the task's `lock` for its whole life (that lock is how everyone else knows it is
//! alive), receives the request and the engine configuration on stdin (never from disk: the
//! configuration carries droid's environment, secrets included), runs the task through the
//! engine, which appends every event to `events.ndjson` as it publishes it ([`crate::tasks::event_log`]),
//! watches for a `cancel` file, and commits the result. Every process of the run carries `DROID_EXECUTOR_RUN_ID=task-<id>`, so
//! whoever finds this supervisor dead can kill what it left behind.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use droid_contract::{ExecutionResult, Issue, IssueType, Status};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::lock;
use crate::run::engine::Engine;
use crate::run::event::EventSink;
use crate::run::redact::Redactor;
use crate::run::supervise::Publisher;
use crate::task_key::TaskKey;
use crate::tasks::event_log::EventLog;
use crate::tasks::store::{Owner, Store};

/// Largest payload a supervisor reads from stdin (a request is at most a few hundred KiB).
pub const PAYLOAD_LIMIT: usize = crate::tasks::store::REQUEST_LIMIT as usize;

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
    Redactor::for_config(cfg)
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
    let log = match EventLog::open(&store, &key) {
        Ok(log) => Some(Arc::new(log) as Arc<dyn EventSink>),
        Err(e) => {
            tracing::warn!("cannot record events: {e}");
            None
        }
    };
    let engine = Engine::new(payload.config);
    let mut result = match engine.admit(&payload.request) {
        Ok(req) => {
            let publish = Publisher::with_log(None, log);
            engine
                .run_as(&req, &marker, Some(meta.seq), cancel, publish, Some(&key))
                .await
        }
        Err(v) => {
            let task_id = payload
                .request
                .get("task_id")
                .and_then(Value::as_str)
                .map(str::to_owned);
            // the engine masks the results it makes; this one quotes the request
            redact.apply_to(ExecutionResult::invalid_request(task_id, &v))
        }
    };
    watcher.abort();
    if result.task_id.is_none() {
        result.task_id = Some(key.to_string());
    }
    if !store.commit_result(&key, &result)? {
        tracing::warn!(task = %key, "a result was already committed; this run's result is dropped");
    }
    // the result is in the store; droid, stopped at its completion event, is ended before this
    // supervisor exits
    engine.settled().await;
    Ok(SupervisorEnd::Finished(result.status))
}

/// Cancel `cancel` once someone asks the task `key` to stop (its `cancel` file).
pub(crate) async fn watch_cancel(store: Store, key: TaskKey, cancel: CancellationToken) {
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
