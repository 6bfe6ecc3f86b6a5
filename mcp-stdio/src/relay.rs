//! What a run's events become on the wire: a progress notification per event worth a line (plus
//! a heartbeat whenever no progress notification went out for [`HEARTBEAT`](crate::progress::HEARTBEAT), so clients that
//! reset their timeout on progress keep waiting), and log messages at the levels
//! [`crate::logging`] gives them. The same relay serves a sync `tools/call` (events from the
//! engine's channel, [`relayed`]), a `droid_pend` that waits ([`Relay::with_heartbeat`]) and a
//! 2025-11-25 task (events read back from the task store by [`crate::tasks`]).
//!
//! Two guarantees:
//! - nothing after a cancel: once the request's token fires the relay forwards nothing more
//!   (and what it queued before is withdrawn at the writer, see [`crate::outbox::Outbox`]);
//! - nothing after the response: [`relayed`] returns only when every event of the run has been
//!   relayed, so a caller that answers after it answers after the last notification (the outbox
//!   is one ordered queue). There is no timeout that could let progress slip behind the response.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use droid_exec::{EVENT_CHANNEL_CAPACITY, RunEvent};
use serde_json::Value;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::logging::{Level, LogSink, event_message};
use crate::outbox::Outbox;
use crate::progress::ProgressSink;
use crate::server::Server;

/// One request's progress and log sinks (either may be absent), silenced by its cancellation.
#[derive(Debug)]
pub struct Relay {
    server: Arc<Server>,
    progress: Option<ProgressSink>,
    log: Option<LogSink>,
    stop: CancellationToken,
}

impl Relay {
    /// A relay for one request, which forwards nothing once `stop` (the request's cancellation)
    /// fires.
    pub fn new(
        server: Arc<Server>,
        progress: Option<ProgressSink>,
        log: Option<LogSink>,
        stop: CancellationToken,
    ) -> Self {
        Self {
            server,
            progress,
            log,
            stop,
        }
    }

    /// Send what comes next to `out` instead: a 2025-11-25 task watched once its
    /// `CreateTaskResult` is sent, when the transport's stream of that request is over.
    pub fn redirect(&mut self, out: &Outbox) {
        if let Some(p) = self.progress.as_mut() {
            p.redirect(out);
        }
        if let Some(l) = self.log.as_mut() {
            l.out = out.clone();
        }
    }

    fn stopped(&self) -> bool {
        self.stop.is_cancelled()
    }

    /// Relay `ev`.
    pub async fn event(&mut self, ev: &RunEvent) {
        if self.stopped() {
            return;
        }
        if !matches!(ev, RunEvent::Completed { .. })
            && let Some(line) = ev.summary()
        {
            self.progress(line).await;
        }
        let Some(log) = &self.log else {
            return;
        };
        // droid's version is found once per engine; only looked up when it will be sent
        let version = if matches!(ev, RunEvent::Started { .. }) && log.enabled(Level::Info) {
            self.server.engine().droid_version().await
        } else {
            None
        };
        if self.stopped() {
            return;
        }
        if let Some((level, data)) = event_message(ev, version.as_deref()) {
            log.log(level, data).await;
        }
    }

    /// A progress notification with `message`, if the client asked for progress and the request
    /// was not cancelled.
    pub async fn progress(&mut self, message: String) {
        if self.stopped() {
            return;
        }
        if let Some(p) = self.progress.as_mut() {
            p.send(message).await;
        }
    }

    /// A heartbeat progress notification (the run has gone on for `running_for`).
    pub async fn heartbeat(&mut self, running_for: Duration) {
        self.progress(format!("still working ({} s)", running_for.as_secs()))
            .await;
    }

    /// When the next heartbeat is due ([`HEARTBEAT`](crate::progress::HEARTBEAT) after the last progress notification
    /// sent); `None` when no progress goes out (none asked for, or the request was cancelled).
    pub fn heartbeat_due(&self) -> Option<Instant> {
        if self.stopped() {
            return None;
        }
        self.progress.as_ref().map(ProgressSink::heartbeat_due)
    }

    /// A heartbeat if one is due now (for loops that poll, like the task watcher).
    pub async fn heartbeat_if_due(&mut self, running_for: Duration) {
        if self.heartbeat_due().is_some_and(|t| t <= Instant::now()) {
            self.heartbeat(running_for).await;
        }
    }

    /// Await `work`, sending `"<what> (<n> s)"` as a heartbeat whenever no progress notification
    /// went out for [`HEARTBEAT`](crate::progress::HEARTBEAT) meanwhile.
    pub async fn with_heartbeat<F: Future>(&mut self, what: &str, work: F) -> F::Output {
        let started = Instant::now();
        tokio::pin!(work);
        loop {
            let due = self.heartbeat_due();
            tokio::select! {
                out = &mut work => return out,
                () = sleep_until(due) => {
                    self.progress(format!("{what} ({} s)", started.elapsed().as_secs())).await;
                }
            }
        }
    }

    /// A log message of the call itself (a task submitted, created or cancelled).
    pub async fn log(&self, level: Level, data: Value) {
        if self.stopped() {
            return;
        }
        if let Some(log) = &self.log {
            log.log(level, data).await;
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
        None => std::future::pending().await,
    }
}

/// Relay a sync run's events until the run ends (its sender is dropped), with a heartbeat
/// whenever no progress notification went out for [`HEARTBEAT`](crate::progress::HEARTBEAT).
pub async fn relay_channel(mut rx: mpsc::Receiver<RunEvent>, mut relay: Relay) {
    let started = Instant::now();
    loop {
        let due = relay.heartbeat_due();
        tokio::select! {
            ev = rx.recv() => match ev {
                None => return,
                Some(ev) => relay.event(&ev).await,
            },
            () = sleep_until(due) => relay.heartbeat(started.elapsed()).await,
        }
    }
}

/// Run `work` with the sender of a run's event channel while `relay` relays the events; returns
/// `work`'s output once both are done, so every notification of the run is queued before the
/// caller sends its response.
pub async fn relayed<F, Fut>(relay: Relay, work: F) -> Fut::Output
where
    F: FnOnce(mpsc::Sender<RunEvent>) -> Fut,
    Fut: Future,
{
    let (tx, rx) = mpsc::channel(EVENT_CHANNEL_CAPACITY);
    let (out, ()) = tokio::join!(work(tx), relay_channel(rx, relay));
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use droid_contract::Status;
    use droid_exec::{Engine, EngineConfig};
    use pretty_assertions::assert_eq;
    use serde_json::json;

    use super::*;
    use crate::jsonrpc::result;
    use crate::outbox::{Inbox, Outbox};
    use crate::progress::HEARTBEAT;

    /// A server whose engine can start nothing (the relay only needs it for droid's version).
    fn server() -> Arc<Server> {
        let cfg = EngineConfig {
            droid_bin: None,
            droid_source: "unit test (no droid)".into(),
            droid_warnings: Vec::new(),
            agents: Vec::new(),
            env: Vec::new(),
            allowed_roots: Vec::new(),
            max_autonomy: droid_contract::Autonomy::Low,
            default_timeout: Duration::from_secs(60),
            default_model: None,
            verify: false,
            sandbox: Default::default(),
            sandbox_writable: Vec::new(),
            excerpt_bytes: 4096,
            kill_grace: Duration::from_secs(1),
            scratch_root: PathBuf::from("."),
            store_dir: None,
            max_concurrent: 1,
            task_ttl: Duration::from_secs(3600),
            supervisor: None,
            cgroups: true,
            limits: Default::default(),
            redact: Vec::new(),
            worktrees: Default::default(),
            client_env: Default::default(),
        };
        Server::new(Engine::new(cfg), Default::default(), None)
    }

    fn relay_to(out: &Outbox, stop: &CancellationToken) -> Relay {
        Relay::new(
            server(),
            Some(ProgressSink::new(json!("tok"), out.clone())),
            None,
            stop.clone(),
        )
    }

    /// Events that make no progress line.
    fn quiet(i: usize) -> RunEvent {
        if i.is_multiple_of(2) {
            RunEvent::ToolResult {
                id: format!("c{i}"),
                tool: "Read".into(),
                is_error: false,
                excerpt: "…".into(),
            }
        } else {
            RunEvent::Message {
                role: "user".into(),
                text: "go on".into(),
            }
        }
    }

    /// Every message the inbox gets until its outboxes are gone, with the (virtual) time since
    /// `t0` at which it arrived.
    async fn arrivals(mut inbox: Inbox, t0: Instant) -> Vec<(Duration, Value)> {
        let mut got = Vec::new();
        while let Some(m) = inbox.recv().await {
            got.push((t0.elapsed(), m));
        }
        got
    }

    /// The gaps between progress notifications, the call's start counted as the first.
    fn gaps(got: &[(Duration, Value)]) -> Vec<Duration> {
        let mut last = Duration::ZERO;
        let mut gaps = Vec::new();
        for (at, m) in got {
            assert_eq!(m["method"], "notifications/progress", "{m}");
            gaps.push(*at - last);
            last = *at;
        }
        gaps
    }

    #[tokio::test(start_paused = true)]
    async fn heartbeats_count_from_the_last_progress_sent_not_from_the_last_event() {
        let (out, inbox) = Outbox::new();
        let t0 = Instant::now();
        let relay = relay_to(&out, &CancellationToken::new());
        drop(out);
        // a run whose events (every 3 s for 90 s) never make a progress line, then one that does
        let run = relayed(relay, |tx| async move {
            for i in 0..30 {
                tokio::time::sleep(Duration::from_secs(3)).await;
                let _ = tx.send(quiet(i)).await;
            }
            tokio::time::sleep(Duration::from_secs(1)).await;
            let _ = tx
                .send(RunEvent::Message {
                    role: "assistant".into(),
                    text: "Done.".into(),
                })
                .await;
        });
        let ((), got) = tokio::join!(run, arrivals(inbox, t0));
        let gaps = gaps(&got);
        assert!(
            gaps.iter().all(|g| *g <= HEARTBEAT),
            "a gap over {HEARTBEAT:?}: {gaps:?}"
        );
        assert!(HEARTBEAT <= Duration::from_secs(15));
        // 9 heartbeats (10 s … 90 s) and droid's line
        let messages: Vec<&str> = got
            .iter()
            .map(|(_, m)| m["params"]["message"].as_str().unwrap_or_default())
            .collect();
        assert_eq!(messages.len(), 10, "{messages:?}");
        assert_eq!(messages[0], "still working (10 s)");
        assert_eq!(messages[9], "droid: Done.");
        let progress: Vec<u64> = got
            .iter()
            .filter_map(|(_, m)| m["params"]["progress"].as_u64())
            .collect();
        assert_eq!(progress, (1..=10).collect::<Vec<u64>>());
    }

    #[tokio::test(start_paused = true)]
    async fn a_polling_watcher_heartbeats_from_the_last_progress_sent_too() {
        let (out, inbox) = Outbox::new();
        let t0 = Instant::now();
        let mut relay = relay_to(&out, &CancellationToken::new());
        drop(out);
        // as `tasks::watch` polls: every 0.5 s the events recorded since (none worth a line),
        // then a heartbeat if one is due
        let watcher = async move {
            for i in 0..120 {
                relay.event(&quiet(i)).await;
                relay.heartbeat_if_due(t0.elapsed()).await;
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            drop(relay);
        };
        let ((), got) = tokio::join!(watcher, arrivals(inbox, t0));
        let at: Vec<u64> = got.iter().map(|(t, _)| t.as_secs()).collect();
        assert_eq!(at, vec![10, 20, 30, 40, 50]);
        assert!(
            gaps(&got)
                .iter()
                .all(|g| *g <= HEARTBEAT + Duration::from_millis(500))
        );
    }

    #[tokio::test(start_paused = true)]
    async fn a_line_worth_sending_postpones_the_heartbeat() {
        let (out, inbox) = Outbox::new();
        let t0 = Instant::now();
        let relay = relay_to(&out, &CancellationToken::new());
        drop(out);
        // droid speaks every 8 s for 40 s: no heartbeat is needed
        let run = relayed(relay, |tx| async move {
            for _ in 0..5 {
                tokio::time::sleep(Duration::from_secs(8)).await;
                let _ = tx
                    .send(RunEvent::Message {
                        role: "assistant".into(),
                        text: "working".into(),
                    })
                    .await;
            }
        });
        let ((), got) = tokio::join!(run, arrivals(inbox, t0));
        let at: Vec<u64> = got.iter().map(|(t, _)| t.as_secs()).collect();
        assert_eq!(at, vec![8, 16, 24, 32, 40]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_long_wait_heartbeats_too() {
        let (out, inbox) = Outbox::new();
        let t0 = Instant::now();
        let mut relay = relay_to(&out, &CancellationToken::new());
        drop(out);
        let wait = async move {
            let v = relay
                .with_heartbeat(
                    "waiting for task droid-1-abcd",
                    // not a multiple of HEARTBEAT: the end never ties with a heartbeat
                    tokio::time::sleep(Duration::from_secs(605)),
                )
                .await;
            drop(relay);
            v
        };
        let ((), got) = tokio::join!(wait, arrivals(inbox, t0));
        let gaps = gaps(&got);
        assert_eq!(gaps.len(), 60, "{gaps:?}");
        assert!(gaps.iter().all(|g| *g == HEARTBEAT), "{gaps:?}");
        assert_eq!(
            got[1].1["params"]["message"],
            "waiting for task droid-1-abcd (20 s)"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn nothing_is_relayed_once_the_request_is_cancelled() {
        let (out, inbox) = Outbox::new();
        let stop = CancellationToken::new();
        let log = LogSink {
            out: out.clone(),
            threshold: crate::logging::Threshold::Request(Level::Debug),
        };
        let relay = Relay::new(
            server(),
            Some(ProgressSink::new(json!(7), out.clone())),
            Some(log),
            stop.clone(),
        );
        drop(out);
        let t0 = Instant::now();
        let run = relayed(relay, |tx| async move {
            let _ = tx
                .send(RunEvent::Message {
                    role: "assistant".into(),
                    text: "before".into(),
                })
                .await;
            tokio::time::sleep(Duration::from_secs(1)).await;
            stop.cancel();
            // what the engine publishes while it cleans up after a cancel
            let _ = tx
                .send(RunEvent::Progress {
                    phase: droid_exec::Phase::Assemble,
                    message: "reading the repository".into(),
                })
                .await;
            let _ = tx
                .send(RunEvent::Completed {
                    status: Status::Cancelled,
                })
                .await;
            // long enough for several heartbeats, had they not stopped
            tokio::time::sleep(Duration::from_secs(60)).await;
        });
        let ((), got) = tokio::join!(run, arrivals(inbox, t0));
        let got: Vec<(u64, &Value, &Value)> = got
            .iter()
            .map(|(t, m)| (t.as_secs(), &m["method"], &m["params"]["data"]["message"]))
            .collect();
        assert_eq!(
            got,
            vec![
                (0, &json!("notifications/progress"), &Value::Null),
                (0, &json!("notifications/message"), &json!("droid: before")),
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn every_progress_notification_is_queued_before_the_response_even_when_the_client_reads_slowly()
     {
        // room for one message: the relay waits on a client that takes 1 s per message, far
        // longer than the 2 s a timed wait for the relay would have allowed
        let (out, mut inbox) = Outbox::with_capacity(1);
        let relay = relay_to(&out, &CancellationToken::new());
        let answer = async {
            let n = relayed(relay, |tx| async move {
                for i in 0..8 {
                    let _ = tx
                        .send(RunEvent::Message {
                            role: "assistant".into(),
                            text: format!("step {i}"),
                        })
                        .await;
                }
                8
            })
            .await;
            out.send(result(&json!(1), json!({"steps": n}))).await;
            drop(out);
        };
        let client = async {
            let mut got = Vec::new();
            while let Some(m) = inbox.recv().await {
                tokio::time::sleep(Duration::from_secs(1)).await;
                got.push(m);
            }
            got
        };
        let ((), got) = tokio::join!(answer, client);
        let kinds: Vec<String> = got
            .iter()
            .map(|m| match m.get("id") {
                Some(id) => format!("response {id}"),
                None => m["params"]["message"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned(),
            })
            .collect();
        let mut want: Vec<String> = (0..8).map(|i| format!("droid: step {i}")).collect();
        want.push("response 1".into());
        assert_eq!(kinds, want);
    }
}
