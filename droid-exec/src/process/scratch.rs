//! A run's private directory (mode 0700): the prompt file (0600), droid's `TMPDIR` (droid litters
//! `droid-terminal-*` and `droid-bg-*.out` there), and the snapshot's temporary git index and
//! objects. Removed when the run ends.
//!
//! Or emptied and kept for the engine's next run ([`ScratchPool`]), when the run proved that
//! none of its processes is left (nothing can write there any more). A long-lived front-end
//! runs many short runs back to back, and making and removing two directories and a file per
//! run was the costliest thing a run did to the file system: ext4 looks for a free inode past
//! every inode freed in the last half minute, so under load each `mkdir` cost more the longer
//! the load lasted (measured: a tenth of the bridge's CPU). The kept directory keeps `tmp/` and a
//! regular `prompt.md` (rewritten in place by the next run); everything else in it is removed.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, MetadataExt as _, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::error::EngineError;

static NEXT: AtomicU64 = AtomicU64::new(0);

/// A unique id for a run within this host: pid, time and a counter.
pub(crate) fn unique_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!(
        "{}-{nanos:x}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// The directory; deleted on drop, or emptied and given back to its pool when the run marked it
/// [`Scratch::reusable`].
#[derive(Debug)]
pub(crate) struct Scratch {
    path: PathBuf,
    pool: Option<Arc<ScratchPool>>,
    reusable: bool,
}

/// Most emptied directories a pool keeps (more runs at once make more; the rest are removed).
const POOL_CAP: usize = 16;

/// Emptied scratch directories of one engine, for its next runs; removed with the pool.
#[derive(Debug, Default)]
pub(crate) struct ScratchPool {
    dirs: Mutex<Vec<PathBuf>>,
}

impl ScratchPool {
    /// A kept directory under `root`, if there is one.
    fn take(&self, root: &Path) -> Option<PathBuf> {
        let mut dirs = self.dirs.lock().ok()?;
        let i = dirs.iter().rposition(|d| d.parent() == Some(root))?;
        Some(dirs.swap_remove(i))
    }

    fn give(&self, dir: PathBuf) {
        let refused = match self.dirs.lock() {
            Ok(mut dirs) if dirs.len() < POOL_CAP => {
                dirs.push(dir);
                None
            }
            _ => Some(dir),
        };
        if let Some(dir) = refused {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

impl Drop for ScratchPool {
    fn drop(&mut self) {
        if let Ok(dirs) = self.dirs.get_mut() {
            for d in dirs.drain(..) {
                let _ = std::fs::remove_dir_all(d);
            }
        }
    }
}

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EngineError {
    EngineError::io(action, path)
}

impl Scratch {
    pub(crate) fn create(root: &Path, id: &str) -> Result<Self, EngineError> {
        let path = root.join(format!("droid-executor-{id}"));
        std::fs::DirBuilder::new()
            .mode(0o700)
            .recursive(false)
            .create(&path)
            .map_err(io("create directory", &path))?;
        let me = Self {
            path,
            pool: None,
            reusable: false,
        };
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(me.tmp())
            .map_err(io("create directory", &me.tmp()))?;
        Ok(me)
    }

    /// A directory from `pool` when it has one under `root`, else a new one; either way given
    /// back to `pool` at the end if the run marks it [`Scratch::reusable`].
    pub(crate) fn from_pool(
        pool: &Arc<ScratchPool>,
        root: &Path,
        id: &str,
    ) -> Result<Self, EngineError> {
        let mut me = match pool.take(root) {
            Some(path) => Self {
                path,
                pool: None,
                reusable: false,
            },
            None => Self::create(root, id)?,
        };
        me.pool = Some(Arc::clone(pool));
        Ok(me)
    }

    /// Nothing the run started is left (proven, not swept for): the directory may be emptied
    /// and kept for another run instead of removed.
    pub(crate) fn reusable(&mut self) {
        self.reusable = true;
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// droid's TMPDIR.
    pub(crate) fn tmp(&self) -> PathBuf {
        self.path.join("tmp")
    }

    /// Write a private file and return its path: a new one, or a regular file of that name
    /// kept from an earlier run in this directory, rewritten in place (anything else there is
    /// removed first).
    pub(crate) fn write(&self, name: &str, content: &[u8]) -> Result<PathBuf, EngineError> {
        let p = self.path.join(name);
        let mut f = match open_kept(&p) {
            Some(f) => f,
            None => {
                let _ = std::fs::remove_file(&p);
                std::fs::OpenOptions::new()
                    .write(true)
                    .create_new(true)
                    .mode(0o600)
                    .open(&p)
                    .map_err(io("create", &p))?
            }
        };
        // written over from the start, then cut to its length: never truncated to zero first,
        // which makes ext4 flush the file at close (`auto_da_alloc`), a write-back per run
        f.write_all(content)
            .and_then(|()| f.set_len(content.len() as u64))
            .map_err(io("write", &p))?;
        Ok(p)
    }
}

/// `path` opened for writing at its start, when it is a regular file of ours with no other name
/// (never through a symlink, never a FIFO or a device).
fn open_kept(path: &Path) -> Option<std::fs::File> {
    let f = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NOFOLLOW.bits() | nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)
        .ok()?;
    let meta = f.metadata().ok()?;
    let ours = meta.is_file() && meta.nlink() == 1 && meta.uid() == nix::unistd::geteuid().as_raw();
    ours.then_some(f)
}

/// Empty `dir` for another run: `tmp/` (emptied) and a regular `prompt.md` stay, the rest goes.
/// `false` when something could not be removed, or `tmp/` is not a directory of its own.
fn empty_for_reuse(dir: &Path) -> bool {
    if !private_dir(dir) {
        return false;
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    let mut tmp_ok = false;
    for e in entries {
        let Ok(e) = e else { return false };
        let path = e.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            return false;
        };
        let name = e.file_name();
        if name == "tmp" && meta.is_dir() {
            tmp_ok = private_dir(&path) && empty_dir(&path);
            if !tmp_ok {
                return false;
            }
            continue;
        }
        if name == "prompt.md" && meta.is_file() && meta.nlink() == 1 {
            continue;
        }
        let removed = if meta.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        if removed.is_err() {
            return false;
        }
    }
    tmp_ok
}

/// `dir` is still a directory of ours that only we may enter (the run could have changed its
/// mode: it could write there).
fn private_dir(dir: &Path) -> bool {
    std::fs::symlink_metadata(dir).is_ok_and(|m| {
        m.is_dir() && m.mode() & 0o7777 == 0o700 && m.uid() == nix::unistd::geteuid().as_raw()
    })
}

/// Remove everything in `dir` (symlinks not followed), keeping `dir`.
fn empty_dir(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.into_iter().all(|e| {
        e.is_ok_and(|e| {
            let path = e.path();
            match e.file_type() {
                Ok(t) if t.is_dir() => std::fs::remove_dir_all(&path).is_ok(),
                Ok(_) => std::fs::remove_file(&path).is_ok(),
                Err(_) => false,
            }
        })
    })
}

/// Remove the scratch directories the process `pid` made under `root` (`droid-executor-<pid>-…`,
/// ours, as [`unique_id`] names them): for the reaper of a front-end that is gone.
pub(crate) fn remove_of(root: &Path, pid: u32) {
    let prefix = format!("droid-executor-{pid}-");
    let Ok(entries) = std::fs::read_dir(root) else {
        return;
    };
    for e in entries.flatten() {
        let ours = e.file_name().to_str().is_some_and(|n| {
            n.strip_prefix(&prefix)
                .is_some_and(|rest| rest.split('-').count() == 2)
        });
        if ours && private_dir(&e.path()) {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if self.reusable
            && let Some(pool) = self.pool.take()
            && empty_for_reuse(&self.path)
        {
            pool.give(std::mem::take(&mut self.path));
            return;
        }
        // best effort: a failure leaves a private directory in the temp dir, nothing worse
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt as _;

    fn root(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("scratch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_reusable_directory_is_emptied_and_taken_again_and_the_pool_removes_it() {
        let root = root("reuse");
        let pool = Arc::new(ScratchPool::default());
        let mut first = Scratch::from_pool(&pool, &root, "a").unwrap();
        let dir = first.path().to_path_buf();
        first.write("prompt.md", b"first prompt, longer").unwrap();
        std::fs::write(first.tmp().join("droid-bg-1.out"), "x").unwrap();
        std::fs::create_dir_all(first.tmp().join("deep/er")).unwrap();
        std::fs::write(dir.join("index"), "x").unwrap();
        std::os::unix::fs::symlink("/etc", dir.join("link")).unwrap();
        first.reusable();
        drop(first);
        // emptied: tmp/ and prompt.md stay, nothing else
        let mut left: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["prompt.md", "tmp"]);
        assert_eq!(std::fs::read_dir(dir.join("tmp")).unwrap().count(), 0);

        let second = Scratch::from_pool(&pool, &root, "b").unwrap();
        assert_eq!(second.path(), dir);
        let p = second.write("prompt.md", b"second").unwrap();
        assert_eq!(std::fs::read(&p).unwrap(), b"second");
        // not marked reusable: removed
        drop(second);
        assert!(!dir.exists());

        let mut third = Scratch::from_pool(&pool, &root, "c").unwrap();
        let kept = third.path().to_path_buf();
        third.reusable();
        drop(third);
        assert!(kept.exists());
        drop(pool);
        assert!(!kept.exists(), "the pool removes what it kept");
        std::fs::remove_dir_all(&root).unwrap();
    }

    #[test]
    fn a_directory_the_run_opened_up_or_a_planted_prompt_is_not_trusted() {
        let root = root("distrust");
        let pool = Arc::new(ScratchPool::default());
        // the run made its directory readable by others: removed, not kept
        let mut s = Scratch::from_pool(&pool, &root, "a").unwrap();
        let dir = s.path().to_path_buf();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        s.reusable();
        drop(s);
        assert!(!dir.exists());
        // tmp/ replaced by a symlink: removed, and the link's target untouched
        let target = root.join("target");
        std::fs::create_dir_all(&target).unwrap();
        std::fs::write(target.join("keep"), "x").unwrap();
        let mut s = Scratch::from_pool(&pool, &root, "b").unwrap();
        let dir = s.path().to_path_buf();
        std::fs::remove_dir(s.tmp()).unwrap();
        std::os::unix::fs::symlink(&target, s.tmp()).unwrap();
        s.reusable();
        drop(s);
        assert!(!dir.exists());
        assert!(target.join("keep").exists());
        // a prompt.md that is a symlink or a second name of another file is replaced, not
        // written through
        let s = Scratch::create(&root, "c").unwrap();
        let outside = root.join("outside");
        std::fs::write(&outside, "mine").unwrap();
        std::os::unix::fs::symlink(&outside, s.path().join("prompt.md")).unwrap();
        s.write("prompt.md", b"prompt").unwrap();
        std::fs::hard_link(&outside, s.path().join("other.md")).unwrap();
        s.write("other.md", b"prompt").unwrap();
        assert_eq!(std::fs::read(&outside).unwrap(), b"mine");
        assert_eq!(
            std::fs::read(s.path().join("prompt.md")).unwrap(),
            b"prompt"
        );
        drop(s);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
