//! The engine's own state files (the task store's, a worktree task's record, an ACP session's
//! options, the daemon's pid, the clients' settings `setup` edits): read only when they are
//! regular files, without following a link or blocking on a FIFO and within a limit, and
//! replaced atomically (temp file, fsync, rename, fsync of the directory).

use std::fs::{File, OpenOptions};
use std::io::Write as _;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use nix::errno::Errno;

use crate::error::EngineError;

fn io(action: &'static str, path: &Path) -> impl FnOnce(std::io::Error) -> EngineError {
    EngineError::io(action, path)
}

static TMP_SEQ: AtomicU64 = AtomicU64::new(0);

/// Write `bytes` to a new private temp file beside `path`, flushed to disk.
pub(crate) fn write_temp(path: &Path, bytes: &[u8]) -> Result<PathBuf, EngineError> {
    temp_file(path, bytes, true)
}

/// Write `bytes` to a new private temp file beside `path`, flushed to disk when `sync`.
fn temp_file(path: &Path, bytes: &[u8], sync: bool) -> Result<PathBuf, EngineError> {
    let name = path
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = path.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        TMP_SEQ.fetch_add(1, Ordering::Relaxed)
    ));
    let mut f = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(io("create", &tmp))?;
    let written = f
        .write_all(bytes)
        .and_then(|()| if sync { f.sync_all() } else { Ok(()) });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("write", &tmp)(e));
    }
    Ok(tmp)
}

pub(crate) fn sync_dir(dir: &Path) {
    // durability of the rename; a failure here (some file systems refuse) loses nothing we can fix
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

/// Why a store file could not be read.
#[derive(Debug)]
pub(crate) enum ReadError {
    /// It does not exist.
    Missing,
    /// It exists but is not something to read: a directory, a FIFO, a socket, a device, a
    /// symbolic link, a file over the limit, or a path through a file where a directory belongs.
    Unreadable(String),
    /// Reading it failed.
    Io(std::io::Error),
}

/// Open `path` for reading only if it is a regular file (never following a symbolic link, and
/// without blocking on a FIFO: the check is made on the opened descriptor), and read it whole if
/// it holds at most `limit` bytes.
pub(crate) fn read_regular(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    use nix::fcntl::OFlag;
    use std::io::Read as _;
    let file = OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NONBLOCK | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC).bits())
        .open(path);
    let file = match file {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(ReadError::Missing),
        Err(e) if e.raw_os_error() == Some(Errno::ELOOP as i32) => {
            return Err(ReadError::Unreadable(
                "a symbolic link, not a regular file".into(),
            ));
        }
        Err(e) if e.raw_os_error() == Some(Errno::ENOTDIR as i32) => {
            return Err(ReadError::Unreadable(
                "its task directory is not a directory".into(),
            ));
        }
        Err(e) => return Err(ReadError::Io(e)),
    };
    let meta = file.metadata().map_err(ReadError::Io)?;
    if !meta.is_file() {
        return Err(ReadError::Unreadable(format!(
            "a {}, not a regular file",
            file_kind(&meta.file_type())
        )));
    }
    if meta.len() > limit {
        return Err(ReadError::Unreadable(format!(
            "{} bytes, more than the {limit} a store file of this kind may hold",
            meta.len()
        )));
    }
    let mut bytes = Vec::new();
    // bounded again: the file may grow after the check
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(ReadError::Io)?;
    if bytes.len() as u64 > limit {
        return Err(ReadError::Unreadable(format!(
            "more than the {limit} bytes a store file of this kind may hold"
        )));
    }
    Ok(bytes)
}

/// What kind of file system object `t` is, in words.
pub(crate) fn file_kind(t: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if t.is_dir() {
        "directory"
    } else if t.is_symlink() {
        "symbolic link"
    } else if t.is_fifo() {
        "FIFO"
    } else if t.is_socket() {
        "socket"
    } else if t.is_block_device() || t.is_char_device() {
        "device"
    } else if t.is_file() {
        "regular file"
    } else {
        "special file"
    }
}

/// Replace `path` with `bytes` atomically (temp file, fsync, rename, fsync of the directory).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    let tmp = write_temp(path, bytes)?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("rename", path)(e));
    }
    if let Some(dir) = path.parent() {
        sync_dir(dir);
    }
    Ok(())
}

/// Replace `path` with `bytes` atomically for readers (temp file, rename), without an fsync:
/// for a file that need not outlive a crash of the machine (what it says is void after a
/// reboot, or made durable later), where two fsyncs would cost more than it is worth.
pub(crate) fn write_unsynced(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    let tmp = temp_file(path, bytes, false)?;
    if let Err(e) = std::fs::rename(&tmp, path) {
        let _ = std::fs::remove_file(&tmp);
        return Err(io("rename", path)(e));
    }
    Ok(())
}

/// Create `path` with `bytes` unless it exists (atomically, via `link(2)`). `Ok(false)` when it
/// already existed; its content is then left as it was.
pub(crate) fn create_atomic(path: &Path, bytes: &[u8]) -> Result<bool, EngineError> {
    let tmp = write_temp(path, bytes)?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                sync_dir(dir);
            }
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(false),
        Err(e) => Err(io("link", path)(e)),
    }
}
