//! `best_of` (docs/protocol.md#best-of-n): 2 to 5 agents run the same task at once, each in a
//! worktree of its own, and the winner is judged by ground truth ([`crate::fanout::judge`]).
//!
//! Each candidate is a task of the store of its own (`<provider>-<secs>-<hex>`, made as a
//! synchronous worktree run is, [`Engine::run_as_task`]): its worktree is
//! `<store>/worktrees/<candidate id>/` on the branch `droid-executor/<candidate id>`, so the
//! worktree rules hold for each unchanged (its lock, `max_worktrees`, the janitor, the TTL,
//! `tasks show <candidate id>`, `tasks cancel <candidate id>`). The task that asked (the
//! parent) runs no agent: its result is the winner's, whose `worktree` block names the
//! winner's worktree, so `tasks apply <parent id>` applies the winner's change. The winner's
//! record lists the parent among its tasks (its TTL counts from the later of the two).
//!
//! Slots: the parent holds none (it only waits); each candidate takes one run slot, for its
//! own worktree, as any worktree run does. With `max_concurrent` at least the number of
//! candidates they all run at once; with fewer, the rest wait for a slot in submission order and
//! still run (never for a slot their parent holds). A candidate's `duration_ms` is its run's,
//! not its wait.
//!
//! Once every candidate has ended, the losers' worktrees and branches are discarded (unless
//! `keep_all`), each once its agent's processes are gone (the run holds the worktree's lock
//! until then).

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use droid_contract::{
    AgentChoice, Attempt, ExecutionRequest, ExecutionResult, Isolation, Issue, IssueType,
    WorktreeOutcome,
};
use tokio_util::sync::CancellationToken;

use crate::fanout::attempt::attempt_of;
use crate::fanout::judge;
use crate::lock;
use crate::run::engine::Engine;
use crate::run::event::{Phase, RunEvent};
use crate::run::supervise::Publisher;
use crate::task_key::TaskKey;
use crate::tasks::Tasks;
use crate::worktree::layout::Layout;
use crate::worktree::record::{Record, id_of_branch};

/// How long the end of a best_of waits for a candidate's agent to be reaped (it holds the
/// worktree's lock until then) before it leaves the worktree for `tasks discard`.
const LOCK_WAIT: Duration = Duration::from_secs(30);
/// How often it looks.
const LOCK_POLL: Duration = Duration::from_millis(50);

/// One candidate's run, boxed: a candidate is a task run through [`Engine::run_as_task`], which
/// comes back to [`Engine::run_as`] (recursion needs a box).
type CandidateRun<'a> = Pin<Box<dyn Future<Output = ExecutionResult> + Send + 'a>>;

impl Engine {
    /// Run `req`'s `best_of` candidates at once and answer with the winner's result, plus every
    /// candidate's attempt and the total usage; `task` is the parent task (the store's key of
    /// the request itself).
    pub(crate) async fn run_best_of(
        &self,
        req: &ExecutionRequest,
        cancel: CancellationToken,
        publish: Publisher,
        task: Option<&TaskKey>,
    ) -> ExecutionResult {
        let started = Instant::now();
        let cfg = self.config();
        let refuse = |why: String, what_to_do: &str| {
            let mut r = ExecutionResult::error(
                req.task_id.as_ref().map(|t| t.as_str().to_owned()),
                format!("{why}; nothing ran"),
                vec![Issue::new(IssueType::EnvIssue, why, what_to_do)],
            );
            r.notes_for_human.clone_from(&req.notes_for_human);
            publish.send(RunEvent::Completed { status: r.status });
            r
        };
        let (Some(store), Some(parent)) = (cfg.store_dir.as_deref(), task) else {
            return refuse(
                "best_of needs a task store (store_dir): each candidate is a task of the store, \
                 in a worktree of its own"
                    .to_owned(),
                "set store_dir (or XDG_STATE_HOME or HOME)",
            );
        };
        // refused whole, before any candidate runs
        if let Err(e) =
            crate::worktree::lease::room_for(store, cfg.worktrees.max_worktrees, req.best_of.len())
        {
            return refuse(
                e.to_string(),
                "apply or discard waiting worktree tasks, or raise max_worktrees",
            );
        }
        let names: Vec<String> = req.best_of.iter().map(AgentChoice::label).collect();
        publish.send(RunEvent::Progress {
            phase: Phase::Agent,
            message: format!(
                "best_of: {} candidates at once, each in a worktree of its own: {}",
                names.len(),
                names.join(", ")
            ),
        });
        let runs: Vec<_> = req
            .best_of
            .iter()
            .map(|choice| self.candidate(req, choice, cancel.child_token(), &publish))
            .collect();
        let results = join_all(runs).await;

        let mut attempts: Vec<Attempt> = req
            .best_of
            .iter()
            .zip(&results)
            .map(|(choice, r)| {
                let mut a = attempt_of(choice, r, Duration::from_millis(r.duration_ms));
                a.task_id.clone_from(&r.task_id);
                a.worktree.clone_from(&r.worktree);
                a
            })
            .collect();
        let Some(won) = judge::winner(&attempts) else {
            return refuse(
                "best_of named no candidate".to_owned(),
                "name 2 to 5 agents in best_of",
            );
        };
        attempts[won].chosen = true;
        publish.send(RunEvent::Progress {
            phase: Phase::Assemble,
            message: format!(
                "best_of: {} chosen ({})",
                names[won],
                attempts[won].status.as_str()
            ),
        });

        let mut logs = Vec::new();
        for (i, a) in attempts.iter().enumerate() {
            if i != won {
                logs.push(format!(
                    "best_of: {} chosen over {} ({}): {}",
                    names[won],
                    names[i],
                    a.status.as_str(),
                    judge::why(&attempts[won], a)
                ));
            }
        }
        // the losers' worktrees go and the winner's names the parent, all at once
        let layout = Layout::new(store);
        let tasks = Tasks::open(cfg).ok();
        let losers: Vec<(usize, String, String)> = attempts
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != won && !req.keep_all)
            .filter_map(|(i, a)| Some((i, a.task_id.clone()?, a.worktree.as_ref()?.branch.clone())))
            .collect();
        // each removal on a thread of its own: a checkout is removed file by file
        let discards = losers
            .iter()
            .map(|(_, id, branch)| {
                let (layout, tasks) = (layout.clone(), tasks.clone());
                let (id, branch) = (id.clone(), branch.clone());
                tokio::spawn(async move { discard(&layout, tasks.as_ref(), &id, &branch).await })
            })
            .collect();
        let winner = attempts[won].worktree.as_ref().map(|w| w.branch.clone());
        let (discarded, adopted) = tokio::join!(join_all(discards), async {
            match &winner {
                Some(branch) => adopt(&layout, branch, parent).await,
                None => Ok(()),
            }
        });
        let discarded = discarded
            .into_iter()
            .map(|joined| joined.unwrap_or_else(|e| Err(format!("the removal failed: {e}"))));
        for ((i, id, _), outcome) in losers.iter().zip(discarded) {
            match outcome {
                Ok(()) => attempts[*i].worktree = None,
                Err(why) => logs.push(format!(
                    "best_of: the worktree of {} (task {id}) was not discarded: {why}; \
                     discard it with: droid-executor tasks discard {id}",
                    names[*i]
                )),
            }
        }
        if let Err(why) = adopted {
            logs.push(format!(
                "best_of: the winner's worktree does not name task {parent} ({why}); it expires \
                 with task {}",
                attempts[won].task_id.as_deref().unwrap_or("?")
            ));
        }

        let usage = attempts.iter().filter_map(|a| a.usage.as_ref()).fold(
            None,
            |sum: Option<droid_contract::Usage>, u| {
                Some(sum.map_or_else(|| u.clone(), |s| s.plus(u)))
            },
        );
        let Some(mut result) = results.into_iter().nth(won) else {
            return refuse(
                "best_of lost its winner's result".to_owned(),
                "report it: this is a bug",
            );
        };
        result.summary = format!(
            "best_of: {} chosen of {} candidates. {}",
            names[won],
            names.len(),
            result.summary
        );
        logs.append(&mut result.logs);
        logs.truncate(crate::run::assemble::MAX_LOGS);
        result.logs = logs;
        result.attempts = attempts;
        result.usage = usage;
        result.task_id = req.task_id.as_ref().map(|t| t.as_str().to_owned());
        result.notes_for_human.clone_from(&req.notes_for_human);
        result.duration_ms = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
        publish.send(RunEvent::Completed {
            status: result.status,
        });
        result
    }

    /// One candidate: `req` for `choice` alone, run in a new worktree as a task of the store.
    fn candidate<'a>(
        &'a self,
        req: &ExecutionRequest,
        choice: &'a AgentChoice,
        cancel: CancellationToken,
        publish: &'a Publisher,
    ) -> CandidateRun<'a> {
        let mut one = req.clone();
        one.provider = choice.provider;
        one.model.clone_from(&choice.model);
        one.best_of = Vec::new();
        one.keep_all = false;
        one.task_id = None;
        one.isolation = Some(Isolation::Worktree);
        Box::pin(async move {
            let run: CandidateRun<'_> = Box::pin(self.run_as_task(&one, cancel, None));
            let r = run.await;
            publish.send(RunEvent::Progress {
                phase: Phase::Verify,
                message: format!(
                    "best_of: {} ended {} (task {})",
                    choice.label(),
                    r.status.as_str(),
                    r.task_id.as_deref().unwrap_or("none")
                ),
            });
            r
        })
    }
}

/// Run every future at once (on this task) and return their outputs in order.
async fn join_all<F: Future + Unpin>(mut runs: Vec<F>) -> Vec<F::Output> {
    let mut out: Vec<Option<F::Output>> = runs.iter().map(|_| None).collect();
    std::future::poll_fn(|cx| {
        let mut pending = false;
        for (run, slot) in runs.iter_mut().zip(out.iter_mut()) {
            if slot.is_none() {
                match Pin::new(run).poll(cx) {
                    Poll::Ready(v) => *slot = Some(v),
                    Poll::Pending => pending = true,
                }
            }
        }
        if pending {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    })
    .await;
    out.into_iter().flatten().collect()
}

/// Wait (up to [`LOCK_WAIT`]) until no run holds the worktree of `branch`: a candidate's agent
/// is being reaped after its result came back.
async fn when_free(layout: &Layout, branch: &str) -> Result<TaskKey, String> {
    let wt = id_of_branch(branch).ok_or_else(|| format!("{branch} is not a branch of ours"))?;
    let until = tokio::time::Instant::now() + LOCK_WAIT;
    loop {
        match lock::is_held(&layout.lock(&wt)) {
            Ok(false) => return Ok(wt),
            Ok(true) if tokio::time::Instant::now() < until => {
                tokio::time::sleep(LOCK_POLL).await;
            }
            Ok(true) => {
                return Err(format!(
                    "its agent was still ending after {} s",
                    LOCK_WAIT.as_secs()
                ));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
}

/// Discard candidate task `id`'s worktree (on `branch`) and its branch.
async fn discard(
    layout: &Layout,
    tasks: Option<&Tasks>,
    id: &str,
    branch: &str,
) -> Result<(), String> {
    let tasks = tasks.ok_or("the task store cannot be opened")?;
    when_free(layout, branch).await?;
    let answer = tasks.discard(id).await.map_err(|e| e.to_string())?;
    match answer.outcome {
        WorktreeOutcome::Discarded => Ok(()),
        WorktreeOutcome::Applied
        | WorktreeOutcome::Clean
        | WorktreeOutcome::Conflict
        | WorktreeOutcome::Refused => Err(answer.summary),
    }
}

/// Note in the winner's worktree record (on `branch`) that task `parent` names it, under the
/// worktree's lock: the janitor keeps a worktree while one of its tasks is kept.
async fn adopt(layout: &Layout, branch: &str, parent: &TaskKey) -> Result<(), String> {
    let wt = when_free(layout, branch).await?;
    let Some(_held) = lock::try_exclusive(&layout.lock(&wt)).map_err(|e| e.to_string())? else {
        return Err("a run took the worktree meanwhile".to_owned());
    };
    let path = layout.record(&wt);
    let Some(mut record) = Record::read(&path).map_err(|e| e.to_string())? else {
        return Err("its record is gone".to_owned());
    };
    record.add_task(parent.as_str());
    record.write(&path).map_err(|e| e.to_string())
}
