//! `droid-executor tasks …` and `run --background` as a user meets them, with the fake droid:
//! the answers to mistakes (invalid requests, unknown ids, no tasks yet, a bad `--state`), the
//! exit codes of `wait` (3 while unfinished) and `cancel`, `clean --all --json`, the human
//! listing, and a sync `run` that waits for a background task on the same repository.

use std::path::{Path, PathBuf};
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::binary::{FakeHome, Out, command, droid_executor, finish};

/// The fake droid's HOME, with the `tasks` commands as a user types them.
struct Home(FakeHome);

impl std::ops::Deref for Home {
    type Target = FakeHome;
    fn deref(&self) -> &FakeHome {
        &self.0
    }
}

impl Home {
    fn new(steps: &Value) -> Home {
        let home = Home(FakeHome::new("tasks-cli", &[]));
        home.play(steps);
        home
    }

    async fn run(&self, args: &[&str]) -> Out {
        droid_executor(args, &self.env(), &self.repo()).await
    }

    fn tasks_dir(&self) -> PathBuf {
        self.file(".local/state/droid-executor/tasks")
    }

    fn task_count(&self) -> usize {
        std::fs::read_dir(self.tasks_dir()).map_or(0, Iterator::count)
    }

    /// Submit `objective` in the background; its id.
    async fn submit(&self, objective: &str) -> String {
        let out = self
            .run(&["run", "--background", "--json", objective])
            .await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        let v: Value = serde_json::from_str(&out.stdout).unwrap();
        v["task_id"].as_str().unwrap().to_owned()
    }

    /// `tasks ARGS --json` as a value, with the exit code.
    async fn record(&self, args: &[&str]) -> (Option<i32>, Value) {
        let mut all = vec!["tasks"];
        all.extend_from_slice(args);
        all.push("--json");
        let out = self.run(&all).await;
        let v = serde_json::from_str(&out.stdout)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {out:#?}"));
        (out.code, v)
    }

    /// Poll `tasks show ID` until its state is `state`.
    async fn until_state(&self, id: &str, state: &str) -> Value {
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let (_, rec) = self.record(&["show", id]).await;
            if rec["state"] == state {
                return rec;
            }
            assert!(
                tokio::time::Instant::now() < until,
                "{id} never became {state}: {rec:#}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn no_such_task(out: &Out, id: &str) {
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr
            .starts_with(&format!("droid-executor: no such task: {id} (")),
        "{out:#?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mistakes_get_clear_answers_and_create_nothing() {
    let home = Home::new(&json!([{"completion": "Done."}]));
    let out = home.run(&["tasks", "show"]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(
        out.stderr,
        "droid-executor: no tasks yet; start one with: droid-executor run --background …\n"
    );
    no_such_task(
        &home.run(&["tasks", "show", "droid-1-ffff"]).await,
        "droid-1-ffff",
    );
    no_such_task(
        &home.run(&["tasks", "wait", "../../etc"]).await,
        "../../etc",
    );
    no_such_task(&home.run(&["tasks", "cancel", "x"]).await, "x");
    let bad_state = home.run(&["tasks", "list", "--state", "done"]).await;
    assert_eq!(bad_state.code, Some(2), "{bad_state:#?}");
    assert!(
        bad_state.stderr.contains("unknown task state \"done\""),
        "{bad_state:#?}"
    );
    let invalid = home
        .run(&["run", "--background", "--json", "--max-runtime", "0", "x"])
        .await;
    assert_eq!(invalid.code, Some(2), "{invalid:#?}");
    assert_eq!(invalid.issue_kinds(), vec!["validation_error"]);
    let outside = home
        .run(&["run", "--background", "--json", "--repo", "/", "x"])
        .await;
    assert_eq!(outside.code, Some(2), "{outside:#?}");
    assert_eq!(outside.issue_kinds(), vec!["validation_error"]);
    assert_eq!(home.task_count(), 0, "an invalid request makes no task");
    let (code, list) = home.record(&["list"]).await;
    assert_eq!((code, list), (Some(0), json!([])));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wait_cancel_list_and_clean() {
    let home = Home::new(&json!([{"hang": true}]));
    let id = home.submit("hang until cancelled").await;
    assert_eq!(home.task_count(), 1);
    home.until_state(&id, "running").await;
    let (code, rec) = home.record(&["wait", &id, "--timeout", "0"]).await;
    assert_eq!(code, Some(3), "still running: {rec:#}");
    assert_eq!(rec["result"], Value::Null);
    let human = home.run(&["tasks", "list"]).await;
    assert_eq!(human.code, Some(0));
    let lines: Vec<&str> = human.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{}", human.stdout);
    assert!(lines[0].starts_with("TASK "), "{}", human.stdout);
    assert!(
        lines[1].starts_with(&id)
            && lines[1].contains(" running ")
            && lines[1].ends_with(" hang until cancelled"),
        "{}",
        human.stdout
    );
    let (code, rec) = home.record(&["cancel", &id]).await;
    assert_eq!(code, Some(1), "{rec:#}");
    assert_eq!(rec["state"], "cancelled");
    assert_eq!(rec["result"]["status"], "cancelled");
    assert_eq!(rec["result"]["task_id"], json!(id));
    // cancelling a finished task changes nothing
    let (code, again) = home.record(&["cancel", &id]).await;
    assert_eq!((code, &again["state"]), (Some(1), &json!("cancelled")));
    let (code, cleaned) = home.record(&["clean"]).await;
    assert_eq!(
        (code, cleaned),
        (Some(0), json!({"removed": 0})),
        "within the TTL"
    );
    let (code, cleaned) = home.record(&["clean", "--all"]).await;
    assert_eq!((code, cleaned), (Some(0), json!({"removed": 1})));
    no_such_task(&home.run(&["tasks", "show", &id]).await, &id);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_run_waits_for_a_background_task_on_its_repository() {
    let home = Home::new(&json!([{"sleep_ms": 2500}, {"completion": "Done."}]));
    let id = home.submit("background first").await;
    home.until_state(&id, "running").await;
    let sync = command(&["run", "--json", "sync second"], &home.env(), &home.repo())
        .spawn()
        .unwrap();
    let out = finish(sync).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let (_, rec) = home.record(&["show", &id]).await;
    assert_eq!(rec["state"], "success", "the task finished first: {rec:#}");
    let finished = rec["updated_at"].as_str().unwrap().to_owned();
    let result = out.result();
    assert!(
        result.logs.iter().any(|l| l.starts_with("waited ")),
        "the sync run says it waited: {:?}",
        result.logs
    );
    assert!(!finished.is_empty());
    assert!(Path::new(&home.tasks_dir()).is_dir());
}
