//! What git runs or consults later, on the user's behalf: the repository's `.git` itself,
//! `.git/config`, every file under `.git/hooks`, `.git/info/exclude` and `.git/info/attributes`
//! (which hide files and pick filter drivers), and the same for each submodule's git directory
//! under `.git/modules/<name>`. They lie inside `repo_root`, which a confined run may write, and
//! Landlock only grants whole subtrees; so they are recorded before the run, compared after it
//! (before the repository is read again, so `files_changed` is measured with the ignore rules of
//! before the run, and again after verification), and every change is undone: a new entry
//! removed, a changed or deleted file written back with its mode. The engine reports what was
//! restored, and what could not be, as a `conflict` issue.
//!
//! This code runs unconfined, on a tree the agent controlled: every step is taken relative to a
//! directory opened before the run or opened just now without following a symlink
//! ([`crate::run::no_follow`]), one name at a time. `repo_root` and `.git` are held open from the
//! record (device and inode), so a `.git` swapped for a symlink to `~/.ssh`, or a `hooks` swapped
//! for a symlink to `~/precious`, is seen as what it is (a symlink in the repository), removed,
//! and the recorded directory put back; nothing is ever read or written through it. A `.git`
//! that was moved elsewhere in the repository and replaced is moved back; one that cannot be
//! found is reported, and whatever replaced it (a symlink, a gitfile pointing at a planted git
//! directory) is removed, never used.
//!
//! A work tree whose `.git` is a file (a linked work tree, a submodule) keeps its hooks and
//! config in a directory outside `repo_root`, which a confined run cannot write; the gitfile
//! itself is guarded.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::{Arc, Mutex};

use nix::sys::stat::FileStat;

use crate::run::no_follow::{self as nf, Kind};

/// Most files recorded in all (a fresh clone has 14 hook samples).
const MAX_FILES: usize = 512;
/// Most directories recorded in all.
const MAX_DIRS: usize = 512;
/// Most bytes recorded in all (a fresh clone's samples take about 25 KiB).
const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Most submodule git directories under `.git/modules` recorded.
const MAX_MODULES: usize = 64;
/// Most entries removed from one planted directory.
const REMOVE_BUDGET: usize = 4096;
/// Most entries of `repo_root` looked through for a `.git` that was moved.
const ROOT_SCAN: usize = 100_000;

/// Most files a [`RecordCache`] keeps (then it starts again empty).
const CACHE_FILES: usize = 4096;
/// Most bytes a [`RecordCache`] keeps (then it starts again empty).
const CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// The names guarded directly in a git directory (the rest of it, objects and refs, is git's
/// own data: what the agent does there is the user's history, not code git runs later).
const IN_GIT_DIR: &[&str] = &["config", "hooks", "info", "modules"];
/// The names guarded in `info/`.
const IN_INFO: &[&str] = &["exclude", "attributes"];
/// The names guarded in a submodule's git directory.
const IN_MODULE: &[&str] = &["config", "hooks", "info"];

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
    size: i64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    fn of(st: &FileStat) -> Self {
        let (dev, ino) = nf::id(st);
        Self {
            dev,
            ino,
            size: st.st_size,
            mtime: (st.st_mtime, st.st_mtime_nsec),
            ctime: (st.st_ctime, st.st_ctime_nsec),
        }
    }

    /// Was the file last changed well before `now` (seconds since the epoch)? Then a later
    /// change, however quick, gives it another change time.
    fn settled(&self, now: i64) -> bool {
        self.ctime.0 < now - 1
    }
}

/// Files earlier records read, by device and inode, with when they were read: a long-lived
/// front-end (the bridge, the MCP server) reads a repository's hooks and config once, not on
/// every run. A file is taken from here only when its stamp is the one it had when it was read
/// *and* that stamp was settled then ([`Stamp::settled`]): any write since changed the stamp.
/// Bounded by [`CACHE_FILES`] and [`CACHE_BYTES`].
#[derive(Debug, Default)]
pub(crate) struct RecordCache {
    inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
struct CacheInner {
    files: std::collections::HashMap<(u64, u64), (Entry, i64)>,
    bytes: u64,
}

impl RecordCache {
    /// The regular file `name` in `dir` (whose metadata, not followed, is `st`): from the cache
    /// when unchanged since a settled read, else read now (and kept when settled).
    fn read(&self, dir: &OwnedFd, name: &OsStr, st: &FileStat, now: i64) -> Option<Entry> {
        let stamp = Stamp::of(st);
        if let Ok(inner) = self.inner.lock()
            && let Some((entry, read_at)) = inner.files.get(&(stamp.dev, stamp.ino))
            && entry.stamp == stamp
            && stamp.settled(*read_at)
        {
            return Some(entry.clone());
        }
        let entry = read(dir, name)?;
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
                .insert((entry.stamp.dev, entry.stamp.ino), (entry.clone(), now))
            {
                inner.bytes -= old.bytes.len() as u64;
            }
            inner.bytes += len;
        }
        Some(entry)
    }
}

/// What was at a guarded name before the run.
#[derive(Debug, Clone)]
enum Node {
    File(Entry),
    Dir {
        mode: u32,
        /// Every entry is guarded (a hooks directory): one the run adds is removed. Otherwise
        /// only the names in `children` are.
        whole: bool,
        children: BTreeMap<OsString, Node>,
    },
    Symlink(Vec<u8>),
    /// Nothing: one the run creates is removed.
    Absent,
    /// A FIFO, a socket, a device, or a file past the record's bounds: left as it is.
    Other,
}

/// What `repo_root/.git` was before the run.
#[derive(Debug)]
enum Top {
    /// A git directory, held open, and what is guarded in it.
    Dir {
        fd: OwnedFd,
        id: (u64, u64),
        tree: BTreeMap<OsString, Node>,
    },
    /// A gitfile (`gitdir: …`).
    File(Entry),
    Symlink(Vec<u8>),
    Absent,
    Other,
}

/// What git runs or consults later, as it was before the run.
#[derive(Debug)]
pub(crate) struct GitGuard {
    /// `repo_root`, held open since the record.
    root: OwnedFd,
    top: Top,
    /// When the record was made (seconds since the epoch).
    recorded_at: i64,
    /// Why the record is incomplete (too many or too large files): entries it did not see are
    /// not removed then.
    incomplete: Option<String>,
}

/// How much a record may still take.
#[derive(Debug)]
struct Budget {
    files: usize,
    dirs: usize,
    bytes: u64,
    incomplete: Option<String>,
}

impl GitGuard {
    /// Record what `repo_root/.git` holds that git runs later (unchanged files from `cache`).
    /// `None` when `repo_root` cannot be opened as a directory.
    pub(crate) fn record(repo_root: &Path, cache: &RecordCache) -> Option<Self> {
        let root = nix::fcntl::open(
            repo_root,
            nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        let recorded_at = now_secs();
        let mut budget = Budget {
            files: MAX_FILES,
            dirs: MAX_DIRS,
            bytes: MAX_BYTES,
            incomplete: None,
        };
        let dot_git = OsStr::new(".git");
        let top = match nf::stat_at(&root, dot_git) {
            Ok(None) => Top::Absent,
            Err(_) => Top::Other,
            Ok(Some(st)) => match Kind::of(&st) {
                Kind::Dir => match nf::open_dir(&root, dot_git) {
                    Ok(fd) => {
                        let id = nix::sys::stat::fstat(&fd).map(|s| nf::id(&s)).ok()?;
                        let tree = record_names(&fd, IN_GIT_DIR, &mut budget, cache, recorded_at);
                        let mut tree = tree;
                        // each submodule's git directory, one level down
                        if let Some(Node::Dir { children, .. }) =
                            tree.get_mut(OsStr::new("modules"))
                            && let Ok(modules) = nf::open_dir(&fd, OsStr::new("modules"))
                            && let Ok((names, more)) = nf::list(&modules, MAX_MODULES)
                        {
                            if more {
                                budget.incomplete = Some(format!(
                                    "more than {MAX_MODULES} submodules under .git/modules"
                                ));
                            }
                            for name in names {
                                let Ok(Some(st)) = nf::stat_at(&modules, &name) else {
                                    continue;
                                };
                                if Kind::of(&st) != Kind::Dir {
                                    continue;
                                }
                                let Ok(sub) = nf::open_dir(&modules, &name) else {
                                    continue;
                                };
                                let inner =
                                    record_names(&sub, IN_MODULE, &mut budget, cache, recorded_at);
                                children.insert(
                                    name,
                                    Node::Dir {
                                        mode: st.st_mode & 0o7777,
                                        whole: false,
                                        children: inner,
                                    },
                                );
                            }
                        }
                        Top::Dir { fd, id, tree }
                    }
                    Err(_) => Top::Other,
                },
                Kind::File => read(&root, dot_git).map_or(Top::Other, Top::File),
                Kind::Symlink => nf::read_link_at(&root, dot_git).map_or(Top::Other, Top::Symlink),
                Kind::Other => Top::Other,
            },
        };
        Some(Self {
            root,
            top,
            recorded_at,
            incomplete: budget.incomplete,
        })
    }

    /// Compare with now and undo every change. Returns what was changed (relative to the
    /// repository: `.git/hooks/pre-commit`), what could not be restored, with why, and what was
    /// refused.
    pub(crate) fn restore(&self) -> Restored {
        let mut out = Restored {
            incomplete: self.incomplete.clone(),
            ..Restored::default()
        };
        let dot_git = OsStr::new(".git");
        let now = nf::stat_at(&self.root, dot_git).ok().flatten();
        match &self.top {
            Top::Dir { fd, id, tree } => {
                let same = now
                    .as_ref()
                    .is_some_and(|st| Kind::of(st) == Kind::Dir && nf::id(st) == *id);
                if !same && !self.put_git_dir_back(*id, now.as_ref(), &mut out) {
                    out.changed.sort();
                    return out;
                }
                // the recorded git directory, held open: wherever it is now, it is the one that
                // was recorded, and it is inside the repository
                let mut ctx = Ctx {
                    out: &mut out,
                    recorded_at: self.recorded_at,
                    complete: self.incomplete.is_none(),
                };
                reconcile(fd, ".git", tree, false, &mut ctx);
            }
            Top::File(before) => {
                let unchanged = now.as_ref().is_some_and(|st| Kind::of(st) == Kind::File)
                    && read(&self.root, dot_git).is_some_and(|e| same_content(&e, before));
                if !unchanged {
                    out.changed.push(".git".to_owned());
                    if let Err(e) = replace_with_file(&self.root, dot_git, before) {
                        out.failed.push(format!(".git: {e}"));
                    }
                }
            }
            Top::Symlink(target) => {
                let unchanged = now.as_ref().is_some_and(|st| Kind::of(st) == Kind::Symlink)
                    && nf::read_link_at(&self.root, dot_git).is_ok_and(|t| t == *target);
                if !unchanged {
                    out.changed.push(".git".to_owned());
                    let mut budget = REMOVE_BUDGET;
                    if let Err(e) = set_aside_or_remove(&self.root, dot_git, &mut budget, &mut out)
                        .and_then(|()| nf::symlink_at(&self.root, dot_git, target))
                    {
                        out.failed.push(format!(".git: {e}"));
                    }
                }
            }
            Top::Absent => {
                if now.is_some() {
                    out.refused.push(
                        "the run created .git (a git repository) where there was none: its \
                         hooks and config are the agent's; inspect them before running git there"
                            .to_owned(),
                    );
                }
            }
            Top::Other => {}
        }
        out.changed.sort();
        out.changed.dedup();
        out
    }

    /// `.git` is no longer the recorded directory (`now` is what is there): move whatever is
    /// there out of the way (a symlink or a gitfile removed, a directory renamed aside), and the
    /// recorded directory back, when it is still somewhere at the top of the repository.
    /// Whether `.git` is the recorded directory again.
    fn put_git_dir_back(&self, id: (u64, u64), now: Option<&FileStat>, out: &mut Restored) -> bool {
        let dot_git = OsStr::new(".git");
        let what = match now.map(Kind::of) {
            None => "removed".to_owned(),
            Some(Kind::Symlink) => format!(
                "replaced by a symlink to {}",
                nf::read_link_at(&self.root, dot_git)
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_else(|_| "?".to_owned())
            ),
            Some(Kind::File) => "replaced by a file (a gitfile pointing git elsewhere)".to_owned(),
            Some(Kind::Dir) => "replaced by another directory".to_owned(),
            Some(Kind::Other) => "replaced by a special file".to_owned(),
        };
        // where the recorded directory went, if it stayed at the top of the repository
        let moved_to = nf::list(&self.root, ROOT_SCAN).ok().and_then(|(names, _)| {
            names.into_iter().find(|n| {
                n.as_bytes() != b".git"
                    && nf::stat_at(&self.root, n)
                        .ok()
                        .flatten()
                        .is_some_and(|st| Kind::of(&st) == Kind::Dir && nf::id(&st) == id)
            })
        });
        let mut budget = REMOVE_BUDGET;
        if now.is_some()
            && let Err(e) = set_aside_or_remove(&self.root, dot_git, &mut budget, out)
        {
            out.failed.push(format!(".git ({what}): {e}"));
            return false;
        }
        match moved_to {
            Some(name) => match nf::rename_at(&self.root, &name, dot_git) {
                Ok(()) => {
                    out.changed.push(format!(
                        ".git ({what}; the repository's own was moved back from {})",
                        name.to_string_lossy()
                    ));
                    true
                }
                Err(e) => {
                    out.failed.push(format!(
                        ".git ({what}; the repository's own is at {}): {e}",
                        name.to_string_lossy()
                    ));
                    false
                }
            },
            None => {
                out.refused.push(format!(
                    ".git was {what} and the repository's own git directory is no longer in \
                     it: nothing was written there, and what replaced .git was removed"
                ));
                false
            }
        }
    }
}

/// What [`GitGuard::restore`] found and did.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Restored {
    /// Paths the run changed (added, modified, deleted, replaced), relative to the repository,
    /// put back as they were.
    pub(crate) changed: Vec<String>,
    /// Paths that could not be put back, with why.
    pub(crate) failed: Vec<String>,
    /// What was found changed and could not be made as before, with why (nothing was written
    /// through it).
    pub(crate) refused: Vec<String>,
    /// Why new files were not looked for.
    pub(crate) incomplete: Option<String>,
}

impl Restored {
    /// Nothing to report.
    pub(crate) fn is_clean(&self) -> bool {
        self.changed.is_empty() && self.failed.is_empty() && self.refused.is_empty()
    }

    /// Add what a later look found.
    pub(crate) fn merge(&mut self, later: Self) {
        for (to, from) in [
            (&mut self.changed, later.changed),
            (&mut self.failed, later.failed),
            (&mut self.refused, later.refused),
        ] {
            for item in from {
                if !to.contains(&item) {
                    to.push(item);
                }
            }
        }
        self.changed.sort();
        if self.incomplete.is_none() {
            self.incomplete = later.incomplete;
        }
    }
}

fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Record `names` in `dir` (a directory `info` or `hooks` inside, as their own lists say).
fn record_names(
    dir: &OwnedFd,
    names: &[&str],
    budget: &mut Budget,
    cache: &RecordCache,
    now: i64,
) -> BTreeMap<OsString, Node> {
    let mut out = BTreeMap::new();
    for name in names {
        let name = OsStr::new(name);
        let node = match nf::stat_at(dir, name) {
            // `git submodule add` makes it: a submodule added by the run is in files_changed
            Ok(None) if name.as_bytes() == b"modules" => Node::Other,
            Ok(None) => Node::Absent,
            Err(_) => Node::Other,
            Ok(Some(st)) => match (Kind::of(&st), name.as_bytes()) {
                (Kind::Dir, b"hooks") => record_tree(dir, name, &st, budget, cache, now),
                (Kind::Dir, b"info") => match nf::open_dir(dir, name) {
                    Ok(info) => Node::Dir {
                        mode: st.st_mode & 0o7777,
                        whole: false,
                        children: record_names(&info, IN_INFO, budget, cache, now),
                    },
                    Err(_) => Node::Other,
                },
                (Kind::Dir, b"modules") => Node::Dir {
                    mode: st.st_mode & 0o7777,
                    whole: false,
                    // filled by the caller, one level down
                    children: BTreeMap::new(),
                },
                (kind, _) => record_entry(dir, name, kind, &st, budget, cache, now),
            },
        };
        out.insert(name.to_owned(), node);
    }
    out
}

/// Record a directory whose every entry is guarded (`hooks`), with everything under it.
fn record_tree(
    parent: &OwnedFd,
    name: &OsStr,
    st: &FileStat,
    budget: &mut Budget,
    cache: &RecordCache,
    now: i64,
) -> Node {
    if budget.dirs == 0 {
        budget.incomplete = Some(format!("more than {MAX_DIRS} directories under .git"));
        return Node::Other;
    }
    budget.dirs -= 1;
    let Ok(dir) = nf::open_dir(parent, name) else {
        return Node::Other;
    };
    let mut children = BTreeMap::new();
    let (names, more) = nf::list(&dir, MAX_FILES * 2).unwrap_or_default();
    if more {
        budget.incomplete = Some(format!("more than {MAX_FILES} files under .git"));
    }
    for n in names {
        let Ok(Some(st)) = nf::stat_at(&dir, &n) else {
            continue;
        };
        let node = match Kind::of(&st) {
            Kind::Dir => record_tree(&dir, &n, &st, budget, cache, now),
            kind => record_entry(&dir, &n, kind, &st, budget, cache, now),
        };
        children.insert(n, node);
    }
    Node::Dir {
        mode: st.st_mode & 0o7777,
        whole: true,
        children,
    }
}

/// Record one entry that is not a directory.
fn record_entry(
    dir: &OwnedFd,
    name: &OsStr,
    kind: Kind,
    st: &FileStat,
    budget: &mut Budget,
    cache: &RecordCache,
    now: i64,
) -> Node {
    match kind {
        Kind::File => {
            let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
            if budget.files == 0 || size > budget.bytes {
                budget.incomplete = Some(format!(
                    "more than {MAX_FILES} files or {} MiB under .git",
                    MAX_BYTES / 1024 / 1024
                ));
                return Node::Other;
            }
            match cache.read(dir, name, st, now) {
                Some(entry) => {
                    budget.files -= 1;
                    budget.bytes = budget.bytes.saturating_sub(entry.bytes.len() as u64);
                    Node::File(entry)
                }
                None => Node::Other,
            }
        }
        Kind::Symlink => nf::read_link_at(dir, name).map_or(Node::Other, Node::Symlink),
        Kind::Dir | Kind::Other => Node::Other,
    }
}

/// The regular file `name` in `dir`, not followed: content, mode, stamp.
fn read(dir: &OwnedFd, name: &OsStr) -> Option<Entry> {
    let (bytes, st) = nf::read_at(dir, name, MAX_BYTES).ok()??;
    Some(Entry {
        bytes: bytes.into(),
        mode: st.st_mode & 0o7777,
        stamp: Stamp::of(&st),
    })
}

fn same_content(a: &Entry, b: &Entry) -> bool {
    a.bytes == b.bytes && a.mode == b.mode
}

/// Where [`reconcile`] reports.
struct Ctx<'a> {
    out: &'a mut Restored,
    recorded_at: i64,
    /// The record saw everything: entries it did not see may be removed.
    complete: bool,
}

/// Make the guarded entries of `dir` (shown as `shown`) what `recorded` says; with `whole`, also
/// remove every entry not recorded.
fn reconcile(
    dir: &OwnedFd,
    shown: &str,
    recorded: &BTreeMap<OsString, Node>,
    whole: bool,
    ctx: &mut Ctx<'_>,
) {
    let path = |name: &OsStr| format!("{shown}/{}", name.to_string_lossy());
    if whole && ctx.complete {
        match nf::list(dir, MAX_FILES * 4) {
            Ok((names, _)) => {
                for n in names {
                    if recorded.contains_key(&n) {
                        continue;
                    }
                    ctx.out.changed.push(path(&n));
                    let mut budget = REMOVE_BUDGET;
                    if let Err(e) = nf::remove_at(dir, &n, &mut budget) {
                        ctx.out.failed.push(format!("{}: {e}", path(&n)));
                    }
                }
            }
            Err(e) => ctx.out.failed.push(format!("{shown}: {e}")),
        }
    }
    for (name, node) in recorded {
        let now = match nf::stat_at(dir, name) {
            Ok(now) => now,
            Err(e) => {
                ctx.out.failed.push(format!("{}: {e}", path(name)));
                continue;
            }
        };
        let now_kind = now.as_ref().map(Kind::of);
        match node {
            Node::Other => {}
            Node::Absent => {
                if now.is_some() {
                    ctx.out.changed.push(path(name));
                    let mut budget = REMOVE_BUDGET;
                    if let Err(e) = nf::remove_at(dir, name, &mut budget) {
                        ctx.out.failed.push(format!("{}: {e}", path(name)));
                    }
                }
            }
            Node::File(before) => {
                let untouched = before.stamp.settled(ctx.recorded_at)
                    && now.as_ref().is_some_and(|st| {
                        Kind::of(st) == Kind::File && Stamp::of(st) == before.stamp
                    });
                if untouched
                    || (now_kind == Some(Kind::File)
                        && read(dir, name).is_some_and(|e| same_content(&e, before)))
                {
                    continue;
                }
                ctx.out.changed.push(path(name));
                if let Err(e) = replace_with_file(dir, name, before) {
                    ctx.out.failed.push(format!("{}: {e}", path(name)));
                }
            }
            Node::Symlink(target) => {
                if now_kind == Some(Kind::Symlink)
                    && nf::read_link_at(dir, name).is_ok_and(|t| t == *target)
                {
                    continue;
                }
                ctx.out.changed.push(path(name));
                let mut budget = REMOVE_BUDGET;
                if let Err(e) = nf::remove_at(dir, name, &mut budget)
                    .and_then(|()| nf::symlink_at(dir, name, target))
                {
                    ctx.out.failed.push(format!("{}: {e}", path(name)));
                }
            }
            Node::Dir {
                mode,
                whole: inner_whole,
                children,
            } => {
                let remade = now_kind != Some(Kind::Dir);
                let opened = if !remade {
                    nf::open_dir(dir, name)
                } else {
                    // gone, or a symlink (to `~/precious`), a file, a FIFO in its place: that
                    // entry goes (never followed), and the directory is made again
                    ctx.out.changed.push(path(name));
                    let mut budget = REMOVE_BUDGET;
                    nf::remove_at(dir, name, &mut budget)
                        .and_then(|()| nf::make_dir_at(dir, name, *mode))
                };
                match opened {
                    Ok(sub) => {
                        let shown = path(name);
                        let reported = ctx.out.changed.len();
                        reconcile(&sub, &shown, children, *inner_whole, ctx);
                        if remade {
                            // the directory was made again: its files are not news of their own
                            let inner = format!("{shown}/");
                            let mut i = reported;
                            while i < ctx.out.changed.len() {
                                if ctx.out.changed[i].starts_with(&inner) {
                                    ctx.out.changed.remove(i);
                                } else {
                                    i += 1;
                                }
                            }
                        }
                    }
                    Err(e) => ctx.out.failed.push(format!("{}: {e}", path(name))),
                }
            }
        }
    }
}

/// Put `entry` back as `name` in `dir`: whatever is there (a symlink, a directory, another
/// file) goes first, never followed.
fn replace_with_file(dir: &OwnedFd, name: &OsStr, entry: &Entry) -> std::io::Result<()> {
    let mut budget = REMOVE_BUDGET;
    nf::remove_at(dir, name, &mut budget)?;
    nf::create_at(dir, name, &entry.bytes, entry.mode)
}

/// Clear `name` in `dir`: a symlink or a file is removed; a directory (a planted git directory,
/// say) is renamed aside in the same directory, reported, never deleted with what it holds.
fn set_aside_or_remove(
    dir: &OwnedFd,
    name: &OsStr,
    budget: &mut usize,
    out: &mut Restored,
) -> std::io::Result<()> {
    match nf::stat_at(dir, name)?.map(|st| Kind::of(&st)) {
        None => Ok(()),
        Some(Kind::Dir) => {
            let aside = format!(
                "{}.planted-{}",
                name.to_string_lossy(),
                std::process::id() ^ u32::try_from(now_secs() & 0xffff_ffff).unwrap_or(0)
            );
            nf::rename_at(dir, name, OsStr::new(&aside))?;
            out.refused.push(format!(
                "{} was a directory the run put there; it was moved aside to {aside}, not used",
                name.to_string_lossy()
            ));
            Ok(())
        }
        Some(_) => nf::remove_at(dir, name, budget),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;

    /// A fresh directory with a repository `repo/` (`.git/config`, two hooks) and a directory
    /// `outside/` the run must never see written.
    fn world(name: &str) -> (PathBuf, PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("git-guard-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let repo = dir.join("repo");
        let hooks = repo.join(".git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::create_dir_all(repo.join(".git/info")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(repo.join(".git/info/exclude"), "# git ls-files\n").unwrap();
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\n").unwrap();
        std::fs::write(hooks.join("keep"), "x").unwrap();
        let outside = dir.join("outside");
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("thesis.tex"), "years of work").unwrap();
        std::fs::write(outside.join("sub/data.csv"), "1,2,3").unwrap();
        std::fs::write(outside.join("config"), "Host *\n").unwrap();
        (dir, repo, outside)
    }

    /// Every file under `dir` with its content.
    fn contents(dir: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if e.file_type().unwrap().is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(dir).unwrap().display().to_string();
                    out.push((rel, std::fs::read_to_string(&p).unwrap_or_default()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn planted_changed_and_deleted_files_are_put_back() {
        let (dir, repo, _) = world("plain");
        let hooks = repo.join(".git/hooks");
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();

        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\ncurl evil\n").unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        std::fs::remove_file(hooks.join("keep")).unwrap();
        std::fs::create_dir_all(hooks.join("sub")).unwrap();
        std::fs::write(hooks.join("sub/x"), "y").unwrap();
        std::fs::write(repo.join(".git/info/exclude"), "evil.sh\n").unwrap();
        std::fs::write(repo.join(".git/info/attributes"), "* filter=evil\n").unwrap();

        let restored = guard.restore();
        assert_eq!(
            restored,
            Restored {
                changed: vec![
                    ".git/config".to_owned(),
                    ".git/hooks/keep".to_owned(),
                    ".git/hooks/pre-commit".to_owned(),
                    ".git/hooks/sub".to_owned(),
                    ".git/info/attributes".to_owned(),
                    ".git/info/exclude".to_owned(),
                ],
                ..Restored::default()
            }
        );
        assert!(!hooks.join("pre-commit").exists());
        assert!(!hooks.join("sub").exists());
        assert!(!repo.join(".git/info/attributes").exists());
        assert_eq!(std::fs::read_to_string(hooks.join("keep")).unwrap(), "x");
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/info/exclude")).unwrap(),
            "# git ls-files\n"
        );
        assert_eq!(guard.restore(), Restored::default());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// issue 29: `rm -rf .git/hooks && ln -s ~/precious .git/hooks` made the old guard delete
    /// the files of `~/precious` and write the samples there.
    #[test]
    fn hooks_swapped_for_a_symlink_are_put_back_and_nothing_is_written_through_it() {
        let (dir, repo, outside) = world("hooks-link");
        let hooks = repo.join(".git/hooks");
        let before = contents(&outside);
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();

        std::fs::remove_dir_all(&hooks).unwrap();
        std::os::unix::fs::symlink(&outside, &hooks).unwrap();

        let restored = guard.restore();
        assert_eq!(restored.changed, vec![".git/hooks".to_owned()]);
        assert_eq!(restored.failed, Vec::<String>::new());
        assert_eq!(contents(&outside), before, "nothing outside was touched");
        assert!(std::fs::symlink_metadata(&hooks).unwrap().is_dir());
        assert_eq!(
            contents(&hooks),
            vec![
                ("keep".to_owned(), "x".to_owned()),
                ("pre-push.sample".to_owned(), "#!/bin/sh\n".to_owned())
            ]
        );
        // a file of the hooks swapped for a symlink to a file outside
        std::fs::remove_file(hooks.join("keep")).unwrap();
        std::os::unix::fs::symlink(outside.join("thesis.tex"), hooks.join("keep")).unwrap();
        let restored = guard.restore();
        assert_eq!(restored.changed, vec![".git/hooks/keep".to_owned()]);
        assert_eq!(contents(&outside), before, "nothing outside was touched");
        assert_eq!(std::fs::read_to_string(hooks.join("keep")).unwrap(), "x");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// issue 29: `mv .git .git-real && ln -s ~/.ssh .git` made the old guard replace
    /// `~/.ssh/config` with the repository's config.
    #[test]
    fn a_git_dir_swapped_for_a_symlink_is_moved_back_and_nothing_is_written_through_it() {
        let (dir, repo, outside) = world("git-link");
        let before = contents(&outside);
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();

        std::fs::rename(repo.join(".git"), repo.join(".git-real")).unwrap();
        std::fs::write(repo.join(".git-real/config"), "[core]\nhooksPath = /x\n").unwrap();
        std::os::unix::fs::symlink(&outside, repo.join(".git")).unwrap();

        let restored = guard.restore();
        assert_eq!(contents(&outside), before, "nothing outside was touched");
        assert!(
            std::fs::symlink_metadata(repo.join(".git"))
                .unwrap()
                .is_dir()
        );
        assert!(!repo.join(".git-real").exists());
        assert_eq!(
            restored.changed,
            vec![
                ".git (replaced by a symlink to {out}; the repository's own was moved back from \
                 .git-real)"
                    .replace("{out}", &outside.display().to_string()),
                ".git/config".to_owned()
            ]
        );
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/config")).unwrap(),
            "[core]\n"
        );

        // removed for good, and replaced by a gitfile pointing at a planted git directory
        std::fs::remove_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git"), "gitdir: ../planted\n").unwrap();
        let restored = guard.restore();
        assert_eq!(restored.changed, Vec::<String>::new());
        assert_eq!(restored.refused.len(), 1, "{restored:?}");
        assert!(
            restored.refused[0].contains("replaced by a file"),
            "{restored:?}"
        );
        assert!(!repo.join(".git").exists(), "the planted gitfile is gone");
        assert_eq!(contents(&outside), before);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn submodule_hooks_and_config_are_guarded() {
        let (dir, repo, _) = world("modules");
        let module = repo.join(".git/modules/lib");
        std::fs::create_dir_all(module.join("hooks")).unwrap();
        std::fs::write(module.join("config"), "[core]\n").unwrap();
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();
        std::fs::write(module.join("hooks/post-checkout"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::write(module.join("config"), "[core]\nfsmonitor = evil\n").unwrap();
        let restored = guard.restore();
        assert_eq!(
            restored.changed,
            vec![
                ".git/modules/lib/config".to_owned(),
                ".git/modules/lib/hooks/post-checkout".to_owned()
            ]
        );
        assert!(!module.join("hooks/post-checkout").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_untouched_since_well_before_the_record_are_not_read_again_but_changes_are_seen() {
        let (dir, repo, _) = world("stamp");
        let hooks = repo.join(".git/hooks");
        let mut guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();
        // as if the files had been written long before the record
        guard.recorded_at += 10;
        assert_eq!(guard.restore(), Restored::default());
        // a change of content, of mode, or a replacement: each a new stamp
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\ncurl evil\n").unwrap();
        std::fs::set_permissions(
            repo.join(".git/config"),
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
        let mode = std::fs::metadata(repo.join(".git/config"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o777, 0o777);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_hooks_tree_past_the_directory_bound_makes_the_record_incomplete() {
        let (dir, repo, _) = world("dirs");
        let hooks = repo.join(".git/hooks");
        for i in 0..=MAX_DIRS {
            std::fs::create_dir_all(hooks.join(format!("d{i}"))).unwrap();
        }
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();
        assert_eq!(
            guard.incomplete.as_deref(),
            Some("more than 512 directories under .git")
        );
        // an incomplete record removes nothing it did not see before, and still restores
        // what it recorded
        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        let restored = guard.restore();
        assert_eq!(restored.changed, vec![".git/config".to_owned()]);
        assert!(hooks.join("pre-commit").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_later_record_takes_unchanged_files_from_the_cache_and_reads_changed_ones() {
        let (dir, repo, _) = world("cache");
        let hooks = repo.join(".git/hooks");
        let cache = RecordCache::default();
        let hooks_fd = nf::open_dir(
            &std::fs::File::open(repo.join(".git")).unwrap(),
            OsStr::new("hooks"),
        )
        .unwrap();
        let name = OsStr::new("pre-push.sample");
        let st = nf::stat_at(&hooks_fd, name).unwrap().unwrap();
        // a file written just now is not kept: a write within the same tick would not show
        cache.read(&hooks_fd, name, &st, st.st_ctime).unwrap();
        assert!(cache.inner.lock().unwrap().files.is_empty());
        // read as if well after it was written: kept, and taken from the cache while its stamp
        // holds (the cached bytes are swapped to prove the file is not read again)
        cache.read(&hooks_fd, name, &st, st.st_ctime + 10).unwrap();
        let key = nf::id(&st);
        cache
            .inner
            .lock()
            .unwrap()
            .files
            .get_mut(&key)
            .unwrap()
            .0
            .bytes = Arc::from(&b"cached"[..]);
        let file = |g: &GitGuard| match &g.top {
            Top::Dir { tree, .. } => match &tree[OsStr::new("hooks")] {
                Node::Dir { children, .. } => match &children[name] {
                    Node::File(e) => e.bytes.to_vec(),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        let guard = GitGuard::record(&repo, &cache).unwrap();
        assert_eq!(file(&guard), b"cached");
        // a write gives the file another stamp: read again
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\necho changed\n").unwrap();
        let guard = GitGuard::record(&repo, &cache).unwrap();
        assert_eq!(file(&guard), b"#!/bin/sh\necho changed\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
