//! Process primitives, below every run: the one spawn site ([`spawn`], [`spawn::leaf`]: the only
//! `Command::new` and `unsafe` of the workspace), a run's child ([`child`]), the cgroup leaf that
//! owns an agent's tree where there can be one ([`cgroup`]), else the per-run supervisor
//! ([`guard`]), ending what a run started ([`reap`], [`sweep`]), the limits a child runs under
//! ([`limits`]), its private scratch directories ([`scratch`]), and the kernel's confinement
//! ([`sandbox`]: Landlock write rules and scopes; [`net_confine`]: the front-end's TCP rule).
//!
//! Must not know a run, a provider, a task or a snapshot: what to start, and under which rules,
//! comes from the caller.

pub mod capture;
pub mod cgroup;
pub(crate) mod child;
pub mod guard;
pub mod limits;
pub mod net_confine;
pub(crate) mod reap;
pub mod sandbox;
pub(crate) mod scratch;
pub mod spawn;
pub mod spawn_spec;
pub mod sweep;
