//! Applying a worktree task's change to the user's working tree: all or nothing, three-way.
//!
//! 1. The user's working tree as it is now is staged into a temporary index (a copy of theirs;
//!    [`crate::worktree::base::state_tree`]) and committed on no ref: `U`.
//! 2. `git merge-tree --write-tree --merge-base=<base> U <head>` merges the task's change
//!    (base → head) into it in memory, writing nothing but objects: a tree `M`, or the
//!    conflicting paths. So the change still applies when HEAD moved or the user edited other
//!    lines meanwhile, and a conflict is found before anything is written.
//! 3. Only when the merge is clean, `git read-tree -m -u U M` in that temporary index moves the
//!    working tree from `U` to `M`: git checks every path first (a file changed since step 1,
//!    an untracked or ignored file in the way) and writes nothing if one fails; then it writes
//!    the files that differ. The user's index, HEAD, refs and stash are never written: the
//!    change arrives as uncommitted changes.
//!
//! `git merge-tree --merge-base` needs git 2.40.

use std::ffi::OsString;
use std::path::Path;

use droid_contract::FileChange;

use crate::error::EngineError;
use crate::snapshot::git_version;
use crate::worktree::base::{commit as commit_tree, state_tree};
use crate::worktree::commit::changes;
use crate::worktree::git::Git;
use crate::worktree::layout::Layout;
use crate::worktree::record::Record;
use crate::worktree::repository::Repository;

/// The oldest git whose `merge-tree` takes `--merge-base`.
pub(crate) const APPLY_GIT_MIN: (u32, u32) = (2, 40);

/// What merging a change into the user's working tree found; when asked to write and nothing
/// conflicted or was refused, it was written.
#[derive(Debug, Default)]
pub(crate) struct Merge {
    /// The files the change touches in the user's tree (relative to the top): what apply
    /// writes, or would.
    pub(crate) files: Vec<FileChange>,
    /// Paths that conflict; empty when the merge is clean.
    pub(crate) conflicts: Vec<String>,
    /// What git said when it refused to write (a file changed meanwhile, one in the way).
    pub(crate) refused: Option<String>,
}

/// Merge `record`'s change into the user's working tree; write it there when `write` and the
/// merge is clean.
///
/// # Errors
/// [`EngineError::Worktree`] when the repository is gone or is another one now, or git is too
/// old; [`EngineError::Git`] when a git command fails for another reason. Nothing was written
/// then.
pub(crate) async fn apply(
    layout: &Layout,
    record: &Record,
    env: &[(OsString, OsString)],
    write: bool,
) -> Result<Merge, EngineError> {
    let id = record.key()?;
    if !record.repo.is_dir() {
        return Err(EngineError::Worktree(format!(
            "the repository {} is not there any more; the change is kept on the branch {}",
            record.repo.display(),
            record.branch
        )));
    }
    let git = Git::new(&record.repo, env).await?;
    let ((major, minor), text) = git_version(&record.repo, env)
        .await
        .map_err(EngineError::Worktree)?;
    if (major, minor) < APPLY_GIT_MIN {
        return Err(EngineError::Worktree(format!(
            "{text} cannot apply a change three-way (git merge-tree --merge-base needs git {}.{} \
             or later); install a newer git, or merge the branch {} yourself",
            APPLY_GIT_MIN.0, APPLY_GIT_MIN.1, record.branch
        )));
    }
    let repo = Repository::locate(&record.repo, &git).await?;
    if repo.common_dir != record.common_dir {
        return Err(EngineError::Worktree(format!(
            "{} is another repository now (its git directory is {}, the task's was {})",
            record.repo.display(),
            repo.common_dir.display(),
            record.common_dir.display()
        )));
    }
    if record.head == record.base {
        // the agent changed nothing: nothing to merge, nothing to write
        return Ok(Merge::default());
    }
    let index = layout.tmp(&id).join("apply.index");
    let tree = state_tree(&repo, &git, &index).await?;
    let here = repo.git_here(&git);
    let ours = commit_tree(
        &here,
        &repo.top,
        &[
            "commit-tree",
            &tree,
            "-p",
            &record.base,
            "-m",
            "droid-executor: the working tree when the change was applied",
        ],
    )
    .await?;
    let merge_base = format!("--merge-base={}", record.base);
    let merged = here
        .run(
            &repo.top,
            &[
                "merge-tree",
                "--write-tree",
                "-z",
                "--name-only",
                "--no-messages",
                &merge_base,
                &ours,
                &record.head,
            ],
            None,
        )
        .await?;
    let mut parts = merged.stdout.split(|b| *b == 0);
    let merged_tree = parts
        .next()
        .map(|t| String::from_utf8_lossy(t).trim().to_owned())
        .unwrap_or_default();
    // exit 1 with a tree and the paths is a conflict; anything else that failed is an error
    let is_oid = merged_tree.len() >= 40 && merged_tree.bytes().all(|b| b.is_ascii_hexdigit());
    let conflicted = !merged.success && is_oid && merged.message.is_empty();
    if !merged.success && !conflicted {
        return Err(merged.into_error());
    }
    if conflicted {
        let mut conflicts: Vec<String> = parts
            .filter(|p| !p.is_empty())
            .map(|p| String::from_utf8_lossy(p).into_owned())
            .collect();
        conflicts.dedup();
        let (files, _) =
            changes(&here, &repo.top, &record.base, &record.head, Path::new("")).await?;
        let _ = std::fs::remove_file(&index);
        return Ok(Merge {
            files,
            conflicts,
            refused: None,
        });
    }
    let merged_commit = commit_tree(
        &here,
        &repo.top,
        &[
            "commit-tree",
            &merged_tree,
            "-p",
            &ours,
            "-m",
            "droid-executor: the working tree with the change applied",
        ],
    )
    .await?;
    let (files, _) = changes(&here, &repo.top, &ours, &merged_commit, Path::new("")).await?;
    if !write {
        let _ = std::fs::remove_file(&index);
        return Ok(Merge {
            files,
            ..Merge::default()
        });
    }
    let read = here
        .with(&[("GIT_INDEX_FILE", &index)])
        .run(
            &repo.top,
            &["read-tree", "-m", "-u", &ours, &merged_commit],
            None,
        )
        .await?;
    let _ = std::fs::remove_file(&index);
    if !read.success {
        // git checked every path before writing any: nothing was written
        let conflicts = read
            .message
            .lines()
            .filter_map(|l| l.strip_prefix('\t'))
            .map(|p| p.trim().to_owned())
            .collect();
        return Ok(Merge {
            files,
            conflicts,
            refused: Some(read.message),
        });
    }
    Ok(Merge {
        files,
        conflicts: Vec::new(),
        refused: None,
    })
}
