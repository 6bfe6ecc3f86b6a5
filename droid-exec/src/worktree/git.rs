//! The git commands the worktree layer issues, through the engine's one git helper
//! ([`crate::snapshot::git`]: no hooks, no fsmonitor, no transport, the C locale): with
//! every filter driver the repository's configuration names emptied (code the repository does
//! not own never runs on our behalf), the git directory, work tree and index named explicitly
//! where it matters (a `.git` the agent planted in its worktree is never discovered), and a
//! fixed identity for the commits we make (they are made whether or not the user configured
//! one).

use std::ffi::OsString;
use std::path::Path;

use crate::error::EngineError;
use crate::snapshot::{self, GitRun, filter_names, neutral_filters, with_vars};

/// Who the commits droid-executor makes (the base, the agent's change) are by.
pub(crate) const IDENTITY_NAME: &str = "droid-executor";
/// Their e-mail address (reserved `.invalid` domain: it names no one).
pub(crate) const IDENTITY_EMAIL: &str = "droid-executor@localhost.invalid";

/// The objects we write into the user's object store are kept (the branch points at them):
/// compressed as git compresses by default, unlike the snapshot's throw-away objects.
const COMPRESSION: [&str; 4] = [
    "-c",
    "core.compression=-1",
    "-c",
    "core.looseCompression=-1",
];

/// Git for one repository: the environment every command of it runs with.
#[derive(Debug, Clone)]
pub(crate) struct Git {
    env: Vec<(OsString, OsString)>,
}

impl Git {
    /// Git for the repository around `dir`, with `env` (the engine's base environment) and the
    /// filter drivers its configuration names emptied.
    ///
    /// # Errors
    /// [`EngineError::Worktree`] when the configuration cannot be read (then no filter could
    /// be switched off, so nothing may be staged).
    pub(crate) async fn new(dir: &Path, env: &[(OsString, OsString)]) -> Result<Self, EngineError> {
        let names = filter_names(dir, env).await.map_err(|why| {
            EngineError::Worktree(format!(
                "cannot read the repository's git configuration in {}: {why}",
                dir.display()
            ))
        })?;
        let identity = [
            ("GIT_AUTHOR_NAME", OsString::from(IDENTITY_NAME)),
            ("GIT_AUTHOR_EMAIL", OsString::from(IDENTITY_EMAIL)),
            ("GIT_COMMITTER_NAME", OsString::from(IDENTITY_NAME)),
            ("GIT_COMMITTER_EMAIL", OsString::from(IDENTITY_EMAIL)),
        ];
        let env = with_vars(&neutral_filters(env, &names), &identity);
        Ok(Self { env })
    }

    /// Git for the repository whose git directory is `git_dir`, named explicitly (`GIT_DIR`)
    /// for reading its configuration and for every command: nothing is discovered from a
    /// directory the agent could have written.
    ///
    /// # Errors
    /// As [`Git::new`].
    pub(crate) async fn at(
        git_dir: &Path,
        env: &[(OsString, OsString)],
    ) -> Result<Self, EngineError> {
        let env = with_vars(env, &[("GIT_DIR", git_dir.as_os_str().to_owned())]);
        Self::new(git_dir, &env).await
    }

    /// Git for commands that never run a filter driver (ref and object plumbing: `branch -D`,
    /// `update-ref`, `rev-parse`), without reading the configuration for filter names first.
    pub(crate) fn for_refs(env: &[(OsString, OsString)]) -> Self {
        Self { env: env.to_vec() }
    }

    /// This git with `vars` set for its commands (`GIT_DIR`, `GIT_WORK_TREE`,
    /// `GIT_INDEX_FILE`).
    pub(crate) fn with(&self, vars: &[(&str, &Path)]) -> Self {
        let vars: Vec<(&str, OsString)> = vars
            .iter()
            .map(|(k, v)| (*k, v.as_os_str().to_owned()))
            .collect();
        Self {
            env: with_vars(&self.env, &vars),
        }
    }

    /// Run `git <args>` in `cwd`, whatever its exit status.
    ///
    /// # Errors
    /// [`EngineError::Spawn`] when git cannot be started.
    pub(crate) async fn run(
        &self,
        cwd: &Path,
        args: &[&str],
        input: Option<&[u8]>,
    ) -> Result<GitRun, EngineError> {
        let mut full: Vec<OsString> = COMPRESSION.iter().map(OsString::from).collect();
        full.extend(args.iter().map(OsString::from));
        snapshot::git(cwd, &self.env, &full, input).await
    }

    /// Run `git <args>` in `cwd`; its stdout.
    ///
    /// # Errors
    /// [`EngineError::Git`] when it fails (its stderr quoted), [`EngineError::Spawn`] when it
    /// cannot be started.
    pub(crate) async fn out(&self, cwd: &Path, args: &[&str]) -> Result<Vec<u8>, EngineError> {
        self.run(cwd, args, None).await?.into_stdout()
    }

    /// Run `git <args>` in `cwd`; its stdout's first line, trimmed (an object id, a path).
    ///
    /// # Errors
    /// As [`Git::out`].
    pub(crate) async fn line(&self, cwd: &Path, args: &[&str]) -> Result<String, EngineError> {
        let out = self.out(cwd, args).await?;
        Ok(String::from_utf8_lossy(&out)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_owned())
    }
}
