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

use droid_contract::{Autonomy, ChangeType, ProviderId, Status};
use droid_exec::config::SandboxMode;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::codex_home::{CodexHome, KEY_VAR, MODEL};
use tests::procs::{is_alive, pids_with_env};
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;

use super::common::{git_repo, run};
use super::provider_world::{self as shared, Agent, Edits, Leak};

/// Codex's side of the provider world: a [`CodexHome`], OpenAI Responses turns.
struct Codex;

type World = shared::World<Codex>;

impl Agent for Codex {
    const PROVIDER: ProviderId = ProviderId::Codex;
    const VERSION: &'static str = "0.169.0";
    type Home = CodexHome;

    fn home(model: &ScriptedModel) -> CodexHome {
        CodexHome::new(&model.base_url()).unwrap()
    }

    fn home_path(home: &CodexHome) -> &Path {
        home.path()
    }

    fn env(home: &CodexHome, _model: &ScriptedModel) -> Vec<(OsString, OsString)> {
        home.env()
    }

    fn shell(command: &str) -> Value {
        json!({"output": [exec("c0", command)]})
    }

    fn answer(text: &str) -> Value {
        json!({"output": [say(text)]})
    }

    /// The Responses API requests.
    fn turns(model: &ScriptedModel) -> Vec<Value> {
        model
            .requests()
            .into_iter()
            .filter(|r| {
                r["path"]
                    .as_str()
                    .is_some_and(|p| p.ends_with("/responses"))
            })
            .collect()
    }

    /// The request's input.
    fn sent(turn: &Value) -> String {
        turn["body"]["input"].to_string()
    }

    /// The custom provider's key reaches Codex because the config passes it through.
    fn prepare_binary_home(home: &Path) {
        let config = home.join(".config/droid-executor");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(
            config.join("config.toml"),
            format!("env_passthrough = [\"{KEY_VAR}\"]\n"),
        )
        .unwrap();
    }
}

/// Without our confinement (`sandbox = "off"`): Codex keeps its own bubblewrap sandbox.
async fn unconfined(script: Value, max_autonomy: Autonomy) -> World {
    World::configured(script, max_autonomy, SandboxMode::Off).await
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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_commands_and_verification_come_from_ground_truth() {
    let (w, ran) = shared::ground_truth::<Codex>(
        |_| {
            json!([
                {"output": [say("Creating."), patch("c0", "*** Add File: new.txt\n+one\n+two\n")]},
                {"output": [patch("c1", "*** Update File: a.txt\n@@\n-hello\n+hello world\n")]},
                {"output": [exec("c2", "echo passing")]},
                {"output": [exec("c3", "echo failing >&2; exit 3")]},
                {"output": [say("Created new.txt and edited a.txt.")]}
            ])
        },
        "T-1",
        json!({"execution_mode": "code"}),
        Edits {
            highlights: ["edited by codex", "created by codex"],
            exit_codes: [Some(0), Some(3)],
        },
    )
    .await;
    let res = &ran.result;
    assert_eq!(res.commands_run[0].stdout_excerpt, "passing");
    assert_eq!(res.commands_run[1].stdout_excerpt, "failing");
    let agent = res.agent.as_ref().unwrap();
    assert!(agent.usage.as_ref().is_some_and(|u| u.input_tokens > 0));
    // execution_mode code → autonomy low, kept by the run's Landlock confinement (Codex's own
    // sandbox cannot start inside it), and Codex is told so
    let input = &w.sent()[0];
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
        &w.request(
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
        &w.request(
            repo.path(),
            &objective,
            json!({"instructions": instructions}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    let sent = w.sent().join("\n");
    assert!(sent.contains(&objective), "the objective was cut");
    assert!(sent.contains(&instructions), "the instructions were cut");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_http_error_is_a_model_error() {
    let ran = shared::model_error::<Codex>("scripted bad request").await;
    let res = &ran.result;
    assert!(
        res.issues
            .iter()
            .any(|i| i.description.contains("scripted bad request")),
        "{res:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_model_times_out_and_nothing_survives() {
    let leak = Leak::<Codex>::new("timeout").await;
    let ran = leak
        .time_out(json!({"max_runtime_seconds": 8, "autonomy": "high"}))
        .await;
    assert_eq!(
        ran.commands().len(),
        1,
        "the command is still reported: {:#?}",
        ran.result
    );
    let sleeper = leak.sleeper(Duration::from_secs(5)).await;
    shared::assert_gone::<Codex>(&ran, sleeper, Duration::from_secs(5)).await;
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
    let w = unconfined(json!([Codex::shell(&cmd), {"hang": true}]), Autonomy::High).await;
    let ran = run(
        &w.engine,
        &w.request(
            repo.path(),
            "Start a sleeper",
            json!({"max_runtime_seconds": 8, "autonomy": "medium"}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Timeout, "{:#?}", ran.result);
    assert!(w.sent()[0].contains("`sandbox_mode` is `workspace-write`"));
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
    let leak = Leak::<Codex>::new("cancel").await;
    let (sleeper, ran) = leak
        .cancel(
            json!({"max_runtime_seconds": 60, "autonomy": "high"}),
            |c| shared::cancel_on_pid(&leak.pid_file, c),
        )
        .await;
    let _ = std::fs::remove_file(&leak.pid_file);
    shared::assert_gone::<Codex>(&ran, sleeper, Duration::from_secs(5)).await;
    assert!(!is_alive(sleeper));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_session_continues_the_same_thread() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([Codex::answer("Noted.")])).await;
    shared::resumed(
        &w,
        repo.path(),
        "Remember the word pelican",
        "Which word did I ask you to remember?",
        |_| {},
    )
    .await;
    // the second request carries the first turn's history
    let inputs = w.sent();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert!(inputs[1].contains("Remember the word pelican"));
    assert!(inputs[1].contains("Noted."));
    assert!(inputs[1].contains("Which word did I ask you to remember?"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_session_is_a_clear_error() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([Codex::answer("Hi.")])).await;
    let ran =
        shared::unknown_session(&w, repo.path(), "01a20175-9acd-7ed3-a1fd-ce1f8b9c9042").await;
    let res = &ran.result;
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
    let claim = "Created done.txt and all tests pass.\n```droid-executor-report\n{\"status\": \"success\", \"summary\": \"Created done.txt; tests green.\", \"files\": [{\"path\": \"done.txt\", \"highlights\": [\"new\"]}]}\n```";
    shared::lying::<Codex>(claim, json!({})).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_only_prevents_writes() {
    let (w, ran) = shared::read_only::<Codex>(
        |_| {
            json!([
                {"output": [patch("c0", "*** Add File: new.txt\n+nope\n")]},
                {"output": [exec("c1", "touch made.txt")]},
                {"output": [say("Wrote new.txt.")]}
            ])
        },
        &["new.txt", "made.txt"],
    )
    .await;
    // the blocked `touch` shows as a failed command in some runs and leaves no item event in
    // others (observed both ways with the same script); the refused patch never shows
    for (_, command, code) in ran.commands() {
        assert_eq!((command.as_str(), code), ("touch made.txt", Some(1)));
    }
    // the kernel refuses the writes (Codex's own sandbox is off inside ours), and Codex was
    // told the run is read-only (the refusal is on Codex's stderr only, no item event: still
    // reported as permission_denied)
    let input = &w.sent()[0];
    assert!(input.contains("This run is read-only"), "{input}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_autonomy_caps_the_sandbox() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    // without our confinement, where Codex's own sandbox keeps the level
    let w = unconfined(json!([Codex::answer("Done.")]), Autonomy::Low).await;
    let ran = run(
        &w.engine,
        &w.request(repo.path(), "Anything", json!({"autonomy": "high"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    let input = &w.sent()[0];
    assert!(
        input.contains("`sandbox_mode` is `workspace-write`"),
        "{input}"
    );
    assert!(!input.contains("danger-full-access"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_effort_codex_cannot_send_is_refused() {
    shared::refused_effort::<Codex>("max").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_through_the_binary_with_codex() {
    let (_model, _out, res) = shared::through_the_binary::<Codex>(
        |_| {
            json!([
                {"output": [patch("c0", "*** Add File: b.txt\n+b\n")]},
                {"output": [say("Created b.txt.")]}
            ])
        },
        json!({"model": MODEL}),
        "created by codex",
    )
    .await;
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
    let config = w.home.codex_home().join("config.toml");
    let before = std::fs::read_to_string(&config).unwrap();
    let ran = run(
        &w.engine,
        &w.request(repo.path(), "Look around", json!({"autonomy": "read_only"})),
    )
    .await;
    let res = &ran.result;
    assert_eq!(ran.commands().len(), 1, "Codex ran the command: {res:#?}");
    assert_eq!(
        std::fs::read_to_string(&config).unwrap(),
        before,
        "{res:#?}"
    );
    assert!(!w.home.path().join(".bashrc").exists(), "{res:#?}");
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
