//! A worktree's record (`<store>/worktrees/<id>/worktree.json`): where it is, which repository
//! it belongs to, the commits of its change, and what became of it. Written atomically by the
//! one process holding the worktree's lock (or, for apply and discard, the state change under
//! it); read by every front-end to show a task's `worktree` as it is now.

use std::path::{Path, PathBuf};

use droid_contract::{ProviderId, WorktreeInfo, WorktreeState};
use serde::{Deserialize, Serialize};

use crate::error::EngineError;
use crate::state_file::{ReadError, read_regular, write_atomic};
use crate::task_key::TaskKey;

/// The longest record read (a few hundred bytes, a few KiB with many follow-up turns).
const RECORD_LIMIT: u64 = 256 * 1024;
/// Most task ids kept in a record (the worktree's first task and its follow-ups).
const MAX_TASKS: usize = 200;

/// What `worktree.json` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Record {
    /// The worktree's id: the task that made it.
    pub(crate) id: String,
    /// The user's work tree (its top).
    pub(crate) repo: PathBuf,
    /// `repo_root` relative to the top: where in the checkout the agent works.
    pub(crate) prefix: PathBuf,
    /// The user's git directory (where their index is).
    pub(crate) git_dir: PathBuf,
    /// The repository's common git directory.
    pub(crate) common_dir: PathBuf,
    /// The worktree's own git directory, `<common_dir>/worktrees/<name>`.
    pub(crate) admin_dir: PathBuf,
    /// The checkout.
    pub(crate) checkout: PathBuf,
    /// `droid-executor/<id>`.
    pub(crate) branch: String,
    /// The commit the change started from.
    pub(crate) base: String,
    /// The commit holding the change so far (`base` until a run commits).
    pub(crate) head: String,
    /// Its tree, when known (spares a `git rev-parse` at the next commit).
    #[serde(default)]
    pub(crate) head_tree: Option<String>,
    /// What became of it; `None` until its first run has ended.
    pub(crate) state: Option<WorktreeState>,
    /// The agent CLI whose session ran there.
    pub(crate) provider: ProviderId,
    /// That session (a follow-up naming it runs in this worktree).
    pub(crate) session_id: Option<String>,
    /// The tasks that ran there, first the one that made it.
    pub(crate) tasks: Vec<String>,
    /// When it was made (RFC 3339).
    pub(crate) created_at: String,
}

impl Record {
    /// The record at `path`; `None` when there is none.
    ///
    /// # Errors
    /// [`EngineError::Corrupt`] for a file that is not a readable record, [`EngineError::Io`]
    /// when it cannot be read.
    pub(crate) fn read(path: &Path) -> Result<Option<Self>, EngineError> {
        let bytes = match read_regular(path, RECORD_LIMIT) {
            Ok(b) => b,
            Err(ReadError::Missing) => return Ok(None),
            Err(ReadError::Unreadable(message)) => {
                return Err(EngineError::Corrupt {
                    path: path.to_path_buf(),
                    message,
                });
            }
            Err(ReadError::Io(e)) => return Err(EngineError::io("read", path)(e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| EngineError::Corrupt {
                path: path.to_path_buf(),
                message: e.to_string(),
            })
    }

    /// Write it to `path`, atomically and durably (the states a caller is told of).
    ///
    /// # Errors
    /// [`EngineError::Io`] when it cannot be written.
    pub(crate) fn write(&self, path: &Path) -> Result<(), EngineError> {
        write_atomic(path, &self.bytes(path)?)
    }

    /// Write it to `path` atomically but without waiting for the disk: the steps of making a
    /// worktree, whose record only has to say what to remove should the process die (a crash
    /// of the machine loses the worktree's directory with it, or leaves it to the janitor).
    ///
    /// # Errors
    /// [`EngineError::Io`] when it cannot be written.
    pub(crate) fn write_quick(&self, path: &Path) -> Result<(), EngineError> {
        replace(path, &self.bytes(path)?)
    }

    fn bytes(&self, path: &Path) -> Result<Vec<u8>, EngineError> {
        serde_json::to_vec_pretty(self).map_err(|e| EngineError::Corrupt {
            path: path.to_path_buf(),
            message: e.to_string(),
        })
    }

    /// The worktree's id.
    pub(crate) fn key(&self) -> Result<TaskKey, EngineError> {
        TaskKey::parse(&self.id)
    }

    /// Where in the checkout the agent works (its `repo_root`).
    pub(crate) fn run_root(&self) -> PathBuf {
        if self.prefix.as_os_str().is_empty() {
            self.checkout.clone()
        } else {
            self.checkout.join(&self.prefix)
        }
    }

    /// Its checkout and branch still exist (a run is working there, or the change waits).
    pub(crate) fn is_live(&self) -> bool {
        self.state.is_none_or(WorktreeState::is_live)
    }

    /// Note that task `id` ran there.
    pub(crate) fn add_task(&mut self, id: &str) {
        if !self.tasks.iter().any(|t| t == id) && self.tasks.len() < MAX_TASKS {
            self.tasks.push(id.to_owned());
        }
    }

    /// The result's `worktree` block; `None` until its first run has ended.
    pub(crate) fn info(&self) -> Option<WorktreeInfo> {
        Some(WorktreeInfo {
            path: self.run_root().display().to_string(),
            branch: self.branch.clone(),
            base: self.base.clone(),
            head: self.head.clone(),
            state: self.state?,
        })
    }
}

/// Replace `path` with `bytes` through a temporary file beside it and a rename, without fsync
/// (see [`Record::write_quick`]).
///
/// # Errors
/// [`EngineError::Io`] when it cannot be written.
pub(crate) fn replace(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(".{name}.{}.tmp", std::process::id()));
    let written = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .and_then(|mut f| f.write_all(bytes));
    if let Err(e) = written.and_then(|()| std::fs::rename(&tmp, path)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(EngineError::io("write", path)(e));
    }
    Ok(())
}

/// The branch of worktree `id`.
pub(crate) fn branch_of(id: &TaskKey) -> String {
    format!("{BRANCH_PREFIX}{id}")
}

/// What every branch of ours starts with.
pub(crate) const BRANCH_PREFIX: &str = "droid-executor/";

/// The worktree id a branch of ours names (`droid-executor/<id>`).
pub(crate) fn id_of_branch(branch: &str) -> Option<TaskKey> {
    TaskKey::parse(branch.strip_prefix(BRANCH_PREFIX)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_branch_names_its_worktree_and_nothing_else() {
        let id = TaskKey::parse("codex-1795349045-3fa2").unwrap();
        assert_eq!(branch_of(&id), "droid-executor/codex-1795349045-3fa2");
        assert_eq!(id_of_branch(&branch_of(&id)), Some(id));
        assert_eq!(id_of_branch("droid-executor/../main"), None);
        assert_eq!(id_of_branch("main"), None);
    }
}
