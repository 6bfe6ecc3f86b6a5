//! The HTTP bridge end to end: `droid-executor serve` on a free port, over real sockets, with the
//! fake droid. Most exchanges go through the bridge's own client (`bridge_http::client::Client`),
//! plain route checks and server-sent events through `curl`, and what a polite client never sends
//! (a body announced and never sent, half a request head, a forged `Host`, a request without one)
//! through a raw `TcpStream`.
//!
//! Covered: every route and every status code of the bridge (docs/architecture.md#http-bridge: 200,
//! 202, 400, 401, 403, 404, 405,
//! 408, 413, 415, 429, 503, and 431 and 500), each route's statuses checked against the OpenAPI
//! document it serves, SSE replay, live delivery and resume, cancel on disconnect (droid and its
//! grandchild gone), the refusals of §8 (Host, Origin, `Sec-Fetch-Site`, token, non-loopback
//! bind, allowed_roots, max_autonomy), a task store that cannot be used (503 naming why),
//! background tasks counted in `/metrics` when they end, graceful shutdown (a run finishing
//! within the grace, a run cancelled after it, a background task outliving the bridge), a
//! load test (200 requests, 32 at a time), and idle and streaming load (1,300 idle connections,
//! the stream caps and the connection reserve, a full table of busy connections, stream
//! keep-alives and the maximum life ending with a resume point). The slow-client tests shorten the read timeouts with
//! `serve`'s hidden `--header-timeout` and `--body-timeout` rather than wait the defaults (10 s,
//! 30 s) out. No assertion bounds how fast anything is (speed is for `cargo xtask bench`):
//! waits have generous limits, and what happened is shown by what the bridge answered.

use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use bridge_http::Token;
use bridge_http::client::{Client, Method};
use droid_contract::{ChangeType, ExecutionResult, FileChange, Status};
use nix::sys::signal::Signal;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::workspace_root;
use tests::fake_droid::RECORD_ENV;
use tests::procs::{pids_with_env, wait_gone};
use tests::temp_dir::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::net::TcpStream;
use tokio::process::{Child, ChildStdout};
use tokio::time::Instant;

use super::binary::{FakeHome, droid_executor, git_repo_at};
use super::bridge_harness::ServeProc;
use super::mcp_stdio::{
    MARKER_VAR, Reaper, assert_all_gone, assistant, hanging_run, is_task_id, leak_then_hang,
    short_run,
};

/// Any one exchange with the bridge, a run with the fake droid included.
pub(super) const HTTP_LIMIT: Duration = Duration::from_secs(60);
/// Time a cancelled run's processes get to disappear (droid's kill grace is 5 s).
const GONE: Duration = Duration::from_secs(15);
/// A token long enough for the bridge (16 characters at least).
pub(super) const TOKEN: &str = "bridge-test-token-0123456789";
/// `Retry-After` of 429 and 503 (`BridgeConfig::default().retry_after`).
const RETRY_AFTER: &str = "5";

// ---------------------------------------------------------------------------------------------
// The bridge under test

/// A HOME with the fake droid (recording each start to `record.json`) and a bridge serving it.
/// The bridge is declared first so it is killed before the HOME is deleted.
pub(super) struct Bridged {
    pub(super) serve: ServeProc,
    pub(super) home: FakeHome,
}

impl Bridged {
    /// A HOME whose fake droid plays `steps`.
    pub(super) fn home(steps: &Value) -> FakeHome {
        let home = FakeHome::new("bridge-http", &[RECORD_ENV]);
        home.play(steps);
        home
    }

    /// `serve --port 0 ARGS` over `home`, with `extra` environment.
    pub(super) async fn over(home: FakeHome, args: &[&str], extra: &[(&str, &str)]) -> Bridged {
        let serve = ServeProc::start(args, &env_of(&home, extra), home.path()).await;
        Bridged { serve, home }
    }

    /// [`Bridged::over`] a fresh HOME playing `steps`.
    pub(super) async fn start(steps: &Value, args: &[&str], extra: &[(&str, &str)]) -> Bridged {
        Self::over(Self::home(steps), args, extra).await
    }

    pub(super) fn addr(&self) -> SocketAddr {
        self.serve.addr
    }

    fn client(&self) -> Client {
        Client::new(self.addr(), None)
    }

    /// A request on the HOME's repository with `extra` fields.
    pub(super) fn request(&self, objective: &str, extra: Value) -> Value {
        request_for(&self.home.repo(), objective, extra)
    }

    /// What the fake droid recorded of its last start; `None` when droid never started.
    pub(super) fn record(&self) -> Option<Value> {
        recorded(&self.home)
    }

    /// Wait for the fake droid to start; what it recorded.
    async fn until_droid_started(&self) -> Value {
        let until = Instant::now() + HTTP_LIMIT;
        loop {
            if let Some(r) = self.record() {
                return r;
            }
            assert!(Instant::now() < until, "droid never started");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `GET path` with the bridge's client: the status and the body as JSON.
    pub(super) async fn get(&self, path: &str) -> (u16, Value) {
        send_json(&self.client(), Method::GET, path, None).await
    }

    /// `POST /execute` to its end.
    async fn execute(&self, request: &Value) -> ExecutionResult {
        self.client()
            .execute(request, HTTP_LIMIT)
            .await
            .unwrap_or_else(|e| panic!("POST /execute: {e}"))
    }

    /// `POST /tasks`: the new task's id.
    pub(super) async fn submit(&self, request: &Value) -> String {
        let (status, body) = send_json(&self.client(), Method::POST, "/tasks", Some(request)).await;
        assert_eq!(status, 202, "{body:#}");
        body["task_id"].as_str().unwrap().to_owned()
    }

    /// Poll `GET /tasks/{id}` until its state is `state`; the record.
    pub(super) async fn until_state(&self, id: &str, state: &str) -> Value {
        let until = Instant::now() + HTTP_LIMIT;
        loop {
            let (status, rec) = self.get(&format!("/tasks/{id}")).await;
            assert_eq!(status, 200, "{rec:#}");
            if rec["state"] == state {
                return rec;
            }
            assert!(Instant::now() < until, "{id} never became {state}: {rec:#}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// `GET /metrics`.
    pub(super) async fn metrics(&self) -> String {
        let (status, body) = self
            .client()
            .send(Method::GET, "/metrics", None, HTTP_LIMIT)
            .await
            .unwrap();
        assert_eq!(status, 200);
        String::from_utf8(body.to_vec()).unwrap()
    }

    /// Poll `/metrics` until `series` has `value`.
    async fn until_metric(&self, series: &str, value: u64) {
        let until = Instant::now() + GONE;
        loop {
            let text = self.metrics().await;
            if metric(&text, series) == value {
                return;
            }
            assert!(
                Instant::now() < until,
                "{series} never reached {value}:\n{text}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Poll `/health` until `runs` is `want`.
    async fn until_runs(&self, want: Value) {
        let until = Instant::now() + HTTP_LIMIT;
        loop {
            let (status, health) = self.get("/health").await;
            assert_eq!(status, 200, "{health:#}");
            if health["runs"] == want {
                return;
            }
            assert!(
                Instant::now() < until,
                "runs never became {want}: {health:#}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `POST path` with `request` as its JSON body, written by hand (see [`raw`]), answered.
    pub(super) async fn post(&self, path: &str, request: &Value) -> Answer {
        self.raw("POST", path, &[JSON], &body(request)).await
    }

    /// `METHOD path` written by hand (see [`raw`]), answered.
    pub(super) async fn raw(
        &self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> Answer {
        exchange(self.addr(), &raw(self.addr(), method, path, headers, body)).await
    }
}

/// The HOME's environment plus the fake droid's record file and `extra`.
pub(super) fn env_of(home: &FakeHome, extra: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
    let mut env = home.env();
    env.push((RECORD_ENV.into(), home.fixture("record.json").into()));
    env.extend(
        extra
            .iter()
            .map(|(k, v)| (OsString::from(k), OsString::from(v))),
    );
    env
}

/// What the fake droid of `home` recorded of its last start; `None` when droid never started.
pub(super) fn recorded(home: &FakeHome) -> Option<Value> {
    let bytes = std::fs::read(home.fixture("record.json")).ok()?;
    Some(serde_json::from_slice(&bytes).unwrap())
}

/// A request on `repo` with `extra` fields merged in.
pub(super) fn request_for(repo: &Path, objective: &str, extra: Value) -> Value {
    let mut v = json!({"objective": objective, "context": {"repo_root": repo}});
    if let (Value::Object(base), Value::Object(more)) = (&mut v, extra) {
        base.extend(more);
    }
    v
}

async fn send_json(
    client: &Client,
    method: Method,
    path: &str,
    body: Option<&Value>,
) -> (u16, Value) {
    let (status, bytes) = client
        .send(method, path, body, HTTP_LIMIT)
        .await
        .unwrap_or_else(|e| panic!("{path}: {e}"));
    let v = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
        panic!(
            "{path} answered {status} with no JSON ({e}): {}",
            String::from_utf8_lossy(&bytes)
        )
    });
    (status, v)
}

/// The value of `series` (`name{labels}`) in Prometheus text.
pub(super) fn metric(text: &str, series: &str) -> u64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or_else(|| panic!("no {series} in\n{text}"))
}

/// The value after `flag` in the fake droid's recorded argv.
fn flag(record: &Value, flag: &str) -> Option<String> {
    let argv: Vec<&str> = record["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    let i = argv.iter().position(|a| *a == flag)?;
    argv.get(i + 1).map(|s| (*s).to_owned())
}

/// droid's pid, from the run marker it recorded (the fake droid is its run's only process).
fn droid_pid(record: &Value) -> i32 {
    let marker = record["env"][MARKER_VAR].as_str().expect("a run marker");
    let pids = pids_with_env(MARKER_VAR, marker);
    assert_eq!(pids.len(), 1, "droid of {marker}: {pids:?}");
    pids[0]
}

// ---------------------------------------------------------------------------------------------
// Raw HTTP/1.1: exactly these bytes reach the bridge

/// An answer as read off the wire.
#[derive(Debug)]
pub(super) struct Answer {
    pub(super) status: u16,
    /// Names lowercased, in order.
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: String,
}

impl Answer {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {self:#?}"))
    }

    pub(super) fn result(&self) -> ExecutionResult {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not an ExecutionResult ({e}): {self:#?}"))
    }

    /// The `code` of a refusal, after checking `status` and the refusal's shape.
    pub(super) fn refusal(&self, status: u16) -> String {
        assert_eq!(self.status, status, "{self:#?}");
        assert_eq!(
            self.header("content-type"),
            Some("application/json"),
            "{self:#?}"
        );
        let v = self.json();
        assert_eq!(v["error"]["status"], json!(status), "{self:#?}");
        assert!(v["error"]["message"].is_string(), "{self:#?}");
        let mut keys: Vec<&String> = v["error"].as_object().unwrap().keys().collect();
        keys.sort_unstable();
        assert_eq!(keys, ["code", "message", "status"], "{self:#?}");
        v["error"]["code"].as_str().unwrap().to_owned()
    }
}

pub(super) fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack.windows(needle.len()).position(|w| w == needle)
}

/// An answer in `bytes` (a whole answer with `Content-Length`, or none at all: never chunked —
/// streams are read with curl). The answer to `HEAD` announces a length and has no body.
pub(super) fn parse_answer(bytes: &[u8]) -> Answer {
    let shown = || String::from_utf8_lossy(bytes).into_owned();
    let end = find(bytes, b"\r\n\r\n").unwrap_or_else(|| panic!("no answer head in {:?}", shown()));
    let head = std::str::from_utf8(&bytes[..end]).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no status line in {:?}", shown()));
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let body = &bytes[end + 4..];
    let answer = Answer {
        status,
        headers,
        body: String::from_utf8(body.to_vec()).unwrap(),
    };
    if let Some(n) = answer.header("content-length").filter(|_| !body.is_empty()) {
        assert_eq!(n.parse::<usize>().ok(), Some(body.len()), "{answer:#?}");
    }
    answer
}

/// `METHOD path HTTP/1.1` with `Host` naming `addr` (unless `headers` has one), `Connection:
/// close`, `headers`, and `body` with its `Content-Length` (unless `headers` frames it).
pub(super) fn raw(
    addr: SocketAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Vec<u8> {
    let has = |name: &str| headers.iter().any(|(k, _)| k.eq_ignore_ascii_case(name));
    let mut head = format!("{method} {path} HTTP/1.1\r\n");
    if !has("host") {
        head.push_str(&format!("Host: {addr}\r\n"));
    }
    head.push_str("Connection: close\r\n");
    for (k, v) in headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    if !body.is_empty() && !has("content-length") && !has("transfer-encoding") {
        head.push_str(&format!("Content-Length: {}\r\n", body.len()));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body);
    bytes
}

/// Everything the bridge sends until it closes the connection (a reset after the answer is
/// fine: what arrived before it is kept).
pub(super) async fn read_all<R: AsyncReadExt + Unpin>(r: &mut R) -> Vec<u8> {
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(HTTP_LIMIT, r.read_to_end(&mut buf))
        .await
        .expect("the bridge kept the connection open");
    buf
}

/// Send `bytes` on a new connection; the answer.
pub(super) async fn exchange(addr: SocketAddr, bytes: &[u8]) -> Answer {
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(bytes).await.unwrap();
    parse_answer(&read_all(&mut s).await)
}

/// A JSON POST body.
pub(super) fn body(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).unwrap()
}

pub(super) const JSON: (&str, &str) = ("Content-Type", "application/json");

// ---------------------------------------------------------------------------------------------
// curl: a third-party client for plain exchanges and event streams

/// `curl --silent --show-error --max-time 60 ARGS`, output piped.
#[allow(clippy::disallowed_methods)] // the suite runs a third-party client
pub(super) fn curl(args: &[&str]) -> Child {
    tokio::process::Command::new("curl")
        .args(["--silent", "--show-error", "--max-time", "60"])
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap_or_else(|e| {
            panic!("cannot run curl ({e}): install it (e.g. `apt-get install curl`)")
        })
}

/// `curl --include ARGS`: the answer as curl received it.
async fn curl_answer(args: &[&str]) -> Answer {
    let mut all = vec!["--include", "--header", "Expect:"];
    all.extend_from_slice(args);
    let out = tokio::time::timeout(HTTP_LIMIT, curl(&all).wait_with_output())
        .await
        .expect("curl did not finish")
        .unwrap();
    assert!(
        out.status.success(),
        "curl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    parse_answer(&out.stdout)
}

/// One server-sent event.
#[derive(Debug, Clone, PartialEq)]
struct Sse {
    id: Option<u64>,
    event: String,
    data: Value,
}

/// An event stream read by `curl --no-buffer` as it arrives.
struct EventStream {
    child: Child,
    lines: Lines<BufReader<ChildStdout>>,
}

impl EventStream {
    /// `GET url` with `headers` (`"Name: value"`).
    fn open(url: &str, headers: &[&str]) -> EventStream {
        let mut args = vec!["--no-buffer", "--fail"];
        for h in headers {
            args.extend(["--header", h]);
        }
        args.push(url);
        let mut child = curl(&args);
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        EventStream { child, lines }
    }

    /// The next event; `None` at the end of the stream.
    async fn next(&mut self) -> Option<Sse> {
        let (mut id, mut event, mut data) = (None, None, None);
        loop {
            let line = tokio::time::timeout(HTTP_LIMIT, self.lines.next_line())
                .await
                .expect("no event within the limit")
                .unwrap()?;
            if line.is_empty() {
                if let Some(event) = event.take() {
                    let data = data.take().unwrap_or(Value::Null);
                    return Some(Sse { id, event, data });
                }
            } else if line.starts_with(':') {
                // a keep-alive comment
            } else if let Some(v) = line.strip_prefix("id: ") {
                id = Some(v.parse().unwrap());
            } else if let Some(v) = line.strip_prefix("event: ") {
                event = Some(v.to_owned());
            } else if let Some(v) = line.strip_prefix("data: ") {
                data = Some(serde_json::from_str(v).unwrap());
            } else {
                panic!("not an SSE line: {line:?}");
            }
        }
    }

    /// Every event left; the stream must end after the `result` and curl exit 0.
    async fn rest(mut self) -> Vec<Sse> {
        let mut all = Vec::new();
        while let Some(e) = self.next().await {
            all.push(e);
        }
        let status = tokio::time::timeout(HTTP_LIMIT, self.child.wait())
            .await
            .expect("curl did not exit")
            .unwrap();
        assert!(status.success(), "curl: {status}; events {all:#?}");
        assert_eq!(
            all.last().map(|e| e.event.as_str()),
            Some("result"),
            "{all:#?}"
        );
        all
    }
}

/// The event names, in order.
fn names(events: &[Sse]) -> Vec<&str> {
    events.iter().map(|e| e.event.as_str()).collect()
}

// ---------------------------------------------------------------------------------------------
// Routes

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_routes_answer_curl() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    let health = curl_answer(&[&b.serve.url("/health")]).await;
    assert_eq!(health.status, 200, "{health:#?}");
    assert_eq!(health.header("cache-control"), Some("no-store"));
    assert_eq!(health.header("x-content-type-options"), Some("nosniff"));
    let store = b.home.file(".local/state/droid-executor");
    assert_eq!(
        health.json(),
        json!({
            "status": "ok",
            "version": env!("CARGO_PKG_VERSION"),
            "droid": {
                "found": true,
                "path": tests::fake_droid_bin!(),
                "source": "DROID_CLI_CMD",
                "version": "0.225.2",
            },
            "runs": {"running": 0, "queued": 0},
            "tasks": {"store": store, "running": 0, "queued": 0, "damaged": 0},
            "limits": {"max_concurrent": 4, "max_queue": 64, "body_limit": 1_048_576},
        })
    );

    // the document served is the one the contract types generate, and the checked-in copy
    let openapi = curl_answer(&[&b.serve.url("/openapi.json")]).await;
    assert_eq!(openapi.status, 200);
    assert_eq!(openapi.header("content-type"), Some("application/json"));
    let generated = format!(
        "{}\n",
        serde_json::to_string_pretty(&bridge_http::openapi::document()).unwrap()
    );
    assert!(
        openapi.body == generated,
        "GET /openapi.json differs from bridge_http::openapi::document()"
    );
    let file = workspace_root().join("schemas/openapi.json");
    let checked_in = std::fs::read_to_string(&file).unwrap_or_else(|e| {
        panic!(
            "{} is missing ({e}): run `cargo xtask codegen`",
            file.display()
        )
    });
    assert!(
        openapi.body == checked_in,
        "{} is stale: run `cargo xtask codegen`",
        file.display()
    );

    // a sync run posted by curl
    let req_file = b.home.file("request.json");
    std::fs::write(
        &req_file,
        body(&b.request("say done", json!({"task_id": "curl-1"}))),
    )
    .unwrap();
    let data = format!("@{}", req_file.display());
    let execute = curl_answer(&[
        "--header",
        "Content-Type: application/json",
        "--data-binary",
        &data,
        &b.serve.url("/execute"),
    ])
    .await;
    assert_eq!(execute.status, 200, "{execute:#?}");
    assert_eq!(execute.header("content-type"), Some("application/json"));
    let result = execute.result();
    assert_eq!(
        (result.status, result.task_id.as_deref()),
        (Status::Success, Some("curl-1")),
        "{result:#?}"
    );

    let metrics = curl_answer(&[&b.serve.url("/metrics")]).await;
    assert_eq!(metrics.status, 200);
    assert_eq!(
        metrics.header("content-type"),
        Some("text/plain; version=0.0.4; charset=utf-8")
    );
    assert_eq!(
        metric(
            &metrics.body,
            "droid_executor_runs_total{status=\"success\"}"
        ),
        1
    );

    let unknown = curl_answer(&[&b.serve.url("/nope")]).await;
    assert_eq!(unknown.refusal(404), "not_found");
    let wrong = curl_answer(&["--request", "DELETE", &b.serve.url("/health")]).await;
    assert_eq!(wrong.refusal(405), "method_not_allowed");
    assert_eq!(wrong.header("allow"), Some("GET, HEAD"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_answers_200_whatever_the_outcome_and_counts_it() {
    let b = Bridged::start(
        &json!([
            {"emit": assistant("Appending to a.txt.")},
            {"write_file": {"path": "a.txt", "content": "a\nb\n"}},
            {"completion": "Appended b."},
        ]),
        &[],
        &[],
    )
    .await;
    let ok = b
        .execute(&b.request("append b to a.txt", json!({"task_id": "T-ok"})))
        .await;
    assert_eq!(ok.status, Status::Success, "{ok:#?}");
    assert_eq!(ok.task_id.as_deref(), Some("T-ok"));
    assert_eq!(ok.summary, "Appended b.");
    assert_eq!(
        ok.files_changed,
        vec![FileChange {
            path: "a.txt".into(),
            change_type: ChangeType::Modified,
            old_path: None,
            highlights: vec![],
            lines_added: Some(1),
            lines_removed: Some(0),
        }],
        "files_changed comes from the repository"
    );

    b.home.play(&json!([{"stderr": "boom"}, {"exit": 1}]));
    let failed = b
        .execute(&b.request("fail", json!({"task_id": "T-failed"})))
        .await;
    assert_eq!(failed.status, Status::Failed, "{failed:#?}");
    assert_eq!(failed.task_id.as_deref(), Some("T-failed"));

    b.home.play(&json!([{"hang": true}]));
    let timed_out = b
        .execute(&b.request(
            "hang",
            json!({"task_id": "T-timeout", "max_runtime_seconds": 1}),
        ))
        .await;
    assert_eq!(timed_out.status, Status::Timeout, "{timed_out:#?}");
    assert!(
        timed_out
            .issues
            .iter()
            .any(|i| i.kind.as_str() == "timeout"),
        "{timed_out:#?}"
    );

    let text = b.metrics().await;
    for (series, n) in [
        ("droid_executor_runs_total{status=\"success\"}", 1),
        ("droid_executor_runs_total{status=\"failed\"}", 1),
        ("droid_executor_runs_total{status=\"timeout\"}", 1),
        ("droid_executor_runs_total{status=\"cancelled\"}", 0),
        ("droid_executor_runs_total{status=\"error\"}", 0),
        ("droid_executor_run_duration_seconds_count", 3),
        ("droid_executor_http_responses_total{code=\"200\"}", 3),
        ("droid_executor_sync_in_flight", 0),
        ("droid_executor_queue_depth", 0),
    ] {
        assert_eq!(metric(&text, series), n, "{series} in\n{text}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_tasks_are_submitted_listed_shown_and_replayed() {
    let b = Bridged::start(&short_run(), &[], &[]).await;
    let submitted = b.post("/tasks", &b.request("look around", json!({}))).await;
    assert_eq!(submitted.status, 202, "{submitted:#?}");
    let v = submitted.json();
    let id = v["task_id"].as_str().unwrap().to_owned();
    assert!(is_task_id(&id), "{v:#}");
    let status_url = format!("/tasks/{id}");
    assert_eq!(
        v,
        json!({"task_id": id, "status_url": status_url, "events_url": format!("{status_url}/events")})
    );
    assert_eq!(submitted.header("location"), Some(status_url.as_str()));

    let rec = b.until_state(&id, "success").await;
    assert_eq!(rec["task_id"], json!(id));
    assert_eq!(rec["result"]["status"], "success", "{rec:#}");
    assert_eq!(rec["result"]["task_id"], json!(id), "{rec:#}");

    assert_eq!(
        b.get("/tasks").await,
        (200, json!({"tasks": [rec], "damaged": []}))
    );
    assert_eq!(
        b.get("/tasks?state=success&limit=1").await,
        (200, json!({"tasks": [rec], "damaged": []}))
    );
    assert_eq!(
        b.get("/tasks?state=running").await,
        (200, json!({"tasks": [], "damaged": []}))
    );
    for bad in ["state=done", "limit=0", "limit=x", "sort=asc"] {
        let a = b.raw("GET", &format!("/tasks?{bad}"), &[], b"").await;
        assert_eq!(a.refusal(400), "bad_query", "{bad}");
    }
    for path in [
        "/tasks/droid-1-ffff",
        "/tasks/not-a-task-id",
        "/tasks/..%2F..%2Fetc",
        "/tasks/droid-1-ffff/events",
    ] {
        let a = b.raw("GET", path, &[], b"").await;
        assert_eq!(a.refusal(404), "no_such_task", "{path}");
    }
    let a = b.raw("DELETE", "/tasks/droid-1-ffff", &[], b"").await;
    assert_eq!(a.refusal(404), "no_such_task");

    // replay of a finished task: every event in order, then the result
    let url = b.serve.url(&format!("{status_url}/events"));
    let events = EventStream::open(&url, &[]).rest().await;
    let (result, recorded) = events.split_last().unwrap();
    assert_eq!(
        (result.id, &result.data),
        (None, &rec["result"]),
        "{result:#?}"
    );
    let ids: Vec<Option<u64>> = recorded.iter().map(|e| e.id).collect();
    let expected: Vec<Option<u64>> = (1..=recorded.len() as u64).map(Some).collect();
    assert_eq!(ids, expected, "{events:#?}");
    for e in recorded {
        assert_eq!(e.data["seq"], json!(e.id.unwrap()), "{e:#?}");
        assert_eq!(e.data["type"], json!(e.event), "{e:#?}");
    }
    let texts: Vec<&str> = recorded
        .iter()
        .filter(|e| e.event == "message")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["Looking at the repository.", "Nothing to change."],
        "{events:#?}"
    );
    assert_eq!(names(recorded).first(), Some(&"progress"), "{events:#?}");
    assert!(names(recorded).contains(&"started"), "{events:#?}");
    assert_eq!(names(recorded).last(), Some(&"completed"), "{events:#?}");

    // resume: only what came after the last event seen
    let resumed = EventStream::open(&url, &["Last-Event-ID: 3"]).rest().await;
    assert_eq!(resumed, events[3..].to_vec());
    let after = EventStream::open(&format!("{url}?after=3"), &[])
        .rest()
        .await;
    assert_eq!(after, events[3..].to_vec());
    let a = b
        .raw(
            "GET",
            &format!("{status_url}/events"),
            &[("Last-Event-ID", "x")],
            b"",
        )
        .await;
    assert_eq!(a.refusal(400), "bad_query");

    // an invalid submission makes no task
    let invalid = b
        .post(
            "/tasks",
            &json!({"objective": "", "context": {"repo_root": b.home.repo()}}),
        )
        .await;
    assert_eq!(invalid.status, 400, "{invalid:#?}");
    assert_eq!(invalid.result().status, Status::Error);
    let (_, list) = b.get("/tasks").await;
    assert_eq!(list["tasks"].as_array().unwrap().len(), 1, "{list:#}");
}

/// Live delivery, proven by causality rather than by the clock: droid says one thing and then
/// hangs, so the task cannot end on its own. The message comes while the task is running (its
/// record has no result yet), and the end, caused by a DELETE made after the stream opened,
/// arrives on the same open stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_arrive_live_while_the_task_runs() {
    let b = Bridged::start(
        &json!([{"emit": assistant("first")}, {"hang": true}]),
        &[],
        &[],
    )
    .await;
    let id = b.submit(&b.request("say one thing", json!({}))).await;
    let mut stream = EventStream::open(&b.serve.url(&format!("/tasks/{id}/events")), &[]);
    let record = b.until_droid_started().await;
    let _reaper = Reaper {
        marker: record["env"][MARKER_VAR].as_str().unwrap().to_owned(),
    };
    let first = loop {
        let e = stream.next().await.expect("the stream ended early");
        assert_ne!(e.event, "result", "the result came before any message");
        if e.event == "message" {
            break e;
        }
    };
    assert_eq!(first.data["text"], "first", "{first:#?}");
    let (_, rec) = b.get(&format!("/tasks/{id}")).await;
    assert_eq!(
        (&rec["state"], &rec["result"]),
        (&json!("running"), &Value::Null),
        "the first message arrived while the task was running: {rec:#}"
    );
    let cancelled = b.raw("DELETE", &format!("/tasks/{id}"), &[], b"").await;
    assert!([200, 202].contains(&cancelled.status), "{cancelled:#?}");
    let rest = stream.rest().await;
    let texts: Vec<&str> = rest
        .iter()
        .filter(|e| e.event == "message")
        .map(|e| e.data["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, Vec::<&str>::new(), "{rest:#?}");
    // numbered on from the first message: nothing replayed twice, nothing skipped
    let ids: Vec<u64> = rest.iter().filter_map(|e| e.id).collect();
    let from = first.id.unwrap() + 1;
    let expected: Vec<u64> = (from..from + ids.len() as u64).collect();
    assert_eq!(ids, expected, "{rest:#?}");
    let result = rest.last().unwrap();
    assert_eq!(result.data["status"], "cancelled", "{result:#?}");
    assert_eq!(result.data["task_id"], json!(id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_cancels_a_running_task_and_everything_it_started() {
    let home = Bridged::home(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let b = Bridged::over(home, &[], &[]).await;
    let id = b.submit(&b.request("hang", json!({}))).await;
    let (reaper, pids) = hanging_run(&pid_file).await;
    b.until_state(&id, "running").await;
    let cancelled = b.raw("DELETE", &format!("/tasks/{id}"), &[], b"").await;
    assert_eq!(cancelled.status, 200, "{cancelled:#?}");
    let rec = cancelled.json();
    assert_eq!(rec["state"], "cancelled", "{rec:#}");
    assert_eq!(rec["result"]["status"], "cancelled", "{rec:#}");
    assert_all_gone(&reaper, &pids).await;
    // cancelling a finished task changes nothing
    let again = b.raw("DELETE", &format!("/tasks/{id}"), &[], b"").await;
    assert_eq!((again.status, again.json()), (200, rec));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn delete_answers_202_while_droid_is_still_stopping() {
    // droid ignores SIGTERM: it is killed only after the engine's 5 s grace, beyond DELETE's wait
    let b = Bridged::start(&json!([{"ignore_sigterm": true}, {"hang": true}]), &[], &[]).await;
    let id = b.submit(&b.request("hang on", json!({}))).await;
    let record = b.until_droid_started().await;
    let marker = record["env"][MARKER_VAR].as_str().unwrap().to_owned();
    let _reaper = Reaper {
        marker: marker.clone(),
    };
    b.until_state(&id, "running").await;
    let stopping = b.raw("DELETE", &format!("/tasks/{id}"), &[], b"").await;
    assert_eq!(stopping.status, 202, "{stopping:#?}");
    let rec = stopping.json();
    assert_eq!(
        (&rec["state"], &rec["result"]),
        (&json!("running"), &Value::Null)
    );
    let rec = b.until_state(&id, "cancelled").await;
    assert_eq!(rec["result"]["status"], "cancelled", "{rec:#}");
    for pid in pids_with_env(MARKER_VAR, &marker) {
        assert!(wait_gone(pid, GONE).await, "{pid} of {marker} survived");
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_clear_answers_and_run_nothing() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    let repo = b.home.repo();

    let not_json = b
        .raw("POST", "/execute", &[JSON], b"{\"objective\": ")
        .await;
    assert_eq!(not_json.status, 400, "{not_json:#?}");
    let r = not_json.result();
    assert_eq!(r.status, Status::Error);
    assert_eq!(r.issues.len(), 1, "{r:#?}");
    assert_eq!(r.issues[0].kind.as_str(), "validation_error");
    assert!(
        r.issues[0]
            .description
            .starts_with("$: the body is not valid JSON"),
        "{r:#?}"
    );

    // every violation, each its own issue, the caller's task_id echoed
    let two = b
        .post(
            "/execute",
            &json!({
                "task_id": "T-bad",
                "objective": "",
                "context": {"repo_root": repo},
                "max_runtime_seconds": 0,
            }),
        )
        .await;
    assert_eq!(two.status, 400, "{two:#?}");
    let r = two.result();
    assert_eq!(
        (r.status, r.task_id.as_deref()),
        (Status::Error, Some("T-bad"))
    );
    let issues: Vec<(&str, &str)> = r
        .issues
        .iter()
        .map(|i| (i.kind.as_str(), i.description.split(':').next().unwrap()))
        .collect();
    assert_eq!(
        issues,
        [
            ("validation_error", "$.objective"),
            ("validation_error", "$.max_runtime_seconds"),
        ],
        "{r:#?}"
    );

    let contract = [
        (
            json!({"objective": "x", "context": {"repo_root": repo}, "bogus": 1}),
            "bogus",
        ),
        (json!({"objective": "x", "context": "the repo"}), "context"),
        (
            json!({"objective": "x", "context": {"repo_root": "/"}}),
            "allowed roots",
        ),
        (
            json!({"objective": "x", "context": {"repo_root": repo}, "autonomy": "max"}),
            "autonomy",
        ),
    ];
    for (request, mentions) in contract {
        let a = b.post("/execute", &request).await;
        assert_eq!(a.status, 400, "{request}: {a:#?}");
        let r = a.result();
        assert_eq!(r.status, Status::Error);
        assert!(
            r.issues
                .iter()
                .any(|i| i.kind.as_str() == "validation_error" && i.description.contains(mentions)),
            "{request}: {r:#?}"
        );
    }

    let good = body(&b.request("fine", json!({})));
    for headers in [
        &[("Content-Type", "text/plain")][..],
        &[("Content-Type", "application/x-www-form-urlencoded")][..],
        &[][..],
    ] {
        for path in ["/execute", "/tasks"] {
            let a = b.raw("POST", path, headers, &good).await;
            assert_eq!(a.refusal(415), "unsupported_media_type", "{headers:?}");
        }
    }

    for path in ["/nope", "/tasks/", "/execute/extra", "/"] {
        let a = b.raw("GET", path, &[], b"").await;
        assert_eq!(a.refusal(404), "not_found", "{path}");
    }
    for (method, path, allow) in [
        ("GET", "/execute", "POST"),
        ("PUT", "/tasks", "GET, HEAD, POST"),
        ("PATCH", "/tasks/droid-1-ffff", "GET, HEAD, DELETE"),
        ("POST", "/tasks/droid-1-ffff/events", "GET, HEAD"),
        ("DELETE", "/health", "GET, HEAD"),
        ("POST", "/metrics", "GET, HEAD"),
        ("PUT", "/openapi.json", "GET, HEAD"),
    ] {
        let a = b.raw(method, path, &[], b"").await;
        assert_eq!(a.refusal(405), "method_not_allowed", "{method} {path}");
        assert_eq!(a.header("allow"), Some(allow), "{method} {path}");
    }

    let no_host = exchange(
        b.addr(),
        b"GET /health HTTP/1.1\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(no_host.refusal(400), "host_required");

    assert_eq!(b.record(), None, "droid never started");
    assert_eq!(
        b.get("/tasks").await,
        (200, json!({"tasks": [], "damaged": []}))
    );
    let text = b.metrics().await;
    assert_eq!(
        metric(&text, "droid_executor_run_duration_seconds_count"),
        0
    );
    assert_eq!(
        metric(&text, "droid_executor_http_responses_total{code=\"400\"}"),
        7
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_over_the_limit_are_refused_before_they_are_read() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    // announced too large: answered from the head alone. The client sends the head and not a
    // byte of the 100 MB it announces, and keeps its side open: the 413 arriving at all, and the
    // bridge then closing the connection, prove the body was never waited for (nor read)
    for path in ["/execute", "/tasks"] {
        let mut s = TcpStream::connect(b.addr()).await.unwrap();
        let head = raw(
            b.addr(),
            "POST",
            path,
            &[JSON, ("Content-Length", "100000000")],
            b"",
        );
        s.write_all(&head).await.unwrap();
        let a = parse_answer(&read_all(&mut s).await);
        assert_eq!(a.refusal(413), "body_too_large", "{path}");
        let mut more = [0u8; 1];
        assert_eq!(
            s.read(&mut more).await.unwrap_or(0),
            0,
            "{path}: the connection stayed open"
        );
    }

    // chunked: cut off at the limit (1 MiB) while the client is still sending
    let s = TcpStream::connect(b.addr()).await.unwrap();
    let (mut r, mut w) = s.into_split();
    let head = raw(
        b.addr(),
        "POST",
        "/tasks",
        &[JSON, ("Transfer-Encoding", "chunked")],
        b"",
    );
    let writer = tokio::spawn(async move {
        let chunk = format!("{:x}\r\n{}\r\n", 64 * 1024, "x".repeat(64 * 1024));
        w.write_all(&head).await?;
        for _ in 0..32 {
            w.write_all(chunk.as_bytes()).await?;
        }
        w.write_all(b"0\r\n\r\n").await
    });
    let a = parse_answer(&read_all(&mut r).await);
    assert_eq!(a.refusal(413), "body_too_large");
    let _ = writer.await;

    // just under the limit is read (and is then not JSON)
    let almost = vec![b' '; 1024 * 1024];
    let a = b.raw("POST", "/execute", &[JSON], &almost).await;
    assert_eq!(a.status, 400, "{a:#?}");
    assert_eq!(b.record(), None, "droid never started");
    assert_eq!(
        b.get("/tasks").await,
        (200, json!({"tasks": [], "damaged": []}))
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_and_stalled_clients_time_out() {
    let b = Bridged::start(
        &json!([{"completion": "Done."}]),
        &["--header-timeout", "1", "--body-timeout", "1"],
        &[],
    )
    .await;
    // Whether a timeout fired is shown by the bridge closing the connection, or answering 408,
    // at all (the client never completes its request: nothing else would end the exchange; the
    // wait for it is bounded by `read_all`). The one clock check left is a lower bound, which a
    // slow machine can only make easier to meet: a timeout must not fire before its time (a
    // client that is merely slow keeps its connection).
    let not_before = |started: Instant, what: &str| {
        let took = started.elapsed();
        assert!(
            took >= Duration::from_millis(900),
            "{what} after {took:?}: before the 1 s timeout"
        );
    };

    // half a request head: the connection is closed, without an answer
    let started = Instant::now();
    let mut s = TcpStream::connect(b.addr()).await.unwrap();
    s.write_all(format!("GET /health HTTP/1.1\r\nHost: {}\r\n", b.addr()).as_bytes())
        .await
        .unwrap();
    let got = read_all(&mut s).await;
    not_before(started, "half a head closed");
    assert_eq!(String::from_utf8_lossy(&got), "");

    // a connection that says nothing is closed too
    let started = Instant::now();
    let mut s = TcpStream::connect(b.addr()).await.unwrap();
    let got = read_all(&mut s).await;
    not_before(started, "a silent connection closed");
    assert_eq!(String::from_utf8_lossy(&got), "");

    // a body that stops arriving: 408
    let started = Instant::now();
    let mut s = TcpStream::connect(b.addr()).await.unwrap();
    let head = raw(
        b.addr(),
        "POST",
        "/execute",
        &[JSON, ("Content-Length", "100")],
        b"",
    );
    s.write_all(&head).await.unwrap();
    s.write_all(b"{\"objective\"").await.unwrap();
    let a = parse_answer(&read_all(&mut s).await);
    not_before(started, "408");
    assert_eq!(a.refusal(408), "body_timeout");

    // the bridge still serves
    assert_eq!(b.get("/health").await.0, 200);
    assert_eq!(b.record(), None, "droid never started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_sync_queue_answers_429_with_retry_after() {
    let b = Bridged::start(
        &json!([{"hang": true}]),
        &[],
        &[
            ("DROID_EXECUTOR_MAX_CONCURRENT", "1"),
            ("DROID_EXECUTOR_MAX_QUEUE", "1"),
        ],
    )
    .await;
    let hang = raw(
        b.addr(),
        "POST",
        "/execute",
        &[JSON],
        &body(&b.request("hang", json!({}))),
    );
    // one runs, one waits for the slot: max_concurrent + max_queue
    let mut running = TcpStream::connect(b.addr()).await.unwrap();
    running.write_all(&hang).await.unwrap();
    let record = b.until_droid_started().await;
    let droid = droid_pid(&record);
    let mut waiting = TcpStream::connect(b.addr()).await.unwrap();
    waiting.write_all(&hang).await.unwrap();
    b.until_runs(json!({"running": 1, "queued": 1})).await;

    let full = b
        .post("/execute", &b.request("one too many", json!({})))
        .await;
    assert_eq!(full.refusal(429), "queue_full");
    assert_eq!(full.header("retry-after"), Some(RETRY_AFTER));
    assert_eq!(
        metric(
            &b.metrics().await,
            "droid_executor_http_responses_total{code=\"429\"}"
        ),
        1
    );
    // background tasks are not the sync queue's business
    let id = b.submit(&b.request("in the background", json!({}))).await;
    assert_eq!(b.get(&format!("/tasks/{id}")).await.0, 200);

    // both clients leave: both runs end, droid with them, and the queue is empty again
    drop(running);
    drop(waiting);
    assert!(wait_gone(droid, GONE).await, "droid {droid} survived");
    b.until_runs(json!({"running": 0, "queued": 0})).await;
    b.until_metric("droid_executor_runs_total{status=\"cancelled\"}", 2)
        .await;
    // the background task got the slot afterwards and hangs: stop it
    let cancelled = b.raw("DELETE", &format!("/tasks/{id}"), &[], b"").await;
    assert_eq!(cancelled.status, 200, "{cancelled:#?}");
    assert_eq!(cancelled.json()["state"], "cancelled");
}

/// RFC 9110 §9.1: a server MUST support HEAD wherever it supports GET; health probes (`curl -I`,
/// uptime checkers) use it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn head_is_answered_like_get_without_a_body() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    for path in ["/health", "/metrics", "/openapi.json", "/tasks"] {
        let get = b.raw("GET", path, &[], b"").await;
        let head = b.raw("HEAD", path, &[], b"").await;
        assert_eq!(
            (head.status, head.header("content-type"), head.body.as_str()),
            (200, get.header("content-type"), ""),
            "HEAD {path}: {head:#?}"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Cancel on disconnect

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_disconnects_cancels_its_run() {
    let home = Bridged::home(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let b = Bridged::over(home, &[], &[]).await;
    let mut s = TcpStream::connect(b.addr()).await.unwrap();
    let req = raw(
        b.addr(),
        "POST",
        "/execute",
        &[JSON],
        &body(&b.request("hang", json!({}))),
    );
    s.write_all(&req).await.unwrap();
    // droid, the grandchild sh it leaked, and sh's sleep
    let (reaper, pids) = hanging_run(&pid_file).await;
    drop(s);
    assert_all_gone(&reaper, &pids).await;
    b.until_metric("droid_executor_runs_total{status=\"cancelled\"}", 1)
        .await;
    b.until_runs(json!({"running": 0, "queued": 0})).await;
}

// ---------------------------------------------------------------------------------------------
// Security

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_through_other_names_and_from_web_pages_are_refused() {
    let b = Bridged::start(
        &json!([{"completion": "Done."}]),
        &[],
        &[
            ("DROID_EXECUTOR_ALLOWED_HOSTS", "devbox.lan"),
            ("DROID_EXECUTOR_ALLOWED_ORIGINS", "http://localhost:3000"),
        ],
    )
    .await;
    let port = b.addr().port().to_string();
    let good = body(&b.request("fine", json!({})));
    let refused = |a: &Answer| a.refusal(403);

    // DNS rebinding: the page's own name arrives in Host
    for host in [
        "attacker.example",
        "attacker.example:53002",
        "localhost.attacker.example",
        "127.0.0.1.nip.io",
    ] {
        let a = b
            .raw("POST", "/execute", &[JSON, ("Host", host)], &good)
            .await;
        assert_eq!(refused(&a), "host_not_allowed", "{host}");
        let a = b.raw("GET", "/health", &[("Host", host)], b"").await;
        assert_eq!(refused(&a), "host_not_allowed", "{host}");
    }
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
        "devbox.lan".to_owned(),
    ] {
        let a = b.raw("GET", "/health", &[("Host", &host)], b"").await;
        assert_eq!(a.status, 200, "{host}: {a:#?}");
    }

    // drive-by requests from a page in the user's browser
    for origin in ["https://evil.example", "null", "http://localhost:3001"] {
        let a = b
            .raw("POST", "/execute", &[JSON, ("Origin", origin)], &good)
            .await;
        assert_eq!(refused(&a), "origin_not_allowed", "{origin}");
    }
    for site in ["cross-site", "same-site"] {
        let a = b
            .raw("POST", "/execute", &[JSON, ("Sec-Fetch-Site", site)], &good)
            .await;
        assert_eq!(refused(&a), "origin_not_allowed", "{site}");
    }
    // the simple requests a page can send without a CORS preflight
    let a = b
        .raw(
            "POST",
            "/execute",
            &[
                ("Content-Type", "text/plain"),
                ("Origin", "https://evil.example"),
            ],
            &good,
        )
        .await;
    assert_eq!(refused(&a), "origin_not_allowed");
    let a = b
        .raw("POST", "/tasks", &[("Content-Type", "text/plain")], &good)
        .await;
    assert_eq!(a.refusal(415), "unsupported_media_type");
    assert_eq!(b.record(), None, "nothing refused reached droid");
    assert_eq!(
        b.get("/tasks").await,
        (200, json!({"tasks": [], "damaged": []}))
    );

    // an allow-listed origin, and a browser's own same-origin fetch
    let a = b
        .raw(
            "GET",
            "/health",
            &[("Origin", "http://localhost:3000")],
            b"",
        )
        .await;
    assert_eq!(a.status, 200, "{a:#?}");
    let a = b
        .raw(
            "POST",
            "/execute",
            &[JSON, ("Sec-Fetch-Site", "none")],
            &good,
        )
        .await;
    assert_eq!(a.status, 200, "{a:#?}");
    assert_eq!(a.result().status, Status::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_configured_token_is_required() {
    let b = Bridged::start(
        &json!([{"completion": "Done."}]),
        &[],
        &[("DROID_EXECUTOR_TOKEN", TOKEN)],
    )
    .await;
    let req = body(&b.request("fine", json!({})));
    let missing = b.raw("POST", "/execute", &[JSON], &req).await;
    assert_eq!(missing.refusal(401), "unauthorized");
    assert_eq!(
        missing.header("www-authenticate"),
        Some("Bearer realm=\"droid-executor\"")
    );
    for wrong in [
        "Bearer bridge-test-token-012345678",
        "Bearer bridge-test-token-01234567890",
        "Basic bridge-test-token-0123456789",
        "bridge-test-token-0123456789",
    ] {
        let a = b
            .raw("GET", "/health", &[("Authorization", wrong)], b"")
            .await;
        assert_eq!(a.refusal(401), "unauthorized", "{wrong}");
        assert!(a.header("www-authenticate").is_some(), "{wrong}");
    }
    // Host is checked before the token: a rebinding page learns nothing about it
    let a = b
        .raw("GET", "/health", &[("Host", "attacker.example")], b"")
        .await;
    assert_eq!(a.refusal(403), "host_not_allowed");

    let client = Client::new(b.addr(), Some(Token::new(TOKEN).unwrap()));
    let health = client.health().await.unwrap();
    assert_eq!(health["status"], "ok");
    let r = client
        .execute(&b.request("fine", json!({})), HTTP_LIMIT)
        .await
        .unwrap();
    assert_eq!(r.status, Status::Success, "{r:#?}");
    assert_eq!(
        Client::new(b.addr(), None)
            .health()
            .await
            .unwrap_err()
            .to_string(),
        format!(
            "bridge at {} answered 401: this bridge requires 'Authorization: Bearer <token>' (the \
             token of its --token-file or DROID_EXECUTOR_TOKEN)",
            b.addr()
        )
    );

    // --token-file, over the environment's
    let file = b.home.file("token");
    std::fs::write(&file, "file-token-abcdefghijklmnop\n").unwrap();
    let file_arg = file.display().to_string();
    let by_file = ServeProc::start(
        &["--token-file", &file_arg],
        &env_of(&b.home, &[("DROID_EXECUTOR_TOKEN", TOKEN)]),
        b.home.path(),
    )
    .await;
    let right = Client::new(
        by_file.addr,
        Some(Token::new("file-token-abcdefghijklmnop").unwrap()),
    );
    assert_eq!(right.health().await.unwrap()["status"], "ok");
    let env_token = Client::new(by_file.addr, Some(Token::new(TOKEN).unwrap()));
    let err = env_token.health().await.unwrap_err().to_string();
    assert!(
        err.contains("answered 401: the bearer token is wrong"),
        "{err}"
    );

    // a guessable token is refused at start
    let out = droid_executor(
        &["serve", "--port", "0"],
        &env_of(&b.home, &[("DROID_EXECUTOR_TOKEN", "short")]),
        b.home.path(),
    )
    .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(
        out.stderr,
        "droid-executor serve: invalid token: it has 5 characters; use at least 16 (e.g. \
         `openssl rand -hex 32`)\n"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_bind_needs_a_token() {
    let home = Bridged::home(&json!([{"completion": "Done."}]));
    let out = droid_executor(
        &["serve", "--host", "0.0.0.0", "--port", "0"],
        &env_of(&home, &[]),
        home.path(),
    )
    .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(
        out.stderr,
        "droid-executor serve: refusing to listen on 0.0.0.0:0: it is reachable from other \
         machines and no token is configured; bind 127.0.0.1, or set a token with --token-file \
         FILE or DROID_EXECUTOR_TOKEN (clients then send 'Authorization: Bearer <token>')\n"
    );

    let b = Bridged::over(
        home,
        &["--host", "0.0.0.0"],
        &[("DROID_EXECUTOR_TOKEN", TOKEN)],
    )
    .await;
    assert!(b.addr().ip().is_unspecified(), "{}", b.addr());
    let lo = SocketAddr::from(([127, 0, 0, 1], b.addr().port()));
    let client = Client::new(lo, Some(Token::new(TOKEN).unwrap()));
    assert_eq!(client.health().await.unwrap()["status"], "ok");
    let missing = exchange(lo, &raw(lo, "GET", "/health", &[], b"")).await;
    assert_eq!(missing.refusal(401), "unauthorized");
    // Ctrl-C in the terminal running it stops it like SIGTERM
    b.serve.signal(Signal::SIGINT);
    let Bridged {
        mut serve,
        home: _home,
    } = b;
    let (code, log) = serve.wait().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("interrupted; shutting down"), "{log}");
    assert!(log.ends_with("droid-executor serve: stopped\n"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn autonomy_is_capped_by_max_autonomy() {
    let b = Bridged::start(
        &json!([{"completion": "Done."}]),
        &[],
        &[("DROID_EXECUTOR_MAX_AUTONOMY", "low")],
    )
    .await;
    let r = b
        .execute(&b.request("do anything", json!({"autonomy": "high"})))
        .await;
    assert_eq!(r.status, Status::Success, "{r:#?}");
    let record = b.record().expect("droid started");
    assert_eq!(
        flag(&record, "--auto").as_deref(),
        Some("low"),
        "{record:#}"
    );
    assert!(
        !record["argv"]
            .as_array()
            .unwrap()
            .contains(&json!("--skip-permissions-unsafe")),
        "{record:#}"
    );
    let r = b
        .execute(&b.request("only read", json!({"autonomy": "read_only"})))
        .await;
    assert_eq!(r.status, Status::Success, "{r:#?}");
    let record = b.record().unwrap();
    assert_eq!(flag(&record, "--auto"), None, "below the cap: {record:#}");

    // a background task: its `started` event says what droid ran with
    let id = b
        .submit(&b.request(
            "do anything",
            json!({"execution_mode": "command", "autonomy": "high"}),
        ))
        .await;
    b.until_state(&id, "success").await;
    let events = EventStream::open(&b.serve.url(&format!("/tasks/{id}/events")), &[])
        .rest()
        .await;
    let started = events.iter().find(|e| e.event == "started").unwrap();
    assert_eq!(started.data["autonomy"], "low", "{started:#?}");
    assert_eq!(flag(&b.record().unwrap(), "--auto").as_deref(), Some("low"));
}

/// A request on a repository outside HOME (the default allowed root) never runs.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn repo_root_outside_allowed_roots_is_refused() {
    let b = Bridged::start(&json!([{"completion": "Done."}]), &[], &[]).await;
    let outside = TempDir::new("bridge-outside").unwrap();
    git_repo_at(outside.path(), &[("a.txt", "a\n")]);
    for path in ["/execute", "/tasks"] {
        let a = b
            .post(path, &request_for(outside.path(), "escape", json!({})))
            .await;
        assert_eq!(a.status, 400, "{path}: {a:#?}");
        let r = a.result();
        assert_eq!(r.status, Status::Error);
        assert_eq!(r.issues.len(), 1, "{r:#?}");
        assert!(
            r.issues[0].description.starts_with("$.context.repo_root: ")
                && r.issues[0]
                    .description
                    .contains("outside the allowed roots"),
            "{r:#?}"
        );
    }
    assert_eq!(b.record(), None, "droid never started");
    // the same repository inside HOME runs
    let inside = b.home.file("inside");
    git_repo_at(&inside, &[("a.txt", "a\n")]);
    let r = b.execute(&request_for(&inside, "stay", json!({}))).await;
    assert_eq!(r.status, Status::Success, "{r:#?}");
}

// ---------------------------------------------------------------------------------------------
// Graceful shutdown

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_a_sync_run_finish_then_exits() {
    let b = Bridged::start(
        &json!([{"sleep_ms": 2500}, {"completion": "Finished in time."}]),
        &[],
        &[],
    )
    .await;
    let client = b.client();
    let req = b.request("take a moment", json!({"task_id": "T-drain"}));
    let run = tokio::spawn(async move { client.execute(&req, HTTP_LIMIT).await });
    b.until_droid_started().await;
    b.serve.signal(Signal::SIGTERM);
    let result = run.await.unwrap().unwrap();
    assert_eq!(
        (
            result.status,
            result.task_id.as_deref(),
            result.summary.as_str()
        ),
        (Status::Success, Some("T-drain"), "Finished in time."),
        "{result:#?}"
    );
    let Bridged {
        mut serve,
        home: _home,
    } = b;
    let (code, log) = serve.wait().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(
        log.contains("shutting down; waiting up to 30 s for 1 run(s)"),
        "{log}"
    );
    assert!(!log.contains("cancelling"), "{log}");
    assert!(log.ends_with("droid-executor serve: stopped\n"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_the_drain_grace_runs_are_cancelled_and_new_requests_get_503() {
    let b = Bridged::start(&json!([{"hang": true}]), &["--drain-grace", "3"], &[]).await;
    let client = b.client();
    let req = b.request("hang", json!({"task_id": "T-hang"}));
    let run = tokio::spawn(async move { client.execute(&req, HTTP_LIMIT).await });
    let droid = droid_pid(&b.until_droid_started().await);
    b.serve.signal(Signal::SIGTERM);

    // during the drain every request is answered 503 (the listener stays open); the drain lasts
    // the 3 s grace and then until the run is gone, so the 503 is seen long before this bound
    let until = Instant::now() + HTTP_LIMIT;
    let refused = loop {
        let a = b.raw("GET", "/health", &[], b"").await;
        if a.status == 503 {
            break a;
        }
        assert_eq!(a.status, 200, "{a:#?}");
        assert!(Instant::now() < until, "no 503 after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(refused.refusal(503), "shutting_down");
    assert_eq!(refused.header("retry-after"), Some(RETRY_AFTER));
    assert_eq!(refused.header("connection"), Some("close"));
    let a = b.post("/execute", &b.request("too late", json!({}))).await;
    assert_eq!(a.refusal(503), "shutting_down");

    let result = run.await.unwrap().unwrap();
    assert_eq!(
        (result.status, result.task_id.as_deref()),
        (Status::Cancelled, Some("T-hang")),
        "{result:#?}"
    );
    assert!(wait_gone(droid, GONE).await, "droid {droid} survived");
    let Bridged {
        mut serve,
        home: _home,
    } = b;
    let (code, log) = serve.wait().await;
    assert_eq!(code, Some(0), "{log}");
    assert!(log.contains("waiting up to 3 s for 1 run(s)"), "{log}");
    assert!(log.contains("cancelling 1 run(s) still going"), "{log}");
}

/// A request whose head came before SIGTERM and whose body comes after: the bridge is shutting
/// down, so it is answered 503 and starts nothing (rather than starting droid after the drain and
/// dropping it, and its client, when the process exits).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_still_arriving_at_sigterm_gets_503_and_starts_nothing() {
    let home = Bridged::home(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let b = Bridged::over(home, &[], &[]).await;
    let addr = b.addr();
    let req = body(&b.request("hang", json!({})));
    let len = req.len().to_string();
    let mut s = TcpStream::connect(addr).await.unwrap();
    let head = raw(
        addr,
        "POST",
        "/execute",
        &[JSON, ("Content-Length", &len)],
        b"",
    );
    s.write_all(&head).await.unwrap();
    s.write_all(&req[..10]).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    b.serve.signal(Signal::SIGTERM);
    // the drain has begun once a new request is refused (503) or no longer accepted
    let until = Instant::now() + HTTP_LIMIT;
    loop {
        let Ok(mut c) = TcpStream::connect(addr).await else {
            break;
        };
        let _ = c.write_all(&raw(addr, "GET", "/health", &[], b"")).await;
        let got = read_all(&mut c).await;
        if got.is_empty() || parse_answer(&got).status == 503 {
            break;
        }
        assert!(Instant::now() < until, "the drain never began");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = s.write_all(&req[10..]).await;
    let answer = read_all(&mut s).await;
    let Bridged { mut serve, home } = b;
    let (code, log) = serve.wait().await;
    let record = recorded(&home);
    // a run that started anyway must not outlive the test
    let _reaper = record.as_ref().map(|r| Reaper {
        marker: r["env"][MARKER_VAR].as_str().unwrap().to_owned(),
    });
    assert!(
        !answer.is_empty(),
        "the client got no answer; bridge log:\n{log}"
    );
    assert_eq!(parse_answer(&answer).refusal(503), "shutting_down");
    assert_eq!(record, None, "droid started while the bridge shut down");
    assert_eq!(code, Some(0), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_tasks_outlive_the_bridge() {
    let b = Bridged::start(
        &json!([{"sleep_ms": 3000}, {"completion": "Done without the bridge."}]),
        &[],
        &[],
    )
    .await;
    let id = b.submit(&b.request("outlive the bridge", json!({}))).await;
    b.until_state(&id, "running").await;
    let Bridged { serve, home } = b;
    let (code, log) = serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
    let env = env_of(&home, &[]);
    let shown = droid_executor(&["tasks", "show", &id, "--json"], &env, home.path()).await;
    let rec: Value = serde_json::from_str(&shown.stdout).unwrap();
    assert_eq!(
        rec["state"], "running",
        "still running once the bridge is gone: {rec:#}"
    );
    let waited = droid_executor(
        &["tasks", "wait", &id, "--timeout", "60", "--json"],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(waited.code, Some(0), "{waited:#?}");
    let rec: Value = serde_json::from_str(&waited.stdout).unwrap();
    assert_eq!(rec["state"], "success", "{rec:#}");
    assert_eq!(rec["result"]["summary"], "Done without the bridge.");
}

// ---------------------------------------------------------------------------------------------
// Load

/// Requests in the load test, and how many are in flight at once.
const LOAD_REQUESTS: usize = 200;
const LOAD_CONCURRENCY: usize = 32;
/// Repositories they spread over (runs on one repository take turns by design).
const LOAD_REPOS: usize = 8;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_200_requests_32_at_a_time_each_answered_once() {
    let home = Bridged::home(&json!([{"completion": "Done."}]));
    let repos: Vec<PathBuf> = (0..LOAD_REPOS)
        .map(|i| {
            let dir = home.file(&format!("repo-{i}"));
            git_repo_at(&dir, &[("a.txt", "a\n")]);
            dir
        })
        .collect();
    let concurrent = LOAD_REPOS.to_string();
    let b = Bridged::over(
        home,
        &[],
        &[("DROID_EXECUTOR_MAX_CONCURRENT", concurrent.as_str())],
    )
    .await;
    let started = Instant::now();
    let slots = Arc::new(tokio::sync::Semaphore::new(LOAD_CONCURRENCY));
    let mut set = tokio::task::JoinSet::new();
    for i in 0..LOAD_REQUESTS {
        let permit = Arc::clone(&slots).acquire_owned().await.unwrap();
        let client = b.client();
        let task_id = format!("load-{i:03}");
        let req = request_for(
            &repos[i % LOAD_REPOS],
            "say done",
            json!({"task_id": task_id}),
        );
        set.spawn(async move {
            let answer = client.execute(&req, Duration::from_secs(120)).await;
            drop(permit);
            (task_id, answer)
        });
    }
    let mut answered = std::collections::BTreeMap::new();
    while let Some(joined) = set.join_next().await {
        let (task_id, answer) = joined.unwrap();
        let result = answer.unwrap_or_else(|e| panic!("{task_id}: {e}"));
        assert_eq!(result.status, Status::Success, "{task_id}: {result:#?}");
        assert_eq!(result.task_id.as_deref(), Some(task_id.as_str()));
        assert!(
            answered.insert(task_id.clone(), ()).is_none(),
            "{task_id} answered twice"
        );
    }
    let took = started.elapsed();
    assert_eq!(answered.len(), LOAD_REQUESTS);
    let text = b.metrics().await;
    for (series, n) in [
        (
            "droid_executor_runs_total{status=\"success\"}",
            LOAD_REQUESTS,
        ),
        ("droid_executor_run_duration_seconds_count", LOAD_REQUESTS),
        (
            "droid_executor_http_responses_total{code=\"200\"}",
            LOAD_REQUESTS,
        ),
        ("droid_executor_sync_in_flight", 0),
        ("droid_executor_queue_depth", 0),
    ] {
        assert_eq!(metric(&text, series), n as u64, "{series} in\n{text}");
    }
    assert!(
        !text.contains("droid_executor_http_responses_total{code=\"429\"}"),
        "{text}"
    );
    eprintln!(
        "load: {LOAD_REQUESTS} requests, {LOAD_CONCURRENCY} at a time over {LOAD_REPOS} \
         repositories, in {took:?} ({:.1} requests/s)",
        LOAD_REQUESTS as f64 / took.as_secs_f64()
    );
}

// ---------------------------------------------------------------------------------------------
// The task store, background metrics and the OpenAPI document

/// A task store whose directory cannot be made (its parent is a file): the bridge still serves,
/// says why once on stderr at start-up, and every task route answers 503 naming the directory
/// and the OS error (not a generic "set store_dir" hint).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unusable_task_store_is_named_in_every_503_of_the_task_routes() {
    let home = Bridged::home(&json!([{"completion": "Done."}]));
    let file = home.file("not-a-directory");
    std::fs::write(&file, "a file, not a directory\n").unwrap();
    let store = file.join("store");
    let store_var = store.display().to_string();
    let b = Bridged::over(home, &[], &[("DROID_EXECUTOR_STORE_DIR", &store_var)]).await;
    let why = format!(
        "background tasks are not available: create directory {}: Not a directory (os error 20)",
        store.join("tasks").display()
    );
    let warnings: Vec<&String> = b
        .serve
        .log
        .iter()
        .filter(|l| l.contains("warning"))
        .collect();
    assert_eq!(
        warnings,
        [&format!(
            "droid-executor serve: warning: {why}; the task routes answer 503\n"
        )],
        "{:#?}",
        b.serve.log
    );
    let message = format!("{why} (found when the bridge started; fix it and restart the bridge)");
    let good = body(&b.request("in the background", json!({})));
    for (method, path, body) in [
        ("POST", "/tasks", &good[..]),
        ("GET", "/tasks", &b""[..]),
        ("GET", "/tasks/droid-1-ffff", &b""[..]),
        ("DELETE", "/tasks/droid-1-ffff", &b""[..]),
        ("GET", "/tasks/droid-1-ffff/events", &b""[..]),
    ] {
        let a = b.raw(method, path, &[JSON], body).await;
        assert_eq!(a.refusal(503), "tasks_unavailable", "{method} {path}");
        assert_eq!(
            a.json()["error"]["message"],
            json!(message),
            "{method} {path}"
        );
        assert_eq!(
            a.header("retry-after"),
            None,
            "{method} {path}: retrying cannot help"
        );
    }
    let (status, health) = b.get("/health").await;
    assert_eq!(status, 200, "{health:#}");
    assert_eq!(
        health["tasks"],
        json!({"store": null, "running": null, "queued": null, "damaged": null})
    );
    assert!(!store.exists());
}

/// Background tasks are counted by status when they end, once each, whoever submitted them
/// (this bridge, or the CLI through the same store), apart from sync runs; a restarted bridge
/// starts from 0, counts nothing of the history, and counts a task that was running across the
/// restart when it ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_task_ends_are_counted_once_by_status() {
    let b = Bridged::start(&short_run(), &[], &[]).await;
    let counts = |text: &str| -> Vec<(&str, u64)> {
        ["success", "failed", "cancelled", "error"]
            .into_iter()
            .map(|s| {
                let series = format!("droid_executor_tasks_finished_total{{status=\"{s}\"}}");
                (s, metric(text, &series))
            })
            .collect()
    };
    let zero = vec![
        ("success", 0),
        ("failed", 0),
        ("cancelled", 0),
        ("error", 0),
    ];
    assert_eq!(counts(&b.metrics().await), zero);

    let ok = b.submit(&b.request("look around", json!({}))).await;
    b.until_state(&ok, "success").await;
    b.home.play(&json!([{"stderr": "boom"}, {"exit": 1}]));
    let failed = b.submit(&b.request("fail", json!({}))).await;
    let rec = b.until_state(&failed, "failed").await;
    assert_eq!(rec["result"]["status"], "failed", "{rec:#}");
    for _ in 0..2 {
        // a second scrape counts nothing again
        let text = b.metrics().await;
        assert_eq!(
            counts(&text),
            [
                ("success", 1),
                ("failed", 1),
                ("cancelled", 0),
                ("error", 0)
            ],
            "{text}"
        );
        assert_eq!(
            metric(&text, "droid_executor_task_duration_seconds_count"),
            2
        );
        assert_eq!(
            metric(
                &text,
                "droid_executor_task_duration_seconds_bucket{le=\"+Inf\"}"
            ),
            2
        );
        // sync runs are counted apart, and there were none
        assert_eq!(
            metric(&text, "droid_executor_runs_total{status=\"success\"}"),
            0
        );
        assert_eq!(
            metric(&text, "droid_executor_run_duration_seconds_count"),
            0
        );
        assert_eq!(metric(&text, "droid_executor_tasks_submitted_total"), 2);
    }

    // a task running across a restart of the bridge
    b.home.play(&json!([{"hang": true}]));
    std::fs::remove_file(b.home.fixture("record.json")).unwrap();
    let hanging = b.submit(&b.request("hang", json!({}))).await;
    let record = b.until_droid_started().await;
    let _reaper = Reaper {
        marker: record["env"][MARKER_VAR].as_str().unwrap().to_owned(),
    };
    b.until_state(&hanging, "running").await;
    let Bridged { serve, home } = b;
    let (code, log) = serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
    let b = Bridged::over(home, &[], &[]).await;
    let text = b.metrics().await;
    assert_eq!(
        counts(&text),
        zero,
        "the history is not counted again:\n{text}"
    );
    assert_eq!(metric(&text, "droid_executor_tasks{state=\"running\"}"), 1);

    // submitted by the CLI into the same store, finished while this bridge runs
    b.home.play(&short_run());
    let env = env_of(&b.home, &[]);
    let repo = b.home.repo().display().to_string();
    let out = droid_executor(
        &[
            "run",
            "--background",
            "--json",
            "--repo",
            &repo,
            "look around",
        ],
        &env,
        b.home.path(),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let cli: Value = serde_json::from_str(&out.stdout).unwrap();
    let cli = cli["task_id"].as_str().unwrap().to_owned();
    // it runs once the hanging task, on the same repository, is cancelled
    let cancelled = b
        .raw("DELETE", &format!("/tasks/{hanging}"), &[], b"")
        .await;
    assert!([200, 202].contains(&cancelled.status), "{cancelled:#?}");
    b.until_state(&hanging, "cancelled").await;
    b.until_state(&cli, "success").await;
    let text = b.metrics().await;
    assert_eq!(
        counts(&text),
        [
            ("success", 1),
            ("failed", 0),
            ("cancelled", 1),
            ("error", 0)
        ],
        "{text}"
    );
    assert_eq!(metric(&text, "droid_executor_tasks_submitted_total"), 0);
    assert_eq!(metric(&text, "droid_executor_tasks{state=\"running\"}"), 0);
}

/// Statuses this test drives each operation to, over real sockets. Together with
/// [`ELSEWHERE`], every status the document lists.
const EXERCISED: &[(&str, &[u16])] = &[
    (
        "POST /execute",
        &[200, 400, 401, 403, 408, 413, 415, 429, 431, 503],
    ),
    (
        "POST /tasks",
        &[202, 400, 401, 403, 408, 413, 415, 431, 500, 503],
    ),
    ("GET /tasks", &[200, 400, 401, 403, 431, 500, 503]),
    ("GET /tasks/{id}", &[200, 400, 401, 403, 404, 431, 500, 503]),
    (
        "DELETE /tasks/{id}",
        &[200, 400, 401, 403, 404, 431, 500, 503],
    ),
    (
        "GET /tasks/{id}/events",
        &[200, 400, 401, 403, 404, 431, 500, 503],
    ),
    ("GET /health", &[200, 400, 401, 403, 431, 503]),
    ("GET /metrics", &[200, 400, 401, 403, 431, 503]),
    ("GET /openapi.json", &[200, 400, 401, 403, 431, 503]),
];

/// Documented statuses that other tests drive an operation to.
const ELSEWHERE: &[(&str, u16, &str)] = &[
    (
        "DELETE /tasks/{id}",
        202,
        "delete_answers_202_while_droid_is_still_stopping",
    ),
    (
        "GET /tasks/{id}/events",
        429,
        "open_streams_leave_room_for_short_requests_and_one_more_is_refused",
    ),
    (
        "POST /tasks",
        409,
        "worktrees::the_bridge_applies_and_discards_worktree_tasks",
    ),
];

/// `METHOD path` as the token holder sends it (`Authorization` first, then `headers`).
async fn authed(
    b: &Bridged,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> Answer {
    let bearer = format!("Bearer {TOKEN}");
    let mut all = vec![("Authorization", bearer.as_str())];
    all.extend_from_slice(headers);
    b.raw(method, path, &all, body).await
}

/// Send `bytes` on a new connection, writing them from another task (the bridge may answer and
/// close before reading them all); the answer.
async fn exchange_while_writing(addr: SocketAddr, bytes: Vec<u8>) -> Answer {
    let (mut r, mut w) = TcpStream::connect(addr).await.unwrap().into_split();
    let writer = tokio::spawn(async move { w.write_all(&bytes).await });
    let answer = parse_answer(&read_all(&mut r).await);
    let _ = writer.await;
    answer
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_status_the_routes_answer_is_documented() {
    use std::collections::{BTreeMap, BTreeSet};

    let b = Bridged::start(
        &json!([{"completion": "Done."}]),
        &["--body-timeout", "1", "--drain-grace", "600"],
        &[
            ("DROID_EXECUTOR_TOKEN", TOKEN),
            ("DROID_EXECUTOR_MAX_CONCURRENT", "1"),
            ("DROID_EXECUTOR_MAX_QUEUE", "0"),
        ],
    )
    .await;
    let addr = b.addr();
    let mut seen: BTreeMap<&str, BTreeSet<u16>> = BTreeMap::new();
    let mut saw = |op: &'static str, a: &Answer| {
        seen.entry(op).or_default().insert(a.status);
    };
    let good = body(&b.request("say done", json!({})));

    // a finished task for the task routes
    let a = authed(&b, "POST", "/tasks", &[JSON], &good).await;
    assert_eq!(a.status, 202, "{a:#?}");
    saw("POST /tasks", &a);
    let id = a.json()["task_id"].as_str().unwrap().to_owned();
    let task = format!("/tasks/{id}");
    let until = Instant::now() + HTTP_LIMIT;
    while authed(&b, "GET", &task, &[], b"").await.json()["state"] != "success" {
        assert!(Instant::now() < until, "{id} never finished");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let events = format!("{task}/events");
    let ops: [(&'static str, &str, &str); 9] = [
        ("POST /execute", "POST", "/execute"),
        ("POST /tasks", "POST", "/tasks"),
        ("GET /tasks", "GET", "/tasks"),
        ("GET /tasks/{id}", "GET", &task),
        ("DELETE /tasks/{id}", "DELETE", &task),
        ("GET /tasks/{id}/events", "GET", &events),
        ("GET /health", "GET", "/health"),
        ("GET /metrics", "GET", "/metrics"),
        ("GET /openapi.json", "GET", "/openapi.json"),
    ];

    // the checks made before routing, on every operation
    let big = "a".repeat(70 * 1024);
    for (op, method, path) in ops {
        let no_host = format!(
            "{method} {path} HTTP/1.1\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\n\r\n"
        );
        let a = exchange(addr, no_host.as_bytes()).await;
        assert_eq!(a.refusal(400), "host_required", "{op}");
        saw(op, &a);
        let a = b.raw(method, path, &[], b"").await;
        assert_eq!(a.refusal(401), "unauthorized", "{op}");
        saw(op, &a);
        let a = authed(&b, method, path, &[("Host", "attacker.example")], b"").await;
        assert_eq!(a.refusal(403), "host_not_allowed", "{op}");
        saw(op, &a);
        let head = raw(addr, method, path, &[("X-Padding", &big)], b"");
        let a = exchange_while_writing(addr, head).await;
        assert_eq!(a.status, 431, "{op}: {a:#?}");
        saw(op, &a);
    }

    // each route's own answers
    let a = authed(&b, "POST", "/execute", &[JSON], &good).await;
    assert_eq!(
        (a.status, a.result().status),
        (200, Status::Success),
        "{a:#?}"
    );
    saw("POST /execute", &a);
    for (op, path) in [("POST /execute", "/execute"), ("POST /tasks", "/tasks")] {
        let a = authed(&b, "POST", path, &[JSON], b"{\"objective\": ").await;
        assert_eq!(
            (a.status, a.result().status),
            (400, Status::Error),
            "{a:#?}"
        );
        saw(op, &a);
        let a = authed(&b, "POST", path, &[("Content-Type", "text/plain")], &good).await;
        assert_eq!(a.refusal(415), "unsupported_media_type", "{op}");
        saw(op, &a);
        let a = authed(
            &b,
            "POST",
            path,
            &[JSON, ("Content-Length", "100000000")],
            b"",
        )
        .await;
        assert_eq!(a.refusal(413), "body_too_large", "{op}");
        saw(op, &a);
        let bearer = format!("Bearer {TOKEN}");
        let mut stalled = raw(
            addr,
            "POST",
            path,
            &[JSON, ("Authorization", &bearer), ("Content-Length", "100")],
            b"",
        );
        stalled.extend_from_slice(b"{\"objective\"");
        let a = exchange(addr, &stalled).await;
        assert_eq!(a.refusal(408), "body_timeout", "{op}");
        saw(op, &a);
    }
    let a = authed(&b, "GET", "/tasks", &[], b"").await;
    assert_eq!(a.status, 200, "{a:#?}");
    saw("GET /tasks", &a);
    let a = authed(&b, "GET", "/tasks?limit=0", &[], b"").await;
    assert_eq!(a.refusal(400), "bad_query");
    saw("GET /tasks", &a);
    let a = authed(&b, "GET", &task, &[], b"").await;
    assert_eq!(a.status, 200, "{a:#?}");
    saw("GET /tasks/{id}", &a);
    let a = authed(&b, "GET", &events, &[], b"").await;
    assert_eq!(a.status, 200, "{a:#?}");
    assert!(a.body.contains("event: result"), "{a:#?}");
    saw("GET /tasks/{id}/events", &a);
    let a = authed(&b, "GET", &events, &[("Last-Event-ID", "x")], b"").await;
    assert_eq!(a.refusal(400), "bad_query");
    saw("GET /tasks/{id}/events", &a);
    let a = authed(&b, "DELETE", &task, &[], b"").await;
    assert_eq!(a.status, 200, "{a:#?}");
    saw("DELETE /tasks/{id}", &a);
    for (op, method, path) in [
        ("GET /tasks/{id}", "GET", "/tasks/droid-1-ffff"),
        ("DELETE /tasks/{id}", "DELETE", "/tasks/droid-1-ffff"),
        (
            "GET /tasks/{id}/events",
            "GET",
            "/tasks/droid-1-ffff/events",
        ),
    ] {
        let a = authed(&b, method, path, &[], b"").await;
        assert_eq!(a.refusal(404), "no_such_task", "{op}");
        saw(op, &a);
    }
    for (op, path) in [
        ("GET /health", "/health"),
        ("GET /metrics", "/metrics"),
        ("GET /openapi.json", "/openapi.json"),
    ] {
        let a = authed(&b, "GET", path, &[], b"").await;
        assert_eq!(a.status, 200, "{op}: {a:#?}");
        saw(op, &a);
    }
    let doc: Value = authed(&b, "GET", "/openapi.json", &[], b"").await.json();

    // 500: a task whose record is corrupt, then a store whose task directory is a file
    let tasks_dir = b.home.file(".local/state/droid-executor/tasks");
    let corrupt = tasks_dir.join("droid-1-abcd");
    std::fs::create_dir(&corrupt).unwrap();
    std::fs::write(corrupt.join("task.json"), "{").unwrap();
    for (op, method, path) in [
        ("GET /tasks/{id}", "GET", "/tasks/droid-1-abcd"),
        ("DELETE /tasks/{id}", "DELETE", "/tasks/droid-1-abcd"),
        (
            "GET /tasks/{id}/events",
            "GET",
            "/tasks/droid-1-abcd/events",
        ),
    ] {
        let a = authed(&b, method, path, &[], b"").await;
        assert_eq!(a.refusal(500), "store_error", "{op}");
        saw(op, &a);
    }
    std::fs::remove_dir_all(&corrupt).unwrap();
    let moved = tasks_dir.with_extension("moved");
    std::fs::rename(&tasks_dir, &moved).unwrap();
    std::fs::write(&tasks_dir, "not a directory\n").unwrap();
    let a = authed(&b, "GET", "/tasks", &[], b"").await;
    assert_eq!(a.refusal(500), "store_error");
    saw("GET /tasks", &a);
    let a = authed(&b, "POST", "/tasks", &[JSON], &good).await;
    assert_eq!(a.refusal(500), "store_error");
    saw("POST /tasks", &a);
    std::fs::remove_file(&tasks_dir).unwrap();
    std::fs::rename(&moved, &tasks_dir).unwrap();

    // 429: the one run slot (max_concurrent 1, max_queue 0) is taken by a run that hangs
    b.home.play(&json!([{"hang": true}]));
    std::fs::remove_file(b.home.fixture("record.json")).unwrap();
    let bearer = format!("Bearer {TOKEN}");
    let hang = raw(
        addr,
        "POST",
        "/execute",
        &[JSON, ("Authorization", &bearer)],
        &body(&b.request("hang", json!({}))),
    );
    let mut hanging = TcpStream::connect(addr).await.unwrap();
    hanging.write_all(&hang).await.unwrap();
    let record = b.until_droid_started().await;
    let _reaper = Reaper {
        marker: record["env"][MARKER_VAR].as_str().unwrap().to_owned(),
    };
    let a = authed(&b, "POST", "/execute", &[JSON], &good).await;
    assert_eq!(a.refusal(429), "queue_full");
    saw("POST /execute", &a);

    // 503: shutting down, while the hanging run holds the drain open (its grace is 600 s)
    b.serve.signal(Signal::SIGTERM);
    let until = Instant::now() + HTTP_LIMIT;
    while authed(&b, "GET", "/health", &[], b"").await.status != 503 {
        assert!(Instant::now() < until, "no 503 after SIGTERM");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    for (op, method, path) in ops {
        let a = authed(&b, method, path, &[JSON], b"").await;
        assert_eq!(a.refusal(503), "shutting_down", "{op}");
        saw(op, &a);
    }
    // the client leaves: its run is cancelled and the drain ends
    drop(hanging);
    let Bridged {
        mut serve,
        home: _home,
    } = b;
    let (code, log) = serve.wait().await;
    assert_eq!(code, Some(0), "{log}");

    let documented = |op: &str| -> BTreeSet<u16> {
        let (method, path) = op.split_once(' ').unwrap();
        doc["paths"][path][method.to_ascii_lowercase()]["responses"]
            .as_object()
            .unwrap_or_else(|| panic!("{op} is not documented"))
            .keys()
            .map(|k| k.parse().unwrap())
            .collect()
    };
    let exercised: BTreeMap<&str, BTreeSet<u16>> = EXERCISED
        .iter()
        .map(|(op, codes)| (*op, codes.iter().copied().collect()))
        .collect();
    assert_eq!(
        seen, exercised,
        "the table says more or less than the test did"
    );
    for (op, codes) in &seen {
        let doc_codes = documented(op);
        let missing: Vec<&u16> = codes.difference(&doc_codes).collect();
        assert!(
            missing.is_empty(),
            "{op} answered {missing:?}, not documented"
        );
        let elsewhere: BTreeSet<u16> = ELSEWHERE
            .iter()
            .filter(|(o, _, _)| o == op)
            .map(|(_, c, _)| *c)
            .collect();
        let unseen: Vec<&u16> = doc_codes
            .iter()
            .filter(|c| !codes.contains(c) && !elsewhere.contains(c))
            .collect();
        assert!(
            unseen.is_empty(),
            "{op} documents {unseen:?}, which no test drives it to"
        );
    }
}

// ---------------------------------------------------------------------------------------------
// Idle and streaming load: the bridge stays reachable

/// Make sure this process (and the bridges it starts, which inherit the limit) may open `need`
/// files: the soft limit is raised to `need` when the hard limit allows, and the test fails
/// saying how to raise it when not.
fn ensure_fd_limit(need: u64) {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    let (soft, hard) = getrlimit(Resource::RLIMIT_NOFILE).expect("getrlimit");
    if soft >= need {
        return;
    }
    assert!(
        hard >= need,
        "this test opens about {need} sockets but the hard limit of open files is {hard}: \
         raise it (`ulimit -Hn {need}` as root, or LimitNOFILE) and run again"
    );
    setrlimit(Resource::RLIMIT_NOFILE, need, hard).expect("raise the soft limit of open files");
}

/// A connection that sends nothing.
async fn idle_connections(addr: SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut all = Vec::with_capacity(n);
    for _ in 0..n {
        let s = tokio::time::timeout(HTTP_LIMIT, TcpStream::connect(addr))
            .await
            .expect("connect within the limit")
            .expect("connect");
        all.push(s);
    }
    all
}

/// Whether the bridge still holds `s` open: no end of stream (what has arrived is read and
/// dropped).
fn still_open(s: &TcpStream) -> bool {
    let mut buf = [0u8; 4096];
    loop {
        match s.try_read(&mut buf) {
            Ok(0) => return false,
            Ok(_) => {}
            Err(e) => return e.kind() == std::io::ErrorKind::WouldBlock,
        }
    }
}

/// 1,300 idle connections — more than the 1,024 the bridge holds, kept past any head timeout —
/// do not lock anyone out: `/health` still answers, the oldest idle connections were closed to
/// make room and the newest are still held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_past_the_limit_shed_the_oldest_and_health_still_answers() {
    const IDLE: usize = 1300;
    const HELD: usize = 1024; // BridgeConfig::default().max_connections
    // this process holds the client ends, the bridge (a child: it inherits the limit) the others
    ensure_fd_limit(4 * IDLE as u64);
    // a head timeout longer than the test: only shedding can free a place
    let b = Bridged::start(
        &json!([{"completion": "Done."}]),
        &["--header-timeout", "600"],
        &[],
    )
    .await;
    let mut idle = idle_connections(b.addr(), IDLE).await;
    let (status, health) = b.get("/health").await;
    assert_eq!(status, 200, "{health:#}");
    // the oldest were closed by the bridge (their end of stream arrives), the newest are held
    let shed = IDLE + 1 - HELD;
    for (i, s) in idle.iter_mut().take(shed - 1).enumerate() {
        let mut buf = Vec::new();
        let n = tokio::time::timeout(HTTP_LIMIT, s.read_to_end(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("idle connection {i} was never closed"))
            .unwrap_or(0);
        assert_eq!(n, 0, "connection {i} got an answer to nothing");
    }
    let newest_open = idle
        .iter()
        .rev()
        .take(HELD - 24)
        .filter(|s| still_open(s))
        .count();
    assert_eq!(
        newest_open,
        HELD - 24,
        "the newest idle connections are still held"
    );
    let text = b.metrics().await;
    let held = metric(&text, "droid_executor_connections");
    let shed_total = metric(&text, "droid_executor_connections_shed_total");
    eprintln!("{IDLE} idle connections: /health answered; {held} held, {shed_total} shed");
    assert!(held <= HELD as u64, "{text}");
    assert!(shed_total >= shed as u64, "{text}");
}

/// Read an event stream's answer head on a raw connection: its status and, for a refusal, the
/// whole answer.
async fn open_stream(addr: SocketAddr, id: &str) -> (TcpStream, Answer) {
    let mut s = TcpStream::connect(addr).await.unwrap();
    let req = format!("GET /tasks/{id}/events HTTP/1.1\r\nHost: {addr}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let head_end = loop {
        if let Some(i) = find(&got, b"\r\n\r\n") {
            break i;
        }
        let n = tokio::time::timeout(HTTP_LIMIT, s.read(&mut buf))
            .await
            .expect("no answer head within the limit")
            .unwrap();
        assert!(
            n > 0,
            "closed before an answer: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    };
    let head = parse_answer(&got[..head_end + 4]);
    if head.status == 200 {
        assert_eq!(
            head.header("content-type"),
            Some("text/event-stream"),
            "{head:#?}"
        );
        return (s, head);
    }
    // a refusal: the whole answer (its length is announced)
    let len: usize = head.header("content-length").unwrap().parse().unwrap();
    while got.len() < head_end + 4 + len {
        let n = tokio::time::timeout(HTTP_LIMIT, s.read(&mut buf))
            .await
            .expect("no answer body within the limit")
            .unwrap();
        assert!(
            n > 0,
            "closed in the answer: {:?}",
            String::from_utf8_lossy(&got)
        );
        got.extend_from_slice(&buf[..n]);
    }
    (s, parse_answer(&got))
}

/// Event streams are bounded per task, and together with sync runs they leave a reserve of
/// connections: with every stream place taken and a flood of idle connections on top,
/// `/health`, `/metrics` and a short POST still answer, and one more stream gets a clear
/// refusal (429 `too_many_streams`, 503 `connections_reserved`, each with `Retry-After`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn open_streams_leave_room_for_short_requests_and_one_more_is_refused() {
    // 10 connections, 3 kept for short requests: 7 long requests at most
    let b = Bridged::start(
        &json!([{"emit": assistant("first")}, {"hang": true}]),
        &[
            "--max-connections",
            "10",
            "--reserved-connections",
            "3",
            "--max-streams",
            "8",
            "--max-streams-per-task",
            "5",
            "--header-timeout",
            "600",
        ],
        &[],
    )
    .await;
    let a = b.submit(&b.request("hang a", json!({}))).await;
    let record = b.until_droid_started().await;
    let _reaper = Reaper {
        marker: record["env"][MARKER_VAR].as_str().unwrap().to_owned(),
    };
    // queued behind `a` (one run per repository): its stream stays open as well
    let c = b.submit(&b.request("hang c", json!({}))).await;

    let mut streams = Vec::new();
    for _ in 0..5 {
        let (s, head) = open_stream(b.addr(), &a).await;
        assert_eq!(head.status, 200);
        streams.push(s);
    }
    let (_, refused) = open_stream(b.addr(), &a).await;
    assert_eq!(refused.refusal(429), "too_many_streams");
    assert_eq!(refused.header("retry-after"), Some(RETRY_AFTER));
    let message = refused.json()["error"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(message.contains("max_streams_per_task"), "{message}");
    for _ in 0..2 {
        let (s, head) = open_stream(b.addr(), &c).await;
        assert_eq!(head.status, 200);
        streams.push(s);
    }
    // 7 streams: the connections left are the reserve
    let (_, refused) = open_stream(b.addr(), &c).await;
    assert_eq!(refused.refusal(503), "connections_reserved");
    assert_eq!(refused.header("retry-after"), Some(RETRY_AFTER));

    // idle connections on top take the free places and shed each other, never a stream
    let idle = idle_connections(b.addr(), 20).await;
    let (status, health) = b.get("/health").await;
    assert_eq!(status, 200, "{health:#}");
    let text = b.metrics().await;
    assert_eq!(metric(&text, "droid_executor_event_streams"), 7, "{text}");
    let short = b.raw("POST", "/tasks", &[JSON], b"{").await;
    assert_eq!(short.status, 400, "{short:#?}");
    assert!(streams.iter().all(still_open), "a stream was closed");
    eprintln!(
        "7 streams + 20 idle connections (10 held at most): /health, /metrics and a POST \
         answered; {} held, {} shed",
        metric(&text, "droid_executor_connections"),
        metric(&text, "droid_executor_connections_shed_total")
    );
    drop(idle);

    // a stream that ends gives its place back
    drop(streams.pop());
    let until = Instant::now() + HTTP_LIMIT;
    let reopened = loop {
        let (s, head) = open_stream(b.addr(), &c).await;
        if head.status == 200 {
            break s;
        }
        assert_eq!(head.refusal(503), "connections_reserved");
        assert!(
            Instant::now() < until,
            "the closed stream's place was never freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    drop(reopened);
    drop(streams);
    for id in [&c, &a] {
        let cancelled = b.raw("DELETE", &format!("/tasks/{id}"), &[], b"").await;
        assert!([200, 202].contains(&cancelled.status), "{cancelled:#?}");
    }
}

/// Every line of an event stream read by curl until the bridge ends it.
async fn stream_lines(url: &str, headers: &[&str]) -> Vec<String> {
    let mut stream = EventStream::open(url, headers);
    let mut lines = Vec::new();
    while let Some(line) = tokio::time::timeout(HTTP_LIMIT, stream.lines.next_line())
        .await
        .expect("the stream never ended")
        .unwrap()
    {
        lines.push(line);
    }
    let status = tokio::time::timeout(HTTP_LIMIT, stream.child.wait())
        .await
        .expect("curl did not exit")
        .unwrap();
    assert!(status.success(), "curl: {status}; lines {lines:#?}");
    lines
}

/// An event stream of a quiet task sends keep-alive comments, and at its maximum life it ends
/// with `event: resume` naming the last event sent; reconnecting with that `Last-Event-ID`
/// replays nothing twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_keep_alive_and_end_at_their_max_life_with_a_resume_point() {
    let b = Bridged::start(
        &json!([{"emit": assistant("first")}, {"hang": true}]),
        &["--stream-keep-alive", "1", "--stream-max-life", "4"],
        &[],
    )
    .await;
    let id = b.submit(&b.request("say one thing", json!({}))).await;
    let record = b.until_droid_started().await;
    let _reaper = Reaper {
        marker: record["env"][MARKER_VAR].as_str().unwrap().to_owned(),
    };
    let url = b.serve.url(&format!("/tasks/{id}/events"));
    // wait for the message, so the first stream has it to replay
    let mut first = EventStream::open(&url, &[]);
    loop {
        let e = first.next().await.expect("the stream ended early");
        if e.event == "message" {
            break;
        }
    }
    drop(first);
    let lines = stream_lines(&url, &[]).await;
    assert!(
        lines.iter().any(|l| l == ": keep-alive"),
        "no keep-alive comment: {lines:#?}"
    );
    let ids: Vec<u64> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("id: ")?.parse().ok())
        .collect();
    let events: Vec<&str> = lines
        .iter()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(events.last(), Some(&"resume"), "{lines:#?}");
    assert!(events.contains(&"message"), "{lines:#?}");
    let last = *ids.last().unwrap();
    // the resume frame repeats the last event's id, so EventSource resumes from it
    assert_eq!(ids[ids.len() - 2], last, "{lines:#?}");
    let data: Value = serde_json::from_str(
        lines
            .iter()
            .rev()
            .find_map(|l| l.strip_prefix("data: "))
            .unwrap(),
    )
    .unwrap();
    assert_eq!(data["after"], json!(last), "{lines:#?}");
    assert!(
        data["message"].as_str().unwrap().contains("Last-Event-ID"),
        "{data:#}"
    );

    // resumed: nothing new happened, so only keep-alives and the same resume point
    let header = format!("Last-Event-ID: {last}");
    let again = stream_lines(&url, &[&header]).await;
    let events: Vec<&str> = again
        .iter()
        .filter_map(|l| l.strip_prefix("event: "))
        .collect();
    assert_eq!(events, ["resume"], "{again:#?}");
    assert!(again.contains(&format!("id: {last}")), "{again:#?}");

    let cancelled = b.raw("DELETE", &format!("/tasks/{id}"), &[], b"").await;
    assert!([200, 202].contains(&cancelled.status), "{cancelled:#?}");
}

/// When every connection the bridge holds is busy (here: requests whose bodies stall) and none
/// is idle to be closed, a new connection gets a clear answer — 503 `connection_limit` with
/// `Retry-After` — instead of waiting unanswered; once a busy connection ends, `/health` is
/// served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_connection_while_every_held_one_is_busy_gets_503_connection_limit() {
    let b = Bridged::start(
        &json!([{"completion": "Done."}]),
        &[
            "--max-connections",
            "3",
            "--reserved-connections",
            "1",
            "--body-timeout",
            "600",
        ],
        &[],
    )
    .await;
    // `Expect: 100-continue`: the bridge says `100 Continue` once the request's handler reads
    // the body, so the connection is known to be busy
    let head = raw(
        b.addr(),
        "POST",
        "/tasks",
        &[JSON, ("Content-Length", "100"), ("Expect", "100-continue")],
        b"",
    );
    let mut stalled = Vec::new();
    for _ in 0..3 {
        let mut s = TcpStream::connect(b.addr()).await.unwrap();
        s.write_all(&head).await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 256];
        while find(&got, b"\r\n\r\n").is_none() {
            let n = tokio::time::timeout(HTTP_LIMIT, s.read(&mut buf))
                .await
                .expect("no 100 Continue within the limit")
                .unwrap();
            assert!(n > 0, "closed: {:?}", String::from_utf8_lossy(&got));
            got.extend_from_slice(&buf[..n]);
        }
        assert!(
            got.starts_with(b"HTTP/1.1 100 Continue"),
            "{:?}",
            String::from_utf8_lossy(&got)
        );
        stalled.push(s);
    }
    let refused = b.raw("GET", "/health", &[], b"").await;
    assert_eq!(refused.refusal(503), "connection_limit");
    assert_eq!(refused.header("retry-after"), Some(RETRY_AFTER));
    assert!(
        stalled.iter().all(still_open),
        "a busy connection was closed"
    );

    drop(stalled.pop());
    let until = Instant::now() + HTTP_LIMIT;
    loop {
        let a = b.raw("GET", "/health", &[], b"").await;
        if a.status == 200 {
            break;
        }
        assert_eq!(a.refusal(503), "connection_limit");
        assert!(
            Instant::now() < until,
            "the closed connection's place was never freed"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        stalled.iter().all(still_open),
        "a busy connection was closed"
    );
}
