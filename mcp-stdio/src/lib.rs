//! mcp-stdio: a hand-rolled MCP server (JSON-RPC 2.0, one JSON object per line) over any
//! `AsyncRead`/`AsyncWrite`, served on stdio by `droid-executor mcp`, in front of the droid-exec
//! engine. It decodes MCP, calls the engine, encodes the answer; it spawns nothing itself.
//!
//! It must not depend on an MCP SDK crate, on hyper, or on another front-end.
//!
//! Key choices (see `../shared/reference/mcp.md`):
//! - dual-era: the legacy lifecycle (`initialize`, revisions 2024-11-05 … 2025-11-25) for the
//!   process, and 2026-07-28 per request (`server/discover`, `_meta` protocol version,
//!   `resultType`), decided request by request ([`era`]);
//! - 2025-11-25 Tasks map onto the engine's durable task store ([`tasks`]), so a task outlives
//!   the server; `notifications/message` only once the client asked for a level ([`logging`]);
//! - requests run concurrently; one writer task serializes every message, so stdout only ever
//!   carries whole protocol lines (logs go to stderr);
//! - tool failures are results with `isError: true`, protocol problems are JSON-RPC errors;
//! - long runs: progress notifications with a heartbeat, `notifications/cancelled` kills the run,
//!   and `droid_submit`/`droid_pend` on the durable task store for runs longer than a client waits;
//! - start-up does nothing but wait for input (clients spawn throw-away probe instances, and a
//!   `server/discover` probe is answered without side effects); expired tasks are cleaned after
//!   `initialize` or the first modern `tools/call`, then hourly.

pub mod discover;
pub mod era;
pub mod jsonrpc;
pub mod logging;
mod message_processor;
pub mod portable;
pub mod progress;
pub mod relay;
pub mod server;
pub mod tasks;
pub mod tools;

pub use message_processor::serve;
pub use server::Server;
