//! A worktree's base pinned by an earlier run in place: where the next agent of a `fallback`
//! starts when the failed attempt changed files in place (docs/protocol.md#fallback).
//!
//! Such an attempt leaves its changes in the user's tree, so a worktree made afterwards "from
//! the repository as it is" would start from them. Instead the in-place attempt records the
//! repository as it was once it held the repository's run slot, just before its agent started
//! ([`recording`] around the attempt, [`wanted`] and [`record`] in the run), and the worktree of
//! a later attempt starts from that record ([`using`] around the attempt, [`pinned_for`] where
//! the worktree is made): the staged tree and the HEAD it was staged on.
//!
//! Both are task-local to the one attempt's future, so nothing else (another task, another run
//! of the engine) sees them, and a pin of one repository is never used for another.

use std::ffi::OsString;
use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::error::EngineError;
use crate::worktree::base::{proven_head_tree, state_tree};
use crate::worktree::git::Git;
use crate::worktree::repository::Repository;

/// The repository as it was before a run that could change it in place.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PinnedBase {
    /// The work tree's top (canonical), as a worktree's [`Repository`] names it.
    top: PathBuf,
    /// The commit HEAD named then (`None`: a branch without a commit).
    head: Option<String>,
    /// Its tree.
    head_tree: Option<String>,
    /// The working tree as `git add -A` staged it then.
    tree: String,
}

impl PinnedBase {
    /// The tree a worktree starts from.
    pub(crate) fn tree(&self) -> &str {
        &self.tree
    }

    /// `repo` (as it is now) with HEAD as it was when the base was pinned: the base commit is
    /// made on that HEAD, even if the attempt since moved it.
    pub(crate) fn repository(&self, repo: &Repository) -> Repository {
        Repository {
            head: self.head.clone(),
            head_tree: self.head_tree.clone(),
            ..repo.clone()
        }
    }
}

/// Where an attempt's run records its base, when one is asked for.
type Recorder = Arc<Mutex<Option<PinnedBase>>>;

tokio::task_local! {
    /// Around an in-place attempt of a fallback: the base its run records.
    static RECORDING: Recorder;
    /// Around a later attempt: the base its worktree starts from.
    static USING: PinnedBase;
}

/// Run `attempt`, letting a run in place within it record the repository as it was before its
/// agent started; returns the attempt's output and that base (`None`: the run was not in place,
/// or the base could not be recorded).
pub(crate) async fn recording<F: Future>(attempt: F) -> (F::Output, Option<PinnedBase>) {
    let recorder: Recorder = Arc::default();
    let out = RECORDING.scope(recorder.clone(), attempt).await;
    let base = recorder
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    (out, base)
}

/// Does the attempt running now want its base recorded ([`recording`])?
pub(crate) fn wanted() -> bool {
    RECORDING.try_with(|_| ()).is_ok()
}

/// Record `base` for the [`recording`] around the attempt running now (if any).
pub(crate) fn record(base: PinnedBase) {
    let _ = RECORDING.try_with(|r| {
        *r.lock().unwrap_or_else(PoisonError::into_inner) = Some(base);
    });
}

/// Run `attempt`, a worktree of `base`'s repository made within it starting from `base`
/// (`None`: as the repository is, the default).
pub(crate) async fn using<F: Future>(base: Option<PinnedBase>, attempt: F) -> F::Output {
    match base {
        Some(base) => USING.scope(base, attempt).await,
        None => attempt.await,
    }
}

/// The base pinned around the attempt running now ([`using`]), if it is of the repository whose
/// top is `top`.
pub(crate) fn pinned_for(top: &Path) -> Option<PinnedBase> {
    USING
        .try_with(|base| (base.top == top).then(|| base.clone()))
        .ok()
        .flatten()
}

/// The repository of the work tree at `root` as it is now: its HEAD and its working tree
/// staged (tracked changes, deletions, untracked files that are not ignored) in the temporary
/// index `index` (removed after). The tree's objects go to the repository's object store, as a
/// worktree's base does.
///
/// # Errors
/// [`EngineError::Git`] or [`EngineError::Worktree`] when git cannot stage the tree.
pub(crate) async fn take(
    root: &Path,
    env: &[(OsString, OsString)],
    index: &Path,
) -> Result<PinnedBase, EngineError> {
    let plain = Git::for_refs(env);
    let (git, repo) = tokio::join!(Git::new(root, env), Repository::locate(root, &plain));
    let (git, repo) = (git?, repo?);
    let tree = match proven_head_tree(&repo, env).await {
        Some(tree) => Ok(tree),
        None => state_tree(&repo, &git, index).await,
    };
    let _ = std::fs::remove_file(index);
    Ok(PinnedBase {
        top: repo.top,
        head: repo.head,
        head_tree: repo.head_tree,
        tree: tree?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base(top: &str) -> PinnedBase {
        PinnedBase {
            top: PathBuf::from(top),
            head: Some("h".into()),
            head_tree: Some("t".into()),
            tree: "w".into(),
        }
    }

    #[tokio::test]
    async fn a_pin_is_seen_only_inside_its_attempt_and_only_for_its_repository() {
        assert_eq!(pinned_for(Path::new("/r")), None);
        let seen = using(Some(base("/r")), async {
            (pinned_for(Path::new("/r")), pinned_for(Path::new("/other")))
        })
        .await;
        assert_eq!(seen, (Some(base("/r")), None));
        assert_eq!(pinned_for(Path::new("/r")), None);
        assert_eq!(
            using(None, async { pinned_for(Path::new("/r")) }).await,
            None
        );
    }

    #[tokio::test]
    async fn a_recording_gets_what_the_attempt_recorded() {
        assert!(!wanted());
        record(base("/nowhere")); // no recording around: dropped
        let (out, got) = recording(async {
            assert!(wanted());
            record(base("/r"));
            7
        })
        .await;
        assert_eq!((out, got), (7, Some(base("/r"))));
        let (_, none) = recording(async {}).await;
        assert_eq!(none, None);
    }
}
