//! Advisory file locks (`flock(2)`), the store's one cross-process primitive.
//!
//! A lock belongs to an open file description and dies with the process that holds it, however it
//! dies (SIGKILL included), so "is this lock held?" is a truthful liveness test where "does this
//! pid exist?" is not: in a container whose pid 1 does not reap orphans, a dead process stays a
//! zombie and `kill(pid, 0)` keeps succeeding. Files are opened close-on-exec (Rust's default), so
//! children never inherit a lock.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};

use crate::error::EngineError;

/// A held lock; released when dropped (or when the process dies).
#[derive(Debug)]
pub(crate) struct Held {
    _lock: Flock<File>,
}

fn open(path: &Path) -> Result<File, EngineError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(path)
        .map_err(|source| EngineError::Io {
            action: "open lock",
            path: path.to_path_buf(),
            source,
        })
}

fn lock(path: &Path, arg: FlockArg) -> Result<Option<Held>, EngineError> {
    let file = open(path)?;
    match Flock::lock(file, arg) {
        Ok(lock) => Ok(Some(Held { _lock: lock })),
        Err((_, Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, errno)) => Err(EngineError::Io {
            action: "lock",
            path: path.to_path_buf(),
            source: std::io::Error::from(errno),
        }),
    }
}

/// Take the exclusive lock on `path` (created 0600 if missing) if nobody holds it.
///
/// # Errors
/// [`EngineError::Io`] when the file cannot be opened or locked for another reason.
pub(crate) fn try_exclusive(path: &Path) -> Result<Option<Held>, EngineError> {
    lock(path, FlockArg::LockExclusiveNonblock)
}

/// Take a shared lock on `path` (created 0600 if missing) unless someone holds it exclusively.
///
/// # Errors
/// As [`try_exclusive`].
pub(crate) fn try_shared(path: &Path) -> Result<Option<Held>, EngineError> {
    lock(path, FlockArg::LockSharedNonblock)
}

/// Take the exclusive lock on `path`, waiting for it. Blocks the thread: call it from
/// `spawn_blocking` or a plain thread.
///
/// # Errors
/// [`EngineError::Io`] when the file cannot be opened or locked.
pub(crate) fn exclusive(path: &Path) -> Result<Held, EngineError> {
    lock(path, FlockArg::LockExclusive)?.ok_or_else(|| EngineError::Io {
        action: "lock",
        path: path.to_path_buf(),
        source: std::io::Error::from(Errno::EWOULDBLOCK),
    })
}

/// Does some process hold `path`'s lock exclusively? A missing file is not held.
///
/// # Errors
/// [`EngineError::Io`] when the file exists but cannot be opened or tested;
/// [`EngineError::Corrupt`] when it is not a regular file (a FIFO is never waited on, a link
/// never followed: the type is checked on the opened descriptor).
pub(crate) fn is_held(path: &Path) -> Result<bool, EngineError> {
    let Some(file) = open_to_test(path)? else {
        return Ok(false);
    };
    // a shared probe conflicts with the holder's exclusive lock and with nothing else
    probe(file, path, FlockArg::LockSharedNonblock)
}

/// Does some process hold `path`'s lock, exclusively or shared? A missing file is not used.
///
/// # Errors
/// As [`is_held`].
pub(crate) fn is_used(path: &Path) -> Result<bool, EngineError> {
    let Some(file) = open_to_test(path)? else {
        return Ok(false);
    };
    probe(file, path, FlockArg::LockExclusiveNonblock)
}

/// `path` opened to test its lock: `None` when it does not exist; an error when it is not a
/// regular file (a FIFO is never waited on, a link never followed).
fn open_to_test(path: &Path) -> Result<Option<File>, EngineError> {
    use nix::fcntl::OFlag;
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
        .open(path);
    let file = match opened {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) if e.raw_os_error() == Some(Errno::ELOOP as i32) => {
            return Err(EngineError::Corrupt {
                path: path.to_path_buf(),
                message: "a symbolic link, not a regular file".into(),
            });
        }
        Err(source) => {
            return Err(EngineError::Io {
                action: "open lock",
                path: path.to_path_buf(),
                source,
            });
        }
    };
    let meta = file.metadata().map_err(|source| EngineError::Io {
        action: "open lock",
        path: path.to_path_buf(),
        source,
    })?;
    if !meta.is_file() {
        return Err(EngineError::Corrupt {
            path: path.to_path_buf(),
            message: format!(
                "a {}, not a regular file",
                crate::state_file::file_kind(&meta.file_type())
            ),
        });
    }
    Ok(Some(file))
}

/// Whether a lock of kind `arg` on `file` would wait (someone holds a conflicting lock); the
/// probe is released at once.
fn probe(file: File, path: &Path, arg: FlockArg) -> Result<bool, EngineError> {
    match Flock::lock(file, arg) {
        Ok(_probe) => Ok(false),
        Err((_, Errno::EWOULDBLOCK)) => Ok(true),
        Err((_, errno)) => Err(EngineError::Io {
            action: "test lock",
            path: path.to_path_buf(),
            source: std::io::Error::from(errno),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lock_is_exclusive_until_dropped() {
        let dir = std::env::temp_dir().join(format!("dx-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("a.lock");
        assert!(!is_held(&path).unwrap(), "a missing file is not held");
        let held = try_exclusive(&path).unwrap().expect("free");
        assert!(is_held(&path).unwrap());
        assert!(
            try_exclusive(&path).unwrap().is_none(),
            "second open conflicts"
        );
        drop(held);
        assert!(!is_held(&path).unwrap());
        let again = exclusive(&path).unwrap();
        assert!(is_held(&path).unwrap());
        drop(again);
        let reader = try_shared(&path).unwrap().expect("free");
        let second = try_shared(&path).unwrap().expect("readers share");
        assert!(!is_held(&path).unwrap(), "no exclusive holder");
        assert!(is_used(&path).unwrap(), "but it is used");
        assert!(try_exclusive(&path).unwrap().is_none(), "a writer waits");
        drop((reader, second));
        assert!(!is_used(&path).unwrap());
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
