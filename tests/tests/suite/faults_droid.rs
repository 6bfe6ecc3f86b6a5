//! Fault matrix, droid's own faults (the fake droid plays them; the real one cannot be made to):
//! missing, not executable, exiting at once, killed mid-stream, garbage, a partial line, a
//! 64 MiB line, a 1 GiB flood, a silent hang, SIGTERM ignored, a grandchild in its own session.
//! Each case goes through every front-end (CLI, HTTP bridge, MCP server), and each asserts the
//! exact status and issue type, one result, no process left, and bounded memory.

use std::os::unix::fs::PermissionsExt as _;

use droid_contract::Status;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::fault_matrix::{Driven, FaultHome, Front, Observed, drive, issue_kinds, record};

/// The memory bound of issue 7: a front-end stays under this while droid floods it.
const RSS_LIMIT_MIB: f64 = 64.0;

/// Asserts what every fault case must hold: the status, that `issue` is among the issues,
/// exactly one result, nothing left running, memory under the bound.
fn assert_outcome(d: &Driven, status: Status, issue: Option<&str>) {
    let ctx = || format!("{:?}: {:#?}\nstderr:\n{}", d.front, d.result, d.stderr);
    assert_eq!(d.result.status, status, "{}", ctx());
    if let Some(issue) = issue {
        assert!(issue_kinds(&d.result).contains(&issue), "{}", ctx());
    }
    assert_eq!(d.results, 1, "{}", ctx());
    assert_eq!(d.left, Vec::<i32>::new(), "processes left: {}", ctx());
    // 0 = not measured: the CLI exited before the first sample (droid missing)
    assert!(
        d.peak_rss_mib < RSS_LIMIT_MIB,
        "peak RSS {} MiB: {}",
        d.peak_rss_mib,
        ctx()
    );
}

/// One fault case: a fresh HOME per front-end playing `steps` (with `config` lines), the
/// request with `extra` fields, optionally a different droid command.
struct Case<'a> {
    prefix: &'a str,
    steps: Value,
    config: &'a str,
    extra: Value,
    droid: Option<&'a dyn Fn(&FaultHome) -> std::path::PathBuf>,
}

impl Case<'_> {
    /// Drives the case through every front-end, checks each outcome with `check`, and returns
    /// the rows (noted with `note`) to [`record`].
    async fn every_front_end(
        &self,
        check: impl Fn(&FaultHome, &Driven),
        note: impl Fn(&Driven) -> String,
    ) -> Vec<Observed> {
        let mut rows = Vec::new();
        for front in Front::ALL {
            let mut fh = FaultHome::new(self.prefix, &self.steps, self.config);
            if let Some(droid) = self.droid {
                let path = droid(&fh);
                fh.droid = Some(path);
            }
            let request = fh.request(self.extra.clone());
            let d = drive(front, &fh, &request).await;
            check(&fh, &d);
            rows.push(Observed::of(&d, "fake", note(&d)));
        }
        rows
    }
}

fn plain(steps: Value) -> Case<'static> {
    Case {
        prefix: "fault",
        steps,
        config: "",
        extra: json!({}),
        droid: None,
    }
}

/// The case whose point is memory: the peak was measured, and stayed under the bound.
fn rss_note(d: &Driven) -> String {
    assert!(d.peak_rss_mib > 0.0, "{:?}: RSS never sampled", d.front);
    format!("peak RSS {} MiB", d.peak_rss_mib)
}

/// The first issue's description, the test's own temp dir written `$TMP/…` (the matrix must not
/// name one machine's paths).
fn first_issue(d: &Driven) -> String {
    let text = d
        .result
        .issues
        .first()
        .map(|i| i.description.clone())
        .unwrap_or_default();
    let tmp = format!("{}/", std::env::temp_dir().display());
    match text.find(&tmp) {
        Some(start) => {
            let rest = &text[start + tmp.len()..];
            let end = rest.find('/').unwrap_or(rest.len());
            format!("{}$TMP/…{}", &text[..start], &rest[end..])
        }
        None => text,
    }
}

/// droid never started: no invocation was recorded.
fn never_started(fh: &FaultHome, d: &Driven) {
    assert!(fh.record().is_none(), "droid ran: {:?}", d.front);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_missing_is_error_droid_not_found() {
    let case = Case {
        droid: Some(&|fh| fh.home.file("no-such-droid")),
        ..plain(json!([{"completion": "unreachable"}]))
    };
    let rows = case
        .every_front_end(
            |fh, d| {
                assert_outcome(d, Status::Error, Some("droid_not_found"));
                never_started(fh, d);
            },
            first_issue,
        )
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_not_executable_is_error_droid_not_found() {
    let case = Case {
        droid: Some(&|fh| {
            let path = fh.home.file("droid-not-executable");
            std::fs::write(&path, "#!/bin/sh\nexit 0\n").unwrap();
            std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
            path
        }),
        ..plain(json!([{"completion": "unreachable"}]))
    };
    let rows = case
        .every_front_end(
            |fh, d| {
                assert_outcome(d, Status::Error, Some("droid_not_found"));
                assert!(
                    d.result.summary.contains("not executable"),
                    "{:#?}",
                    d.result
                );
                never_started(fh, d);
            },
            first_issue,
        )
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_exiting_at_once_is_failed_agent_error() {
    let rows = plain(json!([{"exit": 1}]))
        .every_front_end(
            |_, d| assert_outcome(d, Status::Failed, Some("agent_error")),
            first_issue,
        )
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_killed_mid_stream_is_failed_agent_error() {
    let steps = json!([
        {"emit": {"type": "system", "subtype": "init", "session_id": "s-1", "model": "m"}},
        {"emit": {"type": "message", "role": "assistant", "text": "Working on it"}},
        {"kill_self": "SIGKILL"},
    ]);
    let rows = plain(steps)
        .every_front_end(
            |_, d| {
                assert_outcome(d, Status::Failed, Some("agent_error"));
                assert!(first_issue(d).contains("killed"), "{:#?}", d.result);
            },
            first_issue,
        )
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_output_is_logged_and_failed_agent_error() {
    let steps = json!([
        {"raw": "\u{1b}[31mnot json at all"},
        {"raw": "{\"type\": 42, \"broken"},
        {"raw": "[1, 2, 3]"},
        {"raw": "{\"type\": \"no_such_event\"}"},
        {"exit": 0},
    ]);
    let rows = plain(steps)
        .every_front_end(
            |_, d| {
                assert_outcome(d, Status::Failed, Some("agent_error"));
                let logs = d.result.logs.join("\n");
                assert!(logs.contains("not json at all"), "{logs}");
                assert!(logs.contains("no_such_event"), "{logs}");
            },
            |d| format!("{} lines kept in logs", d.result.logs.len()),
        )
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_json_line_then_death_is_failed_agent_error() {
    let steps = json!([
        {"emit": {"type": "message", "role": "assistant", "text": "Starting"}},
        {"partial": "{\"type\": \"completion\", \"finalText\": \"Do"},
        {"kill_self": "SIGKILL"},
    ]);
    let rows = plain(steps)
        .every_front_end(
            |_, d| assert_outcome(d, Status::Failed, Some("agent_error")),
            first_issue,
        )
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_line_is_skipped_and_memory_stays_bounded() {
    let steps = json!([
        {"long_line": 64 * 1024 * 1024},
        {"completion": "Done after a long line."},
    ]);
    let rows = plain(steps)
        .every_front_end(
            |_, d| {
                assert_outcome(d, Status::Success, None);
                let logs = d.result.logs.join("\n");
                assert!(
                    logs.contains(&format!("droid printed a {}-byte line", 64 * 1024 * 1024)),
                    "{logs}"
                );
            },
            rss_note,
        )
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_1_gib_flood_keeps_memory_under_64_mib() {
    let steps = json!([
        {"flood_bytes": 1024_u64 * 1024 * 1024},
        {"completion": "Done after a flood."},
    ]);
    let rows = plain(steps)
        .every_front_end(|_, d| assert_outcome(d, Status::Success, None), rss_note)
        .await;
    record(rows);
}

/// droid's own events, not noise: 256 MiB of assistant messages and Execute calls with their
/// results (each result 4 KiB), as a runaway session would print them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_256_mib_flood_of_events_keeps_memory_under_64_mib() {
    let text = "y".repeat(1000);
    let output = format!("{}\n[Process exited with code 0]", "z".repeat(4096));
    let steps = json!([
        {"flood_events": {"bytes": 256_u64 * 1024 * 1024, "events": [
            {"type": "message", "role": "assistant", "text": text},
            {"type": "tool_call", "id": "c1", "toolName": "Execute", "toolId": "Execute",
             "parameters": {"command": "echo flood"}},
            {"type": "tool_result", "id": "c1", "toolId": "Execute", "isError": false,
             "value": output},
        ]}},
        {"completion": "Done after a flood of events."},
    ]);
    let rows = plain(steps)
        .every_front_end(|_, d| assert_outcome(d, Status::Success, None), rss_note)
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_silent_hang_is_timeout_at_the_deadline() {
    let case = Case {
        extra: json!({"max_runtime_seconds": 2}),
        ..plain(json!([{"hang": true}]))
    };
    let rows = case
        .every_front_end(
            |_, d| assert_outcome(d, Status::Timeout, Some("timeout")),
            |d| format!("ran {:.1} s", d.result.duration_ms as f64 / 1000.0),
        )
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ignoring_sigterm_is_timeout_and_killed_after_the_grace() {
    let case = Case {
        extra: json!({"max_runtime_seconds": 2}),
        ..plain(json!([{"ignore_sigterm": true}, {"hang": true}]))
    };
    let rows = case
        .every_front_end(
            |_, d| assert_outcome(d, Status::Timeout, Some("timeout")),
            |d| {
                // the MCP server's kill grace is 1 s (it must exit within 2 s of EOF), the others' 5 s
                let grace = if d.front == Front::Mcp { 1 } else { 5 };
                format!(
                    "ran {:.1} s: the 2 s budget, SIGTERM ignored, SIGKILL after the {grace} s kill grace",
                    d.result.duration_ms as f64 / 1000.0
                )
            },
        )
        .await;
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_in_its_own_session_is_killed_with_the_run() {
    let case = Case {
        extra: json!({"max_runtime_seconds": 2}),
        ..plain(json!([
            {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": "../sleeper.pid"}},
            {"hang": true},
        ]))
    };
    let rows = case
        .every_front_end(
            |fh, d| {
                assert_outcome(d, Status::Timeout, Some("timeout"));
                let pid: i32 = std::fs::read_to_string(fh.home.file("sleeper.pid"))
                    .unwrap()
                    .trim()
                    .parse()
                    .unwrap();
                assert!(
                    !tests::procs::is_alive(pid),
                    "the setsid sleeper {pid} survived"
                );
            },
            |_| "setsid sh + sleep 600 gone".into(),
        )
        .await;
    record(rows);
}
