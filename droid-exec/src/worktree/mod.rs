//! Worktree tasks (docs/worktrees.md): a task that runs in a git worktree of its own, made under
//! the task store from the repository as the user has it, its change committed to a branch
//! `droid-executor/<id>` and brought into the user's working tree only by `apply`.
//!
//! One concept per file: the settings ([`config`]), where worktrees live ([`layout`]) and what
//! is recorded of each ([`record`]), the git commands ([`git`]) and the repository they run
//! against ([`repository`]), the user's working tree as a commit ([`base`]), making a worktree
//! ([`create`], [`copy_in`]), a run's hold on it ([`lease`]), committing the agent's change
//! ([`commit`]), applying it ([`apply`]), removing a worktree ([`remove`]) and the disk it uses
//! ([`usage`]). What concerns tasks (apply and discard by task id, the janitor) is in
//! `crate::tasks::worktrees`.

pub(crate) mod apply;
pub(crate) mod base;
pub(crate) mod clean;
pub(crate) mod commit;
pub mod config;
pub(crate) mod copy_in;
pub(crate) mod create;
pub(crate) mod git;
pub(crate) mod layout;
pub(crate) mod lease;
pub(crate) mod pin;
pub(crate) mod record;
pub(crate) mod remove;
pub(crate) mod repository;
pub mod usage;

pub use config::{DEFAULT_MAX_WORKTREES, WorktreeConfig};
pub use usage::DiskUse;
