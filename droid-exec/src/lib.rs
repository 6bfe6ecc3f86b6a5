//! droid-exec: the engine. It turns an [`droid_contract::ExecutionRequest`] into a supervised
//! `droid exec -o stream-json` run and an [`droid_contract::ExecutionResult`] built from ground
//! truth: `files_changed` from the repository itself (a snapshot before and after), `tests` from
//! commands we re-run ourselves, success from droid's `completion` event (its exit code lies: it
//! exits 0 on SIGTERM, EPIPE and truncated model streams).
//!
//! This is the only crate that spawns processes, measures time or parses agent output; front-ends
//! (CLI, HTTP, MCP, ACP) decode their transport, call [`Engine`], and encode the answer. It must
//! not depend on any front-end crate, on hyper, or on clap.
//!
//! Key choices:
//! - the prompt goes through a private file (`-f`), never argv (Linux caps one argument at 128 KiB);
//! - droid's whole tree is owned without scanning the machine: where a cgroup v2 hierarchy is
//!   writable, droid is born in a leaf cgroup of its own (`clone3` into the cgroup), ended with
//!   `cgroup.kill` and proven gone by `populated 0`, and one reaper process per front-end ends
//!   them all if the front-end dies (see [`process::cgroup`]); elsewhere a per-run supervisor
//!   process ([`process::guard`]) is droid's parent and a child subreaper, so every process that loses
//!   its parent (`setsid`, a double fork, `env -i`) comes to it and it ends the tree, the
//!   front-end's death included. Every process a run starts also carries a marker variable in
//!   its environment: the last fallback where neither works (see [`process::sweep`]);
//! - the result is assembled as soon as droid's `completion` event arrives: the snapshot and the
//!   verification start at once, and droid is stopped and reaped in the background, by a task
//!   that holds the run's slot (and guardian) until its tree is gone; a front-end that exits
//!   waits for those tasks with [`Engine::settled`] (see `reap.rs`);
//! - outcomes (timeout, cancel, droid failing) are data in the result; `Err` means "could not run".

pub mod ask;
pub mod bind_address;
pub mod check_text;
pub mod client_env;
pub mod config;
pub mod env_map;
pub mod error;
pub mod excerpt;
pub(crate) mod fanout;
pub mod fnv;
pub mod health;
pub mod host;
pub mod input;
pub mod locate;
pub(crate) mod lock;
pub(crate) mod no_follow;
mod npm_prefix;
pub mod pend;
pub mod process;
pub mod provenance;
pub mod providers;
pub mod real_path;
pub mod reply;
pub mod run;
pub mod run_slots;
pub mod session;
pub(crate) mod snapshot;
pub mod state_file;
pub mod task_key;
pub mod tasks;
pub mod timestamp;
pub mod toolset;
pub mod worktree;

pub use config::{EngineConfig, EnvMap, Settings};
pub use error::EngineError;
pub use fanout::tally::{AgentRun, agent_runs};
pub use providers::{AgentEvent, Invocation, Provider};
pub use run::Engine;
pub use run::event::{EVENT_CHANNEL_CAPACITY, Phase, RunEvent};
pub use task_key::TaskKey;
pub use tasks::store::DamagedEntry;
pub use tasks::worktrees::WorktreeEntry;
pub use tasks::{EventCursor, TaskCounts, TaskFilter, TaskListing, Tasks};
