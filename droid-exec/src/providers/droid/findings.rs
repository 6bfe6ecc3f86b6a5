//! What droid's failure texts mean: its permission refusals, authentication and model errors and
//! its stderr messages (droid 0.225.2, docs/architecture.md#droid-facts), each mapped to an issue.

use droid_contract::{Issue, IssueType};

use crate::excerpt::head_str;
use crate::providers::findings::{Findings, rate_limit_text, rate_limited};
use crate::providers::{AgentEvent, Provider as _};

/// droid's abort text when a tool call needs more autonomy than the run has.
const PERMISSION_ABORT: &str = "insufficient permission to proceed";
/// droid's text for a tool that is not offered at this autonomy (the run continues).
const NOT_PERMITTED: &str = "is not permitted in this exec session";

fn model_error_text(m: &str) -> bool {
    let starts_with_status =
        m.len() > 4 && m.as_bytes()[..3].iter().all(u8::is_ascii_digit) && m.as_bytes()[3] == b' ';
    starts_with_status
        || m.contains("Connection error")
        || m.contains("network issues")
        || m.contains("Invalid model")
        || m.contains("routes through Factory's LLM proxy")
}

/// What to do when the droid found is the `@factory/cli` launcher without the package that holds
/// the binary.
static LAUNCHER_WITHOUT_BINARY: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    format!(
        "install the binary itself, pinned: {} (reinstalling @factory/cli does not bring it); \
         droid-executor finds it under npm's global prefix (droid-executor doctor checks it)",
        super::install::install_line(super::Droid.package().1)
    )
});

/// Classify what droid said went wrong. `completed`: a completion event arrived.
pub(crate) fn findings(events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
    let mut f = Findings::default();
    for ev in events {
        match ev {
            AgentEvent::ToolResult {
                is_error: true,
                text,
                tool,
                ..
            } => {
                if text.contains(PERMISSION_ABORT) {
                    f.permission_denied = true;
                    f.add(Issue::new(
                        IssueType::PermissionDenied,
                        format!("droid stopped: its autonomy level refused a {tool} call ({})", head_str(text.trim_start_matches("Error: "), 300)),
                        "run again with a higher autonomy (autonomy: medium or high, capped by the server's max_autonomy) if that action is wanted",
                    ));
                } else if text.contains(NOT_PERMITTED) {
                    f.permission_denied = true;
                    f.add(Issue::new(
                        IssueType::PermissionDenied,
                        format!("droid tried a tool its autonomy level does not offer: {}", head_str(text.trim_start_matches("Error: "), 300)),
                        "raise the autonomy (execution_mode code runs at low) if droid needs that tool",
                    ));
                }
            }
            AgentEvent::Error { source, message } => {
                if message.contains("Authentication failed") {
                    f.headline = Some(message.clone());
                    f.add(Issue::new(
                        IssueType::AuthFailure,
                        format!("droid could not authenticate: {}", head_str(message, 300)),
                        "set FACTORY_API_KEY (or log in with droid), or configure a custom model and pass it as model",
                    ));
                } else if message.contains(PERMISSION_ABORT) {
                    f.permission_denied = true;
                } else if source == "agent_loop" && rate_limit_text(message) {
                    // `429 Rate limit exceeded` after droid's own 5 attempts over ~90 s
                    // (tests/fixtures/droid/http429-stream-json.ndjson)
                    f.headline = Some(message.clone());
                    f.add(rate_limited(
                        "droid",
                        message,
                        "a custom model's limits are its endpoint's (baseUrl in \
                         ~/.factory/settings.json), Factory's models' are your plan's",
                    ));
                } else if source == "agent_loop" && model_error_text(message) {
                    f.headline = Some(message.clone());
                    f.add(Issue::new(
                        IssueType::ModelError,
                        format!("the model request failed: {}", head_str(message, 500)),
                        "check the model endpoint, its key and its limits, then run the task again",
                    ));
                } else if source == "agent_loop" {
                    f.headline = Some(message.clone());
                    f.add(Issue::new(
                        IssueType::AgentError,
                        format!("droid reported: {}", head_str(message, 500)),
                        "read logs, fix the cause, and run the task again",
                    ));
                } else {
                    f.headline_once(message);
                }
            }
            _ => {}
        }
    }
    let stderr = stderr.trim();
    if stderr.is_empty() {
        return f;
    }
    let first = stderr.lines().next().unwrap_or(stderr);
    let known = if stderr.contains("Could not find the droid binary") {
        // the @factory/cli launcher without its platform package (measured with 0.225.1)
        Some((IssueType::DroidNotFound, LAUNCHER_WITHOUT_BINARY.as_str()))
    } else if stderr.contains("Authentication failed") {
        Some((
            IssueType::AuthFailure,
            "set FACTORY_API_KEY, or pass a custom model",
        ))
    } else if stderr.contains("Invalid model") {
        Some((
            IssueType::ModelError,
            "pass a model droid knows (droid exec --help lists them; custom models are custom:<displayName>-<n>)",
        ))
    } else if stderr.contains("Error changing to directory") {
        Some((
            IssueType::EnvIssue,
            "check that repo_root exists and is readable",
        ))
    } else {
        None
    };
    match known {
        Some((kind, action)) => {
            f.headline_once(first);
            f.add(Issue::new(
                kind,
                format!("droid said on stderr: {}", head_str(first, 500)),
                action,
            ));
        }
        None => f.stderr_fallback("droid", stderr, completed),
    }
    f
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::providers::droid::Droid;

    fn recorded(name: &str) -> Vec<AgentEvent> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/droid")
            .join(format!("{name}.ndjson"));
        std::fs::read_to_string(path)
            .unwrap()
            .lines()
            .map(|l| Droid.parse_line(l.as_bytes()))
            .collect()
    }

    #[test]
    fn recorded_failures_map_to_issue_types() {
        let kinds = |name: &str| -> (Vec<IssueType>, bool) {
            let f = findings(&recorded(name), "", false);
            (
                f.issues.iter().map(|i| i.kind).collect(),
                f.permission_denied,
            )
        };
        assert_eq!(
            kinds("http400-stream-json"),
            (vec![IssueType::ModelError], false)
        );
        // recorded from droid 0.225.2 against a model answering 429 every time (its README)
        assert_eq!(
            kinds("http429-stream-json"),
            (vec![IssueType::RateLimited], false)
        );
        assert_eq!(
            kinds("auth-builtin-model-noairgap-stream-json"),
            (vec![IssueType::AuthFailure], false)
        );
        assert_eq!(
            kinds("autonomy-low-git-push-high-stream-json"),
            (vec![IssueType::PermissionDenied], true)
        );
        let f = findings(
            &[],
            "Invalid model: custom:Nope-0\n\nAvailable built-in models:\n  None",
            false,
        );
        assert_eq!(f.issues[0].kind, IssueType::ModelError);
        assert_eq!(f.headline.as_deref(), Some("Invalid model: custom:Nope-0"));
    }
}
