//! Helpers shared by the end-to-end suites: an engine wired to the real (or fake) droid, git
//! repositories in temp dirs, and running a request while collecting its events.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::{Autonomy, CommandSource, ExecutionResult};
use droid_exec::{EVENT_CHANNEL_CAPACITY, Engine, EngineConfig, RunEvent};
use serde_json::Value;
use tests::temp_dir::TempDir;
use tokio_util::sync::CancellationToken;

/// Every run in the suites is bounded by this, well above any max_runtime a test sets.
pub(super) const RUN_LIMIT: Duration = Duration::from_secs(120);

/// An engine driving `droid` with exactly `env`, any repo_root allowed, autonomy up to high.
pub(super) fn engine(droid: PathBuf, env: Vec<(OsString, OsString)>, scratch: &Path) -> Engine {
    Engine::new(engine_config(Some(droid), env, scratch))
}

/// The suites' engine configuration: `droid_bin` as given, no other agent CLI, exactly `env`,
/// any repo_root allowed, autonomy up to high, a 60 s default timeout, verification on, the
/// run's confinement as configured by default, scratch directories under `scratch`, no task
/// store. A suite changes what its test is about.
pub(super) fn engine_config(
    droid_bin: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
    scratch: &Path,
) -> EngineConfig {
    EngineConfig {
        droid_bin,
        droid_source: "test".into(),
        droid_warnings: Vec::new(),
        agents: Vec::new(),
        env,
        allowed_roots: Vec::new(),
        max_autonomy: Autonomy::High,
        default_timeout: Duration::from_secs(60),
        default_model: None,
        verify: true,
        sandbox: Default::default(),
        sandbox_writable: Vec::new(),
        excerpt_bytes: 4096,
        kill_grace: Duration::from_secs(5),
        scratch_root: scratch.to_path_buf(),
        store_dir: None,
        max_concurrent: 4,
        task_ttl: Duration::from_secs(24 * 3600),
        supervisor: None,
        cgroups: true,
        limits: Default::default(),
        redact: Vec::new(),
        worktrees: Default::default(),
        client_env: Default::default(),
    }
}

/// A git repository with `files` committed, in a temp dir.
pub(super) fn git_repo(files: &[(&str, &str)]) -> TempDir {
    let dir = TempDir::new("e2e-repo").unwrap();
    for (name, content) in files {
        let p = dir.path().join(name);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }
    git(dir.path(), &["init", "-q"]);
    git(dir.path(), &["add", "-A"]);
    git(dir.path(), &["commit", "-qm", "initial", "--allow-empty"]);
    dir
}

/// Run git in `dir` with a fixed identity; panics with its stderr on failure.
#[allow(clippy::disallowed_methods)] // test set-up runs git directly
pub(super) fn git(dir: &Path, args: &[&str]) -> String {
    let out = std::process::Command::new("git")
        .args([
            "-c",
            "user.name=test",
            "-c",
            "user.email=test@example.invalid",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A request for `repo` with `extra` fields merged in.
pub(super) fn request(repo: &Path, objective: &str, extra: Value) -> Value {
    let mut v = serde_json::json!({
        "objective": objective,
        "context": {"repo_root": repo.display().to_string()},
    });
    if let (Value::Object(base), Value::Object(more)) = (&mut v, extra) {
        base.extend(more);
    }
    v
}

/// What a run produced: its result and every event published.
pub(super) struct Ran {
    pub result: ExecutionResult,
    pub events: Vec<RunEvent>,
    pub elapsed: Duration,
}

impl Ran {
    /// The pid droid was started with.
    pub(super) fn droid_pid(&self) -> i32 {
        self.events
            .iter()
            .find_map(|e| match e {
                RunEvent::Started { pid, .. } => i32::try_from(*pid).ok(),
                _ => None,
            })
            .expect("no Started event")
    }

    /// The issue types, in order.
    pub(super) fn issue_kinds(&self) -> Vec<&'static str> {
        self.result.issues.iter().map(|i| i.kind.as_str()).collect()
    }

    /// (source, command, exit code) of every command.
    pub(super) fn commands(&self) -> Vec<(&'static str, String, Option<i32>)> {
        self.result
            .commands_run
            .iter()
            .map(|c| {
                let who = match c.source {
                    CommandSource::Agent => "agent",
                    CommandSource::Verify => "verify",
                    CommandSource::Setup => "setup",
                };
                (who, c.command.clone(), c.exit_code)
            })
            .collect()
    }
}

/// Run `request` on `engine`, collecting events; `cancel` may be triggered by the caller.
pub(super) async fn run_with(engine: &Engine, request: &Value, cancel: CancellationToken) -> Ran {
    let (tx, mut rx) = tokio::sync::mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let collector = tokio::spawn(async move {
        let mut all = Vec::new();
        while let Some(e) = rx.recv().await {
            all.push(e);
        }
        all
    });
    let started = std::time::Instant::now();
    let result = tokio::time::timeout(RUN_LIMIT, engine.execute(request, cancel, Some(tx)))
        .await
        .expect("the run did not end within the suite's limit");
    let elapsed = started.elapsed();
    let events = tokio::time::timeout(Duration::from_secs(5), collector)
        .await
        .expect("event stream did not end")
        .unwrap();
    Ran {
        result,
        events,
        elapsed,
    }
}

/// Run `request` to its end.
pub(super) async fn run(engine: &Engine, request: &Value) -> Ran {
    run_with(engine, request, CancellationToken::new()).await
}

/// Poll until `path` exists and holds a pid.
pub(super) async fn read_pid_file(path: &Path, timeout: Duration) -> i32 {
    let until = tokio::time::Instant::now() + timeout;
    loop {
        if let Ok(s) = std::fs::read_to_string(path)
            && let Ok(pid) = s.trim().parse::<i32>()
        {
            return pid;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{} never held a pid",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A `PATH` whose first directory (made under `dir`) holds a `git` that passes as git 2.30.2:
/// `--version` says so, and `rev-parse --path-format=absolute …` prints the option back before
/// the rest of its answer, as git before 2.31 does with an option it does not know; everything
/// else runs the real git (found on this process's `PATH`, which follows).
pub(super) fn path_with_old_git(dir: &Path) -> OsString {
    use std::os::unix::fs::PermissionsExt as _;
    let path = std::env::var_os("PATH").unwrap_or_default();
    let real = std::env::split_paths(&path)
        .map(|d| d.join("git"))
        .find(|g| g.is_file())
        .expect("git is not installed (apt-get install git)");
    let bin = dir.join("old-git-bin");
    std::fs::create_dir_all(&bin).unwrap();
    let script = format!(
        r#"#!/bin/sh
real='{}'
for a in "$@"; do
  if [ "$a" = "--version" ]; then echo "git version 2.30.2"; exit 0; fi
done
unknown=no
for a in "$@"; do
  shift
  if [ "$a" = "--path-format=absolute" ]; then unknown=yes; else set -- "$@" "$a"; fi
done
if [ "$unknown" = yes ]; then
  out=$("$real" "$@") || exit $?
  printf '%s\n%s\n' "--path-format=absolute" "$out"
  exit 0
fi
exec "$real" "$@"
"#,
        real.display()
    );
    let git = bin.join("git");
    std::fs::write(&git, script).unwrap();
    std::fs::set_permissions(&git, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut dirs = vec![bin];
    dirs.extend(std::env::split_paths(&path));
    std::env::join_paths(dirs).unwrap()
}
