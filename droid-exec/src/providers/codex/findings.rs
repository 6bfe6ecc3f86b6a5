//! What Codex's failure texts mean (Codex CLI 0.169.0), each mapped to an issue.
//!
//! - `turn.failed` ends the run; its message says why: `unexpected status 401 Unauthorized: …`
//!   or `Missing environment variable: `X`.` (case `auth-401`, `missing-env-key`) is an
//!   authentication failure; an HTTP error body or status, `Connection failed: …` (cases
//!   `model-error-400`, `server-down-disable-unbounded-retries`) a model error; anything else an
//!   agent error.
//! - A run that never reached `turn.completed` nor `turn.failed` (timeout, cancel) but printed
//!   `error` events (`Reconnecting... waiting for network (…)`, case `server-down`) was waiting
//!   for its model endpoint: a model error naming the last one.
//! - Codex's read-only sandbox refuses `apply_patch` with no item event at all; the refusal is
//!   only on stderr (`ERROR codex_core::tools::router: error=patch rejected: writing is blocked
//!   by read-only sandbox…`, case `readonly-sandbox-default`): permission denied.
//! - A shell command the sandbox made fail leaves no trace in some runs (no item, no stderr)
//!   and is an ordinary failed item in others; one that went on after the refusal is an
//!   ordinary `command_execution` item. Either way its output says `Read-only file system`
//!   (case `readonly-command-blocked`, exit 0): permission denied too.
//! - A write the run's Landlock sandbox refused (Codex's own sandbox is off at high autonomy):
//!   a command's `Permission denied` is read by the engine for every provider; `apply_patch`
//!   drops the errno and prints on stderr only `Failed to write file <path>` (or `Failed to
//!   create parent directories for <path>`, `Failed to delete file <path>`; recorded under
//!   Landlock): permission denied, naming the path.
//! - stderr's two notes on every run (`WARNING: proceeding, even though we could not create PATH
//!   aliases…`, `Reading additional input from stdin...`) are not failures.

use droid_contract::{Issue, IssueType};

use crate::excerpt::head_str;
use crate::providers::AgentEvent;
use crate::providers::findings::{Findings, rate_limit_text, rate_limited};

/// stderr lines Codex prints on healthy runs.
const NOISE: [&str; 2] = [
    "WARNING: proceeding, even though we could not create PATH aliases",
    "Reading additional input from stdin",
];

/// Codex's stderr texts for a write its sandbox or approval policy refused.
const REFUSALS: [&str; 3] = [
    "blocked by read-only sandbox",
    "rejected by user approval settings",
    "sandbox denied",
];

/// `apply_patch`'s stderr texts for a write that failed, each followed by the path (the errno is
/// dropped; with Codex's own sandbox off, only the run's confinement refuses a write).
const PATCH_FAILURES: [&str; 3] = [
    "Failed to write file ",
    "Failed to create parent directories for ",
    "Failed to delete file ",
];

/// What a command blocked by Codex's sandbox prints.
const SANDBOX_RO: &str = "Read-only file system";

const RAISE_ACTION: &str = "run with a higher autonomy (low or medium: Codex's workspace-write \
     sandbox, writes inside repo_root; high: no sandbox), capped by the server's max_autonomy, \
     if that action is wanted";

const AUTH_ACTION: &str = "set the key variable that the model provider's env_key names \
     (OPENAI_API_KEY for Codex's built-in openai provider; a custom provider's variable reaches \
     Codex only when listed in the setting env_passthrough), or log in with `codex login` under \
     the CODEX_HOME the run uses";

const MODEL_ACTION: &str = "check the model provider in $CODEX_HOME/config.toml (base_url, \
     wire_api = \"responses\"), the model (request field model, Codex's -m) and the endpoint's \
     limits, then run the task again";

/// Where Codex's limits are set, for a `rate_limited` issue.
const LIMITS: &str = "Codex's limits are the plan's of its login (`codex login`) or the key's \
     of its model provider; Codex itself does not retry a 429";

fn auth_text(m: &str) -> bool {
    m.contains("401 Unauthorized")
        || m.contains("403 Forbidden")
        || m.contains("Missing environment variable")
        || m.contains("invalid_api_key")
        || m.contains("Incorrect API key")
        || m.contains("Not logged in")
}

fn model_text(m: &str) -> bool {
    m.contains("unexpected status")
        || m.contains("\"error\"")
        || m.contains("Connection failed")
        || m.contains("stream disconnected")
        || m.contains("Reconnecting")
        || m.contains("exceeded retry limit")
        || m.contains("does not exist")
        || m.contains("model_not_found")
        || m.contains("usage limit")
        || m.contains("context window")
}

fn noise(line: &str) -> bool {
    line.trim().is_empty() || NOISE.iter().any(|n| line.contains(n))
}

/// Classify what Codex said went wrong. `completed`: a completion event arrived.
pub(crate) fn findings(events: &[AgentEvent], stderr: &str, completed: bool) -> Findings {
    let mut f = Findings::default();
    let mut turn_failed = false;
    let mut last_stream_error = None;
    for ev in events {
        if let AgentEvent::ToolResult { tool, text, .. } = ev
            && tool == "command_execution"
            && let Some(line) = text.lines().find(|l| l.contains(SANDBOX_RO))
        {
            f.permission_denied = true;
            f.add(Issue::new(
                IssueType::PermissionDenied,
                format!(
                    "codex's sandbox kept a command from writing: {}",
                    head_str(line, 300)
                ),
                RAISE_ACTION,
            ));
        }
        let AgentEvent::Error { source, message } = ev else {
            continue;
        };
        match source.as_str() {
            "turn" => {
                turn_failed = true;
                f.headline = Some(message.clone());
                if auth_text(message) {
                    f.add(Issue::new(
                        IssueType::AuthFailure,
                        format!("codex could not authenticate: {}", head_str(message, 300)),
                        AUTH_ACTION,
                    ));
                } else if rate_limit_text(message) {
                    f.add(rate_limited("codex", message, LIMITS));
                } else if model_text(message) {
                    f.add(Issue::new(
                        IssueType::ModelError,
                        format!("the model request failed: {}", head_str(message, 500)),
                        MODEL_ACTION,
                    ));
                } else {
                    f.add(Issue::new(
                        IssueType::AgentError,
                        format!("codex reported: {}", head_str(message, 500)),
                        "read logs for codex's stderr, fix the cause, and run the task again",
                    ));
                }
            }
            "stream" => last_stream_error = Some(message),
            _ => {}
        }
    }
    if !completed
        && !turn_failed
        && let Some(message) = last_stream_error
    {
        f.headline_once(message);
        if rate_limit_text(message) {
            f.add(rate_limited("codex", message, LIMITS));
        } else {
            let (kind, action) = if auth_text(message) {
                (IssueType::AuthFailure, AUTH_ACTION)
            } else {
                (IssueType::ModelError, MODEL_ACTION)
            };
            f.add(Issue::new(
                kind,
                format!(
                    "codex did not finish; its last error was: {}",
                    head_str(message, 500)
                ),
                action,
            ));
        }
    }

    let lines: Vec<&str> = stderr.lines().filter(|l| !noise(l)).collect();
    for line in &lines {
        if let Some(path) = PATCH_FAILURES
            .iter()
            .find_map(|m| line.split_once(m).map(|(_, path)| path.trim()))
            .filter(|path| !path.is_empty())
        {
            f.permission_denied = true;
            f.add(Issue::new(
                IssueType::PermissionDenied,
                format!(
                    "codex's apply_patch could not write {path}: the sandbox (Landlock) refuses \
                     writes outside the run's writable paths (Codex prints no errno)"
                ),
                "if the task needs that path, add it to sandbox_writable \
                 (DROID_EXECUTOR_SANDBOX_WRITABLE); otherwise nothing was written there",
            ));
        }
        if REFUSALS.iter().any(|r| line.contains(r)) {
            f.permission_denied = true;
            let what = line.split("error=").nth(1).unwrap_or(line).trim();
            f.add(Issue::new(
                IssueType::PermissionDenied,
                format!(
                    "codex's sandbox refused an action (Codex reports it on stderr only): {}",
                    head_str(what, 300)
                ),
                RAISE_ACTION,
            ));
        }
    }
    if f.issues.is_empty() && !completed {
        if let Some(first) = lines
            .iter()
            .find(|l| l.contains("no rollout found") || l.contains("thread/resume"))
        {
            f.headline_once(first);
            f.add(Issue::new(
                IssueType::AgentError,
                format!(
                    "codex could not resume the session named by session_id: {}",
                    head_str(first, 300)
                ),
                "pass a session_id that an earlier codex run returned under the same CODEX_HOME \
                 (sessions live in $CODEX_HOME/sessions), or omit session_id to start a new one",
            ));
        } else if let Some(first) = lines
            .iter()
            .find(|l| l.contains("Not inside a trusted directory"))
        {
            f.headline_once(first);
            f.add(Issue::new(
                IssueType::EnvIssue,
                format!("codex refused the directory: {}", head_str(first, 300)),
                "make repo_root a git repository or trust it in $CODEX_HOME/config.toml",
            ));
        } else if let Some(first) = lines
            .iter()
            .find(|l| l.contains("config") || l.contains("wire_api"))
        {
            f.headline_once(first);
            f.add(Issue::new(
                IssueType::EnvIssue,
                format!(
                    "codex could not load its configuration: {}",
                    head_str(first, 300)
                ),
                "fix $CODEX_HOME/config.toml (CODEX_HOME defaults to ~/.codex)",
            ));
        } else {
            f.stderr_fallback("codex", &lines.join("\n"), completed);
        }
    }
    f
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use pretty_assertions::assert_eq;

    use super::*;
    use crate::providers::EventParser;
    use crate::providers::codex::events::CodexParser;

    fn fixture(name: &str) -> String {
        let path = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../tests/fixtures/codex-0.169.0")
            .join(name);
        std::fs::read_to_string(path).unwrap_or_default()
    }

    fn kinds(case: &str) -> (Vec<IssueType>, bool, Option<String>) {
        let mut p = CodexParser::default();
        let mut ev = Vec::new();
        for l in fixture(&format!("{case}.ndjson")).lines() {
            p.line(l.as_bytes(), &mut ev);
        }
        let completed = ev
            .iter()
            .any(|e| matches!(e, AgentEvent::Completion { .. }));
        let f = findings(&ev, &fixture(&format!("{case}.stderr")), completed);
        (
            f.issues.iter().map(|i| i.kind).collect(),
            f.permission_denied,
            f.headline,
        )
    }

    #[test]
    fn recorded_failures_map_to_issue_types() {
        assert_eq!(kinds("model-error-400").0, vec![IssueType::ModelError]);
        assert_eq!(
            kinds("server-down-disable-unbounded-retries"),
            (
                vec![IssueType::ModelError],
                false,
                Some("Connection failed: error sending request".into())
            )
        );
        assert_eq!(kinds("server-down").0, vec![IssueType::ModelError]);
        assert_eq!(kinds("auth-401").0, vec![IssueType::AuthFailure]);
        // HTTP 429 from the model, plain, `insufficient_quota` and `usage_limit_reached`
        // (recorded 2026-12-07, the fixtures' README): "exceeded retry limit, last status: 429
        // Too Many Requests", "Quota exceeded. Check your plan and billing details.", "You’ve
        // hit your usage limit. Try again later."
        for case in ["rate-limit-429", "quota-429", "usage-limit-429"] {
            assert_eq!(kinds(case).0, vec![IssueType::RateLimited], "{case}");
        }
        // a 503 is retried (5 × `Reconnecting...`) and stays a model error
        let overloaded = "unexpected status 503 Service Unavailable: mock error 503, url: \
                          http://127.0.0.1:1/v1/responses";
        assert_eq!(
            findings(
                &[AgentEvent::Error {
                    source: "turn".into(),
                    message: overloaded.into()
                }],
                "",
                false
            )
            .issues[0]
                .kind,
            IssueType::ModelError
        );
        assert_eq!(
            kinds("missing-env-key"),
            (
                vec![IssueType::AuthFailure],
                false,
                Some("Missing environment variable: `MOCK_API_KEY`.".into())
            )
        );
        assert_eq!(
            kinds("readonly-sandbox-default"),
            (vec![IssueType::PermissionDenied], true, None)
        );
        assert_eq!(
            kinds("readonly-command-blocked").0,
            vec![IssueType::PermissionDenied]
        );
        // healthy runs: nothing, despite the stderr notes and the retry warnings
        assert_eq!(kinds("basic-tool-turn"), (vec![], false, None));
        assert_eq!(
            kinds("builtin-openai-provider-openai_base_url"),
            (vec![], false, None)
        );
        // a cut run with only the usual stderr notes leaves the engine's exit note to speak
        assert_eq!(kinds("sigterm-during-shell"), (vec![], false, None));
    }

    #[test]
    fn stderr_only_failures() {
        let f = findings(&[], &fixture("not-git-repo.stderr"), false);
        assert_eq!(f.issues[0].kind, IssueType::EnvIssue);
        let f = findings(
            &[],
            "Error loading config.toml: `wire_api = \"chat\"` is no longer supported",
            false,
        );
        assert_eq!(f.issues[0].kind, IssueType::EnvIssue);
        let f = findings(&[], &fixture("resume-unknown-session.stderr"), false);
        assert_eq!(f.issues[0].kind, IssueType::AgentError);
        assert!(f.issues[0].description.contains("session_id"));
        let f = findings(&[], "thread 'main' panicked at src/x.rs", false);
        assert_eq!(f.issues[0].kind, IssueType::AgentError);
    }

    /// A write the sandbox refused, in apply_patch's words (stderr only; recorded under
    /// Landlock).
    #[test]
    fn a_sandbox_denied_patch_names_its_path() {
        let f = findings(
            &[],
            "2026-11-24T06:41:53.264777Z ERROR codex_core::tools::router: error=Exit code: 1\n\
             Wall time: 0 seconds\nOutput:\nFailed to write file /h/.bashrc-planted\n",
            true,
        );
        assert!(f.permission_denied);
        assert_eq!(
            f.issues
                .iter()
                .map(|i| (i.kind, i.description.as_str()))
                .collect::<Vec<_>>(),
            vec![(
                IssueType::PermissionDenied,
                "codex's apply_patch could not write /h/.bashrc-planted: the sandbox (Landlock) \
                 refuses writes outside the run's writable paths (Codex prints no errno)"
            )]
        );
    }
}
