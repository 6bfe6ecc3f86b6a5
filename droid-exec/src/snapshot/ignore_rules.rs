//! Which untracked paths git ignores, decided the way `git status` decides while it walks the
//! work tree top-down: the `.gitignore` of the deepest directory first, then each parent's up to
//! the top level, then `$GIT_DIR/info/exclude`, then `core.excludesFile`; the first file with a
//! matching pattern decides (its last matching pattern: ignore, or `!` re-include). A directory
//! found ignored is not entered at all, so nothing below it can be re-included, as in git.
//!
//! Pattern matching is the `ignore` crate's (ripgrep's gitignore globs); this module only
//! stacks the files in git's order. Key choice: the stack is a persistent list shared by the
//! walk's threads (a directory's rules are its parent's plus its own file), so entering a
//! directory costs nothing unless it holds a `.gitignore`.

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;
use std::sync::Arc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The rules in force in one directory: its own `.gitignore` (if any) and its parent's rules.
#[derive(Debug, Clone, Default)]
pub(crate) struct Rules {
    /// The deepest `.gitignore` in force; `None` when no directory on the way has one.
    top: Option<Arc<Level>>,
    /// `info/exclude` and `core.excludesFile`, in that order, matched with paths relative to
    /// the top level.
    base: Arc<Vec<Gitignore>>,
}

/// One directory's `.gitignore`.
#[derive(Debug)]
struct Level {
    /// The directory, relative to the top level, with a trailing `/` (empty at the top).
    dir: Vec<u8>,
    /// Its patterns.
    rules: Gitignore,
    /// The next `.gitignore` up.
    parent: Option<Arc<Level>>,
}

/// Parse `file` (a `.gitignore` or exclude file), its patterns relative to `dir`; an unreadable
/// or missing file has no patterns, a bad pattern is skipped (as git skips it).
fn load(dir: &Path, file: &Path) -> Option<Gitignore> {
    let mut builder = GitignoreBuilder::new(dir);
    // a bad pattern is reported by `add` and left out; the others still count
    let _ = builder.add(file);
    builder.build().ok().filter(|g| !g.is_empty())
}

impl Rules {
    /// The rules at the top level: `exclude_files` (`info/exclude`, then `core.excludesFile`;
    /// missing ones are skipped) matched relative to `toplevel`.
    pub(crate) fn base(toplevel: &Path, exclude_files: &[&Path]) -> Self {
        let base = exclude_files
            .iter()
            .filter_map(|f| load(toplevel, f))
            .collect();
        Self {
            top: None,
            base: Arc::new(base),
        }
    }

    /// These rules with the `.gitignore` at `file` added for the directory `dir` (relative to
    /// the top level, with a trailing `/`, empty at the top), `abs_dir` being that directory.
    #[must_use]
    pub(crate) fn enter(&self, dir: &[u8], abs_dir: &Path, file: &Path) -> Self {
        match load(abs_dir, file) {
            None => self.clone(),
            Some(rules) => Self {
                top: Some(Arc::new(Level {
                    dir: dir.to_vec(),
                    rules,
                    parent: self.top.clone(),
                })),
                base: Arc::clone(&self.base),
            },
        }
    }

    /// Whether `path` (relative to the top level, no trailing `/`) is ignored.
    pub(crate) fn ignored(&self, path: &[u8], is_dir: bool) -> bool {
        let mut level = self.top.as_deref();
        while let Some(l) = level {
            let rel = path.strip_prefix(l.dir.as_slice()).unwrap_or(path);
            match l.rules.matched(Path::new(OsStr::from_bytes(rel)), is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
            level = l.parent.as_deref();
        }
        let whole = Path::new(OsStr::from_bytes(path));
        for rules in self.base.iter() {
            match rules.matched(whole, is_dir) {
                Match::Ignore(_) => return true,
                Match::Whitelist(_) => return false,
                Match::None => {}
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deeper_files_decide_first_and_negation_re_includes() {
        let dir = std::env::temp_dir().join(format!("ignore-rules-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        std::fs::write(dir.join(".gitignore"), "*.log\nbuild/\n/top-only\n").unwrap();
        std::fs::write(dir.join("sub/.gitignore"), "!keep.log\nlocal\n").unwrap();
        std::fs::write(dir.join("exclude"), "secret\n").unwrap();
        let exclude = dir.join("exclude");
        let rules = Rules::base(&dir, &[exclude.as_path()]);
        let rules = rules.enter(b"", &dir, &dir.join(".gitignore"));
        assert!(rules.ignored(b"a.log", false));
        assert!(rules.ignored(b"build", true));
        assert!(!rules.ignored(b"build", false), "dir-only pattern");
        assert!(rules.ignored(b"top-only", false));
        assert!(rules.ignored(b"secret", false));
        assert!(!rules.ignored(b"a.txt", false));
        let sub = rules.enter(b"sub/", &dir.join("sub"), &dir.join("sub/.gitignore"));
        assert!(sub.ignored(b"sub/x.log", false));
        assert!(!sub.ignored(b"sub/keep.log", false));
        assert!(sub.ignored(b"sub/local", false));
        assert!(!sub.ignored(b"sub/top-only", false), "anchored to the top");
        assert!(sub.ignored(b"sub/deeper/secret", false));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
