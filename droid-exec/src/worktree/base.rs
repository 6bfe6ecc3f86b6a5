//! The user's working tree as a commit, without touching it: what a worktree task starts from
//! (its base) and what `apply` merges into.
//!
//! The tree is staged in a temporary index, a copy of the user's (its stat cache spares hashing
//! unchanged files), with `git add -A` (tracked changes, deletions, untracked files that are not
//! ignored) and `git write-tree`; the user's index, stash, refs and working tree are never
//! written. The objects go to the repository's object store (the branch will point at them).
//! When the tree is HEAD's, the base is HEAD itself; otherwise a commit of the tree whose parent
//! is HEAD, on no ref (the task's branch makes it reachable).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::error::EngineError;
use crate::snapshot::git_dir::{self, Found};
use crate::worktree::clean::unchanged;
use crate::worktree::git::Git;
use crate::worktree::repository::Repository;

/// The tree of the user's working tree as `git add -A` would stage it, built in the temporary
/// index `index` (overwritten; left holding that tree, with fresh stat data).
///
/// # Errors
/// [`EngineError::Git`] (or [`EngineError::Worktree`]) when git cannot stage the tree.
pub(crate) async fn state_tree(
    repo: &Repository,
    git: &Git,
    index: &Path,
) -> Result<String, EngineError> {
    let _ = std::fs::remove_file(index);
    // the user's index is only read: copied, never opened for writing (a missing one, in a
    // repository without a commit, is an empty start)
    let copied = match std::fs::copy(&repo.index, index) {
        Ok(_) => true,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => false,
        Err(e) => {
            return Err(EngineError::Worktree(format!(
                "cannot copy the repository's index {}: {e}",
                repo.index.display()
            )));
        }
    };
    let git = repo.git_here(git).with(&[("GIT_INDEX_FILE", index)]);
    let added = git.run(&repo.top, &["add", "-A", "--", "."], None).await?;
    if !added.success {
        if !copied {
            return Err(added.into_error());
        }
        // an index git cannot take as it is (a split index without its shared part): start
        // from HEAD's tree instead, hashing every file
        let _ = std::fs::remove_file(index);
        if repo.head.is_some() {
            git.out(&repo.top, &["read-tree", "HEAD"]).await?;
        }
        git.out(&repo.top, &["add", "-A", "--", "."]).await?;
    }
    let tree = git.line(&repo.top, &["write-tree"]).await?;
    if tree.is_empty() {
        return Err(EngineError::Worktree(
            "git write-tree printed no tree".to_owned(),
        ));
    }
    Ok(tree)
}

/// HEAD's tree when the user's working tree provably is HEAD's (their index records HEAD's tree
/// in its cache tree, every file is as the index cached it and nothing else is there that is not
/// ignored: [`crate::worktree::clean`]), found in-process; `None` when not proven (then
/// [`state_tree`] asks git).
pub(crate) async fn proven_head_tree(
    repo: &Repository,
    env: &[(OsString, OsString)],
) -> Option<String> {
    let head_tree = repo.head_tree.clone()?;
    let excludes = excludes_of(&repo.top, env)?;
    let (top, index) = (repo.top.clone(), repo.index.clone());
    let proven = tokio::task::spawn_blocking(move || unchanged(&top, &index, &excludes))
        .await
        .ok()??;
    (proven.tree.as_deref() == Some(head_tree.as_str())).then_some(head_tree)
}

/// The exclude files of the repository around `top` (`info/exclude`, `core.excludesFile`),
/// when its layout is read in-process with certainty.
pub(crate) fn excludes_of(top: &Path, env: &[(OsString, OsString)]) -> Option<Vec<PathBuf>> {
    match git_dir::locate(top, env) {
        Found::Repo(dirs) => {
            let mut files = vec![dirs.common_dir.join("info/exclude")];
            files.extend(dirs.excludes_file);
            Some(files)
        }
        Found::NotARepo | Found::Unusable(_) => None,
    }
}

/// The commit a worktree task starts from: HEAD when the working tree is HEAD's tree, else a
/// commit of the working tree (`tree`) on top of HEAD.
///
/// # Errors
/// [`EngineError::Git`] when git cannot make the commit.
pub(crate) async fn base_commit(
    repo: &Repository,
    git: &Git,
    tree: &str,
    id: &str,
) -> Result<String, EngineError> {
    let git = repo.git_here(git);
    if let Some(head) = &repo.head
        && repo.head_tree.as_deref() == Some(tree)
    {
        return Ok(head.clone());
    }
    let message = format!(
        "droid-executor: the working tree at the submission of {id}\n\n\
         HEAD plus the uncommitted changes and the untracked files that are not ignored."
    );
    let mut args = vec!["commit-tree", tree, "-m", &message];
    if let Some(head) = &repo.head {
        args.extend(["-p", head.as_str()]);
    }
    commit(&git, &repo.top, &args).await
}

/// `git commit-tree …`'s new commit.
///
/// # Errors
/// As [`Git::line`], and [`EngineError::Worktree`] when it printed no id.
pub(crate) async fn commit(git: &Git, cwd: &Path, args: &[&str]) -> Result<String, EngineError> {
    let id = git.line(cwd, args).await?;
    if id.is_empty() {
        return Err(EngineError::Worktree(
            "git commit-tree printed no commit".to_owned(),
        ));
    }
    Ok(id)
}
