//! Human-readable output: the report printed by `run` without `--json`, and the one-line live
//! progress shown on a terminal's stderr.

use std::fmt::Write as _;
use std::io::Write as _;

use droid_contract::{
    AgentChoice, Attempt, ChangeType, CommandRun, CommandSource, ExecutionResult, SandboxInfo,
    SandboxKind, cannot_run,
};
use droid_exec::RunEvent;
use tokio::sync::mpsc;

/// The most lines of each output stream of a failing verification command the report shows.
const TAIL_LINES: usize = 4;
/// The most characters of each of those lines.
const TAIL_WIDTH: usize = 200;
/// The most failing verification commands whose output the report shows.
const TAIL_COMMANDS: usize = 3;
/// Where a tail's lines start: under the command.
const TAIL_INDENT: &str = "            ";

/// The end of a failing verification command's output, for the report: the last
/// [`TAIL_LINES`] non-blank lines of stdout, then of stderr, each prefixed with its stream, cut
/// to [`TAIL_WIDTH`] characters, control characters (terminal escapes included: the output is
/// the repository's, untrusted) shown as `?`. The excerpts are the result's, secrets already
/// redacted by the engine, as everywhere in the report.
fn output_tail(c: &CommandRun) -> String {
    let mut s = String::new();
    for (stream, text) in [("stdout", &c.stdout_excerpt), ("stderr", &c.stderr_excerpt)] {
        let lines: Vec<&str> = text
            .split(['\n', '\r'])
            .filter(|l| !l.trim().is_empty())
            .collect();
        let shown = &lines[lines.len().saturating_sub(TAIL_LINES)..];
        let earlier = lines.len() - shown.len();
        if earlier > 0 {
            let _ = writeln!(
                s,
                "{TAIL_INDENT}{stream}: … {} (--json has the excerpt)",
                count(earlier, "earlier line", "earlier lines")
            );
        }
        for line in shown {
            let mut printable: String = line
                .chars()
                .take(TAIL_WIDTH)
                .map(|c| if c.is_control() && c != '\t' { '?' } else { c })
                .collect();
            if line.chars().nth(TAIL_WIDTH).is_some() {
                printable.push('…');
            }
            let _ = writeln!(s, "{TAIL_INDENT}{stream}: {}", printable.trim_end());
        }
    }
    s
}

/// `n` and the noun, singular or plural.
pub(crate) fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The report's one line on confinement: `sandbox: landlock (ABI 7), writes confined to
/// repo_root and 12 other paths`, or `sandbox: none (off by config)`.
fn sandbox_line(sb: &SandboxInfo) -> String {
    match sb.kind {
        SandboxKind::Landlock => {
            let abi = sb.abi.map(|n| format!(" (ABI {n})")).unwrap_or_default();
            format!(
                "sandbox: landlock{abi}, writes confined to repo_root and {} other paths",
                sb.writable.len().saturating_sub(1)
            )
        }
        SandboxKind::None => format!(
            "sandbox: none ({})",
            sb.reason.as_deref().unwrap_or("not confined")
        ),
    }
}

/// The most characters of an attempt's note on its line of the report.
const NOTE_WIDTH: usize = 100;

/// One attempt (`fallback`, `best_of`) as one line: `* codex  success  3.1 s  15 tokens` for
/// the chosen one, `  droid:custom:M-0  failed (rate_limited)  90.4 s  0 tokens  — HTTP 429 …`
/// for another.
fn attempt_line(a: &Attempt) -> String {
    let label = AgentChoice {
        provider: a.provider,
        model: a.model.clone(),
    }
    .label();
    let status = match a.reason {
        Some(why) => format!("{} ({})", a.status.as_str(), why.as_str()),
        None => a.status.as_str().to_owned(),
    };
    let tokens = a.usage.as_ref().map_or_else(
        || "? tokens".to_owned(),
        |u| {
            count(
                usize::try_from(u.budget_tokens()).unwrap_or(usize::MAX),
                "token",
                "tokens",
            )
        },
    );
    let mut line = format!(
        "{} {label}  {status}  {:.1} s  {tokens}",
        if a.chosen { '*' } else { ' ' },
        a.duration_ms as f64 / 1000.0
    );
    if !a.chosen && !a.note.is_empty() {
        let note: String = a
            .note
            .chars()
            .take(NOTE_WIDTH)
            .map(|c| if c.is_control() { '?' } else { c })
            .collect();
        let cut = if a.note.chars().nth(NOTE_WIDTH).is_some() {
            "…"
        } else {
            ""
        };
        let _ = write!(line, "  — {note}{cut}");
    }
    format!(" {line}")
}

/// The result as a short report.
pub(crate) fn report(r: &ExecutionResult) -> String {
    report_with(r, true)
}

/// The report of a result whose summary (the agent's final reply) is shown above it (`pend`).
pub(crate) fn report_under_reply(r: &ExecutionResult) -> String {
    report_with(r, false)
}

fn report_with(r: &ExecutionResult, with_summary: bool) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "status: {} ({:.1} s)",
        r.status.as_str(),
        r.duration_ms as f64 / 1000.0
    );
    if let Some(a) = &r.agent {
        let version = a
            .version
            .as_deref()
            .map(|v| format!(" {v}"))
            .unwrap_or_default();
        let model = a
            .model
            .as_deref()
            .map(|m| format!(", model {m}"))
            .unwrap_or_default();
        let _ = writeln!(
            s,
            "agent: {} ({}{version}{model})",
            a.provider,
            a.provider.display_name()
        );
    }
    if let Some(sb) = &r.sandbox {
        let _ = writeln!(s, "{}", sandbox_line(sb));
    }
    if let Some(w) = &r.worktree {
        let _ = writeln!(s, "{}", worktree_line(w));
    }
    if !r.attempts.is_empty() {
        let _ = writeln!(s, "attempts:");
        for a in &r.attempts {
            let _ = writeln!(s, "{}", attempt_line(a));
        }
    }
    if with_summary {
        let _ = writeln!(s, "summary: {}", r.summary);
    }
    if !r.files_changed.is_empty() {
        let _ = writeln!(s, "files changed:");
        for f in &r.files_changed {
            let tag = match f.change_type {
                ChangeType::Added => "A",
                ChangeType::Modified => "M",
                ChangeType::Deleted => "D",
                ChangeType::Renamed => "R",
            };
            let lines = match (f.lines_added, f.lines_removed) {
                (Some(a), Some(d)) => format!(" (+{a} -{d})"),
                _ => String::new(),
            };
            let from = f
                .old_path
                .as_ref()
                .map(|o| format!("{o} -> "))
                .unwrap_or_default();
            let hl = if f.highlights.is_empty() {
                String::new()
            } else {
                format!("  {}", f.highlights.join("; "))
            };
            let _ = writeln!(s, "  {tag} {from}{}{lines}{hl}", f.path);
        }
    }
    if !r.commands_run.is_empty() {
        let _ = writeln!(s, "commands:");
        let agent = r.agent.as_ref().map_or("agent", |a| a.provider.as_str());
        let mut tails = 0;
        let mut untold = 0;
        for c in &r.commands_run {
            let who = match c.source {
                CommandSource::Agent => agent,
                CommandSource::Verify => "verify",
                CommandSource::Setup => "setup",
            };
            // no code: a verification command was killed (its deadline); an agent's command
            // may simply not say (Gemini CLI never reports one), or was cut short
            let code = match (c.exit_code, c.source) {
                (Some(code), _) => format!("exit {code}"),
                (None, CommandSource::Verify | CommandSource::Setup) => "killed".to_owned(),
                (None, CommandSource::Agent) => "exit ?".to_owned(),
            };
            let _ = writeln!(s, "  {who:<8} {code:>7}  {}", c.command);
            // why a verification failed, without running the task again with --json
            if c.source == CommandSource::Verify && c.exit_code != Some(0) {
                if tails < TAIL_COMMANDS {
                    tails += 1;
                    s.push_str(&output_tail(c));
                } else {
                    untold += 1;
                }
            }
        }
        if untold > 0 {
            let _ = writeln!(
                s,
                "  (the output of {} is in --json)",
                count(
                    untold,
                    "more failing verification command",
                    "more failing verification commands"
                )
            );
        }
    }
    if let Some(p) = r.tests.passed {
        let verify = || {
            r.commands_run
                .iter()
                .filter(|c| c.source == CommandSource::Verify && c.exit_code != Some(0))
        };
        let tests = if p {
            "passed"
        } else if verify().all(|c| cannot_run(c.exit_code)) && verify().next().is_some() {
            // exit 126/127: the shell could not run it, an env_issue; nothing was tested
            "not verified (a verification command was not found or not executable)"
        } else {
            "FAILED"
        };
        let _ = writeln!(s, "tests: {tests}");
    }
    if !r.issues.is_empty() {
        let _ = writeln!(s, "issues:");
        for i in &r.issues {
            let _ = writeln!(
                s,
                "  [{}] {}\n      → {}",
                i.kind.as_str(),
                i.description,
                i.suggested_action
            );
        }
    }
    if let Some(id) = &r.session_id {
        let _ = writeln!(s, "session: {id}");
    }
    s.trim_end().to_owned()
}

/// A stored event (`{"seq", "at", "type", …}`) as one line: its time and what happened.
pub(crate) fn event_line(stored: &serde_json::Value) -> String {
    let at = stored.get("at").and_then(|v| v.as_str()).unwrap_or("");
    let what = serde_json::from_value::<RunEvent>(stored.clone())
        .ok()
        .map_or_else(
            || {
                let kind = stored.get("type").and_then(|v| v.as_str()).unwrap_or("?");
                format!("({kind})")
            },
            |ev| {
                ev.summary()
                    .unwrap_or_else(|| format!("({})", event_kind(&ev)))
            },
        );
    format!("{at} {what}")
}

fn event_kind(ev: &RunEvent) -> &'static str {
    match ev {
        RunEvent::Started { .. } => "started",
        RunEvent::Message { .. } => "message",
        RunEvent::ToolCall { .. } => "tool call",
        RunEvent::ToolResult { .. } => "tool result",
        RunEvent::Progress { .. } => "progress",
        RunEvent::Warning { .. } => "warning",
        RunEvent::Completed { .. } => "completed",
    }
}

/// Show the latest event as one line on stderr until the run completes.
pub(crate) async fn progress(mut rx: mpsc::Receiver<RunEvent>) {
    let started = std::time::Instant::now();
    while let Some(ev) = rx.recv().await {
        if matches!(ev, RunEvent::Completed { .. }) {
            eprint!("\r\x1b[2K");
            break;
        }
        let Some(line) = ev.summary() else { continue };
        eprint!("\r\x1b[2K[{:>4}s] {line}", started.elapsed().as_secs());
        let _ = std::io::stderr().flush();
    }
}

/// The worktree a task ran in, and what to do with its change while it waits.
fn worktree_line(w: &droid_contract::WorktreeInfo) -> String {
    let id = w
        .branch
        .strip_prefix("droid-executor/")
        .unwrap_or(&w.branch);
    let mut line = format!(
        "worktree: {} (branch {}, {})",
        w.path,
        w.branch,
        w.state.as_str()
    );
    if w.state.is_live() {
        line.push_str(&format!(
            "\n  review it, then: droid-executor tasks apply {id}   (or: tasks discard {id})"
        ));
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;
    use droid_contract::{Diffstat, IssueType, ProviderId, Status, Usage};

    #[test]
    fn each_attempt_is_one_line_with_the_chosen_marked() {
        let attempt = |provider, model: Option<&str>, status, reason, chosen| Attempt {
            provider,
            model: model.map(str::to_owned),
            status,
            reason,
            issues: reason.into_iter().collect(),
            duration_ms: 90_400,
            usage: Some(Usage {
                input_tokens: 10,
                output_tokens: 5,
                ..Usage::default()
            }),
            checks: Vec::new(),
            diffstat: Diffstat::default(),
            chosen,
            task_id: None,
            worktree: None,
            note: "droid's model provider refused for a rate limit\nsecond line".into(),
        };
        assert_eq!(
            attempt_line(&attempt(
                ProviderId::Droid,
                Some("custom:M-0"),
                Status::Failed,
                Some(IssueType::RateLimited),
                false
            )),
            "   droid:custom:M-0  failed (rate_limited)  90.4 s  15 tokens  — droid's model \
             provider refused for a rate limit?second line"
        );
        assert_eq!(
            attempt_line(&attempt(
                ProviderId::Codex,
                None,
                Status::Success,
                None,
                true
            )),
            " * codex  success  90.4 s  15 tokens"
        );
    }
}
