//! Making a task's worktree: the base commit from the user's working tree
//! ([`crate::worktree::base`]), then `git worktree add --no-checkout -b droid-executor/<id>
//! <checkout> <base>` under the store (one add at a time per repository) and its checkout
//! (`reset --hard` in it, as `worktree add` does, at once with other adds), our copy of the
//! checkout's fresh index (what the commit of the agent's change starts from), and the
//! `worktree_copy` paths.
//!
//! What the user has is only read: their index is copied, their working tree staged into a
//! temporary index, and the one ref made is the task's own branch. git's `post-checkout` hook
//! does not run (`core.hooksPath=/dev/null`), nor any filter driver.

use std::ffi::OsString;
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use droid_contract::ProviderId;

use crate::error::EngineError;
use crate::no_follow as nf;
use crate::snapshot::GitRun;
use crate::task_key::TaskKey;
use crate::worktree::base::{base_commit, proven_head_tree, state_tree};
use crate::worktree::copy_in::{Copied, copy_in};
use crate::worktree::git::Git;
use crate::worktree::layout::{Layout, checkout_name};
use crate::worktree::pin;
use crate::worktree::record::{Record, branch_of};
use crate::worktree::repository::Repository;

/// The longest gitfile read (`gitdir: <path>`).
const GITFILE_LIMIT: u64 = 64 * 1024;

/// A worktree just made, and what its copy-in did.
#[derive(Debug)]
pub(crate) struct Created {
    pub(crate) record: Record,
    pub(crate) copied: Copied,
    /// The git of the repository, its filters read (the commit of the change uses it again).
    pub(crate) git: Git,
}

/// Make worktree `id` for a task whose `repo_root` is `root`, its directory already made (and
/// locked) by the caller; `copies` are the `worktree_copy` paths.
///
/// # Errors
/// [`EngineError::Worktree`] or [`EngineError::Git`] naming what failed. What was made by
/// then is described by the record written so far (the caller removes it).
pub(crate) async fn create(
    layout: &Layout,
    id: &TaskKey,
    root: &Path,
    env: &[(OsString, OsString)],
    provider: ProviderId,
    copies: &[&Path],
) -> Result<Created, EngineError> {
    // the filter names and the repository's paths at once (rev-parse runs no filter)
    let plain = Git::for_refs(env);
    let (git, repo) = tokio::join!(Git::new(root, env), Repository::locate(root, &plain));
    let (git, repo) = (git?, repo?);
    let tmp = layout.tmp(id);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(&tmp)
        .map_err(EngineError::io("create directory", &tmp))?;
    let checkout = layout.dir(id).join(checkout_name(&repo.top));
    let branch = branch_of(id);
    let mut record = Record {
        id: id.to_string(),
        repo: repo.top.clone(),
        prefix: repo.prefix.clone(),
        git_dir: repo.git_dir.clone(),
        common_dir: repo.common_dir.clone(),
        admin_dir: PathBuf::new(),
        checkout: checkout.clone(),
        branch: branch.clone(),
        base: String::new(),
        head: String::new(),
        head_tree: None,
        state: None,
        provider,
        session_id: None,
        tasks: vec![id.to_string()],
        created_at: crate::timestamp::now(),
    };
    let adding = Adding {
        layout,
        git: &git,
        repo: &repo,
        branch: &branch,
        checkout: &checkout,
    };
    let pinned = pin::pinned_for(&repo.top);
    let (tree, base, add) = match (pinned, repo.head.clone()) {
        // the common case, a tree that may be HEAD's: the worktree is added at HEAD while the
        // tree is proven HEAD's in-process; when it is not, the branch is moved to a commit of
        // the tree before anything is checked out
        (None, Some(head)) => {
            record.base.clone_from(&head);
            record.head.clone_from(&head);
            // written before the worktree exists: whoever finds it half-made knows what to
            // remove
            record.write_quick(&layout.record(id))?;
            let (add, proven) = tokio::join!(adding.add(&head), proven_head_tree(&repo, env));
            let add = add?;
            match proven {
                Some(tree) => (tree, head, add),
                None if !add.success => (String::new(), head, add),
                None => {
                    let tree = state_tree(&repo, &git, &tmp.join("base.index")).await?;
                    let base = base_commit(&repo, &git, &tree, id.as_str()).await?;
                    if base != head {
                        let reference = format!("refs/heads/{branch}");
                        git.with(&[("GIT_DIR", &repo.git_dir)])
                            .out(&repo.top, &["update-ref", &reference, &base, &head])
                            .await?;
                    }
                    (tree, base, add)
                }
            }
        }
        // a base pinned before an earlier attempt changed the tree in place (fallback), or a
        // branch without a commit: the base first, then the worktree at it
        (pinned, _) => {
            let (tree, base) = match pinned {
                Some(pinned) => {
                    let tree = pinned.tree().to_owned();
                    let base =
                        base_commit(&pinned.repository(&repo), &git, &tree, id.as_str()).await?;
                    (tree, base)
                }
                None => {
                    let tree = state_tree(&repo, &git, &tmp.join("base.index")).await?;
                    let base = base_commit(&repo, &git, &tree, id.as_str()).await?;
                    (tree, base)
                }
            };
            record.base.clone_from(&base);
            record.head.clone_from(&base);
            record.head_tree = Some(tree.clone());
            record.write_quick(&layout.record(id))?;
            let add = adding.add(&base).await?;
            (tree, base, add)
        }
    };
    record.base.clone_from(&base);
    record.head = base;
    record.head_tree = Some(tree);
    if !add.success {
        return Err(EngineError::Worktree(format!(
            "git worktree add failed for {}: {}",
            repo.top.display(),
            add.message
        )));
    }
    record.admin_dir = admin_dir(&checkout, &repo.common_dir)?;
    record.write_quick(&layout.record(id))?;
    let checked_out = git
        .with(&[("GIT_DIR", &record.admin_dir), ("GIT_WORK_TREE", &checkout)])
        .run(
            &checkout,
            &["reset", "--hard", "--quiet", "--no-recurse-submodules"],
            None,
        )
        .await?;
    if !checked_out.success {
        return Err(EngineError::Worktree(format!(
            "the checkout of the new worktree {} failed: {}",
            checkout.display(),
            checked_out.message
        )));
    }
    let index = record.admin_dir.join("index");
    // a new file: its mtime, taken after git wrote the checkout and before any agent runs
    // there, is the time before which the checkout's cached stat data is trusted by
    // `crate::worktree::clean` (a file the agent writes gets a later time)
    std::fs::copy(&index, layout.index(id)).map_err(|e| {
        EngineError::Worktree(format!(
            "cannot copy the new worktree's index {}: {e}",
            index.display()
        ))
    })?;
    let copied = copy_in(&repo.top.join(&repo.prefix), &record.run_root(), copies);
    Ok(Created {
        record,
        copied,
        git,
    })
}

/// What adding the worktree needs.
struct Adding<'a> {
    layout: &'a Layout,
    git: &'a Git,
    repo: &'a Repository,
    branch: &'a str,
    checkout: &'a Path,
}

impl Adding<'_> {
    /// `git worktree add --no-checkout -b <branch> <checkout> <start>`, in the repository's
    /// turn.
    ///
    /// git reads every worktree's entry while it adds one, and fails on an entry another add
    /// is still writing (`failed to read …/commondir`): the adds of one repository take turns
    /// (a `best_of` makes its candidates' worktrees at once), each without its checkout, which
    /// is then written outside the turn as `git worktree add` would (`reset --hard`).
    async fn add(&self, start: &str) -> Result<GitRun, EngineError> {
        let turn = self.layout.add_lock(&self.repo.common_dir);
        let _turn = tokio::task::spawn_blocking(move || crate::lock::exclusive(&turn))
            .await
            .map_err(|e| EngineError::Worktree(format!("waiting to add the worktree: {e}")))??;
        let checkout = self.checkout.to_string_lossy();
        self.git
            .with(&[("GIT_DIR", &self.repo.git_dir)])
            .run(
                &self.repo.top,
                &[
                    "worktree",
                    "add",
                    "--quiet",
                    "--no-checkout",
                    "-b",
                    self.branch,
                    &checkout,
                    start,
                ],
                None,
            )
            .await
    }
}

/// The worktree's own git directory, from the gitfile `git worktree add` just wrote in
/// `checkout` (before any agent ran there); it must be `<common>/worktrees/<name>`.
fn admin_dir(checkout: &Path, common: &Path) -> Result<PathBuf, EngineError> {
    let dir = nix::fcntl::open(
        checkout,
        nix::fcntl::OFlag::O_RDONLY | nix::fcntl::OFlag::O_DIRECTORY | nix::fcntl::OFlag::O_CLOEXEC,
        nix::sys::stat::Mode::empty(),
    )
    .map_err(|e| EngineError::Worktree(format!("cannot open {}: {e}", checkout.display())))?;
    let text = nf::read_at(&dir, std::ffi::OsStr::new(".git"), GITFILE_LIMIT)
        .ok()
        .flatten()
        .map(|(bytes, _)| String::from_utf8_lossy(&bytes).into_owned())
        .unwrap_or_default();
    let named = text
        .lines()
        .find_map(|l| l.strip_prefix("gitdir:"))
        .map(|p| PathBuf::from(p.trim()))
        .ok_or_else(|| {
            EngineError::Worktree(format!(
                "{}/.git is not the gitfile git worktree add writes",
                checkout.display()
            ))
        })?;
    let real = crate::real_path::canonical(&named).unwrap_or(named);
    if real.parent() != Some(common.join("worktrees").as_path()) {
        return Err(EngineError::Worktree(format!(
            "the new worktree's git directory {} is not under {}/worktrees",
            real.display(),
            common.display()
        )));
    }
    Ok(real)
}
