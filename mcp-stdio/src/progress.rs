//! `notifications/progress` for a request whose params carried `_meta.progressToken`. The token is
//! echoed with its JSON type; `progress` strictly increases over the sink's life (a sync call, or
//! a 2025-11-25 task, for which the original token stays valid until the task is terminal).

use std::time::Duration;

use serde_json::{Value, json};

use crate::jsonrpc::notification;
use crate::server::Outbox;

/// Longest quiet time before a heartbeat (the issue asks for at least every 15 s).
pub const HEARTBEAT: Duration = Duration::from_secs(10);

/// Where one request's progress goes.
#[derive(Debug, Clone)]
pub struct ProgressSink {
    token: Value,
    out: Outbox,
    sent: u64,
}

impl ProgressSink {
    /// The sink for `token` (a string or an integer, as the client sent it).
    pub fn new(token: Value, out: Outbox) -> Self {
        Self {
            token,
            out,
            sent: 0,
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

    /// Send the next progress notification with `message`.
    pub async fn send(&mut self, message: String) {
        self.sent += 1;
        self.out
            .send(notification(
                "notifications/progress",
                json!({"progressToken": self.token, "progress": self.sent, "message": message}),
            ))
            .await;
    }
}
