//! `droid-executor mcp` driven by a real client: the official Python SDK (`mcp` on PyPI, 2.3.0 and
//! 1.30.0, in the venvs `cargo xtask fetch-interop` makes under `target/interop/`) runs
//! `tests/interop/mcp_py_client.py` against the built binary, with the fake droid.
//!
//! The fake droid plays one scenario per server process, so each SDK version gets two sessions:
//! one that uses every tool with a droid that succeeds, and one (`MCP_TEST_ONLY_CANCEL=1`) that
//! abandons a call to a droid that hangs. The script checks the answers step by step; this suite
//! checks that it got through every step, with the right SDK, and that no process of either
//! session outlives the client (stdin EOF cancels everything). A missing venv fails the test with
//! the install command; it never skips.

use std::ffi::OsString;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::json;
use tests::droid_bin::{droid_executor_bin, workspace_root};
use tests::fake_droid::SCENARIO_ENV;
use tests::procs::pids_with_env;

use super::binary::{FakeHome, path_var};

/// The client script, relative to the workspace root.
const SCRIPT: &str = "tests/interop/mcp_py_client.py";
/// One whole session of the script (its own steps are bounded at 90 s each; `droid_pend` waits
/// up to 60 s).
const SESSION_LIMIT: Duration = Duration::from_secs(180);
/// How long the session's processes may take to go once the client has exited (the server exits
/// within 2 s of stdin EOF, and kills its runs first).
const EXIT_LIMIT: Duration = Duration::from_secs(10);
/// Passed through to droid (config `env_passthrough`), so every process of a session carries it:
/// the client, the server, task supervisors and the fake droid.
const MARKER_VAR: &str = "MCP_PYTHON_SESSION";

/// Steps the script reports for a session using every tool, in order.
const ALL_STEPS: &[&str] = &[
    "initialize",
    "ping",
    "tools/list",
    "droid_ping",
    "execute_droid_task",
    "execute_droid_task invalid",
    "unknown tool",
    "droid_submit + droid_pend",
    "ping again",
];
/// Steps the script reports for the cancellation session, in order.
const CANCEL_STEPS: &[&str] = &["initialize", "cancel", "ping again"];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_2_3_0_uses_every_tool_and_cancels() {
    sdk_sessions("py-mcp2", "2.3.0").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn python_sdk_1_30_0_uses_every_tool_and_cancels() {
    sdk_sessions("py-mcp1", "1.30.0").await;
}

/// Both sessions with the SDK in `target/interop/<venv>`, which must hold `mcp==version`.
async fn sdk_sessions(venv: &str, version: &str) {
    let python = workspace_root()
        .join("target/interop")
        .join(venv)
        .join("bin/python");
    assert!(
        python.is_file(),
        "the Python MCP SDK (mcp {version}) is not installed: run `cargo xtask fetch-interop` \
         (cargo xtask test does); looked for {}",
        python.display()
    );
    let home = Home::new();
    let request = json!({
        "objective": "Say done.",
        "context": {"repo_root": home.repo()},
        "max_runtime_seconds": 60,
    });
    let hang_request = json!({
        "objective": "Hang until cancelled.",
        "context": {"repo_root": home.repo()},
        "max_runtime_seconds": 60,
    });

    let ok = home.scenario("ok", &json!([{"sleep_ms": 200}, {"completion": "Done."}]));
    let marker = format!("{}-all", home.path().display());
    let vars = [("MCP_TEST_REQUEST", request.to_string())];
    let stdout = home.session(&python, &ok, &marker, &vars).await;
    assert_eq!(steps(&stdout, version), ALL_STEPS, "{stdout}");
    no_survivors(&marker).await;

    let hang = home.scenario("hang", &json!([{"hang": true}]));
    let marker = format!("{}-cancel", home.path().display());
    let vars = [
        ("MCP_TEST_ONLY_CANCEL", "1".to_owned()),
        ("MCP_TEST_HANG_REQUEST", hang_request.to_string()),
    ];
    let stdout = home.session(&python, &hang, &marker, &vars).await;
    assert_eq!(steps(&stdout, version), CANCEL_STEPS, "{stdout}");
    no_survivors(&marker).await;
}

/// The fake droid's HOME, passing the session marker through as well.
struct Home(FakeHome);

impl std::ops::Deref for Home {
    type Target = FakeHome;
    fn deref(&self) -> &FakeHome {
        &self.0
    }
}

impl Home {
    fn new() -> Home {
        Home(FakeHome::new("mcp-python", &[MARKER_VAR]))
    }

    /// Runs the script with exactly this environment plus `vars`, the server being
    /// `droid-executor mcp`; its stdout once it exited 0 with `ALL OK`, else panics with
    /// everything it printed.
    #[allow(clippy::disallowed_methods)] // the suite runs a third-party client, not droid
    async fn session(
        &self,
        python: &Path,
        scenario: &Path,
        marker: &str,
        vars: &[(&str, String)],
    ) -> String {
        let env: Vec<(OsString, OsString)> = vec![
            ("HOME".into(), self.path().into()),
            ("PATH".into(), path_var()),
            ("DROID_CLI_CMD".into(), tests::fake_droid_bin!().into()),
            (SCENARIO_ENV.into(), scenario.into()),
            (MARKER_VAR.into(), marker.into()),
        ];
        let child = tokio::process::Command::new(python)
            .arg(workspace_root().join(SCRIPT))
            .arg(droid_executor_bin())
            .arg("mcp")
            .env_clear()
            .envs(env)
            .envs(vars.iter().map(|(k, v)| (k, v)))
            .current_dir(self.path())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let out = tokio::time::timeout(SESSION_LIMIT, child.wait_with_output())
            .await
            .unwrap_or_else(|_| panic!("{SCRIPT} did not finish within {SESSION_LIMIT:?}"))
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success() && stdout.ends_with("\nALL OK\n"),
            "{SCRIPT} ({}) failed: {}\n--- stdout\n{stdout}--- stderr\n{stderr}",
            python.display(),
            out.status
        );
        stdout
    }
}

/// The steps the script reports as passed (`ok <step>: …` lines), after checking that it ran
/// with `mcp` `version`.
fn steps<'a>(stdout: &'a str, version: &str) -> Vec<&'a str> {
    assert_eq!(
        stdout.lines().next(),
        Some(format!("sdk: mcp {version}").as_str()),
        "{stdout}"
    );
    stdout
        .lines()
        .filter_map(|line| line.strip_prefix("ok ")?.split_once(": "))
        .map(|(step, _)| step)
        .collect()
}

/// Waits until no process carries `MARKER_VAR=marker`, failing after [`EXIT_LIMIT`].
async fn no_survivors(marker: &str) {
    let until = tokio::time::Instant::now() + EXIT_LIMIT;
    loop {
        let pids = pids_with_env(MARKER_VAR, marker);
        if pids.is_empty() {
            return;
        }
        if tokio::time::Instant::now() >= until {
            let commands: Vec<String> = pids
                .iter()
                .map(|pid| {
                    let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                    format!(
                        "{pid}: {}",
                        String::from_utf8_lossy(&cmdline).replace('\0', " ")
                    )
                })
                .collect();
            panic!(
                "processes of the session outlived the client by {EXIT_LIMIT:?}:\n{}",
                commands.join("\n")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
