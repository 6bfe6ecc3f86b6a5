//! Token budgets (`max_tokens`, docs/protocol.md#token-budget) through the REAL agent CLIs
//! against a scripted model that reports usage (the turn key `usage`) and keeps calling a tool:
//! droid is stopped from its record of the session (its stream-json says usage only at the end),
//! Claude Code from its per-call `assistant` events and then resumed with a larger budget to
//! finish, and Codex, which reports usage only when its turn is over, is held to the budget then.
//!
//! droid's own resume (`droid exec -s`) fetches the session from Factory's API first, which airgap
//! mode blocks ("Failed to fetch session", measured with 0.225.2): the resume half of the issue's
//! case runs through Claude Code.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use droid_contract::{IssueType, ProviderId, Status, Usage};
use droid_exec::config::AgentProgram;
use droid_exec::{Engine, EngineConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::claude_home::ClaudeHome;
use tests::codex_home::CodexHome;
use tests::droid_bin::real_droid;
use tests::droid_home::DroidHome;
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;

use bridge_http::client::{Client, Method};

use super::binary::git_repo_at;
use super::bridge_harness::ServeProc;
use super::common::{engine, git_repo, request, run};

/// Tokens each model call reports: 400 uncached input (and 300 read from the cache, which the
/// budget does not count), 50 output.
fn call_usage() -> Value {
    json!({"input": 400, "output": 50, "cache_read": 300})
}

/// An engine driving `provider`'s real CLI with `env`.
fn agent_engine(provider: ProviderId, env: Vec<(OsString, OsString)>, scratch: &Path) -> Engine {
    Engine::new(EngineConfig {
        droid_bin: None,
        droid_source: "test".into(),
        droid_warnings: Vec::new(),
        agents: vec![AgentProgram {
            provider,
            program: Some(agent_cli(provider.as_str())),
            source: "test".into(),
        }],
        env,
        allowed_roots: Vec::new(),
        max_autonomy: droid_contract::Autonomy::High,
        default_timeout: Duration::from_secs(90),
        default_model: None,
        verify: true,
        sandbox: Default::default(),
        sandbox_writable: Vec::new(),
        excerpt_bytes: 4096,
        kill_grace: Duration::from_secs(5),
        scratch_root: scratch.to_path_buf(),
        store_dir: None,
        max_concurrent: 4,
        task_ttl: Duration::from_secs(24 * 3600),
        supervisor: None,
        cgroups: true,
        limits: Default::default(),
        redact: Vec::new(),
        worktrees: Default::default(),
        client_env: Default::default(),
    })
}

fn kinds(r: &droid_contract::ExecutionResult) -> Vec<IssueType> {
    r.issues.iter().map(|i| i.kind).collect()
}

fn usage_of(r: &droid_contract::ExecutionResult) -> Usage {
    r.usage.clone().expect("the result has no usage")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_droid_that_keeps_calling_tools_is_stopped_by_its_budget() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    // every turn appends a line and asks for more
    let model = ScriptedModel::start(json!([
        {"text": "One more step.", "usage": call_usage(),
         "tool": [{"name": "Execute", "args": {"summary": "step", "command": "echo step >> steps.txt",
                                                "riskLevel": "low", "riskLevelReason": "test"}}]}
    ]))
    .await
    .unwrap();
    let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
    let scratch = TempDir::new("budget-scratch").unwrap();
    let engine = engine(real_droid(), home.env(), scratch.path());
    let ran = run(
        &engine,
        &request(
            repo.path(),
            "Append steps until told to stop",
            json!({"model": home.model_id("Mock"), "max_tokens": 2000,
                   "suggested_commands": ["test -s steps.txt"]}),
        ),
    )
    .await;
    let res = &ran.result;
    assert_eq!(res.status, Status::Partial, "{res:#?}");
    assert_eq!(
        kinds(res)[0],
        IssueType::BudgetExceeded,
        "{:#?}",
        res.issues
    );
    let usage = usage_of(res);
    // stopped after the call that went over, not long after (droid's record is read every 0.5 s)
    assert!(usage.budget_tokens() > 2000, "{usage:?}");
    assert!(usage.budget_tokens() < 2000 + 12 * 450, "{usage:?}");
    assert_eq!(usage.input_tokens % 400, 0, "{usage:?}");
    assert!(usage.cache_read_input_tokens > 0, "{usage:?}");
    assert_eq!(res.usage, res.agent.as_ref().and_then(|a| a.usage.clone()));
    assert_eq!(
        res.files_changed
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        ["steps.txt"]
    );
    // verified as a run stopped before it finished: the change is there to check
    assert_eq!(res.tests.passed, Some(true), "{:#?}", res.tests);
    assert!(res.session_id.is_some());
    assert!(
        res.issues[0].description.contains("of a budget of 2000"),
        "{}",
        res.issues[0].description
    );
}

/// Claude Code's Bash appending a step, with its own tool-use id.
fn claude_step(i: usize) -> Value {
    json!({"content": [{"type": "tool_use", "id": format!("toolu_{i}"), "name": "Bash",
                        "input": {"command": "echo step >> steps.txt", "description": "step"}}],
           "usage": call_usage()})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_stopped_by_its_budget_resumes_with_a_larger_one_and_finishes() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let model = ScriptedModel::start(Value::Array((0..12).map(claude_step).collect()))
        .await
        .unwrap();
    let home = ClaudeHome::new().unwrap();
    let scratch = TempDir::new("budget-scratch").unwrap();
    let engine = agent_engine(
        ProviderId::Claude,
        home.env(&format!("http://127.0.0.1:{}", model.port())),
        scratch.path(),
    );
    let ask = |extra: Value| {
        let mut r = request(repo.path(), "Append steps until told to stop", extra);
        r["provider"] = json!("claude");
        r
    };
    let first = run(&engine, &ask(json!({"max_tokens": 2000}))).await.result;
    assert_eq!(first.status, Status::Partial, "{first:#?}");
    assert_eq!(
        kinds(&first)[0],
        IssueType::BudgetExceeded,
        "{:#?}",
        first.issues
    );
    // each call's assistant event says 400 input tokens (and output 1, the stream's first
    // count): the fifth goes over 2,000
    assert_eq!(
        usage_of(&first),
        Usage {
            input_tokens: 2000,
            output_tokens: 5,
            cache_read_input_tokens: 1500,
            ..Usage::default()
        }
    );
    let session = first.session_id.clone().expect("no session id");
    assert!(!first.files_changed.is_empty(), "{first:#?}");

    // the model is done now; a larger budget lets the session finish
    model.set_script(json!([
        {"content": [{"type": "text", "text": "All steps are done."}],
         "usage": {"input": 100, "output": 20}}
    ]));
    let second = run(
        &engine,
        &ask(json!({"session_id": session, "max_tokens": 100_000})),
    )
    .await
    .result;
    assert_eq!(second.status, Status::Success, "{second:#?}");
    assert_eq!(second.session_id.as_deref(), Some(session.as_str()));
    assert_eq!(second.summary, "All steps are done.");
    assert!(usage_of(&second).budget_tokens() <= 100_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_reports_usage_only_at_its_end_and_is_held_to_the_budget_then() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let exec = |call: &str| {
        json!({"type": "function_call", "status": "completed", "call_id": call,
               "name": "exec_command", "arguments": json!({"cmd": "echo step >> steps.txt"}).to_string()})
    };
    let model = ScriptedModel::start(json!([
        {"output": [exec("c1")], "usage": call_usage()},
        {"output": [exec("c2")], "usage": call_usage()},
        {"output": [exec("c3")], "usage": call_usage()},
        {"output": [{"type": "message", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": "Done.", "annotations": []}]}],
         "usage": call_usage()}
    ]))
    .await
    .unwrap();
    let home = CodexHome::new(&model.base_url()).unwrap();
    let scratch = TempDir::new("budget-scratch").unwrap();
    let engine = agent_engine(ProviderId::Codex, home.env(), scratch.path());
    let mut req = request(
        repo.path(),
        "Append three steps",
        json!({"max_tokens": 1000}),
    );
    req["provider"] = json!("codex");
    let res = run(&engine, &req).await.result;
    // four calls of 400 + 50: Codex counts the 300 cached tokens in its input, the budget not
    assert_eq!(
        usage_of(&res),
        Usage {
            input_tokens: 1600,
            output_tokens: 200,
            cache_read_input_tokens: 1200,
            ..Usage::default()
        }
    );
    assert_eq!(res.status, Status::Partial, "{res:#?}");
    assert_eq!(kinds(&res), [IssueType::BudgetExceeded]);
    assert!(
        res.issues[0]
            .description
            .contains("it reports usage only at its end"),
        "{}",
        res.issues[0].description
    );
}

/// The value of the series `name_and_labels` (a name with its labels) in `/metrics`' text.
fn series(metrics: &str, name_and_labels: &str) -> Option<u64> {
    metrics.lines().find_map(|l| {
        l.strip_prefix(name_and_labels)?
            .strip_prefix(' ')?
            .parse()
            .ok()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_counts_tokens_runs_and_failures_by_provider_and_reason() {
    let model = ScriptedModel::start(json!([
        {"text": "One more step.", "usage": call_usage(),
         "tool": [{"name": "Execute", "args": {"summary": "step", "command": "echo step >> steps.txt",
                                                "riskLevel": "low", "riskLevelReason": "test"}}]}
    ]))
    .await
    .unwrap();
    let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    let mut env = home.env();
    env.push(("DROID_CLI_CMD".into(), real_droid().into()));
    let serve = ServeProc::start(&[], &env, home.path()).await;
    let client = Client::new(serve.addr, None);
    let ask = |max_tokens: u64| {
        json!({"objective": "Append steps until told to stop",
               "context": {"repo_root": repo.display().to_string()},
               "model": home.model_id("Mock"), "max_tokens": max_tokens})
    };
    let stopped = client
        .execute(&ask(2000), Duration::from_secs(90))
        .await
        .unwrap();
    assert_eq!(
        kinds(&stopped)[0],
        IssueType::BudgetExceeded,
        "{stopped:#?}"
    );
    model.set_script(json!([{"text": "Done.", "usage": {"input": 100, "output": 20}}]));
    let done = client
        .execute(&ask(100_000), Duration::from_secs(90))
        .await
        .unwrap();
    assert_eq!(done.status, Status::Success, "{done:#?}");

    let (status, metrics) = client
        .send(Method::GET, "/metrics", None, Duration::from_secs(10))
        .await
        .unwrap();
    assert_eq!(status, 200);
    let metrics = String::from_utf8_lossy(&metrics);
    let total = usage_of(&stopped).plus(&usage_of(&done));
    assert_eq!(
        [
            "droid_executor_agent_runs_total{provider=\"droid\"}",
            "droid_executor_agent_failures_total{provider=\"droid\",reason=\"budget_exceeded\"}",
            "droid_executor_agent_tokens_total{provider=\"droid\",kind=\"input\"}",
            "droid_executor_agent_tokens_total{provider=\"droid\",kind=\"output\"}",
            "droid_executor_agent_tokens_total{provider=\"droid\",kind=\"cache_read\"}",
        ]
        .map(|s| series(&metrics, s)),
        [
            Some(2),
            Some(1),
            Some(total.input_tokens),
            Some(total.output_tokens),
            Some(total.cache_read_input_tokens),
        ],
        "{metrics}"
    );
    // only failures are counted as such: the successful run adds no series of its own
    assert_eq!(
        metrics
            .lines()
            .filter(|l| l.starts_with("droid_executor_agent_failures_total{"))
            .count(),
        1,
        "{metrics}"
    );
    let (code, log) = serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
}
