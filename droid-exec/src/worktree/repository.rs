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
    /// Its tree.
    pub(crate) head_tree: Option<String>,
}

impl Repository {
    /// Locate the repository around `root`.
    ///
    /// # Errors
    /// [`EngineError::Worktree`] when `root` is not inside a git work tree (or git cannot say
    /// where), naming the reason.
    pub(crate) async fn locate(root: &Path, git: &Git) -> Result<Self, EngineError> {
        const PATHS: [&str; 8] = [
            "rev-parse",
            "--path-format=absolute",
            "--show-toplevel",
            "--show-prefix",
            "--absolute-git-dir",
            "--git-common-dir",
            "--git-path",
            "index",
        ];
        // one process in the common case: the paths, HEAD and its tree; on a branch without a
        // commit (HEAD names nothing) the paths alone
        let mut args = PATHS.to_vec();
        args.extend(["HEAD", "HEAD^{tree}"]);
        let mut run = git.run(root, &args, None).await?;
        let mut with_head = true;
        if !run.success && !run.message.contains("not a git repository") {
            run = git.run(root, &PATHS, None).await?;
            with_head = false;
        }
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
        let lines: Vec<Vec<u8>> = out.split(|b| *b == b'\n').map(<[u8]>::to_vec).collect();
        let path = |l: &Vec<u8>| PathBuf::from(OsString::from_vec(l.clone()));
        let text = |l: &Vec<u8>| String::from_utf8_lossy(l).trim().to_owned();
        let (paths, head, head_tree) = match (with_head, lines.as_slice()) {
            (true, [p @ .., head, tree]) if p.len() == 5 => (p, Some(text(head)), Some(text(tree))),
            (false, p) if p.len() == 5 => (p, None, None),
            _ => {
                return Err(EngineError::Worktree(format!(
                    "git rev-parse in {} printed something unexpected (git 2.31 or later is \
                     needed)",
                    root.display()
                )));
            }
        };
        let [top, prefix, git_dir, common_dir, index] = [
            path(&paths[0]),
            path(&paths[1]),
            path(&paths[2]),
            path(&paths[3]),
            path(&paths[4]),
        ];
        let top = crate::real_path::canonical(&top)
            .map_err(|e| EngineError::Worktree(format!("cannot resolve {}: {e}", top.display())))?;
        Ok(Self {
            top,
            prefix,
            git_dir,
            common_dir: crate::real_path::canonical(&common_dir).unwrap_or(common_dir),
            index,
            head,
            head_tree,
        })
    }

    /// Git for this repository's own work tree (`GIT_DIR` and `GIT_WORK_TREE` named).
    pub(crate) fn git_here(&self, git: &Git) -> Git {
        git.with(&[("GIT_DIR", &self.git_dir), ("GIT_WORK_TREE", &self.top)])
    }
}
