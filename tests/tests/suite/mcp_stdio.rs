//! `droid-executor mcp`, the MCP stdio server, driven over its pipes the way a client drives it,
//! with the fake droid: the handshake and version negotiation, the framing and JSON-RPC error
//! answers, the tool list, tool errors as protocol errors or `isError` results, progress
//! notifications echoing the client's token, cancellation (no response, no surviving process),
//! pings answered during a long call, the end of the session on stdin EOF or SIGTERM, and the
//! background tools (`droid_submit` / `droid_pend` / `droid_cancel`), whose tasks outlive the
//! server. Every line the server prints on stdout must be one JSON-RPC message (or a batch). The
//! client side (`Server`, `Home`) and the helpers are shared with `mcp_wire_modern` and
//! `mcp_wire_rules`.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use droid_contract::{ExecutionResult, TaskRecord};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::procs::{pids_with_env, wait_env_value, wait_gone};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::mpsc;

use super::binary::{FakeHome, command};
use super::common::read_pid_file;

/// The variable the engine marks every process of a run with.
pub(super) const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";
/// The longest any one answer may take (a `droid_pend` may wait 30 s by itself).
pub(super) const REPLY_LIMIT: Duration = Duration::from_secs(90);
/// How long a process the server ended may take to disappear.
pub(super) const GONE: Duration = Duration::from_secs(5);
/// What "answered at once" means on a loaded test machine.
const PROMPT: Duration = Duration::from_secs(2);
/// The protocol versions the server speaks, newest first.
pub(super) const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The tools, in the order the default `tools/list` gives them: the seven droid tools (toolset
/// `droid`), then the one delegation family taking a `provider` (toolset `delegate`).
pub(super) const TOOLS: [&str; 11] = [
    "execute_droid_task",
    "droid_submit",
    "droid_pend",
    "droid_cancel",
    "droid_apply",
    "droid_discard",
    "droid_ping",
    "ask",
    "pend",
    "ping",
    "cancel",
];

/// Every tool `setup mcp` approves in a client, in its order: the droid tools, each provider's
/// own family (toolset `per_provider`, opt-in), then the shared family (`delegate`): whatever
/// toolsets the server offers, an approval of a tool it does not list is inert.
pub(super) fn approved_tools() -> Vec<String> {
    let mut all: Vec<String> = TOOLS[..7].iter().map(|t| (*t).to_owned()).collect();
    for p in ["droid", "codex", "claude", "gemini", "opencode"] {
        all.extend(["ask", "pend", "ping", "cancel"].map(|v| format!("{v}_{p}")));
    }
    all.extend(TOOLS[7..].iter().map(|t| (*t).to_owned()));
    all
}

/// The fake droid's HOME, with a server to start in it; pid files go beside the repository.
pub(super) struct Home(FakeHome);

impl std::ops::Deref for Home {
    type Target = FakeHome;
    fn deref(&self) -> &FakeHome {
        &self.0
    }
}

impl Home {
    pub(super) fn new(steps: &Value) -> Home {
        let home = Home(FakeHome::new("mcp-stdio", &[]));
        home.play(steps);
        home
    }

    /// The arguments of `execute_droid_task` / `droid_submit` for `objective` in the repository.
    pub(super) fn task(&self, objective: &str) -> Value {
        json!({
            "objective": objective,
            "context": {"repo_root": self.repo().display().to_string()},
        })
    }

    pub(super) fn server(&self) -> Server {
        Server::start(&self.env(), &self.repo())
    }
}

/// The MCP client side: the server's pipes, every stdout line checked and parsed by a reader
/// task, messages read but not yet claimed kept in arrival order.
pub(super) struct Server {
    pub(super) child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::UnboundedReceiver<Result<Value, String>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    pub(super) backlog: VecDeque<Value>,
    pub(super) eof: bool,
}

impl Server {
    pub(super) fn start(env: &[(OsString, OsString)], cwd: &Path) -> Server {
        let mut child = command(&["mcp"], env, cwd)
            .stdin(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().unwrap();
        let stderr_pipe = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(read_stdout(stdout, tx));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(read_stderr(stderr_pipe, Arc::clone(&stderr)));
        Server {
            child,
            stdin,
            lines,
            stderr,
            backlog: VecDeque::new(),
            eof: false,
        }
    }

    /// What the server logged so far.
    pub(super) fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    pub(super) async fn send_raw(&mut self, text: &str) {
        let stdin = self.stdin.as_mut().expect("stdin was closed");
        stdin.write_all(text.as_bytes()).await.unwrap();
        stdin.flush().await.unwrap();
    }

    /// One message, one line.
    pub(super) async fn send(&mut self, msg: &Value) {
        self.send_raw(&format!("{msg}\n")).await;
    }

    pub(super) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The next line from stdout within `limit`; `None` on timeout or at the end of stdout.
    pub(super) async fn read_within(&mut self, limit: Duration) -> Option<Value> {
        if self.eof {
            return None;
        }
        match tokio::time::timeout(limit, self.lines.recv()).await {
            Err(_) => None,
            Ok(None) => {
                self.eof = true;
                None
            }
            Ok(Some(Ok(v))) => Some(v),
            Ok(Some(Err(bad))) => panic!("{bad}\nstderr:\n{}", self.stderr()),
        }
    }

    /// The next message not yet claimed.
    pub(super) async fn next(&mut self) -> Value {
        if let Some(v) = self.backlog.pop_front() {
            return v;
        }
        match self.read_within(REPLY_LIMIT).await {
            Some(v) => v,
            None => panic!(
                "no message from the server (eof: {})\nstderr:\n{}",
                self.eof,
                self.stderr()
            ),
        }
    }

    /// The response to request `id`; messages before it stay in the backlog.
    pub(super) async fn response(&mut self, id: &Value) -> Value {
        if let Some(i) = self.backlog.iter().position(|m| is_response_to(m, id)) {
            return self.backlog.remove(i).unwrap();
        }
        let until = Instant::now() + REPLY_LIMIT;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let Some(m) = self.read_within(left).await else {
                panic!(
                    "no response to request {id} (eof: {}); unclaimed: {:#?}\nstderr:\n{}",
                    self.eof,
                    self.backlog,
                    self.stderr()
                );
            };
            if is_response_to(&m, id) {
                return m;
            }
            self.backlog.push_back(m);
        }
    }

    /// Send request `id` (`params` left out when null) and wait for its response.
    pub(super) async fn request(&mut self, id: Value, method: &str, params: Value) -> Value {
        let mut msg = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            msg["params"] = params;
        }
        self.send(&msg).await;
        self.response(&id).await
    }

    /// `tools/call`; the result (panics on a JSON-RPC error).
    pub(super) async fn call(&mut self, id: Value, tool: &str, arguments: Value) -> Value {
        let resp = self
            .request(
                id,
                "tools/call",
                json!({"name": tool, "arguments": arguments}),
            )
            .await;
        tool_result(resp)
    }

    /// The legacy handshake at the newest version, then `notifications/initialized`.
    pub(super) async fn initialize(&mut self) {
        let resp = self
            .request(json!("init"), "initialize", initialize_params(VERSIONS[0]))
            .await;
        assert_eq!(resp["result"]["protocolVersion"], VERSIONS[0], "{resp:#}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
    }

    /// Every message that arrives within `period`, the unclaimed backlog first.
    pub(super) async fn collect_for(&mut self, period: Duration) -> Vec<Value> {
        let mut all: Vec<Value> = self.backlog.drain(..).collect();
        let until = Instant::now() + period;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return all;
            }
            match self.read_within(left).await {
                Some(m) => all.push(m),
                None if self.eof => return all,
                None => {}
            }
        }
    }

    /// Unclaimed notifications with `method`, removed from the backlog, in arrival order.
    pub(super) fn take_notifications(&mut self, method: &str) -> Vec<Value> {
        let mut taken = Vec::new();
        let mut kept = VecDeque::new();
        for m in self.backlog.drain(..) {
            if m.get("id").is_none() && m["method"] == method {
                taken.push(m);
            } else {
                kept.push_back(m);
            }
        }
        self.backlog = kept;
        taken
    }

    /// Waits until the server has exited; its status and how long that took.
    pub(super) async fn exit_within(&mut self, limit: Duration) -> (Option<ExitStatus>, Duration) {
        let started = Instant::now();
        let status = tokio::time::timeout(limit, self.child.wait())
            .await
            .ok()
            .map(Result::unwrap);
        (status, started.elapsed())
    }
}

/// Splits stdout into lines and checks each: UTF-8, newline-terminated, JSON, and either a
/// JSON-RPC 2.0 message object or a non-empty array of them.
async fn read_stdout(stdout: ChildStdout, tx: mpsc::UnboundedSender<Result<Value, String>>) {
    let mut reader = BufReader::new(stdout);
    let mut buf = Vec::new();
    loop {
        buf.clear();
        match reader.read_until(b'\n', &mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if tx.send(check_line(&buf)).is_err() {
            return;
        }
    }
}

fn check_line(raw: &[u8]) -> Result<Value, String> {
    let text = std::str::from_utf8(raw)
        .map_err(|e| format!("a stdout line is not UTF-8 ({e}): {raw:?}"))?;
    let line = text
        .strip_suffix('\n')
        .ok_or_else(|| format!("stdout ended inside a line: {text:?}"))?;
    let value: Value = serde_json::from_str(line)
        .map_err(|e| format!("a stdout line is not one JSON value ({e}): {line:?}"))?;
    let messages: Vec<&Value> = match &value {
        Value::Array(items) if items.is_empty() => {
            return Err(format!("an empty batch on stdout: {line:?}"));
        }
        Value::Array(items) => items.iter().collect(),
        one => vec![one],
    };
    for m in messages {
        if !m.is_object() || m["jsonrpc"] != "2.0" {
            return Err(format!(
                "not a JSON-RPC 2.0 message on stdout: {m} (line {line:?})"
            ));
        }
    }
    Ok(value)
}

async fn read_stderr(mut stderr: ChildStderr, into: Arc<Mutex<Vec<u8>>>) {
    let mut buf = [0u8; 4096];
    while let Ok(n) = stderr.read(&mut buf).await {
        if n == 0 {
            return;
        }
        into.lock().unwrap().extend_from_slice(&buf[..n]);
    }
}

pub(super) fn is_response_to(m: &Value, id: &Value) -> bool {
    m.is_object() && m.get("method").is_none() && m.get("id") == Some(id)
}

pub(super) fn initialize_params(version: &str) -> Value {
    json!({
        "protocolVersion": version,
        "capabilities": {},
        "clientInfo": {"name": "mcp-stdio-suite", "version": "0.0.0"},
    })
}

/// The `result` of a response, which must not be an error.
pub(super) fn tool_result(resp: Value) -> Value {
    assert!(resp.get("error").is_none(), "a JSON-RPC error: {resp:#}");
    resp["result"].clone()
}

/// The error code of an error response, after checking its shape.
pub(super) fn error_code(resp: &Value) -> i64 {
    assert!(resp.get("result").is_none(), "not an error: {resp:#}");
    let error = &resp["error"];
    assert!(
        error["message"].as_str().is_some_and(|m| !m.is_empty()),
        "an error needs a message: {resp:#}"
    );
    error["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("no integer error code: {resp:#}"))
}

fn ping(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "ping"})
}

pub(super) fn pong(id: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "result": {}})
}

/// `{"jsonrpc","id","error"}` exactly, with `code`.
pub(super) fn assert_error(resp: &Value, id: &Value, code: i64) {
    assert_eq!(error_code(resp), code, "{resp:#}");
    let mut keys: Vec<&str> = resp
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, vec!["error", "id", "jsonrpc"], "{resp:#}");
    assert_eq!(&resp["id"], id, "{resp:#}");
}

/// A droid `message` event from the assistant.
pub(super) fn assistant(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "id": "m-1", "text": text,
           "timestamp": 1_795_320_771_553_u64, "session_id": "fake-session"})
}

/// Two assistant messages and a completion, about 300 ms in all.
pub(super) fn short_run() -> Value {
    json!([
        {"emit": assistant("Looking at the repository.")},
        {"sleep_ms": 150},
        {"emit": assistant("Nothing to change.")},
        {"sleep_ms": 150},
        {"completion": "Done."},
    ])
}

/// Leak a `setsid` grandchild (`sh`, whose pid goes to `pid_file`, running `sleep`), then hang.
pub(super) fn leak_then_hang(pid_file: &Path) -> Value {
    // `; exit 0` keeps sh alive as the parent of sleep, so both can be checked
    json!([
        {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": pid_file}},
        {"hang": true},
    ])
}

/// Kills (SIGKILL, by pid) whatever still carries a run's marker when dropped, so a failing test
/// leaks no sleeper; a passing test has already checked that nothing is left.
pub(super) struct Reaper {
    pub(super) marker: String,
}

impl Drop for Reaper {
    fn drop(&mut self) {
        for pid in pids_with_env(MARKER_VAR, &self.marker) {
            let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
        }
    }
}

/// A hanging run whose grandchild wrote `pid_file`: its marker and its processes (droid, the
/// grandchild `sh` and its `sleep`), once all three are up.
pub(super) async fn hanging_run(pid_file: &Path) -> (Reaper, Vec<i32>) {
    let sh = read_pid_file(pid_file, REPLY_LIMIT).await;
    let marker = wait_env_value(sh, MARKER_VAR, GONE).await;
    let reaper = Reaper { marker };
    let until = Instant::now() + GONE;
    loop {
        let pids = pids_with_env(MARKER_VAR, &reaper.marker);
        if pids.len() >= 3 {
            return (reaper, pids);
        }
        assert!(
            Instant::now() < until,
            "the run {} never had droid, sh and sleep up: {pids:?}",
            reaper.marker
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

pub(super) async fn assert_all_gone(reaper: &Reaper, pids: &[i32]) {
    for pid in pids {
        assert!(
            wait_gone(*pid, GONE).await,
            "process {pid} of run {} survived",
            reaper.marker
        );
    }
    assert_eq!(
        pids_with_env(MARKER_VAR, &reaper.marker),
        Vec::<i32>::new(),
        "processes of run {} survived",
        reaper.marker
    );
}

/// `droid-<unix seconds>-<4 lowercase hex digits>`.
pub(super) fn is_task_id(id: &str) -> bool {
    let Some(rest) = id.strip_prefix("droid-") else {
        return false;
    };
    let Some((secs, hex)) = rest.split_once('-') else {
        return false;
    };
    !secs.is_empty()
        && secs.bytes().all(|b| b.is_ascii_digit())
        && hex.len() == 4
        && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// The task record a `droid_pend` / `droid_cancel` result carries.
pub(super) fn record_of(result: &Value) -> TaskRecord {
    let sc = &result["structuredContent"];
    let mut keys: Vec<&str> = sc
        .as_object()
        .unwrap_or_else(|| panic!("no structuredContent: {result:#}"))
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        vec!["created_at", "result", "state", "task_id", "updated_at"],
        "{result:#}"
    );
    serde_json::from_value(sc.clone())
        .unwrap_or_else(|e| panic!("not a task record ({e}): {result:#}"))
}

/// Submit `objective`; its task id.
pub(super) async fn submit(s: &mut Server, home: &Home, id: i64, objective: &str) -> String {
    let result = s
        .call(json!(id), "droid_submit", home.task(objective))
        .await;
    assert_eq!(result["isError"], false, "{result:#}");
    let task_id = result["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task_id: {result:#}"))
        .to_owned();
    assert!(is_task_id(&task_id), "{task_id}");
    assert_eq!(
        result["structuredContent"],
        json!({"task_id": task_id}),
        "{result:#}"
    );
    task_id
}

/// `execute_droid_task` with `_meta.progressToken = token`: the progress notifications received
/// before the response must echo the token exactly (same JSON type) with strictly increasing
/// `progress`, and none may follow the response.
async fn call_with_progress(s: &mut Server, home: &Home, id: i64, token: Value) {
    let resp = s
        .request(
            json!(id),
            "tools/call",
            json!({
                "name": "execute_droid_task",
                "arguments": home.task("Look around"),
                "_meta": {"progressToken": token},
            }),
        )
        .await;
    let result = tool_result(resp);
    assert_eq!(result["isError"], false, "{result:#}");
    assert_eq!(
        result["structuredContent"]["status"], "success",
        "{result:#}"
    );
    let before = s.take_notifications("notifications/progress");
    assert!(
        !before.is_empty(),
        "no notifications/progress before the response (token {token})"
    );
    let mut last = f64::NEG_INFINITY;
    for n in &before {
        let params = &n["params"];
        assert_eq!(params["progressToken"], token, "{n:#}");
        let progress = params["progress"]
            .as_f64()
            .unwrap_or_else(|| panic!("progress is not a number: {n:#}"));
        assert!(progress > last, "progress does not increase: {before:#?}");
        last = progress;
        assert!(params["message"].is_string(), "{n:#}");
    }
    let after: Vec<Value> = s
        .collect_for(Duration::from_millis(500))
        .await
        .into_iter()
        .filter(|m| m["method"] == "notifications/progress")
        .collect();
    assert_eq!(after, Vec::<Value>::new(), "progress after the response");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn handshake_negotiates_the_version_and_answers_ping_before_it() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    assert_eq!(
        s.request(json!(1), "ping", Value::Null).await,
        pong(json!(1))
    );
    let resp = s
        .request(json!(2), "initialize", initialize_params("1999-01-01"))
        .await;
    let result = tool_result(resp);
    assert_eq!(result["protocolVersion"], "2025-11-25", "{result:#}");
    assert_eq!(
        result["capabilities"],
        json!({"tools": {"listChanged": false}, "logging": {},
               "tasks": {"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}}}),
        "{result:#}"
    );
    let info = &result["serverInfo"];
    assert_eq!(info["name"], "droid-executor", "{result:#}");
    assert_eq!(info["version"], env!("CARGO_PKG_VERSION"), "{result:#}");
    assert!(
        info["title"].as_str().is_some_and(|t| !t.is_empty()),
        "{result:#}"
    );
    assert!(
        result["instructions"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{result:#}"
    );
    let mut keys: Vec<&str> = result
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        vec![
            "capabilities",
            "instructions",
            "protocolVersion",
            "serverInfo"
        ]
    );
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    assert_eq!(
        s.request(json!(3), "ping", Value::Null).await,
        pong(json!(3))
    );

    for version in VERSIONS {
        let mut s = home.server();
        let resp = s
            .request(json!(1), "initialize", initialize_params(version))
            .await;
        assert_eq!(resp["result"]["protocolVersion"], version, "{resp:#}");
        assert_eq!(
            resp["result"]["capabilities"]["tools"],
            json!({"listChanged": false}),
            "{resp:#}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framing_and_json_rpc_errors() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    s.initialize().await;

    s.send_raw("this is not json\n").await;
    let resp = s.next().await;
    assert_error(&resp, &Value::Null, -32700);
    assert_eq!(
        s.request(json!(1), "ping", Value::Null).await,
        pong(json!(1))
    );

    s.send(&json!({"jsonrpc": "2.0", "id": null, "method": "ping"}))
        .await;
    assert_error(&s.next().await, &Value::Null, -32600);
    s.send_raw("42\n").await;
    assert_error(&s.next().await, &Value::Null, -32600);

    let resp = s.request(json!(3), "no/such/method", json!({})).await;
    assert_error(&resp, &json!(3), -32601);
    // server/discover without the 2026-07-28 `_meta` is malformed (mcp_wire_modern has the rest)
    let resp = s
        .request(json!("discover"), "server/discover", json!({}))
        .await;
    assert_error(&resp, &json!("discover"), -32602);

    assert_eq!(
        s.request(json!(0), "ping", Value::Null).await,
        pong(json!(0))
    );
    assert_eq!(
        s.request(json!("abc"), "ping", Value::Null).await,
        pong(json!("abc"))
    );

    // a notification, an unknown one and a client's response get nothing: the next message is
    // the answer to the ping sent after them
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/no_such_thing", "params": {}}))
        .await;
    s.send(&json!({"jsonrpc": "2.0", "id": 77, "result": {}}))
        .await;
    s.send(&json!({"jsonrpc": "2.0", "id": 78, "error": {"code": -1, "message": "no"}}))
        .await;
    s.send(&ping(json!(9))).await;
    assert_eq!(s.next().await, pong(json!(9)));

    s.send_raw("{\"jsonrpc\":\"2.0\",\"id\":11,\"method\":\"ping\"}\r\n")
        .await;
    assert_eq!(s.next().await, pong(json!(11)));

    // batches exist only in 2025-03-26 (mcp_wire_rules has that session); this one has none
    s.send(&json!([ping(json!(12)), ping(json!(13))])).await;
    assert_error(&s.next().await, &Value::Null, -32600);
    s.send_raw("[]\n").await;
    assert_error(&s.next().await, &Value::Null, -32600);

    let rest = s.collect_for(Duration::from_millis(300)).await;
    assert_eq!(rest, Vec::<Value>::new(), "nothing else was answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_names_every_tool_with_schemas_and_annotations() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    s.initialize().await;
    let result = tool_result(s.request(json!(1), "tools/list", Value::Null).await);
    let tools = result["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {result:#}"));
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, TOOLS.to_vec());
    for tool in tools {
        for text in ["title", "description"] {
            assert!(
                tool[text].as_str().is_some_and(|t| !t.is_empty()),
                "{text} of {tool:#}"
            );
        }
        assert!(tool["annotations"].is_object(), "{tool:#}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool:#}");
        assert_eq!(tool["outputSchema"]["type"], "object", "{tool:#}");
    }
    // an empty params object is the same request
    let again = tool_result(s.request(json!(2), "tools/list", json!({})).await);
    assert_eq!(again, result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_mistakes_are_protocol_errors_bad_arguments_are_error_results() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    s.initialize().await;
    let resp = s
        .request(
            json!(1),
            "tools/call",
            json!({"name": "no_such_tool", "arguments": {}}),
        )
        .await;
    assert_error(&resp, &json!(1), -32602);
    let resp = s
        .request(
            json!(2),
            "tools/call",
            json!({"name": "execute_droid_task", "arguments": "do it"}),
        )
        .await;
    assert_error(&resp, &json!(2), -32602);
    let resp = s
        .request(
            json!(3),
            "tools/call",
            json!({"name": "execute_droid_task", "arguments": [1, 2]}),
        )
        .await;
    assert_error(&resp, &json!(3), -32602);
    let resp = s
        .request(json!(4), "tools/call", json!({"arguments": {}}))
        .await;
    assert_error(&resp, &json!(4), -32602);

    let result = s
        .call(json!(5), "execute_droid_task", json!({"objective": ""}))
        .await;
    assert_eq!(result["isError"], true, "{result:#}");
    assert_eq!(result["content"][0]["type"], "text", "{result:#}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{result:#}"
    );
    let er: ExecutionResult = serde_json::from_value(result["structuredContent"].clone())
        .unwrap_or_else(|e| panic!("not an ExecutionResult ({e}): {result:#}"));
    assert_eq!(er.status.as_str(), "error");
    let kinds: Vec<&str> = er.issues.iter().map(|i| i.kind.as_str()).collect();
    assert!(!kinds.is_empty(), "{result:#}");
    assert!(kinds.iter().all(|k| *k == "validation_error"), "{kinds:?}");
    // nothing ran
    assert_eq!(
        s.request(json!(6), "ping", Value::Null).await,
        pong(json!(6))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_call_succeeds_and_reports_progress_with_the_clients_token() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    s.initialize().await;
    let result = s
        .call(json!(1), "execute_droid_task", home.task("Look around"))
        .await;
    assert_eq!(result["isError"], false, "{result:#}");
    assert_eq!(result["content"][0]["type"], "text", "{result:#}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| !t.is_empty()),
        "{result:#}"
    );
    let er: ExecutionResult = serde_json::from_value(result["structuredContent"].clone())
        .unwrap_or_else(|e| panic!("not an ExecutionResult ({e}): {result:#}"));
    assert_eq!(er.status.as_str(), "success", "{er:#?}");
    // no token, no progress
    assert_eq!(
        s.take_notifications("notifications/progress"),
        Vec::<Value>::new()
    );

    call_with_progress(&mut s, &home, 70, json!(7)).await;
    call_with_progress(&mut s, &home, 71, json!("tok")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_call_kills_its_processes_and_sends_no_response() {
    let home = Home::new(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let mut s = home.server();
    s.initialize().await;
    s.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
                   "params": {"name": "execute_droid_task", "arguments": home.task("Hang")}}))
        .await;
    let (reaper, pids) = hanging_run(&pid_file).await;
    assert!(reaper.marker.starts_with("run-"), "{}", reaper.marker);

    // an unknown id is ignored, and the call keeps running
    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 999, "reason": "no such request"}}),
    )
    .await;
    assert_eq!(
        s.request(json!(4), "ping", Value::Null).await,
        pong(json!(4))
    );
    assert_eq!(pids_with_env(MARKER_VAR, &reaper.marker), pids);

    s.send(
        &json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                   "params": {"requestId": 5, "reason": "user cancelled"}}),
    )
    .await;
    assert_eq!(
        s.request(json!(6), "ping", Value::Null).await,
        pong(json!(6))
    );
    assert_all_gone(&reaper, &pids).await;
    let late: Vec<Value> = s
        .collect_for(Duration::from_secs(2))
        .await
        .into_iter()
        .filter(|m| m.get("id") == Some(&json!(5)))
        .collect();
    assert_eq!(late, Vec::<Value>::new(), "a cancelled call got a response");
    // the server goes on serving
    let result = tool_result(s.request(json!(7), "tools/list", Value::Null).await);
    assert_eq!(result["tools"].as_array().map(Vec::len), Some(TOOLS.len()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_ping_is_answered_at_once_while_a_call_runs() {
    let home = Home::new(&json!([
        {"emit": assistant("Thinking for a while.")},
        {"sleep_ms": 3000},
        {"completion": "Done."},
    ]));
    let mut s = home.server();
    s.initialize().await;
    s.send(&json!({"jsonrpc": "2.0", "id": 20, "method": "tools/call",
                   "params": {"name": "execute_droid_task", "arguments": home.task("Think")}}))
        .await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let asked = Instant::now();
    assert_eq!(
        s.request(json!(21), "ping", Value::Null).await,
        pong(json!(21))
    );
    let took = asked.elapsed();
    assert!(took < PROMPT, "the ping took {took:?}");
    let list = tool_result(s.request(json!(22), "tools/list", Value::Null).await);
    assert_eq!(list["tools"].as_array().map(Vec::len), Some(TOOLS.len()));
    assert!(
        !s.backlog.iter().any(|m| is_response_to(m, &json!(20))),
        "the call answered before its droid finished"
    );
    let result = tool_result(s.response(&json!(20)).await);
    assert_eq!(result["isError"], false, "{result:#}");
    assert_eq!(
        result["structuredContent"]["status"], "success",
        "{result:#}"
    );
}

/// How a test ends the session.
#[derive(Debug, Clone, Copy)]
enum Ending {
    Eof,
    Sigterm,
}

/// With a call hanging, `ending` makes the server exit within 2 s, leaving no process of the run.
async fn ending_the_session_kills_running_calls(ending: Ending) {
    let home = Home::new(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let mut s = home.server();
    s.initialize().await;
    s.send(&json!({"jsonrpc": "2.0", "id": 30, "method": "tools/call",
                   "params": {"name": "execute_droid_task", "arguments": home.task("Hang")}}))
        .await;
    let (reaper, pids) = hanging_run(&pid_file).await;
    match ending {
        Ending::Eof => s.close_stdin(),
        Ending::Sigterm => {
            let pid = i32::try_from(s.child.id().unwrap()).unwrap();
            kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
        }
    }
    let (status, took) = s.exit_within(Duration::from_secs(10)).await;
    assert!(
        status.is_some(),
        "{ending:?}: the server did not exit within 10 s\nstderr:\n{}",
        s.stderr()
    );
    assert!(
        took < Duration::from_secs(2),
        "{ending:?}: the server took {took:?} to exit ({status:?})\nstderr:\n{}",
        s.stderr()
    );
    assert_all_gone(&reaper, &pids).await;
    // whatever it printed on the way out was well formed (the reader checks every line)
    let _ = s.collect_for(Duration::from_millis(200)).await;
    assert!(s.eof, "stdout is closed once the server has exited");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_eof_ends_the_server_and_its_running_calls() {
    ending_the_session_kills_running_calls(Ending::Eof).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_ends_the_server_and_its_running_calls() {
    ending_the_session_kills_running_calls(Ending::Sigterm).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submit_then_pend_a_task_the_latest_by_default() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    s.initialize().await;
    let first = submit(&mut s, &home, 1, "First task").await;
    let result = s
        .call(
            json!(2),
            "droid_pend",
            json!({"task_id": first, "wait_seconds": 30}),
        )
        .await;
    let rec = record_of(&result);
    assert_eq!(
        (rec.task_id.as_str(), rec.state.as_str()),
        (first.as_str(), "success"),
        "{result:#}"
    );
    assert_eq!(
        rec.result.as_ref().map(|r| r.status.as_str()),
        Some("success"),
        "{result:#}"
    );
    assert_eq!(result["isError"], false, "{result:#}");

    let second = submit(&mut s, &home, 3, "Second task").await;
    assert!(second != first, "{first} twice");
    let result = s
        .call(json!(4), "droid_pend", json!({"wait_seconds": 30}))
        .await;
    let rec = record_of(&result);
    assert_eq!(
        (rec.task_id.as_str(), rec.state.as_str()),
        (second.as_str(), "success"),
        "droid_pend without task_id is the latest task: {result:#}"
    );

    let result = s
        .call(json!(5), "droid_pend", json!({"task_id": "droid-1-ffff"}))
        .await;
    assert_eq!(result["isError"], true, "{result:#}");
    assert!(
        result["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("droid-1-ffff")),
        "the text names the id: {result:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_cancel_stops_a_background_task() {
    let home = Home::new(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let mut s = home.server();
    s.initialize().await;
    let id = submit(&mut s, &home, 1, "Hang in the background").await;
    let (reaper, pids) = hanging_run(&pid_file).await;
    assert!(reaper.marker.starts_with("task-"), "{}", reaper.marker);
    let result = s.call(json!(2), "droid_pend", json!({"task_id": id})).await;
    let rec = record_of(&result);
    assert_eq!(rec.state.as_str(), "running", "{result:#}");
    assert_eq!(rec.result, None, "{result:#}");

    let result = s
        .call(json!(3), "droid_cancel", json!({"task_id": id}))
        .await;
    let rec = record_of(&result);
    assert_eq!(rec.task_id, id, "{result:#}");
    let result = s
        .call(
            json!(4),
            "droid_pend",
            json!({"task_id": id, "wait_seconds": 30}),
        )
        .await;
    let rec = record_of(&result);
    assert_eq!(rec.state.as_str(), "cancelled", "{result:#}");
    assert_eq!(
        rec.result.as_ref().map(|r| r.status.as_str()),
        Some("cancelled"),
        "{result:#}"
    );
    assert_all_gone(&reaper, &pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_task_outlives_the_server_that_started_it() {
    let home = Home::new(&json!([
        {"emit": assistant("Taking my time.")},
        {"sleep_ms": 3000},
        {"completion": "Done."},
    ]));
    let mut s = home.server();
    s.initialize().await;
    let asked = Instant::now();
    let id = submit(&mut s, &home, 1, "Outlive the server").await;
    let took = asked.elapsed();
    assert!(
        took < Duration::from_secs(3),
        "droid_submit waited for the run: {took:?}"
    );
    s.child.kill().await.unwrap();

    let mut again = home.server();
    again.initialize().await;
    let result = again
        .call(
            json!(1),
            "droid_pend",
            json!({"task_id": id, "wait_seconds": 30}),
        )
        .await;
    let rec = record_of(&result);
    assert_eq!(rec.state.as_str(), "success", "{result:#}");
    assert_eq!(
        rec.result.as_ref().map(|r| r.status.as_str()),
        Some("success"),
        "{result:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_ping_finds_the_droid_and_a_writable_store() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    s.initialize().await;
    let result = s.call(json!(1), "droid_ping", json!({})).await;
    let sc = &result["structuredContent"];
    assert_eq!(sc["droid_found"], true, "{result:#}");
    assert_eq!(sc["store_writable"], true, "{result:#}");
    assert!(sc["auth"].is_boolean(), "{result:#}");
    assert!(
        sc["droid_version"]
            .as_str()
            .is_some_and(|v| v.contains(tests::fake_droid::VERSION)),
        "{result:#}"
    );
    assert!(sc["checks"].is_array(), "{result:#}");
    assert_eq!(result["content"][0]["type"], "text", "{result:#}");
}

/// Before `initialize` a legacy session answers only `ping` (and `initialize`): `tools/list`,
/// `tools/call` and `logging/setLevel` are refused with `-32600` naming initialize, while a
/// request of revision 2026-07-28 (its own `_meta`, no session) is served, and after
/// `initialize` everything is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_before_initialize_are_refused_but_ping_and_modern_requests_are_served() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    for (id, method, params) in [
        (1, "tools/list", Value::Null),
        (
            2,
            "tools/call",
            json!({"name": "droid_ping", "arguments": {}}),
        ),
        (3, "logging/setLevel", json!({"level": "info"})),
    ] {
        let resp = s.request(json!(id), method, params).await;
        assert_error(&resp, &json!(id), -32600);
        let message = resp["error"]["message"].as_str().unwrap_or_default();
        assert!(
            message.contains(method) && message.contains("before initialize"),
            "{resp:#}"
        );
    }
    assert_eq!(
        s.request(json!(4), "ping", Value::Null).await,
        pong(json!(4))
    );
    let modern = json!({"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }});
    let list = tool_result(s.request(json!(5), "tools/list", modern).await);
    assert_eq!(list["tools"].as_array().map(Vec::len), Some(TOOLS.len()));
    s.initialize().await;
    let list = tool_result(s.request(json!(6), "tools/list", Value::Null).await);
    assert_eq!(list["tools"].as_array().map(Vec::len), Some(TOOLS.len()));
    let result = s.call(json!(7), "droid_ping", json!({})).await;
    assert_eq!(
        result["structuredContent"]["droid_found"], true,
        "{result:#}"
    );
}

/// Open descriptors of process `pid`.
fn fds(pid: i32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

/// 3 000 `droid_ping` calls sent at once are each answered, with a result or a `-32000` "server
/// busy" error naming the limits; the server keeps under 256 descriptors and starts at most a
/// handful of droid processes (its version is looked up once), a `ping` after the burst is
/// answered, and stdin EOF still ends the server within 2 s with no process of it left.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_of_calls_is_bounded_and_ping_and_eof_keep_their_bounds() {
    const CALLS: usize = 3000;
    let home = Home::new(&short_run());
    let mut s = home.server();
    let pid = i32::try_from(s.child.id().unwrap()).unwrap();
    s.initialize().await;
    let burst: String = (0..CALLS)
        .map(|i| {
            format!(
                "{}\n",
                json!({"jsonrpc": "2.0", "id": i, "method": "tools/call",
                       "params": {"name": "droid_ping", "arguments": {}}})
            )
        })
        .collect();
    let started = Instant::now();
    s.send_raw(&burst).await;
    let asked = Instant::now();
    assert_eq!(
        s.request(json!("after"), "ping", Value::Null).await,
        pong(json!("after"))
    );
    let ping_took = asked.elapsed();
    let scenario = home.file("scenario.json").display().to_string();
    let (mut ok, mut busy, mut most_fds, mut most_droids) = (0, 0, 0, 0);
    for i in 0..CALLS {
        let resp = s.response(&json!(i)).await;
        if i % 100 == 0 {
            most_fds = most_fds.max(fds(pid));
            let droids = pids_with_env("FAKE_DROID_SCENARIO", &scenario);
            most_droids = most_droids.max(droids.iter().filter(|p| **p != pid).count());
        }
        if resp.get("error").is_some() {
            assert_error(&resp, &json!(i), -32000);
            let message = resp["error"]["message"].as_str().unwrap_or_default();
            assert!(
                message.contains("busy") && message.contains("16") && message.contains("64"),
                "{resp:#}"
            );
            busy += 1;
        } else {
            let result = tool_result(resp);
            assert_eq!(
                result["structuredContent"]["droid_found"], true,
                "{result:#}"
            );
            ok += 1;
        }
    }
    let all_took = started.elapsed();
    eprintln!(
        "{CALLS} droid_ping: {ok} answered, {busy} busy in {all_took:?}; ping after the burst {ping_took:?}; at most {most_fds} fds, {most_droids} droid processes"
    );
    assert!(ok >= 16, "{ok} answered, {busy} busy");
    assert!(most_fds < 256, "{most_fds} open descriptors");
    assert!(most_droids <= 2, "{most_droids} droid processes at once");
    s.close_stdin();
    let (status, took) = s.exit_within(Duration::from_secs(10)).await;
    assert!(status.is_some(), "no exit on EOF\nstderr:\n{}", s.stderr());
    assert!(took < Duration::from_secs(2), "EOF to exit took {took:?}");
    let left: Vec<i32> = pids_with_env("FAKE_DROID_SCENARIO", &scenario)
        .into_iter()
        .filter(|p| *p != pid)
        .collect();
    assert_eq!(left, Vec::<i32>::new(), "processes left after the server");
}
