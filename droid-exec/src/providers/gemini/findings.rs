//! What Gemini CLI's own texts say went wrong, as issues (recordings in
//! `tests/fixtures/gemini-cli-0.61.0/`):
//!
//! - a `result` error `[API Error: …]` (case `model-error-400`) → `model_error`, or
//!   `auth_failure` when the API says the key is bad;
//! - `FatalAuthenticationError`, stderr `Invalid auth method selected.` (case
//!   `no-auth-type-configured`: no auth type in settings.json), a missing key → `auth_failure`
//!   saying how to configure it;
//! - `FatalTurnLimitedError` (case `max-session-turns-1`) and other `result` errors → `agent_error`;
//! - a tool result `Tool "write_file" not found` for a tool the approval mode withholds (case
//!   `default-approval-write-denied`) → `permission_denied`;
//! - stderr `Error resuming session` (an unknown session_id) → `agent_error` naming session_id;
//!   `not running in a trusted directory` → `env_issue`;
//! - anything else on stderr when the run did not complete: its first line that is not one of
//!   Gemini's routine warnings, as `agent_error`.

use droid_contract::{Issue, IssueType};

use crate::excerpt::head_str;
use crate::providers::AgentEvent;
use crate::providers::findings::{Findings, rate_limit_text, rate_limited};

/// Tools Gemini's headless mode withholds below `yolo` (`write_file`, `replace` in `default`;
/// `run_shell_command` in `default` and `auto_edit`, unless allowed).
const GATED_TOOLS: &[&str] = &["write_file", "replace", "run_shell_command"];

/// What to do when Gemini cannot authenticate.
const AUTH_ACTION: &str = "configure Gemini CLI's auth: set security.auth.selectedType in \
    $HOME/.gemini/settings.json (or $GEMINI_CLI_HOME/.gemini/settings.json), e.g. \
    {\"security\":{\"auth\":{\"selectedType\":\"gemini-api-key\"}}}, and pass its key \
    (GEMINI_API_KEY or GOOGLE_API_KEY; GOOGLE_GEMINI_BASE_URL for another endpoint) in the \
    server's environment";

/// Lines Gemini prints on stderr in every run, which say nothing about a failure.
fn routine(line: &str) -> bool {
    let l = line.trim();
    l.is_empty()
        || l.starts_with("Warning: ")
        || l.starts_with("YOLO mode is enabled")
        || l.starts_with("Ripgrep is not available")
        || l.starts_with("Loaded cached credentials")
}

fn auth_text(m: &str) -> bool {
    m.contains("Invalid auth method selected")
        || m.contains("FatalAuthenticationError")
        || m.contains("API key not valid")
        || m.contains("API_KEY_INVALID")
        || m.contains("GEMINI_API_KEY environment variable not found")
        || m.contains("When using Gemini API, you must specify the GEMINI_API_KEY")
}

/// Classify what Gemini said went wrong. `completed`: a completion event arrived.
pub(crate) fn findings(events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
    let mut f = Findings::default();
    for ev in events {
        match ev {
            AgentEvent::ToolResult {
                is_error: true,
                text,
                tool,
                ..
            } if GATED_TOOLS.contains(&tool.as_str())
                && text.starts_with(&format!("Tool \"{tool}\" not found")) =>
            {
                f.permission_denied = true;
                f.add(Issue::new(
                    IssueType::PermissionDenied,
                    format!("gemini's approval mode does not offer {tool} at this autonomy level"),
                    "raise the autonomy if that is wanted (low: file edits; medium: edits and \
                     shell commands; high: every tool), within the server's max_autonomy",
                ));
            }
            // HTTP 429 `RESOURCE_EXHAUSTED`, after Gemini's own 10 attempts (≈ 230 s;
            // settings.json `general.maxAttempts` lowers them; fixture rate-limit-429)
            AgentEvent::Error { source, message }
                if source == "result"
                    && message.contains("[API Error")
                    && rate_limit_text(message) =>
            {
                f.headline = Some(message.clone());
                f.add(rate_limited(
                    "gemini",
                    message,
                    "the limits are the key's (GEMINI_API_KEY) or the project's quota; Gemini \
                     CLI retries a 429 up to 10 times over about 4 minutes first (settings.json \
                     general.maxAttempts lowers that)",
                ));
            }
            AgentEvent::Error { source, message } if source == "result" => {
                f.headline = Some(message.clone());
                let (kind, description, action) = if auth_text(message) {
                    (
                        IssueType::AuthFailure,
                        format!("gemini could not authenticate: {}", head_str(message, 500)),
                        AUTH_ACTION,
                    )
                } else if message.contains("[API Error") {
                    (
                        IssueType::ModelError,
                        format!("the model request failed: {}", head_str(message, 500)),
                        "check the model name (model), the endpoint (GOOGLE_GEMINI_BASE_URL), \
                         its key and its limits, then run the task again",
                    )
                } else if message.starts_with("FatalTurnLimitedError") {
                    (
                        IssueType::AgentError,
                        format!("gemini stopped: {}", head_str(message, 500)),
                        "raise model.maxSessionTurns in Gemini's settings.json, or split the task",
                    )
                } else {
                    (
                        IssueType::AgentError,
                        format!("gemini reported: {}", head_str(message, 500)),
                        "read logs, fix the cause, and run the task again",
                    )
                };
                f.add(Issue::new(kind, description, action));
            }
            AgentEvent::Error { message, .. } => f.headline_once(message),
            _ => {}
        }
    }
    let meaningful: Vec<&str> = stderr.lines().filter(|l| !routine(l)).collect();
    let Some(first) = meaningful.first().map(|l| l.trim()) else {
        return f;
    };
    let all = meaningful.join("\n");
    let has = |kind: IssueType| f.issues.iter().any(|i| i.kind == kind);
    if auth_text(&all) {
        if !has(IssueType::AuthFailure) {
            f.headline_once(first);
            f.add(Issue::new(
                IssueType::AuthFailure,
                format!("gemini could not authenticate: {}", head_str(first, 500)),
                AUTH_ACTION,
            ));
        }
    } else if all.contains("Error resuming session") {
        f.headline_once(first);
        f.add(Issue::new(
            IssueType::AgentError,
            format!(
                "gemini could not resume session_id: {}",
                head_str(first, 500)
            ),
            "pass a session_id that an earlier gemini run printed for the same repo_root (and \
             the same HOME or GEMINI_CLI_HOME), or leave session_id unset to start a new session",
        ));
    } else if all.contains("not running in a trusted directory") {
        f.headline_once(first);
        f.add(Issue::new(
            IssueType::EnvIssue,
            format!("gemini refused the folder: {}", head_str(first, 500)),
            "set GEMINI_CLI_TRUST_WORKSPACE=true for the server, or trust repo_root in gemini",
        ));
    } else if all.contains("Error when talking to Gemini API")
        && !has(IssueType::ModelError)
        && !has(IssueType::RateLimited)
    {
        if !completed && rate_limit_text(&all) {
            f.headline_once(first);
            f.add(rate_limited(
                "gemini",
                first,
                "the limits are the key's (GEMINI_API_KEY) or the project's quota",
            ));
        } else if !completed {
            f.headline_once(first);
            f.add(Issue::new(
                IssueType::ModelError,
                format!("the model request failed: {}", head_str(first, 500)),
                "check the model name (model), the endpoint (GOOGLE_GEMINI_BASE_URL), its key \
                 and its limits, then run the task again",
            ));
        }
    } else if f.issues.is_empty() {
        f.stderr_fallback("gemini", &all, completed);
    }
    f
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::providers::gemini::events::tests::recorded;

    fn stderr_of(case: &str) -> String {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/gemini-cli-0.61.0")
            .join(format!("{case}.stderr"));
        std::fs::read_to_string(path).unwrap()
    }

    fn kinds(f: &Findings) -> Vec<IssueType> {
        f.issues.iter().map(|i| i.kind).collect()
    }

    #[test]
    fn recorded_failures_map_to_issue_types() {
        let f = findings(
            &recorded("model-error-400"),
            &stderr_of("model-error-400"),
            false,
        );
        assert_eq!(kinds(&f), vec![IssueType::ModelError]);
        assert!(f.headline.as_deref().unwrap_or("").contains("scripted 400"));

        let f = findings(&[], &stderr_of("no-auth-type-configured"), false);
        assert_eq!(kinds(&f), vec![IssueType::AuthFailure]);
        assert!(f.issues[0].suggested_action.contains("selectedType"));
        assert_eq!(f.headline.as_deref(), Some("Invalid auth method selected."));

        // recorded 2026-12-07: HTTP 429 `RESOURCE_EXHAUSTED` every time (the README): "[API
        // Error: Resource has been exhausted (e.g. check quota).]\nPlease wait and try again
        // later. …" in the result, "Attempt N failed with status 429. Retrying with
        // backoff..." and "Error when talking to Gemini API … RetryableQuotaError" on stderr
        let stderr = stderr_of("rate-limit-429");
        let f = findings(&recorded("rate-limit-429"), &stderr, false);
        assert_eq!(kinds(&f), vec![IssueType::RateLimited]);
        assert!(
            f.headline
                .as_deref()
                .unwrap_or("")
                .contains("[API Error: Resource has been exhausted (e.g. check quota).]")
        );
        // stopped while it retries: stderr alone says so
        let f = findings(&[], &stderr, false);
        assert_eq!(kinds(&f), vec![IssueType::RateLimited]);

        let f = findings(&recorded("max-session-turns-1"), "", false);
        assert_eq!(kinds(&f), vec![IssueType::AgentError]);
        assert!(f.issues[0].suggested_action.contains("maxSessionTurns"));

        let f = findings(&[], &stderr_of("resume-unknown-session"), false);
        assert_eq!(kinds(&f), vec![IssueType::AgentError]);
        assert!(f.issues[0].description.contains("session_id"));

        let f = findings(&[], &stderr_of("untrusted-folder"), false);
        assert_eq!(kinds(&f), vec![IssueType::EnvIssue]);
    }

    #[test]
    fn withheld_tools_are_permission_denied_once() {
        let f = findings(&recorded("default-approval-write-denied"), "", true);
        assert!(f.permission_denied);
        assert_eq!(
            kinds(&f),
            vec![IssueType::PermissionDenied, IssueType::PermissionDenied]
        );
        assert!(f.issues[0].description.contains("write_file"));
        assert!(f.issues[1].description.contains("run_shell_command"));
        let f = findings(&recorded("basic-tool-turn"), "", true);
        assert!(!f.permission_denied);
        assert_eq!(kinds(&f), vec![]);
    }

    #[test]
    fn routine_warnings_are_not_failures() {
        let stderr = "Warning: 256-color support not detected.\nYOLO mode is enabled. All tool calls will be automatically approved.\nRipgrep is not available. Falling back to GrepTool.\n";
        let f = findings(&[], stderr, false);
        assert_eq!(kinds(&f), vec![]);
        let f = findings(&[], &format!("{stderr}something broke\n"), false);
        assert_eq!(kinds(&f), vec![IssueType::AgentError]);
        assert_eq!(f.headline.as_deref(), Some("something broke"));
    }
}
