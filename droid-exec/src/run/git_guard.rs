//! What git runs or consults later, on the user's behalf: the repository's `.git` itself,
//! `.git/config`, every file under `.git/hooks`, `.git/info/exclude` and `.git/info/attributes`
//! (which hide files and pick filter drivers), and the same for each submodule's git directory
//! under `.git/modules/<name>`. They lie inside `repo_root`, which a confined run may write, and
//! Landlock only grants whole subtrees; so they are recorded before the run, compared after it
//! (before the repository is read again, so `files_changed` is measured with the ignore rules of
//! before the run, and again after verification), and every change is undone: a new entry
//! removed, a changed or deleted file written back with its mode. The engine reports what was
//! restored, and what could not be, as a `conflict` issue.
//!
//! This code runs unconfined, on a tree the agent controlled: every step is taken relative to a
//! directory opened before the run or opened just now without following a symlink
//! ([`crate::no_follow`]), one name at a time. `repo_root` and `.git` are held open from the
//! record (device and inode), so a `.git` swapped for a symlink to `~/.ssh`, or a `hooks` swapped
//! for a symlink to `~/precious`, is seen as what it is (a symlink in the repository), removed,
//! and the recorded directory put back; nothing is ever read or written through it. A `.git`
//! that was moved elsewhere in the repository and replaced is moved back; one that cannot be
//! found is reported, and whatever replaced it (a symlink, a gitfile pointing at a planted git
//! directory) is removed, never used.
//!
//! `core.hooksPath` naming a directory inside the repository (husky's `.husky/_`, a
//! `.githooks/` of the project's) is guarded the same way as `.git/hooks`: a hook the run adds
//! or changes there is put back, even a tracked one (hooks are the user's to change).
//!
//! A work tree whose `.git` is a file (a linked work tree, a submodule) keeps its hooks and
//! config in a directory outside `repo_root`, which a confined run cannot write; the gitfile
//! itself is guarded.

use std::collections::BTreeMap;
use std::ffi::{OsStr, OsString};
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt as _;
use std::path::Path;

use nix::sys::stat::FileStat;

use crate::run::guarded_tree::{
    Budget, Ctx, Entry, Node, REMOVE_BUDGET, now_secs, read, reconcile, record_entry, record_tree,
    replace_with_file, same_content,
};
// the report and the cache are the guarded tree's; the session's turns take them from here
use crate::no_follow::{self as nf, Kind};
pub(crate) use crate::run::guarded_tree::{RecordCache, Restored};

/// Most submodule git directories under `.git/modules` recorded.
const MAX_MODULES: usize = 64;
/// Most entries of `repo_root` looked through for a `.git` that was moved.
const ROOT_SCAN: usize = 100_000;

/// The names guarded directly in a git directory (the rest of it, objects and refs, is git's
/// own data: what the agent does there is the user's history, not code git runs later).
const IN_GIT_DIR: &[&str] = &["config", "hooks", "info", "modules"];
/// The names guarded in `info/`.
const IN_INFO: &[&str] = &["exclude", "attributes"];
/// The names guarded in a submodule's git directory.
const IN_MODULE: &[&str] = &["config", "hooks", "info"];

/// What `repo_root/.git` was before the run.
#[derive(Debug)]
enum Top {
    /// A git directory, held open, and what is guarded in it.
    Dir {
        fd: OwnedFd,
        id: (u64, u64),
        tree: BTreeMap<OsString, Node>,
    },
    /// A gitfile (`gitdir: …`).
    File(Entry),
    Symlink(Vec<u8>),
    Absent,
    Other,
}

/// What git runs or consults later, as it was before the run.
#[derive(Debug)]
pub(crate) struct GitGuard {
    /// `repo_root`, held open since the record.
    root: OwnedFd,
    top: Top,
    /// `core.hooksPath` when it names a directory inside the repository (husky's `.husky/_`):
    /// its components from `repo_root`, and what the last one held.
    hooks_path: Option<(Vec<OsString>, Node)>,
    /// When the record was made (seconds since the epoch).
    recorded_at: i64,
    /// Why the record is incomplete (too many or too large files): entries it did not see are
    /// not removed then.
    incomplete: Option<String>,
}

impl GitGuard {
    /// Record what `repo_root/.git` holds that git runs later (unchanged files from `cache`).
    /// `None` when `repo_root` cannot be opened as a directory.
    pub(crate) fn record(repo_root: &Path, cache: &RecordCache) -> Option<Self> {
        let root = nix::fcntl::open(
            repo_root,
            nix::fcntl::OFlag::O_RDONLY
                | nix::fcntl::OFlag::O_DIRECTORY
                | nix::fcntl::OFlag::O_CLOEXEC,
            nix::sys::stat::Mode::empty(),
        )
        .ok()?;
        let recorded_at = now_secs();
        let mut budget = Budget::full();
        let dot_git = OsStr::new(".git");
        let top = match nf::stat_at(&root, dot_git) {
            Ok(None) => Top::Absent,
            Err(_) => Top::Other,
            Ok(Some(st)) => match Kind::of(&st) {
                Kind::Dir => match nf::open_dir(&root, dot_git) {
                    Ok(fd) => {
                        let id = nix::sys::stat::fstat(&fd).map(|s| nf::id(&s)).ok()?;
                        let tree = record_names(&fd, IN_GIT_DIR, &mut budget, cache, recorded_at);
                        let mut tree = tree;
                        // each submodule's git directory, one level down
                        if let Some(Node::Dir { children, .. }) =
                            tree.get_mut(OsStr::new("modules"))
                            && let Ok(modules) = nf::open_dir(&fd, OsStr::new("modules"))
                            && let Ok((names, more)) = nf::list(&modules, MAX_MODULES)
                        {
                            if more {
                                budget.incomplete = Some(format!(
                                    "more than {MAX_MODULES} submodules under .git/modules"
                                ));
                            }
                            for name in names {
                                let Ok(Some(st)) = nf::stat_at(&modules, &name) else {
                                    continue;
                                };
                                if Kind::of(&st) != Kind::Dir {
                                    continue;
                                }
                                let Ok(sub) = nf::open_dir(&modules, &name) else {
                                    continue;
                                };
                                let inner =
                                    record_names(&sub, IN_MODULE, &mut budget, cache, recorded_at);
                                children.insert(
                                    name,
                                    Node::Dir {
                                        mode: st.st_mode & 0o7777,
                                        whole: false,
                                        children: inner,
                                    },
                                );
                            }
                        }
                        Top::Dir { fd, id, tree }
                    }
                    Err(_) => Top::Other,
                },
                Kind::File => read(&root, dot_git).map_or(Top::Other, Top::File),
                Kind::Symlink => nf::read_link_at(&root, dot_git).map_or(Top::Other, Top::Symlink),
                Kind::Other => Top::Other,
            },
        };
        let hooks_path = match &top {
            Top::Dir { tree, .. } => hooks_path_in(repo_root, tree).and_then(|components| {
                let node = record_hooks_path(&root, &components, &mut budget, cache, recorded_at)?;
                Some((components, node))
            }),
            _ => None,
        };
        Some(Self {
            root,
            top,
            hooks_path,
            recorded_at,
            incomplete: budget.incomplete,
        })
    }

    /// Compare with now and undo every change. Returns what was changed (relative to the
    /// repository: `.git/hooks/pre-commit`), what could not be restored, with why, and what was
    /// refused.
    pub(crate) fn restore(&self) -> Restored {
        let mut out = Restored {
            incomplete: self.incomplete.clone(),
            ..Restored::default()
        };
        let dot_git = OsStr::new(".git");
        let now = nf::stat_at(&self.root, dot_git).ok().flatten();
        match &self.top {
            Top::Dir { fd, id, tree } => {
                let same = now
                    .as_ref()
                    .is_some_and(|st| Kind::of(st) == Kind::Dir && nf::id(st) == *id);
                if !same && !self.put_git_dir_back(*id, now.as_ref(), &mut out) {
                    out.changed.sort();
                    return out;
                }
                // the recorded git directory, held open: wherever it is now, it is the one that
                // was recorded, and it is inside the repository
                let mut ctx = Ctx {
                    out: &mut out,
                    recorded_at: self.recorded_at,
                    complete: self.incomplete.is_none(),
                };
                reconcile(fd, ".git", tree, false, &mut ctx);
                if let Some((components, node)) = &self.hooks_path {
                    self.restore_hooks_path(components, node, &mut ctx);
                }
            }
            Top::File(before) => {
                let unchanged = now.as_ref().is_some_and(|st| Kind::of(st) == Kind::File)
                    && read(&self.root, dot_git).is_some_and(|e| same_content(&e, before));
                if !unchanged {
                    out.changed.push(".git".to_owned());
                    if let Err(e) = replace_with_file(&self.root, dot_git, before) {
                        out.failed.push(format!(".git: {e}"));
                    }
                }
            }
            Top::Symlink(target) => {
                let unchanged = now.as_ref().is_some_and(|st| Kind::of(st) == Kind::Symlink)
                    && nf::read_link_at(&self.root, dot_git).is_ok_and(|t| t == *target);
                if !unchanged {
                    out.changed.push(".git".to_owned());
                    let mut budget = REMOVE_BUDGET;
                    if let Err(e) = set_aside_or_remove(&self.root, dot_git, &mut budget, &mut out)
                        .and_then(|()| nf::symlink_at(&self.root, dot_git, target))
                    {
                        out.failed.push(format!(".git: {e}"));
                    }
                }
            }
            Top::Absent => {
                if now.is_some() {
                    out.refused.push(
                        "the run created .git (a git repository) where there was none: its \
                         hooks and config are the agent's; inspect them before running git there"
                            .to_owned(),
                    );
                }
            }
            Top::Other => {}
        }
        out.changed.sort();
        out.changed.dedup();
        out
    }

    /// The index entries now flagged skip-worktree or assume-unchanged (flags that hide a
    /// file's changes from the user's `git status` for good) that were not before the run
    /// (`before`, read by the first record of the repository): the index read through the
    /// recorded `.git` (never a symlink, a FIFO or a file past 256 MiB), and only when it was
    /// written since.
    pub(crate) fn new_index_flags(&self, before: &crate::snapshot::IndexFlags) -> Vec<Vec<u8>> {
        const MAX_INDEX_BYTES: u64 = 256 * 1024 * 1024;
        let Top::Dir { fd, .. } = &self.top else {
            return Vec::new();
        };
        let index = OsStr::new("index");
        let unchanged = nf::stat_at(fd, index).ok().flatten().is_some_and(|st| {
            Kind::of(&st) == Kind::File && (st.st_mtime, st.st_mtime_nsec) == before.mtime
        });
        if unchanged {
            return Vec::new();
        }
        let Ok(Some((bytes, _))) = nf::read_at(fd, index, MAX_INDEX_BYTES) else {
            return Vec::new();
        };
        let Ok(parsed) = crate::snapshot::git_index::parse(&bytes) else {
            return Vec::new();
        };
        let mut out: Vec<Vec<u8>> = parsed
            .entries
            .into_iter()
            .filter(|e| {
                (e.skip_worktree || e.assume_unchanged)
                    && before.assumed.binary_search(&e.path).is_err()
            })
            .map(|e| e.path)
            .collect();
        out.dedup();
        out
    }

    /// Put back the directory `core.hooksPath` named inside the repository, reached one
    /// component at a time from `repo_root` without following a symlink: one swapped in on the
    /// way is reported, never followed.
    fn restore_hooks_path(&self, components: &[OsString], node: &Node, ctx: &mut Ctx<'_>) {
        let Some((last, parents)) = components.split_last() else {
            return;
        };
        let mut shown = String::new();
        let mut dir: Option<OwnedFd> = None;
        for c in parents {
            if !shown.is_empty() {
                shown.push('/');
            }
            shown.push_str(&c.to_string_lossy());
            let opened = match &dir {
                None => nf::open_dir(&self.root, c),
                Some(d) => nf::open_dir(d, c),
            };
            match opened {
                Ok(d) => dir = Some(d),
                Err(e) => {
                    ctx.out.refused.push(format!(
                        "{shown} (on the way to core.hooksPath) is no longer a directory ({e}): \
                         the hooks there were not checked"
                    ));
                    return;
                }
            }
        }
        let one = BTreeMap::from([(last.clone(), node.clone())]);
        match &dir {
            None => reconcile(&self.root, "", &one, false, ctx),
            Some(d) => reconcile(d, &shown, &one, false, ctx),
        }
    }

    /// `.git` is no longer the recorded directory (`now` is what is there): move whatever is
    /// there out of the way (a symlink or a gitfile removed, a directory renamed aside), and the
    /// recorded directory back, when it is still somewhere at the top of the repository.
    /// Whether `.git` is the recorded directory again.
    fn put_git_dir_back(&self, id: (u64, u64), now: Option<&FileStat>, out: &mut Restored) -> bool {
        let dot_git = OsStr::new(".git");
        let what = match now.map(Kind::of) {
            None => "removed".to_owned(),
            Some(Kind::Symlink) => format!(
                "replaced by a symlink to {}",
                nf::read_link_at(&self.root, dot_git)
                    .map(|t| String::from_utf8_lossy(&t).into_owned())
                    .unwrap_or_else(|_| "?".to_owned())
            ),
            Some(Kind::File) => "replaced by a file (a gitfile pointing git elsewhere)".to_owned(),
            Some(Kind::Dir) => "replaced by another directory".to_owned(),
            Some(Kind::Other) => "replaced by a special file".to_owned(),
        };
        // where the recorded directory went, if it stayed at the top of the repository
        let moved_to = nf::list(&self.root, ROOT_SCAN).ok().and_then(|(names, _)| {
            names.into_iter().find(|n| {
                n.as_bytes() != b".git"
                    && nf::stat_at(&self.root, n)
                        .ok()
                        .flatten()
                        .is_some_and(|st| Kind::of(&st) == Kind::Dir && nf::id(&st) == id)
            })
        });
        let mut budget = REMOVE_BUDGET;
        if now.is_some()
            && let Err(e) = set_aside_or_remove(&self.root, dot_git, &mut budget, out)
        {
            out.failed.push(format!(".git ({what}): {e}"));
            return false;
        }
        match moved_to {
            Some(name) => match nf::rename_at(&self.root, &name, dot_git) {
                Ok(()) => {
                    out.changed.push(format!(
                        ".git ({what}; the repository's own was moved back from {})",
                        name.to_string_lossy()
                    ));
                    true
                }
                Err(e) => {
                    out.failed.push(format!(
                        ".git ({what}; the repository's own is at {}): {e}",
                        name.to_string_lossy()
                    ));
                    false
                }
            },
            None => {
                out.refused.push(format!(
                    ".git was {what} and the repository's own git directory is no longer in \
                     it: nothing was written there, and what replaced .git was removed"
                ));
                false
            }
        }
    }
}

/// `core.hooksPath` from the recorded `.git/config`, as components from `repo_root`, when it
/// names a directory inside the repository other than `.git/hooks` (git takes a relative path
/// from the top of the work tree).
fn hooks_path_in(repo_root: &Path, tree: &BTreeMap<OsString, Node>) -> Option<Vec<OsString>> {
    let Some(Node::File(config)) = tree.get(OsStr::new("config")) else {
        return None;
    };
    let value = crate::snapshot::git_dir::settings(&config.bytes)
        .into_iter()
        .rev()
        .find(|(section, key, _)| section == "core" && key == "hookspath")
        .map(|(_, _, v)| v.trim_matches('"').to_owned())?;
    let path = Path::new(&value);
    let rel = if path.is_absolute() {
        path.strip_prefix(repo_root).ok()?.to_path_buf()
    } else {
        path.to_path_buf()
    };
    let mut components = Vec::new();
    for c in rel.components() {
        match c {
            std::path::Component::Normal(n) => components.push(n.to_owned()),
            std::path::Component::CurDir => {}
            // `..` or a root: outside the repository, which a run cannot write
            _ => return None,
        }
    }
    let is_default = components.len() == 2 && components[0] == ".git" && components[1] == "hooks";
    (!components.is_empty() && !is_default).then_some(components)
}

/// Record the directory at `components` from `root` (each opened without following a symlink)
/// as a whole tree; `None` when a directory on the way is not there.
fn record_hooks_path(
    root: &OwnedFd,
    components: &[OsString],
    budget: &mut Budget,
    cache: &RecordCache,
    now: i64,
) -> Option<Node> {
    let (last, parents) = components.split_last()?;
    let mut dir: Option<OwnedFd> = None;
    for c in parents {
        let next = match &dir {
            None => nf::open_dir(root, c),
            Some(d) => nf::open_dir(d, c),
        };
        dir = Some(next.ok()?);
    }
    let parent = dir.as_ref().unwrap_or(root);
    Some(match nf::stat_at(parent, last).ok()? {
        None => Node::Absent,
        Some(st) if Kind::of(&st) == Kind::Dir => {
            record_tree(parent, last, &st, budget, cache, now)
        }
        Some(st) => record_entry(parent, last, Kind::of(&st), &st, budget, cache, now),
    })
}

/// Record `names` in `dir` (a directory `info` or `hooks` inside, as their own lists say).
fn record_names(
    dir: &OwnedFd,
    names: &[&str],
    budget: &mut Budget,
    cache: &RecordCache,
    now: i64,
) -> BTreeMap<OsString, Node> {
    let mut out = BTreeMap::new();
    for name in names {
        let name = OsStr::new(name);
        let node = match nf::stat_at(dir, name) {
            // `git submodule add` makes it: a submodule added by the run is in files_changed
            Ok(None) if name.as_bytes() == b"modules" => Node::Other,
            Ok(None) => Node::Absent,
            Err(_) => Node::Other,
            Ok(Some(st)) => match (Kind::of(&st), name.as_bytes()) {
                (Kind::Dir, b"hooks") => record_tree(dir, name, &st, budget, cache, now),
                (Kind::Dir, b"info") => match nf::open_dir(dir, name) {
                    Ok(info) => Node::Dir {
                        mode: st.st_mode & 0o7777,
                        whole: false,
                        children: record_names(&info, IN_INFO, budget, cache, now),
                    },
                    Err(_) => Node::Other,
                },
                (Kind::Dir, b"modules") => Node::Dir {
                    mode: st.st_mode & 0o7777,
                    whole: false,
                    // filled by the caller, one level down
                    children: BTreeMap::new(),
                },
                (kind, _) => record_entry(dir, name, kind, &st, budget, cache, now),
            },
        };
        out.insert(name.to_owned(), node);
    }
    out
}

/// Clear `name` in `dir`: a symlink or a file is removed; a directory (a planted git directory,
/// say) is renamed aside in the same directory, reported, never deleted with what it holds.
fn set_aside_or_remove(
    dir: &OwnedFd,
    name: &OsStr,
    budget: &mut usize,
    out: &mut Restored,
) -> std::io::Result<()> {
    match nf::stat_at(dir, name)?.map(|st| Kind::of(&st)) {
        None => Ok(()),
        Some(Kind::Dir) => {
            let aside = format!(
                "{}.planted-{}",
                name.to_string_lossy(),
                std::process::id() ^ u32::try_from(now_secs() & 0xffff_ffff).unwrap_or(0)
            );
            nf::rename_at(dir, name, OsStr::new(&aside))?;
            out.refused.push(format!(
                "{} was a directory the run put there; it was moved aside to {aside}, not used",
                name.to_string_lossy()
            ));
            Ok(())
        }
        Some(_) => nf::remove_at(dir, name, budget),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::guarded_tree::MAX_DIRS;
    use pretty_assertions::assert_eq;
    use std::os::unix::fs::PermissionsExt as _;
    use std::path::PathBuf;
    use std::sync::Arc;

    /// A fresh directory with a repository `repo/` (`.git/config`, two hooks) and a directory
    /// `outside/` the run must never see written.
    fn world(name: &str) -> (PathBuf, PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("git-guard-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let repo = dir.join("repo");
        let hooks = repo.join(".git/hooks");
        std::fs::create_dir_all(&hooks).unwrap();
        std::fs::create_dir_all(repo.join(".git/info")).unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\n").unwrap();
        std::fs::write(repo.join(".git/info/exclude"), "# git ls-files\n").unwrap();
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\n").unwrap();
        std::fs::write(hooks.join("keep"), "x").unwrap();
        let outside = dir.join("outside");
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::write(outside.join("thesis.tex"), "years of work").unwrap();
        std::fs::write(outside.join("sub/data.csv"), "1,2,3").unwrap();
        std::fs::write(outside.join("config"), "Host *\n").unwrap();
        (dir, repo, outside)
    }

    /// Every file under `dir` with its content.
    fn contents(dir: &Path) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut stack = vec![dir.to_path_buf()];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if e.file_type().unwrap().is_dir() {
                    stack.push(p);
                } else {
                    let rel = p.strip_prefix(dir).unwrap().display().to_string();
                    out.push((rel, std::fs::read_to_string(&p).unwrap_or_default()));
                }
            }
        }
        out.sort();
        out
    }

    #[test]
    fn planted_changed_and_deleted_files_are_put_back() {
        let (dir, repo, _) = world("plain");
        let hooks = repo.join(".git/hooks");
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();

        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\ncurl evil\n").unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        std::fs::remove_file(hooks.join("keep")).unwrap();
        std::fs::create_dir_all(hooks.join("sub")).unwrap();
        std::fs::write(hooks.join("sub/x"), "y").unwrap();
        std::fs::write(repo.join(".git/info/exclude"), "evil.sh\n").unwrap();
        std::fs::write(repo.join(".git/info/attributes"), "* filter=evil\n").unwrap();

        let restored = guard.restore();
        assert_eq!(
            restored,
            Restored {
                changed: vec![
                    ".git/config".to_owned(),
                    ".git/hooks/keep".to_owned(),
                    ".git/hooks/pre-commit".to_owned(),
                    ".git/hooks/sub".to_owned(),
                    ".git/info/attributes".to_owned(),
                    ".git/info/exclude".to_owned(),
                ],
                ..Restored::default()
            }
        );
        assert!(!hooks.join("pre-commit").exists());
        assert!(!hooks.join("sub").exists());
        assert!(!repo.join(".git/info/attributes").exists());
        assert_eq!(std::fs::read_to_string(hooks.join("keep")).unwrap(), "x");
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/config")).unwrap(),
            "[core]\n"
        );
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/info/exclude")).unwrap(),
            "# git ls-files\n"
        );
        assert_eq!(guard.restore(), Restored::default());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// issue 29: `rm -rf .git/hooks && ln -s ~/precious .git/hooks` made the old guard delete
    /// the files of `~/precious` and write the samples there.
    #[test]
    fn hooks_swapped_for_a_symlink_are_put_back_and_nothing_is_written_through_it() {
        let (dir, repo, outside) = world("hooks-link");
        let hooks = repo.join(".git/hooks");
        let before = contents(&outside);
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();

        std::fs::remove_dir_all(&hooks).unwrap();
        std::os::unix::fs::symlink(&outside, &hooks).unwrap();

        let restored = guard.restore();
        assert_eq!(restored.changed, vec![".git/hooks".to_owned()]);
        assert_eq!(restored.failed, Vec::<String>::new());
        assert_eq!(contents(&outside), before, "nothing outside was touched");
        assert!(std::fs::symlink_metadata(&hooks).unwrap().is_dir());
        assert_eq!(
            contents(&hooks),
            vec![
                ("keep".to_owned(), "x".to_owned()),
                ("pre-push.sample".to_owned(), "#!/bin/sh\n".to_owned())
            ]
        );
        // a file of the hooks swapped for a symlink to a file outside
        std::fs::remove_file(hooks.join("keep")).unwrap();
        std::os::unix::fs::symlink(outside.join("thesis.tex"), hooks.join("keep")).unwrap();
        let restored = guard.restore();
        assert_eq!(restored.changed, vec![".git/hooks/keep".to_owned()]);
        assert_eq!(contents(&outside), before, "nothing outside was touched");
        assert_eq!(std::fs::read_to_string(hooks.join("keep")).unwrap(), "x");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// issue 29: `mv .git .git-real && ln -s ~/.ssh .git` made the old guard replace
    /// `~/.ssh/config` with the repository's config.
    #[test]
    fn a_git_dir_swapped_for_a_symlink_is_moved_back_and_nothing_is_written_through_it() {
        let (dir, repo, outside) = world("git-link");
        let before = contents(&outside);
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();

        std::fs::rename(repo.join(".git"), repo.join(".git-real")).unwrap();
        std::fs::write(repo.join(".git-real/config"), "[core]\nhooksPath = /x\n").unwrap();
        std::os::unix::fs::symlink(&outside, repo.join(".git")).unwrap();

        let restored = guard.restore();
        assert_eq!(contents(&outside), before, "nothing outside was touched");
        assert!(
            std::fs::symlink_metadata(repo.join(".git"))
                .unwrap()
                .is_dir()
        );
        assert!(!repo.join(".git-real").exists());
        assert_eq!(
            restored.changed,
            vec![
                ".git (replaced by a symlink to {out}; the repository's own was moved back from \
                 .git-real)"
                    .replace("{out}", &outside.display().to_string()),
                ".git/config".to_owned()
            ]
        );
        assert_eq!(
            std::fs::read_to_string(repo.join(".git/config")).unwrap(),
            "[core]\n"
        );

        // removed for good, and replaced by a gitfile pointing at a planted git directory
        std::fs::remove_dir_all(repo.join(".git")).unwrap();
        std::fs::write(repo.join(".git"), "gitdir: ../planted\n").unwrap();
        let restored = guard.restore();
        assert_eq!(restored.changed, Vec::<String>::new());
        assert_eq!(restored.refused.len(), 1, "{restored:?}");
        assert!(
            restored.refused[0].contains("replaced by a file"),
            "{restored:?}"
        );
        assert!(!repo.join(".git").exists(), "the planted gitfile is gone");
        assert_eq!(contents(&outside), before);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn submodule_hooks_and_config_are_guarded() {
        let (dir, repo, _) = world("modules");
        let module = repo.join(".git/modules/lib");
        std::fs::create_dir_all(module.join("hooks")).unwrap();
        std::fs::write(module.join("config"), "[core]\n").unwrap();
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();
        std::fs::write(module.join("hooks/post-checkout"), "#!/bin/sh\nevil\n").unwrap();
        std::fs::write(module.join("config"), "[core]\nfsmonitor = evil\n").unwrap();
        let restored = guard.restore();
        assert_eq!(
            restored.changed,
            vec![
                ".git/modules/lib/config".to_owned(),
                ".git/modules/lib/hooks/post-checkout".to_owned()
            ]
        );
        assert!(!module.join("hooks/post-checkout").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    /// issue 29 item 5: husky v9 points `core.hooksPath` at `.husky/_` (ignored by git, so a
    /// change there is in no `files_changed`).
    #[test]
    fn a_hooks_path_inside_the_repository_is_guarded_and_not_followed_out() {
        let (dir, repo, outside) = world("hooks-path");
        let before = contents(&outside);
        std::fs::write(repo.join(".git/config"), "[core]\n\thooksPath = .husky/_\n").unwrap();
        std::fs::create_dir_all(repo.join(".husky/_")).unwrap();
        std::fs::write(repo.join(".husky/_/pre-commit"), "#!/bin/sh\nnpx lint\n").unwrap();
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();
        std::fs::write(repo.join(".husky/_/pre-commit"), "#!/bin/sh\ncurl evil\n").unwrap();
        std::fs::write(
            repo.join(".husky/_/post-checkout"),
            "#!/bin/sh\ncurl evil\n",
        )
        .unwrap();
        let restored = guard.restore();
        assert_eq!(
            restored.changed,
            vec![
                ".husky/_/post-checkout".to_owned(),
                ".husky/_/pre-commit".to_owned()
            ]
        );
        assert_eq!(
            std::fs::read_to_string(repo.join(".husky/_/pre-commit")).unwrap(),
            "#!/bin/sh\nnpx lint\n"
        );
        // the hooks directory swapped for a symlink out of the repository
        std::fs::remove_dir_all(repo.join(".husky/_")).unwrap();
        std::os::unix::fs::symlink(&outside, repo.join(".husky/_")).unwrap();
        let restored = guard.restore();
        assert_eq!(restored.changed, vec![".husky/_".to_owned()]);
        assert_eq!(contents(&outside), before);
        // a directory on the way swapped for a symlink: reported, not followed
        std::fs::rename(repo.join(".husky"), repo.join("husky-moved")).unwrap();
        std::os::unix::fs::symlink(&outside, repo.join(".husky")).unwrap();
        let restored = guard.restore();
        assert_eq!(restored.refused.len(), 1, "{restored:?}");
        assert_eq!(contents(&outside), before);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn files_untouched_since_well_before_the_record_are_not_read_again_but_changes_are_seen() {
        let (dir, repo, _) = world("stamp");
        let hooks = repo.join(".git/hooks");
        let mut guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();
        // as if the files had been written long before the record
        guard.recorded_at += 10;
        assert_eq!(guard.restore(), Restored::default());
        // a change of content, of mode, or a replacement: each a new stamp
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\ncurl evil\n").unwrap();
        std::fs::set_permissions(
            repo.join(".git/config"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        let restored = guard.restore();
        assert_eq!(
            restored.changed,
            vec![
                ".git/config".to_owned(),
                ".git/hooks/pre-push.sample".to_owned()
            ]
        );
        assert_eq!(
            std::fs::read_to_string(hooks.join("pre-push.sample")).unwrap(),
            "#!/bin/sh\n"
        );
        let mode = std::fs::metadata(repo.join(".git/config"))
            .unwrap()
            .permissions()
            .mode();
        assert_ne!(mode & 0o777, 0o777);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_hooks_tree_past_the_directory_bound_makes_the_record_incomplete() {
        let (dir, repo, _) = world("dirs");
        let hooks = repo.join(".git/hooks");
        for i in 0..=MAX_DIRS {
            std::fs::create_dir_all(hooks.join(format!("d{i}"))).unwrap();
        }
        let guard = GitGuard::record(&repo, &RecordCache::default()).unwrap();
        assert_eq!(
            guard.incomplete.as_deref(),
            Some("more than 512 directories under .git")
        );
        // an incomplete record removes nothing it did not see before, and still restores
        // what it recorded
        std::fs::write(hooks.join("pre-commit"), "#!/bin/sh\n").unwrap();
        std::fs::write(repo.join(".git/config"), "[core]\nfsmonitor = evil\n").unwrap();
        let restored = guard.restore();
        assert_eq!(restored.changed, vec![".git/config".to_owned()]);
        assert!(hooks.join("pre-commit").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_later_record_takes_unchanged_files_from_the_cache_and_reads_changed_ones() {
        let (dir, repo, _) = world("cache");
        let hooks = repo.join(".git/hooks");
        let cache = RecordCache::default();
        let hooks_fd = nf::open_dir(
            std::fs::File::open(repo.join(".git")).unwrap(),
            OsStr::new("hooks"),
        )
        .unwrap();
        let name = OsStr::new("pre-push.sample");
        let st = nf::stat_at(&hooks_fd, name).unwrap().unwrap();
        // a file written just now is not kept: a write within the same tick would not show
        cache.read(&hooks_fd, name, &st, st.st_ctime).unwrap();
        assert!(cache.inner.lock().unwrap().files.is_empty());
        // read as if well after it was written: kept, and taken from the cache while its stamp
        // holds (the cached bytes are swapped to prove the file is not read again)
        cache.read(&hooks_fd, name, &st, st.st_ctime + 10).unwrap();
        let key = nf::id(&st);
        cache
            .inner
            .lock()
            .unwrap()
            .files
            .get_mut(&key)
            .unwrap()
            .0
            .bytes = Arc::from(&b"cached"[..]);
        let file = |g: &GitGuard| match &g.top {
            Top::Dir { tree, .. } => match &tree[OsStr::new("hooks")] {
                Node::Dir { children, .. } => match &children[name] {
                    Node::File(e) => e.bytes.to_vec(),
                    other => panic!("{other:?}"),
                },
                other => panic!("{other:?}"),
            },
            other => panic!("{other:?}"),
        };
        let guard = GitGuard::record(&repo, &cache).unwrap();
        assert_eq!(file(&guard), b"cached");
        // a write gives the file another stamp: read again
        std::fs::write(hooks.join("pre-push.sample"), "#!/bin/sh\necho changed\n").unwrap();
        let guard = GitGuard::record(&repo, &cache).unwrap();
        assert_eq!(file(&guard), b"#!/bin/sh\necho changed\n");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
