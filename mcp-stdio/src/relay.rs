//! What a run's events become on the wire: a progress notification per event worth a line (plus
//! a heartbeat when droid is quiet, so clients that reset their timeout on progress keep
//! waiting), and log messages at the levels [`crate::logging`] gives them. The same relay serves
//! a sync `tools/call` (events from the engine's channel) and a 2025-11-25 task (events read back
//! from the task store by [`crate::tasks`]).

use std::sync::Arc;
use std::time::Duration;

use droid_exec::RunEvent;
use serde_json::Value;
use tokio::sync::mpsc;

use crate::logging::{Level, LogSink, event_message};
use crate::progress::{HEARTBEAT, ProgressSink};
use crate::server::Server;

/// One request's progress and log sinks (either may be absent).
#[derive(Debug)]
pub struct Relay {
    server: Arc<Server>,
    progress: Option<ProgressSink>,
    log: Option<LogSink>,
}

impl Relay {
    /// A relay for one request.
    pub fn new(server: Arc<Server>, progress: Option<ProgressSink>, log: Option<LogSink>) -> Self {
        Self {
            server,
            progress,
            log,
        }
    }

    /// Relay `ev`.
    pub async fn event(&mut self, ev: &RunEvent) {
        if let Some(p) = self.progress.as_mut()
            && !matches!(ev, RunEvent::Completed { .. })
            && let Some(line) = ev.summary()
        {
            p.send(line).await;
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
        if let Some((level, data)) = event_message(ev, version.as_deref()) {
            log.log(level, data).await;
        }
    }

    /// A heartbeat progress notification (the run has gone on for `running_for`), for when droid
    /// has been quiet for [`HEARTBEAT`].
    pub async fn heartbeat(&mut self, running_for: Duration) {
        if let Some(p) = self.progress.as_mut() {
            p.send(format!("still working ({} s)", running_for.as_secs()))
                .await;
        }
    }

    /// A log message of the call itself (a task submitted, created or cancelled).
    pub async fn log(&self, level: Level, data: Value) {
        if let Some(log) = &self.log {
            log.log(level, data).await;
        }
    }
}

/// Relay a sync run's events until the run ends (its sender is dropped).
pub async fn relay_channel(mut rx: mpsc::Receiver<RunEvent>, mut relay: Relay) {
    let started = tokio::time::Instant::now();
    loop {
        tokio::select! {
            ev = rx.recv() => match ev {
                None => return,
                Some(ev) => relay.event(&ev).await,
            },
            () = tokio::time::sleep(HEARTBEAT) => relay.heartbeat(started.elapsed()).await,
        }
    }
}
