//! mcp-stdio: a hand-rolled MCP server (JSON-RPC 2.0, one JSON object per line) over any
//! `AsyncRead`/`AsyncWrite`, served on stdio by `droid-executor mcp`, in front of the droid-exec
//! engine. It decodes MCP, calls the engine, encodes the answer; it spawns nothing itself.
//!
//! It must not depend on an MCP SDK crate, on hyper, or on another front-end.
//!
//! Key choices (see `../shared/reference/mcp.md`):
//! - the legacy lifecycle (`initialize`, revisions 2024-11-05 … 2025-11-25); `server/discover`
//!   answers `-32601`, which makes every dual-era client fall back to `initialize`;
//! - requests run concurrently; one writer task serializes every message, so stdout only ever
//!   carries whole protocol lines (logs go to stderr);
//! - tool failures are results with `isError: true`, protocol problems are JSON-RPC errors;
//! - long runs: progress notifications with a heartbeat, `notifications/cancelled` kills the run,
//!   and `droid_submit`/`droid_pend` on the durable task store for runs longer than a client waits;
//! - start-up does nothing but wait for input (clients spawn throw-away probe instances); expired
//!   tasks are cleaned after `initialize`, then hourly.

pub mod jsonrpc;
mod message_processor;
pub mod progress;
pub mod server;
pub mod tools;

pub use message_processor::serve;
pub use server::Server;
