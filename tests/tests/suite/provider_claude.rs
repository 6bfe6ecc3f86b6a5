//! The engine end to end through the REAL Claude Code 2.1.330 (`claude -p --output-format
//! stream-json --verbose`), driven by the scripted model's Anthropic Messages API: ground-truth
//! files and commands, verification, a model error, timeout and cancellation with nothing left
//! running, a resumed session, a lying agent, the autonomy levels (and the server's cap), and one
//! run through the `droid-executor` binary and its supervisor.
//!
//! Claude Code's Edit needs a Read of the file earlier in the conversation, so the scripts read
//! before they edit. Tool-use ids are the script's own (`toolu_N`).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use droid_contract::{Autonomy, FileChange, ProviderId, Status};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::claude_home::ClaudeHome;
use tests::procs::is_alive;
use tests::scripted_model::ScriptedModel;

use super::common::{git_repo, run};
use super::provider_world::{self as shared, Agent, Edits, Leak};

/// Claude Code's side of the provider world: a [`ClaudeHome`], Anthropic Messages turns.
struct Claude;

type World = shared::World<Claude>;

impl Agent for Claude {
    const PROVIDER: ProviderId = ProviderId::Claude;
    const VERSION: &'static str = "2.1.330";
    type Home = ClaudeHome;

    fn home(_model: &ScriptedModel) -> ClaudeHome {
        ClaudeHome::new().unwrap()
    }

    fn home_path(home: &ClaudeHome) -> &Path {
        home.path()
    }

    fn env(home: &ClaudeHome, model: &ScriptedModel) -> Vec<(OsString, OsString)> {
        home.env(&anthropic_url(model))
    }

    fn shell(command: &str) -> Value {
        json!({"content": [bash("toolu_1", command)]})
    }

    fn answer(t: &str) -> Value {
        text(t)
    }

    /// The Messages API posts.
    fn turns(model: &ScriptedModel) -> Vec<Value> {
        model
            .requests()
            .into_iter()
            .filter(|r| r["method"] == "POST")
            .collect()
    }

    /// The request's messages.
    fn sent(turn: &Value) -> String {
        serde_json::to_string(&turn["body"]["messages"]).unwrap()
    }
}

/// The scripted model's root as `ANTHROPIC_BASE_URL` (Claude Code appends `/v1/messages`).
fn anthropic_url(model: &ScriptedModel) -> String {
    format!("http://127.0.0.1:{}", model.port())
}

fn p(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

fn tool(id: &str, name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "id": id, "name": name, "input": input})
}

fn bash(id: &str, command: &str) -> Value {
    tool(
        id,
        "Bash",
        json!({"command": command, "description": "run it"}),
    )
}

fn text(t: &str) -> Value {
    json!({"content": [{"type": "text", "text": t}]})
}

fn paths(files: &[FileChange]) -> Vec<&str> {
    files.iter().map(|f| f.path.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_commands_and_verification_come_from_ground_truth() {
    let (w, ran) = shared::ground_truth::<Claude>(
        |r| {
            json!([
                {"content": [{"type": "text", "text": "Reading first."},
                             tool("toolu_1", "Read", json!({"file_path": p(r, "a.txt")})),
                             tool("toolu_2", "Write", json!({"file_path": p(r, "new.txt"), "content": "one\ntwo\n"}))]},
                {"content": [tool("toolu_3", "Edit", json!({"file_path": p(r, "a.txt"), "old_string": "hello", "new_string": "hello world"}))]},
                {"content": [bash("toolu_4", "echo passing")]},
                {"content": [bash("toolu_5", "echo failing >&2; exit 3")]},
                text("Done: created new.txt and edited a.txt.")
            ])
        },
        "C-1",
        json!({}),
        Edits {
            highlights: ["edited by claude (+1 -1)", "created by claude (2 lines)"],
            exit_codes: [Some(0), Some(3)],
        },
    )
    .await;
    let res = &ran.result;
    assert_eq!(res.commands_run[0].stdout_excerpt, "passing");
    assert_eq!(res.commands_run[1].stdout_excerpt, "failing");
    assert_eq!(res.summary, "Done: created new.txt and edited a.txt.");
    let agent = res.agent.as_ref().unwrap();
    assert_eq!(res.droid, None);
    // Claude Code counts a turn per tool result plus the final answer
    assert_eq!(agent.num_turns, Some(6));
    // the prompt went through stdin and reached the model
    let first = &w.sent()[0];
    assert!(first.contains("Create new.txt and edit a.txt"), "{first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_http_error_is_a_model_error() {
    let ran = shared::model_error::<Claude>("Bad request: invalid parameter").await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["model_error"]);
    assert!(
        ran.result.issues[0]
            .description
            .contains("Bad request: invalid parameter"),
        "{:#?}",
        ran.result.issues
    );
    assert!(
        ran.result.issues[0]
            .suggested_action
            .contains("ANTHROPIC_BASE_URL")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_key_is_an_auth_failure() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"status": 401, "error_message": "invalid x-api-key"}])).await;
    let ran = run(
        &w.engine,
        &w.request(repo.path(), "Say something", json!({})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["auth_failure"]);
    assert!(
        ran.result.issues[0]
            .suggested_action
            .contains("ANTHROPIC_API_KEY")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transient_rate_limit_is_retried() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    // the first attempt gets 429, the retry (CLAUDE_CODE_MAX_RETRIES is 3, not 0) succeeds
    let w = World::new(
        json!([{"status": 429, "fail_times": 1, "error_message": "slow down",
                               "content": [{"type": "text", "text": "Answered after a retry."}]}]),
    )
    .await;
    let ran = run(
        &w.engine,
        &w.request(repo.path(), "Say something", json!({})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.result.summary, "Answered after a retry.");
    assert_eq!(w.turns().len(), 2);
    assert!(
        ran.result.logs.iter().any(|l| l.contains("api_retry")),
        "{:#?}",
        ran.result.logs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_model_times_out_and_nothing_survives() {
    let leak = Leak::<Claude>::new("timeout").await;
    let ran = leak.time_out(json!({"max_runtime_seconds": 6})).await;
    let sleeper = leak.sleeper(Duration::from_secs(1)).await;
    assert_eq!(ran.commands().len(), 1, "the Bash call is still reported");
    shared::assert_gone::<Claude>(&ran, sleeper, Duration::from_secs(5)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_claude_and_its_children() {
    let leak = Leak::<Claude>::new("cancel").await;
    let (sleeper, ran) = leak
        .cancel(json!({"max_runtime_seconds": 90}), |c| {
            shared::cancel_on_pid(&leak.pid_file, c)
        })
        .await;
    let _ = std::fs::remove_file(&leak.pid_file);
    shared::assert_gone::<Claude>(&ran, sleeper, Duration::from_secs(5)).await;
    assert!(!is_alive(sleeper));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_and_an_unknown_one_is_named() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    // the turn is the number of assistant messages: the resumed run sends the first one back
    let w = World::new(json!([text("First answer."), text("Second answer.")])).await;
    let (first, second) = shared::resumed(
        &w,
        repo.path(),
        "Remember FIRST-PROMPT",
        "Continue with SECOND-PROMPT",
        |_| {},
    )
    .await;
    assert_eq!(first.result.summary, "First answer.");
    assert_eq!(second.result.summary, "Second answer.");
    let last = w.sent().pop().unwrap();
    assert!(
        last.contains("FIRST-PROMPT") && last.contains("SECOND-PROMPT"),
        "{last}"
    );

    let unknown =
        shared::unknown_session(&w, repo.path(), "11111111-2222-4333-8444-555555555555").await;
    assert_eq!(
        unknown.result.status,
        Status::Failed,
        "{:#?}",
        unknown.result
    );
    assert_eq!(unknown.issue_kinds(), vec!["agent_error"]);
    assert!(
        unknown.result.issues[0].description.contains(
            "No conversation found with session ID: 11111111-2222-4333-8444-555555555555"
        ),
        "{:#?}",
        unknown.result.issues
    );
    assert!(
        unknown.result.issues[0]
            .suggested_action
            .contains("session_id")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_agent_is_contradicted_by_ground_truth() {
    let claim = "I created done.txt and every test passes.\n```droid-executor-report\n{\"status\": \"success\", \"summary\": \"Created done.txt; tests green.\", \"files\": [{\"path\": \"done.txt\", \"highlights\": [\"made it\"]}]}\n```";
    let (_w, ran) = shared::lying::<Claude>(claim, json!({})).await;
    let res = &ran.result;
    // it finished, but our re-run contradicts its "success": partial, never success
    assert_eq!(res.status, Status::Partial, "{res:#?}");
    assert_eq!(ran.issue_kinds(), vec!["test_failure"], "{res:#?}");
}

/// Writes `w.txt` with Write, then `b.txt` with a shell command acceptEdits does not count as
/// an edit (it does count a plain `touch` or a `>` redirection in repo_root), then ends.
fn write_and_touch(r: &Path) -> Value {
    json!([
        {"content": [tool("toolu_1", "Write", json!({"file_path": p(r, "w.txt"), "content": "w\n"}))]},
        {"content": [bash("toolu_2", "sh -c 'touch b.txt'")]},
        text("Finished.")
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_really_prevents_writes() {
    let (_w, ran) = shared::read_only::<Claude>(write_and_touch, &["w.txt", "b.txt"]).await;
    assert_eq!(
        ran.issue_kinds(),
        vec!["permission_denied", "permission_denied"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_autonomy_caps_and_high_runs_everything() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let r = repo.path();
    // asked high, capped at low: file edits yes, a file-changing shell command no
    let w = World::capped(write_and_touch(r), Autonomy::Low).await;
    let ran = run(
        &w.engine,
        &w.request(r, "Write files", json!({"autonomy": "high"})),
    )
    .await;
    assert_eq!(
        paths(&ran.result.files_changed),
        ["w.txt"],
        "{:#?}",
        ran.result
    );
    assert!(!r.join("b.txt").exists());
    assert_eq!(ran.result.status, Status::Partial);
    assert_eq!(ran.issue_kinds(), vec!["permission_denied"]);

    // high, uncapped: bypassPermissions (with IS_SANDBOX=1 when the suite runs as root)
    let repo = git_repo(&[("a.txt", "x\n")]);
    let r = repo.path();
    let w = World::new(write_and_touch(r)).await;
    let ran = run(
        &w.engine,
        &w.request(r, "Write files", json!({"autonomy": "high"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(paths(&ran.result.files_changed), ["b.txt", "w.txt"]);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_and_effort_reach_the_model() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([text("Thought hard.")])).await;
    let ran = run(
        &w.engine,
        &w.request(
            repo.path(),
            "Think",
            json!({"model": "claude-scripted-1", "reasoning_effort": "high"}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    let body = &w.turns()[0]["body"];
    assert_eq!(body["model"], "claude-scripted-1");
    assert_eq!(body["output_config"]["effort"], "high");
    let agent = ran.result.agent.as_ref().unwrap();
    assert_eq!(agent.model.as_deref(), Some("claude-scripted-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effort_claude_lacks_is_refused_before_anything_runs() {
    let ran = shared::refused_effort::<Claude>("minimal").await;
    assert_eq!(ran.issue_kinds(), vec!["validation_error"]);
    assert!(
        ran.result.issues[0]
            .description
            .contains("reasoning_effort")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_through_the_binary_and_its_supervisor() {
    let (model, _out, result) = shared::through_the_binary::<Claude>(
        |repo| {
            json!([
                {"content": [tool("toolu_1", "Write", json!({"file_path": p(repo, "b.txt"), "content": "b\n"}))]},
                text("Created b.txt.")
            ])
        },
        json!({}),
        "created by claude (1 line)",
    )
    .await;
    assert_eq!(result.issues, vec![]);
    // the supervisor (`guard --stdin FILE`) handed claude the prompt as its stdin
    let first = Claude::sent(&Claude::turns(&model)[0]);
    assert!(first.contains("Create b.txt"), "{first}");
}
