//! The judge of a `best_of` (docs/protocol.md#best-of-n): which candidate's attempt wins, by
//! ground truth only, never by what an agent says of its own work. In this order:
//!
//! 1. status `success`: the agent finished and every verification command passed (each
//!    command re-run by droid-executor in the candidate's worktree);
//! 2. fewer issues;
//! 3. a smaller measured diff: fewer lines added and removed, then fewer files;
//! 4. a shorter wall time (the agent's run and its verification, not the wait for a slot).
//!
//! What is still tied goes to the candidate named first in `best_of`. Between rules 1 and 2,
//! a candidate whose agent ran beats one that never did (status `error`): one that never
//! started has no failing test and no diff, and would win rules 2 and 3 with nothing to apply.

use std::cmp::Ordering;

use droid_contract::{Attempt, Status};

/// The index of the winning attempt among `attempts` (in `best_of` order); `None` when there
/// is none.
pub(crate) fn winner(attempts: &[Attempt]) -> Option<usize> {
    // `min_by` keeps the first of equal elements: a tie goes to the earlier candidate
    (0..attempts.len()).min_by(|&a, &b| rank(&attempts[a], &attempts[b]))
}

/// How `a` compares with `b`: `Less` when `a` is the better attempt.
pub(crate) fn rank(a: &Attempt, b: &Attempt) -> Ordering {
    passed(b)
        .cmp(&passed(a))
        .then_with(|| ran(b).cmp(&ran(a)))
        .then_with(|| a.issues.len().cmp(&b.issues.len()))
        .then_with(|| lines(a).cmp(&lines(b)))
        .then_with(|| a.diffstat.files.cmp(&b.diffstat.files))
        .then_with(|| a.duration_ms.cmp(&b.duration_ms))
}

/// Its status is `success` and every verification command exited 0.
fn passed(a: &Attempt) -> bool {
    a.status == Status::Success && a.checks.iter().all(|c| c.exit_code == Some(0))
}

/// Its agent ran: anything but status `error` (nothing ran: not installed, refused, no
/// worktree).
fn ran(a: &Attempt) -> bool {
    a.status != Status::Error
}

/// Lines added and removed.
fn lines(a: &Attempt) -> u64 {
    a.diffstat
        .lines_added
        .saturating_add(a.diffstat.lines_removed)
}

/// One line saying why `won` beat `lost` (the first rule that told them apart), for the logs.
pub(crate) fn why(won: &Attempt, lost: &Attempt) -> &'static str {
    if passed(won) != passed(lost) {
        "its verification passed"
    } else if ran(won) != ran(lost) {
        "its agent ran (the other never started)"
    } else if won.issues.len() != lost.issues.len() {
        "fewer issues"
    } else if lines(won) != lines(lost) || won.diffstat.files != lost.diffstat.files {
        "a smaller diff"
    } else if won.duration_ms != lost.duration_ms {
        "a shorter wall time"
    } else {
        "named first (a tie)"
    }
}

#[cfg(test)]
mod tests {
    use droid_contract::{CheckOutcome, Diffstat, IssueType, ProviderId};
    use pretty_assertions::assert_eq;

    use super::*;

    fn attempt(provider: ProviderId, status: Status) -> Attempt {
        Attempt {
            provider,
            model: None,
            status,
            reason: None,
            issues: Vec::new(),
            duration_ms: 1_000,
            usage: None,
            checks: vec![CheckOutcome {
                command: "make test".into(),
                exit_code: Some(if status == Status::Success { 0 } else { 1 }),
            }],
            diffstat: Diffstat {
                files: 1,
                lines_added: 10,
                lines_removed: 0,
            },
            chosen: false,
            task_id: None,
            worktree: None,
            note: String::new(),
        }
    }

    #[test]
    fn a_passing_verification_beats_everything_else() {
        let mut failed = attempt(ProviderId::Claude, Status::Failed);
        failed.diffstat = Diffstat::default();
        failed.duration_ms = 10;
        failed.issues = vec![IssueType::TestFailure];
        let mut passed = attempt(ProviderId::Codex, Status::Success);
        passed.diffstat.lines_added = 500;
        passed.duration_ms = 90_000;
        passed.issues = vec![IssueType::AgentError, IssueType::EnvIssue];
        assert_eq!(winner(&[failed.clone(), passed.clone()]), Some(1));
        assert_eq!(winner(&[passed.clone(), failed.clone()]), Some(0));
        assert_eq!(why(&passed, &failed), "its verification passed");
    }

    #[test]
    fn success_with_a_failing_check_does_not_count_as_passed() {
        // a status that says success is not taken on its word: every check must have exited 0
        let mut claims = attempt(ProviderId::Droid, Status::Success);
        claims.checks[0].exit_code = None;
        claims.duration_ms = 1;
        let real = attempt(ProviderId::Codex, Status::Success);
        assert_eq!(winner(&[claims, real]), Some(1));
    }

    #[test]
    fn an_agent_that_ran_and_failed_beats_one_that_never_started() {
        // never started: one issue, no diff, no time; ran and failed its check: one issue, a diff
        let mut missing = attempt(ProviderId::Claude, Status::Error);
        missing.issues = vec![IssueType::DroidNotFound];
        missing.diffstat = Diffstat::default();
        missing.duration_ms = 0;
        missing.checks.clear();
        let mut ran = attempt(ProviderId::Codex, Status::Partial);
        ran.issues = vec![IssueType::TestFailure];
        assert_eq!(winner(&[missing.clone(), ran.clone()]), Some(1));
        assert_eq!(
            why(&ran, &missing),
            "its agent ran (the other never started)"
        );
        // a pass still beats everything
        let passed = attempt(ProviderId::Droid, Status::Success);
        assert_eq!(winner(&[ran, missing, passed]), Some(2));
    }

    #[test]
    fn then_fewer_issues() {
        let mut two = attempt(ProviderId::Claude, Status::Failed);
        two.issues = vec![IssueType::TestFailure, IssueType::AgentError];
        two.diffstat = Diffstat::default();
        let mut one = attempt(ProviderId::Codex, Status::Failed);
        one.issues = vec![IssueType::TestFailure];
        assert_eq!(winner(&[two.clone(), one.clone()]), Some(1));
        assert_eq!(why(&one, &two), "fewer issues");
    }

    #[test]
    fn then_fewer_lines_then_fewer_files() {
        let mut big = attempt(ProviderId::Claude, Status::Success);
        big.diffstat = Diffstat {
            files: 1,
            lines_added: 20,
            lines_removed: 5,
        };
        big.duration_ms = 1;
        let mut small = attempt(ProviderId::Codex, Status::Success);
        small.diffstat = Diffstat {
            files: 3,
            lines_added: 10,
            lines_removed: 10,
        };
        assert_eq!(winner(&[big.clone(), small.clone()]), Some(1));
        assert_eq!(why(&small, &big), "a smaller diff");
        // the same lines: fewer files wins
        let mut spread = small.clone();
        spread.diffstat.files = 4;
        spread.duration_ms = 1;
        assert_eq!(winner(&[spread, small]), Some(1));
    }

    #[test]
    fn then_a_shorter_wall_time() {
        let slow = attempt(ProviderId::Claude, Status::Success);
        let mut fast = attempt(ProviderId::Codex, Status::Success);
        fast.duration_ms = 999;
        assert_eq!(winner(&[slow.clone(), fast.clone()]), Some(1));
        assert_eq!(why(&fast, &slow), "a shorter wall time");
    }

    #[test]
    fn a_tie_goes_to_the_candidate_named_first_and_none_wins_nothing() {
        let a = attempt(ProviderId::Claude, Status::Partial);
        let b = attempt(ProviderId::Codex, Status::Partial);
        assert_eq!(winner(&[a.clone(), b.clone()]), Some(0));
        assert_eq!(winner(&[b.clone(), a.clone()]), Some(0));
        assert_eq!(why(&a, &b), "named first (a tie)");
        assert_eq!(winner(&[]), None);
    }

    #[test]
    fn when_every_candidate_fails_the_best_of_them_still_wins() {
        let mut error = attempt(ProviderId::Gemini, Status::Error);
        error.issues = vec![IssueType::DroidNotFound];
        error.diffstat = Diffstat::default();
        error.checks = Vec::new();
        let mut failed = attempt(ProviderId::Codex, Status::Failed);
        failed.issues = vec![IssueType::TestFailure];
        let mut timeout = attempt(ProviderId::Claude, Status::Timeout);
        timeout.issues = vec![IssueType::Timeout, IssueType::TestFailure];
        // the two that ran beat the one that never started; of them, fewer issues wins
        assert_eq!(winner(&[timeout, failed, error]), Some(1));
    }
}
