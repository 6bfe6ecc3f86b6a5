//! Repository paths: the absolute `repo_root` and the `files_of_interest` that must stay inside it.
//!
//! Normalisation here is lexical (`a/./b/../c` → `a/c`). Whether a path exists, and where a symlink
//! really leads, are facts about the host: they come in through [`PathFacts`], implemented by the
//! engine, so this crate stays free of I/O.

use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// What a path names on the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathKind {
    /// Nothing there (or not reachable).
    Missing,
    /// A directory.
    Dir,
    /// A regular file.
    File,
    /// Something else (socket, device, …).
    Other,
}

/// Host facts the validation rules need. The engine implements it over the real file system;
/// tests implement it over a table.
pub trait PathFacts {
    /// What `path` names, following symlinks.
    fn kind(&self, path: &Path) -> PathKind;
    /// The canonical form of an existing `path` (symlinks resolved), `None` when it does not exist.
    fn canonical(&self, path: &Path) -> Option<PathBuf>;
}

/// Lexically normalise a path: drop `.`, fold `..` into its parent. Returns `None` when a relative
/// path climbs above its start (`../x`, `a/../../x`). For an absolute path `..` at the root stays
/// at the root, as the kernel does.
pub fn normalize(path: &Path) -> Option<PathBuf> {
    let mut out = PathBuf::new();
    let mut depth = 0usize;
    for c in path.components() {
        match c {
            Component::Prefix(p) => out.push(p.as_os_str()),
            Component::RootDir => out.push("/"),
            Component::CurDir => {}
            Component::ParentDir => {
                if depth > 0 {
                    out.pop();
                    depth -= 1;
                } else if !path.is_absolute() {
                    return None;
                }
            }
            Component::Normal(n) => {
                out.push(n);
                depth += 1;
            }
        }
    }
    Some(out)
}

/// The repository the task runs in: an absolute, normalised path. Existence and the allowed-roots
/// rule are checked when the request is parsed with a [`crate::HostCheck`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(extend("minLength" = 1, "pattern" = "^/"))]
pub struct RepoRoot(PathBuf);

impl TryFrom<String> for RepoRoot {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        if value.is_empty() {
            return Err("must not be empty".into());
        }
        if value.contains('\0') {
            return Err("must not contain a NUL character".into());
        }
        let p = Path::new(&value);
        if !p.is_absolute() {
            return Err(format!(
                "must be an absolute path, got {value:?} (droid resolves a relative --cwd against itself and fails silently)"
            ));
        }
        let n = normalize(p).ok_or_else(|| format!("{value:?} cannot be normalised"))?;
        Ok(Self(n))
    }
}

impl From<RepoRoot> for String {
    fn from(v: RepoRoot) -> String {
        v.0.to_string_lossy().into_owned()
    }
}

impl RepoRoot {
    /// The absolute path.
    pub fn as_path(&self) -> &Path {
        &self.0
    }
}

/// A path inside the repository, relative to `repo_root`, normalised, never climbing out of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(try_from = "String", into = "String")]
#[schemars(extend("minLength" = 1))]
pub struct RelPath(PathBuf);

impl RelPath {
    /// Parse `value` against `root`: a relative path, or an absolute one inside `root`.
    ///
    /// # Errors
    /// A message when the path is empty, absolute outside `root`, or climbs out with `..`.
    pub fn parse(value: &str, root: Option<&RepoRoot>) -> Result<Self, String> {
        if value.is_empty() {
            return Err("must not be empty".into());
        }
        if value.contains('\0') {
            return Err("must not contain a NUL character".into());
        }
        let p = Path::new(value);
        if p.is_absolute() {
            let n = normalize(p).ok_or_else(|| format!("{value:?} cannot be normalised"))?;
            let Some(root) = root else {
                return Err("must be relative to repo_root".into());
            };
            return match n.strip_prefix(root.as_path()) {
                Ok(rel) => Ok(Self(rel.to_path_buf())),
                Err(_) => Err(format!(
                    "{value:?} is outside repo_root {:?}",
                    root.as_path()
                )),
            };
        }
        match normalize(p) {
            Some(n) => Ok(Self(n)),
            None => Err(format!("{value:?} escapes repo_root through '..'")),
        }
    }

    /// The relative path (empty for the repository itself).
    pub fn as_path(&self) -> &Path {
        &self.0
    }
}

impl TryFrom<String> for RelPath {
    type Error = String;
    fn try_from(value: String) -> Result<Self, String> {
        Self::parse(&value, None)
    }
}

impl From<RelPath> for String {
    /// The repository itself (`.`, `a/..`, or repo_root written absolute) is written `.`: the
    /// empty string would not parse back.
    fn from(v: RelPath) -> String {
        if v.0.as_os_str().is_empty() {
            return ".".into();
        }
        v.0.to_string_lossy().into_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalises_lexically() {
        assert_eq!(
            normalize(Path::new("a/./b/../c")),
            Some(PathBuf::from("a/c"))
        );
        assert_eq!(normalize(Path::new("../x")), None);
        assert_eq!(normalize(Path::new("a/../../x")), None);
        assert_eq!(normalize(Path::new("/../etc")), Some(PathBuf::from("/etc")));
    }

    #[test]
    fn rel_paths_stay_inside() {
        let root = RepoRoot::try_from("/repo/x".to_string()).unwrap();
        assert_eq!(
            RelPath::parse("src/../lib.rs", Some(&root))
                .unwrap()
                .as_path(),
            Path::new("lib.rs")
        );
        assert_eq!(
            RelPath::parse("/repo/x/src/a.rs", Some(&root))
                .unwrap()
                .as_path(),
            Path::new("src/a.rs")
        );
        assert!(RelPath::parse("/repo/xy/a.rs", Some(&root)).is_err());
        assert!(RelPath::parse("../secret", Some(&root)).is_err());
        assert!(RelPath::parse("/repo/x/../y", Some(&root)).is_err());
    }

    #[test]
    fn repo_root_must_be_absolute() {
        assert!(RepoRoot::try_from("rel/dir".to_string()).is_err());
        assert_eq!(
            RepoRoot::try_from("/a/./b/".to_string()).unwrap().as_path(),
            Path::new("/a/b")
        );
    }
}
