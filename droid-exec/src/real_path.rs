//! A path's canonical form (every symlink resolved, absolute) at the cost of one path walk.
//!
//! `std::fs::canonicalize` is glibc's `realpath`: one `readlink` per component, each a walk from
//! the root, so a path `n` components deep costs `n` walks and `n(n+1)/2` component look-ups. A
//! run resolves some twenty paths (the repository, its writable set, the run slot's key), most of
//! them four to six deep: that was a fifth of the bridge's system calls per request. Here the
//! path is opened `O_PATH` (one walk, the same symlink rules) and the kernel says which file the
//! descriptor names (`/proc/self/fd/N`). Where `/proc` is not mounted, or the answer is not a
//! path, `realpath` is used as before.

use std::os::fd::AsRawFd as _;
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// `path` with every symlink resolved, like [`std::fs::canonicalize`].
///
/// # Errors
/// When `path` does not exist or cannot be reached.
pub fn canonical(path: &Path) -> std::io::Result<PathBuf> {
    // O_PATH: for look-ups only (no read permission needed, no device opened)
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_PATH.bits())
        .open(path)?;
    let link = PathBuf::from(format!("/proc/self/fd/{}", file.as_raw_fd()));
    match std::fs::read_link(&link) {
        // a descriptor of a file unlinked meanwhile reads "<path> (deleted)": not a path to use
        Ok(real)
            if real.is_absolute()
                && !real.as_os_str().as_encoded_bytes().ends_with(b" (deleted)") =>
        {
            Ok(real)
        }
        _ => std::fs::canonicalize(path),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn resolves_like_canonicalize() {
        let dir = std::env::temp_dir().join(format!("real-path-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("a/b")).unwrap();
        std::fs::write(dir.join("a/b/f"), "x").unwrap();
        std::os::unix::fs::symlink(dir.join("a"), dir.join("link")).unwrap();
        std::os::unix::fs::symlink("b/f", dir.join("a/rel")).unwrap();
        for p in [
            dir.join("a/b"),
            dir.join("link/b/f"),
            dir.join("link/rel"),
            dir.join("a/./b/../b"),
            PathBuf::from("/dev/null"),
            PathBuf::from("."),
        ] {
            assert_eq!(
                canonical(&p).unwrap(),
                std::fs::canonicalize(&p).unwrap(),
                "{p:?}"
            );
        }
        assert_eq!(
            canonical(&dir.join("missing")).unwrap_err().kind(),
            std::io::ErrorKind::NotFound
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
