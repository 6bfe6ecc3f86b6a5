//! `droid-executor acp` driven by the official TypeScript ACP SDK (npm
//! `@agentclientprotocol/sdk` 2.4.0, `tests/interop/acp_node_client.mjs`), with droid 0.225.2
//! (the real binary) on the scripted model, in an [`AcpWorld`]. The scenario flows live here and
//! `acp_python` runs the same flows with the PyPI SDK:
//!
//! - create + edit: answer streamed (more than one `agent_message_chunk` for a multi-word
//!   answer the model streams word by word), `tool_call`s of kind `edit` with `diff` content,
//!   permissions asked with allow once / always / reject options and allowed once, and at the
//!   end of the turn the "Measured changes" tool call naming both files with their diffs, and
//!   the session's verification commands (`_meta.droidExecutor.verify`) passed;
//! - reject: the write is refused, its tool call `failed`, the turn ends `end_turn`, the file
//!   is not written and the measured changes say none;
//! - allow always: asked once in the first prompt, not again for the same kind of write in the
//!   second;
//! - cancel mid-turn: while droid's Execute runs a `sleep` (carrying the run's marker), the
//!   client sends `session/cancel`: `stopReason: cancelled`, the sleep is gone while the agent
//!   (the session) stays, and the next prompt in the same session works; cancel mid-stream:
//!   cancelled at the first chunk of a slowly streamed answer, the rest never arrives;
//! - two sessions at once, each with its own droid, prompted concurrently;
//! - a model error (HTTP 400): the prompt fails with a JSON-RPC error naming it;
//! - droid missing (`DROID_CLI_CMD` names no file): `session/new` fails with -32001 and the
//!   install hint;
//! - a verification command that fails: the turn still ends `end_turn`, the measured changes
//!   are `failed` with the command's exit code;
//! - modes: in `medium` droid's writes run without a permission request;
//! - load: `session/list` lists the session, and a NEW connection (a new agent process)
//!   `session/load`s it, replaying the conversation before it answers.
//!
//! And the baseline: the same streamed answer through droid's native ACP mode (`droid exec
//! --output-format acp`) and through ours, with the same client: native answers
//! `session/set_config_option` with `{}` (its one schema violation, which the Python SDK
//! refuses to parse) and sends the answer as one chunk; ours streams it word by word with no
//! violation. Both times to the first chunk are printed, never asserted.
//!
//! Every transcript (recorded by `acp_tee.py`) must validate against the v1 JSON schema the
//! npm SDK ships, and no process of a run may outlive it.

use std::path::Path;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::acp_world::{
    AcpWorld, Agent, Run, Scenario, Sdk, marked_processes, no_survivors, validate,
    validation_report,
};
use tests::procs::wait_gone;

/// How long a turn's `sleep` may take to show up once the prompt is sent (droid starts it).
const STARTS: Duration = Duration::from_secs(120);
/// How long the turn's processes may take to go once the prompt answered `cancelled`.
const GONE: Duration = Duration::from_secs(10);
/// The permission options every request offers, by kind.
const OPTION_KINDS: [&str; 3] = ["allow_once", "allow_always", "reject_once"];
/// The answer the model streams word by word.
const ANSWER: &str = "Created b.txt and edited a.txt as asked.";
/// What the model answers in the model-error case.
const MODEL_400: &str = "Bad request: invalid parameter";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_creates_and_edits_files_with_streamed_chunks_diffs_and_measured_changes() {
    create_and_edit(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_rejects_a_write_which_fails_and_the_turn_ends() {
    reject(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_allows_always_and_is_not_asked_again() {
    allow_always(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_cancels_mid_turn_leaving_no_process_of_the_turn() {
    cancel_mid_turn(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_cancels_mid_stream_and_prompts_again() {
    cancel_mid_stream(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_runs_two_sessions_at_once() {
    two_sessions(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_gets_the_model_error_as_a_json_rpc_error() {
    model_error(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_gets_droid_missing_as_32001_with_the_install_hint() {
    droid_missing(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_sees_a_failed_verification_in_the_measured_changes() {
    verify_fails(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_in_mode_medium_is_not_asked_for_writes() {
    mode_medium(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_lists_and_loads_a_session_on_a_new_connection() {
    load(Sdk::Node).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn node_sdk_sees_native_droid_break_the_schema_and_not_stream_where_ours_does() {
    native_baseline(Sdk::Node).await;
}

/// `path` as the scripted model's tools want it.
fn p(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

/// The text of `summary.prompts[i]`'s chunks, joined.
fn prompt_text(summary: &Value, i: usize) -> String {
    summary["prompts"][i]["chunks"]
        .as_array()
        .unwrap_or_else(|| panic!("no prompt {i}: {summary:#}"))
        .iter()
        .filter_map(Value::as_str)
        .collect()
}

/// The tool call `id` of the summary.
fn tool_call<'a>(summary: &'a Value, id: &str) -> &'a Value {
    summary["toolCalls"]
        .as_array()
        .and_then(|calls| calls.iter().find(|c| c["id"] == id))
        .unwrap_or_else(|| panic!("no tool call {id}: {summary:#}"))
}

/// The end-of-turn "Measured changes" tool calls, in order.
fn measured(summary: &Value) -> Vec<&Value> {
    summary["toolCalls"]
        .as_array()
        .map(|calls| {
            calls
                .iter()
                .filter(|c| {
                    c["title"]
                        .as_str()
                        .is_some_and(|t| t.starts_with("Measured changes"))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The run validated, nothing of it left, the summary `ok`.
async fn checked(run: &Run) -> &Value {
    validate(&run.log);
    no_survivors(&run.marker).await;
    run.assert_ok()
}

/// Every permission request offered the three options by kind.
fn assert_options(summary: &Value) {
    for asked in summary["permissions"].as_array().into_iter().flatten() {
        assert_eq!(asked["kinds"], json!(OPTION_KINDS), "{summary:#}");
    }
}

pub(super) async fn create_and_edit(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("edit");
    w.model.set_script(json!([
        {"tool": [{"name": "Create", "args": {"file_path": p(&repo, "b.txt"), "content": "b\n"}}]},
        {"tool": [{"name": "Edit", "args": {"file_path": p(&repo, "a.txt"), "old_str": "hello", "new_str": "hello world"}}]},
        {"text": ANSWER, "split_text": true},
    ]));
    let scenario = Scenario::new("tools-allow", &repo)
        .model(&w.model_id())
        .verify("test -f b.txt")
        .verify("grep -q 'hello world' a.txt")
        .prompt("Create b.txt and edit a.txt");
    let run = w.run(sdk, &Agent::executor(), &scenario).await;
    let s = checked(&run).await;
    assert_eq!(s["stopReasons"], json!(["end_turn"]), "{s:#}");
    assert_eq!(s["errors"], json!([]), "{s:#}");
    // streamed: word by word, as the model sent it
    let chunks = s["prompts"][0]["chunks"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(chunks.len() > 1, "one chunk for a streamed answer: {s:#}");
    assert_eq!(prompt_text(s, 0), ANSWER, "{s:#}");
    // droid's two writes, asked and allowed, each with its diff
    assert_eq!(s["permissionsAsked"], 2, "{s:#}");
    assert_options(s);
    for (id, title, path) in [
        ("call_0_0", "Create b.txt", "b.txt"),
        ("call_1_0", "Edit a.txt", "a.txt"),
    ] {
        let call = tool_call(s, id);
        assert_eq!(call["kind"], "edit", "{call:#}");
        assert_eq!(call["title"], title, "{call:#}");
        assert_eq!(call["status"], "completed", "{call:#}");
        assert!(
            call["contentTypes"]
                .as_array()
                .is_some_and(|t| t.contains(&json!("diff"))),
            "{call:#}"
        );
        assert_eq!(call["diffPaths"], json!([p(&repo, path)]), "{call:#}");
    }
    // the end of the turn: what really changed, measured from the repository
    let m = measured(s);
    assert_eq!(m.len(), 1, "{s:#}");
    assert_eq!(m[0]["kind"], "other", "{s:#}");
    assert_eq!(m[0]["status"], "completed", "{s:#}");
    assert_eq!(
        m[0]["diffPaths"],
        json!([p(&repo, "a.txt"), p(&repo, "b.txt")]),
        "{s:#}"
    );
    assert_eq!(
        m[0]["meta"]["droidExecutor"]["filesChanged"],
        json!([
            {"path": "a.txt", "changeType": "modified", "oldPath": null, "linesAdded": 1, "linesRemoved": 1},
            {"path": "b.txt", "changeType": "added", "oldPath": null, "linesAdded": 1, "linesRemoved": 0},
        ]),
        "{s:#}"
    );
    // and what the session's verification commands returned
    let tests = &m[0]["meta"]["droidExecutor"]["tests"];
    assert_eq!(tests["passed"], true, "{s:#}");
    let runs: Vec<(&Value, &Value)> = tests["runs"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (&r["command"], &r["exitCode"]))
        .collect();
    assert_eq!(
        runs,
        [
            (&json!("test -f b.txt"), &json!(0)),
            (&json!("grep -q 'hello world' a.txt"), &json!(0)),
        ],
        "{s:#}"
    );
    assert_eq!(
        std::fs::read_to_string(repo.join("a.txt")).unwrap(),
        "hello world\n"
    );
    assert_eq!(std::fs::read_to_string(repo.join("b.txt")).unwrap(), "b\n");
    eprintln!(
        "{}: first agent_message_chunk {} ms after session/prompt",
        sdk.name(),
        s["firstChunkMs"]
    );
}

pub(super) async fn reject(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("reject");
    w.model.set_script(json!([
        {"tool": [{"name": "Create", "args": {"file_path": p(&repo, "c.txt"), "content": "c\n"}}]},
        {"text": "The write was refused.", "split_text": true},
    ]));
    let scenario = Scenario::new("reject", &repo)
        .model(&w.model_id())
        .prompt("Create c.txt");
    let run = w.run(sdk, &Agent::executor(), &scenario).await;
    let s = checked(&run).await;
    assert_eq!(s["stopReasons"], json!(["end_turn"]), "{s:#}");
    assert_eq!(s["permissionsAsked"], 1, "{s:#}");
    assert_options(s);
    assert_eq!(s["permissions"][0]["answer"], "reject_once", "{s:#}");
    let call = tool_call(s, "call_0_0");
    assert_eq!(call["kind"], "edit", "{call:#}");
    assert_eq!(call["status"], "failed", "{call:#}");
    assert!(!repo.join("c.txt").exists(), "the rejected write happened");
    // nothing changed, so no "Measured changes" tool call (issue 33: a turn whose only edit
    // was rejected showed "2 files (+5 −0)", and every turn showed one)
    assert_eq!(measured(s), Vec::<&Value>::new(), "{s:#}");
}

pub(super) async fn allow_always(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("always");
    w.model.set_script(json!([
        {"tool": [{"name": "Create", "args": {"file_path": p(&repo, "b.txt"), "content": "b\n"}}]},
        {"text": "Created b.txt."},
        {"tool": [{"name": "Create", "args": {"file_path": p(&repo, "c.txt"), "content": "c\n"}}]},
        {"text": "Created c.txt."},
    ]));
    let scenario = Scenario::new("always", &repo)
        .model(&w.model_id())
        .prompt("Create b.txt")
        .second_prompt("Create c.txt");
    let run = w.run(sdk, &Agent::executor(), &scenario).await;
    let s = checked(&run).await;
    assert_eq!(s["stopReasons"], json!(["end_turn", "end_turn"]), "{s:#}");
    assert_eq!(s["permissions"][0]["answer"], "allow_always", "{s:#}");
    assert_eq!(s["prompts"][0]["permissionsAsked"], 1, "{s:#}");
    assert_eq!(
        s["prompts"][1]["permissionsAsked"], 0,
        "asked again after allow always: {s:#}"
    );
    for (id, file) in [("call_0_0", "b.txt"), ("call_2_0", "c.txt")] {
        assert_eq!(tool_call(s, id)["status"], "completed", "{s:#}");
        assert!(repo.join(file).is_file(), "{file} not written: {s:#}");
    }
}

pub(super) async fn cancel_mid_turn(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("cancel");
    w.model.set_script(json!([
        {"text": "Waiting for the command.", "tool": [{"name": "Execute", "args": {"command": "sleep 600", "riskLevel": "low", "riskLevelReason": "it only waits"}}]},
        {"text": "The command finished."},
    ]));
    // medium: droid runs a low-risk command without asking
    let scenario = Scenario::new("cancel", &repo)
        .model(&w.model_id())
        .mode("medium")
        .prompt("Wait for a while")
        .second_prompt("Say done")
        .driven();
    let mut client = w.start(sdk, &Agent::executor(), &scenario);
    let marker = client.marker().to_owned();
    let until = Instant::now() + STARTS;
    let sleeper = loop {
        if let Some(pid) = marked_processes(&marker, "sleep").first() {
            break *pid;
        }
        assert!(
            Instant::now() < until,
            "droid's Execute never started `sleep 600` (transcript {})",
            client.log().display()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let agents_before = marked_processes(&marker, &Agent::executor().program.display().to_string());
    assert_eq!(
        agents_before.len(),
        1,
        "one droid-executor acp: {agents_before:?}"
    );
    client.send("cancel").await;
    assert_eq!(
        client.paused().await,
        json!({"stopReason": "cancelled"}),
        "the cancelled prompt's answer"
    );
    assert!(
        wait_gone(sleeper, GONE).await,
        "the turn's `sleep 600` (pid {sleeper}) outlived the cancelled turn"
    );
    // the session goes on: its agent is still there
    assert_eq!(
        marked_processes(&marker, &Agent::executor().program.display().to_string()),
        agents_before,
        "the agent went away with the turn"
    );
    w.model
        .set_script(json!([{"text": "Second answer, after the cancel.", "split_text": true}]));
    client.send("go").await;
    let run = client.finish().await;
    let s = checked(&run).await;
    assert_eq!(s["stopReasons"], json!(["cancelled", "end_turn"]), "{s:#}");
    assert_eq!(
        prompt_text(s, 1),
        "Second answer, after the cancel.",
        "{s:#}"
    );
    let execute = tool_call(s, "call_0_0");
    assert_eq!(execute["kind"], "execute", "{execute:#}");
    assert!(
        ["failed", "completed"].contains(&execute["status"].as_str().unwrap_or_default()),
        "the cancelled Execute is left {}: {execute:#}",
        execute["status"]
    );
}

pub(super) async fn cancel_mid_stream(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("stream");
    let words: Vec<String> = (0..40).map(|i| format!("w{i}")).collect();
    let long = words.join(" ");
    w.model.set_script(json!([
        {"text": long, "split_text": true, "chunk_sleep": 0.25},
    ]));
    let scenario = Scenario::new("cancel", &repo)
        .model(&w.model_id())
        .prompt("Talk slowly")
        .second_prompt("Talk again");
    let run = w.run(sdk, &Agent::executor(), &scenario).await;
    let s = checked(&run).await;
    assert_eq!(s["stopReasons"], json!(["cancelled", "end_turn"]), "{s:#}");
    let first = prompt_text(s, 0);
    assert!(
        !first.is_empty() && long.starts_with(&first) && first.len() < long.len(),
        "the cancelled answer is not a proper beginning of the text: {first:?}"
    );
    assert_eq!(prompt_text(s, 1), long, "{s:#}");
}

pub(super) async fn two_sessions(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let one = w.repo("one");
    let two = w.repo("two");
    let text = "Hello from the scripted model.";
    w.model
        .set_script(json!([{"text": text, "split_text": true}]));
    let scenario = Scenario::new("two-sessions", &one)
        .cwd2(&two)
        .model(&w.model_id())
        .prompt("Say hello")
        .second_prompt("Say hello too");
    let run = w.run(sdk, &Agent::executor(), &scenario).await;
    let s = checked(&run).await;
    assert_eq!(s["stopReasons"], json!(["end_turn", "end_turn"]), "{s:#}");
    let ids = s["sessionIds"].as_array().cloned().unwrap_or_default();
    assert_eq!(ids.len(), 2, "{s:#}");
    assert_ne!(ids[0], ids[1], "{s:#}");
    for i in 0..2 {
        assert_eq!(s["prompts"][i]["sessionId"], ids[i], "{s:#}");
        assert_eq!(prompt_text(s, i), text, "{s:#}");
    }
    // each session measured its own repository, which neither changed: nothing to report
    assert_eq!(measured(s), Vec::<&Value>::new(), "{s:#}");
}

pub(super) async fn model_error(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("fail");
    w.model
        .set_script(json!([{"status": 400, "error_message": MODEL_400}]));
    let scenario = Scenario::new("error", &repo)
        .model(&w.model_id())
        .prompt("Say done");
    let run = w.run(sdk, &Agent::executor(), &scenario).await;
    let s = checked(&run).await;
    assert_eq!(s["stopReasons"], json!([]), "{s:#}");
    let errors = s["errors"].as_array().cloned().unwrap_or_default();
    assert_eq!(errors.len(), 1, "{s:#}");
    assert!(errors[0]["code"].is_i64(), "not a JSON-RPC error: {s:#}");
    assert!(
        errors[0]["message"]
            .as_str()
            .is_some_and(|m| m.contains(MODEL_400)),
        "the error does not name the model's answer: {s:#}"
    );
}

pub(super) async fn droid_missing(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("missing");
    let missing = w.home.path().join("no-droid-here");
    let agent = Agent::executor().with_env("DROID_CLI_CMD", &missing);
    let scenario = Scenario::new("error", &repo).prompt("Say done");
    let run = w.run(sdk, &agent, &scenario).await;
    let s = checked(&run).await;
    assert_eq!(s["sessionIds"], json!([]), "{s:#}");
    let errors = s["errors"].as_array().cloned().unwrap_or_default();
    assert_eq!(errors.len(), 1, "{s:#}");
    assert_eq!(errors[0]["code"], -32001, "{s:#}");
    assert_eq!(
        errors[0]["data"]["install"], "npm install -g @factory/cli-linux-x64@0.225.2",
        "{s:#}"
    );
}

/// droid creates b.txt, then answers [`ANSWER`].
fn create_b(repo: &Path) -> Value {
    json!([
        {"tool": [{"name": "Create", "args": {"file_path": p(repo, "b.txt"), "content": "b\n"}}]},
        {"text": ANSWER, "split_text": true},
    ])
}

pub(super) async fn mode_medium(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("medium");
    w.model.set_script(create_b(&repo));
    let scenario = Scenario::new("mode", &repo)
        .model(&w.model_id())
        .mode("medium")
        .prompt("Create b.txt");
    let run = w.run(sdk, &Agent::executor(), &scenario).await;
    let s = checked(&run).await;
    assert_eq!(s["modes"], json!(["read_only", "low", "medium"]), "{s:#}");
    assert_eq!(s["currentMode"], "medium", "{s:#}");
    assert_eq!(s["stopReasons"], json!(["end_turn"]), "{s:#}");
    assert_eq!(s["permissionsAsked"], 0, "{s:#}");
    assert_eq!(tool_call(s, "call_0_0")["status"], "completed", "{s:#}");
    assert_eq!(std::fs::read_to_string(repo.join("b.txt")).unwrap(), "b\n");
}

pub(super) async fn load(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("load");
    w.model.set_script(create_b(&repo));
    let scenario = Scenario::new("load", &repo)
        .model(&w.model_id())
        .mode("medium")
        .prompt("Create b.txt");
    let run = w.run(sdk, &Agent::executor(), &scenario).await;
    let s = checked(&run).await;
    let id = &s["sessionIds"][0];
    assert_eq!(
        s["listed"],
        json!([{"sessionId": id, "cwd": repo, "title": s["listed"][0]["title"]}]),
        "{s:#}"
    );
    let mut keys: Vec<&str> = s["loadResult"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    keys.sort_unstable();
    // `_meta` says how the session's droid is confined
    assert_eq!(keys, ["_meta", "configOptions", "modes"], "{s:#}");
    let replayed = s["replayed"].as_array().cloned().unwrap_or_default();
    assert_eq!(
        replayed.first(),
        Some(&json!({"sessionUpdate": "user_message_chunk", "text": "Create b.txt"})),
        "{s:#}"
    );
    assert!(
        replayed.contains(
            &json!({"sessionUpdate": "tool_call", "toolCallId": "call_0_0", "status": "completed"})
        ),
        "{s:#}"
    );
    let said: String = replayed
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["text"].as_str())
        .collect();
    assert_eq!(said, ANSWER, "{s:#}");
}

pub(super) async fn verify_fails(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("verify");
    w.model.set_script(create_b(&repo));
    let scenario = Scenario::new("mode", &repo)
        .model(&w.model_id())
        .mode("medium")
        .verify("test -f no-such-file")
        .prompt("Create b.txt");
    let run = w.run(sdk, &Agent::executor(), &scenario).await;
    let s = checked(&run).await;
    assert_eq!(s["stopReasons"], json!(["end_turn"]), "{s:#}");
    let m = measured(s);
    assert_eq!(m.len(), 1, "{s:#}");
    assert_eq!(m[0]["status"], "failed", "{s:#}");
    let tests = &m[0]["meta"]["droidExecutor"]["tests"];
    assert_eq!(tests["passed"], false, "{s:#}");
    assert_eq!(tests["runs"][0]["command"], "test -f no-such-file", "{s:#}");
    assert_eq!(tests["runs"][0]["exitCode"], 1, "{s:#}");
    assert_eq!(
        m[0]["meta"]["droidExecutor"]["filesChanged"][0]["path"], "b.txt",
        "{s:#}"
    );
}

pub(super) async fn native_baseline(sdk: Sdk) {
    let w = AcpWorld::new().await;
    let repo = w.repo("baseline");
    let words: Vec<String> = (0..10).map(|i| format!("word{i}")).collect();
    let text = words.join(" ");
    w.model
        .set_script(json!([{"text": text, "split_text": true, "chunk_sleep": 0.05}]));
    let scenario = Scenario::new("stream", &repo)
        .model(&w.model_id())
        .prompt("Say ten words");

    let native = w.run(sdk, &Agent::native(), &scenario).await;
    no_survivors(&native.marker).await;
    let n = native.assert_ok();
    assert_eq!(n["stopReasons"], json!(["end_turn"]), "{n:#}");
    assert_eq!(
        n["prompts"][0]["chunks"],
        json!([text]),
        "native streamed: {n:#}"
    );
    let (report, code) = validation_report(&[&native.log]);
    let violations: Vec<(&Value, &Value, &Value)> = report["files"][0]["violations"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|v| (&v["method"], &v["def"], &v["errors"]))
        .collect();
    assert_eq!(
        violations,
        [(
            &json!("session/set_config_option"),
            &json!("SetSessionConfigOptionResponse"),
            &json!(["(root): 'configOptions' is a required property"]),
        )],
        "{report:#}"
    );
    assert_eq!(code, Some(1));
    assert!(
        n["errors"][0]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("invalid answer to session/set_config_option")),
        "{n:#}"
    );

    let ours = w.run(sdk, &Agent::executor(), &scenario).await;
    let o = checked(&ours).await;
    assert_eq!(o["stopReasons"], json!(["end_turn"]), "{o:#}");
    assert_eq!(o["errors"], json!([]), "{o:#}");
    assert_eq!(
        o["prompts"][0]["chunks"].as_array().map(Vec::len),
        Some(10),
        "{o:#}"
    );
    assert_eq!(prompt_text(o, 0), text, "{o:#}");
    eprintln!(
        "{}: first agent_message_chunk after session/prompt: native {} ms, ours {} ms",
        sdk.name(),
        n["firstChunkMs"],
        o["firstChunkMs"]
    );
}
