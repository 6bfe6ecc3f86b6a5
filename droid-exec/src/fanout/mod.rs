//! Several agents on one task (docs/protocol.md#several-agents-on-one-task): `fallback` (the
//! next agent when one cannot run the task: not installed, authentication, rate limit, model
//! error), `best_of` (candidates at once, each in its own worktree, judged by ground truth) and
//! the record of every attempt. Each attempt is one run of `crate::run` ([`Engine::run_once`]);
//! this layer sits above it and below the task store's worker, which calls [`Engine::run_as`].
//!
//! [`Engine::run_once`]: crate::run::engine::Engine::run_once
//! [`Engine::run_as`]: crate::run::engine::Engine::run_as

pub(crate) mod attempt;
mod best_of;
mod fallback;
mod judge;
mod route;
pub(crate) mod tally;
