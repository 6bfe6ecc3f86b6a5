//! `notifications/progress` for a tool call whose request carried `_meta.progressToken`: one per
//! event worth a line, plus a heartbeat when droid is quiet, so clients that reset their timeout on
//! progress keep waiting. The token is echoed with its JSON type; `progress` strictly increases.

use std::time::Duration;

use droid_exec::RunEvent;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::jsonrpc::notification;
use crate::server::Outbox;

/// Longest quiet time before a heartbeat (the issue asks for at least every 15 s).
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// Where a call's progress goes.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    /// The client's token, as sent.
    pub token: Value,
    /// The server's output.
    pub out: Outbox,
}

/// Turn a run's events into progress notifications until the run ends (its sender is dropped).
pub async fn forward_progress(mut rx: mpsc::Receiver<RunEvent>, sink: Option<ProgressSink>) {
    let Some(sink) = sink else {
        while rx.recv().await.is_some() {}
        return;
    };
    let started = tokio::time::Instant::now();
    let mut n: u64 = 0;
    loop {
        let message = tokio::select! {
            ev = rx.recv() => match ev {
                None => return,
                Some(RunEvent::Completed { .. }) => continue,
                Some(ev) => match ev.summary() {
                    Some(m) => m,
                    None => continue,
                },
            },
            () = tokio::time::sleep(HEARTBEAT) => {
                format!("still working ({} s)", started.elapsed().as_secs())
            }
        };
        n += 1;
        sink.out
            .send(notification(
                "notifications/progress",
                json!({"progressToken": sink.token, "progress": n, "message": message}),
            ))
            .await;
    }
}
