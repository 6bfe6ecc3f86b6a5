//! Fault matrix, the task store's faults: a full disk (before a submission, before a sync run,
//! and filling up while a task runs), a read-only store, damaged store files (`result.json`,
//! `task.json`, `request.json`, `events.ndjson`, `owner.json`, the `seq` counter; a damaged
//! `task.json` beside a committed result), stray entries in `tasks/` (files, links, FIFOs, a
//! 10 GiB result), the durability of a submission, front-ends racing on one task, and wall-clock
//! jumps.
//!
//! Every front-end is a real `droid-executor` process (CLI, `serve`, `mcp`) on one store, with
//! the fake droid. A full or read-only store is a real file system: a tmpfs, or a read-only bind
//! mount, made in a user + mount namespace (`unshare -rm`) held open by a `sleep`, and reached
//! from outside through the sleeper's `root` link in procfs, so every front-end, supervisor and
//! the test see the same mount while nothing needs privileges. A clock jump is libfaketime
//! (`LD_PRELOAD`, `FAKETIME_DONT_FAKE_MONOTONIC=1`: only the wall clock moves, as an NTP step
//! does); file times are the kernel's and stay real. Records that no process can be made to
//! write on demand (a supervisor that never came, a task from a future clock) are written into
//! the store directly, in the store's own format.
//!
//! Each test asserts the exact outcome (status, issue type, exit code or HTTP status), that every
//! front-end that looks sees the same one result, and that no process of the session is left,
//! then records its rows (see `fault_matrix`).

use std::ffi::{OsStr, OsString};
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bridge_http::client::{Client, Method};
use droid_contract::{ExecutionResult, Status, TaskRecord, TaskState};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, BufReader};
use tokio::process::Child;

use super::binary::{CLI_LIMIT, Out, command, droid_executor, git_repo_at, path_var};
use super::bridge_harness::ServeProc;
use super::fault_matrix::{FaultHome, Front, Observed, drive, record};
use super::mcp_stdio::Server as McpServer;

/// How long a task may take to reach a state it is heading for.
const REACH: Duration = Duration::from_secs(30);
/// What to install when the namespace tools are missing or refused.
const UNSHARE_HELP: &str = "the store faults mount a file system in a user + mount namespace \
    (`unshare -rm`): install util-linux (apt-get install util-linux) and allow user namespaces \
    (sysctl kernel.unprivileged_userns_clone=1, or run as root)";
/// What to install when libfaketime is missing.
const FAKETIME_HELP: &str =
    "the clock faults run front-ends under libfaketime: apt-get install faketime";
/// The marker variable of a run's processes (`task-<id>` for a task).
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";
/// Ten years, in milliseconds (a wall-clock jump far enough to show).
const TEN_YEARS_MS: u64 = 10 * 365 * 86_400_000;

// ---------------------------------------------------------------------------------------------
// Mounts in a namespace

/// A file system mounted over `target` in a mount namespace of its own, alive while its holder
/// (`sleep`) runs; everyone else reaches it at [`Mount::path`]. Dropping it kills the holder
/// (`kill_on_drop`), which ends the namespace and the mount.
struct Mount {
    _holder: Child,
    pid: i32,
    target: PathBuf,
}

impl Mount {
    /// Run `script` (`$1` is the target) in a new user + mount namespace, then hold it.
    async fn start(script: &str, target: &Path) -> Mount {
        std::fs::create_dir_all(target).unwrap();
        #[allow(clippy::disallowed_methods)] // the suite runs the system tools it depends on
        let mut cmd = tokio::process::Command::new("unshare");
        cmd.args(["-rm", "sh", "-c"])
            .arg(format!("{script} && echo ready && exec sleep 3600"))
            .arg("sh")
            .arg(target)
            .env_clear()
            .env("PATH", path_var())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut holder = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run unshare ({e}): {UNSHARE_HELP}"));
        let mut out = BufReader::new(holder.stdout.take().unwrap());
        let mut line = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(20), out.read_line(&mut line)).await;
        if line.trim() != "ready" {
            let mut err = String::new();
            if let Some(mut e) = holder.stderr.take() {
                let _ =
                    tokio::time::timeout(Duration::from_secs(5), e.read_to_string(&mut err)).await;
            }
            panic!("`unshare -rm sh -c '{script}'` failed: {err}\n{UNSHARE_HELP}");
        }
        let pid = i32::try_from(holder.id().unwrap()).unwrap();
        Mount {
            _holder: holder,
            pid,
            target: target.to_path_buf(),
        }
    }

    /// A tmpfs of `kib` KiB.
    async fn tmpfs(target: &Path, kib: u64) -> Mount {
        Mount::start(
            &format!("mount -t tmpfs -o size={kib}k,mode=0700 tmpfs \"$1\""),
            target,
        )
        .await
    }

    /// `target` itself, read-only.
    async fn read_only(target: &Path) -> Mount {
        Mount::start(
            "mount --bind \"$1\" \"$1\" && mount -o remount,bind,ro \"$1\"",
            target,
        )
        .await
    }

    /// The mounted file system, as every process outside the namespace reaches it.
    fn path(&self) -> PathBuf {
        Path::new(&format!("/proc/{}/root", self.pid))
            .join(self.target.strip_prefix("/").unwrap_or(&self.target))
    }

    /// Fill the file system to the last block; how many bytes that took.
    fn fill(&self) -> u64 {
        use std::io::Write as _;
        let path = self.path().join("fill");
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        let chunk = vec![0xa5u8; 4096];
        let err = loop {
            if let Err(e) = f.write_all(&chunk) {
                break e;
            }
        };
        assert_eq!(
            err.raw_os_error(),
            Some(28),
            "filling {}: {err}",
            path.display()
        );
        drop(f);
        std::fs::metadata(&path).unwrap().len()
    }

    /// Give back the space [`Mount::fill`] took.
    fn unfill(&self) {
        std::fs::remove_file(self.path().join("fill")).unwrap();
    }
}

// ---------------------------------------------------------------------------------------------
// Front-ends on one store

/// `fh`'s environment with `extra` on top (replacing a variable of the same name).
fn env_with(fh: &FaultHome, extra: &[(&str, &OsStr)]) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = fh
        .env()
        .into_iter()
        .filter(|(k, _)| !extra.iter().any(|(n, _)| OsStr::new(n) == k))
        .collect();
    env.extend(
        extra
            .iter()
            .map(|(k, v)| (OsString::from(k), v.to_os_string())),
    );
    env
}

/// Every front-end of `fh` uses the store at `dir` (config `store_dir`).
fn store_at(fh: &FaultHome, dir: &Path) {
    use std::io::Write as _;
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(fh.home.file(".config/droid-executor/config.toml"))
        .unwrap();
    writeln!(f, "store_dir = {:?}", dir.display().to_string()).unwrap();
}

/// The default store of `fh` (XDG state under its HOME).
fn default_store(fh: &FaultHome) -> PathBuf {
    fh.home.file(".local/state/droid-executor")
}

/// `droid-executor ARGS` with `env` in `fh`'s HOME.
async fn cli(fh: &FaultHome, env: &[(OsString, OsString)], args: &[&str]) -> Out {
    droid_executor(args, env, fh.home.path()).await
}

/// `run --background --json` of the usual request; its task id.
async fn submit(fh: &FaultHome, env: &[(OsString, OsString)]) -> String {
    submit_in(fh, env, &fh.home.repo()).await
}

/// [`submit`] for the repository `repo` (one run at a time per repository: a task on a busy
/// one waits).
async fn submit_in(fh: &FaultHome, env: &[(OsString, OsString)], repo: &Path) -> String {
    let repo = repo.display().to_string();
    let out = cli(
        fh,
        env,
        &[
            "run",
            "--background",
            "--json",
            "--repo",
            &repo,
            "Fault injection",
        ],
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let v: Value = serde_json::from_str(&out.stdout).unwrap();
    v["task_id"].as_str().unwrap().to_owned()
}

/// stdout as a task record.
fn record_of(out: &Out) -> TaskRecord {
    serde_json::from_str(&out.stdout)
        .unwrap_or_else(|e| panic!("stdout is not a task record ({e}): {out:#?}"))
}

/// `tasks show ID --json`, which must answer.
async fn show(fh: &FaultHome, env: &[(OsString, OsString)], id: &str) -> TaskRecord {
    let out = cli(fh, env, &["tasks", "show", id, "--json"]).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    record_of(&out)
}

/// Poll `tasks show` until the task is in `state`.
async fn reach(fh: &FaultHome, env: &[(OsString, OsString)], id: &str, state: TaskState) {
    let until = tokio::time::Instant::now() + REACH;
    loop {
        let rec = show(fh, env, id).await;
        if rec.state == state {
            return;
        }
        assert!(
            tokio::time::Instant::now() < until,
            "{id} never became {}: {rec:#?}",
            state.as_str()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A bridge (`serve`) with `env`, and a client.
struct Bridge {
    serve: ServeProc,
    client: Client,
}

impl Bridge {
    async fn start(fh: &FaultHome, env: &[(OsString, OsString)]) -> Bridge {
        let serve = ServeProc::start(&[], env, fh.home.path()).await;
        let client = Client::new(serve.addr, None);
        Bridge { serve, client }
    }

    /// `method path` (with a JSON body); the status and the JSON answer.
    async fn send(&self, method: Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        let (status, bytes) = self
            .client
            .send(method, path, body, CLI_LIMIT)
            .await
            .unwrap_or_else(|e| panic!("{path}: {e}"));
        let v = serde_json::from_slice(&bytes).unwrap_or_else(|e| {
            panic!(
                "{path}: not JSON ({e}): {}",
                String::from_utf8_lossy(&bytes)
            )
        });
        (status, v)
    }

    /// `GET /tasks/{id}`: the status and the answer.
    async fn task(&self, id: &str) -> (u16, Value) {
        self.send(Method::GET, &format!("/tasks/{id}"), None).await
    }

    async fn stop(self) -> String {
        self.serve.stop().await.1
    }
}

/// An MCP server with `env`, initialized.
async fn mcp(fh: &FaultHome, env: &[(OsString, OsString)]) -> McpServer {
    let mut server = McpServer::start(env, fh.home.path());
    server.initialize().await;
    server
}

/// `tools/call` of `tool`; the `CallToolResult` (a JSON-RPC error fails the test).
async fn call(server: &mut McpServer, id: i64, tool: &str, args: Value) -> Value {
    let resp = server
        .request(
            json!(id),
            "tools/call",
            json!({"name": tool, "arguments": args}),
        )
        .await;
    assert!(resp.get("error").is_none(), "{tool}: {resp:#}");
    resp["result"].clone()
}

/// `droid_pend` that must give a record.
async fn pend(server: &mut McpServer, id: i64, task: &str, wait: u64) -> TaskRecord {
    let r = call(
        server,
        id,
        "droid_pend",
        json!({"task_id": task, "wait_seconds": wait}),
    )
    .await;
    assert_eq!(r["isError"], json!(false), "{r:#}");
    serde_json::from_value(r["structuredContent"].clone())
        .unwrap_or_else(|e| panic!("not a task record ({e}): {r:#}"))
}

async fn stop_mcp(mut server: McpServer) -> String {
    server.close_stdin();
    let _ = server.exit_within(Duration::from_secs(10)).await;
    server.stderr()
}

/// The end of an error message: the OS error, without the path (notes go into the docs, which
/// must not hold this machine's paths).
fn os_error(msg: &str) -> &str {
    let msg = msg.trim();
    msg.rsplit(": ").next().unwrap_or(msg)
}

/// The issue types of a result.
fn kinds(r: &ExecutionResult) -> Vec<String> {
    r.issues
        .iter()
        .map(|i| i.kind.as_str().to_owned())
        .collect()
}

/// A row for a case whose outcome is not one `ExecutionResult` of a run.
fn row(front_end: &str, status: &str, issues: Vec<String>, left: usize, note: String) -> Observed {
    Observed {
        test: String::new(),
        front_end: front_end.into(),
        droid: "fake",
        status: status.into(),
        issues,
        results: 1,
        peak_rss_mib: 0.0,
        processes_left: left,
        note,
    }
}

/// A row for a task's final record, seen by `front_end`.
fn task_row(front_end: &str, rec: &TaskRecord, left: usize, note: String) -> Observed {
    let result = rec.result.as_ref().expect("a finished task");
    row(front_end, rec.state.as_str(), kinds(result), left, note)
}

/// Every file under `dir` whose name ends in `.tmp` (a write that was not cleaned up).
fn temp_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(temp_files(&p));
        } else if p.to_string_lossy().ends_with(".tmp") {
            out.push(p);
        }
    }
    out
}

/// The task directories of the store at `store`.
fn task_dirs(store: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(store.join("tasks"))
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default();
    names.sort();
    names
}

/// A droid that waits for the file `gate` before it becomes the fake droid.
fn gated_droid(fh: &FaultHome, gate: &Path) -> PathBuf {
    let path = fh.home.file("gated-droid");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\nwhile [ ! -e '{}' ]; do sleep 0.02; done\nexec '{}' \"$@\"\n",
            gate.display(),
            tests::fake_droid_bin!().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

fn assistant(text: &str) -> Value {
    json!({"emit": {"type": "message", "role": "assistant", "text": text}})
}

// ---------------------------------------------------------------------------------------------
// Disk full

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn submitting_to_a_full_store_is_error_env_issue_and_leaves_no_task() {
    let fh = FaultHome::new("store-full", &json!([{"completion": "unreachable"}]), "");
    let mount = Mount::tmpfs(&fh.home.file("store"), 256).await;
    store_at(&fh, &mount.path());
    let filled = mount.fill();
    let env = fh.env();
    let repo = fh.home.repo().display().to_string();
    let enospc = "No space left on device";

    let out = cli(
        &fh,
        &env,
        &[
            "run",
            "--background",
            "--json",
            "--repo",
            &repo,
            "Fault injection",
        ],
    )
    .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    let result = out.result();
    assert_eq!(result.status, Status::Error, "{result:#?}");
    assert_eq!(kinds(&result), ["env_issue"], "{result:#?}");
    assert!(
        result.summary.starts_with("could not submit the task: ")
            && result.summary.contains(enospc),
        "{result:#?}"
    );
    let mut rows = vec![row(
        "cli",
        "error",
        kinds(&result),
        0,
        format!(
            "exit 2, the seq counter could not be written: {}",
            os_error(&result.issues[0].description)
        ),
    )];

    let bridge = Bridge::start(&fh, &env).await;
    let request = fh.request(json!({}));
    let (status, answer) = bridge.send(Method::POST, "/tasks", Some(&request)).await;
    assert_eq!(status, 500, "{answer:#}");
    assert_eq!(answer["error"]["code"], "store_error", "{answer:#}");
    let message = answer["error"]["message"].as_str().unwrap().to_owned();
    assert!(message.contains(enospc), "{answer:#}");
    bridge.stop().await;
    rows.push(row(
        "http",
        "500 store_error",
        Vec::new(),
        0,
        format!("POST /tasks: {}", os_error(&message)),
    ));

    let mut server = mcp(&fh, &env).await;
    let r = call(&mut server, 2, "droid_submit", request.clone()).await;
    assert_eq!(r["isError"], json!(true), "{r:#}");
    let text = r["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.contains(enospc), "{r:#}");
    stop_mcp(server).await;
    let said = text.split("; ").next().unwrap_or_default();
    rows.push(row(
        "mcp",
        "isError",
        Vec::new(),
        0,
        format!("droid_submit: {}", os_error(said)),
    ));

    let store = mount.path();
    assert!(
        store.join("locks").is_dir(),
        "the store is where the test looks"
    );
    assert_eq!(
        task_dirs(&store),
        Vec::<String>::new(),
        "no half-written task"
    );
    assert_eq!(temp_files(&mount.path()), Vec::<PathBuf>::new());
    let listed = cli(&fh, &env, &["tasks", "list", "--json"]).await;
    assert_eq!(
        (listed.code, listed.stdout.trim()),
        (Some(0), "[]"),
        "{listed:#?}"
    );
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    for r in &mut rows {
        r.note = format!("store on a full {} KiB tmpfs: {}", filled / 1024, r.note);
    }
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sync_run_on_a_full_store_is_error_env_issue() {
    let mut rows = Vec::new();
    for front in Front::ALL {
        let fh = FaultHome::new(
            "store-full-sync",
            &json!([{"completion": "unreachable"}]),
            "",
        );
        let mount = Mount::tmpfs(&fh.home.file("store"), 256).await;
        store_at(&fh, &mount.path());
        mount.fill();
        let d = drive(front, &fh, &fh.request(json!({}))).await;
        let ctx = format!("{front:?}: {:#?}\n{}", d.result, d.stderr);
        assert_eq!(d.result.status, Status::Error, "{ctx}");
        assert_eq!(kinds(&d.result), ["env_issue"], "{ctx}");
        assert!(
            d.result.issues[0]
                .description
                .contains("No space left on device"),
            "{ctx}"
        );
        assert_eq!(d.results, 1, "{ctx}");
        assert_eq!(d.left, Vec::<i32>::new(), "{ctx}");
        rows.push(Observed::of(
            &d,
            "fake",
            format!(
                "a sync run takes its run slot in the store: {}",
                os_error(&d.result.issues[0].description)
            ),
        ));
    }
    record(rows);
}

/// Submit a task whose droid waits for a gate, fill the store while it runs, open the gate, and
/// read the task's end from every front-end.
async fn fill_during_a_task(prefix: &str, steps: Value) -> (FaultHome, Mount, String, u64) {
    let mut fh = FaultHome::new(prefix, &steps, "");
    let gate = fh.home.file("gate");
    fh.droid = Some(gated_droid(&fh, &gate));
    let mount = Mount::tmpfs(&fh.home.file("store"), 1024).await;
    store_at(&fh, &mount.path());
    let env = fh.env();
    let id = submit(&fh, &env).await;
    reach(&fh, &env, &id, TaskState::Running).await;
    let filled = mount.fill();
    std::fs::write(&gate, "go\n").unwrap();
    (fh, mount, id, filled)
}

/// The task's final record through the CLI (`tasks wait`), the bridge and MCP, all the same.
async fn final_everywhere(
    fh: &FaultHome,
    id: &str,
) -> (TaskRecord, Vec<(&'static str, TaskRecord)>) {
    let env = fh.env();
    let out = cli(
        fh,
        &env,
        &["tasks", "wait", id, "--json", "--timeout", "60"],
    )
    .await;
    let waited = record_of(&out);
    assert!(waited.state.is_finished(), "{out:#?}");
    let bridge = Bridge::start(fh, &env).await;
    let (status, answer) = bridge.task(id).await;
    assert_eq!(status, 200, "{answer:#}");
    let got: TaskRecord = serde_json::from_value(answer).unwrap();
    bridge.stop().await;
    let mut server = mcp(fh, &env).await;
    let pended = pend(&mut server, 3, id, 0).await;
    stop_mcp(server).await;
    for (who, rec) in [("http", &got), ("mcp", &pended)] {
        assert_eq!(rec.result, waited.result, "{who} sees another result");
        assert_eq!(rec.state, waited.state, "{who}");
    }
    let seen = vec![("cli", waited.clone()), ("http", got), ("mcp", pended)];
    (waited, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_store_filling_up_during_a_task_keeps_the_task_s_own_result() {
    let steps = json!([
        assistant("Working on it."),
        assistant("Still working."),
        {"completion": "Done on a full disk."},
    ]);
    let (fh, mount, id, filled) = fill_during_a_task("store-fills", steps).await;
    let (rec, seen) = final_everywhere(&fh, &id).await;
    let result = rec.result.clone().unwrap();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.summary, "Done on a full disk.");
    let dir = mount.path().join("tasks").join(&id);
    assert!(dir.join("result.json").is_file());
    assert!(
        !dir.join("reserve").exists(),
        "the reserve went to the result"
    );
    assert_eq!(temp_files(&mount.path()), Vec::<PathBuf>::new());
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    let rows = seen
        .iter()
        .map(|(who, r)| {
            task_row(
                who,
                r,
                left.len(),
                format!(
                    "the store filled up ({} KiB) while droid ran; the result went into the space \
                     set aside at submission",
                    filled / 1024
                ),
            )
        })
        .collect();
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_larger_than_the_reserve_on_a_full_store_keeps_its_status_without_its_logs() {
    // lines of 1900 bytes that are not JSON: the engine keeps 50 in the logs (and a line
    // counting the rest), a result of about 95 KB, more than the 64 KiB reserve
    let mut steps: Vec<Value> = (0..60)
        .map(|i| json!({"raw": format!("{i:03} {}", "y".repeat(1900))}))
        .collect();
    steps.push(json!({"completion": "Done, with a lot said."}));
    let (fh, mount, id, filled) = fill_during_a_task("store-fills-big", Value::Array(steps)).await;
    let (rec, seen) = final_everywhere(&fh, &id).await;
    let result = rec.result.clone().unwrap();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.summary, "Done, with a lot said.", "{result:#?}");
    assert_eq!(
        result.logs,
        vec![
            "the disk holding the task store is full: 51 log line(s) and the command output \
             excerpts were dropped to store this result"
                .to_owned()
        ]
    );
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    mount.unfill();
    let rows = seen
        .iter()
        .map(|(who, r)| {
            task_row(
                who,
                r,
                left.len(),
                format!(
                    "store full ({} KiB) before a ~95 KB result: committed without its 51 log \
                     lines",
                    filled / 1024
                ),
            )
        })
        .collect();
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancelling_a_task_on_a_full_store_is_cancelled() {
    let fh = FaultHome::new("store-full-cancel", &json!([{"hang": true}]), "");
    let mount = Mount::tmpfs(&fh.home.file("store"), 1024).await;
    store_at(&fh, &mount.path());
    let env = fh.env();
    let id = submit(&fh, &env).await;
    reach(&fh, &env, &id, TaskState::Running).await;
    let filled = mount.fill();
    let out = cli(&fh, &env, &["tasks", "cancel", &id, "--json"]).await;
    assert_eq!(out.code, Some(1), "{out:#?}");
    let rec = record_of(&out);
    assert_eq!(rec.state, TaskState::Cancelled, "{rec:#?}");
    let cancel = mount.path().join("tasks").join(&id).join("cancel");
    assert_eq!(
        std::fs::metadata(&cancel).unwrap().len(),
        0,
        "on a full disk the request is an empty file"
    );
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    record(vec![task_row(
        "cli",
        &rec,
        left.len(),
        format!(
            "store full ({} KiB) while droid hung; tasks cancel",
            filled / 1024
        ),
    )]);
}

// ---------------------------------------------------------------------------------------------
// Read-only store

/// A store on disk holding a finished task, a running task (droid hangs), a task whose
/// supervisor died (written directly), and an expired one; its id list in that order.
async fn populated(fh: &FaultHome) -> [String; 4] {
    let env = fh.env();
    let store = default_store(fh);
    fh.home.play(&json!([{"completion": "Done."}]));
    let finished = submit(fh, &env).await;
    let out = cli(
        fh,
        &env,
        &["tasks", "wait", &finished, "--json", "--timeout", "60"],
    )
    .await;
    assert_eq!(record_of(&out).state, TaskState::Success, "{out:#?}");
    let expired = submit(fh, &env).await;
    let out = cli(
        fh,
        &env,
        &["tasks", "wait", &expired, "--json", "--timeout", "60"],
    )
    .await;
    assert_eq!(record_of(&out).state, TaskState::Success, "{out:#?}");
    fh.home.play(&json!([{"hang": true}]));
    let running = submit(fh, &env).await;
    reach(fh, &env, &running, TaskState::Running).await;
    let owner = json!({"pid": 999_999_999_u64, "marker": "task-droid-1700000000-dead",
                       "since": "2023-11-14T22:13:20.000Z"});
    let dead = dead_task(&store, "droid-1700000000-dead", &owner.to_string());
    // last: any front-end started on the writable store would remove it
    let old = SystemTime::now() - Duration::from_secs(3 * 86_400);
    std::fs::File::options()
        .write(true)
        .open(store.join("tasks").join(&expired).join("result.json"))
        .unwrap()
        .set_modified(old)
        .unwrap();
    [finished, running, dead, expired]
}

/// A task directory as a supervisor that died leaves it: `task.json` (created an hour ago),
/// `request.json`, `owner.json` with `owner`, two events, no result; its id.
fn dead_task(store: &Path, id: &str, owner: &str) -> String {
    let dir = store.join("tasks").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    let created = now_ms() - 3_600_000;
    write_task_json(&dir, id, created, None);
    std::fs::write(
        dir.join("request.json"),
        json!({"objective": "Died"}).to_string(),
    )
    .unwrap();
    std::fs::write(dir.join("owner.json"), owner).unwrap();
    std::fs::write(
        dir.join("events.ndjson"),
        "{\"seq\":1,\"at\":\"2023-11-14T22:13:20.000Z\",\"type\":\"progress\",\"phase\":\"snapshot\",\"message\":\"recording\"}\n\
         {\"seq\":2,\"at\":\"2023-11-14T22:13:21.000Z\",\"type\":\"message\",\"role\":\"assistant\",\"text\":\"hi\"}\n",
    )
    .unwrap();
    id.to_owned()
}

/// `task.json` in the store's format, created at `created_ms` (wall clock) and, when given, at
/// `boot` = (boot id, milliseconds since boot).
fn write_task_json(dir: &Path, id: &str, created_ms: u64, boot: Option<(String, u64)>) {
    let mut meta = json!({
        "task_id": id,
        "created_at": rfc3339_ms(created_ms),
        "created_unix_ms": created_ms,
        "seq": 0,
        "repo_root": "/nonexistent",
    });
    if let Some((boot_id, at)) = boot {
        meta["boot_id"] = json!(boot_id);
        meta["created_boot_ms"] = json!(at);
    }
    std::fs::write(dir.join("task.json"), meta.to_string()).unwrap();
}

fn now_ms() -> u64 {
    u64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_millis(),
    )
    .unwrap()
}

/// This boot's id and milliseconds since boot (what the store writes).
fn boot_clock() -> (String, u64) {
    let id = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
    let uptime = std::fs::read_to_string("/proc/uptime").unwrap();
    let secs: f64 = uptime.split_whitespace().next().unwrap().parse().unwrap();
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let ms = (secs * 1000.0) as u64;
    (id.trim().to_owned(), ms)
}

/// `ms` since the epoch as RFC 3339 (what the store writes), via the engine's own format: a
/// record is only as valid as the checker [`is_rfc3339`] says.
fn rfc3339_ms(ms: u64) -> String {
    let secs = ms / 1000;
    let days = secs / 86_400;
    let rem = secs % 86_400;
    // civil from days (Howard Hinnant), 1970-01-01 = day 0
    let z = i64::try_from(days).unwrap() + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ` with a real month, day, hour, minute and second.
fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<u32> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    b.len() == 24
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && b[23] == b'Z'
        && num(0..4).is_some()
        && num(5..7).is_some_and(|m| (1..=12).contains(&m))
        && num(8..10).is_some_and(|d| (1..=31).contains(&d))
        && num(11..13).is_some_and(|h| h < 24)
        && num(14..16).is_some_and(|m| m < 60)
        && num(17..19).is_some_and(|s| s < 60)
        && num(20..23).is_some()
}

/// Cancel `id` through the writable store and check nothing of the session is left.
async fn cancel_and_check(fh: &FaultHome, id: &str) -> Vec<i32> {
    let out = cli(fh, &fh.env(), &["tasks", "cancel", id, "--json"]).await;
    assert_eq!(record_of(&out).state, TaskState::Cancelled, "{out:#?}");
    fh.processes_left(None).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_read_only_store_still_lists_and_shows_what_is_there() {
    let fh = FaultHome::new("store-ro-read", &json!([]), "");
    let [finished, running, dead, expired] = populated(&fh).await;
    let mount = Mount::read_only(&default_store(&fh)).await;
    let ro = mount.path();
    let env = env_with(&fh, &[("DROID_EXECUTOR_STORE_DIR", ro.as_os_str())]);
    let erofs = "Read-only file system";
    let mut rows = Vec::new();

    let listed = cli(&fh, &env, &["tasks", "list", "--json"]).await;
    assert_eq!(listed.code, Some(0), "{listed:#?}");
    assert!(
        listed.stderr.contains(erofs),
        "the expired task could not be removed: {listed:#?}"
    );
    let records: Vec<TaskRecord> = serde_json::from_str(&listed.stdout).unwrap();
    let states: Vec<(&str, TaskState)> = records
        .iter()
        .map(|r| (r.task_id.as_str(), r.state))
        .collect();
    assert_eq!(
        states,
        [
            (running.as_str(), TaskState::Running),
            (finished.as_str(), TaskState::Success),
            (dead.as_str(), TaskState::Error),
        ],
        "newest first; the expired task is gone from view"
    );
    let buried = records[2].result.clone().unwrap();
    assert_eq!(kinds(&buried), ["bridge_failure"], "{buried:#?}");
    assert!(
        buried
            .logs
            .iter()
            .any(|l| l.starts_with("this result is not stored yet (") && l.contains(erofs)),
        "{buried:#?}"
    );
    let shown = show(&fh, &env, &finished).await;
    assert_eq!(shown.state, TaskState::Success);
    let waited = cli(&fh, &env, &["tasks", "wait", &finished, "--json"]).await;
    assert_eq!((waited.code, record_of(&waited)), (Some(0), shown.clone()));
    let gone = cli(&fh, &env, &["tasks", "show", &expired, "--json"]).await;
    assert_eq!(gone.code, Some(2), "{gone:#?}");
    assert!(
        gone.stderr.contains(&format!(
            "no such task: {expired} (its result expired after 86400 s; removing it failed: remove "
        )),
        "{gone:#?}"
    );
    let human = cli(&fh, &env, &["tasks", "show", &running]).await;
    assert_eq!(human.code, Some(0), "{human:#?}");
    assert!(human.stdout.contains(": running\n"), "{human:#?}");
    rows.push(row(
        "cli",
        "error",
        kinds(&buried),
        0,
        "read-only store: tasks list/show/wait answer (success, running, dead -> error not \
         stored yet); the expired task is no such task"
            .into(),
    ));

    let bridge = Bridge::start(&fh, &env).await;
    let (status, all) = bridge.send(Method::GET, "/tasks", None).await;
    assert_eq!(status, 200, "{all:#}");
    let ids: Vec<&str> = all["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["task_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [running.as_str(), finished.as_str(), dead.as_str()]);
    let (status, got) = bridge.task(&dead).await;
    assert_eq!(status, 200, "{got:#}");
    let got: TaskRecord = serde_json::from_value(got).unwrap();
    assert_eq!(
        (got.state, kinds(got.result.as_ref().unwrap())),
        (TaskState::Error, vec!["bridge_failure".to_owned()])
    );
    let (status, ok) = bridge.task(&finished).await;
    assert_eq!(
        (status, &ok["result"]),
        (200, &serde_json::to_value(&shown.result).unwrap())
    );
    bridge.stop().await;
    rows.push(task_row(
        "http",
        &got,
        0,
        "read-only store: GET /tasks and /tasks/{id} answer".into(),
    ));

    let mut server = mcp(&fh, &env).await;
    let pended = pend(&mut server, 4, &dead, 0).await;
    assert_eq!(pended.state, TaskState::Error);
    let ok = pend(&mut server, 5, &finished, 0).await;
    assert_eq!(ok, shown);
    stop_mcp(server).await;
    rows.push(task_row(
        "mcp",
        &pended,
        0,
        "read-only store: droid_pend answers".into(),
    ));

    // writable again: the first look stores the dead task's result, once
    drop(mount);
    let stored = show(&fh, &fh.env(), &dead).await;
    assert_eq!(stored.state, TaskState::Error);
    assert!(
        default_store(&fh)
            .join("tasks")
            .join(&dead)
            .join("result.json")
            .is_file()
    );
    assert_eq!(
        show(&fh, &fh.env(), &dead).await,
        stored,
        "stored once, the same after"
    );
    let left = cancel_and_check(&fh, &running).await;
    assert_eq!(left, Vec::<i32>::new());
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writing_to_a_read_only_store_is_a_clear_error_and_the_running_task_goes_on() {
    let fh = FaultHome::new("store-ro-write", &json!([]), "");
    let [_, running, _, _] = populated(&fh).await;
    let mount = Mount::read_only(&default_store(&fh)).await;
    let ro = mount.path();
    let env = env_with(&fh, &[("DROID_EXECUTOR_STORE_DIR", ro.as_os_str())]);
    let erofs = "Read-only file system";
    let repo = fh.home.repo().display().to_string();
    let mut rows = Vec::new();

    let out = cli(
        &fh,
        &env,
        &[
            "run",
            "--background",
            "--json",
            "--repo",
            &repo,
            "Fault injection",
        ],
    )
    .await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    let submitted = out.result();
    assert_eq!(
        (submitted.status, kinds(&submitted)),
        (Status::Error, vec!["env_issue".to_owned()])
    );
    assert!(submitted.summary.contains(erofs), "{submitted:#?}");
    let sync = cli(
        &fh,
        &env,
        &["run", "--json", "--repo", &repo, "Fault injection"],
    )
    .await;
    assert_eq!(sync.code, Some(2), "{sync:#?}");
    let sync = sync.result();
    assert_eq!(
        (sync.status, kinds(&sync)),
        (Status::Error, vec!["env_issue".to_owned()])
    );
    assert!(sync.summary.contains(erofs), "{sync:#?}");
    let cancel = cli(&fh, &env, &["tasks", "cancel", &running, "--json"]).await;
    assert_eq!(cancel.code, Some(2), "{cancel:#?}");
    let said = cancel.stderr.lines().last().unwrap_or_default();
    assert!(
        said.starts_with("droid-executor: create ")
            && said.ends_with("Read-only file system (os error 30)"),
        "{cancel:#?}"
    );
    rows.push(row(
        "cli",
        "error",
        kinds(&submitted),
        0,
        format!(
            "run --background and run: error env_issue; tasks cancel: exit 2, {}",
            os_error(said)
        ),
    ));

    let bridge = Bridge::start(&fh, &env).await;
    let (status, answer) = bridge
        .send(Method::POST, "/tasks", Some(&fh.request(json!({}))))
        .await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (500, &json!("store_error")),
        "{answer:#}"
    );
    let (status, answer) = bridge
        .send(Method::DELETE, &format!("/tasks/{running}"), None)
        .await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (500, &json!("store_error")),
        "{answer:#}"
    );
    assert!(
        answer["error"]["message"].as_str().unwrap().contains(erofs),
        "{answer:#}"
    );
    bridge.stop().await;
    rows.push(row(
        "http",
        "500 store_error",
        Vec::new(),
        0,
        "POST /tasks and DELETE /tasks/{id}: 500 store_error, Read-only file system".into(),
    ));

    let mut server = mcp(&fh, &env).await;
    for (n, tool, args) in [
        (6, "droid_submit", fh.request(json!({}))),
        (7, "droid_cancel", json!({"task_id": running})),
    ] {
        let r = call(&mut server, n, tool, args).await;
        assert_eq!(r["isError"], json!(true), "{tool}: {r:#}");
        assert!(
            r["content"][0]["text"].as_str().unwrap().contains(erofs),
            "{tool}: {r:#}"
        );
    }
    let still = pend(&mut server, 8, &running, 0).await;
    assert_eq!(
        still.state,
        TaskState::Running,
        "the refused cancel changed nothing"
    );
    stop_mcp(server).await;
    rows.push(row(
        "mcp",
        "isError",
        Vec::new(),
        0,
        "droid_submit and droid_cancel: isError, Read-only file system".into(),
    ));

    assert_eq!(
        task_dirs(&default_store(&fh)).len(),
        4,
        "nothing was added or removed"
    );
    drop(mount);
    let left = cancel_and_check(&fh, &running).await;
    assert_eq!(left, Vec::<i32>::new());
    record(rows);
}

// ---------------------------------------------------------------------------------------------
// Damaged store files

/// Finished tasks in the default store: `n` of them, each `success`.
async fn finished_tasks(fh: &FaultHome, n: usize) -> Vec<String> {
    let env = fh.env();
    let mut ids = Vec::new();
    for _ in 0..n {
        let id = submit(fh, &env).await;
        ids.push(id);
    }
    for id in &ids {
        let out = cli(
            fh,
            &env,
            &["tasks", "wait", id, "--json", "--timeout", "60"],
        )
        .await;
        assert_eq!(record_of(&out).state, TaskState::Success, "{out:#?}");
    }
    ids
}

/// A task still submits and finishes in the damaged store.
async fn still_submits(fh: &FaultHome) -> TaskRecord {
    let env = fh.env();
    let id = submit(fh, &env).await;
    let out = cli(
        fh,
        &env,
        &["tasks", "wait", &id, "--json", "--timeout", "60"],
    )
    .await;
    let rec = record_of(&out);
    assert_eq!(rec.state, TaskState::Success, "{out:#?}");
    rec
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncated_or_garbage_result_is_error_bridge_failure_everywhere() {
    let fh = FaultHome::new("store-bad-result", &json!([{"completion": "Done."}]), "");
    let ids = finished_tasks(&fh, 4).await;
    let tasks = default_store(&fh).join("tasks");
    let whole = std::fs::read(tasks.join(&ids[0]).join("result.json")).unwrap();
    let damage: [(&str, Vec<u8>); 3] = [
        ("truncated to half", whole[..whole.len() / 2].to_vec()),
        ("garbage bytes", b"\x00\xff\xfe garbage \x7f".to_vec()),
        ("emptied", Vec::new()),
    ];
    for (id, (_, bytes)) in ids.iter().zip(&damage) {
        std::fs::write(tasks.join(id).join("result.json"), bytes).unwrap();
    }
    let intact = &ids[3];
    let env = fh.env();
    let bridge = Bridge::start(&fh, &env).await;
    let mut server = mcp(&fh, &env).await;
    let mut rows = Vec::new();
    for (n, (id, (what, _))) in ids.iter().zip(&damage).enumerate() {
        let shown = show(&fh, &env, id).await;
        let result = shown.result.clone().unwrap();
        assert_eq!(
            (shown.state, kinds(&result)),
            (TaskState::Error, vec!["bridge_failure".to_owned()]),
            "{what}"
        );
        assert!(
            result
                .summary
                .starts_with("the task's stored result is unreadable: ")
                && result.issues[0]
                    .description
                    .contains("result.json is corrupt: "),
            "{what}: {result:#?}"
        );
        let waited = cli(&fh, &env, &["tasks", "wait", id, "--json"]).await;
        assert_eq!(
            (waited.code, record_of(&waited)),
            (Some(2), shown.clone()),
            "{what}"
        );
        let (status, got) = bridge.task(id).await;
        assert_eq!(status, 200, "{what}");
        let got: TaskRecord = serde_json::from_value(got).unwrap();
        assert_eq!(got.result, shown.result, "{what}");
        let pended = pend(&mut server, 10 + i64::try_from(n).unwrap(), id, 0).await;
        assert_eq!(pended.result, shown.result, "{what}");
        for (who, rec) in [("cli", &shown), ("http", &got), ("mcp", &pended)] {
            rows.push(task_row(
                who,
                rec,
                0,
                format!(
                    "result.json {what}: {}",
                    result.issues[0]
                        .description
                        .rsplit(": ")
                        .next()
                        .unwrap_or_default()
                ),
            ));
        }
    }
    let listed = cli(&fh, &env, &["tasks", "list", "--json"]).await;
    let records: Vec<TaskRecord> = serde_json::from_str(&listed.stdout).unwrap();
    assert_eq!(records.len(), 4, "{listed:#?}");
    let ok = show(&fh, &env, intact).await;
    assert_eq!(ok.state, TaskState::Success, "the other task is unaffected");
    bridge.stop().await;
    stop_mcp(server).await;
    still_submits(&fh).await;
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_task_or_request_file_is_a_clear_error_and_other_tasks_go_on() {
    let fh = FaultHome::new("store-bad-meta", &json!([{"completion": "Done."}]), "");
    let ids = finished_tasks(&fh, 3).await;
    let tasks = default_store(&fh).join("tasks");
    let (bad_meta, bad_request, intact) = (&ids[0], &ids[1], &ids[2]);
    std::fs::write(
        tasks.join(bad_meta).join("task.json"),
        "{\"task_id\": \"droid-",
    )
    .unwrap();
    std::fs::write(tasks.join(bad_request).join("request.json"), "\u{0}garbage").unwrap();
    let env = fh.env();
    let corrupt = format!(
        "corrupt task store file {}",
        tasks.join(bad_meta).join("task.json").display()
    );
    let mut rows = Vec::new();

    let out = cli(&fh, &env, &["tasks", "show", bad_meta, "--json"]).await;
    assert_eq!(out.code, Some(2), "{out:#?}");
    assert!(
        out.stderr
            .starts_with(&format!("droid-executor: {corrupt}: EOF while parsing")),
        "{out:#?}"
    );
    let waited = cli(&fh, &env, &["tasks", "wait", bad_meta]).await;
    assert_eq!(
        (waited.code, &waited.stderr),
        (Some(2), &out.stderr),
        "{waited:#?}"
    );
    let listed = cli(&fh, &env, &["tasks", "list", "--json"]).await;
    let records: Vec<TaskRecord> = serde_json::from_str(&listed.stdout).unwrap();
    let listed_ids: Vec<&str> = records.iter().map(|r| r.task_id.as_str()).collect();
    assert_eq!(
        listed_ids,
        [intact.as_str(), bad_request.as_str()],
        "the unreadable task is left out"
    );
    let human = cli(&fh, &env, &["tasks", "show", bad_request]).await;
    assert_eq!(human.code, Some(0), "{human:#?}");
    assert!(
        human.stdout.contains(": success\n") && human.stdout.contains("objective: \n"),
        "{human:#?}"
    );
    rows.push(row(
        "cli",
        "exit 2",
        Vec::new(),
        0,
        format!(
            "task.json garbage: tasks show/wait exit 2, corrupt task store file: {}; list leaves it out",
            os_error(&out.stderr)
        ),
    ));

    let bridge = Bridge::start(&fh, &env).await;
    let (status, answer) = bridge.task(bad_meta).await;
    assert_eq!(
        (status, &answer["error"]["code"]),
        (500, &json!("store_error")),
        "{answer:#}"
    );
    assert!(
        answer["error"]["message"]
            .as_str()
            .unwrap()
            .starts_with(&corrupt),
        "{answer:#}"
    );
    let (status, answer) = bridge.task(bad_request).await;
    assert_eq!(
        (status, &answer["state"]),
        (200, &json!("success")),
        "{answer:#}"
    );
    bridge.stop().await;
    rows.push(row("http", "500 store_error", Vec::new(), 0, "task.json garbage: GET /tasks/{id} 500 store_error naming the file; request.json garbage: 200".into()));

    let mut server = mcp(&fh, &env).await;
    let r = call(&mut server, 20, "droid_pend", json!({"task_id": bad_meta})).await;
    assert_eq!(r["isError"], json!(true), "{r:#}");
    assert!(
        r["content"][0]["text"]
            .as_str()
            .unwrap()
            .starts_with(&corrupt),
        "{r:#}"
    );
    let ok = pend(&mut server, 21, bad_request, 0).await;
    assert_eq!(ok.state, TaskState::Success);
    stop_mcp(server).await;
    rows.push(row(
        "mcp",
        "isError",
        Vec::new(),
        0,
        "task.json garbage: droid_pend isError naming the file".into(),
    ));

    assert_eq!(show(&fh, &env, intact).await.state, TaskState::Success);
    still_submits(&fh).await;
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_and_torn_event_lines_are_skipped_and_the_task_ends_once() {
    let fh = FaultHome::new(
        "store-bad-events",
        &json!([assistant("One."), {"hang": true}]),
        "",
    );
    let env = fh.env();
    let id = submit(&fh, &env).await;
    reach(&fh, &env, &id, TaskState::Running).await;
    let events = default_store(&fh)
        .join("tasks")
        .join(&id)
        .join("events.ndjson");
    {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(&events)
            .unwrap();
        f.write_all(
            b"garbage line\n\xff\xfe\n[1,2]\n{\"seq\": \"x\"}\n{\"seq\": 99, \"type\": \"mess",
        )
        .unwrap();
    }
    let human = cli(&fh, &env, &["tasks", "show", &id]).await;
    assert_eq!(human.code, Some(0), "{human:#?}");
    assert!(human.stdout.contains("latest events:\n"), "{human:#?}");
    let bridge = Bridge::start(&fh, &env).await;
    let (status, got) = bridge.task(&id).await;
    assert_eq!((status, &got["state"]), (200, &json!("running")), "{got:#}");
    let mut server = mcp(&fh, &env).await;
    assert_eq!(
        pend(&mut server, 30, &id, 0).await.state,
        TaskState::Running
    );
    let out = cli(&fh, &env, &["tasks", "cancel", &id, "--json"]).await;
    let rec = record_of(&out);
    assert_eq!(rec.state, TaskState::Cancelled, "{out:#?}");
    let (_, got) = bridge.task(&id).await;
    let got: TaskRecord = serde_json::from_value(got).unwrap();
    let pended = pend(&mut server, 31, &id, 0).await;
    assert_eq!((&got, &pended), (&rec, &rec));
    bridge.stop().await;
    stop_mcp(server).await;
    let text = String::from_utf8_lossy(&std::fs::read(&events).unwrap()).into_owned();
    let valid = text
        .lines()
        .filter(|l| serde_json::from_str::<Value>(l).is_ok_and(|v| v["seq"].is_u64()))
        .count();
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    let note = format!(
        "5 bad lines appended to events.ndjson mid-run (the last torn); {valid} readable events \
         remain; tasks show, GET, droid_pend answer"
    );
    record(vec![
        task_row("cli", &rec, 0, note.clone()),
        task_row("http", &got, 0, note.clone()),
        task_row("mcp", &pended, left.len(), note),
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_garbage_seq_counter_restarts_above_every_task() {
    let fh = FaultHome::new("store-bad-seq", &json!([{"completion": "Done."}]), "");
    let first = finished_tasks(&fh, 1).await.remove(0);
    let seq = default_store(&fh).join("locks/seq");
    let mut rows = Vec::new();
    for (what, bytes) in [
        ("garbage", &b"\xffnot a number\n"[..]),
        ("emptied", &b""[..]),
    ] {
        std::fs::write(&seq, bytes).unwrap();
        let repo = fh.home.repo().display().to_string();
        let sync = cli(
            &fh,
            &fh.env(),
            &["run", "--json", "--repo", &repo, "Fault injection"],
        )
        .await;
        assert_eq!(
            (sync.code, sync.result().status),
            (Some(0), Status::Success),
            "{what}: {sync:#?}"
        );
        std::fs::write(&seq, bytes).unwrap();
        let rec = still_submits(&fh).await;
        let listed = cli(&fh, &fh.env(), &["tasks", "list", "--json"]).await;
        let records: Vec<TaskRecord> = serde_json::from_str(&listed.stdout).unwrap();
        assert_eq!(
            records[0].task_id, rec.task_id,
            "the new task is the newest: {listed:#?}"
        );
        assert!(records.iter().any(|r| r.task_id == first));
        let counter: u64 = std::fs::read_to_string(&seq)
            .unwrap()
            .trim()
            .parse()
            .unwrap();
        assert!(
            counter > now_ms(),
            "restarted above anything handed out: {counter}"
        );
        rows.push(task_row("cli", &rec, 0, format!("seq counter {what}: a sync run succeeds; the next task got a number above any handed out, listed newest first")));
    }
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    record(rows);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_owner_file_that_is_garbage_or_names_an_unrelated_process_is_buried_alone() {
    let fh = FaultHome::new("store-bad-owner", &json!([]), "");
    let store = default_store(&fh);
    // an unrelated process carrying another run's marker, which owner.json names
    #[allow(clippy::disallowed_methods)] // a bystander process for the test
    let mut bystander = tokio::process::Command::new("sleep")
        .arg("600")
        .env_clear()
        .env(MARKER_VAR, "run-unrelated")
        .stdin(Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let pid = bystander.id().unwrap();
    let garbage = dead_task(&store, "droid-1700000000-0a0a", "\u{0}{not json");
    let unrelated = dead_task(
        &store,
        "droid-1700000000-0b0b",
        &json!({"pid": pid, "marker": "run-unrelated", "since": "2023-11-14T22:13:20.000Z"})
            .to_string(),
    );
    let env = fh.env();
    let bridge = Bridge::start(&fh, &env).await;
    let mut server = mcp(&fh, &env).await;
    let mut rows = Vec::new();
    let cases = [
        (
            &garbage,
            "garbage",
            "the task's supervisor never started".to_owned(),
        ),
        (
            &unrelated,
            "naming an unrelated live process",
            format!("the task's supervisor (pid {pid}) died without writing a result"),
        ),
    ];
    for (n, (id, what, summary)) in cases.into_iter().enumerate() {
        // the bridge looks first here: it buries; the others read what it stored
        let (status, got) = bridge.task(id).await;
        assert_eq!(status, 200, "{got:#}");
        let got: TaskRecord = serde_json::from_value(got).unwrap();
        let result = got.result.clone().unwrap();
        assert_eq!(
            (got.state, kinds(&result)),
            (TaskState::Error, vec!["bridge_failure".to_owned()]),
            "{what}"
        );
        assert_eq!(
            result.summary,
            format!("{summary}; the task did not finish"),
            "{what}"
        );
        assert!(
            result
                .logs
                .iter()
                .any(|l| l.starts_with("the run had recorded 2 event(s)")),
            "{result:#?}"
        );
        let shown = show(&fh, &env, id).await;
        let pended = pend(&mut server, 40 + i64::try_from(n).unwrap(), id, 0).await;
        assert_eq!((&shown, &pended), (&got, &got), "{what}");
        for (who, rec) in [("http", &got), ("cli", &shown), ("mcp", &pended)] {
            rows.push(task_row(
                who,
                rec,
                0,
                format!(
                    "owner.json {what}: {}; the sweep used the task's own marker",
                    result.summary.replace(&pid.to_string(), "<pid>")
                ),
            ));
        }
    }
    assert!(
        tests::procs::is_alive(i32::try_from(pid).unwrap()),
        "burying a task killed an unrelated process its owner.json named"
    );
    bridge.stop().await;
    stop_mcp(server).await;
    let _ = bystander.start_kill();
    let _ = bystander.wait().await;
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    record(rows);
}

// ---------------------------------------------------------------------------------------------
// Races

/// A session with a bridge and an MCP server on one store, and a task submitted by the CLI.
struct Race {
    fh: FaultHome,
    bridge: Bridge,
    server: McpServer,
    id: String,
}

impl Race {
    async fn start(prefix: &str, steps: &Value) -> Race {
        let fh = FaultHome::new(prefix, steps, "");
        let env = fh.env();
        let bridge = Bridge::start(&fh, &env).await;
        let server = mcp(&fh, &env).await;
        let id = submit(&fh, &env).await;
        reach(&fh, &env, &id, TaskState::Running).await;
        Race {
            fh,
            bridge,
            server,
            id,
        }
    }

    /// Stop the servers; the processes of the session left then.
    async fn end(self) -> (FaultHome, Vec<i32>) {
        self.bridge.stop().await;
        stop_mcp(self.server).await;
        let left = self.fh.processes_left(None).await;
        (self.fh, left)
    }

    fn result_files(&self) -> usize {
        std::fs::read_dir(default_store(&self.fh).join("tasks").join(&self.id))
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().contains("result.json"))
            .count()
    }
}

/// `tasks cancel` on the CLI, `DELETE /tasks/{id}` on the bridge and `droid_cancel` on MCP, all
/// at once; then the final record each front-end gives.
async fn cancel_from_everywhere(race: &mut Race) -> Vec<(&'static str, TaskRecord)> {
    let env = race.fh.env();
    let id = race.id.clone();
    let path = format!("/tasks/{id}");
    let args = ["tasks", "cancel", id.as_str(), "--json"];
    let (out, deleted, cancelled) = tokio::join!(
        cli(&race.fh, &env, &args),
        race.bridge.send(Method::DELETE, &path, None),
        call(&mut race.server, 50, "droid_cancel", json!({"task_id": id})),
    );
    let by_cli = record_of(&out);
    assert!(matches!(out.code, Some(0 | 1)), "{out:#?}");
    let (status, body) = deleted;
    assert!(matches!(status, 200 | 202), "DELETE: {status} {body:#}");
    assert_eq!(cancelled["isError"], json!(false), "{cancelled:#}");
    // DELETE may answer 202 (still stopping) and droid_cancel answers at once: ask again
    let (_, body) = race.bridge.task(&id).await;
    let by_http: TaskRecord = serde_json::from_value(body).unwrap();
    let by_mcp = pend(&mut race.server, 51, &id, 60).await;
    vec![("cli", by_cli), ("http", by_http), ("mcp", by_mcp)]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_front_ends_cancelling_one_task_at_once_end_it_cancelled_once() {
    let mut race = Race::start(
        "race-cancel",
        &json!([assistant("Working."), {"hang": true}]),
    )
    .await;
    let seen = cancel_from_everywhere(&mut race).await;
    let first = seen[0].1.clone();
    assert_eq!(first.state, TaskState::Cancelled, "{first:#?}");
    assert_eq!(kinds(first.result.as_ref().unwrap()), ["cancelled"]);
    for (who, rec) in &seen {
        assert_eq!(rec, &first, "{who} sees another record");
    }
    assert_eq!(race.result_files(), 1);
    let (_fh, left) = race.end().await;
    assert_eq!(left, Vec::<i32>::new());
    record(
        seen.iter()
            .map(|(who, rec)| {
                task_row(
                    who,
                    rec,
                    left.len(),
                    "tasks cancel + DELETE /tasks/{id} + droid_cancel at once: one result.json"
                        .into(),
                )
            })
            .collect(),
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_waits_and_a_pend_on_one_task_see_the_same_result() {
    let mut race = Race::start(
        "race-wait",
        &json!([assistant("Working."), {"sleep_ms": 1500}, {"completion": "Done."}]),
    )
    .await;
    let env = race.fh.env();
    let id = race.id.clone();
    let args = ["tasks", "wait", id.as_str(), "--json", "--timeout", "60"];
    let (a, b, pended) = tokio::join!(
        cli(&race.fh, &env, &args),
        cli(&race.fh, &env, &args),
        pend(&mut race.server, 60, &id, 60),
    );
    let (a, b) = (record_of(&a), record_of(&b));
    assert_eq!(a.state, TaskState::Success, "{a:#?}");
    assert_eq!((&b, &pended), (&a, &a));
    let (_, body) = race.bridge.task(&id).await;
    let got: TaskRecord = serde_json::from_value(body).unwrap();
    assert_eq!(got, a);
    assert_eq!(race.result_files(), 1);
    let (_fh, left) = race.end().await;
    assert_eq!(left, Vec::<i32>::new());
    let note = "two tasks wait + droid_pend(wait 60) at once, then GET: one result".to_owned();
    record(vec![
        task_row("cli", &a, 0, note.clone()),
        task_row("cli", &b, 0, note.clone()),
        task_row("mcp", &pended, 0, note.clone()),
        task_row("http", &got, left.len(), note),
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_racing_the_task_s_own_end_gives_one_result_seen_by_all() {
    // droid finishes 600 ms after it starts; the cancels are sent about then
    let mut race = Race::start(
        "race-finish",
        &json!([{"sleep_ms": 600}, {"completion": "Done."}]),
    )
    .await;
    tokio::time::sleep(Duration::from_millis(500)).await;
    let seen = cancel_from_everywhere(&mut race).await;
    let first = seen[0].1.clone();
    assert!(
        matches!(first.state, TaskState::Cancelled | TaskState::Success),
        "{first:#?}"
    );
    for (who, rec) in &seen {
        assert_eq!(rec, &first, "{who} sees another record");
    }
    assert_eq!(race.result_files(), 1);
    let (_fh, left) = race.end().await;
    assert_eq!(left, Vec::<i32>::new());
    // which of the two wins is the race itself; the matrix row states what always holds, and
    // the note what this run saw
    let note = format!(
        "cancels from three front-ends as droid finished; this run: {} {:?}, the same record \
         everywhere, one result.json",
        first.state.as_str(),
        kinds(first.result.as_ref().unwrap())
    );
    record(
        seen.iter()
            .map(|(who, _)| {
                row(
                    who,
                    "cancelled or success",
                    Vec::new(),
                    left.len(),
                    note.clone(),
                )
            })
            .collect(),
    );
}

// ---------------------------------------------------------------------------------------------
// Clock jumps

/// libfaketime, or a failure saying how to install it.
fn libfaketime() -> PathBuf {
    let dirs = [
        "/usr/lib/x86_64-linux-gnu/faketime",
        "/usr/lib/aarch64-linux-gnu/faketime",
        "/usr/lib64/faketime",
        "/usr/lib/faketime",
        "/usr/local/lib/faketime",
    ];
    dirs.iter()
        .map(|d| Path::new(d).join("libfaketimeMT.so.1"))
        .find(|p| p.is_file())
        .unwrap_or_else(|| panic!("libfaketime not found in {dirs:?}: {FAKETIME_HELP}"))
}

/// The environment that runs a process under libfaketime with the wall-clock offset read from
/// `offset_file` at every call (`+0`, `+10y`, `-10y`); the monotonic clock stays true.
fn faked(offset_file: &Path) -> Vec<(&'static str, OsString)> {
    vec![
        ("LD_PRELOAD", libfaketime().into()),
        ("FAKETIME_TIMESTAMP_FILE", offset_file.into()),
        ("FAKETIME_NO_CACHE", "1".into()),
        ("FAKETIME_DONT_FAKE_MONOTONIC", "1".into()),
    ]
}

/// Set the offset libfaketime reads (atomically: a reader never sees half a line).
fn set_offset(file: &Path, offset: &str) {
    let tmp = file.with_extension("tmp");
    std::fs::write(&tmp, format!("{offset}\n")).unwrap();
    std::fs::rename(&tmp, file).unwrap();
}

/// Whether `pid` has libfaketime mapped.
fn runs_faked(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/maps")).is_ok_and(|m| m.contains("libfaketime"))
}

/// `fh` with `names` added to its passthrough list (droid and supervisors get them).
fn pass_through(fh: &FaultHome, names: &[&str]) {
    let path = fh.home.file(".config/droid-executor/config.toml");
    let text = std::fs::read_to_string(&path).unwrap();
    let list: String = names.iter().map(|n| format!("\"{n}\", ")).collect();
    let changed = text.replacen(
        "env_passthrough = [",
        &format!("env_passthrough = [{list}"),
        1,
    );
    assert_ne!(changed, text, "no env_passthrough in {text}");
    std::fs::write(&path, changed).unwrap();
}

/// A droid that creates the file `started`, then becomes the fake droid.
fn marking_droid(fh: &FaultHome, started: &Path) -> PathBuf {
    let path = fh.home.file("marking-droid");
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\n: > '{}'\nexec '{}' \"$@\"\n",
            started.display(),
            tests::fake_droid_bin!().display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

/// Once `started` exists (droid runs): whether `pid` has libfaketime loaded, then the wall
/// clock jumps to `jump`.
async fn jump_once_started(started: &Path, pid: i32, offset: &Path, jump: &str) -> bool {
    let until = tokio::time::Instant::now() + REACH;
    while !started.exists() {
        assert!(tokio::time::Instant::now() < until, "droid never started");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let faked = runs_faked(pid);
    set_offset(offset, jump);
    faked
}

/// One sync run with a 2 s budget through `front` with `env`; droid marks `started` and hangs,
/// and the wall clock jumps to `jump` once it runs. The result, and whether the front-end had
/// libfaketime loaded.
async fn hang_through_a_jump(
    front: Front,
    fh: &FaultHome,
    env: &[(OsString, OsString)],
    offset: &Path,
    started: &Path,
    jump: &str,
) -> (ExecutionResult, bool) {
    let request = fh.request(json!({"max_runtime_seconds": 2}));
    match front {
        Front::Cli => {
            let file = fh.home.file("clock-request.json");
            std::fs::write(&file, request.to_string()).unwrap();
            let args = [
                OsStr::new("run"),
                OsStr::new("--json"),
                OsStr::new("--request"),
                file.as_os_str(),
            ];
            let child = command(&args, env, fh.home.path()).spawn().unwrap();
            let pid = i32::try_from(child.id().unwrap()).unwrap();
            let (out, faked) = tokio::join!(
                super::binary::finish(child),
                jump_once_started(started, pid, offset, jump)
            );
            (out.result(), faked)
        }
        Front::Bridge => {
            let bridge = Bridge::start(fh, env).await;
            let pid = bridge.serve.pid();
            let (answer, faked) = tokio::join!(
                bridge.client.execute(&request, CLI_LIMIT),
                jump_once_started(started, pid, offset, jump)
            );
            bridge.stop().await;
            (answer.unwrap(), faked)
        }
        Front::Mcp => {
            let mut server = McpServer::start(env, fh.home.path());
            let pid = i32::try_from(server.child.id().unwrap()).unwrap();
            server.initialize().await;
            let (r, faked) = tokio::join!(
                call(&mut server, 70, "execute_droid_task", request.clone()),
                jump_once_started(started, pid, offset, jump)
            );
            stop_mcp(server).await;
            (
                serde_json::from_value(r["structuredContent"].clone()).unwrap(),
                faked,
            )
        }
    }
}

/// The environment pairs of [`faked`] as `env_with` takes them.
fn faked_env(fh: &FaultHome, offset: &Path) -> Vec<(OsString, OsString)> {
    let extra = faked(offset);
    let extra: Vec<(&str, &OsStr)> = extra.iter().map(|(k, v)| (*k, v.as_os_str())).collect();
    env_with(fh, &extra)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wall_clock_jump_mid_run_does_not_move_a_sync_run_s_deadline() {
    let mut rows = Vec::new();
    for jump in ["+10y", "-10y"] {
        for front in Front::ALL {
            let mut fh = FaultHome::new("clock-deadline", &json!([{"hang": true}]), "");
            let started = fh.home.fixture("droid-started");
            fh.droid = Some(marking_droid(&fh, &started));
            let offset = fh.home.file("clock-offset");
            set_offset(&offset, "+0");
            let env = faked_env(&fh, &offset);
            let (result, faked) =
                hang_through_a_jump(front, &fh, &env, &offset, &started, jump).await;
            assert!(faked, "{front:?} did not load libfaketime");
            assert_eq!(
                result.status,
                Status::Timeout,
                "{front:?} {jump}: {result:#?}"
            );
            assert_eq!(kinds(&result), ["timeout"]);
            assert!(
                result.duration_ms >= 2000,
                "{front:?} {jump}: the 2 s budget ended after {} ms",
                result.duration_ms
            );
            let left = fh.processes_left(None).await;
            assert_eq!(left, Vec::<i32>::new());
            rows.push(row(
                front.name(),
                result.status.as_str(),
                kinds(&result),
                left.len(),
                format!(
                    "wall clock {jump} (libfaketime) while droid hung: the 2 s budget ended \
                     after {:.1} s",
                    result.duration_ms as f64 / 1000.0
                ),
            ));
        }
    }
    record(rows);
}

/// The year of an RFC 3339 time.
fn year(t: &str) -> u32 {
    t.get(..4)
        .and_then(|y| y.parse().ok())
        .unwrap_or_else(|| panic!("no year in {t:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wall_clock_jump_mid_task_does_not_move_the_task_s_deadline() {
    let mut rows = Vec::new();
    for jump in ["+10y", "-10y"] {
        let mut fh = FaultHome::new("clock-task", &json!([{"hang": true}]), "");
        let started = fh.home.fixture("droid-started");
        fh.droid = Some(marking_droid(&fh, &started));
        pass_through(
            &fh,
            &[
                "LD_PRELOAD",
                "FAKETIME_TIMESTAMP_FILE",
                "FAKETIME_NO_CACHE",
                "FAKETIME_DONT_FAKE_MONOTONIC",
            ],
        );
        let offset = fh.home.file("clock-offset");
        set_offset(&offset, "+0");
        let env = faked_env(&fh, &offset);
        let repo = fh.home.repo().display().to_string();
        let out = cli(
            &fh,
            &env,
            &[
                "run",
                "--background",
                "--json",
                "--max-runtime",
                "2",
                "--repo",
                &repo,
                "Fault injection",
            ],
        )
        .await;
        assert_eq!(out.code, Some(0), "{out:#?}");
        let id = serde_json::from_str::<Value>(&out.stdout).unwrap()["task_id"]
            .as_str()
            .unwrap()
            .to_owned();
        let dir = default_store(&fh).join("tasks").join(&id);
        let owner: Value =
            serde_json::from_slice(&std::fs::read(dir.join("owner.json")).unwrap()).unwrap();
        let supervisor = i32::try_from(owner["pid"].as_u64().unwrap()).unwrap();
        let faked = jump_once_started(&started, supervisor, &offset, jump).await;
        assert!(faked, "the supervisor did not load libfaketime");
        let out = cli(
            &fh,
            &fh.env(),
            &["tasks", "wait", &id, "--json", "--timeout", "60"],
        )
        .await;
        let rec = record_of(&out);
        let result = rec.result.clone().unwrap();
        assert_eq!(
            (rec.state, kinds(&result)),
            (TaskState::Timeout, vec!["timeout".to_owned()]),
            "{jump}: {out:#?}"
        );
        assert!(
            result.duration_ms >= 2000,
            "{jump}: ended after {} ms",
            result.duration_ms
        );
        let events: Vec<Value> = std::fs::read_to_string(dir.join("events.ndjson"))
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        let first = events.first().unwrap()["at"].as_str().unwrap().to_owned();
        let last = events.last().unwrap()["at"].as_str().unwrap().to_owned();
        assert!(is_rfc3339(&first) && is_rfc3339(&last), "{first} {last}");
        let (before, after) = (year(&first), year(&last));
        if jump == "+10y" {
            assert!(
                after >= before + 9,
                "the supervisor's clock did not jump: {first} .. {last}"
            );
        } else {
            assert!(
                after + 9 <= before,
                "the supervisor's clock did not jump: {first} .. {last}"
            );
        }
        for t in [&rec.created_at, &rec.updated_at] {
            assert!(is_rfc3339(t), "{t}");
        }
        let left = fh.processes_left(None).await;
        assert_eq!(left, Vec::<i32>::new());
        rows.push(task_row(
            "cli",
            &rec,
            left.len(),
            format!(
                "background task, its supervisor's wall clock {jump} mid-run (its events' times \
                 jump {} years): the 2 s budget ended after {:.1} s",
                i64::from(after) - i64::from(before),
                result.duration_ms as f64 / 1000.0
            ),
        ));
    }
    record(rows);
}

/// A task directory as a submitter that died before its supervisor came up leaves it:
/// `task.json` and `request.json` only; its id.
fn orphan_task(store: &Path, id: &str, created_ms: u64, boot: Option<(String, u64)>) -> String {
    let dir = store.join("tasks").join(id);
    std::fs::create_dir_all(&dir).unwrap();
    write_task_json(&dir, id, created_ms, boot);
    std::fs::write(
        dir.join("request.json"),
        json!({"objective": "Orphan"}).to_string(),
    )
    .unwrap();
    id.to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_from_before_a_clock_was_set_back_is_buried_not_queued_for_years() {
    let fh = FaultHome::new("clock-orphan", &json!([]), "");
    let store = default_store(&fh);
    let future = now_ms() + TEN_YEARS_MS;
    let (boot, since_boot) = boot_clock();
    // made under a clock ten years ahead, which was then set right: by an older version (no
    // boot clock), a minute ago by the boot clock, and just now by the boot clock
    let old_format = orphan_task(&store, "droid-2110000000-000a", future, None);
    let minute_ago = orphan_task(
        &store,
        "droid-2110000000-000b",
        future,
        Some((boot.clone(), since_boot.saturating_sub(60_000))),
    );
    let just_now = orphan_task(
        &store,
        "droid-2110000000-000c",
        future,
        Some((boot, since_boot)),
    );
    let env = fh.env();
    let shown = show(&fh, &env, &old_format).await;
    let bridge = Bridge::start(&fh, &env).await;
    let (status, got) = bridge.task(&minute_ago).await;
    assert_eq!(status, 200, "{got:#}");
    let got: TaskRecord = serde_json::from_value(got).unwrap();
    bridge.stop().await;
    let mut server = mcp(&fh, &env).await;
    let starting = pend(&mut server, 80, &just_now, 0).await;
    let again = pend(&mut server, 81, &old_format, 0).await;
    stop_mcp(server).await;
    assert_eq!(again, shown);
    for (what, rec) in [("older record", &shown), ("a minute ago", &got)] {
        let result = rec.result.clone().unwrap();
        assert_eq!(
            (rec.state, kinds(&result)),
            (TaskState::Error, vec!["bridge_failure".to_owned()]),
            "{what}: {rec:#?}"
        );
        assert!(
            result
                .summary
                .starts_with("the task's supervisor never started; the task did not finish"),
            "{what}: {result:#?}"
        );
        assert_eq!(year(&rec.created_at), year(&rfc3339_ms(future)), "{what}");
        assert!(
            is_rfc3339(&rec.created_at) && is_rfc3339(&rec.updated_at),
            "{rec:#?}"
        );
    }
    assert_eq!(
        starting.state,
        TaskState::Queued,
        "still in its start-up window: {starting:#?}"
    );
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    record(vec![
        task_row("cli", &shown, 0, "no supervisor, created 10 years ahead (a record without the boot clock): buried at once".into()),
        task_row("http", &got, 0, "no supervisor, created 10 years ahead, 60 s ago by the boot clock: buried".into()),
        row("mcp", starting.state.as_str(), Vec::new(), left.len(), "no supervisor, created 10 years ahead, 0 s ago by the boot clock: queued (30 s start-up window on the boot clock)".into()),
    ]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_running_task_outlives_the_janitor_under_a_clock_ten_years_either_way() {
    let fh = FaultHome::new("clock-janitor", &json!([{"hang": true}]), "");
    let env = fh.env();
    // one repository per task: a task on a busy repository would wait its turn
    let repos: Vec<PathBuf> = ["repo-f", "repo-p", "repo-a"]
        .iter()
        .map(|n| {
            let dir = fh.home.file(n);
            git_repo_at(&dir, &[("a.txt", "a\n")]);
            dir
        })
        .collect();
    let running = submit(&fh, &env).await;
    reach(&fh, &env, &running, TaskState::Running).await;
    // its own scenario file: the running task's droid may not have read the shared one yet
    let done = fh.home.scenario("done", &json!([{"completion": "Done."}]));
    let done_env = env_with(&fh, &[("FAKE_DROID_SCENARIO", done.as_os_str())]);
    let finished = submit_in(&fh, &done_env, &repos[0]).await;
    let out = cli(
        &fh,
        &env,
        &["tasks", "wait", &finished, "--json", "--timeout", "60"],
    )
    .await;
    assert_eq!(record_of(&out).state, TaskState::Success, "{out:#?}");
    let offset = fh.home.file("clock-offset");
    let faked = faked_env(&fh, &offset);
    let mut rows = Vec::new();

    set_offset(&offset, "-10y");
    let out = cli(&fh, &faked, &["tasks", "clean", "--json"]).await;
    assert_eq!(
        (out.code, out.stdout.trim()),
        (Some(0), "{\"removed\":0}"),
        "{out:#?}"
    );
    let listed = cli(&fh, &faked, &["tasks", "list", "--json"]).await;
    let records: Vec<TaskRecord> = serde_json::from_str(&listed.stdout).unwrap();
    let states: Vec<TaskState> = records.iter().map(|r| r.state).collect();
    assert_eq!(
        states,
        [TaskState::Success, TaskState::Running],
        "{listed:#?}"
    );
    let past = submit_in(&fh, &faked, &repos[1]).await;
    reach(&fh, &env, &past, TaskState::Running).await;

    set_offset(&offset, "+10y");
    // every command cleans at its start: the finished task's result is ten years old by this
    // clock, so it goes; the running ones stay
    let listed = cli(&fh, &faked, &["tasks", "list", "--json"]).await;
    let records: Vec<TaskRecord> = serde_json::from_str(&listed.stdout).unwrap();
    let ids: Vec<(&str, TaskState)> = records
        .iter()
        .map(|r| (r.task_id.as_str(), r.state))
        .collect();
    assert_eq!(
        ids,
        [
            (past.as_str(), TaskState::Running),
            (running.as_str(), TaskState::Running)
        ],
        "{listed:#?}"
    );
    let gone = cli(&fh, &faked, &["tasks", "show", &finished, "--json"]).await;
    assert_eq!(gone.code, Some(2), "{gone:#?}");
    assert!(gone.stderr.contains("no such task"), "{gone:#?}");
    let ahead = submit_in(&fh, &faked, &repos[2]).await;
    let cli_seen = show(&fh, &faked, &running).await;
    assert_eq!(cli_seen.state, TaskState::Running);
    rows.push(row("cli", "running", Vec::new(), 0, "tasks clean under -10y: 0 removed; under +10y the start-up clean removes the finished task (its result is 10 y old by that clock) and keeps the running ones".into()));

    let bridge = Bridge::start(&fh, &faked).await;
    let (status, got) = bridge.task(&running).await;
    assert_eq!((status, &got["state"]), (200, &json!("running")), "{got:#}");
    bridge.stop().await;
    rows.push(row(
        "http",
        "running",
        Vec::new(),
        0,
        "serve under +10y (janitor at start): the running task kept".into(),
    ));
    let mut server = mcp(&fh, &faked).await;
    assert_eq!(
        pend(&mut server, 90, &running, 0).await.state,
        TaskState::Running
    );
    stop_mcp(server).await;

    // read back under the true clock: made under -10y, +10y and the true clock, all running
    let mut all = Vec::new();
    for id in [&running, &past, &ahead] {
        reach(&fh, &env, id, TaskState::Running).await;
        all.push(show(&fh, &env, id).await);
    }
    assert_eq!(
        year(&all[1].created_at) + 10,
        year(&all[0].created_at),
        "{all:#?}"
    );
    assert!(
        year(&all[2].created_at) >= year(&all[0].created_at) + 9,
        "{all:#?}"
    );
    for rec in &all {
        assert!(
            is_rfc3339(&rec.created_at) && is_rfc3339(&rec.updated_at),
            "{rec:#?}"
        );
    }
    for id in [&running, &past, &ahead] {
        let out = cli(&fh, &env, &["tasks", "cancel", id, "--json"]).await;
        assert_eq!(record_of(&out).state, TaskState::Cancelled, "{out:#?}");
    }
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    let note = "tasks made under -10y / true / +10y clocks all read running under the true \
                clock, created_at 10 years apart, valid RFC 3339 (updated_at is the files' \
                time, the kernel's true clock)"
        .to_owned();
    rows.push(row("mcp", "running", Vec::new(), left.len(), note));
    record(rows);
}

// ---------------------------------------------------------------------------------------------
// A result nobody can read

/// `args` with stdout a pipe whose read end is already closed; exit code and stderr.
async fn run_into_closed_pipe(fh: &FaultHome, args: &[&str]) -> (Option<i32>, String) {
    let (read_end, write_end) = nix::unistd::pipe().unwrap();
    drop(read_end);
    let mut cmd = command(args, &fh.env(), fh.home.path());
    cmd.stdout(Stdio::from(write_end));
    let out = tokio::time::timeout(CLI_LIMIT, cmd.spawn().unwrap().wait_with_output())
        .await
        .expect("droid-executor did not finish")
        .unwrap();
    (out.status.code(), String::from_utf8(out.stderr).unwrap())
}

/// `run` whose stdout is a pipe nobody reads any more (its reader gone) cannot deliver its
/// result: it exits 4 (not 0) and says on stderr which result was lost and why, with `--json`
/// or the readable report; `run --background` exits 4 naming the task, whose result is kept in
/// the store and read back with `tasks wait`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_whose_reader_is_gone_is_an_error_exit() {
    let fh = FaultHome::new("fault-closed-stdout", &json!([{"completion": "Done."}]), "");
    let repo = fh.home.repo().display().to_string();
    let lost = "droid-executor: the result (success) could not be written to stdout: Broken pipe \
                (os error 32); it is lost (run with --background to keep results in the task store)";
    let mut rows = Vec::new();
    for json_out in [true, false] {
        let mut args = vec!["run", "--repo", &repo, "Deliver"];
        if json_out {
            args.insert(1, "--json");
        }
        let (code, stderr) = run_into_closed_pipe(&fh, &args).await;
        assert_eq!(
            (code, stderr.trim_end()),
            (Some(4), lost),
            "--json {json_out}"
        );
        rows.push(Observed {
            test: String::new(),
            front_end: "cli".into(),
            droid: "fake",
            status: "success".into(),
            issues: Vec::new(),
            results: 0,
            peak_rss_mib: 0.0,
            processes_left: fh.processes_left(None).await.len(),
            note: format!(
                "stdout a closed pipe{}: exit 4, the loss said on stderr",
                if json_out { " (--json)" } else { "" }
            ),
        });
    }

    let (code, stderr) = run_into_closed_pipe(
        &fh,
        &["run", "--background", "--json", "--repo", &repo, "Keep"],
    )
    .await;
    assert_eq!(code, Some(4), "{stderr}");
    let id = stderr
        .strip_prefix("droid-executor: the task id ")
        .and_then(|rest| rest.split_once(' '))
        .map(|(id, _)| id.to_owned())
        .unwrap_or_else(|| panic!("no task id on stderr: {stderr}"));
    assert_eq!(
        stderr.trim_end(),
        format!(
            "droid-executor: the task id {id} could not be written to stdout: Broken pipe (os \
             error 32); the task runs on and its result is kept in the task store \
             (droid-executor tasks show {id})"
        )
    );
    let env = fh.env();
    let out = cli(
        &fh,
        &env,
        &["tasks", "wait", &id, "--json", "--timeout", "60"],
    )
    .await;
    let rec = record_of(&out);
    assert_eq!(rec.state, TaskState::Success, "{out:#?}");
    assert_eq!(
        rec.result.as_ref().map(|r| r.summary.as_str()),
        Some("Done.")
    );
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    rows.push(Observed {
        test: String::new(),
        front_end: "cli".into(),
        droid: "fake",
        status: rec.state.as_str().into(),
        issues: Vec::new(),
        results: 1,
        peak_rss_mib: 0.0,
        processes_left: left.len(),
        note: "run --background with stdout a closed pipe: exit 4, the task's result kept in the \
               store"
            .into(),
    });
    assert!(rows.iter().all(|r| r.processes_left == 0), "{rows:#?}");
    record(rows);
}

// ---------------------------------------------------------------------------------------------
// Damaged records, stray entries, durability (issue 16)

/// Set the modification time of `path` (a file or a directory) to `ago` before now.
fn age_by(path: &Path, ago: Duration) {
    std::fs::File::open(path)
        .unwrap()
        .set_modified(SystemTime::now() - ago)
        .unwrap();
}

/// The bridge's `GET /tasks`: the listed ids (sorted) and the `damaged` entries.
async fn listed_by_bridge(bridge: &Bridge) -> (Vec<String>, Value) {
    let (status, answer) = bridge.send(Method::GET, "/tasks", None).await;
    assert_eq!(status, 200, "{answer:#}");
    let mut ids: Vec<String> = answer["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["task_id"].as_str().unwrap().to_owned())
        .collect();
    ids.sort();
    (ids, answer["damaged"].clone())
}

/// The janitor (every front-end's start-up clean, `tasks clean`, the bridge's) keeps a finished
/// task whose `task.json` is emptied, truncated, not UTF-8 or missing fields, with its committed
/// `result.json` byte for byte, long past the 30 s grace of a half-created task: the TTL is
/// measured from the result, and until it runs out the task is listed as damaged by `tasks list`
/// and `GET /tasks`; once the result is older than the TTL it goes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_damaged_task_record_keeps_its_committed_result_until_the_ttl() {
    let fh = FaultHome::new(
        "store-damaged-record",
        &json!([{"completion": "Done."}]),
        "",
    );
    let mut ids = finished_tasks(&fh, 5).await;
    let intact = ids.pop().unwrap();
    let tasks = default_store(&fh).join("tasks");
    let whole = std::fs::read(tasks.join(&ids[0]).join("task.json")).unwrap();
    let meta: Value = serde_json::from_slice(&whole).unwrap();
    let damage: [(&str, Vec<u8>); 4] = [
        ("emptied", Vec::new()),
        ("truncated to half", whole[..whole.len() / 2].to_vec()),
        ("not UTF-8", b"{\"task_id\": \"\xff\xfe\"}".to_vec()),
        (
            "missing fields",
            json!({"task_id": meta["task_id"]}).to_string().into_bytes(),
        ),
    ];
    let mut results = Vec::new();
    for (id, (_, bytes)) in ids.iter().zip(&damage) {
        let dir = tasks.join(id);
        std::fs::write(dir.join("task.json"), bytes).unwrap();
        results.push(std::fs::read(dir.join("result.json")).unwrap());
        // an hour old: far past the grace the janitor gives a directory without a record
        age_by(&dir.join("task.json"), Duration::from_secs(3600));
        age_by(&dir, Duration::from_secs(3600));
    }
    let env = fh.env();
    let cleaned = cli(&fh, &env, &["tasks", "clean"]).await;
    assert_eq!(cleaned.code, Some(0), "{cleaned:#?}");
    let listed = cli(&fh, &env, &["tasks", "list", "--json"]).await;
    assert_eq!(listed.code, Some(0), "{listed:#?}");
    let kept = |when: &str| {
        for ((id, (what, _)), before) in ids.iter().zip(&damage).zip(&results) {
            let after = std::fs::read(tasks.join(id).join("result.json")).unwrap_or_else(|e| {
                panic!("task.json {what}: the result of {id} is gone after {when} ({e})")
            });
            assert_eq!(&after, before, "task.json {what}, after {when}");
        }
    };
    kept("tasks clean and tasks list");
    let records: Vec<TaskRecord> = serde_json::from_str(&listed.stdout).unwrap();
    let shown: Vec<&str> = records.iter().map(|r| r.task_id.as_str()).collect();
    assert_eq!(shown, [intact.as_str()], "{listed:#?}");
    for id in &ids {
        let warning = format!(
            "droid-executor: warning: skipped task store entry {id}: corrupt task store file {}: ",
            tasks.join(id).join("task.json").display()
        );
        assert!(listed.stderr.contains(&warning), "{warning}\n{listed:#?}");
    }
    let bridge = Bridge::start(&fh, &env).await;
    let (listed_ids, damaged) = listed_by_bridge(&bridge).await;
    assert_eq!(listed_ids, std::slice::from_ref(&intact), "{damaged:#}");
    let mut named: Vec<&str> = damaged
        .as_array()
        .unwrap()
        .iter()
        .map(|d| d["entry"].as_str().unwrap())
        .collect();
    named.sort_unstable();
    let mut want: Vec<&str> = ids.iter().map(String::as_str).collect();
    want.sort_unstable();
    assert_eq!(named, want, "{damaged:#}");
    bridge.stop().await;
    kept("the bridge's janitor");
    let mut rows = Vec::new();
    for (what, _) in &damage {
        rows.push(row(
            "cli",
            "kept",
            Vec::new(),
            0,
            format!(
                "task.json {what}, an hour old: result.json kept by tasks clean, the start-up \
                 clean and the bridge's janitor; tasks list and GET /tasks name the task as damaged"
            ),
        ));
    }
    // the TTL (24 h) still applies, measured from the result
    let expired = &ids[0];
    age_by(
        &tasks.join(expired).join("result.json"),
        Duration::from_secs(3 * 86_400),
    );
    let cleaned = cli(&fh, &env, &["tasks", "clean"]).await;
    assert_eq!(cleaned.code, Some(0), "{cleaned:#?}");
    assert!(!tasks.join(expired).exists(), "{cleaned:#?}");
    for id in &ids[1..] {
        assert!(tasks.join(id).join("result.json").is_file(), "{id}");
    }
    assert_eq!(show(&fh, &env, &intact).await.state, TaskState::Success);
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    record(rows);
}

/// Stray entries in the store's `tasks/` directory (a regular file and a symbolic link where a
/// task directory belongs, a file whose name is no task id, a `task.json` that is a directory or
/// a FIFO, a FIFO `result.json`, `events.ndjson` or `lock`, a 10 GiB `result.json`) never make a reader
/// fail, hang or read without bound: `tasks list`, `GET /tasks`, `/health`, `/metrics` and MCP
/// `droid_pend` answer at once, every readable task is listed, and each bad entry is skipped and
/// named (a warning line, a `damaged` field, a count).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stray_entries_in_the_store_are_skipped_and_named_by_every_reader() {
    use nix::sys::stat::Mode;
    let fh = FaultHome::new("store-stray", &json!([{"completion": "Done."}]), "");
    let intact = finished_tasks(&fh, 1).await.remove(0);
    let tasks = default_store(&fh).join("tasks");
    let hour_ago = now_ms() - 3_600_000;
    let fifo = |p: &Path| nix::unistd::mkfifo(p, Mode::S_IRUSR | Mode::S_IWUSR).unwrap();
    let request = json!({"objective": "Stray"}).to_string();
    // a regular file, a symbolic link, and a file with no task id for a name
    std::fs::write(tasks.join("droid-1700000001-f11e"), "x").unwrap();
    std::os::unix::fs::symlink(tasks.join(&intact), tasks.join("droid-1700000006-5111")).unwrap();
    std::fs::write(tasks.join("stray.txt"), "notes").unwrap();
    // task.json a directory, task.json a FIFO
    let dir_meta = tasks.join("droid-1700000002-d1e0");
    std::fs::create_dir_all(dir_meta.join("task.json")).unwrap();
    std::fs::write(dir_meta.join("request.json"), &request).unwrap();
    let fifo_meta = tasks.join("droid-1700000004-f1f1");
    std::fs::create_dir_all(&fifo_meta).unwrap();
    fifo(&fifo_meta.join("task.json"));
    // a finished task whose result.json and events.ndjson are FIFOs
    let fifo_result = tasks.join("droid-1700000003-f1f0");
    std::fs::create_dir_all(&fifo_result).unwrap();
    write_task_json(&fifo_result, "droid-1700000003-f1f0", hour_ago, None);
    std::fs::write(fifo_result.join("request.json"), &request).unwrap();
    fifo(&fifo_result.join("result.json"));
    fifo(&fifo_result.join("events.ndjson"));
    // an unfinished task whose supervisor lock is a FIFO
    let fifo_lock = tasks.join("droid-1700000007-10c0");
    std::fs::create_dir_all(&fifo_lock).unwrap();
    write_task_json(&fifo_lock, "droid-1700000007-10c0", hour_ago, None);
    std::fs::write(fifo_lock.join("request.json"), &request).unwrap();
    fifo(&fifo_lock.join("lock"));
    // a finished task whose result.json is 10 GiB (sparse)
    let huge = tasks.join("droid-1700000005-b16f");
    std::fs::create_dir_all(&huge).unwrap();
    write_task_json(&huge, "droid-1700000005-b16f", hour_ago, None);
    std::fs::write(huge.join("request.json"), &request).unwrap();
    std::fs::File::create(huge.join("result.json"))
        .unwrap()
        .set_len(10 << 30)
        .unwrap();

    let file_in = |dir: &Path, name: &str| dir.join(name).display().to_string();
    let damaged = json!([
        {"entry": "droid-1700000001-f11e",
         "problem": "a regular file where a task directory belongs"},
        {"entry": "droid-1700000002-d1e0",
         "problem": format!("corrupt task store file {}: a directory, not a regular file",
                            file_in(&dir_meta, "task.json"))},
        {"entry": "droid-1700000004-f1f1",
         "problem": format!("corrupt task store file {}: a FIFO, not a regular file",
                            file_in(&fifo_meta, "task.json"))},
        {"entry": "droid-1700000006-5111",
         "problem": "a symbolic link where a task directory belongs"},
        {"entry": "droid-1700000007-10c0",
         "problem": format!("corrupt task store file {}: a FIFO, not a regular file",
                            file_in(&fifo_lock, "lock"))},
        {"entry": "stray.txt",
         "problem": "a regular file whose name is not a task id (task ids look like droid-1795349045-3fa2)"},
    ]);
    let mut want_ids = vec![
        intact.clone(),
        "droid-1700000003-f1f0".to_owned(),
        "droid-1700000005-b16f".to_owned(),
    ];
    want_ids.sort();
    let env = fh.env();
    let mut rows = Vec::new();

    let listed = cli(&fh, &env, &["tasks", "list", "--json"]).await;
    assert_eq!(listed.code, Some(0), "{listed:#?}");
    let records: Vec<TaskRecord> = serde_json::from_str(&listed.stdout).unwrap();
    let mut ids: Vec<String> = records.iter().map(|r| r.task_id.clone()).collect();
    ids.sort();
    assert_eq!(ids, want_ids, "{listed:#?}");
    let warnings: Vec<String> = damaged
        .as_array()
        .unwrap()
        .iter()
        .map(|d| {
            format!(
                "droid-executor: warning: skipped task store entry {}: {}",
                d["entry"].as_str().unwrap(),
                d["problem"].as_str().unwrap()
            )
        })
        .collect();
    let got: Vec<&str> = listed.stderr.lines().collect();
    assert_eq!(got, warnings, "{listed:#?}");
    for (id, problem) in [
        ("droid-1700000003-f1f0", "a FIFO, not a regular file"),
        (
            "droid-1700000005-b16f",
            "10737418240 bytes, more than the 16777216 a store file of this kind may hold",
        ),
    ] {
        let rec = show(&fh, &env, id).await;
        let result = rec.result.clone().unwrap();
        assert_eq!(
            (rec.state, kinds(&result)),
            (TaskState::Error, vec!["bridge_failure".to_owned()]),
            "{rec:#?}"
        );
        assert!(result.issues[0].description.ends_with(problem), "{rec:#?}");
        rows.push(task_row(
            "cli",
            &rec,
            0,
            format!("result.json {problem}: tasks show answers at once"),
        ));
    }
    rows.push(row(
        "cli",
        "exit 0",
        Vec::new(),
        0,
        "tasks list: every readable task listed, each stray entry a warning line".into(),
    ));

    let bridge = Bridge::start(&fh, &env).await;
    let (listed_ids, got) = listed_by_bridge(&bridge).await;
    assert_eq!((listed_ids, &got), (want_ids.clone(), &damaged));
    let (status, health) = bridge.send(Method::GET, "/health", None).await;
    assert_eq!(status, 200, "{health:#}");
    assert_eq!(
        (
            &health["tasks"]["running"],
            &health["tasks"]["queued"],
            &health["tasks"]["damaged"]
        ),
        (&json!(0), &json!(0), &json!(6)),
        "{health:#}"
    );
    let (status, bytes) = bridge
        .client
        .send(Method::GET, "/metrics", None, CLI_LIMIT)
        .await
        .unwrap();
    assert_eq!(status, 200, "{}", String::from_utf8_lossy(&bytes));
    bridge.stop().await;
    rows.push(row(
        "http",
        "200",
        Vec::new(),
        0,
        "GET /tasks lists every readable task and names each stray entry in `damaged`; /health \
         counts 0 running, 0 queued, 6 damaged; /metrics 200"
            .into(),
    ));

    let mut server = mcp(&fh, &env).await;
    // without an id a session means its own tasks (issue 29, item 13): this one has none
    let own = call(&mut server, 30, "droid_pend", json!({})).await;
    assert_eq!(own["isError"], true, "{own:#}");
    let named = call(&mut server, 31, "droid_pend", json!({"task_id": intact})).await;
    assert_eq!(
        named["structuredContent"]["task_id"],
        json!(intact),
        "{named:#}"
    );
    stop_mcp(server).await;
    rows.push(row(
        "mcp",
        "success",
        Vec::new(),
        0,
        "droid_pend of the readable task by id; without an id, a fresh session has no task of \
         its own"
            .into(),
    ));
    still_submits(&fh).await;
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    record(rows);
}

/// What a submission answers for is durable before it answers: the CLI's `run --background`
/// (traced with strace) fsyncs the store's `tasks/` directory after creating the task's
/// directory and before printing the task id, and a task the bridge accepted with 202 is read
/// back, request included, by a fresh process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submitted_task_is_durable_before_its_id_is_given() {
    let fh = FaultHome::new("store-durable", &json!([{"completion": "Done."}]), "");
    let env = fh.env();
    let store = default_store(&fh);
    std::fs::create_dir_all(store.join("tasks")).unwrap();
    let tasks_dir = std::fs::canonicalize(store.join("tasks")).unwrap();
    let trace = fh.home.file("submit.strace");
    let repo = fh.home.repo().display().to_string();
    #[allow(clippy::disallowed_methods)] // the suite runs the system tools it depends on
    let mut cmd = tokio::process::Command::new("strace");
    cmd.args(["-f", "-y", "-qq", "-s", "256", "-o"])
        .arg(&trace)
        .args(["-e", "trace=mkdir,mkdirat,fsync,fdatasync,write", "--"])
        .arg(tests::droid_bin::droid_executor_bin())
        .args(["run", "--background", "--json", "--repo", &repo, "Durable"])
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(fh.home.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    let out = super::binary::finish(
        cmd.spawn()
            .unwrap_or_else(|e| panic!("cannot run strace ({e}): apt-get install strace")),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let id = serde_json::from_str::<Value>(&out.stdout).unwrap()["task_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let text = std::fs::read_to_string(&trace).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let task_dir = tasks_dir.join(&id).display().to_string();
    let made = lines
        .iter()
        .position(|l| {
            l.contains("mkdir") && l.contains(&format!("{task_dir}\"")) && l.ends_with("= 0")
        })
        .unwrap_or_else(|| panic!("no mkdir of {task_dir}:\n{text}"));
    let synced = lines
        .iter()
        .position(|l| {
            l.contains("fsync(")
                && l.contains(&format!("<{}>)", tasks_dir.display()))
                && l.ends_with("= 0")
        })
        .unwrap_or_else(|| panic!("no fsync of {}:\n{text}", tasks_dir.display()));
    let answered = lines
        .iter()
        .position(|l| l.contains("write(1<") && l.contains(&id))
        .unwrap_or_else(|| panic!("the task id was never written to stdout:\n{text}"));
    assert!(
        made < synced && synced < answered,
        "{made} {synced} {answered}:\n{text}"
    );

    let bridge = Bridge::start(&fh, &env).await;
    let request = fh.request(json!({"objective": "Accepted"}));
    let (status, answer) = bridge.send(Method::POST, "/tasks", Some(&request)).await;
    assert_eq!(status, 202, "{answer:#}");
    let accepted = answer["task_id"].as_str().unwrap().to_owned();
    bridge.stop().await;
    let fresh = show(&fh, &env, &accepted).await;
    assert_eq!(fresh.task_id, accepted);
    let stored: Value = serde_json::from_slice(
        &std::fs::read(store.join("tasks").join(&accepted).join("request.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(stored["objective"], json!("Accepted"), "{stored:#}");
    for id in [&id, &accepted] {
        let out = cli(
            &fh,
            &env,
            &["tasks", "wait", id, "--json", "--timeout", "60"],
        )
        .await;
        assert_eq!(record_of(&out).state, TaskState::Success, "{out:#?}");
    }
    let left = fh.processes_left(None).await;
    assert_eq!(left, Vec::<i32>::new());
    record(vec![row(
        "cli",
        "success",
        Vec::new(),
        0,
        format!(
            "strace: mkdir of the task directory (line {made}), fsync of tasks/ (line {synced}), \
             then the id on stdout (line {answered}); a 202 task read back by a fresh process"
        ),
    )]);
}
