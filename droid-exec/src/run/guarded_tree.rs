//! A recorded tree of files that a run must leave as they were, put back after the run without
//! ever following a symlink: what [`crate::run::git_guard`] (what git runs later) and
//! [`crate::run::state_guard`] (the agent CLIs' own configuration) are built on. A tree is
//! recorded from a directory opened before the run ([`record_tree`], [`record_entry`]) and made
//! as it was again with [`reconcile`], one name at a time relative to directories opened with
//! `O_NOFOLLOW` ([`crate::no_follow`]): a symlink, a FIFO or a device found where a file or
//! a directory was is removed and the recorded entry put back, never opened through.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};

use nix::sys::stat::FileStat;

use crate::no_follow::{self as nf, Kind};

/// Most files recorded in all (a fresh clone has 14 hook samples).
pub(crate) const MAX_FILES: usize = 512;
/// Most directories recorded in all.
pub(crate) const MAX_DIRS: usize = 512;
/// Most bytes recorded in all (a fresh clone's samples take about 25 KiB).
pub(crate) const MAX_BYTES: u64 = 16 * 1024 * 1024;
/// Most entries removed from one planted directory.
pub(crate) const REMOVE_BUDGET: usize = 4096;
/// Most files a [`RecordCache`] keeps (then it starts again empty).
pub(crate) const CACHE_FILES: usize = 4096;
/// Most bytes a [`RecordCache`] keeps (then it starts again empty).
pub(crate) const CACHE_BYTES: u64 = 16 * 1024 * 1024;

/// One recorded file: its content and permission bits, and its inode's identity and times.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) bytes: Arc<[u8]>,
    pub(crate) mode: u32,
    pub(crate) stamp: Stamp,
}

/// What the kernel changes on every write, rename over, chmod or replacement of a file: device,
/// inode, size, and modification and change times. The change time cannot be set from user
/// space, so an equal stamp means an untouched file, unless the file changed within the clock's
/// tick of the record ([`Stamp::settled`] says whether that can be ruled out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Stamp {
    pub(crate) dev: u64,
    pub(crate) ino: u64,
    pub(crate) size: i64,
    pub(crate) mtime: (i64, i64),
    pub(crate) ctime: (i64, i64),
}

impl Stamp {
    pub(crate) fn of(st: &FileStat) -> Self {
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
    pub(crate) fn settled(&self, now: i64) -> bool {
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
    pub(crate) inner: Mutex<CacheInner>,
}

#[derive(Debug, Default)]
pub(crate) struct CacheInner {
    pub(crate) files: std::collections::HashMap<(u64, u64), (Entry, i64)>,
    pub(crate) bytes: u64,
}

impl RecordCache {
    /// The regular file `name` in `dir` (whose metadata, not followed, is `st`): from the cache
    /// when unchanged since a settled read, else read now (and kept when settled).
    pub(crate) fn read(
        &self,
        dir: &OwnedFd,
        name: &OsStr,
        st: &FileStat,
        now: i64,
    ) -> Option<Entry> {
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
pub(crate) enum Node {
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
    /// Nothing: a directory the run creates is emptied but for these names, which the CLI
    /// itself writes there (Codex's `skills/.system`); anything else is removed.
    AbsentExcept(&'static [&'static str]),
    /// A FIFO, a socket, a device, or a file past the record's bounds: left as it is.
    Other,
}

/// How much a record may still take.
#[derive(Debug)]
pub(crate) struct Budget {
    pub(crate) files: usize,
    pub(crate) dirs: usize,
    pub(crate) bytes: u64,
    pub(crate) incomplete: Option<String>,
}

impl Budget {
    /// The whole of [`MAX_FILES`], [`MAX_DIRS`] and [`MAX_BYTES`].
    pub(crate) fn full() -> Self {
        Self {
            files: MAX_FILES,
            dirs: MAX_DIRS,
            bytes: MAX_BYTES,
            incomplete: None,
        }
    }
}

/// What a guard's restore found and did.
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

pub(crate) fn now_secs() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}

/// Record a directory whose every entry is guarded (`hooks`), with everything under it.
pub(crate) fn record_tree(
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
pub(crate) fn record_entry(
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
pub(crate) fn read(dir: &OwnedFd, name: &OsStr) -> Option<Entry> {
    let (bytes, st) = nf::read_at(dir, name, MAX_BYTES).ok()??;
    Some(Entry {
        bytes: bytes.into(),
        mode: st.st_mode & 0o7777,
        stamp: Stamp::of(&st),
    })
}

pub(crate) fn same_content(a: &Entry, b: &Entry) -> bool {
    a.bytes == b.bytes && a.mode == b.mode
}

/// Where [`reconcile`] reports.
pub(crate) struct Ctx<'a> {
    pub(crate) out: &'a mut Restored,
    pub(crate) recorded_at: i64,
    /// The record saw everything: entries it did not see may be removed.
    pub(crate) complete: bool,
}

/// Make the guarded entries of `dir` (shown as `shown`) what `recorded` says; with `whole`, also
/// remove every entry not recorded.
pub(crate) fn reconcile(
    dir: &OwnedFd,
    shown: &str,
    recorded: &BTreeMap<OsString, Node>,
    whole: bool,
    ctx: &mut Ctx<'_>,
) {
    let path = |name: &OsStr| {
        if shown.is_empty() {
            name.to_string_lossy().into_owned()
        } else {
            format!("{shown}/{}", name.to_string_lossy())
        }
    };
    if whole && ctx.complete {
        match nf::list(dir, MAX_FILES * 4) {
            Ok((names, _)) => {
                for n in names {
                    // an empty directory (an agent CLI makes its own, Claude Code's
                    // `plugins/store`) holds nothing anything could run: left as it is
                    if recorded.contains_key(&n) || holds_no_file(dir, &n) {
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
            // a directory where there was nothing: an agent CLI makes its own empty ones
            // (droid `~/.factory/droids`) on every run; what is put in it is removed
            Node::Absent | Node::AbsentExcept(_) if now_kind == Some(Kind::Dir) => {
                // what the CLI itself puts there (`keep`) is left as it is
                let kept: BTreeMap<OsString, Node> = match node {
                    Node::AbsentExcept(keep) => keep
                        .iter()
                        .map(|k| (OsString::from(k), Node::Other))
                        .collect(),
                    _ => BTreeMap::new(),
                };
                match nf::open_dir(dir, name) {
                    Ok(sub) => reconcile(&sub, &path(name), &kept, true, ctx),
                    Err(e) => ctx.out.failed.push(format!("{}: {e}", path(name))),
                }
            }
            Node::AbsentExcept(_) => {
                if now.is_some() {
                    ctx.out.changed.push(path(name));
                    let mut budget = REMOVE_BUDGET;
                    if let Err(e) = nf::remove_at(dir, name, &mut budget) {
                        ctx.out.failed.push(format!("{}: {e}", path(name)));
                    }
                }
            }
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

/// Whether `name` in `dir` is a directory with no file anywhere under it (at most 64 entries
/// looked at; more counts as holding files).
fn holds_no_file(dir: &OwnedFd, name: &OsStr) -> bool {
    fn walk(dir: &OwnedFd, name: &OsStr, budget: &mut usize) -> bool {
        let Ok(Some(st)) = nf::stat_at(dir, name) else {
            return false;
        };
        if Kind::of(&st) != Kind::Dir {
            return false;
        }
        let Ok(sub) = nf::open_dir(dir, name) else {
            return false;
        };
        let Ok((names, more)) = nf::list(&sub, *budget) else {
            return false;
        };
        if more {
            return false;
        }
        *budget = budget.saturating_sub(names.len());
        names.iter().all(|n| walk(&sub, n, budget))
    }
    let mut budget = 64;
    walk(dir, name, &mut budget)
}

/// Put `entry` back as `name` in `dir`: whatever is there (a symlink, a directory, another
/// file) goes first, never followed.
pub(crate) fn replace_with_file(dir: &OwnedFd, name: &OsStr, entry: &Entry) -> std::io::Result<()> {
    let mut budget = REMOVE_BUDGET;
    nf::remove_at(dir, name, &mut budget)?;
    nf::create_at(dir, name, &entry.bytes, entry.mode)
}
