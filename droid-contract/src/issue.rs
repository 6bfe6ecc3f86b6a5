//! Issues: what went wrong or needs a human, each with a type a caller can branch on.

use serde::{Deserialize, Serialize};

/// The kind of an issue, named precisely enough for a calling agent to choose its next move (fix
/// the request, fix the machine, fall back, retry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum IssueType {
    /// A verification command (or a test droid ran) failed.
    TestFailure,
    /// The environment is missing something (a tool, a dependency, configuration).
    EnvIssue,
    /// The request is ambiguous or contradictory.
    UnclearRequirement,
    /// The work collides with something: droid touched paths outside repo_root, or the plan conflicts.
    Conflict,
    /// The request broke a contract rule; nothing ran.
    ValidationError,
    /// The run exceeded its time budget.
    Timeout,
    /// The run was cancelled.
    Cancelled,
    /// The executor itself failed (bridge, supervisor or store); use the fallback path.
    BridgeFailure,
    /// The droid binary could not be found or started.
    DroidNotFound,
    /// droid could not authenticate with Factory.
    AuthFailure,
    /// The model endpoint failed, refused, or its answer looks truncated.
    ModelError,
    /// droid's autonomy level refused a tool call.
    PermissionDenied,
    /// droid failed for another reason (bad flags, crash, no result).
    AgentError,
    /// The model's provider refused for a rate limit, a spent quota or overload (HTTP 429,
    /// 529, "quota exceeded"): another agent, or the same one later, may get through.
    RateLimited,
    /// The run used more tokens than the request's `max_tokens`; it was stopped, and its session
    /// can be resumed with a larger budget.
    BudgetExceeded,
    /// A bug in the executor.
    Internal,
}

impl IssueType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::TestFailure => "test_failure",
            Self::EnvIssue => "env_issue",
            Self::UnclearRequirement => "unclear_requirement",
            Self::Conflict => "conflict",
            Self::ValidationError => "validation_error",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::BridgeFailure => "bridge_failure",
            Self::DroidNotFound => "droid_not_found",
            Self::AuthFailure => "auth_failure",
            Self::ModelError => "model_error",
            Self::PermissionDenied => "permission_denied",
            Self::AgentError => "agent_error",
            Self::RateLimited => "rate_limited",
            Self::BudgetExceeded => "budget_exceeded",
            Self::Internal => "internal",
        }
    }
}

/// One problem, in words a calling agent can act on.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Issue {
    /// The kind.
    #[serde(rename = "type")]
    pub kind: IssueType,
    /// What happened.
    pub description: String,
    /// What to do about it.
    pub suggested_action: String,
}

impl Issue {
    /// An issue of `kind`.
    pub fn new(
        kind: IssueType,
        description: impl Into<String>,
        suggested_action: impl Into<String>,
    ) -> Self {
        Self {
            kind,
            description: description.into(),
            suggested_action: suggested_action.into(),
        }
    }
}
