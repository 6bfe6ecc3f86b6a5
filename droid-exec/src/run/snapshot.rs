//! Ground truth for `files_changed`: a record of the repository's working tree taken before droid
//! runs and again after it, and the files that differ between the two records. What droid says it
//! changed is never trusted; this is what the result reports.
//!
//! In a git work tree a snapshot is, where the layout allows, an in-process record
//! ([`crate::run::stat_scan`]: metadata of every path, the index read in-process, `.gitignore`
//! applied, content kept only for what the index cannot give back), compared by
//! [`crate::run::scan_diff`]: no git process, no object written, at the cost of one `git status`
//! a record (issue 17; `cargo xtask bench snapshot`). The rest of this section describes the
//! git-process path, taken where [`crate::run::git_dir`] or [`crate::run::git_index`] cannot read
//! the repository with certainty (`GIT_DIR` set, a split or sparse index, configuration
//! `include`s, another object format):
//!
//! a snapshot is a git tree object built from the working tree below `root`:
//! the repository's index is copied into the run's scratch directory (the copy keeps git's stat
//! cache, so unchanged files are not hashed again), then `git add -A -- .` and `git write-tree`
//! run with `GIT_INDEX_FILE` pointing at the copy and `GIT_OBJECT_DIRECTORY` at
//! `scratch/objects` (the repository's own object directory is only an alternate, read-only).
//! Key choice: nothing is ever written to the user's repository, not its index, not its object
//! store, and HEAD is irrelevant: we diff working trees, so droid committing during the run hides
//! nothing. Both snapshots of one run share `scratch/objects`, so one `git diff-tree --raw
//! --numstat` sees both trees and gives renames and line counts at once. No code the repository
//! controls runs: hooks, fsmonitor, filter drivers, textconv and external diffs are all off
//! ([`GIT_CONFIG`]).
//!
//! Cost, in the ratio of `git status` (`cargo xtask bench snapshot`): the second snapshot of a
//! run starts from the first one's scratch index, so only what changed during the run is
//! hashed, and reuses its location (no second `git rev-parse`; the filter names are read again,
//! since droid may configure one mid-run). Objects are stored uncompressed. Untracked files of
//! [`BIG_FILE`] bytes or more (listed by `git ls-files -o` beside the first `rev-parse`) are
//! left out of both trees and compared by size, times, inode and mode: hashing and storing a
//! 1 GiB file took most of a minute, and a change is still seen (reported without line counts,
//! with a warning naming the file; a mere `touch` then counts as modified).
//!
//! Files that `.gitignore` excludes are not staged and so never reported: build output and caches
//! are not "files changed" (a file that is already tracked is reported even when ignored, as git
//! does). Changes inside an embedded repository show only as a change of its checked-out commit.
//!
//! Outside a git work tree (or when git cannot be used) the fallback walks `root` with std::fs,
//! bounded by [`SnapshotLimits`] (time and file count; past either, [`Changes::incomplete`] says
//! so and the result carries an `env_issue`), recording size, modification time, executable bit
//! and a 64-bit FNV-1a hash per regular file (while a byte budget lasts, then size and mtime), and
//! the target of each symlink; line counts are then `None`.
//! Once a run's first snapshot walked, the second walks too (a marker file in `scratch`), so a
//! droid that runs `git init` does not make the two snapshots incomparable; `.git` entries are
//! skipped by the walk for the same reason.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::ffi::{OsStr, OsString};
use std::ops::ControlFlow;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use droid_contract::{ChangeType, FileChange};

use crate::error::EngineError;
use crate::fnv::Fnv1a;
use crate::run::excerpt::head_str;
use crate::run::git_dir::{self, Found, GitDirs};
use crate::run::scan_diff;
use crate::run::spawn::{SpawnSpec, capture};
use crate::run::stat_scan::{self, Capture, Kept, Plan, Scan, Seen, Tracked};
use crate::run::sweep::MARKER_VAR;

/// How long one git command may take.
const GIT_TIMEOUT: Duration = Duration::from_secs(120);
/// How much of git's output we keep; more than this is an error, not a silent cut.
const GIT_KEEP_BYTES: usize = 64 * 1024 * 1024;
/// The file in `scratch` that makes later snapshots of a run walk once the first one walked.
const MODE_FILE: &str = "snapshot-mode";
/// The content of [`MODE_FILE`].
const WALK_MODE: &[u8] = b"walk";
/// The longest piece of git's stderr quoted in a warning or an error.
const MAX_MESSAGE_BYTES: usize = 2000;
/// Settings every git call gets: no hooks (`post-index-change` runs on every index write), no
/// fsmonitor (its value may name a program), no transport at all, raw path names, a full (not
/// split) index in our copy, no automatic gc, no dying on CRLF conversions, no
/// embedded-repository advice, and no Git LFS filter (it would write to `.git/lfs` and needs
/// git-lfs installed; LFS files are hashed as they are on disk instead).
///
/// Code the repository controls must never run on our behalf (an agent at `--auto low` can write
/// `.git/config` and `.git/hooks`): hooks and fsmonitor are off here, every other filter driver
/// configured anywhere is emptied per run by [`neutral_filters`], and `diff-tree` runs with
/// `--no-ext-diff --no-textconv`.
const GIT_CONFIG: &[&str] = &[
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "protocol.allow=never",
    "core.quotepath=false",
    "core.splitIndex=false",
    "core.safecrlf=false",
    // objects in scratch are read once, by our diff, and deleted with it: deflating them costs
    // more than it saves (a 1 GiB file took 43 s to stage deflated, 13 s stored)
    "core.compression=0",
    "core.looseCompression=0",
    "gc.auto=0",
    "advice.addEmbeddedRepo=false",
    "filter.lfs.clean=",
    "filter.lfs.smudge=",
    "filter.lfs.process=",
    "filter.lfs.required=false",
];

/// Numbers the scratch index directories and the git processes' markers.
static SEQ: AtomicU64 = AtomicU64::new(0);

fn next_seq() -> u64 {
    SEQ.fetch_add(1, Ordering::Relaxed)
}

/// Bounds on the fallback walk of a directory that is not a git work tree. A walk cut short by
/// either of the first two makes [`Changes::incomplete`] say so: the list is then only right
/// up to where both walks got, and the result carries an `env_issue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SnapshotLimits {
    /// Record at most this many files (what bounds the walk's memory, ~150 bytes a file).
    pub max_files: usize,
    /// Walk for at most this long.
    pub max_time: Duration,
    /// Hash at most this many bytes in all; later files are compared by size and mtime.
    pub max_bytes: u64,
}

impl Default for SnapshotLimits {
    fn default() -> Self {
        Self {
            max_files: WALK_MAX_FILES,
            max_time: WALK_MAX_TIME,
            max_bytes: 256 * 1024 * 1024,
        }
    }
}

/// The default [`SnapshotLimits::max_files`].
pub const WALK_MAX_FILES: usize = 1_000_000;
/// The default [`SnapshotLimits::max_time`].
pub const WALK_MAX_TIME: Duration = Duration::from_secs(10);

/// A record of the working tree below a root at one moment.
#[derive(Debug)]
pub(crate) struct Snapshot {
    /// The directory the snapshot covers (where git runs).
    root: PathBuf,
    /// What was recorded.
    kind: Kind,
    /// Things the snapshot could not see, for the result's issues.
    warnings: Vec<String>,
    /// Why git could not be used although `root` is in a git work tree (so the walk, which
    /// ignores `.gitignore` and stops at the file limit, measured it instead).
    fallback: Option<String>,
}

/// How a snapshot was recorded.
#[derive(Debug)]
enum Kind {
    /// An in-process record of the git work tree below the root ([`crate::run::stat_scan`]).
    Scan(Box<ScanTree>),
    /// A git tree of the working tree below the root.
    Git(Box<GitTree>),
    /// A bounded walk of the directory.
    Walk(Walk),
}

/// An in-process record of a git work tree, and what the next record of the run reuses.
#[derive(Debug)]
struct ScanTree {
    /// Where the work tree keeps things.
    dirs: Arc<GitDirs>,
    /// The index as the first record of the run read it.
    tracked: Arc<Tracked>,
    /// What was found.
    scan: Arc<Scan>,
}

/// A git tree object holding the working tree below the root.
#[derive(Debug)]
struct GitTree {
    /// The tree id: the root's subtree, so its paths are relative to the root.
    tree: String,
    /// The run's object directory (`scratch/objects`) where the tree was written.
    objects: PathBuf,
    /// The repository's object directory, used read-only as an alternate.
    repo_objects: PathBuf,
    /// The scratch index the tree was written from: its stat cache lets the next snapshot of
    /// the run hash only what changed since this one.
    index: PathBuf,
    /// Where the repository was found, reused by the next snapshot while [`Self::markers`] hold.
    repo: Repo,
    /// The `.git` entries from the root up to the top level: when they differ at the next
    /// snapshot (droid ran `git init` below the top level), the repository is located again.
    markers: Vec<PathBuf>,
    /// Untracked files of [`BIG_FILE`] bytes or more (paths relative to the root), left out of
    /// the tree and compared by their metadata; `None` where the path no longer holds one.
    big: BTreeMap<Vec<u8>, Option<FileStat>>,
}

/// An untracked file at least this large is not hashed: git would read (and store) all of it
/// at every snapshot to compare what size, times and inode already tell.
const BIG_FILE: u64 = 32 * 1024 * 1024;

/// What tells whether a large file changed without reading it (git's own stat check, which
/// includes `ctime`: it cannot be set back the way `mtime` can).
#[derive(Debug, Clone, PartialEq, Eq)]
struct FileStat {
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
    dev: u64,
    ino: u64,
    mode: u32,
}

impl FileStat {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt;
        Self {
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            dev: meta.dev(),
            ino: meta.ino(),
            mode: meta.mode(),
        }
    }
}

/// The files found by walking the root.
#[derive(Debug)]
struct Walk {
    /// Path relative to the root → what was there. Ordered as the walk visits (component-wise).
    entries: BTreeMap<PathBuf, Entry>,
    /// Why the walk stopped before the end (a limit): paths after the last entry were not
    /// checked.
    truncated: Option<String>,
}

/// One walked non-directory.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Entry {
    /// A regular file.
    File {
        /// Its size in bytes.
        size: u64,
        /// Its modification time, when the platform gives one.
        mtime: Option<SystemTime>,
        /// Any executable bit set (the only mode bit git tracks).
        executable: bool,
        /// FNV-1a of its content; `None` past the byte budget or when it could not be read.
        hash: Option<u64>,
    },
    /// A symbolic link (never followed).
    Symlink {
        /// Where it points.
        target: PathBuf,
    },
    /// A FIFO, socket or device (never opened).
    Special {
        /// Which one.
        kind: &'static str,
    },
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
        let fast = in_process(root, env, &mode_file, previous, *limits).await?;
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
                        .map_err(|source| io_error("write", &mode_file, source))?;
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
                .map_err(|source| io_error("write", &mode_file, source))?;
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

fn io_error(action: &'static str, path: &Path, source: std::io::Error) -> EngineError {
    EngineError::Io {
        action,
        path: path.to_path_buf(),
        source,
    }
}

// ---------------------------------------------------------------------------------------------
// in-process record

/// The largest index file read (a 1M-file index is ~100 MiB).
const MAX_INDEX_BYTES: u64 = 512 * 1024 * 1024;

/// What [`in_process`] did.
enum Fast {
    /// The in-process record.
    Recorded(Box<ScanTree>),
    /// An earlier snapshot of the run walked: this one walks too.
    Walked,
    /// `root` is not in a git work tree: walk.
    NotARepo,
    /// The repository cannot be read in-process with certainty: ask git.
    GitProcesses,
}

/// On a blocking thread, in one trip: read the run's mode file, then (unless an earlier snapshot
/// of the run walked or went through git processes) locate the repository and read its index, or
/// take both from `previous`, and record the work tree in-process.
async fn in_process(
    root: &Path,
    env: &[(OsString, OsString)],
    mode_file: &Path,
    previous: Option<&Snapshot>,
    limits: SnapshotLimits,
) -> Result<Fast, EngineError> {
    // the in-process record where the repository allows it: the second record of a run made
    // that way is made that way too, with the first one's index and location
    let (try_fast, previous) = match previous.map(|p| &p.kind) {
        None => (true, None),
        Some(Kind::Scan(prev)) => (
            true,
            Some((
                Arc::clone(&prev.dirs),
                Arc::clone(&prev.tracked),
                Arc::clone(&prev.scan),
            )),
        ),
        Some(Kind::Git(_) | Kind::Walk(_)) => (false, None),
    };
    let (root_buf, env, mode_file) = (root.to_path_buf(), env.to_vec(), mode_file.to_path_buf());
    tokio::task::spawn_blocking(move || {
        match std::fs::read(&mode_file) {
            Ok(bytes) if bytes == WALK_MODE => return Ok(Fast::Walked),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(io_error("read", &mode_file, source)),
        }
        if !try_fast {
            return Ok(Fast::GitProcesses);
        }
        let (dirs, tracked, against) = match previous {
            Some((dirs, tracked, scan)) => {
                // the agent is done: what the first record had left to read is read by now,
                // unchanged, or changed by the agent
                scan.settle();
                (dirs, tracked, Some(scan))
            }
            None => match git_dir::locate(&root_buf, &env) {
                Found::Repo(dirs) => match read_tracked(&dirs) {
                    Ok(tracked) => (Arc::new(dirs), Arc::new(tracked), None),
                    Err(why) => {
                        tracing::debug!("snapshot through git processes: {why}");
                        return Ok(Fast::GitProcesses);
                    }
                },
                Found::NotARepo => return Ok(Fast::NotARepo),
                Found::Unusable(why) => {
                    tracing::debug!("snapshot through git processes: {why}");
                    return Ok(Fast::GitProcesses);
                }
            },
        };
        let capture = if against.is_some() {
            Capture::None
        } else {
            Capture::Content
        };
        let started = std::time::Instant::now();
        let mut excludes = vec![dirs.common_dir.join("info/exclude")];
        excludes.extend(dirs.excludes_file.clone());
        let scan = stat_scan::scan(&Plan {
            root: &root_buf,
            prefix: &dirs.prefix,
            toplevel: &dirs.toplevel,
            tracked: &tracked,
            excludes,
            capture,
            against: against.as_deref(),
            limits,
        });
        tracing::debug!(
            "recorded {} in-process in {:?}: {} path(s) stored, {} unchanged, {} kept",
            root_buf.display(),
            started.elapsed(),
            scan.seen.len(),
            scan.unchanged.len(),
            scan.kept_len()
        );
        Ok(Fast::Recorded(Box::new(ScanTree {
            dirs,
            tracked,
            scan: Arc::new(scan),
        })))
    })
    .await
    .map_err(|e| io_error("read", root, std::io::Error::other(e)))?
}

/// The index of the work tree at `dirs` (empty when there is none yet), or why it cannot be
/// read in-process (git is asked instead).
fn read_tracked(dirs: &GitDirs) -> Result<Tracked, String> {
    use std::os::unix::fs::MetadataExt as _;
    let path = dirs.git_dir.join("index");
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Tracked::default()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    if meta.len() > MAX_INDEX_BYTES {
        return Err(format!(
            "{} is over {} MiB",
            path.display(),
            MAX_INDEX_BYTES >> 20
        ));
    }
    let bytes = stat_scan::read_bounded(&path, MAX_INDEX_BYTES)
        .ok_or_else(|| format!("{} could not be read", path.display()))?;
    let index = crate::run::git_index::parse(&bytes).map_err(|e| e.to_string())?;
    if index.entries.iter().any(|e| e.skip_worktree) {
        return Err("the index has skip-worktree entries (sparse checkout)".into());
    }
    Ok(Tracked::new(index, (meta.mtime(), meta.mtime_nsec())))
}

/// The changes between two in-process records.
async fn diff_scans(
    root: &Path,
    before: &ScanTree,
    after: &ScanTree,
    env: &[(OsString, OsString)],
    warnings: &mut Vec<String>,
) -> Result<Vec<FileChange>, EngineError> {
    let (root_buf, b, a) = (
        root.to_path_buf(),
        Arc::clone(&before.scan),
        Arc::clone(&after.scan),
    );
    let (tracked, dirs) = (Arc::clone(&before.tracked), Arc::clone(&before.dirs));
    // one trip to a blocking thread when no old content must be read from the repository (the
    // common case); else a second one after `git cat-file`
    let (step, mut found) = tokio::task::spawn_blocking(move || {
        // settled by the second record already, unless it went another way
        b.settle();
        let mut w = Vec::new();
        let (changes, extra) =
            scan_diff::changed(&root_buf, &b, &a, (&tracked, &dirs.prefix), &mut w);
        let needed = scan_diff::blobs_needed(&b, &extra, &changes);
        if needed.is_empty() {
            let files = scan_diff::assemble(&root_buf, &b, &a, &extra, &changes, &HashMap::new());
            (DiffStep::Done(files), w)
        } else {
            (
                DiffStep::NeedBlobs {
                    changes,
                    extra,
                    needed,
                },
                w,
            )
        }
    })
    .await
    .map_err(|e| io_error("read", root, std::io::Error::other(e)))?;
    for w in found.drain(..) {
        if !warnings.contains(&w) {
            warnings.push(w);
        }
    }
    let (changes, extra, needed) = match step {
        DiffStep::Done(files) => return Ok(files),
        DiffStep::NeedBlobs {
            changes,
            extra,
            needed,
        } => (changes, extra, needed),
    };
    let blobs = match cat_blobs(root, env, &needed).await {
        Ok(b) => b,
        Err(why) => {
            warnings.push(format!(
                "the line counts of {} file(s) are unknown: their old content could not be \
                 read from the repository ({why})",
                needed.len()
            ));
            HashMap::new()
        }
    };
    let (root_buf, b, a) = (
        root.to_path_buf(),
        Arc::clone(&before.scan),
        Arc::clone(&after.scan),
    );
    tokio::task::spawn_blocking(move || {
        scan_diff::assemble(&root_buf, &b, &a, &extra, &changes, &blobs)
    })
    .await
    .map_err(|e| io_error("read", root, std::io::Error::other(e)))
}

/// How far [`diff_scans`]'s first trip got.
enum DiffStep {
    /// The changes, assembled.
    Done(Vec<FileChange>),
    /// Old content the assembly needs from the repository first.
    NeedBlobs {
        changes: Vec<(Vec<u8>, scan_diff::Change)>,
        extra: stat_scan::PathMap<Seen>,
        needed: Vec<[u8; 20]>,
    },
}

fn hex(id: &[u8; 20]) -> String {
    id.iter().map(|b| format!("{b:02x}")).collect()
}

/// The content of the blobs `ids` from the repository at `root` (`git cat-file --batch`, one
/// process, nothing of the repository's run), up to [`scan_diff::BLOBS_MAX_BYTES`] in all; a
/// blob missing or past the budget is left out (its line counts are then unknown).
async fn cat_blobs(
    root: &Path,
    env: &[(OsString, OsString)],
    ids: &[[u8; 20]],
) -> Result<HashMap<[u8; 20], Vec<u8>>, String> {
    let mut input = Vec::new();
    for id in ids {
        input.extend_from_slice(hex(id).as_bytes());
        input.push(b'\n');
    }
    let mut out = HashMap::new();
    let run = git(root, env, &os_args(&["cat-file", "--batch"]), Some(&input))
        .await
        .map_err(|e| e.to_string())?;
    if !run.success {
        return Err(format!("git {}: {}", run.args, run.message));
    }
    let mut rest = run.stdout.as_slice();
    let mut total = 0u64;
    for id in ids {
        let Some(nl) = rest.iter().position(|b| *b == b'\n') else {
            break;
        };
        let header = String::from_utf8_lossy(rest.get(..nl).unwrap_or_default()).into_owned();
        rest = rest.get(nl + 1..).unwrap_or_default();
        let mut fields = header.split(' ');
        let (Some(_), Some(kind), Some(size)) = (fields.next(), fields.next(), fields.next())
        else {
            continue; // `<id> missing`
        };
        let Ok(size) = size.parse::<usize>() else {
            break;
        };
        let Some(body) = rest.get(..size) else { break };
        total += u64::try_from(size).unwrap_or(u64::MAX);
        if kind == "blob" && total <= scan_diff::BLOBS_MAX_BYTES {
            out.insert(*id, body.to_vec());
        }
        rest = rest.get(size + 1..).unwrap_or_default();
    }
    Ok(out)
}

/// [`Snapshot::text_of`] for an in-process record: what it kept, else the index's blob.
async fn scan_text_of(
    root: &Path,
    tree: &ScanTree,
    path: &str,
    env: &[(OsString, OsString)],
    max: usize,
) -> Option<String> {
    let key = path.as_bytes();
    let clean = || {
        let top = [tree.dirs.prefix.as_slice(), key].concat();
        let (pos, seen) = tree.tracked.clean_seen(&top)?;
        (tree.scan.clean.get(usize::try_from(pos).ok()?) == Some(&true)).then_some(seen)
    };
    let bytes = match tree.scan.kept(key) {
        Some(Kept::Bytes(b)) => b.clone(),
        Some(Kept::Blob(_)) => return None,
        None => match tree.scan.seen.get(key).cloned().or_else(clean)? {
            Seen::File {
                clean_blob: Some(id),
                stat,
            } if usize::try_from(stat.size).is_ok_and(|s| s <= max) => {
                cat_blobs(root, env, &[id]).await.ok()?.remove(&id)?
            }
            _ => return None,
        },
    };
    if bytes.len() > max {
        return None;
    }
    String::from_utf8(bytes).ok().filter(|t| !t.contains('\0'))
}

// ---------------------------------------------------------------------------------------------
// git

/// Where the git work tree containing the root keeps things.
#[derive(Debug, Clone)]
struct Repo {
    /// The top level of the work tree.
    toplevel: PathBuf,
    /// The root's path inside the work tree, with a trailing `/`; empty at the top.
    prefix: OsString,
    /// The real index file (it may not exist yet).
    index: PathBuf,
    /// The real object directory.
    objects: PathBuf,
    /// The name of every filter driver configured for the repository (any scope), to be
    /// emptied in every call that may run one.
    filters: Vec<Vec<u8>>,
}

/// What `git rev-parse` said about the root.
#[derive(Debug)]
enum Located {
    /// Inside a work tree.
    Repo(Repo),
    /// Not a git repository: walk, nothing to warn about.
    NotARepo,
    /// Git could not be used (not installed, dubious ownership, bare repository...): walk and
    /// say why.
    Unusable(String),
}

/// One finished git command.
#[derive(Debug)]
pub(crate) struct GitRun {
    /// What ran, for messages (`git` and the `-c` settings left out).
    pub(crate) args: String,
    /// Exited 0.
    pub(crate) success: bool,
    /// All of stdout.
    pub(crate) stdout: Vec<u8>,
    /// Stderr, trimmed and bounded (or why the command did not finish).
    pub(crate) message: String,
}

impl GitRun {
    /// Stdout of a successful run, else [`EngineError::Git`].
    pub(crate) fn into_stdout(self) -> Result<Vec<u8>, EngineError> {
        if self.success {
            Ok(self.stdout)
        } else {
            Err(self.into_error())
        }
    }

    pub(crate) fn into_error(self) -> EngineError {
        EngineError::Git {
            args: self.args,
            message: self.message,
        }
    }
}

/// Run `git <GIT_CONFIG> <args>` in `root` with `env` (plus a marker and the C locale, so that
/// messages we recognise are in English).
pub(crate) async fn git(
    root: &Path,
    env: &[(OsString, OsString)],
    args: &[OsString],
    input: Option<&[u8]>,
) -> Result<GitRun, EngineError> {
    let marker = format!("snapshot-{}-{}", std::process::id(), next_seq());
    let env = with_vars(
        env,
        &[
            (MARKER_VAR, OsString::from(&marker)),
            ("LC_ALL", OsString::from("C")),
        ],
    );
    let mut full = Vec::with_capacity(GIT_CONFIG.len() * 2 + args.len());
    for setting in GIT_CONFIG {
        full.push(OsString::from("-c"));
        full.push(OsString::from(setting));
    }
    full.extend(args.iter().cloned());
    let spec = SpawnSpec {
        program: PathBuf::from("git"),
        args: full,
        cwd: root.to_path_buf(),
        env,
        stdin_piped: false,
        stdin_file: None,
        detach_log: None,
        rlimits: crate::run::limits::Rlimits::NONE,
    };
    let out = capture(&spec, input, GIT_TIMEOUT, GIT_KEEP_BYTES, &marker).await?;
    let args = args
        .iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join(" ");
    let stderr = head_str(out.stderr.text().trim(), MAX_MESSAGE_BYTES);
    let (success, message) = if out.timed_out {
        (
            false,
            format!("timed out after {} s", GIT_TIMEOUT.as_secs()),
        )
    } else if out.stdout.truncated() {
        (
            false,
            format!("its output exceeded {} MiB", GIT_KEEP_BYTES >> 20),
        )
    } else {
        (out.code == Some(0), stderr)
    };
    Ok(GitRun {
        args,
        success,
        stdout: out.stdout.bytes(),
        message,
    })
}

/// `env` with each of `vars` set (replacing any value it had).
pub(crate) fn with_vars(
    env: &[(OsString, OsString)],
    vars: &[(&str, OsString)],
) -> Vec<(OsString, OsString)> {
    let mut out: Vec<(OsString, OsString)> = env
        .iter()
        .filter(|(k, _)| !vars.iter().any(|(name, _)| k == name))
        .cloned()
        .collect();
    out.extend(
        vars.iter()
            .map(|(name, value)| (OsString::from(name), value.clone())),
    );
    out
}

fn os_args(args: &[&str]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

/// Whether `dir` or one of its ancestors holds a `.git` entry (a work tree, by the look of it,
/// without asking git).
fn in_git_work_tree(dir: &Path) -> bool {
    dir.ancestors()
        .any(|a| std::fs::symlink_metadata(a.join(".git")).is_ok())
}

/// The oldest git the snapshot can use: `git rev-parse --path-format=absolute` came in 2.31.
pub const GIT_MIN: (u32, u32) = (2, 31);

/// git's version as `(major, minor)` and the text of `git --version` (run in `cwd` with `env`),
/// or why it could not be had.
///
/// # Errors
/// A message when git cannot be started, fails, or prints no version.
pub(crate) async fn git_version(
    cwd: &Path,
    env: &[(OsString, OsString)],
) -> Result<((u32, u32), String), String> {
    let run = git(cwd, env, &os_args(&["--version"]), None)
        .await
        .map_err(|e| e.to_string())?;
    let text = String::from_utf8_lossy(&run.stdout).trim().to_owned();
    if !run.success {
        return Err(format!("git --version failed: {}", run.message));
    }
    parse_git_version(&text)
        .map(|v| (v, text.clone()))
        .ok_or_else(|| format!("git --version printed {text:?}"))
}

/// `(major, minor)` of `git version 2.30.2` (or `git version 2.39.5.windows.1`).
fn parse_git_version(text: &str) -> Option<(u32, u32)> {
    let version = text.strip_prefix("git version ")?;
    let mut parts = version.split('.');
    let major = parts.next()?.trim().parse().ok()?;
    let minor = parts.next()?.trim().parse().ok()?;
    Some((major, minor))
}

/// When git in `root` is older than [`GIT_MIN`], why the snapshot cannot use it.
async fn too_old(root: &Path, env: &[(OsString, OsString)]) -> Option<String> {
    let ((major, minor), text) = git_version(root, env).await.ok()?;
    ((major, minor) < GIT_MIN).then(|| {
        format!(
            "{text} is older than {}.{}, which the snapshot needs (git rev-parse --path-format); \
             install git {}.{} or later",
            GIT_MIN.0, GIT_MIN.1, GIT_MIN.0, GIT_MIN.1
        )
    })
}

/// Ask git whether `root` is inside a work tree, and where its index and objects are.
async fn locate(root: &Path, env: &[(OsString, OsString)]) -> Located {
    let args = os_args(&[
        "rev-parse",
        "--path-format=absolute",
        "--show-toplevel",
        "--show-prefix",
        "--git-path",
        "index",
        "--git-path",
        "objects",
    ]);
    let run = match git(root, env, &args, None).await {
        Ok(run) => run,
        Err(e) => return Located::Unusable(format!("git could not be started ({e})")),
    };
    if !run.success {
        if run.message.contains("not a git repository") {
            return Located::NotARepo;
        }
        if let Some(why) = too_old(root, env).await {
            return Located::Unusable(why);
        }
        return Located::Unusable(format!("git {} failed: {}", run.args, run.message));
    }
    let mut stdout = run.stdout;
    if stdout.last() == Some(&b'\n') {
        stdout.pop();
    }
    let lines: Vec<&[u8]> = stdout.split(|b| *b == b'\n').collect();
    let [toplevel, prefix, index, objects] = lines.as_slice() else {
        // git before 2.31 prints `--path-format=absolute` back as if it were an argument
        if let Some(why) = too_old(root, env).await {
            return Located::Unusable(why);
        }
        return Located::Unusable(format!(
            "git {} printed something unexpected: {:?}",
            run.args,
            String::from_utf8_lossy(&stdout)
        ));
    };
    let filters = match filter_names(root, env).await {
        Ok(names) => names,
        Err(why) => return Located::Unusable(why),
    };
    Located::Repo(Repo {
        toplevel: PathBuf::from(OsString::from_vec(toplevel.to_vec())),
        prefix: OsString::from_vec(prefix.to_vec()),
        index: PathBuf::from(OsString::from_vec(index.to_vec())),
        objects: PathBuf::from(OsString::from_vec(objects.to_vec())),
        filters,
    })
}

/// The names of the filter drivers configured for the repository at `root`, in every scope and
/// include (`filter.<name>.<key>`; a name may hold dots). Reading configuration runs nothing.
/// When it cannot be read the snapshot must not stage with git, since a filter could then run.
pub(crate) async fn filter_names(
    root: &Path,
    env: &[(OsString, OsString)],
) -> Result<Vec<Vec<u8>>, String> {
    let args = os_args(&["config", "-z", "--name-only", "--get-regexp", r"^filter\."]);
    let run = match git(root, env, &args, None).await {
        Ok(run) => run,
        Err(e) => return Err(format!("git could not be started ({e})")),
    };
    if !run.success {
        // `git config --get-regexp` exits 1 when nothing matches, and then prints nothing
        if run.stdout.is_empty() && run.message.is_empty() {
            return Ok(Vec::new());
        }
        return Err(format!("git {} failed: {}", run.args, run.message));
    }
    Ok(parse_filter_names(&run.stdout))
}

/// The driver names in `git config -z --name-only` output (`filter.<name>.<key>\0`…), each
/// once, in order.
fn parse_filter_names(out: &[u8]) -> Vec<Vec<u8>> {
    let mut names: Vec<Vec<u8>> = Vec::new();
    for key in out.split(|b| *b == 0) {
        let Some(rest) = key.strip_prefix(b"filter.") else {
            continue;
        };
        let Some(dot) = rest.iter().rposition(|b| *b == b'.') else {
            // `filter.x` (no subsection) names no driver
            continue;
        };
        let name = &rest[..dot];
        if !names.iter().any(|n| n == name) {
            names.push(name.to_vec());
        }
    }
    names
}

/// `env` with every driver of `names` emptied (`clean`, `smudge` and `process` set to nothing,
/// `required` to false), through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/`GIT_CONFIG_VALUE_<n>`
/// after any the environment already holds: unlike `-c`, these take a name holding `=`.
pub(crate) fn neutral_filters(
    env: &[(OsString, OsString)],
    names: &[Vec<u8>],
) -> Vec<(OsString, OsString)> {
    let mut settings: Vec<(Vec<u8>, &str)> = Vec::new();
    for name in names {
        for (key, value) in [
            ("clean", ""),
            ("smudge", ""),
            ("process", ""),
            ("required", "false"),
        ] {
            let mut full = b"filter.".to_vec();
            full.extend_from_slice(name);
            full.push(b'.');
            full.extend_from_slice(key.as_bytes());
            settings.push((full, value));
        }
    }
    with_config(env, &settings)
}

/// `env` with `settings` (key, value) added through `GIT_CONFIG_COUNT`/`GIT_CONFIG_KEY_<n>`/
/// `GIT_CONFIG_VALUE_<n>` after any the environment already holds.
fn with_config(
    env: &[(OsString, OsString)],
    settings: &[(Vec<u8>, &str)],
) -> Vec<(OsString, OsString)> {
    let start: usize = env
        .iter()
        .find(|(k, _)| k == "GIT_CONFIG_COUNT")
        .and_then(|(_, v)| v.to_str()?.trim().parse().ok())
        .unwrap_or(0);
    let mut out: Vec<(OsString, OsString)> = env
        .iter()
        .filter(|(k, _)| k != "GIT_CONFIG_COUNT")
        .cloned()
        .collect();
    let mut n = start;
    for (key, value) in settings {
        out.push((
            OsString::from(format!("GIT_CONFIG_KEY_{n}")),
            OsString::from_vec(key.clone()),
        ));
        out.push((
            OsString::from(format!("GIT_CONFIG_VALUE_{n}")),
            OsString::from(value),
        ));
        n += 1;
    }
    if n > 0 {
        out.push((
            OsString::from("GIT_CONFIG_COUNT"),
            OsString::from(n.to_string()),
        ));
    }
    out
}

/// How a git snapshot starts.
struct GitStart<'a> {
    /// The run's previous snapshot, when it was a git one.
    previous: Option<&'a GitTree>,
    /// Stage into the previous snapshot's index: the repository is where it was.
    reuse_index: bool,
    /// Untracked files below the root, as `git ls-files -o` listed them (first snapshot only).
    untracked: Vec<Vec<u8>>,
}

/// Stage the working tree below `root` into a copy of the index (or the previous snapshot's
/// index) and write it as a tree. Large untracked files are left out and recorded by metadata.
async fn take_git(
    root: &Path,
    env: &[(OsString, OsString)],
    scratch: &Path,
    repo: Repo,
    start: GitStart<'_>,
    warnings: &mut Vec<String>,
) -> Result<GitTree, EngineError> {
    let objects = scratch.join("objects");
    tokio::fs::create_dir_all(&objects)
        .await
        .map_err(|source| io_error("create directory", &objects, source))?;
    let index = match start.previous.filter(|_| start.reuse_index) {
        Some(previous) => previous.index.clone(),
        None => {
            let dir = scratch.join(format!("snap-{}", next_seq()));
            tokio::fs::create_dir_all(&dir)
                .await
                .map_err(|source| io_error("create directory", &dir, source))?;
            let index = dir.join("index");
            copy_index(&repo.index, &index).await?;
            index
        }
    };
    // the previous snapshot's large files stay out of this tree too, whatever they became
    let big = match start.previous {
        Some(previous) => stat_big(root, previous.big.keys().cloned().collect(), false).await?,
        None => stat_big(root, start.untracked, true).await?,
    };
    let excludes = exclude_pathspecs(big.keys());
    // `core.bigFileThreshold=1` makes `add` stream every blob it stores into one pack instead
    // of one loose file each: 1,000 dirty files were 1,000 files created in scratch and 1-1.4 s
    // to delete afterwards on a busy disk, against one pack and 25-55 ms. Only for staging: in
    // `diff-tree` the same setting would make every file binary.
    let env = with_config(
        &neutral_filters(env, &repo.filters),
        &[(b"core.bigFileThreshold".to_vec(), "1")],
    );
    let env = with_vars(
        &env,
        &[
            ("GIT_INDEX_FILE", index.clone().into_os_string()),
            ("GIT_OBJECT_DIRECTORY", objects.clone().into_os_string()),
            (
                "GIT_ALTERNATE_OBJECT_DIRECTORIES",
                alternates(&[&repo.objects], &env),
            ),
        ],
    );
    let add = add_all(root, &env, b".", &excludes).await?;
    if !add.success {
        warnings.push(format!(
            "git {} could not stage everything: {}",
            add.args, add.message
        ));
    }
    let tree = write_tree(root, &env, &repo.prefix, &excludes).await?;
    Ok(GitTree {
        tree,
        objects,
        repo_objects: repo.objects.clone(),
        index,
        markers: git_markers(root, &repo.toplevel),
        repo,
        big,
    })
}

/// `git add --ignore-errors -A` of `pathspec` (`.` or `:/`), leaving out `excludes` (NUL-ended
/// exclude pathspecs, read from stdin so that no list is too long for a command line).
/// `--ignore-errors`: a file that cannot be read, or a nested repository without a commit, must
/// not stop everything else from being staged; git still exits non-zero and says why.
///
async fn add_all(
    root: &Path,
    env: &[(OsString, OsString)],
    pathspec: &[u8],
    excludes: &[u8],
) -> Result<GitRun, EngineError> {
    let mut args = os_args(&["add", "--ignore-errors", "-A"]);
    if excludes.is_empty() {
        args.push(OsString::from("--"));
        args.push(OsString::from_vec(pathspec.to_vec()));
        return git(root, env, &args, None).await;
    }
    let mut input = pathspec.to_vec();
    input.push(0);
    input.extend_from_slice(excludes);
    args.extend(os_args(&["--pathspec-from-file=-", "--pathspec-file-nul"]));
    git(root, env, &args, Some(&input)).await
}

/// `:(exclude,literal)<path>\0` for each path (relative to the root, where git runs).
fn exclude_pathspecs<'a>(paths: impl Iterator<Item = &'a Vec<u8>>) -> Vec<u8> {
    let mut out = Vec::new();
    for path in paths {
        out.extend_from_slice(b":(exclude,literal)");
        out.extend_from_slice(path);
        out.push(0);
    }
    out
}

/// `git ls-files -z -o --exclude-standard` in `root`: the untracked, not ignored files below it,
/// relative to it. Empty when git fails (the snapshot then hashes every file, as git would).
async fn untracked_files(root: &Path, env: &[(OsString, OsString)]) -> Vec<Vec<u8>> {
    let args = os_args(&["ls-files", "-z", "-o", "--exclude-standard"]);
    match git(root, env, &args, None).await {
        Ok(run) if run.success => run
            .stdout
            .split(|b| *b == 0)
            .filter(|p| !p.is_empty())
            .map(<[u8]>::to_vec)
            .collect(),
        Ok(_) | Err(_) => Vec::new(),
    }
}

/// The metadata of `paths` (relative to `root`), read on a blocking thread. With `only_big`,
/// keep the regular files of [`BIG_FILE`] bytes or more; else keep every path, `None` where it
/// holds no regular file.
async fn stat_big(
    root: &Path,
    paths: Vec<Vec<u8>>,
    only_big: bool,
) -> Result<BTreeMap<Vec<u8>, Option<FileStat>>, EngineError> {
    if paths.is_empty() {
        return Ok(BTreeMap::new());
    }
    let root_buf = root.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let mut out = BTreeMap::new();
        for path in paths {
            let abs = root_buf.join(OsStr::from_bytes(&path));
            let stat = std::fs::symlink_metadata(&abs)
                .ok()
                .filter(std::fs::Metadata::is_file)
                .map(|m| FileStat::of(&m));
            if !only_big || stat.as_ref().is_some_and(|s| s.size >= BIG_FILE) {
                out.insert(path, stat);
            }
        }
        out
    })
    .await
    .map_err(|e| io_error("read", root, std::io::Error::other(e)))
}

/// The `.git` entries in `root` and its ancestors up to `toplevel`.
fn git_markers(root: &Path, toplevel: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for dir in root.ancestors() {
        let marker = dir.join(".git");
        if std::fs::symlink_metadata(&marker).is_ok() {
            out.push(marker);
        }
        if dir == toplevel {
            break;
        }
    }
    out
}

/// Copy the real index (when there is one) to `to`, keeping its modification time: git's
/// racy-entry check compares file times with the index's own, so a fresh time would let a
/// same-size edit made right after the index was written pass as unchanged.
async fn copy_index(from: &Path, to: &Path) -> Result<(), EngineError> {
    let (from, copy) = (from.to_path_buf(), to.to_path_buf());
    tokio::task::spawn_blocking(move || {
        let to = copy;
        let meta = match std::fs::metadata(&from) {
            Ok(meta) => meta,
            // a repository without an index yet (fresh `git init`): git add starts one
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(source) => return Err(io_error("read", &from, source)),
        };
        std::fs::copy(&from, &to).map_err(|source| io_error("copy", &from, source))?;
        if let Ok(mtime) = meta.modified() {
            std::fs::File::options()
                .write(true)
                .open(&to)
                .and_then(|f| f.set_modified(mtime))
                .map_err(|source| io_error("set the modification time of", &to, source))?;
        }
        Ok(())
    })
    .await
    .map_err(|e| io_error("copy", to, std::io::Error::other(e)))?
}

/// The value for `GIT_ALTERNATE_OBJECT_DIRECTORIES`: `dirs`, then whatever `env` already had.
fn alternates(dirs: &[&Path], env: &[(OsString, OsString)]) -> OsString {
    let mut out: Vec<u8> = Vec::new();
    let mut seen: Vec<&Path> = Vec::new();
    for dir in dirs {
        if seen.contains(dir) {
            continue;
        }
        seen.push(dir);
        if !out.is_empty() {
            out.push(b':');
        }
        out.extend(quote_alternate(dir.as_os_str().as_bytes()));
    }
    let inherited = env
        .iter()
        .find(|(k, _)| k == "GIT_ALTERNATE_OBJECT_DIRECTORIES")
        .map(|(_, v)| v.as_bytes())
        .filter(|v| !v.is_empty());
    if let Some(inherited) = inherited {
        out.push(b':');
        out.extend_from_slice(inherited);
    }
    OsString::from_vec(out)
}

/// Git reads an alternate that starts with `"` as a C-quoted string, which is how one holding
/// the `:` separator is written.
fn quote_alternate(path: &[u8]) -> Vec<u8> {
    if !path.contains(&b':') && path.first() != Some(&b'"') {
        return path.to_vec();
    }
    let mut out = vec![b'"'];
    for &b in path {
        if b == b'"' || b == b'\\' {
            out.push(b'\\');
        }
        out.push(b);
    }
    out.push(b'"');
    out
}

/// Write the index (already holding the working tree below the root) as the root's tree.
async fn write_tree(
    root: &Path,
    env: &[(OsString, OsString)],
    prefix: &OsStr,
    excludes: &[u8],
) -> Result<String, EngineError> {
    let mut args = os_args(&["write-tree"]);
    if !prefix.is_empty() {
        let mut arg = OsString::from("--prefix=");
        arg.push(prefix);
        args.push(arg);
    }
    let mut staged_everything = false;
    loop {
        let run = git(root, env, &args, None).await?;
        if run.success {
            return tree_id(&run.stdout, &run.args);
        }
        if prefix.is_empty() {
            return Err(run.into_error());
        }
        if run.message.contains("prefix") && run.message.contains("not found") {
            // nothing is tracked or present below the root
            return empty_tree(root, env).await;
        }
        if staged_everything {
            return Err(run.into_error());
        }
        // write-tree refuses an index with unmerged entries anywhere, even outside the root
        // (a merge in progress elsewhere in the work tree): stage the whole work tree, which
        // resolves them, and try once more. Below the root the result is the same.
        let add = add_all(root, env, b":/", excludes).await?;
        if !add.success {
            return Err(add.into_error());
        }
        staged_everything = true;
    }
}

/// The empty tree, written to the run's object directory (its id depends on the hash function).
async fn empty_tree(root: &Path, env: &[(OsString, OsString)]) -> Result<String, EngineError> {
    let run = git(root, env, &os_args(&["mktree"]), Some(b"")).await?;
    let args = run.args.clone();
    tree_id(&run.into_stdout()?, &args)
}

/// Parse an object id printed by git.
fn tree_id(stdout: &[u8], args: &str) -> Result<String, EngineError> {
    let id = String::from_utf8_lossy(stdout).trim().to_owned();
    if matches!(id.len(), 40 | 64) && id.bytes().all(|b| b.is_ascii_hexdigit()) {
        Ok(id)
    } else {
        Err(EngineError::Git {
            args: args.to_owned(),
            message: format!("expected an object id, got {id:?}"),
        })
    }
}

/// The changes between two trees of the same root, and of the large files both left out.
async fn diff_git(
    root: &Path,
    before: &GitTree,
    after: &GitTree,
    env: &[(OsString, OsString)],
    warnings: &mut Vec<String>,
) -> Result<Vec<FileChange>, EngineError> {
    let mut files = if before.tree == after.tree {
        Vec::new()
    } else {
        diff_trees(root, before, after, env).await?
    };
    let big = diff_big(&before.big, &after.big);
    if !big.is_empty() {
        let names: Vec<&str> = big.iter().map(|f| f.path.as_str()).collect();
        warnings.push(format!(
            "large untracked file(s) compared by size, times and inode, not by content, and \
             without line counts: {}",
            names.join(", ")
        ));
    }
    files.extend(big);
    Ok(files)
}

/// One `git diff-tree --raw --numstat` between the two trees: renames and line counts at once.
async fn diff_trees(
    root: &Path,
    before: &GitTree,
    after: &GitTree,
    env: &[(OsString, OsString)],
) -> Result<Vec<FileChange>, EngineError> {
    let extra: Vec<&Path> = [
        before.repo_objects.as_path(),
        after.repo_objects.as_path(),
        after.objects.as_path(),
    ]
    .into_iter()
    .filter(|d| *d != before.objects)
    .collect();
    let env = with_vars(
        env,
        &[
            (
                "GIT_OBJECT_DIRECTORY",
                before.objects.clone().into_os_string(),
            ),
            ("GIT_ALTERNATE_OBJECT_DIRECTORIES", alternates(&extra, env)),
        ],
    );
    let mut args = os_args(&[
        "diff-tree",
        "--no-ext-diff",
        "--no-textconv",
        "-r",
        "-z",
        "-M",
        "--raw",
        "--numstat",
    ]);
    args.push(OsString::from(&before.tree));
    args.push(OsString::from(&after.tree));
    let run = git(root, &env, &args, None).await?;
    let run_args = run.args.clone();
    let out = run.into_stdout()?;
    let (statuses, mut counts) = parse_raw(&out)
        .and_then(|(name_status, numstat)| {
            Some((parse_name_status(&name_status)?, parse_numstat(numstat)?))
        })
        .ok_or_else(|| EngineError::Git {
            args: run_args,
            message: "unexpected --raw --numstat output".to_owned(),
        })?;
    Ok(statuses
        .into_iter()
        .map(|entry| {
            let (lines_added, lines_removed) = counts.remove(&entry.path).unwrap_or((None, None));
            FileChange {
                path: String::from_utf8_lossy(&entry.path).into_owned(),
                change_type: entry.change_type,
                old_path: entry
                    .old_path
                    .map(|p| String::from_utf8_lossy(&p).into_owned()),
                highlights: Vec::new(),
                lines_added,
                lines_removed,
            }
        })
        .collect())
}

/// The large files that changed, by their metadata: no line counts.
fn diff_big(
    before: &BTreeMap<Vec<u8>, Option<FileStat>>,
    after: &BTreeMap<Vec<u8>, Option<FileStat>>,
) -> Vec<FileChange> {
    let paths: BTreeSet<&Vec<u8>> = before.keys().chain(after.keys()).collect();
    paths
        .into_iter()
        .filter_map(|path| {
            let was = before.get(path).and_then(Option::as_ref);
            let is = after.get(path).and_then(Option::as_ref);
            let change_type = match (was, is) {
                (Some(_), None) => ChangeType::Deleted,
                (None, Some(_)) => ChangeType::Added,
                (Some(a), Some(b)) if a != b => ChangeType::Modified,
                (Some(_), Some(_)) | (None, None) => return None,
            };
            Some(FileChange {
                path: String::from_utf8_lossy(path).into_owned(),
                change_type,
                old_path: None,
                highlights: Vec::new(),
                lines_added: None,
                lines_removed: None,
            })
        })
        .collect()
}

/// The files of `git diff-tree -z -r -M --raw --numstat` output, with their line counts; `None`
/// when the output is not of that shape (the worktree's `files_changed`, measured between two
/// commits).
pub(crate) fn parse_diff_tree(out: &[u8]) -> Option<Vec<FileChange>> {
    let (name_status, numstat) = parse_raw(out)?;
    let statuses = parse_name_status(&name_status)?;
    let mut counts = parse_numstat(numstat)?;
    Some(
        statuses
            .into_iter()
            .map(|entry| {
                let (lines_added, lines_removed) =
                    counts.remove(&entry.path).unwrap_or((None, None));
                FileChange {
                    path: String::from_utf8_lossy(&entry.path).into_owned(),
                    change_type: entry.change_type,
                    old_path: entry
                        .old_path
                        .map(|p| String::from_utf8_lossy(&p).into_owned()),
                    highlights: Vec::new(),
                    lines_added,
                    lines_removed,
                }
            })
            .collect(),
    )
}

/// Split `git diff-tree -z --raw --numstat` output: the raw records (`:<modes> <ids> <status>\0
/// path\0`, a second path for renames and copies) rewritten as `--name-status` records, and the
/// numstat part that follows them. `None` when a raw record is cut short.
fn parse_raw(out: &[u8]) -> Option<(Vec<u8>, &[u8])> {
    let mut name_status = Vec::new();
    let mut rest = out;
    while rest.first() == Some(&b':') {
        let end = rest.iter().position(|b| *b == 0)?;
        let meta = &rest[..end];
        let status = meta.rsplit(|b| *b == b' ').next()?;
        let paths = match status.first() {
            Some(b'R' | b'C') => 2,
            Some(_) => 1,
            None => return None,
        };
        name_status.extend_from_slice(status);
        name_status.push(0);
        rest = &rest[end + 1..];
        for _ in 0..paths {
            let end = rest.iter().position(|b| *b == 0)?;
            name_status.extend_from_slice(&rest[..=end]);
            rest = &rest[end + 1..];
        }
    }
    Some((name_status, rest))
}

/// One `--name-status` record.
#[derive(Debug, PartialEq, Eq)]
struct StatusEntry {
    change_type: ChangeType,
    path: Vec<u8>,
    old_path: Option<Vec<u8>>,
}

/// Parse `git diff-tree -z --name-status`: `X\0path\0`, or `R<score>\0old\0new\0` for renames
/// (and copies). `None` when the output does not have that shape.
fn parse_name_status(out: &[u8]) -> Option<Vec<StatusEntry>> {
    let mut fields = out.split(|b| *b == 0);
    let mut entries = Vec::new();
    while let Some(status) = fields.next() {
        let Some(&letter) = status.first() else {
            // the empty field after the final NUL (or empty output) must be the last one
            return fields.next().is_none().then_some(entries);
        };
        let entry = match letter {
            b'R' => {
                let old = path_field(&mut fields)?.to_vec();
                StatusEntry {
                    change_type: ChangeType::Renamed,
                    path: path_field(&mut fields)?.to_vec(),
                    old_path: Some(old),
                }
            }
            b'C' => {
                // a copy leaves its source alone: for this file it is new
                let _source = path_field(&mut fields)?;
                StatusEntry {
                    change_type: ChangeType::Added,
                    path: path_field(&mut fields)?.to_vec(),
                    old_path: None,
                }
            }
            other => {
                let change_type = match other {
                    b'A' => ChangeType::Added,
                    b'D' => ChangeType::Deleted,
                    // M: content or mode; T: type (file ↔ symlink ↔ submodule); anything
                    // newer git invents is at least a change
                    _ => ChangeType::Modified,
                };
                StatusEntry {
                    change_type,
                    path: path_field(&mut fields)?.to_vec(),
                    old_path: None,
                }
            }
        };
        entries.push(entry);
    }
    Some(entries)
}

/// The next NUL-separated field, which must be a (never empty) path.
fn path_field<'a>(fields: &mut impl Iterator<Item = &'a [u8]>) -> Option<&'a [u8]> {
    fields.next().filter(|f| !f.is_empty())
}

/// Lines added and removed, `None` for binary files.
type LineCounts = (Option<u64>, Option<u64>);

/// Parse `git diff-tree -z --numstat`: `added\tremoved\tpath\0`, or `added\tremoved\t\0old\0new\0`
/// for renames; `-` counts (binary files) become `None`. Keyed by the (new) path.
fn parse_numstat(out: &[u8]) -> Option<HashMap<Vec<u8>, LineCounts>> {
    let mut fields = out.split(|b| *b == 0);
    let mut counts = HashMap::new();
    while let Some(field) = fields.next() {
        if field.is_empty() {
            // the empty field after the final NUL (or empty output) must be the last one
            return fields.next().is_none().then_some(counts);
        }
        let mut parts = field.splitn(3, |b| *b == b'\t');
        let added = parse_count(parts.next()?)?;
        let removed = parse_count(parts.next()?)?;
        let path = parts.next()?;
        let path = if path.is_empty() {
            let _old = path_field(&mut fields)?;
            path_field(&mut fields)?
        } else {
            path
        };
        counts.insert(path.to_vec(), (added, removed));
    }
    Some(counts)
}

/// `Some(None)` for git's `-` (binary), `Some(Some(n))` for a number, `None` for anything else.
fn parse_count(field: &[u8]) -> Option<Option<u64>> {
    if field == b"-" {
        return Some(None);
    }
    std::str::from_utf8(field).ok()?.parse().ok().map(Some)
}

// ---------------------------------------------------------------------------------------------
// walk

/// Walk `root` on a blocking thread.
async fn walk(root: &Path, limits: SnapshotLimits) -> Result<(Walk, Vec<String>), EngineError> {
    let root_buf = root.to_path_buf();
    tokio::task::spawn_blocking(move || Walker::run(root_buf, limits))
        .await
        .map_err(|e| io_error("walk", root, std::io::Error::other(e)))?
}

/// The state of one walk.
struct Walker {
    root: PathBuf,
    limits: SnapshotLimits,
    entries: BTreeMap<PathBuf, Entry>,
    warnings: Vec<String>,
    truncated: Option<String>,
    deadline: std::time::Instant,
    hashed: u64,
    hashing: bool,
    buf: Vec<u8>,
}

impl Walker {
    fn run(root: PathBuf, limits: SnapshotLimits) -> Result<(Walk, Vec<String>), EngineError> {
        // the root itself must be readable; anything below that is not becomes a warning
        std::fs::read_dir(&root).map_err(|source| io_error("read directory", &root, source))?;
        let mut walker = Walker {
            root,
            limits,
            entries: BTreeMap::new(),
            warnings: Vec::new(),
            truncated: None,
            deadline: std::time::Instant::now() + limits.max_time,
            hashed: 0,
            hashing: true,
            buf: vec![0; 64 * 1024],
        };
        let _ = walker.dir(Path::new(""));
        Ok((
            Walk {
                entries: walker.entries,
                truncated: walker.truncated,
            },
            walker.warnings,
        ))
    }

    /// Record everything below `rel`, children in name order, so that the recorded set is always
    /// a prefix of all paths in `Path` order (which compares component by component).
    fn dir(&mut self, rel: &Path) -> ControlFlow<()> {
        let abs = self.root.join(rel);
        let mut names: Vec<OsString> = match std::fs::read_dir(&abs) {
            Ok(dir) => dir.filter_map(|e| e.ok().map(|e| e.file_name())).collect(),
            Err(e) => {
                self.warnings
                    .push(format!("could not read directory {}: {e}", rel.display()));
                return ControlFlow::Continue(());
            }
        };
        names.sort();
        for name in names {
            // git's own metadata, present when git is unusable or droid ran `git init`
            if name == ".git" {
                continue;
            }
            let rel = rel.join(&name);
            let abs = self.root.join(&rel);
            let meta = match std::fs::symlink_metadata(&abs) {
                Ok(meta) => meta,
                // removed while we walked
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => {
                    self.warnings
                        .push(format!("could not read {}: {e}", rel.display()));
                    continue;
                }
            };
            let file_type = meta.file_type();
            if file_type.is_dir() {
                self.dir(&rel)?;
                continue;
            }
            let cut = if self.entries.len() >= self.limits.max_files {
                Some(format!("{} files", self.limits.max_files))
            } else if std::time::Instant::now() >= self.deadline {
                Some(format!(
                    "{} s ({} files)",
                    self.limits.max_time.as_secs_f64(),
                    self.entries.len()
                ))
            } else {
                None
            };
            if let Some(cut) = cut {
                let why = format!(
                    "the walk of the directory stopped at {cut}; changes after {} were not \
                     checked",
                    self.entries
                        .keys()
                        .next_back()
                        .map_or_else(|| "its start".to_owned(), |p| p.display().to_string())
                );
                self.warnings.push(why.clone());
                self.truncated = Some(why);
                return ControlFlow::Break(());
            }
            let entry = if file_type.is_symlink() {
                Entry::Symlink {
                    target: std::fs::read_link(&abs).unwrap_or_default(),
                }
            } else if file_type.is_file() {
                Entry::File {
                    size: meta.len(),
                    mtime: meta.modified().ok(),
                    executable: meta.permissions().mode() & 0o111 != 0,
                    hash: self.hash(&abs, meta.len()),
                }
            } else {
                Entry::Special {
                    kind: special_kind(&file_type),
                }
            };
            self.entries.insert(rel, entry);
        }
        ControlFlow::Continue(())
    }

    /// FNV-1a of a file's content, while the byte budget lasts.
    fn hash(&mut self, path: &Path, size: u64) -> Option<u64> {
        if !self.hashing {
            return None;
        }
        if self.hashed.saturating_add(size) > self.limits.max_bytes {
            self.hashing = false;
            self.warnings.push(format!(
                "snapshot stopped hashing after {} bytes; files beyond were compared by size and \
                 modification time only",
                self.limits.max_bytes
            ));
            return None;
        }
        let mut file = std::fs::File::open(path).ok()?;
        let mut hash = Fnv1a::new();
        loop {
            match std::io::Read::read(&mut file, &mut self.buf) {
                Ok(0) => break,
                Ok(n) => {
                    hash.update(&self.buf[..n]);
                    self.hashed += n as u64;
                }
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => return None,
            }
        }
        Some(hash.finish())
    }
}

fn special_kind(file_type: &std::fs::FileType) -> &'static str {
    if file_type.is_fifo() {
        "fifo"
    } else if file_type.is_socket() {
        "socket"
    } else if file_type.is_block_device() {
        "block device"
    } else if file_type.is_char_device() {
        "character device"
    } else {
        "unknown"
    }
}

/// Added, modified and deleted files between two walks. Where a walk stopped at the file limit,
/// only paths up to its last recorded one are compared (beyond it, absence means "not looked").
fn diff_walk(before: &Walk, after: &Walk) -> Vec<FileChange> {
    let last = |w: &Walk| {
        if w.truncated.is_some() {
            w.entries.keys().next_back().cloned()
        } else {
            None
        }
    };
    let (limit_before, limit_after) = (last(before), last(after));
    let in_range = |p: &Path| {
        limit_before.as_deref().is_none_or(|l| p <= l)
            && limit_after.as_deref().is_none_or(|l| p <= l)
    };
    let paths: BTreeSet<&PathBuf> = before.entries.keys().chain(after.entries.keys()).collect();
    paths
        .into_iter()
        .filter(|p| in_range(p))
        .filter_map(|p| {
            let change_type = match (before.entries.get(p), after.entries.get(p)) {
                (Some(_), None) => ChangeType::Deleted,
                (None, Some(_)) => ChangeType::Added,
                (Some(a), Some(b)) if entry_changed(a, b) => ChangeType::Modified,
                (Some(_), Some(_)) | (None, None) => return None,
            };
            Some(FileChange {
                path: p.to_string_lossy().into_owned(),
                change_type,
                old_path: None,
                highlights: Vec::new(),
                lines_added: None,
                lines_removed: None,
            })
        })
        .collect()
}

/// Did a path's entry change? Content by hash when both sides were hashed, else by size and
/// modification time; the executable bit; a symlink's target; a change of kind.
fn entry_changed(before: &Entry, after: &Entry) -> bool {
    match (before, after) {
        (
            Entry::File {
                size: s1,
                mtime: m1,
                executable: x1,
                hash: h1,
            },
            Entry::File {
                size: s2,
                mtime: m2,
                executable: x2,
                hash: h2,
            },
        ) => {
            s1 != s2
                || x1 != x2
                || match (h1, h2) {
                    (Some(h1), Some(h2)) => h1 != h2,
                    (None, _) | (_, None) => m1 != m2,
                }
        }
        (Entry::Symlink { target: t1 }, Entry::Symlink { target: t2 }) => t1 != t2,
        (Entry::Special { kind: k1 }, Entry::Special { kind: k2 }) => k1 != k2,
        (Entry::File { .. }, Entry::Symlink { .. } | Entry::Special { .. })
        | (Entry::Symlink { .. }, Entry::File { .. } | Entry::Special { .. })
        | (Entry::Special { .. }, Entry::File { .. } | Entry::Symlink { .. }) => true,
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicU64;

    use pretty_assertions::assert_eq;

    use super::*;

    static DIRS: AtomicU64 = AtomicU64::new(0);

    /// A temp directory with a `repo`, a `home` and a run's `scratch`, removed on drop, and an
    /// environment that lets git commit on a machine without any git configuration.
    struct Fixture {
        dir: PathBuf,
        repo: PathBuf,
        scratch: PathBuf,
        env: Vec<(OsString, OsString)>,
    }

    impl Fixture {
        fn new() -> Self {
            let dir = std::env::temp_dir().join(format!(
                "droid-snapshot-test-{}-{}",
                std::process::id(),
                DIRS.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&dir);
            let (repo, home, scratch) = (dir.join("repo"), dir.join("home"), dir.join("scratch"));
            for d in [&repo, &home, &scratch] {
                std::fs::create_dir_all(d).unwrap();
            }
            let mut env: Vec<(OsString, OsString)> = [
                ("HOME", home.into_os_string()),
                ("GIT_AUTHOR_NAME", "Test".into()),
                ("GIT_AUTHOR_EMAIL", "test@example.com".into()),
                ("GIT_COMMITTER_NAME", "Test".into()),
                ("GIT_COMMITTER_EMAIL", "test@example.com".into()),
                ("GIT_CONFIG_NOSYSTEM", "1".into()),
                // never find a repository above the fixture (a plain directory must stay plain)
                ("GIT_CEILING_DIRECTORIES", dir.clone().into_os_string()),
            ]
            .into_iter()
            .map(|(k, v)| (OsString::from(k), v))
            .collect();
            env.push((
                "PATH".into(),
                std::env::var_os("PATH").expect("PATH is set"),
            ));
            Self {
                dir,
                repo,
                scratch,
                env,
            }
        }

        /// Run git in `cwd`; returns (exit code, stdout, stderr).
        async fn git_status(&self, cwd: &Path, args: &[&str]) -> (Option<i32>, String, String) {
            let spec = SpawnSpec {
                program: PathBuf::from("git"),
                args: os_args(args),
                cwd: cwd.to_path_buf(),
                env: self.env.clone(),
                stdin_piped: false,
                stdin_file: None,
                detach_log: None,
                rlimits: crate::run::limits::Rlimits::NONE,
            };
            let out = capture(
                &spec,
                None,
                Duration::from_secs(60),
                1 << 20,
                "snapshot-test",
            )
            .await
            .expect("git is installed (apt-get install git)");
            (out.code, out.stdout.text(), out.stderr.text())
        }

        /// Run git in the repository, which must succeed.
        async fn git(&self, args: &[&str]) -> String {
            let (code, stdout, stderr) = self.git_status(&self.repo, args).await;
            assert_eq!(code, Some(0), "git {args:?} failed: {stderr}");
            stdout
        }

        async fn init(&self) {
            self.git(&["-c", "init.defaultBranch=main", "init", "-q"])
                .await;
        }

        async fn commit_all(&self) {
            self.git(&["add", "-A"]).await;
            self.git(&["commit", "-q", "--allow-empty", "-m", "commit"])
                .await;
        }

        fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
            let path = self.repo.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, content).unwrap();
        }

        fn remove(&self, rel: &str) {
            std::fs::remove_file(self.repo.join(rel)).unwrap();
        }

        fn rename(&self, from: &str, to: &str) {
            let to = self.repo.join(to);
            std::fs::create_dir_all(to.parent().unwrap()).unwrap();
            std::fs::rename(self.repo.join(from), to).unwrap();
        }

        async fn take_at(
            &self,
            root: &Path,
            limits: SnapshotLimits,
            previous: Option<&Snapshot>,
        ) -> Snapshot {
            Snapshot::take(root, &self.env, &self.scratch, &limits, previous)
                .await
                .unwrap()
        }

        async fn take(&self) -> Snapshot {
            self.take_at(&self.repo, SnapshotLimits::default(), None)
                .await
        }

        /// The second snapshot of a run, as the engine takes it.
        async fn take_after(&self, before: &Snapshot) -> Snapshot {
            self.take_at(&self.repo, SnapshotLimits::default(), Some(before))
                .await
        }

        async fn diff(&self, before: &Snapshot, after: &Snapshot) -> Changes {
            before.diff(after, &self.env).await.unwrap()
        }

        /// Every file under `.git` with its content.
        fn git_dir_files(&self) -> BTreeMap<PathBuf, Vec<u8>> {
            fn visit(dir: &Path, base: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
                for entry in std::fs::read_dir(dir).unwrap() {
                    let path = entry.unwrap().path();
                    if path.is_dir() {
                        visit(&path, base, out);
                    } else {
                        let rel = path.strip_prefix(base).unwrap().to_path_buf();
                        out.insert(rel, std::fs::read(&path).unwrap());
                    }
                }
            }
            let mut out = BTreeMap::new();
            visit(&self.repo.join(".git"), &self.repo, &mut out);
            out
        }
    }

    impl Drop for Fixture {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }

    fn change(path: &str, change_type: ChangeType, lines: Option<(u64, u64)>) -> FileChange {
        FileChange {
            path: path.to_owned(),
            change_type,
            old_path: None,
            highlights: Vec::new(),
            lines_added: lines.map(|l| l.0),
            lines_removed: lines.map(|l| l.1),
        }
    }

    fn renamed(from: &str, to: &str, lines: (u64, u64)) -> FileChange {
        FileChange {
            old_path: Some(from.to_owned()),
            ..change(to, ChangeType::Renamed, Some(lines))
        }
    }

    fn no_warnings() -> Vec<String> {
        Vec::new()
    }

    use ChangeType::{Added, Deleted, Modified};

    #[tokio::test]
    async fn git_reports_added_modified_and_deleted_files_and_leaves_the_repo_alone() {
        let f = Fixture::new();
        f.init().await;
        f.write("keep.txt", "same\n");
        f.write("change.txt", "one\ntwo\n");
        f.write("gone.txt", "bye\n");
        f.write("src/lib.rs", "fn a() {}\n");
        f.commit_all().await;
        f.write("dirty-untracked.txt", "here before the run\n");
        let git_dir = f.git_dir_files();
        assert!(git_dir.contains_key(Path::new(".git/index")));

        let before = f.take().await;
        f.write("change.txt", "one\nTWO\nthree\n");
        f.remove("gone.txt");
        f.write("new.txt", "a\nb\n");
        f.write("src/new/mod.rs", "mod x;\n");
        let after = f.take_after(&before).await;
        let changes = f.diff(&before, &after).await;

        assert_eq!(
            changes,
            Changes {
                incomplete: None,
                files: vec![
                    change("change.txt", Modified, Some((2, 1))),
                    change("gone.txt", Deleted, Some((0, 1))),
                    change("new.txt", Added, Some((2, 0))),
                    change("src/new/mod.rs", Added, Some((1, 0))),
                ],
                warnings: no_warnings(),
            }
        );
        // the user's index and object store (indeed all of .git) are byte for byte the same
        assert_eq!(f.git_dir_files(), git_dir);
        // recorded in-process: nothing written to scratch either
        assert!(!f.scratch.join("objects").exists());
    }

    /// The in-process record (issue 17): a same-size edit right after the first record (same
    /// coarse file time) is still seen; a tracked file inside an ignored directory is still
    /// compared; a tree large enough for the parallel walk sees every change; and no git process
    /// runs unless a changed file's old content must come from the repository.
    #[tokio::test]
    async fn in_process_record_sees_racy_edits_ignored_tracked_files_and_large_trees() {
        let f = Fixture::new();
        f.init().await;
        f.write(".gitignore", "build/\n");
        f.write("build/tracked.txt", "t\n");
        f.git(&["add", "-f", "build/tracked.txt"]).await;
        for i in 0..2_500 {
            f.write(&format!("d{}/f{i}.txt", i % 50), format!("{i}\n"));
        }
        f.write("racy.txt", "aaaa\n");
        f.commit_all().await;
        // the committed files are no longer racy: their old content is the repository's blob
        std::thread::sleep(Duration::from_millis(300));
        f.write("racy.txt", "bbbb\n");

        let before = f.take().await;
        assert!(matches!(before.kind, Kind::Scan(_)), "recorded in-process");
        f.write("racy.txt", "cccc\n"); // same size, same (coarse) second
        f.write("build/tracked.txt", "t2\n");
        f.write("build/untracked.txt", "ignored\n");
        f.write("d7/f2057.txt", "changed\n");
        f.remove("d49/f2499.txt");
        f.write("d3/new.txt", "n\n");
        let after = f.take_after(&before).await;
        assert!(matches!(after.kind, Kind::Scan(_)));
        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    change("build/tracked.txt", Modified, Some((1, 1))),
                    change("d3/new.txt", Added, Some((1, 0))),
                    change("d49/f2499.txt", Deleted, Some((0, 1))),
                    change("d7/f2057.txt", Modified, Some((1, 1))),
                    change("racy.txt", Modified, Some((1, 1))),
                ],
                warnings: no_warnings(),
            }
        );
        assert!(!f.scratch.join("objects").exists(), "nothing written");
    }

    #[tokio::test]
    async fn nothing_changed_is_an_empty_list() {
        let f = Fixture::new();
        f.init().await;
        f.write("a.txt", "a\n");
        f.commit_all().await;
        let before = f.take().await;
        let after = f.take_after(&before).await;
        assert_eq!(f.diff(&before, &after).await, Changes::default());
    }

    #[tokio::test]
    async fn renames_carry_the_old_path() {
        let f = Fixture::new();
        f.init().await;
        let body: String = (1..=20).map(|i| format!("line {i}\n")).collect();
        f.write("big.txt", &body);
        f.write("plain.txt", body.replace("line", "row"));
        f.commit_all().await;

        let before = f.take().await;
        f.rename("big.txt", "moved/big.txt");
        f.write("moved/big.txt", format!("{body}one more\n"));
        f.rename("plain.txt", "same.txt");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    renamed("big.txt", "moved/big.txt", (1, 0)),
                    renamed("plain.txt", "same.txt", (0, 0)),
                ],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn binary_files_have_no_line_counts() {
        let f = Fixture::new();
        f.init().await;
        f.write("image.bin", [0u8, 1, 2, 3, 0, 255]);
        f.commit_all().await;

        let before = f.take().await;
        f.write("image.bin", [0u8, 9, 9, 0, 1]);
        f.write("new.bin", [0u8, 0, 7]);
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    change("image.bin", Modified, None),
                    change("new.bin", Added, None),
                ],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn names_with_spaces_unicode_and_newlines() {
        let f = Fixture::new();
        f.init().await;
        f.write("a b.txt", "x\n");
        f.write("ünï cødé/файл.txt", "y\n");
        f.commit_all().await;

        let before = f.take().await;
        f.write("a b.txt", "x\nz\n");
        f.remove("ünï cødé/файл.txt");
        f.write("new\nline.txt", "n\n");
        f.write("日本 語.md", "#\n");
        f.write("tab\there \"quoted\".txt", "q\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    change("a b.txt", Modified, Some((1, 0))),
                    change("new\nline.txt", Added, Some((1, 0))),
                    change("tab\there \"quoted\".txt", Added, Some((1, 0))),
                    change("ünï cødé/файл.txt", Deleted, Some((0, 1))),
                    change("日本 語.md", Added, Some((1, 0))),
                ],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn repo_without_commits_or_index() {
        let f = Fixture::new();
        f.init().await;
        assert!(!f.repo.join(".git/index").exists());
        let git_dir = f.git_dir_files();

        let before = f.take().await;
        f.write("first.txt", "hello\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("first.txt", Added, Some((1, 0)))],
                warnings: no_warnings(),
            }
        );
        assert_eq!(f.git_dir_files(), git_dir);
    }

    #[tokio::test]
    async fn repo_without_commits_but_with_staged_files() {
        let f = Fixture::new();
        f.init().await;
        f.write("staged.txt", "one\n");
        f.write("also.txt", "two\n");
        f.git(&["add", "staged.txt", "also.txt"]).await;
        let git_dir = f.git_dir_files();

        let before = f.take().await;
        f.write("staged.txt", "one\nmore\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("staged.txt", Modified, Some((1, 0)))],
                warnings: no_warnings(),
            }
        );
        assert_eq!(f.git_dir_files(), git_dir);
    }

    #[tokio::test]
    async fn subdirectory_root_sees_only_itself_with_relative_paths() {
        let f = Fixture::new();
        f.init().await;
        f.write("top.txt", "top\n");
        f.write("sub/inner.txt", "inner\n");
        f.write("sub/moving.txt", "moving\n");
        f.commit_all().await;
        let root = f.repo.join("sub");

        let before = f.take_at(&root, SnapshotLimits::default(), None).await;
        f.write("top.txt", "top changed\n");
        f.write("outside.txt", "outside\n");
        f.write("sub/inner.txt", "inner changed\n");
        f.write("sub/deep/new.txt", "new\n");
        // moved out of the root: gone, as far as the root is concerned
        f.rename("sub/moving.txt", "moved-out.txt");
        let after = f
            .take_at(&root, SnapshotLimits::default(), Some(&before))
            .await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    change("deep/new.txt", Added, Some((1, 0))),
                    change("inner.txt", Modified, Some((1, 1))),
                    change("moving.txt", Deleted, Some((0, 1))),
                ],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn subdirectory_root_that_git_does_not_know_yet() {
        let f = Fixture::new();
        f.init().await;
        f.write("top.txt", "top\n");
        f.commit_all().await;
        let root = f.repo.join("fresh");
        std::fs::create_dir(&root).unwrap();

        let before = f.take_at(&root, SnapshotLimits::default(), None).await;
        f.write("fresh/x.txt", "x\n");
        f.write("top.txt", "elsewhere\n");
        let after = f
            .take_at(&root, SnapshotLimits::default(), Some(&before))
            .await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("x.txt", Added, Some((1, 0)))],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn unmerged_files_outside_a_subdirectory_root() {
        let f = Fixture::new();
        f.init().await;
        f.write("conflict.txt", "base\n");
        f.write("sub/s.txt", "s\n");
        f.commit_all().await;
        f.git(&["checkout", "-q", "-b", "other"]).await;
        f.write("conflict.txt", "theirs\n");
        f.commit_all().await;
        f.git(&["checkout", "-q", "main"]).await;
        f.write("conflict.txt", "ours\n");
        f.commit_all().await;
        let (code, _, _) = f.git_status(&f.repo, &["merge", "-q", "other"]).await;
        assert_eq!(code, Some(1), "the merge conflicts");
        let git_dir = f.git_dir_files();
        let root = f.repo.join("sub");

        let before = f.take_at(&root, SnapshotLimits::default(), None).await;
        f.write("sub/s.txt", "s2\n");
        let after = f
            .take_at(&root, SnapshotLimits::default(), Some(&before))
            .await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("s.txt", Modified, Some((1, 1)))],
                warnings: no_warnings(),
            }
        );
        assert_eq!(f.git_dir_files(), git_dir);
    }

    #[tokio::test]
    async fn dirty_before_the_run_counts_only_if_changed_during_it() {
        let f = Fixture::new();
        f.init().await;
        f.write("untouched.txt", "committed\n");
        f.write("further.txt", "committed\n");
        f.commit_all().await;
        f.write("untouched.txt", "dirty\n");
        f.write("further.txt", "dirty\n");
        f.write("untracked.txt", "dirty\n");

        let before = f.take().await;
        f.write("further.txt", "dirty\nand more\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("further.txt", Modified, Some((1, 0)))],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn committing_during_the_run_hides_nothing() {
        let f = Fixture::new();
        f.init().await;
        f.write("a.txt", "a\n");
        f.write("b.txt", "b\n");
        f.commit_all().await;

        let before = f.take().await;
        f.write("a.txt", "a\nA\n");
        f.write("n.txt", "n\n");
        f.remove("b.txt");
        f.commit_all().await;
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    change("a.txt", Modified, Some((1, 0))),
                    change("b.txt", Deleted, Some((0, 1))),
                    change("n.txt", Added, Some((1, 0))),
                ],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn ignored_files_are_not_reported() {
        let f = Fixture::new();
        f.init().await;
        f.write(".gitignore", "*.log\ntarget/\n");
        f.write("tracked.log", "tracked even though ignored\n");
        f.git(&["add", ".gitignore"]).await;
        f.git(&["add", "-f", "tracked.log"]).await;
        f.commit_all().await;

        let before = f.take().await;
        f.write("build.log", "noise\n");
        f.write("target/debug/app", "binary\n");
        f.write("tracked.log", "changed\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("tracked.log", Modified, Some((1, 1)))],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn symlinks_and_type_changes() {
        let f = Fixture::new();
        f.init().await;
        f.write("target.txt", "t\n");
        f.write("becomes-link.txt", "file\n");
        std::os::unix::fs::symlink("target.txt", f.repo.join("link")).unwrap();
        f.commit_all().await;

        let before = f.take().await;
        f.remove("link");
        std::os::unix::fs::symlink("elsewhere.txt", f.repo.join("link")).unwrap();
        f.remove("becomes-link.txt");
        std::os::unix::fs::symlink("target.txt", f.repo.join("becomes-link.txt")).unwrap();
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    change("becomes-link.txt", Modified, Some((1, 1))),
                    change("link", Modified, Some((1, 1))),
                ],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn a_nested_repository_without_commits_is_a_warning_not_a_failure() {
        let f = Fixture::new();
        f.init().await;
        f.write("a.txt", "a\n");
        f.commit_all().await;

        let before = f.take().await;
        std::fs::create_dir(f.repo.join("nested")).unwrap();
        f.git_status(&f.repo.join("nested"), &["init", "-q"]).await;
        f.write("nested/inside.txt", "i\n");
        f.write("b.txt", "b\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("b.txt", Added, Some((1, 0)))],
                warnings: vec![
                    "'nested/' is a repository without a commit checked out: its files were \
                     not compared"
                        .to_owned()
                ],
            }
        );
    }

    #[tokio::test]
    async fn git_lfs_clean_filter_is_not_run() {
        let f = Fixture::new();
        f.init().await;
        f.write(".gitattributes", "*.dat filter=lfs\n");
        f.write("x.dat", "data\n");
        f.commit_all().await;
        let ran = f.dir.join("clean-filter-ran");
        let filter = format!("touch '{}'; cat", ran.display());
        // as `git lfs install` sets it up: a long-running process filter and a clean command
        f.git(&["config", "filter.lfs.process", &filter]).await;
        f.git(&["config", "filter.lfs.clean", &filter]).await;
        f.git(&["config", "filter.lfs.required", "true"]).await;

        let before = f.take().await;
        f.write("x.dat", "more data\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("x.dat", Modified, Some((1, 1)))],
                warnings: no_warnings(),
            }
        );
        assert!(!ran.exists(), "the clean filter must not run");
    }

    #[tokio::test]
    async fn repository_hooks_and_filters_are_not_run() {
        let f = Fixture::new();
        f.init().await;
        let ran = f.dir.join("repository-code-ran");
        let program = f.dir.join("planted");
        std::fs::write(
            &program,
            format!("#!/bin/sh\necho \"$*\" >> '{}'\nexec cat\n", ran.display()),
        )
        .unwrap();
        std::fs::set_permissions(&program, std::fs::Permissions::from_mode(0o755)).unwrap();
        let hook = f.repo.join(".git/hooks/post-index-change");
        std::fs::write(&hook, format!("#!/bin/sh\n'{}' hook\n", program.display())).unwrap();
        std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o755)).unwrap();
        let p = program.display();
        f.git(&["config", "filter.evil.clean", &format!("{p} clean")])
            .await;
        f.git(&["config", "filter.evil.required", "true"]).await;
        f.git(&["config", "filter.x.y.process", &format!("{p} process")])
            .await;
        f.git(&["config", "core.fsmonitor", &format!("{p} fsmonitor")])
            .await;
        f.write(".gitattributes", "*.dat filter=evil\n*.xy filter=x.y\n");
        f.write("a.dat", "a\n");
        f.write("a.xy", "a\n");
        let before = f.take().await;
        f.write("b.dat", "b\n");
        f.write("b.xy", "b\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    change("b.dat", Added, Some((1, 0))),
                    change("b.xy", Added, Some((1, 0))),
                ],
                warnings: no_warnings(),
            }
        );
        assert_eq!(std::fs::read_to_string(&ran).unwrap_or_default(), "");
    }

    // ------------------------------------------------------------------------------- walk

    #[tokio::test]
    async fn plain_directory_reports_added_modified_and_deleted_without_lines() {
        use std::os::unix::fs::symlink;
        let f = Fixture::new();
        f.write("keep.txt", "same");
        f.write("change.txt", "abcd");
        f.write("gone.txt", "bye");
        f.write("script.sh", "echo");
        f.write("a b/ünï.txt", "u");
        symlink("keep.txt", f.repo.join("link")).unwrap();
        symlink("keep.txt", f.repo.join("same-link")).unwrap();
        std::fs::create_dir(f.repo.join("empty-dir")).unwrap();

        let before = f.take().await;
        f.write("change.txt", "wxyz"); // same size: only the hash tells
        f.remove("gone.txt");
        f.write("new.txt", "new");
        f.write("a b/ünï.txt", "changed");
        std::fs::set_permissions(
            f.repo.join("script.sh"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::remove_file(f.repo.join("link")).unwrap();
        symlink("change.txt", f.repo.join("link")).unwrap();
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    change("a b/ünï.txt", Modified, None),
                    change("change.txt", Modified, None),
                    change("gone.txt", Deleted, None),
                    change("link", Modified, None),
                    change("new.txt", Added, None),
                    change("script.sh", Modified, None),
                ],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn git_init_during_the_run_keeps_the_walk() {
        let f = Fixture::new();
        f.write("old.txt", "old");

        let before = f.take().await;
        f.init().await;
        f.write("new.txt", "new");
        f.commit_all().await;
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("new.txt", Added, None)],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn git_missing_still_records_in_process_without_old_line_counts() {
        let mut f = Fixture::new();
        f.init().await;
        f.write("a.txt", "a");
        f.commit_all().await;
        // no longer racy: its old content is the index's blob, which needs git to read
        std::thread::sleep(Duration::from_millis(300));
        let empty = f.dir.join("empty-path");
        std::fs::create_dir(&empty).unwrap();
        for (k, v) in &mut f.env {
            if k == "PATH" {
                *v = empty.clone().into_os_string();
            }
        }

        let before = f.take().await;
        f.write("a.txt", "b");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("a.txt", Modified, None)],
                warnings: vec![
                    "the line counts of 1 file(s) are unknown: their old content could not be \
                     read from the repository (could not start git: No such file or directory \
                     (os error 2))"
                        .to_owned()
                ],
            }
        );
    }

    #[tokio::test]
    async fn walk_stops_at_the_file_limit_and_compares_only_what_both_saw() {
        let f = Fixture::new();
        for name in ["a", "b", "c", "d", "e"] {
            f.write(name, name);
        }
        let limits = SnapshotLimits {
            max_files: 3,
            ..SnapshotLimits::default()
        };

        let before = f.take_at(&f.repo, limits, None).await; // a b c
        f.remove("a");
        f.write("e", "changed beyond the limit");
        let after = f.take_at(&f.repo, limits, Some(&before)).await; // b c d
        let cut_at_c =
            "the walk of the directory stopped at 3 files; changes after c were not checked"
                .to_owned();

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: Some(cut_at_c.clone()),
                files: vec![change("a", Deleted, None)],
                warnings: vec![
                    cut_at_c,
                    "the walk of the directory stopped at 3 files; changes after d were not \
                     checked"
                        .to_owned(),
                ],
            }
        );
    }

    #[tokio::test]
    async fn walk_past_the_byte_budget_compares_size_and_mtime() {
        let f = Fixture::new();
        f.write("a", "12345678");
        f.write("b", "12345678");
        f.write("c", "12345678");
        let limits = SnapshotLimits {
            max_bytes: 10,
            ..SnapshotLimits::default()
        };
        let set_mtime = |name: &str, t: SystemTime| {
            std::fs::File::options()
                .write(true)
                .open(f.repo.join(name))
                .unwrap()
                .set_modified(t)
                .unwrap();
        };
        let old = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        for name in ["a", "b", "c"] {
            set_mtime(name, old);
        }

        let before = f.take_at(&f.repo, limits, None).await; // only a is hashed
        // a: same size, same mtime, new content: the hash sees it
        f.write("a", "abcdefgh");
        set_mtime("a", old);
        // b: same size, new mtime: seen by mtime
        f.write("b", "abcdefgh");
        // c: same size, same mtime, new content: beyond the budget, not seen
        f.write("c", "abcdefgh");
        set_mtime("c", old);
        let after = f.take_at(&f.repo, limits, Some(&before)).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![change("a", Modified, None), change("b", Modified, None)],
                warnings: vec![
                    "snapshot stopped hashing after 10 bytes; files beyond were compared by size \
                     and modification time only"
                        .to_owned()
                ],
            }
        );
    }

    #[test]
    fn parses_git_versions() {
        assert_eq!(parse_git_version("git version 2.30.2"), Some((2, 30)));
        assert_eq!(
            parse_git_version("git version 2.39.5.windows.1"),
            Some((2, 39))
        );
        assert_eq!(parse_git_version("git version 10.1"), Some((10, 1)));
        assert_eq!(parse_git_version("hub version 2.14.2"), None);
        assert!((2, 30) < GIT_MIN && (2, 31) >= GIT_MIN && (3, 0) > GIT_MIN);
    }

    #[test]
    fn parses_name_status_and_numstat() {
        let status =
            parse_name_status(b"M\0a b\0R087\0old\0new\0A\0x\ny\0D\0gone\0T\0t\0").unwrap();
        assert_eq!(
            status,
            vec![
                StatusEntry {
                    change_type: Modified,
                    path: b"a b".to_vec(),
                    old_path: None
                },
                StatusEntry {
                    change_type: ChangeType::Renamed,
                    path: b"new".to_vec(),
                    old_path: Some(b"old".to_vec())
                },
                StatusEntry {
                    change_type: Added,
                    path: b"x\ny".to_vec(),
                    old_path: None
                },
                StatusEntry {
                    change_type: Deleted,
                    path: b"gone".to_vec(),
                    old_path: None
                },
                StatusEntry {
                    change_type: Modified,
                    path: b"t".to_vec(),
                    old_path: None
                },
            ]
        );
        let counts = parse_numstat(b"1\t2\ta b\0-\t-\tbin\0" as &[u8])
            .unwrap()
            .into_iter()
            .collect::<BTreeMap<_, _>>();
        assert_eq!(
            counts,
            BTreeMap::from([
                (b"a b".to_vec(), (Some(1), Some(2))),
                (b"bin".to_vec(), (None, None)),
            ])
        );
        let renamed = parse_numstat(b"3\t0\t\0old\0new\0").unwrap();
        assert_eq!(
            renamed,
            HashMap::from([(b"new".to_vec(), (Some(3), Some(0)))])
        );
        assert_eq!(parse_name_status(b"R100\0only-old\0"), None);
        assert_eq!(parse_numstat(b"x\ty\tz\0"), None);
        assert_eq!(parse_numstat(b"1\t1\t\0old\0"), None);
        assert_eq!(parse_name_status(b"M\0\0A\0x\0"), None);
        assert_eq!(parse_name_status(b""), Some(Vec::new()));
    }

    #[test]
    fn filter_names_are_read_once_each_dotted_ones_whole() {
        let out = b"filter.lfs.clean\0filter.lfs.process\0filter.a.b.clean\0\
                    filter.x\0filter.Evil=1.smudge\0";
        assert_eq!(
            parse_filter_names(out),
            vec![b"lfs".to_vec(), b"a.b".to_vec(), b"Evil=1".to_vec()]
        );
        assert_eq!(parse_filter_names(b""), Vec::<Vec<u8>>::new());
    }

    #[test]
    fn filters_are_emptied_after_the_environment_s_own_settings() {
        let env = vec![
            (OsString::from("GIT_CONFIG_COUNT"), OsString::from("1")),
            (OsString::from("GIT_CONFIG_KEY_0"), OsString::from("core.x")),
            (OsString::from("GIT_CONFIG_VALUE_0"), OsString::from("y")),
        ];
        let out = neutral_filters(&env, &[b"a=b".to_vec()]);
        let shown: Vec<(String, String)> = out
            .iter()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect();
        let pair = |k: &str, v: &str| (k.to_owned(), v.to_owned());
        assert_eq!(
            shown,
            vec![
                pair("GIT_CONFIG_KEY_0", "core.x"),
                pair("GIT_CONFIG_VALUE_0", "y"),
                pair("GIT_CONFIG_KEY_1", "filter.a=b.clean"),
                pair("GIT_CONFIG_VALUE_1", ""),
                pair("GIT_CONFIG_KEY_2", "filter.a=b.smudge"),
                pair("GIT_CONFIG_VALUE_2", ""),
                pair("GIT_CONFIG_KEY_3", "filter.a=b.process"),
                pair("GIT_CONFIG_VALUE_3", ""),
                pair("GIT_CONFIG_KEY_4", "filter.a=b.required"),
                pair("GIT_CONFIG_VALUE_4", "false"),
                pair("GIT_CONFIG_COUNT", "5"),
            ]
        );
        assert_eq!(neutral_filters(&[], &[]), Vec::new());
    }

    #[test]
    fn alternates_quote_colons_and_keep_inherited_ones() {
        let env = vec![(
            OsString::from("GIT_ALTERNATE_OBJECT_DIRECTORIES"),
            OsString::from("/inherited"),
        )];
        assert_eq!(
            alternates(&[Path::new("/a"), Path::new("/b:c"), Path::new("/a")], &env),
            OsString::from("/a:\"/b:c\":/inherited")
        );
        assert_eq!(alternates(&[Path::new("/a")], &[]), OsString::from("/a"));
    }

    #[tokio::test]
    async fn walk_of_more_files_than_the_old_limit_sees_every_change() {
        let f = Fixture::new();
        for i in 0..25_000 {
            f.write(&format!("d{:02}/f{i:05}", i / 1000), "x");
        }

        let before = f.take().await;
        f.write("d00/f00000", "changed");
        f.write("d24/f24999", "changed");
        f.write("d24/new", "new");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                files: vec![
                    change("d00/f00000", Modified, None),
                    change("d24/f24999", Modified, None),
                    change("d24/new", Added, None),
                ],
                warnings: no_warnings(),
                incomplete: None,
            }
        );
    }

    #[tokio::test]
    async fn walk_out_of_time_says_files_changed_may_be_incomplete() {
        let f = Fixture::new();
        f.write("a", "a");
        let limits = SnapshotLimits {
            max_time: Duration::ZERO,
            ..SnapshotLimits::default()
        };

        let before = f.take_at(&f.repo, limits, None).await;
        f.write("b", "b");
        let after = f.take_at(&f.repo, limits, Some(&before)).await;

        let cut = "the walk of the directory stopped at 0 s (0 files); changes after its start \
                   were not checked"
            .to_owned();
        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                files: Vec::new(),
                warnings: vec![cut.clone()],
                incomplete: Some(cut),
            }
        );
    }

    #[tokio::test]
    async fn large_untracked_files_are_compared_by_metadata_and_never_stored() {
        let f = Fixture::new();
        f.init().await;
        f.write("a.txt", "a\n");
        f.commit_all().await;
        let big = vec![7_u8; usize::try_from(BIG_FILE).unwrap()];
        for name in ["same.bin", "grows.bin", "gone.bin"] {
            f.write(name, &big);
        }

        let before = f.take().await;
        let mut grows = std::fs::OpenOptions::new()
            .append(true)
            .open(f.repo.join("grows.bin"))
            .unwrap();
        std::io::Write::write_all(&mut grows, b"more").unwrap();
        f.remove("gone.bin");
        f.write("new.txt", "n\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                files: vec![
                    change("gone.bin", Deleted, None),
                    change("grows.bin", Modified, None),
                    change("new.txt", Added, Some((1, 0))),
                ],
                // in-process records hash them (within SnapshotLimits::max_bytes): by content
                warnings: no_warnings(),
                incomplete: None,
            }
        );
        fn size(dir: &Path) -> u64 {
            std::fs::read_dir(dir).map_or(0, |entries| {
                entries
                    .map(|e| e.unwrap())
                    .map(|e| {
                        let meta = std::fs::symlink_metadata(e.path()).unwrap();
                        if meta.is_dir() {
                            size(&e.path())
                        } else {
                            meta.len()
                        }
                    })
                    .sum()
            })
        }
        let stored = size(&f.scratch.join("objects"));
        assert!(
            stored < 1 << 20,
            "{stored} bytes of objects written to scratch"
        );
    }

    #[tokio::test]
    async fn a_filter_configured_during_the_run_is_not_run_by_the_second_snapshot() {
        let f = Fixture::new();
        f.init().await;
        f.write("a.txt", "a\n");
        f.commit_all().await;
        let ran = f.dir.join("filter-ran");

        let before = f.take().await;
        // droid (at --auto low it may write .git/config) plants a filter mid-run
        f.git(&[
            "config",
            "filter.planted.clean",
            &format!("touch '{}'; cat", ran.display()),
        ])
        .await;
        f.write(".gitattributes", "*.dat filter=planted\n");
        f.write("x.dat", "x\n");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                files: vec![
                    change(".gitattributes", Added, Some((1, 0))),
                    change("x.dat", Added, Some((1, 0))),
                ],
                warnings: no_warnings(),
                incomplete: None,
            }
        );
        assert!(!ran.exists(), "the planted clean filter must not run");
    }

    #[tokio::test]
    async fn git_init_at_a_subdirectory_root_during_the_run_locates_again() {
        let f = Fixture::new();
        f.init().await;
        f.write("sub/kept.txt", "k\n");
        f.write("outside.txt", "o\n");
        f.commit_all().await;
        let root = f.repo.join("sub");

        let before = f.take_at(&root, SnapshotLimits::default(), None).await;
        f.git_status(&root, &["init", "-q"]).await;
        f.write("sub/new.txt", "n\n");
        let after = f
            .take_at(&root, SnapshotLimits::default(), Some(&before))
            .await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                files: vec![change("new.txt", Added, Some((1, 0)))],
                warnings: no_warnings(),
                incomplete: None,
            }
        );
    }

    /// Commit `n` files, then modify `n - 10` of them and add 10, long enough before the record
    /// that none is racy: more than the record reads itself.
    async fn dirty_past_the_inline_bound(f: &Fixture, n: usize) {
        f.init().await;
        for i in 0..n {
            f.write(&format!("f{i}.txt"), format!("{i}\n"));
        }
        f.commit_all().await;
        for i in 0..n - 10 {
            f.write(&format!("f{i}.txt"), format!("{i}\ndirty\n"));
        }
        for i in 0..10 {
            f.write(&format!("new{i}.txt"), "new\n");
        }
        std::thread::sleep(Duration::from_millis(300));
    }

    fn scan_of(s: &Snapshot) -> &Scan {
        match &s.kind {
            Kind::Scan(t) => &t.scan,
            _ => panic!("recorded in-process"),
        }
    }

    /// A directory the run's first record listed is not listed again by the second while its
    /// own stat is unchanged (a file edited in place leaves it so); one where an entry was
    /// created, removed or renamed is, and what changed there is found. A directory changed
    /// just before the first record (racy) is listed again whatever its stat says.
    #[tokio::test]
    async fn directories_whose_entries_did_not_change_are_not_listed_again() {
        let f = Fixture::new();
        f.init().await;
        for dir in ["created", "edited", "removed", "renamed"] {
            f.write(&format!("{dir}/a.txt"), "a\n");
            f.write(&format!("{dir}/b.txt"), "b\n");
        }
        f.commit_all().await;
        // older than the racy window: the first record keeps their listings
        std::thread::sleep(Duration::from_millis(300));
        f.write("fresh/a.txt", "just made\n");
        let before = f.take().await;
        let first = scan_of(&before);
        for dir in ["created/", "edited/", "removed/", "renamed/"] {
            assert!(first.kept_listing(dir.as_bytes()), "{dir:?} kept");
        }
        // `fresh/` was just made, and the root changed with it
        for dir in ["fresh/", ""] {
            assert!(!first.kept_listing(dir.as_bytes()), "racy {dir:?} not kept");
        }

        f.write("created/c.txt", "c\n");
        f.write("edited/a.txt", "a\nmore\n");
        f.remove("removed/b.txt");
        std::fs::rename(f.repo.join("renamed/b.txt"), f.repo.join("renamed/z.txt")).unwrap();
        f.write("fresh/b.txt", "also new\n");
        let after = f.take_after(&before).await;
        // `edited/` only: the others gained, lost or renamed an entry, and the two racy ones
        // were not kept
        assert_eq!(scan_of(&after).listings_reused, 1);
        let changes = f.diff(&before, &after).await;
        let mut paths: Vec<(String, Option<(u64, u64)>)> = changes
            .files
            .iter()
            .map(|c| (c.path.clone(), c.lines_added.zip(c.lines_removed)))
            .collect();
        paths.sort();
        assert_eq!(
            paths,
            vec![
                ("created/c.txt".to_owned(), Some((1, 0))),
                ("edited/a.txt".to_owned(), Some((1, 0))),
                ("fresh/b.txt".to_owned(), Some((1, 0))),
                ("removed/b.txt".to_owned(), Some((0, 1))),
                ("renamed/z.txt".to_owned(), Some((0, 0))),
            ],
            "{changes:#?}"
        );
    }

    #[tokio::test]
    async fn dirty_files_past_the_inline_bound_are_read_while_the_agent_works() {
        let f = Fixture::new();
        let n = stat_scan::INLINE_FILES + 40;
        dirty_past_the_inline_bound(&f, n).await;

        let before = f.take().await;
        let scan = scan_of(&before);
        assert!(scan.reading(), "read by a thread of its own");
        scan.finish_reading(); // the agent's first edit comes later
        // a touch (same content) is no change; an edit has its line counts
        let touched = f.repo.join("f1.txt");
        let content = std::fs::read(&touched).unwrap();
        std::fs::write(&touched, content).unwrap();
        f.write("f0.txt", "0\ndirty\nmore\n");
        f.write("new3.txt", "newer\n");
        f.remove("new4.txt");
        let after = f.take_after(&before).await;

        assert_eq!(
            f.diff(&before, &after).await,
            Changes {
                incomplete: None,
                files: vec![
                    change("f0.txt", Modified, Some((1, 0))),
                    change("new3.txt", Modified, Some((1, 1))),
                    change("new4.txt", Deleted, Some((0, 1))),
                ],
                warnings: no_warnings(),
            }
        );
    }

    #[tokio::test]
    async fn a_dirty_file_the_agent_changed_before_it_was_read_has_no_line_counts() {
        let f = Fixture::new();
        let n = stat_scan::INLINE_FILES + 40;
        dirty_past_the_inline_bound(&f, n).await;

        let mut before = f.take().await;
        let Kind::Scan(tree) = &mut before.kind else {
            panic!("recorded in-process");
        };
        tree.scan.finish_reading();
        let scan = Arc::get_mut(&mut tree.scan).expect("only the snapshot holds its record");
        scan.lose_read(b"f0.txt");
        scan.lose_read(b"f1.txt");
        f.write("f0.txt", "0\ndirty\nmore\n");
        f.write("f2.txt", "2\ndirty\nmore\n");
        let after = f.take_after(&before).await;

        let changes = f.diff(&before, &after).await;
        assert_eq!(
            changes.files,
            vec![
                change("f0.txt", Modified, None),
                change("f2.txt", Modified, Some((1, 0))),
            ]
        );
        assert_eq!(changes.warnings.len(), 1, "{:?}", changes.warnings);
        let w = &changes.warnings[0];
        assert!(
            w.starts_with("1 file(s) changed before their content from before the run was read")
                && w.ends_with("no line counts: f0.txt"),
            "{w}"
        );
    }
}
