//! What a provider reads from its agent's events and stderr ([`Findings`]): the providers' side
//! of classification. The run folds them into the result (`crate::run::classify`); the type sits
//! here, with the providers, so no provider imports the run.

use droid_contract::{Issue, IssueType};

use crate::excerpt::head_str;

/// Issues a provider read from its agent's events and stderr.
#[derive(Debug, Default)]
pub struct Findings {
    /// The issues, each once.
    pub issues: Vec<Issue>,
    /// The agent was refused an action by its permission model.
    pub permission_denied: bool,
    /// The most telling error message, for the summary.
    pub headline: Option<String>,
    /// The issue [`Findings::stderr_fallback`] added: the engine drops it when the run was
    /// stopped by us (a timeout or a cancel), whose stderr is what the agent printed while it
    /// waited, not why it failed (its lines stay in `logs`).
    pub from_stderr: bool,
}

impl Findings {
    /// Add `issue` unless an equal one is there.
    pub fn add(&mut self, issue: Issue) {
        if !self
            .issues
            .iter()
            .any(|i| i.kind == issue.kind && i.description == issue.description)
        {
            self.issues.push(issue);
        }
    }

    /// Keep `message` as the headline unless one is set.
    pub fn headline_once(&mut self, message: &str) {
        if self.headline.is_none() {
            self.headline = Some(message.to_owned());
        }
    }

    /// What every provider does with stderr it has no specific reading for: when the run did not
    /// complete, its first line is an `agent_error` (and the headline, if there is none yet).
    pub fn stderr_fallback(&mut self, agent: &str, stderr: &str, completed: bool) {
        let stderr = stderr.trim();
        if stderr.is_empty() || completed {
            return;
        }
        let first = stderr.lines().next().unwrap_or(stderr);
        self.headline_once(first);
        self.from_stderr = true;
        self.add(Issue::new(
            IssueType::AgentError,
            format!("{agent} said on stderr: {}", head_str(first, 500)),
            format!(
                "read logs for {agent}'s stderr; check its version (droid-executor doctor) and the \
                 request's model/session/reasoning_effort values"
            ),
        ));
    }
}
