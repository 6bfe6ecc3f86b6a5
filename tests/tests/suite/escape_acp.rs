//! Issue 29, items 6, 11 and 12: what a turn of `droid-executor acp` could do to the user before
//! the fix, each driven line by line through the REAL droid 0.225.2 on the scripted model, in
//! mode `medium` (nothing asked):
//!
//! - a script the turn created installs `.git/hooks/pre-commit`: it is put back (removed) when
//!   the turn ends, the end-of-turn tool call says so, and the user's next `git commit` runs no
//!   hook (before: "Measured changes: none", and the commit ran it);
//! - a `setsid env -i` daemon (no marker, no parent) and a plain background job, each editing
//!   `README.md` 3 s later: both are ended with the turn, before the measure (before: the daemon
//!   edited the file after the turn's changes were reported), with the session's droid in a
//!   cgroup leaf (as root here) and under a supervisor (`cgroups = false`);
//! - 400 generated files of 240 KiB: the end-of-turn line stays around 1 MiB (before: one
//!   98 MB line);
//! - a credential passed to droid, echoed by a command and streamed by the model split across
//!   chunks: the client never sees it, whole or in pieces.
//!
//! The repositories live under [`outside_temp_base`] (not the system temp directory, which a
//! session may write anyway); droid's HOME is a temp directory.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tests::droid_bin::{droid_executor_bin, real_droid};
use tests::droid_home::DroidHome;
use tests::non_root::outside_temp_base;
use tests::procs::pids_with_env;
use tests::scripted_model::ScriptedModel;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, Lines};
use tokio::process::{Child, ChildStdin, ChildStdout};

use super::binary::git_repo_at;

/// Passed through to droid, so every process of a connection carries it.
const MARK_VAR: &str = "ACP_ESCAPE_SESSION";
/// How long one message may take.
const WAIT: Duration = Duration::from_secs(120);
/// The credential of the redaction test, with spaces so that the scripted model (one word per
/// chunk) streams it in pieces.
const SECRET: &str = "tok3n alpha-bravo charlie-delta 42";

/// A scripted model, a droid HOME pointing at it (the agent's HOME too), and a directory for
/// the repositories outside the system temp directory.
struct World {
    model: ScriptedModel,
    home: DroidHome,
    base: PathBuf,
    marker: String,
}

impl World {
    async fn new(config: &str) -> World {
        let model = ScriptedModel::start(json!([{"text": "placeholder"}]))
            .await
            .unwrap();
        let home = DroidHome::new(&[("Mock", &model.base_url())]).unwrap();
        let root = outside_temp_base();
        std::fs::create_dir_all(&root).unwrap();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos();
        let base = root.join(format!("escape-acp-{}-{nanos:x}", std::process::id()));
        std::fs::create_dir(&base).unwrap();
        let base = std::fs::canonicalize(base).unwrap();
        let dir = home.path().join(".config/droid-executor");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("config.toml"),
            format!(
                "env_passthrough = [\"{MARK_VAR}\", \"DEPLOY_TOKEN\"]\nallowed_roots = [{:?}]\n{config}",
                base.display().to_string()
            ),
        )
        .unwrap();
        let marker = format!("{}", home.path().display());
        World {
            model,
            home,
            base,
            marker,
        }
    }

    fn repo(&self, name: &str) -> PathBuf {
        let dir = self.base.join(name);
        git_repo_at(&dir, &[("README.md", "# readme\n")]);
        dir
    }

    fn env(&self, extra: &[(&str, &str)]) -> Vec<(OsString, OsString)> {
        let mut env = self.home.env();
        env.push(("DROID_CLI_CMD".into(), real_droid().into()));
        env.push((MARK_VAR.into(), self.marker.clone().into()));
        env.extend(extra.iter().map(|(k, v)| ((*k).into(), (*v).into())));
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
                panic!("processes left: {left:?}");
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.base);
    }
}

/// A raw ACP client over the agent's pipes; every permission request is allowed once.
struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Lines<BufReader<ChildStdout>>,
    /// Every line the agent wrote, in order.
    received: Vec<String>,
    /// `session/update` params, in order.
    updates: Vec<Value>,
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
            received: Vec::new(),
            updates: Vec::new(),
            next: 0,
        }
    }

    async fn write(&mut self, msg: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin closed");
        stdin
            .write_all(format!("{msg}\n").as_bytes())
            .await
            .unwrap();
        stdin.flush().await.unwrap();
    }

    /// Send `method` and read until its answer (permission requests allowed on the way).
    async fn call(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let id = self.next;
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await;
        loop {
            let line = match tokio::time::timeout(WAIT, self.lines.next_line()).await {
                Ok(Ok(Some(l))) => l,
                other => panic!("no line from the agent ({other:?})"),
            };
            let v: Value = serde_json::from_str(&line).unwrap();
            self.received.push(line);
            if v["method"] == "session/update" {
                self.updates.push(v["params"]["update"].clone());
            } else if v["method"] == "session/request_permission" {
                let reply = json!({"jsonrpc": "2.0", "id": v["id"], "result": {"outcome": {"outcome": "selected", "optionId": "allow_once"}}});
                self.write(&reply).await;
            } else if v["id"] == id && v.get("method").is_none() {
                return v;
            }
        }
    }

    async fn ok(&mut self, method: &str, params: Value) -> Value {
        let r = self.call(method, params).await;
        assert!(r.get("error").is_none(), "{method}: {r}");
        r["result"].clone()
    }

    /// `initialize`, `session/new` in `repo`, mode `medium`: the session id.
    async fn open(&mut self, repo: &Path) -> String {
        self.ok(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {}}),
        )
        .await;
        let s = self
            .ok("session/new", json!({"cwd": repo, "mcpServers": []}))
            .await;
        let sid = s["sessionId"].as_str().unwrap().to_owned();
        self.ok(
            "session/set_mode",
            json!({"sessionId": sid, "modeId": "medium"}),
        )
        .await;
        sid
    }

    /// One turn; its stop reason.
    async fn prompt(&mut self, sid: &str, text: &str) -> Value {
        let r = self
            .call(
                "session/prompt",
                json!({"sessionId": sid, "prompt": [{"type": "text", "text": text}]}),
            )
            .await;
        r["result"]["stopReason"].clone()
    }

    fn of_kind(&self, kind: &str) -> Vec<Value> {
        self.updates
            .iter()
            .filter(|u| u["sessionUpdate"] == kind)
            .cloned()
            .collect()
    }

    /// The end-of-turn tool call of the last turn.
    fn measured(&self) -> Value {
        self.of_kind("tool_call")
            .into_iter()
            .rfind(|t| t["toolCallId"].as_str().unwrap().starts_with("measured-"))
            .expect("the measured-changes tool call")
    }

    /// The agent's peak resident memory so far, in KiB (`VmHWM`).
    fn peak_kib(&self) -> u64 {
        let pid = self.child.id().unwrap();
        let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap()
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

#[allow(clippy::disallowed_methods)] // the user's own git, as the user runs it
fn user_git(repo: &Path, args: &[&str]) -> std::process::Output {
    std::process::Command::new("git")
        .args(args)
        .current_dir(repo)
        .env("GIT_AUTHOR_NAME", "u")
        .env("GIT_AUTHOR_EMAIL", "u@example.com")
        .env("GIT_COMMITTER_NAME", "u")
        .env("GIT_COMMITTER_EMAIL", "u@example.com")
        .output()
        .unwrap()
}

/// A script the turn created installs `.git/hooks/pre-commit`; the turn's end puts it back (the
/// hook is gone), says so in the end-of-turn tool call, and the user's next commit runs nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_planted_by_a_turn_is_put_back_and_said() {
    let world = World::new("").await;
    let repo = world.repo("hooks");
    let hook = repo.join(".git/hooks/pre-commit");
    assert!(!hook.exists());
    world.model.set_script(json!([
        {"text": "Setting up.", "tool": [
            {"name": "Create", "args": {"file_path": repo.join("install.sh"), "content": "mkdir -p .git/hooks\nprintf '#!/bin/sh\\necho pwned > PWNED\\n' > .git/hooks/pre-commit\nchmod +x .git/hooks/pre-commit\n"}},
            {"name": "Execute", "args": {"command": "sh install.sh", "riskLevel": "low", "riskLevelReason": "set-up"}}
        ]},
        {"text": "Done."}
    ]));
    let mut c = Client::start(&world, &world.env(&[]));
    let sid = c.open(&repo).await;
    assert_eq!(c.prompt(&sid, "set up the project").await, "end_turn");
    let ran = c
        .of_kind("tool_call_update")
        .into_iter()
        .any(|u| u["status"] == "completed" && u["rawOutput"]["isError"] == false);
    assert!(ran, "the script ran: {:?}", c.updates);
    assert!(!hook.exists(), "the planted hook is still there");
    let m = c.measured();
    assert_eq!(
        m["rawOutput"]["gitRestored"],
        json!({"changed": [".git/hooks/pre-commit"], "failed": [], "refused": []}),
        "{m}"
    );
    let title = m["title"].as_str().unwrap();
    assert!(title.contains(".git/hooks/pre-commit"), "{title}");
    let text = m["content"].as_array().unwrap().last().unwrap()["content"]["text"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(text.contains("put back .git/hooks/pre-commit"), "{text}");
    // the user's next commit runs no hook of the agent's
    let out = user_git(&repo, &["commit", "-q", "--allow-empty", "-m", "next"]);
    assert!(out.status.success(), "{out:?}");
    assert!(
        !repo.join("PWNED").exists(),
        "the user's commit ran the hook"
    );
    c.ok("session/close", json!({"sessionId": sid})).await;
    c.finish().await;
    world.none_left().await;
}

/// A `setsid env -i` daemon (no marker, re-parented) and a plain background job started in a
/// turn, each editing README.md 3 s later, are ended with the turn and before its measure:
/// README.md is unchanged 4 s after the turn. `config` picks how the session's droid is held.
async fn daemons_end_with_their_turn(config: &str, held_by: &str) {
    let world = World::new(config).await;
    let repo = world.repo("daemons");
    world.model.set_script(json!([
        {"text": "Starting.", "tool": [
            {"name": "Execute", "args": {"command": "setsid env -i sh -c 'sleep 3; echo escaped >> README.md' >/dev/null 2>&1 & sh -c 'sleep 3; echo escaped too >> README.md' >/dev/null 2>&1 & echo started", "riskLevel": "low", "riskLevelReason": "background"}}
        ]},
        {"text": "Started."}
    ]));
    let mut c = Client::start(&world, &world.env(&[]));
    let sid = c.open(&repo).await;
    // how droid is held: a leaf (droid's cgroup is one of ours) or a supervisor process
    let droid = world
        .processes()
        .into_iter()
        .find(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.starts_with(real_droid().as_os_str().as_encoded_bytes()))
        })
        .expect("the session's droid");
    match held_by {
        "leaf" => {
            let cgroup = std::fs::read_to_string(format!("/proc/{droid}/cgroup")).unwrap();
            assert!(
                cgroup.contains("/droid-executor-"),
                "droid's cgroup: {cgroup}"
            );
        }
        _ => {
            let supervised = world.processes().into_iter().any(|p| {
                std::fs::read(format!("/proc/{p}/cmdline"))
                    .is_ok_and(|c| String::from_utf8_lossy(&c).contains("\0guard\0"))
            });
            assert!(supervised, "no supervisor among {:?}", world.processes());
        }
    }
    assert_eq!(c.prompt(&sid, "start them").await, "end_turn");
    let m = c.measured();
    assert_eq!(m["title"], "Measured changes: none", "{m}");
    assert!(
        m["rawOutput"]["processesEnded"].as_u64().unwrap() >= 2,
        "{m}"
    );
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(
        std::fs::read_to_string(repo.join("README.md")).unwrap(),
        "# readme\n",
        "a process of the turn outlived it"
    );
    c.ok("session/close", json!({"sessionId": sid})).await;
    c.finish().await;
    world.none_left().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_end_with_their_turn_in_a_leaf() {
    daemons_end_with_their_turn("", "leaf").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn daemons_end_with_their_turn_under_a_supervisor() {
    daemons_end_with_their_turn("cgroups = false\n", "supervisor").await;
}

/// 400 generated files of 240 KiB (98 MB of text): the end-of-turn tool call lists them all,
/// with diffs for the first while the turn's 1 MiB budget lasts, and its line stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_end_of_turn_line_is_bounded() {
    let world = World::new("").await;
    let repo = world.repo("large");
    let line = "a".repeat(99);
    world.model.set_script(json!([
        {"text": "Generating.", "tool": [
            {"name": "Execute", "args": {"command": format!("mkdir gen && for i in $(seq 1 400); do yes {line} | head -c 245760 > gen/f$i.txt; done; echo made"), "riskLevel": "low", "riskLevelReason": "generate"}}
        ]},
        {"text": "Generated."}
    ]));
    let mut c = Client::start(&world, &world.env(&[]));
    let sid = c.open(&repo).await;
    let start = Instant::now();
    assert_eq!(c.prompt(&sid, "generate").await, "end_turn");
    let took = start.elapsed();
    let m = c.measured();
    assert!(
        m["title"]
            .as_str()
            .unwrap()
            .starts_with("Measured changes: 400 files"),
        "{}",
        m["title"]
    );
    assert_eq!(
        m["rawOutput"]["filesChanged"].as_array().unwrap().len(),
        400
    );
    let diffs = m["content"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["type"] == "diff")
        .count();
    assert!((1..=8).contains(&diffs), "{diffs} diffs");
    assert_eq!(m["rawOutput"]["diffsLeftOut"], 400 - diffs);
    let size = c
        .received
        .iter()
        .find(|l| l.contains("\"toolCallId\":\"measured-"))
        .map(String::len)
        .unwrap();
    let peak = c.peak_kib();
    eprintln!(
        "400 files of 240 KiB: the end-of-turn line is {size} bytes, the turn took {took:?}, the agent's peak RSS {peak} KiB"
    );
    assert!(size < 2 * 1024 * 1024, "a {size}-byte line");
    c.ok("session/close", json!({"sessionId": sid})).await;
    c.finish().await;
    world.none_left().await;
}

/// A credential passed to droid (`DEPLOY_TOKEN`, through `env_passthrough`), echoed by a
/// command and streamed by the model word by word in its answer and its reasoning, never
/// reaches the client: not in any line, not in the chunks put together.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_credential_never_reaches_the_client_whole_or_in_pieces() {
    let world = World::new("").await;
    let repo = world.repo("secret");
    world.model.set_script(json!([
        {"text": "Checking.", "tool": [
            {"name": "Execute", "args": {"command": "echo \"the token: $DEPLOY_TOKEN\"", "riskLevel": "low", "riskLevelReason": "echo"}}
        ]},
        {"text": format!("The token is {SECRET} and that is all."), "reasoning": format!("The output says {SECRET} here."), "split_text": true}
    ]));
    let mut c = Client::start(&world, &world.env(&[("DEPLOY_TOKEN", SECRET)]));
    let sid = c.open(&repo).await;
    assert_eq!(c.prompt(&sid, "show the token").await, "end_turn");
    for line in &c.received {
        assert!(!line.contains(SECRET), "the client got it whole: {line}");
    }
    let joined = |kind: &str| -> String {
        c.of_kind(kind)
            .iter()
            .map(|u| u["content"]["text"].as_str().unwrap().to_owned())
            .collect()
    };
    let answer = joined("agent_message_chunk");
    let reasoning = joined("agent_thought_chunk");
    assert_eq!(answer, "Checking.The token is [REDACTED] and that is all.");
    assert_eq!(reasoning, "The output says [REDACTED] here.");
    let echoed = c
        .of_kind("tool_call_update")
        .into_iter()
        .find_map(|u| u["rawOutput"]["output"].as_str().map(str::to_owned))
        .expect("the command's output");
    assert!(echoed.contains("the token: [REDACTED]"), "{echoed}");
    c.ok("session/close", json!({"sessionId": sid})).await;
    c.finish().await;
    world.none_left().await;
}
