//! Background tasks end to end through the built `droid-executor` binary and the REAL droid
//! 0.225.2 (driven by the scripted model): a result that outlives the process that submitted it,
//! a cancel from another process that leaves no process of the run behind (`setsid` grandchildren
//! included), a supervisor killed with SIGKILL reported as `bridge_failure` with its run swept,
//! and the run slots (one run per repository at a time, other repositories in parallel).
//!
//! Every process of the binary runs with an empty environment plus exactly what the test gives it;
//! its `HOME` is a temp dir holding the repositories (`allowed_roots` defaults to `HOME`) and the
//! task store (`$HOME/.local/state/droid-executor`).

use std::cell::RefCell;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use droid_contract::{ChangeType, FileChange, Status, TaskRecord, TaskState};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::real_droid;
use tests::droid_home::DroidHome;
use tests::procs::{is_alive, pids_with_env, wait_gone};
use tests::scripted_model::ScriptedModel;

use super::binary::{Out, command, finish, git_repo_at};
use super::common::read_pid_file;

/// Waiting for a background task to reach a state.
const STATE_LIMIT: Duration = Duration::from_secs(60);
/// Time given to the processes of a finished task to be gone.
const GONE_LIMIT: Duration = Duration::from_secs(5);
/// The variable the engine marks every process of a run with.
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";

/// stdout as JSON.
fn json(out: &Out) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {out:#?}"))
}

/// stdout as a task record.
fn record(out: &Out) -> TaskRecord {
    serde_json::from_value(json(out))
        .unwrap_or_else(|e| panic!("stdout is not a task record ({e}): {out:#?}"))
}

/// The id in `run --background --json`'s `{"task_id": …}`, checked to be the only field and of
/// the shape `droid-<digits>-<4 hex digits>`.
fn submitted_id(out: &Out) -> String {
    let v = json(out);
    let obj = v
        .as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"));
    assert_eq!(obj.keys().collect::<Vec<_>>(), vec!["task_id"], "{v}");
    let id = obj["task_id"].as_str().unwrap().to_owned();
    let (secs, hex) = id
        .strip_prefix("droid-")
        .and_then(|rest| rest.split_once('-'))
        .unwrap_or_else(|| panic!("not a task id: {id:?}"));
    assert!(
        !secs.is_empty() && secs.bytes().all(|b| b.is_ascii_digit()),
        "{id:?}"
    );
    assert!(
        hex.len() == 4 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')),
        "{id:?}"
    );
    id
}

fn issue_kinds(rec: &TaskRecord) -> Vec<&'static str> {
    rec.result
        .as_ref()
        .map(|r| r.issues.iter().map(|i| i.kind.as_str()).collect())
        .unwrap_or_default()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn execute(command: &str) -> Value {
    json!({"name": "Execute", "args": {"summary": "run it", "command": command,
           "riskLevel": "low", "riskLevelReason": "test command"}})
}

/// droid runs a command that leaks a `setsid` grandchild (its pid goes to `pid_file`), then the
/// model never answers again.
fn leak_then_hang(pid_file: &Path) -> Value {
    json!([
        {"tool": [execute(&format!(
            "setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > {}",
            pid_file.display()
        ))]},
        {"hang": true}
    ])
}

/// The real droid's HOME (also the binary's, holding the repositories and the task store) and a
/// scripted model. Dropping it kills whatever the tasks it submitted left running (only on a
/// failed test: a passing one leaves nothing).
struct World {
    model: ScriptedModel,
    home: DroidHome,
    submitted: RefCell<Vec<String>>,
}

impl World {
    async fn new() -> World {
        // scripts name paths inside the home, so the home exists before the script
        let model = ScriptedModel::start(json!([{"text": "placeholder"}]))
            .await
            .unwrap();
        let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
        World {
            model,
            home,
            submitted: RefCell::new(Vec::new()),
        }
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    /// A git repository `name` in the home.
    fn repo(&self, name: &str) -> PathBuf {
        let dir = self.path().join(name);
        git_repo_at(&dir, &[("a.txt", "hello\n")]);
        dir
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.home.env();
        env.push(("DROID_CLI_CMD".into(), real_droid().into()));
        // `fixture/` holds what the tests' commands leave for them (pid files): granted
        let fixture = self.path().join("fixture");
        std::fs::create_dir_all(&fixture).unwrap();
        env.push(("DROID_EXECUTOR_SANDBOX_WRITABLE".into(), fixture.into()));
        env
    }

    async fn run<S: AsRef<OsStr>>(&self, args: &[S]) -> Out {
        finish(command(args, &self.env(), self.path()).spawn().unwrap()).await
    }

    /// `run --background --json --repo REPO --model … EXTRA… OBJECTIVE`, checked to exit 0 at
    /// once with only the id; the id.
    async fn submit(&self, repo: &Path, extra: &[&str], objective: &str) -> String {
        let repo = s(repo);
        let model = self.home.model_id("Mock");
        let mut args = vec![
            "run",
            "--background",
            "--json",
            "--repo",
            &repo,
            "--model",
            &model,
        ];
        args.extend_from_slice(extra);
        args.push(objective);
        let submitting = Instant::now();
        let out = self.run(&args).await;
        let took = submitting.elapsed();
        assert_eq!(out.code, Some(0), "{out:#?}");
        // it waits for the supervisor to take the task (at most 10 s), never for the run
        assert!(
            took < Duration::from_secs(15),
            "the submitter took {took:?}"
        );
        let id = submitted_id(&out);
        self.submitted.borrow_mut().push(id.clone());
        id
    }

    /// `tasks show ID --json`.
    async fn show(&self, id: &str) -> TaskRecord {
        let out = self.run(&["tasks", "show", id, "--json"]).await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        record(&out)
    }

    fn task_dir(&self, id: &str) -> PathBuf {
        self.path()
            .join(".local/state/droid-executor/tasks")
            .join(id)
    }

    /// The supervisor's pid from `owner.json`.
    fn supervisor(&self, id: &str) -> i32 {
        let path = self.task_dir(id).join("owner.json");
        let owner: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        i32::try_from(owner["pid"].as_u64().unwrap()).unwrap()
    }

    /// The task's events, as `events.ndjson` holds them.
    fn events(&self, id: &str) -> Vec<Value> {
        std::fs::read_to_string(self.task_dir(id).join("events.ndjson"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// droid's pid, from the task's `started` event.
    fn droid_pid(&self, id: &str) -> i32 {
        let events = self.events(id);
        events
            .iter()
            .find(|e| e["type"] == "started")
            .and_then(|e| e["pid"].as_u64())
            .and_then(|p| i32::try_from(p).ok())
            .unwrap_or_else(|| panic!("no started event with a pid: {events:#?}"))
    }

    /// [`at` of the first `started` event, `at` of the `completed` event] of the task's run.
    fn run_interval(&self, id: &str) -> (String, String) {
        let events = self.events(id);
        let at = |kind: &str| {
            events
                .iter()
                .find(|e| e["type"] == kind)
                .and_then(|e| e["at"].as_str())
                .unwrap_or_else(|| panic!("no {kind} event for {id}: {events:#?}"))
                .to_owned()
        };
        (at("started"), at("completed"))
    }

    /// Poll `tasks show` until the task is running and `pid_file` holds a pid; that pid.
    async fn running_with(&self, id: &str, pid_file: &Path) -> i32 {
        let until = Instant::now() + STATE_LIMIT;
        loop {
            let rec = self.show(id).await;
            assert!(
                matches!(rec.state, TaskState::Queued | TaskState::Running),
                "the task ended before it was cancelled: {rec:#?}"
            );
            if rec.state == TaskState::Running && pid_file.exists() {
                return read_pid_file(pid_file, Duration::from_secs(5)).await;
            }
            assert!(
                Instant::now() < until,
                "the task never got running with {} written: {rec:#?}",
                pid_file.display()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for id in self.submitted.borrow().iter() {
            // the supervisor first (by its pid, if that pid still runs this task's worker), then
            // what its run started (by pid, found by the run's marker)
            if let Ok(bytes) = std::fs::read(self.task_dir(id).join("owner.json"))
                && let Ok(owner) = serde_json::from_slice::<Value>(&bytes)
                && let Some(pid) = owner["pid"].as_u64().and_then(|p| i32::try_from(p).ok())
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.windows(id.len()).any(|w| w == id.as_bytes()))
            {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            for pid in pids_with_env(MARKER_VAR, &format!("task-{id}")) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// Waits until no live process carries the task's marker; the ones left after `GONE_LIMIT`.
async fn run_gone(id: &str) -> Vec<i32> {
    let marker = format!("task-{id}");
    let until = Instant::now() + GONE_LIMIT;
    loop {
        let pids = pids_with_env(MARKER_VAR, &marker);
        if pids.is_empty() || Instant::now() >= until {
            return pids;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Waits until `pid` carries the task's marker (a process in the middle of an exec shows an empty
/// environment for a moment).
async fn carries_marker(id: &str, pid: i32) {
    let marker = format!("task-{id}");
    let until = Instant::now() + GONE_LIMIT;
    while !pids_with_env(MARKER_VAR, &marker).contains(&pid) {
        assert!(
            Instant::now() < until,
            "pid {pid} never showed marker {marker}: {:?}",
            pids_with_env(MARKER_VAR, &marker)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_result_outlives_the_submitting_process() {
    let w = World::new().await;
    let repo = w.repo("repo");
    // the model takes 2 s over its first answer: the task is still running after the submitter
    // is gone
    w.model.set_script(json!([
        {"sleep": 2, "tool": [{"name": "Create", "args": {"file_path": s(&repo.join("b.txt")), "content": "b\n"}}]},
        {"text": "Created b.txt."}
    ]));
    let id = w
        .submit(&repo, &["--command", "test -f b.txt"], "Create b.txt")
        .await;

    // the submitter has exited; its task lives on in its own supervisor
    let supervisor = w.supervisor(&id);
    assert!(is_alive(supervisor), "the supervisor {supervisor} is gone");
    let early = w.show(&id).await;
    assert!(
        matches!(early.state, TaskState::Queued | TaskState::Running) && early.result.is_none(),
        "{early:#?}"
    );

    let out = w
        .run(&["tasks", "wait", &id, "--json", "--timeout", "90"])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let rec = record(&out);
    assert_eq!(rec.task_id, id);
    assert_eq!(rec.state, TaskState::Success, "{rec:#?}");
    let result = rec.result.clone().unwrap();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.task_id.as_deref(), Some(id.as_str()));
    assert_eq!(result.issues, vec![]);
    assert_eq!(
        result.files_changed,
        vec![FileChange {
            path: "b.txt".into(),
            change_type: ChangeType::Added,
            old_path: None,
            highlights: vec!["created by droid (1 line)".into()],
            lines_added: Some(1),
            lines_removed: Some(0),
        }]
    );
    assert_eq!(result.tests.passed, Some(true));
    assert_eq!(std::fs::read_to_string(repo.join("b.txt")).unwrap(), "b\n");

    let out = w.run(&["tasks", "list", "--json"]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let list: Vec<TaskRecord> = serde_json::from_value(json(&out)).unwrap();
    assert_eq!(list, vec![rec.clone()]);
    // no id: the latest task
    let out = w.run(&["tasks", "show", "--json"]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(record(&out), rec);

    assert!(
        wait_gone(supervisor, GONE_LIMIT).await,
        "the supervisor outlived its task"
    );
    assert_eq!(run_gone(&id).await, Vec::<i32>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_from_a_second_process_leaves_nothing_behind() {
    let w = World::new().await;
    let repo = w.repo("repo");
    let pid_file = w.path().join("fixture/sleep.pid");
    w.model.set_script(leak_then_hang(&pid_file));
    let id = w.submit(&repo, &[], "Start a sleeper").await;
    let sleeper = w.running_with(&id, &pid_file).await;
    let supervisor = w.supervisor(&id);
    carries_marker(&id, sleeper).await;
    assert!(is_alive(supervisor), "the supervisor {supervisor} is gone");

    let out = w.run(&["tasks", "cancel", &id, "--json"]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let rec = record(&out);
    assert_eq!(rec.task_id, id);
    assert_eq!(rec.state, TaskState::Cancelled, "{rec:#?}");
    let result = rec.result.as_ref().unwrap();
    assert_eq!(result.status, Status::Cancelled, "{result:#?}");
    assert_eq!(issue_kinds(&rec), vec!["cancelled"]);

    assert_eq!(run_gone(&id).await, Vec::<i32>::new());
    assert!(
        wait_gone(sleeper, GONE_LIMIT).await,
        "the setsid sleep {sleeper} survived"
    );
    assert!(
        wait_gone(supervisor, GONE_LIMIT).await,
        "the supervisor {supervisor} survived"
    );
    // the record stays as committed
    assert_eq!(w.show(&id).await, rec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_supervisor_is_reported_as_bridge_failure() {
    let w = World::new().await;
    let repo = w.repo("repo");
    let pid_file = w.path().join("fixture/sleep.pid");
    w.model.set_script(leak_then_hang(&pid_file));
    let id = w.submit(&repo, &[], "Start a sleeper").await;
    let sleeper = w.running_with(&id, &pid_file).await;
    let supervisor = w.supervisor(&id);
    carries_marker(&id, sleeper).await;

    let droid = w.droid_pid(&id);
    assert!(is_alive(droid), "droid {droid} is gone before the kill");

    kill(Pid::from_raw(supervisor), Signal::SIGKILL).unwrap();
    assert!(
        wait_gone(supervisor, GONE_LIMIT).await,
        "SIGKILL did not stop the supervisor {supervisor}"
    );
    // droid dies with its parent; the run's guardian ends the setsid sleep at once, before
    // anyone looks at the task
    assert!(
        wait_gone(droid, GONE_LIMIT).await,
        "droid {droid} outlived its supervisor"
    );
    assert!(
        wait_gone(sleeper, GONE_LIMIT).await,
        "the setsid sleep {sleeper} outlived its supervisor"
    );

    let rec = w.show(&id).await;
    assert_eq!(rec.task_id, id);
    assert_eq!(rec.state, TaskState::Error, "{rec:#?}");
    let result = rec.result.as_ref().unwrap();
    assert_eq!(result.status, Status::Error, "{result:#?}");
    assert_eq!(result.task_id.as_deref(), Some(id.as_str()));
    assert_eq!(issue_kinds(&rec), vec!["bridge_failure"]);
    // that look buried the run: nothing of it is left
    assert_eq!(
        pids_with_env(MARKER_VAR, &format!("task-{id}")),
        Vec::<i32>::new()
    );
    assert!(!is_alive(sleeper), "the setsid sleep {sleeper} survived");
    // committed once: the next look answers the same
    assert_eq!(w.show(&id).await, rec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_repository_runs_one_task_at_a_time_others_run_in_parallel() {
    let w = World::new().await;
    let a = w.repo("repo-a");
    let b = w.repo("repo-b");
    // every answer takes 2 s, so every run lasts at least that long
    w.model.set_script(json!([{"sleep": 2, "text": "Done."}]));
    let a1 = w.submit(&a, &[], "First in A").await;
    let a2 = w.submit(&a, &[], "Second in A").await;
    let b1 = w.submit(&b, &[], "First in B").await;

    for id in [&a1, &a2, &b1] {
        let out = w
            .run(&["tasks", "wait", id, "--json", "--timeout", "90"])
            .await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        let rec = record(&out);
        assert_eq!(rec.state, TaskState::Success, "{rec:#?}");
        assert_eq!(
            rec.result.as_ref().map(|r| r.status),
            Some(Status::Success),
            "{rec:#?}"
        );
    }

    let (a1_start, a1_end) = w.run_interval(&a1);
    let (a2_start, a2_end) = w.run_interval(&a2);
    let (b1_start, b1_end) = w.run_interval(&b1);
    let times =
        format!("A1 {a1_start}..{a1_end}\nA2 {a2_start}..{a2_end}\nB1 {b1_start}..{b1_end}");
    // the same repository: one after the other, in submission order
    assert!(a1_end < a2_start, "A1 and A2 overlap:\n{times}");
    // another repository: alongside
    let overlaps = |start: &str, end: &str| b1_start.as_str() < end && start < b1_end.as_str();
    assert!(
        overlaps(&a1_start, &a1_end) || overlaps(&a2_start, &a2_end),
        "B1 ran alone:\n{times}"
    );
}
