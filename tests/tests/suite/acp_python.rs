//! `droid-executor acp` driven by the official Python ACP SDK (PyPI `agent-client-protocol`
//! 0.12.1 in the venv `target/interop/py-acp`, `tests/interop/acp_py_client.py`): the same
//! scenario flows as `acp_node` (see there), through the real droid 0.225.2 on the scripted
//! model, every transcript validated against the v1 schema and no process left.
//!
//! Python's SDK is the stricter one: it refuses native droid's `{}` answer to
//! `session/set_config_option` (see `acp_node`'s baseline test).
//!
//! Also the tools the suites rely on. The validator (`tests/interop/acp_validate.py`), on two
//! transcripts of droid's native ACP mode from the ACP research recordings
//! (`tests/fixtures/acp-droid-native/`): it must find exactly droid's recorded violation in
//! each, `session/set_config_option` answered with `{}` where the schema requires
//! `configOptions`, and pass everything else; and on a made-up transcript breaking each of its
//! rules once. The tee (`tests/interop/acp_tee.py`): lines relayed and recorded both ways, the
//! agent's exit code passed on, SIGTERM forwarded to the agent's process group.

use std::io::Write as _;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::acp_world::{Sdk, validation_report};
use tests::droid_bin::workspace_root;
use tests::procs::{pids_with_env, wait_gone};
use tests::temp_dir::TempDir;

use super::acp_node::{
    allow_always, cancel_mid_stream, cancel_mid_turn, create_and_edit, droid_missing, load,
    mode_medium, model_error, native_baseline, reject, two_sessions, verify_fails,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_creates_and_edits_files_with_streamed_chunks_diffs_and_measured_changes() {
    create_and_edit(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_rejects_a_write_which_fails_and_the_turn_ends() {
    reject(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_allows_always_and_is_not_asked_again() {
    allow_always(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_cancels_mid_turn_leaving_no_process_of_the_turn() {
    cancel_mid_turn(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_cancels_mid_stream_and_prompts_again() {
    cancel_mid_stream(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_runs_two_sessions_at_once() {
    two_sessions(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_gets_the_model_error_as_a_json_rpc_error() {
    model_error(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_gets_droid_missing_as_32001_with_the_install_hint() {
    droid_missing(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_sees_a_failed_verification_in_the_measured_changes() {
    verify_fails(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_in_mode_medium_is_not_asked_for_writes() {
    mode_medium(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_lists_and_loads_a_session_on_a_new_connection() {
    load(Sdk::Python).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_sees_native_droid_break_the_schema_and_not_stream_where_ours_does() {
    native_baseline(Sdk::Python).await;
}

#[test]
fn validator_finds_droid_natives_set_config_option_violation_and_nothing_else() {
    let dir = workspace_root().join("tests/fixtures/acp-droid-native");
    let logs = [dir.join("tools-allow.log"), dir.join("slow-cancel.log")];
    let (report, code) = validation_report(&[&logs[0], &logs[1]]);
    let violation = json!([{
        "line": 7,
        "dir": "a2c",
        "method": "session/set_config_option",
        "def": "SetSessionConfigOptionResponse",
        "errors": ["(root): 'configOptions' is a required property"],
    }]);
    assert_eq!(
        report,
        json!({"files": [
            {"path": logs[0], "passed": 28, "failed": 1, "violations": violation},
            {"path": logs[1], "passed": 19, "failed": 1, "violations": violation},
        ]})
    );
    assert_eq!(code, Some(1), "a violation must fail the validator");
}

/// A tee record of `line` going `dir`.
fn record(dir: &str, line: &str) -> String {
    json!({"dir": dir, "t": 0, "line": line}).to_string()
}

#[test]
fn validator_reports_every_kind_of_violation_with_its_line() {
    let dir = TempDir::new("acp-validate").unwrap();
    let log = dir.path().join("made-up.jsonl");
    let chunk = json!({"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "hi"}}});
    let lines = [
        record("c2a", r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1}}"#),
        record("a2c", r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1}}"#),
        record("c2a", "not json"),
        record("a2c", r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"Parse error"}}"#),
        record("a2c", r#"{"jsonrpc":"2.0","id":7,"result":{}}"#),
        record("a2c", r#"{"jsonrpc":"2.0","id":1,"method":"session/prompt","params":{"sessionId":"s","prompt":[]}}"#),
        record("c2a", r#"{"jsonrpc":"2.0","method":"session/frobnicate","params":{}}"#),
        record("c2a", r#"{"jsonrpc":"2.0","method":"_vendor/ping","params":{}}"#),
        record("a2c", r#"{"jsonrpc":"2.0","id":2,"error":{"code":-32603}}"#),
        record("a2c", r#"[{"jsonrpc":"2.0"}]"#),
        record("a2c", &json!({"jsonrpc": "1.0", "method": "session/update", "params": chunk}).to_string()),
        record("a2c", &json!({"jsonrpc": "2.0", "method": "session/update", "params": {"sessionId": "s", "update": {"sessionUpdate": "agent_message_chunk"}}}).to_string()),
        record("a2c", &json!({"jsonrpc": "2.0", "method": "session/update", "params": chunk}).to_string()),
    ];
    std::fs::write(&log, lines.join("\n") + "\n").unwrap();
    let (report, code) = validation_report(&[&log]);
    let violation = |line: u64, dir: &str, method: Value, def: Value, errors: Value| json!({"line": line, "dir": dir, "method": method, "def": def, "errors": errors});
    let null = Value::Null;
    assert_eq!(
        report,
        json!({"files": [{"path": log, "passed": 5, "failed": 8, "violations": [
            violation(3, "c2a", null.clone(), null.clone(), json!(["not JSON: Expecting value: line 1 column 1 (char 0): 'not json'"])),
            violation(5, "a2c", null.clone(), null.clone(), json!(["a result for id 7, which no request of the other side carries"])),
            violation(6, "a2c", json!("session/prompt"), json!("PromptRequest"), json!(["session/prompt is sent c2a, not a2c"])),
            violation(7, "c2a", json!("session/frobnicate"), null.clone(), json!(["notification method 'session/frobnicate' is not in the v1 schema"])),
            violation(9, "a2c", null.clone(), json!("Error"), json!(["(root): 'message' is a required property", "an error for id 2, which no request of the other side carries"])),
            violation(10, "a2c", null.clone(), null.clone(), json!(["not one JSON-RPC object: '[{\"jsonrpc\":\"2.0\"}]'"])),
            violation(11, "a2c", json!("session/update"), json!("SessionNotification"), json!(["jsonrpc is '1.0', not \"2.0\""])),
            violation(12, "a2c", json!("session/update"), json!("SessionNotification"), json!(["update: {'sessionUpdate': 'agent_message_chunk'} is not valid under any of the given schemas"])),
        ]}]})
    );
    assert_eq!(code, Some(1));
}

/// `python3 tests/interop/acp_tee.py LOG -- ARGS` with a marker in its environment.
#[allow(clippy::disallowed_methods)] // the suite's own relay, not droid
fn tee(log: &std::path::Path, marker: &str, args: &[&str]) -> std::process::Child {
    std::process::Command::new("python3")
        .arg(workspace_root().join("tests/interop/acp_tee.py"))
        .arg(log)
        .arg("--")
        .args(args)
        .env("ACP_TEE_TEST", marker)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("python3 is needed for the ACP tee: {e}"))
}

#[test]
fn tee_relays_and_records_both_ways_and_passes_the_exit_code_on() {
    let dir = TempDir::new("acp-tee").unwrap();
    let log = dir.path().join("t.jsonl");
    let mut child = tee(
        &log,
        "relay",
        &["sh", "-c", "cat; echo 'not json' >&2; exit 3"],
    );
    child
        .stdin
        .take()
        .unwrap()
        .write_all(b"{\"a\":1}\nsecond line\nno newline")
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(out.stdout, b"{\"a\":1}\nsecond line\nno newline");
    assert_eq!(String::from_utf8_lossy(&out.stderr), "not json\n");
    let records: Vec<(String, String)> = std::fs::read_to_string(&log)
        .unwrap()
        .lines()
        .map(|l| {
            let r: Value = serde_json::from_str(l).unwrap();
            assert!(r["t"].as_f64().is_some_and(|t| t > 1.7e9), "{r}");
            (
                r["dir"].as_str().unwrap().into(),
                r["line"].as_str().unwrap().into(),
            )
        })
        .collect();
    let expected: Vec<(String, String)> = [
        ("c2a", "{\"a\":1}"),
        ("c2a", "second line"),
        ("c2a", "no newline"),
    ]
    .into_iter()
    .chain([
        ("a2c", "{\"a\":1}"),
        ("a2c", "second line"),
        ("a2c", "no newline"),
    ])
    .map(|(d, l)| (d.into(), l.into()))
    .collect();
    let mut sorted = records.clone();
    sorted.sort_by_key(|(d, _)| d != "c2a");
    assert_eq!(sorted, expected);
    // each line is logged client-to-agent before the agent can have echoed it
    for line in ["{\"a\":1}", "second line"] {
        let at = |d: &str| {
            records
                .iter()
                .position(|r| r.0 == d && r.1 == line)
                .unwrap()
        };
        assert!(at("c2a") < at("a2c"), "{records:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tee_forwards_sigterm_to_the_agents_process_group() {
    let dir = TempDir::new("acp-tee").unwrap();
    let log = dir.path().join("t.jsonl");
    let marker = dir.path().display().to_string();
    // the agent and a child of it in its group
    let mut child = tee(&log, &marker, &["sh", "-c", "sleep 600 & sleep 600; wait"]);
    let until = std::time::Instant::now() + Duration::from_secs(60);
    let sleepers = loop {
        let pids: Vec<i32> = pids_with_env("ACP_TEE_TEST", &marker)
            .into_iter()
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.starts_with(b"sleep\0"))
            })
            .collect();
        if pids.len() == 2 {
            break pids;
        }
        assert!(
            std::time::Instant::now() < until,
            "the sleeps never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    kill(
        Pid::from_raw(i32::try_from(child.id()).unwrap()),
        Signal::SIGTERM,
    )
    .unwrap();
    let status = tokio::task::spawn_blocking(move || child.wait())
        .await
        .unwrap()
        .unwrap();
    // sh dies of the SIGTERM: 128 + 15
    assert_eq!(status.code(), Some(143));
    for pid in sleepers {
        assert!(
            wait_gone(pid, Duration::from_secs(10)).await,
            "sleep {pid} survived"
        );
    }
}
