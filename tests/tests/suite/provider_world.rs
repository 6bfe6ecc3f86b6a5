//! The one test world of the provider suites (`provider_codex`, `provider_claude`,
//! `provider_gemini`, `provider_opencode`): a scripted model, the agent CLI's throw-away HOME
//! pointing at it, a scratch directory and an engine driving the REAL CLI, built the same way
//! for every CLI from its [`Agent`] description (its HOME, how a request names it, the dialect
//! its scripted model speaks). The runs those suites share are written here once: ground truth,
//! a model error, a leaked sleeper timed out or cancelled, a resumed and an unknown session, a
//! lying agent, read-only, a refused reasoning effort, one run through the binary. Each asserts
//! what holds for every CLI and returns what it ran, so the suite asserts its CLI's own details
//! after it; what only one CLI does stays in its suite.
//!
//! It lives in the suite rather than in the support crate (`tests/src/`) because it drives the
//! engine, and the support crate depends on none of our crates.

use std::ffi::OsString;
use std::future::Future;
use std::marker::PhantomData;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{Autonomy, ChangeType, ExecutionResult, FileChange, ProviderId, Status};
use droid_exec::config::{AgentProgram, SandboxMode};
use droid_exec::{Engine, EngineConfig};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::agent_bin::agent_cli;
use tests::procs::wait_gone;
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

use super::binary::{Out, droid_executor, git_repo_at};
use super::common::{Ran, engine_config, git_repo, read_pid_file, request, run, run_with};

/// What differs between the agent CLIs the provider suites drive.
pub(super) trait Agent {
    /// The provider a request names.
    const PROVIDER: ProviderId;
    /// The CLI's version the suites pin (what a result's `agent.version` says).
    const VERSION: &'static str;
    /// The CLI's throw-away HOME.
    type Home;

    /// A HOME pointing the CLI at `model` (and `model` ready for the CLI's side calls).
    fn home(model: &ScriptedModel) -> Self::Home;

    /// The HOME directory.
    fn home_path(home: &Self::Home) -> &Path;

    /// The environment to run the CLI with against `model`.
    fn env(home: &Self::Home, model: &ScriptedModel) -> Vec<(OsString, OsString)>;

    /// Variables marking every process of one world's runs with `tag` (none by default).
    fn tag_env(_tag: &str) -> Vec<(OsString, OsString)> {
        Vec::new()
    }

    /// Fields every request for the CLI carries besides `provider` (such as its model).
    fn request_fields() -> Value {
        json!({})
    }

    /// A model turn that runs the shell `command` (the first tool call of a conversation).
    fn shell(command: &str) -> Value;

    /// A model turn that ends the run, answering `text`.
    fn answer(text: &str) -> Value;

    /// The requests `model` received that are the agent's own conversation turns.
    fn turns(model: &ScriptedModel) -> Vec<Value>;

    /// The conversation one of [`Agent::turns`] carries, as text.
    fn sent(turn: &Value) -> String;

    /// What a HOME needs, besides the environment, for a run through the `droid-executor`
    /// binary (nothing by default).
    fn prepare_binary_home(_home: &Path) {}
}

/// A scripted model, the CLI's HOME pointing at it, a scratch dir, and an engine driving the
/// real CLI.
pub(super) struct World<A: Agent> {
    pub(super) model: ScriptedModel,
    pub(super) home: A::Home,
    scratch: TempDir,
    pub(super) engine: Engine,
    agent: PhantomData<A>,
}

impl<A: Agent> World<A> {
    /// Autonomy up to high, the run's confinement as configured by default.
    pub(super) async fn new(script: Value) -> World<A> {
        World::capped(script, Autonomy::High).await
    }

    /// With the server's `max_autonomy` at `max_autonomy`.
    pub(super) async fn capped(script: Value, max_autonomy: Autonomy) -> World<A> {
        World::configured(script, max_autonomy, SandboxMode::Auto).await
    }

    /// With `dirs` writable to its runs besides the repository (`sandbox_writable`): where a
    /// test's commands leave what the test reads (pid files).
    pub(super) async fn granting(script: Value, dirs: &[&Path]) -> World<A> {
        let mut w = World::new(script).await;
        let mut cfg = w.engine.config().clone();
        cfg.sandbox_writable
            .extend(dirs.iter().map(|d| d.to_path_buf()));
        w.engine = Engine::new(cfg);
        w
    }

    /// With `max_autonomy` and the run's confinement `sandbox`.
    pub(super) async fn configured(
        script: Value,
        max_autonomy: Autonomy,
        sandbox: SandboxMode,
    ) -> World<A> {
        let model = ScriptedModel::start(script).await.unwrap();
        let home = A::home(&model);
        let scratch = TempDir::new(&format!("{}-scratch", A::PROVIDER.as_str())).unwrap();
        let mut env = A::env(&home, &model);
        env.extend(A::tag_env(&tag_of(&scratch)));
        let mut cfg = agent_config(A::PROVIDER, env, scratch.path(), max_autonomy);
        cfg.sandbox = sandbox;
        World {
            model,
            home,
            engine: Engine::new(cfg),
            scratch,
            agent: PhantomData,
        }
    }

    /// The value [`Agent::tag_env`] marks this world's runs with (unique per world).
    pub(super) fn tag(&self) -> String {
        tag_of(&self.scratch)
    }

    /// The HOME directory.
    pub(super) fn home_path(&self) -> &Path {
        A::home_path(&self.home)
    }

    /// A request for `repo` run by this CLI, with `extra` fields.
    pub(super) fn request(&self, repo: &Path, objective: &str, extra: Value) -> Value {
        agent_request::<A>(repo, objective, extra)
    }

    /// The agent's requests to the model so far ([`Agent::turns`]).
    pub(super) fn turns(&self) -> Vec<Value> {
        A::turns(&self.model)
    }

    /// The conversation text of each of the agent's requests so far, in order.
    pub(super) fn sent(&self) -> Vec<String> {
        self.turns().iter().map(A::sent).collect()
    }
}

/// A scratch directory's name: unique, so it tags one world.
fn tag_of(scratch: &TempDir) -> String {
    scratch
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned()
}

/// An engine configuration running `provider`'s real CLI with exactly `env`: any repo_root
/// allowed, autonomy up to `max_autonomy`, a 60 s default timeout, verification on, the run's
/// confinement as configured by default.
pub(super) fn agent_config(
    provider: ProviderId,
    env: Vec<(OsString, OsString)>,
    scratch: &Path,
    max_autonomy: Autonomy,
) -> EngineConfig {
    let mut cfg = engine_config(None, env, scratch);
    cfg.agents = vec![AgentProgram {
        provider,
        program: Some(agent_cli(provider.as_str())),
        source: "test".into(),
    }];
    cfg.max_autonomy = max_autonomy;
    cfg
}

/// A request for `repo` run by `A`: `provider`, then [`Agent::request_fields`], then `extra`.
pub(super) fn agent_request<A: Agent>(repo: &Path, objective: &str, extra: Value) -> Value {
    let mut r = request(repo, objective, A::request_fields());
    if let (Value::Object(base), Value::Object(more)) = (&mut r, extra) {
        base.extend(more);
    }
    r["provider"] = json!(A::PROVIDER.as_str());
    r
}

/// Per CLI, what the ground-truth run reports besides what every CLI reports.
pub(super) struct Edits {
    /// The highlights of the edited `a.txt` and of the created `new.txt`.
    pub(super) highlights: [&'static str; 2],
    /// The exit codes the agent reports for `echo passing` and `echo failing >&2; exit 3`.
    pub(super) exit_codes: [Option<i32>; 2],
}

/// The run every provider suite starts with. In a repository holding `a.txt` ("hello") and
/// `keep.txt`, the model (`script(repo)`) creates `new.txt` ("one\ntwo\n"), edits `a.txt` to
/// "hello world", runs `echo passing` and `echo failing >&2; exit 3`, and answers; the request
/// (with `extra`) names `task_id` and two suggested commands, the second failing. The files, the
/// commands and the verification come from ground truth: partial, one `test_failure`.
pub(super) async fn ground_truth<A: Agent>(
    script: impl FnOnce(&Path) -> Value,
    task_id: &str,
    extra: Value,
    edits: Edits,
) -> (World<A>, Ran) {
    let repo = git_repo(&[("a.txt", "hello\n"), ("keep.txt", "untouched\n")]);
    let w = World::<A>::new(script(repo.path())).await;
    let mut extra = extra;
    extra["task_id"] = json!(task_id);
    extra["suggested_commands"] = json!(["test -f new.txt", "grep -q nope a.txt"]);
    let ran = run(
        &w.engine,
        &w.request(repo.path(), "Create new.txt and edit a.txt", extra),
    )
    .await;
    let res = &ran.result;
    let [edited, created] = edits.highlights;
    assert_eq!(
        res.files_changed,
        vec![
            FileChange {
                path: "a.txt".into(),
                change_type: ChangeType::Modified,
                old_path: None,
                highlights: vec![edited.into()],
                lines_added: Some(1),
                lines_removed: Some(1),
            },
            FileChange {
                path: "new.txt".into(),
                change_type: ChangeType::Added,
                old_path: None,
                highlights: vec![created.into()],
                lines_added: Some(2),
                lines_removed: Some(0),
            },
        ],
        "{res:#?}"
    );
    let [passing, failing] = edits.exit_codes;
    assert_eq!(
        ran.commands(),
        vec![
            ("agent", "echo passing".to_owned(), passing),
            ("agent", "echo failing >&2; exit 3".to_owned(), failing),
            ("verify", "test -f new.txt".to_owned(), Some(0)),
            ("verify", "grep -q nope a.txt".to_owned(), Some(1)),
        ]
    );
    assert_eq!(res.status, Status::Partial, "{res:#?}");
    assert_eq!(ran.issue_kinds(), vec!["test_failure"]);
    assert_eq!(res.tests.passed, Some(false));
    assert_eq!(res.task_id.as_deref(), Some(task_id));
    let agent = res.agent.as_ref().unwrap();
    assert_eq!(agent.provider, A::PROVIDER);
    assert_eq!(agent.version.as_deref(), Some(A::VERSION));
    assert!(res.session_id.is_some());
    (w, ran)
}

/// A model answering HTTP 400 with `message`: the run fails (or errs) with a `model_error`.
pub(super) async fn model_error<A: Agent>(message: &str) -> Ran {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::<A>::new(json!([{"status": 400, "error_message": message}])).await;
    let ran = run(
        &w.engine,
        &w.request(repo.path(), "Say something", json!({})),
    )
    .await;
    let res = &ran.result;
    assert!(
        matches!(res.status, Status::Failed | Status::Error),
        "{res:#?}"
    );
    assert!(ran.issue_kinds().contains(&"model_error"), "{res:#?}");
    ran
}

/// The command that starts a `setsid sleep` (its own session) and writes its pid to `pid_file`.
pub(super) fn leak_command(pid_file: &Path) -> String {
    format!(
        "setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > {}",
        pid_file.display()
    )
}

/// A world whose model starts a `setsid sleep` in turn 0 (its pid written to a file of a
/// directory the runs may write) and hangs forever in turn 1, and a repository to run in.
pub(super) struct Leak<A: Agent> {
    pub(super) world: World<A>,
    pub(super) repo: TempDir,
    /// Where the sleeper's pid is written.
    pub(super) pid_file: PathBuf,
    _fixture: TempDir,
}

impl<A: Agent> Leak<A> {
    /// `what` names the pid file (`<provider>-sleep-<what>.pid`).
    pub(super) async fn new(what: &str) -> Leak<A> {
        let repo = git_repo(&[("a.txt", "x\n")]);
        let name = A::PROVIDER.as_str();
        let fixture = TempDir::new(&format!("{name}-fixture")).unwrap();
        let pid_file = fixture.path().join(format!("{name}-sleep-{what}.pid"));
        let script = json!([A::shell(&leak_command(&pid_file)), {"hang": true}]);
        let world = World::granting(script, &[fixture.path()]).await;
        Leak {
            world,
            repo,
            pid_file,
            _fixture: fixture,
        }
    }

    /// The request starting the sleeper, with `extra` fields.
    pub(super) fn request(&self, extra: Value) -> Value {
        self.world
            .request(self.repo.path(), "Start a sleeper", extra)
    }

    /// Runs the request with `extra` to its timeout: `timeout`, one `timeout` issue.
    pub(super) async fn time_out(&self, extra: Value) -> Ran {
        let ran = run(&self.world.engine, &self.request(extra)).await;
        assert_eq!(ran.result.status, Status::Timeout, "{:#?}", ran.result);
        assert_eq!(ran.issue_kinds(), vec!["timeout"]);
        ran
    }

    /// Runs the request with `extra` while `trigger` (handed the run's cancellation) cancels
    /// it: `cancelled`, one `cancelled` issue. Returns what the trigger gave, and the run.
    pub(super) async fn cancel<T, F>(
        &self,
        extra: Value,
        trigger: impl FnOnce(CancellationToken) -> F,
    ) -> (T, Ran)
    where
        F: Future<Output = T>,
    {
        let cancel = CancellationToken::new();
        let request = self.request(extra);
        let (given, ran) = tokio::join!(
            trigger(cancel.clone()),
            run_with(&self.world.engine, &request, cancel)
        );
        assert_eq!(ran.result.status, Status::Cancelled, "{:#?}", ran.result);
        assert_eq!(ran.issue_kinds(), vec!["cancelled"]);
        (given, ran)
    }

    /// Waits up to `limit` for the sleeper's pid file and removes it.
    pub(super) async fn sleeper(&self, limit: Duration) -> i32 {
        let pid = read_pid_file(&self.pid_file, limit).await;
        let _ = std::fs::remove_file(&self.pid_file);
        pid
    }
}

/// A trigger for [`Leak::cancel`]: cancels once `pid_file` holds the sleeper's pid (waiting up
/// to a minute); gives that pid.
pub(super) async fn cancel_on_pid(pid_file: &Path, cancel: CancellationToken) -> i32 {
    let pid = read_pid_file(pid_file, Duration::from_secs(60)).await;
    cancel.cancel();
    pid
}

/// Neither the CLI `ran` started nor the `sleeper` it leaked outlives `limit`.
pub(super) async fn assert_gone<A: Agent>(ran: &Ran, sleeper: i32, limit: Duration) {
    assert!(
        wait_gone(ran.droid_pid(), limit).await,
        "{} survived",
        A::PROVIDER.as_str()
    );
    assert!(wait_gone(sleeper, limit).await, "the setsid sleep survived");
}

/// A first run (`first`, answered by the script), then a second (`second`) continuing its
/// session; `between` runs between the two. Both succeed, and the second keeps the first's
/// session id.
pub(super) async fn resumed<A: Agent>(
    w: &World<A>,
    repo: &Path,
    first: &str,
    second: &str,
    between: impl FnOnce(&World<A>),
) -> (Ran, Ran) {
    let one = run(&w.engine, &w.request(repo, first, json!({}))).await;
    assert_eq!(one.result.status, Status::Success, "{:#?}", one.result);
    let session = one.result.session_id.clone().expect("no session id");
    between(w);
    let two = run(
        &w.engine,
        &w.request(repo, second, json!({"session_id": session})),
    )
    .await;
    assert_eq!(two.result.status, Status::Success, "{:#?}", two.result);
    assert_eq!(two.result.session_id.as_deref(), Some(session.as_str()));
    (one, two)
}

/// A run continuing the session `id`, which the CLI does not know: a failure (or an error),
/// never a silent new session.
pub(super) async fn unknown_session<A: Agent>(w: &World<A>, repo: &Path, id: &str) -> Ran {
    let ran = run(
        &w.engine,
        &w.request(repo, "Continue", json!({"session_id": id})),
    )
    .await;
    assert!(
        matches!(ran.result.status, Status::Failed | Status::Error),
        "{:#?}",
        ran.result
    );
    ran
}

/// The model only claims (`claim`) to have created `done.txt` with every test passing; the
/// request (with `extra`) suggests `test -f done.txt`. Ground truth contradicts it: no file, the
/// test failed, never a success.
pub(super) async fn lying<A: Agent>(claim: &str, extra: Value) -> (World<A>, Ran) {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::<A>::new(json!([A::answer(claim)])).await;
    let mut extra = extra;
    extra["suggested_commands"] = json!(["test -f done.txt"]);
    let ran = run(&w.engine, &w.request(repo.path(), "Create done.txt", extra)).await;
    let res = &ran.result;
    assert!(
        matches!(res.status, Status::Partial | Status::Failed),
        "{res:#?}"
    );
    assert_eq!(res.files_changed, vec![]);
    assert_eq!(res.tests.passed, Some(false));
    assert!(ran.issue_kinds().contains(&"test_failure"), "{res:#?}");
    (w, ran)
}

/// A `read_only` run whose model (`script(repo)`) tries to write the files `made`: none is
/// there after, none is reported, and the refusal makes it partial with `permission_denied`.
pub(super) async fn read_only<A: Agent>(
    script: impl FnOnce(&Path) -> Value,
    made: &[&str],
) -> (World<A>, Ran) {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let r = repo.path();
    let w = World::<A>::new(script(r)).await;
    let ran = run(
        &w.engine,
        &w.request(r, "Write files", json!({"autonomy": "read_only"})),
    )
    .await;
    let res = &ran.result;
    for name in made {
        assert!(!r.join(name).exists(), "{name} was written: {res:#?}");
    }
    assert_eq!(res.files_changed, vec![], "{res:#?}");
    assert!(ran.issue_kinds().contains(&"permission_denied"), "{res:#?}");
    assert_eq!(res.status, Status::Partial, "{res:#?}");
    (w, ran)
}

/// A `reasoning_effort` the CLI cannot send is refused by name before the CLI starts: an
/// error, and the model never hears from it.
pub(super) async fn refused_effort<A: Agent>(effort: &str) -> Ran {
    let repo = git_repo(&[("a.txt", "x\n")]);
    let w = World::<A>::new(json!([A::answer("never")])).await;
    let ran = run(
        &w.engine,
        &w.request(repo.path(), "Think", json!({"reasoning_effort": effort})),
    )
    .await;
    assert_eq!(ran.result.status, Status::Error, "{:#?}", ran.result);
    assert!(
        ran.result
            .issues
            .iter()
            .any(|i| i.description.contains("reasoning_effort")),
        "{:#?}",
        ran.result
    );
    assert_eq!(
        w.turns(),
        Vec::<Value>::new(),
        "the CLI must not have started"
    );
    ran
}

/// One run through the `droid-executor` binary (its per-run supervisor, the CLI found through
/// `DROID_EXECUTOR_<CLI>_BIN`): in a repository inside the CLI's HOME (the binary's HOME, so an
/// allowed root), the model (`script(repo)`) creates `b.txt` ("b\n") and answers "Created
/// b.txt."; the request (with `extra`) suggests `test -f b.txt`. A success reporting the file
/// with `highlight`. Returns the model, the binary's output and its result.
pub(super) async fn through_the_binary<A: Agent>(
    script: impl FnOnce(&Path) -> Value,
    extra: Value,
    highlight: &str,
) -> (ScriptedModel, Out, ExecutionResult) {
    let model = ScriptedModel::start(json!([])).await.unwrap();
    let home = A::home(&model);
    let home_path = A::home_path(&home);
    let repo = home_path.join("repo");
    git_repo_at(&repo, &[("a.txt", "hello\n")]);
    model.set_script(script(&repo));
    A::prepare_binary_home(home_path);
    let mut extra = extra;
    extra["suggested_commands"] = json!(["test -f b.txt"]);
    let req = agent_request::<A>(&repo, "Create b.txt", extra);
    let req_file = home_path.join("request.json");
    std::fs::write(&req_file, req.to_string()).unwrap();
    let name = A::PROVIDER.as_str();
    let mut env = A::env(&home, &model);
    env.push((
        format!("DROID_EXECUTOR_{}_BIN", name.to_uppercase()).into(),
        agent_cli(name).into(),
    ));
    let args: Vec<OsString> = vec![
        "run".into(),
        "--json".into(),
        "--request".into(),
        req_file.into_os_string(),
    ];
    let out = droid_executor(&args, &env, home_path).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let res = out.result();
    assert_eq!(res.status, Status::Success, "{res:#?}");
    assert_eq!(
        res.files_changed,
        vec![FileChange {
            path: "b.txt".into(),
            change_type: ChangeType::Added,
            old_path: None,
            highlights: vec![highlight.into()],
            lines_added: Some(1),
            lines_removed: Some(0),
        }]
    );
    assert_eq!(res.tests.passed, Some(true));
    assert_eq!(res.summary, "Created b.txt.");
    (model, out, res)
}
