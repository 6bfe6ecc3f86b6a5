//! What every front-end writes for a result: the keys in the order a reader needs them
//! (`status`, `summary`, `issues`, `files_changed` first, `commands_run` and `logs` last) in the
//! CLI's `--json`, the HTTP bridge's answer, MCP's `structuredContent`, the store's
//! `result.json` and the task records of `tasks show --json`; and an MCP result bounded in size
//! (the head whole, the bulk cut with a note), whose whole stays readable from the task store.
//! The tests crate parses with the workspace's serde_json, whose `preserve_order` keeps the keys
//! in the order they were written.

use std::time::Duration;

use bridge_http::client::{Client, Method};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::binary::{CLI_LIMIT, command, finish};
use super::bridge_harness::ServeProc;
use super::fault_matrix::FaultHome;
use super::mcp_stdio::{Server as McpServer, is_task_id};

/// The keys a result starts with, in this order.
const HEAD: [&str; 4] = ["status", "summary", "issues", "files_changed"];
/// The keys a result ends with, in this order.
const TAIL: [&str; 2] = ["commands_run", "logs"];

/// One Execute tool call of droid and its result, `output_bytes` of output.
fn execute(i: usize, output_bytes: usize) -> [Value; 2] {
    let id = format!("call_{i}");
    let output = format!(
        "{}\n[Process exited with code 0]",
        format!("line {i} ").repeat(output_bytes / 7 + 1)
    );
    [
        json!({"emit": {"type": "tool_call", "id": id, "toolId": "Execute", "toolName": "Execute",
                        "parameters": {"command": format!("echo step {i}")}}}),
        json!({"emit": {"type": "tool_result", "id": id, "toolId": "Execute", "isError": false,
                        "value": output}}),
    ]
}

/// A run of `commands` Execute calls with `output_bytes` of output each, a file written, done.
fn run_with(commands: usize, output_bytes: usize) -> Value {
    let mut steps: Vec<Value> = (0..commands)
        .flat_map(|i| execute(i, output_bytes))
        .collect();
    steps.push(json!({"write_file": {"path": "new.txt", "content": "hello\n"}}));
    steps.push(json!({"completion": "Wrote new.txt."}));
    Value::Array(steps)
}

/// The keys of the object `v`, in order.
fn keys(v: &Value) -> Vec<String> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v:#}"))
        .keys()
        .cloned()
        .collect()
}

/// `v` is a result whose keys start with [`HEAD`] and end with [`TAIL`].
fn assert_order(front: &str, v: &Value) {
    let k = keys(v);
    assert!(k.len() > HEAD.len() + TAIL.len(), "{front}: {k:?}");
    assert_eq!(&k[..HEAD.len()], &HEAD[..], "{front}: the head of {k:?}");
    assert_eq!(
        &k[k.len() - TAIL.len()..],
        &TAIL[..],
        "{front}: the tail of {k:?}"
    );
}

/// Parse `text` as one JSON value.
fn parse(front: &str, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{front}: not JSON ({e}):\n{text}"))
}

/// The CLI (`run --json`), the HTTP bridge (`POST /execute`), MCP (`structuredContent` of
/// `execute_droid_task`, of `droid_pend`'s record), the task store's `result.json` and
/// `tasks show --json` all write a result with `status`, `summary`, `issues`, `files_changed`
/// first and `commands_run`, `logs` last.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_front_end_writes_status_summary_issues_and_files_first() {
    let fh = FaultHome::new("result-order", &run_with(3, 100), "");
    let request = fh.request(json!({"suggested_commands": ["true"]}));

    let file = fh.home.file("request.json");
    std::fs::write(&file, request.to_string()).unwrap();
    let out = finish(
        command(
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
        .unwrap(),
    )
    .await;
    let cli = parse("cli", &out.stdout);
    assert_eq!(cli["status"], "success", "{cli:#}\n{}", out.stderr);
    assert_order("cli --json", &cli);

    let serve = ServeProc::start(&[], &fh.env(), fh.home.path()).await;
    let client = Client::new(serve.addr, None);
    let (code, body) = client
        .send(Method::POST, "/execute", Some(&request), CLI_LIMIT)
        .await
        .unwrap();
    let http = parse("bridge", &String::from_utf8_lossy(&body));
    assert_eq!(code, 200, "{http:#}");
    assert_order("bridge POST /execute", &http);
    let _ = serve.stop().await;

    let mut mcp = McpServer::start(&fh.env(), fh.home.path());
    mcp.initialize().await;
    let sync = mcp
        .call(json!(1), "execute_droid_task", request.clone())
        .await;
    assert_order("mcp execute_droid_task", &sync["structuredContent"]);
    let submitted = mcp.call(json!(2), "droid_submit", request.clone()).await;
    let id = submitted["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{submitted:#}"))
        .to_owned();
    assert!(is_task_id(&id), "{id}");
    let pend = mcp
        .call(
            json!(3),
            "droid_pend",
            json!({"task_id": id, "wait_seconds": 60}),
        )
        .await;
    let record = &pend["structuredContent"];
    assert_eq!(
        keys(record),
        ["task_id", "state", "created_at", "updated_at", "result"],
        "{pend:#}"
    );
    assert_order("mcp droid_pend", &record["result"]);
    mcp.close_stdin();
    let _ = mcp.exit_within(Duration::from_secs(10)).await;

    let stored = std::fs::read_to_string(
        fh.home
            .file(".local/state/droid-executor/tasks")
            .join(&id)
            .join("result.json"),
    );
    let stored = match stored {
        Ok(text) => text,
        Err(e) => panic!("no result.json for {id}: {e}"),
    };
    assert_order("store result.json", &parse("store", &stored));

    let out = finish(
        command(
            &["tasks", "show", id.as_str(), "--json"],
            &fh.env(),
            fh.home.path(),
        )
        .spawn()
        .unwrap(),
    )
    .await;
    let shown = parse("tasks show", &out.stdout);
    assert_order("tasks show --json", &shown["result"]);
}

/// A run of 100 commands with 4 KiB of output each gives an MCP result of at most 24 KiB (the
/// structured content) whose status, summary, issues and files are whole, whose newest commands
/// are kept (their excerpts cut to their tails) and whose last log line says how many were left
/// out and which stored task holds the whole result; `tasks show --json` of that task has all
/// 100 commands with their whole excerpts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_big_mcp_result_is_cut_and_the_whole_stays_in_the_store() {
    const COMMANDS: usize = 100;
    let fh = FaultHome::new("result-cut", &run_with(COMMANDS, 4096), "");
    let request = fh.request(json!({}));
    let mut mcp = McpServer::start(&fh.env(), fh.home.path());
    mcp.initialize().await;
    let answer = mcp.call(json!(1), "execute_droid_task", request).await;
    let sc = &answer["structuredContent"];
    let size = sc.to_string().len();
    assert!(size <= 24 * 1024, "structuredContent is {size} bytes");
    assert_order("mcp cut", sc);
    assert_eq!(sc["status"], "success", "{answer:#}");
    assert_eq!(sc["summary"], "Wrote new.txt.", "{answer:#}");
    assert_eq!(sc["files_changed"][0]["path"], "new.txt", "{answer:#}");
    let commands = sc["commands_run"].as_array().unwrap();
    assert!(
        !commands.is_empty() && commands.len() < COMMANDS,
        "{} kept",
        commands.len()
    );
    assert_eq!(
        commands.last().map(|c| c["command"].clone()),
        Some(json!(format!("echo step {}", COMMANDS - 1)))
    );
    let note = sc["logs"]
        .as_array()
        .and_then(|l| l.last())
        .and_then(Value::as_str)
        .unwrap_or_else(|| panic!("no note: {answer:#}"))
        .to_owned();
    assert!(
        commands.iter().all(|c| c["truncated"] == true
            && c["stdout_excerpt"].as_str().is_some_and(|s| s.len() <= 512)),
        "the kept excerpts are cut to their tails: {answer:#}"
    );
    let left = COMMANDS - commands.len();
    assert!(
        note.contains(&format!("{left} of {COMMANDS} commands_run")),
        "{note}"
    );
    let text = answer["content"][0]["text"].as_str().unwrap();
    assert!(
        text.contains(&note),
        "the text carries the note too: {text}"
    );
    let id = note
        .split_whitespace()
        .find(|w| is_task_id(w))
        .unwrap_or_else(|| panic!("no task id in {note}"))
        .to_owned();
    mcp.close_stdin();
    let _ = mcp.exit_within(Duration::from_secs(10)).await;

    let out = finish(
        command(
            &["tasks", "show", id.as_str(), "--json"],
            &fh.env(),
            fh.home.path(),
        )
        .spawn()
        .unwrap(),
    )
    .await;
    let shown = parse("tasks show", &out.stdout);
    assert_eq!(shown["state"], "success", "{shown:#}");
    let all = shown["result"]["commands_run"].as_array().unwrap();
    assert_eq!(all.len(), COMMANDS, "the stored result has every command");
    assert!(
        all.iter()
            .all(|c| c["stdout_excerpt"].as_str().is_some_and(|s| s.len() > 2048)),
        "the stored excerpts are whole"
    );
}
