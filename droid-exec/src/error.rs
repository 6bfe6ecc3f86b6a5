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
}

impl EngineError {
    /// A closure turning an OS error into [`EngineError::Io`] for `action` on `path`, for
    /// `map_err`.
    pub(crate) fn io(
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
