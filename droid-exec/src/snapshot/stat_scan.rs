//! A record of a git work tree below a run's root made in-process, at the cost of `git status`
//! or less: the directories are read (in parallel on large trees), each entry's metadata taken
//! relative to its directory (`fstatat`), `.gitignore` rules applied as git applies them
//! ([`crate::snapshot::ignore_rules`]: an ignored directory is not entered), and every path recorded
//! with what tells whether it changed later: size, modification and change times, inode, mode
//! (git's own stat check), a symlink's target, an embedded repository's checked-out commit.
//! Nothing is hashed or written for a file whose metadata the index vouches for.
//!
//! The first record of a run ([`Capture::Content`]) also keeps what the second cannot get back
//! from git: the content of every file that is untracked, differs from the index, or was
//! modified so recently that a later change could leave the same times ("racy", as git calls
//! it: file times come from a coarse clock): its bytes up to [`KEEP_FILE_BYTES`] a file and
//! [`KEEP_TOTAL_BYTES`] a run, else its blob id while [`SnapshotLimits::max_bytes`] of hashing
//! lasts. A clean tracked file's content is the index's blob, read from the repository only if
//! the file changed (`crate::snapshot::scan_diff`).
//!
//! Only a racy file's content is read during the walk. The rest ([`Late`]) is read after it:
//! at once when there is little ([`INLINE_FILES`], [`INLINE_BYTES`]), else by a thread of its
//! own while the agent works, so a dirty repository does not hold up the agent's start (5,000
//! modified and 5,000 untracked files were a quarter of a 100,000-file record; issue 17). That
//! thread takes a file's content only while the file is the one recorded, unchanged (device,
//! inode, size, modification and change times, checked before and after reading): a file is
//! not racy, so any write since the record moved its times. It follows no symlink on the way
//! to a file and opens nothing but that regular file ([`Opener`]): the agent runs meanwhile. The run's next record stops it
//! ([`Scan::settle`]): what it has not read by then is either unchanged (nothing is needed) or
//! was changed by the agent before it was read. Such a file is still compared (by size and
//! times, with a warning naming it) but gets no line counts; on a real agent, whose first edit
//! comes after a model's answer, the thread is long done by then.
//!
//! A first record also keeps each directory's listing, with the directory's own stat, when the
//! directory did not change within [`RACY_NANOS`] of the record: the run's next record lists
//! again only the directories whose stat changed ([`Listing`]), and still `fstatat`s every entry.
//!
//! The walk is bounded by [`SnapshotLimits`] (files and time); past either the record says it is
//! incomplete and the result carries an issue, never a silently short list.

use std::ffi::{OsStr, OsString};
use std::fs::Metadata;
use std::os::fd::{AsFd as _, BorrowedFd};
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock, PoisonError};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use crate::snapshot::SnapshotLimits;
use crate::snapshot::git_dir;
use crate::snapshot::git_index::{Index, IndexStat};
use crate::snapshot::ignore_rules::Rules;
use crate::snapshot::path_map::{HashesSet, PathMap, path_hash};

/// Files up to this size whose content the index cannot give back are kept whole by the first
/// record (for the line counts of a later change).
pub(crate) const KEEP_FILE_BYTES: u64 = 1024 * 1024;
/// At most this much content is kept by one run's first record; past it, blob ids only.
pub(crate) const KEEP_TOTAL_BYTES: u64 = 16 * 1024 * 1024;
/// A file modified less than this long before a record began is "racy": an edit after the
/// record could leave its times unchanged (coarse file-system clock), so its content is kept.
const RACY_NANOS: i128 = 200_000_000;
/// At most this many files' content is read by the record itself, after its walk; more are
/// read by a thread of their own while the agent works ([`Late`]).
pub(crate) const INLINE_FILES: usize = 64;
/// ... and at most this many bytes of them.
pub(crate) const INLINE_BYTES: u64 = 8 * 1024 * 1024;
/// Below this many index entries the walk runs on the calling thread (threads cost more than
/// they save on a small tree).
const PARALLEL_FROM: usize = 2_000;
/// Threads of a parallel walk at most.
const MAX_THREADS: usize = 4;
/// At most this much of directory listings (names and entries) is kept by a first record for
/// the next one ([`Listing`]); past it, the next record lists the other directories again.
const LISTINGS_MAX_BYTES: u64 = 64 * 1024 * 1024;

/// What git's stat check compares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) size: u64,
    pub(crate) mtime: (i64, i64),
    pub(crate) ctime: (i64, i64),
    pub(crate) ino: u64,
    pub(crate) dev: u64,
    pub(crate) mode: u32,
}

impl Stat {
    fn of(meta: &Metadata) -> Self {
        Self {
            size: meta.size(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
            ino: meta.ino(),
            dev: meta.dev(),
            mode: meta.mode(),
        }
    }

    fn of_raw(st: &nix::sys::stat::FileStat) -> Self {
        Self {
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
            ino: st.st_ino,
            dev: st.st_dev,
            mode: st.st_mode,
        }
    }

    /// Whether the index entry's cached stat vouches for this file (git's `ie_match_stat`:
    /// the 32-bit fields as git stores them), the index written after the file last changed.
    fn matches(&self, entry: &IndexStat, index_mtime: (i64, i64)) -> bool {
        let low = |v: i64| u32::try_from(v & 0xffff_ffff).unwrap_or(0);
        let low_u = |v: u64| u32::try_from(v & 0xffff_ffff).unwrap_or(0);
        entry.size == low_u(self.size)
            && entry.mtime == (low(self.mtime.0), low(self.mtime.1))
            && entry.ctime == (low(self.ctime.0), low(self.ctime.1))
            && entry.ino == low_u(self.ino)
            && self.mtime < index_mtime
    }

    /// The later of the modification and change times, in nanoseconds.
    fn changed_nanos(&self) -> i128 {
        let n = |(s, ns): (i64, i64)| i128::from(s) * 1_000_000_000 + i128::from(ns);
        n(self.mtime).max(n(self.ctime))
    }
}

/// One recorded path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Seen {
    /// A regular file.
    File {
        stat: Stat,
        /// The index entry's blob when the stat check says the file still holds it.
        clean_blob: Option<[u8; 20]>,
    },
    /// A symbolic link (never followed).
    Symlink { stat: Stat, target: Vec<u8> },
    /// An embedded repository (or a checked-out submodule): its checked-out commit.
    Gitlink { head: Option<String> },
}

impl Seen {
    /// Whether `now` is what `self` recorded, by metadata (and target, commit).
    pub(crate) fn same(&self, now: &Seen) -> bool {
        match (self, now) {
            (Seen::File { stat: a, .. }, Seen::File { stat: b, .. }) => a == b,
            (
                Seen::Symlink {
                    stat: a,
                    target: ta,
                },
                Seen::Symlink {
                    stat: b,
                    target: tb,
                },
            ) => a == b && ta == tb,
            (Seen::Gitlink { head: a }, Seen::Gitlink { head: b }) => a == b,
            _ => false,
        }
    }

    pub(crate) fn executable(&self) -> bool {
        match self {
            Seen::File { stat, .. } => stat.mode & 0o111 != 0,
            _ => false,
        }
    }
}

/// What the first record keeps of a file's content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Kept {
    /// The whole content.
    Bytes(Vec<u8>),
    /// Its git blob id only.
    Blob([u8; 20]),
}

/// Whether a record keeps content (the first record of a run does).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Capture {
    /// Keep what a later record cannot get back.
    Content,
    /// Metadata only.
    None,
}

/// A clean-able index entry: mode, blob id, cached stat.
type Entry = (u32, [u8; 20], IndexStat);

/// The index as the walk uses it: tracked paths (relative to the top level) in the index's own
/// order (bytewise), each with its entry; a path's position in the list is its number.
/// The walk sorts each directory's names and merges them with the index's range for that
/// directory: no hashing, and memory read in order (a hash lookup per file was a cache miss
/// each, a tenth of a 100,000-file walk).
#[derive(Debug, Default)]
pub(crate) struct Tracked {
    /// Path → `None` for a path in conflict or added with intent-to-add (never clean).
    list: Vec<(Vec<u8>, Option<Entry>)>,
    /// When the index was last written (an entry's stat is trusted only for files older).
    index_mtime: (i64, i64),
    /// The paths git was told to assume unchanged (`--assume-unchanged`), sorted.
    pub(crate) assumed: Vec<Vec<u8>>,
}

impl Tracked {
    /// The tracked paths of `index` (sorted, as git writes it), written at `index_mtime`.
    pub(crate) fn new(index: Index, index_mtime: (i64, i64)) -> Self {
        let mut list: Vec<(Vec<u8>, Option<Entry>)> = Vec::with_capacity(index.entries.len());
        let mut assumed = Vec::new();
        for e in index.entries {
            if e.assume_unchanged {
                assumed.push(e.path.clone());
            }
            let clean = (e.stage == 0 && !e.intent_to_add).then_some((e.mode, e.oid, e.stat));
            match list.last_mut() {
                // the stages of a path in conflict follow each other
                Some(last) if last.0 == e.path => last.1 = None,
                _ => list.push((e.path, clean)),
            }
        }
        // git writes it sorted; a list that is not is sorted here rather than trusted
        if !list
            .windows(2)
            .all(|w| w.first().map(|a| &a.0) < w.get(1).map(|b| &b.0))
        {
            list.sort_by(|a, b| a.0.cmp(&b.0));
            list.dedup_by(|a, b| a.0 == b.0);
        }
        assumed.sort();
        Self {
            list,
            index_mtime,
            assumed,
        }
    }

    /// When the index was last written.
    pub(crate) fn index_mtime(&self) -> (i64, i64) {
        self.index_mtime
    }

    /// How many paths are tracked.
    pub(crate) fn len(&self) -> usize {
        self.list.len()
    }

    /// The position of `path` (top-level relative), by binary search.
    fn find(&self, path: &[u8]) -> Option<usize> {
        self.list
            .binary_search_by(|(p, _)| p.as_slice().cmp(path))
            .ok()
    }

    /// The first position whose path is at least `path`.
    fn lower_bound(&self, path: &[u8]) -> usize {
        self.list.partition_point(|(p, _)| p.as_slice() < path)
    }

    fn entry(&self, pos: usize) -> Option<&(Vec<u8>, Option<Entry>)> {
        self.list.get(pos)
    }

    fn is_gitlink_at(&self, pos: usize) -> bool {
        matches!(self.entry(pos), Some((_, Some((m, _, _)))) if m & 0o170_000 == 0o160_000)
    }

    /// The blob the tracked file at `pos` holds if the stat says so.
    fn clean_blob_at(&self, pos: usize, stat: &Stat) -> Option<[u8; 20]> {
        let (_, entry) = self.entry(pos)?;
        let (mode, oid, cached) = entry.as_ref()?;
        let exec_same = (mode & 0o111 != 0) == (stat.mode & 0o111 != 0);
        let regular = mode & 0o170_000 == 0o100_000;
        (regular && exec_same && stat.matches(cached, self.index_mtime)).then_some(*oid)
    }

    /// What a record that found the file at `path` (top-level relative) clean holds of it: a
    /// file with the index's size and mode, and its blob; with its position.
    pub(crate) fn clean_seen(&self, path: &[u8]) -> Option<(u32, Seen)> {
        let pos = self.find(path)?;
        Some((u32::try_from(pos).ok()?, self.clean_seen_at(pos)?))
    }

    fn clean_seen_at(&self, pos: usize) -> Option<Seen> {
        let (_, entry) = self.entry(pos)?;
        let (mode, oid, cached) = entry.as_ref()?;
        let stat = Stat {
            size: u64::from(cached.size),
            mtime: (i64::from(cached.mtime.0), i64::from(cached.mtime.1)),
            ctime: (i64::from(cached.ctime.0), i64::from(cached.ctime.1)),
            ino: u64::from(cached.ino),
            dev: u64::from(cached.dev),
            mode: *mode,
        };
        Some(Seen::File {
            stat,
            clean_blob: Some(*oid),
        })
    }

    /// Every tracked path (top-level relative) with its position.
    pub(crate) fn positions(&self) -> impl Iterator<Item = (&[u8], u32)> {
        self.list
            .iter()
            .enumerate()
            .map(|(i, (p, _))| (p.as_slice(), u32::try_from(i).unwrap_or(u32::MAX)))
    }
}

/// A finished record.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Root-relative path → what was there (a record made against an earlier one: only what
    /// differs from it, or is new).
    pub(crate) seen: PathMap<Seen>,
    /// A record made against an earlier one: the [`path_hash`] of each path found as it was.
    pub(crate) unchanged: HashesSet,
    /// Root-relative path → content kept during the walk (first record only; [`Scan::kept`]
    /// adds what was read after it).
    kept: PathMap<Kept>,
    /// Files modified within [`RACY_NANOS`] of the record's start: compared by content.
    pub(crate) racy: PathMap<()>,
    /// By index position, the tracked files found holding the index's blob: by the first
    /// record (they are not in [`Scan::seen`]: the index says what they were,
    /// [`Tracked::clean_seen`]); by a later one, those of them still so.
    pub(crate) clean: Vec<bool>,
    /// What could not be read (a directory refused, a file gone mid-read).
    pub(crate) warnings: Vec<String>,
    /// Why the record stopped early (file or time limit), so a diff may miss changes.
    pub(crate) incomplete: Option<String>,
    /// Content read after the walk (first record only).
    late: Late,
    /// Root-relative directory (with its trailing `/`; empty: the root) → its listing, kept by
    /// a first record for the next one ([`Listing`]).
    listings: PathMap<Listing>,
    /// A later record: how many directories it did not list again (their listings kept by
    /// the earlier record still held).
    pub(crate) listings_reused: usize,
}

/// A directory's listing as a first record read it, and the directory's own stat taken just
/// before: the run's next record lists it again only if that stat changed. Creating, removing
/// or renaming an entry sets the directory's modification and change times to the current
/// time, and the change time cannot be set back from user space; a listing is kept only for a
/// directory that last changed more than [`RACY_NANOS`] before the record began, so a change
/// after the listing, however soon, leaves times that differ from the ones kept (git's
/// untracked cache relies on the same rule). What is saved is the `getdents` of every
/// directory and the sort of its names, about a tenth of a 100,000-file record: each entry is
/// still `fstatat`ed.
#[derive(Debug)]
struct Listing {
    stat: Stat,
    names: Vec<u8>,
    entries: Vec<ListedEntry>,
}

impl Scan {
    /// What the record kept of `path`'s content: during its walk, or after it (what the
    /// reader had read when [`Scan::settle`] stopped it).
    pub(crate) fn kept(&self, path: &[u8]) -> Option<&Kept> {
        self.kept
            .get(path)
            .or_else(|| self.late.done.get()?.kept.get(path))
    }

    /// Whether `path`'s content was to be kept but was not: the file changed (or the reader
    /// was stopped) before it was read. Known once [`Scan::settle`] ran.
    pub(crate) fn unread(&self, path: &[u8]) -> bool {
        self.late
            .done
            .get()
            .is_some_and(|d| d.unread.contains_key(path))
    }

    /// Whether the record kept the listing of `dir` (root-relative, trailing `/`) for the
    /// next one.
    #[cfg(test)]
    pub(crate) fn kept_listing(&self, dir: &[u8]) -> bool {
        self.listings.contains_key(dir)
    }

    /// How many files' content is kept (for the debug log).
    pub(crate) fn kept_len(&self) -> usize {
        self.kept.len() + self.late.done.get().map_or(0, |d| d.kept.len())
    }

    /// Stop the reader of the content left to keep, and take what it read: the agent is done,
    /// so a file not read yet is either unchanged or lost. Blocks for at most one file's read.
    /// Idempotent; a second caller waits for the first.
    pub(crate) fn settle(&self) {
        let mut reader = self
            .late
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if let Some(r) = reader.take() {
            r.stop.store(true, Ordering::Relaxed);
            let got = r.handle.join().unwrap_or_else(|_| LateKept {
                kept: PathMap::default(),
                unread: r.paths,
            });
            // `done` is set only here (under the lock) or by the record itself (no reader)
            let _ = self.late.done.set(got);
        }
    }

    /// Whether a thread is reading content left to keep (not settled yet).
    #[cfg(test)]
    pub(crate) fn reading(&self) -> bool {
        self.late
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some()
    }

    /// Let the reader finish (not stopped), and take what it read.
    #[cfg(test)]
    pub(crate) fn finish_reading(&self) {
        let reader = self
            .late
            .reader
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(r) = reader {
            let _ = self
                .late
                .done
                .set(r.handle.join().expect("the reader ends"));
        }
    }

    /// As if the agent had changed `path` before the reader got to it.
    #[cfg(test)]
    pub(crate) fn lose_read(&mut self, path: &[u8]) {
        if let Some(done) = self.late.done.get_mut()
            && done.kept.remove(path).is_some()
        {
            done.unread.insert(path.to_vec(), ());
        }
    }
}

/// The first record's content read after its walk: by the record (little of it) or by a
/// thread of its own while the agent works.
#[derive(Debug, Default)]
struct Late {
    /// The reader, until [`Scan::settle`] stops it.
    reader: Mutex<Option<Reader>>,
    /// What it read, once settled.
    done: OnceLock<LateKept>,
}

impl Drop for Late {
    fn drop(&mut self) {
        // a run dropped before its next record: the reader stops at its next file
        if let Some(r) = self
            .reader
            .get_mut()
            .unwrap_or_else(PoisonError::into_inner)
            .as_ref()
        {
            r.stop.store(true, Ordering::Relaxed);
        }
    }
}

#[derive(Debug)]
struct Reader {
    stop: Arc<AtomicBool>,
    handle: std::thread::JoinHandle<LateKept>,
    /// Every path it was given (all unread if the thread panicked).
    paths: PathMap<()>,
}

#[derive(Debug, Default)]
struct LateKept {
    kept: PathMap<Kept>,
    /// Paths to keep that were not read: changed since the record, or the reader stopped.
    unread: PathMap<()>,
}

/// A file whose content the first record keeps, to read after the walk.
#[derive(Debug)]
struct Pending {
    /// Root-relative.
    path: Vec<u8>,
    /// As recorded: the file is read only while it still has it.
    stat: Stat,
    /// Its bytes, or its blob id only.
    whole: bool,
}

/// What to record.
#[derive(Debug)]
pub(crate) struct Plan<'a> {
    /// The root, absolute.
    pub(crate) root: &'a Path,
    /// The root relative to the top level, with a trailing `/`; empty at the top.
    pub(crate) prefix: &'a [u8],
    /// The top level.
    pub(crate) toplevel: &'a Path,
    /// The tracked paths.
    pub(crate) tracked: &'a Tracked,
    /// `info/exclude` and `core.excludesFile`.
    pub(crate) excludes: Vec<PathBuf>,
    /// Keep content or not.
    pub(crate) capture: Capture,
    /// The run's earlier record: paths found as it recorded them are only counted
    /// ([`Scan::unchanged`]), not stored.
    pub(crate) against: Option<&'a Scan>,
    /// Bounds.
    pub(crate) limits: SnapshotLimits,
}

/// A directory waiting to be read: root-relative with a trailing `/` (empty: the root), and
/// the ignore rules in force there.
struct Task {
    dir: Vec<u8>,
    rules: Rules,
}

/// The walk's shared state.
struct Shared<'a> {
    plan: &'a Plan<'a>,
    /// Pending directories and how many workers are busy.
    queue: Mutex<(Vec<Task>, usize)>,
    wake: Condvar,
    /// Files recorded so far (the file limit).
    files: AtomicUsize,
    /// Content bytes kept so far.
    kept_bytes: AtomicU64,
    /// Bytes hashed so far.
    hashed_bytes: AtomicU64,
    /// A limit was hit: stop.
    stop: AtomicBool,
    why_stopped: Mutex<Option<String>>,
    until: Instant,
    racy_from: i128,
    /// Bytes of directory listings kept so far ([`LISTINGS_MAX_BYTES`]).
    listed_bytes: AtomicU64,
}

/// One worker's findings.
#[derive(Default)]
struct Found {
    seen: PathMap<Seen>,
    unchanged: Vec<u64>,
    clean: Vec<u32>,
    kept: PathMap<Kept>,
    pending: Vec<Pending>,
    racy: Vec<Vec<u8>>,
    warnings: Vec<String>,
    listings: Vec<(Vec<u8>, Listing)>,
    listings_reused: usize,
}

impl Found {
    /// Record `seen` at `path`, or only count it when the earlier record has it so.
    fn put(&mut self, against: Option<&Scan>, path: &[u8], seen: Seen) {
        if let Some(before) = against
            && let Some(b) = before.seen.get(path)
            && !before.racy.contains_key(path)
            && b.same(&seen)
        {
            self.unchanged.push(path_hash(path));
            return;
        }
        self.seen.insert(path.to_vec(), seen);
    }

    /// [`Found::put`] for a file of a later record: one the first record found clean is
    /// unchanged while its stat still matches the index (its position goes to
    /// [`Scan::clean`]).
    fn put_file(&mut self, plan: &Plan<'_>, path: &[u8], at: Option<usize>, stat: Stat) {
        let still_clean = || {
            let before = plan.against?;
            let pos = at?;
            plan.tracked.clean_blob_at(pos, &stat)?;
            (before.clean.get(pos) == Some(&true)).then_some(u32::try_from(pos).ok()?)
        };
        if let Some(pos) = still_clean() {
            self.clean.push(pos);
            return;
        }
        self.put(
            plan.against,
            path,
            Seen::File {
                stat,
                clean_blob: None,
            },
        );
    }
}

fn now_nanos() -> i128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i128::try_from(d.as_nanos()).unwrap_or(i128::MAX))
}

fn os(bytes: &[u8]) -> &OsStr {
    OsStr::from_bytes(bytes)
}

/// Record the work tree below `plan.root`. Runs on the calling thread (blocking): call it from
/// a blocking context.
pub(crate) fn scan(plan: &Plan<'_>) -> Scan {
    let started = Instant::now();
    // the ignore rules of the directories from the top level down to the root's parent
    let mut rules = {
        let files: Vec<&Path> = plan.excludes.iter().map(PathBuf::as_path).collect();
        Rules::base(plan.toplevel, &files)
    };
    let mut dir = plan.toplevel.to_path_buf();
    let mut rel: Vec<u8> = Vec::new();
    let comps: Vec<&[u8]> = plan
        .prefix
        .split(|b| *b == b'/')
        .filter(|c| !c.is_empty())
        .collect();
    for c in &comps {
        let file = dir.join(".gitignore");
        if file.is_file() {
            rules = rules.enter(&rel, &dir, &file);
        }
        dir.push(os(c));
        rel.extend_from_slice(c);
        rel.push(b'/');
    }
    let threads = if plan.tracked.len() < PARALLEL_FROM {
        1
    } else {
        std::thread::available_parallelism()
            .map_or(2, std::num::NonZero::get)
            .clamp(1, MAX_THREADS)
    };
    let shared = Shared {
        plan,
        queue: Mutex::new((
            vec![Task {
                dir: Vec::new(),
                rules,
            }],
            0,
        )),
        wake: Condvar::new(),
        files: AtomicUsize::new(0),
        kept_bytes: AtomicU64::new(0),
        hashed_bytes: AtomicU64::new(0),
        stop: AtomicBool::new(false),
        why_stopped: Mutex::new(None),
        until: started + plan.limits.max_time,
        racy_from: now_nanos() - RACY_NANOS,
        listed_bytes: AtomicU64::new(0),
    };
    let mut parts: Vec<Found> = if threads == 1 {
        vec![work(&shared)]
    } else {
        std::thread::scope(|s| {
            let handles: Vec<_> = (0..threads).map(|_| s.spawn(|| work(&shared))).collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or_default())
                .collect()
        })
    };
    let mut out = Scan::default();
    let mut pending = Vec::new();
    // the largest part's map is kept, the others moved into it
    parts.sort_by_key(|p| std::cmp::Reverse(p.seen.len()));
    if let Some(first) = parts.first_mut() {
        out.seen = std::mem::take(&mut first.seen);
        out.kept = std::mem::take(&mut first.kept);
    }
    let unchanged: usize = parts.iter().map(|p| p.unchanged.len()).sum();
    out.unchanged.reserve(unchanged);
    out.clean = vec![false; plan.tracked.len()];
    for part in parts {
        for pos in &part.clean {
            if let Some(c) = out
                .clean
                .get_mut(usize::try_from(*pos).unwrap_or(usize::MAX))
            {
                *c = true;
            }
        }
        out.seen.extend(part.seen);
        out.kept.extend(part.kept);
        pending.extend(part.pending);
        out.unchanged.extend(part.unchanged);
        out.racy.extend(part.racy.into_iter().map(|p| (p, ())));
        out.warnings.extend(part.warnings);
        out.listings.extend(part.listings);
        out.listings_reused += part.listings_reused;
    }
    out.incomplete = shared
        .why_stopped
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .take();
    if out.incomplete.is_none() {
        pending.extend(unseen_tracked(&shared, &mut out));
    }
    out.late = read_late(plan.root, pending);
    out
}

/// The worker loop: take directories until none is left and no worker can add more.
fn work(shared: &Shared<'_>) -> Found {
    let mut found = Found::default();
    // a first record stores only what the index does not vouch for: no reservation
    loop {
        let task = {
            let mut q = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
            loop {
                if shared.stop.load(Ordering::Relaxed) {
                    q.0.clear();
                }
                if let Some(t) = q.0.pop() {
                    q.1 += 1;
                    break Some(t);
                }
                if q.1 == 0 {
                    shared.wake.notify_all();
                    break None;
                }
                q = shared.wake.wait(q).unwrap_or_else(PoisonError::into_inner);
            }
        };
        let Some(task) = task else {
            return found;
        };
        let more = read_dir(shared, &task, &mut found);
        let mut q = shared.queue.lock().unwrap_or_else(PoisonError::into_inner);
        q.0.extend(more);
        q.1 -= 1;
        shared.wake.notify_all();
    }
}

fn stop(shared: &Shared<'_>, why: String) {
    shared.stop.store(true, Ordering::Relaxed);
    let mut w = shared
        .why_stopped
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    w.get_or_insert(why);
}

/// What a directory entry is, from the directory listing or, where it does not say, `fstatat`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum EntryKind {
    Dir,
    File,
    Symlink,
    Other,
}

fn kind_of_mode(mode: u32) -> EntryKind {
    match mode & 0o170_000 {
        0o040_000 => EntryKind::Dir,
        0o100_000 => EntryKind::File,
        0o120_000 => EntryKind::Symlink,
        _ => EntryKind::Other,
    }
}

/// Read one directory: record its files, return its subdirectories to read. The directory is
/// opened once (no symlink followed) and every entry's metadata taken relative to it
/// (`fstatat`), without building a path per entry: the walk's cost is the kernel's.
fn read_dir(shared: &Shared<'_>, task: &Task, found: &mut Found) -> Vec<Task> {
    use nix::fcntl::{OFlag, open};
    use nix::sys::stat::{Mode, fstatat};
    let plan = shared.plan;
    if Instant::now() >= shared.until {
        stop(
            shared,
            format!(
                "the repository was not read whole within {} s",
                plan.limits.max_time.as_secs()
            ),
        );
        return Vec::new();
    }
    let abs = plan.root.join(os(trim_slash(&task.dir)));
    let opened = open(
        &abs,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW,
        Mode::empty(),
    );
    let fd = match opened {
        Ok(fd) => fd,
        Err(e) => {
            found
                .warnings
                .push(format!("{} could not be read: {e}", abs.display()));
            return Vec::new();
        }
    };
    // the directory's own stat, taken before it is listed: what tells a later record whether
    // the listing still holds (see `Listing`)
    let dir_stat = nix::sys::stat::fstat(&fd).ok().map(|st| Stat::of_raw(&st));
    let kept = match (plan.against, dir_stat) {
        (Some(before), Some(now)) => before
            .listings
            .get(task.dir.as_slice())
            .filter(|l| l.stat == now),
        _ => None,
    };
    let fresh = if kept.is_some() {
        found.listings_reused += 1;
        None
    } else {
        match list(&fd) {
            Ok(l) => Some(l),
            Err(e) => {
                found
                    .warnings
                    .push(format!("{} could not be read: {e}", abs.display()));
                return Vec::new();
            }
        }
    };
    let (names, entries): (&[u8], &[ListedEntry]) = match (kept, &fresh) {
        (Some(l), _) => (&l.names, &l.entries),
        (None, Some((names, entries))) => (names, entries),
        (None, None) => return Vec::new(),
    };
    let name_at = |start: usize, len: usize| names.get(start..start + len).unwrap_or_default();
    let top_dir: Vec<u8> = [plan.prefix, task.dir.as_slice()].concat();
    if !task.dir.is_empty()
        && entries
            .iter()
            .any(|&(at, len, _)| name_at(at, len) == b".git")
    {
        // an embedded repository: only its checked-out commit counts (git cannot record one
        // without a commit, and says so)
        match git_dir::checked_out(&abs) {
            Some(head) => {
                found.put(
                    plan.against,
                    trim_slash(&task.dir),
                    Seen::Gitlink { head: Some(head) },
                );
            }
            None => found.warnings.push(format!(
                "'{}/' is a repository without a commit checked out: its files were not compared",
                display(trim_slash(&task.dir))
            )),
        }
        return Vec::new();
    }
    let rules = if entries
        .iter()
        .any(|&(at, len, _)| name_at(at, len) == b".gitignore")
    {
        task.rules.enter(&top_dir, &abs, &abs.join(".gitignore"))
    } else {
        task.rules.clone()
    };
    let mut subdirs = Vec::new();
    // names in order (`list` sorts them), merged with the index's entries below this directory
    // (also in order)
    let mut cursor = plan.tracked.lower_bound(&top_dir);
    // the entry's root-relative path and its path from the top level, built in place: a path
    // is allocated only when it is stored
    let mut path: Vec<u8> = Vec::with_capacity(task.dir.len() + 64);
    let mut top_buf: Vec<u8> = Vec::new();
    for &(start, len, listed) in entries {
        let name_bytes = name_at(start, len);
        let Some(Ok(name)) = names
            .get(start..=start + len)
            .map(std::ffi::CStr::from_bytes_with_nul)
        else {
            continue;
        };
        if task.dir.is_empty() && name_bytes == b".git" {
            continue;
        }
        path.clear();
        path.extend_from_slice(&task.dir);
        path.extend_from_slice(name_bytes);
        // the path from the top level: the root-relative one when the root is the top level
        let top: &[u8] = if plan.prefix.is_empty() {
            &path
        } else {
            top_buf.clear();
            top_buf.extend_from_slice(&top_dir);
            top_buf.extend_from_slice(name_bytes);
            &top_buf
        };
        while plan
            .tracked
            .entry(cursor)
            .is_some_and(|(p, _)| p.as_slice() < top)
        {
            cursor += 1;
        }
        let at = plan
            .tracked
            .entry(cursor)
            .is_some_and(|(p, _)| p.as_slice() == top)
            .then_some(cursor);
        let mut stat = None;
        let kind = match listed {
            Some(k) => k,
            None => match fstatat(&fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => {
                    stat = Some(st);
                    kind_of_mode(st.st_mode)
                }
                Err(_) => continue,
            },
        };
        if kind == EntryKind::Dir {
            if at.is_some_and(|pos| plan.tracked.is_gitlink_at(pos)) {
                let head = git_dir::checked_out(&abs.join(os(name_bytes)));
                found.put(plan.against, &path, Seen::Gitlink { head });
            } else if !rules.ignored(top, true) {
                let mut dir = Vec::with_capacity(path.len() + 1);
                dir.extend_from_slice(&path);
                dir.push(b'/');
                subdirs.push(Task {
                    dir,
                    rules: rules.clone(),
                });
            }
            continue;
        }
        if kind == EntryKind::Other {
            // FIFOs, sockets and devices: git records none of them
            continue;
        }
        // the rules first: most paths are not ignored, and a lookup in a large index is a
        // cache miss
        if at.is_none() && rules.ignored(top, false) {
            continue;
        }
        if shared.files.fetch_add(1, Ordering::Relaxed) >= plan.limits.max_files {
            stop(
                shared,
                format!(
                    "the repository holds more than {} files",
                    plan.limits.max_files
                ),
            );
            return Vec::new();
        }
        let st = match stat {
            Some(st) => st,
            None => match fstatat(&fd, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(st) => st,
                Err(_) => continue,
            },
        };
        let kind = kind_of_mode(st.st_mode);
        if kind == EntryKind::Dir || kind == EntryKind::Other {
            continue; // replaced since it was listed
        }
        record(
            shared,
            found,
            (&abs, Some((fd.as_fd(), name))),
            name_bytes,
            (&path, at),
            kind,
            Stat::of_raw(&st),
        );
    }
    // a first record keeps the listing it read for the run's next record, unless the
    // directory changed so recently that a change after the listing could leave its times
    // as they were (as a racy file), or the listings kept are already large
    if plan.against.is_none()
        && let Some(stat) = dir_stat
        && stat.changed_nanos() < shared.racy_from
        && let Some((names, entries)) = fresh
    {
        let bytes = u64::try_from(names.len() + entries.len() * size_of::<ListedEntry>())
            .unwrap_or(u64::MAX);
        if shared.listed_bytes.fetch_add(bytes, Ordering::Relaxed) + bytes <= LISTINGS_MAX_BYTES {
            found.listings.push((
                task.dir.clone(),
                Listing {
                    stat,
                    names,
                    entries,
                },
            ));
        }
    }
    subdirs
}

/// One entry of a directory listing: where its name starts in the listing's buffer, its
/// length (without the NUL that follows it there), and its kind where the listing says.
type ListedEntry = (usize, usize, Option<EntryKind>);

/// List the directory open as `fd`, sorted by name: the names in one buffer, each followed by
/// its NUL (no allocation per entry), and an entry for each. `.` and `..` are left out.
fn list(fd: &std::os::fd::OwnedFd) -> nix::Result<(Vec<u8>, Vec<ListedEntry>)> {
    // a descriptor of its own to list (the listing moves its offset), `fd` to stat relative to
    let listing = fd
        .try_clone()
        .map_err(|e| nix::Error::from_raw(e.raw_os_error().unwrap_or(0)))?;
    let mut dir = nix::dir::Dir::from_fd(listing)?;
    let mut names: Vec<u8> = Vec::new();
    let mut entries: Vec<ListedEntry> = Vec::new();
    for entry in dir.iter() {
        let Ok(entry) = entry else { break };
        let name = entry.file_name();
        let bytes = name.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let kind = entry.file_type().map(|t| match t {
            nix::dir::Type::Directory => EntryKind::Dir,
            nix::dir::Type::File => EntryKind::File,
            nix::dir::Type::Symlink => EntryKind::Symlink,
            _ => EntryKind::Other,
        });
        entries.push((names.len(), bytes.len(), kind));
        names.extend_from_slice(name.to_bytes_with_nul());
    }
    drop(dir);
    let name_at = |start: usize, len: usize| names.get(start..start + len).unwrap_or_default();
    entries.sort_unstable_by(|a, b| name_at(a.0, a.1).cmp(name_at(b.0, b.1)));
    Ok((names, entries))
}

/// Record one file or symlink named `name` in the directory `dir_abs` (root-relative `path`),
/// which is open as `at` when the walk has it (the file is then opened relative to it).
fn record(
    shared: &Shared<'_>,
    found: &mut Found,
    (dir_abs, at_dir): (&Path, Option<(BorrowedFd<'_>, &std::ffi::CStr)>),
    name: &[u8],
    (path, at): (&[u8], Option<usize>),
    kind: EntryKind,
    stat: Stat,
) {
    let plan = shared.plan;
    let against = plan.against;
    let seen = if kind == EntryKind::File {
        if against.is_some() {
            found.put_file(plan, path, at, stat);
            return;
        }
        let racy = stat.changed_nanos() >= shared.racy_from;
        let clean_blob = at.and_then(|pos| plan.tracked.clean_blob_at(pos, &stat));
        if clean_blob.is_some()
            && !racy
            && let Some(pos) = at.and_then(|p| u32::try_from(p).ok())
        {
            // the index says what it holds: nothing to store
            found.clean.push(pos);
            return;
        }
        if racy {
            found.racy.push(path.to_vec());
        }
        if plan.capture == Capture::Content && (clean_blob.is_none() || racy) {
            if racy {
                // read now: a change after the record could leave its times as they are
                if let Some(kept) = keep(shared, &dir_abs.join(os(name)), at_dir, &stat) {
                    found.kept.insert(path.to_vec(), kept);
                }
            } else if let Some(whole) = budget(shared, stat.size) {
                found.pending.push(Pending {
                    path: path.to_vec(),
                    stat,
                    whole,
                });
            }
        }
        Seen::File { stat, clean_blob }
    } else {
        let target = std::fs::read_link(dir_abs.join(os(name)))
            .map(|t| t.into_os_string().into_vec())
            .unwrap_or_default();
        Seen::Symlink { stat, target }
    };
    found.put(against, path, seen);
}

/// The content (or blob id) of a file worth keeping, within the run's budgets; `at` is its
/// directory, open, and its name there.
fn keep(
    shared: &Shared<'_>,
    abs: &Path,
    at: Option<(BorrowedFd<'_>, &std::ffi::CStr)>,
    stat: &Stat,
) -> Option<Kept> {
    let size = stat.size;
    if size <= KEEP_FILE_BYTES && take(&shared.kept_bytes, size, KEEP_TOTAL_BYTES) {
        let file = match at {
            // relative to the open directory: no walk of the whole path per file
            Some((dir, name)) => nix::fcntl::openat(
                dir,
                name,
                nix::fcntl::OFlag::O_RDONLY
                    | nix::fcntl::OFlag::O_CLOEXEC
                    | nix::fcntl::OFlag::O_NOFOLLOW,
                nix::sys::stat::Mode::empty(),
            )
            .ok()
            .map(std::fs::File::from)?,
            None => std::fs::File::open(abs).ok()?,
        };
        return read_file_bounded(file, size, KEEP_FILE_BYTES).map(Kept::Bytes);
    }
    if take(&shared.hashed_bytes, size, shared.plan.limits.max_bytes) {
        return blob_id_of_file(abs).map(Kept::Blob);
    }
    None
}

/// Whether a file of `size` bytes can be kept whole (`Some(true)`), by its blob id
/// (`Some(false)`), or not at all, the run's budgets taken.
fn budget(shared: &Shared<'_>, size: u64) -> Option<bool> {
    if size <= KEEP_FILE_BYTES && take(&shared.kept_bytes, size, KEEP_TOTAL_BYTES) {
        return Some(true);
    }
    take(&shared.hashed_bytes, size, shared.plan.limits.max_bytes).then_some(false)
}

/// Read the content left to keep after a walk of `root`: here when it is little, else on a
/// thread of its own (on failing to start one, here).
fn read_late(root: &Path, pending: Vec<Pending>) -> Late {
    let late = Late::default();
    if pending.is_empty() {
        return late;
    }
    let bytes: u64 = pending.iter().map(|p| p.stat.size).sum();
    let stop = Arc::new(AtomicBool::new(false));
    if pending.len() > INLINE_FILES || bytes > INLINE_BYTES {
        let paths: PathMap<()> = pending.iter().map(|p| (p.path.clone(), ())).collect();
        let root_buf = root.to_path_buf();
        let flag = Arc::clone(&stop);
        // the list goes to the thread through a slot: on a failed start it is read here
        let slot = Arc::new(Mutex::new(Some(pending)));
        let given = Arc::clone(&slot);
        let started = std::thread::Builder::new()
            .name("keep-content".into())
            .spawn(move || {
                let pending = given
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                    .unwrap_or_default();
                read_pending(&root_buf, pending, &flag)
            });
        match started {
            Ok(handle) => {
                *late.reader.lock().unwrap_or_else(PoisonError::into_inner) = Some(Reader {
                    stop,
                    handle,
                    paths,
                });
                return late;
            }
            Err(e) => {
                tracing::debug!("content read by the record: no thread for it ({e})");
                let pending = slot
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .take()
                    .unwrap_or_default();
                let _ = late.done.set(read_pending(root, pending, &stop));
                return late;
            }
        }
    }
    let _ = late.done.set(read_pending(root, pending, &stop));
    late
}

/// Read `pending` (paths relative to `root`) in order, each only while it is the file recorded,
/// until `stop` is set.
fn read_pending(root: &Path, pending: Vec<Pending>, stop: &AtomicBool) -> LateKept {
    let mut out = LateKept::default();
    let mut opener = Opener::new(root);
    for p in pending {
        let got = match opener.as_mut() {
            Some(o) if !stop.load(Ordering::Relaxed) => read_unchanged(o, &p, stop),
            _ => None,
        };
        match got {
            Some(kept) => {
                out.kept.insert(p.path, kept);
            }
            None => {
                out.unread.insert(p.path, ());
            }
        }
    }
    out
}

/// The content of the file `p` names (its bytes, or its blob id), provided it is the file `p`
/// recorded and did not change before or while it was read (its metadata the same before and
/// after).
fn read_unchanged(opener: &mut Opener, p: &Pending, stop: &AtomicBool) -> Option<Kept> {
    let file = opener.open(&p.path, &p.stat)?;
    let same = |f: &std::fs::File| f.metadata().is_ok_and(|m| Stat::of(&m) == p.stat);
    let kept = if p.whole {
        Kept::Bytes(read_open_bounded(&file, p.stat.size, KEEP_FILE_BYTES)?)
    } else {
        Kept::Blob(blob_id_of_open(&file, p.stat.size, stop)?)
    };
    same(&file).then_some(kept)
}

/// Opens the files left to keep below the root while droid runs, and may have put a symlink,
/// a device or a FIFO anywhere on their way: each directory of a path is opened on its own
/// (`O_PATH | O_DIRECTORY | O_NOFOLLOW`: a symlink is not followed), the file itself as
/// `O_PATH` (nothing is opened yet) and checked (a regular file with the recorded device,
/// inode, size and times) before it is opened for reading through `/proc/self/fd` (no `/proc`:
/// nothing is read). The last directory stays open: the files come directory by directory.
struct Opener {
    root: std::os::fd::OwnedFd,
    /// The last directory opened: its root-relative path and descriptor.
    dir: Option<(Vec<u8>, std::os::fd::OwnedFd)>,
}

impl Opener {
    fn new(root: &Path) -> Option<Self> {
        use nix::fcntl::{OFlag, open};
        let root = open(
            root,
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        Some(Self { root, dir: None })
    }

    /// The directory `parent` (root-relative, no trailing `/`; empty: the root), open.
    fn dir(&mut self, parent: &[u8]) -> Option<BorrowedFd<'_>> {
        use nix::fcntl::{OFlag, openat};
        if parent.is_empty() {
            return Some(self.root.as_fd());
        }
        if self.dir.as_ref().is_none_or(|(p, _)| p != parent) {
            self.dir = None;
            let mut at: Option<std::os::fd::OwnedFd> = None;
            for comp in parent.split(|b| *b == b'/') {
                if comp.is_empty() || comp == b"." || comp == b".." {
                    return None;
                }
                let from = at
                    .as_ref()
                    .map_or(self.root.as_fd(), std::os::fd::AsFd::as_fd);
                let next = openat(
                    from,
                    comp,
                    OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
                    nix::sys::stat::Mode::empty(),
                )
                .ok()?;
                at = Some(next);
            }
            self.dir = Some((parent.to_vec(), at?));
        }
        self.dir.as_ref().map(|(_, fd)| fd.as_fd())
    }

    /// The file at `rel`, open for reading, when it is the regular file `stat` recorded.
    fn open(&mut self, rel: &[u8], stat: &Stat) -> Option<std::fs::File> {
        use nix::fcntl::{OFlag, open, openat};
        use std::os::fd::AsRawFd as _;
        let (parent, name) = match rel.iter().rposition(|b| *b == b'/') {
            Some(i) => (rel.get(..i)?, rel.get(i + 1..)?),
            None => (&b""[..], rel),
        };
        if name.is_empty() || name == b"." || name == b".." {
            return None;
        }
        let dir = self.dir(parent)?;
        let found = openat(
            dir,
            name,
            OFlag::O_PATH | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        let st = nix::sys::stat::fstat(&found).ok()?;
        if kind_of_mode(st.st_mode) != EntryKind::File || Stat::of_raw(&st) != *stat {
            return None;
        }
        let fd = open(
            format!("/proc/self/fd/{}", found.as_raw_fd()).as_str(),
            OFlag::O_RDONLY | OFlag::O_CLOEXEC | OFlag::O_NOCTTY | OFlag::O_NONBLOCK,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        Some(std::fs::File::from(fd))
    }
}

/// Take `n` from a budget of `cap` of which `used` is spent, if it is left.
fn take(used: &AtomicU64, n: u64, cap: u64) -> bool {
    used.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |u| {
        u.checked_add(n).filter(|t| *t <= cap)
    })
    .is_ok()
}

/// A file's content when it is at most `max` bytes.
pub(crate) fn read_bounded(path: &Path, max: u64) -> Option<Vec<u8>> {
    read_file_bounded(std::fs::File::open(path).ok()?, 0, max)
}

/// An open file's content when it is at most `max` bytes; `size` (what a stat said) sizes the
/// buffer, so a file that did not grow is read in one call and its end found by a second.
fn read_file_bounded(file: std::fs::File, size: u64, max: u64) -> Option<Vec<u8>> {
    read_open_bounded(&file, size, max)
}

/// [`read_file_bounded`] of a borrowed file.
fn read_open_bounded(file: &std::fs::File, size: u64, max: u64) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let mut out = Vec::with_capacity(usize::try_from(size.min(max) + 1).ok()?);
    file.take(max + 1).read_to_end(&mut out).ok()?;
    (u64::try_from(out.len()).ok()? <= max).then_some(out)
}

/// git's blob id of `bytes`.
pub(crate) fn blob_id(bytes: &[u8]) -> [u8; 20] {
    let mut h = sha1_smol::Sha1::new();
    h.update(format!("blob {}\0", bytes.len()).as_bytes());
    h.update(bytes);
    h.digest().bytes()
}

/// git's blob id of a file's content, streamed (any size).
pub(crate) fn blob_id_of_file(path: &Path) -> Option<[u8; 20]> {
    let file = std::fs::File::open(path).ok()?;
    let size = file.metadata().ok()?.len();
    blob_id_of_open(&file, size, &AtomicBool::new(false))
}

/// git's blob id of an open file of `size` bytes, streamed; `None` when it holds another size
/// or `stop` is set before the end.
fn blob_id_of_open(mut file: &std::fs::File, size: u64, stop: &AtomicBool) -> Option<[u8; 20]> {
    use std::io::Read as _;
    let mut h = sha1_smol::Sha1::new();
    h.update(format!("blob {size}\0").as_bytes());
    let mut buf = vec![0u8; 256 * 1024];
    let mut total = 0u64;
    loop {
        if stop.load(Ordering::Relaxed) {
            return None;
        }
        let n = file.read(&mut buf).ok()?;
        if n == 0 {
            break;
        }
        total += u64::try_from(n).ok()?;
        h.update(buf.get(..n)?);
    }
    // a file that changed size while read has no single id
    (total == size).then(|| h.digest().bytes())
}

fn trim_slash(dir: &[u8]) -> &[u8] {
    dir.strip_suffix(b"/").unwrap_or(dir)
}

/// Tracked files below the root that the walk did not reach (inside an ignored directory):
/// recorded by their path, provided no directory on the way is a symlink. Returns the content
/// left to keep of them.
fn unseen_tracked(shared: &Shared<'_>, out: &mut Scan) -> Vec<Pending> {
    let plan = shared.plan;
    let mut found = Found::default();
    let mut real_dirs: PathMap<bool> = PathMap::default();
    let from = plan.tracked.lower_bound(plan.prefix);
    for (pos, (top, _)) in plan.tracked.list.iter().enumerate().skip(from) {
        let Some(path) = top.strip_prefix(plan.prefix) else {
            break; // past the root's range
        };
        if out.clean.get(pos) == Some(&true)
            || out.seen.contains_key(path)
            || out.unchanged.contains(&path_hash(path))
        {
            continue;
        }
        // every directory from the root down must be a real directory (not a symlink, not an
        // embedded repository already recorded)
        let mut ok = true;
        let mut at = 0;
        while let Some(i) = path
            .get(at..)
            .and_then(|p| p.iter().position(|b| *b == b'/'))
        {
            let dir = path.get(..at + i).unwrap_or_default();
            let real = *real_dirs.entry(dir.to_vec()).or_insert_with(|| {
                !out.seen.contains_key(dir)
                    && std::fs::symlink_metadata(plan.root.join(os(dir))).is_ok_and(|m| m.is_dir())
            });
            if !real {
                ok = false;
                break;
            }
            at += i + 1;
        }
        if !ok {
            continue;
        }
        let abs = plan.root.join(os(path));
        if let Ok(meta) = std::fs::symlink_metadata(&abs) {
            let kind = if meta.is_file() {
                EntryKind::File
            } else if meta.is_symlink() {
                EntryKind::Symlink
            } else {
                continue;
            };
            let (Some(dir), Some(name)) = (abs.parent(), abs.file_name()) else {
                continue;
            };
            record(
                shared,
                &mut found,
                (dir, None),
                name.as_bytes(),
                (path, Some(pos)),
                kind,
                Stat::of(&meta),
            );
        }
    }
    out.seen.extend(found.seen);
    out.unchanged.extend(found.unchanged);
    for pos in found.clean {
        if let Some(c) = out
            .clean
            .get_mut(usize::try_from(pos).unwrap_or(usize::MAX))
        {
            *c = true;
        }
    }
    out.kept.extend(found.kept);
    out.racy.extend(found.racy.into_iter().map(|p| (p, ())));
    found.pending
}

/// A path as text for messages and results.
pub(crate) fn display(path: &[u8]) -> String {
    String::from_utf8_lossy(path).into_owned()
}

/// A root-relative path as an `OsString`.
pub(crate) fn os_path(path: &[u8]) -> OsString {
    OsString::from_vec(path.to_vec())
}

#[cfg(test)]
mod tests;
