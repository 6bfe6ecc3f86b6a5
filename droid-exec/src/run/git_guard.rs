//! The repository's `.git/hooks` and `.git/config`: code and settings git runs later, on the
//! user's behalf (a planted `pre-commit`, a `core.fsmonitor` or `core.hooksPath`). They lie
//! inside `repo_root`, which a confined run may write, and Landlock only grants whole subtrees;
//! so they are recorded before the run, compared after it (verification included), and every
//! change is undone: a new file removed, a changed or deleted one written back with its mode.
//! The engine reports what was restored as a `conflict` issue.
//!
//! Only a `.git` directory directly in `repo_root` is guarded: a work tree whose `.git` is a file
//! (a linked work tree, a submodule) keeps its hooks and config in a directory outside
//! `repo_root`, which a confined run cannot write at all.

use std::collections::{BTreeMap, HashMap};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::run::stat_scan::PathMap;

/// Most files recorded under `.git/hooks` (a fresh clone has 14 samples).
const MAX_FILES: usize = 512;
/// Most bytes recorded in all (a fresh clone's samples take about 25 KiB).
const MAX_BYTES: u64 = 16 * 1024 * 1024;

/// Most files a [`RecordCache`] keeps (then it starts again empty).
const CACHE_FILES: usize = 4096;
/// Most bytes a [`RecordCache`] keeps (then it starts again empty).
const CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// One recorded file: its content and permission bits, and its inode's identity and times.
#[derive(Debug, Clone)]
struct Entry {
    bytes: Arc<[u8]>,
    mode: u32,
    stamp: Stamp,
}

/// What the kernel changes on every write, rename over, chmod or replacement of a file: device,
/// inode, size, and modification and change times. The change time cannot be set from user
/// space, so an equal stamp means an untouched file, unless the file changed within the clock's
/// tick of the record ([`Stamp::settled`] says whether that can be ruled out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    dev: u64,
    ino: u64,
    size: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(meta: &std::fs::Metadata) -> Self {
        use std::os::unix::fs::MetadataExt as _;
        Self {
            dev: meta.dev(),
            ino: meta.ino(),
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// Was the file last changed well before `now` (seconds since the epoch)? Then a later
    /// change, however quick, gives it another change time.
    fn settled(&self, now: i64) -> bool {
        self.ctime.0 < now - 1
    }
}

/// Files earlier records read, by absolute path, with when they were read: a long-lived
/// front-end (the bridge, the MCP server) reads a repository's hooks and config once, not on
/// every run. A file is taken from here only when its stamp is the one it had when it was read
/// *and* that stamp was settled then ([`Stamp::settled`]), the test [`GitGuard::restore`] uses:
/// any write since changed the stamp. Bounded by [`CACHE_FILES`] and [`CACHE_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct RecordCache {
    inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    /// By absolute path.
    files: PathMap<(Entry, i64)>,
    bytes: u64,
}

impl RecordCache {
    /// `path`'s content: from the cache when `meta` (its metadata now) shows it unchanged since
    /// a settled read, else read now (and kept when settled).
    fn read(&self, path: &Path, meta: &std::fs::Metadata, now: i64) -> Option<Entry> {
        let stamp = Stamp::of(meta);
        if let Ok(inner) = self.inner.lock()
            && let Some((entry, read_at)) = inner.files.get(path.as_os_str().as_bytes())
            && entry.stamp == stamp
            && stamp.settled(*read_at)
        {
            return Some(entry.clone());
        }
        let entry = read_with(path, meta)?;
        if entry.stamp.settled(now)
            && let Ok(mut inner) = self.inner.lock()
        {
            let len = entry.bytes.len() as u64;
            if inner.files.len() >= CACHE_FILES || inner.bytes + len > CACHE_BYTES {
                inner.files.clear();
                inner.bytes = 0;
            }
            if let Some((old, _)) = inner
                .files
                .insert(path.as_os_str().as_bytes().to_vec(), (entry.clone(), now))
            {
                inner.bytes -= old.bytes.len() as u64;
            }
            inner.bytes += len;
        }
        Some(entry)
    }
}

/// `.git/config` and every file under `.git/hooks`, as they were before the run.
#[derive(Debug)]
pub(crate) struct GitGuard {
    git_dir: PathBuf,
    /// Relative to `git_dir` (`config`, `hooks/pre-commit.sample`, …).
    files: BTreeMap<Vec<u8>, Entry>,
    /// Whether `hooks/` existed (a run that creates it has it removed).
    had_hooks: bool,
    /// When the record was made (seconds since the epoch).
    recorded_at: i64,
    /// Why the record is incomplete (too many or too large files): nothing is removed then.
    incomplete: Option<String>,
}

impl GitGuard {
    /// Record `repo_root/.git`'s hooks and config (unchanged files from `cache`); `None` when
    /// `repo_root/.git` is not a directory.
    pub(crate) fn record(repo_root: &Path, cache: &RecordCache) -> Option<Self> {
        let git_dir = repo_root.join(".git");
        let meta = std::fs::symlink_metadata(&git_dir).ok()?;
        if !meta.is_dir() {
            return None;
        }
        let recorded_at = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX));
        let mut files = BTreeMap::new();
        let mut incomplete = None;
        let mut total = 0u64;
        let hooks = git_dir.join("hooks");
        let had_hooks = hooks.is_dir();
        let config = git_dir.join("config");
        let found = walk(&git_dir, "hooks");
        if found.too_many_dirs {
            incomplete = Some(format!(
                "more than {MAX_FILES} directories under .git/hooks"
            ));
        }
        let listed = std::fs::symlink_metadata(&config)
            .ok()
            .map(|meta| Listed {
                rel: b"config".to_vec(),
                path: config,
                meta,
            })
            .into_iter()
            .chain(found.files);
        for Listed { rel, path, meta } in listed {
            if files.len() >= MAX_FILES {
                incomplete = Some(format!("more than {MAX_FILES} files under .git/hooks"));
                break;
            }
            let Some(entry) = cache.read(&path, &meta, recorded_at) else {
                continue;
            };
            total += entry.bytes.len() as u64;
            if total > MAX_BYTES {
                incomplete = Some(format!(
                    "more than {} MiB under .git/hooks",
                    MAX_BYTES / 1024 / 1024
                ));
                break;
            }
            files.insert(rel, entry);
        }
        Some(Self {
            git_dir,
            files,
            had_hooks,
            recorded_at,
            incomplete,
        })
    }

    /// Compare with now and undo every change. Returns what was changed (relative to the
    /// repository: `.git/hooks/pre-commit`), and what could not be restored, with why.
    pub(crate) fn restore(&self) -> Restored {
        let mut out = Restored::default();
        let shown = |rel: &[u8]| format!(".git/{}", String::from_utf8_lossy(rel));
        let hooks = self.git_dir.join("hooks");
        // one walk: the files (with their metadata, taken relative to their directory) and the
        // directories under hooks/
        let found = walk(&self.git_dir, "hooks");
        // added files (and anything not a regular file: a symlink, a FIFO)
        if self.incomplete.is_none() {
            for f in &found.files {
                if self.files.contains_key(&f.rel) {
                    continue;
                }
                out.changed.push(shown(&f.rel));
                if let Err(e) = std::fs::remove_file(&f.path) {
                    out.failed.push(format!("{}: {e}", shown(&f.rel)));
                }
            }
            // directories the run added under hooks/ (now empty), deepest first
            let mut dirs = found.dirs;
            dirs.sort_by_key(|(rel, _)| {
                std::cmp::Reverse(rel.iter().filter(|b| **b == b'/').count())
            });
            for (rel, d) in dirs {
                let known = self
                    .files
                    .keys()
                    .any(|k| k.starts_with(&rel) && k.get(rel.len()) == Some(&b'/'));
                if !known {
                    let _ = std::fs::remove_dir(&d);
                }
            }
            if !self.had_hooks && hooks.is_dir() && std::fs::remove_dir(&hooks).is_ok() {
                out.changed.push(".git/hooks".to_owned());
            }
        }
        let seen: HashMap<&[u8], &std::fs::Metadata> = found
            .files
            .iter()
            .map(|f| (f.rel.as_slice(), &f.meta))
            .collect();
        // changed, deleted or replaced files
        for (rel, before) in &self.files {
            let path = self.git_dir.join(OsStr::from_bytes(rel));
            // the same inode, untouched since well before the record: not read again (the
            // walk's metadata, else a look-up: `config`, or a file past the walk's bound)
            let untouched = before.stamp.settled(self.recorded_at)
                && seen
                    .get(rel.as_slice())
                    .map(|m| (*m).clone())
                    .or_else(|| std::fs::symlink_metadata(&path).ok())
                    .is_some_and(|m| m.is_file() && Stamp::of(&m) == before.stamp);
            if untouched
                || read(&path)
                    .is_some_and(|now| now.bytes == before.bytes && now.mode == before.mode)
            {
                continue;
            }
            out.changed.push(shown(rel));
            if let Err(e) = write_back(&path, before) {
                out.failed.push(format!("{}: {e}", shown(rel)));
            }
        }
        out.changed.sort();
        out.changed.dedup();
        out.incomplete.clone_from(&self.incomplete);
        out
    }
}

/// What [`GitGuard::restore`] found and did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Restored {
    /// Paths the run changed (added, modified, deleted), relative to the repository.
    pub(crate) changed: Vec<String>,
    /// Paths that could not be put back, with why.
    pub(crate) failed: Vec<String>,
    /// Why new files were not looked for.
    pub(crate) incomplete: Option<String>,
}

/// A regular file's content and mode; `None` for anything else (missing, a symlink, a
/// directory) or unreadable.
fn read(path: &Path) -> Option<Entry> {
    read_with(path, &std::fs::symlink_metadata(path).ok()?)
}

/// [`read`] with the metadata already at hand.
fn read_with(path: &Path, meta: &std::fs::Metadata) -> Option<Entry> {
    if !meta.is_file() {
        return None;
    }
    let bytes = std::fs::read(path).ok()?.into();
    Some(Entry {
        bytes,
        mode: meta.permissions().mode() & 0o7777,
        stamp: Stamp::of(meta),
    })
}

/// Put `entry` back at `path`: whatever is there (a symlink, a directory, another file) goes.
fn write_back(path: &Path, entry: &Entry) -> std::io::Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        if meta.is_dir() {
            std::fs::remove_dir_all(path)?;
        } else {
            std::fs::remove_file(path)?;
        }
    }
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::write(path, &entry.bytes)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(entry.mode))
}

/// A file [`walk`] found.
#[derive(Debug)]
struct Listed {
    /// Relative to the git directory (`hooks/pre-commit`).
    rel: Vec<u8>,
    path: PathBuf,
    /// Its metadata (symlinks not followed).
    meta: std::fs::Metadata,
}

/// What [`walk`] found under a directory.
#[derive(Debug, Default)]
struct Found {
    /// Every non-directory.
    files: Vec<Listed>,
    /// Every directory (not the one walked), relative to the git directory, and its path.
    dirs: Vec<(Vec<u8>, PathBuf)>,
    /// More directories than [`MAX_FILES`]: those past it were not entered.
    too_many_dirs: bool,
}

/// Every non-directory under `git_dir/sub` with its metadata, taken relative to its directory
/// (no look-up of the whole path per file), bounded by [`MAX_FILES`] × 2; and every directory
/// under it, bounded by [`MAX_FILES`]. A file that vanishes between the listing and its `stat` is
/// left out.
fn walk(git_dir: &Path, sub: &str) -> Found {
    let mut found = Found::default();
    let mut stack = vec![(sub.as_bytes().to_vec(), git_dir.join(sub))];
    while let Some((rel_dir, d)) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let Ok(kind) = e.file_type() else { continue };
            let name = e.file_name();
            let mut rel = Vec::with_capacity(rel_dir.len() + 1 + name.len());
            rel.extend_from_slice(&rel_dir);
            rel.push(b'/');
            rel.extend_from_slice(name.as_bytes());
            if kind.is_dir() {
                if found.dirs.len() < MAX_FILES {
                    found.dirs.push((rel.clone(), e.path()));
                    stack.push((rel, e.path()));
                } else {
                    found.too_many_dirs = true;
                }
            } else if let Ok(meta) = e.metadata() {
                found.files.push(Listed {
                    rel,
                    path: e.path(),
                    meta,
                });
                if found.files.len() > MAX_FILES * 2 {
                    return found;
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn planted_changed_and_deleted_files_are_put_back() {
        let dir = std::env::temp_dir().join(format!("git-guard-{}", std::process::id()));
        let hooks = dir.join(".git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(dir.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\n").unwrap();
        std::fs::write(hooks.join("keep"), "x").unwrap();
        let guard = GitGuard::record(&dir, &RecordCache::default()).unwrap();

        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\ncurl evil\n").unwrap();
        std::fs::write(dir.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        std::fs::remove_file(hooks.join("keep")).unwrap();
        std::fs::create_dir_all(hooks.join("sub")).unwrap();
        std::fs::write(hooks.join("sub/x"), "y").unwrap();

        let restored = guard.restore();
        assert_eq!(
            restored,
            Restored {
                changed: vec![
                    ".git/config".to_owned(),
                    ".git/hooks/keep".to_owned(),
                    ".git/hooks/pre-commit".to_owned(),
                    ".git/hooks/sub/x".to_owned(),
                ],
                failed: Vec::new(),
                incomplete: None,
            }
        );
        assert!(!hooks.join("pre-commit").exists());
        assert!(!hooks.join("sub").exists());
        assert_eq!(std::fs::read_to_string(hooks.join("keep")).unwrap(), "x");
        assert_eq!(
            std::fs::read_to_string(dir.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(guard.restore(), Restored::default());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_untouched_since_well_before_the_record_are_not_read_again_but_changes_are_seen() {
        let dir = std::env::temp_dir().join(format!("git-guard-stamp-{}", std::process::id()));
        let hooks = dir.join(".git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(dir.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\n").unwrap();
        let mut guard = GitGuard::record(&dir, &RecordCache::default()).unwrap();
        // as if the files had been written long before the record
        guard.recorded_at += 10;
        assert!(
            guard
                .files
                .values()
                .all(|e| e.stamp.settled(guard.recorded_at))
        );
        assert_eq!(guard.restore(), Restored::default());
        // a change of content, of mode, or a replacement: each a new stamp
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\ncurl evil\n").unwrap();
        std::fs::set_permissions(
            dir.join(".git/config"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        let restored = guard.restore();
        assert_eq!(
            restored.changed,
            vec![
                ".git/config".to_owned(),
                ".git/hooks/pre-push.sample".to_owned()
            ]
        );
        assert_eq!(
            std::fs::read_to_string(hooks.join("pre-push.sample")).unwrap(),
            "#!/bin/sh\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_hooks_tree_past_the_directory_bound_makes_the_record_incomplete() {
        let dir = std::env::temp_dir().join(format!("git-guard-dirs-{}", std::process::id()));
        let hooks = dir.join(".git/hooks");
        for i in 0..=MAX_FILES {
            std::fs::create_dir_all(hooks.join(format!("d{i}"))).unwrap();
        }
        std::fs::write(dir.join(".git/config"), "[core]\n").unwrap();
        let guard = GitGuard::record(&dir, &RecordCache::default()).unwrap();
        assert_eq!(
            guard.incomplete.as_deref(),
            Some("more than 512 directories under .git/hooks")
        );
        // an incomplete record removes nothing it did not see before, and still restores
        // what it recorded
        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(dir.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        let restored = guard.restore();
        assert_eq!(restored.changed, vec![".git/config".to_owned()]);
        assert!(hooks.join("pre-commit").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_later_record_takes_unchanged_files_from_the_cache_and_reads_changed_ones() {
        let dir = std::env::temp_dir().join(format!("git-guard-cache-{}", std::process::id()));
        let hooks = dir.join(".git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::write(dir.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\n").unwrap();
        let cache = RecordCache::default();
        let hook = hooks.join("pre-push.sample");
        let meta = std::fs::symlink_metadata(&hook).unwrap();
        // a file written just now is not kept: a write within the same tick would not show
        let now = std::os::unix::fs::MetadataExt::ctime(&meta);
        cache.read(&hook, &meta, now).unwrap();
        assert!(cache.inner.lock().unwrap().files.is_empty());
        // read as if well after it was written: kept, and taken from the cache while its stamp
        // holds (the cached bytes are swapped to prove the file is not read again)
        cache.read(&hook, &meta, now + 10).unwrap();
        cache
            .inner
            .lock()
            .unwrap()
            .files
            .get_mut(hook.as_os_str().as_bytes())
            .unwrap()
            .0
            .bytes = Arc::from(&b"cached"[..]);
        let guard = GitGuard::record(&dir, &cache).unwrap();
        assert_eq!(
            &*guard.files[&b"hooks/pre-push.sample"[..]].bytes,
            b"cached"
        );
        // a write gives the file another stamp: read again
        std::fs::write(&hook, "#!/bin/sh\necho changed\n").unwrap();
        let guard = GitGuard::record(&dir, &cache).unwrap();
        assert_eq!(
            &*guard.files[&b"hooks/pre-push.sample"[..]].bytes,
            b"#!/bin/sh\necho changed\n"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
