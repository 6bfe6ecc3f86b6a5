//! The reaping of leaf children dropped before they were waited for, with no runtime.
//!
//! A [`crate::process::spawn::leaf::LeafChild`] dropped unwaited is SIGKILLed at once, in its
//! `Drop`; only its reaping is left (else it stays a zombie until this process exits). That used
//! to be a task spawned from `Drop`, as tokio reaps a dropped child of its own, but a runtime
//! that is shutting down drops a task spawned then at once: the task's child was dropped again,
//! which spawned again, until the stack overflowed (issue 35). `Drop` cannot know that its
//! runtime is shutting down (`Handle::try_current` still answers then), so nothing here needs a
//! runtime:
//!
//! - a child that has already exited is reaped in place (`waitid(WNOHANG)`, no wait);
//! - else its pidfd goes to the reaper, one thread per process started with the first such
//!   child, which polls the pidfds it holds and reaps each as it becomes readable (a pidfd is
//!   readable once its process has exited). It never blocks on one process: a SIGKILLed process
//!   in uninterruptible sleep dies only when it wakes, and the others are reaped meanwhile.
//!
//! Bounded: the channel holds [`QUEUE`] pidfds and the thread [`HELD`]; past that (or when the
//! thread cannot be started) a child's pidfd is closed and the child, already SIGKILLed, stays a
//! zombie until this process exits: not running, one entry of the process table.

use std::os::fd::{AsFd as _, OwnedFd};
use std::sync::OnceLock;
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::wait::{Id, WaitPidFlag, WaitStatus};

/// Pidfds on their way to the reaper (the channel's capacity).
const QUEUE: usize = 256;
/// Pidfds the reaper holds at once, not yet exited.
const HELD: usize = 1024;
/// How long the reaper polls the pidfds it holds before it takes new ones (milliseconds): the
/// delay of a reaping, never of a run.
const PERIOD_MS: u16 = 100;

/// The sending end of the reaper's channel, `None` when its thread could not be started.
static REAPER: OnceLock<Option<SyncSender<OwnedFd>>> = OnceLock::new();

/// Reap the process of `pidfd` (a child of ours, already SIGKILLed): now if it has exited, else
/// by the reaper thread. Never blocks, never spawns a task.
pub(crate) fn reap(pidfd: OwnedFd) {
    if reaped(&pidfd) {
        return;
    }
    let reaper = REAPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel(QUEUE);
        std::thread::Builder::new()
            .name("droid-executor-reaper".into())
            .spawn(move || run(&rx))
            .ok()
            .map(|_| tx)
    });
    match reaper {
        Some(tx) => match tx.try_send(pidfd) {
            Ok(()) => {}
            Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) => {
                tracing::warn!("too many dropped children to reap: one stays a zombie");
            }
        },
        None => tracing::warn!("no reaper thread: a dropped child stays a zombie"),
    }
}

/// Whether the process of `pidfd` is reaped now (or was already: `ECHILD`).
fn reaped(pidfd: &OwnedFd) -> bool {
    match nix::sys::wait::waitid(
        Id::PIDFd(pidfd.as_fd()),
        WaitPidFlag::WEXITED | WaitPidFlag::WNOHANG,
    ) {
        Ok(WaitStatus::StillAlive) => false,
        Ok(_) => true,
        Err(nix::errno::Errno::EINTR) => reaped(pidfd),
        // ECHILD: reaped by someone else (or not our child); nothing to wait for
        Err(_) => true,
    }
}

/// The reaper thread: wait for pidfds while it holds none, else poll those it holds.
fn run(rx: &Receiver<OwnedFd>) {
    let mut held: Vec<OwnedFd> = Vec::new();
    loop {
        if held.is_empty() {
            match rx.recv() {
                Ok(fd) => held.push(fd),
                Err(_) => return,
            }
        }
        while held.len() < HELD {
            match rx.try_recv() {
                Ok(fd) => held.push(fd),
                Err(_) => break,
            }
        }
        let mut fds: Vec<PollFd<'_>> = held
            .iter()
            .map(|fd| PollFd::new(fd.as_fd(), PollFlags::POLLIN))
            .collect();
        let _ = poll(&mut fds, PollTimeout::from(PERIOD_MS));
        drop(fds);
        held.retain(|fd| !reaped(fd));
    }
}
