//! Worktree tasks (issue 30, docs/worktrees.md) end to end with the FAKE droid, the real
//! supervisor (`droid-executor worker`) and the real git: background tasks on one repository
//! running at once, each in its own worktree; the user's repository untouched until apply;
//! apply (three-way, all or nothing), apply --check, a second apply refused, a conflict that
//! changes nothing, discard; the janitor after SIGKILL of a task's supervisor; a follow-up turn
//! in the same worktree; `max_worktrees`; setup commands and `worktree_copy`; read-only runs
//! sharing their repository; and the CLI, the bridge and the MCP tools over all of it. The real
//! droid's worktree task with verification is at the end.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{
    ChangeType, CommandSource, ExecutionRequest, IssueType, Status, TaskState, WorktreeOutcome,
    WorktreeState,
};
use droid_exec::{EngineConfig, Tasks};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::fake_droid::RECORD_ENV;
use tests::procs::wait_gone;
use tests::repo_state::RepoState;
use tests::temp_dir::TempDir;

use super::binary::{FakeHome, droid_executor};
use super::common::{git, git_repo, request};
use super::tasks_fake_droid::{Store, assert_task_ended, finish, reach, submit};

/// What the user has in `repo`, byte for byte.
fn state(repo: &Path) -> RepoState {
    RepoState::of(repo).unwrap_or_else(|e| panic!("{}: {e}", repo.display()))
}

/// A request for `repo` running in a worktree, with `extra` fields.
fn in_worktree(repo: &Path, objective: &str, extra: Value) -> ExecutionRequest {
    let mut v = request(repo, objective, json!({"isolation": "worktree"}));
    if let (Value::Object(base), Value::Object(more)) = (&mut v, extra) {
        base.extend(more);
    }
    ExecutionRequest::from_value(&v, None).unwrap()
}

/// The paths a result lists as changed, in order.
fn paths(rec: &droid_contract::TaskRecord) -> Vec<String> {
    rec.result
        .as_ref()
        .expect("finished")
        .files_changed
        .iter()
        .map(|f| f.path.clone())
        .collect()
}

/// The task's worktree block.
fn worktree(rec: &droid_contract::TaskRecord) -> droid_contract::WorktreeInfo {
    rec.result
        .as_ref()
        .and_then(|r| r.worktree.clone())
        .unwrap_or_else(|| panic!("{} has no worktree: {rec:#?}", rec.task_id))
}

/// The worktrees git lists for `repo` (`git worktree list --porcelain`), the main one first.
fn git_worktrees(repo: &Path) -> Vec<String> {
    git(repo, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(str::to_owned)
        .collect()
}

/// The branches of `repo`.
fn branches(repo: &Path) -> Vec<String> {
    git(repo, &["branch", "--format=%(refname:short)"])
        .lines()
        .map(str::to_owned)
        .collect()
}

/// A file of the repository as text.
fn read(repo: &Path, name: &str) -> String {
    std::fs::read_to_string(repo.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// Fake agents that each edit their own file, then wait for each other at a barrier (so they
/// can only finish when all three run at once), then sleep 2 s.
fn meeting_agents(barrier: &Path) -> Vec<(&'static str, Value)> {
    let names = ["one", "two", "three"];
    let edits = [
        "sed -i 's/^a2$/a2 changed by one/' a.txt",
        "printf 'b3 added by two\\n' >> b.txt",
        "printf 'new from three\\n' > new.txt",
    ];
    names
        .iter()
        .zip(edits)
        .map(|(name, edit)| {
            let mut steps = vec![
                json!({"sh": edit}),
                json!({"sh": format!("touch {}/{name}", barrier.display())}),
            ];
            steps.extend(
                names
                    .iter()
                    .map(|n| json!({"wait_file": barrier.join(n).display().to_string()})),
            );
            steps.push(json!({"sleep_ms": 2000}));
            steps.push(json!({"completion": format!("{name} done")}));
            (*name, Value::Array(steps))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn three_worktree_tasks_run_at_once_and_apply_to_their_union_and_a_fourth_conflicts() {
    let store = Store::new();
    let repo = git_repo(&[
        ("a.txt", "a1\na2\na3\n"),
        ("b.txt", "b1\nb2\n"),
        (".gitignore", "target/\n"),
    ]);
    let repo = repo.path();
    // what the user has and has not committed: all of it is the tasks' base, but `target/`
    std::fs::write(repo.join("a.txt"), "a1 edited by the user\na2\na3\n").unwrap();
    std::fs::write(repo.join("notes.txt"), "untracked\n").unwrap();
    std::fs::create_dir_all(repo.join("target")).unwrap();
    std::fs::write(repo.join("target/cache"), "ignored\n").unwrap();
    let before = state(repo);
    let barrier = TempDir::new("wt-barrier").unwrap();
    let writable = barrier.path().to_path_buf();
    let mut ids = Vec::new();
    for (name, steps) in meeting_agents(barrier.path()) {
        let w = writable.clone();
        let tasks = store.tasks(name, steps, move |c| c.sandbox_writable.push(w));
        let req = in_worktree(
            repo,
            &format!("task {name}"),
            json!({"suggested_commands": ["test ! -e target && test -f notes.txt"]}),
        );
        ids.push((tasks.clone(), submit(&tasks, &req).await));
    }
    let mut recs = Vec::new();
    for (tasks, id) in &ids {
        recs.push(finish(tasks, id).await);
    }
    for rec in &recs {
        let r = rec.result.as_ref().unwrap();
        assert_eq!(r.status, Status::Success, "{rec:#?}");
        assert_eq!(worktree(rec).state, WorktreeState::Ready);
        assert_eq!(
            worktree(rec).branch,
            format!("droid-executor/{}", rec.task_id)
        );
        assert_ne!(worktree(rec).head, worktree(rec).base);
        assert_eq!(
            r.tests.passed,
            Some(true),
            "verified in the worktree: {r:#?}"
        );
    }
    // each lists only its own file, relative to the base (the user's edits are not the agent's)
    assert_eq!(paths(&recs[0]), ["a.txt"]);
    assert_eq!(paths(&recs[1]), ["b.txt"]);
    assert_eq!(paths(&recs[2]), ["new.txt"]);
    // the base is the user's working tree: their edit and their untracked file, not `target/`
    let first = worktree(&recs[0]);
    assert_eq!(
        read(Path::new(&first.path), "a.txt"),
        "a1 edited by the user\na2 changed by one\na3\n"
    );
    assert_eq!(read(Path::new(&first.path), "notes.txt"), "untracked\n");
    assert!(!Path::new(&first.path).join("target").exists());
    assert!(!first.path.starts_with(&repo.display().to_string()));
    // nothing of the user's changed, byte for byte
    assert_eq!(state(repo), before);
    assert_eq!(git_worktrees(repo).len(), 4);

    // a fourth task changes the line the first one changed
    let fourth = store.tasks(
        "four",
        json!([{"sh": "sed -i 's/^a2$/a2 changed by four/' a.txt"}, {"completion": "four done"}]),
        |_| {},
    );
    let four = submit(&fourth, &in_worktree(repo, "task four", json!({}))).await;
    let four_rec = finish(&fourth, &four).await;
    assert_eq!(paths(&four_rec), ["a.txt"]);

    // --check says what would happen and changes nothing
    let (tasks, one) = &ids[0];
    let check = tasks.apply(one, true).await.unwrap();
    assert_eq!(check.outcome, WorktreeOutcome::Clean, "{check:#?}");
    assert_eq!(state(repo), before);
    for (tasks, id) in &ids {
        let a = tasks.apply(id, false).await.unwrap();
        assert_eq!(a.outcome, WorktreeOutcome::Applied, "{a:#?}");
        assert_eq!(a.worktree.as_ref().unwrap().state, WorktreeState::Applied);
    }
    // the union of the three changes, with the user's own, uncommitted
    assert_eq!(
        read(repo, "a.txt"),
        "a1 edited by the user\na2 changed by one\na3\n"
    );
    assert_eq!(read(repo, "b.txt"), "b1\nb2\nb3 added by two\n");
    assert_eq!(read(repo, "new.txt"), "new from three\n");
    assert_eq!(read(repo, "notes.txt"), "untracked\n");
    assert_eq!(read(repo, "target/cache"), "ignored\n");
    assert_eq!(state(repo).index, before.index, "the index is not touched");
    assert_eq!(state(repo).head, before.head);
    // a second apply is refused
    let again = ids[0].0.apply(&ids[0].1, false).await.unwrap();
    assert_eq!(again.outcome, WorktreeOutcome::Refused, "{again:#?}");
    assert_eq!(again.issues[0].kind, IssueType::ValidationError);

    // the fourth conflicts: it says where, and nothing changes
    let applied = state(repo);
    let conflict = fourth.apply(&four, false).await.unwrap();
    assert_eq!(conflict.outcome, WorktreeOutcome::Conflict, "{conflict:#?}");
    assert_eq!(conflict.conflicts, ["a.txt"]);
    assert_eq!(conflict.issues[0].kind, IssueType::Conflict);
    assert_eq!(state(repo), applied);
    let shown = fourth.status(&four).await.unwrap();
    assert_eq!(worktree(&shown).state, WorktreeState::Conflicted);
    // applied tasks' worktrees and branches are gone; the conflicted one's kept
    assert_eq!(
        git_worktrees(repo),
        [repo.display().to_string(), worktree(&four_rec).path.clone()]
    );
    // discard leaves no worktree and no branch
    let discarded = fourth.discard(&four).await.unwrap();
    assert_eq!(
        discarded.outcome,
        WorktreeOutcome::Discarded,
        "{discarded:#?}"
    );
    assert_eq!(git_worktrees(repo), [repo.display().to_string()]);
    assert_eq!(branches(repo), [current_branch(repo)]);
    assert!(!Path::new(&worktree(&four_rec).path).exists());
    let twice = fourth.discard(&four).await.unwrap();
    assert_eq!(twice.outcome, WorktreeOutcome::Refused);
    assert_eq!(state(repo), applied);
}

/// The name of `repo`'s current branch (git's default may be `master` or `main`).
fn current_branch(repo: &Path) -> String {
    git(repo, &["symbolic-ref", "--short", "HEAD"])
        .trim()
        .to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_sigkill_of_a_worktree_task_the_janitor_leaves_no_orphan_and_touches_no_other() {
    let store = Store::new();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let repo = repo.path();
    let ready = store.tasks(
        "ready",
        json!([{"sh": "echo kept > kept.txt"}, {"completion": "done"}]),
        |_| {},
    );
    let kept = submit(&ready, &in_worktree(repo, "keep me", json!({}))).await;
    let kept_rec = finish(&ready, &kept).await;
    let kept_path = PathBuf::from(worktree(&kept_rec).path);
    let hanging = store.tasks(
        "hang",
        json!([{"sh": "echo lost > lost.txt"}, {"hang": true}]),
        |_| {},
    );
    let dead = submit(&hanging, &in_worktree(repo, "die", json!({}))).await;
    reach(&hanging, &dead, TaskState::Running).await;
    let supervisor = store.supervisor(&dead);
    assert_eq!(
        git_worktrees(repo).len(),
        3,
        "the live run's worktree is there"
    );
    // the janitor never touches a live run's worktree
    assert_eq!(hanging.clean(false).await.unwrap(), 0);
    assert_eq!(git_worktrees(repo).len(), 3);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(supervisor),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(wait_gone(supervisor, Duration::from_secs(10)).await);
    // the store sees the supervisor dead once its lock is free: its agent, killed with it, may
    // hold the lock a moment longer
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    let buried = loop {
        let rec = hanging.status(&dead).await.unwrap();
        if rec.state != TaskState::Running || tokio::time::Instant::now() >= until {
            break rec;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(buried.state, TaskState::Error, "{buried:#?}");
    assert_task_ended(&dead, supervisor).await;
    hanging.clean(false).await.unwrap();
    assert_eq!(
        git_worktrees(repo),
        [repo.display().to_string(), kept_path.display().to_string()]
    );
    let all = branches(repo);
    assert!(!all.iter().any(|b| b.contains(&dead)), "{all:?}");
    assert!(all.contains(&format!("droid-executor/{kept}")), "{all:?}");
    assert!(!store.root().join("worktrees").join(&dead).exists());
    assert_eq!(read(&kept_path, "kept.txt"), "kept\n");
    // and the kept task's change still applies
    let a = ready.apply(&kept, false).await.unwrap();
    assert_eq!(a.outcome, WorktreeOutcome::Applied, "{a:#?}");
    assert_eq!(read(repo, "kept.txt"), "kept\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follow_up_turn_of_the_session_runs_in_the_same_worktree() {
    let store = Store::new();
    let repo = git_repo(&[("a.txt", "a\n"), ("b.txt", "b\n")]);
    let repo = repo.path();
    let session = |text: &str| {
        json!({"emit": {"type": "completion", "finalText": text, "numTurns": 1, "durationMs": 5,
                        "session_id": "worktree-session-1", "usage": {"input_tokens": 3, "output_tokens": 2}}})
    };
    let first = store.tasks(
        "first",
        json!([{"sh": "echo 'a by turn one' >> a.txt"}, session("turn one")]),
        |_| {},
    );
    let one = submit(&first, &in_worktree(repo, "turn one", json!({}))).await;
    let one_rec = finish(&first, &one).await;
    let record = TempDir::new("wt-record").unwrap();
    let record_file = record.path().join("invocation.json");
    let rf = record_file.clone();
    let writable = record.path().to_path_buf();
    let second = store.tasks(
        "second",
        json!([{"sh": "echo 'b by turn two' >> b.txt"}, session("turn two")]),
        move |c| {
            c.env.push((RECORD_ENV.into(), rf.into()));
            c.sandbox_writable.push(writable);
        },
    );
    // no isolation named: the session's worktree decides
    let follow = ExecutionRequest::from_value(
        &request(
            repo,
            "turn two",
            json!({"session_id": "worktree-session-1"}),
        ),
        None,
    )
    .unwrap();
    let two = submit(&second, &follow).await;
    let two_rec = finish(&second, &two).await;
    let (w1, w2) = (worktree(&one_rec), worktree(&two_rec));
    assert_eq!(
        (&w2.path, &w2.branch, &w2.base),
        (&w1.path, &w1.branch, &w1.base)
    );
    assert_ne!(w2.head, w1.head, "{two_rec:#?}");
    let invocation: Value = serde_json::from_slice(&std::fs::read(&record_file).unwrap()).unwrap();
    assert_eq!(invocation["cwd"], json!(w1.path));
    let argv: Vec<&str> = invocation["argv"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(Value::as_str)
        .collect();
    assert!(
        argv.windows(2).any(|w| w == ["-s", "worktree-session-1"]),
        "{argv:?}"
    );
    // relative to the base: both turns' files
    assert_eq!(paths(&two_rec), ["a.txt", "b.txt"]);
    // applying the follow-up applies the worktree's whole change; the first task's is then
    // applied too
    let a = second.apply(&two, false).await.unwrap();
    assert_eq!(a.outcome, WorktreeOutcome::Applied, "{a:#?}");
    assert_eq!(read(repo, "a.txt"), "a\na by turn one\n");
    assert_eq!(read(repo, "b.txt"), "b\nb by turn two\n");
    let again = first.apply(&one, false).await.unwrap();
    assert_eq!(again.outcome, WorktreeOutcome::Refused, "{again:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_worktrees_refuses_a_submission_with_a_clear_error() {
    let store = Store::new();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let one = store.tasks("one", json!([{"completion": "done"}]), |c| {
        c.worktrees.max_worktrees = 1;
    });
    let id = submit(&one, &in_worktree(repo.path(), "first", json!({}))).await;
    finish(&one, &id).await;
    let refused = one
        .submit(&in_worktree(repo.path(), "second", json!({})))
        .await
        .unwrap_err();
    assert!(
        refused
            .to_string()
            .starts_with("max_worktrees (1) is reached: 1 worktrees are running or waiting"),
        "{refused}"
    );
    // once the first is discarded there is room again
    one.discard(&id).await.unwrap();
    let next = submit(&one, &in_worktree(repo.path(), "third", json!({}))).await;
    assert_eq!(finish(&one, &next).await.state, TaskState::Success);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setup_commands_run_before_the_agent_and_worktree_copy_brings_untracked_files() {
    let store = Store::new();
    let repo = git_repo(&[("a.txt", "a\n"), (".gitignore", ".env\nnode_modules/\n")]);
    let repo = repo.path();
    std::fs::write(repo.join(".env"), "TOKEN=local\n").unwrap();
    std::fs::create_dir_all(repo.join("node_modules/dep")).unwrap();
    std::fs::write(
        repo.join("node_modules/dep/index.js"),
        "module.exports = 1;\n",
    )
    .unwrap();
    let tasks = store.tasks(
        "setup",
        json!([{"sh": "cat .env setup.out > seen.txt"}, {"completion": "done"}]),
        |_| {},
    );
    let id = submit(
        &tasks,
        &in_worktree(
            repo,
            "use the environment",
            json!({"setup_commands": ["echo set up > setup.out"], "worktree_copy": [".env", "node_modules"]}),
        ),
    )
    .await;
    let rec = finish(&tasks, &id).await;
    let r = rec.result.as_ref().unwrap();
    assert_eq!(r.status, Status::Success, "{rec:#?}");
    let first = &r.commands_run[0];
    assert_eq!(
        (first.source, first.command.as_str(), first.exit_code),
        (CommandSource::Setup, "echo set up > setup.out", Some(0))
    );
    let path = PathBuf::from(worktree(&rec).path);
    assert_eq!(read(&path, "seen.txt"), "TOKEN=local\nset up\n");
    assert_eq!(
        read(&path, "node_modules/dep/index.js"),
        "module.exports = 1;\n"
    );
    // the setup's own output is part of the worktree's change, the copied (ignored) files not
    let mut changed = paths(&rec);
    changed.sort();
    assert_eq!(changed, ["seen.txt", "setup.out"]);

    // a failing setup command stops the task before the agent, and leaves nothing behind
    let failing = store.tasks("fail", json!([{"completion": "never"}]), |_| {});
    let bad = submit(
        &failing,
        &in_worktree(repo, "never runs", json!({"setup_commands": ["exit 3"]})),
    )
    .await;
    let bad_rec = finish(&failing, &bad).await;
    let r = bad_rec.result.as_ref().unwrap();
    assert_eq!(r.status, Status::Error, "{bad_rec:#?}");
    assert_eq!(r.issues[0].kind, IssueType::EnvIssue);
    assert_eq!(
        r.issues[0].description,
        "the setup command `exit 3` exited 3"
    );
    assert_eq!(r.worktree, None);
    assert!(!store.root().join("worktrees").join(&bad).exists());
    assert!(!branches(repo).iter().any(|b| b.contains(&bad)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn read_only_runs_share_their_repository_and_the_kernel_keeps_it_read_only() {
    if droid_exec::process::sandbox::kernel_abi().is_none() {
        panic!(
            "this test needs Landlock (Linux 5.13 or later with `landlock` in the lsm= boot list): \
             read-only runs share their repository only where the kernel keeps them from writing"
        );
    }
    let store = Store::new();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let repo = repo.path();
    let before = state(repo);
    let barrier = TempDir::new("ro-barrier").unwrap();
    let mut ids = Vec::new();
    for name in ["left", "right"] {
        let other = if name == "left" { "right" } else { "left" };
        let steps = json!([
            {"sh": format!("touch {}/{name}; echo written > {name}.txt", barrier.path().display())},
            {"wait_file": barrier.path().join(other).display().to_string()},
            {"completion": "read"}
        ]);
        let w = barrier.path().to_path_buf();
        let tasks = store.tasks(name, steps, move |c| c.sandbox_writable.push(w));
        let req = ExecutionRequest::from_value(
            &request(repo, name, json!({"autonomy": "read_only"})),
            None,
        )
        .unwrap();
        ids.push((tasks.clone(), submit(&tasks, &req).await));
    }
    for (tasks, id) in &ids {
        let rec = finish(tasks, id).await;
        let r = rec.result.as_ref().unwrap();
        // both ran at once (each waited for the other), and neither could write
        assert_eq!(
            (r.status, r.summary.as_str(), &r.files_changed),
            (Status::Success, "read", &Vec::new()),
            "{rec:#?}"
        );
    }
    assert_eq!(state(repo), before);
}

/// The CLI as a user types it: `run --isolation worktree`, `tasks list` showing the worktree and
/// its disk, `tasks apply --check`, `tasks apply` (exit 0, then 2 when asked again), a conflict
/// (exit 1), `tasks discard`, and `doctor`'s line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_runs_applies_and_discards_worktree_tasks() {
    let home = FakeHome::new("wt-cli", &[]);
    let repo = home.repo();
    let env = home.env();
    home.play(&json!([{"sh": "echo 'by the agent' >> a.txt"}, {"completion": "Done."}]));
    let run = droid_executor(
        &[
            "run",
            "--isolation",
            "worktree",
            "--json",
            "--command",
            "grep -q agent a.txt",
            "append",
        ],
        &env,
        &repo,
    )
    .await;
    assert_eq!(run.code, Some(0), "{run:#?}");
    let result = run.result();
    let id = result.task_id.clone().expect("a worktree run is a task");
    let w = result.worktree.clone().unwrap();
    assert_eq!(w.branch, format!("droid-executor/{id}"));
    assert_eq!(result.tests.passed, Some(true));
    assert_eq!(read(&repo, "a.txt"), "a\n");
    let list = droid_executor(&["tasks", "list"], &env, &repo).await;
    assert_eq!(list.code, Some(0), "{list:#?}");
    let line = list
        .stdout
        .lines()
        .find(|l| l.starts_with(&id) && l.contains(&w.path))
        .unwrap_or_else(|| panic!("no worktree line for {id}: {}", list.stdout));
    assert!(line.contains(" ready ") && line.contains("KiB"), "{line}");
    // the same listing as JSON
    let listed = droid_executor(&["tasks", "list", "--worktrees", "--json"], &env, &repo).await;
    assert_eq!(listed.code, Some(0), "{listed:#?}");
    let mut entries: Value = serde_json::from_str(&listed.stdout).unwrap();
    let disk = entries[0]["disk_bytes"].take();
    assert!(disk.as_u64().unwrap_or(0) > 0, "{listed:#?}");
    assert_eq!(
        entries,
        json!([{
            "task_id": id,
            "state": "ready",
            "disk_bytes": null,
            "disk_partial": false,
            "path": w.path,
            "branch": w.branch,
            "repo": repo.display().to_string(),
        }])
    );
    let check = droid_executor(&["tasks", "apply", &id, "--check"], &env, &repo).await;
    assert_eq!(check.code, Some(0), "{check:#?}");
    assert!(
        check
            .stdout
            .starts_with("clean: the change applies cleanly"),
        "{check:#?}"
    );
    assert_eq!(read(&repo, "a.txt"), "a\n");
    let apply = droid_executor(&["tasks", "apply", &id, "--json"], &env, &repo).await;
    assert_eq!(apply.code, Some(0), "{apply:#?}");
    let answer: Value = serde_json::from_str(&apply.stdout).unwrap();
    assert_eq!(answer["outcome"], "applied");
    assert_eq!(answer["files_changed"][0]["path"], "a.txt");
    assert_eq!(read(&repo, "a.txt"), "a\nby the agent\n");
    let again = droid_executor(&["tasks", "apply", &id], &env, &repo).await;
    assert_eq!(again.code, Some(2), "{again:#?}");

    // a conflicting task: exit 1, nothing written; then discard
    home.play(&json!([{"sh": "echo 'other agent' >> a.txt"}, {"completion": "Done."}]));
    let other = droid_executor(
        &["run", "--isolation", "worktree", "--json", "other"],
        &env,
        &repo,
    )
    .await;
    let other_id = other.result().task_id.unwrap();
    std::fs::write(repo.join("a.txt"), "a\nby the user\n").unwrap();
    let before = state(&repo);
    let conflict = droid_executor(&["tasks", "apply", &other_id], &env, &repo).await;
    assert_eq!(conflict.code, Some(1), "{conflict:#?}");
    assert!(conflict.stdout.contains("conflict: a.txt"), "{conflict:#?}");
    assert_eq!(state(&repo), before);
    let doctor = droid_executor(&["doctor"], &env, &repo).await;
    let worktrees_line = doctor
        .stdout
        .lines()
        .find(|l| l.contains("worktrees"))
        .unwrap_or_else(|| panic!("{doctor:#?}"));
    assert!(
        worktrees_line
            .contains("1 of at most 16 (max_worktrees) hold a checkout (1 conflicted, 1 applied)"),
        "{worktrees_line}"
    );
    let discard = droid_executor(&["tasks", "discard", &other_id], &env, &repo).await;
    assert_eq!(discard.code, Some(0), "{discard:#?}");
    assert_eq!(git_worktrees(&repo), [repo.display().to_string()]);
    assert!(
        !branches(&repo)
            .iter()
            .any(|b| b.starts_with("droid-executor/"))
    );
}

/// A config for an engine of the store at `root` driving the fake droid with `steps`.
fn fake_config(root: &Path, scenario_dir: &Path, scratch: &Path, steps: &Value) -> EngineConfig {
    let scenario = scenario_dir.join("scenario.json");
    std::fs::write(&scenario, json!({ "steps": steps }).to_string()).unwrap();
    let env: Vec<(OsString, OsString)> = vec![
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        (tests::fake_droid::SCENARIO_ENV.into(), scenario.into()),
    ];
    let mut cfg = super::common::engine(tests::fake_droid_bin!(), env, scratch)
        .config()
        .clone();
    cfg.store_dir = Some(root.to_path_buf());
    cfg.supervisor = Some(tests::droid_bin::droid_executor_bin());
    cfg
}

/// A sync run of the engine (what `POST /execute` and `execute_droid_task` do) with isolation
/// worktree is a task of the store: its id applies it, and its worktree is the janitor's
/// business like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_worktree_run_is_a_task_that_applies_by_its_id() {
    let root = TempDir::new("wt-sync-store").unwrap();
    let files = TempDir::new("wt-sync-files").unwrap();
    let scratch = TempDir::new("wt-sync-scratch").unwrap();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let cfg = fake_config(
        root.path(),
        files.path(),
        scratch.path(),
        &json!([{"sh": "echo sync > sync.txt"}, {"completion": "done"}]),
    );
    let engine = droid_exec::Engine::new(cfg.clone());
    let ran = super::common::run(
        &engine,
        &request(repo.path(), "sync", json!({"isolation": "worktree"})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Success, "{:#?}", ran.result);
    let id = ran.result.task_id.clone().unwrap();
    let tasks = Tasks::open(&cfg).unwrap();
    let rec = tasks.status(&id).await.unwrap();
    assert_eq!(rec.state, TaskState::Success);
    assert_eq!(worktree(&rec).state, WorktreeState::Ready);
    assert_eq!(
        rec.result.as_ref().unwrap().files_changed[0].change_type,
        ChangeType::Added
    );
    let a = tasks.apply(&id, false).await.unwrap();
    assert_eq!(a.outcome, WorktreeOutcome::Applied);
    assert_eq!(read(repo.path(), "sync.txt"), "sync\n");
    // without a store there is no worktree: refused, nothing ran
    let mut no_store = cfg;
    no_store.store_dir = None;
    let bare = droid_exec::Engine::new(no_store);
    let refused = super::common::run(
        &bare,
        &request(repo.path(), "no store", json!({"isolation": "worktree"})),
    )
    .await;
    assert_eq!(refused.result.status, Status::Error);
    assert_eq!(
        refused.result.issues[0].description,
        "isolation \"worktree\" needs a task store (store_dir), where worktrees live"
    );
}

/// The bridge's routes: `POST /tasks` of worktree tasks (409 `worktree` past max_worktrees),
/// `POST /tasks/{id}/apply` (`?check=true`: 200 clean; 200 applied; 409 refused the second
/// time; 409 conflict; 404 unknown; 400 a bad query) and `POST /tasks/{id}/discard`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_applies_and_discards_worktree_tasks() {
    use super::bridge_http::Bridged;
    let b = Bridged::start(
        &json!([{"sh": "echo 'from the bridge' >> a.txt"}, {"completion": "Done."}]),
        &[],
        &[("DROID_EXECUTOR_MAX_WORKTREES", "2")],
    )
    .await;
    let repo = b.home.repo();
    let first = b
        .submit(&b.request("one", json!({"isolation": "worktree"})))
        .await;
    b.until_state(&first, "success").await;
    // the second changes the same line, another way, from the same base
    b.home
        .play(&json!([{"sh": "echo 'from the second' >> a.txt"}, {"completion": "Done."}]));
    let second = b
        .submit(&b.request("two", json!({"isolation": "worktree"})))
        .await;
    b.until_state(&second, "success").await;
    let refused = b
        .post(
            "/tasks",
            &b.request("three", json!({"isolation": "worktree"})),
        )
        .await;
    assert_eq!(refused.refusal(409), "worktree", "{refused:#?}");
    let check = b
        .raw(
            "POST",
            &format!("/tasks/{first}/apply?check=true"),
            &[],
            b"",
        )
        .await;
    assert_eq!(check.status, 200, "{check:#?}");
    assert_eq!(check.json()["outcome"], "clean");
    let bad = b
        .raw(
            "POST",
            &format!("/tasks/{first}/apply?check=maybe"),
            &[],
            b"",
        )
        .await;
    assert_eq!(bad.refusal(400), "bad_query");
    let applied = b
        .raw("POST", &format!("/tasks/{first}/apply"), &[], b"")
        .await;
    assert_eq!(applied.status, 200, "{applied:#?}");
    assert_eq!(applied.json()["outcome"], "applied");
    assert_eq!(read(&repo, "a.txt"), "a\nfrom the bridge\n");
    let twice = b
        .raw("POST", &format!("/tasks/{first}/apply"), &[], b"")
        .await;
    assert_eq!(twice.status, 409, "{twice:#?}");
    assert_eq!(twice.json()["outcome"], "refused");
    // the second task changed the same line from the same base
    let conflict = b
        .raw("POST", &format!("/tasks/{second}/apply"), &[], b"")
        .await;
    assert_eq!(conflict.status, 409, "{conflict:#?}");
    assert_eq!(conflict.json()["conflicts"], json!(["a.txt"]));
    let (_, rec) = b.get(&format!("/tasks/{second}")).await;
    assert_eq!(rec["result"]["worktree"]["state"], "conflicted");
    // the listing gives the worktrees when asked (the applied one holds no checkout any more)
    let (_, listed) = b.get("/tasks?worktrees=true").await;
    let held = listed["worktrees"]
        .as_array()
        .unwrap_or_else(|| panic!("{listed:#}"));
    assert_eq!(held.len(), 1, "{listed:#}");
    assert_eq!(held[0]["task_id"], json!(second));
    assert_eq!(held[0]["state"], "conflicted");
    assert_eq!(held[0]["branch"], json!(format!("droid-executor/{second}")));
    assert!(
        held[0]["disk_bytes"].as_u64().unwrap_or(0) > 0,
        "{listed:#}"
    );
    let (_, plain) = b.get("/tasks").await;
    assert_eq!(plain.get("worktrees"), None, "only when asked: {plain:#}");
    let discarded = b
        .raw("POST", &format!("/tasks/{second}/discard"), &[], b"")
        .await;
    assert_eq!(discarded.status, 200, "{discarded:#?}");
    assert_eq!(discarded.json()["outcome"], "discarded");
    let unknown = b.raw("POST", "/tasks/droid-1-ffff/apply", &[], b"").await;
    assert_eq!(unknown.refusal(404), "no_such_task");
    assert_eq!(git_worktrees(&repo), [repo.display().to_string()]);
}

/// The MCP tools `droid_apply` and `droid_discard` over tasks `droid_submit` started with
/// isolation worktree; a conflict is `isError` naming the paths.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mcp_tools_apply_and_discard_worktree_tasks() {
    use super::mcp_stdio::Server;
    let home = FakeHome::new("wt-mcp", &[]);
    home.play(&json!([{"sh": "echo 'from mcp' >> a.txt"}, {"completion": "Done."}]));
    let repo = home.repo();
    let mut server = Server::start(&home.env(), &repo);
    server.initialize().await;
    let mut ids: Vec<String> = Vec::new();
    for (n, objective) in ["one", "two"].into_iter().enumerate() {
        if n == 1 {
            // the second changes the same line another way (the first has finished: the fake
            // droid reads its scenario when it starts)
            home.play(&json!([{"sh": "echo 'from the second' >> a.txt"}, {"completion": "Done."}]));
        }
        let submitted = server
            .call(
                json!(n + 1),
                "droid_submit",
                request(&repo, objective, json!({"isolation": "worktree"})),
            )
            .await;
        let id = submitted["structuredContent"]["task_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{submitted:#}"))
            .to_owned();
        let rec = server
            .call(
                json!(10 + n),
                "droid_pend",
                json!({"task_id": id, "wait_seconds": 60}),
            )
            .await;
        let result = &rec["structuredContent"]["result"];
        assert_eq!(
            (
                &result["worktree"]["state"],
                &result["files_changed"][0]["path"]
            ),
            (&json!("ready"), &json!("a.txt")),
            "{rec:#}"
        );
        ids.push(id);
    }
    let check = server
        .call(
            json!(20),
            "droid_apply",
            json!({"task_id": ids[0], "check": true}),
        )
        .await;
    assert_eq!(
        (&check["isError"], &check["structuredContent"]["outcome"]),
        (&json!(false), &json!("clean")),
        "{check:#}"
    );
    let applied = server
        .call(json!(21), "droid_apply", json!({"task_id": ids[0]}))
        .await;
    assert_eq!(
        applied["structuredContent"]["outcome"], "applied",
        "{applied:#}"
    );
    assert_eq!(read(&repo, "a.txt"), "a\nfrom mcp\n");
    let conflict = server
        .call(json!(22), "droid_apply", json!({"task_id": ids[1]}))
        .await;
    assert_eq!(conflict["isError"], true, "{conflict:#}");
    assert_eq!(conflict["structuredContent"]["conflicts"], json!(["a.txt"]));
    let text = conflict["content"][0]["text"].as_str().unwrap();
    assert!(
        text.starts_with("conflict: ") && text.contains("conflicts: a.txt"),
        "{text}"
    );
    let discarded = server
        .call(json!(23), "droid_discard", json!({"task_id": ids[1]}))
        .await;
    assert_eq!(
        discarded["structuredContent"]["outcome"], "discarded",
        "{discarded:#}"
    );
    let bad = server
        .call(
            json!(24),
            "droid_discard",
            json!({"task_id": ids[1], "check": true}),
        )
        .await;
    assert_eq!(bad["isError"], true, "{bad:#}");
    assert_eq!(git_worktrees(&repo), [repo.display().to_string()]);
}

/// The REAL droid 0.225.2 (against the scripted model) completes a worktree task: its Execute
/// command runs in the worktree, the verification passes there, the user's repository is
/// untouched until apply, and apply brings the file in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_droid_completes_a_worktree_task_with_verification() {
    use tests::droid_bin::real_droid;
    use tests::droid_home::DroidHome;
    use tests::scripted_model::ScriptedModel;
    let model = ScriptedModel::start(json!([
        {"tool": [{"name": "Execute", "args": {"summary": "write it", "riskLevel": "low",
                   "riskLevelReason": "a file in the repository",
                   "command": "printf 'made by droid\\n' > made.txt && git status --short"}}]},
        {"text": "Created made.txt."}
    ]))
    .await
    .unwrap();
    let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
    let store = TempDir::new("wt-real-store").unwrap();
    let scratch = TempDir::new("wt-real-scratch").unwrap();
    let repo = git_repo(&[("a.txt", "hello\n")]);
    let before = state(repo.path());
    let mut cfg = super::common::engine(real_droid(), home.env(), scratch.path())
        .config()
        .clone();
    cfg.store_dir = Some(store.path().to_path_buf());
    let engine = droid_exec::Engine::new(cfg.clone());
    let ran = super::common::run(
        &engine,
        &request(
            repo.path(),
            "Create made.txt",
            json!({"model": home.model_id("Mock"), "isolation": "worktree",
                   "suggested_commands": ["grep -q 'made by droid' made.txt"]}),
        ),
    )
    .await;
    let r = &ran.result;
    assert_eq!(r.status, Status::Success, "{r:#?}");
    assert_eq!(r.tests.passed, Some(true), "{r:#?}");
    let files: Vec<(&str, ChangeType)> = r
        .files_changed
        .iter()
        .map(|f| (f.path.as_str(), f.change_type))
        .collect();
    assert_eq!(files, [("made.txt", ChangeType::Added)]);
    let w = r.worktree.clone().unwrap();
    assert_eq!(w.state, WorktreeState::Ready);
    // droid's own command ran in the worktree (it saw the file untracked there)
    assert_eq!(
        r.commands_run[0].stdout_excerpt.trim(),
        "?? made.txt",
        "{r:#?}"
    );
    assert_eq!(state(repo.path()), before);
    engine.settled().await;
    let tasks = Tasks::open(&cfg).unwrap();
    let a = tasks
        .apply(r.task_id.as_deref().unwrap(), false)
        .await
        .unwrap();
    assert_eq!(a.outcome, WorktreeOutcome::Applied, "{a:#?}");
    assert_eq!(read(repo.path(), "made.txt"), "made by droid\n");
}

/// The REAL Codex CLI 0.169.0 (against the scripted model over the Responses API) completes a
/// worktree task: its `apply_patch` writes in the worktree, the verification passes there.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_codex_completes_a_worktree_task_with_verification() {
    use droid_contract::ProviderId;
    use droid_exec::config::AgentProgram;
    use tests::agent_bin::agent_cli;
    use tests::codex_home::CodexHome;
    use tests::scripted_model::ScriptedModel;
    let patch = "*** Begin Patch\n*** Add File: made.txt\n+made by codex\n*** End Patch\n";
    let model = ScriptedModel::start(json!([
        {"output": [{"type": "custom_tool_call", "status": "completed", "call_id": "c0",
                     "name": "apply_patch", "input": patch}]},
        {"output": [{"type": "message", "role": "assistant", "status": "completed",
                     "content": [{"type": "output_text", "text": "Created made.txt.", "annotations": []}]}]}
    ]))
    .await
    .unwrap();
    let home = CodexHome::new(&model.base_url()).unwrap();
    let store = TempDir::new("wt-codex-store").unwrap();
    let scratch = TempDir::new("wt-codex-scratch").unwrap();
    let repo = git_repo(&[("a.txt", "hello\n")]);
    let before = state(repo.path());
    let mut cfg = super::common::engine(tests::fake_droid_bin!(), home.env(), scratch.path())
        .config()
        .clone();
    cfg.agents = vec![AgentProgram {
        provider: ProviderId::Codex,
        program: Some(agent_cli("codex")),
        source: "test".into(),
    }];
    cfg.store_dir = Some(store.path().to_path_buf());
    let engine = droid_exec::Engine::new(cfg.clone());
    let ran = super::common::run(
        &engine,
        &request(
            repo.path(),
            "Create made.txt",
            json!({"provider": "codex", "isolation": "worktree", "execution_mode": "code",
                   "suggested_commands": ["grep -q 'made by codex' made.txt"]}),
        ),
    )
    .await;
    let r = &ran.result;
    assert_eq!(r.status, Status::Success, "{r:#?}");
    assert_eq!(r.tests.passed, Some(true), "{r:#?}");
    assert_eq!(
        r.files_changed
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        ["made.txt"]
    );
    assert!(
        r.task_id
            .as_deref()
            .is_some_and(|id| id.starts_with("codex-")),
        "{r:#?}"
    );
    assert_eq!(state(repo.path()), before);
    engine.settled().await;
    let tasks = Tasks::open(&cfg).unwrap();
    let a = tasks
        .apply(r.task_id.as_deref().unwrap(), false)
        .await
        .unwrap();
    assert_eq!(a.outcome, WorktreeOutcome::Applied, "{a:#?}");
    assert_eq!(read(repo.path(), "made.txt"), "made by codex\n");
}

/// At task_ttl the checkout of a change still waiting goes, and the change stays on its branch
/// (no work lost); an applied task's record goes with its task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn at_the_ttl_a_waiting_change_is_kept_on_its_branch() {
    let store = Store::new();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let repo = repo.path();
    let tasks = store.tasks(
        "ttl",
        json!([{"sh": "echo kept > kept.txt"}, {"completion": "done"}]),
        |_| {},
    );
    let id = submit(&tasks, &in_worktree(repo, "wait for review", json!({}))).await;
    let rec = finish(&tasks, &id).await;
    let w = worktree(&rec);
    // the result is two days old (its file's time is what the TTL reads)
    let result = store.root().join("tasks").join(&id).join("result.json");
    std::fs::File::options()
        .write(true)
        .open(&result)
        .unwrap()
        .set_modified(std::time::SystemTime::now() - Duration::from_secs(2 * 86_400))
        .unwrap();
    assert_eq!(tasks.clean(false).await.unwrap(), 1);
    assert!(!Path::new(&w.path).exists());
    assert!(!store.root().join("worktrees").join(&id).exists());
    assert_eq!(git_worktrees(repo), [repo.display().to_string()]);
    assert_eq!(
        git(repo, &["show", &format!("{}:kept.txt", w.branch)]),
        "kept\n",
        "the change is kept on its branch"
    );
}

/// The user's repository is out of a worktree run's reach: confined, the agent cannot write its
/// files or its git directory (hooks and config every worktree shares); unconfined, what it
/// writes in the shared git directory is put back and reported, as in place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_repository_and_its_shared_git_directory_are_out_of_reach() {
    let store = Store::new();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let repo = repo.path();
    let before = state(repo);
    let hook = repo.join(".git/hooks/pre-commit");
    let attack = json!([
        {"sh": format!("echo 'by the agent' >> {}", repo.join("a.txt").display())},
        {"sh": "printf '#!/bin/sh\\necho planted\\n' > \"$(git rev-parse --git-common-dir)/hooks/pre-commit\""},
        {"sh": "git config --file \"$(git rev-parse --git-common-dir)/config\" core.fsmonitor planted"},
        {"completion": "done"}
    ]);
    let confined = store.tasks("confined", attack.clone(), |_| {});
    let id = submit(&confined, &in_worktree(repo, "escape", json!({}))).await;
    let rec = finish(&confined, &id).await;
    assert!(!hook.exists(), "{rec:#?}");
    assert_eq!(state(repo), before);
    let config = || std::fs::read_to_string(repo.join(".git/config")).unwrap();
    assert!(!config().contains("planted"), "{}", config());
    confined.discard(&id).await.unwrap();

    let unconfined = store.tasks("unconfined", attack, |c| {
        c.sandbox = droid_exec::config::SandboxMode::Off;
    });
    let id = submit(&unconfined, &in_worktree(repo, "escape", json!({}))).await;
    let rec = finish(&unconfined, &id).await;
    let r = rec.result.as_ref().unwrap();
    assert!(!hook.exists(), "the hook was put back: {rec:#?}");
    let restored = r
        .issues
        .iter()
        .find(|i| i.kind == IssueType::Conflict)
        .unwrap_or_else(|| panic!("no conflict issue: {rec:#?}"));
    assert!(
        restored.description.contains(".git/hooks/pre-commit")
            && restored.description.contains(".git/config"),
        "{restored:#?}"
    );
    // unconfined, the agent could write the repository's files (nothing stops a run with the
    // sandbox off); its git directory is back as it was
    assert_eq!(state(repo).refs, before.refs);
    assert!(!config().contains("planted"), "{}", config());
}

/// A worktree whose tasks the store no longer knows (the task's records deleted, or the whole
/// store's tasks lost) and that no run holds is an orphan: the janitor commits what its checkout
/// holds (the agent's change, and edits made there since) to its branch, removes the checkout
/// and git's record of it, and touches no other worktree. A run that died before committing
/// (SIGKILL) and whose task the store lost too is kept the same way.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_task_in_the_store_an_orphan_worktree_goes_and_its_change_stays_on_its_branch()
{
    let store = Store::new();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let repo = repo.path();
    let tasks = store.tasks(
        "orphan",
        json!([{"sh": "echo agent > agent.txt"}, {"completion": "done"}]),
        |_| {},
    );
    let lost = submit(&tasks, &in_worktree(repo, "lost", json!({}))).await;
    let lost_w = worktree(&finish(&tasks, &lost).await);
    let kept = submit(&tasks, &in_worktree(repo, "kept", json!({}))).await;
    let kept_w = worktree(&finish(&tasks, &kept).await);
    // a run that dies after writing, before its change is committed
    let hanging = store.tasks(
        "hang",
        json!([{"sh": "echo unfinished > unfinished.txt"}, {"hang": true}]),
        |_| {},
    );
    let dead = submit(&hanging, &in_worktree(repo, "die", json!({}))).await;
    reach(&hanging, &dead, TaskState::Running).await;
    let supervisor = store.supervisor(&dead);
    let dead_checkout = store
        .root()
        .join("worktrees")
        .join(&dead)
        .join(repo.file_name().unwrap());
    // the dying agent has written its file
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while !dead_checkout.join("unfinished.txt").exists() {
        assert!(tokio::time::Instant::now() < until, "the agent never wrote");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // someone edits in the waiting worktree, then the store loses both tasks
    std::fs::write(Path::new(&lost_w.path).join("by-hand.txt"), "by hand\n").unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(supervisor),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    assert!(wait_gone(supervisor, Duration::from_secs(10)).await);
    // the store sees the supervisor dead (and ends what it left) once its lock is free
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while hanging.status(&dead).await.unwrap().state == TaskState::Running
        && tokio::time::Instant::now() < until
    {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_task_ended(&dead, supervisor).await;
    for id in [&lost, &dead] {
        std::fs::remove_dir_all(store.root().join("tasks").join(id)).unwrap();
    }
    // the dead run's agent may hold its worktree's lock a moment longer
    let until = tokio::time::Instant::now() + Duration::from_secs(10);
    while dead_checkout.exists() && tokio::time::Instant::now() < until {
        tasks.clean(false).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tasks.clean(false).await.unwrap();
    assert_eq!(
        git_worktrees(repo),
        [repo.display().to_string(), kept_w.path.clone()],
        "only the orphans went"
    );
    for id in [&lost, &dead] {
        assert!(!store.root().join("worktrees").join(id).exists(), "{id}");
    }
    let show = |branch: &str, file: &str| git(repo, &["show", &format!("{branch}:{file}")]);
    assert_eq!(show(&lost_w.branch, "agent.txt"), "agent\n");
    assert_eq!(show(&lost_w.branch, "by-hand.txt"), "by hand\n");
    assert_eq!(
        show(&format!("droid-executor/{dead}"), "unfinished.txt"),
        "unfinished\n"
    );
    // the other task's worktree is as it was, and still applies
    assert_eq!(read(Path::new(&kept_w.path), "agent.txt"), "agent\n");
    let a = tasks.apply(&kept, false).await.unwrap();
    assert_eq!(a.outcome, WorktreeOutcome::Applied, "{a:#?}");
    assert_eq!(read(repo, "agent.txt"), "agent\n");
}
