//! One client's session over a transport that carries one message per exchange (MCP's
//! Streamable HTTP, served by the bridge's `/mcp`): the dispatcher of the stdio server
//! (`message_processor.rs`) with what each posted message says on a stream of its own.
//!
//! Over stdio every message goes out on one output. Here a posted message gets its own
//! [`Inbox`]: its progress and log notifications, then its answer, and the inbox ends once the
//! message has nothing more to say (every task holding its [`Outbox`] is
//! done). What relates to no open request (a 2025-11-25 task's status and progress once its
//! `CreateTaskResult` was sent) goes to the session's own stream ([`Session::messages`]).
//!
//! Nothing here knows HTTP: sessions ids, headers, status codes and event-stream framing are the
//! transport's (docs/architecture.md#mcp-server). A session does not clean expired tasks: the
//! front-end holding it does.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use serde_json::Value;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::message_processor::{DRAIN, State, dispatch};
use crate::server::{Inbox, Outbox, Server};

/// What a posted message gets back.
#[derive(Debug)]
pub enum Posted {
    /// Nothing: it was a notification or a response (or a request cancelled before it could
    /// be answered).
    Nothing,
    /// Its answer, known at once (a batch's: the array).
    Answer(Value),
    /// Its notifications, then its answer. The stream ends after the answer, or without one
    /// when the request is cancelled.
    Stream(Inbox),
}

/// One client's session: the revision `initialize` negotiated, the log level it set, its
/// running calls and the tasks it submitted (what a pend without a task id means).
pub struct Session {
    state: Arc<State>,
    /// Requests running as tasks (tool calls, `tasks/*`); finished ones are reaped at each post.
    running: Mutex<JoinSet<()>>,
    /// The session's own stream, until the transport takes it.
    own: Mutex<Option<Inbox>>,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session")
            .field("negotiated", &self.negotiated())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// A new session of the front-end serving `server`: the same engine, task store and tools,
    /// and none of another session's tasks ([`Server::fork`]).
    pub fn open(server: &Server) -> Self {
        let (out, inbox) = Outbox::new();
        let shutdown = CancellationToken::new();
        Self {
            state: State::new(server.fork(), out, shutdown.clone(), false),
            running: Mutex::new(JoinSet::new()),
            own: Mutex::new(Some(inbox)),
            shutdown,
        }
    }

    fn running(&self) -> MutexGuard<'_, JoinSet<()>> {
        self.running.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The session's own stream: what relates to no open request. Given once; `None` after.
    pub fn messages(&self) -> Option<Inbox> {
        self.own
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Dispatch `msg` (one JSON-RPC message, or a batch in a 2025-03-26 session) as a line of
    /// stdio would be.
    pub async fn post(&self, msg: Value) -> Posted {
        let (out, mut inbox) = Outbox::new();
        let ready = {
            let mut running = self.running();
            while running.try_join_next().is_some() {}
            dispatch(&self.state, msg, &out, &mut running)
        };
        ready.send(&out).await;
        drop(out);
        if !inbox.is_closed() {
            // a task it started still holds the outbox: the answer comes later
            return Posted::Stream(inbox);
        }
        // everything is queued already: at most one value, a message's answer or a batch's
        // array (the requests that run as tasks are the ones that notify)
        match inbox.recv().await {
            Some(answer) => Posted::Answer(answer),
            None => Posted::Nothing,
        }
    }

    /// Cancel request `id`, as `notifications/cancelled` does: its run stops and nothing more of
    /// it is sent (its stream ends without an answer).
    pub fn cancel(&self, id: &Value) {
        self.state.cancel(id);
    }

    /// The revision `initialize` negotiated, if it was called.
    pub fn negotiated(&self) -> Option<&'static str> {
        self.state.negotiated()
    }

    /// End the session: every running request is cancelled (its run stopped) and given
    /// [`crate::SHUTDOWN_DRAIN`] to finish; the session's stream ends.
    pub async fn close(&self) {
        self.state.close();
        self.shutdown.cancel();
        let mut running = std::mem::take(&mut *self.running());
        let _ = tokio::time::timeout(DRAIN, async {
            while running.join_next().await.is_some() {}
        })
        .await;
        running.abort_all();
    }
}
