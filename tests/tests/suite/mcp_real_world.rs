//! What the interop suites with real third-party MCP clients share (`mcp_node`: the TypeScript
//! SDKs and the Inspector CLIs; `mcp_python`: the Python SDK): a [`RealWorld`] in which
//! `droid-executor mcp` runs the REAL droid 0.225.2 against a [`ScriptedModel`], a
//! [`ClientProcess`] harness for a client printing JSON lines, the checks of the answers every
//! client must get (the same tool results, whatever the client), and [`no_survivors`].
//!
//! Every process of a session carries [`SESSION_VAR`] with a marker no other session uses (the
//! config passes it through to droid), which is how a suite checks, and on failure kills, by pid,
//! whatever a session left behind.

use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tests::droid_bin::real_droid;
use tests::droid_home::DroidHome;
use tests::scripted_model::ScriptedModel;
use tokio::io::{AsyncBufReadExt as _, AsyncReadExt as _, AsyncWriteExt as _, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::binary::git_repo_at;

/// One whole client session (droid_pend waits up to 60 s by itself).
const SESSION_LIMIT: Duration = Duration::from_secs(180);
/// How long the session's processes may take to go once the client has exited (the server exits
/// within 2 s of stdin EOF, after killing its runs; a finished task's supervisor exits by itself).
const EXIT_LIMIT: Duration = Duration::from_secs(10);
/// Passed through to droid (config `env_passthrough`), so every process of a session carries it:
/// the client, the server, task supervisors and droid.
pub(super) const SESSION_VAR: &str = "MCP_INTEROP_SESSION";
use super::mcp_stdio::TOOLS;

/// A scripted model, a droid HOME pointing at it (also the binary's HOME, holding the
/// repositories and the task store, with a config passing [`SESSION_VAR`] through to droid).
pub(super) struct RealWorld {
    pub(super) model: ScriptedModel,
    pub(super) home: DroidHome,
}

impl RealWorld {
    /// A model with a placeholder script (each flow sets its own) and its droid HOME.
    pub(super) async fn new() -> RealWorld {
        // repositories are named in scripts, so the home exists before the script
        let model = ScriptedModel::start(json!([{"text": "placeholder"}]))
            .await
            .unwrap();
        let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
        let config = home.path().join(".config/droid-executor");
        std::fs::create_dir_all(&config).unwrap();
        std::fs::write(
            config.join("config.toml"),
            format!("env_passthrough = [\"{SESSION_VAR}\"]\n"),
        )
        .unwrap();
        RealWorld { model, home }
    }

    /// A git repository `name` in the home.
    pub(super) fn repo(&self, name: &str) -> PathBuf {
        let dir = self.home.path().join(name);
        git_repo_at(&dir, &[("a.txt", "hello\n")]);
        dir
    }

    /// `execute_droid_task` / `droid_submit` arguments for `objective` in `repo`, on the
    /// scripted model.
    pub(super) fn request(&self, repo: &Path, objective: &str) -> Value {
        json!({
            "objective": objective,
            "context": {"repo_root": repo},
            "model": self.home.model_id("Mock"),
            "max_runtime_seconds": 60,
        })
    }

    /// droid's environment, the real droid, and a fresh session marker.
    pub(super) fn env(&self) -> (Vec<(OsString, OsString)>, String) {
        let marker = session_marker(self.home.path());
        let mut env = self.home.env();
        env.push(("DROID_CLI_CMD".into(), real_droid().into()));
        env.push((SESSION_VAR.into(), marker.clone().into()));
        // `fixture/` holds what the tests' commands leave for them (pid files): granted
        let fixture = self.home.path().join("fixture");
        std::fs::create_dir_all(&fixture).unwrap();
        env.push(("DROID_EXECUTOR_SANDBOX_WRITABLE".into(), fixture.into()));
        (env, marker)
    }
}

/// A marker no other session uses.
pub(super) fn session_marker(home: &Path) -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!(
        "{}-{}",
        home.display(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Arguments naming a repository that does not exist.
pub(super) fn missing_repo(path: &Path) -> Value {
    json!({"objective": "Say done.", "context": {"repo_root": path}})
}

/// The scripted model: droid creates `name` in `repo` (`b\n`), then says so.
pub(super) fn create_file(repo: &Path, name: &str) -> Value {
    json!([
        {"tool": [{"name": "Create", "args": {"file_path": repo.join(name), "content": "b\n"}}]},
        {"text": format!("Created {name}.")}
    ])
}

/// The `list` scenario's answer: the negotiated `version`, the server and every tool.
pub(super) fn assert_listed(out: &Value, version: &str) {
    assert_eq!(out["protocolVersion"], version, "{out:#}");
    assert_eq!(out["server"]["name"], "droid-executor", "{out:#}");
    assert_tools(&out["tools"]);
}

/// The five tools in order, each with a title, a description, annotations, and input and
/// output schemas that are objects.
pub(super) fn assert_tools(tools: &Value) {
    let list = tools
        .as_array()
        .unwrap_or_else(|| panic!("no tools: {tools:#}"));
    let names: Vec<&str> = list.iter().filter_map(|t| t["name"].as_str()).collect();
    assert_eq!(names, TOOLS, "{tools:#}");
    for tool in list {
        let name = &tool["name"];
        for key in ["title", "description"] {
            assert!(
                tool[key].as_str().is_some_and(|s| !s.is_empty()),
                "{name}: no {key}: {tool:#}"
            );
        }
        assert!(tool["annotations"].is_object(), "{name}: {tool:#}");
        for key in ["inputSchema", "outputSchema"] {
            assert_eq!(tool[key]["type"], "object", "{name}: {key}: {tool:#}");
        }
    }
    assert_eq!(
        list[0]["inputSchema"]["required"],
        json!(["objective", "context"]),
        "{tools:#}"
    );
}

/// The `execute_droid_task` result of [`create_file`] `b.txt`: success, with the file measured
/// from the repository.
pub(super) fn assert_created_b_txt(result: &Value) {
    assert_eq!(result["isError"], false, "{result:#}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["status"], "success", "{result:#}");
    assert_eq!(sc["issues"], json!([]), "{result:#}");
    assert_eq!(
        sc["files_changed"],
        json!([{
            "path": "b.txt",
            "change_type": "added",
            "old_path": null,
            "highlights": ["created by droid (1 line)"],
            "lines_added": 1,
            "lines_removed": 0,
        }]),
        "{result:#}"
    );
    // droid gets SIGTERM at its completion event and the result does not wait for its exit: 0
    // (it exits 0 on SIGTERM) when it was already reaped, null when it was still stopping
    assert!(
        [json!(0), Value::Null].contains(&sc["droid"]["exit_code"]),
        "{result:#}"
    );
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(text.starts_with("status: success\n"), "{result:#}");
}

/// The `execute` scenario's progress: notifications each echoing the request id as the token
/// (SDKs use the id, an integer), `progress` strictly increasing, a message each, droid's start
/// and its `Create` of `b.txt` in `repo` among them; the SDK handed them to the callback in order (all but, at most, the last two).
pub(super) fn assert_progress(out: &Value, repo: &Path) {
    let on_wire = out["progressNotifications"]
        .as_array()
        .unwrap_or_else(|| panic!("{out:#}"));
    assert!(!on_wire.is_empty(), "no progress notification: {out:#}");
    assert!(out["requestId"].is_i64(), "{out:#}");
    let mut last = f64::NEG_INFINITY;
    for n in on_wire {
        let params = &n["params"];
        assert_eq!(params["progressToken"], out["requestId"], "{n:#}");
        let progress = params["progress"].as_f64().unwrap_or(f64::NAN);
        assert!(progress > last, "progress does not increase: {on_wire:#?}");
        last = progress;
        assert!(
            params["message"].as_str().is_some_and(|m| !m.is_empty()),
            "{n:#}"
        );
    }
    let handed: Vec<Value> = on_wire
        .iter()
        .map(|n| {
            let mut p = n["params"].clone();
            p.as_object_mut().unwrap().remove("progressToken");
            numbers_as_floats(p)
        })
        .collect();
    let got: Vec<Value> = out["progress"]
        .as_array()
        .unwrap_or_else(|| panic!("no progress handed to the callback: {out:#}"))
        .iter()
        .cloned()
        .map(numbers_as_floats)
        .collect();
    // every notification the SDK handed over is one from the wire, in order; the last few may
    // be missing: TS SDK 1.32 dispatches a notification in a microtask but a response at once,
    // dropping its progress handler, so progress that arrives in the same read as the result
    // (the result now follows "reading the repository" within a millisecond) is reported to
    // the client's onerror as an unknown token instead (protocol.js, `_onnotification`)
    assert!(
        got.len() <= handed.len() && handed[..got.len()] == got[..],
        "{out:#}"
    );
    assert!(
        got.len() + 2 >= handed.len(),
        "more than the trailing progress was lost: {out:#}"
    );
    // droid's own events come through
    let messages: Vec<&str> = on_wire
        .iter()
        .filter_map(|n| n["params"]["message"].as_str())
        .collect();
    assert!(
        messages
            .iter()
            .any(|m| m.starts_with("droid started (pid ")),
        "{messages:#?}"
    );
    let create = format!("Create {}", repo.join("b.txt").display());
    assert!(messages.contains(&create.as_str()), "{messages:#?}");
}

/// Progress params with `progress` and `total` as floats: the Python SDK hands its callback
/// floats (`1.0`) for the wire's integers (`1`), the TypeScript SDKs hand them on as they came.
fn numbers_as_floats(mut params: Value) -> Value {
    for key in ["progress", "total"] {
        if let Some(n) = params.get(key).and_then(Value::as_f64) {
            params[key] = json!(n);
        }
    }
    params
}

/// An `isError` result for a repo_root that does not exist, saying what to fix.
pub(super) fn assert_missing_repo(result: &Value, path: &Path) {
    assert_eq!(result["isError"], true, "{result:#}");
    let sc = &result["structuredContent"];
    assert_eq!(sc["status"], "error", "{result:#}");
    assert_eq!(
        sc["issues"],
        json!([{
            "type": "validation_error",
            "description": format!("$.context.repo_root: \"{}\" does not exist", path.display()),
            "suggested_action": "fix $.context.repo_root and send the request again",
        }]),
        "{result:#}"
    );
    let text = result["content"][0]["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("does not exist -> fix $.context.repo_root"),
        "{result:#}"
    );
}

/// The task id of a `droid_submit` result.
pub(super) fn submitted(result: &Value) -> String {
    assert_eq!(result["isError"], false, "{result:#}");
    let task_id = result["structuredContent"]["task_id"]
        .as_str()
        .unwrap_or_else(|| panic!("no task_id: {result:#}"))
        .to_owned();
    assert_eq!(
        result["structuredContent"],
        json!({"task_id": task_id}),
        "{result:#}"
    );
    task_id
}

/// A `droid_pend` result: task `task_id` finished with success.
pub(super) fn assert_pended(result: &Value, task_id: &str) {
    assert_eq!(result["isError"], false, "{result:#}");
    let rec = &result["structuredContent"];
    assert_eq!(rec["task_id"], task_id, "{result:#}");
    assert_eq!(rec["state"], "success", "{result:#}");
    assert_eq!(rec["result"]["status"], "success", "{result:#}");
    assert_eq!(rec["result"]["task_id"], task_id, "{result:#}");
}

/// Waits until no process carries `SESSION_VAR=marker`, failing after [`EXIT_LIMIT`].
pub(super) async fn no_survivors(marker: &str) {
    tests::procs::no_survivors_of(SESSION_VAR, marker, EXIT_LIMIT, "the session").await;
}

/// What a client process gave.
#[derive(Debug)]
pub(super) struct Out {
    pub(super) code: Option<i32>,
    pub(super) stdout: String,
    pub(super) stderr: String,
}

impl Out {
    /// stdout as one JSON value.
    pub(super) fn json(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|e| panic!("stdout is not one JSON value ({e}): {self:#?}"))
    }
}

/// A client (a Node or Python script, an Inspector CLI) in its own process group, stdin piped,
/// stdout read line by line, stderr collected. Dropping it kills the group (the client and the
/// server it started), so a failing test leaves nothing running.
pub(super) struct ClientProcess {
    child: Child,
    pgid: Pid,
    stdin: Option<ChildStdin>,
    stdout: Lines<BufReader<ChildStdout>>,
    /// Every stdout line read so far.
    seen: Vec<String>,
    stderr: Arc<Mutex<Vec<u8>>>,
    deadline: Instant,
    /// Set once the client has exited and been reaped: what is left is for the suite to judge.
    exited: bool,
}

impl ClientProcess {
    /// `program ARGS` with exactly `env`, in `cwd`.
    #[allow(clippy::disallowed_methods)] // the suite runs third-party clients, not droid
    pub(super) fn start<S: AsRef<OsStr>>(
        program: &Path,
        args: &[S],
        env: &[(OsString, OsString)],
        cwd: &Path,
    ) -> ClientProcess {
        let mut child = tokio::process::Command::new(program)
            .args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(cwd)
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .unwrap_or_else(|e| panic!("could not start {}: {e}", program.display()));
        let pgid = Pid::from_raw(i32::try_from(child.id().unwrap()).unwrap());
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut pipe = child.stderr.take().unwrap();
        let sink = Arc::clone(&stderr);
        tokio::spawn(async move {
            let mut buf = [0u8; 4096];
            while let Ok(n) = pipe.read(&mut buf).await {
                if n == 0 {
                    return;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        ClientProcess {
            child,
            pgid,
            stdin,
            stdout,
            seen: Vec::new(),
            stderr,
            deadline: Instant::now() + SESSION_LIMIT,
            exited: false,
        }
    }

    /// Everything it wrote to stderr so far.
    fn stderr(&self) -> String {
        String::from_utf8_lossy(&self.stderr.lock().unwrap()).into_owned()
    }

    /// What the client printed so far, for failure messages.
    pub(super) fn transcript(&self) -> String {
        format!(
            "--- stdout\n{}\n--- stderr\n{}",
            self.seen.join("\n"),
            self.stderr()
        )
    }

    /// Closes its stdin (EOF for a client waiting on it).
    pub(super) fn close_stdin(&mut self) {
        self.stdin = None;
    }

    /// The go-ahead the `cancel` scenario waits for.
    pub(super) async fn send_line(&mut self) {
        self.send("go").await;
    }

    /// Writes `line` and a newline to its stdin (a command for a script waiting on it).
    pub(super) async fn send(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin was closed");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// The next stdout line, as JSON; panics (with the transcript) on EOF, timeout or an
    /// `{"error": …}` line.
    pub(super) async fn next_line(&mut self) -> Value {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let line = match tokio::time::timeout(left, self.stdout.next_line()).await {
            Ok(Ok(Some(line))) => line,
            Ok(_) => panic!("the client's stdout ended early\n{}", self.transcript()),
            Err(_) => panic!(
                "the client printed nothing more within {SESSION_LIMIT:?}\n{}",
                self.transcript()
            ),
        };
        self.seen.push(line.clone());
        let value: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("a stdout line is not JSON ({e})\n{}", self.transcript()));
        assert!(
            value.get("error").is_none(),
            "the client failed\n{}",
            self.transcript()
        );
        value
    }

    /// The next stdout line, which must be `expected`.
    pub(super) async fn expect_line(&mut self, expected: &Value) {
        let line = self.next_line().await;
        assert_eq!(&line, expected, "{}", self.transcript());
    }

    /// Waits for the exit; everything it printed.
    pub(super) async fn finish(mut self) -> Out {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let mut rest = Vec::new();
        let read_rest = async {
            while let Ok(Some(line)) = self.stdout.next_line().await {
                rest.push(line);
            }
            self.child.wait().await
        };
        let status: ExitStatus = match tokio::time::timeout(left, read_rest).await {
            Ok(status) => status.unwrap(),
            Err(_) => panic!(
                "the client did not exit within {SESSION_LIMIT:?}\n{}",
                self.transcript()
            ),
        };
        self.exited = true;
        self.seen.extend(rest);
        Out {
            code: status.code(),
            stdout: self.seen.join("\n"),
            stderr: self.stderr(),
        }
    }

    /// Waits for the exit, which must be 0 with nothing more printed.
    pub(super) async fn finish_ok(mut self) {
        self.close_stdin();
        let printed = self.seen.len();
        let out = self.finish().await;
        let more: Vec<&str> = out.stdout.lines().skip(printed).collect();
        assert!(
            out.code == Some(0) && more.is_empty(),
            "the client did not end cleanly: {out:#?}"
        );
    }
}

impl Drop for ClientProcess {
    fn drop(&mut self) {
        // the client and the server it started (same group) when the test failed before the
        // client exited; droid runs have their own groups and are killed by the server, or by a
        // Reaper / no_survivors on a failed test
        if !self.exited {
            let _ = killpg(self.pgid, Signal::SIGKILL);
        }
    }
}
