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
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::{droid_executor_bin, real_droid, workspace_root};
use tests::droid_home::DroidHome;
use tests::procs::pids_with_env;
use tests::scripted_model::ScriptedModel;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::binary::{FakeHome, git_repo_at};
use super::mcp_stdio::{assert_all_gone, hanging_run};

/// Where `cargo xtask fetch-interop` installs the Node clients, relative to the workspace root.
const NODE_DIR: &str = "target/interop/node";
/// The install hint every missing-client failure gives.
const INSTALL_HINT: &str = "run `cargo xtask fetch-interop` (cargo xtask test does; it needs \
                            Node.js 20 or later and npm)";
/// One whole client session (droid_pend waits up to 60 s by itself).
const SESSION_LIMIT: Duration = Duration::from_secs(180);
/// How long the session's processes may take to go once the client has exited (the server exits
/// within 2 s of stdin EOF, after killing its runs; a finished task's supervisor exits by itself).
const EXIT_LIMIT: Duration = Duration::from_secs(10);
/// Passed through to droid (config `env_passthrough`), so every process of a session carries it:
/// the client, the server, task supervisors and droid.
const SESSION_VAR: &str = "MCP_NODE_SESSION";
/// The tools, in the order `tools/list` gives them.
const TOOLS: [&str; 5] = [
    "execute_droid_task",
    "droid_submit",
    "droid_pend",
    "droid_cancel",
    "droid_ping",
];
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
    let pid_file = home.file("sleep.pid");
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

/// A scripted model, a droid HOME pointing at it (also the binary's HOME, holding the
/// repositories and the task store, with a config passing [`SESSION_VAR`] through to droid).
struct RealWorld {
    model: ScriptedModel,
    home: DroidHome,
}

impl RealWorld {
    async fn new() -> RealWorld {
        // repositories are named in scripts, so the home exists before the script
        let model = ScriptedModel::start(json!([{"text": "placeholder"}]))
            .await
            .unwrap();
        let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
        let config = home.path().join(".config/droid-executor");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(
            config.join("config.toml"),
            format!("env_passthrough = [\"{SESSION_VAR}\"]\n"),
        )
        .unwrap();
        RealWorld { model, home }
    }

    /// A git repository `name` in the home.
    fn repo(&self, name: &str) -> PathBuf {
        let dir = self.home.path().join(name);
        git_repo_at(&dir, &[("a.txt", "hello\n")]);
        dir
    }

    /// `execute_droid_task` / `droid_submit` arguments for `objective` in `repo`, on the
    /// scripted model.
    fn request(&self, repo: &Path, objective: &str) -> Value {
        json!({
            "objective": objective,
            "context": {"repo_root": repo},
            "model": self.home.model_id("Mock"),
            "max_runtime_seconds": 60,
        })
    }

    /// droid's environment, the real droid, and a fresh session marker.
    fn env(&self) -> (Vec<(OsString, OsString)>, String) {
        let marker = session_marker(self.home.path());
        let mut env = self.home.env();
        env.push(("DROID_CLI_CMD".into(), real_droid().into()));
        env.push((SESSION_VAR.into(), marker.clone().into()));
        (env, marker)
    }

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

/// A marker no other session uses.
fn session_marker(home: &Path) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        home.display(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
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

/// Arguments naming a repository that does not exist.
fn missing_repo(path: &Path) -> Value {
    json!({"objective": "Say done.", "context": {"repo_root": path}})
}

/// The scripted model: droid creates `name` in `repo` (`b\n`), then says so.
fn create_file(repo: &Path, name: &str) -> Value {
    json!([
        {"tool": [{"name": "Create", "args": {"file_path": repo.join(name), "content": "b\n"}}]},
        {"text": format!("Created {name}.")}
    ])
}

/// The `list` scenario's answer: the negotiated `version`, the server and every tool.
fn assert_listed(out: &Value, version: &str) {
    assert_eq!(out["protocolVersion"], version, "{out:#}");
    assert_eq!(out["server"]["name"], "droid-executor", "{out:#}");
    assert_tools(&out["tools"]);
}

/// The five tools in order, each with a title, a description, annotations, and input and
/// output schemas that are objects.
fn assert_tools(tools: &Value) {
    let list = tools
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {tools:#}"));
    let names: Vec<&str> = list.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, TOOLS, "{tools:#}");
    for tool in list {
        let name = &tool["name"];
        for key in ["title", "description"] {
            assert!(
                tool[key].as_str().is_some_and(|s| !s.is_empty()),
                "{name}: no {key}: {tool:#}"
            );
        }
        assert!(tool["annotations"].is_object(), "{name}: {tool:#}");
        for key in ["inputSchema", "outputSchema"] {
            assert_eq!(tool[key]["type"], "object", "{name}: {key}: {tool:#}");
        }
    }
    assert_eq!(
        list[0]["inputSchema"]["required"],
        json!(["objective", "context"]),
        "{tools:#}"
    );
}

/// The `execute_droid_task` result of [`create_file`] `b.txt`: success, with the file measured
/// from the repository.
fn assert_created_b_txt(result: &Value) {
    assert_eq!(result["isError"], false, "{result:#}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["status"], "success", "{result:#}");
    assert_eq!(sc["issues"], json!([]), "{result:#}");
    assert_eq!(
        sc["files_changed"],
        json!([{
            "path": "b.txt",
            "change_type": "added",
            "old_path": null,
            "highlights": ["created by droid (1 lines)"],
            "lines_added": 1,
            "lines_removed": 0,
        }]),
        "{result:#}"
    );
    assert_eq!(sc["droid"]["exit_code"], 0, "{result:#}");
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("status: success\n"), "{result:#}");
}

/// The `execute` scenario's progress: notifications each echoing the request id as the token
/// (SDKs use the id, an integer), `progress` strictly increasing, a message each, droid's start
/// and its `Create` of `b.txt` in `repo` among them; the SDK handed every one to the callback.
fn assert_progress(out: &Value, repo: &Path) {
    let on_wire = out["progressNotifications"]
        .as_array()
        .unwrap_or_else(|| panic!("{out:#}"));
    assert!(!on_wire.is_empty(), "no progress notification: {out:#}");
    assert!(out["requestId"].is_i64(), "{out:#}");
    let mut last = f64::NEG_INFINITY;
    for n in on_wire {
        let params = &n["params"];
        assert_eq!(params["progressToken"], out["requestId"], "{n:#}");
        let progress = params["progress"].as_f64().unwrap_or(f64::NAN);
        assert!(progress > last, "progress does not increase: {on_wire:#?}");
        last = progress;
        assert!(
            params["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{n:#}"
        );
    }
    let handed: Vec<Value> = on_wire
        .iter()
        .map(|n| {
            let mut p = n["params"].clone();
            p.as_object_mut().unwrap().remove("progressToken");
            p
        })
        .collect();
    assert_eq!(out["progress"], json!(handed), "{out:#}");
    // droid's own events come through
    let messages: Vec<&str> = on_wire
        .iter()
        .filter_map(|n| n["params"]["message"].as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("droid started (pid ")),
        "{messages:#?}"
    );
    let create = format!("Create {}", repo.join("b.txt").display());
    assert!(messages.contains(&create.as_str()), "{messages:#?}");
}

/// An `isError` result for a repo_root that does not exist, saying what to fix.
fn assert_missing_repo(result: &Value, path: &Path) {
    assert_eq!(result["isError"], true, "{result:#}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["status"], "error", "{result:#}");
    assert_eq!(
        sc["issues"],
        json!([{
            "type": "validation_error",
            "description": format!("$.context.repo_root: \"{}\" does not exist", path.display()),
            "suggested_action": "fix $.context.repo_root and send the request again",
        }]),
        "{result:#}"
    );
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("does not exist -> fix $.context.repo_root"),
        "{result:#}"
    );
}

/// The task id of a `droid_submit` result.
fn submitted(result: &Value) -> String {
    assert_eq!(result["isError"], false, "{result:#}");
    let task_id = result["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task_id: {result:#}"))
        .to_owned();
    assert_eq!(
        result["structuredContent"],
        json!({"task_id": task_id}),
        "{result:#}"
    );
    task_id
}

/// A `droid_pend` result: task `task_id` finished with success.
fn assert_pended(result: &Value, task_id: &str) {
    assert_eq!(result["isError"], false, "{result:#}");
    let rec = &result["structuredContent"];
    assert_eq!(rec["task_id"], task_id, "{result:#}");
    assert_eq!(rec["state"], "success", "{result:#}");
    assert_eq!(rec["result"]["status"], "success", "{result:#}");
    assert_eq!(rec["result"]["task_id"], task_id, "{result:#}");
}

/// Waits until no process carries `SESSION_VAR=marker`, failing after [`EXIT_LIMIT`].
async fn no_survivors(marker: &str) {
    let until = Instant::now() + EXIT_LIMIT;
    loop {
        let pids = pids_with_env(SESSION_VAR, marker);
        if pids.is_empty() {
            return;
        }
        if Instant::now() >= until {
            let commands: Vec<String> = pids
                .iter()
                .map(|pid| {
                    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    format!(
                        "{pid}: {}",
                        String::from_utf8_lossy(&cmdline).replace('\0', " ")
                    )
                })
                .collect();
            for pid in &pids {
                let _ = kill(Pid::from_raw(*pid), Signal::SIGKILL);
            }
            panic!(
                "processes of the session outlived the client by {EXIT_LIMIT:?}:\n{}",
                commands.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// What a client process gave.
#[derive(Debug)]
struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

impl Out {
    /// stdout as one JSON value.
    fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {self:#?}"))
    }
}

/// A Node client in its own process group, stdin piped, stdout read line by line, stderr
/// collected. Dropping it kills the group (the client and the server it started), so a failing
/// test leaves nothing running.
struct ClientProcess {
    child: Child,
    pgid: Pid,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every stdout line read so far.
    seen: Vec<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    deadline: Instant,
    /// Set once the client has exited and been reaped: what is left is for the suite to judge.
    exited: bool,
}

impl ClientProcess {
    /// `program ARGS` with exactly `env`, in `cwd`.
    #[allow(clippy::disallowed_methods)] // the suite runs third-party clients, not droid
    fn start<S: AsRef<OsStr>>(
        program: &Path,
        args: &[S],
        env: &[(OsString, OsString)],
        cwd: &Path,
    ) -> ClientProcess {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", program.display()));
        let pgid = Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        ClientProcess {
            child,
            pgid,
            stdin,
            stdout,
            seen: Vec::new(),
            stderr,
            deadline: Instant::now() + SESSION_LIMIT,
            exited: false,
        }
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// What the client printed so far, for failure messages.
    fn transcript(&self) -> String {
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            self.seen.join("\n"),
            self.stderr()
        )
    }

    fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The go-ahead the `cancel` scenario waits for.
    async fn send_line(&mut self) {
        let stdin = self.stdin.as_mut().expect("stdin was closed");
        stdin.write_all(b"go\n").await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next stdout line, as JSON; panics (with the transcript) on EOF, timeout or an
    /// `{"error": …}` line.
    async fn next_line(&mut self) -> Value {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let line = match tokio::time::timeout(left, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(_) => panic!("the client's stdout ended early\n{}", self.transcript()),
            Err(_) => panic!(
                "the client printed nothing more within {SESSION_LIMIT:?}\n{}",
                self.transcript()
            ),
        };
        self.seen.push(line.clone());
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a stdout line is not JSON ({e})\n{}", self.transcript()));
        assert!(
            value.get("error").is_none(),
            "the client failed\n{}",
            self.transcript()
        );
        value
    }

    /// The first line of an SDK script: the SDK and version it loaded.
    async fn expect_sdk(&mut self, sdk: Sdk) {
        let first = self.next_line().await;
        assert_eq!(
            first,
            json!({"sdk": format!("{} {}", sdk.package, sdk.version)}),
            "{}",
            self.transcript()
        );
    }

    /// Waits for the exit; everything it printed.
    async fn finish(mut self) -> Out {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let mut rest = Vec::new();
        let read_rest = async {
            while let Ok(Some(line)) = self.stdout.next_line().await {
                rest.push(line);
            }
            self.child.wait().await
        };
        let status: ExitStatus = match tokio::time::timeout(left, read_rest).await {
            Ok(status) => status.unwrap(),
            Err(_) => panic!(
                "the client did not exit within {SESSION_LIMIT:?}\n{}",
                self.transcript()
            ),
        };
        self.exited = true;
        self.seen.extend(rest);
        Out {
            code: status.code(),
            stdout: self.seen.join("\n"),
            stderr: self.stderr(),
        }
    }

    /// Waits for the exit, which must be 0 with nothing more printed.
    async fn finish_ok(mut self) {
        self.close_stdin();
        let printed = self.seen.len();
        let out = self.finish().await;
        let more: Vec<&str> = out.stdout.lines().skip(printed).collect();
        assert!(
            out.code == Some(0) && more.is_empty(),
            "the client did not end cleanly: {out:#?}"
        );
    }
}

impl Drop for ClientProcess {
    fn drop(&mut self) {
        // the client and the server it started (same group) when the test failed before the
        // client exited; droid runs have their own groups and are killed by the server, or by a
        // Reaper / no_survivors on a failed test
        if !self.exited {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}
