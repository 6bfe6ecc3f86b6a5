//! Where a run works and what it holds while it does (docs/worktrees.md): a worktree task gets
//! its worktree ([`crate::worktree::lease::Lease`]) before it queues, and the run slot is taken
//! for the worktree, so worktree runs of one repository run at once; a run in place takes its
//! repository's lock, exclusively when it may write there, shared when it runs at `read_only`
//! and the kernel keeps it from writing (Landlock, the repository outside every other path the
//! run may write), so any number of those read at once.

use std::path::PathBuf;

use droid_contract::{
    Autonomy, ExecutionRequest, ExecutionResult, Issue, IssueType, RepoRoot, Violation, Violations,
};

use crate::process::sandbox;
use crate::run::engine::Engine;
use crate::run_slots::RepoUse;
use crate::task_key::TaskKey;
use crate::worktree::lease::{Lease, wants_worktree};

impl Engine {
    /// Whether `req` runs in a worktree (its `isolation`, its session's worktree, the setting).
    pub(crate) fn in_worktree(&self, req: &ExecutionRequest) -> bool {
        let cfg = self.config();
        wants_worktree(req, &cfg.worktrees, cfg.store_dir.as_deref())
    }

    /// The worktree task `task` runs `req` in, when it runs in one: `Ok(None)` for a run in
    /// place, an `error` result when the worktree cannot be had (nothing ran).
    pub(crate) async fn worktree_lease(
        &self,
        req: &ExecutionRequest,
        task: Option<&TaskKey>,
    ) -> Result<Option<Lease>, Box<ExecutionResult>> {
        let cfg = self.config();
        if !self.in_worktree(req) {
            if !req.setup_commands.is_empty() || !req.worktree_copy.is_empty() {
                let v = Violations(vec![Violation::new(
                    if req.setup_commands.is_empty() {
                        "$.worktree_copy"
                    } else {
                        "$.setup_commands"
                    },
                    "applies only to isolation \"worktree\" (this run is in place: the request \
                     names no isolation and the server's setting is \"none\")",
                )]);
                return Err(Box::new(ExecutionResult::invalid_request(None, &v)));
            }
            return Ok(None);
        }
        let refused = |why: String| {
            Box::new(ExecutionResult::error(
                None,
                format!("{why}; nothing ran"),
                vec![Issue::new(
                    IssueType::EnvIssue,
                    why,
                    "fix what it says, or run the task in place (isolation \"none\")",
                )],
            ))
        };
        let (Some(store), Some(task)) = (cfg.store_dir.as_deref(), task) else {
            return Err(refused(
                "isolation \"worktree\" needs a task store (store_dir), where worktrees live"
                    .to_owned(),
            ));
        };
        match Lease::take(store, task, req, &cfg.worktrees, &cfg.env).await {
            Ok(lease) => Ok(Some(lease)),
            Err(e) => Err(refused(e.to_string())),
        }
    }

    /// What a run's slot is taken for, and how: the worktree (exclusively); or the
    /// repository, shared by runs the kernel keeps read-only, else exclusively.
    pub(crate) fn run_lock(
        &self,
        req: &ExecutionRequest,
        lease: Option<&Lease>,
    ) -> (PathBuf, RepoUse) {
        if let Some(l) = lease {
            return (l.checkout(), RepoUse::Exclusive);
        }
        let cfg = self.config();
        let repo = req.context.repo_root.as_path();
        let real = crate::real_path::canonical(repo).unwrap_or_else(|_| repo.to_path_buf());
        let reading = req.effective_autonomy(cfg.max_autonomy) == Autonomy::ReadOnly
            && sandbox::confines(cfg.sandbox, sandbox::kernel_abi());
        // a repository under another path the run may write is not read-only to the kernel
        let writable_anyway = cfg
            .sandbox_writable
            .iter()
            .cloned()
            .chain(
                req.sandbox_writable
                    .iter()
                    .map(|w| w.as_path().to_path_buf()),
            )
            .chain(std::iter::once(cfg.scratch_root.clone()))
            .filter_map(|p| crate::real_path::canonical(&p).ok())
            .any(|w| real.starts_with(w));
        let usage = if reading && !writable_anyway {
            RepoUse::Shared
        } else {
            RepoUse::Exclusive
        };
        (repo.to_path_buf(), usage)
    }
}

impl Lease {
    /// [`Lease::common_work_tree`] when the run could write the common git directory: it is
    /// not confined (the agent's or the verification's confinement is off), or the directory
    /// lies under a path it may write.
    pub(crate) fn common_work_tree_writable(
        &self,
        agent: Option<&sandbox::Confinement>,
        verify: Option<&sandbox::Confinement>,
    ) -> Option<PathBuf> {
        let top = self.common_work_tree()?;
        let git = crate::real_path::canonical(&top.join(".git")).unwrap_or(top.join(".git"));
        let reaches = |c: Option<&sandbox::Confinement>| {
            c.is_none_or(|c| c.paths().iter().any(|w| git.starts_with(w)))
        };
        (reaches(agent) || reaches(verify)).then_some(top)
    }

    /// `req` as the run in the worktree sees it: its `repo_root` is the worktree's (the prompt,
    /// the agent's working directory, the sandbox and the verification all follow).
    pub(crate) fn request_in(&self, req: &ExecutionRequest) -> ExecutionRequest {
        let mut moved = req.clone();
        if let Ok(root) = RepoRoot::try_from(self.root().to_string_lossy().into_owned()) {
            moved.context.repo_root = root;
        }
        moved
    }
}

impl Engine {
    /// Run a new worktree's setup commands in `cwd`, as the verification runs its commands
    /// (confined, no credential, each in a leaf or swept by its marker, within the run's
    /// budget); their runs, or the `error` result when one failed (the agent is not started).
    #[allow(clippy::too_many_arguments)]
    pub(crate) async fn set_up(
        &self,
        commands: &[droid_contract::ShellCommand],
        cwd: &std::path::Path,
        env: &[(std::ffi::OsString, std::ffi::OsString)],
        deadline: tokio::time::Instant,
        marker: &str,
        redact: &crate::run::redact::Redactor,
        confine: Option<&sandbox::Confinement>,
        cancel: &tokio_util::sync::CancellationToken,
    ) -> Result<Vec<droid_contract::CommandRun>, Box<ExecutionResult>> {
        use crate::run::verify::{VerifyPlan, verify};
        let cfg = self.config();
        let leaves = self.leaf_host();
        // without leaves, a guardian ends what the commands leave if this process dies
        let _guardian = if leaves.is_none() {
            cfg.supervisor.as_deref().and_then(|supervisor| {
                crate::process::guard::start(supervisor, marker)
                    .inspect_err(|e| tracing::warn!("the setup commands have no guardian: {e}"))
                    .ok()
            })
        } else {
            None
        };
        let marker = format!("{marker}-setup");
        let done = verify(
            &VerifyPlan {
                commands,
                cwd,
                env,
                deadline,
                keep: cfg.excerpt_bytes,
                marker: &marker,
                redact,
                confine,
                leaves,
                limits: cfg.limits,
            },
            cancel,
        )
        .await;
        let runs: Vec<droid_contract::CommandRun> = done
            .runs
            .into_iter()
            .map(|mut r| {
                r.source = droid_contract::CommandSource::Setup;
                r
            })
            .collect();
        let failed = runs.iter().find(|r| r.exit_code != Some(0));
        match failed {
            None if !done.cancelled => Ok(runs),
            _ => {
                let what = failed.map_or_else(
                    || "the run was cancelled during the worktree's setup".to_owned(),
                    |r| match r.exit_code {
                        Some(code) => format!("the setup command `{}` exited {code}", r.command),
                        None => format!("the setup command `{}` did not finish", r.command),
                    },
                );
                let mut result = ExecutionResult::error(
                    None,
                    format!("{what}; the agent was not started"),
                    vec![Issue::new(
                        if done.cancelled {
                            IssueType::Cancelled
                        } else {
                            IssueType::EnvIssue
                        },
                        what,
                        "fix the command (setup_commands) or what it needs, and submit the task \
                         again; its output is in commands_run",
                    )],
                );
                if done.cancelled {
                    result.status = droid_contract::Status::Cancelled;
                }
                result.commands_run = runs;
                Err(Box::new(result))
            }
        }
    }
}
