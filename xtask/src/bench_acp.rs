//! `cargo xtask bench acp [--runs N] [--agent native|ours|both] [--debug] [--ours FILE]
//! [--keep DIR] [--validator FILE] [--python FILE] [--schema FILE]`: droid's native ACP mode (`droid exec
//! --output-format acp`) and ours (`droid-executor acp`) side by side, on the same scripted
//! scenarios, through the same raw JSON-lines client (no SDK: every byte on the wire is what the
//! agent wrote). `--ours` measures another build of `droid-executor` (default: the one this
//! builds, release unless `--debug`); `--keep` copies the transcripts to DIR.
//!
//! One scripted model (chat completions, `scripted-model`) serves both; droid's HOME lists it as
//! two custom models, `Bench` and `Alt` (request `model` `scripted` and `scripted-alt`, so the
//! model log tells which one a turn used). Each run of a scenario starts a fresh agent in a fresh
//! git workspace; the runs alternate between the agents. Scenarios:
//!
//! | scenario | script | client |
//! |---|---|---|
//! | `plain` | 20 words, one per chunk, 50 ms apart | prompt |
//! | `tools` | Create `hello.txt`, Execute `cat hello.txt && echo done`, text | allow each permission (by kind `allow_once`) |
//! | `reject` | Create `nope.txt`, text | reject (by kind `reject_once`) |
//! | `cancel` | 30 words, 100 ms apart; then a short text | `session/cancel` at the first chunk (or 1 s into the model's stream, for an agent that sends none while streaming), then a second prompt |
//! | `set_model` | short text | `session/set_config_option` model → the other model, then prompt |
//! | `reasoning` | 10 words of reasoning (`delta.reasoning_content`), then 10 words of text, one per chunk, 50 ms apart | prompt |
//!
//! Every line is recorded (`[seconds] >> json` sent, `<< json` received: the transcript format of
//! the ACP validator) and every transcript is checked with `tests/interop/acp_validate.py` (the
//! official v1 JSON schema from the npm SDK) in the venv `target/interop/py-acp` (`cargo xtask
//! fetch-interop`). The table gives, per agent and scenario: the agent's messages that violate the
//! schema (all runs), the `agent_message_chunk`s of the turn, the time from `session/prompt`
//! written to the first chunk read, the time from the scripted model receiving droid's request
//! (the model log's `t`; it answers at once) to that chunk, the permission requests, the stop
//! reason, and what the scenario checks. Timings are medians of the runs; the difference and
//! ratio ours/native are measured in the same run and never asserted. A second table probes
//! the failures recorded of native droid: an invalid JSON line (ignored, or `-32700` with `id:
//! null`), `initialize` with `protocolVersion: 2` (echoed, or answered with 1),
//! `session/set_config_option` (`{}`, or `configOptions`), and `terminal` content sent to a client
//! that announced no terminal capability.

use std::fmt::Write as _;
use std::io::{BufRead as _, BufReader, Write as _};
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use serde_json::{Value, json};

use crate::bench::ms;
use crate::sh::{build_bins, git_commit_all, output, workspace_root};

const USAGE: &str = "usage: cargo xtask bench acp [--runs N] [--agent native|ours|both] [--debug] [--ours FILE] [--keep DIR] [--validator FILE] [--python FILE] [--schema FILE]";

/// The longest any one answer (a whole turn included) may take before the bench gives up.
const ANSWER_LIMIT: Duration = Duration::from_secs(120);
/// How long an agent may take to exit once its stdin is closed, before its group is killed.
const EXIT_LIMIT: Duration = Duration::from_secs(10);
/// For an agent that sends nothing while the model streams: cancel this long into the stream.
const CANCEL_INTO_STREAM: Duration = Duration::from_secs(1);
/// How often the cancel scenario looks at the model log while it waits.
const POLL: Duration = Duration::from_millis(20);

/// The validator, the venv and the schema, relative to the workspace root.
const VALIDATOR: &str = "tests/interop/acp_validate.py";
const PYTHON: &str = "target/interop/py-acp/bin/python";
const SCHEMA: &str =
    "target/interop/node-acp/node_modules/@agentclientprotocol/sdk/schema/v1/schema.json";

/// Which agent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Agent {
    /// `droid exec --output-format acp`.
    Native,
    /// `droid-executor acp`.
    Ours,
    /// droid's interactive `--input-format stream-jsonrpc --output-format stream-jsonrpc` mode,
    /// no ACP: the baseline of the first chunk (droid's own first delta).
    Rpc,
}

impl Agent {
    fn name(self) -> &'static str {
        match self {
            Agent::Native => "native",
            Agent::Ours => "ours",
            Agent::Rpc => "droid-rpc",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Scenario {
    Plain,
    Tools,
    Reject,
    Cancel,
    SetModel,
    Reasoning,
}

impl Scenario {
    const ALL: [Scenario; 6] = [
        Scenario::Plain,
        Scenario::Tools,
        Scenario::Reject,
        Scenario::Cancel,
        Scenario::SetModel,
        Scenario::Reasoning,
    ];

    fn name(self) -> &'static str {
        match self {
            Scenario::Plain => "plain",
            Scenario::Tools => "tools",
            Scenario::Reject => "reject",
            Scenario::Cancel => "cancel",
            Scenario::SetModel => "set_model",
            Scenario::Reasoning => "reasoning",
        }
    }

    /// The model's script, with paths in `ws`.
    fn script(self, ws: &Path) -> Value {
        let words = |n: usize| {
            (1..=n)
                .map(|i| format!("word{i}"))
                .collect::<Vec<_>>()
                .join(" ")
        };
        match self {
            Scenario::Plain => {
                json!([{"text": words(20), "split_text": true, "chunk_sleep": 0.05}])
            }
            Scenario::Tools => json!([
                {"text": "Creating the file.", "tool": [{"name": "Create", "args": {
                    "file_path": ws.join("hello.txt"), "content": "hello world\n"}}]},
                {"tool": [{"name": "Execute", "args": {"command": "cat hello.txt && echo done",
                    "riskLevel": "low", "riskLevelReason": "reads a file"}}]},
                {"text": "All done. Created hello.txt."}
            ]),
            Scenario::Reject => json!([
                {"text": "Creating the file.", "tool": [{"name": "Create", "args": {
                    "file_path": ws.join("nope.txt"), "content": "no\n"}}]},
                {"text": "Understood, I will not create it."}
            ]),
            Scenario::Cancel => json!([
                {"text": words(30), "split_text": true, "chunk_sleep": 0.1},
                {"text": "Back again."}
            ]),
            Scenario::SetModel => json!([{"text": "Answered by the model you chose."}]),
            Scenario::Reasoning => json!([{"reasoning": words(10), "text": words(10),
                "split_text": true, "chunk_sleep": 0.05}]),
        }
    }

    /// The option kind the client picks when asked for a permission.
    fn permission_kind(self) -> &'static str {
        match self {
            Scenario::Reject => "reject_once",
            _ => "allow_once",
        }
    }
}

struct Options {
    runs: usize,
    agents: Vec<Agent>,
    profile: &'static str,
    ours: Option<PathBuf>,
    keep: Option<PathBuf>,
    validator: PathBuf,
    python: PathBuf,
    schema: PathBuf,
}

fn parse(args: &[&str]) -> Result<Options> {
    let root = workspace_root();
    let mut o = Options {
        runs: 5,
        agents: vec![Agent::Native, Agent::Ours],
        profile: "release",
        ours: None,
        keep: None,
        validator: root.join(VALIDATOR),
        python: root.join(PYTHON),
        schema: root.join(SCHEMA),
    };
    let mut rest = args;
    loop {
        match rest {
            ["--debug", tail @ ..] => {
                o.profile = "debug";
                rest = tail;
            }
            [flag, value, tail @ ..] => {
                match *flag {
                    "--runs" => o.runs = value.parse::<usize>().context("--runs N")?.max(1),
                    "--agent" => {
                        o.agents = match *value {
                            "native" => vec![Agent::Native],
                            "ours" => vec![Agent::Ours],
                            "both" => vec![Agent::Native, Agent::Ours],
                            _ => bail!("{USAGE}"),
                        }
                    }
                    "--keep" => o.keep = Some(PathBuf::from(value)),
                    "--ours" => o.ours = Some(PathBuf::from(value)),
                    "--validator" => o.validator = PathBuf::from(value),
                    "--python" => o.python = PathBuf::from(value),
                    "--schema" => o.schema = PathBuf::from(value),
                    _ => bail!("{USAGE}"),
                }
                rest = tail;
            }
            [] => return Ok(o),
            _ => bail!("{USAGE}"),
        }
    }
}

pub(crate) fn acp(args: &[&str]) -> Result<()> {
    let o = parse(args)?;
    // git for the workspace, npm and tar for droid, python3 for the validator, kill for a
    // stuck agent's group
    crate::preflight::require("bench acp", crate::preflight::DEMO)?;
    crate::preflight::require("bench acp", crate::preflight::SOAK)?;
    for (what, path) in [
        ("the ACP transcript validator", &o.validator),
        ("the py-acp venv's python", &o.python),
        ("the ACP v1 schema of the npm SDK", &o.schema),
    ] {
        if !path.exists() {
            bail!(
                "{what} is missing ({}): run `cargo xtask fetch-interop`",
                path.display()
            );
        }
    }
    let droid = crate::droid::fetch()?;
    let bins = build_bins(o.profile)?;
    let ours = o
        .ours
        .clone()
        .unwrap_or_else(|| bins.join("droid-executor"));
    let world = World::new(&bins, &droid, &ours)?;
    let mut agents = Vec::new();
    for agent in &o.agents {
        match world.available(*agent) {
            Ok(()) => agents.push(*agent),
            Err(e) => println!("bench acp: {} is left out: {e:#}", agent.name()),
        }
    }
    if agents.is_empty() {
        bail!("no agent to measure");
    }

    let mut runs: Vec<(Agent, Scenario, RunResult)> = Vec::new();
    let mut probes: Vec<(Agent, Probes)> = Vec::new();
    for (i, agent) in agents.iter().enumerate() {
        let p = probe(&world, *agent, i)
            .with_context(|| format!("probing the {} agent", agent.name()))?;
        probes.push((*agent, p));
    }
    for run in 0..o.runs {
        for scenario in Scenario::ALL {
            // alternate which agent goes first, so drift hits both alike
            let mut order = agents.clone();
            if run % 2 == 1 {
                order.reverse();
            }
            if scenario == Scenario::Plain {
                let r = rpc_baseline(&world, run).context("droid's stream-jsonrpc baseline")?;
                runs.push((Agent::Rpc, scenario, r));
            }
            for agent in order {
                let r = run_scenario(&world, agent, scenario, run).with_context(|| {
                    format!(
                        "{} agent, scenario {}, run {}",
                        agent.name(),
                        scenario.name(),
                        run + 1
                    )
                })?;
                runs.push((agent, scenario, r));
            }
        }
    }
    let violations = validate(&o, &world.transcripts)?;
    report(&o, &agents, &runs, &probes, &violations);
    if let Some(keep) = &o.keep {
        std::fs::create_dir_all(keep)?;
        for entry in std::fs::read_dir(&world.transcripts)? {
            let entry = entry?;
            std::fs::copy(entry.path(), keep.join(entry.file_name()))?;
        }
        println!("transcripts kept in {}", keep.display());
    }
    Ok(())
}

/// The scripted model, droid's HOME, the workspace and where the transcripts go.
struct World {
    dir: PathBuf,
    home: PathBuf,
    ws: PathBuf,
    transcripts: PathBuf,
    script: PathBuf,
    model_log: PathBuf,
    model: Child,
    droid: PathBuf,
    ours: PathBuf,
}

impl World {
    fn new(bins: &Path, droid: &Path, ours: &Path) -> Result<Self> {
        let dir =
            std::env::temp_dir().join(format!("droid-executor-bench-acp-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let home = dir.join("home");
        let ws = home.join("ws");
        let transcripts = dir.join("transcripts");
        for d in [&home, &ws, &transcripts] {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(ws.join("README.md"), "# bench workspace\n")?;
        git_commit_all(&ws, "bench workspace")?;
        let script = dir.join("script.json");
        std::fs::write(&script, "[]")?;
        let port_file = dir.join("model.port");
        let model_log = dir.join("model.jsonl");
        let model = Command::new(bins.join("scripted-model"))
            .arg("--script")
            .arg(&script)
            .arg("--port-file")
            .arg(&port_file)
            .arg("--log")
            .arg(&model_log)
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .context("could not start scripted-model")?;
        let mut world = Self {
            home: std::fs::canonicalize(&home)?,
            ws: std::fs::canonicalize(&ws)?,
            dir,
            transcripts,
            script,
            model_log,
            model,
            droid: droid.to_path_buf(),
            ours: ours.to_path_buf(),
        };
        let port = world.port(&port_file)?;
        let model = |name: &str, id: &str| {
            json!({"model": id, "displayName": name,
                "baseUrl": format!("http://127.0.0.1:{port}/v1"), "apiKey": "sk-bench",
                "provider": "generic-chat-completion-api", "maxOutputTokens": 4096})
        };
        let settings =
            json!({"customModels": [model("Bench", "scripted"), model("Alt", "scripted-alt")]});
        std::fs::create_dir_all(world.home.join(".factory"))?;
        std::fs::write(
            world.home.join(".factory/settings.json"),
            settings.to_string(),
        )?;
        world.ws = std::fs::canonicalize(&world.ws)?;
        Ok(world)
    }

    fn port(&mut self, port_file: &Path) -> Result<u16> {
        let until = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(p) = std::fs::read_to_string(port_file)
                && let Ok(p) = p.trim().parse::<u16>()
            {
                return Ok(p);
            }
            if let Ok(Some(status)) = self.model.try_wait() {
                bail!("scripted-model exited ({status})");
            }
            if Instant::now() > until {
                bail!("scripted-model did not report its port");
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The command starting `agent`, with exactly the world's environment.
    fn command(&self, agent: Agent) -> Command {
        let mut c = match agent {
            Agent::Native => {
                let mut c = Command::new(&self.droid);
                c.args(["exec", "--output-format", "acp"]);
                c
            }
            Agent::Ours => {
                let mut c = Command::new(&self.ours);
                c.arg("acp");
                c
            }
            Agent::Rpc => {
                let mut c = Command::new(&self.droid);
                c.args([
                    "exec",
                    "--input-format",
                    "stream-jsonrpc",
                    "--output-format",
                    "stream-jsonrpc",
                ]);
                c
            }
        };
        c.env_clear()
            .env("HOME", &self.home)
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("LANG", "C.UTF-8")
            .env("FACTORY_AIRGAP_ENABLED", "1")
            // ours finds droid through it; droid ignores it
            .env("DROID_CLI_CMD", &self.droid)
            .current_dir(&self.ws)
            // its own group, so that what it started can be ended with it
            .process_group(0);
        c
    }

    /// Can `agent` run here? (`droid-executor` builds before issue 15 have no `acp`.)
    fn available(&self, agent: Agent) -> Result<()> {
        match agent {
            Agent::Native | Agent::Rpc => Ok(()),
            Agent::Ours => {
                let out = Command::new(&self.ours)
                    .args(["acp", "--help"])
                    .stdin(Stdio::null())
                    .output()
                    .with_context(|| format!("could not start {}", self.ours.display()))?;
                if out.status.success() {
                    Ok(())
                } else {
                    let stderr = String::from_utf8_lossy(&out.stderr);
                    bail!(
                        "{} has no `acp` command ({})",
                        self.ours.display(),
                        stderr.lines().next().unwrap_or_default().trim()
                    )
                }
            }
        }
    }

    /// Give the model `script` (a temp file renamed over the old one: the model re-reads it
    /// when its modification time changes, and never sees half of it).
    fn set_script(&self, script: &Value) -> Result<()> {
        let tmp = self.dir.join("script.json.tmp");
        std::fs::write(&tmp, script.to_string())?;
        std::fs::rename(&tmp, &self.script)?;
        Ok(())
    }

    /// Put the workspace back to its commit.
    fn reset(&self) -> Result<()> {
        output(
            Command::new("git")
                .args(["checkout", "-q", "--", "."])
                .current_dir(&self.ws),
        )?;
        output(
            Command::new("git")
                .args(["clean", "-fdq"])
                .current_dir(&self.ws),
        )?;
        Ok(())
    }

    /// The model's chat-completions requests that offer tools (droid's turns, not its title
    /// calls), received at or after Unix time `since`.
    fn turns_since(&self, since: f64) -> Vec<Value> {
        let text = std::fs::read_to_string(&self.model_log).unwrap_or_default();
        text.lines()
            .filter_map(|l| serde_json::from_str::<Value>(l).ok())
            .filter(|r| r["t"].as_f64().is_some_and(|t| t >= since))
            .filter(|r| r["body"]["tools"].as_array().is_some_and(|t| !t.is_empty()))
            .collect()
    }
}

impl Drop for World {
    fn drop(&mut self) {
        let _ = self.model.kill();
        let _ = self.model.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn unix_now() -> f64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// One line read from the agent: when, and what.
struct Line {
    at: Instant,
    unix: f64,
    msg: Value,
}

/// A raw JSON-lines ACP client over the agent's pipes. A reader thread hands over stdout
/// lines, so every wait has a limit; every line both ways goes to the transcript.
struct Driver {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<(Instant, f64, String)>,
    transcript: std::fs::File,
    start: Instant,
    next_id: u64,
    /// The option kind chosen for a permission request.
    permission_kind: &'static str,
    /// Every message read so far (agent → client).
    seen: Vec<Line>,
    /// Permission requests answered.
    permissions: usize,
}

impl Driver {
    fn start(world: &World, agent: Agent, transcript: &Path) -> Result<Self> {
        let mut child = world
            .command(agent)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("could not start the {} agent", agent.name()))?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take().context("no stdout pipe")?;
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                if tx.send((Instant::now(), unix_now(), line)).is_err() {
                    return;
                }
            }
        });
        Ok(Self {
            child,
            stdin,
            lines,
            transcript: std::fs::File::create(transcript)?,
            start: Instant::now(),
            next_id: 0,
            permission_kind: "allow_once",
            seen: Vec::new(),
            permissions: 0,
        })
    }

    fn log(&mut self, dir: &str, at: Instant, text: &str) -> Result<()> {
        let t = at.duration_since(self.start).as_secs_f64();
        writeln!(self.transcript, "[{t:8.3}] {dir} {text}")?;
        Ok(())
    }

    /// Write one line to the agent.
    fn send_line(&mut self, text: &str) -> Result<Instant> {
        let at = Instant::now();
        self.log(">>", at, text)?;
        let stdin = self.stdin.as_mut().context("stdin closed")?;
        writeln!(stdin, "{text}")?;
        stdin.flush()?;
        Ok(at)
    }

    /// Send request `method`; its id and when it was written.
    fn request(&mut self, method: &str, params: Value) -> Result<(u64, Instant, f64)> {
        self.next_id += 1;
        let id = self.next_id;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let unix = unix_now();
        let at = self.send_line(&msg.to_string())?;
        Ok((id, at, unix))
    }

    /// Send notification `method`; when it was written.
    fn notify(&mut self, method: &str, params: Value) -> Result<Instant> {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_line(&msg.to_string())
    }

    /// Read one message (answering the agent's own requests), waiting at most `wait`; `None`
    /// when nothing came in that time.
    fn read(&mut self, wait: Duration) -> Result<Option<usize>> {
        let (at, unix, text) = match self.lines.recv_timeout(wait) {
            Ok(l) => l,
            Err(mpsc::RecvTimeoutError::Timeout) => return Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                bail!("the agent closed its stdout ({:?})", self.child.try_wait())
            }
        };
        self.log("<<", at, &text)?;
        let msg: Value = serde_json::from_str(&text)
            .with_context(|| format!("not JSON on the agent's stdout: {text}"))?;
        if let (Some(method), Some(id)) = (msg["method"].as_str(), msg.get("id")) {
            let answer = self.answer(method, &msg["params"]);
            let reply = match answer {
                Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                Err(message) => json!({"jsonrpc": "2.0", "id": id,
                    "error": {"code": -32601, "message": message}}),
            };
            self.send_line(&reply.to_string())?;
        }
        self.seen.push(Line { at, unix, msg });
        Ok(Some(self.seen.len() - 1))
    }

    /// The client's answer to an agent's request.
    fn answer(&mut self, method: &str, params: &Value) -> std::result::Result<Value, String> {
        match method {
            "session/request_permission" => {
                self.permissions += 1;
                let options = params["options"].as_array().cloned().unwrap_or_default();
                // by kind, never by id or position: every agent names its options its own way
                match options.iter().find(|o| o["kind"] == self.permission_kind) {
                    Some(o) => Ok(json!({"outcome": {"outcome": "selected",
                        "optionId": o["optionId"]}})),
                    None => Ok(json!({"outcome": {"outcome": "cancelled"}})),
                }
            }
            "fs/read_text_file" => params["path"]
                .as_str()
                .and_then(|p| std::fs::read_to_string(p).ok())
                .map(|content| json!({"content": content}))
                .ok_or_else(|| "cannot read that file".to_owned()),
            "fs/write_text_file" => match (params["path"].as_str(), params["content"].as_str()) {
                (Some(p), Some(c)) => std::fs::write(p, c)
                    .map(|()| json!({}))
                    .map_err(|e| e.to_string()),
                _ => Err("path and content are required".to_owned()),
            },
            other => Err(format!("the bench client does not serve {other}")),
        }
    }

    /// Read until the answer to request `id`; its index in `seen`.
    fn until_answer(&mut self, id: u64) -> Result<usize> {
        let until = Instant::now() + ANSWER_LIMIT;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("no answer to request {id} within {ANSWER_LIMIT:?}");
            }
            if let Some(i) = self.read(left)?
                && self.seen[i].msg.get("method").is_none()
                && self.seen[i].msg["id"] == json!(id)
            {
                return Ok(i);
            }
        }
    }

    /// The result of request `id` (an error answer is an error).
    fn call(&mut self, method: &str, params: Value) -> Result<Value> {
        let (id, ..) = self.request(method, params)?;
        let i = self.until_answer(id)?;
        let msg = &self.seen[i].msg;
        if let Some(e) = msg.get("error") {
            bail!("{method} failed: {e}");
        }
        Ok(msg["result"].clone())
    }

    fn initialize(&mut self, version: u64) -> Result<Value> {
        self.call(
            "initialize",
            json!({"protocolVersion": version,
                "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true},
                    "terminal": false},
                "clientInfo": {"name": "xtask-bench-acp", "version": "0"}}),
        )
    }

    /// Close stdin, wait for the exit; past the limit the agent's whole group is killed.
    fn finish(mut self) -> Result<()> {
        self.stdin = None;
        let until = Instant::now() + EXIT_LIMIT;
        while Instant::now() < until {
            if self.child.try_wait()?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill_group();
        Ok(())
    }

    fn kill_group(&mut self) {
        let group = format!("-{}", self.child.id());
        let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
        let _ = self.child.wait();
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        self.stdin = None;
        if matches!(self.child.try_wait(), Ok(None)) {
            self.kill_group();
        }
    }
}

/// The `session/update`s of a session in `lines`.
fn updates(lines: &[Line]) -> impl Iterator<Item = (&Line, &Value)> {
    lines
        .iter()
        .filter(|l| l.msg["method"] == "session/update")
        .map(|l| (l, &l.msg["params"]["update"]))
}

/// The model option values of a `session/new` answer (flat or grouped options), and the current.
fn models(new_session: &Value) -> (Vec<String>, Option<String>) {
    let Some(option) = new_session["configOptions"]
        .as_array()
        .and_then(|o| o.iter().find(|o| o["category"] == "model"))
    else {
        return (Vec::new(), None);
    };
    let mut values = Vec::new();
    for o in option["options"].as_array().into_iter().flatten() {
        match o["options"].as_array() {
            Some(group) => values.extend(group.iter().filter_map(|g| g["value"].as_str())),
            None => values.extend(o["value"].as_str()),
        }
    }
    (
        values.into_iter().map(str::to_owned).collect(),
        option["currentValue"].as_str().map(str::to_owned),
    )
}

/// What one run of a scenario measured.
#[derive(Debug, Default)]
struct RunResult {
    chunks: usize,
    first_chunk: Option<Duration>,
    model_to_chunk: Option<Duration>,
    stop: String,
    permissions: usize,
    /// `terminal` content items sent (the client announced no terminal capability).
    terminal: usize,
    /// What the scenario checks, in a few words.
    note: String,
    /// `session/set_config_option`'s answer (scenario `set_model`).
    set_config: Option<Value>,
    /// From `session/cancel` written to the prompt's answer read (scenario `cancel`).
    after_cancel: Option<Duration>,
}

fn transcript_path(world: &World, agent: Agent, scenario: &str, run: usize) -> PathBuf {
    world
        .transcripts
        .join(format!("{}-{scenario}-{}.log", agent.name(), run + 1))
}

fn run_scenario(world: &World, agent: Agent, scenario: Scenario, run: usize) -> Result<RunResult> {
    world.reset()?;
    world.set_script(&scenario.script(&world.ws))?;
    let path = transcript_path(world, agent, scenario.name(), run);
    let mut d = Driver::start(world, agent, &path)?;
    d.permission_kind = scenario.permission_kind();
    d.initialize(1)?;
    let session = d.call("session/new", json!({"cwd": world.ws, "mcpServers": []}))?;
    let sid = session["sessionId"].clone();
    let mut r = RunResult::default();
    if scenario == Scenario::SetModel {
        let (values, current) = models(&session);
        let other = values
            .iter()
            .find(|v| Some(*v) != current.as_ref())
            .with_context(|| format!("session/new offers one model only: {values:?}"))?
            .clone();
        let (id, ..) = d.request(
            "session/set_config_option",
            json!({"sessionId": sid, "configId": "model", "value": other}),
        )?;
        let i = d.until_answer(id)?;
        r.set_config = Some(d.seen[i].msg.clone());
    }
    let prompt_text = match scenario {
        Scenario::Tools => "Create hello.txt and show it",
        Scenario::Reject => "Create nope.txt",
        _ => "Say something",
    };
    let from = d.seen.len();
    let (id, sent, sent_unix) = d.request(
        "session/prompt",
        json!({"sessionId": sid, "prompt": [{"type": "text", "text": prompt_text}]}),
    )?;
    let (answer, cancel_sent) = if scenario == Scenario::Cancel {
        let (answer, at) = cancel_mid_stream(&mut d, world, id, &sid, sent_unix)?;
        (answer, Some(at))
    } else {
        (d.until_answer(id)?, None)
    };
    let turn = &d.seen[from..=answer];
    r.stop = match (
        turn.last().map(|l| &l.msg["result"]["stopReason"]),
        turn.last().map(|l| &l.msg["error"]),
    ) {
        (Some(Value::String(s)), _) => s.clone(),
        (_, Some(e)) if !e.is_null() => format!("error {}", e["code"]),
        _ => "?".into(),
    };
    let chunks: Vec<&Line> = updates(turn)
        .filter(|(_, u)| u["sessionUpdate"] == "agent_message_chunk")
        .map(|(l, _)| l)
        .collect();
    r.chunks = chunks.len();
    if let Some(first) = chunks.first() {
        r.first_chunk = Some(first.at.duration_since(sent));
        if let Some(t) = world
            .turns_since(sent_unix)
            .first()
            .and_then(|t| t["t"].as_f64())
        {
            r.model_to_chunk = Some(Duration::from_secs_f64((first.unix - t).max(0.0)));
        }
    }
    r.terminal = updates(turn)
        .flat_map(|(_, u)| u["content"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == "terminal")
        .count();
    r.permissions = d.permissions;
    let thoughts = updates(turn)
        .filter(|(_, u)| u["sessionUpdate"] == "agent_thought_chunk")
        .count();
    // ours ends a turn that changed something with the changes it measured in the repository
    let measured: Vec<String> = updates(turn)
        .filter(|(_, u)| {
            u["sessionUpdate"] == "tool_call"
                && u["title"]
                    .as_str()
                    .is_some_and(|t| t.starts_with("Measured changes"))
        })
        .flat_map(|(_, u)| u["content"].as_array().cloned().unwrap_or_default())
        .filter(|c| c["type"] == "diff")
        .filter_map(|c| {
            c["path"]
                .as_str()
                .and_then(|p| Path::new(p).file_name())
                .map(|n| n.to_string_lossy().into_owned())
        })
        .collect();
    let failed_tools = updates(turn)
        .filter(|(_, u)| u["status"] == "failed")
        .count();
    r.note = match scenario {
        Scenario::Plain => format!("{} of 20 words", words_in(turn)),
        Scenario::Tools => {
            let made = std::fs::read_to_string(world.ws.join("hello.txt")).ok();
            format!(
                "hello.txt {}, {} terminal item(s), measured changes: {}",
                if made.as_deref() == Some("hello world\n") {
                    "written"
                } else {
                    "MISSING"
                },
                r.terminal,
                if measured.is_empty() {
                    "none sent".to_owned()
                } else {
                    measured.join(", ")
                }
            )
        }
        Scenario::Reject => format!(
            "nope.txt {}, {failed_tools} failed tool update(s)",
            if world.ws.join("nope.txt").exists() {
                "WRITTEN"
            } else {
                "absent"
            }
        ),
        Scenario::Cancel => {
            r.after_cancel = cancel_sent
                .zip(turn.last())
                .map(|(c, l)| l.at.saturating_duration_since(c));
            let (id, ..) = d.request(
                "session/prompt",
                json!({"sessionId": sid, "prompt": [{"type": "text", "text": "again"}]}),
            )?;
            let i = d.until_answer(id)?;
            let next = &d.seen[i].msg;
            format!(
                "next prompt: {}",
                next["result"]["stopReason"].as_str().unwrap_or("error")
            )
        }
        Scenario::SetModel => {
            let used = world
                .turns_since(sent_unix)
                .first()
                .map(|t| t["body"]["model"].as_str().unwrap_or("?").to_owned())
                .unwrap_or_else(|| "?".into());
            format!("turn used model {used:?}")
        }
        Scenario::Reasoning => format!(
            "{thoughts} agent_thought_chunk(s) for 10 reasoning words, {} of 10 text words",
            words_in(turn)
        ),
    };
    d.finish()?;
    Ok(r)
}

/// The plain scenario in droid's interactive stream-jsonrpc mode (what an ACP adapter can build
/// on): `add_user_message` written → first `assistant_text_delta` read, and the model's request →
/// that delta. Its transcript is not ACP and stays out of the validated ones.
fn rpc_baseline(world: &World, run: usize) -> Result<RunResult> {
    world.reset()?;
    world.set_script(&Scenario::Plain.script(&world.ws))?;
    let path = world.dir.join(format!("droid-rpc-plain-{}.log", run + 1));
    let mut d = Driver::start(world, Agent::Rpc, &path)?;
    let envelope = |id: &str, method: &str, params: Value| {
        json!({"jsonrpc": "2.0", "type": "request", "factoryApiVersion": "1.0.0", "id": id,
            "method": method, "params": params})
        .to_string()
    };
    d.send_line(&envelope(
        "init-1",
        "droid.initialize_session",
        json!({"machineId": "bench", "cwd": world.ws, "modelId": "custom:Bench-0",
            "autonomyLevel": "low", "interactionMode": "auto"}),
    ))?;
    let answered = |d: &mut Driver, id: &str| -> Result<()> {
        let until = Instant::now() + ANSWER_LIMIT;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("droid did not answer {id}");
            }
            if let Some(i) = d.read(left)?
                && d.seen[i].msg["id"] == id
                && d.seen[i].msg["type"] == "response"
            {
                if let Some(e) = d.seen[i].msg.get("error") {
                    bail!("{id} failed: {e}");
                }
                return Ok(());
            }
        }
    };
    answered(&mut d, "init-1")?;
    let sent_unix = unix_now();
    let sent = d.send_line(&envelope(
        "msg-1",
        "droid.add_user_message",
        json!({"text": "Say something"}),
    ))?;
    let mut r = RunResult::default();
    let until = Instant::now() + ANSWER_LIMIT;
    let mut first: Option<(Instant, f64)> = None;
    loop {
        let left = until.saturating_duration_since(Instant::now());
        if left.is_zero() {
            bail!("droid's turn did not complete");
        }
        let Some(i) = d.read(left)? else { continue };
        let line = &d.seen[i];
        let n = &line.msg["params"]["notification"];
        match n["type"].as_str() {
            Some("assistant_text_delta") => {
                r.chunks += 1;
                first.get_or_insert((line.at, line.unix));
            }
            Some("agent_turn_completed") => {
                r.stop = n["reason"].as_str().unwrap_or("?").to_owned();
                break;
            }
            _ => {}
        }
    }
    if let Some((at, unix)) = first {
        r.first_chunk = Some(at.duration_since(sent));
        if let Some(t) = world
            .turns_since(sent_unix)
            .first()
            .and_then(|t| t["t"].as_f64())
        {
            r.model_to_chunk = Some(Duration::from_secs_f64((unix - t).max(0.0)));
        }
    }
    r.note = "assistant_text_delta, not ACP (the backend's own first delta)".into();
    d.finish()?;
    Ok(r)
}

/// The number of words in the turn's message chunks.
fn words_in(turn: &[Line]) -> usize {
    let text: String = updates(turn)
        .filter(|(_, u)| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|(_, u)| u["content"]["text"].as_str())
        .collect();
    text.split_whitespace().count()
}

/// Wait for the first chunk, or for the model to have streamed [`CANCEL_INTO_STREAM`], then send
/// `session/cancel`; read until the prompt's answer: its index, and when the cancel was sent.
fn cancel_mid_stream(
    d: &mut Driver,
    world: &World,
    id: u64,
    sid: &Value,
    sent_unix: f64,
) -> Result<(usize, Instant)> {
    let until = Instant::now() + ANSWER_LIMIT;
    loop {
        if Instant::now() > until {
            bail!("the stream never started");
        }
        if let Some(i) = d.read(POLL)? {
            let msg = &d.seen[i].msg;
            if msg["id"] == json!(id) && msg.get("method").is_none() {
                bail!("the turn ended before it could be cancelled: {msg}");
            }
            if msg["params"]["update"]["sessionUpdate"] == "agent_message_chunk" {
                break;
            }
        }
        let streaming_for = world
            .turns_since(sent_unix)
            .first()
            .and_then(|t| t["t"].as_f64())
            .map(|t| unix_now() - t);
        if streaming_for.is_some_and(|s| s >= CANCEL_INTO_STREAM.as_secs_f64()) {
            break;
        }
    }
    let at = d.notify("session/cancel", json!({"sessionId": sid}))?;
    Ok((d.until_answer(id)?, at))
}

/// What the probes of native droid's recorded failures found.
#[derive(Debug, Default)]
struct Probes {
    /// `initialize` with protocolVersion 2: the version answered.
    version_answer: String,
    /// An invalid JSON line: what came back.
    invalid_json: String,
}

fn probe(world: &World, agent: Agent, run: usize) -> Result<Probes> {
    world.set_script(&Scenario::SetModel.script(&world.ws))?;
    let path = transcript_path(world, agent, "probes", run);
    let mut d = Driver::start(world, agent, &path)?;
    let init = d.initialize(2)?;
    let mut p = Probes {
        version_answer: format!("answers {}", init["protocolVersion"]),
        ..Probes::default()
    };
    // not JSON at all (a `{` would make the validator read it as a message)
    let from = d.seen.len();
    d.send_line("this is not json")?;
    let (id, ..) = d.request("session/new", json!({"cwd": world.ws, "mcpServers": []}))?;
    d.until_answer(id)?;
    let parse_error = d.seen[from..]
        .iter()
        .find(|l| l.msg["error"]["code"] == json!(-32700));
    p.invalid_json = match parse_error {
        Some(l) => format!("-32700, id {}", l.msg["id"]),
        None => "no answer (ignored)".into(),
    };
    d.finish()?;
    Ok(p)
}

/// Schema violations of the agent's messages (agent to client) per transcript file name, from
/// the validator's `--json` report (`{"files": [{"path", "passed", "failed", "violations":
/// [{"line", "dir", …}]}]}`). The client's own lines are not counted: the probe sends a line that
/// is not JSON on purpose.
fn validate(o: &Options, dir: &Path) -> Result<std::collections::BTreeMap<String, usize>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .collect();
    files.sort();
    let out = Command::new(&o.python)
        .arg(&o.validator)
        .arg("--json")
        .arg(&o.schema)
        .args(&files)
        .output()
        .with_context(|| format!("could not run {}", o.python.display()))?;
    let report: Value = serde_json::from_slice(&out.stdout).with_context(|| {
        format!(
            "the validator printed no JSON report ({}): {}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    })?;
    let mut per_file = std::collections::BTreeMap::new();
    for f in report["files"].as_array().into_iter().flatten() {
        let name = Path::new(f["path"].as_str().unwrap_or_default())
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let bad = f["violations"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|v| v["dir"] == "a2c")
            .count();
        per_file.insert(name, bad);
    }
    if per_file.len() != files.len() {
        bail!(
            "the validator reported {} of {} transcripts",
            per_file.len(),
            files.len()
        );
    }
    Ok(per_file)
}

fn median(mut v: Vec<Duration>) -> Option<Duration> {
    if v.is_empty() {
        return None;
    }
    v.sort();
    Some(v[v.len() / 2])
}

fn cell(d: Option<Duration>) -> String {
    d.map_or_else(|| "-".into(), |d| format!("{:.1}", ms(d)))
}

fn report(
    o: &Options,
    agents: &[Agent],
    runs: &[(Agent, Scenario, RunResult)],
    probes: &[(Agent, Probes)],
    violations: &std::collections::BTreeMap<String, usize>,
) {
    let violations_of = |agent: Agent, scenario: &str| -> usize {
        violations
            .iter()
            .filter(|(f, _)| f.starts_with(&format!("{}-{scenario}-", agent.name())))
            .map(|(_, n)| n)
            .sum()
    };
    println!(
        "bench acp: {} run(s) per agent and scenario (droid-executor: {}); times are medians",
        o.runs,
        o.ours.as_ref().map_or_else(
            || format!("{} build", o.profile),
            |p| p.display().to_string()
        )
    );
    println!(
        "  native = droid exec --output-format acp; ours = droid-executor acp; one scripted model, raw JSON-lines client"
    );
    println!(
        "\n{:<9} {:<10} {:>10} {:>7} {:>15} {:>15} {:>6}  {:<12} notes (last run)",
        "agent",
        "scenario",
        "violations",
        "chunks",
        "prompt>chunk ms",
        "model>chunk ms",
        "perms",
        "stop"
    );
    let mut firsts: Vec<(Scenario, Agent, Option<Duration>, Option<Duration>)> = Vec::new();
    let mut rows = vec![Agent::Rpc];
    rows.extend(agents);
    for scenario in Scenario::ALL {
        for agent in &rows {
            let mine: Vec<&RunResult> = runs
                .iter()
                .filter(|(a, s, _)| a == agent && *s == scenario)
                .map(|(_, _, r)| r)
                .collect();
            let Some(last) = mine.last() else { continue };
            let first = median(mine.iter().filter_map(|r| r.first_chunk).collect());
            let model = median(mine.iter().filter_map(|r| r.model_to_chunk).collect());
            let mut chunks: Vec<usize> = mine.iter().map(|r| r.chunks).collect();
            chunks.sort_unstable();
            let chunks = chunks[chunks.len() / 2];
            let mut stops: Vec<&str> = mine.iter().map(|r| r.stop.as_str()).collect();
            stops.sort_unstable();
            stops.dedup();
            let perms = last.permissions;
            let note = if scenario == Scenario::Cancel {
                let after = median(mine.iter().filter_map(|r| r.after_cancel).collect());
                format!(
                    "answered {} ms after session/cancel; {}",
                    cell(after),
                    last.note
                )
            } else {
                last.note.clone()
            };
            let (violations, perms) = if *agent == Agent::Rpc {
                ("-".to_owned(), "-".to_owned())
            } else {
                (
                    violations_of(*agent, scenario.name()).to_string(),
                    perms.to_string(),
                )
            };
            println!(
                "{:<9} {:<10} {:>10} {:>7} {:>15} {:>15} {:>6}  {:<12} {}",
                agent.name(),
                scenario.name(),
                violations,
                chunks,
                cell(first),
                cell(model),
                perms,
                stops.join(","),
                note
            );
            firsts.push((scenario, *agent, first, model));
        }
    }
    let plain = |a: Agent| {
        firsts
            .iter()
            .find(|(s, ag, ..)| *s == Scenario::Plain && *ag == a)
            .and_then(|(_, _, _, m)| *m)
    };
    if let Some(own) = plain(Agent::Rpc) {
        println!(
            "\nplain: the model's request > the first chunk, against droid's own first delta ({:.1} ms):",
            ms(own)
        );
        for agent in agents {
            if let Some(m) = plain(*agent) {
                println!(
                    "  {:<9} {:>8.1} ms, {:+8.1} ms over droid's own",
                    agent.name(),
                    ms(m),
                    ms(m) - ms(own)
                );
            }
        }
    }
    if agents.len() == 2 {
        println!("\nours against native, same run (negative: ours is earlier):");
        for scenario in Scenario::ALL {
            let of = |a: Agent| {
                firsts
                    .iter()
                    .find(|(s, ag, ..)| *s == scenario && *ag == a)
                    .map(|(_, _, f, m)| (*f, *m))
            };
            if let (Some((Some(nf), nm)), Some((Some(of_), om))) =
                (of(Agent::Native), of(Agent::Ours))
            {
                let mut line = format!(
                    "  {:<10} prompt>first chunk {:+8.1} ms (ratio {:.3})",
                    scenario.name(),
                    ms(of_) - ms(nf),
                    of_.as_secs_f64() / nf.as_secs_f64()
                );
                if let (Some(nm), Some(om)) = (nm, om) {
                    let _ = write!(
                        line,
                        "; droid's first token>first chunk {:.1} ms ours, {:.1} ms native",
                        ms(om),
                        ms(nm)
                    );
                }
                println!("{line}");
            }
        }
    }
    println!("\nrecorded failures of native droid, probed in this run:");
    println!(
        "  {:<46} {}",
        "probe",
        agents
            .iter()
            .map(|a| format!("{:<30}", a.name()))
            .collect::<String>()
    );
    let row = |label: &str, f: &dyn Fn(Agent) -> String| {
        let cells: String = agents.iter().map(|a| format!("{:<30}", f(*a))).collect();
        println!("  {label:<46} {cells}");
    };
    let probe_of = |a: Agent| probes.iter().find(|(x, _)| *x == a).map(|(_, p)| p);
    row("invalid JSON line", &|a| {
        probe_of(a).map_or("-".into(), |p| p.invalid_json.clone())
    });
    row("initialize protocolVersion 2", &|a| {
        probe_of(a).map_or("-".into(), |p| p.version_answer.clone())
    });
    row("session/set_config_option model", &|a| {
        let answer = runs
            .iter()
            .rev()
            .find(|(x, s, _)| *x == a && *s == Scenario::SetModel)
            .and_then(|(_, _, r)| r.set_config.clone());
        match answer {
            None => "-".into(),
            Some(msg) if msg.get("error").is_some() => format!("error {}", msg["error"]["code"]),
            Some(msg) => match msg["result"]["configOptions"].as_array() {
                Some(list) => format!("configOptions ({})", list.len()),
                None => format!("{} (no configOptions)", msg["result"]),
            },
        }
    });
    row("terminal content, client without terminal", &|a| {
        let n: usize = runs
            .iter()
            .filter(|(x, _, _)| *x == a)
            .map(|(_, _, r)| r.terminal)
            .sum();
        format!("{n} item(s) in all runs")
    });
    let total: usize = violations.values().sum();
    println!(
        "\nschema: {} transcript(s) checked, {total} agent message(s) in violation (native and ours together)",
        violations.len()
    );
}
