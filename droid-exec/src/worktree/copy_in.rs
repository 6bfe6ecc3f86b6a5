//! `worktree_copy`: untracked paths of the user's tree (`.env`, `node_modules`) copied into a new
//! worktree before the agent starts, files with `copy_file_range(2)` (which clones extents,
//! a reflink, on btrfs, XFS and bcachefs; elsewhere the kernel copies the bytes without them
//! passing through us).
//!
//! Nothing here follows a symbolic link: on both sides every component is looked up relative to
//! a directory opened just before, without following ([`crate::no_follow`]). A symlink in
//! the way (a tracked `config -> /etc` in the checkout) stops that path, with a warning; a
//! symlink that is itself a copied entry is copied as a symlink. What already exists in the
//! checkout (it was part of the base) is left as it is.

use std::ffi::OsStr;
use std::os::fd::OwnedFd;
use std::path::{Component, Path};

use nix::fcntl::{OFlag, openat};
use nix::sys::stat::Mode;

use crate::no_follow::{self as nf, Kind};

/// Most entries copied in for one worktree (`node_modules` of a large project holds a few
/// hundred thousand).
const MAX_ENTRIES: usize = 2_000_000;
/// Most warnings kept.
const MAX_WARNINGS: usize = 20;

/// What a copy-in did.
#[derive(Debug, Default)]
pub(crate) struct Copied {
    /// Entries copied (files, directories, symlinks).
    pub(crate) entries: usize,
    /// Bytes of the files copied.
    pub(crate) bytes: u64,
    /// What was skipped, and why.
    pub(crate) warnings: Vec<String>,
}

impl Copied {
    fn warn(&mut self, w: String) {
        if self.warnings.len() < MAX_WARNINGS {
            self.warnings.push(w);
        }
    }
}

/// Copy each of `paths` (relative to `from`, the user's `repo_root`) to the same place under
/// `to` (its counterpart in the checkout).
pub(crate) fn copy_in(from: &Path, to: &Path, paths: &[&Path]) -> Copied {
    let mut out = Copied::default();
    let open = |p: &Path| {
        nix::fcntl::open(
            p,
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
    };
    let (Ok(src_root), Ok(dst_root)) = (open(from), open(to)) else {
        out.warn(format!(
            "worktree_copy: {} or {} cannot be opened; nothing was copied",
            from.display(),
            to.display()
        ));
        return out;
    };
    for rel in paths {
        let names: Vec<&OsStr> = rel
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n),
                _ => None,
            })
            .collect();
        let Some((last, parents)) = names.split_last() else {
            continue;
        };
        let shown = rel.display();
        let Some(src_dir) = walk(&src_root, parents, false) else {
            out.warn(format!(
                "worktree_copy: {shown} was not copied: a directory on the way is missing or a \
                 symbolic link in the repository"
            ));
            continue;
        };
        match nf::stat_at(&src_dir, last) {
            Ok(Some(_)) => {}
            Ok(None) => {
                out.warn(format!(
                    "worktree_copy: {shown} does not exist in the repository"
                ));
                continue;
            }
            Err(e) => {
                out.warn(format!("worktree_copy: {shown}: {e}"));
                continue;
            }
        }
        let Some(dst_dir) = walk(&dst_root, parents, true) else {
            out.warn(format!(
                "worktree_copy: {shown} was not copied: a directory on the way in the worktree \
                 is a symbolic link or a file"
            ));
            continue;
        };
        copy_entry(&src_dir, &dst_dir, last, &shown.to_string(), &mut out);
    }
    out
}

/// The directory `names` leads to from `root`, each component opened without following a
/// symlink; with `make`, missing ones are made (0755).
fn walk(root: &OwnedFd, names: &[&OsStr], make: bool) -> Option<OwnedFd> {
    let mut dir = nf::open_dir(root, OsStr::new(".")).ok()?;
    for name in names {
        dir = match nf::open_dir(&dir, name) {
            Ok(d) => d,
            Err(e) if make && e.kind() == std::io::ErrorKind::NotFound => {
                nf::make_dir_at(&dir, name, 0o755).ok()?
            }
            Err(_) => return None,
        };
    }
    Some(dir)
}

/// Copy the entry `name` of `src` into `dst` (a directory with everything under it), leaving
/// what `dst` already holds.
fn copy_entry(src: &OwnedFd, dst: &OwnedFd, name: &OsStr, shown: &str, out: &mut Copied) {
    if out.entries >= MAX_ENTRIES {
        out.warn(format!(
            "worktree_copy: stopped after {MAX_ENTRIES} entries; {shown} and what follows were \
             not copied"
        ));
        return;
    }
    let Ok(Some(st)) = nf::stat_at(src, name) else {
        return;
    };
    let there = nf::stat_at(dst, name).ok().flatten();
    match Kind::of(&st) {
        Kind::Dir => {
            let target = match there.as_ref().map(Kind::of) {
                None => nf::make_dir_at(dst, name, st.st_mode & 0o777),
                Some(Kind::Dir) => nf::open_dir(dst, name),
                Some(_) => {
                    out.warn(format!(
                        "worktree_copy: {shown} is a directory in the repository but not in the \
                         worktree; left out"
                    ));
                    return;
                }
            };
            let (Ok(target), Ok(from)) = (target, nf::open_dir(src, name)) else {
                out.warn(format!(
                    "worktree_copy: {shown} could not be opened; left out"
                ));
                return;
            };
            out.entries += 1;
            let Ok((names, more)) = nf::list(&from, MAX_ENTRIES) else {
                return;
            };
            if more {
                out.warn(format!(
                    "worktree_copy: {shown} holds more than {MAX_ENTRIES} entries"
                ));
            }
            for n in names {
                let inner = format!("{shown}/{}", n.to_string_lossy());
                copy_entry(&from, &target, &n, &inner, out);
            }
        }
        _ if there.is_some() => {
            // part of the base already (tracked, or untracked and not ignored)
        }
        Kind::File => match copy_file(src, dst, name, st.st_mode & 0o777) {
            Ok(n) => {
                out.entries += 1;
                out.bytes += n;
            }
            Err(e) => out.warn(format!("worktree_copy: {shown}: {e}")),
        },
        Kind::Symlink => match nf::read_link_at(src, name)
            .and_then(|target| nf::symlink_at(dst, name, &target))
        {
            Ok(()) => out.entries += 1,
            Err(e) => out.warn(format!("worktree_copy: {shown}: {e}")),
        },
        Kind::Other => out.warn(format!(
            "worktree_copy: {shown} is not a file, directory or symlink; left out"
        )),
    }
}

/// Copy the regular file `name` of `src` to a new file in `dst` with permission bits `mode`;
/// the bytes copied.
fn copy_file(src: &OwnedFd, dst: &OwnedFd, name: &OsStr, mode: u32) -> std::io::Result<u64> {
    let from = openat(
        src,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(std::io::Error::from)?;
    let mut from = std::fs::File::from(from);
    if !from.metadata()?.is_file() {
        return Err(std::io::Error::other("not a regular file"));
    }
    let to = openat(
        dst,
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(mode),
    )
    .map_err(std::io::Error::from)?;
    let mut to = std::fs::File::from(to);
    // on Linux std's copy between two files is `copy_file_range`: a reflink where the file
    // system clones extents
    std::io::copy(&mut from, &mut to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copies_files_dirs_and_links_and_never_writes_through_a_symlink() {
        let base = std::env::temp_dir().join(format!("dx-copy-in-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let (from, to, outside) = (base.join("from"), base.join("to"), base.join("outside"));
        for d in [&from, &to, &outside] {
            std::fs::create_dir_all(d).unwrap();
        }
        std::fs::write(from.join(".env"), "KEY=1").unwrap();
        std::fs::create_dir_all(from.join("node_modules/a")).unwrap();
        std::fs::write(from.join("node_modules/a/index.js"), "x").unwrap();
        std::os::unix::fs::symlink("a", from.join("node_modules/b")).unwrap();
        std::fs::create_dir_all(from.join("conf")).unwrap();
        std::fs::write(from.join("conf/local.toml"), "secret").unwrap();
        // in the worktree, `conf` is a (tracked) symlink out of it
        std::os::unix::fs::symlink(&outside, to.join("conf")).unwrap();
        std::fs::write(to.join("kept"), "base").unwrap();
        std::fs::write(from.join("kept"), "user").unwrap();
        let got = copy_in(
            &from,
            &to,
            &[
                Path::new(".env"),
                Path::new("node_modules"),
                Path::new("conf/local.toml"),
                Path::new("kept"),
                Path::new("missing"),
            ],
        );
        assert_eq!(std::fs::read_to_string(to.join(".env")).unwrap(), "KEY=1");
        assert_eq!(
            std::fs::read_to_string(to.join("node_modules/a/index.js")).unwrap(),
            "x"
        );
        assert_eq!(
            std::fs::read_link(to.join("node_modules/b")).unwrap(),
            Path::new("a")
        );
        assert_eq!(std::fs::read_to_string(to.join("kept")).unwrap(), "base");
        assert!(
            !outside.join("local.toml").exists(),
            "written through a symlink"
        );
        assert_eq!(got.entries, 5, "{got:?}");
        assert_eq!(got.warnings.len(), 2, "{got:?}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
