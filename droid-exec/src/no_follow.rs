//! File operations relative to an open directory that never follow a symlink: what the engine's
//! unconfined code uses on a tree the agent could have touched (`.git` and what git runs later,
//! [`crate::run::git_guard`]). A name is always one component, looked up in a directory opened
//! before (and checked by device and inode where it matters); a symlink, a FIFO or a device
//! found where a file or a directory was is never opened through, only removed.

use std::ffi::{OsStr, OsString};
use std::io::{Read as _, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::ffi::OsStrExt as _;

use nix::fcntl::{AtFlags, OFlag, openat};
use nix::sys::stat::{FileStat, Mode, SFlag, fstat, fstatat, mkdirat};
use nix::unistd::{UnlinkatFlags, unlinkat};

/// What a directory entry is, its symlinks not followed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    File,
    Dir,
    Symlink,
    /// A FIFO, a socket, a device.
    Other,
}

impl Kind {
    pub(crate) fn of(st: &FileStat) -> Self {
        match SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT {
            SFlag::S_IFREG => Self::File,
            SFlag::S_IFDIR => Self::Dir,
            SFlag::S_IFLNK => Self::Symlink,
            _ => Self::Other,
        }
    }
}

/// A directory's device and inode.
pub(crate) fn id(st: &FileStat) -> (u64, u64) {
    #[allow(clippy::useless_conversion)]
    (u64::from(st.st_dev), u64::from(st.st_ino))
}

fn io(e: nix::errno::Errno) -> std::io::Error {
    std::io::Error::from(e)
}

/// `name` in `dir`, not followed: `None` when there is nothing by that name.
///
/// # Errors
/// Any other failure of `fstatat`.
pub(crate) fn stat_at(dir: impl AsFd, name: &OsStr) -> std::io::Result<Option<FileStat>> {
    match fstatat(dir, name, AtFlags::AT_SYMLINK_NOFOLLOW) {
        Ok(st) => Ok(Some(st)),
        Err(nix::errno::Errno::ENOENT) => Ok(None),
        Err(e) => Err(io(e)),
    }
}

/// Open the directory `name` in `dir`; a symlink there is not followed (`ELOOP`).
///
/// # Errors
/// When `name` is not a directory, or cannot be opened.
pub(crate) fn open_dir(dir: impl AsFd, name: &OsStr) -> std::io::Result<OwnedFd> {
    openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(io)
}

/// The names in `dir` (not `.` and `..`), at most `limit` of them; `true` when there were more.
///
/// # Errors
/// When the directory cannot be listed.
pub(crate) fn list(dir: impl AsFd, limit: usize) -> std::io::Result<(Vec<OsString>, bool)> {
    // a description of its own, so the listing's position is not shared with `dir`
    let fd = open_dir(dir, OsStr::new("."))?;
    let mut listing = nix::dir::Dir::from_fd(fd).map_err(io)?;
    let mut names = Vec::new();
    for entry in listing.iter() {
        let entry = entry.map_err(io)?;
        let name = entry.file_name().to_bytes();
        if name == b"." || name == b".." {
            continue;
        }
        if names.len() >= limit {
            return Ok((names, true));
        }
        names.push(OsStr::from_bytes(name).to_owned());
    }
    Ok((names, false))
}

/// The regular file `name` in `dir`, read whole up to `max` bytes, with its metadata (taken from
/// the open file): `None` when it is not a regular file (a symlink is not followed, a FIFO is not
/// waited on) or is larger than `max`.
///
/// # Errors
/// When the file cannot be opened or read.
pub(crate) fn read_at(
    dir: impl AsFd,
    name: &OsStr,
    max: u64,
) -> std::io::Result<Option<(Vec<u8>, FileStat)>> {
    let fd = match openat(
        dir,
        name,
        OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => fd,
        Err(nix::errno::Errno::ELOOP | nix::errno::Errno::ENXIO) => return Ok(None),
        Err(e) => return Err(io(e)),
    };
    let st = fstat(&fd).map_err(io)?;
    let size = u64::try_from(st.st_size).unwrap_or(u64::MAX);
    if Kind::of(&st) != Kind::File || size > max {
        return Ok(None);
    }
    let mut bytes = Vec::with_capacity(usize::try_from(size).unwrap_or(0));
    std::fs::File::from(fd)
        .take(max + 1)
        .read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return Ok(None);
    }
    Ok(Some((bytes, st)))
}

/// The target of the symlink `name` in `dir`.
///
/// # Errors
/// When it is not a symlink or cannot be read.
pub(crate) fn read_link_at(dir: impl AsFd, name: &OsStr) -> std::io::Result<Vec<u8>> {
    nix::fcntl::readlinkat(dir, name)
        .map(|t| t.as_bytes().to_vec())
        .map_err(io)
}

/// Remove `name` from `dir`, whatever it is; a directory with everything in it (its
/// subdirectories opened without following a symlink, at most `budget` entries in all). Nothing
/// there is fine.
///
/// # Errors
/// When something could not be removed, or the budget ran out.
pub(crate) fn remove_at(dir: impl AsFd, name: &OsStr, budget: &mut usize) -> std::io::Result<()> {
    let Some(st) = stat_at(&dir, name)? else {
        return Ok(());
    };
    if Kind::of(&st) == Kind::Dir {
        let sub = open_dir(&dir, name)?;
        let (names, more) = list(&sub, *budget)?;
        if more {
            return Err(std::io::Error::other("too many entries to remove"));
        }
        *budget = budget.saturating_sub(names.len());
        for n in &names {
            remove_at(&sub, n, budget)?;
        }
        return unlinkat(dir, name, UnlinkatFlags::RemoveDir).map_err(io);
    }
    match unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(nix::errno::Errno::ENOENT) => Ok(()),
        Err(e) => Err(io(e)),
    }
}

/// Make the directory `name` in `dir` with permission bits `mode`, and open it.
///
/// # Errors
/// When it cannot be made (something is there) or opened.
pub(crate) fn make_dir_at(dir: impl AsFd, name: &OsStr, mode: u32) -> std::io::Result<OwnedFd> {
    mkdirat(&dir, name, Mode::from_bits_truncate(mode & 0o7777)).map_err(io)?;
    open_dir(dir, name)
}

/// Write a new file `name` in `dir` holding `bytes`, with permission bits `mode`: created
/// exclusively (never through a symlink or into a file someone holds open), then given its mode.
///
/// # Errors
/// When something is in the way or the write fails.
pub(crate) fn create_at(
    dir: impl AsFd,
    name: &OsStr,
    bytes: &[u8],
    mode: u32,
) -> std::io::Result<()> {
    let fd = openat(
        dir,
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(io)?;
    nix::sys::stat::fchmod(&fd, Mode::from_bits_truncate(mode & 0o7777)).map_err(io)?;
    let mut file = std::fs::File::from(fd);
    file.write_all(bytes)?;
    file.sync_all()
}

/// Make the symlink `name` in `dir` pointing at `target`.
///
/// # Errors
/// When something is in the way.
pub(crate) fn symlink_at(dir: impl AsFd, name: &OsStr, target: &[u8]) -> std::io::Result<()> {
    nix::unistd::symlinkat(OsStr::from_bytes(target), dir, name).map_err(io)
}

/// Rename `from` to `to`, both in `dir`, never replacing what is at `to`.
///
/// # Errors
/// When `to` exists or the rename fails.
pub(crate) fn rename_at(dir: impl AsFd, from: &OsStr, to: &OsStr) -> std::io::Result<()> {
    nix::fcntl::renameat2(
        &dir,
        from,
        &dir,
        to,
        nix::fcntl::RenameFlags::RENAME_NOREPLACE,
    )
    .map_err(io)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nothing_is_followed_through_a_symlink() {
        let base = std::env::temp_dir().join(format!("no-follow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let outside = base.join("outside");
        let inside = base.join("inside");
        std::fs::create_dir_all(outside.join("sub")).unwrap();
        std::fs::create_dir_all(&inside).unwrap();
        std::fs::write(outside.join("precious"), "keep").unwrap();
        std::fs::write(outside.join("sub/data"), "keep").unwrap();
        std::os::unix::fs::symlink(&outside, inside.join("link")).unwrap();
        std::os::unix::fs::symlink(outside.join("precious"), inside.join("file-link")).unwrap();
        let dir = std::fs::File::open(&inside).unwrap();
        let link = OsStr::new("link");
        assert!(open_dir(&dir, link).is_err());
        assert_eq!(
            Kind::of(&stat_at(&dir, link).unwrap().unwrap()),
            Kind::Symlink
        );
        assert!(
            read_at(&dir, OsStr::new("file-link"), 1024)
                .unwrap()
                .is_none()
        );
        assert!(create_at(&dir, OsStr::new("file-link"), b"evil", 0o644).is_err());
        let mut budget = 100;
        remove_at(&dir, link, &mut budget).unwrap();
        remove_at(&dir, OsStr::new("file-link"), &mut budget).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.join("precious")).unwrap(),
            "keep"
        );
        assert_eq!(
            std::fs::read_to_string(outside.join("sub/data")).unwrap(),
            "keep"
        );
        assert_eq!(list(&dir, 10).unwrap(), (Vec::new(), false));
        std::fs::remove_dir_all(&base).unwrap();
    }
}
