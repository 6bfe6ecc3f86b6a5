//! The soak's traffic against `droid-executor serve`: each client runs one operation after the
//! other through [`KINDS`], every answer checked.
//!
//! - `execute`: `POST /execute` (quick repository), 200 with status `success`;
//! - `submit_poll`: `POST /tasks` (202), then `GET /tasks/{id}` until the state is final, which
//!   must be `success`;
//! - `submit_cancel`: `POST /tasks` on the hanging repository, then `DELETE /tasks/{id}`: 200
//!   with state `cancelled`, or 202 and then `cancelled` on a later `GET`;
//! - `events`: `POST /tasks`, then `GET /tasks/{id}/events` to its end, which must be an
//!   `event: result` with status `success`;
//! - `disconnect`: `POST /execute` on the hanging repository over a raw connection, closed once
//!   the fake droid says it started (no answer may come before): the bridge must cancel the run;
//! - `health`, `metrics`: 200 with `status: ok`, and Prometheus text;
//! - `bad_400` (an empty objective: 400 with an `error` result), `bad_404` (an unknown route),
//!   `bad_413` (a body announced over the limit, refused from the header), `bad_415`
//!   (`text/plain`).
//!
//! At the end [`BridgeLoad::cross_check`] holds the bridge's own counters against the client's:
//! every successful `execute` is one `success` run, every disconnect one `cancelled` run, no
//! other run status, every submission counted, no 5xx or 429 answer.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use crate::soak_raw_http;
use crate::soak_tally::Tally;
use crate::soak_world::Home;
use bridge_http::client::{Client, Method};
use serde_json::{Value, json};

/// The operations each client cycles through (cheap ones more than once, between runs).
pub(crate) const KINDS: &[&str] = &[
    "execute",
    "health",
    "submit_poll",
    "bad_400",
    "events",
    "metrics",
    "submit_cancel",
    "bad_404",
    "disconnect",
    "bad_413",
    "execute",
    "bad_415",
];

/// Longest wait for one run or task to finish (the fake droid takes milliseconds; this is only
/// a bound on a queue under load).
const RUN_LIMIT: Duration = Duration::from_secs(120);
/// Longest wait for a quick request (health, a refusal, a task's record).
const QUICK_LIMIT: Duration = Duration::from_secs(30);
/// How often a task's record is looked at while it runs.
const POLL: Duration = Duration::from_millis(50);

/// What one client sends.
struct Requests {
    quick: Value,
    hang: Value,
    invalid: Value,
    started: PathBuf,
}

/// The bridge's load: its address, each client's requests, and what the bridge's counters must
/// show at the end.
pub(crate) struct BridgeLoad {
    client: Client,
    addr: SocketAddr,
    requests: Vec<Requests>,
    /// `execute` answers that were `success`.
    executed: AtomicU64,
    /// Runs cancelled by disconnecting once they had started.
    disconnects: AtomicU64,
    /// `POST /tasks` answered 202.
    submitted: AtomicU64,
}

fn check(ok: bool, what: impl FnOnce() -> String) -> Result<(), String> {
    if ok { Ok(()) } else { Err(what()) }
}

fn json_of(bytes: &[u8]) -> Result<Value, String> {
    serde_json::from_slice(bytes)
        .map_err(|e| format!("not JSON ({e}): {}", String::from_utf8_lossy(bytes)))
}

/// A counter's value in Prometheus text (`name` with its labels, as printed).
pub(crate) fn metric(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}

impl BridgeLoad {
    /// The load for the bridge at `addr` serving `home`, with `clients` clients.
    pub(crate) fn new(client: Client, addr: SocketAddr, home: &Home, clients: usize) -> Self {
        let requests = (0..clients)
            .map(|c| {
                let mut invalid = home.request(c, false);
                invalid["objective"] = json!("");
                Requests {
                    quick: home.request(c, false),
                    hang: home.request(c, true),
                    invalid,
                    started: home.started_file(c),
                }
            })
            .collect();
        Self {
            client,
            addr,
            requests,
            executed: AtomicU64::new(0),
            disconnects: AtomicU64::new(0),
            submitted: AtomicU64::new(0),
        }
    }

    /// One operation of `kind` for client `c`; `Err` says what was wrong.
    pub(crate) async fn op(&self, tally: &Tally, c: usize, kind: &str) -> Result<(), String> {
        let r = &self.requests[c];
        match kind {
            "execute" => {
                let v = self
                    .expect(tally, Method::POST, "/execute", Some(&r.quick), 200)
                    .await?;
                check(v["status"] == "success", || format!("200 but {v}"))?;
                self.executed.fetch_add(1, Ordering::Relaxed);
                Ok(())
            }
            "submit_poll" => {
                let id = self.submit(tally, &r.quick).await?;
                let rec = self.until_final(tally, &id).await?;
                check(rec["state"] == "success", || {
                    format!("task {id} ended {rec}")
                })
            }
            "submit_cancel" => {
                let id = self.submit(tally, &r.hang).await?;
                let path = format!("/tasks/{id}");
                let t = Instant::now();
                let (status, body) = self.send(tally, Method::DELETE, &path, None).await?;
                let rec = json_of(&body)?;
                let rec = match (status, rec["state"].as_str()) {
                    (200, _) => rec,
                    (202, Some("queued" | "running")) => self.until_final(tally, &id).await?,
                    _ => return Err(format!("DELETE {path}: {status} {rec}")),
                };
                check(rec["state"] == "cancelled", || {
                    format!("task {id} ended {rec} {:?} after DELETE", t.elapsed())
                })
            }
            "events" => {
                let id = self.submit(tally, &r.quick).await?;
                let path = format!("/tasks/{id}/events");
                let t = Instant::now();
                let answer = self.client.send(Method::GET, &path, None, RUN_LIMIT).await;
                tally.request(t.elapsed());
                let (status, body) = answer.map_err(|e| format!("GET {path}: {e}"))?;
                let text = String::from_utf8_lossy(&body);
                check(status == 200, || format!("GET {path}: {status} {text}"))?;
                let last = text
                    .rsplit_once("event: result\ndata: ")
                    .map(|(_, rest)| rest.lines().next().unwrap_or(""))
                    .ok_or_else(|| format!("GET {path}: no result event in {text}"))?;
                let result = json_of(last.as_bytes())?;
                check(result["status"] == "success", || {
                    format!("GET {path}: the result event is {result}")
                })
            }
            "disconnect" => self.disconnect(tally, r).await,
            "health" => {
                let v = self
                    .expect(tally, Method::GET, "/health", None, 200)
                    .await?;
                check(v["status"] == "ok", || format!("/health: {v}"))
            }
            "metrics" => {
                let (status, body) = self.send(tally, Method::GET, "/metrics", None).await?;
                let text = String::from_utf8_lossy(&body);
                check(
                    status == 200 && text.contains("droid_executor_runs_total{"),
                    || format!("/metrics: {status} {text}"),
                )
            }
            "bad_400" => {
                let v = self
                    .expect(tally, Method::POST, "/execute", Some(&r.invalid), 400)
                    .await?;
                check(v["status"] == "error", || format!("400 but {v}"))
            }
            "bad_404" => {
                let v = self
                    .expect(tally, Method::GET, "/no-such-route", None, 404)
                    .await?;
                check(v["error"]["code"] == "not_found", || format!("404 but {v}"))
            }
            "bad_413" => {
                let head = "POST /execute HTTP/1.1\r\nContent-Type: application/json\r\n\
                            Content-Length: 67108864\r\n";
                self.refused(tally, head, b"", 413, "body_too_large").await
            }
            "bad_415" => {
                let body = r.quick.to_string();
                let head = format!(
                    "POST /execute HTTP/1.1\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n",
                    body.len()
                );
                self.refused(tally, &head, body.as_bytes(), 415, "unsupported_media_type")
                    .await
            }
            other => Err(format!("no such operation {other}")),
        }
    }

    /// One exchange through the bridge's client, timed.
    async fn send(
        &self,
        tally: &Tally,
        method: Method,
        path: &str,
        body: Option<&Value>,
    ) -> Result<(u16, Vec<u8>), String> {
        let limit = if path == "/execute" {
            RUN_LIMIT
        } else {
            QUICK_LIMIT
        };
        let t = Instant::now();
        let answer = self.client.send(method.clone(), path, body, limit).await;
        tally.request(t.elapsed());
        answer
            .map(|(status, body)| (status, body.to_vec()))
            .map_err(|e| format!("{method} {path}: {e}"))
    }

    /// [`BridgeLoad::send`] whose answer must have `status` and a JSON body.
    async fn expect(
        &self,
        tally: &Tally,
        method: Method,
        path: &str,
        body: Option<&Value>,
        status: u16,
    ) -> Result<Value, String> {
        let (got, bytes) = self.send(tally, method.clone(), path, body).await?;
        let v = json_of(&bytes)?;
        check(got == status, || {
            format!("{method} {path}: {got} (expected {status}) {v}")
        })?;
        Ok(v)
    }

    /// `POST /tasks` of `request`: the task id of a 202.
    async fn submit(&self, tally: &Tally, request: &Value) -> Result<String, String> {
        let v = self
            .expect(tally, Method::POST, "/tasks", Some(request), 202)
            .await?;
        let id = v["task_id"]
            .as_str()
            .ok_or_else(|| format!("POST /tasks: 202 without a task_id: {v}"))?;
        self.submitted.fetch_add(1, Ordering::Relaxed);
        Ok(id.to_owned())
    }

    /// `GET /tasks/{id}` until the state is neither `queued` nor `running`; the record.
    async fn until_final(&self, tally: &Tally, id: &str) -> Result<Value, String> {
        let path = format!("/tasks/{id}");
        let until = Instant::now() + RUN_LIMIT;
        loop {
            let rec = self.expect(tally, Method::GET, &path, None, 200).await?;
            if !matches!(rec["state"].as_str(), Some("queued" | "running")) {
                return Ok(rec);
            }
            if Instant::now() > until {
                return Err(format!(
                    "task {id} still {} after {RUN_LIMIT:?}",
                    rec["state"]
                ));
            }
            tokio::time::sleep(POLL).await;
        }
    }

    /// `POST /execute` of the hanging request over a raw connection, closed once its droid
    /// started; nothing may be answered before.
    async fn disconnect(&self, tally: &Tally, r: &Requests) -> Result<(), String> {
        let _ = std::fs::remove_file(&r.started);
        let body = r.hang.to_string();
        let took =
            soak_raw_http::leave_once_started(self.addr, "/execute", &body, &r.started, RUN_LIMIT)
                .await?;
        tally.request(took);
        self.disconnects.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    /// A request written by hand whose answer must be `status` with the error `code`.
    async fn refused(
        &self,
        tally: &Tally,
        head: &str,
        body: &[u8],
        status: u16,
        code: &str,
    ) -> Result<(), String> {
        let t = Instant::now();
        let answer = soak_raw_http::exchange(self.addr, head, body, QUICK_LIMIT).await;
        tally.request(t.elapsed());
        let (got, v) = answer?;
        check(got == status && v["error"]["code"] == code, || {
            format!("expected {status} {code}, got {got} {v}")
        })
    }

    /// The bridge's counters against the client's (after the traffic has drained).
    pub(crate) async fn cross_check(&self, tally: &Tally) {
        let text = match self.send(tally, Method::GET, "/metrics", None).await {
            Ok((200, body)) => String::from_utf8_lossy(&body).into_owned(),
            Ok((status, body)) => {
                let text = String::from_utf8_lossy(&body);
                return tally.error("metrics", &format!("{status} {text}"));
            }
            Err(e) => return tally.error("metrics", &e),
        };
        let runs = |s: &str| {
            metric(
                &text,
                &format!("droid_executor_runs_total{{status=\"{s}\"}}"),
            )
        };
        let expected = [
            ("success", self.executed.load(Ordering::Relaxed)),
            ("cancelled", self.disconnects.load(Ordering::Relaxed)),
            ("partial", 0),
            ("failed", 0),
            ("timeout", 0),
            ("error", 0),
        ];
        for (status, n) in expected {
            if runs(status) != Some(n) {
                tally.error(
                    "metrics",
                    &format!(
                        "the bridge counted {:?} sync runs with status {status}, the clients {n}",
                        runs(status)
                    ),
                );
            }
        }
        let submitted = metric(&text, "droid_executor_tasks_submitted_total");
        if submitted != Some(self.submitted.load(Ordering::Relaxed)) {
            tally.error(
                "metrics",
                &format!(
                    "the bridge counted {submitted:?} submissions, the clients {}",
                    self.submitted.load(Ordering::Relaxed)
                ),
            );
        }
        for line in text.lines() {
            let Some(code) = line
                .strip_prefix("droid_executor_http_responses_total{code=\"")
                .and_then(|rest| rest.get(..3))
            else {
                continue;
            };
            if code.starts_with('5') || code == "429" {
                tally.error("metrics", &format!("the bridge answered {line}"));
            }
        }
    }

    /// Whether the bridge runs nothing and holds no task unfinished (`GET /health`, untimed).
    pub(crate) async fn idle(&self) -> Result<bool, String> {
        let v = self.client.health().await.map_err(|e| e.to_string())?;
        let zero = |v: &Value| v.as_u64() == Some(0);
        Ok(zero(&v["runs"]["running"])
            && zero(&v["runs"]["queued"])
            && zero(&v["tasks"]["running"])
            && zero(&v["tasks"]["queued"]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_prometheus_counters() {
        let text = "# HELP x y\ndroid_executor_runs_total{status=\"success\"} 12\n\
                    droid_executor_tasks_submitted_total 3\n";
        assert_eq!(
            metric(text, "droid_executor_runs_total{status=\"success\"}"),
            Some(12)
        );
        assert_eq!(
            metric(text, "droid_executor_tasks_submitted_total"),
            Some(3)
        );
        assert_eq!(metric(text, "droid_executor_runs_total"), None);
    }
}
