//! The world the ACP suites run in (`acp_node`, `acp_python`, and the agent's own suite): an
//! ACP agent (`droid-executor acp`, or droid's native `droid exec --output-format acp` for
//! comparison) running the REAL droid 0.225.2 against a [`ScriptedModel`], driven by a real
//! SDK client: `tests/interop/acp_node_client.mjs` on the npm `@agentclientprotocol/sdk` 2.4.0
//! or `tests/interop/acp_py_client.py` on the PyPI `agent-client-protocol` 0.12.1, installed by
//! `cargo xtask fetch-interop`. Each run goes through `tests/interop/acp_tee.py`, which records
//! every wire line; [`validate`] checks that transcript against the v1 JSON schema shipped in
//! the npm SDK (`tests/interop/acp_validate.py`).
//!
//! A client run prints one JSON summary line (see `tests/interop/acp/README.md`); [`AcpWorld::run`]
//! returns it parsed, with the transcript's path. Every process of a run carries
//! [`MARKER_VAR`] with a value no other run uses (the world's config passes it through to
//! droid, so droid and whatever its tools start carry it too), which is how [`no_survivors`]
//! checks, and on failure kills by pid, what a run left behind.
//!
//! Missing pieces (droid, the built binary, the SDKs, the venv) fail with the command that
//! installs them; nothing skips.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin};

use crate::droid_bin::{droid_executor_bin, real_droid, workspace_root};
use crate::droid_home::DroidHome;
use crate::procs::pids_with_env;
use crate::scripted_model::ScriptedModel;
use crate::temp_dir::TempDir;

/// Carried by every process of a run (client, tee, agent, droid, droid's tools).
pub const MARKER_VAR: &str = "ACP_INTEROP_RUN";
/// The npm project holding the TypeScript SDK, relative to the workspace root.
pub const NODE_ACP_DIR: &str = "target/interop/node-acp";
/// The TypeScript SDK's package and pinned version.
pub const NODE_SDK: (&str, &str) = ("@agentclientprotocol/sdk", "2.4.0");
/// The venv holding the Python SDK and `jsonschema`, relative to the workspace root.
pub const PY_ACP_VENV: &str = "target/interop/py-acp";
/// The Python SDK's distribution and pinned version.
pub const PY_SDK: (&str, &str) = ("agent_client_protocol", "0.12.1");
/// The v1 schema inside the npm SDK, relative to [`NODE_ACP_DIR`].
pub const SCHEMA: &str = "node_modules/@agentclientprotocol/sdk/schema/v1/schema.json";
/// How long one client run may take in all (the clients give up by themselves after
/// [`CLIENT_TIMEOUT`] and print their summary).
const RUN_LIMIT: Duration = Duration::from_secs(240);
/// The clients' own time limit (`--timeout`), seconds.
const CLIENT_TIMEOUT: u32 = 180;
/// How long a run's processes may take to go once the client has exited.
const EXIT_LIMIT: Duration = Duration::from_secs(15);
/// What the clients print while paused between two prompts (`--pause-after-first`).
const PAUSED: &str = "paused";

/// Which SDK client drives the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sdk {
    /// npm `@agentclientprotocol/sdk` 2.4.0 (`tests/interop/acp_node_client.mjs`).
    Node,
    /// PyPI `agent-client-protocol` 0.12.1 (`tests/interop/acp_py_client.py`).
    Python,
}

impl Sdk {
    /// Both, for suites that run a scenario with each.
    pub const ALL: [Sdk; 2] = [Sdk::Node, Sdk::Python];

    /// The program and its first arguments (the script), after checking the SDK is installed.
    ///
    /// # Panics
    /// When the SDK is not installed at its pinned version, with the install command.
    fn command(self) -> (PathBuf, Vec<OsString>) {
        let root = workspace_root();
        match self {
            Sdk::Node => {
                let manifest = root
                    .join(NODE_ACP_DIR)
                    .join("node_modules")
                    .join(NODE_SDK.0)
                    .join("package.json");
                let version = std::fs::read(&manifest)
                    .ok()
                    .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
                    .and_then(|m| m["version"].as_str().map(str::to_owned));
                assert_eq!(
                    version.as_deref(),
                    Some(NODE_SDK.1),
                    "npm {}@{} is not installed in {NODE_ACP_DIR}: run `cargo xtask \
                     fetch-interop` (looked at {})",
                    NODE_SDK.0,
                    NODE_SDK.1,
                    manifest.display()
                );
                (
                    PathBuf::from("node"),
                    vec![root.join("tests/interop/acp_node_client.mjs").into()],
                )
            }
            Sdk::Python => {
                let python = root.join(PY_ACP_VENV).join("bin/python");
                assert!(
                    python.is_file() && python_has_sdk(&root.join(PY_ACP_VENV)),
                    "the venv {PY_ACP_VENV} with agent-client-protocol=={} is missing: run \
                     `cargo xtask fetch-interop`",
                    PY_SDK.1
                );
                (
                    python,
                    vec![root.join("tests/interop/acp_py_client.py").into()],
                )
            }
        }
    }

    /// Its name in messages.
    pub fn name(self) -> &'static str {
        match self {
            Sdk::Node => "npm @agentclientprotocol/sdk 2.4.0",
            Sdk::Python => "PyPI agent-client-protocol 0.12.1",
        }
    }
}

/// Whether the venv has the pinned Python SDK (its `dist-info` directory).
fn python_has_sdk(venv: &Path) -> bool {
    let wanted = format!("{}-{}.dist-info", PY_SDK.0, PY_SDK.1);
    let Ok(libs) = std::fs::read_dir(venv.join("lib")) else {
        return false;
    };
    libs.flatten()
        .any(|lib| lib.path().join("site-packages").join(&wanted).is_dir())
}

/// The schema every transcript is validated against.
///
/// # Panics
/// When the npm SDK that ships it is not installed, with the install command.
pub fn schema() -> PathBuf {
    let path = workspace_root().join(NODE_ACP_DIR).join(SCHEMA);
    assert!(
        path.is_file(),
        "the ACP v1 schema {} is missing: run `cargo xtask fetch-interop` (it comes with npm {}@{})",
        path.display(),
        NODE_SDK.0,
        NODE_SDK.1
    );
    path
}

/// The agent a client starts: program, arguments and extra environment.
#[derive(Debug, Clone)]
pub struct Agent {
    /// The executable.
    pub program: PathBuf,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables added to the world's environment.
    pub env: Vec<(OsString, OsString)>,
}

impl Agent {
    /// `droid-executor acp` (the built binary) running the real droid.
    ///
    /// # Panics
    /// When the binary or droid is missing, with the command that provides it.
    pub fn executor() -> Agent {
        Agent {
            program: droid_executor_bin(),
            args: vec!["acp".into()],
            env: vec![("DROID_CLI_CMD".into(), real_droid().into())],
        }
    }

    /// droid's own ACP mode, `droid exec --output-format acp`: the comparison baseline.
    ///
    /// # Panics
    /// When droid is missing, with the install command.
    pub fn native() -> Agent {
        Agent {
            program: real_droid(),
            args: vec!["exec".into(), "--output-format".into(), "acp".into()],
            env: Vec::new(),
        }
    }

    /// This agent with `var=value` added to its environment.
    pub fn with_env(mut self, var: impl Into<OsString>, value: impl Into<OsString>) -> Agent {
        self.env.push((var.into(), value.into()));
        self
    }
}

/// One client run: the scenario and its flags (see the clients' usage).
#[derive(Debug, Clone)]
pub struct Scenario {
    name: String,
    cwd: PathBuf,
    flags: Vec<OsString>,
    stdin_driven: bool,
}

impl Scenario {
    /// Scenario `name` (`stream`, `tools-allow`, `reject`, `always`, `cancel`, `two-sessions`,
    /// `error`, `mode`, `load`) in `cwd`.
    pub fn new(name: &str, cwd: &Path) -> Scenario {
        Scenario {
            name: name.to_owned(),
            cwd: cwd.to_owned(),
            flags: Vec::new(),
            stdin_driven: false,
        }
    }

    fn flag(mut self, name: &str, value: impl AsRef<OsStr>) -> Scenario {
        self.flags.push(name.into());
        self.flags.push(value.as_ref().to_owned());
        self
    }

    /// `--model ID`: `session/set_config_option` of the model option (a value the session
    /// listed).
    pub fn model(self, id: &str) -> Scenario {
        self.flag("--model", id)
    }

    /// `--mode ID`: `session/set_mode` before the prompts (a mode the session listed).
    pub fn mode(self, id: &str) -> Scenario {
        self.flag("--mode", id)
    }

    /// `--prompt TEXT`.
    pub fn prompt(self, text: &str) -> Scenario {
        self.flag("--prompt", text)
    }

    /// `--second-prompt TEXT` (always, cancel, two-sessions).
    pub fn second_prompt(self, text: &str) -> Scenario {
        self.flag("--second-prompt", text)
    }

    /// `--verify CMD`: a verification command droid-executor runs after every turn of the
    /// session (`session/new` `_meta.droidExecutor.verify`); repeatable.
    pub fn verify(self, command: &str) -> Scenario {
        self.flag("--verify", command)
    }

    /// `--cwd2 DIR` (two-sessions).
    pub fn cwd2(self, dir: &Path) -> Scenario {
        self.flag("--cwd2", dir)
    }

    /// `--cancel-on stdin --pause-after-first`: the test says when to cancel
    /// ([`RunningClient::send`] `cancel`) and when to send the second prompt (`go`, after the
    /// client printed its `paused` line).
    pub fn driven(mut self) -> Scenario {
        self.flags.push("--cancel-on".into());
        self.flags.push("stdin".into());
        self.flags.push("--pause-after-first".into());
        self.stdin_driven = true;
        self
    }
}

/// What a finished client run gave.
#[derive(Debug)]
pub struct Run {
    /// The client's summary line, parsed.
    pub summary: Value,
    /// The transcript `acp_tee.py` wrote.
    pub log: PathBuf,
    /// The client's exit code.
    pub code: Option<i32>,
    /// Everything the client, the tee and the agent wrote to stderr.
    pub stderr: String,
    /// The run's [`MARKER_VAR`] value.
    pub marker: String,
}

impl Run {
    /// The summary's `ok`, asserted, with everything known on failure.
    ///
    /// # Panics
    /// When the client did not finish its scenario.
    pub fn assert_ok(&self) -> &Value {
        assert!(
            self.summary["ok"] == json!(true) && self.code == Some(0),
            "the client did not finish its scenario (exit {:?}):\n{:#}\n--- stderr\n{}",
            self.code,
            self.summary,
            self.stderr
        );
        &self.summary
    }
}

/// A scripted model, a droid HOME pointing at it (also the agent's HOME, with a config passing
/// [`MARKER_VAR`] through to droid), and a directory for the transcripts.
#[derive(Debug)]
pub struct AcpWorld {
    /// The scripted model; each test sets its script.
    pub model: ScriptedModel,
    /// droid's HOME (custom model `Mock`).
    pub home: DroidHome,
    logs: TempDir,
}

impl AcpWorld {
    /// A model with a placeholder script and its droid HOME.
    ///
    /// # Panics
    /// When the model cannot start or the HOME cannot be written.
    pub async fn new() -> AcpWorld {
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
        let logs = TempDir::new("acp-transcripts").unwrap_or_else(|e| panic!("temp dir: {e}"));
        AcpWorld { model, home, logs }
    }

    /// The scripted model's id as droid lists it (`custom:Mock-0`).
    pub fn model_id(&self) -> String {
        self.home.model_id("Mock")
    }

    /// A git repository `name` in the home, holding `a.txt` (`hello\n`), committed.
    ///
    /// # Panics
    /// When git fails.
    pub fn repo(&self, name: &str) -> PathBuf {
        let dir = self.home.path().join(name);
        std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        std::fs::write(dir.join("a.txt"), "hello\n").unwrap_or_else(|e| panic!("a.txt: {e}"));
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
        dir
    }

    /// Runs `scenario` with `sdk` against `agent` to its end; the summary and the transcript.
    ///
    /// # Panics
    /// When the client cannot start, prints no summary, or outlives [`RUN_LIMIT`].
    pub async fn run(&self, sdk: Sdk, agent: &Agent, scenario: &Scenario) -> Run {
        self.start(sdk, agent, scenario).finish().await
    }

    /// Starts `scenario` with `sdk` against `agent`; drive it with [`RunningClient`].
    ///
    /// # Panics
    /// When the client cannot start.
    pub fn start(&self, sdk: Sdk, agent: &Agent, scenario: &Scenario) -> RunningClient {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let marker = format!("{}-{n}", self.logs.path().display());
        let log = self
            .logs
            .path()
            .join(format!("{n}-{}-{:?}.jsonl", scenario.name, sdk).to_lowercase());
        let (program, mut args) = sdk.command();
        args.extend(
            [
                "--scenario".into(),
                OsString::from(&scenario.name),
                "--cwd".into(),
                scenario.cwd.clone().into(),
                "--log".into(),
                log.clone().into(),
                "--timeout".into(),
                CLIENT_TIMEOUT.to_string().into(),
            ]
            .into_iter()
            .chain(scenario.flags.iter().cloned())
            .chain(["--".into(), agent.program.clone().into()])
            .chain(agent.args.iter().cloned()),
        );
        let mut env = self.home.env();
        env.push((MARKER_VAR.into(), marker.clone().into()));
        env.push((
            "NODE_PATH".into(),
            workspace_root()
                .join(NODE_ACP_DIR)
                .join("node_modules")
                .into(),
        ));
        env.extend(agent.env.iter().cloned());
        RunningClient::spawn(&program, &args, &env, &scenario.cwd, log, marker, scenario)
    }
}

/// A client run in progress, in its own process group (killed on drop unless it finished).
#[derive(Debug)]
pub struct RunningClient {
    child: Child,
    pgid: Pid,
    stdin: Option<ChildStdin>,
    stdout: tokio::io::Lines<BufReader<tokio::process::ChildStdout>>,
    lines: Vec<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    deadline: Instant,
    log: PathBuf,
    marker: String,
    finished: bool,
}

impl RunningClient {
    #[allow(clippy::disallowed_methods)] // the suite runs third-party clients, not droid
    fn spawn(
        program: &Path,
        args: &[OsString],
        env: &[(OsString, OsString)],
        cwd: &Path,
        log: PathBuf,
        marker: String,
        scenario: &Scenario,
    ) -> RunningClient {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .process_group(0)
            .stdin(if scenario.stdin_driven {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", program.display()));
        let pid = child
            .id()
            .and_then(|id| i32::try_from(id).ok())
            .unwrap_or_else(|| panic!("{} has no pid", program.display()));
        let stdin = child.stdin.take();
        let Some(out) = child.stdout.take() else {
            panic!("no stdout pipe");
        };
        let Some(mut pipe) = child.stderr.take() else {
            panic!("no stderr pipe");
        };
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&stderr);
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend_from_slice(&buf[..n]);
            }
        });
        RunningClient {
            child,
            pgid: Pid::from_raw(pid),
            stdin,
            stdout: BufReader::new(out).lines(),
            lines: Vec::new(),
            stderr,
            deadline: Instant::now() + RUN_LIMIT,
            log,
            marker,
            finished: false,
        }
    }

    /// The run's [`MARKER_VAR`] value.
    pub fn marker(&self) -> &str {
        &self.marker
    }

    /// The transcript being written.
    pub fn log(&self) -> &Path {
        &self.log
    }

    /// The client's pid (also its process group).
    pub fn pid(&self) -> i32 {
        self.pgid.as_raw()
    }

    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap_or_else(PoisonError::into_inner))
            .into_owned()
    }

    /// Sends a command line (`cancel`, `go`) to a [`Scenario::driven`] client.
    ///
    /// # Panics
    /// When the scenario is not driven or the client has gone.
    pub async fn send(&mut self, word: &str) {
        let Some(stdin) = self.stdin.as_mut() else {
            panic!("the scenario is not driven (Scenario::driven)");
        };
        let sent = async {
            stdin.write_all(format!("{word}\n").as_bytes()).await?;
            stdin.flush().await
        };
        if let Err(e) = sent.await {
            panic!(
                "could not send {word:?} to the client: {e}\n{}",
                self.stderr()
            );
        }
    }

    /// Waits for the client's `paused` line (after the first prompt of a driven scenario);
    /// what it says (`{"stopReason": …}`).
    ///
    /// # Panics
    /// When the client prints something else, ends, or takes longer than [`RUN_LIMIT`].
    pub async fn paused(&mut self) -> Value {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let line = match tokio::time::timeout(left, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            other => panic!(
                "the client did not pause ({other:?})\n{}\n--- stderr\n{}",
                self.lines.join("\n"),
                self.stderr()
            ),
        };
        self.lines.push(line.clone());
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\n{}", self.stderr()));
        let Some(paused) = value.get(PAUSED) else {
            panic!(
                "expected the paused line, got {value:#}\n--- stderr\n{}",
                self.stderr()
            );
        };
        paused.clone()
    }

    /// Waits for the client to exit (closing its stdin first); its summary and transcript.
    ///
    /// # Panics
    /// When it prints no summary or outlives [`RUN_LIMIT`].
    pub async fn finish(mut self) -> Run {
        self.stdin = None;
        let left = self.deadline.saturating_duration_since(Instant::now());
        let mut rest = Vec::new();
        let read = async {
            while let Ok(Some(line)) = self.stdout.next_line().await {
                rest.push(line);
            }
            self.child.wait().await
        };
        let status = match tokio::time::timeout(left, read).await {
            Ok(Ok(status)) => status,
            Ok(Err(e)) => panic!("waiting for the client: {e}"),
            Err(_) => panic!(
                "the client did not exit within {RUN_LIMIT:?}\n{}\n--- stderr\n{}",
                self.lines.join("\n"),
                self.stderr()
            ),
        };
        self.finished = true;
        self.lines.extend(rest);
        let stderr = self.stderr();
        let Some(last) = self.lines.last() else {
            panic!("the client printed no summary (exit {status})\n--- stderr\n{stderr}");
        };
        let summary: Value = serde_json::from_str(last).unwrap_or_else(|e| {
            panic!("the client's last line is not JSON ({e}): {last}\n--- stderr\n{stderr}")
        });
        Run {
            summary,
            log: self.log.clone(),
            code: status.code(),
            stderr,
            marker: self.marker.clone(),
        }
    }
}

impl Drop for RunningClient {
    fn drop(&mut self) {
        // a failed test: the client and whatever it started in its group; the agent's own
        // children are ended by the agent (its stdin closes) or found by no_survivors
        if !self.finished {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}

/// Runs the validator on `logs`: its JSON report (`{"files": [{"path", "passed", "failed",
/// "violations": […]}]}`) and exit code.
///
/// # Panics
/// When the venv or the schema is missing (with the install command) or the validator fails
/// to run.
pub fn validation_report(logs: &[&Path]) -> (Value, Option<i32>) {
    let root = workspace_root();
    let python = root.join(PY_ACP_VENV).join("bin/python");
    assert!(
        python.is_file(),
        "{} is missing: run `cargo xtask fetch-interop` (the validator needs jsonschema there)",
        python.display()
    );
    #[allow(clippy::disallowed_methods)] // the validator script, not droid
    let out = std::process::Command::new(&python)
        .arg(root.join("tests/interop/acp_validate.py"))
        .arg("--json")
        .arg(schema())
        .args(logs)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("could not run the validator: {e}"));
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "the validator printed no JSON report ({e}): {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (report, out.status.code())
}

/// Asserts that every line of the transcript `log` is a valid ACP v1 message (zero schema
/// violations, at least one message); returns how many passed.
///
/// # Panics
/// When the transcript has a violation, listing each.
pub fn validate(log: &Path) -> u64 {
    let (report, code) = validation_report(&[log]);
    let file = &report["files"][0];
    let passed = file["passed"].as_u64().unwrap_or(0);
    assert!(
        code == Some(0) && file["failed"] == json!(0) && passed > 0,
        "{} breaks the ACP v1 schema:\n{:#}\n--- transcript\n{}",
        log.display(),
        file["violations"],
        std::fs::read_to_string(log).unwrap_or_default()
    );
    passed
}

/// The wire messages of a transcript, in order: `(dir, message)` with `dir` `c2a` or `a2c`.
///
/// # Panics
/// When the transcript cannot be read or a line is not a tee record holding JSON.
pub fn transcript(log: &Path) -> Vec<(String, Value)> {
    let text = std::fs::read_to_string(log).unwrap_or_else(|e| panic!("{}: {e}", log.display()));
    text.lines()
        .map(|l| {
            let rec: Value = serde_json::from_str(l)
                .unwrap_or_else(|e| panic!("{}: not a tee record ({e}): {l}", log.display()));
            let line = rec["line"].as_str().unwrap_or_default();
            let msg = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}: not JSON ({e}): {line}", log.display()));
            (rec["dir"].as_str().unwrap_or_default().to_owned(), msg)
        })
        .collect()
}

/// Live processes of the run `marker` whose program (`argv[0]`, compared by file name) is
/// `program`'s file name: e.g. `sleep` for a sleep a droid tool started, or the agent's binary.
pub fn marked_processes(marker: &str, program: &str) -> Vec<i32> {
    let name =
        |p: &[u8]| -> Vec<u8> { p.rsplit(|b| *b == b'/').next().unwrap_or_default().to_vec() };
    let wanted = name(program.as_bytes());
    pids_with_env(MARKER_VAR, marker)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| {
                c.split(|b| *b == 0)
                    .next()
                    .is_some_and(|argv0| name(argv0) == wanted)
            })
        })
        .collect()
}

/// Waits until no process carries `MARKER_VAR=marker`, failing (after killing them, by pid)
/// when some are still there after [`EXIT_LIMIT`].
///
/// # Panics
/// When a process of the run outlived it.
pub async fn no_survivors(marker: &str) {
    crate::procs::no_survivors_of(MARKER_VAR, marker, EXIT_LIMIT, "the run").await;
}
