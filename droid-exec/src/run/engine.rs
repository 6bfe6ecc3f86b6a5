//! The engine's entry point: admit a request, run the request's agent CLI under supervision, verify, and assemble
//! the result.

use std::collections::HashMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use droid_contract::{
    Autonomy, ExecutionRequest, ExecutionResult, HostCheck, Issue, IssueType, ProviderId, RunEnd,
    Status, Violations,
};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::config::EngineConfig;
use crate::error::EngineError;
use crate::excerpt::head_str;
use crate::host::FsFacts;
use crate::process::capture::capture;
use crate::process::cgroup::{Host, Leaf};
use crate::process::child::RunChild;
use crate::process::guard::{self, TreeControl};
use crate::process::reap::{Reapers, Reaping};
use crate::process::sandbox::{self, Writable};
use crate::process::scratch::{Scratch, ScratchPool, unique_id};
use crate::process::spawn::leaf::{IntoError, spawn_into};
use crate::process::spawn::{SpawnSpec, spawn_confined};
use crate::process::sweep::MARKER_VAR;
use crate::providers::{self, Invocation, PromptInput, Provider};
use crate::run::assemble::{Assembly, assemble};
use crate::run::event::{Phase, RunEvent};
use crate::run::git_guard::GitGuard;
use crate::run::guarded_tree::{RecordCache, Restored};
use crate::run::prompt;
use crate::run::redact::Redactor;
use crate::run::state_guard::StateGuard;
use crate::run::supervise::{Limits, Publisher, supervise};
use crate::snapshot::{Snapshot, SnapshotLimits};
use crate::worktree::pin;

/// The variable naming the task store; inside a run it names the run's own ([`RUN_STORE_DIR`]).
const RUN_STORE_VAR: &str = "DROID_EXECUTOR_STORE_DIR";
/// The run's own task store, in its `TMPDIR`.
const RUN_STORE_DIR: &str = "droid-executor-store";
use crate::process::limits::{Controllers, Rlimits};
use crate::run::verify::{VerifyPlan, verify};
use crate::run_slots::Scheduler;
use crate::worktree::lease::Lease;

/// What a binary's version is cached under: the binary as it is now, and how it is asked.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct VersionKey {
    program: PathBuf,
    args: Vec<OsString>,
    len: u64,
    modified: Option<std::time::SystemTime>,
}

/// Versions found in this process (see [`Engine::droid_version`]); one entry per binary.
static VERSIONS: std::sync::OnceLock<
    std::sync::Mutex<HashMap<VersionKey, Arc<tokio::sync::OnceCell<String>>>>,
> = std::sync::OnceLock::new();

/// The longest `droid --version` may take (a start of droid takes 50-100 ms; a loaded machine
/// or a cold disk cache can take seconds).
const VERSION_LIMIT: Duration = Duration::from_secs(10);

/// Runs execution requests. Cheap to share behind an `Arc`; runs are independent.
#[derive(Debug)]
pub struct Engine {
    cfg: EngineConfig,
    /// Drives every run with this provider whatever the request names (tests of the engine
    /// against a made-up CLI); `None`: the request's provider.
    provider: Option<Arc<dyn Provider>>,
    scheduler: Option<Scheduler>,
    /// Ending droids that completed, after their results were returned.
    reapers: Reapers,
    /// The cgroup of this engine's runs ([`crate::process::cgroup`]), made by the first run;
    /// `None` where there can be none (the runs use a supervisor process instead).
    cgroups: std::sync::OnceLock<Option<Arc<Host>>>,
    /// The kernel refused a child in a leaf: no more leaves for this engine's runs.
    no_leaves: std::sync::atomic::AtomicBool,
    /// Hooks and config the git guard read in earlier runs, reused while unchanged.
    guard_records: RecordCache,
    /// Scratch directories of earlier runs whose processes were proven gone, emptied.
    scratch_pool: Arc<ScratchPool>,
}

/// What a run leaves to the background once its result is returned: droid being ended, and
/// what must be held until it is (the run's guardian, and its run slot).
struct Aftermath {
    reaping: Reaping,
    guardian: Option<guard::Guardian>,
    /// The run's scratch directory, droid's `TMPDIR`: removed, or kept for another run when
    /// droid's tree is proven gone and `scratch_reusable`, once the reaping is over.
    scratch: Scratch,
    scratch_reusable: bool,
}

impl Engine {
    /// An engine driving each request's provider (droid by default).
    pub fn new(cfg: EngineConfig) -> Self {
        Self::build(cfg, None)
    }

    /// An engine driving every request with `provider`, with droid's program
    /// (`droid_bin`).
    pub fn with_provider(cfg: EngineConfig, provider: Arc<dyn Provider>) -> Self {
        Self::build(cfg, Some(provider))
    }

    fn build(cfg: EngineConfig, provider: Option<Arc<dyn Provider>>) -> Self {
        let scheduler = cfg
            .store_dir
            .as_deref()
            .map(|dir| Scheduler::new(dir, cfg.max_concurrent));
        Self {
            cfg,
            provider,
            scheduler,
            reapers: Reapers::default(),
            cgroups: std::sync::OnceLock::new(),
            no_leaves: std::sync::atomic::AtomicBool::new(false),
            guard_records: RecordCache::default(),
            scratch_pool: Arc::default(),
        }
    }

    /// The cgroup of this engine's runs, made (with its reaper) the first time it is asked for.
    fn cgroup_host(&self) -> Option<&Arc<Host>> {
        self.cgroups
            .get_or_init(|| {
                let program = self
                    .cfg
                    .supervisor
                    .as_deref()
                    .filter(|_| self.cfg.cgroups)?;
                Host::start(program, &self.cfg.scratch_root, self.cfg.limits)
                    .inspect_err(|why| {
                        tracing::info!("runs use a supervisor process, not a cgroup: {why}");
                    })
                    .ok()
            })
            .as_ref()
    }

    /// The cgroup host of this engine's runs, unless the kernel refused a child in a leaf.
    pub(crate) fn leaf_host(&self) -> Option<&Arc<Host>> {
        if self.no_leaves.load(std::sync::atomic::Ordering::Relaxed) {
            return None;
        }
        self.cgroup_host()
    }

    /// A cgroup leaf for one run's processes, where this engine has a host.
    pub(crate) fn leaf(&self) -> Option<Leaf> {
        self.leaf_host()?
            .leaf()
            .inspect_err(|e| tracing::warn!("this run has no cgroup: {e}"))
            .ok()
    }

    /// Wait until every droid this engine's runs left running after their completion events
    /// (the results do not wait for droid's exit) is reaped and its process tree ended. A
    /// front-end that exits calls it after handing its results over; a long-lived one need not
    /// (the run's supervisor, or without one its guardian and droid's parent-death signal, end the tree anyway if the process
    /// dies first).
    pub async fn settled(&self) {
        self.reapers.settled().await;
    }

    /// [`Engine::settled`], SIGKILLing those droids at once rather than giving them the rest
    /// of `kill_grace` to honour their SIGTERM (the real droid outside airgap mode can take
    /// longer than that): for a front-end whose caller waits for it to exit, after it has
    /// handed its result over (`droid-executor run`). Droids of runs that complete later are
    /// killed at once too.
    pub async fn settle_now(&self) {
        self.reapers.hurry();
        self.reapers.settled().await;
    }

    /// The configuration.
    pub fn config(&self) -> &EngineConfig {
        &self.cfg
    }

    /// Parse a request with every rule, host rules included (repo_root exists, is a directory,
    /// lies under `allowed_roots`; files of interest do not escape through symlinks).
    ///
    /// # Errors
    /// Every violation, each with its JSON path.
    pub fn admit(&self, value: &Value) -> Result<ExecutionRequest, Violations> {
        ExecutionRequest::from_value(
            value,
            Some(HostCheck {
                facts: &FsFacts,
                allowed_roots: &self.cfg.allowed_roots,
            }),
        )
    }

    /// Admit and run; an invalid request gives an `error` result listing every violation.
    pub async fn execute(
        &self,
        value: &Value,
        cancel: CancellationToken,
        events: Option<mpsc::Sender<RunEvent>>,
    ) -> ExecutionResult {
        match self.admit(value) {
            Ok(req) => self.run(&req, cancel, events).await,
            Err(v) => {
                let task_id = value
                    .get("task_id")
                    .and_then(Value::as_str)
                    .map(str::to_owned);
                let result = ExecutionResult::invalid_request(task_id, &v);
                if let Some(tx) = events {
                    let _ = tx.try_send(RunEvent::Completed {
                        status: result.status,
                    });
                }
                result
            }
        }
    }

    /// The provider a run of `id` uses.
    fn provider_for(&self, id: ProviderId) -> &dyn Provider {
        match &self.provider {
            Some(p) => p.as_ref(),
            None => providers::provider(id),
        }
    }

    /// The program a run of `id` starts (a made-up provider uses droid's).
    fn program_for(&self, id: ProviderId) -> (Option<&Path>, &str) {
        let id = if self.provider.is_some() {
            ProviderId::Droid
        } else {
            id
        };
        self.cfg.program_of(id)
    }

    /// droid's version; see [`Engine::agent_version`].
    pub async fn droid_version(&self) -> Option<String> {
        self.agent_version(ProviderId::Droid).await
    }

    /// A provider's version, found once per process for each binary (keyed on its path, size
    /// and modification time, so a replaced binary is asked again): from the npm package the
    /// binary belongs to (its `package.json`, read in microseconds), else from
    /// `<program> --version` (a full start of the CLI, 50 ms to seconds); `None` when the
    /// program is missing or says nothing. Concurrent callers share one lookup, so a burst of
    /// callers (a client sending thousands of `droid_ping`s) starts at most one `--version` at
    /// a time; a failed lookup is not kept (the next caller tries again).
    pub async fn agent_version(&self, id: ProviderId) -> Option<String> {
        let provider = self.provider_for(id);
        let program = self.program_for(id).0?;
        let meta = std::fs::metadata(program).ok()?;
        let key = VersionKey {
            program: program.to_path_buf(),
            args: provider.version_args(),
            len: meta.len(),
            modified: meta.modified().ok(),
        };
        let cell = {
            let mut cache = VERSIONS
                .get_or_init(Default::default)
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // an older binary at the same path is gone: forget its version
            cache.retain(|k, _| k.program != key.program || k.args != key.args || *k == key);
            Arc::clone(cache.entry(key).or_default())
        };
        cell.get_or_try_init(|| async {
            if let Some(v) = providers::npm::package_version(program, provider.package().0) {
                return Ok(v);
            }
            self.run_agent_version(id).await
        })
        .await
        .ok()
        .cloned()
    }

    /// Run droid's `--version` now; see [`Engine::run_agent_version`].
    pub(crate) async fn run_droid_version(&self) -> Result<String, String> {
        self.run_agent_version(ProviderId::Droid).await
    }

    /// Run `<program> --version` now, bounded by [`VERSION_LIMIT`] (never the package.json
    /// shortcut of [`Engine::agent_version`]: `doctor` must know that the program runs): the
    /// version it printed, or why it gave none.
    pub(crate) async fn run_agent_version(&self, id: ProviderId) -> Result<String, String> {
        let provider = self.provider_for(id);
        let program = self
            .program_for(id)
            .0
            .map(Path::to_path_buf)
            .ok_or_else(|| format!("{} was not found", provider.program()))?;
        let env: Vec<(OsString, OsString)> = self
            .cfg
            .env
            .iter()
            .filter(|(k, _)| providers::env_allowed(id, &k.to_string_lossy()))
            .cloned()
            .collect();
        let spec = SpawnSpec {
            program,
            args: provider.version_args(),
            cwd: self.cfg.scratch_root.clone(),
            env,
            stdin_piped: false,
            stdin_file: None,
            detach_log: None,
            rlimits: crate::process::limits::Rlimits::NONE,
        };
        let marker = format!("version-{}", unique_id());
        let out = capture(&spec, None, VERSION_LIMIT, 4096, &marker)
            .await
            .map_err(|e| e.to_string())?;
        let said = |tail: &crate::excerpt::Tail| {
            let text = tail.text();
            let line = text.lines().map(str::trim).find(|l| !l.is_empty());
            // a binary that is not one may print anything: keep the reason one readable line
            let clean = |l: &str| -> String {
                l.chars()
                    .map(|c| if c.is_control() { '?' } else { c })
                    .collect()
            };
            line.map_or_else(String::new, |l| format!(": {}", head_str(&clean(l), 200)))
        };
        let printed = out.stdout.text();
        let v = provider.parse_version(printed.trim());
        match out.code {
            _ if out.timed_out => Err(format!(
                "--version did not answer within {} s",
                VERSION_LIMIT.as_secs()
            )),
            Some(0) => v.ok_or_else(|| format!("--version printed nothing{}", said(&out.stderr))),
            Some(code) => Err(format!(
                "--version exited with code {code}{}",
                said(&out.stderr)
            )),
            None => Err(format!(
                "--version was killed by a signal{}",
                said(&out.stderr)
            )),
        }
    }

    /// The scheduler of run slots, when the configuration names a store.
    pub fn scheduler(&self) -> Option<&Scheduler> {
        self.scheduler.as_ref()
    }

    /// Run an admitted request. Never fails: every outcome is a result.
    ///
    /// With a store configured, the run first waits for a run slot and for its repository to be
    /// free (publishing [`Phase::Queued`] while it waits); the time budget starts when it gets
    /// them, and a cancel while waiting ends it `cancelled` without starting droid.
    pub async fn run(
        &self,
        req: &ExecutionRequest,
        cancel: CancellationToken,
        events: Option<mpsc::Sender<RunEvent>>,
    ) -> ExecutionResult {
        // a worktree task's change waits for `tasks apply <id>`: the run is a task of the store
        // (a best_of's winner too: its candidates are tasks of the store, `crate::fanout`)
        if (self.in_worktree(req) || !req.best_of.is_empty()) && self.cfg.store_dir.is_some() {
            return self.run_as_task(req, cancel, events).await;
        }
        let marker = format!("run-{}", unique_id());
        self.run_as(req, &marker, None, cancel, Publisher::new(events), None)
            .await
    }

    /// One agent's attempt: [`Engine::run`] with the caller's sweep marker (every process of
    /// the run carries `DROID_EXECUTOR_RUN_ID=<marker>`), submission number (its place in the
    /// queue) and publisher (a background task's records every event in its log), and the task
    /// it is (a worktree is made for it: `crate::run::isolation`). Several agents on one task
    /// (`fallback`, `best_of`) are attempts of this, made by `crate::fanout`.
    pub(crate) async fn run_once(
        &self,
        req: &ExecutionRequest,
        marker: &str,
        seq: Option<u64>,
        cancel: CancellationToken,
        publish: Publisher,
        task: Option<&crate::task_key::TaskKey>,
    ) -> ExecutionResult {
        let redact = Redactor::for_config(&self.cfg);
        let publish = publish.redacting(redact.clone());
        let queued_at = Instant::now();
        // a worktree task's worktree is made now, from the repository as it is at submission
        let lease = match self.worktree_lease(req, task).await {
            Ok(lease) => lease,
            Err(mut r) => {
                r.task_id = req.task_id.as_ref().map(|t| t.as_str().to_owned());
                publish.send(RunEvent::Completed { status: r.status });
                return redact.apply_to(*r);
            }
        };
        let (lock_at, usage) = self.run_lock(req, lease.as_ref());
        let permit = match &self.scheduler {
            None => None,
            Some(s) => {
                let waiting = || {
                    publish.send(RunEvent::Progress {
                        phase: Phase::Queued,
                        message: "waiting for a run slot (max_concurrent) or for another run on \
                                  this repository to end"
                            .into(),
                    });
                };
                match s.acquire_as(seq, &lock_at, usage, &cancel, waiting).await {
                    Ok(Some(p)) => Some(p),
                    Ok(None) => {
                        let mut r = cancelled_before_start();
                        r.task_id = req.task_id.as_ref().map(|t| t.as_str().to_owned());
                        if let Some(l) = lease {
                            drop(l.finish(&mut r, &self.cfg.env).await);
                        }
                        publish.send(RunEvent::Completed { status: r.status });
                        return redact.apply_to(r);
                    }
                    Err(e) => {
                        let mut r = internal_error(
                            &e,
                            IssueType::EnvIssue,
                            "check that the task store (store_dir) is writable; droid-executor \
                             doctor checks it",
                        );
                        r.task_id = req.task_id.as_ref().map(|t| t.as_str().to_owned());
                        if let Some(l) = lease {
                            drop(l.finish(&mut r, &self.cfg.env).await);
                        }
                        publish.send(RunEvent::Completed { status: r.status });
                        return redact.apply_to(r);
                    }
                }
            }
        };
        let waited = queued_at.elapsed();
        let started = Instant::now();
        let mut after = None;
        let mut result = self
            .run_inner(
                req,
                marker,
                &cancel,
                &publish,
                started,
                &mut after,
                lease.as_ref(),
            )
            .await;
        // the worktree's change recorded, `ready` for review; its lock held like the slot
        let worktree = match lease {
            Some(l) => Some(l.finish(&mut result, &self.cfg.env).await),
            None => None,
        };
        if waited >= Duration::from_secs(1) {
            result.logs.insert(
                0,
                format!(
                    "waited {:.1} s for a run slot before starting",
                    waited.as_secs_f64()
                ),
            );
        }
        result.task_id = req.task_id.as_ref().map(|t| t.as_str().to_owned());
        result.notes_for_human.clone_from(&req.notes_for_human);
        result.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        if publish.dropped() > 0 {
            result.logs.push(format!(
                "{} progress events were dropped because the consumer was slow",
                publish.dropped()
            ));
        }
        // every field, whatever reached it (verify commands, droid's report, the caller's notes):
        // the masking the store applies, for the front-ends' results too
        // (docs/architecture.md#security)
        let result = redact.apply_to(result);
        publish.send(RunEvent::Completed {
            status: result.status,
        });
        // the slot is released only after `Completed`: event times of runs sharing a repository
        // never overlap; and only once droid is gone: a repository has one run's processes at
        // a time
        match after {
            Some(Aftermath {
                reaping,
                guardian,
                mut scratch,
                scratch_reusable,
            }) => self
                .reapers
                .track(reaping, (guardian, permit, worktree), move |proven| {
                    if proven && scratch_reusable {
                        scratch.reusable();
                    }
                    drop(scratch);
                }),
            None => drop((permit, worktree)),
        }
        result
    }

    // the run's worktree (`crate::run::isolation`) is one more thing it runs with; bundling the
    // eight into a struct would only rename them
    #[allow(clippy::too_many_arguments)]
    async fn run_inner(
        &self,
        req: &ExecutionRequest,
        marker: &str,
        cancel: &CancellationToken,
        publish: &Publisher,
        started: Instant,
        after: &mut Option<Aftermath>,
        lease: Option<&Lease>,
    ) -> ExecutionResult {
        let cfg = &self.cfg;
        // in a worktree, the run's repo_root is the worktree's (`crate::run::isolation`)
        let in_tree;
        let req = match lease {
            Some(l) => {
                in_tree = l.request_in(req);
                &in_tree
            }
            None => req,
        };
        let runtime = req.max_runtime_seconds.map_or(cfg.default_timeout, |r| {
            Duration::from_secs(u64::from(r.seconds()))
        });
        let deadline = started + runtime;
        let provider = self.provider_for(req.provider);
        let program = match self.program_for(req.provider) {
            (Some(p), _) => p.to_path_buf(),
            (None, source) => return agent_missing(provider, source),
        };
        // resolve once, check, and use only the resolved directory from here on: the directory
        // named at admission may have been replaced (by a symlink out of allowed_roots) while
        // the run waited in the queue
        let asked = req.context.repo_root.as_path();
        let resolved = match lease {
            // ours, under the store: not a path of allowed_roots
            Some(_) => ResolvedRoot::at(asked),
            None => self.resolve_root(asked),
        };
        let resolved = match resolved {
            Ok(r) => r,
            Err(result) => return *result,
        };
        let root = resolved.path.as_path();
        let real_root = resolved.path.clone();
        let redact = Redactor::for_config(cfg);
        let id = unique_id();
        let mut scratch = match Scratch::from_pool(&self.scratch_pool, &cfg.scratch_root, &id) {
            Ok(s) => s,
            Err(e) => {
                return internal_error(
                    &e,
                    IssueType::EnvIssue,
                    "check that the temp directory (TMPDIR) exists and is writable",
                );
            }
        };
        publish.send(RunEvent::Progress {
            phase: Phase::Snapshot,
            message: format!("recording {}", root.display()),
        });
        let limits = SnapshotLimits::default();
        // a worktree's change is measured from its commits, not by snapshots
        let before = match lease {
            Some(_) => None,
            None if pin::wanted() => {
                // an attempt of a fallback: the repository as it is now is also where a later
                // attempt's worktree starts if this one changes files (`crate::worktree::pin`)
                let pin_index = scratch.path().join("pin.index");
                let (before, pinned) = tokio::join!(
                    Snapshot::take(root, &cfg.env, scratch.path(), &limits, None),
                    pin::take(root, &cfg.env, &pin_index)
                );
                match pinned {
                    Ok(base) => pin::record(base),
                    Err(e) => tracing::warn!("the repository's base could not be pinned: {e}"),
                }
                Some(before)
            }
            None => Some(Snapshot::take(root, &cfg.env, scratch.path(), &limits, None).await),
        };
        let git_fallback = before
            .as_ref()
            .and_then(|b| b.as_ref().ok())
            .and_then(Snapshot::git_fallback)
            .map(str::to_owned);
        let prompt = prompt::render(req, req.effective_autonomy(cfg.max_autonomy));
        let prompt_file = match scratch.write("prompt.md", prompt.as_bytes()) {
            Ok(p) => p,
            Err(e) => {
                return internal_error(
                    &e,
                    IssueType::EnvIssue,
                    "check that the temp directory (TMPDIR) is writable",
                );
            }
        };
        // the configured default model is droid's (a model id of one CLI means nothing to another)
        let model = req.model.clone().or_else(|| {
            (req.provider == ProviderId::Droid)
                .then(|| cfg.default_model.clone())
                .flatten()
        });
        let autonomy = req.effective_autonomy(cfg.max_autonomy);
        let marker = marker.to_owned();
        // the verification commands get the base environment; the agent gets it without the
        // other providers' variables (their keys), plus what its provider sets
        let mut env: Vec<(OsString, OsString)> = cfg
            .env
            .iter()
            .filter(|(k, _)| k != "TMPDIR" && k != MARKER_VAR && k != RUN_STORE_VAR)
            .cloned()
            .collect();
        env.push(("TMPDIR".into(), scratch.tmp().into()));
        env.push((MARKER_VAR.into(), marker.clone().into()));
        // a task delegated from inside the run (`droid-executor ask … --background`, the MCP
        // server droid starts) goes to a store of the run's own, in its scratch directory: the
        // user's store is outside what the run may write, and a delegated task must get no more
        // than the run has (its worker is started from inside the run, so it inherits the run's
        // confinement and dies with it)
        env.push((
            RUN_STORE_VAR.into(),
            scratch.tmp().join(RUN_STORE_DIR).into(),
        ));
        let mut agent_env: Vec<(OsString, OsString)> = env
            .iter()
            .filter(|(k, _)| providers::env_allowed(provider.id(), &k.to_string_lossy()))
            .cloned()
            .collect();
        let inv = Invocation {
            cwd: root,
            prompt_file: &prompt_file,
            run_dir: scratch.path(),
            autonomy,
            model: model.as_deref(),
            reasoning_effort: req.reasoning_effort.as_deref(),
            session_id: req.session_id.as_deref(),
            as_root: nix::unistd::geteuid().is_root(),
            confined: sandbox::confines(cfg.sandbox, sandbox::kernel_abi()),
            env: &agent_env,
        };
        let args = match provider.args(&inv) {
            Ok(a) => a,
            Err(unsupported) => return refused_by_provider(provider, &unsupported),
        };
        // the provider's variables win over the caller's (a provider that only means defaults
        // leaves out what `inv.env` already has)
        let fixed = provider.env(&inv);
        for (k, v) in fixed {
            agent_env.retain(|(name, _)| *name != k);
            agent_env.push((k, v));
        }

        // the write confinement of the agent and the verification commands
        // (`crate::process::sandbox`), decided now that the run's paths are known
        let home = sandbox::env_path(&agent_env, "HOME");
        // every agent CLI's configuration (what it runs or obeys later), as it was
        let config_paths = home
            .as_deref()
            .map(|h| providers::all_config_paths(h, &agent_env))
            .unwrap_or_default();
        let state_home = home.clone();
        let state = home
            .as_deref()
            .map(|h| provider.state_paths(h, &agent_env))
            .unwrap_or_default();
        // the request's own extra directories, resolved and checked again now (as repo_root is:
        // a directory may have been swapped for a symlink out of the allowed roots meanwhile)
        let mut extra = cfg.sandbox_writable.clone();
        for (i, dir) in req.sandbox_writable.iter().enumerate() {
            match self.resolve_writable(dir.as_path()) {
                Ok(p) => extra.push(p),
                Err(why) => {
                    let v = Violations(vec![droid_contract::Violation::new(
                        format!("$.sandbox_writable[{i}]"),
                        why,
                    )]);
                    return ExecutionResult::invalid_request(None, &v);
                }
            }
        }
        // at `read_only` the repository is read-only to the kernel, for every agent CLI; the
        // verification commands (ours, not the agent's) may write it (a test's caches)
        let writable = Writable {
            repo_root: root.to_path_buf(),
            repo_read_only: autonomy == Autonomy::ReadOnly,
            scratch: scratch.path().to_path_buf(),
            home,
            state,
            extra,
        };
        let confinement = match sandbox::plan(cfg.sandbox, sandbox::kernel_abi(), &writable) {
            Ok(p) => p,
            Err(why) => return sandbox_refused(&why),
        };
        let verify_confine = confinement.confinement.as_ref().map(|c| {
            sandbox::Confinement::resolve(
                c.abi(),
                &Writable {
                    repo_read_only: false,
                    ..writable.clone()
                },
            )
        });
        let confine = confinement.confinement.as_ref();
        let git_guard = GitGuard::record(root, &self.guard_records);
        // a worktree shares the repository's hooks and config (its common git directory): guarded
        // when the run could write there (the user goes on working in the repository meanwhile,
        // and a `git push -u` of theirs must not be undone when nothing of the run could)
        let common_guard = lease
            .and_then(|l| l.common_work_tree_writable(confine, verify_confine.as_ref()))
            .and_then(|top| GitGuard::record(&top, &self.guard_records));
        let state_guard =
            StateGuard::record(&config_paths, state_home.as_deref(), &self.guard_records);

        if cancel.is_cancelled() {
            return cancelled_before_start();
        }
        if let Err(result) = resolved.still_there() {
            return *result;
        }
        // a new worktree's setup commands, confined like the verification, before the agent
        let setup_runs = match lease.filter(|l| !l.setup_commands().is_empty()) {
            Some(l) => {
                publish.send(RunEvent::Progress {
                    phase: Phase::Snapshot,
                    message: format!(
                        "setting up the worktree: {} command(s)",
                        l.setup_commands().len()
                    ),
                });
                match self
                    .set_up(
                        l.setup_commands(),
                        root,
                        &env,
                        deadline,
                        &marker,
                        &redact,
                        verify_confine.as_ref(),
                        cancel,
                    )
                    .await
                {
                    Ok(runs) => runs,
                    Err(result) => return *result,
                }
            }
            None => Vec::new(),
        };
        let spec = SpawnSpec {
            program: program.clone(),
            args,
            cwd: root.to_path_buf(),
            env: agent_env.clone(),
            stdin_piped: false,
            stdin_file: (provider.prompt_input() == PromptInput::Stdin)
                .then(|| prompt_file.clone()),
            detach_log: None,
            rlimits: Rlimits::for_child(cfg.limits, Controllers::default()),
        };
        // droid runs under the run's supervisor, which owns its whole process tree (see
        // `crate::process::guard`); without one (no supervisor program, or droid not a runnable path, which
        // the direct spawn below reports), straight under us with a guardian that ends what
        // carries the marker if this process dies first (SIGKILL included); the guardian is held
        // to the end of the run, verification included, and until droid is reaped when that
        // comes later (see `crate::process::reap`)
        let guardian = || {
            cfg.supervisor.as_deref().and_then(|supervisor| {
                guard::start(supervisor, &marker)
                    .inspect_err(|e| tracing::warn!("this run has no guardian: {e}"))
                    .ok()
            })
        };
        let mut held_guardian = None;
        // in a cgroup leaf: the leaf is the tree, and the host's reaper its guardian
        let in_leaf = self.leaf().and_then(|leaf| {
            let spec = SpawnSpec {
                rlimits: Rlimits::for_child(cfg.limits, leaf.controllers()),
                ..spec.clone()
            };
            match spawn_into(&spec, confine, leaf.dir()) {
                Ok(child) => {
                    let group = child.id();
                    Some(Ok((
                        RunChild::Leaf(child),
                        Some(TreeControl::Cgroup { leaf, group }),
                    )))
                }
                Err(IntoError::Spawn(e)) => Some(Err(e)),
                Err(IntoError::Refused(why)) => {
                    // no run of this engine can have a leaf: the supervisor from now on
                    tracing::info!("runs use a supervisor process, not a cgroup: {why}");
                    self.no_leaves
                        .store(true, std::sync::atomic::Ordering::Relaxed);
                    None
                }
            }
        });
        let spawned = match in_leaf {
            Some(spawned) => spawned,
            None => {
                let supervised = cfg
                    .supervisor
                    .as_deref()
                    .filter(|_| crate::process::spawn::resolve_program(&program, None).is_some())
                    .and_then(|supervisor| {
                        guard::start_supervised(supervisor, &marker, &spec, confine)
                            .inspect_err(|e| {
                                tracing::warn!("the agent runs without a supervisor: {e}");
                            })
                            .ok()
                    });
                match supervised {
                    Some((child, tree)) => Ok((RunChild::Tokio(child), Some(tree))),
                    None => {
                        held_guardian = guardian();
                        spawn_confined(&spec, confine).map(|child| (RunChild::Tokio(child), None))
                    }
                }
            }
        };
        let (child, tree) = match spawned {
            Ok(c) => c,
            Err(EngineError::Spawn { source, .. })
                if source.kind() == std::io::ErrorKind::NotFound =>
            {
                return agent_missing(provider, &format!("{} (not found)", program.display()));
            }
            Err(e) => {
                return internal_error(
                    &e,
                    IssueType::DroidNotFound,
                    &format!(
                        "check that the {} program is executable (droid-executor doctor)",
                        provider.name()
                    ),
                );
            }
        };
        publish.send(RunEvent::Started {
            pid: child.id().unwrap_or(0),
            program: program.display().to_string(),
            autonomy: autonomy.as_str().to_owned(),
            model: model.clone(),
        });
        publish.send(RunEvent::Progress {
            phase: Phase::Agent,
            message: format!("{} is working", provider.name()),
        });
        let limits_run = Limits {
            deadline,
            kill_grace: cfg.kill_grace,
            marker: marker.clone(),
            tree,
            budget: req.max_tokens.map(|max_tokens| crate::run::budget::Budget {
                max_tokens,
                cwd: root.to_path_buf(),
                env: agent_env.clone(),
            }),
        };
        // `--version` (a second start of the CLI when its package.json says nothing) runs beside
        // the run, not before it
        let (mut sup, version) = tokio::join!(
            supervise(child, provider, limits_run, cancel, publish),
            self.agent_version(req.provider)
        );
        publish.send(RunEvent::Progress {
            phase: Phase::Assemble,
            message: "reading the repository".into(),
        });
        // what git runs or consults later is put back before the repository is read again, so
        // `files_changed` is measured with the ignore rules of before the run (an
        // `info/exclude` the agent extended hides nothing); and once more after verification
        let mut restored = git_guard
            .as_ref()
            .map(GitGuard::restore)
            .unwrap_or_default();
        if let Some(guard) = common_guard.as_ref() {
            restored.merge(guard.restore());
        }
        restored.merge(state_guard.restore());
        if let (Some(guard), Some(flags)) = (
            git_guard.as_ref(),
            before
                .as_ref()
                .and_then(|b| b.as_ref().ok())
                .and_then(Snapshot::index_flags),
        ) {
            clear_index_flags(
                root,
                &cfg.env,
                &guard.new_index_flags(&flags),
                &mut restored,
            )
            .await;
        }
        let changes = match (lease, before) {
            // committed to the worktree's branch; the change against its base
            (Some(l), _) => l.commit(&cfg.env, req.objective.as_str()).await,
            (None, Some(Ok(before))) => {
                match Snapshot::take(root, &cfg.env, scratch.path(), &limits, Some(&before)).await {
                    Ok(after) => before.diff(&after, &cfg.env).await,
                    Err(e) => Err(e),
                }
            }
            (None, Some(Err(e))) => Err(e),
            (None, None) => Err(EngineError::Worktree(
                "the repository was not recorded before the run".to_owned(),
            )),
        };
        let verified = if cfg.verify
            && !req.suggested_commands.is_empty()
            && (sup.end == RunEnd::Completed
                || (sup.end == RunEnd::Failed
                    && changes.as_ref().is_ok_and(|c| !c.files.is_empty())))
        {
            // the commands run straight under us, in a leaf of their own (droid's may still be
            // ending), else with a guardian (droid's supervisor, if still there, is only ending
            // droid's tree)
            let leaves = self.leaf_host();
            if leaves.is_none() && held_guardian.is_none() {
                held_guardian = guardian();
            }
            publish.send(RunEvent::Progress {
                phase: Phase::Verify,
                message: format!("re-running {} command(s)", req.suggested_commands.len()),
            });
            Some(
                verify(
                    &VerifyPlan {
                        commands: &req.suggested_commands,
                        cwd: root,
                        env: &env,
                        deadline,
                        keep: cfg.excerpt_bytes,
                        marker: &marker,
                        redact: &redact,
                        confine: verify_confine.as_ref(),
                        leaves,
                        limits: cfg.limits,
                    },
                    cancel,
                )
                .await,
            )
        } else {
            None
        };
        // once droid's tree is proven gone, nothing the run started can write to its scratch
        // directory any more: it may be kept for another run (only where a reaper removes it
        // should this process die)
        let reusable = verified.as_ref().is_none_or(|v| v.proven) && self.leaf_host().is_some();
        if sup.proven && reusable {
            scratch.reusable();
        }
        // droid's exit status when it is already known; else the result goes without it, and
        // the guardian is held until droid's tree is ended (see `crate::process::reap`); otherwise the
        // run's processes are all gone: the guardian has nothing left to guard
        if let Some(reaping) = sup.reaping.take() {
            match reaping.now_or_later().await {
                Ok((status, proven)) => {
                    sup.exit = sup.exit.or(status);
                    if proven && reusable {
                        scratch.reusable();
                    }
                }
                Err(reaping) => {
                    *after = Some(Aftermath {
                        reaping,
                        guardian: held_guardian.take(),
                        scratch,
                        scratch_reusable: reusable,
                    });
                }
            }
        }
        drop(held_guardian);
        // droid's tree may still be ending (see above): what it writes from now on is inside
        // the confinement; hooks and config are checked once the run's own work is done
        if let Some(guard) = git_guard.as_ref() {
            restored.merge(guard.restore());
        }
        if let Some(guard) = common_guard.as_ref() {
            restored.merge(guard.restore());
        }
        restored.merge(state_guard.restore());
        let mut result = assemble(&Assembly {
            provider,
            req,
            root: asked,
            real_root: &real_root,
            runtime,
            sup,
            changes,
            verified,
            version,
            model,
            agent_env: &agent_env,
            redact: &redact,
            excerpt_bytes: cfg.excerpt_bytes,
            client_env: &cfg.client_env,
            warnings: &cfg.droid_warnings,
            git_fallback: git_fallback.as_deref(),
            sandbox: &confinement,
            restored: Some(&restored),
        });
        result.commands_run.splice(0..0, setup_runs);
        result
    }
}

/// Clear the skip-worktree and assume-unchanged flags the run set on `paths` (they would hide
/// the files' later changes from the user's `git status`), with git run as the snapshot runs it
/// (no hooks, no fsmonitor), and say so in `restored`.
async fn clear_index_flags(
    root: &Path,
    env: &[(OsString, OsString)],
    paths: &[Vec<u8>],
    restored: &mut Restored,
) {
    if paths.is_empty() {
        return;
    }
    let shown: Vec<String> = paths
        .iter()
        .take(20)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect();
    let more = paths.len().saturating_sub(shown.len());
    let named = if more > 0 {
        format!("{} and {more} more", shown.join(", "))
    } else {
        shown.join(", ")
    };
    let args: Vec<OsString> = [
        "update-index",
        "--no-skip-worktree",
        "--no-assume-unchanged",
        "-z",
        "--stdin",
    ]
    .into_iter()
    .map(OsString::from)
    .collect();
    let input: Vec<u8> = paths
        .iter()
        .flat_map(|p| p.iter().copied().chain([0]))
        .collect();
    let cleared = crate::snapshot::git(root, env, &args, Some(&input))
        .await
        .and_then(crate::snapshot::GitRun::into_stdout);
    match cleared {
        Ok(_) => restored.changed.push(format!(
            "the index flags skip-worktree/assume-unchanged on {named} (cleared)"
        )),
        Err(e) => restored.failed.push(format!(
            "the index flags skip-worktree/assume-unchanged on {named}: {e}"
        )),
    }
}

/// A repo_root resolved when its run starts: the canonical directory and its identity.
struct ResolvedRoot {
    /// The canonical path (symlinks resolved).
    path: PathBuf,
    /// Device and inode of the directory when it was checked.
    id: (u64, u64),
}

impl ResolvedRoot {
    /// `path` (a worktree of ours) resolved now, without the `allowed_roots` rule.
    fn at(path: &Path) -> Result<Self, Box<ExecutionResult>> {
        use std::os::unix::fs::MetadataExt as _;
        let refused = |why: String| Box::new(root_refused(why));
        let real = crate::real_path::canonical(path)
            .map_err(|e| refused(format!("the worktree {path:?} cannot be resolved ({e})")))?;
        let meta = std::fs::metadata(&real)
            .map_err(|e| refused(format!("the worktree {real:?} cannot be read ({e})")))?;
        Ok(Self {
            path: real,
            id: (meta.dev(), meta.ino()),
        })
    }

    /// The `error` result when `path` no longer resolves to the directory that was checked
    /// (a component swapped for a symlink since): droid must not start there.
    fn still_there(&self) -> Result<(), Box<ExecutionResult>> {
        use std::os::unix::fs::MetadataExt as _;
        let now = crate::real_path::canonical(&self.path).ok();
        let id = std::fs::metadata(&self.path)
            .ok()
            .map(|m| (m.dev(), m.ino()));
        if now.as_deref() == Some(self.path.as_path()) && id == Some(self.id) {
            return Ok(());
        }
        Err(Box::new(root_refused(format!(
            "{:?} was replaced while the run was starting; droid was not started",
            self.path
        ))))
    }
}

/// The `error` result for a repo_root refused when its run starts.
fn root_refused(message: String) -> ExecutionResult {
    let v = Violations(vec![droid_contract::Violation::new(
        "$.context.repo_root",
        message,
    )]);
    ExecutionResult::invalid_request(None, &v)
}

impl Engine {
    /// A request's extra writable directory, resolved (symlinks followed) and checked against
    /// `allowed_roots` when its run starts.
    fn resolve_writable(&self, asked: &Path) -> Result<PathBuf, String> {
        let path = crate::real_path::canonical(asked)
            .map_err(|e| format!("{asked:?} cannot be resolved when the run starts ({e})"))?;
        let check = HostCheck {
            facts: &FsFacts,
            allowed_roots: &self.cfg.allowed_roots,
        };
        match check.repo_root_problem(&path) {
            None => Ok(path),
            Some(problem) if path == asked => Err(format!("when the run started: {problem}")),
            Some(problem) => Err(format!(
                "when the run started, {asked:?} resolved to {problem}"
            )),
        }
    }

    /// `asked` resolved (symlinks followed) and checked again against `allowed_roots` now that
    /// its run starts: admission checked it when the request came in, and a queued task may
    /// wait long enough for the directory to be swapped for a symlink to somewhere else.
    fn resolve_root(&self, asked: &Path) -> Result<ResolvedRoot, Box<ExecutionResult>> {
        use std::os::unix::fs::MetadataExt as _;
        let refused = |why: String| Box::new(root_refused(why));
        let path = crate::real_path::canonical(asked).map_err(|e| {
            refused(format!(
                "{asked:?} cannot be resolved when the run starts ({e}); nothing ran"
            ))
        })?;
        if path.to_str().is_none() {
            // droid (node) decodes its argv lossily: `--cwd` would name another directory
            return Err(refused(format!(
                "{asked:?} resolves to {path:?}, which is not valid UTF-8; droid cannot be given \
                 it exactly (rename the directory)"
            )));
        }
        let check = HostCheck {
            facts: &FsFacts,
            allowed_roots: &self.cfg.allowed_roots,
        };
        if let Some(problem) = check.repo_root_problem(&path) {
            return Err(refused(if path == asked {
                format!("when the run started: {problem}")
            } else {
                format!("when the run started, {asked:?} resolved to {problem}")
            }));
        }
        let meta = std::fs::metadata(&path)
            .map_err(|e| refused(format!("{path:?} cannot be read when the run starts ({e})")))?;
        Ok(ResolvedRoot {
            path,
            id: (meta.dev(), meta.ino()),
        })
    }
}

fn agent_missing(provider: &dyn Provider, where_: &str) -> ExecutionResult {
    let name = provider.name();
    let point = if provider.id() == ProviderId::Droid {
        "droid_bin / DROID_CLI_CMD".to_owned()
    } else {
        format!(
            "{name}_bin / DROID_EXECUTOR_{}_BIN",
            name.to_ascii_uppercase()
        )
    };
    ExecutionResult::error(
        None,
        format!("{name} was not found: {where_}; nothing ran"),
        vec![Issue::new(
            IssueType::DroidNotFound,
            format!("the {name} CLI was not found: {where_}"),
            format!(
                "install it ({}) or point {point} at it; droid-executor doctor checks the setup",
                provider.install_hint()
            ),
        )],
    )
}

/// A request the provider cannot honour: refused before anything starts, naming the field.
fn refused_by_provider(provider: &dyn Provider, u: &providers::Unsupported) -> ExecutionResult {
    ExecutionResult::error(
        None,
        format!(
            "{} cannot run this request: {}: {}; nothing ran",
            provider.name(),
            u.field,
            u.message
        ),
        vec![Issue::new(
            IssueType::ValidationError,
            format!(
                "$.{}: {} ({})",
                u.field,
                u.message,
                provider.id().display_name()
            ),
            format!(
                "change or drop {} for provider {}, or pick another provider",
                u.field,
                provider.name()
            ),
        )],
    )
}

/// The `error` result of a run refused because `sandbox = "landlock"` cannot be honoured.
fn sandbox_refused(why: &str) -> ExecutionResult {
    ExecutionResult::error(
        None,
        format!("{why}; nothing ran"),
        vec![Issue::new(
            IssueType::EnvIssue,
            format!("sandbox: {why}"),
            "run on a kernel with Landlock (Linux 5.13 or later, `landlock` in the lsm= boot \
             list), or set sandbox = \"auto\" (DROID_EXECUTOR_SANDBOX=auto) to run unconfined \
             with a warning; droid-executor doctor shows what the kernel offers",
        )],
    )
}

fn internal_error(e: &EngineError, kind: IssueType, action: &str) -> ExecutionResult {
    ExecutionResult::error(
        None,
        format!("could not start the run: {e}"),
        vec![Issue::new(kind, e.to_string(), action)],
    )
}

fn cancelled_before_start() -> ExecutionResult {
    let mut r = ExecutionResult::error(
        None,
        "cancelled before droid started",
        vec![Issue::new(
            IssueType::Cancelled,
            "the run was cancelled before droid started",
            "submit the task again if it is still wanted",
        )],
    );
    r.status = Status::Cancelled;
    r
}
