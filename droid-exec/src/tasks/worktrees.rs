//! Worktree tasks seen from the task store (docs/worktrees.md): `apply` (and `--check`) and
//! `discard` by task id, the `worktree` block of a task shown as the worktree is now, the
//! listing of worktrees with their disk, and the janitor that reconciles the repositories'
//! worktrees with the store.
//!
//! Every change of a worktree is made holding its lock (`<store>/worktrees/<id>/lock`, the one a
//! run holds while it works there): a worktree whose lock is held is live and is never removed,
//! by apply, discard, the TTL or the janitor. Apply also holds the repository's run lock
//! exclusively (the one an in-place run holds), so it never writes under a run's feet.

use std::path::PathBuf;
use std::time::Duration;

use droid_contract::{
    ExecutionResult, Issue, IssueType, WorktreeAction, WorktreeAnswer, WorktreeOutcome,
    WorktreeState,
};

use crate::error::EngineError;
use crate::lock::{self, Held};
use crate::no_follow as nf;
use crate::task_key::TaskKey;
use crate::tasks::Tasks;
use crate::worktree::apply::apply;
use crate::worktree::layout::Layout;
use crate::worktree::record::{Record, id_of_branch};
use crate::worktree::remove::remove;
use crate::worktree::usage::{DiskUse, disk_use};

/// A worktree directory without a record yet is being made; one older than this was left
/// half-made by a process that died.
const HALF_MADE_GRACE: Duration = Duration::from_secs(600);
/// Most entries of a common git directory's `worktrees/` looked through for orphans.
const MAX_ADMIN_ENTRIES: usize = 10_000;
/// The longest `gitdir` file read.
const GITDIR_LIMIT: u64 = 64 * 1024;

/// One worktree of the store, as `tasks list` and `doctor` show it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorktreeEntry {
    /// The task that made it (its branch is `droid-executor/<id>`).
    pub id: String,
    /// The user's repository.
    pub repo: PathBuf,
    /// Where the agent works.
    pub path: PathBuf,
    /// Its branch.
    pub branch: String,
    /// What became of its change; `None` while its first run works there.
    pub state: Option<WorktreeState>,
    /// A run works there now.
    pub running: bool,
    /// The disk its directory uses.
    pub disk: DiskUse,
}

impl WorktreeEntry {
    /// It holds a checkout: a run works there, or its change waits (`ready`, `conflicted`). An
    /// applied or discarded worktree is only a record until its tasks expire; `tasks list`
    /// leaves those out.
    pub fn holds_checkout(&self) -> bool {
        self.running || self.state.is_none_or(WorktreeState::is_live)
    }

    /// What it is now: `running`, the state of its change, or `ended` (its first run ended
    /// before committing: the janitor removes it).
    pub fn state_str(&self) -> &'static str {
        match (self.running, self.state) {
            (true, _) => "running",
            (false, Some(s)) => s.as_str(),
            (false, None) => "ended",
        }
    }

    /// As `tasks list --worktrees --json` and `GET /tasks?worktrees=true` give it
    /// (docs/protocol.md).
    pub fn to_json(&self) -> serde_json::Value {
        serde_json::json!({
            "task_id": self.id,
            "state": self.state_str(),
            "disk_bytes": self.disk.bytes,
            "disk_partial": self.disk.partial,
            "path": self.path.display().to_string(),
            "branch": self.branch,
            "repo": self.repo.display().to_string(),
        })
    }
}

impl Tasks {
    /// The worktrees holding a checkout ([`WorktreeEntry::holds_checkout`]), newest first, as
    /// JSON ([`WorktreeEntry::to_json`]): what every front-end's listing shows.
    ///
    /// # Errors
    /// As [`Tasks::worktrees`].
    pub fn worktrees_json(&self) -> Result<Vec<serde_json::Value>, EngineError> {
        Ok(self
            .worktrees()?
            .iter()
            .filter(|w| w.holds_checkout())
            .map(WorktreeEntry::to_json)
            .collect())
    }

    fn layout(&self) -> Layout {
        Layout::new(self.store.root())
    }

    /// Bring task `id`'s change into the user's working tree as uncommitted changes, merged
    /// three-way against its base: all of it, or (on a conflict) nothing. With `check`, say what
    /// would happen and change nothing. A change applied is not applied again.
    ///
    /// # Errors
    /// [`EngineError::NoSuchTask`] for an unknown id; [`EngineError::Io`] when the store cannot
    /// be used. Everything else (a conflict, a refusal) is the answer's `outcome`.
    pub async fn apply(&self, id: &str, check: bool) -> Result<WorktreeAnswer, EngineError> {
        let action = if check {
            WorktreeAction::Check
        } else {
            WorktreeAction::Apply
        };
        let (wt, _held, record) = match self.held_worktree(id, action).await? {
            Ok(found) => found,
            Err(refused) => return Ok(*refused),
        };
        let layout = self.layout();
        let answer =
            |outcome, summary: String, issues, conflicts, files, record: &Record| WorktreeAnswer {
                outcome,
                summary,
                issues,
                conflicts,
                task_id: id.to_owned(),
                action,
                worktree: record.info(),
                files_changed: files,
            };
        // an in-place run of the repository must not see its files change under it
        let _repo = if check {
            None
        } else {
            let lock = self
                .scheduler
                .repo_lock_of(&record.repo.join(&record.prefix));
            if let Some(dir) = lock.parent() {
                let _ = std::fs::create_dir_all(dir);
            }
            match lock::try_exclusive(&lock)? {
                Some(held) => Some(held),
                None => {
                    return Ok(refused(
                        id,
                        action,
                        &record,
                        format!(
                            "a run is using {} in place now; the change was not applied",
                            record.repo.display()
                        ),
                        "apply once that run has ended (droid-executor tasks list shows it)",
                    ));
                }
            }
        };
        let merged = match apply(&layout, &record, &self.cfg.env, !check).await {
            Ok(m) => m,
            Err(e) => {
                return Ok(answer(
                    WorktreeOutcome::Refused,
                    format!("the change was not applied: {e}"),
                    vec![Issue::new(
                        IssueType::EnvIssue,
                        e.to_string(),
                        "fix what it says and apply again; the change is kept on its branch",
                    )],
                    Vec::new(),
                    Vec::new(),
                    &record,
                ));
            }
        };
        let mut record = record;
        if !merged.conflicts.is_empty() || merged.refused.is_some() {
            let why = merged.refused.clone().unwrap_or_else(|| {
                format!(
                    "the change and the working tree both change {}",
                    merged.conflicts.join(", ")
                )
            });
            if !check {
                record.state = Some(WorktreeState::Conflicted);
                record.write(&layout.record(&wt))?;
            }
            let shown = if merged.conflicts.is_empty() {
                "some paths".to_owned()
            } else {
                merged.conflicts.join(", ")
            };
            let summary = if check {
                format!("the change would conflict with the working tree in {shown}")
            } else {
                format!(
                    "the change conflicts with the working tree in {shown}; nothing was written"
                )
            };
            return Ok(answer(
                WorktreeOutcome::Conflict,
                summary,
                vec![Issue::new(
                    IssueType::Conflict,
                    why,
                    format!(
                        "resolve it: commit or set aside your own edits of those paths and apply \
                         again, or merge the branch {} yourself (git merge {}), or discard the task",
                        record.branch, record.branch
                    ),
                )],
                merged.conflicts,
                merged.files,
                &record,
            ));
        }
        if check {
            let n = merged.files.len();
            return Ok(answer(
                WorktreeOutcome::Clean,
                format!(
                    "the change applies cleanly: {n} file(s) would change; nothing was written"
                ),
                Vec::new(),
                Vec::new(),
                merged.files,
                &record,
            ));
        }
        // applied: the change lives in the user's working tree now
        let left = remove(&layout, &record, &self.cfg.env, false).await;
        forget_copies(&layout, &wt);
        record.state = Some(WorktreeState::Applied);
        record.write(&layout.record(&wt))?;
        let n = merged.files.len();
        let mut issues = Vec::new();
        if !left.is_empty() {
            issues.push(Issue::new(
                IssueType::EnvIssue,
                format!(
                    "applied, but not everything of the worktree was removed: {}",
                    left.join("; ")
                ),
                "remove what it names by hand; the janitor leaves it",
            ));
        }
        Ok(answer(
            WorktreeOutcome::Applied,
            format!(
                "{n} file(s) changed in {} (uncommitted); the worktree and its branch are removed",
                record.repo.display()
            ),
            issues,
            Vec::new(),
            merged.files,
            &record,
        ))
    }

    /// Remove task `id`'s worktree and its branch.
    ///
    /// # Errors
    /// As [`Tasks::apply`].
    pub async fn discard(&self, id: &str) -> Result<WorktreeAnswer, EngineError> {
        let action = WorktreeAction::Discard;
        let (wt, _held, mut record) = match self.held_worktree(id, action).await? {
            Ok(found) => found,
            Err(refused) => return Ok(*refused),
        };
        let layout = self.layout();
        let left = remove(&layout, &record, &self.cfg.env, false).await;
        forget_copies(&layout, &wt);
        record.state = Some(WorktreeState::Discarded);
        record.write(&layout.record(&wt))?;
        let mut issues = Vec::new();
        if !left.is_empty() {
            issues.push(Issue::new(
                IssueType::EnvIssue,
                format!(
                    "not everything of the worktree was removed: {}",
                    left.join("; ")
                ),
                "remove what it names by hand",
            ));
        }
        Ok(WorktreeAnswer {
            outcome: WorktreeOutcome::Discarded,
            summary: format!(
                "the worktree {} and the branch {} are removed",
                record.run_root().display(),
                record.branch
            ),
            issues,
            conflicts: Vec::new(),
            task_id: id.to_owned(),
            action,
            worktree: record.info(),
            files_changed: Vec::new(),
        })
    }

    /// Task `id`'s worktree, its lock taken and its record read under it, when it can be
    /// applied or discarded; else the refusal to answer with.
    async fn held_worktree(
        &self,
        id: &str,
        action: WorktreeAction,
    ) -> Result<Result<(TaskKey, Held, Record), Box<WorktreeAnswer>>, EngineError> {
        let rec = self.status(id).await?;
        let no = |summary: String, action_text: &str| {
            Box::new(WorktreeAnswer {
                outcome: WorktreeOutcome::Refused,
                summary: summary.clone(),
                issues: vec![Issue::new(IssueType::ValidationError, summary, action_text)],
                conflicts: Vec::new(),
                task_id: id.to_owned(),
                action,
                worktree: rec.result.as_ref().and_then(|r| r.worktree.clone()),
                files_changed: Vec::new(),
            })
        };
        let Some(result) = &rec.result else {
            return Ok(Err(no(
                format!("task {id} is still {}", rec.state.as_str()),
                "wait for it to finish (droid-executor tasks wait), then review its result",
            )));
        };
        let Some(info) = &result.worktree else {
            return Ok(Err(no(
                format!("task {id} did not run in a worktree: its changes are already in place"),
                "only a task run with isolation \"worktree\" can be applied or discarded",
            )));
        };
        let Some(wt) = id_of_branch(&info.branch) else {
            return Ok(Err(no(
                format!(
                    "task {id} names no worktree of droid-executor ({})",
                    info.branch
                ),
                "look at the task's result",
            )));
        };
        let layout = self.layout();
        let Some(held) = lock::try_exclusive(&layout.lock(&wt)).ok().flatten() else {
            return Ok(Err(no(
                format!("a run is working in the worktree of task {id} now"),
                "wait for it to finish (a follow-up turn, or an apply or discard in progress)",
            )));
        };
        let record = match Record::read(&layout.record(&wt))? {
            Some(r) => r,
            None => {
                return Ok(Err(no(
                    format!("the worktree of task {id} is gone (its record was removed)"),
                    "its branch, if still there, holds the change: git merge it yourself",
                )));
            }
        };
        match record.state {
            Some(WorktreeState::Ready | WorktreeState::Conflicted) => {}
            Some(WorktreeState::Applied) => {
                return Ok(Err(no(
                    format!("task {id}'s change was applied already; it is not applied twice"),
                    "its change is in your working tree (git status shows it)",
                )));
            }
            Some(WorktreeState::Discarded) => {
                return Ok(Err(no(
                    format!("task {id}'s worktree was discarded"),
                    "submit the task again if its change is still wanted",
                )));
            }
            None => {
                return Ok(Err(no(
                    format!("task {id}'s run ended before its change was committed"),
                    "the janitor removes the worktree (droid-executor tasks clean)",
                )));
            }
        }
        Ok(Ok((wt, held, record)))
    }

    /// The `worktree` block of `result` as the worktree is now (its state changes after the
    /// result: applied, discarded, conflicted), and those of its `attempts` (a `best_of`'s).
    pub(crate) fn worktree_now(&self, result: &mut ExecutionResult) {
        let layout = self.layout();
        let now = |info: &mut droid_contract::WorktreeInfo| {
            let Some(wt) = id_of_branch(&info.branch) else {
                return;
            };
            if let Ok(Some(record)) = Record::read(&layout.record(&wt))
                && let Some(state) = record.state
            {
                info.state = state;
            }
        };
        if let Some(info) = result.worktree.as_mut() {
            now(info);
        }
        for info in result
            .attempts
            .iter_mut()
            .filter_map(|a| a.worktree.as_mut())
        {
            now(info);
        }
    }

    /// Every worktree of the store, with the disk it uses.
    ///
    /// # Errors
    /// [`EngineError::Io`] when `<store>/worktrees` cannot be read.
    pub fn worktrees(&self) -> Result<Vec<WorktreeEntry>, EngineError> {
        let layout = self.layout();
        let mut out = Vec::new();
        for id in layout.ids()? {
            let running = lock::is_held(&layout.lock(&id)).unwrap_or(false);
            let record = Record::read(&layout.record(&id)).ok().flatten();
            let disk = disk_use(&layout.dir(&id));
            out.push(match record {
                Some(r) => WorktreeEntry {
                    id: id.to_string(),
                    path: r.run_root(),
                    repo: r.repo.clone(),
                    branch: r.branch.clone(),
                    state: r.state,
                    running,
                    disk,
                },
                None => WorktreeEntry {
                    id: id.to_string(),
                    repo: PathBuf::new(),
                    path: layout.dir(&id),
                    branch: String::new(),
                    state: None,
                    running,
                    disk,
                },
            });
        }
        // newest first, as tasks are listed (an id carries its creation second)
        out.sort_by(|a, b| {
            let secs = |id: &str| TaskKey::parse(id).map_or(0, |k| k.secs());
            secs(&b.id).cmp(&secs(&a.id)).then_with(|| b.id.cmp(&a.id))
        });
        Ok(out)
    }

    /// The janitor: reconcile the worktrees in the store, and the repositories' own records of
    /// them (what `git worktree list` reads), with the tasks. Removed: the worktree (and branch)
    /// of a run that died before its change was committed; the checkout of a change whose
    /// tasks have all expired (the change is kept on its branch); the record of an applied or
    /// discarded worktree once its tasks are gone; a repository's entry for a worktree of ours
    /// whose directory is gone. Nothing of a live run (its lock held), nothing not ours.
    /// Returns how many worktrees were removed.
    pub(crate) async fn reconcile_worktrees(&self) -> usize {
        let layout = self.layout();
        let Ok(ids) = layout.ids() else {
            return 0;
        };
        let mut removed = 0;
        let mut repos: Vec<PathBuf> = Vec::new();
        for id in ids {
            // a live run's: never touched
            let Ok(Some(_held)) = lock::try_exclusive(&layout.lock(&id)) else {
                continue;
            };
            let record = match Record::read(&layout.record(&id)) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    // half-made by a process that died before writing the record
                    let old = std::fs::symlink_metadata(layout.dir(&id))
                        .and_then(|m| m.modified())
                        .ok()
                        .and_then(|t| t.elapsed().ok())
                        .is_some_and(|age| age > HALF_MADE_GRACE);
                    if old && remove_dir(&layout, &id) {
                        removed += 1;
                    }
                    continue;
                }
                Err(e) => {
                    tracing::warn!(worktree = %id, "the janitor skips a worktree: {e}");
                    continue;
                }
            };
            if !repos.contains(&record.common_dir) {
                repos.push(record.common_dir.clone());
            }
            let tasks_left = record
                .tasks
                .iter()
                .filter_map(|t| TaskKey::parse(t).ok())
                .any(|t| self.store.has_record(&t));
            match record.state {
                None | Some(WorktreeState::Ready | WorktreeState::Conflicted) if !tasks_left => {
                    // expired, or an orphan (the store lost its tasks, no run holds it): what
                    // the checkout holds is committed, the checkout goes, the change stays on
                    // its branch
                    if self.keep_on_branch(&layout, &id, record).await {
                        removed += 1;
                    }
                }
                None => {
                    // its first run died (its lock is free), and its task says so: nothing to
                    // review
                    let left = remove(&layout, &record, &self.cfg.env, false).await;
                    if left.is_empty() && remove_dir(&layout, &id) {
                        removed += 1;
                    } else {
                        tracing::warn!(worktree = %id, "the janitor could not remove all: {left:?}");
                    }
                }
                Some(WorktreeState::Applied | WorktreeState::Discarded) if !tasks_left => {
                    if remove_dir(&layout, &id) {
                        removed += 1;
                    }
                }
                Some(_) => {}
            }
        }
        for common in repos {
            removed += orphan_entries(&layout, &common);
        }
        removed
    }
}

impl Tasks {
    /// Keep the change of worktree `id`, which nobody can review through a task any more, on
    /// its branch, then remove the worktree: what its checkout holds is committed first (a run
    /// that died, or the user, may have left changes there), and the branch is kept unless it
    /// holds nothing beyond its base. False when the change could not be committed (then
    /// nothing is removed: the janitor tries again next time) or the worktree is not wholly
    /// removed.
    async fn keep_on_branch(&self, layout: &Layout, id: &TaskKey, mut record: Record) -> bool {
        // only a checkout of this worktree's own directory is ever committed from or removed
        if record.checkout.parent() != Some(layout.dir(id).as_path()) {
            tracing::warn!(worktree = %id, "the janitor skips a worktree whose checkout is elsewhere");
            return false;
        }
        if record.checkout.is_dir() {
            let message = format!(
                "droid-executor: what the worktree of {id} held\n\nCommitted by the janitor \
                 before the worktree was removed (its tasks expired or are gone)."
            );
            match crate::worktree::commit::commit(layout, &record, None, &self.cfg.env, &message)
                .await
            {
                Ok(done) => {
                    record.head = done.head;
                    record.head_tree = Some(done.tree);
                }
                Err(e) => {
                    tracing::warn!(worktree = %id, "the janitor keeps a worktree whose change it could not commit: {e}");
                    return false;
                }
            }
        }
        let keep_branch = record.head != record.base;
        let left = remove(layout, &record, &self.cfg.env, keep_branch).await;
        if !left.is_empty() {
            tracing::warn!(worktree = %id, "the janitor could not remove all: {left:?}");
            return false;
        }
        remove_dir(layout, id)
    }
}

/// Remove what of worktree `id` only served its checkout (our index copy, the temporary
/// indexes), once the checkout is gone: the record stays until its tasks expire.
fn forget_copies(layout: &Layout, id: &TaskKey) {
    let _ = std::fs::remove_file(layout.index(id));
    let _ = std::fs::remove_dir_all(layout.tmp(id));
}

/// Remove worktree `id`'s directory (record, lock, index: its checkout is gone by now).
fn remove_dir(layout: &Layout, id: &TaskKey) -> bool {
    let Ok(root) = nix::fcntl::open(
        layout.root(),
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) else {
        return false;
    };
    let mut budget = 20_000_000;
    nf::remove_at(&root, std::ffi::OsStr::new(id.as_str()), &mut budget).is_ok()
}

/// Remove the entries of `<common>/worktrees` (what `git worktree list` reads) whose `gitdir`
/// names a checkout under our store that no longer exists; how many.
fn orphan_entries(layout: &Layout, common: &std::path::Path) -> usize {
    let parent = common.join("worktrees");
    let Ok(dir) = nix::fcntl::open(
        &parent,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    ) else {
        return 0;
    };
    let Ok((names, _)) = nf::list(&dir, MAX_ADMIN_ENTRIES) else {
        return 0;
    };
    let ours =
        crate::real_path::canonical(layout.root()).unwrap_or_else(|_| layout.root().to_path_buf());
    let mut removed = 0;
    for name in names {
        let Ok(entry) = nf::open_dir(&dir, &name) else {
            continue;
        };
        let Ok(Some((bytes, _))) =
            nf::read_at(&entry, std::ffi::OsStr::new("gitdir"), GITDIR_LIMIT)
        else {
            continue;
        };
        let gitdir = PathBuf::from(String::from_utf8_lossy(&bytes).trim());
        let under_ours = gitdir.starts_with(&ours) || gitdir.starts_with(layout.root());
        if under_ours && !gitdir.exists() {
            let mut budget = 100_000;
            if nf::remove_at(&dir, &name, &mut budget).is_ok() {
                removed += 1;
            }
        }
    }
    removed
}

/// A refusal naming `why`, for `record`'s worktree.
fn refused(
    id: &str,
    action: WorktreeAction,
    record: &Record,
    why: String,
    what_to_do: &str,
) -> WorktreeAnswer {
    WorktreeAnswer {
        outcome: WorktreeOutcome::Refused,
        summary: why.clone(),
        issues: vec![Issue::new(IssueType::EnvIssue, why, what_to_do)],
        conflicts: Vec::new(),
        task_id: id.to_owned(),
        action,
        worktree: record.info(),
        files_changed: Vec::new(),
    }
}
