//! A run's hold on its worktree: made for the task (or, for a follow-up turn of a worktree
//! task's session, the one that session ran in), locked from before it exists until the run's
//! droid is reaped, committed when the agent is done, and recorded as `ready` for review.
//!
//! The lock is what "live" means: the janitor, `discard`, `apply` and the TTL never touch a
//! worktree whose lock is held, whatever its record says. A new worktree is counted against
//! `max_worktrees` and its directory made under `<store>/worktrees/create.lock`, so two
//! submissions cannot both take the last place.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use droid_contract::{
    ExecutionRequest, ExecutionResult, Issue, IssueType, ShellCommand, WorktreeState,
};

use crate::error::EngineError;
use crate::lock::{self, Held};
use crate::snapshot::Changes;
use crate::task_key::TaskKey;
use crate::worktree::commit::commit;
use crate::worktree::config::WorktreeConfig;
use crate::worktree::copy_in::Copied;
use crate::worktree::create::create;
use crate::worktree::layout::Layout;
use crate::worktree::record::Record;
use crate::worktree::remove::remove;

/// How long a follow-up waits for its worktree's previous run to let go (its droid being
/// reaped: `kill_grace` and a little).
const RESUME_WAIT: Duration = Duration::from_secs(30);
/// Longest first line of an objective used as a commit's subject.
const SUBJECT_MAX: usize = 72;

/// A run's worktree, held.
#[derive(Debug)]
pub(crate) struct Lease {
    layout: Layout,
    id: TaskKey,
    /// The task running now.
    task: String,
    record: Mutex<Record>,
    lock: Held,
    /// Made for this run (a follow-up resumes one made earlier).
    fresh: bool,
    setup: Vec<ShellCommand>,
    /// What `worktree_copy` did (said in the result's logs).
    copied: Option<Copied>,
    /// The repository's git as the worktree was made with it (a follow-up reads it again).
    git: Option<crate::worktree::git::Git>,
    /// A commit of this run's change was made.
    committed: Mutex<bool>,
}

/// Whether a request runs in a worktree: its own `isolation`, else a worktree its session ran
/// in, else the setting.
pub(crate) fn wants_worktree(
    req: &ExecutionRequest,
    cfg: &WorktreeConfig,
    store: Option<&Path>,
) -> bool {
    use droid_contract::Isolation;
    match req.isolation {
        Some(Isolation::Worktree) => true,
        Some(Isolation::None) => false,
        None => {
            store.is_some_and(|s| find_session(&Layout::new(s), req).ok().flatten().is_some())
                || cfg.isolation == Isolation::Worktree
        }
    }
}

/// Whether `req` would make a new worktree (it runs in one, and not in its session's): what
/// counts against `max_worktrees` when it is submitted.
pub(crate) fn makes_worktree(req: &ExecutionRequest, cfg: &WorktreeConfig, store: &Path) -> bool {
    wants_worktree(req, cfg, Some(store))
        && find_session(&Layout::new(store), req)
            .ok()
            .flatten()
            .is_none()
}

/// The live worktree a follow-up of `req`'s session resumes in: the provider's session ran
/// there, for this repo_root.
fn find_session(layout: &Layout, req: &ExecutionRequest) -> Result<Option<Record>, EngineError> {
    let Some(session) = req.session_id.as_deref() else {
        return Ok(None);
    };
    let root = crate::real_path::canonical(req.context.repo_root.as_path())
        .unwrap_or_else(|_| req.context.repo_root.as_path().to_path_buf());
    for id in layout.ids()? {
        let Ok(Some(record)) = Record::read(&layout.record(&id)) else {
            continue;
        };
        if record.session_id.as_deref() == Some(session)
            && record.provider == req.provider
            && record.is_live()
            && record.state.is_some()
            && record.repo.join(&record.prefix) == root
        {
            return Ok(Some(record));
        }
    }
    Ok(None)
}

impl Lease {
    /// The worktree task `task` runs `req` in: the one its session ran in, or a new one made
    /// now from the repository as the user has it.
    ///
    /// # Errors
    /// [`EngineError::Worktree`] naming why (not a git work tree, `max_worktrees` reached, git
    /// failing); nothing is left behind.
    pub(crate) async fn take(
        store: &Path,
        task: &TaskKey,
        req: &ExecutionRequest,
        cfg: &WorktreeConfig,
        env: &[(OsString, OsString)],
    ) -> Result<Self, EngineError> {
        let layout = Layout::new(store);
        layout.ensure()?;
        if let Some(record) = find_session(&layout, req)? {
            return Self::resume(layout, task, record).await;
        }
        let id = task.clone();
        let lock = reserve(&layout, &id, cfg.max_worktrees)?;
        let copies: Vec<PathBuf> = if req.worktree_copy.is_empty() {
            cfg.worktree_copy.iter().map(PathBuf::from).collect()
        } else {
            req.worktree_copy
                .iter()
                .map(|p| p.as_path().to_path_buf())
                .collect()
        };
        let copies: Vec<&Path> = copies
            .iter()
            .map(PathBuf::as_path)
            .filter(|p| p.is_relative() && !p.as_os_str().is_empty())
            .collect();
        let setup = if req.setup_commands.is_empty() {
            cfg.setup_commands
                .iter()
                .filter_map(|c| ShellCommand::try_from(c.clone()).ok())
                .collect()
        } else {
            req.setup_commands.clone()
        };
        match create(
            &layout,
            &id,
            req.context.repo_root.as_path(),
            env,
            req.provider,
            &copies,
        )
        .await
        {
            Ok(made) => Ok(Self {
                layout,
                id,
                task: task.to_string(),
                record: Mutex::new(made.record),
                lock,
                fresh: true,
                setup,
                copied: Some(made.copied),
                git: Some(made.git),
                committed: Mutex::new(false),
            }),
            Err(e) => {
                // whatever was made: the record says what
                if let Ok(Some(record)) = Record::read(&layout.record(&id)) {
                    let _ = remove(&layout, &record, env, false).await;
                }
                let _ = std::fs::remove_dir_all(layout.dir(&id));
                drop(lock);
                Err(e)
            }
        }
    }

    /// Take the worktree `record` (a follow-up of its session).
    async fn resume(layout: Layout, task: &TaskKey, record: Record) -> Result<Self, EngineError> {
        let id = record.key()?;
        let until = tokio::time::Instant::now() + RESUME_WAIT;
        let lock = loop {
            if let Some(held) = lock::try_exclusive(&layout.lock(&id))? {
                break held;
            }
            if tokio::time::Instant::now() >= until {
                return Err(EngineError::Worktree(format!(
                    "the worktree of session {} ({}) is still in use by another run",
                    record.session_id.as_deref().unwrap_or("?"),
                    record.checkout.display()
                )));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        };
        // read again under the lock: an apply or discard may have come first
        let record = Record::read(&layout.record(&id))?
            .filter(Record::is_live)
            .ok_or_else(|| {
                EngineError::Worktree(format!(
                    "the worktree {} was applied or discarded meanwhile",
                    id
                ))
            })?;
        Ok(Self {
            layout,
            id,
            task: task.to_string(),
            record: Mutex::new(record),
            lock,
            fresh: false,
            setup: Vec::new(),
            copied: None,
            git: None,
            committed: Mutex::new(false),
        })
    }

    fn record(&self) -> Record {
        self.record
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// Where the agent works: the checkout, at repo_root's place in it.
    pub(crate) fn root(&self) -> PathBuf {
        self.record().run_root()
    }

    /// The checkout (what the run's slot is taken for: worktree runs of one repository run at
    /// once, a worktree's runs one at a time).
    pub(crate) fn checkout(&self) -> PathBuf {
        self.record().checkout
    }

    /// The work tree whose `.git` is the repository's common git directory (hooks and config
    /// every worktree shares), for the git guard; `None` when the common directory is not a
    /// work tree's `.git` (a bare repository's worktree, a submodule's).
    pub(crate) fn common_work_tree(&self) -> Option<PathBuf> {
        let common = self.record().common_dir;
        (common.file_name() == Some(std::ffi::OsStr::new(".git")))
            .then(|| common.parent().map(Path::to_path_buf))
            .flatten()
    }

    /// The commands to run in the new worktree before the agent (none for a follow-up).
    pub(crate) fn setup_commands(&self) -> &[ShellCommand] {
        &self.setup
    }

    /// What to say in the result about making the worktree.
    pub(crate) fn notes(&self) -> Vec<String> {
        let mut notes = Vec::new();
        if let Some(c) = &self.copied {
            if c.entries > 0 {
                notes.push(format!(
                    "worktree_copy: copied {} entries ({} bytes) into the worktree",
                    c.entries, c.bytes
                ));
            }
            notes.extend(c.warnings.iter().cloned());
        }
        notes
    }

    /// Commit what the agent left in the worktree; the change against the base, as the run's
    /// `files_changed`.
    ///
    /// # Errors
    /// As [`crate::worktree::commit::commit`]: the change stays in the checkout.
    pub(crate) async fn commit(
        &self,
        env: &[(OsString, OsString)],
        objective: &str,
    ) -> Result<Changes, EngineError> {
        let record = self.record();
        let subject: String = objective
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("the agent's change")
            .trim()
            .chars()
            .take(SUBJECT_MAX)
            .collect();
        let message = format!(
            "{subject}\n\nThe agent's change in task {}, committed by droid-executor.",
            self.task
        );
        let done = commit(&self.layout, &record, self.git.as_ref(), env, &message).await?;
        {
            let mut r = self
                .record
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            r.head.clone_from(&done.head);
            r.head_tree = Some(done.tree.clone());
        }
        *self
            .committed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = true;
        Ok(Changes {
            files: done.files,
            warnings: done.warnings,
            incomplete: None,
        })
    }

    /// Record how the run ended and say it in `result` (its `worktree` block). A new worktree
    /// whose agent never started is removed, with its branch; otherwise the change waits,
    /// `ready`. The lock is returned: hold it until the run's droid is reaped.
    pub(crate) async fn finish(
        self,
        result: &mut ExecutionResult,
        env: &[(OsString, OsString)],
    ) -> Held {
        let committed = *self
            .committed
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut record = self.record();
        result.logs.splice(0..0, self.notes());
        if !committed && result.agent.is_none() && self.fresh {
            // nothing ran there: nothing to keep
            let left = remove(&self.layout, &record, env, false).await;
            if left.is_empty() {
                let _ = std::fs::remove_dir_all(self.layout.dir(&self.id));
            } else {
                record.state = Some(WorktreeState::Discarded);
                let _ = record.write(&self.layout.record(&self.id));
                result.logs.push(format!(
                    "the unused worktree could not be removed whole: {}",
                    left.join("; ")
                ));
            }
            return self.lock;
        }
        if !committed {
            result.issues.push(Issue::new(
                IssueType::EnvIssue,
                format!(
                    "the agent's change could not be committed to {}; it is still in the \
                     worktree {}",
                    record.branch,
                    record.run_root().display()
                ),
                "look at the worktree yourself, or discard it (droid-executor tasks discard)",
            ));
        }
        record.state = Some(WorktreeState::Ready);
        if result.session_id.is_some() {
            record.session_id.clone_from(&result.session_id);
        }
        record.add_task(&self.task);
        if let Err(e) = record.write(&self.layout.record(&self.id)) {
            result
                .logs
                .push(format!("the worktree's record could not be written: {e}"));
        }
        result.worktree = record.info();
        self.lock
    }
}

/// The worktrees of the store that hold a checkout: a run works there, a change waits, or one is
/// half-made or unreadable (it holds disk until the janitor says otherwise).
fn live_count(layout: &Layout) -> Result<usize, EngineError> {
    Ok(layout
        .ids()?
        .into_iter()
        .filter(|id| !matches!(Record::read(&layout.record(id)), Ok(Some(r)) if !r.is_live()))
        .count())
}

/// `Err` naming the limit when `max` worktrees exist already.
fn room(layout: &Layout, max: usize) -> Result<(), EngineError> {
    room_for_n(layout, max, 1)
}

/// `Err` naming the limit when `n` more worktrees would take the store past `max`.
fn room_for_n(layout: &Layout, max: usize, n: usize) -> Result<(), EngineError> {
    let live = live_count(layout)?;
    if live.saturating_add(n) > max {
        let what = if n == 1 {
            format!("max_worktrees ({max}) is reached")
        } else {
            format!(
                "best_of needs {n} worktrees at once (one per candidate) and max_worktrees \
                 ({max}) leaves room for {}",
                max.saturating_sub(live)
            )
        };
        return Err(EngineError::Worktree(format!(
            "{what}: {live} worktrees are running or waiting for review; apply or discard some \
             (droid-executor tasks list shows them), or raise max_worktrees \
             (DROID_EXECUTOR_MAX_WORKTREES)"
        )));
    }
    Ok(())
}

/// Whether the store at `store` has room for one more worktree (a submission checks before it
/// gives an id; the run checks again, under the lock, when it makes the worktree).
///
/// # Errors
/// [`EngineError::Worktree`] naming `max_worktrees` when it is reached.
pub(crate) fn room_for_one(store: &Path, max: usize) -> Result<(), EngineError> {
    room(&Layout::new(store), max)
}

/// Whether the store at `store` has room for `n` more worktrees (the candidates of a
/// `best_of`, checked before any of them runs; each run checks again for its own).
///
/// # Errors
/// [`EngineError::Worktree`] naming `max_worktrees` and `n` when they would not fit.
pub(crate) fn room_for(store: &Path, max: usize, n: usize) -> Result<(), EngineError> {
    room_for_n(&Layout::new(store), max, n)
}

/// Count the worktrees, and when there is room, make `id`'s directory and take its lock, all
/// under `create.lock`.
fn reserve(layout: &Layout, id: &TaskKey, max: usize) -> Result<Held, EngineError> {
    let _creating = lock::exclusive(&layout.create_lock())?;
    room(layout, max)?;
    let dir = layout.dir(id);
    std::fs::DirBuilder::new()
        .mode(0o700)
        .create(&dir)
        .map_err(EngineError::io("create directory", &dir))?;
    lock::try_exclusive(&layout.lock(id))?.ok_or_else(|| {
        EngineError::Worktree(format!(
            "the worktree {id} is being made by another process"
        ))
    })
}
