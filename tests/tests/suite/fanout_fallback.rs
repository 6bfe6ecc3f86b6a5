//! `fallback` (docs/protocol.md#fallback) end to end: the real droid rate-limited by its model
//! (HTTP 429) hands the task to the real Codex, which does it; a test failure of the real Codex
//! goes to no other agent; an agent that is not installed hands over to the next; a fake droid
//! that changed files in place before its authentication failed makes the next agent run in a
//! worktree; the CLI's `--fallback` flag and its errors; and `fallback` through the MCP server.

use std::ffi::OsString;
use std::time::Duration;

use droid_contract::{
    ExecutionResult, IssueType, ProviderId, Status, Usage, WorktreeOutcome, WorktreeState,
};
use droid_exec::config::AgentProgram;
use droid_exec::{EVENT_CHANNEL_CAPACITY, Engine, EngineConfig, RunEvent, Tasks};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::codex_home::{CodexHome, KEY_VAR, MODEL};
use tests::droid_bin::real_droid;
use tests::droid_home::DroidHome;
use tests::fake_droid::SCENARIO_ENV;
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::binary::{FakeHome, droid_executor, git_repo_at};
use super::common::{engine, git, git_repo, request};
use super::mcp_stdio::Server;

/// A run that waits for droid's own retries of a 429 (5 attempts over about 90 s) and then
/// Codex: well above both.
const FALLBACK_LIMIT: Duration = Duration::from_secs(300);

/// Codex's final message.
fn say(text: &str) -> Value {
    json!({"type": "message", "role": "assistant", "status": "completed",
           "content": [{"type": "output_text", "text": text, "annotations": []}]})
}

/// Codex's `apply_patch` adding `path` with one line `line`.
fn add_file(call: &str, path: &str, line: &str) -> Value {
    json!({"type": "custom_tool_call", "status": "completed", "call_id": call,
           "name": "apply_patch",
           "input": format!("*** Begin Patch\n*** Add File: {path}\n+{line}\n*** End Patch\n")})
}

/// A Codex model that adds `b.txt` and says so.
async fn codex_adding_b() -> ScriptedModel {
    ScriptedModel::start(json!([
        {"output": [add_file("c0", "b.txt", "b")]},
        {"output": [say("Created b.txt.")]}
    ]))
    .await
    .unwrap()
}

/// The real Codex as the engine's `codex`, configured by `home`.
fn codex_program() -> AgentProgram {
    AgentProgram {
        provider: ProviderId::Codex,
        program: Some(agent_cli("codex")),
        source: "test".into(),
    }
}

/// Codex's variables beside another agent's: its `CODEX_HOME` and its provider's key (HOME is
/// the other agent's, which Codex does not mind).
fn codex_env(home: &CodexHome) -> Vec<(OsString, OsString)> {
    vec![
        ("CODEX_HOME".into(), home.codex_home().into()),
        (KEY_VAR.into(), "sk-scripted".into()),
    ]
}

/// Run `request` on `engine` to its end (bounded by [`FALLBACK_LIMIT`]), with the events.
async fn run_long(engine: &Engine, request: &Value) -> (ExecutionResult, Vec<RunEvent>) {
    let (tx, mut rx) = tokio::sync::mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let collector = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(e) = rx.recv().await {
            all.push(e);
        }
        all
    });
    let result = tokio::time::timeout(
        FALLBACK_LIMIT,
        engine.execute(request, CancellationToken::new(), Some(tx)),
    )
    .await
    .expect("the fallback did not end within the suite's limit");
    let events = tokio::time::timeout(Duration::from_secs(5), collector)
        .await
        .expect("event stream did not end")
        .unwrap();
    (result, events)
}

/// One attempt as `(provider, model, status, reason, chosen)`.
type Outline = (ProviderId, Option<String>, Status, Option<IssueType>, bool);

/// Each attempt's [`Outline`].
fn outline(r: &ExecutionResult) -> Vec<Outline> {
    r.attempts
        .iter()
        .map(|a| (a.provider, a.model.clone(), a.status, a.reason, a.chosen))
        .collect()
}

/// The "Done when" of the issue: the real droid's model answers HTTP 429 every time; droid
/// gives up after its own retries (`429 Rate limit exceeded`, `rate_limited`), and the real
/// Codex, next in `fallback`, does the task.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_droid_falls_back_to_codex_which_succeeds() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let droid_model =
        ScriptedModel::start(json!([{"status": 429, "error_message": "Rate limit exceeded"}]))
            .await
            .unwrap();
    let droid_home = DroidHome::new(&[("Limited", &droid_model.base_url())]).unwrap();
    let codex_model = codex_adding_b().await;
    let codex_home = CodexHome::new(&codex_model.base_url()).unwrap();
    let scratch = TempDir::new("fallback-scratch").unwrap();
    let mut env = droid_home.env();
    env.extend(codex_env(&codex_home));
    let mut cfg = engine(real_droid(), env, scratch.path()).config().clone();
    cfg.agents = vec![codex_program()];
    let engine = Engine::new(cfg);
    let droid_model_id = droid_home.model_id("Limited");

    let (r, events) = run_long(
        &engine,
        &request(
            repo.path(),
            "Create b.txt",
            // droid retries the 429 for about 90 s before it says so: a budget that lets it
            // (a timeout would not fall back)
            json!({"model": droid_model_id, "fallback": [{"provider": "codex", "model": MODEL}],
                   "suggested_commands": ["test -f b.txt"], "max_runtime_seconds": 200}),
        ),
    )
    .await;

    assert_eq!(r.status, Status::Success, "{r:#?}");
    assert_eq!(
        outline(&r),
        vec![
            (
                ProviderId::Droid,
                Some(droid_model_id),
                Status::Failed,
                Some(IssueType::RateLimited),
                false
            ),
            (
                ProviderId::Codex,
                Some(MODEL.to_owned()),
                Status::Success,
                None,
                true
            ),
        ]
    );
    let droid = &r.attempts[0];
    assert!(
        droid.note.contains("429 Rate limit exceeded"),
        "{:?}",
        droid.note
    );
    assert!(droid.issues.contains(&IssueType::RateLimited));
    // the result is Codex's: its agent, its change, its verification
    assert_eq!(
        r.agent.as_ref().map(|a| a.provider),
        Some(ProviderId::Codex)
    );
    assert_eq!(
        r.files_changed
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        vec!["b.txt"]
    );
    assert_eq!(r.tests.passed, Some(true));
    assert_eq!(r.attempts[1].checks.len(), 1);
    assert_eq!(r.attempts[1].diffstat.files, 1);
    // droid made its five tries at the model, Codex answered
    assert!(
        droid_model.requests().len() >= 5,
        "{:?}",
        droid_model.requests().len()
    );
    // the total is over both attempts (droid reported none)
    let codex_usage = r.attempts[1].usage.clone().unwrap();
    assert_eq!(r.usage, Some(codex_usage.clone()));
    assert_ne!(codex_usage, Usage::default());
    // the move to the next agent is published; the run ends once
    assert!(
        events.iter().any(|e| matches!(e, RunEvent::Progress { message, .. }
            if message.starts_with("fallback: droid:") && message.ends_with("trying codex:gpt-5.5"))),
        "{events:#?}"
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| matches!(e, RunEvent::Completed { .. }))
            .count(),
        1
    );
}

/// A test failure is the task's, not the agent's: no other agent is tried (the real Codex,
/// its change failing the verification command; Claude Code is not even installed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_test_failure_does_not_fall_back() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let model = codex_adding_b().await;
    let home = CodexHome::new(&model.base_url()).unwrap();
    let scratch = TempDir::new("fallback-scratch").unwrap();
    let mut cfg = engine(real_droid(), home.env(), scratch.path())
        .config()
        .clone();
    cfg.agents = vec![
        codex_program(),
        AgentProgram {
            provider: ProviderId::Claude,
            program: None,
            source: "not installed".into(),
        },
    ];
    let engine = Engine::new(cfg);
    let mut req = request(
        repo.path(),
        "Create b.txt",
        json!({"model": MODEL, "fallback": ["claude", "droid"],
               "suggested_commands": ["test -f c.txt"]}),
    );
    req["provider"] = json!("codex");
    let (r, _) = run_long(&engine, &req).await;
    assert_eq!(r.status, Status::Partial, "{r:#?}");
    assert_eq!(
        outline(&r),
        vec![(
            ProviderId::Codex,
            Some(MODEL.to_owned()),
            Status::Partial,
            Some(IssueType::TestFailure),
            true
        )]
    );
    assert_eq!(
        r.attempts[0].checks,
        vec![droid_contract::CheckOutcome {
            command: "test -f c.txt".into(),
            exit_code: Some(1)
        }]
    );
    assert_eq!(r.usage, r.attempts[0].usage);
}

/// Claude Code is not installed (`DROID_EXECUTOR_CLAUDE_BIN` names no file): the next agent,
/// the real Codex, does the task; through the CLI's `--fallback` flag.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agent_not_installed_falls_back_through_the_cli_flag() {
    let model = codex_adding_b().await;
    let home = CodexHome::new(&model.base_url()).unwrap();
    let repo = home.path().join("repo");
    git_repo_at(&repo, &[("a.txt", "a\n")]);
    let config = home.path().join(".config/droid-executor");
    std::fs::create_dir_all(&config).unwrap();
    std::fs::write(
        config.join("config.toml"),
        format!("env_passthrough = [\"{KEY_VAR}\"]\n"),
    )
    .unwrap();
    let mut env = home.env();
    env.push(("DROID_EXECUTOR_CODEX_BIN".into(), agent_cli("codex").into()));
    env.push((
        "DROID_EXECUTOR_CLAUDE_BIN".into(),
        home.path().join("no-such-claude").into(),
    ));
    let out = droid_executor(
        &[
            "run",
            "--json",
            "--provider",
            "claude",
            "--fallback",
            &format!("codex:{MODEL}"),
            "--command",
            "test -f b.txt",
            "Create b.txt",
        ],
        &env,
        &repo,
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let r = out.result();
    assert_eq!(
        outline(&r),
        vec![
            (
                ProviderId::Claude,
                None,
                Status::Error,
                Some(IssueType::DroidNotFound),
                false
            ),
            (
                ProviderId::Codex,
                Some(MODEL.to_owned()),
                Status::Success,
                None,
                true
            ),
        ]
    );
    assert!(repo.join("b.txt").is_file());

    // the human report: one line per attempt, the chosen one marked
    let out = droid_executor(
        &[
            "run",
            "--provider",
            "claude",
            "--fallback",
            &format!("codex:{MODEL}"),
            "Create b.txt",
        ],
        &env,
        &repo,
    )
    .await;
    let lines: Vec<&str> = out
        .stdout
        .lines()
        .skip_while(|l| *l != "attempts:")
        .skip(1)
        .take(2)
        .collect();
    assert!(
        lines[0].starts_with("   claude  error (droid_not_found)  "),
        "{}",
        out.stdout
    );
    assert!(
        lines[1].starts_with(&format!(" * codex:{MODEL}  ")),
        "{}",
        out.stdout
    );
}

/// A droid stand-in changes a.txt in place, then fails to authenticate: the next agent (the
/// real Codex) must not start from that half-done change in place, so it runs in a worktree of
/// its own (a task of the store), and the result says why; a.txt stays as droid left it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_attempt_that_changed_files_in_place_sends_the_next_to_a_worktree() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let fake = TempDir::new("fallback-fake").unwrap();
    let scenario = fake.path().join("scenario.json");
    std::fs::write(
        &scenario,
        json!({"steps": [
            {"write_file": {"path": "a.txt", "content": "half done\n"}},
            {"stderr": "Authentication failed. Please log in using /login or set a valid FACTORY_API_KEY environment variable."},
            {"exit": 1}
        ]})
        .to_string(),
    )
    .unwrap();
    let model = codex_adding_b().await;
    let home = CodexHome::new(&model.base_url()).unwrap();
    let scratch = TempDir::new("fallback-scratch").unwrap();
    let store = TempDir::new("fallback-store").unwrap();
    let mut env = vec![
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        ("HOME".into(), home.path().into()),
        (SCENARIO_ENV.into(), scenario.into()),
    ];
    env.extend(codex_env(&home));
    let mut cfg: EngineConfig = engine(tests::fake_droid_bin!(), env, scratch.path())
        .config()
        .clone();
    cfg.agents = vec![codex_program()];
    cfg.store_dir = Some(store.path().to_path_buf());
    let engine = Engine::new(cfg);

    let (r, _) = run_long(
        &engine,
        &request(
            repo.path(),
            "Create b.txt",
            json!({"fallback": [{"provider": "codex", "model": MODEL}],
                   "suggested_commands": ["test -f b.txt"]}),
        ),
    )
    .await;
    assert_eq!(r.status, Status::Success, "{r:#?}");
    assert_eq!(
        outline(&r),
        vec![
            (
                ProviderId::Droid,
                None,
                Status::Partial,
                Some(IssueType::AuthFailure),
                false
            ),
            (
                ProviderId::Codex,
                Some(MODEL.to_owned()),
                Status::Success,
                None,
                true
            ),
        ]
    );
    assert_eq!(r.attempts[0].diffstat.files, 1);
    // Codex's change waits in its worktree, a task of its own
    let wt = r.worktree.as_ref().expect("codex ran in a worktree");
    assert_eq!(wt.state, WorktreeState::Ready);
    assert_eq!(r.attempts[1].worktree.as_ref(), Some(wt));
    let own = r.attempts[1].task_id.as_deref().expect("its own task");
    assert_eq!(wt.branch, format!("droid-executor/{own}"));
    assert!(
        r.logs.iter().any(|l| l.contains(
            "the failed attempt changed 1 file(s) in place (a.txt); they are left as they are"
        ) && l.contains("run in a worktree")),
        "{:#?}",
        r.logs
    );
    // in place: droid's half-done change, and nothing of Codex's
    assert_eq!(
        std::fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        "half done\n"
    );
    assert!(!repo.path().join("b.txt").exists());
    assert!(git(repo.path(), &["branch", "--list", "droid-executor/*"]).contains(own));
    // Codex started from a clean base: the repository as it was before droid's attempt
    assert!(
        r.logs
            .iter()
            .any(|l| l.contains("as it was before the failed attempt")),
        "{:#?}",
        r.logs
    );
    assert_eq!(
        std::fs::read_to_string(std::path::Path::new(&wt.path).join("a.txt")).unwrap(),
        "a\n",
        "the worktree starts without the failed attempt's change"
    );
    assert_eq!(
        git(
            std::path::Path::new(&wt.path),
            &["diff", "--name-only", &wt.base, &wt.head]
        )
        .trim(),
        "b.txt"
    );
    // applying brings Codex's change in beside droid's half-done one, which stays as it was
    let applied = Tasks::open(engine.config())
        .unwrap()
        .apply(own, false)
        .await
        .unwrap();
    assert_eq!(applied.outcome, WorktreeOutcome::Applied, "{applied:#?}");
    assert!(repo.path().join("b.txt").is_file());
    assert_eq!(
        std::fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        "half done\n"
    );
    std::fs::remove_file(repo.path().join("b.txt")).unwrap();

    // with no store the next agent has nowhere clean to run: the fallback stops, and says why
    std::fs::write(repo.path().join("a.txt"), "a\n").unwrap();
    let mut cfg = engine.config().clone();
    cfg.store_dir = None;
    let (r, _) = run_long(
        &Engine::new(cfg),
        &request(
            repo.path(),
            "Create b.txt",
            json!({"fallback": ["codex"], "suggested_commands": ["test -f b.txt"]}),
        ),
    )
    .await;
    assert_eq!(r.status, Status::Partial, "{r:#?}");
    assert_eq!(r.attempts.len(), 1, "{r:#?}");
    assert!(r.attempts[0].chosen);
    let stop = r.issues.last().unwrap();
    assert_eq!(stop.kind, IssueType::EnvIssue);
    assert!(
        stop.description.contains("needs a task store (store_dir)"),
        "{stop:#?}"
    );
}

/// In a worktree task the failed attempt's worktree goes (its change with it) and the next
/// agent starts in a new worktree of the same task, from the repository as the user has it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_a_worktree_the_next_attempt_gets_a_fresh_worktree() {
    let repo = git_repo(&[("a.txt", "a\n")]);
    let fake = TempDir::new("fallback-fake").unwrap();
    let scenario = fake.path().join("scenario.json");
    std::fs::write(
        &scenario,
        json!({"steps": [
            {"write_file": {"path": "a.txt", "content": "half done\n"}},
            {"stderr": "Authentication failed. Please log in using /login or set a valid FACTORY_API_KEY environment variable."},
            {"exit": 1}
        ]})
        .to_string(),
    )
    .unwrap();
    let model = codex_adding_b().await;
    let home = CodexHome::new(&model.base_url()).unwrap();
    let scratch = TempDir::new("fallback-scratch").unwrap();
    let store = TempDir::new("fallback-store").unwrap();
    let mut env = vec![
        ("PATH".into(), std::env::var_os("PATH").unwrap_or_default()),
        ("HOME".into(), home.path().into()),
        (SCENARIO_ENV.into(), scenario.into()),
    ];
    env.extend(codex_env(&home));
    let mut cfg: EngineConfig = engine(tests::fake_droid_bin!(), env, scratch.path())
        .config()
        .clone();
    cfg.agents = vec![codex_program()];
    cfg.store_dir = Some(store.path().to_path_buf());
    let engine = Engine::new(cfg);
    let (r, _) = run_long(
        &engine,
        &request(
            repo.path(),
            "Create b.txt",
            json!({"isolation": "worktree", "fallback": [{"provider": "codex", "model": MODEL}],
                   "suggested_commands": ["test -f b.txt"]}),
        ),
    )
    .await;
    assert_eq!(r.status, Status::Success, "{r:#?}");
    assert_eq!(
        outline(&r)
            .into_iter()
            .map(|(p, _, s, why, chosen)| (p, s, why, chosen))
            .collect::<Vec<_>>(),
        vec![
            (
                ProviderId::Droid,
                Status::Partial,
                Some(IssueType::AuthFailure),
                false
            ),
            (ProviderId::Codex, Status::Success, None, true),
        ]
    );
    // Codex's change only: droid's went with its worktree
    assert_eq!(
        r.files_changed
            .iter()
            .map(|f| f.path.as_str())
            .collect::<Vec<_>>(),
        vec!["b.txt"]
    );
    let wt = r.worktree.as_ref().expect("a worktree");
    assert_eq!(wt.state, WorktreeState::Ready);
    let checkout = std::path::PathBuf::from(&wt.path);
    assert_eq!(
        std::fs::read_to_string(checkout.join("a.txt")).unwrap(),
        "a\n"
    );
    assert!(checkout.join("b.txt").is_file());
    // the user's repository is untouched until the change is applied
    assert_eq!(
        std::fs::read_to_string(repo.path().join("a.txt")).unwrap(),
        "a\n"
    );
    // one branch: the task's
    assert_eq!(
        git(repo.path(), &["branch", "--list", "droid-executor/*"])
            .lines()
            .count(),
        1
    );
}

/// The CLI's flags refuse what they cannot read, naming the flag and the value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cli_refuses_unreadable_agents_clearly() {
    let home = FakeHome::new("fallback-cli", &[]);
    for (args, said) in [
        (
            vec!["--fallback", "codex,cursor"],
            "invalid value 'cursor' for '--fallback <AGENTS>': \"cursor\" is not a provider; one of \
             \"droid\", \"codex\", \"claude\", \"gemini\", \"opencode\"",
        ),
        (
            vec!["--fallback", "claude:"],
            "\"claude:\" names no model after ':' (write \"claude\" for its default)",
        ),
        (
            vec!["--best-of", "codex,,claude"],
            "invalid value '' for '--best-of <AGENTS>': \"\" is not a provider",
        ),
    ] {
        let mut all = vec!["run"];
        all.extend(args.iter().copied());
        all.push("Do it");
        let out = droid_executor(&all, &home.env(), &home.repo()).await;
        assert_eq!(out.code, Some(2), "{args:?}: {out:#?}");
        assert!(out.stderr.contains(said), "{args:?}: {}", out.stderr);
    }
    // a provider's own agent again is refused by the request's rules
    let out = droid_executor(
        &["run", "--json", "--fallback", "droid", "Do it"],
        &home.env(),
        &home.repo(),
    )
    .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    let r = out.result();
    assert!(
        r.issues[0]
            .description
            .contains("is the request's own agent (droid); a fallback must be another"),
        "{r:#?}"
    );
    // an agent of fallback that could not take the request refuses it at once, before the
    // first agent runs, naming where it is in fallback and the field
    let out = droid_executor(
        &[
            "run",
            "--json",
            "--reasoning-effort",
            "high",
            "--fallback",
            "codex,gemini",
            "Do it",
        ],
        &home.env(),
        &home.repo(),
    )
    .await;
    let r = out.result();
    assert_eq!(r.status, Status::Error, "{out:#?}");
    assert!(r.attempts.is_empty(), "nothing ran: {r:#?}");
    assert_eq!(r.issues[0].kind, IssueType::ValidationError, "{r:#?}");
    assert!(
        r.issues[0]
            .description
            .starts_with("$.fallback[1]: gemini cannot take reasoning_effort: "),
        "{r:#?}"
    );
    assert_eq!(out.code, Some(2), "{out:#?}");
}

/// `execute_droid_task` over MCP carries `fallback`: Claude Code is not installed, the next
/// agent (the fake droid) answers, and the structured result lists both attempts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_carries_fallback_end_to_end() {
    let home = FakeHome::new("fallback-mcp", &[]);
    home.play(&json!([{"completion": "Done."}]));
    let mut env = home.env();
    env.push((
        "DROID_EXECUTOR_CLAUDE_BIN".into(),
        home.path().join("no-such-claude").into(),
    ));
    let mut server = Server::start(&env, &home.repo());
    server.initialize().await;
    let out = server
        .call(
            json!(1),
            "execute_droid_task",
            json!({"objective": "Say done", "provider": "claude", "fallback": ["droid"],
                   "context": {"repo_root": home.repo().display().to_string()}}),
        )
        .await;
    let r: ExecutionResult = serde_json::from_value(out["structuredContent"].clone()).unwrap();
    assert_eq!(r.status, Status::Success, "{r:#?}");
    assert_eq!(
        outline(&r),
        vec![
            (
                ProviderId::Claude,
                None,
                Status::Error,
                Some(IssueType::DroidNotFound),
                false
            ),
            (ProviderId::Droid, None, Status::Success, None, true),
        ]
    );
    assert_eq!(r.usage, r.attempts[1].usage);
    assert!(
        r.summary
            .starts_with("fallback: droid answered, after claude.")
    );
}
