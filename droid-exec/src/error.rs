//! The engine's error type. Outcomes of a run (timeout, cancel, droid failing) are not errors:
//! they are data in the `ExecutionResult`. `Err` means the engine could not do what was asked at all.

use std::path::PathBuf;

/// Why the engine could not do something.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// A run marker that would match other runs' processes (a guardian refuses it).
    #[error("invalid run marker {0:?}: it must be non-empty and hold no '=' or NUL")]
    InvalidMarker(String),
    /// A reaper was given a directory that is not a host cgroup of ours (`droid-executor-…` on
    /// a cgroup v2 file system, an absolute path): it touches nothing.
    #[error(
        "{0} is not a droid-executor host cgroup (an absolute path on cgroup2, named droid-executor-…)"
    )]
    InvalidCgroup(String),
    /// A process could not be started.
    #[error("could not start {program}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// Reading or writing a file failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What was being done ("read", "write", "create directory").
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// An input named by the user (a file, a FIFO, stdin) is larger than its limit; nothing
    /// past the limit was read.
    #[error("{what} is larger than the limit of {limit} bytes ({why})")]
    InputTooLarge {
        /// The input, as the user named it (`--request /dev/zero`).
        what: String,
        /// The limit in bytes.
        limit: usize,
        /// Where the limit comes from and how to raise it.
        why: String,
    },
    /// An input that is a pipe, FIFO or terminal gave nothing for too long (a FIFO nobody
    /// writes to).
    #[error(
        "{what}: nothing arrived for {secs} s (a pipe or FIFO without a writer?); write the \
         input to it, or name a regular file"
    )]
    InputIdle {
        /// The input, as the user named it.
        what: String,
        /// How long we waited for the next byte.
        secs: u64,
    },
    /// An input named by the user could not be read.
    #[error("cannot read {what}: {source}")]
    Input {
        /// The input, as the user named it.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The configuration file is invalid.
    #[error("invalid config {path}: {message}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong, with line and column when known.
        message: String,
    },
    /// A configuration value from the environment is invalid.
    #[error("invalid value for {name}: {message}")]
    Setting {
        /// The variable or key.
        name: String,
        /// What is wrong.
        message: String,
    },
    /// A git command failed while snapshotting the repository.
    #[error("git {args} failed: {message}")]
    Git {
        /// The git arguments.
        args: String,
        /// Its stderr, trimmed.
        message: String,
    },
    /// No task has this id (never existed, expired, or not an id at all).
    #[error("no such task: {id} ({hint})")]
    NoSuchTask {
        /// The id asked for.
        id: String,
        /// Why, or what ids look like.
        hint: String,
    },
    /// A store file could not be parsed.
    #[error("corrupt task store file {path}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// The parse error.
        message: String,
    },
    /// Installing the skill would overwrite files edited since they were installed.
    #[error(
        "{} has local edits in {}; nothing was changed. Re-run with --force to replace them (the \
         edited files are kept as <file>.bak)",
        dir.display(),
        files.join(", ")
    )]
    LocalEdits {
        /// The skill folder.
        dir: PathBuf,
        /// The edited files, relative to it.
        files: Vec<String>,
    },
    /// Background tasks need a store directory and a supervisor program.
    #[error("background tasks are not available: {0}")]
    TasksUnavailable(String),
    /// A task's git worktree could not be made, used or removed (docs/worktrees.md): what, and
    /// what to do.
    #[error("{0}")]
    Worktree(String),
}

impl EngineError {
    /// A closure turning an OS error into [`EngineError::Io`] for `action` on `path`, for
    /// `map_err`.
    pub fn io(
        action: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> EngineError {
        let path = path.to_path_buf();
        move |source| EngineError::Io {
            action,
            path,
            source,
        }
    }
}
