//! Property tests for [`extract`]: a `droid-executor-report` block built from generated fields,
//! embedded anywhere in generated final text, comes back with exactly those fields (read by the
//! lenient rules: status synonyms, trimmed summary, unknown issue types as `agent_error`), and the
//! prose is the text around the block.

use droid_contract::{Issue, IssueType, ReportedStatus};
use pretty_assertions::assert_eq;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::sample::select;
use serde_json::{Map, Value, json};

use super::{Report, extract};
use crate::run::prompt::REPORT_FENCE;

/// Cases per property.
const CASES: u32 = 256;

/// The status words droid may write, and what each means.
const STATUS_WORDS: &[(&str, ReportedStatus)] = &[
    ("success", ReportedStatus::Success),
    ("succeeded", ReportedStatus::Success),
    ("done", ReportedStatus::Success),
    ("complete", ReportedStatus::Success),
    ("completed", ReportedStatus::Success),
    ("partial", ReportedStatus::Partial),
    ("failed", ReportedStatus::Failed),
    ("failure", ReportedStatus::Failed),
    ("error", ReportedStatus::Failed),
];

/// Every issue type's wire name.
const ISSUE_TYPES: &[IssueType] = &[
    IssueType::TestFailure,
    IssueType::EnvIssue,
    IssueType::UnclearRequirement,
    IssueType::Conflict,
    IssueType::ValidationError,
    IssueType::Timeout,
    IssueType::Cancelled,
    IssueType::BridgeFailure,
    IssueType::DroidNotFound,
    IssueType::AuthFailure,
    IssueType::ModelError,
    IssueType::PermissionDenied,
    IssueType::AgentError,
    IssueType::Internal,
];

fn open_fence() -> String {
    format!("```{REPORT_FENCE}")
}

/// Text a model writes: any characters, with markdown fences and backticks common.
fn text() -> impl Strategy<Value = String> {
    let piece = prop_oneof![
        4 => vec(any::<char>(), 1..6).prop_map(String::from_iter),
        2 => "[a-z ]{1,8}",
        1 => Just("```".to_owned()),
        1 => Just("`".to_owned()),
        1 => Just("\n".to_owned()),
        1 => Just("```rust\nfn x() {}\n```".to_owned()),
        1 => Just("  \t".to_owned()),
        1 => Just("\"\\{}".to_owned()),
    ];
    vec(piece, 0..6).prop_map(|p| p.concat())
}

/// A field's text: anything but the opening fence itself (a summary that quotes the fence is
/// indistinguishable from a second block).
fn field() -> impl Strategy<Value = String> {
    text().prop_filter("holds the opening fence", |s| !s.contains(&open_fence()))
}

/// A status as written (synonym, any case, padded) and what it means; or anything else, or absent.
fn status() -> impl Strategy<Value = (Option<Value>, Option<ReportedStatus>)> {
    let word =
        (select(STATUS_WORDS), any::<bool>(), "[ \t]{0,2}").prop_map(|((w, st), upper, pad)| {
            let w = if upper {
                w.to_uppercase()
            } else {
                (*w).to_owned()
            };
            (Some(json!(format!("{pad}{w}{pad}"))), Some(st))
        });
    let other = field().prop_map(|s| {
        let meaning = STATUS_WORDS
            .iter()
            .find(|(w, _)| *w == s.trim().to_ascii_lowercase())
            .map(|(_, st)| *st);
        (Some(json!(s)), meaning)
    });
    prop_oneof![
        3 => word,
        1 => other,
        1 => Just((Some(json!(3)), None)),
        1 => Just((None, None)),
    ]
}

/// An issue as written and as read: an unknown or missing type reads as `agent_error`, a
/// missing suggested action as empty.
fn issue() -> impl Strategy<Value = (Value, Issue)> {
    let kind = prop_oneof![
        3 => select(ISSUE_TYPES).prop_map(|t| (Some(json!(t.as_str())), t)),
        1 => "[a-z_]{1,12}".prop_map(|t| {
            let kind = ISSUE_TYPES
                .iter()
                .copied()
                .find(|k| k.as_str() == t)
                .unwrap_or(IssueType::AgentError);
            (Some(json!(t)), kind)
        }),
        1 => Just((None, IssueType::AgentError)),
    ];
    (kind, field(), proptest::option::of(field())).prop_map(|((ty, kind), description, action)| {
        let mut m = Map::new();
        if let Some(ty) = ty {
            m.insert("type".into(), ty);
        }
        m.insert("description".into(), json!(description));
        if let Some(a) = &action {
            m.insert("suggested_action".into(), json!(a));
        }
        (
            Value::Object(m),
            Issue::new(kind, description, action.unwrap_or_default()),
        )
    })
}

/// A report block's JSON and the report it must read as.
fn report() -> impl Strategy<Value = (Value, Report)> {
    (
        status(),
        proptest::option::of(field()),
        vec((field(), vec(field(), 0..3)), 0..4),
        vec(issue(), 0..4),
    )
        .prop_map(|((status_json, status), summary, files, issues)| {
            let mut m = Map::new();
            if let Some(s) = status_json {
                m.insert("status".into(), s);
            }
            if let Some(s) = &summary {
                m.insert("summary".into(), json!(s));
            }
            let files_json: Vec<Value> = files
                .iter()
                .map(|(path, hl)| json!({"path": path, "highlights": hl}))
                .collect();
            m.insert("files".into(), json!(files_json));
            m.insert(
                "issues".into(),
                Value::Array(issues.iter().map(|(j, _)| j.clone()).collect()),
            );
            let want = Report {
                status,
                summary: summary
                    .map(|s| s.trim().to_owned())
                    .filter(|s| !s.is_empty()),
                files,
                issues: issues.into_iter().map(|(_, i)| i).collect(),
            };
            (Value::Object(m), want)
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(CASES))]

    /// The last block is read with the generated fields, whether droid wrote its JSON compact or
    /// pretty, and the prose is the text before and after it, trimmed.
    #[test]
    fn a_block_anywhere_is_extracted(
        (body, want) in report(),
        pretty in any::<bool>(),
        before in text(),
        after in text(),
    ) {
        // a later opening fence would be the last block, by design
        prop_assume!(!format!("```{after}").contains(&open_fence()));
        let body = if pretty {
            serde_json::to_string_pretty(&body)
        } else {
            serde_json::to_string(&body)
        }
        .unwrap();
        let final_text = format!("{before}{}\n{body}\n```{after}", open_fence());
        let (prose, report) = extract(&final_text);
        prop_assert_eq!(report, Some(want), "{}", final_text);
        prop_assert_eq!(prose, format!("{before}{after}").trim().to_owned());
    }

    /// Text without the opening fence has no report and comes back trimmed.
    #[test]
    fn no_block_no_report(t in text()) {
        prop_assume!(!t.contains(&open_fence()));
        prop_assert_eq!(extract(&t), (t.trim().to_owned(), None));
    }
}

/// Regression (found by `a_block_anywhere_is_extracted`): a report whose strings hold "```" (a
/// summary quoting a code block) ended at that "```", so the whole report was lost, its status
/// included, and half of its JSON was left in the prose.
#[test]
fn backticks_inside_the_report_do_not_end_it() {
    let text = "Done.\n```droid-executor-report\n\
                {\"status\": \"failed\", \"summary\": \"ran ```cargo test```\"}\n```\nbye";
    let (prose, report) = extract(text);
    assert_eq!(prose, "Done.\n\nbye");
    assert_eq!(
        report,
        Some(Report {
            status: Some(ReportedStatus::Failed),
            summary: Some("ran ```cargo test```".into()),
            files: Vec::new(),
            issues: Vec::new(),
        })
    );
}
