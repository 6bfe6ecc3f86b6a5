//! The MCP server of the bridge's `/mcp` (`serve`): `mcp-stdio`'s sessions — the dispatcher that
//! serves stdio — behind `bridge-http`'s seam. The two front-ends never name each other
//! (docs/architecture.md#crates); this binary composes every front-end, so the adapter is here.

use std::sync::Arc;

use bridge_http::{McpFuture, McpMessages, McpPosted, McpServer, McpSession};
use mcp_stdio::era::{LEGACY_VERSIONS, MODERN_VERSIONS};
use mcp_stdio::server::Inbox;
use mcp_stdio::{Posted, Server, Session};
use serde_json::Value;

/// `server`'s sessions, for the bridge.
#[derive(Debug)]
pub(crate) struct Endpoint(Arc<Server>);

impl Endpoint {
    /// The sessions of `server` (each a fork of it: the same engine, store and tools).
    pub(crate) fn new(server: Arc<Server>) -> Arc<Self> {
        Arc::new(Self(server))
    }
}

impl McpServer for Endpoint {
    fn open(&self) -> Box<dyn McpSession> {
        Box::new(HttpSession(Session::open(&self.0)))
    }

    fn legacy_revisions(&self) -> &'static [&'static str] {
        &LEGACY_VERSIONS
    }

    fn modern_revisions(&self) -> &'static [&'static str] {
        &MODERN_VERSIONS
    }
}

/// One session.
struct HttpSession(Session);

impl McpSession for HttpSession {
    fn post(&self, message: Value) -> McpFuture<'_, McpPosted> {
        Box::pin(async move {
            match self.0.post(message).await {
                Posted::Nothing => McpPosted::Nothing,
                Posted::Answer(v) => McpPosted::Answer(v),
                Posted::Stream(inbox) => McpPosted::Stream(Box::new(Messages(inbox))),
            }
        })
    }

    fn messages(&self) -> Option<Box<dyn McpMessages>> {
        self.0
            .messages()
            .map(|inbox| Box::new(Messages(inbox)) as Box<dyn McpMessages>)
    }

    fn cancel(&self, id: &Value) {
        self.0.cancel(id);
    }

    fn negotiated(&self) -> Option<&'static str> {
        self.0.negotiated()
    }

    fn close(&self) -> McpFuture<'_, ()> {
        Box::pin(self.0.close())
    }
}

/// A stream of messages.
struct Messages(Inbox);

impl McpMessages for Messages {
    fn next(&mut self) -> McpFuture<'_, Option<Value>> {
        Box::pin(self.0.recv())
    }
}
