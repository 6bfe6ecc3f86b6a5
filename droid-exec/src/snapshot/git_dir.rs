//! Where the git work tree holding a run's root keeps its index and configuration, found by
//! reading the file system as git's own discovery does (a `.git` directory, or a `.git` file
//! saying `gitdir: …`, in the root or one of its ancestors; `commondir` for linked worktrees),
//! without starting git: `git rev-parse` alone cost 1.6 ms a run, more behind a shell shim.
//!
//! Only the plain, common layout is taken here. Anything this module cannot read with
//! certainty ([`Found::Unusable`]: `GIT_DIR` and friends in the environment, a bare or
//! `core.worktree` repository, another object format, configuration `include`s, a repository
//! or global `core.excludesFile` it cannot resolve) sends the snapshot to its git-process path,
//! which asks git itself.

use std::ffi::OsString;
use std::os::unix::ffi::{OsStrExt as _, OsStringExt as _};
use std::path::{Path, PathBuf};

/// The largest configuration or `.git` file read (a larger one is not plain: ask git).
const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// Variables that move git's directories: when any is set, git itself must say where things are.
const GIT_LOCATION_VARS: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_CONFIG",
    "GIT_CONFIG_PARAMETERS",
    "GIT_CONFIG_COUNT",
];

/// A work tree located.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GitDirs {
    /// The top level of the work tree.
    pub(crate) toplevel: PathBuf,
    /// The root's path inside the work tree, with a trailing `/`; empty at the top.
    pub(crate) prefix: Vec<u8>,
    /// The repository's (or linked worktree's) git directory: `index`, `HEAD`.
    pub(crate) git_dir: PathBuf,
    /// The common directory: `config`, `objects`, `info/exclude`.
    pub(crate) common_dir: PathBuf,
    /// `core.excludesFile` (or its default, `$XDG_CONFIG_HOME/git/ignore`), whether or not it
    /// exists.
    pub(crate) excludes_file: Option<PathBuf>,
}

/// What looking for a work tree found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Found {
    /// A plain work tree.
    Repo(GitDirs),
    /// No `.git` in the root or above it.
    NotARepo,
    /// A work tree this module does not read with certainty: why (git is asked instead).
    Unusable(String),
}

fn var<'a>(env: &'a [(OsString, OsString)], name: &str) -> Option<&'a OsString> {
    env.iter()
        .rev()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v)
        .filter(|v| !v.is_empty())
}

/// Read a small file whole, `None` when it is missing, unreadable or over [`MAX_CONFIG_BYTES`].
fn read_small(path: &Path) -> Option<Vec<u8>> {
    use std::io::Read as _;
    let file = std::fs::File::open(path).ok()?;
    let mut out = Vec::new();
    file.take(MAX_CONFIG_BYTES + 1).read_to_end(&mut out).ok()?;
    (u64::try_from(out.len()).ok()? <= MAX_CONFIG_BYTES).then_some(out)
}

/// The git directory a `.git` file points to (`gitdir: <path>`, relative to `dir`).
fn gitdir_file(dir: &Path, text: &[u8]) -> Option<PathBuf> {
    let line = text.split(|b| *b == b'\n').next()?;
    let target = line.strip_prefix(b"gitdir:")?.trim_ascii();
    if target.is_empty() {
        return None;
    }
    let target = PathBuf::from(OsString::from_vec(target.to_vec()));
    Some(dir.join(target))
}

/// Find the work tree holding `root` (absolute, symlinks resolved), with `env` the environment
/// git would run with.
pub(crate) fn locate(root: &Path, env: &[(OsString, OsString)]) -> Found {
    if let Some(name) = GIT_LOCATION_VARS.iter().find(|n| var(env, n).is_some()) {
        return Found::Unusable(format!("{name} is set"));
    }
    if root.components().any(|c| c.as_os_str() == ".git") {
        return Found::Unusable("the root lies inside a git directory".into());
    }
    for dir in root.ancestors() {
        let dot_git = dir.join(".git");
        let Ok(meta) = std::fs::symlink_metadata(&dot_git) else {
            continue;
        };
        let git_dir = if meta.is_dir() {
            dot_git
        } else if meta.is_file() {
            match read_small(&dot_git).and_then(|t| gitdir_file(dir, &t)) {
                Some(d) => d,
                None => {
                    return Found::Unusable(format!("{} is not a gitdir file", dot_git.display()));
                }
            }
        } else {
            return Found::Unusable(format!(
                "{} is neither a file nor a directory",
                dot_git.display()
            ));
        };
        if !git_dir.join("HEAD").is_file() {
            return Found::Unusable(format!("{} has no HEAD", git_dir.display()));
        }
        let common_dir = match read_small(&git_dir.join("commondir")) {
            None => git_dir.clone(),
            Some(text) => {
                let rel = PathBuf::from(OsString::from_vec(text.trim_ascii().to_vec()));
                git_dir.join(rel)
            }
        };
        let Ok(rel) = root.strip_prefix(dir) else {
            return Found::Unusable("the root is not below its work tree".into());
        };
        let mut prefix = rel.as_os_str().as_bytes().to_vec();
        if !prefix.is_empty() {
            prefix.push(b'/');
        }
        let excludes_file = match excludes_file(&common_dir, &git_dir, env) {
            Ok(f) => f,
            Err(why) => return Found::Unusable(why),
        };
        return Found::Repo(GitDirs {
            toplevel: dir.to_path_buf(),
            prefix,
            git_dir,
            common_dir,
            excludes_file,
        });
    }
    Found::NotARepo
}

/// One `key = value` setting of a git configuration file: section (lowercased, subsection
/// kept), key (lowercased), raw value.
pub(crate) fn settings(text: &[u8]) -> Vec<(String, String, String)> {
    let mut out = Vec::new();
    let mut section = String::new();
    for line in text.split(|b| *b == b'\n') {
        let line = String::from_utf8_lossy(line);
        let line = line.trim();
        if line.starts_with('#') || line.starts_with(';') || line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('[') {
            let name = rest.split(']').next().unwrap_or_default();
            section = match name.split_once([' ', '.']) {
                Some((s, sub)) => format!("{}.{}", s.to_ascii_lowercase(), sub.trim()),
                None => name.trim().to_ascii_lowercase(),
            };
            // `[core] key = value` on one line
            let after = rest.split_once(']').map_or("", |(_, a)| a).trim();
            if after.is_empty() {
                continue;
            }
            push_setting(&mut out, &section, after);
            continue;
        }
        push_setting(&mut out, &section, line);
    }
    out
}

fn push_setting(out: &mut Vec<(String, String, String)>, section: &str, line: &str) {
    let (key, value) = match line.split_once('=') {
        Some((k, v)) => (k.trim(), v.trim()),
        None => (line, "true"),
    };
    out.push((
        section.to_owned(),
        key.to_ascii_lowercase(),
        value.to_owned(),
    ));
}

/// `core.excludesFile` as the configuration files say (system, global, repository; the last
/// one set wins), or its default; an error when a file has something this reader cannot follow
/// (`include`s, a value with quotes or escapes, another object format, a bare repository).
fn excludes_file(
    common_dir: &Path,
    git_dir: &Path,
    env: &[(OsString, OsString)],
) -> Result<Option<PathBuf>, String> {
    let home = var(env, "HOME").map(PathBuf::from);
    let xdg = var(env, "XDG_CONFIG_HOME")
        .map(PathBuf::from)
        .or_else(|| home.as_ref().map(|h| h.join(".config")));
    let mut files: Vec<PathBuf> = Vec::new();
    if var(env, "GIT_CONFIG_NOSYSTEM").is_none() {
        files.push(
            var(env, "GIT_CONFIG_SYSTEM").map_or_else(|| "/etc/gitconfig".into(), PathBuf::from),
        );
    }
    match var(env, "GIT_CONFIG_GLOBAL") {
        Some(g) => files.push(PathBuf::from(g)),
        None => {
            if let Some(x) = &xdg {
                files.push(x.join("git/config"));
            }
            if let Some(h) = &home {
                files.push(h.join(".gitconfig"));
            }
        }
    }
    let repo_config = common_dir.join("config");
    files.push(repo_config.clone());
    files.push(git_dir.join("config.worktree"));
    let mut found = None;
    for file in &files {
        let Some(text) = read_small(file) else {
            continue;
        };
        for (section, key, value) in settings(&text) {
            let unusable = |what: &str| Err(format!("{} has {what}", file.display()));
            if section.starts_with("include") {
                return unusable("an include");
            }
            if section == "extensions"
                && key == "objectformat"
                && !value.eq_ignore_ascii_case("sha1")
            {
                return unusable("another object format");
            }
            if section == "core" && (key == "bare" && value == "true" || key == "worktree") {
                return unusable("a bare or core.worktree setting");
            }
            if section == "core" && (key == "ignorecase" && value == "true") {
                return unusable("core.ignoreCase");
            }
            if section == "index" && key == "sparse" && value == "true" {
                return unusable("a sparse index");
            }
            if section == "core" && key == "excludesfile" {
                if value.contains(['"', '\\']) {
                    return unusable("a quoted core.excludesFile");
                }
                found = Some(match value.strip_prefix("~/") {
                    Some(rest) => match &home {
                        Some(h) => h.join(rest),
                        None => return unusable("core.excludesFile under ~ without HOME"),
                    },
                    None => PathBuf::from(&value),
                });
            }
        }
    }
    Ok(found.or_else(|| xdg.map(|x| x.join("git/ignore"))))
}

/// The commit an embedded repository at `dir` has checked out (its `HEAD`, resolved through a
/// loose ref or `packed-refs`), `None` when it has none yet or it cannot be read.
pub(crate) fn checked_out(dir: &Path) -> Option<String> {
    let dot_git = dir.join(".git");
    let git_dir = if dot_git.is_dir() {
        dot_git
    } else {
        gitdir_file(dir, &read_small(&dot_git)?)?
    };
    let common = match read_small(&git_dir.join("commondir")) {
        None => git_dir.clone(),
        Some(t) => git_dir.join(PathBuf::from(OsString::from_vec(t.trim_ascii().to_vec()))),
    };
    let head = read_small(&git_dir.join("HEAD"))?;
    let head = head.trim_ascii();
    let Some(name) = head.strip_prefix(b"ref:") else {
        return Some(String::from_utf8_lossy(head).into_owned());
    };
    let name = name.trim_ascii();
    if name
        .split(|b| *b == b'/')
        .any(|c| c == b".." || c.is_empty())
    {
        return None;
    }
    let name_path = Path::new(std::ffi::OsStr::from_bytes(name));
    for base in [&git_dir, &common] {
        if let Some(id) = read_small(&base.join(name_path)) {
            return Some(String::from_utf8_lossy(id.trim_ascii()).into_owned());
        }
    }
    let packed = read_small(&common.join("packed-refs"))?;
    packed.split(|b| *b == b'\n').find_map(|line| {
        let (id, r) = line.split_at_checked(line.iter().position(|b| *b == b' ')?)?;
        (r.get(1..)? == name).then(|| String::from_utf8_lossy(id).into_owned())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_sections_keys_and_values() {
        let text =
            b"[core]\n\tExcludesFile = ~/ig\n# c\n[remote \"o\"]\n\turl = x\n[user] name = n\n";
        assert_eq!(
            settings(text),
            vec![
                ("core".into(), "excludesfile".into(), "~/ig".into()),
                ("remote.\"o\"".into(), "url".into(), "x".into()),
                ("user".into(), "name".into(), "n".into()),
            ]
        );
    }

    #[test]
    fn locates_a_work_tree_from_a_subdirectory_and_its_excludes_file() {
        let dir = std::env::temp_dir().join(format!("git-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("w/.git/refs")).unwrap();
        std::fs::create_dir_all(dir.join("w/sub/deeper")).unwrap();
        std::fs::write(dir.join("w/.git/HEAD"), "ref: refs/heads/main\n").unwrap();
        std::fs::write(
            dir.join("w/.git/config"),
            "[core]\n\texcludesfile = /x/ignore\n",
        )
        .unwrap();
        let env = vec![("HOME".into(), dir.clone().into_os_string())];
        let Found::Repo(found) = locate(&dir.join("w/sub/deeper"), &env) else {
            panic!("not found");
        };
        assert_eq!(found.toplevel, dir.join("w"));
        assert_eq!(found.prefix, b"sub/deeper/".to_vec());
        assert_eq!(found.git_dir, dir.join("w/.git"));
        assert_eq!(found.excludes_file, Some(PathBuf::from("/x/ignore")));
        let env_dir = vec![("GIT_DIR".into(), "/elsewhere".into())];
        assert!(matches!(
            locate(&dir.join("w"), &env_dir),
            Found::Unusable(_)
        ));
        std::fs::write(dir.join("w/.git/config"), "[include]\n\tpath = other\n").unwrap();
        assert!(matches!(locate(&dir.join("w"), &env), Found::Unusable(_)));
        assert_eq!(locate(&dir, &env), Found::NotARepo);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
