//! One run, from an admitted request to its result: the engine's entry point ([`Engine`]),
//! reading the agent's output ([`lines`], [`supervise`], held to its token budget: `budget`), ground truth re-measured around it
//! (the repository through `crate::snapshot`, [`verify`] re-running the suggested commands),
//! reading the agent's events ([`classify`], [`report`]), the result's hygiene ([`redact`]),
//! guarding the repository's state while the agent works (`git_guard`, `state_guard`,
//! `guarded_tree`), and where it works (`isolation`: in place, or in a worktree of
//! `crate::worktree`). The processes are started and ended by `crate::process`; what is specific
//! to one agent CLI lives in `crate::providers`. A run knows no task store: it takes a run slot
//! from `crate::run_slots` and publishes its events to an [`event::EventSink`].

pub(crate) mod assemble;
pub(crate) mod budget;
pub mod classify;
pub(crate) mod engine;
pub mod event;
pub(crate) mod git_guard;
pub(crate) mod guarded_tree;
mod isolation;
pub mod lines;
pub mod prompt;
pub mod redact;
pub mod report;
pub(crate) mod state_guard;
pub mod supervise;
pub(crate) mod verify;

pub use engine::Engine;
