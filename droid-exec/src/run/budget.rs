//! A run's token budget (`max_tokens`, docs/protocol.md#token-budget): what counts (input plus
//! output tokens as the agent reports them, [`Usage::budget_tokens`]; cache reads and writes
//! apart), where the running total comes from (the provider's [`AgentEvent::Usage`] events as
//! they come, its `completion`, and for droid its record of the session, read every
//! [`PROBE_EVERY`] while it runs), and the issue when it is spent. Supervision
//! ([`crate::run::supervise`]) stops the agent the moment the total goes over, the way a
//! timeout does; a provider that reports usage only at its end is held to the budget then.
//!
//! [`AgentEvent::Usage`]: crate::providers::AgentEvent::Usage

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use droid_contract::{Issue, IssueType, Usage};

use crate::providers::{Provider, RunFacts};

/// How often a provider's record of the usage outside its events is read while it runs (a
/// small file, only when a budget is set).
pub(crate) const PROBE_EVERY: Duration = Duration::from_millis(500);

/// The budget of one run.
#[derive(Debug, Clone)]
pub(crate) struct Budget {
    /// Input plus output tokens allowed.
    pub max_tokens: u64,
    /// The agent's working directory (what the provider's record of the session is keyed by).
    pub cwd: PathBuf,
    /// The environment the agent runs with (its `HOME`).
    pub env: Vec<(OsString, OsString)>,
}

impl Budget {
    /// `usage` spends more than the budget.
    pub(crate) fn over(&self, usage: Option<&Usage>) -> bool {
        usage.is_some_and(|u| u.budget_tokens() > self.max_tokens)
    }

    /// The usage so far from the provider's record outside its events, if it keeps one.
    pub(crate) fn probe(&self, provider: &dyn Provider, session_id: Option<&str>) -> Option<Usage> {
        provider.usage_so_far(&RunFacts {
            cwd: &self.cwd,
            model: None,
            reported_model: None,
            session_id: Some(session_id?),
            env: &self.env,
        })
    }
}

/// The `budget_exceeded` issue of a run by `agent` that reported `spent` against a budget of
/// `max_tokens`; `stopped`: we ended it (else it had finished when its count came).
pub(crate) fn exceeded(agent: &str, spent: &Usage, max_tokens: u64, stopped: bool) -> Issue {
    let count = format!(
        "{agent} used {} tokens (input {} + output {}; {} cache reads counted apart) of a \
         budget of {max_tokens}",
        spent.budget_tokens(),
        spent.input_tokens,
        spent.output_tokens,
        spent.cache_read_input_tokens,
    );
    if stopped {
        Issue::new(
            IssueType::BudgetExceeded,
            format!("{count}, and was stopped"),
            "resume the session (the result's session_id) with a larger max_tokens to let it \
             finish; what it changed so far is in files_changed",
        )
    } else {
        Issue::new(
            IssueType::BudgetExceeded,
            format!(
                "{count}; it reports usage only at its end, so it finished before the budget \
                 could stop it"
            ),
            "raise max_tokens for tasks like this one, or split the task",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_budget_counts_input_and_output_not_the_cache() {
        let b = Budget {
            max_tokens: 2000,
            cwd: PathBuf::from("/w"),
            env: Vec::new(),
        };
        let u = |input, output, cache| Usage {
            input_tokens: input,
            output_tokens: output,
            cache_read_input_tokens: cache,
            ..Usage::default()
        };
        assert!(!b.over(None));
        assert!(!b.over(Some(&u(1500, 500, 90_000))));
        assert!(b.over(Some(&u(1500, 501, 0))));
        let issue = exceeded("droid", &u(1800, 400, 50), 2000, true);
        assert_eq!(issue.kind, IssueType::BudgetExceeded);
        assert_eq!(
            issue.description,
            "droid used 2200 tokens (input 1800 + output 400; 50 cache reads counted apart) of a \
             budget of 2000, and was stopped"
        );
    }
}
