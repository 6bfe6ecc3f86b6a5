//! `fallback` (docs/protocol.md#fallback): the request's agent first, then each agent of
//! `fallback` in turn, going on only when an attempt ended for a reason another agent could
//! overcome ([`droid_contract::warrants_fallback`]: not installed, authentication, rate limit
//! or quota, model error). A test failure, a timeout, a cancel, a spent budget or a refused
//! request ends it: another agent would not do better.
//!
//! Each attempt starts from a clean base:
//! - in a worktree (the task's), the failed attempt's worktree and branch are removed once its
//!   agent is gone, and the next attempt makes a new one for the same task;
//! - in place, the next attempt runs in place only when the failed one changed nothing;
//!   otherwise it runs in a worktree (a task of the store: the caller's, or one of its own when
//!   the caller's run is not a task), made from the repository as it was before the failed
//!   attempt's agent started (recorded by that attempt's run: `crate::worktree::pin`), and the
//!   result says why and which files the failed attempt left changed. With no store the fallback
//!   stops there, and the result says why.
//!
//! Each attempt is one [`Engine::run_once`] with the request's time and token budgets, under a
//! marker of its own below the caller's (`<marker>-attempt<i>`), so a sweep of the task reaches
//! every attempt and one attempt's teardown never reaches the next. The result is the last
//! attempt's (the successful one, or the one that ended the fallback) with `attempts` (every
//! attempt, the last `chosen`) and `usage` totalled over them.
//!
//! [`Engine::run_once`]: crate::run::engine::Engine::run_once

use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::time::{Duration, Instant};

use droid_contract::{
    AgentChoice, Attempt, ExecutionRequest, ExecutionResult, Isolation, Issue, IssueType, Usage,
    warrants_fallback,
};
use tokio_util::sync::CancellationToken;

use crate::config::EngineConfig;
use crate::excerpt::head_str;
use crate::fanout::attempt::{attempt_of, deciding_issue};
use crate::lock;
use crate::process::sandbox;
use crate::providers::{self, Invocation};
use crate::run::assemble::MAX_LOGS;
use crate::run::engine::Engine;
use crate::run::event::{Phase, RunEvent};
use crate::run::supervise::Publisher;
use crate::task_key::TaskKey;
use crate::worktree::layout::Layout;
use crate::worktree::pin::{self, PinnedBase};
use crate::worktree::record::{Record, id_of_branch};
use crate::worktree::remove::remove;
use droid_contract::WorktreeState;

/// How long the next attempt waits for the failed one's agent to be reaped (it holds its
/// worktree's lock until then) before the fallback gives up on a clean worktree.
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// How often it looks.
const LOCK_POLL: Duration = Duration::from_millis(50);
/// Files named in the note on a failed attempt's changes left in place.
const NAMED_FILES: usize = 10;

/// One attempt's run, boxed: an attempt that is a task of its own runs through
/// [`Engine::run_as_task`], which comes back to [`Engine::run_as`] (recursion needs a box).
///
/// [`Engine::run_as_task`]: crate::run::engine::Engine::run_as_task
/// [`Engine::run_as`]: crate::run::engine::Engine::run_as
type AttemptRun<'a> = Pin<Box<dyn Future<Output = ExecutionResult> + Send + 'a>>;

/// Where the next attempt starts.
enum Base {
    /// Where this one did: nothing to clean (in place, nothing changed), or its worktree is
    /// gone.
    Same,
    /// In a worktree: the failed attempt changed files in place (the note says which).
    Isolated(String),
    /// Nowhere clean: the fallback ends, with this issue.
    Stop(Issue),
}

/// How an attempt runs.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// As the request says, as the caller's task (or as no task).
    AsAsked,
    /// In a worktree of the caller's task (the caller's run is a task of the store).
    WorktreeOfTask,
    /// In a worktree of a task of its own (the caller's run is not a task).
    OwnTask,
}

impl Engine {
    /// Run `req` with its `fallback`: see the module docs. `marker`, `seq`, `publish` and
    /// `task` are the caller's, as for [`Engine::run_once`].
    ///
    /// [`Engine::run_once`]: crate::run::engine::Engine::run_once
    pub(crate) async fn run_fallback(
        &self,
        req: &ExecutionRequest,
        marker: &str,
        seq: Option<u64>,
        cancel: CancellationToken,
        publish: Publisher,
        task: Option<&TaskKey>,
    ) -> ExecutionResult {
        let started = Instant::now();
        let choices: Vec<AgentChoice> = std::iter::once(AgentChoice {
            provider: req.provider,
            model: req.model.clone(),
        })
        .chain(req.fallback.iter().cloned())
        .collect();
        if let Some(mut refused) = refused_by_a_later_agent(req, &choices, self.config()) {
            refused.task_id = req.task_id.as_ref().map(|t| t.as_str().to_owned());
            publish.send(RunEvent::Completed {
                status: refused.status,
            });
            return refused;
        }
        let mut attempts: Vec<Attempt> = Vec::new();
        let mut logs: Vec<String> = Vec::new();
        let mut mode = Mode::AsAsked;
        let mut pinned: Option<PinnedBase> = None;
        let mut last = None;
        for (i, choice) in choices.iter().enumerate() {
            let mut one = req.clone();
            one.provider = choice.provider;
            one.model.clone_from(&choice.model);
            one.fallback = Vec::new();
            if i > 0 && one.session_id.take().is_some() {
                logs.push(format!(
                    "fallback: {} starts a new session (session_id is {}'s)",
                    choice.label(),
                    choices[0].label()
                ));
            }
            if mode != Mode::AsAsked {
                one.isolation = Some(Isolation::Worktree);
            }
            let t0 = Instant::now();
            let attempt_marker = format!("{marker}-attempt{i}");
            let run = self.attempt(&one, &attempt_marker, seq, &cancel, &publish, task, mode);
            // an attempt in place records the repository as it was before its agent started:
            // the next attempts' worktree starts there if this one changes files
            let result = if mode == Mode::AsAsked {
                let (result, recorded) = pin::recording(run).await;
                pinned = recorded;
                result
            } else {
                pin::using(pinned.clone(), run).await
            };
            let mut a = attempt_of(choice, &result, t0.elapsed());
            if mode == Mode::OwnTask {
                a.task_id.clone_from(&result.task_id);
            }
            let reason = deciding_issue(&result).map(|issue| issue.kind);
            let next = choices.get(i + 1);
            let go_on = next.is_some() && reason.is_some_and(warrants_fallback);
            attempts.push(a);
            let (Some(next), true, false) = (next, go_on, cancel.is_cancelled()) else {
                last = Some(result);
                break;
            };
            let base = self.clean_base(&result, task, mode, pinned.is_some()).await;
            let why = match base {
                Base::Same => None,
                Base::Isolated(why) => {
                    mode = if task.is_some() {
                        Mode::WorktreeOfTask
                    } else {
                        Mode::OwnTask
                    };
                    Some(why)
                }
                Base::Stop(issue) => {
                    logs.push(format!("fallback stopped: {}", issue.description));
                    let mut r = result;
                    r.issues.push(issue);
                    if let Some(at) = attempts.last_mut() {
                        at.issues.push(IssueType::EnvIssue);
                    }
                    last = Some(r);
                    break;
                }
            };
            let ended = format!(
                "fallback: {} ended {} ({}): {}; trying {}",
                choice.label(),
                result.status.as_str(),
                reason.map_or("no issue", IssueType::as_str),
                attempts.last().map_or("", |at| at.note.as_str()),
                next.label()
            );
            publish.send(RunEvent::Progress {
                phase: Phase::Agent,
                message: ended.clone(),
            });
            logs.push(ended);
            logs.extend(why);
        }
        let Some(mut result) = last else {
            // `choices` is never empty: the request's own agent is first
            return ExecutionResult::error(
                req.task_id.as_ref().map(|t| t.as_str().to_owned()),
                "fallback named no agent; nothing ran",
                Vec::new(),
            );
        };
        if let Some(at) = attempts.last_mut() {
            at.chosen = true;
            at.worktree.clone_from(&result.worktree);
        }
        if attempts.len() > 1 {
            result.summary = format!(
                "fallback: {} answered, after {}. {}",
                choices[attempts.len() - 1].label(),
                choices[..attempts.len() - 1]
                    .iter()
                    .map(AgentChoice::label)
                    .collect::<Vec<_>>()
                    .join(", "),
                result.summary
            );
        }
        result.usage = attempts
            .iter()
            .filter_map(|at| at.usage.as_ref())
            .fold(None, |sum: Option<Usage>, u| {
                Some(sum.map_or_else(|| u.clone(), |s| s.plus(u)))
            });
        logs.append(&mut result.logs);
        let over = logs.len().saturating_sub(MAX_LOGS);
        logs.drain(..over);
        result.logs = logs;
        result.attempts = attempts;
        result.task_id = req.task_id.as_ref().map(|t| t.as_str().to_owned());
        result.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        publish.send(RunEvent::Completed {
            status: result.status,
        });
        result
    }

    /// One attempt of `one` (its provider, model and isolation set), publishing all but its
    /// end.
    #[allow(clippy::too_many_arguments)]
    fn attempt<'a>(
        &'a self,
        one: &'a ExecutionRequest,
        marker: &'a str,
        seq: Option<u64>,
        cancel: &CancellationToken,
        publish: &Publisher,
        task: Option<&'a TaskKey>,
        mode: Mode,
    ) -> AttemptRun<'a> {
        let cancel = cancel.clone();
        let publish = publish.for_attempt();
        match mode {
            Mode::AsAsked | Mode::WorktreeOfTask => {
                Box::pin(self.run_once(one, marker, seq, cancel, publish, task))
            }
            Mode::OwnTask => Box::pin(async move {
                // a task of the store of its own, whose id comes back in `task_id`
                let mut own = one.clone();
                own.task_id = None;
                let run: AttemptRun<'_> = Box::pin(self.run_as_task(&own, cancel, None));
                run.await
            }),
        }
    }

    /// Make the next attempt's base clean after `failed` (see the module docs).
    /// `pinned`: the repository was recorded before the failed attempt (a worktree of the
    /// next one starts there, without the failed attempt's changes).
    async fn clean_base(
        &self,
        failed: &ExecutionResult,
        task: Option<&TaskKey>,
        mode: Mode,
        pinned: bool,
    ) -> Base {
        let cfg = self.config();
        if let Some(info) = &failed.worktree {
            let Some(store) = cfg.store_dir.as_deref() else {
                return Base::Same;
            };
            let Some(wt) = id_of_branch(&info.branch) else {
                return Base::Same;
            };
            let ours = match mode {
                Mode::AsAsked | Mode::WorktreeOfTask => task == Some(&wt),
                Mode::OwnTask => true,
            };
            if !ours {
                // the worktree a session ran in (the request's session_id): not ours to remove;
                // the next agent, in a new session, gets a new worktree
                return Base::Same;
            }
            return match discard_worktree(&Layout::new(store), &wt, mode, &cfg.env).await {
                Ok(()) => Base::Same,
                Err(why) => Base::Stop(Issue::new(
                    IssueType::EnvIssue,
                    format!(
                        "the next agent of fallback needs a clean worktree, and the failed \
                         attempt's ({}) could not be removed: {why}",
                        info.branch
                    ),
                    "discard it (droid-executor tasks discard), then run the task again",
                )),
            };
        }
        if failed.files_changed.is_empty() {
            return Base::Same;
        }
        let n = failed.files_changed.len();
        let mut named: Vec<&str> = failed
            .files_changed
            .iter()
            .take(NAMED_FILES)
            .map(|f| f.path.as_str())
            .collect();
        if n > NAMED_FILES {
            named.push("…");
        }
        let left = format!(
            "the failed attempt changed {n} file(s) in place ({}); they are left as they are",
            named.join(", ")
        );
        if cfg.store_dir.is_none() {
            return Base::Stop(Issue::new(
                IssueType::EnvIssue,
                format!(
                    "{left}, and the next agent of fallback would start from them: it runs in a \
                     worktree then, which needs a task store (store_dir)"
                ),
                "review files_changed and revert what is not wanted, then run the task again; \
                 or set store_dir (or isolation \"worktree\") so the next agent runs apart",
            ));
        }
        let from = if pinned {
            "as it was before the failed attempt (without its changes)"
        } else {
            "as it is now (it could not be recorded before the failed attempt: its changes are \
             in the worktree too)"
        };
        Base::Isolated(format!(
            "fallback: {left}; the next agents run in a worktree (isolation \"worktree\"), made \
             from the repository {from}, and their change waits there to be applied"
        ))
    }
}

/// Remove the worktree `wt` of a failed attempt, once its agent is gone: its checkout and
/// branch, and its directory when the task will make it again (a worktree of the caller's
/// task); a task of its own keeps its record, marked discarded.
async fn discard_worktree(
    layout: &Layout,
    wt: &TaskKey,
    mode: Mode,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
) -> Result<(), String> {
    let until = tokio::time::Instant::now() + LOCK_WAIT;
    let _held = loop {
        match lock::try_exclusive(&layout.lock(wt)) {
            Ok(Some(held)) => break held,
            Ok(None) if tokio::time::Instant::now() < until => {
                tokio::time::sleep(LOCK_POLL).await;
            }
            Ok(None) => {
                return Err(format!(
                    "its agent was still ending after {} s",
                    LOCK_WAIT.as_secs()
                ));
            }
            Err(e) => return Err(e.to_string()),
        }
    };
    let path = layout.record(wt);
    let Some(mut record) = Record::read(&path).map_err(|e| e.to_string())? else {
        // removed already (an agent that never started leaves none)
        return Ok(());
    };
    let left = remove(layout, &record, env, false).await;
    if !left.is_empty() {
        return Err(head_str(&left.join("; "), 500));
    }
    match mode {
        Mode::AsAsked | Mode::WorktreeOfTask => {
            std::fs::remove_dir_all(layout.dir(wt)).map_err(|e| e.to_string())
        }
        Mode::OwnTask => {
            record.state = Some(WorktreeState::Discarded);
            record.write(&path).map_err(|e| e.to_string())
        }
    }
}

/// The request refused whole, before anything runs, when an agent of `fallback` could not take
/// it (a `reasoning_effort` or a model it has no equivalent for): found only when that agent's
/// turn came, the fallback would end there in an `error` after the first agent's failure,
/// which it could have been told at once. The request's own agent is checked by its run.
fn refused_by_a_later_agent(
    req: &ExecutionRequest,
    choices: &[AgentChoice],
    cfg: &EngineConfig,
) -> Option<ExecutionResult> {
    let here = Path::new(".");
    choices.iter().enumerate().skip(1).find_map(|(i, choice)| {
        let provider = providers::provider(choice.provider);
        let probe = Invocation {
            cwd: here,
            prompt_file: here,
            run_dir: here,
            autonomy: req.effective_autonomy(cfg.max_autonomy),
            model: choice.model.as_deref(),
            reasoning_effort: req.reasoning_effort.as_deref(),
            session_id: None,
            as_root: nix::unistd::geteuid().is_root(),
            confined: sandbox::confines(cfg.sandbox, sandbox::kernel_abi()),
            env: &[],
        };
        let u = provider.args(&probe).err()?;
        let at = format!("$.fallback[{}]", i - 1);
        Some(ExecutionResult::error(
            None,
            format!(
                "{at} ({}) cannot run this request: {}: {}; nothing ran",
                choice.label(),
                u.field,
                u.message
            ),
            vec![Issue::new(
                IssueType::ValidationError,
                format!(
                    "{at}: {} cannot take {}: {}",
                    choice.label(),
                    u.field,
                    u.message
                ),
                format!(
                    "change or drop {} so that every agent of fallback can take it, or drop {} \
                     from fallback",
                    u.field,
                    choice.label()
                ),
            )],
        ))
    })
}
