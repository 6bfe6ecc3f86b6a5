//! What Claude Code's failure texts mean (Claude Code 2.1.330): its permission refusals, its
//! authentication and API errors (which arrive as a synthetic assistant message and an
//! `is_error` result), its other result errors and its stderr, each mapped to an issue.
//!
//! A write the run's Landlock sandbox refused is read by the engine for every provider; Claude
//! Code's Write, though, writes `<file>.tmp.<pid>.<hex>` beside the file and renames it, so its
//! refusal names the temporary (`EACCES: permission denied, open
//! '/h/.bashrc-planted.tmp.27598.a158e5e54f2d'`, recorded under Landlock): the findings name the
//! file it stood for.

use droid_contract::{Issue, IssueType};

use crate::excerpt::head_str;
use crate::providers::AgentEvent;
use crate::providers::findings::{Findings, rate_limit_text, rate_limited};

use super::events::{API_RETRY, PERMISSION_DENIED};

/// Permission issues listed one by one before the rest are summed up.
const MAX_DENIAL_ISSUES: usize = 5;

/// The synthetic message's `error` for a rejected key, and the texts Claude Code shows for one.
fn auth_text(source: &str, message: &str) -> bool {
    source == "authentication_failed"
        || message.contains("Invalid API key")
        || message.contains("Not logged in")
        || message.contains("OAuth token")
        || message.contains("Please run /login")
}

fn session_text(message: &str) -> bool {
    message.contains("No conversation found with session ID") || message.contains("--resume ")
}

/// The file a Claude Code temporary (`<file>.tmp.<pid>.<hex>`) stands for; `None` for any other
/// name.
fn untemp(path: &str) -> Option<&str> {
    let (rest, hex) = path.rsplit_once('.')?;
    let (file, pid) = rest.rsplit_once(".tmp.")?;
    let is = |s: &str, f: fn(&char) -> bool| !s.is_empty() && s.chars().all(|c| f(&c));
    (is(hex, char::is_ascii_hexdigit) && is(pid, char::is_ascii_digit) && !file.is_empty())
        .then_some(file)
}

/// The file a refused write of Claude Code's file tools names, when the refusal names its
/// temporary: `EACCES: permission denied, open '<file>.tmp.<pid>.<hex>'`.
fn denied_file(text: &str) -> Option<&str> {
    let line = text.lines().find(|l| l.contains("EACCES"))?;
    let quoted = line.split('\'').nth(1)?;
    untemp(quoted)
}

/// Classify what Claude Code said went wrong. `completed`: a successful `result` arrived.
pub(crate) fn findings(events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
    let mut f = Findings::default();
    let mut denials = 0usize;
    for ev in events {
        if let AgentEvent::ToolResult { tool, text, .. } = ev
            && let Some(file) = denied_file(text)
        {
            f.permission_denied = true;
            f.add(Issue::new(
                IssueType::PermissionDenied,
                format!(
                    "the sandbox (Landlock) denied claude's {tool} tool a write to {file} \
                     (outside the run's writable paths)"
                ),
                "if the task needs that path, add it to sandbox_writable \
                 (DROID_EXECUTOR_SANDBOX_WRITABLE); otherwise nothing was written there",
            ));
        }
        let AgentEvent::Error { source, message } = ev else {
            continue;
        };
        match source.as_str() {
            PERMISSION_DENIED => {
                f.permission_denied = true;
                denials += 1;
                if denials <= MAX_DENIAL_ISSUES {
                    f.add(Issue::new(
                        IssueType::PermissionDenied,
                        format!(
                            "claude's permission mode refused a tool call ({})",
                            head_str(message, 300)
                        ),
                        "if that action is wanted, run again with a higher autonomy (low: \
                         --permission-mode acceptEdits, file edits in repo_root; medium: adds \
                         --allowedTools=Bash; high: --permission-mode bypassPermissions), \
                         capped by the server's max_autonomy",
                    ));
                }
            }
            API_RETRY => {}
            _ if auth_text(source, message) => {
                f.headline_once(message);
                f.add(Issue::new(
                    IssueType::AuthFailure,
                    format!("claude could not authenticate: {}", head_str(message, 300)),
                    "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN) for the endpoint in \
                     ANTHROPIC_BASE_URL, or log in with `claude` (its credentials live in \
                     CLAUDE_CONFIG_DIR, default ~/.claude)",
                ));
            }
            // `error: rate_limit` and "API Error: Request rejected (429) · …" (429), `error:
            // server_error` and "API Error: 529 Overloaded. …" (529), after the retries
            // CLAUDE_CODE_MAX_RETRIES allows (fixtures rate-limit-429, overloaded-529)
            _ if source == "rate_limit"
                || ((message.starts_with("API Error") || source == "api_error")
                    && rate_limit_text(message)) =>
            {
                f.headline_once(message);
                f.add(rate_limited(
                    "claude",
                    message,
                    "the limits are the API key's (ANTHROPIC_API_KEY) or the plan's of the \
                     login in CLAUDE_CONFIG_DIR",
                ));
            }
            _ if message.starts_with("API Error") || source == "api_error" => {
                f.headline_once(message);
                f.add(Issue::new(
                    IssueType::ModelError,
                    format!("the model request failed: {}", head_str(message, 500)),
                    "check ANTHROPIC_BASE_URL, its key and the model (request field model, \
                     claude --model; ANTHROPIC_MODEL), then run the task again",
                ));
            }
            _ if session_text(message) => {
                f.headline_once(message);
                f.add(Issue::new(
                    IssueType::AgentError,
                    format!(
                        "claude could not resume the session: {}",
                        head_str(message, 300)
                    ),
                    "pass as session_id the session_id of an earlier claude run on this machine \
                     (claude keeps sessions under CLAUDE_CONFIG_DIR, default ~/.claude), or \
                     leave session_id out to start a new session",
                ));
            }
            "max_turns" | "error_max_turns" => {
                f.headline_once(message);
                f.add(Issue::new(
                    IssueType::AgentError,
                    format!("claude stopped: {}", head_str(message, 300)),
                    "split the task, or raise the turn limit in claude's settings",
                ));
            }
            _ => {
                f.headline_once(message);
                f.add(Issue::new(
                    IssueType::AgentError,
                    format!("claude reported ({source}): {}", head_str(message, 500)),
                    "read logs, fix the cause, and run the task again",
                ));
            }
        }
    }
    if denials > MAX_DENIAL_ISSUES {
        f.add(Issue::new(
            IssueType::PermissionDenied,
            format!(
                "claude's permission mode refused {} more tool calls",
                denials - MAX_DENIAL_ISSUES
            ),
            "raise the autonomy if those actions are wanted",
        ));
    }
    let stderr = stderr.trim();
    if stderr.is_empty() {
        return f;
    }
    let first = stderr.lines().next().unwrap_or(stderr);
    if stderr.contains("cannot be used with root/sudo privileges") {
        f.headline_once(first);
        f.add(Issue::new(
            IssueType::EnvIssue,
            format!("claude said on stderr: {}", head_str(first, 500)),
            "claude refuses bypassPermissions as root unless IS_SANDBOX=1 is set (droid-executor \
             sets it for autonomy high as root); run as a normal user or at a lower autonomy",
        ));
    } else if session_text(stderr) {
        // the result line said the same; an issue from it is there already
        if f.issues.is_empty() {
            f.headline_once(first);
            f.add(Issue::new(
                IssueType::AgentError,
                format!(
                    "claude could not resume the session: {}",
                    head_str(first, 300)
                ),
                "pass a session_id of an earlier claude run on this machine, or leave it out",
            ));
        }
    } else if auth_text("", stderr) {
        f.headline_once(first);
        f.add(Issue::new(
            IssueType::AuthFailure,
            format!("claude said on stderr: {}", head_str(first, 500)),
            "set ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN), or log in with `claude`",
        ));
    } else if f.issues.is_empty() {
        f.stderr_fallback("claude", stderr, completed);
    }
    f
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::providers::claude::events::tests::recorded;

    fn stderr_of(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/claude-code-2.1.330")
            .join(format!("{name}.stderr"));
        std::fs::read_to_string(path).unwrap()
    }

    fn kinds(name: &str, stderr: &str) -> (Vec<IssueType>, bool, Option<String>) {
        let f = findings(&recorded(name), stderr, false);
        (
            f.issues.iter().map(|i| i.kind).collect(),
            f.permission_denied,
            f.headline,
        )
    }

    #[test]
    fn recorded_failures_map_to_issue_types() {
        assert_eq!(
            kinds("model-error-400", ""),
            (
                vec![IssueType::ModelError],
                false,
                Some("API Error: 400 mock: invalid request (scripted 400)".into())
            )
        );
        assert_eq!(
            kinds("auth-401", ""),
            (
                vec![IssueType::AuthFailure],
                false,
                Some("Invalid API key · Fix external API key".into())
            )
        );
        assert_eq!(
            kinds("auth-not-logged-in", "").0,
            vec![IssueType::AuthFailure]
        );
        assert_eq!(
            kinds("default-permissions-denied", ""),
            (
                vec![IssueType::PermissionDenied, IssueType::PermissionDenied],
                true,
                None
            )
        );
        assert_eq!(kinds("max-turns-1", "").0, vec![IssueType::AgentError]);
        // recorded 2026-12-07 against the scripted model answering 429 and 529 (the README)
        assert_eq!(
            kinds("rate-limit-429", ""),
            (
                vec![IssueType::RateLimited],
                false,
                Some(
                    "API Error: Request rejected (429) · Number of request tokens has exceeded \
                     your per-minute rate limit"
                        .into()
                )
            )
        );
        assert_eq!(kinds("overloaded-529", "").0, vec![IssueType::RateLimited]);
        assert_eq!(kinds("basic-tool-turn", ""), (vec![], false, None));
        for case in ["resume-unknown-session", "resume-not-a-uuid"] {
            let (k, _, headline) = kinds(case, &stderr_of(case));
            assert_eq!(k, vec![IssueType::AgentError], "{case}");
            let f = findings(&recorded(case), &stderr_of(case), false);
            assert!(f.issues[0].description.contains("resume"), "{case}");
            assert!(headline.is_some());
        }
        let f = findings(&[], &stderr_of("bypass-as-root-refused"), false);
        assert_eq!(
            f.issues.iter().map(|i| i.kind).collect::<Vec<_>>(),
            [IssueType::EnvIssue]
        );
        assert!(f.issues[0].suggested_action.contains("IS_SANDBOX=1"));
    }

    /// A write the sandbox refused names Claude Code's temporary; the issue names the file.
    #[test]
    fn a_sandbox_denied_write_names_the_file_not_its_temporary() {
        let denied = AgentEvent::ToolResult {
            id: "toolu_1".into(),
            tool: "Write".into(),
            is_error: true,
            text: "EACCES: permission denied, open '/h/.bashrc-planted.tmp.27598.a158e5e54f2d'"
                .into(),
            exit_code: None,
            diffstat: None,
            timestamp_ms: None,
        };
        let f = findings(&[denied], "", true);
        assert!(f.permission_denied);
        assert_eq!(
            f.issues
                .iter()
                .map(|i| (i.kind, i.description.as_str()))
                .collect::<Vec<_>>(),
            vec![(
                IssueType::PermissionDenied,
                "the sandbox (Landlock) denied claude's Write tool a write to /h/.bashrc-planted \
                 (outside the run's writable paths)"
            )]
        );
        // a path that is no temporary of Claude Code's is the engine's to name
        assert_eq!(
            denied_file("EACCES: permission denied, open '/h/x.tmp'"),
            None
        );
        assert_eq!(untemp("/h/a.tmp.12.zz"), None);
    }
}
