//! One file a run changed, as measured from the repository (never from the agent's word).

use serde::{Deserialize, Serialize};

/// How a file changed, from the repository's point of view.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ChangeType {
    /// New file.
    Added,
    /// Content or mode changed.
    Modified,
    /// Removed.
    Deleted,
    /// Moved (with `old_path`), possibly also modified.
    Renamed,
}

/// One changed file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct FileChange {
    /// Path relative to repo_root.
    pub path: String,
    /// How it changed.
    pub change_type: ChangeType,
    /// The previous path of a renamed file.
    #[serde(default)]
    pub old_path: Option<String>,
    /// What droid said it did to this file.
    #[serde(default)]
    pub highlights: Vec<String>,
    /// Lines added (`null` for binary files or when the repository is not a git repository).
    #[serde(default)]
    pub lines_added: Option<u64>,
    /// Lines removed (same rules as `lines_added`).
    #[serde(default)]
    pub lines_removed: Option<u64>,
}
