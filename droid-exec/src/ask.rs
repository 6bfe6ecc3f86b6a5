//! Seed 002's ask (docs/architecture.md#origin): a message in the user's own words, for one
//! provider, turned into an ExecutionRequest. Every front-end that offers ask (`droid-executor
//! ask`, the MCP tools `ask_<provider>`) builds its request here, so they agree on the defaults:
//! a consultation (`read_only`) unless told otherwise, 120 s, the whole message as the
//! instructions and its first line as the objective.

use std::path::Path;

use droid_contract::{Autonomy, Isolation, ProviderId};
use serde_json::{Value, json};

/// The seed's default time budget of an ask, in seconds.
pub const ASK_TIMEOUT_DEFAULT: u32 = 120;

/// Longest objective taken from the message's first line, in characters (the whole message is
/// the instructions).
const OBJECTIVE_FROM_MESSAGE: usize = 500;

/// One ask.
#[derive(Debug, Clone)]
pub struct Ask<'a> {
    /// Who answers.
    pub provider: ProviderId,
    /// The whole request, in the user's words.
    pub message: &'a str,
    /// Where (the caller's working directory when the front-end has nothing better).
    pub repo_root: &'a Path,
    /// How much the agent may do: `None` is a consultation (`read_only`).
    pub autonomy: Option<Autonomy>,
    /// Time budget in seconds: `None` is [`ASK_TIMEOUT_DEFAULT`].
    pub timeout_s: Option<u32>,
    /// The provider's session to continue.
    pub session: Option<&'a str>,
    /// Where the agent works (`worktree`: a git worktree of its own, applied later); `None`:
    /// the server's setting.
    pub isolation: Option<Isolation>,
    /// The request field `fallback` as given (agents tried in turn when this one cannot do
    /// it), checked with the request.
    pub fallback: Option<&'a Value>,
    /// The request field `max_tokens` (a token budget per attempt).
    pub max_tokens: Option<u64>,
}

/// The request JSON for `ask` (to be admitted like any other: a message that is empty or too
/// long is refused by the contract's rules, naming the field).
pub fn ask_request(ask: &Ask<'_>) -> Value {
    let first = ask
        .message
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .unwrap_or("");
    let objective: String = if first.chars().count() > OBJECTIVE_FROM_MESSAGE {
        let cut: String = first.chars().take(OBJECTIVE_FROM_MESSAGE - 1).collect();
        format!("{cut}…")
    } else {
        first.to_owned()
    };
    let mut req = json!({
        "objective": objective,
        "instructions": ask.message,
        "context": {"repo_root": ask.repo_root},
        "autonomy": ask.autonomy.unwrap_or(Autonomy::ReadOnly),
        "max_runtime_seconds": ask.timeout_s.unwrap_or(ASK_TIMEOUT_DEFAULT),
        "provider": ask.provider,
    });
    if let Some(s) = ask.session {
        req["session_id"] = json!(s);
    }
    if let Some(i) = ask.isolation {
        req["isolation"] = json!(i);
    }
    if let Some(f) = ask.fallback {
        req["fallback"] = f.clone();
    }
    if let Some(n) = ask.max_tokens {
        req["max_tokens"] = json!(n);
    }
    req
}

#[cfg(test)]
mod tests {
    use droid_contract::ExecutionRequest;

    use super::*;

    #[test]
    fn an_ask_is_a_consultation_of_two_minutes_by_default() {
        let v = ask_request(&Ask {
            provider: ProviderId::Codex,
            message: "\n  Why does test_x fail?\nIt fails since yesterday.",
            repo_root: Path::new("/repo"),
            autonomy: None,
            timeout_s: None,
            session: None,
            isolation: None,
            fallback: None,
            max_tokens: None,
        });
        let req = ExecutionRequest::from_value(&v, None).unwrap();
        assert_eq!(req.objective.as_str(), "Why does test_x fail?");
        assert_eq!(
            req.instructions.as_str(),
            "\n  Why does test_x fail?\nIt fails since yesterday."
        );
        assert_eq!(req.autonomy, Some(Autonomy::ReadOnly));
        assert_eq!(req.max_runtime_seconds.map(|r| r.seconds()), Some(120));
        assert_eq!(req.provider, ProviderId::Codex);
        assert_eq!(req.session_id, None);
    }

    #[test]
    fn a_long_first_line_is_cut_and_an_empty_message_is_refused() {
        let long = "x".repeat(2_000);
        let v = ask_request(&Ask {
            provider: ProviderId::Gemini,
            message: &long,
            repo_root: Path::new("/repo"),
            autonomy: Some(Autonomy::Low),
            timeout_s: Some(30),
            session: Some("abc"),
            isolation: Some(Isolation::Worktree),
            fallback: None,
            max_tokens: None,
        });
        let req = ExecutionRequest::from_value(&v, None).unwrap();
        assert_eq!(req.objective.as_str().chars().count(), 500);
        assert_eq!(req.session_id.as_deref(), Some("abc"));
        assert_eq!(req.isolation, Some(Isolation::Worktree));
        let empty = ask_request(&Ask {
            provider: ProviderId::Gemini,
            message: " \n ",
            repo_root: Path::new("/repo"),
            autonomy: None,
            timeout_s: None,
            session: None,
            isolation: None,
            fallback: None,
            max_tokens: None,
        });
        let err = ExecutionRequest::from_value(&empty, None).unwrap_err();
        assert!(err.0.iter().any(|v| v.path == "$.objective"), "{err:?}");
    }
}
