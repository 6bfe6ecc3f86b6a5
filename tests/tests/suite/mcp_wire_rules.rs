//! `droid-executor mcp` over its pipes, for the rules the base suites (`mcp_stdio`,
//! `mcp_wire_modern`) leave open: nothing of a cancelled call is written after the cancel (no
//! progress, no log message, no response, even while the engine cleans up); agent failures and a
//! run's time limit are `isError` results that say what to do; bad argument values of the
//! background tools are `isError` results and the server goes on; JSON-RPC batches exist only in
//! a 2025-03-26 session (answered in one array, long calls included, `initialize` refused inside)
//! and are refused elsewhere; a closed stdout (EPIPE) ends the server quietly with its droid
//! killed; start-up and a probe session leave no file behind; logs go to stderr and never to
//! stdout; the text of a huge result stays within its bound; and a droid that ignores SIGTERM
//! still does not hold the exit. The client side is `mcp_stdio`'s `Server`.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use droid_contract::ExecutionResult;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::procs::wait_gone;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};

use super::binary::command;
use super::mcp_stdio::{
    GONE, Home, REPLY_LIMIT, Server, TOOLS, assert_all_gone, assert_error, assistant, hanging_run,
    initialize_params, is_response_to, leak_then_hang, pong, short_run, tool_result,
};
use super::mcp_wire_modern::wait_for_notification;

/// The one revision with JSON-RPC batches.
const BATCH_REVISION: &str = "2025-03-26";
/// Longest text rendering of a result, in bytes (`TEXT_MAX` of the server's `tools.rs`).
const TEXT_MAX: usize = 4000;
/// The longest the server may take to exit after stdin EOF or SIGTERM (the issue's bound).
const EXIT_LIMIT: Duration = Duration::from_secs(2);

/// `initialize` at `version`, then `notifications/initialized`.
async fn initialize_at(s: &mut Server, version: &str) {
    let result = tool_result(
        s.request(json!("init"), "initialize", initialize_params(version))
            .await,
    );
    assert_eq!(result["protocolVersion"], version, "{result:#}");
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
}

fn request(id: Value, method: &str, params: Value) -> Value {
    let mut m = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if !params.is_null() {
        m["params"] = params;
    }
    m
}

fn call_msg(id: Value, tool: &str, arguments: Value) -> Value {
    request(
        id,
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    )
}

/// The text of a tool result, after checking it is one text item.
fn text_of(result: &Value) -> String {
    assert_eq!(result["content"][0]["type"], "text", "{result:#}");
    assert_eq!(
        result["content"].as_array().map(Vec::len),
        Some(1),
        "{result:#}"
    );
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text: {result:#}"))
        .to_owned()
}

/// Whether `m` mentions request `id` or progress token `token` anywhere a message can.
fn references(m: &Value, id: &Value, token: &Value) -> bool {
    match m {
        Value::Array(items) => items.iter().any(|x| references(x, id, token)),
        _ => m.get("id") == Some(id) || m["params"]["progressToken"] == *token,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nothing_of_a_cancelled_call_is_sent_after_the_cancel() {
    let home = Home::new(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let mut s = home.server();
    s.initialize().await;
    let set = s
        .request(json!(1), "logging/setLevel", json!({"level": "debug"}))
        .await;
    assert_eq!(tool_result(set), json!({}));
    let (id, token) = (json!(5), json!("cancel-me"));
    s.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "execute_droid_task", "arguments": home.task("Hang"),
                              "_meta": {"progressToken": token}}}))
        .await;
    let (reaper, pids) = hanging_run(&pid_file).await;
    // what the run has to say before it hangs: up to "droid is working", as progress and as a
    // debug log message (relayed in that order, after "droid started")
    wait_for_notification(&mut s, "notifications/message", |p| {
        p["data"]["message"] == "droid is working"
    })
    .await;
    let before: Vec<Value> = s.backlog.drain(..).collect();
    assert!(
        before.iter().any(|m| m["params"]["progressToken"] == token
            && m["params"]["message"] == "droid is working"),
        "no progress for the call before the cancel: {before:#?}"
    );

    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": id, "reason": "user cancelled"}}),
    )
    .await;
    assert_eq!(
        s.request(json!(6), "ping", Value::Null).await,
        pong(json!(6))
    );
    assert_all_gone(&reaper, &pids).await;
    // the engine goes on after droid is gone (it reads the repository and publishes the
    // cancelled status): give that time to surface, then ask again
    let mut after = s.collect_for(Duration::from_secs(2)).await;
    assert_eq!(
        s.request(json!(7), "ping", Value::Null).await,
        pong(json!(7))
    );
    after.extend(s.collect_for(Duration::from_millis(500)).await);
    let late: Vec<&Value> = after
        .iter()
        .filter(|m| references(m, &id, &token))
        .collect();
    assert_eq!(
        late,
        Vec::<&Value>::new(),
        "messages for the cancelled call"
    );
    // no other call runs, so any log message would be the cancelled call's
    assert_eq!(after, Vec::<Value>::new(), "messages after the cancel");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_failures_and_time_limits_are_error_results_that_say_what_to_do() {
    let home = Home::new(&json!([]));
    let mut s = home.server();
    s.initialize().await;
    let cases = [
        (
            "exit 1",
            json!([{"emit": assistant("I could not do it.")}, {"exit": 1}]),
        ),
        (
            "crash",
            json!([{"emit": assistant("Starting.")}, {"crash": true}]),
        ),
    ];
    for (n, (what, steps)) in cases.iter().enumerate() {
        home.play(steps);
        let result = s
            .call(json!(n), "execute_droid_task", home.task("Fail"))
            .await;
        assert_eq!(result["isError"], true, "{what}: {result:#}");
        let er: ExecutionResult = serde_json::from_value(result["structuredContent"].clone())
            .unwrap_or_else(|e| panic!("{what}: not an ExecutionResult ({e}): {result:#}"));
        assert_eq!(er.status.as_str(), "failed", "{what}: {er:#?}");
        assert_actionable(&text_of(&result), "failed", &er, what);
    }

    // a run that reaches its time limit
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let mut args = home.task("Hang until the limit");
    args["max_runtime_seconds"] = json!(3);
    s.send(&call_msg(json!("limit"), "execute_droid_task", args))
        .await;
    let (reaper, pids) = hanging_run(&pid_file).await;
    let result = tool_result(s.response(&json!("limit")).await);
    assert_eq!(result["isError"], true, "{result:#}");
    let er: ExecutionResult = serde_json::from_value(result["structuredContent"].clone())
        .unwrap_or_else(|e| panic!("not an ExecutionResult ({e}): {result:#}"));
    assert_eq!(er.status.as_str(), "timeout", "{er:#?}");
    assert_actionable(&text_of(&result), "timeout", &er, "time limit");
    assert_all_gone(&reaper, &pids).await;
}

/// The text names the status and every issue with its suggested action.
fn assert_actionable(text: &str, status: &str, er: &ExecutionResult, what: &str) {
    assert!(
        text.starts_with(&format!("status: {status}\n")),
        "{what}: {text}"
    );
    assert!(!er.issues.is_empty(), "{what}: no issue says why: {er:#?}");
    for issue in &er.issues {
        assert!(
            !issue.suggested_action.trim().is_empty(),
            "{what}: {issue:#?}"
        );
        let line = format!(
            "issue [{}]: {} -> {}",
            issue.kind.as_str(),
            issue.description,
            issue.suggested_action
        );
        assert!(text.contains(&line), "{what}: {line:?} not in {text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_argument_values_of_the_background_tools_are_error_results() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    s.initialize().await;
    // (tool, arguments, what the text must name)
    let cases = [
        ("droid_pend", json!({"wait_seconds": 601}), "wait_seconds"),
        ("droid_pend", json!({"wait_seconds": -1}), "wait_seconds"),
        ("droid_pend", json!({"wait_seconds": 2.5}), "wait_seconds"),
        ("droid_pend", json!({"wait_seconds": "5"}), "wait_seconds"),
        ("droid_pend", json!({"task_id": 42}), "task_id"),
        (
            "droid_pend",
            json!({"task_id": ["droid-1-abcd"]}),
            "task_id",
        ),
        (
            "droid_pend",
            json!({"task_id": "droid-1-ffff"}),
            "droid-1-ffff",
        ),
        ("droid_pend", json!({"task_id": "../../etc"}), "../../etc"),
        (
            "droid_pend",
            json!({"taskId": "droid-1-ffff"}),
            "\"taskId\"",
        ),
        ("droid_cancel", json!({}), "task_id is required"),
        (
            "droid_cancel",
            json!({"task_id": null}),
            "task_id is required",
        ),
        ("droid_cancel", json!({"task_id": 7}), "task_id"),
        (
            "droid_cancel",
            json!({"task_id": "droid-1-ffff"}),
            "droid-1-ffff",
        ),
        (
            "droid_cancel",
            json!({"task_id": "droid-1-ffff", "force": true}),
            "\"force\"",
        ),
        ("droid_ping", json!({"verbose": true}), "\"verbose\""),
    ];
    for (n, (tool, args, names)) in cases.iter().enumerate() {
        let result = s.call(json!(n), tool, args.clone()).await;
        assert_eq!(result["isError"], true, "{tool} {args}: {result:#}");
        let text = text_of(&result);
        assert!(
            text.contains(names),
            "{tool} {args}: the text does not name {names}: {text}"
        );
        // the server goes on serving
        let id = json!(format!("ping-{n}"));
        assert_eq!(s.request(id.clone(), "ping", Value::Null).await, pong(id));
    }
    // with no task yet, droid_pend without task_id says how to start one
    let result = s.call(json!("latest"), "droid_pend", json!({})).await;
    assert_eq!(result["isError"], true, "{result:#}");
    assert!(text_of(&result).contains("droid_submit"), "{result:#}");
    // arguments that are not an object are malformed params
    for (n, tool) in ["droid_pend", "droid_cancel", "droid_ping"]
        .into_iter()
        .enumerate()
    {
        let id = json!(100 + n);
        let resp = s
            .request(
                id.clone(),
                "tools/call",
                json!({"name": tool, "arguments": [1]}),
            )
            .await;
        assert_error(&resp, &id, -32602);
    }
    assert_eq!(
        s.request(json!(200), "ping", Value::Null).await,
        pong(json!(200))
    );
}

/// A batch of every kind of message a 2025-03-26 session may send; the answers, in order, are
/// checked by the caller.
fn mixed_batch(home: &Home) -> Value {
    json!([
        request(json!(1), "ping", Value::Null),
        request(json!(2), "initialize", initialize_params(BATCH_REVISION)),
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        call_msg(json!(3), "execute_droid_task", home.task("Think")),
        request(json!(4), "tools/list", Value::Null),
        request(json!(5), "no/such/method", json!({})),
        {"jsonrpc": "2.0", "id": 99, "result": {}},
        request(json!(6), "tools/list", json!({"_meta": {
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {},
        }})),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_03_26_session_gets_every_answer_of_a_batch_in_one_array() {
    let home = Home::new(&json!([
        {"emit": assistant("Thinking for a while.")},
        {"sleep_ms": 1500},
        {"completion": "Done."},
    ]));
    let mut s = home.server();
    initialize_at(&mut s, BATCH_REVISION).await;
    s.send(&mixed_batch(&home)).await;
    // one line, only once the call is done; nothing on a line of its own before it
    let answer = s.next().await;
    let answers = answer
        .as_array()
        .unwrap_or_else(|| panic!("a batch is answered with one array: {answer:#}"));
    let ids: Vec<&Value> = answers.iter().map(|a| &a["id"]).collect();
    assert_eq!(
        ids,
        vec![
            &json!(1),
            &json!(2),
            &json!(3),
            &json!(4),
            &json!(5),
            &json!(6)
        ],
        "{answer:#}"
    );
    assert_eq!(answers[0], pong(json!(1)));
    assert_error(&answers[1], &json!(2), -32600);
    assert!(
        answers[1]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("initialize") && m.contains("batch")),
        "{answer:#}"
    );
    let call = tool_result(answers[2].clone());
    assert_eq!(call["isError"], false, "{call:#}");
    assert_eq!(call["structuredContent"]["status"], "success", "{call:#}");
    let names: Vec<&str> = answers[3]["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer:#}"))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(names, TOOLS.to_vec());
    assert_error(&answers[4], &json!(5), -32601);
    assert_error(&answers[5], &json!(6), -32600);
    assert!(
        answers[5]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("2026-07-28")),
        "{answer:#}"
    );

    // notifications and responses only: no answer at all
    s.send(&json!([
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 404}},
        {"jsonrpc": "2.0", "id": 98, "result": {}},
    ]))
    .await;
    s.send(&request(json!(7), "ping", Value::Null)).await;
    assert_eq!(s.next().await, pong(json!(7)));
    // a batch of quick requests is answered at once, in one array
    s.send(&json!([
        request(json!(8), "ping", Value::Null),
        request(json!("nine"), "ping", Value::Null),
    ]))
    .await;
    assert_eq!(s.next().await, json!([pong(json!(8)), pong(json!("nine"))]));
    let rest = s.collect_for(Duration::from_millis(300)).await;
    assert_eq!(rest, Vec::<Value>::new(), "nothing else was answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_in_a_batch_leaves_only_the_other_answers() {
    let home = Home::new(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let mut s = home.server();
    initialize_at(&mut s, BATCH_REVISION).await;
    s.send(&json!([
        request(json!(1), "ping", Value::Null),
        call_msg(json!(2), "execute_droid_task", home.task("Hang")),
    ]))
    .await;
    let (reaper, pids) = hanging_run(&pid_file).await;
    // the array waits for the call
    let early = s.collect_for(Duration::from_millis(300)).await;
    assert_eq!(
        early,
        Vec::<Value>::new(),
        "the batch answered before its call"
    );
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 2}}),
    )
    .await;
    assert_eq!(s.next().await, json!([pong(json!(1))]));
    assert_all_gone(&reaper, &pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn other_sessions_get_one_invalid_request_for_a_batch_and_nothing_in_it_runs() {
    let home = Home::new(&short_run());
    // before initialize, then each revision that has no batches
    for version in [
        None,
        Some("2025-11-25"),
        Some("2025-06-18"),
        Some("2024-11-05"),
    ] {
        let mut s = home.server();
        if let Some(v) = version {
            initialize_at(&mut s, v).await;
        }
        s.send(&json!([
            request(json!(1), "ping", Value::Null),
            call_msg(json!(2), "droid_submit", home.task("Must not run")),
        ]))
        .await;
        let resp = s.next().await;
        assert_error(&resp, &Value::Null, -32600);
        let message = resp["error"]["message"].as_str().unwrap_or_default();
        let names = version.unwrap_or("before initialize");
        assert!(
            message.contains(names) && message.contains(BATCH_REVISION),
            "{version:?}: {message}"
        );
        // nothing of the batch was answered, and the server goes on
        s.send(&request(json!(3), "ping", Value::Null)).await;
        assert_eq!(s.next().await, pong(json!(3)), "{version:?}");
        if version.is_none() {
            // a tool call before initialize is refused (a session starts with initialize)
            s.initialize().await;
        }
        let pend = s.call(json!(4), "droid_pend", json!({})).await;
        assert!(
            text_of(&pend).contains("no tasks yet"),
            "{version:?}: the batch's droid_submit ran: {pend:#}"
        );
    }
}

/// The server's pipes held by the test itself, so that the test can close its end of stdout.
struct RawServer {
    child: tokio::process::Child,
    stdin: Option<tokio::process::ChildStdin>,
    stdout: Option<tokio::io::Lines<BufReader<tokio::process::ChildStdout>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
}

impl RawServer {
    fn start(env: &[(OsString, OsString)], cwd: &Path) -> RawServer {
        let mut child = command(&["mcp"], env, cwd)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let mut pipe = child.stderr.take().unwrap();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let into = Arc::clone(&stderr);
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                into.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        RawServer {
            child,
            stdin: Some(stdin),
            stdout: Some(stdout),
            stderr,
        }
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    async fn send(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin was taken");
        stdin
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next stdout line that is the response to `id`.
    async fn response(&mut self, id: &Value) -> Value {
        let lines = self.stdout.as_mut().expect("stdout was closed");
        loop {
            let line = tokio::time::timeout(REPLY_LIMIT, lines.next_line())
                .await
                .expect("no response in time")
                .unwrap()
                .expect("stdout ended");
            let m: Value = serde_json::from_str(&line).unwrap();
            if is_response_to(&m, id) {
                return m;
            }
        }
    }

    async fn initialize(&mut self) {
        self.send(&request(
            json!(0),
            "initialize",
            initialize_params("2025-11-25"),
        ))
        .await;
        tool_result(self.response(&json!(0)).await);
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Close the test's end of the server's stdout: its next write fails with EPIPE.
    fn close_stdout(&mut self) {
        self.stdout = None;
    }

    /// The exit code, waiting for as long as a reply may take.
    async fn exit_code(&mut self) -> Option<i32> {
        let status = tokio::time::timeout(REPLY_LIMIT, self.child.wait())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the server did not exit with its stdout closed\nstderr:\n{}",
                    self.stderr()
                )
            })
            .unwrap();
        status.code()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_stdout_ends_the_server_quietly_and_kills_its_running_droid() {
    let home = Home::new(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let mut s = RawServer::start(&home.env(), &home.repo());
    s.initialize().await;
    s.send(&call_msg(json!(1), "execute_droid_task", home.task("Hang")))
        .await;
    let (reaper, pids) = hanging_run(&pid_file).await;
    s.close_stdout();
    // the pong is the first write after the close
    s.send(&request(json!(2), "ping", Value::Null)).await;
    let code = s.exit_code().await;
    assert_eq!(code, Some(0), "stderr:\n{}", s.stderr());
    assert_eq!(s.stderr(), "", "the server is not quiet about EPIPE");
    assert_all_gone(&reaper, &pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_to_a_closed_stdout_ends_the_server_quietly() {
    let home = Home::new(&json!([
        {"emit": assistant("Working.")},
        {"sleep_ms": 1000},
        {"completion": "Done."},
    ]));
    let mut s = RawServer::start(&home.env(), &home.repo());
    s.initialize().await;
    s.send(&call_msg(json!(1), "execute_droid_task", home.task("Work")))
        .await;
    s.close_stdout();
    // the response is written into the closed pipe once droid is done
    let code = s.exit_code().await;
    assert_eq!(code, Some(0), "stderr:\n{}", s.stderr());
    assert_eq!(s.stderr(), "", "the server is not quiet about EPIPE");
}

/// Every path under `root` (itself excluded) with its kind, size and modification time.
fn tree(root: &Path) -> BTreeMap<PathBuf, (char, u64, Option<std::time::SystemTime>)> {
    let mut all = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(dir) = todo.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let kind = if meta.is_dir() {
                todo.push(path.clone());
                'd'
            } else if meta.is_symlink() {
                'l'
            } else {
                'f'
            };
            let rel = path.strip_prefix(root).unwrap().to_path_buf();
            all.insert(rel, (kind, meta.len(), meta.modified().ok()));
        }
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_and_a_probe_session_leave_nothing_behind() {
    let home = Home::new(&short_run());
    // every directory the server could write to is inside HOME, where the test can see it
    let mut env = home.env();
    for (var, dir) in [
        ("XDG_CONFIG_HOME", ".config"),
        ("XDG_STATE_HOME", ".local/state"),
        ("XDG_DATA_HOME", ".local/share"),
        ("XDG_CACHE_HOME", ".cache"),
        ("XDG_RUNTIME_DIR", "run"),
        ("TMPDIR", "tmp"),
    ] {
        let path = home.file(dir);
        std::fs::create_dir_all(&path).unwrap();
        env.push((var.into(), path.into()));
    }
    let before = tree(home.path());
    assert!(
        before.contains_key(Path::new(".config/droid-executor/config.toml")),
        "{before:#?}"
    );

    // a probe that only starts the server and goes away
    let mut s = Server::start(&env, &home.repo());
    s.close_stdin();
    let (status, _) = s.exit_within(REPLY_LIMIT).await;
    assert!(
        status.is_some_and(|st| st.success()),
        "{status:?}\nstderr:\n{}",
        s.stderr()
    );
    assert_eq!(tree(home.path()), before, "start-up changed files");

    // a session that initializes and lists the tools
    let mut s = Server::start(&env, &home.repo());
    s.initialize().await;
    let list = tool_result(s.request(json!(1), "tools/list", Value::Null).await);
    assert_eq!(list["tools"].as_array().map(Vec::len), Some(TOOLS.len()));
    s.close_stdin();
    let (status, _) = s.exit_within(REPLY_LIMIT).await;
    assert!(
        status.is_some_and(|st| st.success()),
        "{status:?}\nstderr:\n{}",
        s.stderr()
    );
    assert_eq!(tree(home.path()), before, "a probe session changed files");
    assert_eq!(
        s.stderr(),
        "",
        "a probe session logged at the default level"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_go_to_stderr_and_stdout_carries_only_protocol_lines() {
    let home = Home::new(&short_run());
    let mut env = home.env();
    env.push(("RUST_LOG".into(), "mcp_stdio=info".into()));
    let mut s = Server::start(&env, &home.repo());
    s.initialize().await;
    let result = s
        .call(
            json!("logged"),
            "execute_droid_task",
            home.task("Look around"),
        )
        .await;
    assert_eq!(result["isError"], false, "{result:#}");
    s.close_stdin();
    // every stdout line up to the end is checked to be one JSON-RPC message
    let rest = s.collect_for(REPLY_LIMIT).await;
    assert!(s.eof, "stdout did not end: {rest:#?}");
    let (status, _) = s.exit_within(REPLY_LIMIT).await;
    assert!(status.is_some_and(|st| st.success()), "{status:?}");
    let stderr = s.stderr();
    let line = stderr
        .lines()
        .find(|l| l.contains("tools/call answered"))
        .unwrap_or_else(|| panic!("no log line for the call on stderr:\n{stderr}"));
    for part in [
        "INFO",
        "tool=execute_droid_task",
        "id=\"logged\"",
        "status=\"success\"",
    ] {
        assert!(line.contains(part), "{part} not in {line:?}");
    }
    // stderr is a pipe here, as under every MCP client: plain text, no terminal colours
    assert!(
        !stderr.contains('\u{1b}'),
        "escape codes on stderr: {stderr:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_huge_result_still_gives_a_short_text() {
    // a final text of 40 000 bytes of 3-byte characters after one byte: droid's prose becomes
    // the summary (the engine keeps 4000 bytes of it), and the text rendering adds to that
    let prose = format!("x{}", "€".repeat(13_333));
    let home = Home::new(&json!([
        {"emit": assistant("Writing a long answer.")},
        {"completion": prose},
    ]));
    let mut s = home.server();
    s.initialize().await;
    let result = s
        .call(json!(1), "execute_droid_task", home.task("Say a lot"))
        .await;
    let text = text_of(&result);
    assert!(
        text.len() <= TEXT_MAX,
        "the text is {} bytes, over {TEXT_MAX}",
        text.len()
    );
    assert!(text.ends_with('…'), "the cut is not marked: {text:?}");
    assert!(text.starts_with("status: "), "{text:?}");
    // everything is still in structuredContent
    let summary = result["structuredContent"]["summary"]
        .as_str()
        .unwrap_or_else(|| panic!("no summary: {result:#}"));
    assert!(summary.len() > TEXT_MAX - 100, "{} bytes", summary.len());
}

/// How a test ends the session.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Eof,
    Sigterm,
}

/// With droid ignoring SIGTERM (so it needs the SIGKILL after the grace), ending the session by
/// `ending` still makes the server exit within 2 s, droid and its grandchild gone.
async fn exit_in_time_with_a_stubborn_droid(ending: Ending) {
    let home = Home::new(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&json!([
        {"ignore_sigterm": true},
        {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": pid_file}},
        {"hang": true},
    ]));
    let mut s = home.server();
    s.initialize().await;
    s.send(&call_msg(json!(1), "execute_droid_task", home.task("Hang")))
        .await;
    let (reaper, pids) = hanging_run(&pid_file).await;
    let pid = i32::try_from(s.child.id().unwrap()).unwrap();
    let asked = Instant::now();
    match ending {
        Ending::Eof => s.close_stdin(),
        Ending::Sigterm => kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap(),
    }
    let (status, _) = s.exit_within(REPLY_LIMIT).await;
    let took = asked.elapsed();
    assert!(
        status.is_some(),
        "{ending:?}: no exit\nstderr:\n{}",
        s.stderr()
    );
    assert!(
        took < EXIT_LIMIT,
        "{ending:?}: the server took {took:?} to exit\nstderr:\n{}",
        s.stderr()
    );
    eprintln!("{ending:?}: exited after {took:?} with droid ignoring SIGTERM");
    assert_all_gone(&reaper, &pids).await;
    assert!(wait_gone(pid, GONE).await);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_exits_in_time_even_when_droid_ignores_sigterm() {
    exit_in_time_with_a_stubborn_droid(Ending::Eof).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_exits_in_time_even_when_droid_ignores_sigterm() {
    exit_in_time_with_a_stubborn_droid(Ending::Sigterm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_a_server_whose_client_stopped_reading() {
    let home = Home::new(&short_run());
    let mut s = RawServer::start(&home.env(), &home.repo());
    s.initialize().await;
    // the client keeps sending pings but never reads again: stdout's pipe fills, then the
    // server's queue, then the server waits to write
    let mut stdin = s.stdin.take().unwrap();
    let sent = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&sent);
    let flood = tokio::spawn(async move {
        let pings = format!("{}\n", request(json!(1), "ping", Value::Null)).repeat(100);
        while stdin.write_all(pings.as_bytes()).await.is_ok() {
            counter.fetch_add(100, Ordering::Relaxed);
        }
    });
    // the server is stuck once it stops reading: our writes then stop too (stdin's pipe is full)
    let mut last = usize::MAX;
    loop {
        tokio::time::sleep(Duration::from_millis(300)).await;
        let now = sent.load(Ordering::Relaxed);
        if now == last {
            break;
        }
        last = now;
    }
    // more pings than the server's queue (1024 answers) holds: it stopped because it is stuck
    assert!(last > 2000, "only {last} pings were sent");
    let pid = i32::try_from(s.child.id().unwrap()).unwrap();
    let asked = Instant::now();
    kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    let status = tokio::time::timeout(REPLY_LIMIT, s.child.wait()).await;
    let took = asked.elapsed();
    flood.abort();
    assert!(
        status.is_ok(),
        "the server did not exit on SIGTERM\nstderr:\n{}",
        s.stderr()
    );
    assert!(
        took < EXIT_LIMIT,
        "the server took {took:?} to exit\nstderr:\n{}",
        s.stderr()
    );
    eprintln!("exited {took:?} after SIGTERM with its stdout full ({last} pings sent)");
}
