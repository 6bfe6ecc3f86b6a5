//! Replacing a client's configuration file the way an editor would: through a temporary file
//! beside it and a rename (a reader never sees half a file), keeping the old file's permission
//! bits (a settings file holding a key may be 0600), and following a symbolic link to replace
//! its target (a dotfiles checkout links `~/.config/zed/settings.json` into a repository).

use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::Path;

use droid_exec::EngineError;

/// Replace `path` with `bytes`, keeping the old file's permission bits (a new file gets 0644
/// less the umask) and its directory made when absent; a symbolic link is followed.
///
/// # Errors
/// [`EngineError::Io`] when the file cannot be written or renamed into place.
pub(crate) fn replace_file(path: &Path, bytes: &[u8]) -> Result<(), EngineError> {
    let target = match std::fs::symlink_metadata(path) {
        Ok(m) if m.file_type().is_symlink() => {
            std::fs::canonicalize(path).map_err(EngineError::io("resolve", path))?
        }
        _ => path.to_path_buf(),
    };
    let mode = match std::fs::metadata(&target) {
        Ok(m) => Some(m.permissions().mode() & 0o7777),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(EngineError::io("stat", &target)(e)),
    };
    let dir = target.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(EngineError::io("create directory", dir))?;
    let name = target
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
    let tmp = dir.join(format!(".{name}.{}.droid-executor.tmp", std::process::id()));
    let written = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o644)
            .open(&tmp)?;
        if let Some(mode) = mode {
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        f.write_all(bytes)?;
        f.sync_all()
    })();
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(EngineError::io("write", &tmp)(e));
    }
    if let Err(e) = std::fs::rename(&tmp, &target) {
        let _ = std::fs::remove_file(&tmp);
        return Err(EngineError::io("rename", &target)(e));
    }
    if let Ok(d) = std::fs::File::open(dir) {
        // durability of the rename; a directory that cannot be synced loses nothing we can fix
        let _ = d.sync_all();
    }
    Ok(())
}
