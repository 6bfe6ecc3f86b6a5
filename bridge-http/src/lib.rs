//! bridge-http: the HTTP bridge (docs/architecture.md#http-bridge), on hyper 1 (no framework), by
//! `droid-executor serve`, in front of the droid-exec engine; and the small client that
//! `droid-executor run --via bridge` and `bridge status` use. It decodes HTTP, calls the engine or
//! the task store, and encodes the answer; it spawns no process itself.
//!
//! It must not depend on clap, on an MCP or ACP crate, or on another front-end. It serves MCP
//! over Streamable HTTP on `/mcp` all the same: the MCP server is given to it behind a trait
//! ([`mcp`]) by the binary, which composes the front-ends.
//!
//! Key choices:
//! - safe by default (docs/architecture.md#security): loopback bind unless a token is configured,
//!   the `Host` header
//!   must name a loopback host (or a configured name) and a browser `Origin` is refused unless
//!   allow-listed — a web page can otherwise POST to a local agent runner (DNS rebinding,
//!   drive-by requests); the token is compared in constant time;
//! - bad input gets an answer, never a hang: 400 with an `error` ExecutionResult listing every
//!   violation, 413 from `Content-Length` before reading the body, 415, 404/405, 429 +
//!   `Retry-After` only when the bounded queue of sync requests is full, 503 while shutting
//!   down, and header/body read timeouts for slow or stalled clients;
//! - the bridge stays reachable under idle and streaming load (`conns`, `events`): a new
//!   connection closes the oldest idle one rather than wait for a place (per remote address too;
//!   loopback clients, who all share 127.0.0.1, only count in the total), long requests (event
//!   streams, sync runs) leave a reserve of connections to short ones such as `/health`, and
//!   event streams are capped in all and per task (429), keep alive with comments and end at a
//!   maximum life with `event: resume` so the client reconnects with `Last-Event-ID`;
//! - a sync run is spawned on its own task and cancelled through a token whose drop guard lives
//!   in the request's future: hyper drops that future when the client disconnects, which cancels
//!   the run (droid and everything it started are killed) — the run is never dropped mid-flight;
//! - graceful shutdown: stop taking work (new requests get 503), let sync runs finish for a grace,
//!   then cancel them; background tasks live in their own supervisors and keep running. The
//!   worst case is exported ([`worst_case_drain`], [`STOP_TIMEOUT`]) so that whatever stops the
//!   bridge waits long enough before SIGKILL.

// Handlers answer refusals through `Err(Response)`: built once per request, never on a hot
// path, so boxing them would buy nothing.
#![allow(clippy::result_large_err)]

mod admit;
pub mod client;
mod config;
mod conns;
mod error;
mod events;
mod execute;
mod guard;
mod health;
pub mod mcp;
mod mcp_routes;
mod mcp_sessions;
mod metrics;
pub mod openapi;
mod reply;
mod request_body;
mod routes;
mod server;
mod state;
mod streams;
mod task_routes;
mod token;
mod worktree_routes;

pub use config::{BridgeConfig, DRAIN_GRACE, check_bind};
pub use error::BridgeError;
pub use mcp::{McpFuture, McpMessages, McpPosted, McpServer, McpSession};
pub use metrics::Metrics;
pub use server::{CANCEL_BUDGET, FLUSH_BUDGET, STOP_MARGIN, STOP_TIMEOUT, serve, worst_case_drain};
pub use state::Bridge;
pub use token::Token;
