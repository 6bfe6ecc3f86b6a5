//! One attempt's record (`attempts[]` of the result) read off the attempt's own result: what
//! ended it, its checks, its measured diff, one line for the report.

use std::time::Duration;

use droid_contract::{
    AgentChoice, Attempt, CheckOutcome, CommandSource, Diffstat, ExecutionResult, Issue, IssueType,
    Status,
};

use crate::excerpt::head_str;

/// Longest `note`, in bytes (one line of the report).
const NOTE_MAX: usize = 200;

/// The issue that ended an attempt that did not succeed: a stop no other agent would change
/// (cancel, timeout, spent budget, refused request) first, then what kept this agent from the
/// task (not installed, authentication, rate limit, model error: the reasons a `fallback` goes
/// on for), then the first issue. `None` on success, or when the result names no issue.
pub(crate) fn deciding_issue(result: &ExecutionResult) -> Option<&Issue> {
    if result.status == Status::Success {
        return None;
    }
    let first_of = |kind: IssueType| result.issues.iter().find(|i| i.kind == kind);
    [
        IssueType::Cancelled,
        IssueType::Timeout,
        IssueType::BudgetExceeded,
        IssueType::ValidationError,
    ]
    .into_iter()
    .find_map(first_of)
    .or_else(|| {
        result
            .issues
            .iter()
            .find(|i| droid_contract::warrants_fallback(i.kind))
    })
    .or_else(|| result.issues.first())
}

/// The record of one attempt by `choice`, which took `elapsed` and answered `result` (not yet
/// `chosen`; `task_id` and `worktree` are the caller's to fill when it keeps them).
pub(crate) fn attempt_of(
    choice: &AgentChoice,
    result: &ExecutionResult,
    elapsed: Duration,
) -> Attempt {
    let deciding = deciding_issue(result);
    let checks = result
        .commands_run
        .iter()
        .filter(|c| c.source == CommandSource::Verify)
        .map(|c| CheckOutcome {
            command: c.command.clone(),
            exit_code: c.exit_code,
        })
        .collect();
    let diffstat = result
        .files_changed
        .iter()
        .fold(Diffstat::default(), |d, f| Diffstat {
            files: d.files.saturating_add(1),
            lines_added: d.lines_added.saturating_add(f.lines_added.unwrap_or(0)),
            lines_removed: d.lines_removed.saturating_add(f.lines_removed.unwrap_or(0)),
        });
    let note = match deciding {
        Some(i) => i.description.as_str(),
        None => result.summary.as_str(),
    };
    let note = note.lines().next().unwrap_or_default().trim();
    Attempt {
        provider: choice.provider,
        model: choice.model.clone(),
        status: result.status,
        reason: deciding.map(|i| i.kind),
        issues: result.issues.iter().map(|i| i.kind).collect(),
        duration_ms: u64::try_from(elapsed.as_millis()).unwrap_or(u64::MAX),
        usage: result.agent.as_ref().and_then(|a| a.usage.clone()),
        checks,
        diffstat,
        chosen: false,
        task_id: None,
        worktree: None,
        note: head_str(note, NOTE_MAX),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use droid_contract::{AgentInfo, ChangeType, CommandRun, FileChange, ProviderId, Usage};
    use pretty_assertions::assert_eq;

    fn run(command: &str, code: Option<i32>, source: CommandSource) -> CommandRun {
        CommandRun {
            command: command.into(),
            exit_code: code,
            duration_ms: 1,
            stdout_excerpt: String::new(),
            stderr_excerpt: String::new(),
            source,
            truncated: false,
        }
    }

    fn file(path: &str, added: Option<u64>, removed: Option<u64>) -> FileChange {
        FileChange {
            path: path.into(),
            change_type: ChangeType::Modified,
            old_path: None,
            highlights: Vec::new(),
            lines_added: added,
            lines_removed: removed,
        }
    }

    fn issue(kind: IssueType, what: &str) -> Issue {
        Issue::new(kind, what, "act")
    }

    #[test]
    fn a_rate_limited_attempt_records_why_it_ended() {
        let mut r = ExecutionResult::error(
            Some("t".into()),
            "droid failed",
            vec![
                issue(IssueType::Conflict, "wrote outside"),
                issue(
                    IssueType::RateLimited,
                    "HTTP 429 from the model: rate limited\nmore",
                ),
                issue(IssueType::AgentError, "droid exited 1"),
            ],
        );
        r.status = Status::Failed;
        r.agent = Some(AgentInfo {
            provider: ProviderId::Droid,
            usage: Some(Usage {
                input_tokens: 5,
                ..Usage::default()
            }),
            ..AgentInfo::default()
        });
        let choice = AgentChoice::parse("droid:custom:M").unwrap_or_else(|e| panic!("{e}"));
        let a = attempt_of(&choice, &r, Duration::from_millis(1500));
        assert_eq!(
            a,
            Attempt {
                provider: ProviderId::Droid,
                model: Some("custom:M".into()),
                status: Status::Failed,
                reason: Some(IssueType::RateLimited),
                issues: vec![
                    IssueType::Conflict,
                    IssueType::RateLimited,
                    IssueType::AgentError
                ],
                duration_ms: 1500,
                usage: Some(Usage {
                    input_tokens: 5,
                    ..Usage::default()
                }),
                checks: Vec::new(),
                diffstat: Diffstat::default(),
                chosen: false,
                task_id: None,
                worktree: None,
                note: "HTTP 429 from the model: rate limited".into(),
            }
        );
    }

    #[test]
    fn checks_come_from_verification_and_the_diff_is_summed() {
        let mut r = ExecutionResult::error(None, "done it", Vec::new());
        r.status = Status::Success;
        r.commands_run = vec![
            run("npm ci", Some(0), CommandSource::Setup),
            run("ls", Some(0), CommandSource::Agent),
            run("cargo test", Some(0), CommandSource::Verify),
            run("sleep 99", None, CommandSource::Verify),
        ];
        r.files_changed = vec![
            file("a", Some(3), Some(1)),
            file("b.png", None, None),
            file("c", Some(2), Some(0)),
        ];
        let a = attempt_of(
            &AgentChoice::parse("codex").unwrap_or_else(|e| panic!("{e}")),
            &r,
            Duration::ZERO,
        );
        assert_eq!(
            a.checks,
            vec![
                CheckOutcome {
                    command: "cargo test".into(),
                    exit_code: Some(0)
                },
                CheckOutcome {
                    command: "sleep 99".into(),
                    exit_code: None
                },
            ]
        );
        assert_eq!(
            a.diffstat,
            Diffstat {
                files: 3,
                lines_added: 5,
                lines_removed: 1
            }
        );
        assert_eq!((a.reason, a.note.as_str()), (None, "done it"));
    }

    #[test]
    fn a_stop_decides_before_what_the_agent_said() {
        let mut r = ExecutionResult::error(
            None,
            "x",
            vec![
                issue(IssueType::ModelError, "model said no"),
                issue(IssueType::Timeout, "did not finish"),
            ],
        );
        r.status = Status::Timeout;
        assert_eq!(deciding_issue(&r).map(|i| i.kind), Some(IssueType::Timeout));
        r.issues = vec![
            issue(IssueType::TestFailure, "1 of 1 failed"),
            issue(IssueType::PermissionDenied, "refused"),
        ];
        r.status = Status::Partial;
        assert_eq!(
            deciding_issue(&r).map(|i| i.kind),
            Some(IssueType::TestFailure)
        );
    }
}
