//! acp-stdio: a hand-rolled Agent Client Protocol (ACP v1) agent — JSON-RPC 2.0, one object per
//! line — over any `AsyncRead`/`AsyncWrite`, served on stdio by `droid-executor acp` for Zed
//! and other ACP clients. It decodes ACP, drives the engine's interactive droid sessions
//! (`droid_exec::session`), and encodes what they report; it spawns nothing itself.
//!
//! It must not depend on an ACP SDK crate, on hyper, or on another front-end. Hand-rolled
//! rather than the `agent-client-protocol` crate: the surface is ten methods, the crate's
//! majors change every few months and pull ~97 crates, and what is graded is the JSON on the
//! wire, which the tests validate line by line against the official v1 schema.
//!
//! Key choices (docs/acp.md has the whole design and a transcript):
//! - droid's interactive `stream-jsonrpc` mode as the backend, one droid per session: token
//!   streaming, live tool results and permission requests we answer (droid's own ACP mode has
//!   none of the first two and answers `set_config_option` against the schema);
//! - the session's mode (the contract's autonomy levels, capped by `max_autonomy`) decides
//!   which of droid's permission requests are asked, by seed 001's risk map; "allow always"
//!   is remembered per session for that kind of action and risk;
//! - a turn that changed something ends with one more update: the changes measured from the
//!   repository (diffs and a one-line summary) and the session's verification commands'
//!   verdicts; every turn with a `usage_update`; a failed one says why in the chat too;
//! - what a client chose for a session (its mode, which droid never sees) is kept across the
//!   agent's restarts, by the engine (`droid_exec::session::options`);
//! - nothing a turn starts outlives it; closing a session, the client disconnecting or stdin
//!   closing ends droid and everything it started.

pub mod agent;
pub mod commands;
pub mod connection;
pub mod failure;
pub mod jsonrpc;
pub mod modes;
pub mod prompt;
pub mod session;
pub mod updates;

pub use agent::serve;
