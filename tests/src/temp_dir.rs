//! A temporary directory that is deleted when dropped (a few lines instead of a dependency), in
//! the system temp dir or under a base of the caller's (what a run must not write lives outside
//! the temp dir). Dropped while a failing test unwinds too; what a test binary that died
//! (aborted, killed) left under a base is removed by the next one making a directory there.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Distinguishes directories made by one process in the same nanosecond.
static COUNTER: AtomicU64 = AtomicU64::new(0);

/// A fresh directory under the system temp dir (`$TMPDIR` or `/tmp`), removed with everything in
/// it on drop.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    /// Creates `<tmp>/<prefix>-<pid>-<nanos>-<n>` (mode 0700 on Unix, like `mkdtemp`).
    ///
    /// # Errors
    /// When the directory cannot be created.
    pub fn new(prefix: &str) -> io::Result<TempDir> {
        Self::make(&std::env::temp_dir(), prefix)
    }

    /// Creates `<base>/<prefix>-<pid>-<nanos>-<n>` (`base` made when missing), after removing
    /// the `<prefix>-<pid>-…` directories there of processes that no longer exist: a test
    /// binary that aborted or was killed never dropped its own.
    ///
    /// # Errors
    /// When `base` or the directory cannot be created.
    pub fn new_in(base: &Path, prefix: &str) -> io::Result<TempDir> {
        std::fs::create_dir_all(base)?;
        remove_stale(base, prefix);
        Self::make(base, prefix)
    }

    fn make(base: &Path, prefix: &str) -> io::Result<TempDir> {
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{nanos}-{n}", std::process::id());
        let path = base.join(name);
        let mut builder = std::fs::DirBuilder::new();
        #[cfg(unix)]
        std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
        builder.create(&path)?;
        // Canonical, so it compares equal to what a child process reports as its cwd.
        let path = path.canonicalize()?;
        Ok(TempDir { path })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.path);
    }
}

/// Remove the `<prefix>-<pid>-…` directories of `base` whose process is gone (no `/proc/<pid>`);
/// those of live processes (another test binary running now) stay.
fn remove_stale(base: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(base) else {
        return;
    };
    let start = format!("{prefix}-");
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(&start))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory under a base is gone once a test fails (its panic unwinds through the
    /// guard), and a dead process's leftover is removed by the next directory made there, while
    /// a live process's stays.
    #[test]
    fn a_failing_test_and_a_dead_one_leave_nothing_behind() {
        let base = TempDir::new("temp-dir-base").unwrap();
        let made = std::panic::catch_unwind(|| {
            let dir = TempDir::new_in(base.path(), "case").unwrap();
            std::fs::write(dir.path().join("file"), "x").unwrap();
            std::fs::create_dir(dir.path().join("sub")).unwrap();
            let path = dir.path().to_path_buf();
            assert!(path.is_dir());
            std::panic::panic_any(path);
        });
        let path = made.unwrap_err().downcast::<PathBuf>().unwrap();
        assert!(
            !path.exists(),
            "{} survived the failing test",
            path.display()
        );

        // a pid that existed and is gone: a child of ours, reaped
        #[allow(clippy::disallowed_methods)] // a process whose pid is known to be free
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let dead = child.id();
        child.wait().unwrap();
        let left = base.path().join(format!("case-{dead}-1-0"));
        std::fs::create_dir_all(left.join("sub")).unwrap();
        let live = base.path().join("case-1-1-0");
        std::fs::create_dir(&live).unwrap();
        let other = base.path().join(format!("other-{dead}-1-0"));
        std::fs::create_dir(&other).unwrap();
        let dir = TempDir::new_in(base.path(), "case").unwrap();
        assert!(!left.exists(), "a dead test binary's directory was kept");
        assert!(live.exists(), "pid 1 is alive: its directory stays");
        assert!(other.exists(), "another prefix is not ours to remove");
        drop(dir);
    }
}
