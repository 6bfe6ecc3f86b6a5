//! `best_of` (issue 31, docs/protocol.md#best-of-n) end to end: the REAL Codex and Claude Code
//! run the same task at once, each in a worktree of its own, against scripted models; Claude's
//! change fails the verification command, so Codex's wins and `tasks apply <the task>` brings
//! it in. With the fake droid (two models of one provider): candidates that only finish when
//! they run at the same time, the losers' worktrees and branches gone (kept with `keep_all`),
//! a cancel that ends every candidate, `max_worktrees` refusing a best_of that would not fit
//! before anything runs, and the bridge's `POST /tasks` and `POST /tasks/{id}/apply`.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{
    CheckOutcome, Diffstat, ExecutionRequest, ExecutionResult, IssueType, ProviderId, Status,
    WorktreeOutcome, WorktreeState,
};
use droid_exec::config::AgentProgram;
use droid_exec::{Engine, EngineConfig, Tasks};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::claude_home::ClaudeHome;
use tests::codex_home::CodexHome;
use tests::procs::pids_with_env;
use tests::repo_state::RepoState;
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::common::{git, git_repo, request, run, run_with};

/// What the user has in `repo`, byte for byte.
fn state(repo: &Path) -> RepoState {
    RepoState::of(repo).unwrap_or_else(|e| panic!("{}: {e}", repo.display()))
}

/// The worktrees git lists for `repo`, the main one first.
fn git_worktrees(repo: &Path) -> Vec<String> {
    git(repo, &["worktree", "list", "--porcelain"])
        .lines()
        .filter_map(|l| l.strip_prefix("worktree "))
        .map(str::to_owned)
        .collect()
}

/// The branches of ours in `repo`, sorted.
fn our_branches(repo: &Path) -> Vec<String> {
    let mut b: Vec<String> = git(repo, &["branch", "--format=%(refname:short)"])
        .lines()
        .filter(|b| b.starts_with("droid-executor/"))
        .map(str::to_owned)
        .collect();
    b.sort();
    b
}

/// The branch of a candidate task.
fn branch(task: &str) -> String {
    format!("droid-executor/{task}")
}

/// A file of the repository as text.
fn read(repo: &Path, name: &str) -> String {
    std::fs::read_to_string(repo.join(name)).unwrap_or_else(|e| panic!("{name}: {e}"))
}

/// The candidates' task ids, in `best_of` order.
fn candidate_ids(r: &ExecutionResult) -> Vec<String> {
    r.attempts
        .iter()
        .map(|a| {
            a.task_id
                .clone()
                .unwrap_or_else(|| panic!("an attempt without a task: {r:#?}"))
        })
        .collect()
}

/// The Responses API output item of Codex's `apply_patch` adding `file` with `line`.
fn codex_adds(file: &str, line: &str) -> Value {
    json!({"type": "custom_tool_call", "status": "completed", "call_id": "c0", "name": "apply_patch",
           "input": format!("*** Begin Patch\n*** Add File: {file}\n+{line}\n*** End Patch\n")})
}

fn codex_says(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// Claude Code's Bash tool running `command` (in its working directory: the worktree).
fn claude_runs(id: &str, command: &str) -> Value {
    json!({"type": "tool_use", "id": id, "name": "Bash",
           "input": {"command": command, "description": "write it"}})
}

/// `best_of` Codex + Claude through the REAL CLIs: both run at once, each in a worktree of its
/// own made from the same base; Claude writes 41 where the verification wants 42, so Codex's
/// change wins by ground truth. The result is Codex's with both attempts, Claude's worktree and
/// branch are gone, the user's tree is untouched, and `tasks apply <the task's id>` brings
/// Codex's change in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn best_of_codex_and_claude_picks_codex_whose_change_passes_and_apply_brings_it_in() {
    let codex_model = ScriptedModel::start(json!([
        {"output": [codex_adds("answer.txt", "42")]},
        {"output": [codex_says("Wrote 42 in answer.txt.")]}
    ]))
    .await
    .unwrap();
    let claude_model = ScriptedModel::start(json!([
        {"content": [claude_runs("toolu_1", "printf '41\\n' > answer.txt")]},
        {"content": [{"type": "text", "text": "Wrote 41 in answer.txt."}]}
    ]))
    .await
    .unwrap();
    let codex_home = CodexHome::new(&codex_model.base_url()).unwrap();
    let claude_home = ClaudeHome::new().unwrap();
    // one environment for both CLIs: Codex's HOME and CODEX_HOME, Claude Code's config
    // directory and its scripted Messages API
    let mut env: Vec<(OsString, OsString)> = codex_home.env();
    let claude_url = format!("http://127.0.0.1:{}", claude_model.port());
    env.extend(
        claude_home
            .env(&claude_url)
            .into_iter()
            .filter(|(k, _)| k != "HOME" && k != "PATH" && k != "LANG"),
    );
    let store = TempDir::new("best-of-store").unwrap();
    let scratch = TempDir::new("best-of-scratch").unwrap();
    let mut cfg = super::common::engine(tests::fake_droid_bin!(), env, scratch.path())
        .config()
        .clone();
    cfg.agents = vec![
        AgentProgram {
            provider: ProviderId::Codex,
            program: Some(agent_cli("codex")),
            source: "test".into(),
        },
        AgentProgram {
            provider: ProviderId::Claude,
            program: Some(agent_cli("claude")),
            source: "test".into(),
        },
    ];
    cfg.store_dir = Some(store.path().to_path_buf());
    let repo = git_repo(&[("a.txt", "hello\n")]);
    let repo = repo.path();
    let before = state(repo);
    let engine = Engine::new(cfg.clone());
    let ran = run(
        &engine,
        &request(
            repo,
            "Write the answer in answer.txt",
            json!({"best_of": ["codex", "claude"], "execution_mode": "code",
                   "suggested_commands": ["grep -qx 42 answer.txt"]}),
        ),
    )
    .await;
    engine.settled().await;
    let r = &ran.result;
    assert_eq!(r.status, Status::Success, "{r:#?}");
    assert_eq!(
        r.agent.as_ref().map(|a| a.provider),
        Some(ProviderId::Codex)
    );
    let ids = candidate_ids(r);
    let parent = r.task_id.clone().expect("the task's id");
    assert!(
        parent.starts_with("codex-") && !ids.contains(&parent),
        "{r:#?}"
    );
    assert!(
        ids[0].starts_with("codex-") && ids[1].starts_with("claude-"),
        "{ids:?}"
    );
    let seen: Vec<_> = r
        .attempts
        .iter()
        .map(|a| {
            (
                a.provider,
                a.status,
                a.reason,
                a.chosen,
                a.checks.clone(),
                a.diffstat,
                a.worktree.as_ref().map(|w| (w.branch.clone(), w.state)),
            )
        })
        .collect();
    let check = |code| {
        vec![CheckOutcome {
            command: "grep -qx 42 answer.txt".into(),
            exit_code: Some(code),
        }]
    };
    let one_line = Diffstat {
        files: 1,
        lines_added: 1,
        lines_removed: 0,
    };
    assert_eq!(
        seen,
        vec![
            (
                ProviderId::Codex,
                Status::Success,
                None,
                true,
                check(0),
                one_line,
                Some((branch(&ids[0]), WorktreeState::Ready)),
            ),
            (
                ProviderId::Claude,
                Status::Partial,
                Some(IssueType::TestFailure),
                false,
                check(1),
                one_line,
                None,
            ),
        ],
        "{r:#?}"
    );
    // the total is every attempt's usage
    let total = r
        .attempts
        .iter()
        .filter_map(|a| a.usage.as_ref())
        .fold(None, |sum: Option<droid_contract::Usage>, u| {
            Some(sum.map_or_else(|| u.clone(), |s| s.plus(u)))
        });
    assert!(total.is_some(), "neither agent reported usage: {r:#?}");
    assert_eq!(r.usage, total);
    // the result's worktree is the winner's; nothing reached the user's tree yet
    let wt = r.worktree.clone().expect("the winner's worktree");
    assert_eq!(
        (wt.branch.as_str(), wt.state),
        (branch(&ids[0]).as_str(), WorktreeState::Ready)
    );
    assert_eq!(read(Path::new(&wt.path), "answer.txt"), "42\n");
    assert_eq!(state(repo), before);
    assert_eq!(our_branches(repo), vec![branch(&ids[0])]);
    assert_eq!(
        git_worktrees(repo),
        [repo.display().to_string(), wt.path.clone()]
    );
    // each candidate is a task of the store: the loser's says its worktree was discarded
    let tasks = Tasks::open(&cfg).unwrap();
    let loser = tasks.status(&ids[1]).await.unwrap();
    let lost = loser.result.expect("the loser's result");
    assert_eq!(lost.status, Status::Partial);
    assert_eq!(
        lost.worktree.map(|w| w.state),
        Some(WorktreeState::Discarded)
    );
    // apply by the task's own id: Codex's change
    let applied = tasks.apply(&parent, false).await.unwrap();
    assert_eq!(applied.outcome, WorktreeOutcome::Applied, "{applied:#?}");
    assert_eq!(read(repo, "answer.txt"), "42\n");
    assert_eq!(our_branches(repo), Vec::<String>::new());
    assert_eq!(git_worktrees(repo), [repo.display().to_string()]);
    let shown = tasks.status(&parent).await.unwrap().result.unwrap();
    assert_eq!(
        (
            shown.worktree.map(|w| w.state),
            shown.attempts[0].worktree.as_ref().map(|w| w.state)
        ),
        (Some(WorktreeState::Applied), Some(WorktreeState::Applied))
    );
    // both agents were asked, each by its own model
    assert!(codex_model.requests().len() >= 2 && claude_model.requests().len() >= 2);
}

/// A store, a scratch directory and a directory the fake droid's runs may write (the barrier),
/// with an engine whose droid is the fake one.
struct Fake {
    store: TempDir,
    _scratch: TempDir,
    _files: TempDir,
    cfg: EngineConfig,
}

impl Fake {
    /// The fake droid playing `steps` for every candidate; `tune` the configuration.
    fn new(steps: &Value, tune: impl FnOnce(&mut EngineConfig)) -> Fake {
        let store = TempDir::new("best-of-fake-store").unwrap();
        let scratch = TempDir::new("best-of-fake-scratch").unwrap();
        let files = TempDir::new("best-of-fake-files").unwrap();
        let scenario = files.path().join("scenario.json");
        std::fs::write(&scenario, json!({ "steps": steps }).to_string()).unwrap();
        let env: Vec<(OsString, OsString)> = vec![
            ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
            (tests::fake_droid::SCENARIO_ENV.into(), scenario.into()),
        ];
        let mut cfg = super::common::engine(tests::fake_droid_bin!(), env, scratch.path())
            .config()
            .clone();
        cfg.store_dir = Some(store.path().to_path_buf());
        cfg.supervisor = Some(tests::droid_bin::droid_executor_bin());
        cfg.sandbox_writable.push(files.path().to_path_buf());
        tune(&mut cfg);
        Fake {
            store,
            _scratch: scratch,
            _files: files,
            cfg,
        }
    }

    fn engine(&self) -> Engine {
        Engine::new(self.cfg.clone())
    }

    fn tasks(&self) -> Tasks {
        Tasks::open(&self.cfg).unwrap()
    }

    /// The worktree directories of the store.
    fn worktree_dirs(&self) -> Vec<PathBuf> {
        match std::fs::read_dir(self.store.path().join("worktrees")) {
            Ok(d) => d
                .flatten()
                .map(|e| e.path())
                .filter(|p| p.is_dir())
                .collect(),
            Err(_) => Vec::new(),
        }
    }
}

/// The fake droid's steps: write `out.txt` with `good` when its model is `custom:Good`, else
/// `bad` and a second line; then (with a barrier) wait until `n` candidates have got there, so
/// the run only ends if they all run at once.
fn by_model(barrier: Option<(&Path, usize)>) -> Value {
    let mut steps = vec![json!({"sh":
        "if tr '\\0' ' ' < /proc/$PPID/cmdline | grep -q custom:Good; \
         then printf 'good\\n' > out.txt; else printf 'bad\\nworse\\n' > out.txt; fi"})];
    if let Some((dir, n)) = barrier {
        steps.push(json!({"sh": format!(
            "touch {d}/$PPID; i=0; while [ $(ls {d} | wc -l) -lt {n} ] && [ $i -lt 600 ]; \
             do sleep 0.05; i=$((i+1)); done",
            d = dir.display()
        )}));
    }
    steps.push(json!({"completion": "Wrote out.txt."}));
    Value::Array(steps)
}

/// A best_of request of the fake droid's models `models`.
fn fake_best_of(repo: &Path, models: &[&str], extra: Value) -> Value {
    let mut v = request(
        repo,
        "Write out.txt",
        json!({"best_of": models.iter().map(|m| format!("droid:custom:{m}")).collect::<Vec<_>>(),
               "suggested_commands": ["grep -qx good out.txt"]}),
    );
    if let (Value::Object(base), Value::Object(more)) = (&mut v, extra) {
        base.extend(more);
    }
    v
}

/// Candidates run at once (each waits at a barrier for the others); the one named second wins
/// by its verification; the loser's worktree and branch are gone, and `tasks discard <the
/// task>` discards the winner's. With `keep_all` the loser's worktree stays, named in its
/// attempt, and can be applied by its own task id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn losers_are_discarded_unless_keep_all_and_candidates_run_at_once() {
    let barrier = TempDir::new("best-of-barrier").unwrap();
    let fake = Fake::new(&by_model(Some((barrier.path(), 2))), |c| {
        c.sandbox_writable.push(barrier.path().to_path_buf());
    });
    let engine = fake.engine();
    let tasks = fake.tasks();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let repo = repo.path();
    let ran = run(&engine, &fake_best_of(repo, &["Bad", "Good"], json!({}))).await;
    engine.settled().await;
    let r = &ran.result;
    assert_eq!(r.status, Status::Success, "{r:#?}");
    let ids = candidate_ids(r);
    assert_eq!(
        r.attempts
            .iter()
            .map(|a| (a.model.as_deref(), a.status, a.chosen, a.worktree.is_some()))
            .collect::<Vec<_>>(),
        vec![
            (Some("custom:Bad"), Status::Partial, false, false),
            (Some("custom:Good"), Status::Success, true, true),
        ],
        "{r:#?}"
    );
    assert!(
        r.logs
            .iter()
            .any(|l| l == "best_of: droid:custom:Good chosen over droid:custom:Bad (partial): its verification passed"),
        "{:#?}",
        r.logs
    );
    assert_eq!(our_branches(repo), vec![branch(&ids[1])]);
    assert_eq!(git_worktrees(repo).len(), 2);
    assert_eq!(
        fake.worktree_dirs().len(),
        2,
        "the loser's record stays until its task expires"
    );
    let parent = r.task_id.clone().unwrap();
    let gone = tasks.discard(&parent).await.unwrap();
    assert_eq!(gone.outcome, WorktreeOutcome::Discarded, "{gone:#?}");
    assert_eq!(our_branches(repo), Vec::<String>::new());
    assert_eq!(git_worktrees(repo), [repo.display().to_string()]);

    // keep_all: both stay; the loser's attempt names its worktree
    for f in std::fs::read_dir(barrier.path()).unwrap() {
        std::fs::remove_file(f.unwrap().path()).unwrap();
    }
    let ran = run(
        &engine,
        &fake_best_of(repo, &["Bad", "Good"], json!({"keep_all": true})),
    )
    .await;
    engine.settled().await;
    let r = &ran.result;
    assert_eq!(r.status, Status::Success, "{r:#?}");
    let ids = candidate_ids(r);
    let kept = r.attempts[0].worktree.clone().expect("kept with keep_all");
    assert_eq!(
        (kept.branch.as_str(), kept.state),
        (branch(&ids[0]).as_str(), WorktreeState::Ready)
    );
    assert_eq!(read(Path::new(&kept.path), "out.txt"), "bad\nworse\n");
    assert_eq!(our_branches(repo), {
        let mut b = vec![branch(&ids[0]), branch(&ids[1])];
        b.sort();
        b
    });
    // the loser is a task of its own: applied by its id, it brings its own change
    let applied = tasks.apply(&ids[0], false).await.unwrap();
    assert_eq!(applied.outcome, WorktreeOutcome::Applied, "{applied:#?}");
    assert_eq!(read(repo, "out.txt"), "bad\nworse\n");
    assert_eq!(
        tasks
            .discard(r.task_id.as_deref().unwrap())
            .await
            .unwrap()
            .outcome,
        WorktreeOutcome::Discarded
    );
    assert_eq!(git_worktrees(repo), [repo.display().to_string()]);
}

/// A cancel of the task ends every candidate (each `cancelled`, nothing of theirs left
/// running); and when every candidate fails, the judged best is still the result, its worktree
/// `ready` for review.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_ends_every_candidate() {
    let fake = Fake::new(
        &json!([{"sh": "echo started > started.txt"}, {"hang": true}]),
        |_| {},
    );
    let engine = fake.engine();
    let repo = git_repo(&[("a.txt", "a\n")]);
    let cancel = CancellationToken::new();
    let stop = cancel.clone();
    let store = fake.store.path().to_path_buf();
    tokio::spawn(async move {
        // both candidates' agents have started: each has made its worktree and written a file
        let until = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let started = std::fs::read_dir(store.join("worktrees"))
                .map(|d| {
                    d.flatten()
                        .filter(|e| {
                            std::fs::read_dir(e.path()).is_ok_and(|inner| {
                                inner
                                    .flatten()
                                    .any(|c| c.path().join("started.txt").exists())
                            })
                        })
                        .count()
                })
                .unwrap_or(0);
            if started >= 2 || tokio::time::Instant::now() > until {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        stop.cancel();
    });
    let ran = run_with(
        &engine,
        &fake_best_of(repo.path(), &["A", "B"], json!({})),
        cancel,
    )
    .await;
    engine.settled().await;
    let r = &ran.result;
    assert_eq!(r.status, Status::Cancelled, "{r:#?}");
    assert_eq!(
        r.attempts.iter().map(|a| a.status).collect::<Vec<_>>(),
        vec![Status::Cancelled, Status::Cancelled],
        "{r:#?}"
    );
    // the judged best (the same change: the shorter run) waits for review; the other is gone
    let ids = candidate_ids(r);
    let won = r.attempts.iter().position(|a| a.chosen).expect("a winner");
    assert_eq!(
        r.worktree.as_ref().map(|w| w.state),
        Some(WorktreeState::Ready)
    );
    assert_eq!(our_branches(repo.path()), vec![branch(&ids[won])]);
    for id in &ids {
        assert_eq!(
            pids_with_env("DROID_EXECUTOR_RUN_ID", &format!("task-{id}")),
            Vec::<i32>::new(),
            "processes of candidate {id} survived the cancel"
        );
    }
}

/// A best_of that would take the store past `max_worktrees` is refused whole before anything
/// runs: a background submission with the error (no task made), a synchronous run with an
/// `error` result and no worktree made.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_worktrees_refuses_a_best_of_that_would_not_fit() {
    let fake = Fake::new(&by_model(None), |c| c.worktrees.max_worktrees = 2);
    let repo = git_repo(&[("a.txt", "a\n")]);
    let three = fake_best_of(repo.path(), &["A", "B", "Good"], json!({}));
    let err = fake
        .tasks()
        .submit(&ExecutionRequest::from_value(&three, None).unwrap())
        .await
        .expect_err("refused");
    let expected = "best_of needs 3 worktrees at once (one per candidate) and max_worktrees (2) \
                    leaves room for 2: 0 worktrees are running or waiting for review; apply or \
                    discard some (droid-executor tasks list shows them), or raise max_worktrees \
                    (DROID_EXECUTOR_MAX_WORKTREES)";
    assert_eq!(err.to_string(), expected);
    assert_eq!(
        fake.tasks().list(&Default::default()).await.unwrap().len(),
        0,
        "no task was made"
    );
    let engine = fake.engine();
    let ran = run(&engine, &three).await;
    let r = &ran.result;
    assert_eq!(r.status, Status::Error, "{r:#?}");
    assert_eq!(
        (r.issues[0].kind, r.issues[0].description.as_str()),
        (IssueType::EnvIssue, expected)
    );
    assert_eq!(r.attempts, Vec::new());
    assert_eq!(fake.worktree_dirs(), Vec::<PathBuf>::new());
    assert_eq!(our_branches(repo.path()), Vec::<String>::new());
    // two fit
    let two = run(
        &engine,
        &fake_best_of(repo.path(), &["A", "Good"], json!({})),
    )
    .await;
    assert_eq!(two.result.status, Status::Success, "{:#?}", two.result);
}

/// Through the bridge: `POST /tasks` with `best_of` (409 `worktree` when it would not fit),
/// the task's result lists the attempts, and `POST /tasks/{id}/apply` applies the winner's
/// change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bridge_runs_a_best_of_task_and_applies_its_winner() {
    use super::bridge_http::Bridged;
    let b = Bridged::start(
        &by_model(None),
        &[],
        &[("DROID_EXECUTOR_MAX_WORKTREES", "3")],
    )
    .await;
    let repo = b.home.repo();
    let too_many = b
        .post(
            "/tasks",
            &b.request(
                "four",
                json!({"best_of": ["droid:custom:A", "droid:custom:B", "droid:custom:C", "droid:custom:D"],
                       "suggested_commands": ["grep -qx good out.txt"]}),
            ),
        )
        .await;
    assert_eq!(too_many.refusal(409), "worktree", "{too_many:#?}");
    let id = b
        .submit(&b.request(
            "Write out.txt",
            json!({"best_of": ["droid:custom:Bad", {"provider": "droid", "model": "custom:Good"}],
                   "suggested_commands": ["grep -qx good out.txt"]}),
        ))
        .await;
    let rec = b.until_state(&id, "success").await;
    let attempts = &rec["result"]["attempts"];
    assert_eq!(
        (
            &attempts[0]["model"],
            &attempts[0]["status"],
            &attempts[0]["chosen"],
            &attempts[1]["model"],
            &attempts[1]["status"],
            &attempts[1]["chosen"],
            &attempts[1]["diffstat"],
        ),
        (
            &json!("custom:Bad"),
            &json!("partial"),
            &json!(false),
            &json!("custom:Good"),
            &json!("success"),
            &json!(true),
            &json!({"files": 1, "lines_added": 1, "lines_removed": 0}),
        ),
        "{rec:#}"
    );
    let applied = b.raw("POST", &format!("/tasks/{id}/apply"), &[], b"").await;
    assert_eq!(applied.status, 200, "{applied:#?}");
    assert_eq!(applied.json()["outcome"], "applied");
    assert_eq!(read(&repo, "out.txt"), "good\n");
    assert_eq!(git_worktrees(&repo), [repo.display().to_string()]);
}
