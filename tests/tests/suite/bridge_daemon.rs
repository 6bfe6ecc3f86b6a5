//! The HTTP bridge as a daemon, through the built `droid-executor` binary and the fake droid:
//! `bridge start|status|stop` (pid file, lock, log in the task store), a foreground `serve`
//! refused while the daemon holds the port's lock, `run --via bridge` starting a stopped bridge
//! and leaving it running, the bridge's 400 coming back as the CLI's `error` result, `--via
//! bridge --background` followed by `tasks wait`, seed 000's names (`PORT`, `DROID_TIMEOUT`,
//! `DROID_CLI_CMD`), a token-protected daemon, a start that cannot succeed reported at once in
//! `serve`'s words (before starting anything when it can be known, else as soon as `serve`
//! exits), and starts at the same moment making one bridge.
//!
//! Every test picks its own free port and HOME (so its own task store, pid file and log); a
//! [`DaemonGuard`] kills the daemon it started by the pid its pid file (or its own output)
//! names, even when the test fails, and never by name.

use std::ffi::OsString;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::time::Duration;

use bridge_http::Token;
use bridge_http::client::{Client, Method, probe};
use droid_contract::{ChangeType, ExecutionResult, FileChange, Status};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::fake_droid::RECORD_ENV;
use tests::procs::{is_alive, pids_with_env, wait_gone};

use super::binary::{FakeHome, NO_DROID_PATH, Out, droid_executor};
use super::bridge_harness::{DaemonGuard, runs_serve};

/// Time a stopped daemon's process gets to be gone.
const GONE_LIMIT: Duration = Duration::from_secs(10);
/// The variable the engine marks every process of a run with.
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";
/// A token long enough for the bridge (16 characters at least).
const TOKEN: &str = "0123456789abcdef0123456789abcdef";

/// A port on 127.0.0.1 that was free a moment ago: bound, read, released.
pub(super) fn free_port() -> u16 {
    let l = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    l.local_addr().unwrap().port()
}

/// The pid in a line `… (pid N)…`.
pub(super) fn pid_in(text: &str) -> i32 {
    text.split("(pid ")
        .nth(1)
        .and_then(|rest| rest.split(')').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no \"(pid N)\" in {text:?}"))
}

/// A fake droid's HOME with a port for its bridge. The guard is declared first so it is
/// dropped (and reads the pid file) before the HOME is removed.
struct Home {
    daemon: DaemonGuard,
    fake: FakeHome,
    port: u16,
}

impl Home {
    fn new(prefix: &str, steps: &Value) -> Home {
        let fake = FakeHome::new(prefix, &[RECORD_ENV]);
        fake.play(steps);
        let port = free_port();
        Home {
            daemon: DaemonGuard::new(&fake.file(".local/state/droid-executor"), port),
            fake,
            port,
        }
    }

    fn store(&self) -> PathBuf {
        self.fake.file(".local/state/droid-executor")
    }

    fn addr(&self) -> SocketAddr {
        SocketAddr::from((Ipv4Addr::LOCALHOST, self.port))
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn p(&self) -> String {
        self.port.to_string()
    }

    fn repo(&self) -> String {
        self.fake.repo().display().to_string()
    }

    /// The fake droid's environment, and the file it records its invocation to.
    fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.fake.env();
        env.push((RECORD_ENV.into(), self.fake.fixture("record.json").into()));
        env
    }

    fn env_with(&self, extra: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        let mut env = self.env();
        env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        env
    }

    async fn run(&self, args: &[&str]) -> Out {
        self.run_env(args, &self.env()).await
    }

    async fn run_env(&self, args: &[&str], env: &[(OsString, OsString)]) -> Out {
        droid_executor(args, env, &self.fake.repo()).await
    }

    /// `bridge start --port P`, checked; the daemon's pid.
    async fn start(&self, env: &[(OsString, OsString)]) -> i32 {
        let out = self
            .run_env(&["bridge", "start", "--port", &self.p()], env)
            .await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        let pid = pid_in(&out.stdout);
        self.daemon.saw(pid);
        assert_eq!(
            out.stdout,
            format!(
                "bridge started on {} (pid {pid}); log: {}\n",
                self.url(),
                self.store()
                    .join(format!("bridge-{}.log", self.port))
                    .display()
            )
        );
        pid
    }

    /// `bridge stop --port P`, checked to stop `pid`: gone, pid file removed, port closed.
    async fn stop(&self, env: &[(OsString, OsString)], pid: i32) {
        let out = self
            .run_env(&["bridge", "stop", "--port", &self.p()], env)
            .await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        assert_eq!(
            out.stdout,
            format!("bridge stopped (pid {pid})\n"),
            "{out:#?}"
        );
        assert!(
            wait_gone(pid, GONE_LIMIT).await,
            "the bridge {pid} survived"
        );
        assert!(
            !self.daemon.pid_file().exists(),
            "the pid file outlived the bridge"
        );
        assert!(!probe(self.addr()).await, "the port is still open");
    }

    fn client(&self, token: Option<&str>) -> Client {
        Client::new(self.addr(), token.map(|t| Token::new(t).unwrap()))
    }

    /// The bridge's count of sync runs that ended with `status` (`GET /metrics`).
    async fn sync_runs(&self, status: &str) -> u64 {
        let (code, body) = self
            .client(None)
            .send(Method::GET, "/metrics", None, Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(code, 200);
        let text = String::from_utf8_lossy(&body).into_owned();
        let name = format!("droid_executor_runs_total{{status=\"{status}\"}} ");
        text.lines()
            .find_map(|l| l.strip_prefix(&name))
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no {name} in:\n{text}"))
    }

    /// What the fake droid recorded of its last invocation.
    fn record(&self) -> Value {
        serde_json::from_slice(&std::fs::read(self.fake.fixture("record.json")).unwrap()).unwrap()
    }
}

/// The fake droid creates `b.txt` and finishes.
fn creates_b() -> Value {
    json!([
        {"write_file": {"path": "b.txt", "content": "b\n"}},
        {"completion": "Created b.txt."}
    ])
}

fn b_added() -> Vec<FileChange> {
    vec![FileChange {
        path: "b.txt".into(),
        change_type: ChangeType::Added,
        old_path: None,
        // the fake droid writes the file without a tool call event to name it
        highlights: vec![],
        lines_added: Some(1),
        lines_removed: Some(0),
    }]
}

fn json_out(out: &Out) -> Value {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {out:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_status_stop_cycle() {
    let h = Home::new("bridge-daemon-cycle", &creates_b());
    let p = h.p();

    let out = h.run(&["bridge", "status", "--port", &p]).await;
    assert_eq!(out.code, Some(3), "{out:#?}");
    assert_eq!(out.stdout, format!("bridge not running on {}\n", h.url()));
    let out = h.run(&["bridge", "status", "--port", &p, "--json"]).await;
    assert_eq!(out.code, Some(3), "{out:#?}");
    let v = json_out(&out);
    assert_eq!(
        v,
        json!({"running": false, "pid": null, "url": h.url(), "health": null,
               "error": v["error"].clone()})
    );
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|e| e.starts_with(&format!("bridge at {}: ", h.addr()))),
        "{v:#}"
    );

    let pid = h.start(&h.env()).await;
    assert_eq!(h.daemon.pid(), Some(pid), "the pid file names another pid");
    assert!(is_alive(pid), "the daemon {pid} is not running");
    assert!(runs_serve(pid), "pid {pid} is not droid-executor serve");
    let log = h.store().join(format!("bridge-{p}.log"));
    assert!(
        std::fs::read_to_string(&log)
            .unwrap()
            .contains(&format!("listening on {} (pid {pid})", h.url())),
        "{}",
        log.display()
    );

    let out = h.run(&["bridge", "status", "--port", &p]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(
        out.stdout,
        format!(
            "bridge running on {} (pid {pid}); droid 0.225.2; sync runs: 0 running, 0 queued; \
             tasks: 0 running, 0 queued\n",
            h.url()
        )
    );
    let out = h.run(&["bridge", "status", "--port", &p, "--json"]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let health = json!({
        "status": "ok",
        "version": "0.1.0",
        "droid": {
            "found": true,
            "path": tests::fake_droid_bin!().display().to_string(),
            "source": "DROID_CLI_CMD",
            "version": "0.225.2",
        },
        "runs": {"running": 0, "queued": 0},
        "tasks": {"store": h.store().display().to_string(), "running": 0, "queued": 0, "damaged": 0},
        "limits": {"max_concurrent": 4, "max_queue": 64, "body_limit": 1_048_576},
    });
    assert_eq!(
        json_out(&out),
        json!({"running": true, "pid": pid, "url": h.url(), "health": health.clone(),
               "error": null})
    );

    // a second start finds it and starts nothing
    let out = h.run(&["bridge", "start", "--port", &p]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(
        out.stdout,
        format!("bridge already running on {}\n", h.url())
    );
    assert_eq!(h.daemon.pid(), Some(pid));

    // a real client gets its health
    assert_eq!(h.client(None).health().await.unwrap(), health);

    // a foreground bridge on the same port is refused: the daemon holds the port's lock
    let out = h.run(&["serve", "--port", &p]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor serve: a bridge already runs on port {p} (pid file {}); stop it \
             with `droid-executor bridge stop --port {p}`\n",
            h.daemon.pid_file().display()
        )
    );
    assert_eq!(
        h.daemon.pid(),
        Some(pid),
        "the refused serve touched the pid file"
    );
    assert!(is_alive(pid), "the refused serve stopped the daemon");

    h.stop(&h.env(), pid).await;
    let out = h.run(&["bridge", "status", "--port", &p]).await;
    assert_eq!(out.code, Some(3), "{out:#?}");
    assert_eq!(out.stdout, format!("bridge not running on {}\n", h.url()));
    let out = h.run(&["bridge", "stop", "--port", &p]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.stdout, format!("no bridge runs on port {p}\n"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_via_bridge_starts_a_stopped_bridge_and_leaves_it_running() {
    let h = Home::new("bridge-daemon-run", &creates_b());
    let p = h.p();
    let repo = h.repo();
    assert!(!probe(h.addr()).await, "port {p} is taken");

    let args = [
        "run",
        "--via",
        "bridge",
        "--bridge-port",
        &p,
        "--json",
        "--repo",
        &repo,
        "Create b.txt",
    ];
    let out = h.run(&args).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let pid = pid_in(&out.stderr);
    h.daemon.saw(pid);
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor: started the bridge on {} (pid {pid})\n",
            h.url()
        )
    );
    let result = out.result();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.files_changed, b_added());
    assert_eq!(result.issues, vec![]);
    // the bridge ran it (not the CLI in-process), and nothing of the run is left
    assert_eq!(h.sync_runs("success").await, 1);
    let marker = h.record()["env"][MARKER_VAR].as_str().unwrap().to_owned();
    assert_eq!(pids_with_env(MARKER_VAR, &marker), Vec::<i32>::new());

    // left running, and found by the next run (nothing started, no message)
    assert_eq!(h.daemon.pid(), Some(pid));
    assert!(is_alive(pid), "the bridge {pid} stopped after the run");
    std::fs::remove_file(h.fake.repo().join("b.txt")).unwrap();
    let out = h.run(&args).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.stderr, "");
    assert_eq!(out.result().files_changed, b_added());
    assert_eq!(h.daemon.pid(), Some(pid));
    assert_eq!(h.sync_runs("success").await, 2);

    // the human report over the bridge too
    std::fs::remove_file(h.fake.repo().join("b.txt")).unwrap();
    let out = h
        .run(&[
            "run",
            "--via",
            "bridge",
            "--bridge-port",
            &p,
            "Create b.txt",
        ])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert!(out.stdout.contains("b.txt"), "{out:#?}");

    let out = h.run(&["bridge", "status", "--port", &p]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    h.stop(&h.env(), pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_via_bridge_answers_an_invalid_request_with_the_bridges_error_result() {
    let h = Home::new("bridge-daemon-invalid", &creates_b());
    let p = h.p();
    let repo = h.repo();
    let bad = [
        "--json",
        "--repo",
        &repo,
        "--autonomy",
        "reckless",
        "--max-runtime",
        "0",
        "--task-id",
        "BAD-1",
        "",
    ];
    let mut via = vec!["run", "--via", "bridge", "--bridge-port", &p];
    via.extend_from_slice(&bad);
    let out = h.run(&via).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    let pid = pid_in(&out.stderr);
    h.daemon.saw(pid);
    let result = out.result();
    assert_eq!(result.status, Status::Error, "{result:#?}");
    assert_eq!(result.task_id.as_deref(), Some("BAD-1"));
    // every violation is listed, one issue each
    assert_eq!(
        out.issue_kinds(),
        vec!["validation_error"; 3],
        "{result:#?}"
    );
    for (issue, field) in result
        .issues
        .iter()
        .zip(["objective", "max_runtime_seconds", "autonomy"])
    {
        assert!(issue.description.contains(field), "{field}: {result:#?}");
    }
    assert!(
        !h.fake.fixture("record.json").exists(),
        "droid ran for an invalid request"
    );

    // it is the bridge's 400 answer, and the same result the CLI gives in-process
    let mut local = vec!["run"];
    local.extend_from_slice(&bad);
    let in_process = h.run(&local).await;
    assert_eq!(in_process.code, Some(2), "{in_process:#?}");
    assert_eq!(result, in_process.result());
    let request = json!({
        "objective": "",
        "context": {"repo_root": repo},
        "autonomy": "reckless",
        "max_runtime_seconds": 0,
        "task_id": "BAD-1",
    });
    let (status, body) = h
        .client(None)
        .send(
            Method::POST,
            "/execute",
            Some(&request),
            Duration::from_secs(30),
        )
        .await
        .unwrap();
    assert_eq!(status, 400);
    let answered: ExecutionResult = serde_json::from_slice(&body).unwrap();
    assert_eq!(answered, result);

    assert!(is_alive(pid), "the bridge stopped after a bad request");
    h.stop(&h.env(), pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_via_bridge_background_submits_a_task_that_tasks_wait_finishes() {
    let h = Home::new("bridge-daemon-bg", &creates_b());
    let p = h.p();
    let repo = h.repo();
    let out = h
        .run(&[
            "run",
            "--via",
            "bridge",
            "--bridge-port",
            &p,
            "--background",
            "--json",
            "--repo",
            &repo,
            "--command",
            "test -f b.txt",
            "Create b.txt",
        ])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let pid = pid_in(&out.stderr);
    h.daemon.saw(pid);
    let v = json_out(&out);
    let id = v["task_id"].as_str().unwrap().to_owned();
    assert_eq!(v, json!({"task_id": id}));
    assert!(id.starts_with("droid-"), "{id}");

    let out = h
        .run(&["tasks", "wait", &id, "--json", "--timeout", "60"])
        .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let rec = json_out(&out);
    assert_eq!(rec["task_id"], json!(id));
    assert_eq!(rec["state"], "success", "{rec:#}");
    let result: ExecutionResult = serde_json::from_value(rec["result"].clone()).unwrap();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.task_id.as_deref(), Some(id.as_str()));
    assert_eq!(result.files_changed, b_added());
    assert_eq!(result.tests.passed, Some(true));
    // the task's processes are the task's, marked with its id
    assert_eq!(
        pids_with_env(MARKER_VAR, &format!("task-{id}")),
        Vec::<i32>::new()
    );
    // the bridge shows the same record
    let (status, body) = h
        .client(None)
        .send(
            Method::GET,
            &format!("/tasks/{id}"),
            None,
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    assert_eq!(status, 200);
    assert_eq!(serde_json::from_slice::<Value>(&body).unwrap(), rec);

    // a background request that is invalid is answered like a sync one
    let out = h
        .run(&[
            "run",
            "--via",
            "bridge",
            "--bridge-port",
            &p,
            "--background",
            "--json",
            "--repo",
            &repo,
            "--max-runtime",
            "0",
            "x",
        ])
        .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(out.issue_kinds(), vec!["validation_error"]);

    h.stop(&h.env(), pid).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn seed_names_port_droid_timeout_and_droid_cli_cmd() {
    let h = Home::new("bridge-daemon-seed", &json!([{"hang": true}]));
    let p = h.p();
    let repo = h.repo();
    // the fake droid is named by DROID_CLI_CMD only (PATH has no droid), the port by PORT only,
    // and the daemon's default timeout by DROID_TIMEOUT in the environment it was started with
    let droid = tests::fake_droid_bin!().display().to_string();
    let seed = |extra: &[(&str, &str)]| {
        let mut env: Vec<(OsString, OsString)> = h
            .env()
            .into_iter()
            .filter(|(k, _)| k != "PATH" && k != "DROID_CLI_CMD")
            .collect();
        env.push(("PATH".into(), NO_DROID_PATH.into()));
        env.push(("DROID_CLI_CMD".into(), droid.clone().into()));
        env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
        env
    };
    let port_env = seed(&[("PORT", &p)]);
    let start_env = seed(&[("PORT", &p), ("DROID_TIMEOUT", "2")]);

    let out = h.run_env(&["bridge", "start"], &start_env).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let pid = pid_in(&out.stdout);
    h.daemon.saw(pid);
    assert!(
        out.stdout
            .starts_with(&format!("bridge started on {} (pid {pid}); ", h.url())),
        "{out:#?}"
    );
    assert_eq!(h.daemon.pid(), Some(pid));

    let out = h.run_env(&["bridge", "status", "--json"], &port_env).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let status = json_out(&out);
    assert_eq!(status["pid"], json!(pid));
    assert_eq!(
        status["health"]["droid"],
        json!({"found": true, "path": droid, "source": "DROID_CLI_CMD", "version": "0.225.2"})
    );

    // no --bridge-port, no max_runtime_seconds, no DROID_TIMEOUT here: the bridge's 2 s apply
    let out = h
        .run_env(
            &["run", "--via", "bridge", "--json", "--repo", &repo, "Hang"],
            &port_env,
        )
        .await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    assert_eq!(out.stderr, "", "the run started another bridge");
    let result = out.result();
    assert_eq!(result.status, Status::Timeout, "{result:#?}");
    assert_eq!(out.issue_kinds(), vec!["timeout"]);
    assert_eq!(
        result.issues[0].description,
        "droid did not finish within 2 s and was stopped"
    );
    let record = h.record();
    let marker = record["env"][MARKER_VAR].as_str().unwrap();
    assert_eq!(pids_with_env(MARKER_VAR, marker), Vec::<i32>::new());

    h.stop(&port_env, pid).await;
    let out = h.run_env(&["bridge", "status"], &port_env).await;
    assert_eq!(out.code, Some(3), "{out:#?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_protected_daemon_refuses_a_client_without_the_token() {
    let h = Home::new("bridge-daemon-token", &creates_b());
    let p = h.p();
    let repo = h.repo();
    let with_token = h.env_with(&[("DROID_EXECUTOR_TOKEN", TOKEN)]);
    let pid = h.start(&with_token).await;

    let run = [
        "run",
        "--via",
        "bridge",
        "--bridge-port",
        &p,
        "--json",
        "--repo",
        &repo,
        "Create b.txt",
    ];
    let out = h.run_env(&run, &with_token).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.stderr, "");
    assert_eq!(out.result().status, Status::Success, "{out:#?}");
    assert_eq!(out.result().files_changed, b_added());

    std::fs::remove_file(h.fake.repo().join("b.txt")).unwrap();
    std::fs::remove_file(h.fake.fixture("record.json")).unwrap();
    let out = h.run(&run).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(out.stdout, "");
    for part in [
        "answered 401",
        "this bridge requires 'Authorization: Bearer <token>'",
        "DROID_EXECUTOR_TOKEN",
    ] {
        assert!(out.stderr.contains(part), "{part:?} missing: {out:#?}");
    }
    assert!(
        !h.fake.fixture("record.json").exists(),
        "droid ran without the token"
    );
    let wrong = h.env_with(&[("DROID_EXECUTOR_TOKEN", "ffffffffffffffffffffffffffffffff")]);
    let out = h.run_env(&run, &wrong).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr
            .contains("answered 401: the bearer token is wrong"),
        "{out:#?}"
    );
    // neither refused client started a second bridge
    assert_eq!(h.daemon.pid(), Some(pid));

    // the bridge's own answer, through a real client
    let err = h.client(None).health().await.unwrap_err().to_string();
    assert!(err.contains("answered 401"), "{err}");
    assert_eq!(
        h.client(Some(TOKEN)).health().await.unwrap()["status"],
        "ok"
    );

    h.stop(&with_token, pid).await;
}

/// The refusal of a non-loopback bind without a token, as `serve` words it.
fn unsafe_bind(addr: &str) -> String {
    format!(
        "refusing to listen on {addr}: it is reachable from other machines and no token is \
         configured; bind 127.0.0.1, or set a token with --token-file FILE or \
         DROID_EXECUTOR_TOKEN (clients then send 'Authorization: Bearer <token>')"
    )
}

/// An IPv4 address that is not this machine's (binding it fails with `EADDRNOTAVAIL`), and what
/// the OS says when it is bound: the documentation ranges of RFC 5737, the first one this
/// machine does not have (a container may sit in one of them).
fn foreign_address() -> (String, String) {
    for a in ["203.0.113.7", "198.51.100.7", "192.0.2.77"] {
        match std::net::TcpListener::bind((a, 0)) {
            Err(e) if e.kind() == std::io::ErrorKind::AddrNotAvailable => {
                return (a.to_owned(), e.to_string());
            }
            _ => {}
        }
    }
    panic!("this machine has an address in each of 203.0.113.0/24, 198.51.100.0/24, 192.0.2.0/24")
}

/// What `bridge start` and `run --via bridge` refuse before they start anything (a
/// non-loopback bind without a token), they refuse in `serve`'s words; what only `serve` can
/// find out (an address it cannot bind) is reported once `serve` exits, with `serve`'s own line
/// from the log, and a non-zero exit. Exit codes and messages are checked; no elapsed time.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bridge_that_cannot_start_is_reported_at_once_in_serves_words() {
    let h = Home::new("bridge-daemon-refused", &creates_b());
    let p = h.p();
    let repo = h.repo();
    let log = h.store().join(format!("bridge-{p}.log"));

    // refused before anything starts: no daemon, no log
    let out = h
        .run(&["bridge", "start", "--host", "0.0.0.0", "--port", &p])
        .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor bridge: {}\n",
            unsafe_bind(&format!("0.0.0.0:{p}"))
        )
    );
    assert!(!log.exists(), "a daemon was started: {}", log.display());

    // the same from a config file, through `run --via bridge`
    let config = h.fake.file(".config/droid-executor/config.toml");
    std::fs::create_dir_all(config.parent().unwrap()).unwrap();
    std::fs::write(&config, format!("host = \"0.0.0.0\"\nport = {p}\n")).unwrap();
    let run = [
        "run",
        "--via",
        "bridge",
        "--json",
        "--repo",
        &repo,
        "Create b.txt",
    ];
    let out = h.run(&run).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor: cannot use the bridge: {}\n",
            unsafe_bind(&format!("0.0.0.0:{p}"))
        )
    );
    assert!(!log.exists(), "a daemon was started: {}", log.display());

    // an address this machine does not have: only serve finds out, and exits at once
    let (foreign, os_error) = foreign_address();
    let with_token = h.env_with(&[("DROID_EXECUTOR_TOKEN", TOKEN)]);
    let serve_said = format!("droid-executor serve: cannot listen on {foreign}:{p}: {os_error}");
    let out = h
        .run_env(
            &["bridge", "start", "--host", &foreign, "--port", &p],
            &with_token,
        )
        .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(out.stdout, "");
    let pid = pid_in(&out.stderr);
    h.daemon.saw(pid);
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor bridge: the bridge (pid {pid}) exited before it answered (exit \
             status: 2); its log {} says:\n{serve_said}\n",
            log.display()
        )
    );
    assert!(!is_alive(pid), "the refused bridge {pid} still runs");
    assert!(
        !h.daemon.pid_file().exists(),
        "the refused bridge left its pid file"
    );

    // and through `run --via bridge`, with the address from the config file: only this
    // start's lines are quoted, not the earlier start's
    std::fs::write(&config, format!("host = \"{foreign}\"\nport = {p}\n")).unwrap();
    let out = h.run_env(&run, &with_token).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert_eq!(out.stdout, "");
    let pid = pid_in(&out.stderr);
    h.daemon.saw(pid);
    assert_eq!(
        out.stderr,
        format!(
            "droid-executor: cannot use the bridge: the bridge (pid {pid}) exited before it \
             answered (exit status: 2); its log {} says:\n{serve_said}\n",
            log.display()
        )
    );
    assert!(
        !h.fake.fixture("record.json").exists(),
        "droid ran although no bridge came up"
    );
    let out = h.run_env(&["bridge", "status"], &with_token).await;
    assert_eq!(out.code, Some(3), "{out:#?}");
}

/// Starts at the same moment (a planner firing runs in parallel at a stopped bridge): one
/// `serve` wins the port's lock, the others' exit at once, and every start succeeds, exactly one
/// of them reporting the bridge it started (the pid in the pid file).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn starts_at_the_same_moment_make_one_bridge_and_all_succeed() {
    let h = Home::new("bridge-daemon-race", &creates_b());
    let p = h.p();
    let env = h.env();
    let start = ["bridge", "start", "--port", &p];
    let (a, b, c) = tokio::join!(
        h.run_env(&start, &env),
        h.run_env(&start, &env),
        h.run_env(&start, &env)
    );
    let outs = [a, b, c];
    let mut started = Vec::new();
    for out in &outs {
        assert_eq!(out.code, Some(0), "{outs:#?}");
        if out.stdout.starts_with("bridge started on ") {
            let pid = pid_in(&out.stdout);
            h.daemon.saw(pid);
            started.push(pid);
        } else {
            assert_eq!(
                out.stdout,
                format!("bridge already running on {}\n", h.url()),
                "{outs:#?}"
            );
        }
    }
    let pid = h.daemon.pid().expect("a pid file");
    assert_eq!(started, [pid], "{outs:#?}");
    assert!(runs_serve(pid), "pid {pid} is not droid-executor serve");
    assert_eq!(h.client(None).health().await.unwrap()["status"], "ok");
    h.stop(&env, pid).await;
}
