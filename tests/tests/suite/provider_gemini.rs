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

use droid_contract::{Autonomy, ChangeType, FileChange, ProviderId, Status};
use droid_exec::config::AgentProgram;
use droid_exec::{Engine, EngineConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::gemini_home::GeminiHome;
use tests::procs::{pids_with_env, wait_env_value, wait_gone};
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::binary::{droid_executor, git_repo_at};
use super::common::{Ran, git_repo, read_pid_file, request, run, run_with};

/// The model every run asks for.
const MODEL: &str = "gemini-2.5-pro";

/// The variable the engine marks every process of a run with.
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";

/// A scripted model, a Gemini HOME, a scratch dir, and an engine that runs the real Gemini CLI.
struct World {
    model: ScriptedModel,
    home: GeminiHome,
    _scratch: TempDir,
    engine: Engine,
}

impl World {
    /// With `dirs` writable to its runs besides the repository (`sandbox_writable`): where a
    /// test's commands leave what the test reads (pid files).
    async fn granting(script: Value, dirs: &[&Path]) -> World {
        let mut w = World::new(script).await;
        let mut cfg = w.engine.config().clone();
        cfg.sandbox_writable
            .extend(dirs.iter().map(|d| d.to_path_buf()));
        w.engine = Engine::new(cfg);
        w
    }

    async fn new(script: Value) -> World {
        World::capped(script, Autonomy::High).await
    }

    async fn capped(script: Value, max_autonomy: Autonomy) -> World {
        let model = ScriptedModel::start(script).await.unwrap();
        let home = GeminiHome::new().unwrap();
        let scratch = TempDir::new("gemini-scratch").unwrap();
        let engine = Engine::new(EngineConfig {
            droid_bin: None,
            droid_source: "test".into(),
            droid_warnings: Vec::new(),
            agents: vec![AgentProgram {
                provider: ProviderId::Gemini,
                program: Some(agent_cli("gemini")),
                source: "test".into(),
            }],
            env: home.env(model.port()),
            allowed_roots: Vec::new(),
            max_autonomy,
            default_timeout: Duration::from_secs(60),
            default_model: None,
            verify: true,
            sandbox: Default::default(),
            sandbox_writable: Vec::new(),
            excerpt_bytes: 4096,
            kill_grace: Duration::from_secs(5),
            scratch_root: scratch.path().to_path_buf(),
            store_dir: None,
            max_concurrent: 4,
            task_ttl: Duration::from_secs(24 * 3600),
            supervisor: None,
            cgroups: true,
            limits: Default::default(),
            redact: Vec::new(),
            worktrees: Default::default(),
            client_env: Default::default(),
        });
        World {
            model,
            home,
            _scratch: scratch,
            engine,
        }
    }

    /// The tool names the model was offered in its first main (non-JSON) request.
    fn offered_tools(&self) -> Vec<String> {
        let requests = self.model.requests();
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
}

/// A Gemini request for `repo` with `extra` fields.
fn gemini_request(repo: &Path, objective: &str, extra: Value) -> Value {
    let mut r = request(
        repo,
        objective,
        json!({"provider": "gemini", "model": MODEL}),
    );
    if let (Value::Object(base), Value::Object(more)) = (&mut r, extra) {
        base.extend(more);
    }
    r
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
    let repo = git_repo(&[("a.txt", "hello\n"), ("keep.txt", "untouched\n")]);
    let w = World::new(json!([
        {"parts": [text("Creating."), call("write_file", json!({"file_path": "new.txt", "content": "one\ntwo\n"}))]},
        {"parts": [call("replace", json!({"file_path": "a.txt", "old_string": "hello", "new_string": "hello world", "instruction": "greet the world"}))]},
        {"parts": [shell("echo passing")]},
        {"parts": [shell("echo failing >&2; exit 3")]},
        {"parts": [text("Created new.txt and edited a.txt.")]}
    ]))
    .await;
    // medium: auto_edit plus the shell tool
    let ran = run(
        &w.engine,
        &gemini_request(
            repo.path(),
            "Create new.txt and edit a.txt",
            json!({"autonomy": "medium", "task_id": "G-1",
                   "suggested_commands": ["test -f new.txt", "grep -q nope a.txt"]}),
        ),
    )
    .await;
    let res = &ran.result;
    assert_eq!(
        res.files_changed,
        vec![
            FileChange {
                path: "a.txt".into(),
                change_type: ChangeType::Modified,
                old_path: None,
                highlights: vec!["edited by gemini".into()],
                lines_added: Some(1),
                lines_removed: Some(1),
            },
            FileChange {
                path: "new.txt".into(),
                change_type: ChangeType::Added,
                old_path: None,
                highlights: vec!["created by gemini (2 lines)".into()],
                lines_added: Some(2),
                lines_removed: Some(0),
            },
        ],
        "{res:#?}"
    );
    // Gemini does not report a shell command's exit code: None, never a guess
    assert_eq!(
        ran.commands(),
        vec![
            ("agent", "echo passing".to_owned(), None),
            ("agent", "echo failing >&2; exit 3".to_owned(), None),
            ("verify", "test -f new.txt".to_owned(), Some(0)),
            ("verify", "grep -q nope a.txt".to_owned(), Some(1)),
        ]
    );
    assert_eq!(res.commands_run[0].stdout_excerpt, "passing");
    assert_eq!(res.commands_run[1].stdout_excerpt, "failing");
    assert_eq!(res.status, Status::Partial);
    assert_eq!(ran.issue_kinds(), vec!["test_failure"]);
    assert_eq!(res.tests.passed, Some(false));
    assert_eq!(res.summary, "Created new.txt and edited a.txt.");
    assert_eq!(res.task_id.as_deref(), Some("G-1"));
    assert_eq!(res.droid, None, "the droid field is droid's only");
    let agent = res.agent.as_ref().unwrap();
    assert_eq!(agent.provider, ProviderId::Gemini);
    assert_eq!(agent.version.as_deref(), Some("0.61.0"));
    assert_eq!(agent.model.as_deref(), Some(MODEL));
    assert_eq!(agent.num_turns, Some(5));
    assert!(res.session_id.is_some());
    let tools = w.offered_tools();
    for t in ["write_file", "replace", "run_shell_command"] {
        assert!(tools.contains(&t.to_owned()), "{t} not offered: {tools:?}");
    }
    // the prompt reached the model through stdin (`-p ""` adds nothing)
    let contents = w.model.requests()[0]["body"]["contents"].to_string();
    assert!(
        contents.contains("Create new.txt and edit a.txt"),
        "{contents}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_http_error_is_a_model_error() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"status": 400, "error_message": "Bad request: invalid parameter"}]))
        .await;
    let ran = run(
        &w.engine,
        &gemini_request(repo.path(), "Say something", json!({})),
    )
    .await;
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

/// Turn 0 starts a `setsid sleep` (its own session) and records its pid; turn 1 hangs forever.
fn leak_then_hang(pid_file: &Path) -> Value {
    json!([
        {"parts": [shell(&format!("setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > {}", pid_file.display()))]},
        {"hang": true}
    ])
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
    assert!(
        wait_gone(ran.droid_pid(), Duration::from_secs(5)).await,
        "gemini survived"
    );
    assert!(
        wait_gone(sleeper, Duration::from_secs(5)).await,
        "the setsid sleep survived"
    );
    assert_eq!(pids_with_env(MARKER_VAR, marker), Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_model_times_out_and_nothing_survives() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fixture = TempDir::new("gemini-fixture").unwrap();
    let pid_file = fixture.path().join("gemini-sleep-timeout.pid");
    let w = World::granting(leak_then_hang(&pid_file), &[fixture.path()]).await;
    let watcher = watch_sleeper(&pid_file, None);
    let ran = run(
        &w.engine,
        &gemini_request(
            repo.path(),
            "Start a sleeper",
            json!({"autonomy": "high", "max_runtime_seconds": 10}),
        ),
    )
    .await;
    let (sleeper, marker) = watcher.await.unwrap();
    let _ = std::fs::remove_file(&pid_file);
    assert_eq!(ran.result.status, Status::Timeout, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["timeout"]);
    assert_eq!(ran.commands().len(), 1, "the shell call is still reported");
    assert_nothing_left(&ran, sleeper, &marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_gemini_and_its_children() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fixture = TempDir::new("gemini-fixture").unwrap();
    let pid_file = fixture.path().join("gemini-sleep-cancel.pid");
    let w = World::granting(leak_then_hang(&pid_file), &[fixture.path()]).await;
    let cancel = CancellationToken::new();
    let watcher = watch_sleeper(&pid_file, Some(cancel.clone()));
    let ran = run_with(
        &w.engine,
        &gemini_request(
            repo.path(),
            "Start a sleeper",
            json!({"autonomy": "high", "max_runtime_seconds": 90}),
        ),
        cancel,
    )
    .await;
    let (sleeper, marker) = watcher.await.unwrap();
    let _ = std::fs::remove_file(&pid_file);
    assert_eq!(ran.result.status, Status::Cancelled, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["cancelled"]);
    assert_nothing_left(&ran, sleeper, &marker).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_continues_with_its_session_id() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"parts": [text("First answer.")]}])).await;
    let first = run(
        &w.engine,
        &gemini_request(repo.path(), "FIRST-PROMPT remember this", json!({})),
    )
    .await;
    assert_eq!(first.result.status, Status::Success, "{:#?}", first.result);
    let session = first.result.session_id.clone().expect("no session id");
    w.model
        .set_script(json!([{"parts": [text("Second answer.")]}]));
    let second = run(
        &w.engine,
        &gemini_request(
            repo.path(),
            "SECOND-PROMPT continue",
            json!({"session_id": session}),
        ),
    )
    .await;
    assert_eq!(
        second.result.status,
        Status::Success,
        "{:#?}",
        second.result
    );
    assert_eq!(second.result.session_id.as_deref(), Some(session.as_str()));
    assert_eq!(second.result.summary, "Second answer.");
    // the second run's model request carries the first run's conversation
    let last = w.model.requests().last().cloned().unwrap();
    let history = last["body"]["contents"].to_string();
    assert!(history.contains("FIRST-PROMPT"), "{history}");
    assert!(history.contains("First answer."), "{history}");
    assert!(history.contains("SECOND-PROMPT"), "{history}");

    // an unknown session is an error naming session_id, never a silent new session
    let third = run(
        &w.engine,
        &gemini_request(
            repo.path(),
            "Continue",
            json!({"session_id": "11111111-2222-3333-4444-555555555555"}),
        ),
    )
    .await;
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
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([
        {"parts": [text("I created done.txt and every test passes. All green.")]}
    ]))
    .await;
    // instructions at the contract's limit: the prompt goes through stdin whole
    let instructions = format!("INS-HEAD{}INS-TAIL", "i".repeat(100_000 - 16));
    let ran = run(
        &w.engine,
        &gemini_request(
            repo.path(),
            "Create done.txt",
            json!({"autonomy": "high", "suggested_commands": ["test -f done.txt"],
                   "instructions": instructions}),
        ),
    )
    .await;
    let sent = w.model.requests()[0]["body"]["contents"].to_string();
    assert!(
        sent.contains(&instructions),
        "the instructions did not reach the model whole"
    );
    assert!(ran.result.status == Status::Partial, "{:#?}", ran.result);
    assert_eq!(ran.result.files_changed, vec![]);
    assert_eq!(ran.result.tests.passed, Some(false));
    assert!(
        ran.issue_kinds().contains(&"test_failure"),
        "{:#?}",
        ran.result.issues
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_offers_no_write_tool() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([
        {"parts": [call("write_file", json!({"file_path": "x.txt", "content": "x\n"}))]},
        {"parts": [shell("touch y.txt")]},
        {"parts": [text("Wrote x.txt and y.txt.")]}
    ]))
    .await;
    let ran = run(
        &w.engine,
        &gemini_request(repo.path(), "Write x.txt", json!({"autonomy": "read_only"})),
    )
    .await;
    assert!(!repo.path().join("x.txt").exists());
    assert!(!repo.path().join("y.txt").exists());
    assert_eq!(ran.result.files_changed, vec![]);
    assert_eq!(ran.result.status, Status::Partial, "{:#?}", ran.result);
    assert_eq!(
        ran.issue_kinds(),
        vec!["permission_denied", "permission_denied"]
    );
    let tools = w.offered_tools();
    for t in ["write_file", "replace", "run_shell_command"] {
        assert!(!tools.contains(&t.to_owned()), "{t} offered: {tools:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_autonomy_caps_the_request() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::capped(json!([{"parts": [text("Nothing to do.")]}]), Autonomy::Low).await;
    let ran = run(
        &w.engine,
        &gemini_request(repo.path(), "Anything", json!({"autonomy": "high"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    // low → auto_edit: edits, no shell
    let tools = w.offered_tools();
    assert!(tools.contains(&"write_file".to_owned()), "{tools:?}");
    assert!(
        !tools.contains(&"run_shell_command".to_owned()),
        "{tools:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_auth_type_in_settings_is_an_auth_failure() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"parts": [text("never")]}])).await;
    // env alone (GEMINI_API_KEY + GOOGLE_GEMINI_BASE_URL) is not enough: exit 41
    std::fs::remove_file(w.home.path().join(".gemini/settings.json")).unwrap();
    let ran = run(
        &w.engine,
        &gemini_request(repo.path(), "Anything", json!({})),
    )
    .await;
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
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"parts": [text("never")]}])).await;
    let ran = run(
        &w.engine,
        &gemini_request(repo.path(), "Anything", json!({"reasoning_effort": "high"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Error, "{:#?}", ran.result);
    assert!(
        ran.result.issues[0]
            .description
            .contains("reasoning_effort"),
        "{:#?}",
        ran.result.issues
    );
    assert_eq!(w.model.requests(), Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_through_the_binary_with_gemini() {
    let model = ScriptedModel::start(json!([
        {"parts": [call("write_file", json!({"file_path": "b.txt", "content": "b\n"}))]},
        {"parts": [text("Created b.txt.")]}
    ]))
    .await
    .unwrap();
    let home = GeminiHome::new().unwrap();
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "hello\n")]);
    let req = gemini_request(
        &repo,
        "Create b.txt",
        json!({"suggested_commands": ["test -f b.txt"]}),
    );
    let file = home.path().join("request.json");
    std::fs::write(&file, req.to_string()).unwrap();
    let mut env: Vec<(OsString, OsString)> = home.env(model.port());
    env.push((
        "DROID_EXECUTOR_GEMINI_BIN".into(),
        agent_cli("gemini").into(),
    ));
    let args: Vec<OsString> = vec![
        "run".into(),
        "--json".into(),
        "--request".into(),
        file.into_os_string(),
    ];
    let out = droid_executor(&args, &env, home.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.issues, vec![]);
    assert_eq!(
        result.files_changed,
        vec![FileChange {
            path: "b.txt".into(),
            change_type: ChangeType::Added,
            old_path: None,
            highlights: vec!["created by gemini (1 line)".into()],
            lines_added: Some(1),
            lines_removed: Some(0),
        }]
    );
    assert_eq!(result.tests.passed, Some(true));
    assert_eq!(result.summary, "Created b.txt.");
}
