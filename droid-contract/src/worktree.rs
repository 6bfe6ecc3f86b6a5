//! A task's git worktree on the wire: the `worktree` block of a result (where the change is and
//! what became of it) and the answer to `apply`, `apply --check` and `discard`
//! (docs/worktrees.md).

use serde::{Deserialize, Serialize};

use crate::file_change::FileChange;
use crate::issue::Issue;

/// What became of a worktree task's change.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeState {
    /// Committed on its branch, waiting for review: apply it or discard it.
    Ready,
    /// Brought into the user's working tree as uncommitted changes; the worktree and the branch
    /// are gone.
    Applied,
    /// Thrown away with its worktree and branch.
    Discarded,
    /// The last apply met changes of the user's that overlap it; nothing was written. The
    /// worktree and the branch are kept: apply again once the overlap is resolved, or discard.
    Conflicted,
}

impl WorktreeState {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Ready => "ready",
            Self::Applied => "applied",
            Self::Discarded => "discarded",
            Self::Conflicted => "conflicted",
        }
    }

    /// The worktree and its branch still exist (the change can still be applied).
    pub fn is_live(self) -> bool {
        match self {
            Self::Ready | Self::Conflicted => true,
            Self::Applied | Self::Discarded => false,
        }
    }
}

/// Where a worktree task's change is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct WorktreeInfo {
    /// The worktree the agent worked in (under droid-executor's state directory, never inside
    /// the repository).
    pub path: String,
    /// The branch holding the change: `droid-executor/<task id>` (the id `apply` and `discard`
    /// take).
    pub branch: String,
    /// The commit the task started from: the user's HEAD, plus a commit of their uncommitted
    /// and untracked (not ignored) files when there were any.
    pub base: String,
    /// The commit holding the agent's change (its parent is `base`; equal to `base` when the
    /// agent changed nothing).
    pub head: String,
    /// What became of the change (read from the store each time the task is shown).
    pub state: WorktreeState,
}

/// What was asked of a worktree task.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeAction {
    /// Bring the change into the user's working tree.
    Apply,
    /// Say what `apply` would do; change nothing.
    Check,
    /// Remove the worktree and the branch.
    Discard,
}

/// How `apply`, `check` or `discard` ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum WorktreeOutcome {
    /// The change is in the user's working tree, uncommitted.
    Applied,
    /// (`check`) the change would apply cleanly; nothing was written.
    Clean,
    /// The change overlaps the user's own changes: nothing was written; `conflicts` names the
    /// paths.
    Conflict,
    /// The worktree and the branch were removed.
    Discarded,
    /// Nothing was done (already applied or discarded, a run still working there, a busy
    /// repository); `issues` says why.
    Refused,
}

impl WorktreeOutcome {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Applied => "applied",
            Self::Clean => "clean",
            Self::Conflict => "conflict",
            Self::Discarded => "discarded",
            Self::Refused => "refused",
        }
    }

    /// What was asked was done (or, for `check`, would be).
    pub fn is_success(self) -> bool {
        match self {
            Self::Applied | Self::Clean | Self::Discarded => true,
            Self::Conflict | Self::Refused => false,
        }
    }
}

/// The answer to `apply`, `apply --check` or `discard` of a worktree task.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(title = "WorktreeAnswer")]
pub struct WorktreeAnswer {
    /// How it ended.
    pub outcome: WorktreeOutcome,
    /// What happened, in a sentence.
    pub summary: String,
    /// Why it did not succeed (`conflict`, `validation_error`, `env_issue`), each with what to do.
    pub issues: Vec<Issue>,
    /// The conflicting paths (relative to the repository's top), when `outcome` is `conflict`.
    pub conflicts: Vec<String>,
    /// The task.
    pub task_id: String,
    /// What was asked.
    pub action: WorktreeAction,
    /// The worktree as it is now (`null` for a task that never had one).
    pub worktree: Option<WorktreeInfo>,
    /// The files the change touches (relative to the repository's top): what apply writes, or
    /// wrote, or would write.
    pub files_changed: Vec<FileChange>,
}
