//! The walk, outside a git work tree (or where git cannot be used): `root` walked with
//! `std::fs`, bounded by [`SnapshotLimits`], recording size, modification time, executable bit
//! and an FNV-1a hash per regular file (while a byte budget lasts) and each symlink's target;
//! two walks compared entry by entry, without line counts.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::ops::ControlFlow;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use droid_contract::{ChangeType, FileChange};

use crate::error::EngineError;
use crate::fnv::Fnv1a;

/// The file in `scratch` that makes later snapshots of a run walk once the first one walked.
pub(super) const MODE_FILE: &str = "snapshot-mode";

/// The content of [`MODE_FILE`].
pub(super) const WALK_MODE: &[u8] = b"walk";

/// Bounds on the fallback walk of a directory that is not a git work tree. A walk cut short by
/// either of the first two makes [`Changes::incomplete`](super::Changes::incomplete) say so: the list is then only right
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
pub(super) const WALK_MAX_FILES: usize = 1_000_000;

/// The default [`SnapshotLimits::max_time`].
pub(super) const WALK_MAX_TIME: Duration = Duration::from_secs(10);

/// The files found by walking the root.
#[derive(Debug)]
pub(super) struct Walk {
    /// Path relative to the root → what was there. Ordered as the walk visits (component-wise).
    pub(super) entries: BTreeMap<PathBuf, Entry>,
    /// Why the walk stopped before the end (a limit): paths after the last entry were not
    /// checked.
    pub(super) truncated: Option<String>,
}

/// One walked non-directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Entry {
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

/// Walk `root` on a blocking thread.
pub(super) async fn walk(
    root: &Path,
    limits: SnapshotLimits,
) -> Result<(Walk, Vec<String>), EngineError> {
    let root_buf = root.to_path_buf();
    tokio::task::spawn_blocking(move || Walker::run(root_buf, limits))
        .await
        .map_err(|e| EngineError::io("walk", root)(std::io::Error::other(e)))?
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
        std::fs::read_dir(&root)
            .map_err(|source| EngineError::io("read directory", &root)(source))?;
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
pub(super) fn diff_walk(before: &Walk, after: &Walk) -> Vec<FileChange> {
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
