//! Tests of the support code itself: the scripted model over a raw TCP client, the fake droid,
//! the process helpers, and one run of the real droid against the scripted model.

use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use tests::droid_bin::real_droid;
use tests::droid_home::DroidHome;
use tests::procs;
use tests::scripted_model::{Options, ScriptedModel};
use tests::temp_dir::TempDir;

/// Any single wait on the scripted model or a fake.
const WAIT: Duration = Duration::from_secs(10);
/// One run of the real droid against a local model (about 1 s when the machine is idle).
const DROID_RUN: Duration = Duration::from_secs(90);

// ---------------------------------------------------------------------------------------------
// A raw HTTP/1.1 client: the point is to see exactly the bytes the server sends.

/// A response as the client saw it.
#[derive(Debug)]
struct Response {
    status_line: String,
    /// Header names lowercased, in order.
    headers: Vec<(String, String)>,
    body: String,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `data:` payloads of an SSE body, JSON-parsed where possible, with the time-dependent
    /// `created` field removed.
    fn sse_data(&self) -> Vec<Value> {
        assert!(
            self.body.ends_with("\n\n"),
            "SSE body must end with a blank line: {:?}",
            self.body
        );
        self.body
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|event| {
                let data = event
                    .strip_prefix("data: ")
                    .unwrap_or_else(|| panic!("not an SSE data line: {event:?}"));
                match serde_json::from_str::<Value>(data) {
                    Ok(mut v) => {
                        let created = v.as_object_mut().unwrap().remove("created");
                        assert!(created.is_some_and(|c| c.is_u64()), "{data}");
                        v
                    }
                    Err(_) => Value::String(data.to_owned()),
                }
            })
            .collect()
    }
}

fn post_bytes(path: &str, body: &Value, extra: &str) -> Vec<u8> {
    let body = body.to_string();
    format!(
        "POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n\
         authorization: Bearer sk-mock\r\n{extra}content-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// Reads one response: up to `content-length`, or to end of stream without one.
async fn read_response(stream: &mut TcpStream) -> Response {
    let mut buf = Vec::new();
    let head_end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i;
        }
        let mut chunk = [0u8; 4096];
        let n = stream.read(&mut chunk).await.unwrap();
        assert!(n > 0, "connection closed inside the head: {buf:?}");
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8(buf[..head_end].to_vec()).unwrap();
    let mut body = buf[head_end + 4..].to_vec();
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap().to_owned();
    let headers: Vec<(String, String)> = lines
        .map(|l| {
            let (k, v) = l.split_once(':').unwrap();
            (k.trim().to_ascii_lowercase(), v.trim().to_owned())
        })
        .collect();
    let length = headers
        .iter()
        .find(|(k, _)| k == "content-length")
        .map(|(_, v)| v.parse::<usize>().unwrap());
    match length {
        Some(length) => {
            while body.len() < length {
                let mut chunk = [0u8; 4096];
                let n = stream.read(&mut chunk).await.unwrap();
                assert!(n > 0, "connection closed inside the body");
                body.extend_from_slice(&chunk[..n]);
            }
        }
        None => {
            stream.read_to_end(&mut body).await.unwrap();
        }
    }
    Response {
        status_line,
        headers,
        body: String::from_utf8(body).unwrap(),
    }
}

/// One request on a fresh connection.
async fn exchange(port: u16, request: &[u8]) -> Response {
    tokio::time::timeout(WAIT, async {
        let mut stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
        stream.write_all(request).await.unwrap();
        read_response(&mut stream).await
    })
    .await
    .expect("the scripted model did not answer in time")
}

fn chat_request(messages: Value) -> Value {
    json!({"model": "scripted", "stream": true, "messages": messages})
}

fn user(text: &str) -> Value {
    json!({"role": "user", "content": text})
}

fn assistant(text: &str) -> Value {
    json!({"role": "assistant", "content": text})
}

/// Drops the server off the async thread (its drop joins the server thread) under a timeout.
async fn stop(model: ScriptedModel) {
    tokio::time::timeout(WAIT, tokio::task::spawn_blocking(move || drop(model)))
        .await
        .expect("dropping the scripted model hung")
        .unwrap();
}

// ---------------------------------------------------------------------------------------------
// Scripted model

#[tokio::test]
async fn scripted_model_streams_a_text_turn() {
    let model = ScriptedModel::start(json!([{"text": "Hello there"}]))
        .await
        .unwrap();
    assert_eq!(
        model.base_url(),
        format!("http://127.0.0.1:{}/v1", model.port())
    );
    let body = chat_request(json!([user("hi")]));
    let response = exchange(model.port(), &post_bytes("/v1/chat/completions", &body, "")).await;

    assert_eq!(response.status_line, "HTTP/1.1 200 OK");
    assert_eq!(
        response.headers,
        vec![
            ("content-type".to_owned(), "text/event-stream".to_owned()),
            ("cache-control".to_owned(), "no-cache".to_owned()),
            ("connection".to_owned(), "close".to_owned()),
        ]
    );
    let base = json!({"id": "c0", "object": "chat.completion.chunk", "model": "scripted"});
    let with = |extra: Value| {
        let mut v = base.clone();
        v.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        v
    };
    assert_eq!(
        response.sse_data(),
        vec![
            with(
                json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": "Hello there"}, "finish_reason": null}]})
            ),
            with(json!({
                "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            })),
            json!("[DONE]"),
        ]
    );
    assert_eq!(
        model.requests(),
        vec![json!({
            "method": "POST",
            "path": "/v1/chat/completions",
            "turn": 0,
            "attempt": 1,
            "headers": {
                "host": "127.0.0.1",
                "content-type": "application/json",
                "content-length": body.to_string().len().to_string(),
            },
            "auth_present": true,
            "body": body,
        })]
    );
    stop(model).await;
}

#[tokio::test]
async fn scripted_model_streams_tool_calls_and_counts_assistant_messages() {
    let model = ScriptedModel::start(json!([
        {"text": "first"},
        {"text": "Creating.", "tool": [
            {"name": "Create", "args": {"file_path": "/r/a.txt", "content": "x\n"}},
            {"name": "Read", "args": {"file_path": "/r/a.txt"}},
        ]},
        {"text": "last two", "split_text": true},
    ]))
    .await
    .unwrap();
    let port = model.port();

    // Turn 1: one assistant message in the request.
    let body = chat_request(json!([user("go"), assistant("first"), user("more")]));
    let response = exchange(port, &post_bytes("/v1/chat/completions", &body, "")).await;
    let calls = json!([
        {"index": 0, "id": "call_1_0", "type": "function",
         "function": {"name": "Create", "arguments": "{\"file_path\":\"/r/a.txt\",\"content\":\"x\\n\"}"}},
        {"index": 1, "id": "call_1_1", "type": "function",
         "function": {"name": "Read", "arguments": "{\"file_path\":\"/r/a.txt\"}"}},
    ]);
    assert_eq!(
        response.sse_data(),
        vec![
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "scripted",
                   "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Creating.", "tool_calls": calls}, "finish_reason": null}]}),
            json!({"id": "c1", "object": "chat.completion.chunk", "model": "scripted",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}],
                   "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
            json!("[DONE]"),
        ]
    );

    // Five assistant messages: past the end, so the last turn (split one word per chunk).
    let many: Vec<Value> = (0..5).map(|_| assistant("a")).collect();
    let response = exchange(
        port,
        &post_bytes("/v1/chat/completions", &chat_request(json!(many)), ""),
    )
    .await;
    let contents: Vec<Value> = response
        .sse_data()
        .iter()
        .map(|d| {
            d.pointer("/choices/0/delta/content")
                .cloned()
                .unwrap_or(Value::Null)
        })
        .collect();
    assert_eq!(
        contents,
        vec![json!("last "), json!("two"), Value::Null, Value::Null]
    );
    let response = exchange(
        port,
        &post_bytes(
            "/v1/chat/completions",
            &chat_request(json!([assistant("x"), assistant("y")])),
            "",
        ),
    )
    .await;
    let ids: Vec<Value> = response
        .sse_data()
        .iter()
        .map(|d| d["id"].clone())
        .collect();
    assert_eq!(
        ids,
        vec![json!("c2"), json!("c2"), json!("c2"), Value::Null]
    );

    let turns: Vec<(Value, Value)> = model
        .requests()
        .iter()
        .map(|r| (r["turn"].clone(), r["attempt"].clone()))
        .collect();
    assert_eq!(
        turns,
        vec![
            (json!(1), json!(1)),
            (json!(5), json!(1)),
            (json!(2), json!(1))
        ]
    );
    stop(model).await;
}

#[tokio::test]
async fn scripted_model_fails_with_a_status_then_recovers_on_the_same_connection() {
    let model = ScriptedModel::start(json!([
        {"text": "ok now", "status": 500, "fail_times": 1, "headers": {"retry-after": 2}},
    ]))
    .await
    .unwrap();
    let body = chat_request(json!([user("hi")]));
    let request = post_bytes("/v1/chat/completions", &body, "");
    let (first, second) = tokio::time::timeout(WAIT, async {
        let mut stream = TcpStream::connect(("127.0.0.1", model.port()))
            .await
            .unwrap();
        stream.write_all(&request).await.unwrap();
        let first = read_response(&mut stream).await;
        // The error answer keeps the connection open, as Python's http.server does.
        stream.write_all(&request).await.unwrap();
        let second = read_response(&mut stream).await;
        (first, second)
    })
    .await
    .unwrap();

    assert_eq!(first.status_line, "HTTP/1.1 500 Internal Server Error");
    assert_eq!(first.header("retry-after"), Some("2"));
    assert_eq!(first.header("content-type"), Some("application/json"));
    assert_eq!(
        serde_json::from_str::<Value>(&first.body).unwrap(),
        json!({"error": {"message": "mock error 500", "type": "mock_error", "code": 500}})
    );
    assert_eq!(second.status_line, "HTTP/1.1 200 OK");
    assert_eq!(
        second.sse_data()[0]["choices"][0]["delta"]["content"],
        json!("ok now")
    );
    let attempts: Vec<Value> = model
        .requests()
        .iter()
        .map(|r| r["attempt"].clone())
        .collect();
    assert_eq!(attempts, vec![json!(1), json!(2)]);

    // A new script resets the attempt counts: the first attempt fails again.
    model.set_script(json!([{"status": 429, "error_message": "Rate limit exceeded"}]));
    let third = exchange(model.port(), &request).await;
    assert_eq!(third.status_line, "HTTP/1.1 429 Too Many Requests");
    assert_eq!(
        serde_json::from_str::<Value>(&third.body).unwrap(),
        json!({"error": {"message": "Rate limit exceeded", "type": "mock_error", "code": 429}})
    );
    assert_eq!(model.requests()[2]["attempt"], json!(1));
    stop(model).await;
}

#[tokio::test]
async fn scripted_model_models_list_malformed_and_close_mid() {
    let model = ScriptedModel::start(json!([{"malformed": true}, {"close_mid": true}]))
        .await
        .unwrap();
    let port = model.port();
    let models = exchange(
        port,
        b"GET /v1/models HTTP/1.1\r\nhost: x\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(models.status_line, "HTTP/1.1 200 OK");
    assert_eq!(
        serde_json::from_str::<Value>(&models.body).unwrap(),
        json!({"object": "list", "data": [{"id": "scripted", "object": "model"}]})
    );

    let malformed = exchange(
        port,
        &post_bytes(
            "/v1/chat/completions",
            &chat_request(json!([user("a")])),
            "",
        ),
    )
    .await;
    assert_eq!(
        malformed.body,
        "data: {this is not json\n\ngarbage line without prefix\n\ndata: [DONE]\n\n"
    );

    let cut = exchange(
        port,
        &post_bytes(
            "/v1/chat/completions",
            &chat_request(json!([user("a"), assistant("b")])),
            "",
        ),
    )
    .await;
    let data = cut.sse_data();
    assert_eq!(data.len(), 1, "{data:?}");
    assert_eq!(
        data[0]["choices"],
        json!([{"index": 0, "delta": {"role": "assistant", "content": "partial answer "}, "finish_reason": null}])
    );
    assert_eq!(
        model.requests()[0],
        json!({"method": "GET", "path": "/v1/models"})
    );
    stop(model).await;
}

#[tokio::test]
async fn scripted_model_hang_blocks_neither_other_connections_nor_shutdown() {
    let model = ScriptedModel::start(json!([{"hang": true}])).await.unwrap();
    let port = model.port();
    let mut hanging = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    hanging
        .write_all(&post_bytes(
            "/v1/chat/completions",
            &chat_request(json!([user("a")])),
            "",
        ))
        .await
        .unwrap();
    assert!(model.wait_for_requests(1, WAIT).await);
    let mut hanging_after_headers = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    model.set_script(json!([{"hang_after_headers": true}]));
    hanging_after_headers
        .write_all(&post_bytes(
            "/v1/chat/completions",
            &chat_request(json!([user("a")])),
            "",
        ))
        .await
        .unwrap();
    assert!(model.wait_for_requests(2, WAIT).await);

    let other = exchange(
        port,
        b"GET /v1/models HTTP/1.1\r\nconnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(other.status_line, "HTTP/1.1 200 OK");

    stop(model).await;
    // Both hanging connections are closed by the shutdown; nothing more was sent on the first.
    let mut rest = Vec::new();
    tokio::time::timeout(WAIT, hanging.read_to_end(&mut rest))
        .await
        .expect("a hanging connection outlived the server")
        .unwrap();
    assert_eq!(rest, b"");
    let after_headers = tokio::time::timeout(WAIT, read_response(&mut hanging_after_headers))
        .await
        .expect("a hanging connection outlived the server");
    assert_eq!(after_headers.status_line, "HTTP/1.1 200 OK");
    assert_eq!(after_headers.body, "");
    // And the port no longer accepts.
    assert!(TcpStream::connect(("127.0.0.1", port)).await.is_err());
}

#[tokio::test]
async fn scripted_model_rereads_its_script_file_and_logs() {
    let dir = TempDir::new("scripted-model-selftest").unwrap();
    let script_file = dir.path().join("script.json");
    let log_file = dir.path().join("log.jsonl");
    std::fs::write(&script_file, r#"[{"text": "one"}]"#).unwrap();
    let model = ScriptedModel::start_with(
        json!([{"text": "ignored"}]),
        Options {
            port: 0,
            script_file: Some(script_file.clone()),
            log_file: Some(log_file.clone()),
        },
    )
    .await
    .unwrap();
    let request = post_bytes(
        "/v1/chat/completions",
        &chat_request(json!([user("a")])),
        "",
    );
    // The file's modification time at start counts as seen: the given script is served until
    // the file changes.
    let first = exchange(model.port(), &request).await;
    assert_eq!(
        first.sse_data()[0]["choices"][0]["delta"]["content"],
        json!("ignored")
    );
    // Make sure the modification time moves even on coarse-grained file systems.
    let later = std::time::SystemTime::now() + Duration::from_secs(5);
    std::fs::write(&script_file, r#"[{"text": "two"}]"#).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&script_file)
        .unwrap()
        .set_modified(later)
        .unwrap();
    let second = exchange(model.port(), &request).await;
    assert_eq!(
        second.sse_data()[0]["choices"][0]["delta"]["content"],
        json!("two")
    );
    stop(model).await;

    let lines: Vec<Value> = std::fs::read_to_string(&log_file)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 2);
    assert!(
        lines
            .iter()
            .all(|l| l["t"].is_f64() && l["turn"] == json!(0))
    );
}

// ---------------------------------------------------------------------------------------------
// fake-droid

/// Runs fake-droid `exec` with a scenario; returns (status, stdout, stderr, record).
#[allow(clippy::disallowed_methods)]
async fn run_fake(
    dir: &Path,
    steps: Value,
    extra_args: &[&str],
) -> (ExitStatus, String, String, Value) {
    let scenario = dir.join("scenario.json");
    let record_path = dir.join("record.json");
    let prompt = dir.join("prompt.md");
    std::fs::write(&scenario, json!({ "steps": steps }).to_string()).unwrap();
    std::fs::write(&prompt, "do the thing\n").unwrap();
    let mut args = vec![
        "exec".to_owned(),
        "--output-format".to_owned(),
        "stream-json".to_owned(),
        "--cwd".to_owned(),
        dir.display().to_string(),
    ];
    args.extend(extra_args.iter().map(|a| (*a).to_owned()));
    args.extend(["-f".to_owned(), prompt.display().to_string()]);
    let output = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(tests::fake_droid_bin!())
            .args(&args)
            .env_clear()
            .env("FAKE_DROID_SCENARIO", &scenario)
            .env("FAKE_DROID_RECORD", &record_path)
            .current_dir(dir)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("fake-droid did not finish")
    .unwrap();
    let record: Value = serde_json::from_slice(&std::fs::read(&record_path).unwrap()).unwrap();
    let expected_record = json!({
        "argv": args,
        "prompt": "do the thing\n",
        "cwd": dir.display().to_string(),
        "env": {
            "FAKE_DROID_SCENARIO": scenario.display().to_string(),
            "FAKE_DROID_RECORD": record_path.display().to_string(),
        },
    });
    assert_eq!(record, expected_record);
    (
        output.status,
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
        record,
    )
}

#[tokio::test]
async fn fake_droid_replays_output_exit_code_and_records_its_invocation() {
    use std::os::unix::process::ExitStatusExt as _;
    let dir = TempDir::new("fake-droid-selftest").unwrap();
    let init = json!({"type": "system", "subtype": "init", "cwd": "/r", "session_id": "s"});
    let (status, stdout, stderr, record) = run_fake(
        dir.path(),
        json!([
            {"emit": init},
            {"raw": "not json"},
            {"partial": "half a li"},
            {"stderr": "something went wrong"},
            {"write_file": {"path": "sub/out.txt", "content": "hi\n"}},
            {"exit": 3},
            {"emit": {"never": true}},
        ]),
        &["--auto", "low", "-m", "custom:Mock-0"],
    )
    .await;
    assert_eq!(status.code(), Some(3));
    assert_eq!(stdout, format!("{init}\nnot json\nhalf a li"));
    assert_eq!(stderr, "something went wrong\n");
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sub/out.txt")).unwrap(),
        "hi\n"
    );
    assert_eq!(record["argv"][5], json!("--auto"));

    let (status, stdout, _, _) = run_fake(
        dir.path(),
        json!([{"completion": "done"}, {"flood_bytes": 2500}, {"long_line": 10}]),
        &[],
    )
    .await;
    assert!(status.success());
    let mut lines = stdout.split_inclusive('\n');
    let mut completion: Value = serde_json::from_str(lines.next().unwrap()).unwrap();
    assert!(completion["timestamp"].as_u64().unwrap() > 1_700_000_000_000);
    completion["timestamp"] = json!(0);
    assert_eq!(completion, tests::fake_droid::completion_event("done", 0));
    let rest: Vec<usize> = lines.map(str::len).collect();
    assert_eq!(rest, vec![1024, 1024, 452, 11]);

    let (status, _, _, _) = run_fake(dir.path(), json!([{"crash": true}]), &[]).await;
    assert_eq!(status.signal(), Some(Signal::SIGABRT as i32));
    let (status, _, _, _) = run_fake(dir.path(), json!([{"kill_self": "SIGKILL"}]), &[]).await;
    assert_eq!(status.signal(), Some(Signal::SIGKILL as i32));
}

#[tokio::test]
#[allow(clippy::disallowed_methods)]
async fn fake_droid_version_and_unknown_option() {
    let version = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(tests::fake_droid_bin!())
            .arg("--version")
            .env_clear()
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(version.status.success());
    assert_eq!(String::from_utf8(version.stdout).unwrap(), "0.225.2\n");

    let unknown = tokio::time::timeout(
        WAIT,
        tokio::process::Command::new(tests::fake_droid_bin!())
            .args(["exec", "--frobnicate", "hi"])
            .env_clear()
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(unknown.status.code(), Some(1));
    assert_eq!(
        String::from_utf8(unknown.stderr).unwrap(),
        "error: unknown option '--frobnicate'\n"
    );
}

#[tokio::test]
#[allow(clippy::disallowed_methods)]
async fn fake_droid_ignores_sigterm_and_leaks_a_marked_grandchild() {
    let dir = TempDir::new("fake-droid-grandchild").unwrap();
    let marker = format!("selftest-{}", std::process::id());
    let pid_file = dir.path().join("grandchild.pid");
    let scenario = dir.path().join("scenario.json");
    let prompt = dir.path().join("prompt.md");
    std::fs::write(&prompt, "x").unwrap();
    std::fs::write(
        &scenario,
        json!({"steps": [
            {"ignore_sigterm": true},
            {"spawn_grandchild": {"command": "sleep 600", "pid_file": pid_file}},
            {"raw": "ready"},
            {"hang": true},
        ]})
        .to_string(),
    )
    .unwrap();
    let mut child = tokio::process::Command::new(tests::fake_droid_bin!())
        .args(["exec", "--output-format", "stream-json", "--cwd"])
        .arg(dir.path())
        .arg("-f")
        .arg(&prompt)
        .env_clear()
        .env("FAKE_DROID_SCENARIO", &scenario)
        .env("DROID_EXECUTOR_RUN_ID", &marker)
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut ready = [0u8; 6];
    tokio::time::timeout(WAIT, stdout.read_exact(&mut ready))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&ready, b"ready\n");
    let grandchild: i32 = std::fs::read_to_string(&pid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();

    let _cleanup = KillGroupOnDrop(grandchild);
    assert!(procs::is_alive(pid));
    assert!(procs::is_alive(grandchild));
    // `sh` may still be in the middle of its exec (setsid, then sh), and a process in the middle
    // of an exec shows an empty /proc/<pid>/environ: poll until both carry the marker.
    let until = tokio::time::Instant::now() + WAIT;
    loop {
        let marked = procs::pids_with_env("DROID_EXECUTOR_RUN_ID", &marker);
        if marked.contains(&pid) && marked.contains(&grandchild) {
            break;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{marked:?} should hold {pid} and {grandchild}"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }

    kill(Pid::from_raw(pid), Signal::SIGTERM).unwrap();
    assert!(
        !procs::wait_gone(pid, Duration::from_millis(300)).await,
        "SIGTERM was not ignored"
    );

    kill(Pid::from_raw(pid), Signal::SIGKILL).unwrap();
    tokio::time::timeout(WAIT, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(!procs::is_alive(pid));
    // Its own session: the grandchild survives its parent...
    assert!(procs::is_alive(grandchild));
    // ...until its process group (its own, as session leader) is killed.
    kill(Pid::from_raw(-grandchild), Signal::SIGKILL).unwrap();
    assert!(procs::wait_gone(grandchild, WAIT).await);
    let deadline = tokio::time::Instant::now() + WAIT;
    while !procs::pids_with_env("DROID_EXECUTOR_RUN_ID", &marker).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "marked processes survived"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Kills a process group when dropped, so a failing test leaks no `sleep 600`.
struct KillGroupOnDrop(i32);

impl Drop for KillGroupOnDrop {
    fn drop(&mut self) {
        let _ = kill(Pid::from_raw(-self.0), Signal::SIGKILL);
    }
}

// ---------------------------------------------------------------------------------------------
// procs

#[tokio::test]
#[allow(clippy::disallowed_methods)]
async fn procs_sees_self_alive_and_finished_children_dead() {
    assert!(procs::is_alive(i32::try_from(std::process::id()).unwrap()));

    // Reaped: no /proc entry at all.
    let mut reaped = tokio::process::Command::new("true")
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let reaped_pid = i32::try_from(reaped.id().unwrap()).unwrap();
    tokio::time::timeout(WAIT, reaped.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(!procs::is_alive(reaped_pid));

    // Not reaped: a zombie, which counts as dead.
    let mut zombie = std::process::Command::new("true").spawn().unwrap();
    let zombie_pid = i32::try_from(zombie.id()).unwrap();
    assert!(procs::wait_gone(zombie_pid, WAIT).await);
    assert_eq!(procs::state(zombie_pid), Some('Z'));
    zombie.wait().unwrap();
}

// ---------------------------------------------------------------------------------------------
// The real droid against the scripted model

/// Runs the real droid `exec -o stream-json` in `cwd` with `home`'s environment; returns the
/// parsed stdout events, stderr and the exit status.
#[allow(clippy::disallowed_methods)]
async fn run_real_droid(
    home: &DroidHome,
    cwd: &Path,
    model_id: &str,
    prompt: &str,
    extra_args: &[&str],
) -> (Vec<Value>, String, ExitStatus) {
    let prompt_file = home.path().join("prompt.md");
    std::fs::write(&prompt_file, prompt).unwrap();
    let output = tokio::time::timeout(
        DROID_RUN,
        tokio::process::Command::new(real_droid())
            .args(["exec", "--output-format", "stream-json", "--cwd"])
            .arg(cwd)
            .args(extra_args)
            .args(["-m", model_id, "-f"])
            .arg(&prompt_file)
            .env_clear()
            .envs(home.env())
            .current_dir(cwd)
            .stdin(Stdio::null())
            .kill_on_drop(true)
            .output(),
    )
    .await
    .expect("droid did not finish in time")
    .unwrap();
    let stdout = String::from_utf8(output.stdout).unwrap();
    let events = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    (
        events,
        String::from_utf8_lossy(&output.stderr).into_owned(),
        output.status,
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn real_droid_completes_against_the_scripted_model() {
    let model = ScriptedModel::start(json!([{"text": "Hello there"}]))
        .await
        .unwrap();
    let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
    let work = TempDir::new("droid-smoke").unwrap();
    let (events, stderr, status) =
        run_real_droid(&home, work.path(), &home.model_id("Mock"), "say hi\n", &[]).await;

    let completion = events
        .iter()
        .find(|e| e["type"] == "completion")
        .unwrap_or_else(|| panic!("no completion event; stdout {events:#?}\nstderr {stderr}"));
    assert_eq!(completion["finalText"], json!("Hello there"));
    assert!(status.success(), "{status:?} {stderr}");
    assert_eq!(events[0]["type"], json!("system"));
    assert_eq!(events[0]["model"], json!("custom:Mock-0"));
    assert_eq!(events[0]["cwd"], json!(work.path().display().to_string()));

    let requests = model.requests();
    assert_eq!(requests.len(), 1, "{requests:#?}");
    assert_eq!(requests[0]["path"], json!("/v1/chat/completions"));
    assert_eq!(requests[0]["turn"], json!(0));
    assert_eq!(requests[0]["body"]["stream"], json!(true));
    assert_eq!(requests[0]["body"]["model"], json!("scripted"));
    assert_eq!(
        requests[0]["headers"]["user-agent"],
        json!("factory-cli/0.225.2")
    );
    assert_eq!(requests[0]["auth_present"], json!(true));
    stop(model).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn real_droid_runs_a_tool_turn_and_the_model_sees_the_next_turn() {
    let work = TempDir::new("droid-tool").unwrap();
    let file = work.path().join("note.txt");
    std::fs::write(&file, "the note\n").unwrap();
    let model = ScriptedModel::start(json!([
        {"text": "Let me look.", "tool": [{"name": "Read", "args": {"file_path": file}}]},
        {"text": "It says: the note"},
    ]))
    .await
    .unwrap();
    let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
    let (events, stderr, status) =
        run_real_droid(&home, work.path(), &home.model_id("Mock"), "read it", &[]).await;
    assert!(status.success(), "{status:?} {stderr}");

    let kinds: Vec<&str> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        vec![
            "system",
            "message",
            "message",
            "tool_call",
            "tool_result",
            "message",
            "completion"
        ]
    );
    assert_eq!(events[3]["id"], json!("call_0_0"));
    assert_eq!(events[3]["toolName"], json!("Read"));
    assert_eq!(events[4]["isError"], json!(false));
    assert_eq!(events[4]["value"], json!("the note\n"));
    assert_eq!(events[6]["finalText"], json!("It says: the note"));

    let turns: Vec<Value> = model.requests().iter().map(|r| r["turn"].clone()).collect();
    assert_eq!(turns, vec![json!(0), json!(1)]);
    stop(model).await;
}
