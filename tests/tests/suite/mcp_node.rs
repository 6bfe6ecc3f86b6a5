//! `droid-executor mcp` driven by the real Node MCP clients that `cargo xtask fetch-interop`
//! installs under `target/interop/node`: the TypeScript SDK v1 (`@modelcontextprotocol/sdk`
//! 1.32.2) and v2 (`@modelcontextprotocol/client` 2.4.0) through `tests/interop/ts_client_v*.mjs`,
//! and the Inspector CLI v2 (2.12.0) and v1 (1.0.3) as shipped.
//!
//! Every client lists the tools, runs `execute_droid_task` through the REAL droid 0.225.2 and the
//! scripted model, gets an `isError` result for a repository that does not exist, and runs the
//! `droid_submit` → `droid_pend` flow. The SDK clients also get progress notifications (checked
//! as they came over the wire) and abort a call to a droid that hangs (the fake droid): the SDK
//! must send `notifications/cancelled`, droid and what it started must be gone while the session
//! goes on, and the server must never answer the cancelled request. TS SDK v2 also negotiates
//! the era (`auto`: a `server/discover` probe) and runs a call with progress in the stateless
//! revision it gets. Inspector v2 also runs its schema portability lint (`--strict`), which must
//! find no error (it warns about every `"type": [T, "null"]`).
//!
//! No process of a session may outlive it: every process carries the session's marker variable
//! (passed through to droid by the config), and none may be left once the client has exited. A
//! client that is not installed, or not at the pinned version, fails the test with the install
//! command; nothing skips.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::{droid_executor_bin, workspace_root};

use super::binary::FakeHome;
use super::mcp_real_world::{
    ClientProcess, Out, RealWorld, SESSION_VAR, assert_created_b_txt, assert_listed,
    assert_missing_repo, assert_pended, assert_progress, assert_tools, create_file, missing_repo,
    no_survivors, session_marker, submitted,
};
use super::mcp_stdio::{assert_all_gone, hanging_run};

/// Where `cargo xtask fetch-interop` installs the Node clients, relative to the workspace root.
const NODE_DIR: &str = "target/interop/node";
/// The install hint every missing-client failure gives.
const INSTALL_HINT: &str = "run `cargo xtask fetch-interop` (cargo xtask test does; it needs \
                            Node.js 20 or later and npm)";
/// The newest legacy revision (`initialize`), which every client here asks for first.
const LEGACY: &str = "2025-11-25";
/// The stateless revision (`server/discover`), which TS SDK v2 speaks in `auto` negotiation.
const MODERN: &str = "2026-07-28";
/// What an SDK client reports when it aborts a call (`AbortController.abort(reason)`).
const ABORT_REASON: &str = "cancelled by the interop test";

/// One of the TypeScript SDKs, with the script that drives it.
#[derive(Debug, Clone, Copy)]
struct Sdk {
    /// The script, relative to the workspace root.
    script: &'static str,
    /// The npm package (also its folder in `node_modules`).
    package: &'static str,
    version: &'static str,
    /// What the aborted call rejects with: `{"name", "code"}` of the error, as JSON.
    abort_error: &'static str,
}

const SDK_V1: Sdk = Sdk {
    script: "tests/interop/ts_client_v1.mjs",
    package: "@modelcontextprotocol/sdk",
    version: "1.32.2",
    abort_error: r#"{"name": "McpError", "code": -32001}"#,
};

const SDK_V2: Sdk = Sdk {
    script: "tests/interop/ts_client_v2.mjs",
    package: "@modelcontextprotocol/client",
    version: "2.4.0",
    // v2 reports the caller's own abort with the code of a timeout
    abort_error: r#"{"name": "SdkError", "code": "REQUEST_TIMEOUT"}"#,
};

/// One of the Inspector CLIs.
#[derive(Debug, Clone, Copy)]
struct Inspector {
    /// Its folder in `node_modules` (v1 is installed under an alias).
    folder: &'static str,
    version: &'static str,
    /// Its CLI entry point, relative to its folder (`node <entry> --cli …`).
    entry: &'static str,
    /// Whether it starts the server with its own whole environment; v2 passes only a few
    /// variables (HOME, PATH…) plus the `-e KEY=VALUE` ones.
    passes_env: bool,
}

const INSPECTOR_V2: Inspector = Inspector {
    folder: "@modelcontextprotocol/inspector",
    version: "2.12.0",
    entry: "clients/launcher/build/index.js",
    passes_env: false,
};

const INSPECTOR_V1: Inspector = Inspector {
    folder: "inspector1",
    version: "1.0.3",
    entry: "cli/build/cli.js",
    passes_env: true,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ts_sdk_v1_lists_calls_with_progress_cancels_and_pends() {
    sdk_flows(SDK_V1).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ts_sdk_v2_lists_calls_with_progress_cancels_and_pends() {
    sdk_flows(SDK_V2).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ts_sdk_v2_auto_negotiation_speaks_the_modern_revision() {
    // `auto` probes server/discover in a throw-away server process; the server answers it, so
    // the session is stateless 2026-07-28, with no initialize
    let auto = &["--negotiation", "auto"];
    let w = RealWorld::new().await;
    let out = w.sdk_session(SDK_V2, auto, "list", &json!({})).await;
    assert_listed(&out, MODERN);

    let repo = w.repo("execute");
    w.model.set_script(create_file(&repo, "b.txt"));
    let out = w
        .sdk_session(SDK_V2, auto, "execute", &w.request(&repo, "Create b.txt"))
        .await;
    assert_created_b_txt(&out["result"]);
    assert_progress(&out, &repo);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_v2_lists_lints_calls_and_pends() {
    let w = RealWorld::new().await;
    let i = INSPECTOR_V2;

    let out = w
        .inspector(i, &["--method", "tools/list", "--format", "json", "-q"])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_tools(&out.json()["result"]["tools"]);

    // the schema portability lint (an error-severity problem exits 6): our schemas are rewritten
    // for portability (mcp-stdio's `portable`), so it finds nothing at all
    let out = w
        .inspector(
            i,
            &[
                "--method",
                "tools/list",
                "--strict",
                "--format",
                "json",
                "-q",
            ],
        )
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert!(out.stderr.trim().is_empty(), "{}", out.stderr);

    let repo = w.repo("execute");
    w.model.set_script(create_file(&repo, "b.txt"));
    let args = w.request(&repo, "Create b.txt").to_string();
    let out = w
        .inspector(i, &call_args("execute_droid_task", &args))
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_created_b_txt(&out.json()["result"]);

    let args = missing_repo(&w.home.path().join("no-such-repo")).to_string();
    let out = w
        .inspector(i, &call_args("execute_droid_task", &args))
        .await;
    // an isError result is printed like any other, then exits 5 with tool_is_error on stderr
    assert_eq!(out.code, Some(5), "{out:#?}");
    assert_missing_repo(&out.json()["result"], &w.home.path().join("no-such-repo"));
    let error: Value = serde_json::from_str(out.stderr.lines().last().unwrap_or_default())
        .unwrap_or_else(|e| panic!("stderr does not end with a JSON line ({e}): {out:#?}"));
    assert_eq!(
        error,
        json!({"error": {
            "code": "tool_is_error",
            "message": "Tool 'execute_droid_task' returned isError:true.",
        }}),
        "{out:#?}"
    );

    // two server processes: the task outlives the one that took it
    let repo = w.repo("pend");
    w.model.set_script(json!([{"text": "Done."}]));
    let args = w.request(&repo, "Say done.").to_string();
    let out = w.inspector(i, &call_args("droid_submit", &args)).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let task_id = submitted(&out.json()["result"]);
    let args = json!({"task_id": task_id, "wait_seconds": 60}).to_string();
    let out = w.inspector(i, &call_args("droid_pend", &args)).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_pended(&out.json()["result"], &task_id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inspector_v1_lists_calls_and_pends() {
    let w = RealWorld::new().await;
    let i = INSPECTOR_V1;

    let out = w.inspector(i, &["--method", "tools/list"]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_tools(&out.json()["tools"]);

    // v1 takes `--tool-arg key=value` pairs, values parsed as JSON when they are
    let repo = w.repo("execute");
    w.model.set_script(create_file(&repo, "b.txt"));
    let out = w
        .inspector(
            i,
            &v1_call_args("execute_droid_task", &w.request(&repo, "Create b.txt")),
        )
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_created_b_txt(&out.json());

    // v1 prints an isError result like any other and exits 0
    let args = missing_repo(&w.home.path().join("no-such-repo"));
    let out = w
        .inspector(i, &v1_call_args("execute_droid_task", &args))
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_missing_repo(&out.json(), &w.home.path().join("no-such-repo"));

    let repo = w.repo("pend");
    w.model.set_script(json!([{"text": "Done."}]));
    let out = w
        .inspector(
            i,
            &v1_call_args("droid_submit", &w.request(&repo, "Say done.")),
        )
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let task_id = submitted(&out.json());
    let out = w
        .inspector(
            i,
            &v1_call_args(
                "droid_pend",
                &json!({"task_id": task_id, "wait_seconds": 60}),
            ),
        )
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_pended(&out.json(), &task_id);
}

/// Every flow with one TypeScript SDK: list, execute with progress, isError, submit + pend (the
/// real droid), then the cancellation (the fake droid).
async fn sdk_flows(sdk: Sdk) {
    let w = RealWorld::new().await;

    let out = w.sdk_session(sdk, &[], "list", &json!({})).await;
    assert_listed(&out, LEGACY);

    let repo = w.repo("execute");
    w.model.set_script(create_file(&repo, "b.txt"));
    let out = w
        .sdk_session(sdk, &[], "execute", &w.request(&repo, "Create b.txt"))
        .await;
    assert_created_b_txt(&out["result"]);
    assert_progress(&out, &repo);

    let missing = w.home.path().join("no-such-repo");
    let out = w
        .sdk_session(sdk, &[], "call", &missing_repo(&missing))
        .await;
    assert_missing_repo(&out["result"], &missing);

    // an invalid droid_submit: its isError answer reaches the caller through `callTool`, which
    // validates structured content against the tool's `{task_id}` output schema (before issue 32
    // the answer carried a whole ExecutionResult and `callTool` threw -32602, losing the text)
    let bad = json!({"objective": "x", "context": w.repo("submit").display().to_string()});
    let out = w.sdk_session(sdk, &[], "submit", &bad).await;
    let result = &out["result"];
    assert_eq!(
        (&result["isError"], result.get("structuredContent")),
        (&json!(true), None),
        "{out:#}"
    );
    let said = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        said.contains("issue [validation_error]: $.context: must be an object, got a string"),
        "{out:#}"
    );

    let repo = w.repo("pend");
    w.model.set_script(json!([{"text": "Done."}]));
    let out = w
        .sdk_session(sdk, &[], "submit_pend", &w.request(&repo, "Say done."))
        .await;
    let task_id = submitted(&out["submit"]);
    assert_pended(&out["pend"], &task_id);

    cancel_flow(sdk).await;
}

/// Abort a call to a droid that hangs (after leaking a `setsid` grandchild): the SDK sends
/// `notifications/cancelled`, the run's processes go while the session goes on, and the server
/// answers a ping but never the cancelled request.
async fn cancel_flow(sdk: Sdk) {
    let home = FakeHome::new("mcp-node", &[SESSION_VAR]);
    let pid_file = home.fixture("sleep.pid");
    // `; exit 0` keeps sh alive as the parent of sleep, so both can be checked
    home.play(&json!([
        {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": pid_file}},
        {"hang": true},
    ]));
    let marker = session_marker(home.path());
    let mut env = home.env();
    env.push((SESSION_VAR.into(), marker.clone().into()));
    let args = json!({
        "objective": "Hang until cancelled.",
        "context": {"repo_root": home.repo()},
        "max_runtime_seconds": 60,
    });
    let mut session = ClientProcess::start(
        &node_program(),
        &sdk_args(sdk, &[], "cancel", &args),
        &env,
        home.path(),
    );
    session.expect_sdk(sdk).await;

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
    let mut rejected: Value = serde_json::from_str(sdk.abort_error).unwrap();
    rejected["message"] = aborted["rejected"]["message"].clone();
    assert!(
        rejected["message"]
            .as_str()
            .is_some_and(|m| m.contains(ABORT_REASON)),
        "{}",
        session.transcript()
    );
    assert_eq!(
        aborted,
        json!({
            "event": "aborted",
            "rejected": rejected,
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
    // the session is still open: the server killed the run because of the cancellation
    assert_all_gone(&run, &pids).await;

    session.send_line().await;
    let last = session.next_line().await;
    assert_eq!(
        last,
        json!({"pinged": true, "responsesToCancelled": []}),
        "{}",
        session.transcript()
    );
    session.finish_ok().await;
    no_survivors(&marker).await;
}

/// The Node clients' sessions in a [`RealWorld`].
impl RealWorld {
    /// One session of `sdk`'s script playing `scenario` with `args`, checked to exit 0 with no
    /// process left behind; its last line.
    async fn sdk_session(&self, sdk: Sdk, extra: &[&str], scenario: &str, args: &Value) -> Value {
        let (env, marker) = self.env();
        let mut session = ClientProcess::start(
            &node_program(),
            &sdk_args(sdk, extra, scenario, args),
            &env,
            self.home.path(),
        );
        session.expect_sdk(sdk).await;
        let last = session.next_line().await;
        session.finish_ok().await;
        no_survivors(&marker).await;
        last
    }

    /// `node <inspector> --cli droid-executor mcp ARGS…`, with no process left behind once it
    /// exited; every variable also goes in `-e` when the inspector does not pass its own on.
    async fn inspector<S: AsRef<OsStr>>(&self, inspector: Inspector, args: &[S]) -> Out {
        let entry = node_client_dir(inspector.folder, inspector.version).join(inspector.entry);
        let (env, marker) = self.env();
        let mut argv: Vec<OsString> = vec![
            entry.into(),
            "--cli".into(),
            droid_executor_bin().into(),
            "mcp".into(),
        ];
        argv.extend(args.iter().map(|a| a.as_ref().to_owned()));
        if !inspector.passes_env {
            for (k, v) in &env {
                let mut pair = k.clone();
                pair.push("=");
                pair.push(v);
                argv.extend(["-e".into(), pair]);
            }
        }
        let mut session = ClientProcess::start(&node_program(), &argv, &env, self.home.path());
        session.close_stdin();
        let out = session.finish().await;
        no_survivors(&marker).await;
        out
    }
}

/// `node`, checked to run (Node.js 20 or later).
fn node_program() -> PathBuf {
    let program = PathBuf::from("node");
    #[allow(clippy::disallowed_methods)] // asks the third-party client runtime its version
    let version = std::process::Command::new(&program)
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned());
    let major = version
        .as_deref()
        .and_then(|v| v.strip_prefix('v')?.split('.').next()?.parse::<u32>().ok());
    assert!(
        major.is_some_and(|m| m >= 20),
        "the Node MCP clients need Node.js 20 or later on PATH (found {version:?}); install \
         Node.js and npm (e.g. apt-get install -y nodejs npm), then {INSTALL_HINT}"
    );
    program
}

/// `target/interop/node/node_modules/<folder>`, checked to hold `version`.
fn node_client_dir(folder: &str, version: &str) -> PathBuf {
    let dir = workspace_root()
        .join(NODE_DIR)
        .join("node_modules")
        .join(folder);
    let installed = std::fs::read(dir.join("package.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|m| m["version"].as_str().map(str::to_owned));
    assert_eq!(
        installed.as_deref(),
        Some(version),
        "the Node MCP client {folder} {version} is not installed in {}: {INSTALL_HINT}",
        dir.display()
    );
    dir
}

/// `node <script> EXTRA… SCENARIO ARGS_JSON droid-executor mcp`.
fn sdk_args(sdk: Sdk, extra: &[&str], scenario: &str, args: &Value) -> Vec<OsString> {
    node_client_dir(sdk.package, sdk.version);
    let mut argv: Vec<OsString> = vec![workspace_root().join(sdk.script).into()];
    argv.extend(extra.iter().map(OsString::from));
    argv.extend([
        scenario.into(),
        args.to_string().into(),
        droid_executor_bin().into(),
        "mcp".into(),
    ]);
    argv
}

/// Inspector v2's `tools/call` of `tool` with `args_json`, one JSON object on stdout.
fn call_args<'a>(tool: &'a str, args_json: &'a str) -> Vec<&'a str> {
    vec![
        "--method",
        "tools/call",
        "--tool-name",
        tool,
        "--tool-args-json",
        args_json,
        "--format",
        "json",
        "-q",
    ]
}

/// Inspector v1's `tools/call` of `tool`: one `--tool-arg key=<JSON value>` per argument
/// (strings as they are: v1 parses each value as JSON when it can).
fn v1_call_args(tool: &str, args: &Value) -> Vec<String> {
    let mut argv = vec![
        "--method".to_owned(),
        "tools/call".to_owned(),
        "--tool-name".to_owned(),
        tool.to_owned(),
    ];
    for (k, v) in args.as_object().unwrap() {
        let value = match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        argv.extend(["--tool-arg".to_owned(), format!("{k}={value}")]);
    }
    argv
}

impl ClientProcess {
    /// The first line of an SDK script: the SDK and version it loaded.
    async fn expect_sdk(&mut self, sdk: Sdk) {
        self.expect_line(&json!({"sdk": format!("{} {}", sdk.package, sdk.version)}))
            .await;
    }
}
