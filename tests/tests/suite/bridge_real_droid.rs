//! The HTTP bridge end to end with the REAL droid 0.225.2 (driven by the scripted model), over
//! real sockets: `POST /execute` through a foreground `droid-executor serve` reporting ground
//! truth; a client that disconnects mid-run cancels it and leaves no process of the run behind
//! (droid and a `setsid` grandchild included); `GET /tasks/{id}/events` delivering a background
//! task's events live and then its result, and the same events again once it has finished; and
//! `run --via bridge` starting a stopped bridge daemon.
//!
//! Every process of the binary runs with the droid HOME's environment (which holds the
//! repositories and the task store) plus `DROID_CLI_CMD` naming the real droid. Raw
//! `tokio::net::TcpStream`s are used where the test needs the wire itself (a dropped
//! connection, a stream read as it arrives); `bridge_http::client::Client` elsewhere.

use std::cell::RefCell;
use std::ffi::OsString;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bridge_http::client::{Client, Method};
use droid_contract::{ChangeType, ExecutionResult, FileChange, Status};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::real_droid;
use tests::droid_home::DroidHome;
use tests::procs::{is_alive, pids_with_env, wait_env_value, wait_gone};
use tests::scripted_model::ScriptedModel;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use super::binary::{droid_executor, git_repo_at};
use super::bridge_daemon::{free_port, pid_in};
use super::bridge_harness::DaemonGuard;
use super::bridge_harness::ServeProc;
use super::common::read_pid_file;

/// The variable the engine marks every process of a run with.
const MARKER_VAR: &str = "DROID_EXECUTOR_RUN_ID";
/// Any one exchange with the bridge, a whole real-droid run included.
const HTTP_LIMIT: Duration = Duration::from_secs(90);
/// Time the processes of a cancelled run get to be gone (the engine's SIGTERM grace is 5 s).
const GONE_LIMIT: Duration = Duration::from_secs(10);

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn execute_tool(command: &str) -> Value {
    json!({"name": "Execute", "args": {"summary": "run it", "command": command,
           "riskLevel": "low", "riskLevelReason": "test command"}})
}

/// A scripted model, the real droid's HOME pointing at it (also the binary's HOME: the
/// repositories and the task store live there). Dropping it kills, by pid, whatever the runs it
/// saw left behind (only a failed test leaves anything).
struct World {
    model: ScriptedModel,
    home: DroidHome,
    markers: RefCell<Vec<String>>,
    tasks: RefCell<Vec<String>>,
}

impl World {
    async fn new() -> World {
        let model = ScriptedModel::start(json!([{"text": "placeholder"}]))
            .await
            .unwrap();
        let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
        World {
            model,
            home,
            markers: RefCell::new(Vec::new()),
            tasks: RefCell::new(Vec::new()),
        }
    }

    fn path(&self) -> &Path {
        self.home.path()
    }

    fn store(&self) -> PathBuf {
        self.path().join(".local/state/droid-executor")
    }

    /// A git repository `name` in the home.
    fn repo(&self, name: &str) -> PathBuf {
        let dir = self.path().join(name);
        git_repo_at(&dir, &[("a.txt", "hello\n")]);
        dir
    }

    fn model_id(&self) -> String {
        self.home.model_id("Mock")
    }

    fn env(&self) -> Vec<(OsString, OsString)> {
        let mut env = self.home.env();
        env.push(("DROID_CLI_CMD".into(), real_droid().into()));
        // `fixture/` holds what the tests' commands leave for them (pid files): granted
        let fixture = self.path().join("fixture");
        std::fs::create_dir_all(&fixture).unwrap();
        env.push(("DROID_EXECUTOR_SANDBOX_WRITABLE".into(), fixture.into()));
        env
    }

    /// `droid-executor serve --port 0` in the home.
    async fn serve(&self) -> ServeProc {
        ServeProc::start(&[], &self.env(), self.path()).await
    }

    /// A request for `repo` with the scripted model and `extra` fields.
    fn request(&self, repo: &Path, objective: &str, extra: Value) -> Value {
        let mut v = json!({
            "objective": objective,
            "context": {"repo_root": s(repo)},
            "model": self.model_id(),
        });
        if let (Value::Object(base), Value::Object(more)) = (&mut v, extra) {
            base.extend(more);
        }
        v
    }

    fn task_dir(&self, id: &str) -> PathBuf {
        self.store().join("tasks").join(id)
    }

    /// Lines in the task's event log now.
    fn events_recorded(&self, id: &str) -> usize {
        std::fs::read_to_string(self.task_dir(id).join("events.ndjson"))
            .map_or(0, |t| t.lines().count())
    }
}

impl Drop for World {
    fn drop(&mut self) {
        for id in self.tasks.borrow().iter() {
            if let Ok(bytes) = std::fs::read(self.task_dir(id).join("owner.json"))
                && let Ok(owner) = serde_json::from_slice::<Value>(&bytes)
                && let Some(pid) = owner["pid"].as_u64().and_then(|p| i32::try_from(p).ok())
                && std::fs::read(format!("/proc/{pid}/cmdline"))
                    .is_ok_and(|c| c.windows(id.len()).any(|w| w == id.as_bytes()))
            {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            self.markers.borrow_mut().push(format!("task-{id}"));
        }
        for marker in self.markers.borrow().iter() {
            for pid in pids_with_env(MARKER_VAR, marker) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }
}

/// Whether `pid` is a run's guardian or supervisor (`droid-executor guard <marker> [-- droid …]`,
/// a child of the front-end).
fn is_guardian(pid: i32) -> bool {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .is_ok_and(|c| c.split(|b| *b == 0).nth(1) == Some(b"guard".as_slice()))
}

/// Whether `pid` is a zombie (dead, not yet reaped).
fn is_zombie(pid: i32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    })
}

/// The processes whose parent is `parent`.
fn children(parent: i32) -> Vec<i32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
                stat.rfind(')')
                    .and_then(|i| stat[i + 1..].split_whitespace().nth(1))
                    .and_then(|ppid| ppid.parse::<i32>().ok())
                    == Some(parent)
            })
        })
        .collect()
}

/// A request written on a raw connection (no `Connection: close`: the client decides when it
/// goes).
fn raw_request(addr: SocketAddr, method: &str, path: &str, body: Option<&Value>) -> Vec<u8> {
    let body = body.map(Value::to_string).unwrap_or_default();
    let mut head = format!("{method} {path} HTTP/1.1\r\nHost: {addr}\r\n");
    if !body.is_empty() {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    let mut bytes = head.into_bytes();
    bytes.extend_from_slice(body.as_bytes());
    bytes
}

/// One server-sent event, with the time it arrived.
#[derive(Debug, Clone)]
struct Frame {
    id: Option<u64>,
    event: String,
    data: Value,
    at: Instant,
}

/// An event stream read off a raw connection as it arrives (chunked transfer decoded).
struct Sse {
    reader: BufReader<TcpStream>,
    chunked: bool,
    text: String,
    ended: bool,
}

impl Sse {
    /// `GET path` with `headers`; the status, the response headers (names lowercased) and the
    /// stream.
    async fn open(
        addr: SocketAddr,
        path: &str,
        headers: &[(&str, &str)],
    ) -> (u16, Vec<(String, String)>, Sse) {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        let mut req =
            format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: text/event-stream\r\n");
        for (k, v) in headers {
            req.push_str(&format!("{k}: {v}\r\n"));
        }
        req.push_str("\r\n");
        stream.write_all(req.as_bytes()).await.unwrap();
        let mut reader = BufReader::new(stream);
        let mut status_line = String::new();
        tokio::time::timeout(HTTP_LIMIT, reader.read_line(&mut status_line))
            .await
            .expect("no answer head")
            .unwrap();
        let status = status_line
            .split_whitespace()
            .nth(1)
            .and_then(|c| c.parse().ok())
            .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
        let mut head = Vec::new();
        loop {
            let mut line = String::new();
            reader.read_line(&mut line).await.unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (k, v) = line.split_once(':').unwrap();
            head.push((k.trim().to_ascii_lowercase(), v.trim().to_owned()));
        }
        let chunked = head
            .iter()
            .any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
        let sse = Sse {
            reader,
            chunked,
            text: String::new(),
            ended: false,
        };
        (status, head, sse)
    }

    /// Read the next piece of the body into `text`; false at its end.
    async fn more(&mut self) -> bool {
        if self.ended {
            return false;
        }
        if !self.chunked {
            let mut buf = vec![0u8; 8192];
            let n = self.reader.read(&mut buf).await.unwrap_or(0);
            self.text.push_str(&String::from_utf8_lossy(&buf[..n]));
            self.ended = n == 0;
            return n > 0;
        }
        let mut size = String::new();
        if self.reader.read_line(&mut size).await.unwrap_or(0) == 0 {
            self.ended = true;
            return false;
        }
        let size = usize::from_str_radix(size.trim(), 16)
            .unwrap_or_else(|e| panic!("bad chunk size {size:?}: {e}"));
        let mut chunk = vec![0u8; size + 2];
        self.reader.read_exact(&mut chunk).await.unwrap();
        if size == 0 {
            self.ended = true;
            return false;
        }
        self.text.push_str(&String::from_utf8_lossy(&chunk[..size]));
        true
    }

    /// The next event (keep-alive comments skipped); `None` when the stream ended.
    async fn next(&mut self) -> Option<Frame> {
        loop {
            if let Some(end) = self.text.find("\n\n") {
                let block: String = self.text.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (None, String::new(), String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("id: ") {
                        id = Some(v.parse().unwrap());
                    } else if let Some(v) = line.strip_prefix("event: ") {
                        event = v.to_owned();
                    } else if let Some(v) = line.strip_prefix("data: ") {
                        data.push_str(v);
                    }
                }
                if event.is_empty() && data.is_empty() {
                    continue;
                }
                let data = serde_json::from_str(&data)
                    .unwrap_or_else(|e| panic!("event data is not JSON ({e}): {block:?}"));
                return Some(Frame {
                    id,
                    event,
                    data,
                    at: Instant::now(),
                });
            }
            let more = tokio::time::timeout(HTTP_LIMIT, self.more())
                .await
                .expect("the event stream stalled");
            if !more {
                assert_eq!(self.text.trim(), "", "the stream ended mid-event");
                return None;
            }
        }
    }

    /// Every event up to the end of the stream.
    async fn all(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(f) = self.next().await {
            frames.push(f);
        }
        frames
    }
}

/// (id, event, data) of each frame: what two readings of a stream must agree on.
fn wire(frames: &[Frame]) -> Vec<(Option<u64>, String, Value)> {
    frames
        .iter()
        .map(|f| (f.id, f.event.clone(), f.data.clone()))
        .collect()
}

fn b_added() -> Vec<FileChange> {
    vec![FileChange {
        path: "b.txt".into(),
        change_type: ChangeType::Added,
        old_path: None,
        highlights: vec!["created by droid (1 line)".into()],
        lines_added: Some(1),
        lines_removed: Some(0),
    }]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn execute_runs_the_real_droid_and_reports_ground_truth() {
    let w = World::new().await;
    let repo = w.repo("repo");
    w.model.set_script(json!([
        {"tool": [{"name": "Create", "args": {"file_path": s(&repo.join("b.txt")), "content": "b\n"}}]},
        {"text": "Created b.txt."}
    ]));
    let serve = w.serve().await;
    let client = Client::new(serve.addr, None);
    let health = client.health().await.unwrap();
    assert_eq!(
        health["droid"],
        json!({"found": true, "path": s(&real_droid()), "source": "DROID_CLI_CMD",
               "version": "0.225.2"})
    );

    let request = w.request(
        &repo,
        "Create b.txt",
        json!({"task_id": "HTTP-1", "suggested_commands": ["test -f b.txt"]}),
    );
    let result = client.execute(&request, HTTP_LIMIT).await.unwrap();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.task_id.as_deref(), Some("HTTP-1"));
    assert_eq!(result.issues, vec![]);
    assert_eq!(result.files_changed, b_added());
    assert_eq!(result.tests.passed, Some(true));
    assert_eq!(result.tests.details, "test -f b.txt: exit 0");
    let droid = result.droid.as_ref().unwrap();
    assert_eq!(droid.version.as_deref(), Some("0.225.2"));
    assert_eq!(droid.model.as_deref(), Some(w.model_id().as_str()));
    assert_eq!(std::fs::read_to_string(repo.join("b.txt")).unwrap(), "b\n");

    let (status, metrics) = client
        .send(Method::GET, "/metrics", None, HTTP_LIMIT)
        .await
        .unwrap();
    assert_eq!(status, 200);
    let metrics = String::from_utf8_lossy(&metrics);
    assert!(
        metrics
            .lines()
            .any(|l| l == "droid_executor_runs_total{status=\"success\"} 1"),
        "{metrics}"
    );

    let (code, log) = serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_disconnect_cancels_the_run_and_kills_every_process_of_it() {
    let w = World::new().await;
    let repo = w.repo("repo");
    let pid_file = w.path().join("fixture/sleep.pid");
    // droid starts a sleeper in its own session, then the model never answers again
    w.model.set_script(json!([
        {"tool": [execute_tool(&format!(
            "setsid sleep 600 > /dev/null 2>&1 < /dev/null & echo $! > {}",
            pid_file.display()
        ))]},
        {"hang": true}
    ]));
    let serve = w.serve().await;
    let client = Client::new(serve.addr, None);
    let request = w.request(&repo, "Start a sleeper", json!({}));
    let mut conn = TcpStream::connect(serve.addr).await.unwrap();
    conn.write_all(&raw_request(serve.addr, "POST", "/execute", Some(&request)))
        .await
        .unwrap();

    let sleeper = read_pid_file(&pid_file, HTTP_LIMIT).await;
    // serve's children: its cgroup reaper (`droid-executor reap <host>`, one per front-end) and
    // droid itself, in a leaf of the host cgroup (this machine lets the front-end make cgroups;
    // elsewhere droid would be under the run's supervisor), and the sleeper is in the same leaf
    // though it left droid's session
    let kids = children(serve.pid());
    let argv1 = |p: i32| {
        std::fs::read(format!("/proc/{p}/cmdline"))
            .ok()
            .and_then(|c| c.split(|b| *b == 0).nth(1).map(<[u8]>::to_vec))
    };
    assert!(
        kids.iter().all(|p| !is_guardian(*p)),
        "serve runs droid under a supervisor process: this machine gives the suite no writable \
         cgroup v2 hierarchy (serve's children: {kids:?})"
    );
    assert_eq!(
        kids.iter()
            .filter(|p| argv1(**p).as_deref() == Some(b"reap".as_slice()))
            .count(),
        1,
        "serve's children {kids:?} hold no cgroup reaper"
    );
    let droids: Vec<i32> = kids
        .iter()
        .copied()
        .filter(|p| !is_zombie(*p))
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| {
                c.split(|b| *b == 0)
                    .next()
                    .is_some_and(|a| a.ends_with(b"droid"))
            })
        })
        .collect();
    assert_eq!(droids.len(), 1, "serve's children: {kids:?}");
    let droid = droids[0];
    let cgroup = |p: i32| {
        std::fs::read_to_string(format!("/proc/{p}/cgroup"))
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("0::").map(str::to_owned))
            .unwrap_or_default()
    };
    let leaf = cgroup(droid);
    assert!(leaf.contains("/droid-executor-"), "droid's cgroup {leaf:?}");
    assert_eq!(cgroup(sleeper), leaf, "the sleeper left droid's leaf");
    let marker = wait_env_value(droid, MARKER_VAR, GONE_LIMIT).await;
    w.markers.borrow_mut().push(marker.clone());
    assert!(marker.starts_with("run-"), "{marker}");
    let until = Instant::now() + GONE_LIMIT;
    while !pids_with_env(MARKER_VAR, &marker).contains(&sleeper) {
        assert!(
            Instant::now() < until,
            "the sleeper {sleeper} is not marked"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let run = pids_with_env(MARKER_VAR, &marker);
    assert!(run.contains(&droid), "{run:?}");
    let health = client.health().await.unwrap();
    assert_eq!(health["runs"], json!({"running": 1, "queued": 0}));

    // the client goes away without reading an answer
    let dropped = Instant::now();
    drop(conn);
    loop {
        let left = pids_with_env(MARKER_VAR, &marker);
        if left.is_empty() {
            break;
        }
        assert!(
            dropped.elapsed() < GONE_LIMIT,
            "{:?} after the disconnect, the run's processes {left:?} are still alive \
             (droid {droid}, sleeper {sleeper}); serve's log:\n{}",
            dropped.elapsed(),
            serve.log.concat()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let took = dropped.elapsed();
    assert!(!is_alive(droid), "droid {droid} survived");
    assert!(!is_alive(sleeper), "the setsid sleeper {sleeper} survived");
    eprintln!("the run's processes were gone {took:?} after the disconnect");

    // the bridge counted the run cancelled and has nothing running
    let until = Instant::now() + GONE_LIMIT;
    loop {
        let (_, metrics) = client
            .send(Method::GET, "/metrics", None, HTTP_LIMIT)
            .await
            .unwrap();
        let metrics = String::from_utf8_lossy(&metrics).into_owned();
        let health = client.health().await.unwrap();
        if metrics
            .lines()
            .any(|l| l == "droid_executor_runs_total{status=\"cancelled\"} 1")
            && health["runs"] == json!({"running": 0, "queued": 0})
        {
            break;
        }
        assert!(
            Instant::now() < until,
            "the run is not counted cancelled: {health:#}\n{metrics}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (code, log) = serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_events_stream_live_then_replay_the_same() {
    let w = World::new().await;
    let repo = w.repo("repo");
    // the first answer takes 2 s: the stream is open while the task runs
    w.model.set_script(json!([
        {"sleep": 2, "tool": [{"name": "Create", "args": {"file_path": s(&repo.join("b.txt")), "content": "b\n"}}]},
        {"text": "Created b.txt."}
    ]));
    let serve = w.serve().await;
    let client = Client::new(serve.addr, None);
    let request = w.request(&repo, "Create b.txt", json!({}));
    let (status, body) = client
        .send(Method::POST, "/tasks", Some(&request), HTTP_LIMIT)
        .await
        .unwrap();
    assert_eq!(status, 202, "{}", String::from_utf8_lossy(&body));
    let submitted: Value = serde_json::from_slice(&body).unwrap();
    let id = submitted["task_id"].as_str().unwrap().to_owned();
    w.tasks.borrow_mut().push(id.clone());
    assert_eq!(
        submitted,
        json!({"task_id": id, "status_url": format!("/tasks/{id}"),
               "events_url": format!("/tasks/{id}/events")})
    );

    let events_path = format!("/tasks/{id}/events");
    let (status, head, mut sse) = Sse::open(serve.addr, &events_path, &[]).await;
    // what the store held when the stream opened: anything after it came live
    let recorded_at_open = w.events_recorded(&id);
    assert_eq!(status, 200, "GET {}", serve.url(&events_path));
    assert!(
        head.contains(&("content-type".into(), "text/event-stream".into())),
        "{head:?}"
    );
    let live = sse.all().await;
    let (result_frame, events) = live.split_last().expect("no events at all");
    assert_eq!(result_frame.event, "result", "{live:#?}");
    assert_eq!(result_frame.id, None);
    let result: ExecutionResult = serde_json::from_value(result_frame.data.clone()).unwrap();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.files_changed, b_added());
    // every event once, in order, numbered from 1 as the store numbers them
    let ids: Vec<u64> = events.iter().map(|f| f.id.expect("an id")).collect();
    let expected: Vec<u64> = (1..=ids.len() as u64).collect();
    assert_eq!(ids, expected, "{live:#?}");
    for f in events {
        assert_eq!(f.data["seq"], json!(f.id), "{f:#?}");
        assert_eq!(f.data["type"], json!(f.event), "{f:#?}");
    }
    assert_eq!(
        events.last().map(|f| f.event.as_str()),
        Some("completed"),
        "{live:#?}"
    );
    // live: events the store did not hold yet when the stream opened, spread over the run
    assert!(
        ids.iter().any(|i| *i as usize > recorded_at_open),
        "every event was a replay ({recorded_at_open} recorded at open): {live:#?}"
    );
    // Not buffered until the end either: the model takes 2 s before its first answer, so the
    // first event and the result reach the client at least that far apart, unless the bridge
    // held the events back. A lower bound (kept on purpose: a slow machine only widens the
    // spread, so it cannot fail for being slow).
    let spread = result_frame.at.duration_since(events[0].at);
    assert!(
        spread >= Duration::from_secs(1),
        "the events came all at once ({spread:?}): {live:#?}"
    );

    // once finished: the same events, the same ids, the same result
    let (status, _, mut sse) = Sse::open(serve.addr, &events_path, &[]).await;
    assert_eq!(status, 200, "GET {}", serve.url(&events_path));
    let replay = sse.all().await;
    assert_eq!(wire(&replay), wire(&live));
    // resuming after an id gives only what came after it
    let k = ids[ids.len() / 2];
    let (status, _, mut sse) = Sse::open(
        serve.addr,
        &events_path,
        &[("Last-Event-ID", &k.to_string())],
    )
    .await;
    assert_eq!(status, 200, "GET {}", serve.url(&events_path));
    let resumed = sse.all().await;
    let after: Vec<_> = live
        .iter()
        .filter(|f| f.id.is_none_or(|i| i > k))
        .cloned()
        .collect();
    assert_eq!(wire(&resumed), wire(&after));

    let (code, log) = serve.stop().await;
    assert_eq!(code, Some(0), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_via_bridge_starts_a_stopped_bridge_with_the_real_droid() {
    let w = World::new().await;
    let repo = w.repo("repo");
    w.model.set_script(json!([
        {"tool": [{"name": "Create", "args": {"file_path": s(&repo.join("b.txt")), "content": "b\n"}}]},
        {"text": "Created b.txt."}
    ]));
    let port = free_port();
    let daemon = DaemonGuard::new(&w.store(), port);
    let p = port.to_string();
    let out = droid_executor(&["bridge", "status", "--port", &p], &w.env(), w.path()).await;
    assert_eq!(out.code, Some(3), "{out:#?}");

    let repo_arg = s(&repo);
    let model = w.model_id();
    let out = droid_executor(
        &[
            "run",
            "--via",
            "bridge",
            "--bridge-port",
            &p,
            "--json",
            "--repo",
            &repo_arg,
            "--model",
            &model,
            "--command",
            "test -f b.txt",
            "Create b.txt",
        ],
        &w.env(),
        w.path(),
    )
    .await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    let pid = pid_in(&out.stderr);
    daemon.saw(pid);
    assert_eq!(
        out.stderr,
        format!("droid-executor: started the bridge on http://127.0.0.1:{port} (pid {pid})\n")
    );
    let result = out.result();
    assert_eq!(result.status, Status::Success, "{result:#?}");
    assert_eq!(result.files_changed, b_added());
    assert_eq!(result.tests.passed, Some(true));
    assert_eq!(
        result.droid.as_ref().and_then(|d| d.version.as_deref()),
        Some("0.225.2")
    );
    assert_eq!(daemon.pid(), Some(pid));
    assert!(is_alive(pid), "the bridge {pid} is not running");

    let out = droid_executor(&["bridge", "stop", "--port", &p], &w.env(), w.path()).await;
    assert_eq!(out.code, Some(0), "{out:#?}");
    assert_eq!(out.stdout, format!("bridge stopped (pid {pid})\n"));
    assert!(
        wait_gone(pid, GONE_LIMIT).await,
        "the bridge {pid} survived"
    );
    assert!(
        !daemon.pid_file().exists(),
        "the pid file outlived the bridge"
    );
    let out = droid_executor(&["bridge", "status", "--port", &p], &w.env(), w.path()).await;
    assert_eq!(out.code, Some(3), "{out:#?}");
}
