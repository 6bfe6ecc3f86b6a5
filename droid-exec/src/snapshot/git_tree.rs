//! The git-process strategy, for the layouts the in-process record cannot read with certainty
//! (`GIT_DIR` set, a split or sparse index, configuration `include`s, another object format): a
//! snapshot is a git tree object written from a private copy of the index into the run's
//! scratch object store, two trees compared by `git diff-tree` (see the module's overview in
//! [`crate::snapshot`]).

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};

use droid_contract::{ChangeType, FileChange};

use super::diff_tree::{parse_name_status, parse_numstat, parse_raw};
use super::git::{
    GIT_MIN, GitRun, alternates, filter_names, git, git_version, neutral_filters, next_seq,
    os_args, with_config, with_vars,
};
use crate::error::EngineError;

/// A git tree object holding the working tree below the root.
#[derive(Debug)]
pub(super) struct GitTree {
    /// The tree id: the root's subtree, so its paths are relative to the root.
    pub(super) tree: String,
    /// The run's object directory (`scratch/objects`) where the tree was written.
    pub(super) objects: PathBuf,
    /// The repository's object directory, used read-only as an alternate.
    pub(super) repo_objects: PathBuf,
    /// The scratch index the tree was written from: its stat cache lets the next snapshot of
    /// the run hash only what changed since this one.
    pub(super) index: PathBuf,
    /// Where the repository was found, reused by the next snapshot while [`Self::markers`] hold.
    pub(super) repo: Repo,
    /// The `.git` entries from the root up to the top level: when they differ at the next
    /// snapshot (droid ran `git init` below the top level), the repository is located again.
    pub(super) markers: Vec<PathBuf>,
    /// Untracked files of [`BIG_FILE`] bytes or more (paths relative to the root), left out of
    /// the tree and compared by their metadata; `None` where the path no longer holds one.
    pub(super) big: BTreeMap<Vec<u8>, Option<FileStat>>,
}

/// An untracked file at least this large is not hashed: git would read (and store) all of it
/// at every snapshot to compare what size, times and inode already tell.
pub(super) const BIG_FILE: u64 = 32 * 1024 * 1024;

/// What tells whether a large file changed without reading it (git's own stat check, which
/// includes `ctime`: it cannot be set back the way `mtime` can).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct FileStat {
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

/// Where the git work tree containing the root keeps things.
#[derive(Debug, Clone)]
pub(super) struct Repo {
    /// The top level of the work tree.
    pub(super) toplevel: PathBuf,
    /// The root's path inside the work tree, with a trailing `/`; empty at the top.
    pub(super) prefix: OsString,
    /// The real index file (it may not exist yet).
    pub(super) index: PathBuf,
    /// The real object directory.
    pub(super) objects: PathBuf,
    /// The name of every filter driver configured for the repository (any scope), to be
    /// emptied in every call that may run one.
    pub(super) filters: Vec<Vec<u8>>,
}

/// What `git rev-parse` said about the root.
#[derive(Debug)]
pub(super) enum Located {
    /// Inside a work tree.
    Repo(Repo),
    /// Not a git repository: walk, nothing to warn about.
    NotARepo,
    /// Git could not be used (not installed, dubious ownership, bare repository...): walk and
    /// say why.
    Unusable(String),
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
pub(super) async fn locate(root: &Path, env: &[(OsString, OsString)]) -> Located {
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

/// How a git snapshot starts.
pub(super) struct GitStart<'a> {
    /// The run's previous snapshot, when it was a git one.
    pub(super) previous: Option<&'a GitTree>,
    /// Stage into the previous snapshot's index: the repository is where it was.
    pub(super) reuse_index: bool,
    /// Untracked files below the root, as `git ls-files -o` listed them (first snapshot only).
    pub(super) untracked: Vec<Vec<u8>>,
}

/// Stage the working tree below `root` into a copy of the index (or the previous snapshot's
/// index) and write it as a tree. Large untracked files are left out and recorded by metadata.
pub(super) async fn take_git(
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
        .map_err(|source| EngineError::io("create directory", &objects)(source))?;
    let index = match start.previous.filter(|_| start.reuse_index) {
        Some(previous) => previous.index.clone(),
        None => {
            let dir = scratch.join(format!("snap-{}", next_seq()));
            tokio::fs::create_dir_all(&dir)
                .await
                .map_err(|source| EngineError::io("create directory", &dir)(source))?;
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
pub(super) async fn untracked_files(root: &Path, env: &[(OsString, OsString)]) -> Vec<Vec<u8>> {
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
    .map_err(|e| EngineError::io("read", root)(std::io::Error::other(e)))
}

/// The `.git` entries in `root` and its ancestors up to `toplevel`.
pub(super) fn git_markers(root: &Path, toplevel: &Path) -> Vec<PathBuf> {
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
            Err(source) => return Err(EngineError::io("read", &from)(source)),
        };
        std::fs::copy(&from, &to).map_err(|source| EngineError::io("copy", &from)(source))?;
        if let Ok(mtime) = meta.modified() {
            std::fs::File::options()
                .write(true)
                .open(&to)
                .and_then(|f| f.set_modified(mtime))
                .map_err(|source| EngineError::io("set the modification time of", &to)(source))?;
        }
        Ok(())
    })
    .await
    .map_err(|e| EngineError::io("copy", to)(std::io::Error::other(e)))?
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
pub(super) async fn diff_git(
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
