//! The server's output: one bounded queue drained by one writer ([`Outbox`] → [`Inbox`]). A
//! message can be tied to a request's cancellation token ([`Outbox::guarded`]): once that token
//! fires, the message is never written, even if it was queued before. That is what makes "no
//! further messages for a cancelled request" (docs/architecture.md#mcp-server) hold whatever the
//! timing: the read loop cancels the token as it reads `notifications/cancelled`, and everything
//! of that request still queued (progress, log messages, the response) is dropped at the writer.

use serde_json::Value;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

/// Messages waiting for the writer: enough for bursts of progress, bounded so a client that stops
/// reading slows us down instead of growing memory.
pub const OUTBOX_CAPACITY: usize = 1024;

/// One queued message and the token that withdraws it.
#[derive(Debug)]
struct Outgoing {
    msg: Value,
    guard: Option<CancellationToken>,
}

/// The single way out to the client: one writer task serializes every message.
#[derive(Debug, Clone)]
pub struct Outbox {
    tx: mpsc::Sender<Outgoing>,
    guard: Option<CancellationToken>,
}

/// The writer's end of the [`Outbox`].
#[derive(Debug)]
pub struct Inbox {
    rx: mpsc::Receiver<Outgoing>,
}

impl Outbox {
    /// An outbox and the receiver its writer drains.
    pub fn new() -> (Self, Inbox) {
        Self::with_capacity(OUTBOX_CAPACITY)
    }

    /// An outbox holding at most `capacity` messages (tests use a small one to model a client
    /// that reads slowly).
    pub fn with_capacity(capacity: usize) -> (Self, Inbox) {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        (Self { tx, guard: None }, Inbox { rx })
    }

    /// This outbox for one request: its messages are dropped, not written, once `token` is
    /// cancelled (those queued before included).
    pub fn guarded(&self, token: CancellationToken) -> Self {
        Self {
            tx: self.tx.clone(),
            guard: Some(token),
        }
    }

    /// Whether this outbox's request was cancelled (its messages go nowhere).
    pub fn withdrawn(&self) -> bool {
        self.guard
            .as_ref()
            .is_some_and(CancellationToken::is_cancelled)
    }

    /// Queue `msg`; after the writer stopped (stdout closed), or once this outbox's request was
    /// cancelled, it is dropped.
    pub async fn send(&self, msg: Value) {
        if self.withdrawn() {
            return;
        }
        let _ = self
            .tx
            .send(Outgoing {
                msg,
                guard: self.guard.clone(),
            })
            .await;
    }
}

impl Inbox {
    /// Whether every [`Outbox`] of it is gone: what it still holds is all it will ever give.
    pub fn is_closed(&self) -> bool {
        self.rx.is_closed()
    }

    /// The next message to write, skipping those whose request was cancelled meanwhile; `None`
    /// once every [`Outbox`] is gone and the queue is empty.
    pub async fn recv(&mut self) -> Option<Value> {
        loop {
            let out = self.rx.recv().await?;
            if !out
                .guard
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled)
            {
                return Some(out.msg);
            }
        }
    }
}
