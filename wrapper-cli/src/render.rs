//! Human-readable output: the report printed by `run` without `--json`, and the one-line live
//! progress shown on a terminal's stderr.

use std::fmt::Write as _;
use std::io::Write as _;

use droid_contract::{ChangeType, CommandSource, ExecutionResult, SandboxInfo, SandboxKind};
use droid_exec::RunEvent;
use tokio::sync::mpsc;

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
        for c in &r.commands_run {
            let who = match c.source {
                CommandSource::Agent => agent,
                CommandSource::Verify => "verify",
            };
            // no code: a verification command was killed (its deadline); an agent's command
            // may simply not say (Gemini CLI never reports one), or was cut short
            let code = match (c.exit_code, c.source) {
                (Some(code), _) => format!("exit {code}"),
                (None, CommandSource::Verify) => "killed".to_owned(),
                (None, CommandSource::Agent) => "exit ?".to_owned(),
            };
            let _ = writeln!(s, "  {who:<8} {code:>7}  {}", c.command);
        }
    }
    if let Some(p) = r.tests.passed {
        let _ = writeln!(s, "tests: {}", if p { "passed" } else { "FAILED" });
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
