//! Issue 29, item 13, and issue 32, item 6: `pend` and `cancel` (the default family, with or
//! without a `provider`), `pend_<p>` and `cancel_<p>` (the opt-in toolset `per_provider`) and
//! `droid_pend` without a `task_id` act on the calling MCP session's own latest task, never on
//! another client's; `droid-executor pend <provider>` without an id takes this repository's
//! latest task, never another repository's.
//!
//! Two `droid-executor mcp` processes share one HOME and task store, as two clients on one
//! machine do. Before the fix, session B's `cancel_droid {}` cancelled the task session A had
//! just asked for (the newest droid task of the whole store), and `pend droid` in one repository
//! showed the task of another.

use std::path::Path;

use droid_contract::{TaskRecord, TaskState};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::binary::{FakeHome, Out, droid_executor, git_repo_at};
use super::mcp_stdio::{
    Home, Server, assert_all_gone, hanging_run, leak_then_hang, record_of, submit,
};

/// The text of a tool result.
fn text(answer: &Value) -> &str {
    answer["content"][0]["text"].as_str().unwrap_or_default()
}

/// The task record of a `pend_<p>` / `cancel_<p>` answer (the reply, then the record's fields).
fn delegated_record(answer: &Value) -> TaskRecord {
    let mut whole = answer.clone();
    let sc = whole["structuredContent"]
        .as_object_mut()
        .unwrap_or_else(|| panic!("no structuredContent: {answer:#}"));
    sc.shift_remove("reply");
    record_of(&whole)
}

/// The answer of `tool` without a task id in a session that started no task: an error that says
/// so and how to name another session's task.
async fn refused(s: &mut Server, id: i64, tool: &str, args: Value, expected: &str) {
    let answer = s.call(json!(id), tool, args).await;
    assert_eq!(
        (answer["isError"].clone(), text(&answer)),
        (json!(true), expected),
        "{tool}: {answer:#}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sessions_pend_and_cancel_without_an_id_never_touch_this_sessions_task() {
    let home = Home::new(&json!([]));
    let pid_file = home.fixture("sh.pid");
    home.play(&leak_then_hang(&pid_file));
    // both delegation toolsets: the default `ask` family and seed 002's `ask_droid`
    let mut env = home.env();
    env.push((
        "DROID_EXECUTOR_TOOLSETS".into(),
        "default,per_provider".into(),
    ));
    let mut a = Server::start(&env, &home.repo());
    let mut b = Server::start(&env, &home.repo());
    a.initialize().await;
    b.initialize().await;

    // session A asks droid in the background; the run hangs
    let asked = a
        .call(
            json!(1),
            "ask",
            json!({"provider": "droid", "message": "Think it over."}),
        )
        .await;
    assert_eq!(asked["isError"], false, "{asked:#}");
    let task = asked["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task_id: {asked:#}"))
        .to_owned();
    let (reaper, pids) = hanging_run(&pid_file).await;

    // session B started nothing: without a task id it is told so, and A's task is left alone
    let none_droid = "no droid tasks yet in this session; start one with ask_droid, or pass \
                      the task_id of a task another session started";
    refused(&mut b, 1, "cancel_droid", json!({}), none_droid).await;
    let none = "no tasks yet in this session; start one with ask, or pass the task_id of a task \
                another session started";
    refused(&mut b, 4, "cancel", json!({}), none).await;
    refused(&mut b, 5, "pend", json!({}), none).await;
    refused(
        &mut b,
        6,
        "pend",
        json!({"provider": "droid"}),
        "no droid tasks yet in this session; start one with ask (provider droid), or pass the \
         task_id of a task another session started",
    )
    .await;
    refused(
        &mut b,
        2,
        "pend_droid",
        json!({"wait_seconds": 0}),
        none_droid,
    )
    .await;
    refused(
        &mut b,
        3,
        "droid_pend",
        json!({}),
        "no tasks yet in this session; start one with droid_submit, or pass the task_id of a \
         task another session started",
    )
    .await;
    // A has a droid task, not a codex one
    refused(
        &mut a,
        2,
        "cancel_codex",
        json!({}),
        "no codex tasks yet in this session; start one with ask_codex, or pass the task_id of \
         a task another session started",
    )
    .await;
    refused(
        &mut a,
        3,
        "cancel",
        json!({"provider": "codex"}),
        "no codex tasks yet in this session; start one with ask (provider codex), or pass the \
         task_id of a task another session started",
    )
    .await;
    // naming the task is the caller's choice: B may look at it by id
    let by_id = b.call(json!(7), "pend", json!({"task_id": task})).await;
    let rec = delegated_record(&by_id);
    assert_eq!(
        (rec.task_id.as_str(), rec.state),
        (task.as_str(), TaskState::Running),
        "{by_id:#}"
    );

    // A's own pend without an id is its task, still running (per provider, of droid, or any)
    let pended = a.call(json!(3), "pend_droid", json!({})).await;
    let rec = delegated_record(&pended);
    assert_eq!(
        (rec.task_id.as_str(), rec.state),
        (task.as_str(), TaskState::Running),
        "B's calls must not have cancelled A's task: {pended:#}"
    );
    let pended = a
        .call(json!(30), "pend", json!({"provider": "droid"}))
        .await;
    let rec = delegated_record(&pended);
    assert_eq!(rec.task_id, task, "{pended:#}");
    let pended = a.call(json!(31), "pend", json!({})).await;
    let rec = delegated_record(&pended);
    assert_eq!(
        (rec.task_id.as_str(), rec.state),
        (task.as_str(), TaskState::Running),
        "B's calls must not have cancelled A's task: {pended:#}"
    );
    let generic = a.call(json!(4), "droid_pend", json!({})).await;
    assert_eq!(record_of(&generic).task_id, task, "{generic:#}");

    // A's own cancel without an id stops it
    let cancelled = a.call(json!(5), "cancel", json!({})).await;
    assert_eq!(delegated_record(&cancelled).task_id, task, "{cancelled:#}");
    let ended = a
        .call(json!(6), "pend_droid", json!({"wait_seconds": 30}))
        .await;
    let rec = delegated_record(&ended);
    assert_eq!(
        (rec.task_id.as_str(), rec.state),
        (task.as_str(), TaskState::Cancelled),
        "{ended:#}"
    );
    assert_all_gone(&reaper, &pids).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_pend_without_an_id_is_this_sessions_latest_submission() {
    let home = Home::new(&json!([{"completion": "Done."}]));
    let mut a = home.server();
    let mut b = home.server();
    a.initialize().await;
    b.initialize().await;
    let first = submit(&mut a, &home, 1, "A's task").await;
    let second = submit(&mut b, &home, 1, "B's task").await;
    // B's submission is the newest of the store; A's latest is still its own
    let of_a = a
        .call(json!(2), "droid_pend", json!({"wait_seconds": 30}))
        .await;
    assert_eq!(
        (record_of(&of_a).task_id, record_of(&of_a).state),
        (first.clone(), TaskState::Success),
        "{of_a:#}"
    );
    let of_b = b
        .call(json!(2), "droid_pend", json!({"wait_seconds": 30}))
        .await;
    assert_eq!(record_of(&of_b).task_id, second, "{of_b:#}");
    // a fresh session has none of its own, and still reaches either by id
    let mut c = home.server();
    c.initialize().await;
    refused(
        &mut c,
        1,
        "droid_pend",
        json!({}),
        "no tasks yet in this session; start one with droid_submit, or pass the task_id of a \
         task another session started",
    )
    .await;
    let named = c
        .call(json!(2), "droid_pend", json!({"task_id": first}))
        .await;
    assert_eq!(record_of(&named).task_id, first, "{named:#}");
}

/// `droid-executor ask droid MESSAGE --background` in `dir`: the task id.
async fn ask_in(home: &FakeHome, dir: &Path, message: &str) -> String {
    let out = droid_executor(&["ask", "droid", message, "--background"], &home.env(), dir).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let id = out.stdout.trim().to_owned();
    assert!(id.starts_with("droid-"), "{out:#?}");
    id
}

/// `droid-executor pend droid ARGS --wait 60 --json` in `dir`.
async fn pend_in(home: &FakeHome, dir: &Path, args: &[&str]) -> Out {
    let mut all = vec!["pend", "droid", "--wait", "60", "--json"];
    all.extend_from_slice(args);
    droid_executor(&all, &home.env(), dir).await
}

fn task_of(out: &Out) -> String {
    assert_eq!(out.code, Some(0), "{out:#?}");
    let rec: TaskRecord = serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not a task record ({e}): {out:#?}"));
    rec.task_id
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_pend_without_an_id_is_this_repositorys_latest_task() {
    let home = FakeHome::new("escape-sessions", &[]);
    home.play(&json!([{"completion": "Done."}]));
    let one = home.repo();
    let sub = one.join("src/deep");
    std::fs::create_dir_all(&sub).unwrap();
    let two = home.file("two");
    git_repo_at(&two, &[("b.txt", "b\n")]);
    let three = home.file("three");
    git_repo_at(&three, &[("c.txt", "c\n")]);

    let in_one = ask_in(&home, &one, "In the first repository").await;
    let in_two = ask_in(&home, &two, "In the second repository").await;

    // repository two's task is the newest of the store; repository one gets its own
    assert_eq!(task_of(&pend_in(&home, &one, &[]).await), in_one);
    assert_eq!(
        task_of(&pend_in(&home, &sub, &[]).await),
        in_one,
        "a subdirectory is its repository"
    );
    assert_eq!(task_of(&pend_in(&home, &two, &[]).await), in_two);
    let there = two.display().to_string();
    assert_eq!(
        task_of(&pend_in(&home, &one, &["--repo", &there]).await),
        in_two,
        "--repo names the repository"
    );
    // a task of another repository is still reached by its id
    assert_eq!(task_of(&pend_in(&home, &one, &[&in_two]).await), in_two);

    // `cancel` takes the task `pend` would: this repository's latest, never another's
    let cancelled = droid_executor(&["cancel", "droid", "--json"], &home.env(), &two).await;
    assert_eq!(task_of(&cancelled), in_two);
    let elsewhere = droid_executor(&["cancel", "droid"], &home.env(), &three).await;
    assert_eq!(elsewhere.code, Some(2), "{elsewhere:#?}");
    assert!(
        elsewhere
            .stderr
            .contains("no droid tasks yet in the repository")
            && elsewhere
                .stderr
                .contains("droid-executor cancel droid TASK_ID"),
        "{elsewhere:#?}"
    );

    // a repository without a droid task: none, never another repository's
    let none = droid_executor(&["pend", "droid"], &home.env(), &three).await;
    let real = std::fs::canonicalize(&three).unwrap();
    assert_eq!(
        (none.code, none.stdout.as_str(), none.stderr),
        (
            Some(2),
            "",
            format!(
                "droid-executor: no droid tasks yet in the repository {}; start one there with: \
                 droid-executor ask droid \"MESSAGE\" --background (a task of another repository: \
                 droid-executor pend droid TASK_ID)\n",
                real.display()
            )
        ),
    );
}
