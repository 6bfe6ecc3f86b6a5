//! The agent runs one result stands for, for counters such as the bridge's `/metrics`: each
//! attempt of a `fallback` (or the one run of a plain request), with its provider, status, the
//! issue that decided it and its token usage. A `best_of` candidate that is a task of the store
//! of its own (its attempt names its `task_id`) is left out: it is counted when that task's own
//! result is.

use droid_contract::{ExecutionResult, IssueType, ProviderId, Status, Usage};

use crate::fanout::attempt::deciding_issue;

/// One agent run, as counted.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentRun {
    /// Which agent CLI ran.
    pub provider: ProviderId,
    /// How the run ended.
    pub status: Status,
    /// The issue that decided a run that did not succeed.
    pub reason: Option<IssueType>,
    /// The tokens it reported.
    pub usage: Option<Usage>,
}

/// The agent runs `result` stands for (none when no agent ran at all: a refused request).
pub fn agent_runs(result: &ExecutionResult) -> Vec<AgentRun> {
    if !result.attempts.is_empty() {
        return result
            .attempts
            .iter()
            .filter(|a| a.task_id.is_none())
            .map(|a| AgentRun {
                provider: a.provider,
                status: a.status,
                reason: a.reason,
                usage: a.usage.clone(),
            })
            .collect();
    }
    result
        .agent
        .iter()
        .map(|agent| AgentRun {
            provider: agent.provider,
            status: result.status,
            reason: deciding_issue(result).map(|i| i.kind),
            usage: agent.usage.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use droid_contract::{AgentInfo, Issue};
    use pretty_assertions::assert_eq;

    #[test]
    fn a_plain_run_is_one_agent_run_with_its_deciding_issue() {
        let usage = Usage {
            input_tokens: 2100,
            output_tokens: 40,
            ..Usage::default()
        };
        let mut r = ExecutionResult::error(None, "stopped", Vec::new());
        r.status = Status::Partial;
        r.issues = vec![
            Issue::new(IssueType::TestFailure, "1 of 1 failed", "fix"),
            Issue::new(IssueType::BudgetExceeded, "over", "resume"),
        ];
        r.agent = Some(AgentInfo {
            provider: ProviderId::Claude,
            usage: Some(usage.clone()),
            ..AgentInfo::default()
        });
        assert_eq!(
            agent_runs(&r),
            [AgentRun {
                provider: ProviderId::Claude,
                status: Status::Partial,
                reason: Some(IssueType::BudgetExceeded),
                usage: Some(usage),
            }]
        );
        r.agent = None;
        assert_eq!(agent_runs(&r), []);
    }
}
