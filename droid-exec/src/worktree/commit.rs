//! Committing the agent's change: what its worktree holds once its run is over becomes a commit
//! on `droid-executor/<id>` (its parent the worktree's last commit, the base for a first run),
//! and `files_changed` is that commit against the base.
//!
//! The commit is staged from our own copy of the checkout's index, never from the one in the
//! worktree's git directory (an unconfined agent could have rewritten it to claim content the
//! files do not have), with the git directory and work tree named explicitly (a `.git` the agent
//! planted in the checkout is never discovered). Whatever the agent did with git itself (its own
//! commits, a detached HEAD, a moved branch) the branch ends at our commit of the files as they
//! are, and the worktree's HEAD and index are put back on it, so a person opening the worktree
//! sees a clean checkout of the branch.

use std::ffi::OsString;
use std::path::Path;

use droid_contract::FileChange;

use crate::error::EngineError;
use crate::snapshot::parse_diff_tree;
use crate::worktree::base::{commit as commit_tree, excludes_of};
use crate::worktree::clean::unchanged;
use crate::worktree::git::Git;
use crate::worktree::layout::Layout;
use crate::worktree::record::{Record, replace};

/// The longest index we copy back into the worktree's git directory (an index of a
/// 100k-file repository is ~10 MiB).
const INDEX_LIMIT: u64 = 1 << 30;

/// What a commit of the agent's change gave.
#[derive(Debug)]
pub(crate) struct Committed {
    /// The branch's commit now (the last one when the agent changed nothing).
    pub(crate) head: String,
    /// Its tree.
    pub(crate) tree: String,
    /// The change against the base, relative to `repo_root`.
    pub(crate) files: Vec<FileChange>,
    /// What is worth saying (changes outside `repo_root`).
    pub(crate) warnings: Vec<String>,
}

/// Commit what `record`'s checkout holds; `message` is the commit's message.
///
/// # Errors
/// [`EngineError::Git`] or [`EngineError::Worktree`] when it cannot be committed (the change is
/// still in the checkout).
pub(crate) async fn commit(
    layout: &Layout,
    record: &Record,
    git: Option<&Git>,
    env: &[(OsString, OsString)],
    message: &str,
) -> Result<Committed, EngineError> {
    let id = record.key()?;
    // the git the worktree was made with (its filters read then), else read them now
    let git = match git {
        Some(g) => g.with(&[("GIT_DIR", &record.common_dir)]),
        None => Git::at(&record.common_dir, env).await?,
    };
    let cwd = record.common_dir.as_path();
    // the agent changed nothing, proven in-process: the tree is the last one, nothing to stage
    if let Some(tree) = unchanged_tree(layout, &id, record, env).await {
        let head = record.head.clone();
        point_at(&git, record, &head).await?;
        // the worktree's index as ours, should the agent have rewritten it
        let ours = std::fs::read(layout.index(&id))
            .map_err(EngineError::io("read", &layout.index(&id)))?;
        let theirs = std::fs::read(record.admin_dir.join("index")).unwrap_or_default();
        if theirs != ours && ours.len() as u64 <= INDEX_LIMIT {
            replace(&record.admin_dir.join("index"), &ours)?;
        }
        let (files, warnings) = changes(&git, cwd, &record.base, &head, &record.prefix).await?;
        return Ok(Committed {
            head,
            tree,
            files,
            warnings,
        });
    }
    let index = layout.tmp(&id).join("commit.index");
    std::fs::create_dir_all(layout.tmp(&id))
        .map_err(EngineError::io("create directory", &layout.tmp(&id)))?;
    match std::fs::copy(layout.index(&id), &index) {
        Ok(_) => {}
        // gone (a store partly lost): staged from nothing, every file hashed
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let _ = std::fs::remove_file(&index);
        }
        Err(e) => {
            return Err(EngineError::Worktree(format!(
                "cannot copy the worktree's index {}: {e}",
                layout.index(&id).display()
            )));
        }
    }
    let in_tree = git.with(&[
        ("GIT_DIR", &record.admin_dir),
        ("GIT_WORK_TREE", &record.checkout),
        ("GIT_INDEX_FILE", &index),
    ]);
    in_tree
        .out(&record.checkout, &["add", "-A", "--", "."])
        .await?;
    let tree = in_tree.line(&record.checkout, &["write-tree"]).await?;
    let parent_tree = match &record.head_tree {
        Some(t) => t.clone(),
        None => {
            git.line(cwd, &["rev-parse", &format!("{}^{{tree}}", record.head)])
                .await?
        }
    };
    let head = if parent_tree == tree {
        record.head.clone()
    } else {
        commit_tree(
            &git,
            cwd,
            &["commit-tree", &tree, "-p", &record.head, "-m", message],
        )
        .await?
    };
    point_at(&git, record, &head).await?;
    // the worktree's index and ours: the one just staged, matching the branch's commit
    let bytes = std::fs::read(&index)
        .map_err(|e| EngineError::Worktree(format!("cannot read {}: {e}", index.display())))?;
    if bytes.len() as u64 <= INDEX_LIMIT {
        // as git writes an index: not synced
        replace(&record.admin_dir.join("index"), &bytes)?;
    }
    std::fs::rename(&index, layout.index(&id))
        .map_err(EngineError::io("rename", &layout.index(&id)))?;
    let (files, warnings) = changes(&git, cwd, &record.base, &head, &record.prefix).await?;
    Ok(Committed {
        head,
        tree,
        files,
        warnings,
    })
}

/// The branch at `head`, and the worktree's HEAD on the branch, whatever the agent did with
/// git (each written only when it is not so already: a file read, not a process).
async fn point_at(git: &Git, record: &Record, head: &str) -> Result<(), EngineError> {
    let cwd = record.common_dir.as_path();
    let full_ref = format!("refs/heads/{}", record.branch);
    let loose = std::fs::read_to_string(record.common_dir.join(&full_ref)).unwrap_or_default();
    if loose.trim() != head {
        git.out(
            cwd,
            &[
                "update-ref",
                "-m",
                "droid-executor: commit",
                &full_ref,
                head,
            ],
        )
        .await?;
    }
    let at = std::fs::read_to_string(record.admin_dir.join("HEAD")).unwrap_or_default();
    if at.trim() != format!("ref: {full_ref}") {
        let admin = git.with(&[("GIT_DIR", &record.admin_dir)]);
        admin.out(cwd, &["symbolic-ref", "HEAD", &full_ref]).await?;
    }
    Ok(())
}

/// The worktree's last tree (`head_tree`) when its checkout provably still holds what our copy
/// of its index records ([`crate::worktree::clean`]; that copy and `head_tree` are written
/// together), with the user's repository's exclude files; `None` when not proven.
async fn unchanged_tree(
    layout: &Layout,
    id: &crate::task_key::TaskKey,
    record: &Record,
    env: &[(OsString, OsString)],
) -> Option<String> {
    let tree = record.head_tree.clone()?;
    let excludes = excludes_of(&record.repo, env)?;
    let (checkout, index) = (record.checkout.clone(), layout.index(id));
    let proven = tokio::task::spawn_blocking(move || unchanged(&checkout, &index, &excludes))
        .await
        .ok()??;
    // a cache tree, when the index holds one, must say the same
    proven
        .tree
        .as_deref()
        .is_none_or(|t| t == tree)
        .then_some(tree)
}

/// The files that differ between the commits `from` and `to`, relative to `prefix` (paths
/// outside it are said in the warnings, not listed).
///
/// # Errors
/// [`EngineError::Git`] when `git diff-tree` fails or prints something else.
pub(crate) async fn changes(
    git: &Git,
    cwd: &Path,
    from: &str,
    to: &str,
    prefix: &Path,
) -> Result<(Vec<FileChange>, Vec<String>), EngineError> {
    if from == to {
        return Ok((Vec::new(), Vec::new()));
    }
    let out = git
        .out(
            cwd,
            &[
                "diff-tree",
                "--no-ext-diff",
                "--no-textconv",
                "-r",
                "-z",
                "-M",
                "--raw",
                "--numstat",
                from,
                to,
            ],
        )
        .await?;
    let files = parse_diff_tree(&out).ok_or_else(|| EngineError::Git {
        args: format!("diff-tree {from} {to}"),
        message: "unexpected --raw --numstat output".to_owned(),
    })?;
    Ok(relative_to(files, prefix))
}

/// `files` with paths relative to `prefix`; those outside it named in the warnings.
pub(crate) fn relative_to(files: Vec<FileChange>, prefix: &Path) -> (Vec<FileChange>, Vec<String>) {
    if prefix.as_os_str().is_empty() {
        return (files, Vec::new());
    }
    let inside = |p: &str| {
        Path::new(p)
            .strip_prefix(prefix)
            .ok()
            .map(|r| r.to_string_lossy().into_owned())
    };
    let mut kept = Vec::new();
    let mut outside = Vec::new();
    for mut f in files {
        match inside(&f.path) {
            Some(rel) => {
                f.path = rel;
                f.old_path = f
                    .old_path
                    .as_deref()
                    .map(|o| inside(o).unwrap_or_else(|| format!("/{o}")));
                kept.push(f);
            }
            None => outside.push(f.path),
        }
    }
    let warnings = if outside.is_empty() {
        Vec::new()
    } else {
        vec![format!(
            "the change also touches paths outside repo_root (relative to the repository's top): \
             {}",
            outside.join(", ")
        )]
    };
    (kept, warnings)
}

#[cfg(test)]
mod tests {
    use droid_contract::ChangeType;

    use super::*;

    fn change(path: &str) -> FileChange {
        FileChange {
            path: path.into(),
            change_type: ChangeType::Modified,
            old_path: None,
            highlights: Vec::new(),
            lines_added: Some(1),
            lines_removed: Some(0),
        }
    }

    #[test]
    fn paths_are_made_relative_to_repo_root_and_the_rest_is_said() {
        let (kept, warned) = relative_to(
            vec![change("app/src/a.rs"), change("README.md")],
            Path::new("app"),
        );
        assert_eq!(kept, vec![change("src/a.rs")]);
        assert_eq!(warned.len(), 1);
        assert!(warned[0].ends_with("README.md"), "{warned:?}");
        let (all, none) = relative_to(vec![change("x")], Path::new(""));
        assert_eq!((all, none), (vec![change("x")], Vec::<String>::new()));
    }
}
