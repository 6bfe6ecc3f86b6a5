//! The fault matrix's harness: drive one request through a front-end (the CLI, the HTTP bridge or
//! the MCP server, each a real `droid-executor` process) while a fault is injected, and write down
//! what was observed.
//!
//! Each fault test ends with [`record`], which appends one JSON line per front-end it drove to the
//! file named by `DROID_EXECUTOR_FAULT_LOG` (when set): the test's own name, the front-end, which
//! droid (fake or real), the status and issue types of the result, how many results came back,
//! the front-end's peak RSS and how many processes of the run were left. `cargo xtask reliability`
//! runs the fault suites with that variable set and turns the lines into the table of
//! `docs/reliability.md`, so the document says what the tests saw, under the tests' names.
//!
//! Processes left are counted through a session variable passed through to droid (config
//! `env_passthrough`): every process a run starts carries it, droid's `setsid` grandchildren
//! included, so none can hide.

use std::ffi::OsString;
use std::io::Write as _;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use droid_contract::ExecutionResult;
use serde_json::{Value, json};
use tests::droid_bin::real_droid;
use tests::droid_home::settings_json;
use tests::procs::{is_alive, pids_with_env};
use tokio::sync::watch;

use super::binary::{CLI_LIMIT, FakeHome, command, finish};
use super::bridge_harness::ServeProc;
use super::mcp_stdio::Server as McpServer;

/// The variable naming the file observations are appended to.
pub(super) const LOG_ENV: &str = "DROID_EXECUTOR_FAULT_LOG";
/// Passed through to droid, so every process of a run carries it (see the module docs).
pub(super) const SESSION_VAR: &str = "FAULT_SESSION";
/// How long a run's processes may take to disappear once its result is out.
const GONE: Duration = Duration::from_secs(10);
/// How often the RSS sampler reads `/proc/<pid>/status`.
const SAMPLE_EVERY: Duration = Duration::from_millis(20);
/// ... and how often in a process's first [`SAMPLE_FAST_FOR`]: a `run` against the fake droid
/// is over in under 20 ms (a debug build), and a sampler reading every 20 ms saw only the
/// process as it executed (a peak of 20 KiB, read as 0 MiB).
const SAMPLE_FAST: Duration = Duration::from_millis(1);
const SAMPLE_FAST_FOR: Duration = Duration::from_millis(500);
/// The fake droid records its invocation here (in HOME).
pub(super) const RECORD_FILE: &str = "record.json";
/// The display name of the real droid's custom model in a [`FaultHome::real`] HOME.
const REAL_MODEL: &str = "Faulty";

/// The front-end a request goes through.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Front {
    /// `droid-executor run --json --request FILE`.
    Cli,
    /// `droid-executor serve`, `POST /execute`.
    Bridge,
    /// `droid-executor mcp`, `tools/call execute_droid_task`.
    Mcp,
}

impl Front {
    /// Every front-end.
    pub(super) const ALL: [Front; 3] = [Front::Cli, Front::Bridge, Front::Mcp];

    /// The name in the matrix.
    pub(super) fn name(self) -> &'static str {
        match self {
            Front::Cli => "cli",
            Front::Bridge => "http",
            Front::Mcp => "mcp",
        }
    }
}

/// A HOME for one fault run: the fake droid (or the real one: [`FaultHome::real`]), its
/// scenario, a record of its invocation, the session variable passed through, and `config` lines
/// appended to the config file.
pub(super) struct FaultHome {
    pub(super) home: FakeHome,
    session: String,
    /// The droid command, when not the fake droid.
    pub(super) droid: Option<std::path::PathBuf>,
    /// Variables added to the front-end's environment (the real droid's offline switch).
    extra_env: Vec<(OsString, OsString)>,
    /// The model every request names (the real droid's custom model), if any.
    model: Option<String>,
}

/// A session value no other run shares.
fn new_session(prefix: &str) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{prefix}-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

impl FaultHome {
    /// A HOME playing `steps`, with `config` (TOML lines) added to its config file.
    pub(super) fn new(prefix: &str, steps: &Value, config: &str) -> FaultHome {
        let home = FakeHome::new(prefix, &[SESSION_VAR]);
        home.play(steps);
        if !config.is_empty() {
            let path = home.file(".config/droid-executor/config.toml");
            let mut file = std::fs::OpenOptions::new()
                .append(true)
                .open(&path)
                .unwrap();
            writeln!(file, "{config}").unwrap();
        }
        FaultHome {
            home,
            session: new_session(prefix),
            droid: None,
            extra_env: Vec::new(),
            model: None,
        }
    }

    /// A HOME for the real droid 0.225.2 talking to the model server at `base_url` (a
    /// `tests::scripted_model` server): `.factory/settings.json` lists it as droid's one custom
    /// model (as `tests::droid_home` writes it), the front-end runs with droid's offline switch
    /// `FACTORY_AIRGAP_ENABLED=1` (passed on to droid by its `FACTORY_` prefix), droid is the
    /// installed one (a missing droid fails with its install command), and every
    /// [`request`](FaultHome::request) names that model.
    pub(super) fn real(prefix: &str, base_url: &str) -> FaultHome {
        let home = FakeHome::new(prefix, &[SESSION_VAR]);
        let settings = home.file(".factory/settings.json");
        std::fs::create_dir_all(home.file(".factory")).unwrap();
        std::fs::write(
            &settings,
            settings_json(&[(REAL_MODEL, base_url)]).to_string(),
        )
        .unwrap();
        FaultHome {
            home,
            session: new_session(prefix),
            droid: Some(real_droid()),
            extra_env: vec![
                ("FACTORY_AIRGAP_ENABLED".into(), "1".into()),
                ("LANG".into(), "C.UTF-8".into()),
            ],
            // droid's id for the first custom model of a display name (`DroidHome::model_id`)
            model: Some(format!("custom:{REAL_MODEL}-0")),
        }
    }

    /// The environment of the front-end: the fake droid's, its invocation record, the session.
    pub(super) fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.home.env();
        // the store faults reach their private mounts through /proc/<pid>/root of a process
        // outside any Landlock domain, which a front-end confining its runs' TCP connections
        // (droid_exec::process::net_confine) may not read: these suites are about the store
        env.push((
            droid_exec::process::net_confine::TEST_NO_NET_CONFINE_VAR.into(),
            "1".into(),
        ));
        env.push((
            tests::fake_droid::RECORD_ENV.into(),
            self.home.fixture(RECORD_FILE).into(),
        ));
        env.push((SESSION_VAR.into(), self.session.clone().into()));
        if let Some(droid) = &self.droid {
            for (k, v) in &mut env {
                if k == "DROID_CLI_CMD" {
                    *v = droid.into();
                }
            }
        }
        env.extend(self.extra_env.iter().cloned());
        env
    }

    /// The fake droid's invocation record, if it ran.
    pub(super) fn record(&self) -> Option<Value> {
        let text = std::fs::read_to_string(self.home.fixture(RECORD_FILE)).ok()?;
        serde_json::from_str(&text).ok()
    }

    /// A request for the repository (naming the HOME's model, if it has one), with `extra`
    /// fields on top.
    pub(super) fn request(&self, extra: Value) -> Value {
        let mut request = json!({
            "objective": "Fault injection",
            "context": {"repo_root": self.home.repo().display().to_string()},
        });
        if let (Some(model), Some(r)) = (&self.model, request.as_object_mut()) {
            r.insert("model".into(), Value::String(model.clone()));
        }
        if let (Some(r), Some(e)) = (request.as_object_mut(), extra.as_object()) {
            for (k, v) in e {
                r.insert(k.clone(), v.clone());
            }
        }
        request
    }

    /// Live processes carrying this session's marker, `except` the front-end itself; polled until
    /// none is left or [`GONE`] passed.
    pub(super) async fn processes_left(&self, except: Option<i32>) -> Vec<i32> {
        let until = tokio::time::Instant::now() + GONE;
        loop {
            let left: Vec<i32> = pids_with_env(SESSION_VAR, &self.session)
                .into_iter()
                .filter(|p| Some(*p) != except && *p != i32::try_from(std::process::id()).unwrap())
                .collect();
            if left.is_empty() || tokio::time::Instant::now() >= until {
                return left;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

impl Drop for FaultHome {
    /// SIGKILL whatever still carries the session, so a failing test leaks nothing.
    fn drop(&mut self) {
        for pid in pids_with_env(SESSION_VAR, &self.session) {
            if pid != i32::try_from(std::process::id()).unwrap_or(0) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
}

/// What one request through one front-end gave.
#[derive(Debug)]
pub(super) struct Driven {
    pub(super) front: Front,
    /// The result (exactly one came back; see `results`).
    pub(super) result: ExecutionResult,
    /// How many results the front-end gave for the request.
    pub(super) results: usize,
    /// The front-end process's peak RSS (VmHWM), MiB.
    pub(super) peak_rss_mib: f64,
    /// Processes of the run still alive after [`GONE`].
    pub(super) left: Vec<i32>,
    /// What the front-end wrote on stderr (the CLI's, the bridge's or the MCP server's log).
    pub(super) stderr: String,
}

/// Runs `request` through `front` with `fh`'s environment and waits for its one result.
pub(super) async fn drive(front: Front, fh: &FaultHome, request: &Value) -> Driven {
    match front {
        Front::Cli => drive_cli(fh, request).await,
        Front::Bridge => drive_bridge(fh, request).await,
        Front::Mcp => drive_mcp(fh, request).await,
    }
}

async fn drive_cli(fh: &FaultHome, request: &Value) -> Driven {
    let file = fh.home.file("request.json");
    std::fs::write(&file, request.to_string()).unwrap();
    let child = command(
        &[
            "run".as_ref(),
            "--json".as_ref(),
            "--request".as_ref(),
            file.as_os_str(),
        ],
        &fh.env(),
        fh.home.path(),
    )
    .spawn()
    .unwrap();
    let pid = i32::try_from(child.id().unwrap()).unwrap();
    let rss = Sampler::start(pid);
    let out = finish(child).await;
    let peak = rss.stop().await;
    let results = serde_json::Deserializer::from_str(&out.stdout)
        .into_iter::<Value>()
        .filter(Result::is_ok)
        .count();
    let result = out.result();
    let left = fh.processes_left(None).await;
    Driven {
        front: Front::Cli,
        result,
        results,
        peak_rss_mib: peak,
        left,
        stderr: out.stderr,
    }
}

async fn drive_bridge(fh: &FaultHome, request: &Value) -> Driven {
    let serve = ServeProc::start(&[], &fh.env(), fh.home.path()).await;
    let pid = serve.pid();
    let rss = Sampler::start(pid);
    let client = bridge_http::client::Client::new(serve.addr, None);
    let result = client
        .execute(request, CLI_LIMIT)
        .await
        .unwrap_or_else(|e| panic!("POST /execute: {e}"));
    let left = fh.processes_left(Some(pid)).await;
    let peak = rss.stop().await;
    let (_, stderr) = serve.stop().await;
    Driven {
        front: Front::Bridge,
        result,
        // one HTTP response carries one result; a second cannot exist on the same exchange
        results: 1,
        peak_rss_mib: peak,
        left,
        stderr,
    }
}

async fn drive_mcp(fh: &FaultHome, request: &Value) -> Driven {
    let mut server = McpServer::start(&fh.env(), fh.home.path());
    let pid = i32::try_from(server.child.id().unwrap()).unwrap();
    let rss = Sampler::start(pid);
    server.initialize().await;
    let id = json!(7);
    let response = server
        .request(
            id.clone(),
            "tools/call",
            json!({"name": "execute_droid_task", "arguments": request}),
        )
        .await;
    // anything else answering the same id within a moment would be a duplicate
    let later = server.collect_for(Duration::from_millis(300)).await;
    let results = 1 + later
        .iter()
        .filter(|m| m.get("id") == Some(&id) && m.get("method").is_none())
        .count();
    let structured = response["result"]["structuredContent"].clone();
    let result: ExecutionResult = serde_json::from_value(structured)
        .unwrap_or_else(|e| panic!("not an ExecutionResult ({e}): {response:#}"));
    let left = fh.processes_left(Some(pid)).await;
    let peak = rss.stop().await;
    server.close_stdin();
    let _ = server.exit_within(Duration::from_secs(10)).await;
    Driven {
        front: Front::Mcp,
        result,
        results,
        peak_rss_mib: peak,
        left,
        stderr: server.stderr(),
    }
}

/// Samples a process's VmHWM (peak resident set) until stopped; the last value read is its peak
/// so far, since VmHWM only grows.
pub(super) struct Sampler {
    stop: watch::Sender<bool>,
    task: tokio::task::JoinHandle<u64>,
}

impl Sampler {
    /// Start sampling `pid`.
    pub(super) fn start(pid: i32) -> Sampler {
        let (stop, mut stopped) = watch::channel(false);
        // the first sample now, not when the task first runs: a CLI run that ends in ~10 ms
        // could otherwise be reaped before the task ever looked (a peak of 0: nothing measured)
        let first_kib = vm_hwm_kib(pid).unwrap_or(0);
        let started = std::time::Instant::now();
        let task = tokio::spawn(async move {
            let mut peak_kib = first_kib;
            loop {
                if let Some(kib) = vm_hwm_kib(pid) {
                    peak_kib = peak_kib.max(kib);
                }
                tokio::select! {
                    _ = stopped.changed() => {
                        if let Some(kib) = vm_hwm_kib(pid) {
                            peak_kib = peak_kib.max(kib);
                        }
                        return peak_kib;
                    }
                    () = tokio::time::sleep(if started.elapsed() < SAMPLE_FAST_FOR {
                        SAMPLE_FAST
                    } else {
                        SAMPLE_EVERY
                    }) => {}
                }
                if !is_alive(pid) {
                    return peak_kib;
                }
            }
        });
        Sampler { stop, task }
    }

    /// The peak, MiB.
    pub(super) async fn stop(self) -> f64 {
        let _ = self.stop.send(true);
        let kib = self.task.await.unwrap_or(0);
        #[allow(clippy::cast_precision_loss)]
        let mib = kib as f64 / 1024.0;
        (mib * 10.0).round() / 10.0
    }
}

/// `VmHWM` of `/proc/<pid>/status`, KiB.
fn vm_hwm_kib(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// The issue types of a result, in order.
pub(super) fn issue_kinds(r: &ExecutionResult) -> Vec<&'static str> {
    r.issues.iter().map(|i| i.kind.as_str()).collect()
}

/// One row of the matrix.
#[derive(Debug)]
pub(super) struct Observed {
    /// The test's name (filled in by [`record`]).
    pub(super) test: String,
    /// `cli`, `http`, `mcp`, or `engine` / `store` for cases below the front-ends.
    pub(super) front_end: String,
    /// `fake` or `real`.
    pub(super) droid: &'static str,
    /// The result's status, or what stood in for a result.
    pub(super) status: String,
    /// The result's issue types.
    pub(super) issues: Vec<String>,
    /// How many results came back for the one request.
    pub(super) results: usize,
    /// The front-end's peak RSS, MiB (0 when not measured).
    pub(super) peak_rss_mib: f64,
    /// Processes of the run left alive.
    pub(super) processes_left: usize,
    /// Anything else the test measured.
    pub(super) note: String,
}

impl Observed {
    /// The row for one driven request.
    pub(super) fn of(d: &Driven, droid: &'static str, note: impl Into<String>) -> Observed {
        Observed {
            test: String::new(),
            front_end: d.front.name().into(),
            droid,
            status: d.result.status.as_str().into(),
            issues: d
                .result
                .issues
                .iter()
                .map(|i| i.kind.as_str().to_owned())
                .collect(),
            results: d.results,
            peak_rss_mib: d.peak_rss_mib,
            processes_left: d.left.len(),
            note: note.into(),
        }
    }
}

/// Appends `rows` to the fault log under the calling test's name. Call it from the test's own
/// body (its thread carries the test's name), after the assertions passed.
pub(super) fn record(rows: Vec<Observed>) {
    let Some(path) = std::env::var_os(LOG_ENV) else {
        return;
    };
    let thread = std::thread::current();
    let name = thread
        .name()
        .and_then(|n| n.rsplit("::").next())
        .expect("record() runs on the test's own thread")
        .to_owned();
    let mut text = String::new();
    for mut row in rows {
        row.test.clone_from(&name);
        let line = json!({
            "test": row.test,
            "front_end": row.front_end,
            "droid": row.droid,
            "status": row.status,
            "issues": row.issues,
            "results": row.results,
            "peak_rss_mib": row.peak_rss_mib,
            "processes_left": row.processes_left,
            "note": row.note,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(Path::new(&path))
        .unwrap_or_else(|e| {
            panic!(
                "cannot open the fault log {}: {e}",
                Path::new(&path).display()
            )
        });
    file.write_all(text.as_bytes()).unwrap();
}
