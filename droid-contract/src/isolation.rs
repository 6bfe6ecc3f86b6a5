//! Where a task's agent works: in the user's working tree, or in a git worktree of its own.

use serde::{Deserialize, Serialize};

/// Where the agent works (docs/worktrees.md).
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// In repo_root: one writing run per repository at a time.
    #[default]
    None,
    /// In a git worktree of the repository as it is now; the change is applied later.
    Worktree,
}

impl Isolation {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Worktree => "worktree",
        }
    }

    /// Parse the wire name.
    ///
    /// # Errors
    /// What was expected, for anything else.
    pub fn parse(v: &str) -> Result<Self, String> {
        match v.trim() {
            "none" => Ok(Self::None),
            "worktree" => Ok(Self::Worktree),
            other => Err(format!("{other:?}: expected none or worktree")),
        }
    }
}
