//! JSON-RPC 2.0 over a newline-delimited stream, the framing both stdio front-ends speak: the
//! MCP server (`mcp-stdio`) and the ACP agent (`acp-stdio`). One message per line, read with a
//! bound before it is read ([`Reader`], over the engine's bounded line reader), classified
//! ([`classify`] into [`Incoming`]), answered ([`result`], [`error`], [`RpcError`]) and written
//! one compact line at a time ([`write_message`]).
//!
//! What it must not know: either protocol's methods, its sessions, batching rules (MCP's
//! 2025-03-26 batches are the MCP server's business: [`Frame::Message`] hands over any JSON
//! value) or its wording of an oversized or unparsable line (each front-end says it with its own
//! limit). A crate of its own rather than a module of the engine because it is a front-end's
//! wire, which the engine must not know (docs/architecture.md#crates); front-ends never import
//! each other, so the code both share sits below both.

mod codes;
mod message;
mod reader;
mod writer;

pub use codes::{
    INTERNAL_ERROR, INVALID_PARAMS, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR, SERVER_BUSY,
};
pub use message::{Fault, Id, Incoming, RpcError, classify, error, notification, request, result};
pub use reader::{Frame, Reader};
pub use writer::write_message;
