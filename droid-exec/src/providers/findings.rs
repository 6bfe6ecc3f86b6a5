//! What a provider reads from its agent's events and stderr ([`Findings`]): the providers' side
//! of classification. The run folds them into the result (`crate::run::classify`); the type sits
//! here, with the providers, so no provider imports the run.

use droid_contract::{Issue, IssueType};

use crate::excerpt::head_str;

/// What an agent CLI's error text says about a rate limit, a spent quota or an overloaded
/// model provider, lowercased: the words the CLIs and the model APIs use (measured shapes in
/// each provider's tests and docs/providers.md#rate-limits).
const RATE_LIMIT_WORDS: [&str; 10] = [
    "rate limit",
    "rate_limit",
    "too many requests",
    "resource_exhausted",
    "resource has been exhausted",
    "quota exceeded",
    "exceeded your current quota",
    "insufficient_quota",
    "usage limit",
    "overloaded",
];

/// The HTTP statuses of a rate limit (429) and of Anthropic's overload (529), as the CLIs
/// print them: at the start (`429 Rate limit exceeded`, droid), in parentheses (`(429)`,
/// Claude Code; `(HTTP 429)`, OpenCode) or after `status` (`last status: 429`, Codex).
const RATE_LIMIT_STATUSES: [&str; 2] = ["429", "529"];

/// Whether an agent's error `message` says the model's provider refused for a rate limit, a
/// spent quota or overload: another agent (`fallback`), or the same one later, may get
/// through. Only for the texts of model errors (a tool's output is not asked).
pub fn rate_limit_text(message: &str) -> bool {
    let lower = message.to_ascii_lowercase();
    RATE_LIMIT_WORDS.iter().any(|w| lower.contains(w))
        || RATE_LIMIT_STATUSES.iter().any(|code| {
            lower.starts_with(&format!("{code} "))
                || lower.contains(&format!("({code})"))
                || lower.contains(&format!("(http {code})"))
                || lower.contains(&format!("status: {code}"))
                || lower.contains(&format!("status {code}"))
                || lower.contains(&format!("error: {code} "))
        })
}

/// The `rate_limited` issue for `message`, an error `agent` reported; `limits` says where the
/// provider's limits are set (a plan, a key, a settings file).
pub fn rate_limited(agent: &str, message: &str, limits: &str) -> Issue {
    Issue::new(
        IssueType::RateLimited,
        format!(
            "{agent}'s model provider refused for a rate limit, a spent quota or overload: {}",
            head_str(message, 500)
        ),
        format!(
            "run it again later, or with another agent (request field fallback, e.g. \
             [\"codex\", \"claude\"]); {limits}"
        ),
    )
}

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_measured_rate_limit_texts_are_recognized() {
        // each CLI's text for HTTP 429 (or 529) from its model, measured 2026-12-07 against the
        // scripted model (docs/providers.md#rate-limits; the fixtures' READMEs)
        for said in [
            "429 Rate limit exceeded",                                  // droid 0.225.2
            "exceeded retry limit, last status: 429 Too Many Requests", // Codex 0.169.0
            "Quota exceeded. Check your plan and billing details.",     // Codex, insufficient_quota
            "You\u{2019}ve hit your usage limit. Try again later.", // Codex, usage_limit_reached
            "API Error: Request rejected (429) · Number of request tokens has exceeded your \
             per-minute rate limit", // Claude Code 2.1.330
            "API Error: 529 Overloaded. This is a server-side issue, usually temporary — try \
             again in a moment.", // Claude Code, 529
            "unknown: [API Error: Resource has been exhausted (e.g. check quota).]\nPlease wait \
             and try again later.", // Gemini CLI 0.61.0
            "Rate limit reached for requests (HTTP 429)",           // OpenCode 1.18.33
            "mock error 429 (HTTP 429)",                            // OpenCode, a bare body
        ] {
            assert!(rate_limit_text(said), "{said}");
        }
        for said in [
            "400 Bad request: invalid parameter",
            "401 Invalid API key",
            "500 mock error 500",
            "unexpected status 503 Service Unavailable: mock error 503, url: \
             http://127.0.0.1:4290/v1/responses",
            "Connection error.",
            "API Error: 400 mock: invalid request (scripted 400)",
            "Invalid model: custom:Nope-0",
        ] {
            assert!(!rate_limit_text(said), "{said}");
        }
    }
}
