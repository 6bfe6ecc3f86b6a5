//! A synchronous run kept as a task (`run --isolation worktree`, `POST /execute` or
//! `execute_droid_task` of a worktree task): its change waits in a worktree for `tasks apply
//! <id>`, so the run needs an id in the store like any background task, and the store must know
//! it is alive while it runs. The process running it takes the part of a task's supervisor
//! ([`crate::tasks::worker`]): it creates the task, holds its `lock` for the whole run, records
//! its events, honours `tasks cancel`, and commits the result; if it dies, the next look at the
//! task finds the lock free and finalizes it as any dead task's.

use std::sync::Arc;

use droid_contract::{ExecutionRequest, ExecutionResult, Issue, IssueType};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::error::EngineError;
use crate::lock;
use crate::run::engine::Engine;
use crate::run::event::EventSink;
use crate::run::event::RunEvent;
use crate::run::supervise::Publisher;
use crate::run_slots::Scheduler;
use crate::task_key::TaskKey;
use crate::tasks::event_log::EventLog;
use crate::tasks::intake::{Entered, enter};
use crate::tasks::store::{Owner, Promise, Store};
use crate::tasks::worker::{marker, redactor, watch_cancel};

impl Engine {
    /// Run `req` as a task of the store, in this process: see the module docs. An `error`
    /// result when the store cannot take the task (nothing ran).
    pub(crate) async fn run_as_task(
        &self,
        req: &ExecutionRequest,
        cancel: CancellationToken,
        events: Option<mpsc::Sender<RunEvent>>,
    ) -> ExecutionResult {
        match self.begin_task(req).await {
            Ok((store, key, seq, alive)) => {
                let cancel = cancel.child_token();
                let watcher =
                    tokio::spawn(watch_cancel(store.clone(), key.clone(), cancel.clone()));
                let log = EventLog::open(&store, &key)
                    .inspect_err(|e| tracing::warn!("cannot record events: {e}"))
                    .ok()
                    .map(|log| Arc::new(log) as Arc<dyn EventSink>);
                let publish = Publisher::with_log(events, log);
                let mut result = self
                    .run_as(req, &marker(&key), Some(seq), cancel, publish, Some(&key))
                    .await;
                watcher.abort();
                if result.task_id.is_none() {
                    result.task_id = Some(key.to_string());
                }
                if let Err(e) = store.commit_result(&key, &result) {
                    result.logs.push(format!(
                        "the result could not be kept in the task store ({e}); the worktree \
                         waits all the same"
                    ));
                }
                drop(alive);
                result
            }
            Err(e) => {
                let result = ExecutionResult::error(
                    req.task_id.as_ref().map(|t| t.as_str().to_owned()),
                    format!("the task could not be kept in the task store: {e}; nothing ran"),
                    vec![Issue::new(
                        IssueType::EnvIssue,
                        format!("isolation \"worktree\" keeps its task in the store: {e}"),
                        "check that the task store (store_dir) is writable; droid-executor \
                         doctor checks it",
                    )],
                );
                if let Some(tx) = events {
                    let _ = tx.try_send(RunEvent::Completed {
                        status: result.status,
                    });
                }
                redactor(self.config()).apply_to(result)
            }
        }
    }

    /// The task of `req` in the store, created and held (its lock and owner written).
    async fn begin_task(
        &self,
        req: &ExecutionRequest,
    ) -> Result<(Store, TaskKey, u64, lock::Held), EngineError> {
        let cfg = self.config();
        let dir = cfg.store_dir.clone().ok_or_else(|| {
            EngineError::TasksUnavailable(
                "no task store: set store_dir, XDG_STATE_HOME or HOME".into(),
            )
        })?;
        let store = Store::new(&dir);
        let scheduler = Scheduler::new(&dir, cfg.max_concurrent);
        let Entered { key, seq, .. } =
            enter(&store, scheduler, cfg, req, Promise::AtResult).await?;
        let Some(alive) = lock::try_exclusive(&store.lock_path(&key))? else {
            return Err(EngineError::TasksUnavailable(format!(
                "task {key} was taken by another process"
            )));
        };
        store.write_owner(
            &key,
            &Owner {
                pid: std::process::id(),
                marker: marker(&key),
                since: crate::timestamp::now(),
            },
        )?;
        Ok((store, key, seq, alive))
    }
}
