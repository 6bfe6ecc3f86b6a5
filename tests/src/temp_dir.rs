//! A temporary directory that is deleted when dropped (a few lines instead of a dependency).

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
        let nanos = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let name = format!("{prefix}-{}-{nanos}-{n}", std::process::id());
        let path = std::env::temp_dir().join(name);
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
