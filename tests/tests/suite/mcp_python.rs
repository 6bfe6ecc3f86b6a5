//! `droid-executor mcp` driven by a real client: the official Python SDK (`mcp` on PyPI, 2.3.0 and
//! 1.30.0, in the venvs `cargo xtask fetch-interop` makes under `target/interop/`) runs
//! `tests/interop/mcp_py_client.py`, one scenario per session, against the built binary running
//! the REAL droid 0.225.2 on the scripted model (a [`RealWorld`], shared with `mcp_node`).
//!
//! With each SDK release: `initialize`, `tools/list` and `droid_ping`; `execute_droid_task` with a
//! progress callback (so the SDK sends a `progressToken`) in which droid creates a file in a git
//! repository, the result's `files_changed` measured from the repository and the progress coming
//! from droid's own events, strictly increasing; `isError` results for bad argument values and for
//! an agent failure (the model answers HTTP 400, droid gives up at once: `failed`,
//! `model_error`), and a JSON-RPC `-32602` for an unknown tool; `droid_submit` → `droid_pend`.
//!
//! Cancellation, also through the real droid: the model's first turn has droid leak a `setsid
//! sleep` through its Execute tool, its second never comes, so droid waits (for minutes) with the
//! sleeper up. The script abandons the call by cancelling its anyio cancel scope while the run
//! hangs. mcp 2.3.0 then sends `notifications/cancelled` by itself ("caller cancelled"), and
//! droid and its sleeper must be gone while the session is still open. mcp 1.30.0 sends nothing
//! (the SDK only stops waiting), so the run must still be up; the script then sends
//! `notifications/cancelled` itself through `ClientSession.send_notification`, the way a 1.x
//! application has to, and the run must be gone. Either way the server answers a ping afterwards
//! and never the cancelled request.
//!
//! No process of a session may outlive it (each carries the session's marker variable, passed
//! through to droid). A missing venv, a venv without the pinned `mcp`, or a missing droid fails
//! the test with the install command; nothing skips.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::{DROID_VERSION, droid_executor_bin, workspace_root};
use tests::procs::{is_alive, pids_with_env, wait_env_value};

use super::common::read_pid_file;
use super::mcp_real_world::{
    ClientProcess, RealWorld, assert_created_b_txt, assert_listed, assert_missing_repo,
    assert_pended, assert_progress, create_file, missing_repo, no_survivors, submitted,
};
use super::mcp_stdio::{GONE, MARKER_VAR, REPLY_LIMIT, Reaper, assert_all_gone};

/// The client script, relative to the workspace root.
const SCRIPT: &str = "tests/interop/mcp_py_client.py";
/// What both SDK releases ask for in `initialize` (2.3.0 knows 2026-07-28, but its
/// `ClientSession` starts with the legacy handshake), and get.
const PROTOCOL: &str = "2025-11-25";
/// The reason the script gives in the `notifications/cancelled` it sends itself.
const SCRIPT_CANCEL_REASON: &str = "cancelled by the interop test";
/// What the model answers in the agent-failure case; droid does not retry a 400.
const MODEL_400: &str = "Bad request: invalid parameter";

/// One release of the Python SDK.
#[derive(Debug, Clone, Copy)]
struct Sdk {
    /// Its venv, under `target/interop`.
    venv: &'static str,
    version: &'static str,
    /// The `notifications/cancelled` reason it sends by itself when a call is abandoned; `None`
    /// when it sends nothing.
    abandon_reason: Option<&'static str>,
}

const SDK_2: Sdk = Sdk {
    venv: "py-mcp2",
    version: "2.3.0",
    abandon_reason: Some("caller cancelled"),
};

const SDK_1: Sdk = Sdk {
    venv: "py-mcp1",
    version: "1.30.0",
    abandon_reason: None,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_2_3_0_lists_calls_with_progress_gets_errors_and_pends() {
    flows(SDK_2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_1_30_0_lists_calls_with_progress_gets_errors_and_pends() {
    flows(SDK_1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_2_3_0_cancels_an_abandoned_call_and_the_real_droid_goes() {
    cancel_flow(SDK_2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_1_30_0_abandons_without_cancelling_then_cancels_when_told() {
    cancel_flow(SDK_1).await;
}

/// Every flow but the cancellation, each in its own session: list, execute with progress, the
/// error answers, submit + pend.
async fn flows(sdk: Sdk) {
    let w = RealWorld::new().await;

    let out = session(&w, sdk, "list", &json!({})).await;
    assert_listed(&out, PROTOCOL);
    assert_droid_ping(&out["droidPing"]);

    let repo = w.repo("execute");
    w.model.set_script(create_file(&repo, "b.txt"));
    let out = session(&w, sdk, "execute", &w.request(&repo, "Create b.txt")).await;
    assert_created_b_txt(&out["result"]);
    assert_progress(&out, &repo);
    assert_eq!(std::fs::read_to_string(repo.join("b.txt")).unwrap(), "b\n");

    // bad values (nothing runs), an unknown tool, then a run the model fails
    let missing = w.home.path().join("no-such-repo");
    let repo = w.repo("fail");
    w.model
        .set_script(json!([{"status": 400, "error_message": MODEL_400}]));
    let before = chat_requests(&w);
    let calls = json!([
        {"name": "execute_droid_task", "arguments": missing_repo(&missing)},
        {"name": "execute_droid_task", "arguments": w.request(&repo, "  ")},
        {"name": "no_such_tool", "arguments": {}},
        {"name": "execute_droid_task", "arguments": w.request(&repo, "Say done.")},
    ]);
    let out = session(&w, sdk, "calls", &calls).await;
    let results = out["results"]
        .as_array()
        .unwrap_or_else(|| panic!("{out:#}"));
    assert_eq!(results.len(), 4, "{out:#}");
    assert_missing_repo(&results[0]["result"], &missing);
    assert_blank_objective(&results[1]["result"]);
    assert_eq!(
        results[2],
        json!({"rejected": {
            "code": -32602,
            "message": format!(
                "unknown tool \"no_such_tool\"; tools: {}",
                super::mcp_stdio::TOOLS.join(", ")
            ),
        }}),
        "{out:#}"
    );
    assert_model_failed(&results[3]["result"], &w.home.model_id("Mock"));
    assert_eq!(
        chat_requests(&w) - before,
        1,
        "only the last call reaches the model, and droid does not retry a 400"
    );
    assert_eq!(
        git_status(&repo),
        "",
        "the failed run changed the repository"
    );

    let repo = w.repo("pend");
    w.model.set_script(create_file(&repo, "b.txt"));
    let out = session(&w, sdk, "submit_pend", &w.request(&repo, "Create b.txt")).await;
    let task_id = submitted(&out["submit"]);
    assert_pended(&out["pend"], &task_id);
    assert_eq!(
        out["pend"]["structuredContent"]["result"]["files_changed"],
        json!([{
            "path": "b.txt",
            "change_type": "added",
            "old_path": null,
            "highlights": ["created by droid (1 line)"],
            "lines_added": 1,
            "lines_removed": 0,
        }]),
        "{out:#}"
    );
    assert_eq!(std::fs::read_to_string(repo.join("b.txt")).unwrap(), "b\n");
}

/// Abandon a call while the real droid hangs on the model, holding a `setsid sleep` it
/// started: with 2.3.0 the SDK's own `notifications/cancelled` ends the run; with 1.30.0 the run
/// goes on until the script sends one itself. Either way the run's processes are gone while the
/// session is still open, the server still answers, and the cancelled request gets no answer.
async fn cancel_flow(sdk: Sdk) {
    let w = RealWorld::new().await;
    let repo = w.repo("cancel");
    let pid_file = w.home.path().join("fixture/sleep.pid");
    w.model.set_script(json!([
        {"tool": [{"name": "Execute", "args": {
            "summary": "start a sleeper",
            "command": format!(
                "setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > {}",
                pid_file.display()
            ),
            "riskLevel": "low",
            "riskLevelReason": "test command",
        }}]},
        {"hang": true},
    ]));
    let (env, marker) = w.env();
    let mut args = w.request(&repo, "Start a sleeper");
    // far beyond the flow, so that only a cancellation can end the run while it is checked
    args["max_runtime_seconds"] = json!(600);
    let mut session = ClientProcess::start(
        &python(sdk),
        &script_args("cancel", &args),
        &env,
        w.home.path(),
    );
    session.expect_line(&sdk_line(sdk)).await;

    let calling = session.next_line().await;
    let request_id = calling["requestId"].clone();
    assert!(request_id.is_i64(), "{}", session.transcript());
    assert_eq!(
        calling,
        json!({"event": "calling", "requestId": request_id}),
        "{}",
        session.transcript()
    );
    let (run, pids) = hanging_run(&w, &pid_file).await;

    session.send("go").await;
    let abandoned = session.next_line().await;
    let cancelled = |reason: &str| {
        json!([{
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": reason},
        }])
    };
    match sdk.abandon_reason {
        Some(reason) => assert_eq!(
            abandoned,
            json!({"event": "abandoned", "requestId": request_id, "cancelled": cancelled(reason)}),
            "{}",
            session.transcript()
        ),
        None => {
            assert_eq!(
                abandoned,
                json!({"event": "abandoned", "requestId": request_id, "cancelled": []}),
                "{}",
                session.transcript()
            );
            // the server was told nothing, so the run goes on
            let alive: Vec<i32> = pids.iter().copied().filter(|p| is_alive(*p)).collect();
            assert_eq!(alive, pids, "{}", session.transcript());
            session.send("cancel").await;
            session
                .expect_line(&json!({
                    "event": "cancelled",
                    "cancelled": cancelled(SCRIPT_CANCEL_REASON),
                }))
                .await;
        }
    }
    // the session is still open: the server killed the run because of the cancellation
    assert_all_gone(&run, &pids).await;

    session.send("finish").await;
    session
        .expect_line(&json!({"pinged": true, "responsesToCancelled": []}))
        .await;
    session.finish_ok().await;
    no_survivors(&marker).await;
}

/// The hanging run of [`cancel_flow`] once droid waits for the model's second turn: its marker
/// (to kill what is left should the test fail) and its processes, the sleeper among them.
async fn hanging_run(w: &RealWorld, pid_file: &Path) -> (Reaper, Vec<i32>) {
    let sleeper = read_pid_file(pid_file, REPLY_LIMIT).await;
    let marker = wait_env_value(sleeper, MARKER_VAR, GONE).await;
    let reaper = Reaper { marker };
    let until = Instant::now() + REPLY_LIMIT;
    while !w.model.requests().iter().any(|r| r["turn"] == 1) {
        assert!(
            Instant::now() < until,
            "droid never asked the model for its second turn: {:#?}",
            w.model.requests()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let pids = pids_with_env(MARKER_VAR, &reaper.marker);
    assert!(
        pids.contains(&sleeper) && pids.len() >= 2,
        "run {}: droid and the sleeper {sleeper} should be up: {pids:?}",
        reaper.marker
    );
    (reaper, pids)
}

/// One session of the script playing `scenario` with `args`, checked to exit 0 with no process
/// left behind; its last line.
async fn session(w: &RealWorld, sdk: Sdk, scenario: &str, args: &Value) -> Value {
    let (env, marker) = w.env();
    let mut session = ClientProcess::start(
        &python(sdk),
        &script_args(scenario, args),
        &env,
        w.home.path(),
    );
    session.expect_line(&sdk_line(sdk)).await;
    let last = session.next_line().await;
    session.finish_ok().await;
    no_survivors(&marker).await;
    last
}

/// The script's first line with `sdk` loaded.
fn sdk_line(sdk: Sdk) -> Value {
    json!({"sdk": format!("mcp {}", sdk.version)})
}

/// `<script> SCENARIO ARGS_JSON droid-executor mcp`.
fn script_args(scenario: &str, args: &Value) -> Vec<OsString> {
    vec![
        workspace_root().join(SCRIPT).into(),
        scenario.into(),
        args.to_string().into(),
        droid_executor_bin().into(),
        "mcp".into(),
    ]
}

/// The venv's Python, checked to hold `mcp` at the pinned version.
fn python(sdk: Sdk) -> PathBuf {
    let venv = workspace_root().join("target/interop").join(sdk.venv);
    let python = venv.join("bin/python");
    let dist_info = format!("mcp-{}.dist-info", sdk.version);
    let installed = std::fs::read_dir(venv.join("lib"))
        .into_iter()
        .flatten()
        .flatten()
        .any(|lib| lib.path().join("site-packages").join(&dist_info).is_dir());
    assert!(
        python.is_file() && installed,
        "the Python MCP SDK (mcp {}) is not installed in {}: run `cargo xtask fetch-interop` \
         (cargo xtask test does; it needs python3 with venv)",
        sdk.version,
        venv.display()
    );
    python
}

/// Chat-completion requests the model got so far (GETs carry no turn).
fn chat_requests(w: &RealWorld) -> usize {
    w.model
        .requests()
        .iter()
        .filter(|r| r.get("turn").is_some())
        .count()
}

/// `git status --porcelain` of `repo`.
fn git_status(repo: &Path) -> String {
    #[allow(clippy::disallowed_methods)] // reads the repository the run worked in
    let out = std::process::Command::new("git")
        .args(["status", "--porcelain"])
        .current_dir(repo)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `droid_ping` in a [`RealWorld`]: the real droid found, its version, the custom model
/// counted as auth, the store writable.
fn assert_droid_ping(result: &Value) {
    assert_eq!(result["isError"], false, "{result:#}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["droid_found"], true, "{result:#}");
    assert_eq!(sc["droid_version"], DROID_VERSION, "{result:#}");
    assert_eq!(sc["auth"], true, "{result:#}");
    assert_eq!(sc["store_writable"], true, "{result:#}");
}

/// An `isError` result for a blank objective, saying what to fix; nothing ran.
fn assert_blank_objective(result: &Value) {
    assert_eq!(result["isError"], true, "{result:#}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["status"], "error", "{result:#}");
    assert_eq!(
        sc["issues"],
        json!([{
            "type": "validation_error",
            "description": "$.objective: must not be blank",
            "suggested_action": "fix $.objective and send the request again",
        }]),
        "{result:#}"
    );
    assert_eq!(sc["droid"], Value::Null, "{result:#}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("$.objective: must not be blank -> fix $.objective"),
        "{result:#}"
    );
}

/// The agent failure: the real droid ran on the scripted `model`, which answered 400, and droid
/// gave up at once (exit 1) with the model's message.
fn assert_model_failed(result: &Value, model: &str) {
    assert_eq!(result["isError"], true, "{result:#}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["status"], "failed", "{result:#}");
    assert_eq!(
        sc["summary"],
        format!("droid failed: 400 {MODEL_400}"),
        "{result:#}"
    );
    assert_eq!(
        sc["issues"],
        json!([{
            "type": "model_error",
            "description": format!("the model request failed: 400 {MODEL_400}"),
            "suggested_action": "check the model endpoint, its key and its limits, then run the \
                                 task again",
        }]),
        "{result:#}"
    );
    assert_eq!(sc["files_changed"], json!([]), "{result:#}");
    assert_eq!(sc["droid"]["version"], DROID_VERSION, "{result:#}");
    assert_eq!(sc["droid"]["model"], model, "{result:#}");
    assert_eq!(sc["droid"]["exit_code"], 1, "{result:#}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.starts_with(&format!(
            "status: failed\nsummary: droid failed: 400 {MODEL_400}\nissue [model_error]: "
        )),
        "{result:#}"
    );
}
