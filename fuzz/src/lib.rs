//! Set-up shared by the fuzz targets that drive a whole front-end (`jsonrpc_framing`,
//! `http_request`): an engine that can never start anything.
//!
//! The engine names a droid program that does not exist, has no task store (so no background
//! task, hence no supervisor process) and does not re-run `suggested_commands`, and its only
//! allowed root is an empty directory. Whatever request the fuzzer writes, a run ends at the
//! spawn with `droid_not_found`; nothing the fuzzer writes is ever executed. The one process a
//! run can start is the engine's own read-only `git` probe of that empty directory (the
//! before-snapshot), for a request that names it as `repo_root`.

use std::path::PathBuf;
use std::time::Duration;

use droid_contract::Autonomy;
use droid_exec::{Engine, EngineConfig};

/// The per-target working directories, made once per process: `<tmp>/droid-executor-fuzz/<target>`
/// with `repo/` (the one allowed root, left empty) and `scratch/` (the engine's run directories).
/// The same place is reused by every run of a target, so repeated fuzzing leaves nothing behind.
#[derive(Debug, Clone)]
pub struct WorkDir {
    /// The only directory a request's `repo_root` may name.
    pub repo: PathBuf,
    /// Where the engine makes its per-run private directories.
    pub scratch: PathBuf,
    /// A path where no program is (`droid_bin`).
    pub missing_droid: PathBuf,
}

impl WorkDir {
    /// Make (or reuse) the working directories of `target`.
    ///
    /// # Panics
    /// When the temp directory is not writable: the target cannot run at all then.
    pub fn new(target: &str) -> Self {
        let base = std::env::temp_dir()
            .join("droid-executor-fuzz")
            .join(target);
        let repo = base.join("repo");
        let scratch = base.join("scratch");
        for dir in [&repo, &scratch] {
            std::fs::create_dir_all(dir)
                .unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
        }
        Self {
            missing_droid: base.join("no-such-droid"),
            repo,
            scratch,
        }
    }
}

/// An engine that starts nothing (see the module docs); like the suites' `common::engine`
/// otherwise.
pub fn engine(dir: &WorkDir) -> Engine {
    Engine::new(EngineConfig {
        droid_bin: Some(dir.missing_droid.clone()),
        droid_source: "fuzz (a path where no program is)".into(),
        droid_warnings: Vec::new(),
        agents: Vec::new(),
        env: Vec::new(),
        allowed_roots: vec![dir.repo.clone()],
        max_autonomy: Autonomy::Medium,
        default_timeout: Duration::from_secs(10),
        default_model: None,
        verify: false,
        sandbox: Default::default(),
        sandbox_writable: Vec::new(),
        excerpt_bytes: 4096,
        kill_grace: Duration::from_secs(1),
        scratch_root: dir.scratch.clone(),
        store_dir: None,
        max_concurrent: 4,
        task_ttl: Duration::from_secs(3600),
        supervisor: None,
        cgroups: true,
        limits: Default::default(),
        redact: Vec::new(),
        worktrees: Default::default(),
        client_env: Default::default(),
    })
}
