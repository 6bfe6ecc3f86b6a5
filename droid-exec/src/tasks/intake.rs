//! How a request becomes a task of the store: its turn in the queue, and its request stored
//! redacted. The background submission, a kept result and a synchronous run kept as a task
//! all enter this way.

use std::path::Path;

use droid_contract::ExecutionRequest;

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::run_slots::Scheduler;
use crate::task_key::TaskKey;
use crate::tasks::store::{Promise, Store};
use crate::tasks::worker::redactor;

/// A new task.
pub(crate) struct Entered {
    pub(crate) key: TaskKey,
    /// Its turn in the queue.
    pub(crate) seq: u64,
    /// The request as given (unredacted: what its supervisor runs); the store holds it
    /// redacted.
    pub(crate) request: serde_json::Value,
}

/// Make a task of `req` in `store`, its turn taken from `scheduler`, on disk as `promise`
/// says.
///
/// # Errors
/// [`EngineError::Io`] when the queue or the store cannot be written.
pub(crate) async fn enter(
    store: &Store,
    scheduler: Scheduler,
    cfg: &EngineConfig,
    req: &ExecutionRequest,
    promise: Promise,
) -> Result<Entered, EngineError> {
    let seq = tokio::task::spawn_blocking(move || scheduler.next_seq())
        .await
        .map_err(|e| EngineError::Io {
            action: "schedule",
            path: store.root().to_path_buf(),
            source: std::io::Error::other(e.to_string()),
        })??;
    let request = serde_json::to_value(req).map_err(|e| EngineError::Io {
        action: "encode",
        path: Path::new("request").to_path_buf(),
        source: std::io::Error::other(e),
    })?;
    let mut stored = request.clone();
    redactor(cfg).apply_value(&mut stored);
    let key = store.create(
        seq,
        req.provider,
        req.context.repo_root.as_path(),
        &stored,
        promise,
    )?;
    Ok(Entered { key, seq, request })
}
