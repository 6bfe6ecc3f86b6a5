//! [`PathFacts`] over the real file system, for the contract's host checks.

use std::path::{Path, PathBuf};

use droid_contract::{PathFacts, PathKind};

/// The local file system.
#[derive(Debug, Default, Clone, Copy)]
pub struct FsFacts;

impl PathFacts for FsFacts {
    fn kind(&self, path: &Path) -> PathKind {
        match std::fs::metadata(path) {
            Ok(m) if m.is_dir() => PathKind::Dir,
            Ok(m) if m.is_file() => PathKind::File,
            Ok(_) => PathKind::Other,
            Err(_) => PathKind::Missing,
        }
    }

    fn canonical(&self, path: &Path) -> Option<PathBuf> {
        crate::real_path::canonical(path).ok()
    }
}
