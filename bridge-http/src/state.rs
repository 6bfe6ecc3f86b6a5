//! What the bridge holds: the engine, the task store, its settings and counters, the MCP
//! sessions of `/mcp`, and the state of a shutdown.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use droid_exec::{Engine, EngineError, Tasks};
use tokio_util::sync::CancellationToken;

use crate::config::BridgeConfig;
use crate::conns::Conns;
use crate::mcp::McpServer;
use crate::mcp_sessions::McpSessions;
use crate::metrics::Metrics;
use crate::streams::Streams;

/// The bridge's state, shared by every connection.
#[derive(Debug)]
pub struct Bridge {
    /// Shared with the MCP server of `/mcp`, when there is one.
    engine: Arc<Engine>,
    /// The task store, or why background tasks are unavailable (said in every 503 of the task
    /// routes).
    tasks: Result<Tasks, String>,
    cfg: BridgeConfig,
    metrics: Metrics,
    /// Set when shutdown begins: new requests are answered 503.
    draining: AtomicBool,
    /// Parent of every sync run's cancel token: cancelled when the drain grace is over.
    runs: CancellationToken,
    /// Cancelled when shutdown begins: event streams end.
    closing: CancellationToken,
    /// Sync requests admitted and not yet finished (their run may still be stopping).
    in_flight: Arc<AtomicUsize>,
    /// Of those, the ones still waiting for a run slot.
    waiting: Arc<AtomicUsize>,
    /// The connections held, and the places of long requests.
    conns: Arc<Conns>,
    /// The event streams open, by task.
    streams: Arc<Streams>,
    /// The MCP server of `/mcp` and its sessions.
    mcp: McpSessions,
}

impl Bridge {
    /// A bridge over `engine`. The task store is opened and its directories made here, so a
    /// store that cannot be used is found at start-up: the task routes then answer 503 saying
    /// why ([`Bridge::tasks_unavailable`]).
    pub fn new(engine: Engine, cfg: BridgeConfig) -> Arc<Self> {
        Self::build(Arc::new(engine), cfg, None)
    }

    /// [`Bridge::new`], serving `mcp` on `/mcp` (MCP over Streamable HTTP) with `engine`, the
    /// engine that server runs its tasks on too.
    pub fn with_mcp(engine: Arc<Engine>, cfg: BridgeConfig, mcp: Arc<dyn McpServer>) -> Arc<Self> {
        Self::build(engine, cfg, Some(mcp))
    }

    fn build(engine: Arc<Engine>, cfg: BridgeConfig, mcp: Option<Arc<dyn McpServer>>) -> Arc<Self> {
        let tasks = Tasks::open(engine.config())
            .and_then(|t| t.prepare().map(|()| t))
            .map_err(|e| match e {
                // its message says "background tasks are not available" already
                EngineError::TasksUnavailable(_) => e.to_string(),
                e => format!("background tasks are not available: {e}"),
            });
        let metrics = Metrics::default();
        // the tasks finished before this bridge started are history, not counted as ending now
        if let Ok(Ok(scan)) = tasks.as_ref().map(Tasks::scan) {
            metrics.task_ends_baseline(&scan);
        }
        let conns = Conns::new(&cfg);
        let streams = Streams::new(&cfg);
        Arc::new(Self {
            conns,
            streams,
            engine,
            tasks,
            cfg,
            metrics,
            draining: AtomicBool::new(false),
            runs: CancellationToken::new(),
            closing: CancellationToken::new(),
            in_flight: Arc::new(AtomicUsize::new(0)),
            waiting: Arc::new(AtomicUsize::new(0)),
            mcp: McpSessions::new(mcp),
        })
    }

    /// The engine.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The task store, when it can be used.
    pub fn tasks(&self) -> Option<&Tasks> {
        self.tasks.as_ref().ok()
    }

    /// Why background tasks are unavailable (no store configured, or its directory cannot be
    /// made: the path and the OS error), when they are.
    pub fn tasks_unavailable(&self) -> Option<&str> {
        self.tasks.as_ref().err().map(String::as_str)
    }

    /// The bridge's settings.
    pub fn config(&self) -> &BridgeConfig {
        &self.cfg
    }

    /// The counters behind `/metrics`.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Whether shutdown has begun.
    pub fn is_draining(&self) -> bool {
        self.draining.load(Ordering::SeqCst)
    }

    /// Sync requests admitted and not finished.
    pub fn sync_in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// Sync requests waiting for a run slot.
    pub fn sync_waiting(&self) -> usize {
        self.waiting.load(Ordering::SeqCst)
    }

    pub(crate) fn begin_drain(&self) {
        self.draining.store(true, Ordering::SeqCst);
        self.closing.cancel();
    }

    pub(crate) fn cancel_runs(&self) {
        self.runs.cancel();
    }

    pub(crate) fn run_token(&self) -> CancellationToken {
        self.runs.child_token()
    }

    pub(crate) fn conns(&self) -> &Arc<Conns> {
        &self.conns
    }

    pub(crate) fn streams(&self) -> &Arc<Streams> {
        &self.streams
    }

    pub(crate) fn closing(&self) -> &CancellationToken {
        &self.closing
    }

    pub(crate) fn mcp(&self) -> &McpSessions {
        &self.mcp
    }

    /// Admit one more sync request. Refused when `max_concurrent + max_queue` are already in
    /// ([`Refused::Full`]: at most `max_queue` wait behind the runs this bridge can have going at
    /// once; run slots are shared with background tasks and other processes, so more may wait for
    /// a while, but the bound on what this bridge holds stays), or when shutdown has begun
    /// ([`Refused::Draining`]). The place is taken before the shutdown flag is read, and the drain
    /// sets the flag before it counts, so a request is either refused or waited for: never lost.
    pub(crate) fn admit_sync(&self) -> Result<SyncTicket, Refused> {
        let cap = self.engine.config().max_concurrent + self.cfg.max_queue;
        self.in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < cap).then_some(n + 1)
            })
            .map_err(|_| Refused::Full)?;
        self.waiting.fetch_add(1, Ordering::SeqCst);
        let ticket = SyncTicket {
            in_flight: Arc::clone(&self.in_flight),
            waiting: Arc::clone(&self.waiting),
            started: false,
        };
        if self.is_draining() {
            return Err(Refused::Draining);
        }
        Ok(ticket)
    }
}

/// Why a sync request was not admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Refused {
    /// The queue is full (429).
    Full,
    /// The bridge is shutting down (503).
    Draining,
}

/// One admitted sync request; dropping it frees its place.
#[derive(Debug)]
pub(crate) struct SyncTicket {
    in_flight: Arc<AtomicUsize>,
    waiting: Arc<AtomicUsize>,
    started: bool,
}

impl SyncTicket {
    /// The run got its slot.
    pub(crate) fn started(&mut self) {
        if !self.started {
            self.started = true;
            self.waiting.fetch_sub(1, Ordering::SeqCst);
        }
    }
}

impl Drop for SyncTicket {
    fn drop(&mut self) {
        self.started();
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}
