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

use droid_contract::{Autonomy, ChangeType, FileChange, ProviderId, Status};
use droid_exec::config::AgentProgram;
use droid_exec::{Engine, EngineConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::claude_home::ClaudeHome;
use tests::procs::{is_alive, wait_gone};
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::binary::{droid_executor, git_repo_at};
use super::common::{git_repo, read_pid_file, request, run, run_with};

/// A scripted model, a Claude Code HOME that points at it, a scratch dir, and an engine whose
/// claude is the real one.
struct World {
    model: ScriptedModel,
    _home: ClaudeHome,
    _scratch: TempDir,
    engine: Engine,
}

/// The scripted model's root as `ANTHROPIC_BASE_URL` (Claude Code appends `/v1/messages`).
fn anthropic_url(model: &ScriptedModel) -> String {
    format!("http://127.0.0.1:{}", model.port())
}

fn config(env: Vec<(OsString, OsString)>, scratch: &Path, max_autonomy: Autonomy) -> EngineConfig {
    EngineConfig {
        droid_bin: None,
        droid_source: "test".into(),
        droid_warnings: Vec::new(),
        agents: vec![AgentProgram {
            provider: ProviderId::Claude,
            program: Some(agent_cli("claude")),
            source: "test".into(),
        }],
        env,
        allowed_roots: Vec::new(),
        max_autonomy,
        default_timeout: Duration::from_secs(60),
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
    }
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
        let home = ClaudeHome::new().unwrap();
        let scratch = TempDir::new("claude-scratch").unwrap();
        let engine = Engine::new(config(
            home.env(&anthropic_url(&model)),
            scratch.path(),
            max_autonomy,
        ));
        World {
            model,
            _home: home,
            _scratch: scratch,
            engine,
        }
    }

    /// The model requests (Messages API posts only).
    fn posts(&self) -> Vec<Value> {
        self.model
            .requests()
            .into_iter()
            .filter(|r| r["method"] == "POST")
            .collect()
    }
}

/// A request for `repo` run by claude, with `extra` fields.
fn claude_request(repo: &Path, objective: &str, extra: Value) -> Value {
    let mut r = request(repo, objective, extra);
    r["provider"] = json!("claude");
    r
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
    let repo = git_repo(&[("a.txt", "hello\n"), ("keep.txt", "untouched\n")]);
    let r = repo.path();
    let w = World::new(json!([
        {"content": [{"type": "text", "text": "Reading first."},
                     tool("toolu_1", "Read", json!({"file_path": p(r, "a.txt")})),
                     tool("toolu_2", "Write", json!({"file_path": p(r, "new.txt"), "content": "one\ntwo\n"}))]},
        {"content": [tool("toolu_3", "Edit", json!({"file_path": p(r, "a.txt"), "old_string": "hello", "new_string": "hello world"}))]},
        {"content": [bash("toolu_4", "echo passing")]},
        {"content": [bash("toolu_5", "echo failing >&2; exit 3")]},
        text("Done: created new.txt and edited a.txt.")
    ]))
    .await;
    let ran = run(
        &w.engine,
        &claude_request(
            r,
            "Create new.txt and edit a.txt",
            json!({"task_id": "C-1", "suggested_commands": ["test -f new.txt", "grep -q nope a.txt"]}),
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
                highlights: vec!["edited by claude (+1 -1)".into()],
                lines_added: Some(1),
                lines_removed: Some(1),
            },
            FileChange {
                path: "new.txt".into(),
                change_type: ChangeType::Added,
                old_path: None,
                highlights: vec!["created by claude (2 lines)".into()],
                lines_added: Some(2),
                lines_removed: Some(0),
            },
        ],
        "{res:#?}"
    );
    assert_eq!(
        ran.commands(),
        vec![
            ("agent", "echo passing".to_owned(), Some(0)),
            ("agent", "echo failing >&2; exit 3".to_owned(), Some(3)),
            ("verify", "test -f new.txt".to_owned(), Some(0)),
            ("verify", "grep -q nope a.txt".to_owned(), Some(1)),
        ]
    );
    assert_eq!(res.commands_run[0].stdout_excerpt, "passing");
    assert_eq!(res.commands_run[1].stdout_excerpt, "failing");
    assert_eq!(res.status, Status::Partial);
    assert_eq!(ran.issue_kinds(), vec!["test_failure"]);
    assert_eq!(res.tests.passed, Some(false));
    assert_eq!(res.summary, "Done: created new.txt and edited a.txt.");
    assert_eq!(res.task_id.as_deref(), Some("C-1"));
    let agent = res.agent.as_ref().unwrap();
    assert_eq!(agent.provider, ProviderId::Claude);
    assert_eq!(res.droid, None);
    assert_eq!(agent.version.as_deref(), Some("2.1.330"));
    // Claude Code counts a turn per tool result plus the final answer
    assert_eq!(agent.num_turns, Some(6));
    assert!(res.session_id.is_some());
    // the prompt went through stdin and reached the model
    let first = serde_json::to_string(&w.posts()[0]["body"]["messages"]).unwrap();
    assert!(first.contains("Create new.txt and edit a.txt"), "{first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_http_error_is_a_model_error() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"status": 400, "error_message": "Bad request: invalid parameter"}]))
        .await;
    let ran = run(
        &w.engine,
        &claude_request(repo.path(), "Say something", json!({})),
    )
    .await;
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
        &claude_request(repo.path(), "Say something", json!({})),
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
        &claude_request(repo.path(), "Say something", json!({})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.result.summary, "Answered after a retry.");
    assert_eq!(w.posts().len(), 2);
    assert!(
        ran.result.logs.iter().any(|l| l.contains("api_retry")),
        "{:#?}",
        ran.result.logs
    );
}

/// Turn 0 starts a `setsid sleep` (its own session) through Bash and records its pid; turn 1
/// hangs forever.
fn leak_then_hang(pid_file: &Path) -> Value {
    json!([
        {"content": [bash("toolu_1", &format!("setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > {}", pid_file.display()))]},
        {"hang": true}
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_model_times_out_and_nothing_survives() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fixture = TempDir::new("claude-fixture").unwrap();
    let pid_file = fixture.path().join("claude-sleep-timeout.pid");
    let w = World::granting(leak_then_hang(&pid_file), &[fixture.path()]).await;
    let ran = run(
        &w.engine,
        &claude_request(
            repo.path(),
            "Start a sleeper",
            json!({"max_runtime_seconds": 6}),
        ),
    )
    .await;
    let sleeper = read_pid_file(&pid_file, Duration::from_secs(1)).await;
    let _ = std::fs::remove_file(&pid_file);
    assert_eq!(ran.result.status, Status::Timeout, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["timeout"]);
    assert_eq!(ran.commands().len(), 1, "the Bash call is still reported");
    assert!(
        wait_gone(ran.droid_pid(), Duration::from_secs(5)).await,
        "claude survived"
    );
    assert!(
        wait_gone(sleeper, Duration::from_secs(5)).await,
        "the setsid sleep survived"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_claude_and_its_children() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fixture = TempDir::new("claude-fixture").unwrap();
    let pid_file = fixture.path().join("claude-sleep-cancel.pid");
    let w = World::granting(leak_then_hang(&pid_file), &[fixture.path()]).await;
    let cancel = CancellationToken::new();
    let trigger = {
        let cancel = cancel.clone();
        let pid_file = pid_file.clone();
        tokio::spawn(async move {
            let pid = read_pid_file(&pid_file, Duration::from_secs(60)).await;
            cancel.cancel();
            pid
        })
    };
    let ran = run_with(
        &w.engine,
        &claude_request(
            repo.path(),
            "Start a sleeper",
            json!({"max_runtime_seconds": 90}),
        ),
        cancel,
    )
    .await;
    let sleeper = trigger.await.unwrap();
    let _ = std::fs::remove_file(&pid_file);
    assert_eq!(ran.result.status, Status::Cancelled, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["cancelled"]);
    assert!(
        wait_gone(ran.droid_pid(), Duration::from_secs(5)).await,
        "claude survived"
    );
    assert!(
        wait_gone(sleeper, Duration::from_secs(5)).await,
        "the setsid sleep survived"
    );
    assert!(!is_alive(sleeper));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_and_an_unknown_one_is_named() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    // the turn is the number of assistant messages: the resumed run sends the first one back
    let w = World::new(json!([text("First answer."), text("Second answer.")])).await;
    let first = run(
        &w.engine,
        &claude_request(repo.path(), "Remember FIRST-PROMPT", json!({})),
    )
    .await;
    assert_eq!(first.result.status, Status::Success, "{:#?}", first.result);
    assert_eq!(first.result.summary, "First answer.");
    let session = first.result.session_id.clone().expect("no session id");
    let second = run(
        &w.engine,
        &claude_request(
            repo.path(),
            "Continue with SECOND-PROMPT",
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
    assert_eq!(second.result.summary, "Second answer.");
    assert_eq!(second.result.session_id.as_deref(), Some(session.as_str()));
    let last = serde_json::to_string(&w.posts().last().unwrap()["body"]["messages"]).unwrap();
    assert!(
        last.contains("FIRST-PROMPT") && last.contains("SECOND-PROMPT"),
        "{last}"
    );

    let unknown = run(
        &w.engine,
        &claude_request(
            repo.path(),
            "Continue",
            json!({"session_id": "11111111-2222-4333-8444-555555555555"}),
        ),
    )
    .await;
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
    let repo = git_repo(&[("a.txt", "x\n")]);
    let claim = "I created done.txt and every test passes.\n```droid-executor-report\n{\"status\": \"success\", \"summary\": \"Created done.txt; tests green.\", \"files\": [{\"path\": \"done.txt\", \"highlights\": [\"made it\"]}]}\n```";
    let w = World::new(json!([text(claim)])).await;
    let ran = run(
        &w.engine,
        &claude_request(
            repo.path(),
            "Create done.txt",
            json!({"suggested_commands": ["test -f done.txt"]}),
        ),
    )
    .await;
    let res = &ran.result;
    // it finished, but our re-run contradicts its "success": partial, never success
    assert_eq!(res.status, Status::Partial, "{res:#?}");
    assert_eq!(res.files_changed, vec![]);
    assert_eq!(res.tests.passed, Some(false));
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
    let repo = git_repo(&[("a.txt", "x\n")]);
    let r = repo.path();
    let w = World::new(write_and_touch(r)).await;
    let ran = run(
        &w.engine,
        &claude_request(r, "Write files", json!({"autonomy": "read_only"})),
    )
    .await;
    assert!(!r.join("w.txt").exists() && !r.join("b.txt").exists());
    assert_eq!(ran.result.files_changed, vec![]);
    assert_eq!(ran.result.status, Status::Partial, "{:#?}", ran.result);
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
        &claude_request(r, "Write files", json!({"autonomy": "high"})),
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
        &claude_request(r, "Write files", json!({"autonomy": "high"})),
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
        &claude_request(
            repo.path(),
            "Think",
            json!({"model": "claude-scripted-1", "reasoning_effort": "high"}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    let body = &w.posts()[0]["body"];
    assert_eq!(body["model"], "claude-scripted-1");
    assert_eq!(body["output_config"]["effort"], "high");
    let agent = ran.result.agent.as_ref().unwrap();
    assert_eq!(agent.model.as_deref(), Some("claude-scripted-1"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effort_claude_lacks_is_refused_before_anything_runs() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([text("never")])).await;
    let ran = run(
        &w.engine,
        &claude_request(repo.path(), "Think", json!({"reasoning_effort": "minimal"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Error, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["validation_error"]);
    assert!(
        ran.result.issues[0]
            .description
            .contains("reasoning_effort")
    );
    assert_eq!(w.posts(), Vec::<Value>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_through_the_binary_and_its_supervisor() {
    let model = ScriptedModel::start(json!([text("placeholder")]))
        .await
        .unwrap();
    let home = ClaudeHome::new().unwrap();
    // allowed_roots defaults to HOME: the repository lives in it
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "hello\n")]);
    model.set_script(json!([
        {"content": [tool("toolu_1", "Write", json!({"file_path": p(&repo, "b.txt"), "content": "b\n"}))]},
        text("Created b.txt.")
    ]));
    let req = claude_request(
        &repo,
        "Create b.txt",
        json!({"suggested_commands": ["test -f b.txt"]}),
    );
    let req_file = home.path().join("request.json");
    std::fs::write(&req_file, req.to_string()).unwrap();
    let mut env = home.env(&anthropic_url(&model));
    env.push((
        "DROID_EXECUTOR_CLAUDE_BIN".into(),
        agent_cli("claude").into(),
    ));
    let out = droid_executor(
        &[
            "run",
            "--json",
            "--request",
            &req_file.display().to_string(),
        ],
        &env,
        home.path(),
    )
    .await;
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
            highlights: vec!["created by claude (1 line)".into()],
            lines_added: Some(1),
            lines_removed: Some(0),
        }]
    );
    assert_eq!(result.tests.passed, Some(true));
    assert_eq!(result.summary, "Created b.txt.");
    // the supervisor (`guard --stdin FILE`) handed claude the prompt as its stdin
    let posts: Vec<Value> = model
        .requests()
        .into_iter()
        .filter(|r| r["method"] == "POST")
        .collect();
    let first = serde_json::to_string(&posts[0]["body"]["messages"]).unwrap();
    assert!(first.contains("Create b.txt"), "{first}");
}
