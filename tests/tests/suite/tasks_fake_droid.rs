//! Background tasks end to end through the FAKE droid (`tests::fake_droid`) and the real
//! supervisor (`droid-executor worker`, started detached by [`Tasks::submit`]): fifty tasks at
//! once under the run-slot limits, retention by TTL, ids that name no task, cancelling a queued
//! task, sync runs sharing the slots with tasks, secrets kept out of the store, supervisors that
//! never start or cannot be started, and event replay. Each test has its own store and
//! repositories, and checks that no process of its tasks (the supervisor, or anything carrying the
//! task's run marker) outlives it.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use droid_contract::{ExecutionRequest, IssueType, Status, TaskRecord, TaskState};
use droid_exec::{
    EVENT_CHANNEL_CAPACITY, Engine, EngineConfig, EngineError, Phase, RunEvent, TaskFilter, Tasks,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::droid_executor_bin;
use tests::fake_droid::{RECORD_ENV, SCENARIO_ENV};
use tests::procs::{pids_with_env, wait_gone};
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::common::{engine, git_repo, request};

/// The variable the engine marks every process of a run with (`task-<id>` for a task).
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";
/// Longest a single task of these tests may take to finish once it can run.
const FINISH: Duration = Duration::from_secs(60);
/// Longest a submit may take (the supervisor gets 10 s to come up).
const SUBMIT: Duration = Duration::from_secs(30);
/// How long a supervisor may take to exit after committing its result.
const GONE: Duration = Duration::from_secs(5);
/// How long a task may take to reach a state it is heading for.
const REACH: Duration = Duration::from_secs(20);

/// A task store, a scratch root and a directory for scenario and record files, each a temp dir.
/// Dropped with unfinished tasks (a test failed half-way), it asks them to cancel and gives them a
/// few seconds, so no hanging fake droid outlives the test.
pub(super) struct Store {
    store: TempDir,
    scratch: TempDir,
    files: TempDir,
}

impl Store {
    pub(super) fn new() -> Store {
        Store {
            store: TempDir::new("e2e-store").unwrap(),
            scratch: TempDir::new("e2e-scratch").unwrap(),
            files: TempDir::new("e2e-scenarios").unwrap(),
        }
    }

    pub(super) fn root(&self) -> &Path {
        self.store.path()
    }

    fn task_dir(&self, id: &str) -> PathBuf {
        self.root().join("tasks").join(id)
    }

    /// A front-end's configuration: the fake droid playing `steps` (scenario file `<name>.json`)
    /// with PATH and the scenario as its whole environment, this store, at most 4 runs at once,
    /// the built `droid-executor` as supervisor; then `tune`.
    fn config(
        &self,
        name: &str,
        steps: Value,
        tune: impl FnOnce(&mut EngineConfig),
    ) -> EngineConfig {
        let scenario = self.files.path().join(format!("{name}.json"));
        std::fs::write(&scenario, json!({ "steps": steps }).to_string()).unwrap();
        let env = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            (SCENARIO_ENV.into(), scenario.into()),
        ];
        let mut cfg = engine(tests::fake_droid_bin!(), env, self.scratch.path())
            .config()
            .clone();
        cfg.store_dir = Some(self.root().to_path_buf());
        cfg.max_concurrent = 4;
        cfg.task_ttl = Duration::from_secs(3600);
        cfg.supervisor = Some(droid_executor_bin());
        // the scenarios' directory is the test's channel (records): granted to the runs
        cfg.sandbox_writable.push(self.files.path().to_path_buf());
        tune(&mut cfg);
        cfg
    }

    /// The tasks of this store as seen by a front-end configured by [`Store::config`].
    pub(super) fn tasks(
        &self,
        name: &str,
        steps: Value,
        tune: impl FnOnce(&mut EngineConfig),
    ) -> Tasks {
        Tasks::open(&self.config(name, steps, tune)).unwrap()
    }

    /// The pid of the task's supervisor, from `owner.json`.
    pub(super) fn supervisor(&self, id: &str) -> i32 {
        let path = self.task_dir(id).join("owner.json");
        let owner: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        i32::try_from(owner["pid"].as_u64().expect("owner.json has no pid")).unwrap()
    }

    /// The task's submission number, from `task.json` (the order `list` sorts by).
    fn seq(&self, id: &str) -> u64 {
        let path = self.task_dir(id).join("task.json");
        let meta: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        meta["seq"].as_u64().expect("task.json has no seq")
    }

    /// Names of the files in the task's directory, sorted.
    fn files_of(&self, id: &str) -> BTreeSet<String> {
        std::fs::read_dir(self.task_dir(id))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect()
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.root().join("tasks")) else {
            return;
        };
        let unfinished: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|dir| dir.join("owner.json").exists() && !dir.join("result.json").exists())
            .collect();
        for dir in &unfinished {
            let _ = std::fs::write(dir.join("cancel"), "test cleanup\n");
        }
        let until = Instant::now() + Duration::from_secs(10);
        while Instant::now() < until && unfinished.iter().any(|d| !d.join("result.json").exists()) {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// A request for `repo`, parsed without host checks (the supervisor admits it again).
pub(super) fn req(repo: &Path, objective: &str, extra: Value) -> ExecutionRequest {
    ExecutionRequest::from_value(&request(repo, objective, extra), None).unwrap()
}

/// Submit `request`, under a timeout.
pub(super) async fn submit(tasks: &Tasks, request: &ExecutionRequest) -> String {
    tokio::time::timeout(SUBMIT, tasks.submit(request))
        .await
        .expect("submit did not return")
        .unwrap()
        .to_string()
}

/// Wait for the task to finish; its final record.
pub(super) async fn finish(tasks: &Tasks, id: &str) -> TaskRecord {
    let rec = tokio::time::timeout(FINISH + Duration::from_secs(10), tasks.wait(id, FINISH))
        .await
        .expect("wait did not return within its own timeout")
        .unwrap();
    assert!(
        rec.state.is_finished(),
        "{id} did not finish within {FINISH:?}: {rec:#?}"
    );
    rec
}

/// Poll the task's status until it is `state`.
pub(super) async fn reach(tasks: &Tasks, id: &str, state: TaskState) -> TaskRecord {
    let until = tokio::time::Instant::now() + REACH;
    loop {
        let rec = tasks.status(id).await.unwrap();
        if rec.state == state {
            return rec;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{id} never became {}: {rec:#?}",
            state.as_str()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The task's supervisor (pid `supervisor`) exits, and no process carries the task's marker.
pub(super) async fn assert_task_ended(id: &str, supervisor: i32) {
    assert!(
        wait_gone(supervisor, GONE).await,
        "the supervisor of {id} (pid {supervisor}) is still alive"
    );
    assert_eq!(
        pids_with_env(MARKER_VAR, &format!("task-{id}")),
        Vec::<i32>::new(),
        "processes of task {id} survived it"
    );
}

/// The `type` of every event.
fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["type"].as_str().expect("an event without a type"))
        .collect()
}

fn assistant(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "id": "m-1", "text": text,
           "timestamp": 1_795_320_771_553_u64, "session_id": "fake-session"})
}

fn is_no_such_task(err: &EngineError, asked: &str) -> bool {
    matches!(err, EngineError::NoSuchTask { id, .. } if id == asked)
        && err.to_string().starts_with("no such task: ")
}

/// The largest number of `intervals` (start, end; RFC 3339 strings, which sort in time order)
/// open at one instant. Touching intervals (one ends when the next starts) do not overlap.
fn max_overlap(intervals: &[(String, String)]) -> usize {
    // at equal times an end (0) comes before a start (1)
    let mut edges: Vec<(&str, u8)> = intervals
        .iter()
        .flat_map(|(s, e)| [(s.as_str(), 1), (e.as_str(), 0)])
        .collect();
    edges.sort_unstable();
    let (mut open, mut most) = (0_usize, 0_usize);
    for (_, edge) in edges {
        if edge == 1 {
            open += 1;
            most = most.max(open);
        } else {
            open -= 1;
        }
    }
    most
}

/// The time a run held its slot: its first `snapshot` progress event to its `completed` event.
fn run_interval(id: &str, events: &[Value]) -> (String, String) {
    let at = |e: &Value| {
        e["at"]
            .as_str()
            .expect("an event without a time")
            .to_owned()
    };
    let start = events
        .iter()
        .find(|e| e["type"] == "progress" && e["phase"] == "snapshot")
        .map(at)
        .unwrap_or_else(|| panic!("{id} has no snapshot event: {events:#?}"));
    let end = events
        .iter()
        .find(|e| e["type"] == "completed")
        .map(at)
        .unwrap_or_else(|| panic!("{id} has no completed event: {events:#?}"));
    assert!(start <= end, "{id} ended before it started: {events:#?}");
    (start, end)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fifty_tasks_at_once_each_finish_with_exactly_one_result() {
    let store = Store::new();
    let tasks = store.tasks(
        "nap",
        json!([{"sleep_ms": 200}, {"completion": "Done."}]),
        |cfg| cfg.max_concurrent = 4,
    );
    let repos: Vec<TempDir> = (0..10)
        .map(|i| git_repo(&[("a.txt", &format!("repo {i}\n"))]))
        .collect();
    let submits: Vec<_> = (0..50)
        .map(|n| {
            let tasks = tasks.clone();
            let repo = n % repos.len();
            let request = req(repos[repo].path(), &format!("Task {n}"), json!({}));
            tokio::spawn(async move { (repo, submit(&tasks, &request).await) })
        })
        .collect();
    let mut repo_of: BTreeMap<String, usize> = BTreeMap::new();
    for s in submits {
        let (repo, id) = s.await.unwrap();
        assert_eq!(
            repo_of.insert(id.clone(), repo),
            None,
            "{id} handed out twice"
        );
    }
    assert_eq!(repo_of.len(), 50);

    let mut intervals: BTreeMap<String, (String, String)> = BTreeMap::new();
    for id in repo_of.keys() {
        let rec = finish(&tasks, id).await;
        assert_eq!(rec.state, TaskState::Success, "{id}: {:#?}", rec.result);
        let want = BTreeSet::from(
            [
                "events.ndjson",
                "lock",
                "owner.json",
                "request.json",
                "result.json",
                "started",
                "task.json",
                "worker.log",
            ]
            .map(String::from),
        );
        // The result is visible (linked into place) a moment before its writer removes its temp
        // file and the task's reserve: wait for the writer to be done, under a timeout.
        let until = tokio::time::Instant::now() + REACH;
        while store.files_of(id) != want && tokio::time::Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        assert_eq!(
            store.files_of(id),
            want,
            "{id}: one result and no temp files"
        );
        let events = tasks.events(id, 0).unwrap();
        assert_eq!(
            types(&events).iter().filter(|t| **t == "completed").count(),
            1,
            "{id}: {events:#?}"
        );
        intervals.insert(id.clone(), run_interval(id, &events));
    }

    let all: Vec<(String, String)> = intervals.values().cloned().collect();
    assert_eq!(
        max_overlap(&all),
        4,
        "runs at once (max_concurrent 4): {intervals:#?}"
    );
    for repo in 0..repos.len() {
        let mut same: Vec<(&String, &(String, String))> = intervals
            .iter()
            .filter(|(id, _)| repo_of[*id] == repo)
            .collect();
        same.sort_by(|a, b| a.1.cmp(b.1));
        for pair in same.windows(2) {
            let ((first, (_, end)), (second, (start, _))) = (pair[0], pair[1]);
            assert!(
                start >= end,
                "{first} and {second} ran on repo {repo} at once: {same:#?}"
            );
        }
    }

    let listed = tasks.list(&TaskFilter::default()).await.unwrap();
    let mut newest_first: Vec<&String> = repo_of.keys().collect();
    newest_first.sort_by_key(|id| std::cmp::Reverse(store.seq(id)));
    assert_eq!(
        listed.iter().map(|r| &r.task_id).collect::<Vec<_>>(),
        newest_first
    );
    assert!(listed.iter().all(|r| r.state == TaskState::Success));

    let queue: Vec<_> = std::fs::read_dir(store.root().join("queue"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(
        queue,
        Vec::<std::ffi::OsString>::new(),
        "tickets left behind"
    );
    for id in repo_of.keys() {
        assert_task_ended(id, store.supervisor(id)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn expired_results_are_cleaned_and_running_tasks_are_not() {
    let store = Store::new();
    let ttl = Duration::from_secs(1);
    let quick = store.tasks("quick", json!([{"completion": "Done."}]), |cfg| {
        cfg.task_ttl = ttl;
    });
    let hanging = store.tasks("hang", json!([{"hang": true}]), |cfg| cfg.task_ttl = ttl);
    let repos: Vec<TempDir> = (0..3).map(|_| git_repo(&[("a.txt", "x\n")])).collect();

    let hung = submit(
        &hanging,
        &req(repos[0].path(), "Hang", json!({"max_runtime_seconds": 60})),
    )
    .await;
    let first = submit(&quick, &req(repos[1].path(), "Finish", json!({}))).await;
    let second = submit(&quick, &req(repos[2].path(), "Finish too", json!({}))).await;
    let supervisors: Vec<i32> = [&hung, &first, &second]
        .map(|id| store.supervisor(id))
        .into();
    for id in [&first, &second] {
        let rec = finish(&quick, id).await;
        assert_eq!(rec.state, TaskState::Success, "{id}: {:#?}", rec.result);
    }
    reach(&hanging, &hung, TaskState::Running).await;
    tokio::time::sleep(ttl + Duration::from_millis(500)).await;

    // a result past the TTL is gone as soon as anyone looks, before any clean
    let err = quick.status(&second).await.unwrap_err();
    assert!(is_no_such_task(&err, &second), "{err:?}");
    assert!(err.to_string().contains("expired"), "{err}");
    assert!(
        !store.task_dir(&second).exists(),
        "{second} was not removed"
    );

    assert_eq!(quick.clean(false).await.unwrap(), 1);
    let err = quick.status(&first).await.unwrap_err();
    assert!(is_no_such_task(&err, &first), "{err:?}");
    assert!(!store.task_dir(&first).exists(), "{first} was not removed");
    assert_eq!(
        hanging.status(&hung).await.unwrap().state,
        TaskState::Running
    );
    assert!(store.task_dir(&hung).is_dir(), "a running task was removed");

    hanging.cancel(&hung).await.unwrap();
    let rec = finish(&hanging, &hung).await;
    assert_eq!(rec.state, TaskState::Cancelled, "{:#?}", rec.result);
    for (id, pid) in [&hung, &first, &second].into_iter().zip(supervisors) {
        assert_task_ended(id, pid).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_and_malformed_ids_are_no_such_task() {
    let store = Store::new();
    let tasks = store.tasks("never", json!([{"completion": "never"}]), |_| {});
    let err = tasks.status("droid-1-ffff").await.unwrap_err();
    assert!(is_no_such_task(&err, "droid-1-ffff"), "{err:?}");
    let err = tasks.status("../etc").await.unwrap_err();
    assert!(is_no_such_task(&err, "../etc"), "{err:?}");
    let err = tasks
        .wait("nope", Duration::from_secs(1))
        .await
        .unwrap_err();
    assert!(is_no_such_task(&err, "nope"), "{err:?}");
    let err = tasks.cancel("").await.unwrap_err();
    assert!(is_no_such_task(&err, ""), "{err:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_queued_task_cancels_without_starting() {
    let store = Store::new();
    let tasks = store.tasks("hang", json!([{"hang": true}]), |cfg| {
        cfg.max_concurrent = 1;
    });
    let (repo_a, repo_b) = (git_repo(&[("a.txt", "a\n")]), git_repo(&[("b.txt", "b\n")]));
    let hang = json!({"max_runtime_seconds": 60});
    let a = submit(&tasks, &req(repo_a.path(), "Hang", hang.clone())).await;
    reach(&tasks, &a, TaskState::Running).await;
    let b = submit(&tasks, &req(repo_b.path(), "Wait", hang)).await;
    let supervisors = [store.supervisor(&a), store.supervisor(&b)];
    assert_eq!(tasks.status(&b).await.unwrap().state, TaskState::Queued);

    tasks.cancel(&b).await.unwrap();
    let rec = finish(&tasks, &b).await;
    assert_eq!(rec.state, TaskState::Cancelled, "{:#?}", rec.result);
    let issues: Vec<IssueType> = rec.result.unwrap().issues.iter().map(|i| i.kind).collect();
    assert_eq!(issues, vec![IssueType::Cancelled]);
    let events = tasks.events(&b, 0).unwrap();
    assert_eq!(types(&events), ["progress", "completed"], "{events:#?}");
    assert_eq!(
        (&events[0]["phase"], &events[1]["status"]),
        (&json!("queued"), &json!("cancelled"))
    );
    assert!(
        !store.task_dir(&b).join("started").exists(),
        "a cancelled queued task was marked started"
    );
    assert_eq!(tasks.status(&a).await.unwrap().state, TaskState::Running);

    tasks.cancel(&a).await.unwrap();
    let rec = finish(&tasks, &a).await;
    assert_eq!(rec.state, TaskState::Cancelled, "{:#?}", rec.result);
    assert_task_ended(&a, supervisors[0]).await;
    assert_task_ended(&b, supervisors[1]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sync_runs_share_the_slots() {
    let store = Store::new();
    let tasks = store.tasks("hang", json!([{"hang": true}]), |cfg| {
        cfg.max_concurrent = 1;
    });
    let record = store.files.path().join("sync-record.json");
    let engine = Engine::new(
        store.config("sync", json!([{"completion": "Done."}]), |cfg| {
            cfg.max_concurrent = 1;
            cfg.env.push((RECORD_ENV.into(), record.clone().into()));
        }),
    );
    let repo = git_repo(&[("a.txt", "x\n")]);
    let hung = submit(
        &tasks,
        &req(repo.path(), "Hang", json!({"max_runtime_seconds": 60})),
    )
    .await;
    let supervisor = store.supervisor(&hung);
    reach(&tasks, &hung, TaskState::Running).await;

    let (tx, mut rx) = tokio::sync::mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let sync_request = request(repo.path(), "Finish", json!({}));
    let run = tokio::spawn(async move {
        engine
            .execute(&sync_request, CancellationToken::new(), Some(tx))
            .await
    });
    let first = tokio::time::timeout(Duration::from_secs(10), rx.recv())
        .await
        .expect("the sync run published nothing")
        .expect("the sync run ended without an event");
    assert!(
        matches!(
            first,
            RunEvent::Progress {
                phase: Phase::Queued,
                ..
            }
        ),
        "{first:?}"
    );
    let next = tokio::time::timeout(Duration::from_secs(1), rx.recv()).await;
    assert!(
        next.is_err(),
        "the sync run went on while the task held the only slot: {next:?}"
    );
    assert!(
        !record.exists(),
        "droid was started while the slot was taken"
    );
    assert!(!run.is_finished());

    tasks.cancel(&hung).await.unwrap();
    let rec = finish(&tasks, &hung).await;
    assert_eq!(rec.state, TaskState::Cancelled, "{:#?}", rec.result);
    let result = tokio::time::timeout(FINISH, run)
        .await
        .expect("the sync run did not end")
        .unwrap();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert!(
        result.logs[0].starts_with("waited "),
        "no note of the wait: {:#?}",
        result.logs
    );
    let mut rest = Vec::new();
    while let Some(e) = tokio::time::timeout(Duration::from_secs(5), rx.recv())
        .await
        .expect("the event stream did not end")
    {
        rest.push(e);
    }
    assert!(
        rest.iter().any(|e| matches!(e, RunEvent::Started { .. })),
        "{rest:#?}"
    );
    assert_eq!(
        rest.last(),
        Some(&RunEvent::Completed {
            status: Status::Success
        })
    );
    let recorded: Value = serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    let marker = recorded["env"][MARKER_VAR].as_str().unwrap();
    assert_eq!(pids_with_env(MARKER_VAR, marker), Vec::<i32>::new());
    assert_task_ended(&hung, supervisor).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_never_reach_the_store() {
    const KEY: &str = "fk-testsecret123456";
    const BEARER: &str = "abcdefghijklmnop";
    let store = Store::new();
    let with_key = |cfg: &mut EngineConfig| {
        cfg.env.push(("FACTORY_API_KEY".into(), KEY.into()));
    };
    let talker = store.tasks(
        "talker",
        json!([
            {"emit": assistant(&format!("Found FACTORY_API_KEY={KEY} in the environment."))},
            {"stderr": format!("debug: using key {KEY}")},
            {"completion": format!("Done with {KEY}.")},
        ]),
        with_key,
    );
    let failer = store.tasks(
        "failer",
        json!([
            {"stderr": format!("error: key {KEY} rejected (Authorization: Bearer {BEARER})")},
            {"exit": 1},
        ]),
        with_key,
    );
    let (repo_a, repo_b) = (git_repo(&[("a.txt", "a\n")]), git_repo(&[("b.txt", "b\n")]));
    let instructions =
        json!({"instructions": format!("Call the API with `Authorization: Bearer {BEARER}`.")});
    let talked = submit(
        &talker,
        &req(repo_a.path(), "Use the API", instructions.clone()),
    )
    .await;
    let failed = submit(&failer, &req(repo_b.path(), "Use the API", instructions)).await;

    for (tasks, id, state) in [
        (&talker, &talked, TaskState::Success),
        (&failer, &failed, TaskState::Failed),
    ] {
        let supervisor = store.supervisor(id);
        let rec = finish(tasks, id).await;
        assert_eq!(rec.state, state, "{id}: {:#?}", rec.result);
        assert_task_ended(id, supervisor).await;
        let dir = store.task_dir(id);
        for name in store.files_of(id) {
            let path = dir.join(&name);
            let text = String::from_utf8_lossy(&std::fs::read(&path).unwrap()).into_owned();
            for secret in [KEY, BEARER] {
                assert!(
                    !text.contains(secret),
                    "{secret} in {}:\n{text}",
                    path.display()
                );
            }
            assert_eq!(
                std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
                0o600,
                "{}",
                path.display()
            );
        }
        assert_eq!(
            std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777,
            0o700
        );
        let stored = tasks.request(id).unwrap();
        assert_eq!(
            stored["instructions"],
            json!("Call the API with `Authorization: Bearer [REDACTED]`.")
        );
    }
    // the secrets did reach the store's writers, masked
    let events = talker.events(&talked, 0).unwrap();
    assert!(
        events.iter().any(|e| e["type"] == "message"
            && e["text"] == json!("Found FACTORY_API_KEY=[REDACTED] in the environment.")),
        "{events:#?}"
    );
    let result = failer.result(&failed).await.unwrap().unwrap();
    assert!(
        result.logs.iter().any(|l| l.contains("[REDACTED]")),
        "{:#?}",
        result.logs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_supervisor_that_never_starts_is_a_bridge_failure() {
    let quitter = Path::new("/bin/true");
    assert!(
        quitter.is_file(),
        "/bin/true is missing: install coreutils (apt-get install coreutils)"
    );
    let store = Store::new();
    let tasks = store.tasks("never", json!([{"completion": "never"}]), |cfg| {
        cfg.supervisor = Some(quitter.to_path_buf());
    });
    let repo = git_repo(&[("a.txt", "x\n")]);
    let started = Instant::now();
    let id = submit(&tasks, &req(repo.path(), "Never runs", json!({}))).await;
    let took = started.elapsed();
    assert!(
        took >= Duration::from_secs(10) && took < Duration::from_secs(20),
        "submit took {took:?}"
    );
    let rec = tasks.status(&id).await.unwrap();
    assert_eq!(rec.state, TaskState::Error, "{rec:#?}");
    let issues: Vec<IssueType> = rec.result.unwrap().issues.iter().map(|i| i.kind).collect();
    assert_eq!(issues, vec![IssueType::BridgeFailure]);
    assert!(!store.task_dir(&id).join("started").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_supervisor_leaves_no_task() {
    let store = Store::new();
    let missing = store.files.path().join("no-such-supervisor");
    let tasks = store.tasks("never", json!([{"completion": "never"}]), |cfg| {
        cfg.supervisor = Some(missing.clone());
    });
    let repo = git_repo(&[("a.txt", "x\n")]);
    let err = tokio::time::timeout(
        SUBMIT,
        tasks.submit(&req(repo.path(), "Never runs", json!({}))),
    )
    .await
    .expect("submit did not return")
    .unwrap_err();
    assert!(
        matches!(&err, EngineError::Spawn { program, .. } if *program == missing.display().to_string()),
        "{err:?}"
    );
    let left: Vec<_> = std::fs::read_dir(store.root().join("tasks"))
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(left, Vec::<std::ffi::OsString>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn events_replay_in_order() {
    let store = Store::new();
    let tasks = store.tasks(
        "chatty",
        json!([
            {"emit": assistant("Looking around.")},
            {"emit": assistant("Still looking.")},
            {"emit": assistant("Found it.")},
            {"completion": "Done."},
        ]),
        |_| {},
    );
    let repo = git_repo(&[("a.txt", "x\n")]);
    let id = submit(&tasks, &req(repo.path(), "Look", json!({}))).await;
    let supervisor = store.supervisor(&id);
    let rec = finish(&tasks, &id).await;
    assert_eq!(rec.state, TaskState::Success, "{:#?}", rec.result);

    let all = tasks.events(&id, 0).unwrap();
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    let n = u64::try_from(all.len()).unwrap();
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>(), "{all:#?}");
    assert_eq!(types(&all).last(), Some(&"completed"), "{all:#?}");
    assert_eq!(
        types(&all).iter().filter(|t| **t == "message").count(),
        3,
        "{all:#?}"
    );
    let times: Vec<&str> = all.iter().map(|e| e["at"].as_str().unwrap()).collect();
    assert!(times.is_sorted(), "{times:#?}");
    for k in 0..=n + 2 {
        let skip = usize::try_from(k.min(n)).unwrap();
        assert_eq!(
            tasks.events(&id, k).unwrap(),
            all[skip..].to_vec(),
            "after {k}"
        );
    }
    assert_task_ended(&id, supervisor).await;
}
