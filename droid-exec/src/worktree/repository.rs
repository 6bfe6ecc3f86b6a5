//! The user's repository as a worktree task needs it: where its work tree's top is, where
//! `repo_root` lies under it, its git directory (and index), its common git directory (objects,
//! refs, config and hooks, shared by every worktree), and its HEAD.

use std::ffi::OsString;
use std::os::unix::ffi::OsStringExt as _;
use std::path::{Path, PathBuf};

use crate::error::EngineError;
use crate::worktree::git::Git;

/// The user's repository, located from a `repo_root`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Repository {
    /// The work tree's top (canonical).
    pub(crate) top: PathBuf,
    /// `repo_root` relative to `top` (empty when it is the top).
    pub(crate) prefix: PathBuf,
    /// Its git directory (`.git`, or a linked work tree's own).
    pub(crate) git_dir: PathBuf,
    /// Its common git directory.
    pub(crate) common_dir: PathBuf,
    /// Its index.
    pub(crate) index: PathBuf,
    /// The commit HEAD names; `None` on a branch without a commit yet.
    pub(crate) head: Option<String>,
}

impl Repository {
    /// Locate the repository around `root`.
    ///
    /// # Errors
    /// [`EngineError::Worktree`] when `root` is not inside a git work tree (or git cannot say
    /// where), naming the reason.
    pub(crate) async fn locate(root: &Path, git: &Git) -> Result<Self, EngineError> {
        let run = git
            .run(
                root,
                &[
                    "rev-parse",
                    "--path-format=absolute",
                    "--show-toplevel",
                    "--show-prefix",
                    "--absolute-git-dir",
                    "--git-common-dir",
                    "--git-path",
                    "index",
                ],
                None,
            )
            .await?;
        if !run.success {
            return Err(EngineError::Worktree(format!(
                "isolation \"worktree\" needs a git work tree, and {} is not in one ({})",
                root.display(),
                run.message
            )));
        }
        let mut out = run.stdout;
        if out.last() == Some(&b'\n') {
            out.pop();
        }
        let lines: Vec<PathBuf> = out
            .split(|b| *b == b'\n')
            .map(|l| PathBuf::from(OsString::from_vec(l.to_vec())))
            .collect();
        let [top, prefix, git_dir, common_dir, index] = lines.as_slice() else {
            return Err(EngineError::Worktree(format!(
                "git rev-parse in {} printed something unexpected (git 2.31 or later is needed)",
                root.display()
            )));
        };
        let top = crate::real_path::canonical(top).map_err(|e| {
            EngineError::Worktree(format!("cannot resolve {}: {e}", top.display()))
        })?;
        let head = git
            .run(root, &["rev-parse", "--verify", "--quiet", "HEAD^{commit}"], None)
            .await?;
        let head = head
            .success
            .then(|| String::from_utf8_lossy(&head.stdout).trim().to_owned())
            .filter(|h| !h.is_empty());
        Ok(Self {
            top,
            prefix: prefix.clone(),
            git_dir: git_dir.clone(),
            common_dir: crate::real_path::canonical(common_dir)
                .unwrap_or_else(|_| common_dir.clone()),
            index: index.clone(),
            head,
        })
    }

    /// Git for this repository's own work tree (`GIT_DIR` and `GIT_WORK_TREE` named).
    pub(crate) fn git_here(&self, git: &Git) -> Git {
        git.with(&[("GIT_DIR", &self.git_dir), ("GIT_WORK_TREE", &self.top)])
    }
}
