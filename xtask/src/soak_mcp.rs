//! The soak's traffic against `droid-executor mcp`: several clients share one stdio session
//! ([`crate::soak_mcp_session`]), each running one operation after the other through
//! [`KINDS`], every answer checked.
//!
//! - `execute`: `tools/call execute_droid_task` with a progress token: status `success`, and at
//!   least one `notifications/progress` for the token before the response;
//! - `submit_pend`: `droid_submit`, then `droid_pend` waiting for the end: state `success`;
//! - `submit_cancel`: `droid_submit` on the hanging repository, `droid_cancel`, then
//!   `droid_pend`: state `cancelled`;
//! - `call_cancelled`: `execute_droid_task` on the hanging repository, then, once the fake droid
//!   says it started, `notifications/cancelled`: no response may ever come for it (the session
//!   counts one as a stray), and the run must stop (else its slot and repository stay taken and
//!   its droid is left at the end);
//! - `ping`: an empty result;
//! - `malformed`: a line that is not JSON: a `-32700` error with a null id.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Result;
use serde_json::{Value, json};

use crate::soak_mcp_session::{self, McpServer, Session};
use crate::soak_tally::Tally;
use crate::soak_world::World;

/// The operations each client cycles through.
pub(crate) const KINDS: &[&str] = &[
    "execute",
    "ping",
    "submit_pend",
    "malformed",
    "submit_cancel",
    "ping",
    "call_cancelled",
    "execute",
];

/// Longest wait for a run or task to finish (a bound on a queue under load).
const RUN_LIMIT: Duration = Duration::from_secs(120);
/// Longest wait for a quick answer (ping, a parse error).
const QUICK_LIMIT: Duration = Duration::from_secs(30);

/// What one client sends.
struct Requests {
    quick: Value,
    hang: Value,
    started: PathBuf,
}

/// The MCP clients' shared session and what each sends.
pub(crate) struct McpLoad {
    session: Session,
    /// One malformed line at a time (see [`Session::malformed`]).
    malformed: tokio::sync::Mutex<()>,
    requests: Vec<Requests>,
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

/// Start `program mcp` in `world`'s MCP home (stderr to `log`) and make the load for `clients`
/// clients.
pub(crate) async fn start(
    world: &World,
    program: &Path,
    log: &Path,
    clients: usize,
) -> Result<(McpServer, Arc<McpLoad>)> {
    let mut cmd = world.command(&world.mcp, program);
    cmd.arg("mcp");
    let (server, session) = soak_mcp_session::start(cmd, log).await?;
    let requests = (0..clients)
        .map(|c| Requests {
            quick: world.mcp.request(c, false),
            hang: world.mcp.request(c, true),
            started: world.mcp.started_file(c),
        })
        .collect();
    let load = McpLoad {
        session,
        malformed: tokio::sync::Mutex::new(()),
        requests,
    };
    Ok((server, Arc::new(load)))
}

impl McpLoad {
    /// The session (to stop the server, count strays and what still waits).
    pub(crate) fn session(&self) -> &Session {
        &self.session
    }

    /// `tools/call` of `tool`; the result, which must not be an error.
    async fn call(
        &self,
        tally: &Tally,
        tool: &str,
        arguments: Value,
        meta: Option<Value>,
    ) -> Result<Value, String> {
        let mut params = json!({"name": tool, "arguments": arguments});
        if let Some(m) = meta {
            params["_meta"] = m;
        }
        let r = self
            .session
            .request(tally, "tools/call", params, RUN_LIMIT)
            .await?;
        check(r["isError"] == false, || format!("{tool}: {r}"))?;
        Ok(r)
    }

    /// One operation of `kind` for client `c`; `Err` says what was wrong.
    pub(crate) async fn op(&self, tally: &Tally, c: usize, kind: &str) -> Result<(), String> {
        let r = &self.requests[c];
        match kind {
            "execute" => {
                let token = json!(format!("soak-{}", self.session.next_id()));
                let meta = json!({"progressToken": token});
                let res = self
                    .call(tally, "execute_droid_task", r.quick.clone(), Some(meta))
                    .await?;
                let status = &res["structuredContent"]["status"];
                check(status == "success", || format!("status {status}: {res}"))?;
                check(self.session.progress(&token) > 0, || {
                    format!("no notifications/progress for token {token} before the response")
                })
            }
            "submit_pend" => {
                let id = self.submit(tally, &r.quick).await?;
                let rec = self.pend(tally, &id).await?;
                check(rec["state"] == "success", || format!("task {id}: {rec}"))
            }
            "submit_cancel" => {
                let id = self.submit(tally, &r.hang).await?;
                let res = self
                    .call(tally, "droid_cancel", json!({"task_id": id}), None)
                    .await?;
                let state = &res["structuredContent"]["state"];
                check(
                    matches!(state.as_str(), Some("queued" | "running" | "cancelled")),
                    || format!("droid_cancel of {id}: {res}"),
                )?;
                let rec = self.pend(tally, &id).await?;
                check(rec["state"] == "cancelled", || format!("task {id}: {rec}"))
            }
            "call_cancelled" => self.call_cancelled(tally, r).await,
            "ping" => {
                let res = self
                    .session
                    .request(tally, "ping", json!({}), QUICK_LIMIT)
                    .await?;
                check(res == json!({}), || format!("ping answered {res}"))
            }
            "malformed" => {
                let _one = self.malformed.lock().await;
                let t = Instant::now();
                let answer = self
                    .session
                    .malformed(r#"{"jsonrpc": "2.0", "id": 7, "method": "#, QUICK_LIMIT)
                    .await;
                tally.request(t.elapsed());
                let v = answer?;
                check(v["error"]["code"] == -32700, || format!("answered {v}"))
            }
            other => Err(format!("no such operation {other}")),
        }
    }

    /// `droid_submit` of `request`: the task id.
    async fn submit(&self, tally: &Tally, request: &Value) -> Result<String, String> {
        let res = self
            .call(tally, "droid_submit", request.clone(), None)
            .await?;
        res["structuredContent"]["task_id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| format!("droid_submit without a task_id: {res}"))
    }

    /// `droid_pend` waiting for task `id` to end: its record.
    async fn pend(&self, tally: &Tally, id: &str) -> Result<Value, String> {
        let wait = RUN_LIMIT.as_secs() - 10;
        let res = self
            .call(
                tally,
                "droid_pend",
                json!({"task_id": id, "wait_seconds": wait}),
                None,
            )
            .await?;
        Ok(res["structuredContent"].clone())
    }

    /// `execute_droid_task` on the hanging repository, cancelled once droid started.
    async fn call_cancelled(&self, tally: &Tally, r: &Requests) -> Result<(), String> {
        let _ = std::fs::remove_file(&r.started);
        let id = self.session.next_id();
        let params = json!({"name": "execute_droid_task", "arguments": r.hang});
        let t = Instant::now();
        let mut rx = self.session.send(id, "tools/call", params).await?;
        while !r.started.exists() {
            if t.elapsed() > RUN_LIMIT {
                self.session.forget(id, false);
                return Err(format!("droid did not start within {RUN_LIMIT:?}"));
            }
            // the run hangs: any answer before the cancel is wrong
            match tokio::time::timeout(Duration::from_millis(10), &mut rx).await {
                Err(_) => {}
                Ok(Ok(v)) => return Err(format!("a hanging call was answered: {v}")),
                Ok(Err(_)) => return Err("the server closed its output".into()),
            }
        }
        tally.request(t.elapsed());
        self.session.forget(id, true);
        // an answer may have slipped in since the last look
        if let Ok(v) = rx.try_recv() {
            return Err(format!("a hanging call was answered: {v}"));
        }
        let note = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                          "params": {"requestId": id, "reason": "soak: cancelling a running call"}});
        self.session.write(&note.to_string()).await
    }
}
