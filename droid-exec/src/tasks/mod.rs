//! Background tasks (docs/architecture.md#task-store): submit a request, get an id back at once,
//! and look at the task
//! from any process later — its state, its events, its result — or cancel it.
//!
//! A task runs in its own supervisor process ([`crate::tasks::worker`]), started detached, so it survives
//! the front-end that submitted it. Nothing here keeps state in memory: every answer is read from
//! the store, so the CLI, the bridge and the MCP server (and several of each) see the same tasks.
//!
//! Liveness is judged by the supervisor's lock on `<task>/lock`, never by `kill(pid, 0)` (a dead
//! supervisor in a container without a reaping init stays a zombie). A task without a result
//! whose lock is free is dead: the next look (status, wait, list, cancel) kills whatever its run
//! left behind (found by the run's marker) and commits an `error` result with a `bridge_failure`
//! issue. A task is never "running" forever and never silently gone.
//!
//! Retention: a finished task is removed once its result is older than `task_ttl`: at the start
//! of a front-end and periodically in long-running ones ([`Tasks::clean_if_due`], at most once a
//! minute per store whatever the number of front-ends, through a stamp file), on `tasks clean`
//! ([`Tasks::clean`]), and by any look at the task itself. Expiry is judged from the result
//! file's modification time, never by parsing it; a task without a result is never removed by
//! age.
//!
//! Costs: looking at one task reads that task only; a listing reads the store's directory (names
//! only: a task id carries its creation second) and then only the tasks it returns or skips, so
//! `tasks list --limit 10` and a page of MCP `tasks/list` cost the same at ten tasks as at ten
//! thousand.

pub mod daemon;
pub(crate) mod event_log;
pub(crate) mod inline;
mod intake;
pub mod listener;
pub mod store;
pub mod worker;
pub mod worktrees;

use std::path::PathBuf;
use std::time::{Duration, SystemTime};

use droid_contract::{
    ExecutionRequest, ExecutionResult, Issue, IssueType, ProviderId, TaskRecord, TaskState,
};
use serde_json::Value;
use tokio::io::AsyncWriteExt as _;
use tokio_util::sync::CancellationToken;

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::lock;
use crate::process::spawn::{SpawnSpec, spawn};
use crate::process::sweep;
use crate::run_slots::Scheduler;
use crate::task_key::TaskKey;
use crate::tasks::intake::{Entered, enter};
use crate::tasks::store::{DamagedEntry, Meta, Promise, Store};
use crate::tasks::worker::{Payload, marker};
use crate::timestamp::rfc3339;

/// How long a submit waits for the supervisor to take its task.
const SUPERVISOR_START: Duration = Duration::from_secs(10);
/// How long a task without a supervisor is still taken to be starting (longer than
/// [`SUPERVISOR_START`], after which the submitter itself records the failure).
const STARTUP_GRACE: Duration = Duration::from_secs(30);
/// Time given to killing what a dead supervisor's run left behind.
const SWEEP_BUDGET: Duration = Duration::from_secs(3);
/// Least time between two automatic cleans of one store ([`Tasks::clean_if_due`]).
const CLEAN_EVERY: Duration = Duration::from_secs(60);
/// The stamp in the store's root whose modification time is the last automatic clean.
const CLEAN_STAMP: &str = "cleaned";
/// The lock in the store's root taken by the front-end cleaning, so that the others do not.
const CLEAN_LOCK: &str = "clean.lock";

/// Which tasks [`Tasks::list`] returns.
#[derive(Debug, Clone, Default)]
pub struct TaskFilter {
    /// Only tasks in this state.
    pub state: Option<TaskState>,
    /// At most this many (newest first).
    pub limit: Option<usize>,
    /// Only tasks after this one in the listing's order (the last of the previous page): a
    /// cursor, so the next page starts where the last ended without reading what came before.
    pub after: Option<String>,
    /// Only tasks of this provider (told by the id alone: nothing is read for the others).
    pub provider: Option<ProviderId>,
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
    /// (no task is left behind then), [`EngineError::Worktree`] for a worktree task beyond
    /// `max_worktrees`.
    pub async fn submit(&self, req: &ExecutionRequest) -> Result<TaskKey, EngineError> {
        let program = self.cfg.supervisor.clone().ok_or_else(|| {
            EngineError::TasksUnavailable("no supervisor program configured".into())
        })?;
        // a worktree task beyond max_worktrees is refused here, before it gets an id; a
        // best_of makes one worktree per candidate
        if !req.best_of.is_empty() {
            crate::worktree::lease::room_for(
                self.store.root(),
                self.cfg.worktrees.max_worktrees,
                req.best_of.len(),
            )?;
        } else if crate::worktree::lease::makes_worktree(
            req,
            &self.cfg.worktrees,
            self.store.root(),
        ) {
            crate::worktree::lease::room_for_one(
                self.store.root(),
                self.cfg.worktrees.max_worktrees,
            )?;
        }
        let Entered { key, request, .. } = enter(
            &self.store,
            self.scheduler.clone(),
            &self.cfg,
            req,
            Promise::Durable,
        )
        .await?;
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
            stdin_file: None,
            detach_log: Some(dir.join("worker.log")),
            rlimits: crate::process::limits::Rlimits::NONE,
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
        let Entered { key, .. } = enter(
            &self.store,
            self.scheduler.clone(),
            &self.cfg,
            req,
            Promise::Durable,
        )
        .await?;
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
            // a full look backs off to 200 ms; the result's arrival is seen within 25 ms
            // (a stat), not a full pause later
            let next = now + pause.min(until - now);
            while !self.store.has_result(&key) {
                let now = tokio::time::Instant::now();
                if now >= next {
                    break;
                }
                tokio::time::sleep((next - now).min(Duration::from_millis(25))).await;
            }
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
    /// task: a file, FIFO or link where a task directory belongs (all of them: the directory
    /// listing shows them), a `task.json` that is damaged or not a regular file, a directory that
    /// cannot be read (those among the tasks examined). A half-created task (no `task.json` yet)
    /// and an expired one are neither listed nor reported.
    ///
    /// Newest first is by submission number. Tasks are read from the newest second in their
    /// ids back, a second at a time, until `filter.limit` of them match and one more second is
    /// read (a submission racing another across a second boundary can get the later number
    /// with the earlier second): the cost follows what is returned or skipped, not the size of
    /// the store. Only a wall clock set back between submissions can misorder a limited
    /// listing (the whole listing is exact). With `filter.after`, the listing starts after that
    /// task.
    ///
    /// # Errors
    /// [`EngineError::Io`] when the store's `tasks/` directory cannot be read;
    /// [`EngineError::NoSuchTask`] when `filter.after` names no task (malformed, or removed
    /// since: list again from the start).
    pub async fn survey(&self, filter: &TaskFilter) -> Result<TaskListing, EngineError> {
        let (mut keys, mut damaged) = self.store.newest_first()?;
        if let Some(p) = filter.provider {
            keys.retain(|(_, key)| key.provider() == p);
        }
        // the cursor: its second and its submission number
        let cursor = match &filter.after {
            None => None,
            Some(id) => {
                let key = TaskKey::parse(id)?;
                let seq = match self.store.meta(&key) {
                    Ok(meta) => meta.seq,
                    Err(EngineError::NoSuchTask { .. }) => {
                        return Err(EngineError::NoSuchTask {
                            id: id.clone(),
                            hint: "the task the listing was to continue after is gone; list \
                                   again from the start"
                                .into(),
                        });
                    }
                    Err(e) => return Err(e),
                };
                Some((key, seq))
            }
        };
        let after_cursor = |seq: u64, key: &TaskKey| {
            cursor
                .as_ref()
                .is_none_or(|(c, cseq)| seq < *cseq || (seq == *cseq && key > c))
        };
        // from the second before the cursor's (see above about racing submissions)
        let first = cursor.as_ref().map_or(0, |(key, _)| {
            keys.partition_point(|(secs, _)| *secs > key.secs().saturating_add(1))
        });
        let limit = filter.limit.unwrap_or(usize::MAX);
        let mut read: Vec<(u64, &TaskKey, TaskRecord)> = Vec::new();
        let mut matched = 0;
        // the second in which `limit` tasks matched
        let mut full_at: Option<u64> = None;
        let mut i = first;
        while i < keys.len() {
            let secs = keys[i].0;
            if full_at.is_some_and(|full| secs.saturating_add(1) < full) {
                break;
            }
            let end = i + keys[i..].iter().take_while(|(s, _)| *s == secs).count();
            for (_, key) in &keys[i..end] {
                match self.look(key).await {
                    Ok((meta, rec)) if after_cursor(meta.seq, key) => {
                        if filter.state.is_none_or(|s| s == rec.state) {
                            matched += 1;
                        }
                        read.push((meta.seq, key, rec));
                    }
                    // before the cursor, half-created or expired: not a task to show
                    Ok(_) | Err(EngineError::NoSuchTask { .. }) => {}
                    Err(e) => damaged.push(Store::damaged(key, &e)),
                }
            }
            if full_at.is_none() && matched >= limit {
                full_at = Some(secs);
            }
            i = end;
        }
        // the latest submission first (ties, which only a hand-made record has, by id)
        read.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(b.1)));
        let tasks = read
            .into_iter()
            .map(|(_, _, rec)| rec)
            .filter(|rec| filter.state.is_none_or(|s| s == rec.state))
            .take(limit)
            .collect();
        damaged.sort_by(|a, b| a.entry.cmp(&b.entry));
        Ok(TaskListing { tasks, damaged })
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
        let filter = TaskFilter {
            limit: Some(1),
            ..TaskFilter::default()
        };
        Ok(self.survey(&filter).await?.tasks.into_iter().next())
    }

    /// The most recently submitted task of `provider` (seed 002's `pend` without a task id).
    ///
    /// # Errors
    /// As [`Tasks::list`].
    pub async fn latest_of(&self, provider: ProviderId) -> Result<Option<TaskRecord>, EngineError> {
        let filter = TaskFilter {
            limit: Some(1),
            provider: Some(provider),
            ..TaskFilter::default()
        };
        Ok(self.survey(&filter).await?.tasks.into_iter().next())
    }

    /// The most recently submitted task of `provider` whose repository is `dir`'s (the CLI's
    /// `pend` without a task id): a task belongs to the repository its `repo_root` lies in
    /// ([`repository_of`]), so a task of another repository is never taken for this one's.
    /// Only the provider's newest [`LATEST_IN_REPOSITORY_WITHIN`] tasks are looked through, and
    /// of those only `task.json` is read until the newest that belongs is found.
    ///
    /// # Errors
    /// As [`Tasks::list`].
    pub async fn latest_in_repository(
        &self,
        provider: ProviderId,
        dir: &std::path::Path,
    ) -> Result<Option<TaskRecord>, EngineError> {
        let here = repository_of(dir);
        let (keys, _) = self.store.newest_first()?;
        // a task's repository, found once per distinct repo_root
        let mut seen: Vec<(PathBuf, bool)> = Vec::new();
        let mut mine: Vec<(u64, TaskKey)> = Vec::new();
        for (_, key) in keys
            .into_iter()
            .filter(|(_, key)| key.provider() == provider)
            .take(LATEST_IN_REPOSITORY_WITHIN)
        {
            // half-created, damaged or removed meanwhile: not a task to take
            let Ok(meta) = self.store.meta(&key) else {
                continue;
            };
            let belongs = match seen.iter().find(|(root, _)| *root == meta.repo_root) {
                Some((_, belongs)) => *belongs,
                None => {
                    let belongs = repository_of(&meta.repo_root) == here;
                    seen.push((meta.repo_root, belongs));
                    belongs
                }
            };
            if belongs {
                mine.push((meta.seq, key));
            }
        }
        // the latest submission first, as a listing orders them
        mine.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
        for (_, key) in mine {
            // expired or damaged: the next one
            if let Ok((_, rec)) = self.look(&key).await {
                return Ok(Some(rec));
            }
        }
        Ok(None)
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
                    crate::state_file::file_kind(&meta.file_type())
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
    /// removed. Returns how many were removed. Nothing is parsed: a task is judged by which of
    /// its files exist and by the result's modification time.
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
        // the worktrees of tasks that are gone or died (crate::tasks::worktrees)
        let worktrees = self.reconcile_worktrees().await;
        if worktrees > 0 {
            tracing::info!("the janitor removed {worktrees} worktree(s)");
        }
        Ok(removed)
    }

    /// Remove `key` if [`Tasks::clean`] should; whether it was removed.
    fn clean_one(&self, key: &TaskKey, all: bool) -> Result<bool, EngineError> {
        // the result decides, whatever state task.json is in: a committed result is kept for
        // the whole TTL
        // one stat for a finished task: whether it has a result, and since when
        let remove = if let Some(at) = self.store.result_time(key) {
            all || at.elapsed().is_ok_and(|age| age > self.cfg.task_ttl)
        } else if self.store.has_record(key) {
            // a task without a result (damaged record or not) is never removed by age
            false
        } else {
            // no task.json: a submission that died half-way, once nobody holds it
            let old = std::fs::symlink_metadata(self.store.dir(key))
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > STARTUP_GRACE);
            old && !lock::is_held(&self.store.lock_path(key))?
        };
        if remove {
            self.store.remove(key)?;
        }
        Ok(remove)
    }

    /// [`Tasks::clean`] of expired tasks, unless this store was cleaned less than a minute ago
    /// (by any process): what front-ends call when they start, so that a burst of `run`s or
    /// `tasks` commands cleans once. The last clean is the modification time of the stamp
    /// `<store>/cleaned`; whoever takes `<store>/clean.lock` (never waited for) renews it and
    /// cleans, the others go on at once. A stamp dated in the future (a clock set back) is
    /// overdue. Returns how many tasks were removed, `None` when the clean was not due (or the
    /// store has no tasks directory yet).
    ///
    /// # Errors
    /// [`EngineError::Io`] when the stamp or the lock cannot be written (a read-only store), or
    /// as [`Tasks::clean`].
    pub async fn clean_if_due(&self) -> Result<Option<usize>, EngineError> {
        let root = self.store.root();
        if !self.store.tasks_dir().is_dir() {
            return Ok(None);
        }
        let stamp = root.join(CLEAN_STAMP);
        let due = || {
            std::fs::symlink_metadata(&stamp)
                .and_then(|m| m.modified())
                .map_or(true, |t| t.elapsed().map_or(true, |age| age >= CLEAN_EVERY))
        };
        if !due() {
            return Ok(None);
        }
        let Some(_held) = lock::try_exclusive(&root.join(CLEAN_LOCK))? else {
            return Ok(None);
        };
        // another process may have cleaned between the look and the lock
        if !due() {
            return Ok(None);
        }
        crate::state_file::write_atomic(&stamp, crate::timestamp::now().as_bytes())?;
        self.clean(false).await.map(Some)
    }

    /// Clean expired tasks every `every` until `stop` fires (for long-running front-ends), each
    /// time through [`Tasks::clean_if_due`].
    pub async fn janitor(&self, every: Duration, stop: CancellationToken) {
        loop {
            if let Err(e) = self.clean_if_due().await {
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
                Err(e) => {
                    // said here too: a listing skips the task without a word
                    tracing::warn!(task = %key, "removing the expired task failed: {e}");
                    format!("its result expired after {ttl} s; removing it failed: {e}")
                }
            };
            return Err(EngineError::NoSuchTask {
                id: key.to_string(),
                hint,
            });
        }
        if let Some(r) = result.as_mut() {
            // a worktree's state changes after the result (applied, discarded, conflicted)
            self.worktree_now(r);
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

/// How many of a provider's newest tasks [`Tasks::latest_in_repository`] looks through: its
/// cost stays bounded however long the store's history grows.
pub const LATEST_IN_REPOSITORY_WITHIN: usize = 200;

/// The repository `dir` is in: the nearest directory at or above it (symlinks resolved) that
/// holds a `.git` entry, as git's own discovery finds a work tree; `dir` itself (resolved when it
/// can be) when there is none. Nothing is spawned and no git file is read.
pub fn repository_of(dir: &std::path::Path) -> PathBuf {
    let real = crate::real_path::canonical(dir).unwrap_or_else(|_| dir.to_path_buf());
    real.ancestors()
        .find(|d| std::fs::symlink_metadata(d.join(".git")).is_ok())
        .map_or_else(|| real.clone(), std::path::Path::to_path_buf)
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

    /// A store in a fresh temp directory, removed on drop.
    struct TempStore {
        root: PathBuf,
        tasks: Tasks,
    }

    impl TempStore {
        fn new(name: &str) -> Self {
            let root = std::env::temp_dir().join(format!("dx-tasks-{name}-{}", std::process::id()));
            let _ = std::fs::remove_dir_all(&root);
            let mut cfg =
                crate::config::Settings::default().engine_config(&crate::config::EnvMap::new());
            cfg.store_dir = Some(root.clone());
            let tasks = Tasks::open(&cfg).unwrap();
            tasks.prepare().unwrap();
            Self { root, tasks }
        }

        /// A finished task `id` with submission number `seq` and a result of `status`.
        fn finished(&self, id: &str, seq: u64, status: droid_contract::Status) -> TaskKey {
            let key = TaskKey::parse(id).unwrap();
            let dir = self.tasks.store.dir(&key);
            std::fs::create_dir(&dir).unwrap();
            let mut m = meta(key.secs() * 1000, None);
            m.task_id = id.to_owned();
            m.seq = seq;
            std::fs::write(dir.join("task.json"), serde_json::to_vec(&m).unwrap()).unwrap();
            let mut result = ExecutionResult::error(Some(id.to_owned()), "done", Vec::new());
            result.status = status;
            assert!(self.tasks.store.commit_result(&key, &result).unwrap());
            key
        }

        fn ids(&self, filter: &TaskFilter) -> Vec<String> {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(self.tasks.list(filter))
                .unwrap()
                .into_iter()
                .map(|r| r.task_id)
                .collect()
        }

        fn age(&self, key: &TaskKey, file: &str, by: Duration) {
            std::fs::File::options()
                .write(true)
                .open(self.tasks.store.dir(key).join(file))
                .unwrap()
                .set_modified(SystemTime::now() - by)
                .unwrap();
        }
    }

    impl Drop for TempStore {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.root);
        }
    }

    #[test]
    fn a_listing_is_newest_first_limited_filtered_and_paged_by_cursor() {
        use droid_contract::Status;
        let st = TempStore::new("order");
        // three in one second (their submission order decides), then older seconds; seq
        // increases with time, as submissions do
        st.finished("droid-1700000300-aaaa", 8, Status::Success);
        st.finished("droid-1700000300-0001", 9, Status::Failed);
        st.finished("droid-1700000300-ffff", 7, Status::Success);
        st.finished("droid-1700000200-bbbb", 5, Status::Failed);
        st.finished("droid-1700000100-cccc", 3, Status::Success);
        st.finished("droid-1700000099-dddd", 2, Status::Failed);
        let all = [
            "droid-1700000300-0001",
            "droid-1700000300-aaaa",
            "droid-1700000300-ffff",
            "droid-1700000200-bbbb",
            "droid-1700000100-cccc",
            "droid-1700000099-dddd",
        ];
        assert_eq!(st.ids(&TaskFilter::default()), all);
        let limited = |limit, state, after: Option<&str>| TaskFilter {
            state,
            limit: Some(limit),
            after: after.map(str::to_owned),
            provider: None,
        };
        assert_eq!(st.ids(&limited(2, None, None)), all[..2]);
        assert_eq!(
            st.ids(&limited(2, Some(TaskState::Failed), None)),
            ["droid-1700000300-0001", "droid-1700000200-bbbb"]
        );
        assert_eq!(
            st.ids(&limited(9, Some(TaskState::Success), None)),
            [all[1], all[2], all[4]]
        );
        // pages of two, each after the last of the one before, give the whole listing
        let mut paged = Vec::new();
        let mut after: Option<String> = None;
        loop {
            let page = st.ids(&limited(2, None, after.as_deref()));
            if page.is_empty() {
                break;
            }
            after = page.last().cloned();
            paged.extend(page);
        }
        assert_eq!(paged, all);
        // a cursor in the middle of a second, with a state filter
        assert_eq!(
            st.ids(&limited(5, Some(TaskState::Success), Some(all[1]))),
            [all[2], all[4]]
        );
        // a cursor whose task is gone is an error naming it, not an empty page
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let gone = limited(2, None, Some("droid-1700000250-eeee"));
        let err = rt.block_on(st.tasks.list(&gone)).unwrap_err();
        assert!(
            matches!(&err, EngineError::NoSuchTask { id, .. } if id == "droid-1700000250-eeee"),
            "{err:?}"
        );
        // the latest task is the newest submission of the newest second
        let latest = rt.block_on(st.tasks.latest()).unwrap().unwrap();
        assert_eq!(latest.task_id, all[0]);
    }

    #[test]
    fn a_limited_listing_never_reads_the_tasks_past_its_limit() {
        use droid_contract::Status;
        let st = TempStore::new("limit");
        let new = st.finished("droid-1700000300-aaaa", 2, Status::Success);
        let old = st.finished("droid-1700000100-bbbb", 1, Status::Success);
        std::fs::write(st.tasks.store.dir(&old).join("task.json"), "{trunc").unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let one = TaskFilter {
            limit: Some(1),
            ..TaskFilter::default()
        };
        let listing = rt.block_on(st.tasks.survey(&one)).unwrap();
        let ids: Vec<&str> = listing.tasks.iter().map(|r| r.task_id.as_str()).collect();
        // the damaged older task was not read, so it is not reported either
        assert_eq!((ids, listing.damaged.len()), (vec![new.as_str()], 0));
        let listing = rt
            .block_on(st.tasks.survey(&TaskFilter::default()))
            .unwrap();
        let damaged: Vec<&str> = listing.damaged.iter().map(|d| d.entry.as_str()).collect();
        assert_eq!(damaged, [old.as_str()]);
    }

    #[test]
    fn expired_tasks_are_cleaned_by_their_result_time_at_most_once_a_minute() {
        use droid_contract::Status;
        let st = TempStore::new("clean");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let day = Duration::from_secs(86_400);
        let fresh = st.finished("droid-1700000300-aaaa", 3, Status::Success);
        let first = st.finished("droid-1700000200-bbbb", 2, Status::Success);
        st.age(&first, "result.json", 2 * day);
        // a result that is not even JSON: expiry is judged without reading it
        let unparsed = st.finished("droid-1700000100-cccc", 1, Status::Success);
        std::fs::write(st.tasks.store.dir(&unparsed).join("result.json"), "{trunc").unwrap();
        st.age(&unparsed, "result.json", 2 * day);
        assert_eq!(rt.block_on(st.tasks.clean_if_due()).unwrap(), Some(2));
        let dir = |k: &TaskKey| st.tasks.store.dir(k);
        assert!(!dir(&first).exists() && !dir(&unparsed).exists());
        assert!(dir(&fresh).is_dir());
        // within the minute: not due, even with an expired task to remove
        let second = st.finished("droid-1700000150-dddd", 4, Status::Success);
        st.age(&second, "result.json", 2 * day);
        assert_eq!(rt.block_on(st.tasks.clean_if_due()).unwrap(), None);
        assert!(dir(&second).is_dir());
        // a minute later it is due again
        let stamp = st.root.join(CLEAN_STAMP);
        std::fs::File::options()
            .write(true)
            .open(&stamp)
            .unwrap()
            .set_modified(SystemTime::now() - CLEAN_EVERY - Duration::from_secs(1))
            .unwrap();
        assert_eq!(rt.block_on(st.tasks.clean_if_due()).unwrap(), Some(1));
        assert!(!dir(&second).exists());
        // a stamp dated in the future (the clock was set back) does not stop cleaning
        let third = st.finished("droid-1700000160-eeee", 5, Status::Success);
        st.age(&third, "result.json", 2 * day);
        std::fs::File::options()
            .write(true)
            .open(&stamp)
            .unwrap()
            .set_modified(SystemTime::now() + day)
            .unwrap();
        assert_eq!(rt.block_on(st.tasks.clean_if_due()).unwrap(), Some(1));
        // while another process cleans (holds the lock), nobody else does
        let held = lock::try_exclusive(&st.root.join(CLEAN_LOCK))
            .unwrap()
            .unwrap();
        std::fs::File::options()
            .write(true)
            .open(&stamp)
            .unwrap()
            .set_modified(SystemTime::now() - CLEAN_EVERY - Duration::from_secs(1))
            .unwrap();
        assert_eq!(rt.block_on(st.tasks.clean_if_due()).unwrap(), None);
        drop(held);
        assert_eq!(rt.block_on(st.tasks.clean_if_due()).unwrap(), Some(0));
        assert!(dir(&fresh).is_dir());
    }

    #[test]
    fn a_submission_that_raced_across_a_second_boundary_keeps_its_place() {
        use droid_contract::Status;
        let st = TempStore::new("race");
        // numbered 21, but its id was made a moment before the 20th's crossed into a new second
        st.finished("droid-1700000400-aaaa", 20, Status::Success);
        st.finished("droid-1700000399-bbbb", 21, Status::Success);
        st.finished("droid-1700000300-cccc", 19, Status::Success);
        let one = TaskFilter {
            limit: Some(1),
            ..TaskFilter::default()
        };
        assert_eq!(st.ids(&one), ["droid-1700000399-bbbb"]);
        let after = TaskFilter {
            after: Some("droid-1700000399-bbbb".into()),
            ..one
        };
        assert_eq!(st.ids(&after), ["droid-1700000400-aaaa"]);
    }

    #[test]
    fn a_repositorys_latest_task_is_never_another_repositorys() {
        use droid_contract::Status;
        let st = TempStore::new("repos");
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // `one` and `two` are repositories, `one/vendor/inner` one inside `one`, `loose` none
        let one = st.root.join("w/one");
        let inner = one.join("vendor/inner");
        let two = st.root.join("w/two");
        let loose = st.root.join("w/loose");
        for dir in [
            &one.join(".git"),
            &inner.join(".git"),
            &two.join(".git"),
            &loose,
        ] {
            std::fs::create_dir_all(dir).unwrap();
        }
        std::fs::create_dir_all(one.join("src")).unwrap();
        let in_repo = |id: &str, seq: u64, repo: &std::path::Path| {
            let key = st.finished(id, seq, Status::Success);
            let path = st.tasks.store.dir(&key).join("task.json");
            let mut m: Meta = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
            m.repo_root = repo.to_path_buf();
            std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();
        };
        in_repo("droid-1700000100-0001", 1, &one.join("src"));
        in_repo("codex-1700000150-0002", 2, &one);
        in_repo("droid-1700000200-0003", 3, &inner);
        in_repo("droid-1700000300-0004", 4, &two);
        let latest = |p: ProviderId, dir: &std::path::Path| {
            rt.block_on(st.tasks.latest_in_repository(p, dir))
                .unwrap()
                .map(|r| r.task_id)
        };
        let id = |s: &str| Some(s.to_owned());
        // the whole store's latest droid task is two's; one's is its own, from anywhere in it
        assert_eq!(latest(ProviderId::Droid, &one), id("droid-1700000100-0001"));
        assert_eq!(
            latest(ProviderId::Droid, &one.join("src")),
            id("droid-1700000100-0001")
        );
        assert_eq!(latest(ProviderId::Codex, &one), id("codex-1700000150-0002"));
        assert_eq!(
            latest(ProviderId::Droid, &inner),
            id("droid-1700000200-0003")
        );
        assert_eq!(latest(ProviderId::Droid, &two), id("droid-1700000300-0004"));
        assert_eq!(latest(ProviderId::Codex, &two), None);
        assert_eq!(latest(ProviderId::Droid, &loose), None);
        // only the provider's newest LATEST_IN_REPOSITORY_WITHIN tasks are looked through
        for n in 0..LATEST_IN_REPOSITORY_WITHIN {
            let seq = 10 + n as u64;
            in_repo(
                &format!("droid-{}-{:04x}", 1_700_001_000 + seq, n),
                seq,
                &two,
            );
        }
        assert_eq!(latest(ProviderId::Droid, &one), None);
        assert_eq!(latest(ProviderId::Codex, &one), id("codex-1700000150-0002"));
    }
}
