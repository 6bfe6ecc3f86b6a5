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
//!   task that holds all of it), input schemas without prose (the model-facing part of the
//!   default `tools/list`, names, descriptions and input schemas, under 9 KB: ~8.6 KB);
//! - toolsets ([`droid_exec::toolset`], setting `toolsets`, `mcp --toolsets`): the droid tools
//!   and one `ask`/`pend`/`ping`/`cancel` family taking a `provider` by default, seed 002's
//!   per-provider names opt-in ([`tools::Catalog`]);
//! - every answer, errors included, matches its tool's `outputSchema` (clients that validate it
//!   drop a non-conforming answer's text): a refusal with no structured content of that shape
//!   carries none;
//! - long runs: progress notifications with a heartbeat counted from the last one sent (at most
//!   10 s without one during a call or a waiting `droid_pend`, 10.5 s for a polled task), all of
//!   them before the response; `notifications/cancelled` kills the run; `droid_submit` /
//!   `droid_pend` on the durable task store for runs longer than a client waits;
//! - seed 002's delegation tools ([`delegation`]): `ask`/`pend`/`ping`/`cancel` with a
//!   `provider` (toolset `delegate`), or `ask_<p>`, … per provider of the setting `providers`
//!   (toolset `per_provider`); the reply of a `pend` is the engine's ([`droid_exec::reply`]);
//! - stdin EOF, SIGTERM (through the caller's `shutdown` token) or EPIPE: running calls are
//!   cancelled and `serve` returns within [`SHUTDOWN_DRAIN`] + [`SHUTDOWN_FLUSH`];
//! - the same dispatcher serves transports with one exchange per message (the bridge's
//!   Streamable HTTP `/mcp`, composed in by the binary): [`Session`] gives each posted message
//!   a stream of its own for its notifications and answer;
//! - start-up does nothing but wait for input (clients spawn throw-away probe instances, and a
//!   `server/discover` probe is answered without side effects); expired tasks are cleaned after
//!   `initialize` or the first modern `tools/call`, then hourly.

mod answer;
pub mod catalog;
pub mod delegation;
pub mod discover;
pub mod era;
pub mod jsonrpc;
pub mod logging;
mod message_processor;
pub mod outbox;
pub mod portable;
pub mod progress;
pub mod relay;
pub mod server;
pub mod session;
pub mod tasks;
pub mod tools;
mod worktree_tools;

pub use message_processor::{DRAIN as SHUTDOWN_DRAIN, FLUSH as SHUTDOWN_FLUSH, serve};
pub use server::Server;
pub use session::{Posted, Session};
