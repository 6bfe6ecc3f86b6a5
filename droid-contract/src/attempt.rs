//! Several agents on one task (docs/protocol.md#several-agents-on-one-task): the agents a
//! request names besides its `provider` (`fallback`, tried in turn; `best_of`, run at once and
//! judged by ground truth), its token budget (`max_tokens`), and the record of every attempt in
//! the result (`attempts`).

use serde::{Deserialize, Serialize};

use crate::issue::IssueType;
use crate::provider::ProviderId;
use crate::status::Status;
use crate::usage::Usage;
use crate::worktree::WorktreeInfo;

/// Most agents in `fallback`.
pub const MAX_FALLBACK: usize = 4;
/// Fewest agents in `best_of`.
pub const MIN_BEST_OF: usize = 2;
/// Most agents in `best_of`.
pub const MAX_BEST_OF: usize = 5;
/// The largest `max_tokens`.
pub const MAX_TOKEN_BUDGET: u64 = 1_000_000_000;
/// The smallest `max_tokens` (below it no agent CLI gets through its own system prompt).
pub const MIN_TOKEN_BUDGET: u64 = 100;

/// One agent: a provider and, optionally, its model (else the provider's default). On the wire
/// either an object `{"provider": "claude", "model": "opus"}` or a string `"codex"` /
/// `"claude:opus"` (the provider, then the model after the first `:`;
/// `"droid:custom:MyModel-0"` names droid's model `custom:MyModel-0`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AgentChoice {
    /// The agent CLI.
    pub provider: ProviderId,
    /// Its model (`-m`); the provider's default when absent.
    #[serde(default)]
    #[schemars(length(min = 1, max = 256))]
    pub model: Option<String>,
}

impl AgentChoice {
    /// Read the string form: `provider` or `provider:model`.
    ///
    /// # Errors
    /// A sentence naming what is wrong (an unknown provider, an empty model).
    pub fn parse(s: &str) -> Result<Self, String> {
        let (name, model) = match s.split_once(':') {
            Some((p, m)) => (p, Some(m)),
            None => (s, None),
        };
        let Some(provider) = ProviderId::parse(name) else {
            return Err(format!(
                "{name:?} is not a provider; one of {}",
                ProviderId::choices()
            ));
        };
        match model {
            Some("") => Err(format!(
                "{s:?} names no model after ':' (write {name:?} for its default)"
            )),
            Some(m) => Ok(Self {
                provider,
                model: Some(m.to_owned()),
            }),
            None => Ok(Self {
                provider,
                model: None,
            }),
        }
    }

    /// The string form (`claude:opus`, `codex`), for people and the CLI.
    pub fn label(&self) -> String {
        match &self.model {
            Some(m) => format!("{}:{m}", self.provider.as_str()),
            None => self.provider.as_str().to_owned(),
        }
    }
}

/// Whether an attempt that ended with an issue of this type is followed by the next agent of
/// `fallback`: the agent CLI is not installed (`droid_not_found`), could not authenticate
/// (`auth_failure`), was rate-limited, out of quota or overloaded (`rate_limited`), or its model
/// is unavailable or failed (`model_error`). A test failure, a timeout, a cancel, a spent budget
/// or a refused request is not: another agent would not do better.
pub fn warrants_fallback(kind: IssueType) -> bool {
    match kind {
        IssueType::DroidNotFound
        | IssueType::AuthFailure
        | IssueType::RateLimited
        | IssueType::ModelError => true,
        IssueType::TestFailure
        | IssueType::EnvIssue
        | IssueType::UnclearRequirement
        | IssueType::Conflict
        | IssueType::ValidationError
        | IssueType::Timeout
        | IssueType::Cancelled
        | IssueType::BridgeFailure
        | IssueType::PermissionDenied
        | IssueType::AgentError
        | IssueType::BudgetExceeded
        | IssueType::Internal => false,
    }
}

/// A measured diff: what `files_changed` adds up to.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema,
)]
pub struct Diffstat {
    /// Files changed.
    pub files: u64,
    /// Lines added (text files).
    pub lines_added: u64,
    /// Lines removed (text files).
    pub lines_removed: u64,
}

/// One verification command's outcome in an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct CheckOutcome {
    /// The command, as the request gave it.
    pub command: String,
    /// Its exit code; `null` when it was killed or never ran.
    pub exit_code: Option<i32>,
}

/// One agent's attempt at the task: listed in `attempts` when the request named `fallback` or
/// `best_of` (in the order the attempts started).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Attempt {
    /// The agent CLI.
    pub provider: ProviderId,
    /// The model asked for; `null` for the provider's default.
    pub model: Option<String>,
    /// The attempt's own status.
    pub status: Status,
    /// What ended it, when it did not succeed: the type of its deciding issue
    /// (`rate_limited`, `test_failure`, `budget_exceeded`, …); `null` on success. A `fallback`
    /// goes on to the next agent only for the reasons of [`warrants_fallback`].
    pub reason: Option<IssueType>,
    /// Its issues' types, in order.
    pub issues: Vec<IssueType>,
    /// Wall time, in milliseconds.
    pub duration_ms: u64,
    /// Tokens it used, as the agent reported them.
    pub usage: Option<Usage>,
    /// Its verification commands' outcomes.
    pub checks: Vec<CheckOutcome>,
    /// Its measured diff.
    pub diffstat: Diffstat,
    /// This attempt's result is the one returned (`fallback`: the last; `best_of`: the winner).
    pub chosen: bool,
    /// Its task id in the store, when it ran as one (a `best_of` candidate).
    pub task_id: Option<String>,
    /// Its worktree, when it ran in one and the worktree is kept (`best_of` with `keep_all`, or
    /// the winner).
    pub worktree: Option<WorktreeInfo>,
    /// One line on what happened (`HTTP 429 from the model: rate limited`), for the report.
    pub note: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_string_form_splits_at_the_first_colon() {
        assert_eq!(
            AgentChoice::parse("droid:custom:MyModel-0"),
            Ok(AgentChoice {
                provider: ProviderId::Droid,
                model: Some("custom:MyModel-0".into())
            })
        );
        assert_eq!(
            AgentChoice::parse("codex").map(|c| c.label()),
            Ok("codex".to_owned())
        );
        assert!(AgentChoice::parse("cursor").is_err());
        assert!(AgentChoice::parse("claude:").is_err());
    }
}
