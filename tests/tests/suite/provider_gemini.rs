//! The engine end to end through the REAL Gemini CLI 0.61.0 (`provider: "gemini"`), driven by the
//! scripted model's Gemini wire (`parts` turns): files from git with the agent's highlights,
//! shell commands and verification, a model error, no auth type configured, timeout and
//! cancellation with nothing of the run left (Gemini runs shell commands in their own process
//! group), a resumed session, a lying final answer, autonomy (read_only offers no write tool;
//! `max_autonomy` caps the request), reasoning_effort refused by name, and one run through the
//! `droid-executor` binary (the supervisor path, `guard --stdin`).
//!
//! Every run passes a model (`-m`), which skips Gemini's router call.

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use droid_contract::{Autonomy, ProviderId, Status};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::gemini_home::GeminiHome;
use tests::procs::{pids_with_env, wait_env_value};
use tests::scripted_model::ScriptedModel;
use tokio_util::sync::CancellationToken;

use super::common::{Ran, git_repo, read_pid_file, run};
use super::provider_world::{self as shared, Agent, Edits, Leak};

/// The model every run asks for.
const MODEL: &str = "gemini-2.5-pro";

/// The variable the engine marks every process of a run with.
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";

/// Gemini's side of the provider world: a [`GeminiHome`], Gemini `parts` turns, every request
/// naming [`MODEL`].
struct Gemini;

type World = shared::World<Gemini>;

impl Agent for Gemini {
    const PROVIDER: ProviderId = ProviderId::Gemini;
    const VERSION: &'static str = "0.61.0";
    type Home = GeminiHome;

    fn home(_model: &ScriptedModel) -> GeminiHome {
        GeminiHome::new().unwrap()
    }

    fn home_path(home: &GeminiHome) -> &Path {
        home.path()
    }

    fn env(home: &GeminiHome, model: &ScriptedModel) -> Vec<(OsString, OsString)> {
        home.env(model.port())
    }

    fn request_fields() -> Value {
        json!({"model": MODEL})
    }

    fn shell(command: &str) -> Value {
        json!({"parts": [shell(command)]})
    }

    fn answer(t: &str) -> Value {
        json!({"parts": [text(t)]})
    }

    /// Every request: with a model given, Gemini makes no side call.
    fn turns(model: &ScriptedModel) -> Vec<Value> {
        model.requests()
    }

    /// The request's contents.
    fn sent(turn: &Value) -> String {
        turn["body"]["contents"].to_string()
    }
}

/// The tool names the model was offered in its first main (non-JSON) request.
fn offered_tools(w: &World) -> Vec<String> {
    let requests = w.model.requests();
    let main = requests
        .iter()
        .find(|r| r["aux"] == false && r["body"]["tools"].is_array())
        .expect("no main model request");
    let mut names: Vec<String> = main["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|f| f["name"].as_str().map(str::to_owned))
        .collect();
    names.sort();
    names
}

fn text(t: &str) -> Value {
    json!({"text": t})
}

fn call(name: &str, args: Value) -> Value {
    json!({"functionCall": {"name": name, "args": args}})
}

fn shell(command: &str) -> Value {
    call(
        "run_shell_command",
        json!({"command": command, "description": "run it"}),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_commands_and_verification_come_from_ground_truth() {
    // medium: auto_edit plus the shell tool
    let (w, ran) = shared::ground_truth::<Gemini>(
        |_| {
            json!([
                {"parts": [text("Creating."), call("write_file", json!({"file_path": "new.txt", "content": "one\ntwo\n"}))]},
                {"parts": [call("replace", json!({"file_path": "a.txt", "old_string": "hello", "new_string": "hello world", "instruction": "greet the world"}))]},
                {"parts": [shell("echo passing")]},
                {"parts": [shell("echo failing >&2; exit 3")]},
                {"parts": [text("Created new.txt and edited a.txt.")]}
            ])
        },
        "G-1",
        json!({"autonomy": "medium"}),
        Edits {
            highlights: ["edited by gemini", "created by gemini (2 lines)"],
            // Gemini does not report a shell command's exit code: None, never a guess
            exit_codes: [None, None],
        },
    )
    .await;
    let res = &ran.result;
    assert_eq!(res.commands_run[0].stdout_excerpt, "passing");
    assert_eq!(res.commands_run[1].stdout_excerpt, "failing");
    assert_eq!(res.summary, "Created new.txt and edited a.txt.");
    assert_eq!(res.droid, None, "the droid field is droid's only");
    let agent = res.agent.as_ref().unwrap();
    assert_eq!(agent.model.as_deref(), Some(MODEL));
    assert_eq!(agent.num_turns, Some(5));
    let tools = offered_tools(&w);
    for t in ["write_file", "replace", "run_shell_command"] {
        assert!(tools.contains(&t.to_owned()), "{t} not offered: {tools:?}");
    }
    // the prompt reached the model through stdin (`-p ""` adds nothing)
    let contents = &w.sent()[0];
    assert!(
        contents.contains("Create new.txt and edit a.txt"),
        "{contents}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_http_error_is_a_model_error() {
    let ran = shared::model_error::<Gemini>("Bad request: invalid parameter").await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["model_error"]);
    assert!(
        ran.result
            .summary
            .contains("Bad request: invalid parameter"),
        "{}",
        ran.result.summary
    );
    // gemini exits with the HTTP status modulo 256
    assert_eq!(ran.result.agent.as_ref().unwrap().exit_code, Some(144));
}

/// Waits for the sleeper's pid file, then reads the run's marker from the sleeper: every process
/// of the run carries it.
fn watch_sleeper(
    pid_file: &Path,
    cancel: Option<CancellationToken>,
) -> tokio::task::JoinHandle<(i32, String)> {
    let pid_file = pid_file.to_path_buf();
    tokio::spawn(async move {
        let pid = read_pid_file(&pid_file, Duration::from_secs(60)).await;
        let marker = wait_env_value(pid, MARKER_VAR, Duration::from_secs(5)).await;
        if let Some(c) = cancel {
            c.cancel();
        }
        (pid, marker)
    })
}

async fn assert_nothing_left(ran: &Ran, sleeper: i32, marker: &str) {
    shared::assert_gone::<Gemini>(ran, sleeper, Duration::from_secs(5)).await;
    assert_eq!(pids_with_env(MARKER_VAR, marker), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_model_times_out_and_nothing_survives() {
    let leak = Leak::<Gemini>::new("timeout").await;
    let watcher = watch_sleeper(&leak.pid_file, None);
    let ran = leak
        .time_out(json!({"autonomy": "high", "max_runtime_seconds": 10}))
        .await;
    let (sleeper, marker) = watcher.await.unwrap();
    let _ = std::fs::remove_file(&leak.pid_file);
    assert_eq!(ran.commands().len(), 1, "the shell call is still reported");
    assert_nothing_left(&ran, sleeper, &marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_gemini_and_its_children() {
    let leak = Leak::<Gemini>::new("cancel").await;
    let (watched, ran) = leak
        .cancel(
            json!({"autonomy": "high", "max_runtime_seconds": 90}),
            |c| watch_sleeper(&leak.pid_file, Some(c)),
        )
        .await;
    let (sleeper, marker) = watched.unwrap();
    let _ = std::fs::remove_file(&leak.pid_file);
    assert_nothing_left(&ran, sleeper, &marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_continues_with_its_session_id() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([Gemini::answer("First answer.")])).await;
    let (_first, second) = shared::resumed(
        &w,
        repo.path(),
        "FIRST-PROMPT remember this",
        "SECOND-PROMPT continue",
        |w| {
            w.model
                .set_script(json!([Gemini::answer("Second answer.")]))
        },
    )
    .await;
    assert_eq!(second.result.summary, "Second answer.");
    // the second run's model request carries the first run's conversation
    let history = w.sent().pop().unwrap();
    assert!(history.contains("FIRST-PROMPT"), "{history}");
    assert!(history.contains("First answer."), "{history}");
    assert!(history.contains("SECOND-PROMPT"), "{history}");

    // an unknown session is an error naming session_id, never a silent new session
    let third =
        shared::unknown_session(&w, repo.path(), "11111111-2222-3333-4444-555555555555").await;
    assert_eq!(third.result.status, Status::Failed, "{:#?}", third.result);
    assert_eq!(third.issue_kinds(), vec!["agent_error"]);
    assert!(
        third.result.issues[0].description.contains("session_id"),
        "{:#?}",
        third.result.issues
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_final_answer_is_contradicted_by_ground_truth() {
    // instructions at the contract's limit: the prompt goes through stdin whole
    let instructions = format!("INS-HEAD{}INS-TAIL", "i".repeat(100_000 - 16));
    let (w, ran) = shared::lying::<Gemini>(
        "I created done.txt and every test passes. All green.",
        json!({"autonomy": "high", "instructions": instructions}),
    )
    .await;
    let sent = &w.sent()[0];
    assert!(
        sent.contains(&instructions),
        "the instructions did not reach the model whole"
    );
    assert!(ran.result.status == Status::Partial, "{:#?}", ran.result);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_offers_no_write_tool() {
    let (w, ran) = shared::read_only::<Gemini>(
        |_| {
            json!([
                {"parts": [call("write_file", json!({"file_path": "x.txt", "content": "x\n"}))]},
                {"parts": [shell("touch y.txt")]},
                {"parts": [text("Wrote x.txt and y.txt.")]}
            ])
        },
        &["x.txt", "y.txt"],
    )
    .await;
    assert_eq!(
        ran.issue_kinds(),
        vec!["permission_denied", "permission_denied"]
    );
    let tools = offered_tools(&w);
    for t in ["write_file", "replace", "run_shell_command"] {
        assert!(!tools.contains(&t.to_owned()), "{t} offered: {tools:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_autonomy_caps_the_request() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::capped(json!([Gemini::answer("Nothing to do.")]), Autonomy::Low).await;
    let ran = run(
        &w.engine,
        &w.request(repo.path(), "Anything", json!({"autonomy": "high"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    // low → auto_edit: edits, no shell
    let tools = offered_tools(&w);
    assert!(tools.contains(&"write_file".to_owned()), "{tools:?}");
    assert!(
        !tools.contains(&"run_shell_command".to_owned()),
        "{tools:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_auth_type_in_settings_is_an_auth_failure() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([Gemini::answer("never")])).await;
    // env alone (GEMINI_API_KEY + GOOGLE_GEMINI_BASE_URL) is not enough: exit 41
    std::fs::remove_file(w.home_path().join(".gemini/settings.json")).unwrap();
    let ran = run(&w.engine, &w.request(repo.path(), "Anything", json!({}))).await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["auth_failure"]);
    assert!(
        ran.result.issues[0]
            .suggested_action
            .contains("selectedType"),
        "{:#?}",
        ran.result.issues
    );
    assert_eq!(ran.result.agent.as_ref().unwrap().exit_code, Some(41));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_effort_is_refused_naming_the_field() {
    let ran = shared::refused_effort::<Gemini>("high").await;
    assert!(
        ran.result.issues[0]
            .description
            .contains("reasoning_effort"),
        "{:#?}",
        ran.result.issues
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_through_the_binary_with_gemini() {
    let (_model, _out, result) = shared::through_the_binary::<Gemini>(
        |_| {
            json!([
                {"parts": [call("write_file", json!({"file_path": "b.txt", "content": "b\n"}))]},
                {"parts": [text("Created b.txt.")]}
            ])
        },
        json!({}),
        "created by gemini (1 line)",
    )
    .await;
    assert_eq!(result.issues, vec![]);
}
