//! The engine end to end through the REAL OpenCode 1.18.33 (`opencode run --format json`),
//! driven by the scripted model (chat completions; OpenCode's title side call answered by the
//! aux text): ground-truth files and commands, verification, a model error, timeout and
//! cancellation with nothing of the run left, a resumed session (its second run through the
//! `droid-executor` binary and its supervisor), and a lying agent held to read-only by the
//! server's `max_autonomy`. OpenCode takes seconds to start, so each run proves several things.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{Autonomy, ChangeType, ProviderId, Status};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::opencode_home::{MODEL, OpencodeHome};
use tests::procs::{pids_with_env, wait_gone};
use tests::scripted_model::ScriptedModel;

use super::binary::{droid_executor, git_repo_at, path_var};
use super::common::{Ran, git_repo, read_pid_file, run};
use super::provider_world::{self as shared, Agent, Edits, Leak};

/// Every process OpenCode starts inherits this variable (an `OPENCODE_*` name, so the provider
/// passes it through), valued per test: "nothing of the run is left" is "no live process carries
/// it", whatever the process tree looked like.
const RUN_TAG: &str = "OPENCODE_TEST_RUN_TAG";

/// How long processes get to disappear after a run ended (generous: no timing is asserted).
const GONE: Duration = Duration::from_secs(10);

/// OpenCode's side of the provider world: an [`OpencodeHome`] (its title side call answered by
/// the aux text), chat-completions turns, every request naming [`MODEL`], every process of a
/// world's runs tagged with [`RUN_TAG`].
struct Opencode;

type World = shared::World<Opencode>;

impl Agent for Opencode {
    const PROVIDER: ProviderId = ProviderId::Opencode;
    const VERSION: &'static str = "1.18.33";
    type Home = OpencodeHome;

    fn home(model: &ScriptedModel) -> OpencodeHome {
        model.set_aux_text("Scripted title");
        OpencodeHome::new(&model.base_url()).unwrap()
    }

    fn home_path(home: &OpencodeHome) -> &Path {
        home.path()
    }

    fn env(home: &OpencodeHome, _model: &ScriptedModel) -> Vec<(OsString, OsString)> {
        home.env()
    }

    fn tag_env(tag: &str) -> Vec<(OsString, OsString)> {
        vec![(RUN_TAG.into(), tag.into())]
    }

    fn request_fields() -> Value {
        json!({"model": MODEL})
    }

    fn shell(command: &str) -> Value {
        json!({"tool": [bash(command)]})
    }

    fn answer(text: &str) -> Value {
        json!({"text": text})
    }

    /// The agent's requests (not the title side calls).
    fn turns(model: &ScriptedModel) -> Vec<Value> {
        model
            .requests()
            .into_iter()
            .filter(|r| r["method"] == "POST" && r["aux"] != true)
            .collect()
    }

    /// The request's messages.
    fn sent(turn: &Value) -> String {
        turn["body"]["messages"].to_string()
    }
}

/// Waits until no process of `w`'s runs is alive; the live ones otherwise.
async fn leftovers(w: &World) -> Vec<i32> {
    let tag = w.tag();
    let until = tokio::time::Instant::now() + GONE;
    loop {
        let left = pids_with_env(RUN_TAG, &tag);
        if left.is_empty() || tokio::time::Instant::now() >= until {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn p(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

fn bash(command: &str) -> Value {
    json!({"name": "bash", "args": {"command": command, "description": "run it"}})
}

fn tool_names(request: &Value) -> Vec<String> {
    request["body"]["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

fn dump(ran: &Ran) -> String {
    format!("{:#?}", ran.result)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_commands_and_verification_come_from_ground_truth() {
    let (w, ran) = shared::ground_truth::<Opencode>(
        |r| {
            json!([
                {"text": "Creating new.txt.", "tool": [{"name": "write", "args": {"filePath": p(r, "new.txt"), "content": "one\ntwo\n"}}]},
                {"tool": [{"name": "read", "args": {"filePath": p(r, "a.txt")}}]},
                {"tool": [{"name": "edit", "args": {"filePath": p(r, "a.txt"), "oldString": "hello", "newString": "hello world"}}]},
                {"tool": [bash("echo passing")]},
                {"tool": [bash("echo failing >&2; exit 3")]},
                {"text": "Created new.txt and edited a.txt."}
            ])
        },
        "OC-1",
        json!({}),
        Edits {
            highlights: ["edited by opencode (+1 -1)", "created by opencode (2 lines)"],
            exit_codes: [Some(0), Some(3)],
        },
    )
    .await;
    // OpenCode finished its turn; the failing verification made it partial
    let res = &ran.result;
    assert_eq!(res.commands_run[0].stdout_excerpt.trim(), "passing");
    assert_eq!(res.commands_run[1].stdout_excerpt.trim(), "failing");
    assert_eq!(res.summary, "Created new.txt and edited a.txt.");
    assert!(
        res.session_id
            .as_deref()
            .is_some_and(|s| s.starts_with("ses_")),
        "{:?}",
        res.session_id
    );
    let agent = res.agent.as_ref().unwrap();
    assert_eq!(agent.model.as_deref(), Some(MODEL));
    assert_eq!(agent.num_turns, Some(6));
    assert_eq!(res.droid, None);
    // the prompt reached the model whole, from stdin; medium autonomy offers write, edit, bash
    let first = &w.turns()[0];
    let sent = Opencode::sent(first);
    assert!(sent.contains("Create new.txt and edit a.txt"), "{sent}");
    let tools = tool_names(first);
    for t in ["write", "edit", "bash"] {
        assert!(tools.contains(&t.to_owned()), "{t} not offered: {tools:?}");
    }
    assert_eq!(leftovers(&w).await, Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_http_error_is_a_model_error() {
    let ran = shared::model_error::<Opencode>("Bad request: invalid parameter").await;
    assert_eq!(ran.result.status, Status::Failed, "{}", dump(&ran));
    assert_eq!(ran.issue_kinds(), vec!["model_error"]);
    assert_eq!(
        ran.result.summary,
        "opencode failed: Bad request: invalid parameter (HTTP 400)"
    );
    assert_eq!(ran.result.agent.as_ref().unwrap().exit_code, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_model_times_out_and_nothing_survives() {
    // the sleeper is started by a setsid, as OpenCode's bash children are
    let leak = Leak::<Opencode>::new("timeout").await;
    let ran = leak.time_out(json!({"max_runtime_seconds": 20})).await;
    let sleeper = std::fs::read_to_string(&leak.pid_file)
        .ok()
        .and_then(|s| s.trim().parse::<i32>().ok());
    let _ = std::fs::remove_file(&leak.pid_file);
    assert!(wait_gone(ran.droid_pid(), GONE).await, "opencode survived");
    if let Some(sleeper) = sleeper {
        assert!(wait_gone(sleeper, GONE).await, "the setsid sleep survived");
    }
    assert_eq!(leftovers(&leak.world).await, Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_opencode_and_its_children() {
    let leak = Leak::<Opencode>::new("cancel").await;
    let w = &leak.world;
    let pid_file = &leak.pid_file;
    // cancel once the model hangs in turn 1: OpenCode reports a tool only when it has finished,
    // so by then the bash call of turn 0 is in its output
    let (sleeper, ran) = leak
        .cancel(json!({"max_runtime_seconds": 110}), |cancel| async move {
            let pid = read_pid_file(pid_file, Duration::from_secs(100)).await;
            let until = tokio::time::Instant::now() + Duration::from_secs(100);
            while !w.turns().iter().any(|r| r["turn"] == 1) {
                assert!(tokio::time::Instant::now() < until, "turn 1 never came");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            cancel.cancel();
            pid
        })
        .await;
    let _ = std::fs::remove_file(&leak.pid_file);
    shared::assert_gone::<Opencode>(&ran, sleeper, GONE).await;
    assert_eq!(
        ran.commands(),
        vec![("agent", shared::leak_command(&leak.pid_file), Some(0))]
    );
    assert_eq!(leftovers(w).await, Vec::<i32>::new());
}

/// The server (config `max_autonomy`) caps a request asking for `high` at read_only: OpenCode is
/// offered no tool that writes or runs commands, its attempts are refused, nothing is written;
/// its final answer lies about files and tests, and the result believes the repository and the
/// re-run instead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lying_agent_capped_at_read_only_changes_nothing() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let r = repo.path();
    let w = World::capped(
        json!([
            {"tool": [{"name": "write", "args": {"filePath": p(r, "claimed.txt"), "content": "x\n"}}]},
            {"tool": [bash("touch bash-made.txt")]},
            {"text": "Created claimed.txt and bash-made.txt; all tests pass."}
        ]),
        Autonomy::ReadOnly,
    )
    .await;
    let ran = run(
        &w.engine,
        &w.request(
            r,
            "Create claimed.txt",
            json!({"autonomy": "high", "suggested_commands": ["test -f claimed.txt"]}),
        ),
    )
    .await;
    assert!(!r.join("claimed.txt").exists());
    assert!(!r.join("bash-made.txt").exists());
    assert_eq!(ran.result.files_changed, vec![], "{}", dump(&ran));
    assert_eq!(ran.result.status, Status::Partial, "{}", dump(&ran));
    let mut kinds = ran.issue_kinds();
    kinds.dedup();
    assert_eq!(
        kinds,
        vec!["permission_denied", "test_failure"],
        "{}",
        dump(&ran)
    );
    assert_eq!(ran.result.tests.passed, Some(false));
    assert_eq!(
        ran.commands(),
        vec![("verify", "test -f claimed.txt".to_owned(), Some(1))]
    );
    // not even offered
    for req in w.turns() {
        let tools = tool_names(&req);
        for t in ["write", "edit", "bash"] {
            assert!(!tools.contains(&t.to_owned()), "{t} offered: {tools:?}");
        }
    }
}

/// A first run through the engine, then the same session continued through the
/// `droid-executor` binary (`run --request FILE`, OpenCode found through
/// `DROID_EXECUTOR_OPENCODE_BIN`, run under the binary's supervisor): same session id, the
/// model sees the first run's exchange, and the second run's file and verification make it a
/// success.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_continues_through_the_binary() {
    let w = World::new(json!([])).await;
    // the repository lives in the OpenCode HOME, which is the binary's HOME (allowed_roots)
    let repo: PathBuf = w.home_path().join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    w.model.set_script(json!([
        {"text": "First answer."},
        {"tool": [{"name": "write", "args": {"filePath": p(&repo, "b.txt"), "content": "b\n"}}]},
        {"text": "Resumed and created b.txt."}
    ]));
    let first = run(&w.engine, &w.request(&repo, "Say hello", json!({}))).await;
    assert_eq!(first.result.status, Status::Success, "{}", dump(&first));
    assert_eq!(first.result.summary, "First answer.");
    let session = first.result.session_id.clone().expect("no session id");

    let req = w.request(
        &repo,
        "continue: create b.txt",
        json!({"session_id": session, "suggested_commands": ["test -f b.txt"]}),
    );
    let file = w.home_path().join("request.json");
    std::fs::write(&file, req.to_string()).unwrap();
    let env: Vec<(OsString, OsString)> = vec![
        ("HOME".into(), w.home_path().into()),
        ("PATH".into(), path_var()),
        ("LANG".into(), "C.UTF-8".into()),
        (
            "DROID_EXECUTOR_OPENCODE_BIN".into(),
            agent_cli("opencode").into(),
        ),
        (RUN_TAG.into(), w.tag().into()),
    ];
    let out = droid_executor(
        &["run", "--json", "--request", &file.display().to_string()],
        &env,
        w.home_path(),
    )
    .await;
    let second = out.result();
    assert_eq!(second.status, Status::Success, "{out:#?}");
    assert_eq!(out.code, Some(0));
    assert_eq!(second.session_id.as_deref(), Some(session.as_str()));
    assert_eq!(second.summary, "Resumed and created b.txt.");
    assert_eq!(
        second
            .files_changed
            .iter()
            .map(|f| (f.path.as_str(), f.change_type))
            .collect::<Vec<_>>(),
        vec![("b.txt", ChangeType::Added)]
    );
    assert_eq!(second.tests.passed, Some(true));
    // the continued session carried the first exchange to the model
    let sent = w.sent().pop().unwrap();
    assert!(sent.contains("Say hello"), "{sent}");
    assert!(sent.contains("First answer."), "{sent}");
    assert!(sent.contains("continue: create b.txt"), "{sent}");
    assert_eq!(leftovers(&w).await, Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_session_is_a_clear_error() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([Opencode::answer("never reached")])).await;
    let ran = shared::unknown_session(&w, repo.path(), "ses_doesnotexist").await;
    assert_eq!(ran.result.status, Status::Failed, "{}", dump(&ran));
    assert_eq!(ran.issue_kinds(), vec!["agent_error"]);
    assert_eq!(
        ran.result.issues[0].description,
        "opencode has no session with the request's session_id"
    );
    assert_eq!(ran.result.summary, "opencode failed: Session not found");
    assert_eq!(w.turns(), Vec::<Value>::new());
}
