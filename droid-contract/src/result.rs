//! The execution result: what happened, measured rather than taken on droid's word.
//!
//! The shape is stable: every field is always present, optional values serialize as `null`, and
//! lists are empty rather than missing, so a calling agent can read it without guarding.
//!
//! The fields are declared in the order a reader needs them, and every encoder keeps that order
//! (serde_json's `preserve_order` is on for the workspace, so a trip through `Value` keeps it):
//! `status`, `summary`, `issues`, `files_changed` first, the bulky `commands_run` and `logs`
//! last. A client that shows only the start of a long result (Claude Code previews 2 KB of a
//! result it saved to a file) then still shows what matters.

use serde::{Deserialize, Serialize};

use crate::attempt::Attempt;
use crate::file_change::FileChange;
use crate::issue::{Issue, IssueType};
use crate::provider::ProviderId;
use crate::status::Status;
use crate::usage::Usage;
use crate::violation::Violations;
use crate::worktree::WorktreeInfo;

/// Who ran a command.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum CommandSource {
    /// droid ran it through its Execute tool.
    Agent,
    /// The executor re-ran it to verify the work.
    Verify,
    /// The executor ran it in a new worktree before the agent started (`setup_commands`).
    Setup,
}

/// One command and what came of it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CommandRun {
    /// The command line.
    pub command: String,
    /// Exit code; `null` when it was killed or never reported one.
    pub exit_code: Option<i32>,
    /// Wall time in milliseconds.
    pub duration_ms: u64,
    /// The end of its standard output (droid's Execute mixes stderr in here).
    pub stdout_excerpt: String,
    /// The end of its standard error.
    pub stderr_excerpt: String,
    /// Who ran it.
    pub source: CommandSource,
    /// An excerpt was cut to its last bytes.
    pub truncated: bool,
}

/// The verification summary.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Tests {
    /// Every verification command exited 0; `null` when none ran.
    pub passed: Option<bool>,
    /// One line per verification command.
    pub details: String,
    /// The verification commands, in the order run.
    pub commands: Vec<String>,
}

/// What clients read as `droid` before there were other providers: the same facts as
/// [`AgentInfo`] (with `provider` always `droid`).
pub type DroidInfo = AgentInfo;

/// What we know of the agent process that ran the task, whichever provider it was.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct AgentInfo {
    /// Which agent CLI ran: `droid`, `codex`, `claude`, `gemini` or `opencode`.
    pub provider: ProviderId,
    /// Its version.
    pub version: Option<String>,
    /// The model it ran with.
    pub model: Option<String>,
    /// Its exit code (`null`: killed by a signal, or not yet exited). Never the verdict.
    pub exit_code: Option<i32>,
    /// Model turns, when the agent reports them.
    pub num_turns: Option<u64>,
    /// Token usage, when the agent reports it.
    pub usage: Option<Usage>,
}

impl AgentInfo {
    /// The same facts for the `droid` field, which only a droid run fills.
    pub fn as_droid(&self) -> DroidInfo {
        self.clone()
    }
}

/// What confined a run's writes: the agent, everything it started, and the verification
/// commands.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct SandboxInfo {
    /// `landlock` (the kernel refused every write outside `writable`) or `none`.
    pub kind: SandboxKind,
    /// The Landlock ABI the kernel offered, when Landlock confined the run.
    pub abi: Option<u32>,
    /// The paths the run could write under (`repo_root` first); empty when nothing confined it.
    pub writable: Vec<String>,
    /// Why nothing confined the run (`off by config`, a kernel without Landlock).
    pub reason: Option<String>,
}

/// What confined a run.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SandboxKind {
    /// Landlock: writes allowed only under the listed paths.
    Landlock,
    /// Nothing: the agent could write wherever the user can.
    #[default]
    None,
}

/// The answer to an [`crate::ExecutionRequest`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(title = "ExecutionResult")]
pub struct ExecutionResult {
    /// success | partial | failed | timeout | cancelled | error.
    pub status: Status,
    /// What was done, in a few sentences.
    pub summary: String,
    /// Problems, each with a type and a suggested action.
    pub issues: Vec<Issue>,
    /// Files changed in the repository, measured from the repository itself.
    pub files_changed: Vec<FileChange>,
    /// Verification summary.
    pub tests: Tests,
    /// The git worktree the task ran in and what became of its change (`isolation: worktree`);
    /// `null` for a run in place.
    #[serde(default)]
    pub worktree: Option<WorktreeInfo>,
    /// The caller's task id, echoed.
    pub task_id: Option<String>,
    /// droid's session id (pass it as `session_id` to continue).
    pub session_id: Option<String>,
    /// Wall time of the whole run in milliseconds.
    pub duration_ms: u64,
    /// The agent that ran (every provider); `null` when none started.
    #[serde(default)]
    pub agent: Option<AgentInfo>,
    /// Every agent's attempt, when the request named `fallback` or `best_of` (empty otherwise):
    /// provider, model, status, what ended it, time, tokens, verification, diff.
    #[serde(default)]
    pub attempts: Vec<Attempt>,
    /// Tokens used over every attempt (`agent.usage` is the chosen attempt's); `null` when no
    /// agent reported any.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// What confined the agent's writes (and the verification commands'); `null` when nothing
    /// started.
    #[serde(default)]
    pub sandbox: Option<SandboxInfo>,
    /// The droid process: the same facts as `agent`, set only when the provider is droid (kept
    /// for the clients that read it before there were other providers).
    pub droid: Option<DroidInfo>,
    /// The caller's `notes_for_human`, echoed.
    pub notes_for_human: Option<String>,
    /// The worktree's setup commands, then the commands droid ran, then the verification
    /// commands we ran.
    pub commands_run: Vec<CommandRun>,
    /// Notable log lines (droid's errors, stderr, unknown events), each bounded.
    pub logs: Vec<String>,
}

impl ExecutionResult {
    /// An `error` result carrying `issues`, for a run that never started.
    pub fn error(task_id: Option<String>, summary: impl Into<String>, issues: Vec<Issue>) -> Self {
        Self {
            status: Status::Error,
            summary: summary.into(),
            files_changed: Vec::new(),
            commands_run: Vec::new(),
            tests: Tests::default(),
            worktree: None,
            logs: Vec::new(),
            issues,
            task_id,
            session_id: None,
            duration_ms: 0,
            agent: None,
            attempts: Vec::new(),
            usage: None,
            sandbox: None,
            droid: None,
            notes_for_human: None,
        }
    }

    /// The `error` result for an invalid request: one `validation_error` issue per violation.
    pub fn invalid_request(task_id: Option<String>, violations: &Violations) -> Self {
        let issues = violations
            .as_slice()
            .iter()
            .map(|v| {
                Issue::new(
                    IssueType::ValidationError,
                    v.to_string(),
                    format!("fix {} and send the request again", v.path),
                )
            })
            .collect();
        let n = violations.as_slice().len();
        Self::error(
            task_id,
            format!("invalid request: {n} violation(s); nothing ran"),
            issues,
        )
    }
}
