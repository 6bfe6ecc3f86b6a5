//! What OpenCode's failure texts mean (OpenCode 1.18.33): its permission refusals in tool
//! results and on stderr, its `error` events (`APIError` with the endpoint's HTTP status,
//! provider authentication and unknown-model errors), each mapped to an issue.

use droid_contract::{Issue, IssueType};

use super::events::{DENIED_BY_RULE, GOVERNED_TOOLS, REJECTED, UNAVAILABLE_TOOL};
use crate::excerpt::head_str;
use crate::providers::AgentEvent;
use crate::providers::findings::{Findings, rate_limit_text, rate_limited};

/// OpenCode's stderr line when `run` auto-rejects a permission `ask`.
const STDERR_REJECTING: &str = "auto-rejecting";
/// OpenCode's stderr when `--session` names no session it has (it exits 1 at once).
const SESSION_NOT_FOUND: &str = "Session not found";

const PERMISSION_ACTION: &str = "run again with a higher autonomy (low allows edits, medium also \
     shell commands, high everything, capped by the server's max_autonomy); droid-executor sets \
     OPENCODE_PERMISSION from the autonomy";

/// The HTTP status at the end of an `APIError` message as the parser wrote it (`… (HTTP 401)`).
fn http_status(message: &str) -> Option<u16> {
    let rest = message.rsplit_once("(HTTP ")?.1;
    rest.strip_suffix(')')?.parse().ok()
}

/// Without ANSI colour sequences (OpenCode colours its stderr notes).
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

fn error_issue(f: &mut Findings, source: &str, message: &str) {
    let lower = message.to_ascii_lowercase();
    let status = http_status(message);
    // `APIError` with `statusCode: 429` after OpenCode's own retries (fixture rate-limit-429)
    if matches!(status, Some(429 | 529))
        || (!matches!(status, Some(401 | 403)) && rate_limit_text(message))
    {
        f.headline_once(message);
        f.add(rate_limited(
            "opencode",
            message,
            "the limits are the model provider's key's (opencode.json \
             `provider.<id>.options.apiKey`); OpenCode retries a 429 for about 2 minutes first",
        ));
        return;
    }
    let (kind, description, action) = if source.contains("Auth")
        || matches!(status, Some(401 | 403))
        || lower.contains("api key")
    {
        (
            IssueType::AuthFailure,
            format!(
                "opencode could not authenticate with the model provider: {}",
                head_str(message, 300)
            ),
            "set the provider's key in OpenCode's config (opencode.json `provider.<id>.options.apiKey`, \
             or OPENCODE_CONFIG_CONTENT) or run `opencode auth login`",
        )
    } else if source.contains("ModelNotFound") || lower.contains("model not found") {
        (
            IssueType::ModelError,
            format!(
                "opencode does not know the model: {}",
                head_str(message, 300)
            ),
            "pass model as provider/model with a provider configured in opencode.json \
             (`opencode models` lists them)",
        )
    } else if source == "APIError" || status.is_some() {
        (
            IssueType::ModelError,
            format!("the model request failed: {}", head_str(message, 500)),
            "check the model endpoint (baseURL in opencode.json), its key and its limits, then run the task again",
        )
    } else {
        (
            IssueType::AgentError,
            format!("opencode reported {source}: {}", head_str(message, 500)),
            "read logs (opencode's own log is in $HOME/.local/share/opencode/log/), fix the cause, and run the task again",
        )
    };
    f.headline_once(message);
    f.add(Issue::new(kind, description, action));
}

/// What OpenCode's file tools say when the file system refused a write (the run's Landlock
/// sandbox: `EACCES`), before the path in parentheses: `PermissionDenied: FileSystem.writeFile
/// (/home/u/.bashrc-planted)`. The engine's reading of denied writes knows the shells' and
/// Node's `Permission denied` texts, not this one.
const FS_DENIED: &str = "PermissionDenied: FileSystem.";

const SANDBOX_ACTION: &str = "if the task needs that path, add it to sandbox_writable \
     (DROID_EXECUTOR_SANDBOX_WRITABLE); otherwise nothing was written there";

/// The path of a write the file system refused, from a tool result's text.
fn fs_denied_path(text: &str) -> Option<&str> {
    let line = text.lines().find(|l| l.contains(FS_DENIED))?;
    let (_, rest) = line.split_once(" (")?;
    let path = rest.strip_suffix(')').unwrap_or(rest).trim();
    (!path.is_empty()).then_some(path)
}

/// Classify what OpenCode said went wrong. `completed`: its turn ended with `stop`.
pub(crate) fn findings(events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
    let mut f = Findings::default();
    let stderr = plain(stderr);
    // `! permission requested: bash (touch x); auto-rejecting`: names the permission, which the
    // tool result does not
    let stderr_note = stderr
        .lines()
        .find(|l| l.contains(STDERR_REJECTING))
        .map(|l| l.trim().trim_start_matches('!').trim().to_owned());
    let mut rejected = false;
    for ev in events {
        match ev {
            AgentEvent::ToolResult {
                is_error: true,
                text,
                tool,
                ..
            } => {
                if let Some(path) = fs_denied_path(text) {
                    f.permission_denied = true;
                    f.add(Issue::new(
                        IssueType::PermissionDenied,
                        format!(
                            "the sandbox (Landlock) denied opencode's {tool} tool a write to \
                             {path} (outside the run's writable paths)"
                        ),
                        SANDBOX_ACTION,
                    ));
                } else if text.contains(REJECTED) {
                    rejected = true;
                    f.permission_denied = true;
                    let why = stderr_note.as_deref().unwrap_or(text);
                    f.headline_once(&format!("permission to use {tool} was auto-rejected"));
                    f.add(Issue::new(
                        IssueType::PermissionDenied,
                        format!(
                            "opencode stopped: a {tool} call needed a permission its run does not grant ({})",
                            head_str(why, 300)
                        ),
                        PERMISSION_ACTION,
                    ));
                } else if text.contains(DENIED_BY_RULE) {
                    f.permission_denied = true;
                    f.add(Issue::new(
                        IssueType::PermissionDenied,
                        format!("opencode's permission rules refused a {tool} call (its autonomy, or a path outside repo_root)"),
                        PERMISSION_ACTION,
                    ));
                } else if tool == "invalid" && text.contains(UNAVAILABLE_TOOL) {
                    let wanted = unavailable_tool(text);
                    if GOVERNED_TOOLS.contains(&wanted.as_str()) {
                        f.permission_denied = true;
                        f.add(Issue::new(
                            IssueType::PermissionDenied,
                            format!("opencode's model tried the {wanted} tool, which this run's autonomy does not offer"),
                            PERMISSION_ACTION,
                        ));
                    }
                }
            }
            AgentEvent::Error { source, message } if source != "step" => {
                error_issue(&mut f, source, message);
            }
            AgentEvent::Error { message, .. } => {
                f.headline_once(message);
                f.add(Issue::new(
                    IssueType::ModelError,
                    format!("opencode's turn ended without an answer: {message}"),
                    "raise the model's output limit or simplify the task, then run it again",
                ));
            }
            _ => {}
        }
    }
    match stderr_note {
        Some(note) if !rejected => {
            f.permission_denied = true;
            f.headline_once(&note);
            f.add(Issue::new(
                IssueType::PermissionDenied,
                format!("opencode said on stderr: {}", head_str(&note, 300)),
                PERMISSION_ACTION,
            ));
        }
        Some(_) => {}
        None if stderr.contains(SESSION_NOT_FOUND) => {
            f.headline_once(SESSION_NOT_FOUND);
            f.add(Issue::new(
                IssueType::AgentError,
                "opencode has no session with the request's session_id",
                "pass a session_id from an earlier OpenCode run with the same HOME (its sessions \
                 live in $HOME/.local/share/opencode/opencode.db, or OPENCODE_DB), or drop \
                 session_id to start a new session",
            ));
        }
        None if f.issues.is_empty() => f.stderr_fallback("opencode", &stderr, completed),
        None => {}
    }
    f
}

/// The tool named in OpenCode's "Model tried to call unavailable tool 'write'" text.
fn unavailable_tool(text: &str) -> String {
    text.split_once(UNAVAILABLE_TOOL)
        .and_then(|(_, rest)| rest.split('\'').nth(1))
        .unwrap_or_default()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::providers::opencode::events::tests::recorded;

    fn stderr_of(case: &str) -> String {
        std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../tests/fixtures/opencode-1.18.33")
                .join(format!("{case}.stderr.txt")),
        )
        .unwrap()
    }

    fn kinds(f: &Findings) -> Vec<IssueType> {
        f.issues.iter().map(|i| i.kind).collect()
    }

    #[test]
    fn recorded_failures_map_to_issue_types() {
        let f = findings(&recorded("model-error-400"), "", false);
        assert_eq!(kinds(&f), vec![IssueType::ModelError]);
        assert_eq!(
            f.headline.as_deref(),
            Some("mock: invalid request (scripted 400) (HTTP 400)")
        );

        // recorded 2026-12-07 against the scripted model answering 429 (the README)
        let f = findings(&recorded("rate-limit-429"), "", false);
        assert_eq!(kinds(&f), vec![IssueType::RateLimited]);
        assert_eq!(
            f.headline.as_deref(),
            Some("Rate limit reached for requests (HTTP 429)")
        );

        let f = findings(
            &recorded("permission-deny-and-ask"),
            &stderr_of("permission-deny-and-ask"),
            false,
        );
        assert!(f.permission_denied);
        assert_eq!(
            kinds(&f),
            vec![IssueType::PermissionDenied, IssueType::PermissionDenied]
        );
        assert_eq!(
            f.issues[0].description,
            "opencode's model tried the write tool, which this run's autonomy does not offer"
        );

        let f = findings(
            &recorded("external-directory-auto-rejected"),
            &stderr_of("external-directory-auto-rejected"),
            false,
        );
        assert!(f.permission_denied);
        assert_eq!(
            f.issues
                .iter()
                .map(|i| i.description.as_str())
                .collect::<Vec<_>>(),
            vec![
                "opencode stopped: a bash call needed a permission its run does not grant \
                 (permission requested: external_directory (/tmp/agentclis/*); auto-rejecting)"
            ]
        );
        let f = findings(&[], &stderr_of("external-directory-auto-rejected"), false);
        assert_eq!(kinds(&f), vec![IssueType::PermissionDenied]);

        let f = findings(&recorded("basic-tool-turn"), "", true);
        assert_eq!(kinds(&f), vec![]);
        assert!(!f.permission_denied);
    }

    #[test]
    fn auth_and_unknown_errors() {
        let err = |source: &str, message: &str| {
            kinds(&findings(
                &[AgentEvent::Error {
                    source: source.into(),
                    message: message.into(),
                }],
                "",
                false,
            ))
        };
        assert_eq!(
            err("APIError", "Unauthorized (HTTP 401)"),
            vec![IssueType::AuthFailure]
        );
        assert_eq!(
            err("ProviderAuthError", "no key"),
            vec![IssueType::AuthFailure]
        );
        assert_eq!(
            err("ProviderModelNotFoundError", "nope/nope"),
            vec![IssueType::ModelError]
        );
        assert_eq!(
            err("APIError", "Cannot connect to API: Unable to connect."),
            vec![IssueType::ModelError]
        );
        assert_eq!(err("UnknownError", "boom"), vec![IssueType::AgentError]);
        let f = findings(&[], "Error: Session not found\n", false);
        assert_eq!(kinds(&f), vec![IssueType::AgentError]);
        assert_eq!(f.headline.as_deref(), Some("Session not found"));
        let f = findings(&[], "some crash\nstack", false);
        assert_eq!(kinds(&f), vec![IssueType::AgentError]);
        assert_eq!(plain("\u{1b}[93m\u{1b}[1m! \u{1b}[0mhi"), "! hi");
    }

    /// A write the sandbox refused, in OpenCode's own words (recorded under Landlock).
    #[test]
    fn a_sandbox_denied_write_names_its_path() {
        let denied = AgentEvent::ToolResult {
            id: "t1".into(),
            tool: "write".into(),
            is_error: true,
            text: "PermissionDenied: FileSystem.writeFile (/h/.bashrc-planted)".into(),
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
                "the sandbox (Landlock) denied opencode's write tool a write to /h/.bashrc-planted \
                 (outside the run's writable paths)"
            )]
        );
    }
}
