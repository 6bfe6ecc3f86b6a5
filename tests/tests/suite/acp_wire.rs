//! `droid-executor acp` on the wire, driven line by line (no SDK) through the REAL droid 0.225.2
//! on the scripted model: what an ACP client sees, byte for byte, in the cases an SDK hides —
//! protocol faults (an invalid JSON line gets `-32700`, never silence; a batch `-32600`; an
//! unknown method `-32601`; an unknown session `-32004`; droid missing `-32001` with the install
//! hint), version negotiation (`1` for a client asking 2), modes capped by `max_autonomy`,
//! `set_config_option` answering the complete list, a turn's tool calls with their diffs and the
//! end-of-turn measured changes with the verification commands' verdict, cancellation of a
//! running command (`stopReason: cancelled`, the command gone, the session usable), a model
//! error and a droid crash mid-turn (errors, said in the chat too, and the session goes on),
//! stored sessions listed and loaded with their history replayed, and no process left once
//! stdin closes. Issue 33: each turn reports exactly what it changed, and only when it changed
//! something; the mode and the model survive a restart, resume and load; the client's MCP
//! servers, slash commands, images and `usage_update`.
//!
//! Every process of a session carries a marker variable (config `env_passthrough`), which is how
//! the tests check, and on failure kill, what is left.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tests::droid_bin::{droid_executor_bin, real_droid};
use tests::droid_home::DroidHome;
use tests::procs::{is_alive, pids_with_env};
use tests::scripted_model::ScriptedModel;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::binary::git_repo_at;

/// Passed through to droid, so every process of a connection carries it.
const MARK_VAR: &str = "ACP_WIRE_SESSION";
/// How long one message may take (droid starts in ~0.4 s; the machine may be loaded).
const WAIT: Duration = Duration::from_secs(120);

/// A scripted model, a droid HOME pointing at it (also the agent's HOME, holding the
/// repositories), and a config.
struct World {
    model: ScriptedModel,
    home: DroidHome,
    marker: String,
}

impl World {
    async fn new(config: &str) -> World {
        let model = ScriptedModel::start(json!([{"text": "placeholder"}]))
            .await
            .unwrap();
        let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
        let dir = home.path().join(".config/droid-executor");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            format!("env_passthrough = [\"{MARK_VAR}\"]\n{config}"),
        )
        .unwrap();
        let marker = format!("{}", home.path().display());
        World {
            model,
            home,
            marker,
        }
    }

    fn repo(&self, name: &str) -> PathBuf {
        let dir = self.home.path().join(name);
        git_repo_at(&dir, &[("a.txt", "hello\n")]);
        std::fs::canonicalize(dir).unwrap()
    }

    fn env(&self, droid: &Path) -> Vec<(OsString, OsString)> {
        let mut env = self.home.env();
        env.push(("DROID_CLI_CMD".into(), droid.into()));
        env.push((MARK_VAR.into(), self.marker.clone().into()));
        env
    }

    /// Live processes of this world other than the test itself.
    fn processes(&self) -> Vec<i32> {
        let me = i32::try_from(std::process::id()).unwrap();
        pids_with_env(MARK_VAR, &self.marker)
            .into_iter()
            .filter(|p| *p != me)
            .collect()
    }

    /// A process of this world whose command line contains `needle`, waited for.
    async fn wait_for(&self, needle: &str) -> i32 {
        let deadline = tokio::time::Instant::now() + WAIT;
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
                "no process {needle:?}: {}",
                describe(&self.processes())
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn none_left(&self) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        loop {
            let left = self.processes();
            if left.is_empty() {
                return;
            }
            if tokio::time::Instant::now() > deadline {
                for p in &left {
                    let _ = nix::sys::signal::kill(
                        nix::unistd::Pid::from_raw(*p),
                        nix::sys::signal::Signal::SIGKILL,
                    );
                }
                panic!("processes left: {}", describe(&left));
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
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

/// A raw ACP client over the agent's pipes.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every line, in order: `(">>" | "<<", line)`.
    transcript: Vec<(&'static str, String)>,
    /// `session/update` params, in order.
    updates: Vec<Value>,
    /// Permission requests seen.
    asked: Vec<Value>,
    /// Responses read while waiting for another.
    responses: Vec<Value>,
    /// The options chosen for the next permission requests, in order (then `allow_once`);
    /// this agent's option ids are their kinds; `never`: no answer at all.
    answers: std::collections::VecDeque<&'static str>,
    next: u64,
}

impl Client {
    #[allow(clippy::disallowed_methods)] // the suite starts the binary under test
    fn start(world: &World, env: &[(OsString, OsString)]) -> Client {
        let mut child = tokio::process::Command::new(droid_executor_bin())
            .arg("acp")
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .current_dir(world.home.path())
            .process_group(0)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let lines = BufReader::new(child.stdout.take().unwrap()).lines();
        Client {
            child,
            stdin,
            lines,
            transcript: Vec::new(),
            updates: Vec::new(),
            asked: Vec::new(),
            responses: Vec::new(),
            answers: std::collections::VecDeque::new(),
            next: 0,
        }
    }

    fn dump(&self) -> String {
        self.transcript
            .iter()
            .map(|(d, l)| format!("{d} {l}"))
            .collect::<Vec<_>>()
            .join("\n")
    }

    async fn raw(&mut self, line: &str) {
        self.transcript.push((">>", line.to_owned()));
        let stdin = self.stdin.as_mut().expect("stdin closed");
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    async fn send_request(&mut self, method: &str, params: Value) -> u64 {
        self.next += 1;
        let id = self.next;
        let line = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.raw(&line.to_string()).await;
        id
    }

    async fn notify(&mut self, method: &str, params: Value) {
        let line = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.raw(&line.to_string()).await;
    }

    /// The next message from the agent (permission requests answered on the way).
    async fn next_message(&mut self) -> Value {
        let line = match tokio::time::timeout(WAIT, self.lines.next_line()).await {
            Ok(Ok(Some(l))) => l,
            other => panic!("no line from the agent ({other:?})\n{}", self.dump()),
        };
        self.transcript.push(("<<", line.clone()));
        let v: Value = serde_json::from_str(&line)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {line}\n{}", self.dump()));
        if v["method"] == "session/update" {
            self.updates.push(v["params"].clone());
        }
        if v["method"] == "session/request_permission" {
            self.asked.push(v["params"].clone());
            let option = self.answers.pop_front().unwrap_or("allow_once");
            if option == "never" {
                // a client that never answers
                return v;
            }
            let reply = json!({"jsonrpc": "2.0", "id": v["id"], "result": {"outcome": {"outcome": "selected", "optionId": option}}});
            self.raw(&reply.to_string()).await;
        }
        v
    }

    /// Wait for the response to `id`.
    async fn response(&mut self, id: u64) -> Value {
        if let Some(i) = self.responses.iter().position(|r| r["id"] == id) {
            return self.responses.remove(i);
        }
        loop {
            let m = self.next_message().await;
            if m.get("method").is_none() && m.get("id").is_some() {
                if m["id"] == id {
                    return m;
                }
                self.responses.push(m);
            }
        }
    }

    async fn call(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params).await;
        self.response(id).await
    }

    async fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params).await;
        assert!(r.get("error").is_none(), "{method}: {r}\n{}", self.dump());
        r["result"].clone()
    }

    async fn init(&mut self) -> Value {
        self.ok(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false}}),
        )
        .await
    }

    async fn new_session(&mut self, cwd: &Path, meta: Value) -> String {
        let mut params = json!({"cwd": cwd, "mcpServers": []});
        if !meta.is_null() {
            params["_meta"] = meta;
        }
        let r = self.ok("session/new", params).await;
        r["sessionId"].as_str().unwrap().to_owned()
    }

    async fn prompt(&mut self, sid: &str, text: &str) -> Value {
        self.call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
        )
        .await
    }

    /// Read until a tool call of `sid` is in progress.
    async fn until_in_progress(&mut self, sid: &str) {
        while !self
            .of_kind(sid, "tool_call_update")
            .iter()
            .any(|u| u["status"] == "in_progress")
        {
            let _ = self.next_message().await;
        }
    }

    /// The updates of session `sid` of kind `kind`.
    fn of_kind(&self, sid: &str, kind: &str) -> Vec<Value> {
        self.updates
            .iter()
            .filter(|u| u["sessionId"] == sid && u["update"]["sessionUpdate"] == kind)
            .map(|u| u["update"].clone())
            .collect()
    }

    /// Close stdin and wait for the agent to exit.
    async fn finish(mut self) {
        self.stdin = None;
        match tokio::time::timeout(Duration::from_secs(15), self.child.wait()).await {
            Ok(Ok(status)) => assert!(status.success(), "exit {status}"),
            other => panic!("the agent did not exit after stdin closed: {other:?}"),
        }
    }
}

fn error_code(r: &Value) -> i64 {
    r["error"]["code"]
        .as_i64()
        .unwrap_or_else(|| panic!("not an error: {r}"))
}

/// An invalid JSON line is answered `-32700` (droid's own ACP mode drops it silently), a batch
/// `-32600`, an unknown method `-32601`, a prompt to an unknown session `-32004`; `initialize`
/// asking for version 2 gets 1; modes stop at `max_autonomy`; `set_config_option` answers the
/// complete list and refuses a model droid does not offer; `session/new` refuses a relative
/// cwd, one outside `allowed_roots` and a missing `mcpServers`, each naming the problem, and
/// says which of the client's MCP servers it did not pass to droid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn protocol_faults_get_named_errors_and_never_silence() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("faults");
    let mut c = Client::start(&world, &world.env(&droid));

    c.raw("this is not json").await;
    let m = c.next_message().await;
    assert_eq!(
        (m["id"].clone(), error_code(&m)),
        (Value::Null, -32700),
        "{m}"
    );
    c.raw(r#"[{"jsonrpc":"2.0","id":1,"method":"initialize"}]"#)
        .await;
    assert_eq!(error_code(&c.next_message().await), -32600);

    let init = c
        .ok(
            "initialize",
            json!({"protocolVersion": 2, "clientCapabilities": {}}),
        )
        .await;
    assert_eq!(init["protocolVersion"], 1);
    assert_eq!(init["agentCapabilities"]["loadSession"], true);
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["embeddedContext"],
        true
    );
    let methods: Vec<&str> = init["authMethods"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(methods, vec!["factory-api-key", "custom-models"]);
    assert!(
        c.ok("authenticate", json!({"methodId": "custom-models"}))
            .await
            .is_object()
    );
    let r = c
        .call("authenticate", json!({"methodId": "factory-api-key"}))
        .await;
    assert_eq!(error_code(&r), -32002, "{r}");

    let r = c.call("session/fork", json!({})).await;
    assert_eq!(error_code(&r), -32601);
    let r = c
        .call(
            "session/prompt",
            json!({"sessionId": "nope", "prompt": [{"type": "text", "text": "x"}]}),
        )
        .await;
    assert_eq!(error_code(&r), -32004);
    let r = c
        .call("session/new", json!({"cwd": "rel/dir", "mcpServers": []}))
        .await;
    assert_eq!(error_code(&r), -32602);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("absolute"),
        "{r}"
    );
    let r = c
        .call("session/new", json!({"cwd": "/", "mcpServers": []}))
        .await;
    assert_eq!(error_code(&r), -32602);
    assert!(
        r["error"]["message"].as_str().unwrap().contains("allowed"),
        "{r}"
    );
    let r = c.call("session/new", json!({"cwd": repo})).await;
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mcpServers"),
        "{r}"
    );

    let r = c
        .call(
            "session/new",
            json!({"cwd": repo, "mcpServers": [{"name": "fs", "args": []}]}),
        )
        .await;
    assert_eq!(error_code(&r), -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("mcpServers[0].command"),
        "{r}"
    );
    let server =
        json!({"type": "sse", "name": "fs", "url": "http://127.0.0.1:9/sse", "headers": []});
    let s = c
        .ok("session/new", json!({"cwd": repo, "mcpServers": [server]}))
        .await;
    // an sse server is not passed to droid (mcpCapabilities says so), and said so
    assert_eq!(
        s["_meta"]["droidExecutor"]["mcpServersNotPassed"],
        json!(["fs"])
    );
    assert!(!world.home.path().join(".factory/mcp.json").exists());
    let sid = s["sessionId"].as_str().unwrap().to_owned();
    // max_autonomy defaults to medium: no `high` mode
    let modes: Vec<&str> = s["modes"]["availableModes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["id"].as_str().unwrap())
        .collect();
    assert_eq!(modes, vec!["read_only", "low", "medium"]);
    assert_eq!(s["modes"]["currentModeId"], "read_only");
    let r = c
        .call(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "high"}),
        )
        .await;
    assert_eq!(error_code(&r), -32602);
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("max_autonomy"),
        "{r}"
    );
    let model = world.home.model_id("Mock");
    let r = c
        .ok(
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "model", "value": model}),
        )
        .await;
    let ids: Vec<&str> = r["configOptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec!["mode", "model", "reasoning_effort"]);
    assert_eq!(r["configOptions"][1]["currentValue"], model);
    let r = c
        .call(
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "model", "value": "custom:Nope-0"}),
        )
        .await;
    assert_eq!(error_code(&r), -32602);
    let r = c
        .ok(
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "mode", "value": "medium"}),
        )
        .await;
    assert_eq!(r["configOptions"][0]["currentValue"], "medium");
    let r = c
        .call("session/prompt", json!({"sessionId": sid, "prompt": [{"type": "image", "data": "", "mimeType": "image/png"}]}))
        .await;
    assert_eq!(error_code(&r), -32602);
    assert!(
        c.ok("session/close", json!({"sessionId": sid}))
            .await
            .is_object()
    );
    let r = c.prompt(&sid, "x").await;
    assert_eq!(error_code(&r), -32004);
    c.finish().await;
    world.none_left().await;
}

/// droid missing: `session/new` answers `-32001` whose data says how to install droid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_missing_is_32001_with_the_install_hint() {
    let world = World::new("").await;
    let repo = world.repo("missing");
    let missing = world.home.path().join("no-such-droid");
    let mut c = Client::start(&world, &world.env(&missing));
    c.init().await;
    let r = c
        .call("session/new", json!({"cwd": repo, "mcpServers": []}))
        .await;
    assert_eq!(error_code(&r), -32001, "{r}");
    assert!(
        r["error"]["data"]["install"]
            .as_str()
            .unwrap()
            .contains("npm install"),
        "{r}"
    );
    c.finish().await;
}

/// A turn in mode `medium` (nothing asked): droid creates one file and edits another; the
/// client sees message chunks, tool calls with their diffs, and at the end one more tool call
/// with the changes measured from the repository (both files, the edited one's text before
/// and after) and the verification commands' verdicts, `failed` since one of them fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_ends_with_the_measured_changes_and_the_verification() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("measured");
    world.model.set_script(json!([
        {"text": "Creating and editing now.", "tool": [
            {"name": "Create", "args": {"file_path": repo.join("b.txt"), "content": "bee\n"}},
            {"name": "Edit", "args": {"file_path": repo.join("a.txt"), "old_str": "hello", "new_str": "hello world"}}
        ]},
        {"text": "Both done.", "split_text": true}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c
        .new_session(
            &repo,
            json!({"droidExecutor": {"verify": ["test -f b.txt", "grep -q nothing a.txt"]}}),
        )
        .await;
    c.ok(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "medium"}),
    )
    .await;
    let r = c.prompt(&sid, "make the files").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    assert!(
        c.asked.is_empty(),
        "medium asks nothing here: {:?}",
        c.asked
    );
    let chunks: String = c
        .of_kind(&sid, "agent_message_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert!(chunks.contains("Both done."), "{chunks}");
    assert!(
        c.of_kind(&sid, "agent_message_chunk").len() >= 3,
        "streamed word by word"
    );
    let calls = c.of_kind(&sid, "tool_call");
    let create = calls
        .iter()
        .find(|t| t["title"] == "Create b.txt")
        .expect("Create");
    assert_eq!(create["kind"], "edit");
    assert_eq!(create["content"][0]["type"], "diff");
    assert_eq!(create["content"][0]["newText"], "bee\n");
    let edit = calls
        .iter()
        .find(|t| t["title"] == "Edit a.txt")
        .expect("Edit");
    // where the edit lands, for a client following the agent
    assert_eq!(edit["locations"][0]["line"], 1, "{edit}");
    let measured = calls
        .iter()
        .find(|t| t["toolCallId"].as_str().unwrap().starts_with("measured-"))
        .expect("the measured-changes tool call");
    assert_eq!(
        measured["status"], "failed",
        "a verification command failed: {measured}"
    );
    let files = &measured["rawOutput"]["filesChanged"];
    assert_eq!(files[0]["path"], "a.txt");
    assert_eq!(files[0]["changeType"], "modified");
    assert_eq!(files[1]["path"], "b.txt");
    assert_eq!(files[1]["changeType"], "added");
    let diff_a = measured["content"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == "diff" && c["path"].as_str().unwrap().ends_with("/a.txt"))
        .expect("a diff of a.txt");
    assert_eq!(diff_a["oldText"], "hello\n");
    assert_eq!(diff_a["newText"], "hello world\n");
    let tests = &measured["rawOutput"]["tests"];
    assert_eq!(tests["passed"], false);
    assert_eq!(tests["runs"][0]["exitCode"], 0);
    assert_eq!(tests["runs"][1]["exitCode"], 1);
    assert_eq!(measured["_meta"]["droidExecutor"]["filesChanged"], *files);
    c.finish().await;
    world.none_left().await;
}

/// `session/cancel` while droid runs a command: the prompt answers `stopReason: cancelled`, the
/// command (in its own session, as droid runs them) is gone while droid stays for the next
/// prompt, which works; closing stdin then ends droid too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_the_turn_and_what_it_started_and_the_session_goes_on() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("cancel");
    world.model.set_script(json!([
        {"text": "Waiting.", "tool": [{"name": "Execute", "args": {"command": "sleep 300", "riskLevel": "low", "riskLevelReason": "harmless"}}]},
        {"text": "Next answer."}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    c.ok(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "medium"}),
    )
    .await;
    let id = c
        .send_request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}),
        )
        .await;
    // until the command runs
    c.until_in_progress(&sid).await;
    let sleeper = world.wait_for("sleep\u{0}300").await;
    c.notify("session/cancel", json!({"sessionId": sid})).await;
    let r = c.response(id).await;
    assert_eq!(r["result"]["stopReason"], "cancelled", "{}", c.dump());
    assert!(!is_alive(sleeper), "the turn's command is still running");
    assert!(
        !world.processes().is_empty(),
        "droid stays for the next prompt"
    );
    let r = c.prompt(&sid, "again").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    c.finish().await;
    world.none_left().await;
}

/// A model error (HTTP 400, which droid does not retry) ends the turn with a JSON-RPC error
/// naming it, and the cause goes out as message text before it, in our words (issue 33 item 4:
/// some clients never show an error's message); the session goes on. droid killed mid-turn ends
/// the turn with `-32006`, said in the chat too; the next prompt restarts droid on the stored
/// session and works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_error_and_a_droid_crash_end_the_turn_and_the_session_goes_on() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("errors");
    world.model.set_script(json!([
        {"status": 400, "error_message": "Bad request: invalid parameter"}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    let r = c.prompt(&sid, "fail please").await;
    assert_eq!(error_code(&r), -32005, "{}", c.dump());
    assert!(
        r["error"]["message"].as_str().unwrap().contains("400")
            || r["error"]["message"]
                .as_str()
                .unwrap()
                .contains("invalid parameter"),
        "{r}"
    );
    let said = |c: &Client| {
        c.of_kind(&sid, "agent_message_chunk")
            .last()
            .map(|u| u["content"]["text"].as_str().unwrap_or("").to_owned())
            .unwrap_or_default()
    };
    assert!(
        said(&c).starts_with(
            "This turn failed: the model refused droid's request (400 Bad request: invalid \
             parameter)."
        ),
        "{}",
        c.dump()
    );

    world.model.set_script(json!([
        {"text": "Waiting.", "tool": [{"name": "Execute", "args": {"command": "sleep 300", "riskLevel": "low", "riskLevelReason": "harmless"}}]},
        {"text": "Back again."}
    ]));
    c.ok(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "medium"}),
    )
    .await;
    let id = c
        .send_request(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}),
        )
        .await;
    c.until_in_progress(&sid).await;
    world.wait_for("sleep\u{0}300").await;
    let droid_pid = world.wait_for("stream-jsonrpc").await;
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(droid_pid),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let r = c.response(id).await;
    assert_eq!(error_code(&r), -32006, "{}", c.dump());
    assert!(
        said(&c).contains("This turn failed: droid stopped during it"),
        "{}",
        c.dump()
    );
    world.model.set_script(json!([{"text": "Back again."}]));
    let r = c.prompt(&sid, "are you there").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    c.finish().await;
    world.none_left().await;
}

/// A finished session is listed by `session/list` for its directory, and a new connection's
/// `session/load` replays its conversation (the user's text and droid's answer) before
/// answering with its modes and options; an unknown id is `-32004`; `session/resume` reopens
/// it without the replay.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_sessions_are_listed_and_loaded_with_their_history() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("stored");
    world
        .model
        .set_script(json!([{"text": "Remembered: forty-two."}]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    let r = c.prompt(&sid, "remember 42").await;
    assert_eq!(r["result"]["stopReason"], "end_turn");
    let list = c.ok("session/list", json!({"cwd": repo})).await;
    let ids: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["sessionId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![sid.as_str()], "{list}");
    c.finish().await;

    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let r = c
        .call(
            "session/load",
            json!({"sessionId": "no-such-session", "cwd": repo, "mcpServers": []}),
        )
        .await;
    assert_eq!(error_code(&r), -32004);
    let loaded = c
        .ok(
            "session/load",
            json!({"sessionId": sid, "cwd": repo, "mcpServers": []}),
        )
        .await;
    assert!(loaded["configOptions"].is_array());
    let user = c.of_kind(&sid, "user_message_chunk");
    assert!(
        user.iter().any(|u| u["content"]["text"] == "remember 42"),
        "{}",
        c.dump()
    );
    let agent = c.of_kind(&sid, "agent_message_chunk");
    assert!(
        agent
            .iter()
            .any(|u| u["content"]["text"] == "Remembered: forty-two."),
        "{}",
        c.dump()
    );
    world.model.set_script(json!([{"text": "Still here."}]));
    let r = c.prompt(&sid, "and now").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    c.finish().await;

    // resume: the same, without the replay
    let mut c = Client::start(&world, &world.env(&droid));
    let init = c.init().await;
    assert_eq!(
        init["agentCapabilities"]["sessionCapabilities"]["resume"],
        json!({})
    );
    let resumed = c
        .ok("session/resume", json!({"sessionId": sid, "cwd": repo}))
        .await;
    assert!(resumed["configOptions"].is_array());
    assert!(c.updates.is_empty(), "resume replays nothing: {}", c.dump());
    let r = c.prompt(&sid, "one more").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    c.finish().await;
    world.none_left().await;
}

/// In mode `read_only` every edit and command is asked. A rejected Create fails its tool call,
/// writes nothing, and the turn goes on to `end_turn`; "allow always" for an edit is remembered:
/// the next edit of the session is not asked, a command still is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rejected_tools_fail_and_allow_always_is_remembered() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("perms");
    // one script for the session: the scripted model's turn counts droid's assistant messages
    world.model.set_script(json!([
        {"text": "First.", "tool": [{"name": "Create", "args": {"file_path": repo.join("no.txt"), "content": "no\n"}}]},
        {"text": "Rejected, fine."},
        {"text": "One.", "tool": [{"name": "Create", "args": {"file_path": repo.join("one.txt"), "content": "1\n"}}]},
        {"text": "Two.", "tool": [{"name": "Create", "args": {"file_path": repo.join("two.txt"), "content": "2\n"}}]},
        {"text": "Three.", "tool": [{"name": "Execute", "args": {"command": "echo hi", "riskLevel": "low", "riskLevelReason": "harmless"}}]},
        {"text": "Done."}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    c.answers.push_back("reject_once");
    let r = c.prompt(&sid, "try").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    assert_eq!(c.asked.len(), 1);
    assert_eq!(c.asked[0]["toolCall"]["kind"], "edit");
    let kinds: Vec<&str> = c.asked[0]["options"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, vec!["allow_once", "allow_always", "reject_once"]);
    assert!(!repo.join("no.txt").exists());
    let failed = c.of_kind(&sid, "tool_call_update");
    assert!(
        failed
            .iter()
            .any(|u| u["toolCallId"] == "call_0_0" && u["status"] == "failed"),
        "{}",
        c.dump()
    );

    c.asked.clear();
    c.answers.push_back("allow_always");
    let r = c.prompt(&sid, "write two files").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    assert!(
        repo.join("one.txt").exists() && repo.join("two.txt").exists(),
        "{}",
        c.dump()
    );
    let asked: Vec<&str> = c
        .asked
        .iter()
        .map(|a| a["toolCall"]["kind"].as_str().unwrap())
        .collect();
    assert_eq!(
        asked,
        vec!["edit", "execute"],
        "the second edit was not asked"
    );
    c.finish().await;
    world.none_left().await;
}

/// Two sessions on one connection run their turns at once, each with its own droid: each
/// turn's command waits until both sessions' commands have started (it can only succeed if the
/// two turns overlap).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_run_at_once() {
    let world = World::new("").await;
    let droid = real_droid();
    let one = world.repo("one");
    let two = world.repo("two");
    let wait_both = "touch .started; for i in $(seq 1 2400); do if [ -f ../one/.started ] && [ -f ../two/.started ]; then echo both; exit 0; fi; sleep 0.05; done; echo alone; exit 1";
    world.model.set_script(json!([
        {"text": "Waiting for the other.", "tool": [{"name": "Execute", "args": {"command": wait_both, "riskLevel": "low", "riskLevelReason": "waits"}}]},
        {"text": "Done."}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let s1 = c.new_session(&one, Value::Null).await;
    let s2 = c.new_session(&two, Value::Null).await;
    assert_ne!(s1, s2);
    for s in [&s1, &s2] {
        c.ok(
            "session/set_mode",
            json!({"sessionId": s, "modeId": "medium"}),
        )
        .await;
    }
    let a = c
        .send_request(
            "session/prompt",
            json!({"sessionId": s1, "prompt": [{"type": "text", "text": "one"}]}),
        )
        .await;
    let b = c
        .send_request(
            "session/prompt",
            json!({"sessionId": s2, "prompt": [{"type": "text", "text": "two"}]}),
        )
        .await;
    let rb = c.response(b).await;
    let ra = c.response(a).await;
    assert_eq!(ra["result"]["stopReason"], "end_turn", "{}", c.dump());
    assert_eq!(rb["result"]["stopReason"], "end_turn", "{}", c.dump());
    for s in [&s1, &s2] {
        let done = c
            .of_kind(s, "tool_call_update")
            .into_iter()
            .find(|u| u["toolCallId"] == "call_0_0" && u["status"] == "completed")
            .unwrap_or_else(|| panic!("no completed command in {s}\n{}", c.dump()));
        assert!(
            done["rawOutput"]["output"]
                .as_str()
                .unwrap()
                .contains("both"),
            "{done}"
        );
    }
    c.finish().await;
    world.none_left().await;
}

/// The model's reasoning streams as `agent_thought_chunk`s (droid's `thinking_text_delta`),
/// before the answer's `agent_message_chunk`s, one per token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_streams_as_thought_chunks_before_the_answer() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("thinking");
    world.model.set_script(json!([
        {"reasoning": "Let me think first", "text": "Hello there", "split_text": true}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    let r = c.prompt(&sid, "think, then greet").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    let kinds: Vec<String> = c
        .updates
        .iter()
        .filter(|u| u["sessionId"] == sid.as_str())
        .map(|u| u["update"]["sessionUpdate"].as_str().unwrap().to_owned())
        .filter(|k| k.ends_with("_chunk"))
        .collect();
    let thoughts: String = c
        .of_kind(&sid, "agent_thought_chunk")
        .iter()
        .map(|u| u["content"]["text"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(thoughts, "Let me think first", "{}", c.dump());
    assert_eq!(
        kinds,
        ["agent_thought_chunk"; 4]
            .into_iter()
            .chain(["agent_message_chunk"; 2])
            .collect::<Vec<_>>(),
        "{}",
        c.dump()
    );
    c.finish().await;
    world.none_left().await;
}

/// A session's droid is confined like a one-shot run (Landlock): a command the user allowed
/// still cannot write outside the repository, droid's state and the system temp directory; the
/// repository it can. `session/new` says how droid is confined.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_droid_cannot_write_outside_what_a_run_may() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("confined");
    // removed however the test ends (a dead test binary's, by the next one)
    let outside = tests::temp_dir::TempDir::new_in(
        &tests::non_root::outside_temp_base().join("sandbox-tests"),
        "acp",
    )
    .unwrap();
    let escaped = outside.path().join("escaped.txt");
    let command = format!("touch {} ; touch inside.txt", escaped.display());
    world.model.set_script(json!([
        {"text": "Writing.", "tool": [{"name": "Execute", "args": {"command": command, "riskLevel": "low", "riskLevelReason": "touches"}}]},
        {"text": "Done."}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let r = c
        .ok("session/new", json!({"cwd": repo, "mcpServers": []}))
        .await;
    let sid = r["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(
        r["_meta"]["droidExecutor"]["sandbox"]["kind"], "landlock",
        "{r}"
    );
    let r = c.prompt(&sid, "touch both").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    assert_eq!(
        c.asked.len(),
        1,
        "a command outside the repository is asked"
    );
    assert_eq!(c.asked[0]["_meta"]["droidExecutor"]["risk"], "high");
    assert!(repo.join("inside.txt").exists(), "{}", c.dump());
    assert!(!escaped.exists(), "droid wrote outside: {}", c.dump());
    c.finish().await;
    world.none_left().await;
}

/// A turn that runs past `default_timeout` is stopped: the prompt answers `-32007` naming the
/// setting, the turn's command is gone, and the session takes the next prompt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_turn_past_default_timeout_is_stopped_with_32007() {
    let world = World::new("default_timeout = 3\n").await;
    let droid = real_droid();
    let repo = world.repo("slow");
    world.model.set_script(json!([
        {"text": "Waiting.", "tool": [{"name": "Execute", "args": {"command": "sleep 300", "riskLevel": "low", "riskLevelReason": "harmless"}}]},
        {"text": "Next answer."}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    c.ok(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "medium"}),
    )
    .await;
    let r = c.prompt(&sid, "wait").await;
    assert_eq!(error_code(&r), -32007, "{}", c.dump());
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("default_timeout"),
        "{r}"
    );
    let sleeping = world.processes().into_iter().any(|p| {
        std::fs::read(format!("/proc/{p}/cmdline")).is_ok_and(|c| c.starts_with(b"sleep\x00300"))
    });
    assert!(!sleeping, "the turn's command still runs");
    let r = c.prompt(&sid, "again").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    c.finish().await;
    world.none_left().await;
}

/// The client going away mid-turn (stdin closed while droid runs a command): the agent exits,
/// and droid and the command are gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stdin_closing_mid_turn_ends_droid_and_the_turns_command() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("gone");
    world.model.set_script(json!([
        {"text": "Waiting.", "tool": [{"name": "Execute", "args": {"command": "sleep 300", "riskLevel": "low", "riskLevelReason": "harmless"}}]},
        {"text": "Next answer."}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    c.ok(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "medium"}),
    )
    .await;
    c.send_request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": "wait"}]}),
    )
    .await;
    c.until_in_progress(&sid).await;
    world.wait_for("sleep\u{0}300").await;
    c.finish().await;
    world.none_left().await;
}

/// droid without credentials (no Factory key, no custom model, not logged in): the session
/// opens (droid checks credentials when it calls the model), and the prompt fails with
/// `-32002` naming how to authenticate; with airgap on, droid's own explanation is the message.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn droid_without_credentials_is_32002_at_the_prompt() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("noauth");
    std::fs::write(
        world.home.path().join(".factory/settings.json"),
        r#"{"customModels": []}"#,
    )
    .unwrap();
    let env: Vec<(OsString, OsString)> = world
        .env(&droid)
        .into_iter()
        .filter(|(k, _)| k != "FACTORY_AIRGAP_ENABLED")
        .collect();
    let mut c = Client::start(&world, &env);
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    let r = c.prompt(&sid, "hi").await;
    assert_eq!(error_code(&r), -32002, "{}", c.dump());
    assert_eq!(r["error"]["data"]["envVar"], "FACTORY_API_KEY", "{r}");
    c.finish().await;

    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    let r = c.prompt(&sid, "hi").await;
    assert_eq!(error_code(&r), -32005, "{}", c.dump());
    assert!(
        r["error"]["message"].as_str().unwrap().contains("Airgap"),
        "{r}"
    );
    c.finish().await;
    world.none_left().await;
}

/// A permission request the client never answers does not hold the turn past
/// `default_timeout`: the prompt answers `-32007`, nothing was written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unanswered_permission_ends_with_the_turns_budget() {
    let world = World::new("default_timeout = 3\n").await;
    let droid = real_droid();
    let repo = world.repo("unanswered");
    world.model.set_script(json!([
        {"text": "Asking.", "tool": [{"name": "Create", "args": {"file_path": repo.join("b.txt"), "content": "b\n"}}]},
        {"text": "Done."}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    c.answers.push_back("never");
    let r = c.prompt(&sid, "write").await;
    assert_eq!(error_code(&r), -32007, "{}", c.dump());
    assert_eq!(c.asked.len(), 1);
    assert!(!repo.join("b.txt").exists());
    c.finish().await;
    world.none_left().await;
}

/// A client flooding requests (3,000 `session/list` in one write) gets one answer per request,
/// each a result or `-32000` busy once 512 are in flight: the agent neither grows without
/// bound nor drops one, and still answers afterwards.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_requests_gets_one_answer_each() {
    let world = World::new("").await;
    let droid = real_droid();
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let n = 3_000_u64;
    let flood: Vec<String> = (0..n)
        .map(|i| {
            json!({"jsonrpc": "2.0", "id": 1_000 + i, "method": "session/list", "params": {}})
                .to_string()
        })
        .collect();
    c.raw(&flood.join("\n")).await;
    let mut seen = std::collections::BTreeSet::new();
    let mut busy = 0;
    while seen.len() < usize::try_from(n).unwrap() {
        let m = c.next_message().await;
        let id = m["id"].as_u64().unwrap();
        assert!(seen.insert(id), "answered twice: {id}");
        if m.get("error").is_some() {
            assert_eq!(error_code(&m), -32000, "{m}");
            busy += 1;
        } else {
            assert!(m["result"]["sessions"].is_array(), "{m}");
        }
    }
    eprintln!("{busy} of {n} answered busy");
    let r = c.call("session/list", json!({})).await;
    assert!(r["result"]["sessions"].is_array(), "{r}");
    c.finish().await;
}

/// `~/.factory/settings.json` with custom models `(displayName, model, noImageSupport)`, all on
/// the world's scripted model (the `model` name is what its requests carry).
fn write_models(world: &World, models: &[(&str, &str, bool)]) {
    let custom: Vec<Value> = models
        .iter()
        .map(|(name, model, no_images)| {
            json!({
                "model": model,
                "displayName": name,
                "baseUrl": world.model.base_url(),
                "apiKey": "sk-mock",
                "provider": "generic-chat-completion-api",
                "maxOutputTokens": 4096,
                "noImageSupport": no_images,
            })
        })
        .collect();
    std::fs::write(
        world.home.path().join(".factory/settings.json"),
        json!({"customModels": custom}).to_string(),
    )
    .unwrap();
}

/// The `measured-…` tool calls of `sid`.
fn measured_calls(c: &Client, sid: &str) -> Vec<Value> {
    c.of_kind(sid, "tool_call")
        .into_iter()
        .filter(|t| t["toolCallId"].as_str().unwrap().starts_with("measured-"))
        .collect()
}

/// Issue 33, items 1, 5 and 6: a turn reports exactly what it changed, and only when it
/// changed something. An edit, then a question (after the user edited a file between turns),
/// then an edit the user rejects, then a question: only the first turn gets a "Measured
/// changes" tool call, naming only what droid changed (before: every later turn reported the
/// edited file again, as added, whole, and the rejected turn "2 files (+5 −0)"). The edit's
/// result is its diff, not droid's internal JSON; the measure's data is in `rawOutput` and
/// `_meta`, its content the diffs and a one-line summary; the rejection is said in our words.
/// Each turn ends with a `usage_update`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_turn_reports_what_it_changed_and_only_when_it_changed_something() {
    let world = World::new("").await;
    let droid = real_droid();
    let repo = world.repo("phantom");
    world.model.set_script(json!([
        {"text": "Editing.", "tool": [{"name": "Edit", "args": {"file_path": repo.join("a.txt"), "old_str": "hello", "new_str": "hello world"}}]},
        {"text": "Edited."},
        {"text": "An answer."},
        {"text": "Creating.", "tool": [{"name": "Create", "args": {"file_path": repo.join("no.txt"), "content": "no\n"}}]},
        {"text": "Rejected, fine."},
        {"text": "Another answer."}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let s = c
        .ok("session/new", json!({"cwd": repo, "mcpServers": []}))
        .await;
    let sid = s["sessionId"].as_str().unwrap().to_owned();
    // "Ask" says what droid runs without asking anyone (its command allowlist)
    assert!(
        s["modes"]["availableModes"][0]["description"]
            .as_str()
            .unwrap()
            .contains("droid's allowlisted read-only commands (ls, pwd, git status"),
        "{s}"
    );
    let r = c.prompt(&sid, "edit a.txt").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    let edit = c
        .of_kind(&sid, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == "call_0_0" && u["status"] == "completed")
        .expect("the edit's result");
    let a = repo.join("a.txt").display().to_string();
    assert_eq!(
        edit["content"],
        json!([{"type": "diff", "path": a, "oldText": "hello", "newText": "hello world"}]),
        "{edit}"
    );
    assert_eq!(edit.get("rawOutput"), None, "{edit}");
    assert_eq!(
        edit["_meta"]["droidExecutor"]["result"]["success"], true,
        "{edit}"
    );
    assert_eq!(
        edit["_meta"]["droidExecutor"]["result"].get("diffLines"),
        None
    );
    let m = measured_calls(&c, &sid);
    assert_eq!(m.len(), 1, "{}", c.dump());
    assert_eq!(m[0]["title"], "Measured changes: 1 file (+1 −1)");
    let summary = "1 file changed (+1 −1): a.txt modified (+1 −1)";
    assert_eq!(
        m[0]["content"],
        json!([
            {"type": "diff", "path": a, "oldText": "hello\n", "newText": "hello world\n"},
            {"type": "content", "content": {"type": "text", "text": summary}},
        ])
    );
    assert_eq!(m[0]["rawOutput"]["output"], summary);
    assert_eq!(
        m[0]["rawOutput"]["filesChanged"],
        json!([{"path": "a.txt", "changeType": "modified", "oldPath": null, "linesAdded": 1, "linesRemoved": 1}])
    );
    assert_eq!(
        m[0]["_meta"]["droidExecutor"]["filesChanged"],
        m[0]["rawOutput"]["filesChanged"]
    );
    let usage = c.of_kind(&sid, "usage_update");
    assert_eq!(usage.len(), 1, "{}", c.dump());
    assert!(
        usage[0]["used"].as_u64().unwrap() > 0 && usage[0]["size"].as_u64().unwrap() > 0,
        "{}",
        usage[0]
    );
    assert!(
        usage[0]["_meta"]["droidExecutor"]["turn"]["inputTokens"]
            .as_u64()
            .unwrap()
            > 0,
        "{}",
        usage[0]
    );

    // the user's own edit between turns is not the agent's
    std::fs::write(repo.join("mine.txt"), "mine\n").unwrap();
    let r = c.prompt(&sid, "a question").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    c.answers.push_back("reject_once");
    let r = c.prompt(&sid, "create no.txt").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    assert!(!repo.join("no.txt").exists());
    let rejected = c
        .of_kind(&sid, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == "call_3_0" && u["status"] == "failed")
        .unwrap_or_else(|| panic!("the rejected Create: {}", c.dump()));
    assert_eq!(
        rejected["content"],
        json!([{"type": "content", "content": {"type": "text", "text": "Rejected by the user: droid did not run it."}}])
    );
    let r = c.prompt(&sid, "another question").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    assert_eq!(
        measured_calls(&c, &sid).len(),
        1,
        "only the edit reports changes: {}",
        c.dump()
    );
    assert_eq!(c.of_kind(&sid, "usage_update").len(), 4, "{}", c.dump());
    c.finish().await;
    world.none_left().await;
}

/// Issue 33, item 2: the mode and the model chosen in a session survive the agent's restart,
/// `session/resume` and `session/load` (before: the restarted agent answered `read_only`, and
/// the next edit was asked); in mode `low` the resumed session's edit is not asked, and droid
/// calls the chosen model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_mode_and_the_model_survive_a_restart_resume_and_load() {
    let world = World::new("").await;
    write_models(
        &world,
        &[
            ("Mock", "scripted", true),
            ("Other", "scripted-other", true),
        ],
    );
    let droid = real_droid();
    let repo = world.repo("options");
    world.model.set_script(json!([
        {"text": "Creating.", "tool": [{"name": "Create", "args": {"file_path": repo.join("b.txt"), "content": "b\n"}}]},
        {"text": "Created."}
    ]));
    let other = world.home.model_id("Other");
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let sid = c.new_session(&repo, Value::Null).await;
    c.ok(
        "session/set_mode",
        json!({"sessionId": sid, "modeId": "low"}),
    )
    .await;
    c.ok(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "value": other}),
    )
    .await;
    c.finish().await;
    world.none_left().await;

    let current = |r: &Value| {
        (
            r["modes"]["currentModeId"].clone(),
            r["configOptions"][0]["currentValue"].clone(),
            r["configOptions"][1]["currentValue"].clone(),
        )
    };
    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let resumed = c
        .ok("session/resume", json!({"sessionId": sid, "cwd": repo}))
        .await;
    assert_eq!(
        current(&resumed),
        (json!("low"), json!("low"), json!(other)),
        "{resumed}"
    );
    let r = c.prompt(&sid, "create b.txt").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    assert!(c.asked.is_empty(), "mode low asks no edit: {:?}", c.asked);
    assert_eq!(std::fs::read_to_string(repo.join("b.txt")).unwrap(), "b\n");
    let models: Vec<Value> = world
        .model
        .requests()
        .iter()
        .filter_map(|r| r["body"].get("model").cloned())
        .collect();
    assert_eq!(
        models.last(),
        Some(&json!("scripted-other")),
        "droid called {models:?}"
    );
    c.finish().await;
    world.none_left().await;

    let mut c = Client::start(&world, &world.env(&droid));
    c.init().await;
    let loaded = c
        .ok(
            "session/load",
            json!({"sessionId": sid, "cwd": repo, "mcpServers": []}),
        )
        .await;
    assert_eq!(
        current(&loaded),
        (json!("low"), json!("low"), json!(other)),
        "{loaded}"
    );
    c.finish().await;
    world.none_left().await;
}

/// Issue 33, item 7: the client's stdio MCP servers reach droid for that session only (droid
/// calls the server's tool; `~/.factory/mcp.json` is never written; an `http` one is named as
/// not passed); the session lists its slash commands, and `/mode` works without droid; an
/// image reaches the model when the model takes images, and is refused naming the model when
/// it does not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcp_servers_commands_and_images_reach_droid() {
    let world = World::new("").await;
    write_models(
        &world,
        &[("Mock", "scripted", false), ("Text", "scripted-text", true)],
    );
    let droid = real_droid();
    let repo = world.repo("editor");
    // droid's confinement lets its MCP servers write under ~/.factory, not the HOME itself
    let log = world.home.path().join(".factory/mcp-echo.jsonl");
    world.model.set_script(json!([
        {"text": "Calling MCP.", "tool": [{"name": "echo___echo", "args": {"text": "hello mcp"}}]},
        {"text": "MCP said hello."},
        {"text": "A tiny image."}
    ]));
    let mut c = Client::start(&world, &world.env(&droid));
    let init = c.init().await;
    assert_eq!(
        init["agentCapabilities"]["promptCapabilities"]["image"], true,
        "{init}"
    );
    let echo = json!({
        "name": "echo",
        "command": "python3",
        "args": [tests::droid_bin::workspace_root().join("tests/interop/mcp_echo.py")],
        "env": [{"name": "MCP_LOG", "value": log}],
    });
    let web =
        json!({"type": "http", "name": "web", "url": "http://127.0.0.1:9/mcp", "headers": []});
    let s = c
        .ok(
            "session/new",
            json!({"cwd": repo, "mcpServers": [echo, web]}),
        )
        .await;
    let sid = s["sessionId"].as_str().unwrap().to_owned();
    assert_eq!(
        s["_meta"]["droidExecutor"]["mcpServersNotPassed"],
        json!(["web"])
    );
    // the slash commands, once the client knows the session
    while c.of_kind(&sid, "available_commands_update").is_empty() {
        let _ = c.next_message().await;
    }
    let commands: Vec<Value> = c.of_kind(&sid, "available_commands_update")[0]["availableCommands"]
        .as_array()
        .unwrap()
        .iter()
        .map(|cmd| cmd["name"].clone())
        .collect();
    assert_eq!(
        commands,
        vec![json!("mode"), json!("model"), json!("effort")]
    );

    let r = c.prompt(&sid, "use mcp").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    let result = c
        .of_kind(&sid, "tool_call_update")
        .into_iter()
        .find(|u| u["toolCallId"] == "call_0_0" && u["status"] == "completed")
        .unwrap_or_else(|| panic!("no MCP result: {}", c.dump()));
    assert_eq!(result["rawOutput"]["output"], "echo: hello mcp", "{result}");
    let called = std::fs::read_to_string(&log).unwrap_or_default();
    assert!(called.contains("\"tools/call\""), "{called}");
    assert!(!world.home.path().join(".factory/mcp.json").exists());

    // a slash command: the mode changes, droid is not asked
    let before = world.model.requests().len();
    let r = c.prompt(&sid, "/mode medium").await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    assert_eq!(world.model.requests().len(), before, "droid was asked");
    assert_eq!(
        c.of_kind(&sid, "current_mode_update").last().unwrap()["currentModeId"],
        "medium"
    );
    let said = c.of_kind(&sid, "agent_message_chunk").last().unwrap()["content"]["text"].clone();
    assert!(
        said.as_str()
            .unwrap()
            .starts_with("Mode: Auto (medium) (`medium`)"),
        "{said}"
    );

    // an image, to a model that takes images
    let png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAIAAACQd1PeAAAADElEQVR4nGP4z8AAAAMBAQDJ/pLvAAAAAElFTkSuQmCC";
    let image = json!({"type": "image", "data": png, "mimeType": "image/png"});
    let r = c
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "what is this?"}, image]}),
        )
        .await;
    assert_eq!(r["result"]["stopReason"], "end_turn", "{}", c.dump());
    let last = world.model.requests().last().cloned().unwrap();
    assert!(
        last["body"].to_string().contains("data:image/png;base64,"),
        "no image in the model's request: {last}"
    );
    // and to one that does not
    c.ok(
        "session/set_config_option",
        json!({"sessionId": sid, "configId": "model", "value": world.home.model_id("Text")}),
    )
    .await;
    let r = c
        .call(
            "session/prompt",
            json!({"sessionId": sid, "prompt": [{"type": "text", "text": "and this?"}, image]}),
        )
        .await;
    assert_eq!(error_code(&r), -32602, "{r}");
    assert!(
        r["error"]["message"]
            .as_str()
            .unwrap()
            .contains("noImageSupport"),
        "{r}"
    );
    c.finish().await;
    world.none_left().await;
}
