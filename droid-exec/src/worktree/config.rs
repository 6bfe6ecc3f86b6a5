//! The worktree settings a run needs: the default isolation, the set-up of a new worktree and
//! the bound on how many there may be.

use droid_contract::Isolation;
use serde::{Deserialize, Serialize};

/// The default of `max_worktrees`: enough for a planner handing out a handful of subtasks at
/// once with their results waiting for review, few enough that a forgotten batch does not fill
/// the disk (peers' users found 26 GB of orphaned worktrees after two days).
pub const DEFAULT_MAX_WORKTREES: usize = 16;

/// The worktree settings of an engine (docs/worktrees.md).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct WorktreeConfig {
    /// Where a request that names none runs (setting `isolation`).
    pub isolation: Isolation,
    /// Commands run in a new worktree before the agent (setting `setup_commands`), when the
    /// request names none.
    pub setup_commands: Vec<String>,
    /// Untracked paths copied into a new worktree (setting `worktree_copy`), when the request
    /// names none.
    pub worktree_copy: Vec<String>,
    /// Most worktrees at once in the store (live runs, and results waiting to be applied or
    /// discarded); a submission beyond is refused.
    pub max_worktrees: usize,
}

impl Default for WorktreeConfig {
    fn default() -> Self {
        Self {
            isolation: Isolation::None,
            setup_commands: Vec::new(),
            worktree_copy: Vec::new(),
            max_worktrees: DEFAULT_MAX_WORKTREES,
        }
    }
}
