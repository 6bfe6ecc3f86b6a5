//! What `/mcp` needs from an MCP server: the seam between the Streamable HTTP transport (this
//! crate: sessions ids, headers, status codes, event streams) and an MCP dispatcher (the
//! `mcp-stdio` crate's, the one that serves stdio too).
//!
//! A front-end never depends on another (docs/architecture.md#crates), so the bridge does not
//! name `mcp-stdio`: it is given an [`McpServer`] when it is built ([`crate::Bridge::with_mcp`]),
//! and the binary, which composes every front-end, adapts `mcp-stdio`'s sessions to it. A
//! bridge built without one answers `/mcp` with 404.
//!
//! The futures are boxed so the traits stay object-safe without a macro crate; a session is
//! asked a few things per HTTP request, which costs nothing next to the request.

use std::fmt;
use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

/// A boxed, sendable future.
pub type McpFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// An MCP server: sessions on demand.
pub trait McpServer: Send + Sync + fmt::Debug {
    /// A new session: one client's, from its `initialize` on (legacy revisions), or one
    /// request's (revision 2026-07-28, which is stateless).
    fn open(&self) -> Box<dyn McpSession>;

    /// The revisions negotiated through `initialize`, newest first.
    fn legacy_revisions(&self) -> &'static [&'static str];

    /// The revisions served per request (named in each request's `_meta`), newest first.
    fn modern_revisions(&self) -> &'static [&'static str];
}

/// One session.
pub trait McpSession: Send + Sync {
    /// Dispatch one JSON-RPC message (or a batch); what it gets back.
    fn post(&self, message: Value) -> McpFuture<'_, McpPosted>;

    /// The session's own messages (those of no open request), given once.
    fn messages(&self) -> Option<Box<dyn McpMessages>>;

    /// Cancel request `id` (as `notifications/cancelled` does).
    fn cancel(&self, id: &Value);

    /// The revision `initialize` negotiated, if it was called.
    fn negotiated(&self) -> Option<&'static str>;

    /// End the session: its running requests are cancelled; returns once they stopped (or
    /// were given up on after a short drain).
    fn close(&self) -> McpFuture<'_, ()>;
}

/// What a posted message gets back.
pub enum McpPosted {
    /// Nothing to answer (a notification, a response, a request cancelled meanwhile).
    Nothing,
    /// The answer, known at once.
    Answer(Value),
    /// The request's notifications, then its answer; ends after the answer, or without one
    /// when the request is cancelled.
    Stream(Box<dyn McpMessages>),
}

impl fmt::Debug for McpPosted {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            McpPosted::Nothing => f.write_str("Nothing"),
            McpPosted::Answer(v) => f.debug_tuple("Answer").field(v).finish(),
            McpPosted::Stream(_) => f.write_str("Stream"),
        }
    }
}

/// A stream of JSON-RPC messages.
pub trait McpMessages: Send {
    /// The next message; `None` once there will be no more.
    fn next(&mut self) -> McpFuture<'_, Option<Value>>;
}
