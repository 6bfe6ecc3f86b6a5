//! Seed 002's delegation tools over `droid-executor mcp` on stdio, with the real Codex CLI driven
//! by a scripted model: `ask_codex` answers with a task id while Codex still runs (the call's
//! latency is printed, never asserted), `pend_codex` gets Codex's reply and the verified result,
//! the task survives a SIGKILLed server, `cancel_codex` leaves no process of the run, `ping_codex`
//! and `ping_gemini` say what is there and what to do, `wait_seconds` waits with progress
//! heartbeats (and an autonomy above the server's cap is capped), the setting `providers`
//! chooses the families listed, and bad arguments are errors naming the argument.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use droid_contract::{ChangeType, ProviderId, Status};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::codex_home::{CodexHome, KEY_VAR};
use tests::procs::pids_with_env;
use tests::scripted_model::ScriptedModel;

use super::binary::git_repo_at;
use super::mcp_stdio::{Server, TOOLS, error_code};

/// The variable the engine marks every process of a run with.
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";

/// Codex's `apply_patch` adding `name`, after `sleep` seconds of "thinking", then its reply.
fn create_then_say(name: &str, sleep: u64, reply: &str) -> Value {
    json!([
        {"sleep": sleep,
         "output": [{"type": "custom_tool_call", "status": "completed", "call_id": "c0",
                     "name": "apply_patch",
                     "input": format!("*** Begin Patch\n*** Add File: {name}\n+{name}\n*** End Patch\n")}]},
        {"output": [{"type": "message", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": reply, "annotations": []}]}]}
    ])
}

/// A HOME where Codex talks to `model`, droid-executor passes Codex's key through (plus
/// `extra` config lines), and `repo` is a git repository; the environment to run the binary with.
fn world(model: &ScriptedModel, extra: &str) -> (CodexHome, Vec<(OsString, OsString)>) {
    let home = CodexHome::new(&model.base_url()).unwrap();
    git_repo_at(&home.path().join("repo"), &[("a.txt", "a\n")]);
    let config = home.path().join(".config/droid-executor");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        // both delegation toolsets: the default `ask` family and seed 002's `ask_codex`
        format!("env_passthrough = [\"{KEY_VAR}\"]\ntoolsets = [\"all\"]\n{extra}"),
    )
    .unwrap();
    let mut env = home.env();
    env.push(("DROID_EXECUTOR_CODEX_BIN".into(), agent_cli("codex").into()));
    (home, env)
}

fn repo(home: &CodexHome) -> PathBuf {
    home.path().join("repo")
}

/// The task record of a `pend_<p>` / `cancel_<p>` answer, whose structured content is the
/// reply (first) and the record's fields.
fn record_of(answer: &Value) -> droid_contract::TaskRecord {
    let mut whole = answer.clone();
    let sc = whole["structuredContent"]
        .as_object_mut()
        .unwrap_or_else(|| panic!("no structuredContent: {answer:#}"));
    assert_eq!(
        sc.keys().next().map(String::as_str),
        Some("reply"),
        "{answer:#}"
    );
    sc.shift_remove("reply");
    super::mcp_stdio::record_of(&whole)
}

fn text(answer: &Value) -> &str {
    answer["content"][0]["text"].as_str().unwrap_or_default()
}

fn is_codex_task_id(id: &str) -> bool {
    let parts: Vec<&str> = id.split('-').collect();
    matches!(parts[..], ["codex", secs, hex]
        if !secs.is_empty() && secs.bytes().all(|b| b.is_ascii_digit())
            && hex.len() == 4 && hex.bytes().all(|b| b.is_ascii_hexdigit()))
}

/// `tool` (`ask_codex`, or `ask` with a provider) with `args`, its task id and how long the call
/// took.
async fn ask(server: &mut Server, id: i64, tool: &str, args: Value) -> (String, Duration) {
    let started = Instant::now();
    let asked = server.call(json!(id), tool, args).await;
    let took = started.elapsed();
    eprintln!("{tool} answered: {asked}");
    assert_eq!(asked["isError"], false, "{asked:#}");
    let sc = &asked["structuredContent"];
    let task_id = sc["task_id"].as_str().unwrap_or_default().to_owned();
    assert!(is_codex_task_id(&task_id), "{asked:#}");
    assert_eq!(sc, &json!({"task_id": task_id}));
    (task_id, took)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_answers_at_once_and_pend_gets_the_reply_and_the_changes() {
    // Codex's answer ends with the report block the prompt asks for: the reply is the answer
    // without it (the engine reads the block into the result's summary)
    let answer = "Created b.txt for you.\n\n```droid-executor-report\n{\"status\": \"success\", \
                  \"summary\": \"Added b.txt holding its own name.\", \"files\": [], \"issues\": []}\n```";
    let model = ScriptedModel::start(create_then_say("b.txt", 3, answer))
        .await
        .unwrap();
    let (home, env) = world(&model, "");
    let repo = repo(&home);
    let mut server = Server::start(&env, &repo);
    server.initialize().await;
    let (id, took) = ask(
        &mut server,
        2,
        "ask",
        json!({"provider": "codex", "message": "Create b.txt\nwith its own name in it", "autonomy": "low"}),
    )
    .await;
    eprintln!("ask answered in {} ms", took.as_millis());
    // Codex is still thinking (the model sleeps 3 s before its first answer)
    let now = server.call(json!(3), "pend", json!({"task_id": id})).await;
    let rec = record_of(&now);
    assert!(rec.result.is_none(), "finished already: {now:#}");
    assert!(
        text(&now).ends_with(&format!(
            "not finished; call pend with task_id {id} (and wait_seconds) again"
        )),
        "{now:#}"
    );
    // no task id and no provider: this session's latest task
    let pended = server
        .call(json!(4), "pend", json!({"wait_seconds": 120}))
        .await;
    eprintln!("pend answered: {pended}");
    assert_eq!(pended["isError"], false, "{pended:#}");
    let said = text(&pended);
    assert!(
        said.starts_with(&format!(
            "Codex CLI replied:\nCreated b.txt for you.\n\ntask {id}: success\nstatus: success\n\
             summary: Added b.txt holding its own name.\n"
        )),
        "{said}"
    );
    assert!(!said.contains("droid-executor-report"), "{said}");
    let sc = &pended["structuredContent"];
    let keys: Vec<&str> = sc.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        keys,
        [
            "reply",
            "task_id",
            "state",
            "created_at",
            "updated_at",
            "result"
        ]
    );
    assert_eq!(sc["reply"], "Created b.txt for you.");
    let rec = record_of(&pended);
    assert_eq!(rec.task_id, id);
    let res = rec.result.unwrap();
    assert_eq!(res.status, Status::Success, "{res:#?}");
    assert_eq!(
        res.agent.as_ref().map(|a| a.provider),
        Some(ProviderId::Codex)
    );
    let files: Vec<(&str, ChangeType)> = res
        .files_changed
        .iter()
        .map(|f| (f.path.as_str(), f.change_type))
        .collect();
    assert_eq!(files, [("b.txt", ChangeType::Added)]);
    assert_eq!(
        std::fs::read_to_string(repo.join("b.txt")).unwrap(),
        "b.txt\n"
    );
    // the whole message went to Codex
    let asked = model.requests()[0].to_string();
    assert!(
        asked.contains("with its own name in it"),
        "{}",
        &asked[..asked.len().min(2000)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_the_server_mid_task_loses_nothing() {
    let model = ScriptedModel::start(create_then_say("c.txt", 3, "Made c.txt."))
        .await
        .unwrap();
    let (home, env) = world(&model, "");
    let repo = repo(&home);
    let mut server = Server::start(&env, &repo);
    server.initialize().await;
    let (id, _) = ask(
        &mut server,
        2,
        "ask_codex",
        json!({"message": "Create c.txt", "autonomy": "low", "repo_root": repo}),
    )
    .await;
    server.child.kill().await.unwrap();
    drop(server);

    let mut again = Server::start(&env, &repo);
    again.initialize().await;
    // a new session names the task (without an id it would mean a task of its own)
    let pended = again
        .call(
            json!(1),
            "pend_codex",
            json!({"task_id": id, "wait_seconds": 120}),
        )
        .await;
    assert_eq!(
        pended["structuredContent"]["reply"], "Made c.txt.",
        "{pended:#}"
    );
    let rec = record_of(&pended);
    assert_eq!(rec.task_id, id);
    let res = rec.result.unwrap();
    assert_eq!(res.status, Status::Success, "{res:#?}");
    assert_eq!(res.files_changed[0].path, "c.txt");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_codex_stops_the_run_and_leaves_no_process() {
    // Codex runs a command that records the run's marker and leaves a `setsid sleep`, then hangs
    let cmd =
        format!("echo \"${MARKER_VAR}\" > run-id; setsid sleep 600 > /dev/null 2>&1 < /dev/null &");
    let model = ScriptedModel::start(json!([
        {"output": [{"type": "function_call", "status": "completed", "call_id": "c0",
                     "name": "exec_command", "arguments": json!({"cmd": cmd}).to_string()}]},
        {"hang": true}
    ]))
    .await
    .unwrap();
    let (home, env) = world(&model, "");
    let repo = repo(&home);
    let mut server = Server::start(&env, &repo);
    server.initialize().await;
    let (id, _) = ask(
        &mut server,
        2,
        "ask_codex",
        json!({"message": "Start a sleeper", "autonomy": "medium", "timeout_s": 300}),
    )
    .await;
    let marker = marker(&repo.join("run-id")).await;
    assert!(
        !pids_with_env(MARKER_VAR, &marker).is_empty(),
        "the run's processes are not marked"
    );
    let cancelled = server.call(json!(3), "cancel_codex", json!({})).await;
    assert_eq!(record_of(&cancelled).task_id, id, "{cancelled:#}");
    let pended = server
        .call(
            json!(4),
            "pend_codex",
            json!({"task_id": id, "wait_seconds": 60}),
        )
        .await;
    let rec = record_of(&pended);
    assert_eq!(rec.state.as_str(), "cancelled", "{pended:#}");
    assert_eq!(
        rec.result.map(|r| r.status),
        Some(Status::Cancelled),
        "{pended:#}"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while !pids_with_env(MARKER_VAR, &marker).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "processes of the run survived: {:?}",
            pids_with_env(MARKER_VAR, &marker)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The marker the run's command wrote to `file`, once it is there.
async fn marker(file: &Path) -> String {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    loop {
        let m = std::fs::read_to_string(file).unwrap_or_default();
        if !m.trim().is_empty() {
            return m.trim().to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the command never ran"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_codex_finds_codex_and_ping_gemini_says_what_to_do() {
    let model = ScriptedModel::start(json!([])).await.unwrap();
    let (home, env) = world(&model, "");
    let mut server = Server::start(&env, &repo(&home));
    server.initialize().await;
    let codex = server.call(json!(2), "ping_codex", json!({})).await;
    eprintln!("ping_codex: {}", text(&codex));
    assert_eq!(codex["isError"], false, "{codex:#}");
    let sc = &codex["structuredContent"];
    assert_eq!(
        (
            &sc["provider"],
            &sc["found"],
            &sc["version"],
            &sc["endpoint"]
        ),
        (
            &json!("codex"),
            &json!(true),
            &json!("0.169.0"),
            &json!(true)
        ),
        "{codex:#}"
    );
    assert!(text(&codex).starts_with("OK codex: "), "{codex:#}");

    let gemini = server.call(json!(3), "ping_gemini", json!({})).await;
    eprintln!("ping_gemini: {}", text(&gemini));
    let sc = &gemini["structuredContent"];
    assert_eq!(
        (&sc["provider"], &sc["found"], &sc["version"]),
        (&json!("gemini"), &json!(false), &Value::Null),
        "{gemini:#}"
    );
    assert!(
        text(&gemini).contains("tasks with provider gemini cannot run (fix: ")
            && text(&gemini).contains("install it if you want it: ")
            && text(&gemini).contains("DROID_EXECUTOR_GEMINI_BIN"),
        "{gemini:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_providers_setting_chooses_the_families() {
    let model = ScriptedModel::start(json!([])).await.unwrap();
    let (home, mut env) = world(&model, "providers = [\"claude\", \"gemini\"]\n");
    // the variable wins over the file
    env.push(("DROID_EXECUTOR_PROVIDERS".into(), "codex".into()));
    let mut server = Server::start(&env, &repo(&home));
    server.initialize().await;
    let list = server.request(json!(1), "tools/list", json!({})).await;
    let names: Vec<&str> = list["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    let mut want = TOOLS[..7].to_vec();
    want.extend(["ask", "pend", "ping", "cancel"]);
    want.extend(["ask_codex", "pend_codex", "ping_codex", "cancel_codex"]);
    assert_eq!(names, want);
    let other = server
        .request(
            json!(2),
            "tools/call",
            json!({"name": "ask_claude", "arguments": {"message": "hi"}}),
        )
        .await;
    assert_eq!(error_code(&other), -32602, "{other:#}");
    assert_eq!(
        other["error"]["message"],
        format!("unknown tool \"ask_claude\"; tools: {}", want.join(", "))
    );
    drop(server);

    // the file alone; an unknown name is refused by name
    env.pop();
    let mut server = Server::start(&env, &repo(&home));
    server.initialize().await;
    let list = server.request(json!(1), "tools/list", json!({})).await;
    let count = list["result"]["tools"].as_array().map(Vec::len);
    // the droid tools, the shared family and the families of claude and gemini
    assert_eq!(count, Some(7 + 4 + 2 * 4), "{list:#}");
    drop(server);
    env.push(("DROID_EXECUTOR_PROVIDERS".into(), "codex,gpt".into()));
    let out = super::binary::droid_executor(&["mcp"], &env, &repo(&home)).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr.contains(
            "invalid value for DROID_EXECUTOR_PROVIDERS: \"gpt\" is not a provider; expected a comma-separated list of"
        ),
        "{out:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_arguments_are_errors_naming_the_argument() {
    let model = ScriptedModel::start(json!([])).await.unwrap();
    let (home, env) = world(&model, "");
    let mut server = Server::start(&env, &repo(&home));
    server.initialize().await;
    let cases = [
        ("ask_codex", json!({}), "message is required: the whole request, in your words".to_owned()),
        ("ask_codex", json!({"message": 5}), "message must be a string, got 5".to_owned()),
        (
            "ask_codex",
            json!({"message": "hi", "verbose": true}),
            "unknown argument \"verbose\"; this tool takes message, repo_root, autonomy, timeout_s, session, isolation, fallback, max_tokens, wait_seconds".to_owned(),
        ),
        (
            "ask_codex",
            json!({"message": "hi", "wait_seconds": 601}),
            "wait_seconds must be an integer from 0 to 600, got 601".to_owned(),
        ),
        (
            "ask_codex",
            json!({"message": "hi", "timeout_s": "long"}),
            "timeout_s must be an integer from 1 to 86400, got \"long\"".to_owned(),
        ),
        (
            "ask_codex",
            json!({"message": "hi", "autonomy": "max"}),
            "autonomy must be read_only, low, medium or high, got \"max\"".to_owned(),
        ),
        (
            "ask_codex",
            json!({"message": " \n "}),
            "invalid arguments: message: must not be blank".to_owned(),
        ),
        (
            "pend_codex",
            json!({"task_id": "claude-1795349045-3fa2"}),
            "task_id claude-1795349045-3fa2 is a claude task, not a codex one; call pend_claude or cancel_claude for it".to_owned(),
        ),
        (
            "pend_codex",
            json!({"wait_seconds": -1}),
            "wait_seconds must be an integer from 0 to 600, got -1".to_owned(),
        ),
        (
            "pend_codex",
            json!({}),
            "no codex tasks yet in this session; start one with ask_codex, or pass the task_id \
             of a task another session started"
                .to_owned(),
        ),
        (
            "ping_codex",
            json!({"x": 1}),
            "unknown argument \"x\"; this tool takes no arguments".to_owned(),
        ),
        // the shared family: the provider is an argument
        (
            "ask",
            json!({"message": "hi"}),
            "provider is required: one of droid, codex, claude, gemini, opencode".to_owned(),
        ),
        (
            "ask",
            json!({"provider": "gpt", "message": "hi"}),
            "provider must be one of droid, codex, claude, gemini, opencode, got \"gpt\"".to_owned(),
        ),
        (
            "ask",
            json!({"provider": "codex", "message": "hi", "verbose": true}),
            "unknown argument \"verbose\"; this tool takes provider, message, repo_root, autonomy, timeout_s, session, isolation, fallback, max_tokens, wait_seconds".to_owned(),
        ),
        (
            "pend",
            json!({"provider": "codex", "task_id": "claude-1795349045-3fa2"}),
            "task_id claude-1795349045-3fa2 is a claude task, not a codex one; leave provider out, or make it claude".to_owned(),
        ),
        (
            "cancel",
            json!({}),
            "no tasks yet in this session; start one with ask, or pass the task_id of a task \
             another session started"
                .to_owned(),
        ),
        (
            "ping",
            json!({}),
            "provider is required: one of droid, codex, claude, gemini, opencode".to_owned(),
        ),
    ];
    for (n, (tool, args, said)) in cases.into_iter().enumerate() {
        let answer = server.call(json!(n + 10), tool, args.clone()).await;
        assert_eq!(
            (&answer["isError"], text(&answer)),
            (&json!(true), said.as_str()),
            "{tool} {args}"
        );
    }
    // a repo_root outside allowed_roots (the HOME) is refused naming repo_root
    let outside = server
        .call(
            json!(40),
            "ask_codex",
            json!({"message": "hi", "repo_root": "/"}),
        )
        .await;
    assert_eq!(outside["isError"], true, "{outside:#}");
    assert!(
        text(&outside).starts_with("invalid arguments: repo_root: "),
        "{outside:#}"
    );
    assert!(model.requests().is_empty(), "nothing may run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ask_codex_with_wait_seconds_sends_progress_and_answers_with_the_reply() {
    // Codex thinks for 12 s: longer than the 10 s heartbeat
    let model = ScriptedModel::start(create_then_say("d.txt", 12, "d.txt is there."))
        .await
        .unwrap();
    // an autonomy above the server's cap is capped, as for every request
    let (home, env) = world(&model, "max_autonomy = \"low\"\n");
    let mut server = Server::start(&env, &repo(&home));
    server.initialize().await;
    let resp = server
        .request(
            json!(2),
            "tools/call",
            json!({"name": "ask_codex",
                   "arguments": {"message": "Create d.txt", "autonomy": "high", "wait_seconds": 120},
                   "_meta": {"progressToken": "w1"}}),
        )
        .await;
    let answer = &resp["result"];
    assert_eq!(
        answer["structuredContent"]["reply"], "d.txt is there.",
        "{resp:#}"
    );
    let rec = record_of(answer);
    assert!(is_codex_task_id(&rec.task_id), "{resp:#}");
    assert_eq!(rec.result.map(|r| r.status), Some(Status::Success));
    let events = std::fs::read_to_string(
        home.path()
            .join(".local/state/droid-executor/tasks")
            .join(&rec.task_id)
            .join("events.ndjson"),
    )
    .unwrap();
    let started: Vec<Value> = events
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["type"] == "started")
        .collect();
    assert_eq!(started.len(), 1, "{events}");
    assert_eq!(started[0]["autonomy"], "low", "{events}");
    let progress = server.take_notifications("notifications/progress");
    let first = progress
        .first()
        .unwrap_or_else(|| panic!("no progress while waiting: {resp:#}"));
    // the seconds counted depend on when the heartbeat clock started (the call, not the wait)
    let message = first["params"]["message"].as_str().unwrap_or_default();
    assert_eq!(
        (
            &first["params"]["progressToken"],
            &first["params"]["progress"]
        ),
        (&json!("w1"), &json!(1)),
        "{first:#}"
    );
    assert!(
        message.starts_with(&format!("waiting for codex task {} (", rec.task_id))
            && message.ends_with(" s)"),
        "{first:#}"
    );
}
