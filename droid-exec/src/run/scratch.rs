//! A run's private directory (mode 0700): the prompt file (0600), droid's `TMPDIR` (droid litters
//! `droid-terminal-*` and `droid-bg-*.out` there), and the snapshot's temporary git index and
//! objects. Removed when the run ends.

use std::io::Write as _;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// The directory; deleted on drop.
#[derive(Debug)]
pub(crate) struct Scratch {
    path: PathBuf,
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
        let me = Self { path };
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(me.tmp())
            .map_err(io("create directory", &me.tmp()))?;
        Ok(me)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// droid's TMPDIR.
    pub(crate) fn tmp(&self) -> PathBuf {
        self.path.join("tmp")
    }

    /// Write a private file and return its path.
    pub(crate) fn write(&self, name: &str, content: &[u8]) -> Result<PathBuf, EngineError> {
        let p = self.path.join(name);
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&p)
            .map_err(io("create", &p))?;
        f.write_all(content).map_err(io("write", &p))?;
        Ok(p)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        // best effort: a failure leaves a private directory in the temp dir, nothing worse
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
