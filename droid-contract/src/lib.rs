//! The droid-executor contract: what a caller asks for ([`ExecutionRequest`]) and what it gets back
//! ([`ExecutionResult`]), with the validation rules, the issue vocabulary, the status rules and the
//! JSON Schema of both.
//!
//! This crate is types, validation and wire conversions only. It must not depend on tokio, hyper,
//! clap or anything that does I/O: every front-end and the engine share it, and the JSON Schema
//! generated from it is the public wire format.
//!
//! Key choice: *parse, don't validate*. A request is parsed from JSON into newtypes whose
//! constructors enforce the rules (`Objective`, `RepoRoot`, `RelPath`, `Runtime`, `TaskId`), so a
//! value that exists is valid. Parsing walks the whole document and returns **every** violation at
//! once, each with its JSON path, instead of stopping at the first. Facts about the host that the
//! rules need (does `repo_root` exist, where does a symlink lead) come in through the [`PathFacts`]
//! trait, which the engine implements; this crate never touches the file system itself.
#![deny(missing_docs)]

mod attempt;
mod file_change;
mod fit;
mod isolation;
mod issue;
mod paths;
mod provider;
mod request;
mod result;
#[cfg(test)]
mod roundtrip;
mod schema;
mod status;
mod task;
mod text;
mod usage;
mod violation;
mod worktree;

pub use attempt::{
    AgentChoice, Attempt, CheckOutcome, Diffstat, MAX_BEST_OF, MAX_FALLBACK, MAX_TOKEN_BUDGET,
    MIN_BEST_OF, MIN_TOKEN_BUDGET, warrants_fallback,
};
pub use file_change::{ChangeType, FileChange};
pub use fit::{EXCERPT_KEEP, Omitted, SUMMARY_MAX, TEXT_KEEP};
pub use isolation::Isolation;
pub use issue::{Issue, IssueType};
pub use paths::{PathFacts, PathKind, RelPath, RepoRoot, normalize};
pub use provider::{PROVIDERS, ProviderId, ProviderInfo};
pub use request::{Autonomy, Context, ExecutionMode, ExecutionRequest, HostCheck};
pub use result::{
    AgentInfo, CommandRun, CommandSource, DroidInfo, ExecutionResult, SandboxInfo, SandboxKind,
    Tests,
};
pub use schema::{request_schema, result_schema, task_record_schema, worktree_answer_schema};
pub use status::{ReportedStatus, RunEnd, Status, StatusFacts, Verdict, cannot_run, decide};
pub use task::{TaskRecord, TaskState};
pub use text::{
    INSTRUCTIONS_MAX, Instructions, ListItem, Objective, Runtime, ShellCommand, TaskId,
};
pub use usage::Usage;
pub use violation::{Violation, Violations};
pub use worktree::{WorktreeAction, WorktreeAnswer, WorktreeInfo, WorktreeOutcome, WorktreeState};
