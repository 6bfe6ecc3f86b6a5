//! The engine end to end through the FAKE droid (`tests::fake_droid`), for what the real droid
//! cannot be made to do on demand: exit 0 without a completion event, crash mid-stream, print
//! garbage, oversized lines or a flood, linger after completion, ignore SIGTERM, leak a
//! grandchild into its own session, fail on stderr. Also the exact invocation droid gets (argv,
//! prompt file, environment) and requests rejected before anything starts. Every test checks the
//! status, the issue types, and that no process of the run survives it.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{ChangeType, FileChange, Status};
use droid_exec::{Engine, EngineConfig, RunEvent};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::fake_droid::{RECORD_ENV, SCENARIO_ENV, completion_event};
use tests::procs::{is_alive, pids_with_env, wait_gone};
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::common::{Ran, engine, git_repo, read_pid_file, request, run, run_with};

/// The variable the engine marks every process of a run with.
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";
/// How long a process the engine ended may take to disappear from `/proc`.
const GONE: Duration = Duration::from_secs(2);

/// A fake droid playing `steps`, and an engine driving it with PATH, the scenario and the record
/// file as its whole environment.
struct Fake {
    /// Scenario, record, pid and signal files: outside every repository a test uses, so no
    /// snapshot ever sees them.
    dir: TempDir,
    scratch: TempDir,
    engine: Engine,
}

impl Fake {
    fn new(steps: Value) -> Fake {
        Fake::tuned(steps, |_| {})
    }

    /// `tune` adjusts the configuration of [`super::common::engine`] (graces, extra variables).
    fn tuned(steps: Value, tune: impl FnOnce(&mut EngineConfig)) -> Fake {
        let dir = TempDir::new("fake-droid-run").unwrap();
        let scratch = TempDir::new("e2e-scratch").unwrap();
        let scenario = dir.path().join("scenario.json");
        let env = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            (SCENARIO_ENV.into(), scenario.into()),
            (RECORD_ENV.into(), dir.path().join("record.json").into()),
        ];
        let mut cfg = engine(tests::fake_droid_bin!(), env, scratch.path())
            .config()
            .clone();
        // the fake's own directory (its record, pid files) is the test's channel: granted, as
        // a user grants a directory the task needs besides the repository
        cfg.sandbox_writable.push(dir.path().to_path_buf());
        tune(&mut cfg);
        let fake = Fake {
            dir,
            scratch,
            engine: Engine::new(cfg),
        };
        fake.play(steps);
        fake
    }

    /// Replace the scenario (for steps that name files in [`Fake::file`]).
    fn play(&self, steps: Value) {
        let scenario = json!({ "steps": steps }).to_string();
        std::fs::write(self.file("scenario.json"), scenario).unwrap();
    }

    /// A path in the fake's own directory.
    fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// What the fake droid recorded of its invocation; `None` when it never started.
    fn record(&self) -> Option<Value> {
        let bytes = std::fs::read(self.file("record.json")).ok()?;
        Some(serde_json::from_slice(&bytes).unwrap())
    }
}

/// droid (the Started pid) and every process carrying the run's marker are gone.
async fn assert_nothing_survives(ran: &Ran, record: &Value) {
    let droid = ran.droid_pid();
    assert!(wait_gone(droid, GONE).await, "droid (pid {droid}) survived");
    let marker = record["env"][MARKER_VAR]
        .as_str()
        .expect("droid's environment has no run marker");
    // droid is reaped in the background once it completed: its tree is swept right after it
    let until = tokio::time::Instant::now() + GONE;
    while !pids_with_env(MARKER_VAR, marker).is_empty() && tokio::time::Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        pids_with_env(MARKER_VAR, marker),
        Vec::<i32>::new(),
        "processes of the run survived it"
    );
}

/// Live children of `pid`, from the parent field of every `/proc/<pid>/stat`.
fn children_of(pid: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    let mut out: Vec<i32> = entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|child| {
            std::fs::read_to_string(format!("/proc/{child}/stat")).is_ok_and(|stat| {
                // the parent pid is the second field after the command name, which ends at the
                // last ')' (it may itself hold spaces and parentheses)
                stat.rfind(')')
                    .and_then(|i| stat[i + 1..].split_whitespace().nth(1)?.parse().ok())
                    == Some(pid)
            })
        })
        .filter(|child| is_alive(*child))
        .collect();
    out.sort_unstable();
    out
}

/// Polls until `path` exists.
async fn wait_for_file(path: &Path, timeout: Duration) {
    let until = tokio::time::Instant::now() + timeout;
    while !path.exists() {
        assert!(
            tokio::time::Instant::now() < until,
            "{} never appeared",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

fn tool_call(id: &str, tool: &str, parameters: Value) -> Value {
    json!({"type": "tool_call", "id": id, "messageId": "m-1", "toolId": tool, "toolName": tool,
           "parameters": parameters, "timestamp": 1_795_320_771_553_u64, "session_id": "fake-session"})
}

fn assistant(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "id": "m-1", "text": text,
           "timestamp": 1_795_320_771_553_u64, "session_id": "fake-session"})
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_prompt_reaches_droid_only_through_a_private_file() {
    let repo = git_repo(&[("a.txt", "hello\n")]);
    let root = repo.path().display().to_string();
    let fake = Fake::tuned(json!([{"completion": "Done."}]), |cfg| {
        // the engine must give droid its own TMPDIR, not pass this one on
        cfg.env
            .push(("TMPDIR".into(), "/nonexistent-tmpdir".into()));
        cfg.env.push(("LANG".into(), "C.UTF-8".into()));
    });
    let ran = run(
        &fake.engine,
        &request(
            repo.path(),
            "OBJECTIVE-MARK add a greeting",
            json!({
                "instructions": "INSTRUCTIONS-MARK put it in a.txt",
                "constraints": ["CONSTRAINT-MARK keep it short"],
                "acceptance_criteria": ["ACCEPTANCE-MARK a.txt greets"],
                "suggested_commands": ["test -f a.txt"],
                "notes_for_human": "NOTES-MARK for humans only",
                "execution_mode": "code",
                "model": "custom:Mock-0",
                "reasoning_effort": "high",
                "session_id": "sess-1",
                "task_id": "T-7",
            }),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    assert_eq!(
        ran.commands(),
        vec![("verify", "test -f a.txt".to_owned(), Some(0))]
    );
    assert_eq!(ran.result.task_id.as_deref(), Some("T-7"));
    assert_eq!(
        ran.result.notes_for_human.as_deref(),
        Some("NOTES-MARK for humans only")
    );
    let record = fake.record().expect("droid never started");
    assert_nothing_survives(&ran, &record).await;

    let argv = strings(&record["argv"]);
    let prompt_file = PathBuf::from(argv.last().unwrap());
    assert!(
        prompt_file.starts_with(fake.scratch.path()),
        "the prompt file {} is not in the run's scratch directory",
        prompt_file.display()
    );
    assert_eq!(
        argv,
        [
            "exec",
            "--output-format",
            "stream-json",
            "--cwd",
            &root,
            "--auto",
            "low",
            "-m",
            "custom:Mock-0",
            "-r",
            "high",
            "-s",
            "sess-1",
            "-f",
            &prompt_file.display().to_string(),
        ]
    );
    assert!(
        !argv.iter().any(|a| a.contains("MARK")),
        "request text leaked into argv: {argv:?}"
    );
    assert!(!prompt_file.exists(), "the prompt file outlived the run");
    let prompt = record["prompt"].as_str().expect("droid could not read -f");
    for part in [
        "OBJECTIVE-MARK add a greeting",
        "INSTRUCTIONS-MARK put it in a.txt",
        "- CONSTRAINT-MARK keep it short",
        "- ACCEPTANCE-MARK a.txt greets",
        "- `test -f a.txt`",
        "```droid-executor-report",
    ] {
        assert!(prompt.contains(part), "missing {part:?} in:\n{prompt}");
    }
    assert!(
        !prompt.contains("NOTES-MARK"),
        "notes_for_human reached droid"
    );
    assert_eq!(record["cwd"], json!(root));

    // the environment is the engine's, TMPDIR replaced by the run's own, plus the run marker
    // and the run's own task store (what droid delegates goes there, in its TMPDIR)
    let env = record["env"].as_object().unwrap();
    let names: BTreeSet<&str> = env.keys().map(String::as_str).collect();
    assert_eq!(
        names,
        BTreeSet::from([
            "DROID_EXECUTOR_RUN_ID",
            "DROID_EXECUTOR_STORE_DIR",
            "FAKE_DROID_RECORD",
            "FAKE_DROID_SCENARIO",
            "LANG",
            "PATH",
            "TMPDIR",
        ])
    );
    for (name, value) in &fake.engine.config().env {
        let name = name.to_str().unwrap();
        if name != "TMPDIR" {
            assert_eq!(env[name], json!(value.to_str().unwrap()), "{name}");
        }
    }
    let tmpdir = PathBuf::from(env["TMPDIR"].as_str().unwrap());
    assert!(
        PathBuf::from(env["DROID_EXECUTOR_STORE_DIR"].as_str().unwrap()).starts_with(&tmpdir),
        "the run's store is not in its TMPDIR"
    );
    assert!(
        tmpdir.starts_with(fake.scratch.path()),
        "droid's TMPDIR {} is not the run's",
        tmpdir.display()
    );
    assert!(!tmpdir.exists(), "droid's TMPDIR outlived the run");
    assert!(env[MARKER_VAR].as_str().unwrap().starts_with("run-"));

    // execution_mode mixed runs at medium; no model, effort or session: no flags for them
    let ran = run(
        &fake.engine,
        &request(repo.path(), "Anything", json!({"execution_mode": "mixed"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    let record = fake.record().unwrap();
    assert_nothing_survives(&ran, &record).await;
    let argv = strings(&record["argv"]);
    assert_eq!(
        argv[..argv.len() - 1],
        [
            "exec",
            "--output-format",
            "stream-json",
            "--cwd",
            &root,
            "--auto",
            "medium",
            "-f"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_0_without_a_completion_event_is_a_failure() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::new(json!([{"emit": assistant("Working on it.")}, {"exit": 0}]));
    let ran = run(&fake.engine, &request(repo.path(), "Do it", json!({}))).await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["agent_error"]);
    assert!(
        ran.result.issues[0]
            .description
            .contains("exited 0 without a completion event"),
        "{:#?}",
        ran.result.issues
    );
    assert_eq!(ran.result.droid.as_ref().unwrap().exit_code, Some(0));
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_mid_stream_keeps_the_unfinished_command() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::new(json!([
        {"emit": assistant("Running the tests.")},
        {"emit": tool_call("call_0_0", "Execute", json!({"command": "cargo test", "riskLevel": "low"}))},
        {"crash": true},
    ]));
    let ran = run(&fake.engine, &request(repo.path(), "Test it", json!({}))).await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["agent_error"]);
    assert!(
        ran.result.issues[0].description.contains("SIGABRT"),
        "{:#?}",
        ran.result.issues
    );
    assert_eq!(
        ran.commands(),
        vec![("agent", "cargo test".to_owned(), None)]
    );
    assert_eq!(ran.result.droid.as_ref().unwrap().exit_code, None);
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_between_events_is_kept_in_the_logs() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::new(json!([
        {"raw": "Loading droid..."},
        {"emit": assistant("Looking.")},
        {"raw": "{\"type\": \"tool_call\", \"id\": "},
        {"emit": {"type": "brand_new_event", "x": 1}},
        {"raw": ""},
        {"raw": "\u{1b}[31mred\u{1b}[0m"},
        {"completion": "All done."},
    ]));
    let ran = run(&fake.engine, &request(repo.path(), "Look", json!({}))).await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    assert_eq!(ran.result.summary, "All done.");
    assert_eq!(
        ran.result.logs,
        vec![
            "droid output: Loading droid...".to_owned(),
            "droid output: {\"type\": \"tool_call\", \"id\": ".to_owned(),
            "droid output: {\"type\":\"brand_new_event\",\"x\":1}".to_owned(),
            "droid output: \u{1b}[31mred\u{1b}[0m".to_owned(),
        ]
    );
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oversized_line_is_skipped_and_logged() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::new(json!([{"long_line": 9 * 1024 * 1024}, {"completion": "All done."}]));
    let ran = run(&fake.engine, &request(repo.path(), "Say it", json!({}))).await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    assert_eq!(
        ran.result.logs,
        vec!["droid printed a 9437184-byte line; it was skipped".to_owned()]
    );
    assert!(ran.events.contains(&RunEvent::Warning {
        message: "droid printed a 9437184-byte line; it was skipped".into()
    }));
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_64_mib_flood_is_read_to_the_end() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::new(json!([{"flood_bytes": 64 * 1024 * 1024}, {"completion": "All done."}]));
    let ran = run(&fake.engine, &request(repo.path(), "Flood", json!({}))).await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    assert_eq!(ran.result.summary, "All done.");
    // 65536 lines of 1023 `x`: the first 50 are kept (bounded), the rest only counted
    let logs = &ran.result.logs;
    assert_eq!(logs.len(), 51, "{logs:#?}");
    assert_eq!(logs[0], format!("droid output: {}", "x".repeat(1023)));
    assert_eq!(
        logs[50],
        "65486 further lines of droid output were not events and were dropped"
    );
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_lingering_after_completion_is_stopped_at_once() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::new(json!([{"completion": "All done."}, {"hang": true}]));
    let ran = run(&fake.engine, &request(repo.path(), "Finish", json!({}))).await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    // stopped by us (SIGTERM at its completion event): no exit code, whether it was reaped
    // before the result or after
    assert_eq!(ran.result.droid.as_ref().unwrap().exit_code, None);
    settled(&fake.engine).await;
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_ignoring_sigterm_is_killed_after_the_kill_grace() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::tuned(json!([{"ignore_sigterm": true}, {"hang": true}]), |cfg| {
        cfg.kill_grace = Duration::from_secs(1);
    });
    let ran = run(
        &fake.engine,
        &request(repo.path(), "Hang", json!({"max_runtime_seconds": 2})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Timeout, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["timeout"]);
    // runtime 2 s, then SIGTERM is ignored for the whole 1 s grace, then SIGKILL
    assert!(
        ran.elapsed >= Duration::from_secs(3) && ran.elapsed < Duration::from_secs(8),
        "took {:?}",
        ran.elapsed
    );
    assert_eq!(ran.result.droid.as_ref().unwrap().exit_code, None);
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_grandchild_in_its_own_session_does_not_survive_a_timeout() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::tuned(json!([]), |cfg| {
        cfg.kill_grace = Duration::from_secs(1);
    });
    let pid_file = fake.file("sh.pid");
    // `; exit 0` keeps sh alive as the parent of sleep, so both processes can be checked
    fake.play(json!([
        {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": pid_file}},
        {"hang": true},
    ]));
    let watcher = {
        let pid_file = pid_file.clone();
        tokio::spawn(async move {
            let sh = read_pid_file(&pid_file, Duration::from_secs(30)).await;
            let until = tokio::time::Instant::now() + Duration::from_secs(5);
            loop {
                let children = children_of(sh);
                if !children.is_empty() {
                    return (sh, children);
                }
                assert!(
                    tokio::time::Instant::now() < until,
                    "sh (pid {sh}) never started its sleep"
                );
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let ran = run(
        &fake.engine,
        &request(
            repo.path(),
            "Leak a sleeper",
            json!({"max_runtime_seconds": 2}),
        ),
    )
    .await;
    let (sh, sleepers) = watcher.await.unwrap();
    assert_eq!(ran.result.status, Status::Timeout, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["timeout"]);
    assert!(
        ran.elapsed < Duration::from_secs(8),
        "took {:?}",
        ran.elapsed
    );
    assert!(wait_gone(sh, GONE).await, "the grandchild sh survived");
    for pid in sleepers {
        assert!(
            wait_gone(pid, GONE).await,
            "the grandchild's child {pid} survived"
        );
    }
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_model_on_stderr_is_a_model_error() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::new(json!([
        {"stderr": "Invalid model: custom:Nope-0"},
        {"stderr": ""},
        {"stderr": "Available built-in models:"},
        {"exit": 1},
    ]));
    let ran = run(
        &fake.engine,
        &request(repo.path(), "Do it", json!({"model": "custom:Nope-0"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Failed, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["model_error"]);
    assert_eq!(
        ran.result.summary,
        "droid failed: Invalid model: custom:Nope-0"
    );
    assert_eq!(ran.result.droid.as_ref().unwrap().exit_code, Some(1));
    assert_eq!(
        ran.result.logs,
        vec![
            "droid stderr: Invalid model: custom:Nope-0".to_owned(),
            "droid stderr: Available built-in models:".to_owned(),
        ]
    );
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outside_git_files_changed_come_from_the_walk() {
    let plain = TempDir::new("e2e-plain").unwrap();
    std::fs::write(plain.path().join("old.txt"), "old\n").unwrap();
    let fake = Fake::new(json!([
        {"write_file": {"path": "sub/new.txt", "content": "one\ntwo\n"}},
        {"completion": "Wrote sub/new.txt."},
    ]));
    let ran = run(&fake.engine, &request(plain.path(), "Write it", json!({}))).await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    assert_eq!(
        ran.result.files_changed,
        vec![FileChange {
            path: "sub/new.txt".into(),
            change_type: ChangeType::Added,
            old_path: None,
            highlights: Vec::new(),
            lines_added: None,
            lines_removed: None,
        }]
    );
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_report_of_failure_after_changing_files_is_partial() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let final_text = "I got stuck.\n```droid-executor-report\n{\"status\": \"failed\", \"summary\": \"Could not finish; wrote new.txt.\"}\n```";
    let fake = Fake::new(json!([
        {"write_file": {"path": "new.txt", "content": "one\n"}},
        {"completion": final_text},
    ]));
    let ran = run(&fake.engine, &request(repo.path(), "Write it", json!({}))).await;
    assert_eq!(ran.result.status, Status::Partial, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["agent_error"]);
    assert_eq!(ran.result.summary, "Could not finish; wrote new.txt.");
    assert_eq!(
        ran.result.files_changed,
        vec![FileChange {
            path: "new.txt".into(),
            change_type: ChangeType::Added,
            old_path: None,
            highlights: Vec::new(),
            lines_added: Some(1),
            lines_removed: Some(0),
        }]
    );
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_success_report_with_zero_usage_is_partial_and_a_model_error() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let mut completion = completion_event(
        "Done.\n```droid-executor-report\n{\"status\": \"success\", \"summary\": \"All good.\"}\n```",
        1_795_320_772_663,
    );
    completion["usage"] = json!({"input_tokens": 0, "output_tokens": 0,
        "cache_read_input_tokens": 0, "cache_creation_input_tokens": 0, "factory_credits": 0});
    let fake = Fake::new(json!([{"emit": completion}]));
    let ran = run(&fake.engine, &request(repo.path(), "Do it", json!({}))).await;
    assert_eq!(ran.result.status, Status::Partial, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["model_error"]);
    assert!(ran.result.issues[0].description.contains("truncated"));
    assert_eq!(ran.result.summary, "All good.");
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancellation_while_droid_hangs_stops_it() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::new(json!([]));
    let ready = fake.file("ready");
    fake.play(json!([
        {"write_file": {"path": ready, "content": "ready\n"}},
        {"hang": true},
    ]));
    let cancel = CancellationToken::new();
    let trigger = {
        let cancel = cancel.clone();
        tokio::spawn(async move {
            wait_for_file(&ready, Duration::from_secs(30)).await;
            cancel.cancel();
        })
    };
    let ran = run_with(
        &fake.engine,
        &request(repo.path(), "Hang", json!({"max_runtime_seconds": 60})),
        cancel,
    )
    .await;
    trigger.await.unwrap();
    assert_eq!(ran.result.status, Status::Cancelled, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), vec!["cancelled"]);
    assert!(
        ran.elapsed < Duration::from_secs(10),
        "took {:?}",
        ran.elapsed
    );
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_breaking_rules_never_starts_droid() {
    let fake = Fake::new(json!([{"completion": "never"}]));
    let ran = run(
        &fake.engine,
        &json!({"objective": "   ", "context": {"repo_root": "relative/repo"}, "bogus": true}),
    )
    .await;
    assert_eq!(ran.result.status, Status::Error, "{:#?}", ran.result);
    assert_eq!(
        ran.issue_kinds(),
        vec!["validation_error", "validation_error", "validation_error"]
    );
    let paths: Vec<&str> = ran
        .result
        .issues
        .iter()
        .map(|i| i.description.split(": ").next().unwrap())
        .collect();
    assert_eq!(paths, ["$.bogus", "$.objective", "$.context.repo_root"]);
    assert_eq!(
        ran.events,
        vec![RunEvent::Completed {
            status: Status::Error
        }]
    );
    assert_eq!(fake.record(), None, "droid was started");
}

/// With git older than 2.31 on droid's PATH the work tree is still read in-process, exactly
/// (the git-process path, which needs 2.31, is only for layouts the in-process record refuses).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_git_does_not_matter_to_the_in_process_record() {
    let tools = TempDir::new("old-git").unwrap();
    let path = super::common::path_with_old_git(tools.path());
    let fake = Fake::tuned(
        json!([
            {"write_file": {"path": "b.txt", "content": "b\n"}},
            {"write_file": {"path": "ignored/build.log", "content": "log\n"}},
            {"completion": "Done."}
        ]),
        |cfg| {
            for (k, v) in &mut cfg.env {
                if k == "PATH" {
                    v.clone_from(&path);
                }
            }
        },
    );
    let repo = git_repo(&[("a.txt", "a\n"), (".gitignore", "ignored/\n")]);
    let ran = run(&fake.engine, &request(repo.path(), "Write b", json!({}))).await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    // the repository is read in-process (issue 17): no git runs, so git 2.30 on PATH changes
    // nothing; .gitignore still applies and the line counts are there
    assert_eq!(
        ran.result.files_changed,
        vec![FileChange {
            path: "b.txt".into(),
            change_type: ChangeType::Added,
            old_path: None,
            highlights: Vec::new(),
            lines_added: Some(1),
            lines_removed: Some(0),
        }]
    );
    assert_eq!(ran.result.logs, Vec::<String>::new());
    assert_eq!(ran.result.issues, Vec::new());
    let record = fake.record().expect("droid did not run");
    assert_nothing_survives(&ran, &record).await;
}

/// A droid whose `--version` appends a line to `count` and prints `version`; written at `path`.
fn counting_droid(path: &Path, count: &Path, version: &str) {
    use std::os::unix::fs::PermissionsExt as _;
    let tmp = path.with_extension("tmp");
    std::fs::write(
        &tmp,
        format!(
            "#!/bin/sh\necho asked >> '{}'\necho '{version}'\n",
            count.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)).unwrap();
    // a new file, as an upgrade installs one (never a running binary rewritten in place)
    std::fs::rename(&tmp, path).unwrap();
}

/// droid's version is looked up once per process and binary: 200 engines asking at once (as
/// 200 concurrent `droid_ping`s each build one) start one `droid --version`, and a binary
/// replaced at the same path (another size) is asked again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droids_version_is_asked_once_per_binary_however_many_ask() {
    let dir = TempDir::new("version-cache").unwrap();
    let droid = dir.path().join("droid");
    let count = dir.path().join("count");
    counting_droid(&droid, &count, "1.0.0");
    let asked = |count: &Path| {
        std::fs::read_to_string(count)
            .map(|s| s.lines().count())
            .unwrap_or(0)
    };
    let mut asking = tokio::task::JoinSet::new();
    for _ in 0..200 {
        let e = engine(droid.clone(), Vec::new(), dir.path());
        asking.spawn(async move { e.droid_version().await });
    }
    let versions = asking.join_all().await;
    assert!(
        versions.iter().all(|v| v.as_deref() == Some("1.0.0")),
        "{versions:?}"
    );
    assert_eq!(asked(&count), 1, "droid --version runs");

    counting_droid(&droid, &count, "2.0.0-upgraded");
    let again = engine(droid.clone(), Vec::new(), dir.path());
    assert_eq!(
        again.droid_version().await.as_deref(),
        Some("2.0.0-upgraded")
    );
    assert_eq!(
        again.droid_version().await.as_deref(),
        Some("2.0.0-upgraded")
    );
    assert_eq!(asked(&count), 2, "droid --version runs after the upgrade");
}

/// `engine.settled()` under the suite's generous limit.
async fn settled(engine: &Engine) {
    tokio::time::timeout(Duration::from_secs(60), engine.settled())
        .await
        .expect("droid was not reaped");
}

/// The result of a run whose droid lingers after its completion event (ignoring SIGTERM, until
/// the test lets it go) comes while droid is still alive, with the run's real outcome; droid is
/// reaped in the background and then nothing of the run survives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_result_does_not_wait_for_droid_to_exit_after_its_completion() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    // long enough that only the release file can end droid while the test looks at it
    let fake = Fake::tuned(json!([]), |cfg| cfg.kill_grace = Duration::from_secs(600));
    let release = fake.file("release");
    fake.play(json!([
        {"write_file": {"path": "a.txt", "content": "y\n"}},
        // before its completion: our SIGTERM comes right after it
        {"ignore_sigterm": true},
        {"completion": "Changed a.txt."},
        {"wait_file": release},
    ]));
    let ran = run(
        &fake.engine,
        &request(repo.path(), "Change a.txt", json!({})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    assert_eq!(ran.result.summary, "Changed a.txt.");
    assert_eq!(
        ran.result
            .files_changed
            .iter()
            .map(|f| (f.path.as_str(), f.change_type))
            .collect::<Vec<_>>(),
        vec![("a.txt", ChangeType::Modified)]
    );
    assert_eq!(ran.result.droid.as_ref().unwrap().exit_code, None);
    let droid = ran.droid_pid();
    assert!(
        is_alive(droid),
        "droid (pid {droid}) was gone before the result came: the result waited for it"
    );
    assert!(matches!(
        ran.events.last(),
        Some(RunEvent::Completed {
            status: Status::Success
        })
    ));
    std::fs::write(&release, b"").unwrap();
    settled(&fake.engine).await;
    assert!(!is_alive(droid), "droid (pid {droid}) outlived its reaping");
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

/// A droid that ignores SIGTERM after its completion event, with a grandchild in its own session
/// still running, is killed in the background after the kill grace, and its grandchild with it;
/// the result came without waiting for either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_droid_ignoring_sigterm_after_completing_is_killed_in_the_background() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::tuned(json!([]), |cfg| cfg.kill_grace = Duration::from_secs(1));
    let pid_file = fake.file("sh.pid");
    fake.play(json!([
        {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": pid_file}},
        {"ignore_sigterm": true},
        {"completion": "All done."},
        {"hang": true},
    ]));
    let ran = run(&fake.engine, &request(repo.path(), "Finish", json!({}))).await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    let sh = read_pid_file(&pid_file, Duration::from_secs(30)).await;
    settled(&fake.engine).await;
    assert!(!is_alive(ran.droid_pid()), "droid survived its reaping");
    assert!(!is_alive(sh), "droid's grandchild (pid {sh}) survived");
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

/// Verification runs while droid is still being reaped after its completion event, and the
/// sweep that ends droid's tree leaves the verification commands (marked `<run>-verify-<i>`)
/// alone: the command below lets droid go, waits until nothing of droid's tree is left, and
/// still passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verification_beside_droid_s_reaping_is_not_swept_with_droid() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::tuned(json!([]), |cfg| cfg.kill_grace = Duration::from_secs(600));
    let release = fake.file("release");
    fake.play(json!([
        {"ignore_sigterm": true},
        {"completion": "All done."},
        {"wait_file": release},
    ]));
    let verify = format!(
        "run=\"${{{MARKER_VAR}%-verify-0}}\"; touch '{}'; \
         while grep -qsxz \"{MARKER_VAR}=$run\" /proc/[0-9]*/environ; do sleep 0.02; done; \
         sleep 0.3; echo verified",
        release.display()
    );
    let ran = run(
        &fake.engine,
        &request(
            repo.path(),
            "Finish",
            json!({"suggested_commands": [verify]}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.result.tests.passed, Some(true), "{:#?}", ran.result);
    assert_eq!(ran.commands(), vec![("verify", verify, Some(0))]);
    settled(&fake.engine).await;
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

/// A fake engine whose runs go under the run's supervisor (`droid-executor guard <marker> --
/// droid …`, as in every front-end), with `kill_grace`.
fn supervised(kill_grace: Duration) -> Fake {
    Fake::tuned(json!([]), |cfg| {
        cfg.kill_grace = kill_grace;
        cfg.supervisor = Some(tests::droid_bin::droid_executor_bin());
        // the supervisor process, not a cgroup leaf (see `in_a_cgroup_leaf_…` for those)
        cfg.cgroups = false;
    })
}

/// The cgroup v2 directory of live process `pid` (`0::<path>` of `/proc/<pid>/cgroup`).
fn cgroup_of(pid: i32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/cgroup"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .unwrap_or_default()
        .to_owned()
}

/// With a cgroup v2 hierarchy this process may write to (the front-ends' case wherever there is
/// one), droid runs straight under the engine in a leaf of its own, no supervisor process: the
/// result of a run whose droid lingers after its completion event (ignoring SIGTERM) comes while
/// droid is alive; a grandchild in its own session and one started with `env -i` are in the
/// leaf too, and `cgroup.kill` ends them all once the kill grace is over. The verification
/// command runs in a leaf of its own, and its `setsid` child (unmarked) is ended with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_cgroup_leaf_the_tree_ends_with_the_run_without_a_supervisor() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = Fake::tuned(json!([]), |cfg| {
        cfg.kill_grace = Duration::from_secs(1);
        cfg.supervisor = Some(tests::droid_bin::droid_executor_bin());
        cfg.cgroups = true;
    });
    let pid_file = fake.file("sh.pid");
    let env_i = fake.file("env_i.pid");
    let verify_child = fake.file("verify.pid");
    fake.play(json!([
        {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": pid_file}},
        {"spawn_grandchild": {"command": format!("exec env -i sh -c 'echo $$ > {}; exec sleep 600'", env_i.display()), "pid_file": fake.file("unused.pid")}},
        {"wait_file": env_i},
        {"write_file": {"path": "a.txt", "content": "y\n"}},
        {"ignore_sigterm": true},
        {"completion": "Changed a.txt."},
        {"hang": true},
    ]));
    // the command waits until its unmarked child is up, so that only the leaf can end it
    let verify = format!(
        "setsid env -i sh -c 'echo $$ > {0}; exec sleep 600' < /dev/null > /dev/null 2>&1 & \
         while [ ! -s {0} ]; do sleep 0.01; done; echo ok",
        verify_child.display()
    );
    let ran = run(
        &fake.engine,
        &request(
            repo.path(),
            "Change a.txt",
            json!({"suggested_commands": [verify]}),
        ),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.result.tests.passed, Some(true), "{:#?}", ran.result);
    let droid = ran.droid_pid();
    let argv = std::fs::read(format!("/proc/{droid}/cmdline")).unwrap_or_default();
    assert_ne!(
        argv.split(|b| *b == 0).nth(1),
        Some(b"guard".as_slice()),
        "the run went under a supervisor process: this machine gives no writable cgroup v2 \
         hierarchy (mount cgroup2 read-write and run the suite as a user that may write to its \
         own cgroup, e.g. root in a container or a systemd unit with Delegate=yes)"
    );
    let leaf = cgroup_of(droid);
    assert!(
        leaf.contains("/droid-executor-") && leaf.contains("/run-"),
        "droid (pid {droid}) is in cgroup {leaf:?}, not a run's leaf"
    );
    assert!(
        is_alive(droid),
        "droid (pid {droid}) was gone before the result came: the result waited for it"
    );
    let sh = read_pid_file(&pid_file, Duration::from_secs(30)).await;
    let unmarked = read_pid_file(&env_i, Duration::from_secs(30)).await;
    assert_eq!(cgroup_of(sh), leaf, "the setsid grandchild left the leaf");
    assert_eq!(
        cgroup_of(unmarked),
        leaf,
        "the env -i grandchild left the leaf"
    );
    let from_verify = read_pid_file(&verify_child, Duration::from_secs(30)).await;
    assert!(
        wait_gone(from_verify, GONE).await,
        "the verification command's setsid child (pid {from_verify}) survived it"
    );
    settled(&fake.engine).await;
    for (what, pid) in [("droid", droid), ("setsid sh", sh), ("env -i sh", unmarked)] {
        assert!(wait_gone(pid, GONE).await, "{what} (pid {pid}) survived");
    }
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;

    // the next run of the engine is not born in a killed leaf (Linux kills a process created
    // in a cgroup that was ever killed): it runs, and so do its two verification commands
    fake.play(json!([{"completion": "Again."}]));
    let again = run(
        &fake.engine,
        &request(
            repo.path(),
            "Again",
            json!({"suggested_commands": ["true", "sleep 300 & echo ok"]}),
        ),
    )
    .await;
    assert_eq!(again.result.status, Status::Success, "{:#?}", again.result);
    assert_eq!(again.result.tests.passed, Some(true), "{:#?}", again.result);
    settled(&fake.engine).await;
}

/// The run's supervisor (the pid of the run's `Started` event) and droid, its one live child.
fn supervisor_and_droid(ran: &Ran) -> (i32, i32) {
    let supervisor = ran.droid_pid();
    let argv = std::fs::read(format!("/proc/{supervisor}/cmdline")).unwrap_or_default();
    assert_eq!(
        argv.split(|b| *b == 0).nth(1),
        Some(b"guard".as_slice()),
        "the run's process {supervisor} is not its supervisor"
    );
    let droids = children_of(supervisor);
    assert_eq!(droids.len(), 1, "the supervisor's children: {droids:?}");
    (supervisor, droids[0])
}

/// Under the run's supervisor too (the front-ends' case), the result of a run whose droid
/// lingers after its completion event (ignoring SIGTERM) comes while droid is still alive; once
/// droid exits the supervisor ends its tree, a grandchild in its own session included, and
/// exits, and only then is the engine settled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_its_supervisor_the_result_does_not_wait_for_droid_either() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    // long enough that only the release file can end droid while the test looks at it
    let fake = supervised(Duration::from_secs(600));
    let release = fake.file("release");
    let pid_file = fake.file("sh.pid");
    fake.play(json!([
        {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": pid_file}},
        {"write_file": {"path": "a.txt", "content": "y\n"}},
        {"ignore_sigterm": true},
        {"completion": "Changed a.txt."},
        {"wait_file": release},
    ]));
    let ran = run(
        &fake.engine,
        &request(repo.path(), "Change a.txt", json!({})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    assert_eq!(ran.result.summary, "Changed a.txt.");
    assert_eq!(ran.result.droid.as_ref().unwrap().exit_code, None);
    let (supervisor, droid) = supervisor_and_droid(&ran);
    assert!(
        is_alive(droid),
        "droid (pid {droid}) was gone before the result came: the result waited for it"
    );
    let sh = read_pid_file(&pid_file, Duration::from_secs(30)).await;
    std::fs::write(&release, b"").unwrap();
    settled(&fake.engine).await;
    assert!(!is_alive(supervisor), "the supervisor outlived its reaping");
    assert!(!is_alive(droid), "droid (pid {droid}) outlived its reaping");
    assert!(
        wait_gone(sh, GONE).await,
        "droid's grandchild (pid {sh}) survived"
    );
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}

/// Under the run's supervisor, a droid that ignores SIGTERM after its completion event and never
/// exits is ended in the background after the kill grace, the supervisor asked to SIGKILL the
/// whole tree (a grandchild in its own session included); the result did not wait for it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn under_its_supervisor_a_droid_ignoring_sigterm_is_killed_in_the_background() {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let fake = supervised(Duration::from_secs(1));
    let pid_file = fake.file("sh.pid");
    fake.play(json!([
        {"spawn_grandchild": {"command": "sleep 600; exit 0", "pid_file": pid_file}},
        {"ignore_sigterm": true},
        {"completion": "All done."},
        {"hang": true},
    ]));
    let ran = run(&fake.engine, &request(repo.path(), "Finish", json!({}))).await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    assert_eq!(ran.issue_kinds(), Vec::<&str>::new());
    let supervisor = ran.droid_pid();
    let sh = read_pid_file(&pid_file, Duration::from_secs(30)).await;
    settled(&fake.engine).await;
    assert!(!is_alive(supervisor), "the supervisor outlived its reaping");
    assert!(
        wait_gone(sh, GONE).await,
        "droid's grandchild (pid {sh}) survived"
    );
    assert_nothing_survives(&ran, &fake.record().unwrap()).await;
}
