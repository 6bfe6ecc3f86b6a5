//! What to start ([`SpawnSpec`]), and whether a program can be found ([`resolve_program`]):
//! shared by both ways a child is started ([`crate::process::spawn`], [`crate::process::spawn::leaf`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// What to start.
#[derive(Debug, Clone)]
pub struct SpawnSpec {
    /// The program (a path, or a name looked up in the child's `PATH`).
    pub program: PathBuf,
    /// Arguments after the program.
    pub args: Vec<OsString>,
    /// Working directory.
    pub cwd: PathBuf,
    /// The complete environment of the child.
    pub env: Vec<(OsString, OsString)>,
    /// Give the child a stdin pipe (otherwise stdin is `/dev/null`, or `stdin_file`).
    pub stdin_piped: bool,
    /// Open this file as the child's stdin (an agent reading its prompt from stdin gets the
    /// prompt, then end-of-file; never a pipe left open).
    pub stdin_file: Option<PathBuf>,
    /// Start it detached: a new session, stdout and stderr appended to this file (0600), no
    /// parent-death signal, not killed when its handle is dropped.
    pub detach_log: Option<PathBuf>,
    /// Resource limits the child sets on itself before it executes
    /// ([`crate::process::limits::Rlimits::set_on_self`]; `Rlimits::NONE`: none).
    pub rlimits: crate::process::limits::Rlimits,
}

/// Does `program` name something runnable: an existing file, or a name found on `path_var`?
pub fn resolve_program(program: &Path, path_var: Option<&std::ffi::OsStr>) -> Option<PathBuf> {
    if program.components().count() > 1 || program.is_absolute() {
        return is_executable(program).then(|| program.to_path_buf());
    }
    let path_var = path_var?;
    std::env::split_paths(path_var)
        .map(|dir| dir.join(program))
        .find(|candidate| is_executable(candidate))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}
