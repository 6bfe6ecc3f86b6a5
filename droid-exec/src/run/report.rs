//! droid's own report: the last fenced `droid-executor-report` block of its final message, parsed
//! leniently (bad or missing fields are ignored). It adds detail (summary, per-file highlights,
//! issues) and can lower a status, never raise one.

use droid_contract::{Issue, IssueType, ReportedStatus};
use serde_json::Value;

use crate::run::prompt::REPORT_FENCE;

/// What droid said about its own work.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Report {
    /// Its claimed status.
    pub status: Option<ReportedStatus>,
    /// Its summary.
    pub summary: Option<String>,
    /// Per-file highlights: (path as droid wrote it, highlights).
    pub files: Vec<(String, Vec<String>)>,
    /// Issues it raised; an unknown `type` becomes `agent_error`.
    pub issues: Vec<Issue>,
}

/// The final text with the report block removed, and the parsed report (if there was a block).
pub fn extract(final_text: &str) -> (String, Option<Report>) {
    let open = format!("```{REPORT_FENCE}");
    let Some(start) = final_text.rfind(&open) else {
        return (final_text.trim().to_owned(), None);
    };
    let body_start = start + open.len();
    let rest = &final_text[body_start..];
    let (body, after) = match fence_after_json(rest).or_else(|| rest.find("```")) {
        Some(end) => (&rest[..end], &rest[end + 3..]),
        None => (rest, ""),
    };
    let prose = format!("{}{}", &final_text[..start], after)
        .trim()
        .to_owned();
    let report = serde_json::from_str::<Value>(body.trim())
        .ok()
        .map(|v| from_value(&v));
    (prose, report.or(Some(Report::default())))
}

/// Where the closing fence is when `rest` holds one JSON value and then the fence: the JSON's own
/// strings may hold "```" (a summary quoting a code block), so the first "```" is not always the
/// end of the block.
fn fence_after_json(rest: &str) -> Option<usize> {
    let mut values = serde_json::Deserializer::from_str(rest).into_iter::<Value>();
    values.next()?.ok()?;
    let end = values.byte_offset();
    let tail = &rest[end..];
    let gap = tail.len() - tail.trim_start().len();
    tail[gap..].starts_with("```").then_some(end + gap)
}

fn from_value(v: &Value) -> Report {
    let status = v.get("status").and_then(Value::as_str).and_then(|s| {
        match s.trim().to_ascii_lowercase().as_str() {
            "success" | "succeeded" | "done" | "complete" | "completed" => {
                Some(ReportedStatus::Success)
            }
            "partial" => Some(ReportedStatus::Partial),
            "failed" | "failure" | "error" => Some(ReportedStatus::Failed),
            _ => None,
        }
    });
    let summary = v
        .get("summary")
        .and_then(Value::as_str)
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_owned);
    let files = v
        .get("files")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|f| {
                    let path = f.get("path")?.as_str()?.to_owned();
                    let hl = f
                        .get("highlights")
                        .and_then(Value::as_array)
                        .map(|h| {
                            h.iter()
                                .filter_map(Value::as_str)
                                .map(str::to_owned)
                                .collect()
                        })
                        .unwrap_or_default();
                    Some((path, hl))
                })
                .collect()
        })
        .unwrap_or_default();
    let issues = v
        .get("issues")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|i| {
                    let description = i.get("description")?.as_str()?.to_owned();
                    let kind = i
                        .get("type")
                        .cloned()
                        .and_then(|t| serde_json::from_value::<IssueType>(t).ok())
                        .unwrap_or(IssueType::AgentError);
                    let action = i
                        .get("suggested_action")
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned();
                    Some(Issue::new(kind, description, action))
                })
                .collect()
        })
        .unwrap_or_default();
    Report {
        status,
        summary,
        files,
        issues,
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn takes_the_last_block_and_strips_it() {
        let text = "Did it.\n```droid-executor-report\n{\"status\":\"old\"}\n```\nmore\n```droid-executor-report\n{\"status\": \"partial\", \"summary\": \"half\", \"files\": [{\"path\": \"a.rs\", \"highlights\": [\"x\"]}, {\"nopath\": 1}], \"issues\": [{\"type\": \"env_issue\", \"description\": \"no npm\", \"suggested_action\": \"install\"}, {\"type\": \"weird\", \"description\": \"d\"}]}\n```";
        let (prose, report) = extract(text);
        assert_eq!(
            prose,
            "Did it.\n```droid-executor-report\n{\"status\":\"old\"}\n```\nmore"
        );
        assert_eq!(
            report,
            Some(Report {
                status: Some(ReportedStatus::Partial),
                summary: Some("half".into()),
                files: vec![("a.rs".into(), vec!["x".into()])],
                issues: vec![
                    Issue::new(IssueType::EnvIssue, "no npm", "install"),
                    Issue::new(IssueType::AgentError, "d", ""),
                ],
            })
        );
    }

    #[test]
    fn garbage_is_tolerated() {
        assert_eq!(extract("plain answer"), ("plain answer".into(), None));
        let (prose, r) = extract("x\n```droid-executor-report\n{not json");
        assert_eq!(prose, "x");
        assert_eq!(r, Some(Report::default()));
    }
}

#[cfg(test)]
mod props;
