//! Whether a work tree holds exactly what its index records, proven in-process: what spares a
//! worktree task's `git add -A` and `git write-tree` (two processes each time, the larger part of
//! a worktree run's fixed cost on a small repository) when the user's tree is HEAD's at
//! submission, and when the agent changed nothing.
//!
//! Proven means, as `git status` would say it and more strictly: every entry of the index is a
//! plain stage-0 file or symbolic link (no conflict, intent-to-add, skip-worktree,
//! assume-unchanged or gitlink entry) whose file still has the stat data the index cached,
//! older than the index itself (git's racy-clean rule: a file modified in the tick the index
//! was written is not trusted), and every other path of the work tree is ignored (the
//! `.gitignore` files, `info/exclude`, `core.excludesFile`, as [`Rules`] applies them). Anything
//! else, or anything this module is unsure of (an unreadable directory, an untracked directory
//! that is not ignored, a path below an ignored directory, a time or entry budget spent), is
//! "not proven", and git is asked as before: the answer is never guessed.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::os::unix::fs::MetadataExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::snapshot::git_index::{IndexEntry, parse_with_tree};
use crate::snapshot::ignore_rules::Rules;

/// The largest index read (a 100k-file index is ~10 MiB).
const MAX_INDEX_BYTES: u64 = 256 * 1024 * 1024;
/// Most directory entries looked at before giving up (then git decides).
const MAX_ENTRIES: usize = 2_000_000;
/// Longest the check may take before giving up (then git decides).
const MAX_TIME: Duration = Duration::from_secs(5);

/// A work tree proven to hold what its index records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Unchanged {
    /// The tree the index records (its cache tree's root, in hex), when the index has it
    /// valid: then it is the tree `git add -A && git write-tree` would write.
    pub(crate) tree: Option<String>,
}

/// Whether the work tree at `top` holds what `index` records, nothing else that is not
/// ignored (`excludes`: `info/exclude` and `core.excludesFile`). `None`: not proven.
/// Blocking: call it from a blocking thread.
pub(crate) fn unchanged(top: &Path, index: &Path, excludes: &[PathBuf]) -> Option<Unchanged> {
    let until = Instant::now() + MAX_TIME;
    let meta = std::fs::metadata(index).ok()?;
    if meta.len() > MAX_INDEX_BYTES {
        return None;
    }
    let index_mtime = (meta.mtime(), meta.mtime_nsec());
    let bytes = std::fs::read(index).ok()?;
    let (parsed, tree) = parse_with_tree(&bytes).ok()?;
    let entries = parsed.entries;
    if !entries.iter().all(plain) {
        return None;
    }
    for (n, e) in entries.iter().enumerate() {
        if n.is_multiple_of(4096) && Instant::now() > until {
            return None;
        }
        if !same_file(top, e, index_mtime) {
            return None;
        }
    }
    if !nothing_else(top, &entries, excludes, until) {
        return None;
    }
    Some(Unchanged {
        tree: tree.map(|t| hex(&t)),
    })
}

/// An entry git would stage as it is: stage 0, a file or a symbolic link, no special flag.
fn plain(e: &IndexEntry) -> bool {
    e.stage == 0
        && !e.intent_to_add
        && !e.skip_worktree
        && !e.assume_unchanged
        && matches!(e.mode, 0o100_644 | 0o100_755 | 0o120_000)
}

/// Whether the file of `e` still has the stat data the index cached, from before the index
/// was written.
fn same_file(top: &Path, e: &IndexEntry, index_mtime: (i64, i64)) -> bool {
    let Ok(meta) = std::fs::symlink_metadata(top.join(OsStr::from_bytes(&e.path))) else {
        return false;
    };
    let low = |v: i64| u32::try_from(v & 0xffff_ffff).unwrap_or(0);
    let low_u = |v: u64| u32::try_from(v & 0xffff_ffff).unwrap_or(0);
    let kind_ok = if e.mode == 0o120_000 {
        meta.file_type().is_symlink()
    } else {
        meta.file_type().is_file() && ((e.mode & 0o111 != 0) == (meta.mode() & 0o111 != 0))
    };
    let mtime = (meta.mtime(), meta.mtime_nsec());
    kind_ok
        && e.stat.size == low_u(meta.size())
        && e.stat.mtime == (low(mtime.0), low(mtime.1))
        && e.stat.ctime == (low(meta.ctime()), low(meta.ctime_nsec()))
        && e.stat.ino == low_u(meta.ino())
        && mtime < index_mtime
}

/// Whether every path of the work tree that is not an index entry (or a directory holding
/// one) is ignored; `.git` at the top is git's.
fn nothing_else(top: &Path, entries: &[IndexEntry], excludes: &[PathBuf], until: Instant) -> bool {
    // the directories holding entries, each with its trailing `/` (sorted: binary search)
    let mut dirs: Vec<&[u8]> = Vec::new();
    for e in entries {
        let mut at = 0;
        while let Some(slash) = e
            .path
            .get(at..)
            .and_then(|r| r.iter().position(|&b| b == b'/'))
        {
            at += slash + 1;
            dirs.push(&e.path[..at]);
        }
    }
    dirs.sort_unstable();
    dirs.dedup();
    let tracked = |p: &[u8]| {
        entries
            .binary_search_by(|e| e.path.as_slice().cmp(p))
            .is_ok()
    };
    let holds = |d: &[u8]| dirs.binary_search(&d).is_ok();
    let files: Vec<&Path> = excludes.iter().map(PathBuf::as_path).collect();
    let base = Rules::base(top, &files).enter(b"", top, &top.join(".gitignore"));
    let mut stack: Vec<(Vec<u8>, Rules)> = vec![(Vec::new(), base)];
    let mut seen = 0_usize;
    while let Some((dir, rules)) = stack.pop() {
        let abs = top.join(OsStr::from_bytes(&dir));
        let Ok(listing) = std::fs::read_dir(&abs) else {
            return false;
        };
        for entry in listing {
            seen += 1;
            if seen > MAX_ENTRIES || (seen.is_multiple_of(4096) && Instant::now() > until) {
                return false;
            }
            let Ok(entry) = entry else {
                return false;
            };
            let name = entry.file_name();
            if dir.is_empty() && name == ".git" {
                continue;
            }
            let Ok(kind) = entry.file_type() else {
                return false;
            };
            let mut rel = dir.clone();
            rel.extend_from_slice(name.as_bytes());
            if kind.is_dir() {
                let mut sub = rel.clone();
                sub.push(b'/');
                if holds(&sub) {
                    let sub_abs = abs.join(&name);
                    let inner = rules.enter(&sub, &sub_abs, &sub_abs.join(".gitignore"));
                    stack.push((sub, inner));
                } else if !rules.ignored(&rel, true) {
                    // untracked and not ignored: `git add -A` may add what it holds
                    return false;
                }
            } else if !tracked(&rel) && !rules.ignored(&rel, false) {
                return false;
            }
        }
    }
    true
}

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write as _;
    bytes.iter().fold(String::with_capacity(40), |mut s, b| {
        let _ = write!(s, "{b:02x}");
        s
    })
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        #[allow(clippy::disallowed_methods)]
        let ok = Command::new("git")
            .args(["-c", "user.name=t", "-c", "user.email=t@t.invalid"])
            .args(args)
            .current_dir(dir)
            .output()
            .unwrap();
        assert!(ok.status.success(), "{args:?}: {ok:?}");
    }

    fn head_tree(dir: &Path) -> String {
        #[allow(clippy::disallowed_methods)]
        let out = Command::new("git")
            .args(["rev-parse", "HEAD^{tree}"])
            .current_dir(dir)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    }

    #[test]
    fn a_committed_tree_is_proven_and_any_change_is_not() {
        let dir = std::env::temp_dir().join(format!("wt-clean-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("src/deep")).unwrap();
        std::fs::create_dir_all(dir.join("target/debug")).unwrap();
        std::fs::write(dir.join(".gitignore"), "target/\n*.log\n").unwrap();
        std::fs::write(dir.join("src/a.rs"), "fn a() {}\n").unwrap();
        std::fs::write(dir.join("src/deep/b.rs"), "fn b() {}\n").unwrap();
        std::fs::write(dir.join("target/debug/out"), "x").unwrap();
        std::os::unix::fs::symlink("src/a.rs", dir.join("link")).unwrap();
        git(&dir, &["init", "-q"]);
        git(&dir, &["add", "-A"]);
        git(&dir, &["commit", "-qm", "one"]);
        let index = dir.join(".git/index");
        // the index as if written well after the files: none of them racily clean
        let later = || {
            std::thread::sleep(Duration::from_millis(20));
            let f = std::fs::OpenOptions::new()
                .write(true)
                .open(&index)
                .unwrap();
            f.set_modified(std::time::SystemTime::now()).unwrap();
        };
        later();
        let proven = unchanged(&dir, &index, &[]).expect("a clean tree is proven");
        assert_eq!(proven.tree, Some(head_tree(&dir)));
        // ignored files do not matter
        std::fs::write(dir.join("x.log"), "log").unwrap();
        assert!(unchanged(&dir, &index, &[]).is_some());
        // an untracked file does
        std::fs::write(dir.join("src/new.rs"), "").unwrap();
        assert_eq!(unchanged(&dir, &index, &[]), None);
        std::fs::remove_file(dir.join("src/new.rs")).unwrap();
        // an untracked directory that is not ignored does
        std::fs::create_dir(dir.join("docs")).unwrap();
        assert_eq!(unchanged(&dir, &index, &[]), None);
        std::fs::remove_dir(dir.join("docs")).unwrap();
        assert!(unchanged(&dir, &index, &[]).is_some());
        // a file ignored only by info/exclude
        std::fs::write(dir.join("local.txt"), "").unwrap();
        assert_eq!(unchanged(&dir, &index, &[]), None);
        let exclude = dir.join(".git/info/exclude");
        std::fs::create_dir_all(exclude.parent().unwrap()).unwrap();
        std::fs::write(&exclude, "local.txt\n").unwrap();
        assert!(unchanged(&dir, &index, std::slice::from_ref(&exclude)).is_some());
        // an edit, even of the same size
        std::fs::write(dir.join("src/deep/b.rs"), "fn c() {}\n").unwrap();
        assert_eq!(unchanged(&dir, &index, &[]), None);
        git(&dir, &["add", "-A"]);
        later();
        // staged but not committed: proven, and the cache tree is no longer HEAD's
        let staged = unchanged(&dir, &index, std::slice::from_ref(&exclude)).unwrap();
        assert_ne!(staged.tree, Some(head_tree(&dir)));
        // a deleted file, a mode change
        std::fs::remove_file(dir.join("src/a.rs")).unwrap();
        assert_eq!(unchanged(&dir, &index, &[]), None);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
