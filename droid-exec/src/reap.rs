//! Ending droid after its completion event without making the result wait for it.
//!
//! Once droid prints `completion` its turn is over: its tools are done and its session is on
//! disk. What it does next (the real droid lingers ~6 s flushing telemetry outside airgap mode)
//! changes nothing in the result. So supervision stops there: droid's process group gets SIGTERM
//! at once, and a [`Reaping`] task started beside the run waits for droid to exit (`kill_grace`,
//! then SIGKILL), kills what is left in its group, and sweeps what carries exactly the run's
//! marker ([`Reach::Exact`]: the verification commands, marked `<marker>-verify-<i>`, may be
//! running at that moment and are not droid's). The snapshot and the verification start at once
//! and the result is returned as soon as they are done, whether droid has exited or not.
//!
//! Key choice: the "nothing the run started survives" guarantee is kept, not by the result, but
//! by what outlives it. The reaping task holds the run's guardian ([`crate::guard`]) and its run
//! slot until droid's tree is ended; the engine counts such tasks ([`Reapers`]) and a front-end
//! that exits waits for them ([`Engine::settled`]) after it has handed the result over, or, when
//! its own caller waits for its exit (`droid-executor run`), kills them at once and waits
//! ([`Engine::settle_now`]: the real droid outside airgap mode may take all of `kill_grace` to
//! honour SIGTERM). If the front-end dies first, droid's parent-death signal and the guardian end
//! the tree anyway.
//! A process droid left running on purpose (an Execute with `fireAndForget`) may still write to
//! the repository while the snapshot is taken: files_changed is the repository as droid's turn
//! left it, give or take such a background process, which is ended without being waited for.
//!
//! [`Engine::settled`]: crate::Engine::settled
//! [`Engine::settle_now`]: crate::Engine::settle_now
//! [`Reach::Exact`]: crate::sweep::Reach::Exact

use std::process::ExitStatus;
use std::sync::Arc;
use std::time::Duration;

use nix::sys::signal::Signal;
use tokio::process::Child;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::spawn::signal_group;
use crate::sweep::{Reach, sweep_reaching};

/// How long the sweep after droid's exit keeps killing what carries its marker.
const SWEEP_BUDGET: Duration = Duration::from_secs(3);

/// droid being ended in the background after its completion event.
#[derive(Debug)]
pub(crate) struct Reaping {
    handle: JoinHandle<Option<ExitStatus>>,
    /// Cancelled: SIGKILL droid's group now rather than at the end of `kill_grace`.
    hurry: CancellationToken,
}

impl Reaping {
    /// SIGTERM droid's process group now, and end droid in a task of its own: wait up to
    /// `kill_grace` for it to exit, SIGKILL the group, reap it, then sweep `marker` exactly.
    /// `keep` (droid's output pipes) is held until then, so a droid still writing gets no
    /// broken pipe while it shuts down.
    pub(crate) fn start<K: Send + 'static>(
        mut child: Child,
        kill_grace: Duration,
        marker: String,
        keep: K,
    ) -> Self {
        let pid = child.id();
        if let Some(pid) = pid {
            signal_group(pid, Signal::SIGTERM);
        }
        let hurry = CancellationToken::new();
        let hurried = hurry.clone();
        let handle = tokio::spawn(async move {
            let exited = tokio::select! {
                status = child.wait() => Some(status.ok()),
                () = tokio::time::sleep(kill_grace) => None,
                () = hurried.cancelled() => None,
            };
            let status = match exited {
                Some(status) => status,
                None => {
                    if let Some(pid) = pid {
                        signal_group(pid, Signal::SIGKILL);
                    }
                    child.wait().await.ok()
                }
            };
            // droid is gone; what it left in its group or elsewhere goes with it
            if let Some(pid) = pid {
                signal_group(pid, Signal::SIGKILL);
            }
            sweep_reaching(&marker, Reach::Exact, SWEEP_BUDGET).await;
            drop(keep);
            status
        });
        Self { handle, hurry }
    }

    /// droid's exit status when its tree has already been ended (the reaping is over), else
    /// the reaping itself, still under way.
    pub(crate) async fn now_or_later(self) -> Result<Option<ExitStatus>, Self> {
        if self.handle.is_finished() {
            // finished: the join returns at once
            return Ok(self.handle.await.ok().flatten());
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
    /// and run slot) is let go only then.
    pub(crate) fn track<H: Send + 'static>(&self, mut reaping: Reaping, hold: H) {
        self.running.send_modify(|n| *n += 1);
        let running = Running(Arc::clone(&self.running));
        let hurry = self.hurry.clone();
        tokio::spawn(async move {
            tokio::select! {
                _ = &mut reaping.handle => {}
                () = hurry.cancelled() => {
                    reaping.hurry.cancel();
                    let _ = (&mut reaping.handle).await;
                }
            }
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
                None
            }),
            hurry: CancellationToken::new(),
        };
        reapers.track(reaping, ());
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
