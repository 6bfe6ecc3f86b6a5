//! One run, from an admitted request to its result: the engine's entry point ([`Engine`]), the
//! spawn of the agent CLI in a cgroup leaf ([`cgroup`]) or under a per-run supervisor
//! ([`guard`], [`spawn`]), reading its output
//! ([`lines`], [`supervise`], held to its token [`budget`]), ending what it started
//! ([`sweep`], [`reap`]), ground truth
//! ([`snapshot`] of the repository before and after, [`verify`] re-running the suggested
//! commands), reading the agent's events ([`classify`], [`report`]), and the result's hygiene
//! ([`redact`], [`excerpt`]), and where it works (`isolation`: in place, or in a worktree of
//! `crate::worktree`). What is specific to one agent CLI lives in `crate::providers`.

pub(crate) mod budget;
pub mod cgroup;
pub(crate) mod child;
pub mod classify;
pub(crate) mod engine;
pub mod event;
pub mod excerpt;
pub(crate) mod git_dir;
pub(crate) mod git_guard;
pub(crate) mod git_index;
pub mod guard;
pub(crate) mod guarded_tree;
pub(crate) mod ignore_rules;
mod isolation;
pub mod limits;
mod line_diff;
pub mod lines;
pub mod net_confine;
pub(crate) mod no_follow;
pub mod prompt;
mod reap;
pub mod redact;
pub mod report;
pub mod sandbox;
mod scan_diff;
pub(crate) mod scratch;
pub(crate) mod snapshot;
pub mod spawn;
mod stat_scan;
pub(crate) mod state_guard;
pub mod supervise;
pub mod sweep;
pub(crate) mod verify;

pub use engine::Engine;
