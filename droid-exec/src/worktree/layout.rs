//! Where worktrees live: under the task store, never inside the user's repository.
//!
//! ```text
//! <store>/worktrees/                 0700
//!   create.lock                      held while a worktree is counted and its directory made
//!   add-<hash>.lock                  held while `git worktree add` runs in the repository whose
//!                                    common git directory hashes to <hash> (one add at a time)
//!   <id>/                            0700, one per worktree (id: the task that made it)
//!     worktree.json                  the record (see `record`)
//!     lock                           held (flock) by the run working there, from creation
//!                                    until its droid is reaped: a live run's worktree is
//!                                    never removed, by anything
//!     index                          our copy of the checkout's index, as git wrote it before
//!                                    the agent started (or as we wrote it at the last commit)
//!     tmp/                           temporary indexes of our own git commands
//!     <repository name>/             the checkout the agent works in (its `.git` a gitfile
//!                                    into `<common git dir>/worktrees/<name>`)
//! ```
//!
//! The agent may write the checkout only: the record, the lock and our index copy are beside
//! it, out of its reach (the run's Landlock rules grant the checkout's subtree).

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::DirBuilderExt as _;
use std::path::{Path, PathBuf};

use crate::error::EngineError;
use crate::task_key::TaskKey;

/// The names of a worktree directory's own files (a checkout is never named like them).
const OWN_NAMES: [&str; 4] = ["worktree.json", "lock", "index", "tmp"];

/// The worktrees of one store.
#[derive(Debug, Clone)]
pub(crate) struct Layout {
    root: PathBuf,
}

impl Layout {
    /// The worktrees of the store at `store_root`.
    pub(crate) fn new(store_root: &Path) -> Self {
        Self {
            root: store_root.join("worktrees"),
        }
    }

    /// `<store>/worktrees`.
    pub(crate) fn root(&self) -> &Path {
        &self.root
    }

    /// Make `<store>/worktrees` (0700) if it is missing.
    pub(crate) fn ensure(&self) -> Result<(), EngineError> {
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.root)
            .map_err(EngineError::io("create directory", &self.root))
    }

    /// The lock held while a worktree is counted against `max_worktrees` and made.
    pub(crate) fn create_lock(&self) -> PathBuf {
        self.root.join("create.lock")
    }

    /// The lock `git worktree add` runs under for the repository whose common git directory
    /// is `common`: git is not safe against two adds in one repository at once.
    pub(crate) fn add_lock(&self, common: &Path) -> PathBuf {
        self.root.join(format!(
            "add-{}.lock",
            crate::fnv::hex(common.as_os_str().as_encoded_bytes())
        ))
    }

    /// The directory of worktree `id`.
    pub(crate) fn dir(&self, id: &TaskKey) -> PathBuf {
        self.root.join(id.as_str())
    }

    /// Its record.
    pub(crate) fn record(&self, id: &TaskKey) -> PathBuf {
        self.dir(id).join("worktree.json")
    }

    /// The lock its run holds.
    pub(crate) fn lock(&self, id: &TaskKey) -> PathBuf {
        self.dir(id).join("lock")
    }

    /// Our copy of its checkout's index.
    pub(crate) fn index(&self, id: &TaskKey) -> PathBuf {
        self.dir(id).join("index")
    }

    /// Where our git commands keep their temporary indexes.
    pub(crate) fn tmp(&self, id: &TaskKey) -> PathBuf {
        self.dir(id).join("tmp")
    }

    /// The ids of the worktree directories there are, in no order; entries that are not a
    /// task id (`create.lock`) are not worktrees.
    ///
    /// # Errors
    /// [`EngineError::Io`] when the directory exists but cannot be read.
    pub(crate) fn ids(&self) -> Result<Vec<TaskKey>, EngineError> {
        let entries = match std::fs::read_dir(&self.root) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(EngineError::io("read directory", &self.root)(e)),
        };
        Ok(entries
            .flatten()
            .filter_map(|e| TaskKey::parse(e.file_name().to_str()?).ok())
            .collect())
    }
}

/// The name of the checkout of a repository whose top is `top`: the repository's own name (an
/// agent reads its working directory's name), unless it is one of ours or unusable.
pub(crate) fn checkout_name(top: &Path) -> OsString {
    let name = top.file_name().unwrap_or(OsStr::new("repo"));
    if OWN_NAMES.iter().any(|own| name == *own) || name.is_empty() {
        OsString::from("repo")
    } else {
        name.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_checkout_is_named_after_its_repository_but_never_like_our_files() {
        assert_eq!(checkout_name(Path::new("/home/u/shop")), "shop");
        assert_eq!(checkout_name(Path::new("/srv/index")), "repo");
        assert_eq!(checkout_name(Path::new("/")), "repo");
        let layout = Layout::new(Path::new("/s"));
        let id = TaskKey::parse("droid-1795349045-3fa2").unwrap();
        assert_eq!(
            layout.record(&id),
            Path::new("/s/worktrees/droid-1795349045-3fa2/worktree.json")
        );
    }
}
