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
            {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": "../fixture/sleeper.pid"}},
            {"hang": true},
        ]))
    };
    let rows = case
        .every_front_end(
            |fh, d| {
                assert_outcome(d, Status::Timeout, Some("timeout"));
                let pid: i32 = std::fs::read_to_string(fh.home.fixture("sleeper.pid"))
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

/// A front-end started for [`a_front_end_killed_mid_run_leaves_no_process`], kept until the test
/// is done with it.
enum Started {
    Cli(tokio::process::Child),
    Bridge(
        super::bridge_harness::ServeProc,
        tokio::task::JoinHandle<()>,
    ),
    Mcp(super::mcp_stdio::Server),
}

impl Started {
    /// Sends `request` through `front` without waiting for its result.
    async fn request(front: Front, fh: &FaultHome, request: &Value) -> Started {
        match front {
            Front::Cli => {
                let file = fh.home.file("request.json");
                std::fs::write(&file, request.to_string()).unwrap();
                let child = super::binary::command(
                    &[
                        "run".as_ref(),
                        "--json".as_ref(),
                        "--request".as_ref(),
                        file.as_os_str(),
                    ],
                    &fh.env(),
                    fh.home.path(),
                )
                .spawn()
                .unwrap();
                Started::Cli(child)
            }
            Front::Bridge => {
                let serve =
                    super::bridge_harness::ServeProc::start(&[], &fh.env(), fh.home.path()).await;
                let client = bridge_http::client::Client::new(serve.addr, None);
                let request = request.clone();
                // the answer never comes: the bridge is killed while the run is under way
                let pending = tokio::spawn(async move {
                    let _ = client.execute(&request, super::binary::CLI_LIMIT).await;
                });
                Started::Bridge(serve, pending)
            }
            Front::Mcp => {
                let mut server = super::mcp_stdio::Server::start(&fh.env(), fh.home.path());
                server.initialize().await;
                server
                    .send(&json!({
                        "jsonrpc": "2.0",
                        "id": 7,
                        "method": "tools/call",
                        "params": {"name": "execute_droid_task", "arguments": request},
                    }))
                    .await;
                Started::Mcp(server)
            }
        }
    }

    /// The front-end's pid.
    fn pid(&self) -> i32 {
        let id = match self {
            Started::Cli(child) => child.id(),
            Started::Bridge(serve, _) => return serve.pid(),
            Started::Mcp(server) => server.child.id(),
        };
        i32::try_from(id.expect("the front-end is running")).unwrap()
    }
}

/// A sync front-end killed with SIGKILL while droid works (`run`, `serve`'s `POST /execute`,
/// `mcp`'s `tools/call`) leaves nothing running: droid and the grandchild it started in its own
/// session (`setsid`) are ended at once, without waiting for any later command to clean up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_front_end_killed_mid_run_leaves_no_process() {
    let mut rows = Vec::new();
    for front in Front::ALL {
        let fh = FaultHome::new("fault", &json!([]), "");
        let pid_file = fh.home.fixture("sleeper.pid");
        fh.home.play(&super::mcp_stdio::leak_then_hang(&pid_file));
        let request = fh.request(json!({}));
        let started = Started::request(front, &fh, &request).await;
        let (reaper, pids) = super::mcp_stdio::hanging_run(&pid_file).await;
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(started.pid()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        super::mcp_stdio::assert_all_gone(&reaper, &pids).await;
        if let Started::Bridge(_, pending) = &started {
            pending.abort();
        }
        rows.push(Observed {
            test: String::new(),
            front_end: front.name().into(),
            droid: "fake",
            status: "front-end killed (SIGKILL)".into(),
            issues: Vec::new(),
            results: 0,
            peak_rss_mib: 0.0,
            processes_left: 0,
            note: format!(
                "droid, setsid sh and sleep ({} processes) gone after the front-end's SIGKILL",
                pids.len()
            ),
        });
        drop(started);
    }
    record(rows);
}

/// Verification commands that leave children behind (`cmd &`, a `setsid` child holding the
/// output pipe, and a `setsid` child that closed it) are ended with the command as soon as its
/// shell exits: each command's output is kept whole (the run neither waits for nor gives up on
/// pipes a background child holds), the background child never reaches its next step, and
/// nothing is left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_commands_leave_no_background_process() {
    let case = Case {
        extra: json!({"suggested_commands": [
            "(sleep 5; echo late > ../fixture/late.txt) & echo ok",
            "setsid sleep 300 & echo ok2",
            "setsid sh -c 'sleep 300' >/dev/null 2>&1 & echo ok3",
        ]}),
        ..plain(json!([{"completion": "Done."}]))
    };
    let rows = case
        .every_front_end(
            |fh, d| {
                assert_outcome(d, Status::Success, None);
                let verified: Vec<(String, Option<i32>, String)> = d
                    .result
                    .commands_run
                    .iter()
                    .filter(|c| c.source == droid_contract::CommandSource::Verify)
                    .map(|c| (c.command.clone(), c.exit_code, c.stdout_excerpt.clone()))
                    .collect();
                let commands = case.extra["suggested_commands"].as_array().unwrap();
                let cmd = |i: usize| commands[i].as_str().unwrap().to_owned();
                assert_eq!(
                    verified,
                    vec![
                        (cmd(0), Some(0), "ok\n".to_owned()),
                        (cmd(1), Some(0), "ok2\n".to_owned()),
                        (cmd(2), Some(0), "ok3\n".to_owned()),
                    ],
                    "{:?}",
                    d.front
                );
                assert!(
                    !fh.home.fixture("late.txt").exists(),
                    "{:?}: the background child outlived its command",
                    d.front
                );
            },
            |_| "3 commands leaving background children: output kept, nothing left".into(),
        )
        .await;
    record(rows);
}

/// The three ways a process of droid's tree escapes a search by environment: started with
/// `env -i` (under a marked parent that then dies), a marked process that rewrites its own
/// environment (`exec env -i …`), and a double fork into a new session with a clean environment.
/// Each writes its own pid to `<name>.pid` in the fixture directory beside the repository (which
/// runs may write) and sleeps for ten minutes.
fn escapes() -> Vec<Value> {
    let pid_then_sleep = |name: &str| {
        format!(
            "echo $$ > ../fixture/{name}.tmp && mv ../fixture/{name}.tmp ../fixture/{name}.pid; exec sleep 600"
        )
    };
    let mut steps: Vec<Value> = [
        format!("env -i sh -c '{}' & wait", pid_then_sleep("env_i")),
        format!("exec env -i sh -c '{}'", pid_then_sleep("rewritten")),
        format!(
            "(env -i setsid sh -c '{}' < /dev/null > /dev/null 2>&1 &); exit 0",
            pid_then_sleep("double_fork")
        ),
    ]
    .into_iter()
    .enumerate()
    .map(|(i, command)| {
        json!({"spawn_grandchild": {"command": command, "pid_file": format!("../fixture/escape-sh-{i}.pid")}})
    })
    .collect();
    steps.extend(
        ESCAPES
            .iter()
            .map(|name| json!({"wait_file": format!("../fixture/{name}.pid")})),
    );
    steps
}

/// The pid files [`escapes`] writes.
const ESCAPES: [&str; 3] = ["env_i", "rewritten", "double_fork"];

/// The escapes of [`escapes`] still alive 10 s after the run's result, each killed (SIGKILL, by
/// pid) so a failing test leaks nothing.
fn escapes_left(fh: &FaultHome, front: Front) -> Vec<String> {
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    let pids: Vec<(&str, i32)> = ESCAPES
        .iter()
        .map(|name| {
            let text = std::fs::read_to_string(fh.home.fixture(&format!("{name}.pid")))
                .unwrap_or_else(|e| panic!("{front:?}: {name}.pid: {e}"));
            (*name, text.trim().parse().unwrap())
        })
        .collect();
    while pids.iter().any(|(_, pid)| tests::procs::is_alive(*pid))
        && std::time::Instant::now() < until
    {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let mut left = Vec::new();
    for (name, pid) in pids {
        if tests::procs::is_alive(pid) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
            left.push(format!("{name} ({pid})"));
        }
    }
    left
}

/// Processes of droid's tree that dropped the run's marker (`env -i`, an environment rewritten
/// by `exec`, a double fork into a new session) are ended with the run when droid completes and
/// exits: the run's supervisor owns droid's whole tree, whatever the environment says.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmarked_escapes_end_with_a_completed_run() {
    let mut steps = escapes();
    steps.push(json!({"completion": "done"}));
    let rows = plain(Value::Array(steps))
        .every_front_end(
            |fh, d| {
                assert_outcome(d, Status::Success, None);
                assert_eq!(
                    escapes_left(fh, d.front),
                    Vec::<String>::new(),
                    "{:?}",
                    d.front
                );
            },
            |_| "env -i, exec env -i and a double-forked daemon gone after completion".into(),
        )
        .await;
    record(rows);
}

/// Processes of droid's tree that dropped the run's marker (`env -i`, an environment rewritten
/// by `exec`, a double fork into a new session) are ended with a run that times out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmarked_escapes_end_with_a_timed_out_run() {
    let mut steps = escapes();
    steps.push(json!({"hang": true}));
    let case = Case {
        extra: json!({"max_runtime_seconds": 3}),
        ..plain(Value::Array(steps))
    };
    let rows = case
        .every_front_end(
            |fh, d| {
                assert_outcome(d, Status::Timeout, Some("timeout"));
                assert_eq!(
                    escapes_left(fh, d.front),
                    Vec::<String>::new(),
                    "{:?}",
                    d.front
                );
            },
            |_| "env -i, exec env -i and a double-forked daemon gone after the timeout".into(),
        )
        .await;
    record(rows);
}

/// Processes of droid's tree that dropped the run's marker (`env -i`, an environment rewritten
/// by `exec`, a double fork into a new session) are ended with a run its client cancels (MCP
/// `notifications/cancelled`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmarked_escapes_end_with_a_cancelled_run() {
    let mut steps = escapes();
    steps.push(json!({"hang": true}));
    let fh = FaultHome::new("fault", &Value::Array(steps), "");
    let request = fh.request(json!({}));
    let mut started = Started::request(Front::Mcp, &fh, &request).await;
    for name in ESCAPES {
        super::common::read_pid_file(
            &fh.home.fixture(&format!("{name}.pid")),
            super::common::RUN_LIMIT,
        )
        .await;
    }
    let Started::Mcp(server) = &mut started else {
        unreachable!("started through MCP")
    };
    server
        .send(
            &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                       "params": {"requestId": 7, "reason": "user cancelled"}}),
        )
        .await;
    let left = escapes_left(&fh, Front::Mcp);
    drop(started);
    assert_eq!(left, Vec::<String>::new());
    record(vec![Observed {
        test: String::new(),
        front_end: Front::Mcp.name().into(),
        droid: "fake",
        status: "cancelled".into(),
        issues: Vec::new(),
        results: 0,
        peak_rss_mib: 0.0,
        processes_left: left.len(),
        note: "env -i, exec env -i and a double-forked daemon gone after the cancel".into(),
    }]);
}

/// Processes of droid's tree that dropped the run's marker (`env -i`, an environment rewritten
/// by `exec`, a double fork into a new session) are ended when the front-end running the run is
/// SIGKILLed (`run`, `serve`'s `POST /execute`, `mcp`'s `tools/call`): the front-end's cgroup
/// reaper kills the run's leaf (where the front-end may make cgroups, as here).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmarked_escapes_end_with_a_killed_front_end() {
    record(escapes_end_with_a_killed_front_end("", "").await);
}

/// As [`unmarked_escapes_end_with_a_killed_front_end`] with `cgroups = false`: the run's
/// supervisor outlives the front-end just long enough to end droid's whole tree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unmarked_escapes_end_with_a_killed_front_end_under_the_supervisor() {
    record(escapes_end_with_a_killed_front_end("cgroups = false", ", under the supervisor").await);
}

async fn escapes_end_with_a_killed_front_end(config: &str, how: &str) -> Vec<Observed> {
    let mut rows = Vec::new();
    for front in Front::ALL {
        let mut steps = escapes();
        steps.push(json!({"hang": true}));
        let fh = FaultHome::new("fault", &Value::Array(steps), config);
        let request = fh.request(json!({}));
        let started = Started::request(front, &fh, &request).await;
        for name in ESCAPES {
            super::common::read_pid_file(
                &fh.home.fixture(&format!("{name}.pid")),
                super::common::RUN_LIMIT,
            )
            .await;
        }
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(started.pid()),
            nix::sys::signal::Signal::SIGKILL,
        )
        .unwrap();
        let left = escapes_left(&fh, front);
        if let Started::Bridge(_, pending) = &started {
            pending.abort();
        }
        drop(started);
        assert_eq!(left, Vec::<String>::new(), "{front:?}{how}");
        rows.push(Observed {
            test: String::new(),
            front_end: front.name().into(),
            droid: "fake",
            status: "front-end killed (SIGKILL)".into(),
            issues: Vec::new(),
            results: 0,
            peak_rss_mib: 0.0,
            processes_left: left.len(),
            note: format!(
                "env -i, exec env -i and a double-forked daemon gone after the front-end's SIGKILL{how}"
            ),
        });
    }
    rows
}
