//! Background tasks on the wire: the task record every front-end shows (`tasks show --json`, the
//! bridge's `GET /tasks/{id}`, MCP's `droid_pend`) and the states a task goes through.

use serde::{Deserialize, Serialize};

use crate::result::ExecutionResult;
use crate::status::Status;

/// Where a background task is. Once it has a result, its state *is* the result's status (never a
/// made-up one), so a caller reads one vocabulary.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TaskState {
    /// Submitted, waiting for a run slot or for its repository to be free.
    Queued,
    /// droid is working on it.
    Running,
    /// Finished: droid finished and every verification command passed.
    Success,
    /// Finished: something is missing; see the result's `issues`.
    Partial,
    /// Finished: droid failed.
    Failed,
    /// Finished: the run exceeded its time budget.
    Timeout,
    /// Finished: the task was cancelled.
    Cancelled,
    /// Finished: nothing ran, or the task's supervisor died (`bridge_failure`).
    Error,
}

impl TaskState {
    /// Every state, in lifecycle order.
    pub const ALL: [TaskState; 8] = [
        Self::Queued,
        Self::Running,
        Self::Success,
        Self::Partial,
        Self::Failed,
        Self::Timeout,
        Self::Cancelled,
        Self::Error,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::Success => "success",
            Self::Partial => "partial",
            Self::Failed => "failed",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::Error => "error",
        }
    }

    /// The state a finished task with this result status is in.
    pub fn from_status(status: Status) -> Self {
        match status {
            Status::Success => Self::Success,
            Status::Partial => Self::Partial,
            Status::Failed => Self::Failed,
            Status::Timeout => Self::Timeout,
            Status::Cancelled => Self::Cancelled,
            Status::Error => Self::Error,
        }
    }

    /// The task has its result and will not change again.
    pub fn is_finished(self) -> bool {
        match self {
            Self::Queued | Self::Running => false,
            Self::Success
            | Self::Partial
            | Self::Failed
            | Self::Timeout
            | Self::Cancelled
            | Self::Error => true,
        }
    }
}

impl std::str::FromStr for TaskState {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|st| st.as_str()).collect();
                format!(
                    "unknown task state {s:?}; expected one of {}",
                    names.join(", ")
                )
            })
    }
}

/// A background task as every front-end shows it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
#[schemars(title = "TaskRecord")]
pub struct TaskRecord {
    /// The task's id, `<provider>-<unix seconds>-<4 hex digits>` (`codex-1795349045-3fa2`): the
    /// provider that runs it, then when it was submitted.
    pub task_id: String,
    /// queued | running, then the result's status.
    pub state: TaskState,
    /// When it was submitted (RFC 3339, UTC).
    pub created_at: String,
    /// When anything about it last changed (RFC 3339, UTC).
    pub updated_at: String,
    /// The result once finished, `null` until then.
    pub result: Option<ExecutionResult>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_round_trip_and_follow_the_status() {
        for st in TaskState::ALL {
            let wire = serde_json::to_value(st).unwrap();
            assert_eq!(wire, serde_json::Value::String(st.as_str().into()));
            assert_eq!(st.as_str().parse::<TaskState>(), Ok(st));
        }
        for status in [
            Status::Success,
            Status::Partial,
            Status::Failed,
            Status::Timeout,
            Status::Cancelled,
            Status::Error,
        ] {
            let st = TaskState::from_status(status);
            assert_eq!(st.as_str(), status.as_str());
            assert!(st.is_finished());
        }
        assert!(!TaskState::Queued.is_finished());
        assert!(!TaskState::Running.is_finished());
        assert_eq!(
            "done".parse::<TaskState>().unwrap_err(),
            "unknown task state \"done\"; expected one of queued, running, success, partial, \
             failed, timeout, cancelled, error"
        );
    }
}
