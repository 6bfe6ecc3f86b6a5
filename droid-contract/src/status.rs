//! The status rules, as one pure function from measured facts to a verdict.
//!
//! droid's own word never upgrades a status: its report can turn success into partial or failed,
//! but only the facts (a `completion` event, the verification commands' exit codes) make success.

use serde::{Deserialize, Serialize};

use crate::issue::{Issue, IssueType};

/// The overall outcome of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// droid finished and every verification command passed.
    Success,
    /// droid finished (or stopped after making changes) but something is missing; see `issues`.
    Partial,
    /// droid failed and changed nothing useful.
    Failed,
    /// The run exceeded `max_runtime_seconds`.
    Timeout,
    /// The run was cancelled.
    Cancelled,
    /// Nothing ran: invalid request, droid missing, executor failure.
    Error,
}

impl Status {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Success => "success",
            Self::Partial => "partial",
            Self::Failed => "failed",
            Self::Timeout => "timeout",
            Self::Cancelled => "cancelled",
            Self::Error => "error",
        }
    }
}

/// How the agent process ended, as the supervisor saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RunEnd {
    /// The agent never started.
    NotStarted,
    /// The agent emitted its completion event.
    Completed,
    /// The agent ended without a completion event (error event, crash, non-zero exit, signal).
    Failed,
    /// The deadline passed first.
    TimedOut,
    /// A cancel request came first.
    Cancelled,
}

/// The status droid claims in its `droid-executor-report` block.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReportedStatus {
    /// droid says it did everything.
    Success,
    /// droid says it did part of it.
    Partial,
    /// droid says it failed.
    Failed,
}

/// What was measured about a run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StatusFacts {
    /// How the agent ended.
    pub end: RunEnd,
    /// The agent process exited cleanly (0, or stopped by us after its completion event).
    pub exit_ok: bool,
    /// droid's own claim, if its report block parsed.
    pub reported: Option<ReportedStatus>,
    /// Exit code of each verification command we ran, `None` when it was killed (timeout).
    pub verify_exit_codes: Vec<Option<i32>>,
    /// How many files the repository shows changed.
    pub files_changed: usize,
    /// A tool call was refused by droid's autonomy level.
    pub permission_denied: bool,
    /// The completion looks truncated (all-zero token usage).
    pub suspect_truncated: bool,
    /// droid wrote files outside repo_root.
    pub wrote_outside: bool,
    /// The agent's reported usage went over the request's `max_tokens`: it was stopped for it
    /// (`end` is [`RunEnd::Failed`]), or it finished before a count came (a provider that
    /// reports usage only at its end).
    pub over_budget: bool,
}

/// The status and the issues that justify it (non-empty whenever the status is `partial`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// The status.
    pub status: Status,
    /// Why it is not `success`, as issues; a caller merges them with its own, keeping the more
    /// specific one when both name the same type.
    pub reasons: Vec<Issue>,
}

/// Exit codes of a shell that could not run the command at all: 126 (found, not executable) and
/// 127 (not found), POSIX's `sh -c` (and bash's, dash's) rule. Such a command says nothing about
/// the code: the machine lacks something, an `env_issue`, not a `test_failure`.
const CANNOT_RUN_CODES: [i32; 2] = [126, 127];

/// Whether a verification command's exit code says the shell could not run it (see
/// [`CANNOT_RUN_CODES`]).
pub fn cannot_run(code: Option<i32>) -> bool {
    code.is_some_and(|c| CANNOT_RUN_CODES.contains(&c))
}

/// `n` and the noun, singular or plural (`1 verification command`, `2 verification commands`).
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The issues of the verification commands that did not exit 0: `test_failure` for those that
/// ran and failed (or were killed), `env_issue` for those the shell could not run.
fn verify_failed(codes: &[Option<i32>]) -> Vec<Issue> {
    let of = codes.len();
    let unrunnable = codes.iter().filter(|c| cannot_run(**c)).count();
    let failed = codes
        .iter()
        .filter(|c| **c != Some(0) && !cannot_run(**c))
        .count();
    let mut issues = Vec::new();
    if failed > 0 {
        issues.push(Issue::new(
            IssueType::TestFailure,
            format!(
                "{failed} of {} failed",
                count(of, "verification command", "verification commands")
            ),
            "read the failing verification command's output (commands_run, source verify), fix \
             the code, and run the task again",
        ));
    }
    if unrunnable > 0 {
        issues.push(Issue::new(
            IssueType::EnvIssue,
            format!(
                "{unrunnable} of {} could not be run: the shell found no such program (exit \
                 127) or could not execute it (exit 126)",
                count(of, "verification command", "verification commands")
            ),
            "install the missing program where droid-executor runs (the command runs with sh -c \
             in repo_root, on the run's PATH), or correct the command; then run the task again",
        ));
    }
    issues
}

/// The agent spent more tokens than `max_tokens` allows (the engine says by how much).
fn over_budget() -> Issue {
    Issue::new(
        IssueType::BudgetExceeded,
        "the agent used more tokens than max_tokens allows",
        "resume the session with a larger max_tokens, or split the task",
    )
}

/// Decide the status from the facts (docs/architecture.md#engine-phases). A run stopped for
/// its token budget is `partial` when it changed files (they are verified and kept) and
/// `failed` when it changed nothing; one that finished over budget is `partial`.
pub fn decide(f: &StatusFacts) -> Verdict {
    let mut reasons = Vec::new();
    let status = match f.end {
        RunEnd::NotStarted => Status::Error,
        RunEnd::TimedOut => Status::Timeout,
        RunEnd::Cancelled => Status::Cancelled,
        RunEnd::Failed => {
            if f.over_budget {
                reasons.push(over_budget());
            }
            if f.files_changed > 0 && f.over_budget {
                // stopped for its budget, not broken: the budget says why
                reasons.extend(verify_failed(&f.verify_exit_codes));
                Status::Partial
            } else if f.files_changed > 0 {
                reasons.push(Issue::new(
                    IssueType::AgentError,
                    format!(
                        "droid stopped before finishing, after changing {} file(s)",
                        f.files_changed
                    ),
                    "review files_changed; finish the work or revert it, then run the task again",
                ));
                reasons.extend(verify_failed(&f.verify_exit_codes));
                Status::Partial
            } else {
                Status::Failed
            }
        }
        RunEnd::Completed => {
            if f.reported == Some(ReportedStatus::Failed) && f.files_changed == 0 {
                reasons.push(Issue::new(
                    IssueType::AgentError,
                    "droid reported that it failed and changed nothing",
                    "read the summary and issues, clarify the request, and run it again",
                ));
                Status::Failed
            } else {
                reasons.extend(verify_failed(&f.verify_exit_codes));
                match f.reported {
                    Some(ReportedStatus::Partial) => reasons.push(Issue::new(
                        IssueType::AgentError,
                        "droid reported that it finished only part of the task",
                        "read the summary and issues for what is left",
                    )),
                    Some(ReportedStatus::Failed) => reasons.push(Issue::new(
                        IssueType::AgentError,
                        "droid reported failure but changed files",
                        "review files_changed before keeping them",
                    )),
                    Some(ReportedStatus::Success) | None => {}
                }
                if f.permission_denied {
                    reasons.push(Issue::new(
                        IssueType::PermissionDenied,
                        "droid's autonomy level refused a tool call",
                        "run again with a higher autonomy if the refused action is wanted",
                    ));
                }
                if f.wrote_outside {
                    reasons.push(Issue::new(
                        IssueType::Conflict,
                        "droid wrote files outside repo_root",
                        "inspect and revert them; the task was to work inside the repository",
                    ));
                }
                if f.over_budget {
                    reasons.push(over_budget());
                }
                if f.suspect_truncated {
                    reasons.push(Issue::new(
                        IssueType::ModelError,
                        "the model's answer may be truncated (droid reported zero token usage)",
                        "check the model endpoint and run the task again",
                    ));
                }
                if !f.exit_ok {
                    reasons.push(Issue::new(
                        IssueType::AgentError,
                        "droid exited with an error after reporting completion",
                        "read logs for droid's stderr",
                    ));
                }
                if reasons.is_empty() {
                    Status::Success
                } else {
                    Status::Partial
                }
            }
        }
    };
    Verdict { status, reasons }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn end() -> impl Strategy<Value = RunEnd> {
        prop_oneof![
            Just(RunEnd::NotStarted),
            Just(RunEnd::Completed),
            Just(RunEnd::Failed),
            Just(RunEnd::TimedOut),
            Just(RunEnd::Cancelled),
        ]
    }

    fn reported() -> impl Strategy<Value = Option<ReportedStatus>> {
        prop_oneof![
            Just(None),
            Just(Some(ReportedStatus::Success)),
            Just(Some(ReportedStatus::Partial)),
            Just(Some(ReportedStatus::Failed)),
        ]
    }

    prop_compose! {
        fn facts()(end in end(), exit_ok: bool, reported in reported(),
                   verify_exit_codes in proptest::collection::vec(proptest::option::of(-1i32..4), 0..5),
                   files_changed in 0usize..4, permission_denied: bool, suspect_truncated: bool,
                   wrote_outside: bool, over_budget: bool)
                   -> StatusFacts {
            StatusFacts { end, exit_ok, reported, verify_exit_codes, files_changed,
                          permission_denied, suspect_truncated, wrote_outside, over_budget }
        }
    }

    proptest! {
        #[test]
        fn partial_always_has_a_reason(f in facts()) {
            let v = decide(&f);
            if v.status == Status::Partial {
                prop_assert!(!v.reasons.is_empty());
            }
        }

        #[test]
        fn success_means_completed_and_verified(f in facts()) {
            let v = decide(&f);
            if v.status == Status::Success {
                prop_assert_eq!(f.end, RunEnd::Completed);
                prop_assert!(f.exit_ok);
                prop_assert!(f.verify_exit_codes.iter().all(|c| *c == Some(0)));
                prop_assert!(!f.permission_denied && !f.suspect_truncated && !f.wrote_outside);
                prop_assert!(!f.over_budget);
                prop_assert!(v.reasons.is_empty());
            }
        }

        #[test]
        fn the_report_never_upgrades(f in facts()) {
            let claimed = decide(&StatusFacts { reported: Some(ReportedStatus::Success), ..f.clone() });
            let silent = decide(&StatusFacts { reported: None, ..f });
            prop_assert_eq!(claimed.status, silent.status);
        }

        #[test]
        fn terminal_ends_map_directly(f in facts()) {
            let v = decide(&f);
            match f.end {
                RunEnd::NotStarted => prop_assert_eq!(v.status, Status::Error),
                RunEnd::TimedOut => prop_assert_eq!(v.status, Status::Timeout),
                RunEnd::Cancelled => prop_assert_eq!(v.status, Status::Cancelled),
                RunEnd::Failed => prop_assert!(matches!(v.status, Status::Failed | Status::Partial)),
                RunEnd::Completed => prop_assert!(matches!(v.status, Status::Success | Status::Partial | Status::Failed)),
            }
        }
    }

    #[test]
    fn a_spent_budget_is_partial_with_changes_and_failed_without() {
        let facts = |end, files_changed| StatusFacts {
            end,
            exit_ok: false,
            reported: None,
            verify_exit_codes: vec![Some(0)],
            files_changed,
            permission_denied: false,
            suspect_truncated: false,
            wrote_outside: false,
            over_budget: true,
        };
        let kinds = |v: &Verdict| v.reasons.iter().map(|i| i.kind).collect::<Vec<_>>();
        let stopped_with_changes = decide(&facts(RunEnd::Failed, 2));
        assert_eq!(stopped_with_changes.status, Status::Partial);
        assert_eq!(
            kinds(&stopped_with_changes),
            vec![IssueType::BudgetExceeded]
        );
        let stopped_empty = decide(&facts(RunEnd::Failed, 0));
        assert_eq!(stopped_empty.status, Status::Failed);
        assert_eq!(kinds(&stopped_empty), vec![IssueType::BudgetExceeded]);
        // a provider that reports usage only at its end finished first
        let finished_over = decide(&StatusFacts {
            exit_ok: true,
            ..facts(RunEnd::Completed, 1)
        });
        assert_eq!(finished_over.status, Status::Partial);
        assert_eq!(kinds(&finished_over), vec![IssueType::BudgetExceeded]);
    }

    #[test]
    fn a_failing_verify_command_makes_partial() {
        let v = decide(&StatusFacts {
            end: RunEnd::Completed,
            exit_ok: true,
            reported: Some(ReportedStatus::Success),
            verify_exit_codes: vec![Some(0), Some(1)],
            files_changed: 1,
            permission_denied: false,
            suspect_truncated: false,
            wrote_outside: false,
            over_budget: false,
        });
        assert_eq!(v.status, Status::Partial);
        assert_eq!(v.reasons[0].kind, IssueType::TestFailure);
        assert_eq!(
            v.reasons[0].description,
            "1 of 2 verification commands failed"
        );
    }

    /// Exit 127 (not found) and 126 (not executable) are the machine's problem, not the code's:
    /// an `env_issue`, still `partial` (nothing was verified); other failures stay a
    /// `test_failure`, each counted once.
    #[test]
    fn a_verify_command_the_shell_cannot_run_is_an_env_issue_not_a_test_failure() {
        let facts = |codes: Vec<Option<i32>>| StatusFacts {
            end: RunEnd::Completed,
            exit_ok: true,
            reported: Some(ReportedStatus::Success),
            verify_exit_codes: codes,
            files_changed: 1,
            permission_denied: false,
            suspect_truncated: false,
            wrote_outside: false,
            over_budget: false,
        };
        let kinds = |v: &Verdict| v.reasons.iter().map(|i| i.kind).collect::<Vec<_>>();
        let v = decide(&facts(vec![Some(127)]));
        assert_eq!(v.status, Status::Partial);
        assert_eq!(kinds(&v), vec![IssueType::EnvIssue]);
        assert_eq!(
            v.reasons[0].description,
            "1 of 1 verification command could not be run: the shell found no such program \
             (exit 127) or could not execute it (exit 126)"
        );
        let v = decide(&facts(vec![Some(0), Some(126), Some(1), None, Some(127)]));
        assert_eq!(v.status, Status::Partial);
        assert_eq!(kinds(&v), vec![IssueType::TestFailure, IssueType::EnvIssue]);
        assert_eq!(
            v.reasons[0].description,
            "2 of 5 verification commands failed"
        );
        assert!(
            v.reasons[1]
                .description
                .starts_with("2 of 5 verification commands could")
        );
        // after a run that stopped having changed files, too
        let v = decide(&StatusFacts {
            end: RunEnd::Failed,
            ..facts(vec![Some(127)])
        });
        assert_eq!(kinds(&v), vec![IssueType::AgentError, IssueType::EnvIssue]);
    }
}
