//! mcp-stdio: a hand-rolled MCP server (JSON-RPC 2.0, one JSON object per line) over any
//! `AsyncRead`/`AsyncWrite`, served on stdio by `droid-executor mcp`, in front of the droid-exec
//! engine. It decodes MCP, calls the engine, encodes the answer; it spawns nothing itself.
//!
//! It must not depend on an MCP SDK crate, on hyper, or on another front-end.
//!
//! Key choices (the client behaviour behind them: docs/architecture.md#mcp-server):
//! - dual-era: the legacy lifecycle (`initialize`, revisions 2024-11-05 … 2025-11-25) for the
//!   process, and 2026-07-28 per request (`server/discover`, `_meta` protocol version,
//!   `resultType`), decided request by request ([`era`]);
//! - 2025-11-25 Tasks map onto the engine's durable task store ([`tasks`]), so a task outlives
//!   the server; `notifications/message` only once the client asked for a level ([`logging`]);
//! - requests run concurrently; one writer task serializes every message, so stdout only ever
//!   carries whole protocol lines (logs go to stderr); a cancelled request's messages are
//!   withdrawn at the writer, so nothing of it is written once the cancel is read;
//! - JSON-RPC batches only in a session that negotiated 2025-03-26, the one revision that has
//!   them; elsewhere a batch is refused with `-32600`;
//! - tool failures are results with `isError: true`, protocol problems are JSON-RPC errors;
//! - bounded: at most 16 running and 64 queued tool calls per session (beyond: `-32000`
//!   busy), a result's `structuredContent` at most 24 KiB (cut with a note naming the stored
//!   task that holds all of it), tool schemas without repeated prose (`tools/list` ~41 KB with
//!   the five delegation families, ~24 KB without);
//! - long runs: progress notifications with a heartbeat counted from the last one sent (at most
//!   10 s without one during a call or a waiting `droid_pend`, 10.5 s for a polled task), all of
//!   them before the response; `notifications/cancelled` kills the run; `droid_submit` /
//!   `droid_pend` on the durable task store for runs longer than a client waits;
//! - seed 002's delegation tools `ask_/pend_/ping_/cancel_<provider>` ([`delegation`]) next to
//!   the five droid tools, one family per provider of the setting `providers`;
//! - stdin EOF, SIGTERM (through the caller's `shutdown` token) or EPIPE: running calls are
//!   cancelled and `serve` returns within [`SHUTDOWN_DRAIN`] + [`SHUTDOWN_FLUSH`];
//! - start-up does nothing but wait for input (clients spawn throw-away probe instances, and a
//!   `server/discover` probe is answered without side effects); expired tasks are cleaned after
//!   `initialize` or the first modern `tools/call`, then hourly.

pub mod delegation;
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
mod worktree_tools;

pub use message_processor::{DRAIN as SHUTDOWN_DRAIN, FLUSH as SHUTDOWN_FLUSH, serve};
pub use server::Server;
