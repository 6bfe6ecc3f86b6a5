//! An async, multiplexed MCP client over a server's stdio, for the soak: many callers share one
//! session, as an agent's concurrent tool calls do (`bench mcp`'s client is blocking and has one
//! call in flight, which is what a round-trip benchmark wants and a soak cannot use).
//!
//! A reader task routes each response to its caller by id, counts `notifications/progress` by
//! token, hands the answer to a malformed line (id null) to whoever is waiting for one, and
//! keeps anything nobody asked for (an answer to a cancelled call, a line that is not JSON) as a
//! stray, which the soak counts as an error.

use std::collections::{HashMap, HashSet};
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout};
use tokio::sync::oneshot;

use crate::soak_tally::Tally;

/// Longest wait for `initialize`.
const INIT_LIMIT: Duration = Duration::from_secs(30);
/// Time the server gets to exit once its stdin is closed (it promises 2 s).
const EXIT_LIMIT: Duration = Duration::from_secs(10);
/// The revision the session negotiates.
const REVISION: &str = "2025-11-25";

/// Where the reader delivers what the server writes.
#[derive(Default)]
struct Routes {
    /// Requests waiting for their response, by id.
    pending: HashMap<u64, oneshot::Sender<Value>>,
    /// The malformed line waiting for its parse error (id null).
    parse_error: Option<oneshot::Sender<Value>>,
    /// `notifications/progress` received, by token (as JSON text).
    progress: HashMap<String, usize>,
    /// Calls cancelled with `notifications/cancelled`: they must never be answered.
    cancelled: HashSet<u64>,
    /// What nobody asked for.
    strays: Vec<String>,
    /// Whether the server's stdout has ended.
    closed: bool,
}

/// The MCP server process, killed when dropped.
pub(crate) struct McpServer {
    child: Child,
    /// Its pid.
    pub(crate) pid: u32,
}

impl McpServer {
    /// Close its stdin (`session`'s) and wait for it to exit; killed if it does not in time.
    pub(crate) async fn stop(mut self, session: &Session) -> Result<ExitStatus, String> {
        *session.stdin.lock().await = None;
        match tokio::time::timeout(EXIT_LIMIT, self.child.wait()).await {
            Ok(status) => status.map_err(|e| e.to_string()),
            Err(_) => {
                let _ = self.child.kill().await;
                Err(format!(
                    "did not exit within {EXIT_LIMIT:?} of stdin closing"
                ))
            }
        }
    }
}

/// One session with the server.
pub(crate) struct Session {
    stdin: tokio::sync::Mutex<Option<ChildStdin>>,
    routes: Arc<Mutex<Routes>>,
    next_id: AtomicU64,
}

fn lock(routes: &Mutex<Routes>) -> MutexGuard<'_, Routes> {
    routes.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Start `cmd` (`droid-executor mcp`, stderr to `log`) and initialize a session with it.
pub(crate) async fn start(cmd: std::process::Command, log: &Path) -> Result<(McpServer, Session)> {
    let mut child = tokio::process::Command::from(cmd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(log)?)
        .kill_on_drop(true)
        .spawn()
        .context("could not start droid-executor mcp")?;
    let pid = child.id().context("the MCP server exited at once")?;
    let stdin = child.stdin.take().context("no stdin pipe")?;
    let stdout = child.stdout.take().context("no stdout pipe")?;
    let routes = Arc::new(Mutex::new(Routes::default()));
    tokio::spawn(read(stdout, Arc::clone(&routes)));
    let session = Session {
        stdin: tokio::sync::Mutex::new(Some(stdin)),
        routes,
        next_id: AtomicU64::new(1),
    };
    let server = McpServer { child, pid };
    let params = json!({"protocolVersion": REVISION, "capabilities": {},
                        "clientInfo": {"name": "xtask-soak", "version": "0"}});
    let r = session
        .request(&Tally::default(), "initialize", params, INIT_LIMIT)
        .await
        .map_err(|e| anyhow::anyhow!("initialize: {e}"))?;
    anyhow::ensure!(r["protocolVersion"] == REVISION, "initialize answered {r}");
    session
        .write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}).to_string())
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    Ok((server, session))
}

/// The reader: route every line the server writes.
async fn read(stdout: ChildStdout, routes: Arc<Mutex<Routes>>) {
    let mut lines = BufReader::new(stdout).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        let mut r = lock(&routes);
        let Ok(v) = serde_json::from_str::<Value>(&line) else {
            r.strays.push(format!("not JSON on stdout: {line}"));
            continue;
        };
        if let Some(method) = v["method"].as_str() {
            if method == "notifications/progress" {
                let token = v["params"]["progressToken"].to_string();
                *r.progress.entry(token).or_default() += 1;
            }
            continue;
        }
        match v["id"].as_u64() {
            Some(id) => match r.pending.remove(&id) {
                Some(tx) => {
                    let _ = tx.send(v);
                }
                None if r.cancelled.contains(&id) => {
                    r.strays
                        .push(format!("an answer to cancelled call {id}: {line}"));
                }
                None => r.strays.push(format!("an answer to no request: {line}")),
            },
            None if v["id"].is_null() => match r.parse_error.take() {
                Some(tx) => {
                    let _ = tx.send(v);
                }
                None => r.strays.push(format!("an error nobody caused: {line}")),
            },
            None => r
                .strays
                .push(format!("an answer with a strange id: {line}")),
        }
    }
    let mut r = lock(&routes);
    r.closed = true;
    // callers see their sender gone: the server closed its output
    r.pending.clear();
    r.parse_error = None;
}

impl Session {
    /// A fresh request id (also good as a unique token).
    pub(crate) fn next_id(&self) -> u64 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Write one line to the server.
    pub(crate) async fn write(&self, line: &str) -> Result<(), String> {
        let mut stdin = self.stdin.lock().await;
        let pipe = stdin.as_mut().ok_or("stdin is closed")?;
        let mut bytes = line.as_bytes().to_vec();
        bytes.push(b'\n');
        pipe.write_all(&bytes)
            .await
            .map_err(|e| format!("write to the server: {e}"))?;
        pipe.flush()
            .await
            .map_err(|e| format!("write to the server: {e}"))
    }

    /// Register request `id` and send it; the receiver of its response.
    pub(crate) async fn send(
        &self,
        id: u64,
        method: &str,
        params: Value,
    ) -> Result<oneshot::Receiver<Value>, String> {
        let (tx, rx) = oneshot::channel();
        lock(&self.routes).pending.insert(id, tx);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.write(&msg.to_string()).await?;
        Ok(rx)
    }

    /// Send `method` and wait up to `limit` for its result (timed into `tally`); a JSON-RPC
    /// error is an `Err`.
    pub(crate) async fn request(
        &self,
        tally: &Tally,
        method: &str,
        params: Value,
        limit: Duration,
    ) -> Result<Value, String> {
        let id = self.next_id();
        let t = Instant::now();
        let rx = self.send(id, method, params).await?;
        let answer = tokio::time::timeout(limit, rx).await;
        tally.request(t.elapsed());
        let v = match answer {
            Ok(Ok(v)) => v,
            Ok(Err(_)) => return Err(format!("{method} (id {id}): the server closed its output")),
            Err(_) => {
                self.forget(id, false);
                return Err(format!("{method} (id {id}): no answer within {limit:?}"));
            }
        };
        match v.get("error") {
            Some(e) => Err(format!("{method} (id {id}): error {e}")),
            None => Ok(v["result"].clone()),
        }
    }

    /// Stop waiting for request `id`; with `cancelled`, an answer to it from now on is a stray.
    pub(crate) fn forget(&self, id: u64, cancelled: bool) {
        let mut r = lock(&self.routes);
        r.pending.remove(&id);
        if cancelled {
            r.cancelled.insert(id);
        }
    }

    /// Write `line`, which is not JSON, and wait up to `limit` for the error it causes (id
    /// null). One at a time: that answer has no id to route it by.
    pub(crate) async fn malformed(&self, line: &str, limit: Duration) -> Result<Value, String> {
        let (tx, rx) = oneshot::channel();
        lock(&self.routes).parse_error = Some(tx);
        self.write(line).await?;
        match tokio::time::timeout(limit, rx).await {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(_)) => Err("the server closed its output".into()),
            Err(_) => {
                lock(&self.routes).parse_error = None;
                Err(format!("no parse error within {limit:?}"))
            }
        }
    }

    /// How many `notifications/progress` came for `token` (forgetting them).
    pub(crate) fn progress(&self, token: &Value) -> usize {
        lock(&self.routes)
            .progress
            .remove(&token.to_string())
            .unwrap_or(0)
    }

    /// How many requests still wait for an answer.
    pub(crate) fn pending(&self) -> usize {
        lock(&self.routes).pending.len()
    }

    /// Count what nobody asked for, and a closed stdout, as errors in `tally` (once each).
    pub(crate) fn strays(&self, tally: &Tally) {
        let mut r = lock(&self.routes);
        for s in r.strays.drain(..) {
            tally.error("stray", &s);
        }
        if r.closed {
            tally.error("mcp", "the server closed its stdout during the soak");
            r.closed = false;
        }
    }
}
