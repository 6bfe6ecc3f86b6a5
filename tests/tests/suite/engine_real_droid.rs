//! The engine end to end through the REAL droid 0.225.2, driven by the scripted model server:
//! ground-truth files, commands with exit codes, verification, the status rules, the contract at
//! its limits, timeout and cancellation with no process left behind, and the failure shapes droid
//! produces (permission abort, model errors, truncated streams, authentication, droid missing).

use std::path::Path;
use std::time::Duration;

use droid_contract::{ChangeType, FileChange, Status};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::real_droid;
use tests::droid_home::DroidHome;
use tests::procs::{is_alive, wait_gone};
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::common::{engine, git_repo, read_pid_file, request, run, run_with};

/// A scripted model, a droid HOME that points at it, a scratch dir, and an engine on the real droid.
struct World {
    model: ScriptedModel,
    home: DroidHome,
    _scratch: TempDir,
    engine: droid_exec::Engine,
}

impl World {
    async fn new(script: Value) -> World {
        World::granting(script, &[]).await
    }

    /// With `dirs` writable to its runs besides the repository (`sandbox_writable`): where a
    /// test's commands leave what the test reads (pid files).
    async fn granting(script: Value, dirs: &[&Path]) -> World {
        let model = ScriptedModel::start(script).await.unwrap();
        let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
        let scratch = TempDir::new("e2e-scratch").unwrap();
        let mut cfg = engine(real_droid(), home.env(), scratch.path())
            .config()
            .clone();
        cfg.sandbox_writable
            .extend(dirs.iter().map(|d| d.to_path_buf()));
        let engine = droid_exec::Engine::new(cfg);
        World {
            model,
            home,
            _scratch: scratch,
            engine,
        }
    }

    fn model_id(&self) -> String {
        self.home.model_id("Mock")
    }
}

fn execute(command: &str) -> Value {
    json!({"name": "Execute", "args": {"summary": "run it", "command": command,
           "riskLevel": "low", "riskLevelReason": "test command"}})
}

fn p(dir: &Path, name: &str) -> String {
    dir.join(name).display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn edits_commands_and_verification_come_from_ground_truth() {
    let repo = git_repo(&[("a.txt", "hello\n"), ("keep.txt", "untouched\n")]);
    let r = repo.path();
    let report = "Done.\n```droid-executor-report\n{\"status\": \"success\", \"summary\": \"Created new.txt and edited a.txt.\", \"files\": [{\"path\": \"new.txt\", \"highlights\": [\"two lines\"]}]}\n```";
    let w = World::new(json!([
        {"text": "Creating.", "tool": [{"name": "Create", "args": {"file_path": p(r, "new.txt"), "content": "one\ntwo\n"}}]},
        {"tool": [{"name": "Edit", "args": {"file_path": p(r, "a.txt"), "old_str": "hello", "new_str": "hello world"}}]},
        {"tool": [execute("echo passing")]},
        {"tool": [execute("echo failing >&2; exit 3")]},
        {"text": report}
    ]))
    .await;
    let ran = run(
        &w.engine,
        &request(
            r,
            "Create new.txt and edit a.txt",
            json!({"model": w.model_id(), "execution_mode": "code", "task_id": "T-1",
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
                highlights: vec!["edited by droid (+1 -1)".into()],
                lines_added: Some(1),
                lines_removed: Some(1),
            },
            FileChange {
                path: "new.txt".into(),
                change_type: ChangeType::Added,
                old_path: None,
                highlights: vec!["two lines".into(), "created by droid (2 lines)".into()],
                lines_added: Some(2),
                lines_removed: Some(0),
            },
        ]
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
    // droid's own report said success; a failing verification makes it partial
    assert_eq!(res.status, Status::Partial);
    assert_eq!(ran.issue_kinds(), vec!["test_failure"]);
    assert_eq!(res.tests.passed, Some(false));
    assert_eq!(
        res.tests.details,
        "test -f new.txt: exit 0\ngrep -q nope a.txt: exit 1"
    );
    assert_eq!(res.summary, "Created new.txt and edited a.txt.");
    assert_eq!(res.task_id.as_deref(), Some("T-1"));
    let droid = res.droid.as_ref().unwrap();
    assert_eq!(droid.version.as_deref(), Some("0.225.2"));
    assert_eq!(droid.num_turns, Some(5));
    assert_eq!(droid.model.as_deref(), Some(w.model_id().as_str()));
    assert!(res.session_id.is_some());
    // droid ran with --auto low (execution_mode code): Create and Edit were offered to the model
    let tools: Vec<String> = w.model.requests()[0]["body"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_owned))
        .collect();
    assert!(tools.contains(&"Create".to_owned()), "{tools:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn all_verification_passing_is_success() {
    let repo = git_repo(&[("a.txt", "hello\n")]);
    let r = repo.path();
    let w = World::new(json!([
        {"tool": [{"name": "Create", "args": {"file_path": p(r, "b.txt"), "content": "b\n"}}]},
        {"text": "Created b.txt."}
    ]))
    .await;
    let ran = run(
        &w.engine,
        &request(
            r,
            "Create b.txt",
            json!({"model": w.model_id(), "suggested_commands": ["test -f b.txt"]}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.result.issues, vec![]);
    assert_eq!(ran.result.tests.passed, Some(true));
    assert_eq!(ran.result.summary, "Created b.txt.");
    assert_eq!(
        ran.result
            .files_changed
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        ["b.txt"]
    );
}

/// More dirty files than the first record reads itself: their content (for line counts) is read
/// by a thread of its own while droid starts, and droid's first edit comes after it is done.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dirty_repository_s_content_is_read_while_droid_starts() {
    let files: Vec<(String, String)> = (0..100)
        .map(|i| (format!("f{i}.txt"), format!("{i}\n")))
        .collect();
    let listed: Vec<(&str, &str)> = files
        .iter()
        .map(|(n, c)| (n.as_str(), c.as_str()))
        .collect();
    let repo = git_repo(&listed);
    let r = repo.path();
    for i in 0..90 {
        std::fs::write(r.join(format!("f{i}.txt")), format!("{i}\ndirty\n")).unwrap();
    }
    for i in 0..10 {
        std::fs::write(r.join(format!("new{i}.txt")), "new\n").unwrap();
    }
    // older than the record's racy window: read after its walk, not during it
    tokio::time::sleep(Duration::from_millis(300)).await;
    let w = World::new(json!([
        {"tool": [{"name": "Edit", "args": {"file_path": p(r, "f0.txt"),
                   "old_str": "dirty", "new_str": "dirty\nmore"}}]},
        {"tool": [{"name": "Edit", "args": {"file_path": p(r, "new0.txt"),
                   "old_str": "new", "new_str": "newer"}}]},
        {"text": "Edited f0.txt and new0.txt."}
    ]))
    .await;
    let ran = run(
        &w.engine,
        &request(
            r,
            "Edit f0.txt and new0.txt",
            json!({"model": w.model_id(), "execution_mode": "code"}),
        ),
    )
    .await;
    let res = &ran.result;
    assert_eq!(res.status, Status::Success, "{res:#?}");
    let changed: Vec<(&str, ChangeType, Option<u64>, Option<u64>)> = res
        .files_changed
        .iter()
        .map(|f| {
            (
                f.path.as_str(),
                f.change_type,
                f.lines_added,
                f.lines_removed,
            )
        })
        .collect();
    // the 98 other dirty files are not reported: they did not change during the run
    assert_eq!(
        changed,
        [
            ("f0.txt", ChangeType::Modified, Some(1), Some(0)),
            ("new0.txt", ChangeType::Modified, Some(1), Some(1)),
        ]
    );
    assert!(
        !res.logs.iter().any(|l| l.contains("before their content")),
        "{:#?}",
        res.logs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_contract_at_its_limits_reaches_droid_whole() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"text": "Read it all."}])).await;
    // distinct heads and tails, so a cut anywhere shows
    let objective = format!("OBJ-HEAD{}OBJ-TAIL", "o".repeat(50_000 - 16));
    let instructions = format!("INS-HEAD{}INS-TAIL", "i".repeat(100_000 - 16));
    assert_eq!(objective.chars().count(), 50_000);
    assert_eq!(instructions.chars().count(), 100_000);
    let ran = run(
        &w.engine,
        &request(
            repo.path(),
            &objective,
            json!({"model": w.model_id(), "instructions": instructions}),
        ),
    )
    .await;
    assert_eq!(
        ran.result.status,
        Status::Success,
        "{:#?}",
        ran.result.issues
    );
    let sent = serde_json::to_string(&w.model.requests()).unwrap();
    assert!(
        sent.contains(&objective),
        "the objective did not reach the model whole"
    );
    assert!(
        sent.contains(&instructions),
        "the instructions did not reach the model whole"
    );
}

/// Turn 0 starts a `setsid sleep` (its own session, like droid's Execute children) and records
/// its pid; turn 1 hangs forever.
fn leak_then_hang(pid_file: &Path) -> Value {
    json!([
        {"tool": [execute(&format!("setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > {}", pid_file.display()))]},
        {"hang": true}
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hanging_model_times_out_and_nothing_survives() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fixture = TempDir::new("e2e-fixture").unwrap();
    let pid_file = fixture.path().join("sleep-timeout.pid");
    let w = World::granting(leak_then_hang(&pid_file), &[fixture.path()]).await;
    let ran = run(
        &w.engine,
        &request(
            repo.path(),
            "Start a sleeper",
            json!({"model": w.model_id(), "max_runtime_seconds": 4}),
        ),
    )
    .await;
    let sleeper = read_pid_file(&pid_file, Duration::from_secs(1)).await;
    let _ = std::fs::remove_file(&pid_file);
    assert_eq!(ran.result.status, Status::Timeout, "{:#?}", ran.result);
    assert!(
        ran.elapsed < Duration::from_secs(14),
        "took {:?}",
        ran.elapsed
    );
    assert_eq!(ran.issue_kinds(), vec!["timeout"]);
    assert_eq!(
        ran.commands().len(),
        1,
        "the Execute call is still reported"
    );
    assert!(
        wait_gone(ran.droid_pid(), Duration::from_secs(2)).await,
        "droid survived"
    );
    assert!(
        wait_gone(sleeper, Duration::from_secs(2)).await,
        "the setsid sleep survived"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_stops_droid_and_its_children() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fixture = TempDir::new("e2e-fixture").unwrap();
    let pid_file = fixture.path().join("sleep-cancel.pid");
    let w = World::granting(leak_then_hang(&pid_file), &[fixture.path()]).await;
    let cancel = CancellationToken::new();
    let trigger = {
        let cancel = cancel.clone();
        let pid_file = pid_file.clone();
        tokio::spawn(async move {
            let pid = read_pid_file(&pid_file, Duration::from_secs(30)).await;
            cancel.cancel();
            pid
        })
    };
    let ran = run_with(
        &w.engine,
        &request(
            repo.path(),
            "Start a sleeper",
            json!({"model": w.model_id(), "max_runtime_seconds": 60}),
        ),
        cancel,
    )
    .await;
    let sleeper = trigger.await.unwrap();
    let _ = std::fs::remove_file(&pid_file);
    assert_eq!(ran.result.status, Status::Cancelled, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["cancelled"]);
    assert!(
        ran.elapsed < Duration::from_secs(20),
        "took {:?}",
        ran.elapsed
    );
    assert!(
        wait_gone(ran.droid_pid(), Duration::from_secs(2)).await,
        "droid survived"
    );
    assert!(
        wait_gone(sleeper, Duration::from_secs(2)).await,
        "the setsid sleep survived"
    );
    assert!(!is_alive(sleeper));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_permission_abort_is_permission_denied() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    // execution_mode code runs droid with --auto low; a command the model labels high-risk aborts
    let w = World::new(json!([
        {"tool": [{"name": "Execute", "args": {"summary": "push", "command": "git push origin HEAD:main",
                   "riskLevel": "high", "riskLevelReason": "pushes"}}]},
        {"text": "never reached"}
    ]))
    .await;
    let ran = run(
        &w.engine,
        &request(
            repo.path(),
            "Push",
            json!({"model": w.model_id(), "execution_mode": "code"}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["permission_denied"]);
    assert_eq!(ran.result.droid.as_ref().unwrap().exit_code, Some(1));
    assert_eq!(
        ran.commands(),
        vec![("agent", "git push origin HEAD:main".to_owned(), None)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_model_stream_is_flagged() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    // the connection drops after one chunk: droid reports success with zero token usage
    let w = World::new(json!([{"close_mid": true}])).await;
    let ran = run(
        &w.engine,
        &request(repo.path(), "Say something", json!({"model": w.model_id()})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Partial, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["model_error"]);
    assert_eq!(ran.result.summary, "partial answer");
    assert!(ran.result.issues[0].description.contains("truncated"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_http_error_is_a_model_error() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::new(json!([{"status": 400, "error_message": "Bad request: invalid parameter"}]))
        .await;
    let ran = run(
        &w.engine,
        &request(repo.path(), "Say something", json!({"model": w.model_id()})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["model_error"]);
    assert_eq!(
        ran.result.summary,
        "droid failed: 400 Bad request: invalid parameter"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_factory_account_is_an_auth_failure() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let home = TempDir::new("e2e-noauth-home").unwrap();
    let scratch = TempDir::new("e2e-scratch").unwrap();
    // no airgap, no custom model, no key: droid's default model needs a Factory login
    let env = vec![
        ("HOME".into(), home.path().into()),
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
    ];
    let engine = engine(real_droid(), env, scratch.path());
    let ran = run(
        &engine,
        &request(
            repo.path(),
            "Say something",
            json!({"max_runtime_seconds": 60}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["auth_failure"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_droid_is_droid_not_found() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let scratch = TempDir::new("e2e-scratch").unwrap();
    let engine = engine("/nonexistent/droid".into(), Vec::new(), scratch.path());
    let ran = run(&engine, &request(repo.path(), "Anything", json!({}))).await;
    assert_eq!(ran.result.status, Status::Error);
    assert_eq!(ran.issue_kinds(), vec!["droid_not_found"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_outside_the_repository_is_a_conflict() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let outside = TempDir::new("e2e-outside").unwrap();
    let stray = outside.path().join("stray.txt");
    // droid --auto low lets Create write outside its cwd (recorded: autonomy-low-create-outside-cwd),
    // here where the sandbox lets it (a `sandbox_writable` directory)
    let w = World::granting(
        json!([
            {"tool": [{"name": "Create", "args": {"file_path": stray.display().to_string(), "content": "oops\n"}}]},
            {"text": "Wrote it."}
        ]),
        &[outside.path()],
    )
    .await;
    let ran = run(
        &w.engine,
        &request(
            repo.path(),
            "Write a file",
            json!({"model": w.model_id(), "execution_mode": "code"}),
        ),
    )
    .await;
    assert!(stray.exists(), "droid did not write the stray file");
    assert_eq!(ran.result.status, Status::Partial, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["conflict"]);
    assert_eq!(
        ran.result.issues[0].description,
        format!("droid wrote outside repo_root: {}", stray.display())
    );
    assert_eq!(ran.result.files_changed, vec![]);
}
