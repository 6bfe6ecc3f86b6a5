//! Running the built `droid-executor` binary in the suites: an empty environment plus exactly
//! what each test gives, output captured, every run under a time limit.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use droid_contract::ExecutionResult;
use serde_json::{Value, json};
use tests::droid_bin::droid_executor_bin;
use tests::fake_droid::SCENARIO_ENV;
use tests::temp_dir::TempDir;
use tokio::process::Child;

use super::common::git;

/// Any one run of the binary; the real droid against a local model takes about a second (a
/// `tasks wait --timeout 90` must fit).
pub(super) const CLI_LIMIT: Duration = Duration::from_secs(120);
/// A `PATH` without droid on it.
pub(super) const NO_DROID_PATH: &str = "/usr/bin:/bin";

/// `droid-executor ARGS` with exactly `env`, in `cwd`, stdin from /dev/null, output piped.
#[allow(clippy::disallowed_methods)] // the suite runs the binary it tests
pub(super) fn command<S: AsRef<OsStr>>(
    args: &[S],
    env: &[(OsString, OsString)],
    cwd: &Path,
) -> tokio::process::Command {
    let mut cmd = tokio::process::Command::new(droid_executor_bin());
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    cmd
}

/// What one run of the binary gave.
#[derive(Debug)]
pub(super) struct Out {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Out {
    /// stdout as an ExecutionResult.
    pub(super) fn result(&self) -> ExecutionResult {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| {
            panic!(
                "stdout is not an ExecutionResult ({e}):\n{}\nstderr:\n{}",
                self.stdout, self.stderr
            )
        })
    }

    pub(super) fn issue_kinds(&self) -> Vec<&'static str> {
        self.result()
            .issues
            .iter()
            .map(|i| i.kind.as_str())
            .collect()
    }
}

pub(super) async fn finish(child: Child) -> Out {
    let out = tokio::time::timeout(CLI_LIMIT, child.wait_with_output())
        .await
        .expect("droid-executor did not finish")
        .unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
    }
}

pub(super) async fn droid_executor<S: AsRef<OsStr>>(
    args: &[S],
    env: &[(OsString, OsString)],
    cwd: &Path,
) -> Out {
    finish(command(args, env, cwd).spawn().unwrap()).await
}

/// A git repository at `dir` with `files` committed.
pub(super) fn git_repo_at(dir: &Path, files: &[(&str, &str)]) {
    std::fs::create_dir_all(dir).unwrap();
    for (name, content) in files {
        std::fs::write(dir.join(name), content).unwrap();
    }
    git(dir, &["init", "-q"]);
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-qm", "initial", "--allow-empty"]);
}

pub(super) fn path_var() -> OsString {
    std::env::var_os("PATH").unwrap_or_else(|| NO_DROID_PATH.into())
}

/// The directory of a [`FakeHome`] its runs may write (`sandbox_writable`).
const FIXTURE_DIR: &str = "fixture";

/// A HOME for the binary driving the fake droid: a git repository `repo/` (one file, `a.txt`), a
/// config passing the fake droid's scenario variable (and `extra` names) through to droid, and
/// the scenario file `scenario.json` beside the repository, never in it. What the fake droid
/// writes for the test (its record, pid files) goes to [`FakeHome::fixture`], the one directory
/// besides the repository the config grants runs (`sandbox_writable`).
pub(super) struct FakeHome {
    dir: TempDir,
}

impl FakeHome {
    /// A new HOME in a temp dir named after `prefix`.
    pub(super) fn new(prefix: &str, extra: &[&str]) -> FakeHome {
        let dir = TempDir::new(prefix).unwrap();
        let config = dir.path().join(".config/droid-executor");
        std::fs::create_dir_all(&config).unwrap();
        let fixture = dir.path().join(FIXTURE_DIR);
        std::fs::create_dir_all(&fixture).unwrap();
        let names: Vec<String> = std::iter::once(SCENARIO_ENV)
            .chain(extra.iter().copied())
            .map(|n| format!("\"{n}\""))
            .collect();
        std::fs::write(
            config.join("config.toml"),
            format!(
                "env_passthrough = [{}]\nsandbox_writable = [\"{}\"]\n",
                names.join(", "),
                fixture.display()
            ),
        )
        .unwrap();
        git_repo_at(&dir.path().join("repo"), &[("a.txt", "a\n")]);
        FakeHome { dir }
    }

    /// The HOME directory.
    pub(super) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// A path in HOME, outside the repository.
    pub(super) fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    /// A path in the directory runs may write besides the repository: where the fake droid
    /// leaves what the test reads (its record, pid files).
    pub(super) fn fixture(&self, name: &str) -> PathBuf {
        self.dir.path().join(FIXTURE_DIR).join(name)
    }

    /// The repository.
    pub(super) fn repo(&self) -> PathBuf {
        self.dir.path().join("repo")
    }

    /// Write the scenario file `<name>.json`; its path.
    pub(super) fn scenario(&self, name: &str, steps: &Value) -> PathBuf {
        let path = self.file(&format!("{name}.json"));
        std::fs::write(&path, json!({ "steps": steps }).to_string()).unwrap();
        path
    }

    /// Make `steps` the scenario `env` names.
    pub(super) fn play(&self, steps: &Value) {
        self.scenario("scenario", steps);
    }

    /// HOME, PATH, `DROID_CLI_CMD` = the fake droid, and its scenario variable.
    pub(super) fn env(&self) -> Vec<(OsString, OsString)> {
        vec![
            ("HOME".into(), self.dir.path().into()),
            ("PATH".into(), path_var()),
            ("DROID_CLI_CMD".into(), tests::fake_droid_bin!().into()),
            (SCENARIO_ENV.into(), self.file("scenario.json").into()),
        ]
    }
}
