//! A snapshot ([`Snapshot`]) and the diff of two ([`Changes`]): which strategy records the
//! working tree below a root (the in-process record, git processes, or a walk), and the
//! comparison of two records of one run. The strategies are in the sibling files; this one
//! chooses between them and keeps a run's two snapshots comparable.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use droid_contract::FileChange;

use super::git::{alternates, filter_names, git, os_args, with_vars};
use super::git_tree::{
    GitStart, GitTree, Located, Repo, diff_git, git_markers, locate, take_git, untracked_files,
};
use super::in_process::{Before, Fast, ScanTree, diff_scans, in_process, scan_text_of};
use super::walk::{MODE_FILE, SnapshotLimits, WALK_MODE, Walk, diff_walk, walk};
use crate::error::EngineError;

/// A record of the working tree below a root at one moment.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The directory the snapshot covers (where git runs).
    pub(super) root: PathBuf,
    /// What was recorded.
    pub(super) kind: Kind,
    /// Things the snapshot could not see, for the result's issues.
    pub(super) warnings: Vec<String>,
    /// Why git could not be used although `root` is in a git work tree (so the walk, which
    /// ignores `.gitignore` and stops at the file limit, measured it instead).
    pub(super) fallback: Option<String>,
}

/// How a snapshot was recorded.
#[derive(Debug)]
pub(super) enum Kind {
    /// An in-process record of the git work tree below the root ([`crate::snapshot::stat_scan`]).
    Scan(Box<ScanTree>),
    /// A git tree of the working tree below the root.
    Git(Box<GitTree>),
    /// A bounded walk of the directory.
    Walk(Walk),
}

/// The files that differ between two snapshots.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Changes {
    /// Changed files, paths relative to the root, sorted by path.
    pub files: Vec<FileChange>,
    /// What could not be checked (limits hit, files git could not stage...), without duplicates.
    pub warnings: Vec<String>,
    /// Why `files` may miss changes: a walk stopped at a limit before seeing every file.
    pub incomplete: Option<String>,
}

/// What the index said before the run about the flags that hide a file from `git status`: the
/// paths git assumes unchanged (skip-worktree entries send the record to git, so there are none
/// in an in-process record), and when the index was written.
#[derive(Debug, Clone)]
pub(crate) struct IndexFlags {
    pub(crate) assumed: Vec<Vec<u8>>,
    pub(crate) mtime: (i64, i64),
}

impl Snapshot {
    /// The index flags of an in-process record of a work tree whose top level is the root
    /// (`root/.git` is its git directory, the one [`crate::run::git_guard`] holds).
    pub(crate) fn index_flags(&self) -> Option<IndexFlags> {
        match &self.kind {
            Kind::Scan(t)
                if t.dirs.prefix.is_empty() && t.dirs.git_dir == self.root.join(".git") =>
            {
                Some(IndexFlags {
                    assumed: t.tracked.assumed.clone(),
                    mtime: t.tracked.index_mtime(),
                })
            }
            _ => None,
        }
    }

    /// Record the working tree below `root`.
    ///
    /// `root` is the absolute repository root (may be a subdirectory of a git work tree, or not
    /// a git repo at all). `env` is the complete environment for child processes (it contains
    /// PATH, HOME...). `scratch` is a private temp directory owned by this run (exists, deleted
    /// by the caller afterwards); take both snapshots of a run with the same `scratch`, and
    /// pass the first as `previous` when taking the second: the second then starts from the
    /// first one's index (only what changed since is hashed) and location, and compares the
    /// large untracked files the first one found by their metadata.
    ///
    /// # Errors
    /// [`EngineError::Git`] when git fails on a work tree it recognised, [`EngineError::Spawn`]
    /// when git stops being startable mid-snapshot, [`EngineError::Io`] when `scratch` cannot be
    /// written or `root` cannot be read.
    pub(crate) async fn take(
        root: &Path,
        env: &[(OsString, OsString)],
        scratch: &Path,
        limits: &SnapshotLimits,
        previous: Option<&Snapshot>,
    ) -> Result<Snapshot, EngineError> {
        let mode_file = scratch.join(MODE_FILE);
        let mut warnings = Vec::new();
        let mut fallback = None;
        // the mode file, the repository's location and index, and the record: one trip to a
        // blocking thread (each trip is a wake-up of another thread, paid on every run)
        let before = match previous.map(|p| &p.kind) {
            None => Before::First,
            Some(Kind::Scan(tree)) => Before::Scan(tree),
            Some(Kind::Git(_) | Kind::Walk(_)) => Before::Other,
        };
        let fast = in_process(root, env, &mode_file, before, *limits).await?;
        let walked_before = matches!(fast, Fast::Walked);
        if !walked_before {
            match fast {
                Fast::Recorded(tree) => {
                    return Ok(Snapshot {
                        root: root.to_path_buf(),
                        kind: Kind::Scan(tree),
                        warnings,
                        fallback: None,
                    });
                }
                // not in a work tree: walk (below)
                Fast::NotARepo => {
                    tokio::fs::write(&mode_file, WALK_MODE)
                        .await
                        .map_err(|source| EngineError::io("write", &mode_file)(source))?;
                    let (walk, walk_warnings) = walk(root, *limits).await?;
                    warnings.extend(walk_warnings);
                    return Ok(Snapshot {
                        root: root.to_path_buf(),
                        kind: Kind::Walk(walk),
                        warnings,
                        fallback: None,
                    });
                }
                Fast::Walked | Fast::GitProcesses => {}
            }
            let previous = previous.and_then(|p| match &p.kind {
                Kind::Git(tree) => Some(&**tree),
                Kind::Walk(_) | Kind::Scan(_) => None,
            });
            let reuse = previous.filter(|p| git_markers(root, &p.repo.toplevel) == p.markers);
            let (located, untracked) = match reuse {
                // the configuration is read again: a filter droid configured during the run
                // must be emptied as well
                Some(p) => match filter_names(root, env).await {
                    Ok(filters) => (
                        Located::Repo(Repo {
                            filters,
                            ..p.repo.clone()
                        }),
                        Vec::new(),
                    ),
                    Err(why) => (Located::Unusable(why), Vec::new()),
                },
                None if previous.is_some() => (locate(root, env).await, Vec::new()),
                None => tokio::join!(locate(root, env), untracked_files(root, env)),
            };
            match located {
                Located::Repo(repo) => {
                    let tree = take_git(
                        root,
                        env,
                        scratch,
                        repo,
                        GitStart {
                            previous,
                            reuse_index: reuse.is_some(),
                            untracked,
                        },
                        &mut warnings,
                    )
                    .await?;
                    return Ok(Snapshot {
                        root: root.to_path_buf(),
                        kind: Kind::Git(Box::new(tree)),
                        warnings,
                        fallback: None,
                    });
                }
                Located::NotARepo => {}
                Located::Unusable(why) => {
                    warnings.push(format!(
                        "{why}; files were compared by walking the directory (no line counts)"
                    ));
                    if in_git_work_tree(root) {
                        fallback = Some(why);
                    }
                }
            }
            tokio::fs::write(&mode_file, WALK_MODE)
                .await
                .map_err(|source| EngineError::io("write", &mode_file)(source))?;
        }
        let (walk, walk_warnings) = walk(root, *limits).await?;
        warnings.extend(walk_warnings);
        Ok(Snapshot {
            root: root.to_path_buf(),
            kind: Kind::Walk(walk),
            warnings,
            fallback,
        })
    }

    /// The content of `path` (relative to the root) as this snapshot recorded it: `Some` for
    /// a UTF-8 text file of at most `max` bytes in a git snapshot, `None` otherwise (a walk
    /// keeps no content, a large untracked file was never stored, a binary is not text).
    pub(crate) async fn text_of(
        &self,
        path: &str,
        env: &[(OsString, OsString)],
        max: usize,
    ) -> Option<String> {
        let tree = match &self.kind {
            Kind::Git(tree) => tree,
            Kind::Scan(t) => return scan_text_of(&self.root, t, path, env, max).await,
            Kind::Walk(_) => return None,
        };
        let env = with_vars(
            env,
            &[
                (
                    "GIT_OBJECT_DIRECTORY",
                    tree.objects.clone().into_os_string(),
                ),
                (
                    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                    alternates(&[tree.repo_objects.as_path()], env),
                ),
            ],
        );
        let spec = format!("{}:{path}", tree.tree);
        let size = git(&self.root, &env, &os_args(&["cat-file", "-s", &spec]), None)
            .await
            .ok()?
            .into_stdout()
            .ok()?;
        let size: usize = String::from_utf8_lossy(&size).trim().parse().ok()?;
        if size > max {
            return None;
        }
        let out = git(
            &self.root,
            &env,
            &os_args(&["cat-file", "blob", &spec]),
            None,
        )
        .await
        .ok()?
        .into_stdout()
        .ok()?;
        String::from_utf8(out).ok().filter(|t| !t.contains('\0'))
    }

    /// Why this snapshot walked the directory although it lies in a git work tree (git
    /// missing, too old, or refusing the repository), `None` when git was used or the
    /// directory is not in a repository. A walk ignores `.gitignore` and stops at
    /// [`SnapshotLimits`], so `node_modules` can hide real changes: the result says so.
    pub(crate) fn git_fallback(&self) -> Option<&str> {
        self.fallback.as_deref()
    }

    /// Files that differ between `self` (before) and `after`, paths relative to `root`, sorted
    /// by path, with the warnings of both snapshots.
    ///
    /// # Errors
    /// [`EngineError::Git`] when `git diff-tree` fails, [`EngineError::Spawn`] when git cannot
    /// be started.
    pub(crate) async fn diff(
        &self,
        after: &Snapshot,
        env: &[(OsString, OsString)],
    ) -> Result<Changes, EngineError> {
        let mut warnings = Vec::new();
        for w in self.warnings.iter().chain(&after.warnings) {
            if !warnings.contains(w) {
                warnings.push(w.clone());
            }
        }
        let incomplete = [&self.kind, &after.kind]
            .into_iter()
            .find_map(|kind| match kind {
                Kind::Walk(w) => w.truncated.clone(),
                Kind::Scan(s) => s.scan.incomplete.clone(),
                Kind::Git(_) => None,
            });
        let mut files = match (&self.kind, &after.kind) {
            (Kind::Scan(before), Kind::Scan(now)) => {
                for w in before.scan.warnings.iter().chain(&now.scan.warnings) {
                    if !warnings.contains(w) {
                        warnings.push(w.clone());
                    }
                }
                diff_scans(&self.root, before, now, env, &mut warnings).await?
            }
            (Kind::Scan(_), _) | (_, Kind::Scan(_)) => {
                warnings.push(
                    "the directory stopped or started being a usable git work tree during the \
                     run; files_changed was not measured"
                        .to_owned(),
                );
                Vec::new()
            }
            (Kind::Git(before), Kind::Git(now)) => {
                diff_git(&self.root, before, now, env, &mut warnings).await?
            }
            (Kind::Walk(before), Kind::Walk(now)) => diff_walk(before, now),
            (Kind::Git(_), Kind::Walk(_)) | (Kind::Walk(_), Kind::Git(_)) => {
                warnings.push(
                    "the directory stopped or started being a usable git work tree during the \
                     run; files_changed was not measured"
                        .to_owned(),
                );
                Vec::new()
            }
        };
        files.sort_by(|a, b| a.path.cmp(&b.path));
        Ok(Changes {
            files,
            warnings,
            incomplete,
        })
    }
}

/// Whether `dir` or one of its ancestors holds a `.git` entry (a work tree, by the look of it,
/// without asking git).
fn in_git_work_tree(dir: &Path) -> bool {
    dir.ancestors()
        .any(|a| std::fs::symlink_metadata(a.join(".git")).is_ok())
}
