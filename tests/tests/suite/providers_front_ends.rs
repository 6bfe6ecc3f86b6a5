//! The `provider` field through every front-end of the binary, with the real Codex CLI (the
//! fastest of the four) against the scripted model: `run --provider codex` and its human report,
//! MCP `droid_submit`/`droid_pend` (the task id names the provider, the record's result names
//! the agent), `tasks list` (a PROVIDER column), the bridge's `POST /execute`, and a provider
//! that is not one refused by name.

use std::ffi::OsString;

use droid_contract::{ProviderId, Status};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::codex_home::{CodexHome, KEY_VAR, MODEL};
use tests::scripted_model::ScriptedModel;

use super::binary::{droid_executor, git_repo_at};
use super::bridge_harness::ServeProc;
use super::mcp_stdio::{Server, record_of};

/// Codex's `apply_patch` adding `name` with one line, then its final message.
fn create_then_say(name: &str) -> Value {
    json!([
        {"output": [{"type": "custom_tool_call", "status": "completed", "call_id": "c0",
                     "name": "apply_patch",
                     "input": format!("*** Begin Patch\n*** Add File: {name}\n+{name}\n*** End Patch\n")}]},
        {"output": [{"type": "message", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": format!("Created {name}."), "annotations": []}]}]}
    ])
}

/// A HOME where Codex talks to `model`, droid-executor passes Codex's key through, and
/// `repo` is a git repository; the environment to run the binary with.
fn world(model: &ScriptedModel) -> (CodexHome, Vec<(OsString, OsString)>) {
    let home = CodexHome::new(&model.base_url()).unwrap();
    git_repo_at(&home.path().join("repo"), &[("a.txt", "a\n")]);
    let config = home.path().join(".config/droid-executor");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("env_passthrough = [\"{KEY_VAR}\"]\n"),
    )
    .unwrap();
    let mut env = home.env();
    env.push(("DROID_EXECUTOR_CODEX_BIN".into(), agent_cli("codex").into()));
    (home, env)
}

fn repo(home: &CodexHome) -> std::path::PathBuf {
    home.path().join("repo")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_provider_flag_reaches_codex_and_the_report_names_it() {
    let model = ScriptedModel::start(create_then_say("b.txt"))
        .await
        .unwrap();
    let (home, env) = world(&model);
    let out = droid_executor(
        &[
            "run",
            "--provider",
            "codex",
            "--model",
            MODEL,
            "--command",
            "test -f b.txt",
            "Create b.txt",
        ],
        &env,
        &repo(&home),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let lines: Vec<&str> = out.stdout.lines().collect();
    assert!(lines[0].starts_with("status: success"), "{out:#?}");
    assert!(
        lines[1].starts_with("agent: codex (Codex CLI 0.169.0, model "),
        "{out:#?}"
    );
    assert!(
        out.stdout.contains("  A b.txt (+1 -0)  created by codex"),
        "{out:#?}"
    );
    assert!(
        out.stdout.contains("  verify    exit 0  test -f b.txt"),
        "{out:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_provider_that_is_not_one_is_refused_by_name() {
    let model = ScriptedModel::start(create_then_say("b.txt"))
        .await
        .unwrap();
    let (home, env) = world(&model);
    let out = droid_executor(
        &["run", "--json", "--provider", "gpt", "Create b.txt"],
        &env,
        &repo(&home),
    )
    .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    let res = out.result();
    assert_eq!(res.status, Status::Error);
    assert_eq!(
        res.issues[0].description,
        "$.provider: must be one of \"droid\", \"codex\", \"claude\", \"gemini\", \"opencode\", got \"gpt\""
    );
    assert!(model.requests().is_empty(), "nothing may run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_submit_with_a_provider_gives_a_task_of_that_provider() {
    let model = ScriptedModel::start(create_then_say("c.txt"))
        .await
        .unwrap();
    let (home, env) = world(&model);
    let repo = repo(&home);
    let mut server = Server::start(&env, &repo);
    server.initialize().await;
    let submitted = server
        .call(
            json!(2),
            "droid_submit",
            json!({"objective": "Create c.txt", "context": {"repo_root": repo},
                       "provider": "codex", "model": MODEL,
                       "suggested_commands": ["test -f c.txt"]}),
        )
        .await;
    let id = submitted["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task id: {submitted:#}"))
        .to_owned();
    assert!(id.starts_with("codex-"), "{id}");
    let pended = server
        .call(
            json!(3),
            "droid_pend",
            json!({"task_id": id, "wait_seconds": 120}),
        )
        .await;
    let rec = record_of(&pended);
    let res = rec
        .result
        .unwrap_or_else(|| panic!("not finished: {pended:#}"));
    assert_eq!(res.status, Status::Success, "{res:#?}");
    assert_eq!(
        res.agent.as_ref().map(|a| a.provider),
        Some(ProviderId::Codex)
    );
    assert_eq!(res.droid, None, "droid's field is for droid runs only");
    assert_eq!(res.files_changed[0].path, "c.txt");
    assert!(
        pended["content"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("\nagent: codex")),
        "{pended:#}"
    );
    drop(server);

    let listed = droid_executor(&["tasks", "list"], &env, &repo).await;
    assert_eq!(listed.code, Some(0), "{listed:#?}");
    let row = listed
        .stdout
        .lines()
        .find(|l| l.starts_with(&id))
        .unwrap_or_else(|| panic!("{id} not listed: {listed:#?}"));
    let cols: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(&cols[..3], [id.as_str(), "codex", "success"], "{row}");
    assert!(
        listed.stdout.starts_with("TASK")
            && listed.stdout.lines().next().unwrap().contains("PROVIDER"),
        "{listed:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_runs_a_request_naming_codex() {
    let model = ScriptedModel::start(create_then_say("d.txt"))
        .await
        .unwrap();
    let (home, env) = world(&model);
    let repo = repo(&home);
    let serve = ServeProc::start(&[], &env, home.path()).await;
    let body = home.path().join("request.json");
    std::fs::write(
        &body,
        json!({"objective": "Create d.txt", "context": {"repo_root": repo},
               "provider": "codex", "model": MODEL, "autonomy": "low",
               "suggested_commands": ["test -f d.txt"]})
        .to_string(),
    )
    .unwrap();
    let data = format!("@{}", body.display());
    let url = serve.url("/execute");
    let out = super::bridge_http::curl(&[
        "-H",
        "content-type: application/json",
        "--data-binary",
        &data,
        &url,
    ])
    .wait_with_output()
    .await
    .unwrap();
    let (code, log) = serve.stop().await;
    let res: droid_contract::ExecutionResult =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "not a result ({e}): {}\nserve exited {code:?}:\n{log}",
                String::from_utf8_lossy(&out.stdout)
            )
        });
    assert_eq!(res.status, Status::Success, "{res:#?}");
    assert_eq!(
        res.agent.as_ref().map(|a| a.provider),
        Some(ProviderId::Codex)
    );
    assert_eq!(res.files_changed[0].path, "d.txt");
    assert_eq!(res.tests.passed, Some(true));
}
