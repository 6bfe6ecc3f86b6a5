//! Ending droid after its completion event without making the result wait for it.
//!
//! Once droid prints `completion` its turn is over: its tools are done and its session is on
//! disk. What it does next (the real droid lingers ~6 s flushing telemetry outside airgap mode)
//! changes nothing in the result. So supervision stops there: droid is asked to stop at once and
//! a [`Reaping`] task started beside the run ends it. In the run's cgroup leaf
//! ([`crate::process::cgroup`], where there is one) that is SIGTERM to droid's group, `cgroup.kill`
//! after `kill_grace`, and the leaf found empty as the proof. Under the run's supervisor
//! ([`crate::process::guard`], the usual case) that is `T` on its control pipe (SIGTERM droid's group),
//! `K` after `kill_grace` (SIGKILL the whole tree), and the supervisor's exit, which comes only
//! once droid's tree is gone, as the proof; the marker is swept only if the supervisor itself
//! had to be SIGKILLed. Without a supervisor (none configured, or it could not start), droid's
//! group gets SIGTERM, SIGKILL after `kill_grace`, and what carries exactly the run's marker is
//! swept ([`Reach::Exact`]: the verification commands, marked `<marker>-verify-<i>`, may be
//! running at that moment and are not droid's). The snapshot and the verification start at once
//! and the result is returned as soon as they are done, whether droid has exited or not.
//!
//! Key choice: the "nothing the run started survives" guarantee is kept, not by the result, but
//! by what outlives it. The reaping task holds droid's supervisor, the run's guardian and its run
//! slot until droid's tree is ended; the engine counts such tasks ([`Reapers`]) and a front-end
//! that exits waits for them ([`Engine::settled`]) after it has handed the result over, or, when
//! its own caller waits for its exit (`droid-executor run`), kills them at once and waits
//! ([`Engine::settle_now`]: the real droid outside airgap mode may take all of `kill_grace` to
//! honour SIGTERM). If the front-end dies first, the supervisor (its control pipe closes) or, without
//! one, droid's parent-death signal and the guardian end the tree anyway.
//! A process droid left running on purpose (an Execute with `fireAndForget`) may still write to
//! the repository while the snapshot is taken: files_changed is the repository as droid's turn
//! left it, give or take such a background process, which is ended without being waited for.
//!
//! [`Engine::settled`]: crate::Engine::settled
//! [`Engine::settle_now`]: crate::Engine::settle_now
//! [`Reach::Exact`]: crate::process::sweep::Reach::Exact

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use crate::process::child::RunChild;
use nix::sys::signal::Signal;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::process::guard::{KILL_WAIT, TreeControl};
use crate::process::spawn::signal_group;
use crate::process::sweep::{Reach, sweep_reaching};

/// How long the sweep after droid's exit keeps killing what carries its marker.
const SWEEP_BUDGET: Duration = Duration::from_secs(3);

/// droid being ended in the background after its completion event.
#[derive(Debug)]
pub(crate) struct Reaping {
    /// droid's status, and whether its tree was proven gone (the supervisor's clean exit, or
    /// the leaf found empty) rather than swept.
    handle: JoinHandle<(Option<ExitStatus>, bool)>,
    /// Cancelled: SIGKILL droid's tree now rather than at the end of `kill_grace`.
    hurry: CancellationToken,
}

impl Reaping {
    /// Stop droid now and end it in a task of its own. `child` is droid's supervisor when
    /// `tree` is its control pipe ([`crate::process::guard`]): it is asked to SIGTERM droid's group, given
    /// `kill_grace`, asked to SIGKILL the whole tree, and its exit is the proof that the tree is
    /// gone (the marker is swept only if it had to be SIGKILLed itself, or died of a signal
    /// before it was asked anything). Without a supervisor `child` is droid: SIGTERM its group,
    /// `kill_grace`, SIGKILL the group, reap it, then sweep `marker` exactly. `exited`: droid
    /// (or its supervisor) had already exited, nothing is sent. `keep` (droid's output pipes) is
    /// held until the end, so a droid still writing gets no broken pipe while it shuts down.
    pub(crate) fn start<K: Send + 'static>(
        mut child: RunChild,
        exited: Option<ExitStatus>,
        tree: Option<TreeControl>,
        kill_grace: Duration,
        marker: String,
        keep: K,
    ) -> Self {
        let pid = child.id();
        if exited.is_none() {
            match (&tree, pid) {
                (Some(tree), _) => tree.terminate(),
                (None, Some(pid)) => signal_group(pid, Signal::SIGTERM),
                (None, None) => {}
            }
        }
        let hurry = CancellationToken::new();
        let hurried = hurry.clone();
        let handle = tokio::spawn(async move {
            // `Some`: the child exited, after being asked to stop (or not)
            let (status, asked) = match exited {
                Some(status) => (Some(status), false),
                None => {
                    let waited = tokio::select! {
                        status = child.wait() => Some(status.ok()),
                        () = tokio::time::sleep(kill_grace) => None,
                        () = hurried.cancelled() => None,
                    };
                    match (waited, &tree) {
                        (Some(status), _) => (status, true),
                        (None, Some(tree)) => {
                            tree.kill();
                            match tokio::time::timeout(KILL_WAIT, child.wait()).await {
                                Ok(status) => (status.ok(), true),
                                Err(_) => {
                                    if let Some(pid) = pid {
                                        signal_group(pid, Signal::SIGKILL);
                                    }
                                    (child.wait().await.ok(), false)
                                }
                            }
                        }
                        (None, None) => {
                            if let Some(pid) = pid {
                                signal_group(pid, Signal::SIGKILL);
                            }
                            (child.wait().await.ok(), false)
                        }
                    }
                }
            };
            // a supervisor that exited ended the tree first; a leaf is emptied now
            let trusted = match &tree {
                Some(tree) => tree.ended(status, asked).await,
                None => false,
            };
            if !trusted {
                // droid (or its supervisor) is gone; what it left in its group or elsewhere
                // goes with it
                if let Some(pid) = pid {
                    signal_group(pid, Signal::SIGKILL);
                }
                sweep_reaching(&marker, Reach::Exact, SWEEP_BUDGET).await;
            }
            drop(tree);
            drop(keep);
            (status, trusted)
        });
        Self { handle, hurry }
    }

    /// When its tree has already been ended (the reaping is over): droid's exit status, and
    /// whether the tree was proven gone; else the reaping itself, still under way.
    pub(crate) async fn now_or_later(self) -> Result<(Option<ExitStatus>, bool), Self> {
        if self.handle.is_finished() {
            // finished: the join returns at once
            return Ok(self.handle.await.unwrap_or((None, false)));
        }
        Err(self)
    }
}

/// The background tasks of an engine that end what its runs left (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct Reapers {
    /// How many are under way.
    running: Arc<watch::Sender<usize>>,
    /// Cancelled: every reaping, under way or to come, kills droid at once.
    hurry: CancellationToken,
}

impl Default for Reapers {
    fn default() -> Self {
        Self {
            running: Arc::new(watch::Sender::new(0)),
            hurry: CancellationToken::new(),
        }
    }
}

/// Counts one task of [`Reapers`] until it is dropped (the task ended, or the runtime dropped it).
struct Running(Arc<watch::Sender<usize>>);

impl Drop for Running {
    fn drop(&mut self) {
        self.0.send_modify(|n| *n = n.saturating_sub(1));
    }
}

impl Reapers {
    /// Follow `reaping` in the background, counted until it ends; `hold` (the run's guardian
    /// and run slot) is let go only then, after `ended` is told whether droid's tree was proven
    /// gone.
    pub(crate) fn track<H: Send + 'static>(
        &self,
        mut reaping: Reaping,
        hold: H,
        ended: impl FnOnce(bool) + Send + 'static,
    ) {
        self.running.send_modify(|n| *n += 1);
        let running = Running(Arc::clone(&self.running));
        let hurry = self.hurry.clone();
        tokio::spawn(async move {
            let outcome = tokio::select! {
                outcome = &mut reaping.handle => outcome,
                () = hurry.cancelled() => {
                    reaping.hurry.cancel();
                    (&mut reaping.handle).await
                }
            };
            ended(outcome.is_ok_and(|(_, proven)| proven));
            drop(hold);
            drop(running);
        });
    }

    /// From now on, kill droid at once (SIGKILL its group) instead of giving it the rest of
    /// `kill_grace`: for a front-end about to exit, which has handed its result over.
    pub(crate) fn hurry(&self) {
        self.hurry.cancel();
    }

    /// Wait until no task is under way.
    pub(crate) async fn settled(&self) {
        let mut rx = self.running.subscribe();
        // the sender lives in `self`: the channel cannot close while this waits
        let _ = rx.wait_for(|n| *n == 0).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn settled_waits_for_every_tracked_task() {
        let reapers = Reapers::default();
        reapers.settled().await;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let reaping = Reaping {
            handle: tokio::spawn(async move {
                let _ = rx.await;
                (None, false)
            }),
            hurry: CancellationToken::new(),
        };
        reapers.track(reaping, (), |_| {});
        let settled = tokio::spawn({
            let reapers = reapers.clone();
            async move { reapers.settled().await }
        });
        tokio::task::yield_now().await;
        assert!(!settled.is_finished());
        tx.send(()).unwrap();
        tokio::time::timeout(Duration::from_secs(10), settled)
            .await
            .unwrap()
            .unwrap();
    }
}
