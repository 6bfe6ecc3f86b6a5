//! The engine end to end through the REAL Codex CLI 0.169.0 (`codex exec --json`), driven by the
//! scripted model over OpenAI's Responses API (a [`CodexHome`] points Codex at it): files from
//! git with Codex's own `apply_patch`, commands with exit codes, verification, a model error, a
//! hanging model (timeout, unsandboxed and inside Codex's bwrap sandbox) and a cancel with
//! nothing left running, a resumed session and an unknown one, a lying final answer, the
//! read-only sandbox, the `max_autonomy` cap, a reasoning effort Codex cannot send, and one run
//! through the `droid-executor` binary (its per-run supervisor).

use std::ffi::OsString;
use std::path::Path;
use std::time::Duration;

use droid_contract::{Autonomy, ChangeType, FileChange, ProviderId, Status};
use droid_exec::config::{AgentProgram, SandboxMode};
use droid_exec::{Engine, EngineConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::codex_home::{CodexHome, KEY_VAR, MODEL};
use tests::procs::{is_alive, pids_with_env, wait_gone};
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::binary::{droid_executor, git_repo_at};
use super::common::{git_repo, read_pid_file, request, run, run_with};

/// A scripted model, a Codex HOME pointing at it, a scratch dir and an engine driving the real
/// Codex.
struct World {
    model: ScriptedModel,
    _home: CodexHome,
    _scratch: TempDir,
    engine: Engine,
}

impl World {
    async fn new(script: Value) -> World {
        World::capped(script, Autonomy::High).await
    }

    async fn capped(script: Value, max_autonomy: Autonomy) -> World {
        World::configured(script, max_autonomy, SandboxMode::Auto).await
    }

    /// Without our confinement (`sandbox = "off"`): Codex keeps its own bubblewrap sandbox.
    async fn unconfined(script: Value, max_autonomy: Autonomy) -> World {
        World::configured(script, max_autonomy, SandboxMode::Off).await
    }

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

    async fn configured(script: Value, max_autonomy: Autonomy, sandbox: SandboxMode) -> World {
        let model = ScriptedModel::start(script).await.unwrap();
        let home = CodexHome::new(&model.base_url()).unwrap();
        let scratch = TempDir::new("codex-scratch").unwrap();
        let engine = Engine::new(EngineConfig {
            droid_bin: None,
            droid_source: "test".into(),
            droid_warnings: Vec::new(),
            agents: vec![AgentProgram {
                provider: ProviderId::Codex,
                program: Some(agent_cli("codex")),
                source: "test".into(),
            }],
            env: home.env(),
            allowed_roots: Vec::new(),
            max_autonomy,
            default_timeout: Duration::from_secs(60),
            default_model: None,
            verify: true,
            sandbox,
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
            _home: home,
            _scratch: scratch,
            engine,
        }
    }

    /// The text of every request's input, one string per request.
    fn inputs(&self) -> Vec<String> {
        self.model
            .requests()
            .iter()
            .filter(|r| {
                r["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("/responses"))
            })
            .map(|r| r["body"]["input"].to_string())
            .collect()
    }
}

/// A Codex request for `repo` with `extra` fields.
fn codex_request(repo: &Path, objective: &str, extra: Value) -> Value {
    let mut r = request(repo, objective, extra);
    r["provider"] = json!("codex");
    r
}

/// The model's final message.
fn say(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// Codex's `apply_patch` (a freeform custom tool) with `patch` between the begin/end lines.
fn patch(call: &str, patch: &str) -> Value {
    json!({"type": "custom_tool_call", "status": "completed", "call_id": call,
           "name": "apply_patch", "input": format!("*** Begin Patch\n{patch}*** End Patch\n")})
}

/// Codex's `exec_command`.
fn exec(call: &str, cmd: &str) -> Value {
    json!({"type": "function_call", "status": "completed", "call_id": call,
           "name": "exec_command", "arguments": json!({"cmd": cmd}).to_string()})
}

fn issue_kinds(r: &droid_contract::ExecutionResult) -> Vec<&'static str> {
    r.issues.iter().map(|i| i.kind.as_str()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_commands_and_verification_come_from_ground_truth() {
    let repo = git_repo(&[("a.txt", "hello\n"), ("keep.txt", "untouched\n")]);
    let w = World::new(json!([
        {"output": [say("Creating."), patch("c0", "*** Add File: new.txt\n+one\n+two\n")]},
        {"output": [patch("c1", "*** Update File: a.txt\n@@\n-hello\n+hello world\n")]},
        {"output": [exec("c2", "echo passing")]},
        {"output": [exec("c3", "echo failing >&2; exit 3")]},
        {"output": [say("Created new.txt and edited a.txt.")]}
    ]))
    .await;
    let ran = run(
        &w.engine,
        &codex_request(
            repo.path(),
            "Create new.txt and edit a.txt",
            json!({"execution_mode": "code", "task_id": "T-1",
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
                highlights: vec!["edited by codex".into()],
                lines_added: Some(1),
                lines_removed: Some(1),
            },
            FileChange {
                path: "new.txt".into(),
                change_type: ChangeType::Added,
                old_path: None,
                highlights: vec!["created by codex".into()],
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
    assert_eq!(res.status, Status::Partial, "{res:#?}");
    assert_eq!(issue_kinds(res), vec!["test_failure"]);
    assert_eq!(res.tests.passed, Some(false));
    assert_eq!(res.task_id.as_deref(), Some("T-1"));
    let agent = res.agent.as_ref().unwrap();
    assert_eq!(agent.provider, ProviderId::Codex);
    assert_eq!(agent.version.as_deref(), Some("0.169.0"));
    assert!(agent.usage.as_ref().is_some_and(|u| u.input_tokens > 0));
    assert!(res.session_id.is_some());
    // execution_mode code → autonomy low, kept by the run's Landlock confinement (Codex's own
    // sandbox cannot start inside it), and Codex is told so
    let input = &w.inputs()[0];
    assert!(
        input.contains("The operating system confines this run"),
        "{input}"
    );
    assert!(
        res.sandbox
            .as_ref()
            .is_some_and(|s| s.kind == droid_contract::SandboxKind::Landlock),
        "{res:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_that_is_not_a_git_repository_works() {
    // Codex refuses one unless told --skip-git-repo-check, which the provider always passes
    let dir = TempDir::new("codex-plain").unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let w = World::new(json!([
        {"output": [patch("c0", "*** Add File: b.txt\n+b\n")]},
        {"output": [say("Created b.txt.")]}
    ]))
    .await;
    let ran = run(
        &w.engine,
        &codex_request(
            dir.path(),
            "Create b.txt",
            json!({"suggested_commands": ["test -f b.txt"]}),
        ),
    )
    .await;
    let res = &ran.result;
    assert_eq!(res.status, Status::Success, "{res:#?}");
    let files: Vec<(&str, ChangeType)> = res
        .files_changed
        .iter()
        .map(|f| (f.path.as_str(), f.change_type))
        .collect();
    assert_eq!(files, vec![("b.txt", ChangeType::Added)]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_at_its_limits_reaches_codex_whole_through_stdin() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"output": [say("Read it all.")]}])).await;
    // distinct heads and tails, so a cut anywhere shows
    let objective = format!("OBJ-HEAD{}OBJ-TAIL", "o".repeat(50_000 - 16));
    let instructions = format!("INS-HEAD{}INS-TAIL", "i".repeat(100_000 - 16));
    let ran = run(
        &w.engine,
        &codex_request(
            repo.path(),
            &objective,
            json!({"instructions": instructions}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    let sent = w.inputs().join("\n");
    assert!(sent.contains(&objective), "the objective was cut");
    assert!(sent.contains(&instructions), "the instructions were cut");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_http_error_is_a_model_error() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"status": 400, "error_message": "scripted bad request"}])).await;
    let ran = run(
        &w.engine,
        &codex_request(repo.path(), "Anything", json!({})),
    )
    .await;
    let res = &ran.result;
    assert!(
        matches!(res.status, Status::Failed | Status::Error),
        "{res:#?}"
    );
    assert!(issue_kinds(res).contains(&"model_error"), "{res:#?}");
    assert!(
        res.issues
            .iter()
            .any(|i| i.description.contains("scripted bad request")),
        "{res:#?}"
    );
}

/// Turn 0 starts a `setsid sleep` (its own session) and records its pid; turn 1 hangs.
fn leak_then_hang(pid_file: &Path) -> Value {
    let cmd = format!(
        "setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > {}",
        pid_file.display()
    );
    json!([{"output": [exec("c0", &cmd)]}, {"hang": true}])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_model_times_out_and_nothing_survives() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fixture = TempDir::new("codex-fixture").unwrap();
    let pid_file = fixture.path().join("codex-sleep-timeout.pid");
    let w = World::granting(leak_then_hang(&pid_file), &[fixture.path()]).await;
    let ran = run(
        &w.engine,
        &codex_request(
            repo.path(),
            "Start a sleeper",
            json!({"max_runtime_seconds": 8, "autonomy": "high"}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Timeout, "{:#?}", ran.result);
    assert_eq!(issue_kinds(&ran.result), vec!["timeout"]);
    assert_eq!(
        ran.commands().len(),
        1,
        "the command is still reported: {:#?}",
        ran.result
    );
    let sleeper = read_pid_file(&pid_file, Duration::from_secs(5)).await;
    let _ = std::fs::remove_file(&pid_file);
    assert!(
        wait_gone(ran.droid_pid(), Duration::from_secs(5)).await,
        "codex survived"
    );
    assert!(
        wait_gone(sleeper, Duration::from_secs(5)).await,
        "the setsid sleep survived"
    );
}

/// The variable the engine marks every process of a run with.
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_inside_codex_sandbox_leaves_nothing() {
    // autonomy medium without our confinement: the command runs inside Codex's workspace-write
    // sandbox (bwrap), where a pid from `$!` is not ours to check; the run's marker variable
    // finds its processes instead
    let repo = git_repo(&[("a.txt", "x\n")]);
    let cmd =
        format!("echo \"${MARKER_VAR}\" > run-id; setsid sleep 600 > /dev/null 2>&1 < /dev/null &");
    let w = World::unconfined(
        json!([{"output": [exec("c0", &cmd)]}, {"hang": true}]),
        Autonomy::High,
    )
    .await;
    let ran = run(
        &w.engine,
        &codex_request(
            repo.path(),
            "Start a sleeper",
            json!({"max_runtime_seconds": 8, "autonomy": "medium"}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Timeout, "{:#?}", ran.result);
    assert!(w.inputs()[0].contains("`sandbox_mode` is `workspace-write`"));
    let marker = std::fs::read_to_string(repo.path().join("run-id")).unwrap();
    let marker = marker.trim();
    assert!(
        !marker.is_empty(),
        "the sandboxed command did not see the marker"
    );
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    while !pids_with_env(MARKER_VAR, marker).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "processes of the run survived: {:?}",
            pids_with_env(MARKER_VAR, marker)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_codex_and_its_children() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fixture = TempDir::new("codex-fixture").unwrap();
    let pid_file = fixture.path().join("codex-sleep-cancel.pid");
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
        &codex_request(
            repo.path(),
            "Start a sleeper",
            json!({"max_runtime_seconds": 60, "autonomy": "high"}),
        ),
        cancel,
    )
    .await;
    let sleeper = trigger.await.unwrap();
    let _ = std::fs::remove_file(&pid_file);
    assert_eq!(ran.result.status, Status::Cancelled, "{:#?}", ran.result);
    assert_eq!(issue_kinds(&ran.result), vec!["cancelled"]);
    assert!(
        wait_gone(ran.droid_pid(), Duration::from_secs(5)).await,
        "codex survived"
    );
    assert!(
        wait_gone(sleeper, Duration::from_secs(5)).await,
        "the setsid sleep survived"
    );
    assert!(!is_alive(sleeper));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_continues_the_same_thread() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"output": [say("Noted.")]}])).await;
    let first = run(
        &w.engine,
        &codex_request(repo.path(), "Remember the word pelican", json!({})),
    )
    .await;
    assert_eq!(first.result.status, Status::Success, "{:#?}", first.result);
    let session = first.result.session_id.clone().expect("no session id");
    let second = run(
        &w.engine,
        &codex_request(
            repo.path(),
            "Which word did I ask you to remember?",
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
    // the second request carries the first turn's history
    let inputs = w.inputs();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert!(inputs[1].contains("Remember the word pelican"));
    assert!(inputs[1].contains("Noted."));
    assert!(inputs[1].contains("Which word did I ask you to remember?"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_session_is_a_clear_error() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"output": [say("Hi.")]}])).await;
    let ran = run(
        &w.engine,
        &codex_request(
            repo.path(),
            "Continue",
            json!({"session_id": "01a20175-9acd-7ed3-a1fd-ce1f8b9c9042"}),
        ),
    )
    .await;
    let res = &ran.result;
    assert!(
        matches!(res.status, Status::Failed | Status::Error),
        "{res:#?}"
    );
    assert!(
        res.issues
            .iter()
            .any(|i| i.description.contains("session_id")
                && i.description.contains("no rollout found")),
        "{res:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_agent_is_contradicted_by_ground_truth() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let claim = "Created done.txt and all tests pass.\n```droid-executor-report\n{\"status\": \"success\", \"summary\": \"Created done.txt; tests green.\", \"files\": [{\"path\": \"done.txt\", \"highlights\": [\"new\"]}]}\n```";
    let w = World::new(json!([{"output": [say(claim)]}])).await;
    let ran = run(
        &w.engine,
        &codex_request(
            repo.path(),
            "Create done.txt",
            json!({"suggested_commands": ["test -f done.txt"]}),
        ),
    )
    .await;
    let res = &ran.result;
    assert!(
        matches!(res.status, Status::Partial | Status::Failed),
        "{res:#?}"
    );
    assert_eq!(res.files_changed, vec![]);
    assert_eq!(res.tests.passed, Some(false));
    assert!(issue_kinds(res).contains(&"test_failure"), "{res:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_prevents_writes() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([
        {"output": [patch("c0", "*** Add File: new.txt\n+nope\n")]},
        {"output": [exec("c1", "touch made.txt")]},
        {"output": [say("Wrote new.txt.")]}
    ]))
    .await;
    let ran = run(
        &w.engine,
        &codex_request(
            repo.path(),
            "Write new.txt",
            json!({"autonomy": "read_only"}),
        ),
    )
    .await;
    let res = &ran.result;
    assert_eq!(res.files_changed, vec![], "{res:#?}");
    assert!(!repo.path().join("new.txt").exists());
    assert!(!repo.path().join("made.txt").exists());
    // the blocked `touch` shows as a failed command in some runs and leaves no item event in
    // others (observed both ways with the same script); the refused patch never shows
    for (_, command, code) in ran.commands() {
        assert_eq!((command.as_str(), code), ("touch made.txt", Some(1)));
    }
    // the kernel refuses the writes (Codex's own sandbox is off inside ours), and Codex was
    // told the run is read-only
    let input = &w.inputs()[0];
    assert!(input.contains("This run is read-only"), "{input}");
    // the refusal is on Codex's stderr only (no item event): still reported
    assert!(issue_kinds(res).contains(&"permission_denied"), "{res:#?}");
    assert_eq!(res.status, Status::Partial, "{res:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_autonomy_caps_the_sandbox() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    // without our confinement, where Codex's own sandbox keeps the level
    let w = World::unconfined(json!([{"output": [say("Done.")]}]), Autonomy::Low).await;
    let ran = run(
        &w.engine,
        &codex_request(repo.path(), "Anything", json!({"autonomy": "high"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    let input = &w.inputs()[0];
    assert!(
        input.contains("`sandbox_mode` is `workspace-write`"),
        "{input}"
    );
    assert!(!input.contains("danger-full-access"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effort_codex_cannot_send_is_refused() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"output": [say("Done.")]}])).await;
    let ran = run(
        &w.engine,
        &codex_request(repo.path(), "Anything", json!({"reasoning_effort": "max"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Error, "{:#?}", ran.result);
    assert!(
        ran.result
            .issues
            .iter()
            .any(|i| i.description.contains("reasoning_effort")),
        "{:#?}",
        ran.result
    );
    assert_eq!(w.inputs().len(), 0, "codex must not have started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_through_the_binary_with_codex() {
    let model = ScriptedModel::start(json!([
        {"output": [patch("c0", "*** Add File: b.txt\n+b\n")]},
        {"output": [say("Created b.txt.")]}
    ]))
    .await
    .unwrap();
    let home = CodexHome::new(&model.base_url()).unwrap();
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    // the custom provider's key reaches Codex because the config passes it through
    let config = home.path().join(".config/droid-executor");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("env_passthrough = [\"{KEY_VAR}\"]\n"),
    )
    .unwrap();
    let req = codex_request(
        &repo,
        "Create b.txt",
        json!({"suggested_commands": ["test -f b.txt"], "model": MODEL}),
    );
    let req_file = home.path().join("request.json");
    std::fs::write(&req_file, req.to_string()).unwrap();
    let mut env: Vec<(OsString, OsString)> = home.env();
    env.push(("DROID_EXECUTOR_CODEX_BIN".into(), agent_cli("codex").into()));
    let out = droid_executor(
        &[
            "run".into(),
            "--json".into(),
            "--request".into(),
            req_file.into_os_string(),
        ],
        &env,
        home.path(),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let res = out.result();
    assert_eq!(res.status, Status::Success, "{res:#?}");
    assert_eq!(
        res.files_changed,
        vec![FileChange {
            path: "b.txt".into(),
            change_type: ChangeType::Added,
            old_path: None,
            highlights: vec!["created by codex".into()],
            lines_added: Some(1),
            lines_removed: Some(0),
        }]
    );
    assert_eq!(res.tests.passed, Some(true));
    assert_eq!(res.summary, "Created b.txt.");
    let agent = res.agent.as_ref().unwrap();
    assert_eq!(agent.provider, ProviderId::Codex);
    assert_eq!(agent.model.as_deref(), Some(MODEL));
}

/// Issue 29, item 3, replayed with the real Codex: a read-only run used to be held by Codex's
/// own sandbox only (it cannot start inside ours, so ours was lifted). A command plants an MCP
/// server in Codex's `config.toml` (which a later run would start), appends to `~/.bashrc`, and
/// writes beside and inside the repository. The kernel refuses all but the write to Codex's own
/// state directory, and that one is put back after the run, and named.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_codex_plants_nothing_now_or_for_later() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let beside = TempDir::new("codex-beside").unwrap();
    let cmd = format!(
        "printf '\\n[mcp_servers.evil]\\ncommand = \"sh\"\\n' >> \"$HOME/.codex/config.toml\"; \
         echo pwned >> \"$HOME/.bashrc\"; echo x > {}/escaped; echo y > made.txt; echo tried",
        beside.path().display()
    );
    let w = World::new(json!([
        {"output": [exec("c0", &cmd)]},
        {"output": [say("Looked around.")]}
    ]))
    .await;
    let config = w._home.codex_home().join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    let ran = run(
        &w.engine,
        &codex_request(repo.path(), "Look around", json!({"autonomy": "read_only"})),
    )
    .await;
    let res = &ran.result;
    assert_eq!(ran.commands().len(), 1, "Codex ran the command: {res:#?}");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        before,
        "{res:#?}"
    );
    assert!(!w._home.path().join(".bashrc").exists(), "{res:#?}");
    assert!(!beside.path().join("escaped").exists(), "{res:#?}");
    assert!(!repo.path().join("made.txt").exists(), "{res:#?}");
    assert_eq!(res.files_changed, vec![], "{res:#?}");
    let said: String = res
        .issues
        .iter()
        .map(|i| i.description.clone())
        .collect::<Vec<_>>()
        .join("\n");
    assert!(said.contains("~/.codex/config.toml"), "{said}");
    let sandbox = res.sandbox.as_ref().unwrap();
    assert_eq!(
        sandbox.kind,
        droid_contract::SandboxKind::Landlock,
        "{res:#?}"
    );
    assert!(
        !sandbox.writable.iter().any(|p| Path::new(p) == repo.path()),
        "the repository is read-only to a read_only run: {sandbox:#?}"
    );
}
