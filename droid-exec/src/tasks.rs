//! Background tasks (docs/architecture.md#task-store): submit a request, get an id back at once,
//! and look at the task
//! from any process later — its state, its events, its result — or cancel it.
//!
//! A task runs in its own supervisor process ([`crate::worker`]), started detached, so it survives
//! the front-end that submitted it. Nothing here keeps state in memory: every answer is read from
//! the store, so the CLI, the bridge and the MCP server (and several of each) see the same tasks.
//!
//! Liveness is judged by the supervisor's lock on `<task>/lock`, never by `kill(pid, 0)` (a dead
//! supervisor in a container without a reaping init stays a zombie). A task without a result
//! whose lock is free is dead: the next look (status, wait, list, cancel) kills whatever its run
//! left behind (found by the run's marker) and commits an `error` result with a `bridge_failure`
//! issue. A task is never "running" forever and never silently gone.
//!
//! Retention: a finished task is removed once its result is older than `task_ttl` (at the start
//! of every front-end through [`Tasks::clean`], and periodically in long-running ones through
//! [`Tasks::janitor`]); a task without a result is never removed by age.

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use droid_contract::{ExecutionRequest, ExecutionResult, Issue, IssueType, TaskRecord, TaskState};
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;
use tokio_util::sync::CancellationToken;

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::lock;
use crate::queue::Scheduler;
use crate::spawn::{SpawnSpec, spawn};
use crate::store::{DamagedEntry, Meta, Store, TaskKey};
use crate::sweep;
use crate::timestamp::rfc3339;
use crate::worker::{Payload, marker, redactor};

/// How long a submit waits for the supervisor to take its task.
const SUPERVISOR_START: Duration = Duration::from_secs(10);
/// How long a task without a supervisor is still taken to be starting (longer than
/// [`SUPERVISOR_START`], after which the submitter itself records the failure).
const STARTUP_GRACE: Duration = Duration::from_secs(30);
/// Time given to killing what a dead supervisor's run left behind.
const SWEEP_BUDGET: Duration = Duration::from_secs(3);

/// Which tasks [`Tasks::list`] returns.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// At most this many (newest first).
    pub limit: Option<usize>,
}

/// How far a follower has read a task's event log (see [`Tasks::events_from`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct EventCursor {
    /// Bytes of the log read so far (complete lines only).
    offset: u64,
    /// The highest sequence number seen.
    pub after: u64,
}

impl EventCursor {
    /// A cursor that skips the events up to sequence number `after`.
    #[must_use]
    pub fn after(after: u64) -> Self {
        Self { offset: 0, after }
    }
}

/// What [`Tasks::survey`] finds: the tasks, and the entries of the store that are not readable
/// tasks (skipped, so that one bad entry never hides the others).
#[derive(Debug, Clone, Default)]
pub struct TaskListing {
    /// Tasks, newest first.
    pub tasks: Vec<TaskRecord>,
    /// Entries skipped, each with what is wrong with it.
    pub damaged: Vec<DamagedEntry>,
}

/// Unfinished tasks by state, for `/health` and `/metrics` (see [`Tasks::counts`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TaskCounts {
    /// Tasks waiting for a run slot.
    pub queued: usize,
    /// Tasks running.
    pub running: usize,
    /// Store entries skipped as damaged (not task directories, or unreadable records).
    pub damaged: usize,
}

/// Largest part of an event log read at once: a follower gets the rest on its next call.
const EVENTS_READ_LIMIT: u64 = 8 * 1024 * 1024;

/// The background tasks of one store.
#[derive(Debug, Clone)]
pub struct Tasks {
    cfg: EngineConfig,
    store: Store,
    scheduler: Scheduler,
}

impl Tasks {
    /// The tasks of the store `cfg` names.
    ///
    /// # Errors
    /// [`EngineError::TasksUnavailable`] when `cfg` names no store.
    pub fn open(cfg: &EngineConfig) -> Result<Self, EngineError> {
        let dir = cfg.store_dir.as_deref().ok_or_else(|| {
            EngineError::TasksUnavailable(
                "no task store: set store_dir, XDG_STATE_HOME or HOME".into(),
            )
        })?;
        Ok(Self {
            cfg: cfg.clone(),
            store: Store::new(dir),
            scheduler: Scheduler::new(dir, cfg.max_concurrent),
        })
    }

    /// The store's directory.
    pub fn store_dir(&self) -> &std::path::Path {
        self.store.root()
    }

    /// Start `req` as a background task and return its id once its supervisor holds it.
    ///
    /// The request is stored with secrets redacted; the supervisor gets it (and the engine
    /// configuration) unredacted through its stdin. When the supervisor does not come up within
    /// 10 s the task is committed as `error` / `bridge_failure` and its id still returned.
    ///
    /// # Errors
    /// [`EngineError::TasksUnavailable`] without a supervisor program, [`EngineError::Io`] when
    /// the store cannot be written, [`EngineError::Spawn`] when the supervisor cannot be started
    /// (no task is left behind then).
    pub async fn submit(&self, req: &ExecutionRequest) -> Result<TaskKey, EngineError> {
        let program = self.cfg.supervisor.clone().ok_or_else(|| {
            EngineError::TasksUnavailable("no supervisor program configured".into())
        })?;
        let scheduler = self.scheduler.clone();
        let seq = tokio::task::spawn_blocking(move || scheduler.next_seq())
            .await
            .map_err(|e| EngineError::Io {
                action: "schedule",
                path: self.store.root().to_path_buf(),
                source: std::io::Error::other(e.to_string()),
            })??;
        let request = serde_json::to_value(req).map_err(|e| EngineError::Io {
            action: "encode",
            path: PathBuf::from("request"),
            source: std::io::Error::other(e),
        })?;
        let mut stored = request.clone();
        redactor(&self.cfg).apply_value(&mut stored);
        let key = self
            .store
            .create(seq, req.context.repo_root.as_path(), &stored)?;
        let dir = self.store.dir(&key);
        let payload = serde_json::to_vec(&Payload {
            config: self.cfg.clone(),
            request,
        })
        .map_err(|e| EngineError::Io {
            action: "encode",
            path: dir.clone(),
            source: std::io::Error::other(e),
        })?;
        let spec = SpawnSpec {
            program,
            args: vec![
                "worker".into(),
                key.as_str().into(),
                "--store".into(),
                self.store.root().into(),
            ],
            cwd: self.store.root().to_path_buf(),
            env: self.cfg.env.clone(),
            stdin_piped: true,
            detach_log: Some(dir.join("worker.log")),
        };
        let mut child = match spawn(&spec) {
            Ok(c) => c,
            Err(e) => {
                let _ = self.store.remove(&key);
                return Err(e);
            }
        };
        if let Some(mut stdin) = child.stdin.take() {
            // a supervisor that died at once is found below; its pipe error says nothing more
            let _ = stdin.write_all(&payload).await;
            let _ = stdin.shutdown().await;
        }
        // not killed on drop; tokio reaps it in the background when it exits
        drop(child);
        let until = tokio::time::Instant::now() + SUPERVISOR_START;
        while self.store.owner(&key).is_none() && self.store.result(&key)?.is_none() {
            if tokio::time::Instant::now() >= until {
                let result = self.bridge_failure(
                    &key,
                    format!(
                        "the task's supervisor did not start within {} s",
                        SUPERVISOR_START.as_secs()
                    ),
                );
                self.store.commit_result(&key, &result)?;
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        Ok(key)
    }

    /// Keep a run that already finished (a synchronous MCP call whose answer had to be cut) as a
    /// finished task: `req` (stored redacted) and its `result`, so the whole result can be read
    /// back by id (`tasks show`, `droid_pend`, `result.json`) like any task's, until the TTL.
    ///
    /// # Errors
    /// [`EngineError::Io`] when the store cannot be written.
    pub async fn record(
        &self,
        req: &ExecutionRequest,
        result: &ExecutionResult,
    ) -> Result<TaskKey, EngineError> {
        let scheduler = self.scheduler.clone();
        let seq = tokio::task::spawn_blocking(move || scheduler.next_seq())
            .await
            .map_err(|e| EngineError::Io {
                action: "schedule",
                path: self.store.root().to_path_buf(),
                source: std::io::Error::other(e.to_string()),
            })??;
        let mut stored = serde_json::to_value(req).map_err(|e| EngineError::Io {
            action: "encode",
            path: PathBuf::from("request"),
            source: std::io::Error::other(e),
        })?;
        redactor(&self.cfg).apply_value(&mut stored);
        let key = self
            .store
            .create(seq, req.context.repo_root.as_path(), &stored)?;
        if let Err(e) = self.store.commit_result(&key, result) {
            let _ = self.store.remove(&key);
            return Err(e);
        }
        Ok(key)
    }

    /// The task's record. A task whose supervisor died is finalized here (see the module docs).
    ///
    /// # Errors
    /// [`EngineError::NoSuchTask`] for an unknown, malformed or expired id.
    pub async fn status(&self, id: &str) -> Result<TaskRecord, EngineError> {
        let key = TaskKey::parse(id)?;
        Ok(self.look(&key).await?.1)
    }

    /// The task's result, `None` while it runs.
    ///
    /// # Errors
    /// As [`Tasks::status`].
    pub async fn result(&self, id: &str) -> Result<Option<ExecutionResult>, EngineError> {
        Ok(self.status(id).await?.result)
    }

    /// Wait up to `timeout` for the task to finish; the record as it is then.
    ///
    /// # Errors
    /// As [`Tasks::status`].
    pub async fn wait(&self, id: &str, timeout: Duration) -> Result<TaskRecord, EngineError> {
        let key = TaskKey::parse(id)?;
        let until = tokio::time::Instant::now() + timeout;
        let mut pause = Duration::from_millis(20);
        loop {
            let (_, rec) = self.look(&key).await?;
            let now = tokio::time::Instant::now();
            if rec.state.is_finished() || now >= until {
                return Ok(rec);
            }
            tokio::time::sleep(pause.min(until - now)).await;
            pause = (pause * 2).min(Duration::from_millis(200));
        }
    }

    /// Ask the task to stop. Its supervisor sees the request within 100 ms, stops droid and
    /// everything it started, and commits a `cancelled` result; a queued task ends without
    /// starting. Returns the record as it is right after the request (use [`Tasks::wait`] for
    /// the final one); a finished task is returned unchanged.
    ///
    /// # Errors
    /// As [`Tasks::status`], and [`EngineError::Io`] when the request cannot be written.
    pub async fn cancel(&self, id: &str) -> Result<TaskRecord, EngineError> {
        let key = TaskKey::parse(id)?;
        let (_, rec) = self.look(&key).await?;
        if rec.state.is_finished() {
            return Ok(rec);
        }
        self.store.request_cancel(&key)?;
        Ok(self.look(&key).await?.1)
    }

    /// Tasks, newest first (damaged entries are skipped: [`Tasks::survey`] reports them).
    ///
    /// # Errors
    /// [`EngineError::Io`] when the store's `tasks/` directory cannot be read.
    pub async fn list(&self, filter: &TaskFilter) -> Result<Vec<TaskRecord>, EngineError> {
        Ok(self.survey(filter).await?.tasks)
    }

    /// Tasks, newest first, and every entry of the store skipped because it is not a readable
    /// task: a file, FIFO or link where a task directory belongs, a `task.json` that is damaged
    /// or not a regular file, a directory that cannot be read. A half-created task (no
    /// `task.json` yet) and an expired one are neither listed nor reported.
    ///
    /// # Errors
    /// [`EngineError::Io`] when the store's `tasks/` directory cannot be read.
    pub async fn survey(&self, filter: &TaskFilter) -> Result<TaskListing, EngineError> {
        let (keys, mut damaged) = self.store.entries()?;
        let mut all: Vec<(u64, TaskRecord)> = Vec::new();
        for key in keys {
            match self.look(&key).await {
                Ok((meta, rec)) => {
                    if filter.state.is_none_or(|s| s == rec.state) {
                        all.push((meta.seq, rec));
                    }
                }
                // half-created or expired: not a task to show
                Err(EngineError::NoSuchTask { .. }) => {}
                Err(e) => damaged.push(Store::damaged(&key, &e)),
            }
        }
        all.sort_by_key(|a| std::cmp::Reverse(a.0));
        damaged.sort_by(|a, b| a.entry.cmp(&b.entry));
        let limit = filter.limit.unwrap_or(usize::MAX);
        Ok(TaskListing {
            tasks: all.into_iter().take(limit).map(|(_, r)| r).collect(),
            damaged,
        })
    }

    /// How many tasks are queued and how many running (see [`Tasks::counts`]).
    ///
    /// # Errors
    /// As [`Tasks::list`].
    pub async fn unfinished(&self) -> Result<(usize, usize), EngineError> {
        let c = self.counts().await?;
        Ok((c.queued, c.running))
    }

    /// How many tasks are queued, how many running, and how many entries of the store were
    /// skipped as damaged. Only tasks without a result are looked at (a finished task's result
    /// is never read), so the count stays cheap however long the store's history grows: what
    /// `/health` and `/metrics` ask on every scrape.
    ///
    /// # Errors
    /// As [`Tasks::list`].
    pub async fn counts(&self) -> Result<TaskCounts, EngineError> {
        let (keys, damaged) = self.store.entries()?;
        let mut c = TaskCounts {
            damaged: damaged.len(),
            ..TaskCounts::default()
        };
        for key in keys {
            if self.store.has_result(&key) {
                continue;
            }
            match self.look(&key).await {
                Ok((_, rec)) if rec.state == TaskState::Queued => c.queued += 1,
                Ok((_, rec)) if rec.state == TaskState::Running => c.running += 1,
                Ok(_) | Err(EngineError::NoSuchTask { .. }) => {}
                Err(_) => c.damaged += 1,
            }
        }
        Ok(c)
    }

    /// Every task id in the store, each with whether its result is committed, in no particular
    /// order: a directory listing and one `stat` per task, no file read (for counters that must
    /// stay cheap however long the store's history grows, such as the bridge's count of finished
    /// tasks).
    ///
    /// # Errors
    /// As [`Tasks::list`].
    pub fn scan(&self) -> Result<Vec<(String, bool)>, EngineError> {
        Ok(self
            .store
            .keys()?
            .into_iter()
            .map(|key| {
                let finished = self.store.has_result(&key);
                (key.as_str().to_owned(), finished)
            })
            .collect())
    }

    /// Make the store's directories (0700) now, so that a store that cannot be used is found when
    /// a long-lived front-end starts rather than by its first submission.
    ///
    /// # Errors
    /// [`EngineError::Io`] naming the directory and the OS error.
    pub fn prepare(&self) -> Result<(), EngineError> {
        self.store.ensure()
    }

    /// The most recently submitted task.
    ///
    /// # Errors
    /// As [`Tasks::list`].
    pub async fn latest(&self) -> Result<Option<TaskRecord>, EngineError> {
        let newest = self
            .store
            .keys()?
            .into_iter()
            .filter_map(|k| Some((self.store.meta(&k).ok()?.seq, k)))
            .max_by_key(|(seq, _)| *seq);
        match newest {
            None => Ok(None),
            Some((_, key)) => match self.look(&key).await {
                Ok((_, rec)) => Ok(Some(rec)),
                Err(EngineError::NoSuchTask { .. }) => Ok(None),
                Err(e) => Err(e),
            },
        }
    }

    /// The task's stored request (secrets redacted).
    ///
    /// # Errors
    /// As [`Tasks::status`], and [`EngineError::Corrupt`] for an unreadable file.
    pub fn request(&self, id: &str) -> Result<Value, EngineError> {
        let key = TaskKey::parse(id)?;
        self.store.meta(&key)?;
        self.store.request(&key)
    }

    /// The task's events with a sequence number above `after` (0: all), in order. Each is
    /// `{"seq", "at", "type", …}` ([`crate::RunEvent`] plus its number and time); a line still
    /// being written is left for the next call.
    ///
    /// # Errors
    /// As [`Tasks::status`].
    pub fn events(&self, id: &str, after: u64) -> Result<Vec<Value>, EngineError> {
        self.events_from(id, &mut EventCursor::after(after))
    }

    /// The task's events not read yet by `cursor`, which then points past them: only what was
    /// appended since the last call is read, so a follower polling a long log does not re-read
    /// it (a log shorter than the cursor, replaced behind its back, is read again from the
    /// start, and sequence numbers already seen are skipped).
    ///
    /// # Errors
    /// As [`Tasks::events`].
    pub fn events_from(
        &self,
        id: &str,
        cursor: &mut EventCursor,
    ) -> Result<Vec<Value>, EngineError> {
        use std::io::{Read as _, Seek as _, SeekFrom};
        use std::os::unix::fs::OpenOptionsExt as _;

        use nix::fcntl::OFlag;
        let key = TaskKey::parse(id)?;
        self.store.meta(&key)?;
        let path = self.store.events_path(&key);
        let io = |source| EngineError::Io {
            action: "read",
            path: path.clone(),
            source,
        };
        // never blocks on a FIFO, never follows a link: the type is checked on the descriptor
        let opened = std::fs::OpenOptions::new()
            .read(true)
            .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
            .open(&path);
        let mut file = match opened {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(io(e)),
        };
        let meta = file.metadata().map_err(io)?;
        if !meta.is_file() {
            return Err(EngineError::Corrupt {
                path: path.clone(),
                message: format!(
                    "a {}, not a regular file",
                    crate::store::file_kind(&meta.file_type())
                ),
            });
        }
        let len = meta.len();
        if len < cursor.offset {
            cursor.offset = 0;
        }
        file.seek(SeekFrom::Start(cursor.offset)).map_err(io)?;
        let mut bytes = Vec::new();
        // bounded: a huge log is read in parts, one per call
        let want = (len - cursor.offset).min(EVENTS_READ_LIMIT);
        file.take(want).read_to_end(&mut bytes).map_err(io)?;
        let complete = match bytes.iter().rposition(|b| *b == b'\n') {
            Some(i) => &bytes[..=i],
            // a single line longer than a whole part: skipped, never buffered
            None if want == EVENTS_READ_LIMIT => &bytes[..],
            None => &bytes[..0],
        };
        cursor.offset += complete.len() as u64;
        let after = cursor.after;
        let events: Vec<Value> = complete
            .split(|b| *b == b'\n')
            .filter_map(|line| serde_json::from_slice::<Value>(line).ok())
            .filter(|v| {
                v.get("seq")
                    .and_then(Value::as_u64)
                    .is_some_and(|n| n > after)
            })
            .collect();
        if let Some(last) = events.iter().filter_map(|v| v.get("seq")?.as_u64()).max() {
            cursor.after = last;
        }
        Ok(events)
    }

    /// Remove finished tasks whose result is older than the TTL (every finished task with
    /// `all`), and half-created task directories nobody holds. Tasks without a result are never
    /// removed. Returns how many were removed.
    ///
    /// A task whose `task.json` is damaged (empty, truncated, not UTF-8, fields missing, not a
    /// regular file) is kept and reported ([`Tasks::survey`]) until its committed result
    /// expires: the TTL is measured from `result.json`, never from the damaged record. Without
    /// a result it is kept for inspection. Only a directory that never got its `task.json`
    /// (a submission that died half-way) and holds no result is removed once nobody holds it.
    /// One task that cannot be examined or removed is logged and skipped; the others are cleaned.
    ///
    /// # Errors
    /// [`EngineError::Io`] when the store's `tasks/` directory cannot be read.
    pub async fn clean(&self, all: bool) -> Result<usize, EngineError> {
        let mut removed = 0;
        for key in self.store.keys()? {
            match self.clean_one(&key, all) {
                Ok(true) => removed += 1,
                Ok(false) => {}
                Err(e) => tracing::warn!(task = %key, "cleaning the task store: {e}"),
            }
        }
        Ok(removed)
    }

    /// Remove `key` if [`Tasks::clean`] should; whether it was removed.
    fn clean_one(&self, key: &TaskKey, all: bool) -> Result<bool, EngineError> {
        // the result decides, whatever state task.json is in: a committed result is kept for
        // the whole TTL
        let finished = self.store.has_result(key);
        let remove = match self.store.meta(key) {
            Ok(_) | Err(EngineError::Corrupt { .. }) if finished => all || self.expired(key),
            Ok(_) | Err(EngineError::Corrupt { .. }) => false,
            Err(EngineError::NoSuchTask { .. }) if finished => all || self.expired(key),
            Err(EngineError::NoSuchTask { .. }) => {
                let old = std::fs::symlink_metadata(self.store.dir(key))
                    .and_then(|m| m.modified())
                    .ok()
                    .and_then(|t| t.elapsed().ok())
                    .is_some_and(|age| age > STARTUP_GRACE);
                old && !lock::is_held(&self.store.lock_path(key))?
            }
            Err(e) => return Err(e),
        };
        if remove {
            self.store.remove(key)?;
        }
        Ok(remove)
    }

    /// Clean expired tasks every `every` until `stop` fires (for long-running front-ends).
    pub async fn janitor(&self, every: Duration, stop: CancellationToken) {
        loop {
            if let Err(e) = self.clean(false).await {
                tracing::warn!("cleaning the task store: {e}");
            }
            tokio::select! {
                () = stop.cancelled() => return,
                () = tokio::time::sleep(every) => {}
            }
        }
    }

    fn expired(&self, key: &TaskKey) -> bool {
        self.store
            .result_time(key)
            .and_then(|t| t.elapsed().ok())
            .is_some_and(|age| age > self.cfg.task_ttl)
    }

    /// The task's meta and record; finalizes a dead task and forgets an expired one.
    async fn look(&self, key: &TaskKey) -> Result<(Meta, TaskRecord), EngineError> {
        let meta = self.store.meta(key)?;
        let mut result = self.store.result(key)?;
        if result.is_some() && self.expired(key) {
            // expired either way; a store that cannot be written (read-only) keeps it on disk
            // until a later look can remove it, and answers for the other tasks meanwhile
            let ttl = self.cfg.task_ttl.as_secs();
            let hint = match self.store.remove(key) {
                Ok(()) => format!("its result expired after {ttl} s and was removed"),
                Err(e) => format!("its result expired after {ttl} s; removing it failed: {e}"),
            };
            return Err(EngineError::NoSuchTask {
                id: key.to_string(),
                hint,
            });
        }
        let state = match &result {
            Some(r) => TaskState::from_status(r.status),
            None if lock::is_held(&self.store.lock_path(key))? => {
                if self.store.is_started(key) {
                    TaskState::Running
                } else {
                    TaskState::Queued
                }
            }
            None if self.store.owner(key).is_none() && age(&meta) < STARTUP_GRACE => {
                TaskState::Queued
            }
            None => {
                result = Some(self.bury(key).await?);
                result
                    .as_ref()
                    .map_or(TaskState::Error, |r| TaskState::from_status(r.status))
            }
        };
        let updated = self
            .store
            .updated(key)
            .map_or_else(|| meta.created_at.clone(), rfc3339);
        let record = TaskRecord {
            task_id: key.to_string(),
            state,
            created_at: meta.created_at.clone(),
            updated_at: updated,
            result,
        };
        Ok((meta, record))
    }

    /// The supervisor of `key` died without a result: kill what its run left behind, commit an
    /// `error` result, and return the task's result (another writer's, if one came first). When
    /// the store cannot take the result (read-only), it is returned all the same and a later
    /// look commits it.
    async fn bury(&self, key: &TaskKey) -> Result<ExecutionResult, EngineError> {
        let owner = self.store.owner(key);
        // the task's own marker, never one read from owner.json: a damaged file must not point
        // the sweep at another run's processes
        let marker = marker(key);
        let leftover = sweep::marked_pids(&marker).len();
        let survivors = sweep::sweep(&marker, SWEEP_BUDGET).await;
        let what = owner.as_ref().map_or_else(
            || "the task's supervisor never started".to_owned(),
            |o| {
                format!(
                    "the task's supervisor (pid {}) died without writing a result",
                    o.pid
                )
            },
        );
        let mut result = self.bridge_failure(key, what);
        let events = self.events(key.as_str(), 0).unwrap_or_default();
        if let Some(last) = events.last() {
            let what =
                |v: &Value, k: &str| v.get(k).and_then(Value::as_str).unwrap_or("?").to_owned();
            result.logs.push(format!(
                "the run had recorded {} event(s) (tasks show {key} lists the latest); the last: {} at {}",
                events.len(),
                what(last, "type"),
                what(last, "at"),
            ));
        }
        if leftover > 0 {
            result.logs.push(format!(
                "stopped {leftover} process(es) the run left behind"
            ));
        }
        if !survivors.is_empty() {
            result
                .logs
                .push(format!("could not stop processes {survivors:?}"));
        }
        match self.store.commit_result(key, &result) {
            Ok(true) => Ok(result),
            Ok(false) => Ok(self.store.result(key)?.unwrap_or(result)),
            Err(e) => {
                result.logs.push(format!(
                    "this result is not stored yet ({e}); the next look at the task stores it"
                ));
                Ok(result)
            }
        }
    }
}

/// How long ago the task was created, by the boot clock when its record has one: a wall-clock
/// step (NTP, a resumed VM) must neither bury a task that is starting nor keep a task whose
/// supervisor never came "queued" for as long as the clock was set back.
fn age(meta: &Meta) -> Duration {
    if let (Some(boot), Some(at)) = (&meta.boot_id, meta.created_boot_ms) {
        match crate::timestamp::boot_clock() {
            Some((now_boot, now)) if now_boot == *boot => {
                return Duration::from_millis(now.saturating_sub(at));
            }
            // created in an earlier boot: whatever was starting then is gone
            Some(_) => return Duration::MAX,
            None => {}
        }
    }
    let created = SystemTime::UNIX_EPOCH + Duration::from_millis(meta.created_unix_ms);
    // a creation time in the future: the clock was set back since, by an unknown amount, so the
    // start-up window cannot be measured; take it as past rather than wait for the clock to
    // catch up (years, possibly)
    created.elapsed().unwrap_or(Duration::MAX)
}

impl Tasks {
    /// An `error` result with a `bridge_failure` issue pointing at the task's `worker.log`.
    fn bridge_failure(&self, key: &TaskKey, what: String) -> ExecutionResult {
        let log = self.store.dir(key).join("worker.log");
        ExecutionResult::error(
            Some(key.to_string()),
            format!("{what}; the task did not finish"),
            vec![Issue::new(
                IssueType::BridgeFailure,
                what,
                format!(
                    "submit the task again; if it keeps happening, read the supervisor's log {} \
                     and check the machine's memory (an out-of-memory kill looks like this)",
                    log.display()
                ),
            )],
        )
    }
}

#[cfg(test)]
mod tests {
    use std::time::UNIX_EPOCH;

    use super::*;

    fn meta(created_unix_ms: u64, boot: Option<(String, u64)>) -> Meta {
        Meta {
            task_id: "droid-1-abcd".into(),
            created_at: rfc3339(UNIX_EPOCH + Duration::from_millis(created_unix_ms)),
            created_unix_ms,
            created_boot_ms: boot.as_ref().map(|b| b.1),
            boot_id: boot.map(|b| b.0),
            seq: 1,
            repo_root: PathBuf::from("/r"),
        }
    }

    #[test]
    fn a_task_age_is_measured_on_the_boot_clock_not_the_wall_clock() {
        let wall = u64::try_from(
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_millis(),
        )
        .unwrap();
        let ten_years = 10 * 365 * 86_400_000_u64;
        let (boot, now) = crate::timestamp::boot_clock().expect("/proc is mounted");
        let second_ago = Some((boot.clone(), now.saturating_sub(1000)));
        let minute_ago = Some((boot.clone(), now.saturating_sub(60_000)));
        // the wall clock was ten years ahead (or behind) when a task was made a second ago
        assert!(age(&meta(wall + ten_years, second_ago.clone())) < STARTUP_GRACE);
        assert!(age(&meta(wall - ten_years, second_ago)) < STARTUP_GRACE);
        // made a minute ago, under a wall clock that has since been set back ten years
        assert!(age(&meta(wall + ten_years, minute_ago)) > STARTUP_GRACE);
        // made in an earlier boot
        let other = Some(("00000000-0000-0000-0000-000000000000".to_owned(), now));
        assert_eq!(age(&meta(wall, other)), Duration::MAX);
        // an older record without the boot clock: a future time is past the window, not a wait
        // for the clock to catch up
        assert_eq!(age(&meta(wall + ten_years, None)), Duration::MAX);
        assert!(age(&meta(wall, None)) < STARTUP_GRACE);
    }
}
