//! `notifications/progress` for a request whose params carried `_meta.progressToken`. The token is
//! echoed with its JSON type; `progress` strictly increases over the sink's life (a sync call, or
//! a 2025-11-25 task, for which the original token stays valid until the task is terminal).
//!
//! The sink remembers when it last sent something, so the heartbeat ([`HEARTBEAT`]) is counted
//! from the last notification actually sent, not from the last engine event (many events, such
//! as tool results and user messages, make no progress line).

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::Instant;

use crate::jsonrpc::notification;
use crate::outbox::Outbox;

/// Longest time without a progress notification during a call that asked for progress (the
/// issue asks for at least one every 15 s; watchers that poll add at most their poll period).
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// Where one request's progress goes.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    token: Value,
    out: Outbox,
    sent: u64,
    last: Instant,
}

impl ProgressSink {
    /// The sink for `token` (a string or an integer, as the client sent it); its heartbeat clock
    /// starts now.
    pub fn new(token: Value, out: Outbox) -> Self {
        Self {
            token,
            out,
            sent: 0,
            last: Instant::now(),
        }
    }

    /// The sink for a request's params, when they carry a usable `_meta.progressToken`.
    pub fn from_params(params: &Value, out: &Outbox) -> Option<Self> {
        params
            .get("_meta")
            .and_then(|m| m.get("progressToken"))
            .filter(|t| t.is_string() || t.is_i64() || t.is_u64())
            .map(|token| Self::new(token.clone(), out.clone()))
    }

    /// Send what comes next to `out` instead.
    pub fn redirect(&mut self, out: &Outbox) {
        self.out = out.clone();
    }

    /// Send the next progress notification with `message`.
    pub async fn send(&mut self, message: String) {
        self.sent += 1;
        self.last = Instant::now();
        self.out
            .send(notification(
                "notifications/progress",
                json!({"progressToken": self.token, "progress": self.sent, "message": message}),
            ))
            .await;
    }

    /// When the next heartbeat is due: [`HEARTBEAT`] after the last notification sent (or after
    /// the sink was made, before the first).
    pub fn heartbeat_due(&self) -> Instant {
        self.last + HEARTBEAT
    }
}
