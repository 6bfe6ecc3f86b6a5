//! Which way a request is run: one agent, agents in turn (`fallback`), or agents at once
//! (`best_of`).

use droid_contract::{ExecutionRequest, ExecutionResult};
use tokio_util::sync::CancellationToken;

use crate::run::engine::Engine;
use crate::run::supervise::Publisher;
use crate::task_key::TaskKey;

impl Engine {
    /// Run `req` as the task it is (`task`, when it is one of the store): with the caller's
    /// sweep marker, submission number and publisher (see [`Engine::run_once`]), as one
    /// attempt, or as several when it names `fallback` or `best_of`.
    pub(crate) async fn run_as(
        &self,
        req: &ExecutionRequest,
        marker: &str,
        seq: Option<u64>,
        cancel: CancellationToken,
        publish: Publisher,
        task: Option<&TaskKey>,
    ) -> ExecutionResult {
        if !req.best_of.is_empty() {
            // the candidates are tasks of their own, with their own markers and numbers
            return self.run_best_of(req, cancel, publish, task).await;
        }
        if !req.fallback.is_empty() {
            return self
                .run_fallback(req, marker, seq, cancel, publish, task)
                .await;
        }
        self.run_once(req, marker, seq, cancel, publish, task).await
    }
}
