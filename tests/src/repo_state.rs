//! What a user has in a git repository, recorded byte for byte: every file of the working tree
//! (content, executable bit, symlink target), the index, HEAD, the branches and tags other than
//! droid-executor's own (`droid-executor/…`), and the stash. Two records are equal when nothing
//! the user has was touched: a worktree task may add objects, its own branch and its worktree's
//! entry under `.git/worktrees`, nothing else.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

/// One entry of the working tree.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Entry {
    /// A regular file: its bytes and whether it is executable.
    File(Vec<u8>, bool),
    /// A symlink and its target.
    Link(PathBuf),
    /// A directory.
    Dir,
}

/// A repository as its user has it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoState {
    /// The working tree, `.git` left out, by path relative to the top.
    pub tree: BTreeMap<PathBuf, Entry>,
    /// The bytes of `.git/index` (empty when there is none).
    pub index: Vec<u8>,
    /// The bytes of `.git/HEAD`.
    pub head: Vec<u8>,
    /// Every ref file under `.git/refs` but droid-executor's, and `packed-refs` without them.
    pub refs: BTreeMap<PathBuf, Vec<u8>>,
}

impl RepoState {
    /// The state of the repository whose top is `top` (its `.git` a directory).
    ///
    /// # Errors
    /// When the working tree or `.git/HEAD` cannot be read.
    pub fn of(top: &Path) -> std::io::Result<Self> {
        let mut tree = BTreeMap::new();
        walk(top, top, &mut tree)?;
        let git = top.join(".git");
        let mut refs = BTreeMap::new();
        walk_refs(&git, &git.join("refs"), &mut refs);
        if let Ok(packed) = std::fs::read_to_string(git.join("packed-refs")) {
            let kept: String = packed
                .lines()
                .filter(|l| !l.contains("refs/heads/droid-executor/"))
                .map(|l| format!("{l}\n"))
                .collect();
            refs.insert(PathBuf::from("packed-refs"), kept.into_bytes());
        }
        Ok(Self {
            tree,
            index: std::fs::read(git.join("index")).unwrap_or_default(),
            head: std::fs::read(git.join("HEAD"))?,
            refs,
        })
    }
}

fn walk(top: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Entry>) -> std::io::Result<()> {
    let mut entries: Vec<_> = std::fs::read_dir(dir)?.flatten().collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    for e in entries {
        let path = e.path();
        let rel = path.strip_prefix(top).unwrap_or(&path).to_path_buf();
        if rel == Path::new(".git") {
            continue;
        }
        let meta = std::fs::symlink_metadata(&path)?;
        if meta.file_type().is_symlink() {
            out.insert(rel, Entry::Link(std::fs::read_link(&path)?));
        } else if meta.is_dir() {
            out.insert(rel, Entry::Dir);
            walk(top, &path, out)?;
        } else {
            let bytes = std::fs::read(&path)?;
            out.insert(
                rel,
                Entry::File(bytes, meta.permissions().mode() & 0o111 != 0),
            );
        }
    }
    Ok(())
}

fn walk_refs(git: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let path = e.path();
        let rel = path.strip_prefix(git).unwrap_or(&path).to_path_buf();
        if rel.starts_with("refs/heads/droid-executor") {
            continue;
        }
        if path.is_dir() {
            walk_refs(git, &path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.insert(rel, bytes);
        }
    }
}
