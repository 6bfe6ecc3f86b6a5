//! `droid-executor mcp` over its pipes, for what came after the base protocol: the 2026-07-28
//! era (`server/discover`, per-request `_meta`, `-32022`, `resultType`, caching hints) beside an
//! unchanged legacy era; 2025-11-25 Tasks on the engine's task store (create, poll, block on the
//! result, list, cancel a running droid, survive a server restart); and `notifications/message`
//! filtered by `logging/setLevel` (or a modern request's own `logLevel`). The client side and the
//! helpers are `mcp_stdio`'s.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::mcp_stdio::{
    Home, REPLY_LIMIT, Server, TOOLS, VERSIONS, assert_all_gone, assert_error, assistant,
    error_code, hanging_run, initialize_params, is_task_id, leak_then_hang, pong, record_of,
    short_run, tool_result,
};

/// The revision served per request.
const MODERN: &str = "2026-07-28";
/// Every revision, newest first: what `server/discover` and `-32022` list.
const ALL_VERSIONS: [&str; 5] = [
    "2026-07-28",
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];
const VERSION_KEY: &str = "io.modelcontextprotocol/protocolVersion";
const CAPABILITIES_KEY: &str = "io.modelcontextprotocol/clientCapabilities";
const LOG_LEVEL_KEY: &str = "io.modelcontextprotocol/logLevel";
const SERVER_INFO_KEY: &str = "io.modelcontextprotocol/serverInfo";
const RELATED_TASK_KEY: &str = "io.modelcontextprotocol/related-task";
/// The store's default retention (24 h), which every task reports as its `ttl`.
const TASK_TTL_MS: u64 = 24 * 3600 * 1000;
/// The Task object's fields.
const TASK_KEYS: [&str; 7] = [
    "createdAt",
    "lastUpdatedAt",
    "pollInterval",
    "status",
    "statusMessage",
    "taskId",
    "ttl",
];

/// The `_meta` of a modern request, as the Python 2.3.0 and TS v2 clients send it.
fn modern_meta() -> Value {
    json!({
        VERSION_KEY: MODERN,
        CAPABILITIES_KEY: {},
        "io.modelcontextprotocol/clientInfo": {"name": "mcp-wire-modern", "version": "0.0.0"},
    })
}

/// `params` with `extra` merged into its `_meta` (a modern `_meta` first).
fn modern(params: Value, extra: Value) -> Value {
    let mut params = if params.is_null() { json!({}) } else { params };
    let mut meta = modern_meta();
    for (k, v) in extra.as_object().cloned().unwrap_or_default() {
        meta[k] = v;
    }
    params["_meta"] = meta;
    params
}

fn server_info() -> Value {
    json!({"name": "droid-executor", "title": "droid-executor", "version": env!("CARGO_PKG_VERSION")})
}

fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v:#}"))
        .keys()
        .map(String::as_str)
        .collect();
    k.sort_unstable();
    k
}

/// `initialize` at `version`, then `notifications/initialized`; the result.
async fn initialize_at(s: &mut Server, version: &str) -> Value {
    let result = tool_result(
        s.request(json!("init"), "initialize", initialize_params(version))
            .await,
    );
    assert_eq!(result["protocolVersion"], version, "{result:#}");
    s.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await;
    result
}

/// Unclaimed notifications `method` that arrived before the last response read.
fn before_response(s: &mut Server, method: &str) -> Vec<Value> {
    s.take_notifications(method)
}

/// Waits (up to the reply limit) for a notification `method` whose params satisfy `pred`.
pub(super) async fn wait_for_notification(
    s: &mut Server,
    method: &str,
    pred: impl Fn(&Value) -> bool,
) -> Value {
    let matches = |m: &Value| m.get("id").is_none() && m["method"] == method && pred(&m["params"]);
    if let Some(i) = s.backlog.iter().position(&matches) {
        return s.backlog.remove(i).unwrap();
    }
    let until = Instant::now() + REPLY_LIMIT;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        let Some(m) = s.read_within(left).await else {
            panic!(
                "no {method} notification as expected; unclaimed: {:#?}\nstderr:\n{}",
                s.backlog,
                s.stderr()
            );
        };
        if matches(&m) {
            return m;
        }
        s.backlog.push_back(m);
    }
}

/// `(level, data.event)` of `notifications/message`s, after checking the logger.
fn levels_and_events(messages: &[Value]) -> Vec<(String, String)> {
    messages
        .iter()
        .map(|m| {
            let p = &m["params"];
            assert_eq!(p["logger"], "droid-executor", "{m:#}");
            assert!(
                p["data"]["message"].as_str().is_some_and(|t| !t.is_empty()),
                "{m:#}"
            );
            (
                p["level"].as_str().unwrap_or_default().to_owned(),
                p["data"]["event"].as_str().unwrap_or_default().to_owned(),
            )
        })
        .collect()
}

/// `execute_droid_task` as request `id`: the `(level, event)` of the log messages before its
/// response.
async fn logged_run(s: &mut Server, home: &Home, id: i64) -> Vec<(String, String)> {
    let result = s
        .call(json!(id), "execute_droid_task", home.task("Look around"))
        .await;
    assert!(
        result["structuredContent"]["status"].is_string(),
        "{result:#}"
    );
    let messages = before_response(s, "notifications/message");
    levels_and_events(&messages)
}

/// A droid `error` event (the engine turns it into a warning).
fn droid_error(message: &str) -> Value {
    json!({"type": "error", "source": "agent_loop", "message": message,
           "timestamp": 1_795_320_771_553_u64, "session_id": "fake-session"})
}

/// A task-augmented `execute_droid_task` call (`_meta.progressToken` = `token` unless null):
/// the Task of its `CreateTaskResult`, after checking its shape.
async fn create_task(s: &mut Server, home: &Home, id: Value, token: Value) -> Value {
    let mut params = json!({
        "name": "execute_droid_task",
        "arguments": home.task("Run as a task"),
        "task": {"ttl": 60000},
    });
    if !token.is_null() {
        params["_meta"] = json!({"progressToken": token});
    }
    let result = tool_result(s.request(id, "tools/call", params).await);
    assert_eq!(keys(&result), vec!["_meta", "task"], "{result:#}");
    let task = result["task"].clone();
    assert_eq!(keys(&task), TASK_KEYS.to_vec(), "{result:#}");
    let task_id = task["taskId"].as_str().unwrap_or_default();
    assert!(is_task_id(task_id), "{result:#}");
    assert_eq!(task["status"], "working", "{result:#}");
    assert_eq!(
        task["ttl"], TASK_TTL_MS,
        "a requested ttl is overridden: {result:#}"
    );
    assert_eq!(task["pollInterval"], 1000, "{result:#}");
    for at in ["createdAt", "lastUpdatedAt"] {
        assert!(
            task[at].as_str().is_some_and(|t| t.ends_with('Z')),
            "{result:#}"
        );
    }
    assert!(
        result["_meta"]["io.modelcontextprotocol/model-immediate-response"]
            .as_str()
            .is_some_and(|t| t.contains(task_id)),
        "{result:#}"
    );
    task
}

/// `tasks/get` (request id `get-<n>`), checking the Task's shape.
async fn get_task(s: &mut Server, n: &mut u32, task_id: &str) -> Value {
    *n += 1;
    let task = tool_result(
        s.request(
            json!(format!("get-{n}")),
            "tasks/get",
            json!({"taskId": task_id}),
        )
        .await,
    );
    assert_eq!(keys(&task), TASK_KEYS.to_vec(), "{task:#}");
    assert_eq!(task["taskId"], task_id, "{task:#}");
    assert_eq!(task["ttl"], TASK_TTL_MS, "{task:#}");
    task
}

/// Polls `tasks/get` until the task leaves `working`; the statuses seen, in order, deduplicated.
async fn poll_until_done(s: &mut Server, task_id: &str) -> Vec<String> {
    let mut n = 0;
    let mut seen: Vec<String> = Vec::new();
    let until = Instant::now() + REPLY_LIMIT;
    loop {
        let task = get_task(s, &mut n, task_id).await;
        let status = task["status"].as_str().unwrap_or_default().to_owned();
        if seen.last() != Some(&status) {
            seen.push(status.clone());
        }
        if status != "working" {
            return seen;
        }
        assert!(
            Instant::now() < until,
            "task {task_id} still working: {task:#}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// Checks a `tasks/result` answer: the CallToolResult of `execute_droid_task` with the related
/// task in `_meta`; its ExecutionResult status.
fn task_result(resp: Value, task_id: &str) -> (bool, String) {
    let result = tool_result(resp);
    assert_eq!(
        result["_meta"],
        json!({RELATED_TASK_KEY: {"taskId": task_id}}),
        "{result:#}"
    );
    assert_eq!(result["content"][0]["type"], "text", "{result:#}");
    let status = result["structuredContent"]["status"]
        .as_str()
        .unwrap_or_else(|| panic!("no structured result: {result:#}"))
        .to_owned();
    (result["isError"] == true, status)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_discover_describes_the_server_and_bad_versions_get_32022() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    // the probe Python 2.3.0 and TS v2 send first, before anything else
    let result = tool_result(
        s.request(
            json!("server-discover-probe-1"),
            "server/discover",
            json!({"_meta": modern_meta()}),
        )
        .await,
    );
    let instructions = result["instructions"]
        .as_str()
        .filter(|t| !t.is_empty())
        .unwrap_or_else(|| panic!("no instructions: {result:#}"));
    assert_eq!(
        result,
        json!({
            "resultType": "complete",
            "supportedVersions": ALL_VERSIONS,
            "capabilities": {"tools": {}, "logging": {}},
            "instructions": instructions,
            "ttlMs": 3_600_000,
            "cacheScope": "public",
            "_meta": {SERVER_INFO_KEY: server_info()},
        })
    );

    // an unknown version, and a legacy one asked per request: -32022 with what to use instead
    for (n, requested) in ["1900-01-01", "2025-11-25"].into_iter().enumerate() {
        let id = json!(10 + n);
        let resp = s
            .request(
                id.clone(),
                "server/discover",
                json!({"_meta": {VERSION_KEY: requested, CAPABILITIES_KEY: {}}}),
            )
            .await;
        assert_error(&resp, &id, -32022);
        assert_eq!(
            resp["error"]["data"],
            json!({"supported": ALL_VERSIONS, "requested": requested}),
            "{resp:#}"
        );
    }
    // the same on any modern request
    let resp = s
        .request(
            json!(12),
            "tools/list",
            json!({"_meta": {VERSION_KEY: "2099-01-01", CAPABILITIES_KEY: {}}}),
        )
        .await;
    assert_error(&resp, &json!(12), -32022);
    assert_eq!(resp["error"]["data"]["requested"], "2099-01-01", "{resp:#}");

    // a missing or malformed required field is -32602
    let malformed = [
        Value::Null,
        json!({}),
        json!({"_meta": {CAPABILITIES_KEY: {}}}),
        json!({"_meta": {VERSION_KEY: MODERN}}),
        json!({"_meta": {VERSION_KEY: MODERN, CAPABILITIES_KEY: []}}),
        json!({"_meta": {VERSION_KEY: 20_260_728, CAPABILITIES_KEY: {}}}),
        json!({"_meta": {VERSION_KEY: MODERN, CAPABILITIES_KEY: {}, LOG_LEVEL_KEY: "loud"}}),
    ];
    for (n, params) in malformed.into_iter().enumerate() {
        let id = json!(20 + n);
        let resp = s.request(id.clone(), "server/discover", params).await;
        assert_error(&resp, &id, -32602);
    }
    // nothing of this touched the legacy lifecycle
    assert_eq!(
        s.request(json!(30), "ping", Value::Null).await,
        pong(json!(30))
    );
    initialize_at(&mut s, "2025-06-18").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn modern_requests_are_served_statelessly_with_result_type_and_caching_hints() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    // no initialize: every request carries its own _meta
    let list = tool_result(
        s.request(json!(1), "tools/list", modern(Value::Null, json!({})))
            .await,
    );
    assert_eq!(
        keys(&list),
        vec!["_meta", "cacheScope", "resultType", "tools", "ttlMs"],
        "{list:#}"
    );
    assert_eq!(
        (
            &list["resultType"],
            &list["ttlMs"],
            &list["cacheScope"],
            &list["_meta"]
        ),
        (
            &json!("complete"),
            &json!(3_600_000),
            &json!("public"),
            &json!({SERVER_INFO_KEY: server_info()})
        ),
        "{list:#}"
    );
    let tools = list["tools"].as_array().unwrap();
    let names: Vec<&str> = tools.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, TOOLS.to_vec());
    for tool in tools {
        assert_eq!(tool.get("execution"), None, "no 2025-11-25 field: {tool:#}");
        assert_eq!(tool["inputSchema"]["type"], "object", "{tool:#}");
    }
    // deterministic: the same list again
    let again = tool_result(
        s.request(json!(2), "tools/list", modern(json!({}), json!({})))
            .await,
    );
    assert_eq!(again, list);
    let resp = s
        .request(
            json!(3),
            "tools/list",
            modern(json!({"cursor": "next"}), json!({})),
        )
        .await;
    assert_error(&resp, &json!(3), -32602);

    let ping = tool_result(
        s.request(
            json!(4),
            "tools/call",
            modern(json!({"name": "droid_ping", "arguments": {}}), json!({})),
        )
        .await,
    );
    assert_eq!(ping["resultType"], "complete", "{ping:#}");
    assert_eq!(
        ping["_meta"],
        json!({SERVER_INFO_KEY: server_info()}),
        "{ping:#}"
    );
    assert_eq!(ping["isError"], false, "{ping:#}");
    assert_eq!(ping["structuredContent"]["droid_found"], true, "{ping:#}");

    // a run with progress: the token sits beside the protocol keys in _meta
    let run = tool_result(
        s.request(
            json!(5),
            "tools/call",
            modern(
                json!({"name": "execute_droid_task", "arguments": home.task("Look around")}),
                json!({"progressToken": "m-1"}),
            ),
        )
        .await,
    );
    assert_eq!(run["resultType"], "complete", "{run:#}");
    assert_eq!(run["structuredContent"]["status"], "success", "{run:#}");
    let progress = before_response(&mut s, "notifications/progress");
    assert!(!progress.is_empty(), "no progress before the response");
    assert!(
        progress
            .iter()
            .all(|p| p["params"]["progressToken"] == "m-1"),
        "{progress:#?}"
    );
    // no logLevel in _meta: no log messages
    assert_eq!(
        before_response(&mut s, "notifications/message"),
        Vec::<Value>::new()
    );

    // not part of 2026-07-28: ping, logging/setLevel and the core tasks methods
    for (n, method) in ["ping", "logging/setLevel", "tasks/list", "tasks/get"]
        .into_iter()
        .enumerate()
    {
        let id = json!(10 + n);
        let resp = s
            .request(
                id.clone(),
                method,
                modern(json!({"level": "info"}), json!({})),
            )
            .await;
        assert_error(&resp, &id, -32601);
    }
    let resp = s
        .request(
            json!(20),
            "tools/call",
            modern(json!({"name": "no_such_tool", "arguments": {}}), json!({})),
        )
        .await;
    assert_error(&resp, &json!(20), -32602);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_sessions_see_no_modern_fields_and_only_2025_11_25_has_tasks() {
    let home = Home::new(&short_run());
    for version in VERSIONS {
        let mut s = home.server();
        let init = initialize_at(&mut s, version).await;
        let tasks = version == "2025-11-25";
        let mut capabilities = json!({"tools": {"listChanged": false}, "logging": {}});
        if tasks {
            capabilities["tasks"] =
                json!({"list": {}, "cancel": {}, "requests": {"tools": {"call": {}}}});
        }
        assert_eq!(init["capabilities"], capabilities, "{version}: {init:#}");
        assert_eq!(
            keys(&init),
            vec![
                "capabilities",
                "instructions",
                "protocolVersion",
                "serverInfo"
            ]
        );
        let list = tool_result(s.request(json!(1), "tools/list", Value::Null).await);
        assert_eq!(keys(&list), vec!["tools"], "{version}: {list:#}");
        for tool in list["tools"].as_array().unwrap() {
            let expected = match (tasks, &tool["name"]) {
                (false, _) => None,
                (true, name) if name == "execute_droid_task" => {
                    Some(json!({"taskSupport": "optional"}))
                }
                (true, _) => Some(json!({"taskSupport": "forbidden"})),
            };
            assert_eq!(
                tool.get("execution"),
                expected.as_ref(),
                "{version}: {tool:#}"
            );
        }
        let ping = s.call(json!(2), "droid_ping", json!({})).await;
        assert_eq!(
            keys(&ping),
            vec!["content", "isError", "structuredContent"],
            "{version}: {ping:#}"
        );
        if !tasks {
            // no Tasks negotiated: tasks/* do not exist, and `task` is ignored (a plain call)
            let resp = s.request(json!(3), "tasks/list", json!({})).await;
            assert_error(&resp, &json!(3), -32601);
            let run = tool_result(
                s.request(
                    json!(4),
                    "tools/call",
                    json!({"name": "execute_droid_task", "arguments": home.task("Look"),
                           "task": {"ttl": 1000}}),
                )
                .await,
            );
            assert_eq!(run["structuredContent"]["status"], "success", "{run:#}");
            assert_eq!(run.get("task"), None, "{run:#}");
        }
        // no logging/setLevel: no log messages
        assert_eq!(
            before_response(&mut s, "notifications/message"),
            Vec::<Value>::new(),
            "{version}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_augmented_call_runs_in_the_task_store_and_tasks_result_waits_for_it() {
    let home = Home::new(&json!([
        {"emit": assistant("Working on it as a task.")},
        {"sleep_ms": 1500},
        {"emit": assistant("Almost done.")},
        {"completion": "Done."},
    ]));
    let mut s = home.server();
    initialize_at(&mut s, "2025-11-25").await;
    let task = create_task(&mut s, &home, json!(1), json!("task-progress")).await;
    let task_id = task["taskId"].as_str().unwrap().to_owned();

    // tasks/result at once: it blocks while tasks/get keeps being answered
    s.send(
        &json!({"jsonrpc": "2.0", "id": "result-1", "method": "tasks/result",
                   "params": {"taskId": task_id}}),
    )
    .await;
    let seen = poll_until_done(&mut s, &task_id).await;
    assert_eq!(
        seen.last().map(String::as_str),
        Some("completed"),
        "{seen:?}"
    );
    assert_eq!(
        seen.first().map(String::as_str),
        Some("working"),
        "{seen:?}"
    );
    let (is_error, status) = task_result(s.response(&json!("result-1")).await, &task_id);
    assert_eq!((is_error, status.as_str()), (false, "success"));
    // once done, tasks/result answers at once, the same
    let (is_error, status) = task_result(
        s.request(json!(2), "tasks/result", json!({"taskId": task_id}))
            .await,
        &task_id,
    );
    assert_eq!((is_error, status.as_str()), (false, "success"));

    // progress on the call's original token, then the final status notification
    let done = wait_for_notification(&mut s, "notifications/tasks/status", |p| {
        p["taskId"] == task_id.as_str() && p["status"] == "completed"
    })
    .await;
    assert_eq!(keys(&done["params"]), TASK_KEYS.to_vec(), "{done:#}");
    let progress = s.take_notifications("notifications/progress");
    assert!(!progress.is_empty(), "no progress for the task");
    let mut last = 0;
    for p in &progress {
        assert_eq!(p["params"]["progressToken"], "task-progress", "{p:#}");
        let n = p["params"]["progress"].as_u64().unwrap();
        assert!(n > last, "{progress:#?}");
        last = n;
    }

    // the same task store as droid_pend, the CLI and the bridge
    let list = tool_result(s.request(json!(3), "tasks/list", json!({})).await);
    assert_eq!(
        keys(&list),
        vec!["tasks"],
        "one page: no nextCursor: {list:#}"
    );
    let listed: Vec<(&str, &str)> = list["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| {
            (
                t["taskId"].as_str().unwrap_or_default(),
                t["status"].as_str().unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(listed, vec![(task_id.as_str(), "completed")]);
    let rec = record_of(
        &s.call(json!(4), "droid_pend", json!({"task_id": task_id}))
            .await,
    );
    assert_eq!(rec.state.as_str(), "success", "{rec:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tasks_cancel_stops_a_running_task_and_its_droid() {
    let home = Home::new(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    let mut s = home.server();
    initialize_at(&mut s, "2025-11-25").await;
    let task = create_task(&mut s, &home, json!(1), Value::Null).await;
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    let (reaper, pids) = hanging_run(&pid_file).await;
    assert!(reaper.marker.starts_with("task-"), "{}", reaper.marker);
    let mut n = 0;
    assert_eq!(
        get_task(&mut s, &mut n, &task_id).await["status"],
        "working"
    );

    let cancelled = tool_result(
        s.request(json!(2), "tasks/cancel", json!({"taskId": task_id}))
            .await,
    );
    assert_eq!(keys(&cancelled), TASK_KEYS.to_vec(), "{cancelled:#}");
    assert_eq!(
        (
            &cancelled["taskId"],
            &cancelled["status"],
            &cancelled["statusMessage"]
        ),
        (
            &json!(task_id),
            &json!("cancelled"),
            &json!("The task was cancelled by request.")
        ),
        "{cancelled:#}"
    );
    assert_all_gone(&reaper, &pids).await;
    assert_eq!(
        get_task(&mut s, &mut n, &task_id).await["status"],
        "cancelled"
    );
    // terminal: a second cancel is rejected, and the result is the cancelled run's
    let resp = s
        .request(json!(3), "tasks/cancel", json!({"taskId": task_id}))
        .await;
    assert_error(&resp, &json!(3), -32602);
    let (is_error, status) = task_result(
        s.request(json!(4), "tasks/result", json!({"taskId": task_id}))
            .await,
        &task_id,
    );
    assert_eq!((is_error, status.as_str()), (true, "cancelled"));
    let rec = record_of(
        &s.call(json!(5), "droid_pend", json!({"task_id": task_id}))
            .await,
    );
    assert_eq!(rec.state.as_str(), "cancelled", "{rec:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_outlives_the_server_that_created_it() {
    let home = Home::new(&json!([
        {"emit": assistant("Taking my time.")},
        {"sleep_ms": 3000},
        {"completion": "Done."},
    ]));
    let mut s = home.server();
    initialize_at(&mut s, "2025-11-25").await;
    let task = create_task(&mut s, &home, json!(1), json!(1)).await;
    let task_id = task["taskId"].as_str().unwrap().to_owned();
    s.child.kill().await.unwrap();

    let mut again = home.server();
    initialize_at(&mut again, "2025-11-25").await;
    let seen = poll_until_done(&mut again, &task_id).await;
    assert_eq!(
        seen.last().map(String::as_str),
        Some("completed"),
        "{seen:?}"
    );
    let (is_error, status) = task_result(
        again
            .request(json!(2), "tasks/result", json!({"taskId": task_id}))
            .await,
        &task_id,
    );
    assert_eq!((is_error, status.as_str()), (false, "success"));
    let list = tool_result(again.request(json!(3), "tasks/list", Value::Null).await);
    assert_eq!(list["tasks"][0]["taskId"], task_id.as_str(), "{list:#}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_protocol_mistakes_are_json_rpc_errors() {
    let home = Home::new(&short_run());
    let mut s = home.server();
    initialize_at(&mut s, "2025-11-25").await;
    let empty = tool_result(s.request(json!(1), "tasks/list", json!({})).await);
    assert_eq!(empty, json!({"tasks": []}));

    let unknown = json!({"taskId": "droid-1-ffff"});
    let cases = [
        ("tasks/get", unknown.clone()),
        ("tasks/get", json!({})),
        ("tasks/get", json!({"taskId": 7})),
        ("tasks/result", unknown.clone()),
        ("tasks/cancel", unknown.clone()),
        ("tasks/list", json!({"cursor": "droid-1-ffff"})),
        ("tasks/list", json!({"cursor": 5})),
        (
            "tools/call",
            json!({"name": "execute_droid_task", "arguments": home.task("x"), "task": "soon"}),
        ),
        // arguments the contract rejects: no task can exist for them
        (
            "tools/call",
            json!({"name": "execute_droid_task", "arguments": {"objective": ""}, "task": {}}),
        ),
    ];
    for (n, (method, params)) in cases.into_iter().enumerate() {
        let id = json!(10 + n);
        let resp = s.request(id.clone(), method, params.clone()).await;
        assert_eq!(error_code(&resp), -32602, "{method} {params}: {resp:#}");
        assert_eq!(resp["id"], id);
    }
    let unknown_task = s.request(json!(30), "tasks/get", unknown.clone()).await;
    assert!(
        unknown_task["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("Task not found")),
        "{unknown_task:#}"
    );
    // a tool whose execution.taskSupport is forbidden
    let resp = s
        .request(
            json!(31),
            "tools/call",
            json!({"name": "droid_ping", "arguments": {}, "task": {}}),
        )
        .await;
    assert_error(&resp, &json!(31), -32601);
    // nothing was created
    let still = tool_result(s.request(json!(32), "tasks/list", json!({})).await);
    assert_eq!(still, json!({"tasks": []}));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_messages_follow_the_level_the_client_set() {
    let home = Home::new(&json!([
        {"emit": assistant("Looking at the repository.")},
        {"emit": droid_error("rate limited, retrying")},
        {"completion": "Done."},
    ]));
    let mut s = home.server();
    initialize_at(&mut s, "2025-11-25").await;
    let pair = |l: &str, e: &str| (l.to_owned(), e.to_owned());
    let set = |level: &str| json!({"level": level});

    // nothing until the client sets a level
    assert_eq!(logged_run(&mut s, &home, 1).await, vec![]);

    let resp = s
        .request(json!("bad"), "logging/setLevel", set("loud"))
        .await;
    assert_error(&resp, &json!("bad"), -32602);

    assert_eq!(
        tool_result(
            s.request(json!("w"), "logging/setLevel", set("warning"))
                .await
        ),
        json!({})
    );
    assert_eq!(
        logged_run(&mut s, &home, 2).await,
        vec![pair("warning", "warning")]
    );

    tool_result(s.request(json!("i"), "logging/setLevel", set("info")).await);
    assert_eq!(
        logged_run(&mut s, &home, 3).await,
        vec![
            pair("info", "started"),
            pair("warning", "warning"),
            pair("info", "completed")
        ]
    );
    // the started message names droid's version
    s.call(json!(4), "execute_droid_task", home.task("Again"))
        .await;
    let messages = before_response(&mut s, "notifications/message");
    let started = &messages[0]["params"]["data"];
    assert_eq!(started["event"], "started", "{messages:#?}");
    assert!(
        started["droid_version"]
            .as_str()
            .is_some_and(|v| v.contains(tests::fake_droid::VERSION)),
        "{messages:#?}"
    );

    tool_result(
        s.request(json!("d"), "logging/setLevel", set("debug"))
            .await,
    );
    let got = logged_run(&mut s, &home, 5).await;
    assert!(
        got.iter().any(|(l, _)| l == "debug"),
        "debug shows the phases: {got:?}"
    );

    // a failed run is an error; at level error nothing else comes through
    tool_result(
        s.request(json!("e"), "logging/setLevel", set("error"))
            .await,
    );
    home.play(&json!([{"exit": 1}]));
    assert_eq!(
        logged_run(&mut s, &home, 6).await,
        vec![pair("error", "completed")]
    );
    home.play(&short_run());
    assert_eq!(logged_run(&mut s, &home, 7).await, vec![]);

    // nothing after a response
    let late: Vec<Value> = s
        .collect_for(Duration::from_millis(300))
        .await
        .into_iter()
        .filter(|m| m["method"] == "notifications/message")
        .collect();
    assert_eq!(late, Vec::<Value>::new());

    // 2026-07-28: the request's own logLevel, nothing without one
    home.play(&json!([
        {"emit": droid_error("rate limited, retrying")},
        {"completion": "Done."},
    ]));
    let mut m = home.server();
    for (n, (extra, expected)) in [
        (
            json!({LOG_LEVEL_KEY: "warning"}),
            vec![pair("warning", "warning")],
        ),
        (json!({}), vec![]),
    ]
    .into_iter()
    .enumerate()
    {
        let result = tool_result(
            m.request(
                json!(n),
                "tools/call",
                modern(
                    json!({"name": "execute_droid_task", "arguments": home.task("Look")}),
                    extra,
                ),
            )
            .await,
        );
        assert_eq!(result["resultType"], "complete", "{result:#}");
        let messages = before_response(&mut m, "notifications/message");
        assert_eq!(levels_and_events(&messages), expected);
    }
}
