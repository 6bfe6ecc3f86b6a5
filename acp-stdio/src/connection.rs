//! One client connection's state, shared by every request ([`Agent`]): the single writer's
//! outbox, what the client can do, the open sessions and their slots, and the requests we send
//! the client (permissions) awaiting its answer. The read loop and dispatch are in
//! [`crate::agent`].

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use droid_exec::Engine;
use droid_exec::run::redact::Redactor;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::jsonrpc;
use crate::session::state::Session;

/// Sessions open at once on one connection (each is a droid process).
pub const MAX_SESSIONS: usize = 16;

/// What the client said it can do in `initialize`.
#[derive(Debug, Clone, Default)]
pub struct ClientCaps {
    /// `clientCapabilities.terminal`.
    pub terminal: bool,
}

/// The agent's state, shared by every request.
#[derive(Debug)]
pub struct Agent {
    pub(crate) engine: Engine,
    pub(crate) out: mpsc::Sender<Value>,
    pub(crate) client: std::sync::Mutex<ClientCaps>,
    pub(crate) sessions: tokio::sync::Mutex<HashMap<String, Arc<Session>>>,
    pub(crate) pending: std::sync::Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>,
    pub(crate) next_request: AtomicU64,
    pub(crate) closing: AtomicBool,
    /// One permit per open session ([`MAX_SESSIONS`]).
    pub(crate) slots: Arc<tokio::sync::Semaphore>,
    /// Masks secrets in everything sent to the client (as results, logs and the store are).
    pub(crate) redact: Redactor,
}

impl Agent {
    /// Queue a message for the writer (dropped once the client is gone), its secrets masked:
    /// a credential droid was given and a command echoed never reaches the client.
    pub(crate) async fn send(&self, msg: Value) {
        let _ = self.out.send(self.redact.apply_to(msg)).await;
    }

    /// The masking of what is sent, for text that reaches the client in pieces.
    pub(crate) fn redact(&self) -> Redactor {
        self.redact.clone()
    }

    /// Send a `session/update`.
    pub(crate) async fn update(&self, session_id: &str, update: Value) {
        self.send(jsonrpc::notification(
            "session/update",
            json!({"sessionId": session_id, "update": update}),
        ))
        .await;
    }

    /// Ask the client something and wait for its answer; `Err` carries its error object, or
    /// `null` when the connection is closing.
    pub(crate) async fn ask(&self, method: &str, params: Value) -> Result<Value, Value> {
        if self.closing.load(Ordering::Relaxed) {
            return Err(Value::Null);
        }
        let id = format!("de-{}", self.next_request.fetch_add(1, Ordering::Relaxed));
        let (tx, rx) = oneshot::channel();
        if let Ok(mut p) = self.pending.lock() {
            p.insert(id.clone(), tx);
        }
        self.send(jsonrpc::request(&json!(id), method, params))
            .await;
        rx.await.unwrap_or(Err(Value::Null))
    }

    pub(crate) fn answered(&self, id: &Value, outcome: Result<Value, Value>) {
        let key = match id {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        let waiter = self.pending.lock().ok().and_then(|mut p| p.remove(&key));
        match waiter {
            Some(w) => {
                let _ = w.send(outcome);
            }
            None => tracing::debug!("a response to {key}, which we did not ask"),
        }
    }

    /// The droid HOME (droid's stored sessions live there).
    pub(crate) fn home(&self) -> Option<PathBuf> {
        self.engine
            .config()
            .env
            .iter()
            .find(|(k, _)| k == "HOME")
            .map(|(_, v)| PathBuf::from(v))
    }
}
