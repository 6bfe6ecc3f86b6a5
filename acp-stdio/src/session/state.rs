//! What one open session holds ([`Session`]): its place, its limits, the client's choices and
//! droid's live handle. What a session does is in [`crate::session`].

use std::collections::HashSet;
use std::path::PathBuf;
use std::sync::Arc;

use droid_contract::{Autonomy, ShellCommand};
use droid_exec::session::measure::TurnMeter;
use droid_exec::session::options::{OptionsStore, SavedOptions};
use droid_exec::session::tools::Risk;
use droid_exec::session::{DroidSession, McpServer, SessionEvent};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use crate::modes::Mode;

/// What the client chose for the session (and may change while it is open).
#[derive(Debug)]
pub(super) struct Settings {
    pub(super) mode: Mode,
    pub(super) model: String,
    pub(super) models: Vec<(String, String)>,
    pub(super) effort: String,
    /// `(class, risk)` the user allowed always.
    pub(super) always: HashSet<(&'static str, Risk)>,
}

/// droid's handle and its events, held by the running turn.
#[derive(Debug)]
pub(super) struct Live {
    pub(super) droid: Arc<DroidSession>,
    pub(super) events: mpsc::Receiver<SessionEvent>,
}

/// One open session.
#[derive(Debug)]
pub struct Session {
    pub(super) id: String,
    pub(super) root: PathBuf,
    pub(super) cap: Autonomy,
    pub(super) verify: Vec<ShellCommand>,
    /// The client's MCP servers, given to droid again when it restarts.
    pub(super) mcp_servers: Vec<McpServer>,
    /// Where the session's options are kept (`None`: no task store, nothing kept).
    pub(super) store: Option<OptionsStore>,
    /// What is kept (written through on every change).
    pub(super) saved: std::sync::Mutex<SavedOptions>,
    /// The models that take images.
    pub(super) image_models: Vec<String>,
    pub(super) settings: std::sync::Mutex<Settings>,
    /// droid's handle, for requests made while a turn holds [`Session::live`].
    pub(super) droid: std::sync::Mutex<Arc<DroidSession>>,
    /// Held by the running turn (one at a time; the next prompt waits).
    pub(super) live: tokio::sync::Mutex<Live>,
    pub(super) meter: tokio::sync::Mutex<TurnMeter>,
    pub(super) turn: std::sync::Mutex<Option<CancellationToken>>,
    pub(super) closed: CancellationToken,
    pub(super) turns: std::sync::atomic::AtomicU64,
    /// Prompts waiting for the running turn to end.
    pub(super) waiting: std::sync::atomic::AtomicUsize,
    /// This session's place among the connection's [`crate::connection::MAX_SESSIONS`].
    pub(super) _slot: tokio::sync::OwnedSemaphorePermit,
}
