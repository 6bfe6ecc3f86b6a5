//! The in-process record of a git work tree, the strategy tried first: the repository located
//! and its index read in-process ([`crate::snapshot::git_dir`], [`crate::snapshot::git_index`]),
//! the work tree recorded by [`crate::snapshot::stat_scan`] and two records compared by
//! [`crate::snapshot::scan_diff`]. No git process and no object written, except `git cat-file`
//! for the old content of a file the index vouched for.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::Path;
use std::sync::Arc;

use droid_contract::FileChange;

use super::git::{git, os_args};
use super::walk::{SnapshotLimits, WALK_MODE};
use crate::error::EngineError;
use crate::snapshot::git_dir::{self, Found, GitDirs};
use crate::snapshot::path_map::PathMap;
use crate::snapshot::scan_diff;
use crate::snapshot::stat_scan::{self, Capture, Kept, Plan, Scan, Seen, Tracked};

/// An in-process record of a git work tree, and what the next record of the run reuses.
#[derive(Debug)]
pub(super) struct ScanTree {
    /// Where the work tree keeps things.
    pub(super) dirs: Arc<GitDirs>,
    /// The index as the first record of the run read it.
    pub(super) tracked: Arc<Tracked>,
    /// What was found.
    pub(super) scan: Arc<Scan>,
}

/// The largest index file read (a 1M-file index is ~100 MiB).
const MAX_INDEX_BYTES: u64 = 512 * 1024 * 1024;

/// What [`in_process`] did.
pub(super) enum Fast {
    /// The in-process record.
    Recorded(Box<ScanTree>),
    /// An earlier snapshot of the run walked: this one walks too.
    Walked,
    /// `root` is not in a git work tree: walk.
    NotARepo,
    /// The repository cannot be read in-process with certainty: ask git.
    GitProcesses,
}

/// The run's previous snapshot, as far as the in-process record cares.
#[derive(Debug, Clone, Copy)]
pub(super) enum Before<'a> {
    /// There is none: this is the run's first snapshot.
    First,
    /// An in-process record: its index and location are reused.
    Scan(&'a ScanTree),
    /// A git tree or a walk: this snapshot is not recorded in-process either.
    Other,
}

/// On a blocking thread, in one trip: read the run's mode file, then (unless an earlier snapshot
/// of the run walked or went through git processes) locate the repository and read its index, or
/// take both from `previous`, and record the work tree in-process.
pub(super) async fn in_process(
    root: &Path,
    env: &[(OsString, OsString)],
    mode_file: &Path,
    previous: Before<'_>,
    limits: SnapshotLimits,
) -> Result<Fast, EngineError> {
    // the in-process record where the repository allows it: the second record of a run made
    // that way is made that way too, with the first one's index and location
    let (try_fast, previous) = match previous {
        Before::First => (true, None),
        Before::Scan(prev) => (
            true,
            Some((
                Arc::clone(&prev.dirs),
                Arc::clone(&prev.tracked),
                Arc::clone(&prev.scan),
            )),
        ),
        Before::Other => (false, None),
    };
    let (root_buf, env, mode_file) = (root.to_path_buf(), env.to_vec(), mode_file.to_path_buf());
    tokio::task::spawn_blocking(move || {
        match std::fs::read(&mode_file) {
            Ok(bytes) if bytes == WALK_MODE => return Ok(Fast::Walked),
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => return Err(EngineError::io("read", &mode_file)(source)),
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
    .map_err(|e| EngineError::io("read", root)(std::io::Error::other(e)))?
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
    let index = crate::snapshot::git_index::parse(&bytes).map_err(|e| e.to_string())?;
    if index.entries.iter().any(|e| e.skip_worktree) {
        return Err("the index has skip-worktree entries (sparse checkout)".into());
    }
    Ok(Tracked::new(index, (meta.mtime(), meta.mtime_nsec())))
}

/// The changes between two in-process records.
pub(super) async fn diff_scans(
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
    .map_err(|e| EngineError::io("read", root)(std::io::Error::other(e)))?;
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
    .map_err(|e| EngineError::io("read", root)(std::io::Error::other(e)))
}

/// How far [`diff_scans`]'s first trip got.
enum DiffStep {
    /// The changes, assembled.
    Done(Vec<FileChange>),
    /// Old content the assembly needs from the repository first.
    NeedBlobs {
        changes: Vec<(Vec<u8>, scan_diff::Change)>,
        extra: PathMap<Seen>,
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

/// [`Snapshot::text_of`](super::Snapshot::text_of) for an in-process record: what it kept, else the index's blob.
pub(super) async fn scan_text_of(
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
