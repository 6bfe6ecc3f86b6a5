//! Supervising one agent process: read its events as they come, publish them, and stop it on
//! timeout, cancellation, or as soon as its completion event arrives.
//!
//! `select!` over: the next stdout line, the process exiting, the deadline and the cancel token
//! (and, with a token budget, a look at the provider's record of the usage every
//! [`PROBE_EVERY`]). On timeout, cancellation or a spent budget ([`crate::run::budget`]: the
//! running total of the agent's reported usage over `max_tokens`) droid is ended here before supervision returns (through its
//! supervisor, [`crate::process::guard::stop`]; without one SIGTERM, `kill_grace`, SIGKILL, sweep). On its completion event supervision returns at once: droid's turn is over
//! and its session is on disk, so the result need not wait for it (droid can linger ~6 s flushing
//! telemetry when not in airgap mode); droid gets SIGTERM (through its supervisor when it has one)
//! and is reaped in the background
//! ([`crate::process::reap`]) while the run snapshots and verifies.

use std::process::ExitStatus;
use std::time::Duration;

use crate::process::child::RunChild;
use droid_contract::{RunEnd, Usage};
use tokio::io::BufReader;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::excerpt::{Tail, head_str, tail_str};
use crate::process::reap::Reaping;
use crate::process::spawn::terminate;
use crate::providers::{AgentEvent, EventParser, Provider};
use crate::run::budget::{Budget, PROBE_EVERY};
use crate::run::event::{EventSink, RunEvent};
use crate::run::lines::{Line, Lines, MAX_LINE_BYTES};
use crate::run::redact::Redactor;

/// Unknown (non-event) lines kept for the logs; the rest are only counted.
const KEEP_UNKNOWN: usize = 50;
/// Longest tool output kept per event for result assembly.
const KEEP_TOOL_TEXT: usize = 64 * 1024;
/// Tool output kept in all; past it each output keeps only its last [`KEEP_TOOL_TEXT_OVER`]
/// bytes (the exit-code line and the excerpt's tail), so a run printing gigabytes of tool
/// results stays in bounded memory.
const KEEP_TOOL_TEXT_TOTAL: usize = 8 * 1024 * 1024;
/// What each tool output keeps once [`KEEP_TOOL_TEXT_TOTAL`] is used up.
const KEEP_TOOL_TEXT_OVER: usize = 1024;
/// Tool calls kept for result assembly (with their results); later ones are counted, published
/// as they happen, and left out of `commands_run`.
const KEEP_TOOL_CALLS: usize = 1000;
/// How long to keep reading output after the process is gone (a grandchild may hold the pipe).
const DRAIN: Duration = Duration::from_secs(2);
/// Bytes of stderr kept.
const STDERR_KEEP: usize = 64 * 1024;

/// Publishes run events without ever blocking the run on a slow consumer.
#[derive(Debug, Clone)]
pub struct Publisher {
    tx: Option<mpsc::Sender<RunEvent>>,
    dropped: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    log: Option<std::sync::Arc<dyn EventSink>>,
    /// Masks secrets in every event before it leaves (docs/architecture.md#security): droid's
    /// messages reach MCP
    /// progress notifications and the CLI's progress line as they are.
    redact: Option<Redactor>,
    /// [`RunEvent::Completed`] is not published: one attempt of several ended, not the run
    /// (`crate::fanout`, whose caller publishes the end).
    hold_completed: bool,
}

impl Publisher {
    /// Publish to `tx` (or nowhere).
    pub fn new(tx: Option<mpsc::Sender<RunEvent>>) -> Self {
        Self {
            tx,
            dropped: std::sync::Arc::default(),
            log: None,
            redact: None,
            hold_completed: false,
        }
    }

    /// This publisher for one attempt of several: everything but [`RunEvent::Completed`].
    pub(crate) fn for_attempt(&self) -> Self {
        Self {
            hold_completed: true,
            ..self.clone()
        }
    }

    /// This publisher, masking secrets in every event it publishes.
    pub(crate) fn redacting(self, redact: Redactor) -> Self {
        Self {
            redact: Some(redact),
            ..self
        }
    }

    /// Publish to `tx` and record every event in a task's log as it is published.
    pub(crate) fn with_log(
        tx: Option<mpsc::Sender<RunEvent>>,
        log: Option<std::sync::Arc<dyn EventSink>>,
    ) -> Self {
        Self {
            log,
            ..Self::new(tx)
        }
    }

    /// Send `ev`; when the channel is full the event is dropped and counted.
    pub fn send(&self, ev: RunEvent) {
        if (self.tx.is_none() && self.log.is_none())
            || (self.hold_completed && matches!(ev, RunEvent::Completed { .. }))
        {
            // nobody reads it (the bridge's `/execute`): not even masked
            return;
        }
        let ev = match &self.redact {
            Some(r) => r.apply_to(ev),
            None => ev,
        };
        if let Some(log) = &self.log {
            log.record(&ev);
        }
        if let Some(tx) = &self.tx
            && let Err(mpsc::error::TrySendError::Full(_)) = tx.try_send(ev)
        {
            self.dropped
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Events dropped so far.
    pub fn dropped(&self) -> usize {
        self.dropped.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// What supervision observed.
#[derive(Debug)]
pub(crate) struct Supervised {
    pub end: RunEnd,
    /// droid's exit status, when it had exited by the end of supervision (see `reaping`).
    pub exit: Option<ExitStatus>,
    /// We ended the process (after completion, on timeout or on cancel).
    pub stopped_by_us: bool,
    /// droid being ended in the background: it was still running when its completion event
    /// arrived.
    pub reaping: Option<Reaping>,
    /// droid exited during supervision and its tree was then proven gone (the supervisor's
    /// clean exit, or the leaf found empty), not swept for; with `reaping`, the reaping says.
    pub proven: bool,
    pub events: Vec<AgentEvent>,
    /// Tool calls past [`KEEP_TOOL_CALLS`], left out of `events`.
    pub tool_calls_dropped: usize,
    pub unknown_lines: usize,
    pub oversized: Vec<u64>,
    /// droid's stderr as read so far (after a completion event, still being read while droid
    /// shuts down: read it when the result is assembled).
    pub stderr: StderrTail,
    /// The agent's token usage so far, as its events (or its record outside them) last said.
    pub usage: Option<Usage>,
    /// The token budget was spent and the agent stopped for it.
    pub budget_stop: bool,
}

/// The last [`STDERR_KEEP`] bytes of droid's stderr, filled by a reader task.
#[derive(Debug, Clone)]
pub(crate) struct StderrTail(std::sync::Arc<std::sync::Mutex<Tail>>);

impl StderrTail {
    fn new() -> Self {
        Self(std::sync::Arc::new(std::sync::Mutex::new(Tail::new(
            STDERR_KEEP,
        ))))
    }

    /// What was read so far.
    pub(crate) fn text(&self) -> String {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .text()
    }

    /// Read `stream` to its end into this tail.
    async fn fill<R: tokio::io::AsyncRead + Unpin>(self, stream: Option<R>) {
        use tokio::io::AsyncReadExt as _;
        let Some(mut r) = stream else { return };
        // small: most agents write little or nothing to stderr, and a zeroed 64 KiB buffer per
        // run showed in the bridge's profile
        let mut buf = vec![0u8; 8 * 1024];
        loop {
            match r.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => self
                    .0
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner)
                    .push(&buf[..n]),
            }
        }
    }
}

/// Aborts a task when dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub(crate) struct Limits {
    pub deadline: Instant,
    pub kill_grace: Duration,
    pub marker: String,
    /// The control pipe of the supervisor the child is ([`crate::process::guard`]), which ends droid's
    /// whole tree itself; `None`: the child is droid, its tree is ended by the marker sweep.
    pub tree: Option<crate::process::guard::TreeControl>,
    /// The request's token budget (`max_tokens`).
    pub budget: Option<Budget>,
}

enum Stop {
    Exited(Option<ExitStatus>),
    /// The completion event arrived.
    Completed,
    Timeout,
    Cancel,
    /// The token budget is spent.
    Budget,
}

pub(crate) async fn supervise(
    mut child: RunChild,
    provider: &dyn Provider,
    limits: Limits,
    cancel: &CancellationToken,
    publish: &Publisher,
) -> Supervised {
    let pid = child.id();
    let stderr = StderrTail::new();
    let mut stderr_task = tokio::spawn(stderr.clone().fill(child.take_stderr()));
    let mut lines = child
        .take_stdout()
        .map(|s| Lines::new(BufReader::with_capacity(64 * 1024, s), MAX_LINE_BYTES));
    let mut obs = Observed::new(provider);
    let budget = limits.budget.as_ref();
    // only with a budget: a provider's record outside its events is read while it runs
    let mut probe = budget.map(|_| tokio::time::interval(PROBE_EVERY));
    let stop = loop {
        tokio::select! {
            biased;
            () = cancel.cancelled() => break Stop::Cancel,
            () = tokio::time::sleep_until(limits.deadline) => break Stop::Timeout,
            status = child.wait() => break Stop::Exited(status.ok()),
            line = next_line(&mut lines) => match line {
                Some(l) => {
                    obs.take(l, publish);
                    if obs.completed {
                        break Stop::Completed;
                    }
                    if budget.is_some_and(|b| b.over(obs.usage.as_ref())) {
                        break Stop::Budget;
                    }
                }
                None => {
                    lines = None;
                    obs.finish(publish);
                    if obs.completed {
                        break Stop::Completed;
                    }
                }
            },
            () = tick(&mut probe) => {
                if let Some(b) = budget {
                    if let Some(u) = b.probe(provider, obs.session_id.as_deref()) {
                        obs.usage = Some(u);
                    }
                    if b.over(obs.usage.as_ref()) {
                        break Stop::Budget;
                    }
                }
            }
        }
    };
    if let (Stop::Budget, Some(b), Some(u)) = (&stop, budget, obs.usage.as_ref()) {
        publish.send(RunEvent::Warning {
            message: format!(
                "{} used {} tokens of its budget of {}: stopping it",
                provider.name(),
                u.budget_tokens(),
                b.max_tokens
            ),
        });
    }
    let mut proven = false;
    let (exit, stopped_by_us) = match stop {
        Stop::Exited(status) => {
            // a supervisor exits only once droid's tree is gone; a leaf is killed and emptied
            let ended = match &limits.tree {
                Some(tree) => tree.ended(status, false).await,
                None => false,
            };
            if !ended {
                // the process is gone; kill whatever it left behind in its group or elsewhere
                if let Some(pid) = pid {
                    crate::process::spawn::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                }
                crate::process::sweep::sweep(&limits.marker, Duration::from_secs(3)).await;
            }
            proven = ended;
            (status, false)
        }
        Stop::Timeout | Stop::Cancel | Stop::Budget => (
            match &limits.tree {
                Some(tree) => {
                    crate::process::guard::stop(&mut child, tree, limits.kill_grace, &limits.marker)
                        .await
                }
                None => terminate(&mut child, limits.kill_grace, &limits.marker).await,
            },
            true,
        ),
        Stop::Completed => {
            return hand_over(
                child,
                limits,
                (lines, AbortOnDrop(stderr_task)),
                obs,
                stderr,
            );
        }
    };
    // what droid printed before it went away is still in the pipe (unless it was read to its end)
    if let Some(open) = lines.as_mut() {
        let drained = tokio::time::timeout(DRAIN, async {
            while let Some(l) = open.next().await {
                obs.take(l, publish);
            }
        })
        .await;
        if drained.is_ok() {
            obs.finish(publish);
        }
    }
    if tokio::time::timeout(DRAIN, &mut stderr_task).await.is_err() {
        stderr_task.abort();
    }
    let end = match stop {
        _ if obs.completed => RunEnd::Completed,
        Stop::Timeout => RunEnd::TimedOut,
        Stop::Cancel => RunEnd::Cancelled,
        // stopped before it finished, like a crash: its changes are verified and kept
        Stop::Budget | Stop::Exited(_) | Stop::Completed => RunEnd::Failed,
    };
    let budget_stop = matches!(stop, Stop::Budget) && !obs.completed;
    Supervised {
        end,
        exit,
        stopped_by_us,
        reaping: None,
        proven,
        events: obs.events,
        tool_calls_dropped: obs.calls_dropped,
        unknown_lines: obs.unknown,
        oversized: obs.oversized,
        stderr,
        usage: obs.usage,
        budget_stop,
    }
}

/// The end of supervision once droid completed: the result does not wait for droid. It may
/// already be gone; else it is stopped and reaped in the background, its output (`keep`) held
/// open and its stderr still read until then.
fn hand_over<K: Send + 'static>(
    mut child: RunChild,
    limits: Limits,
    keep: K,
    obs: Observed,
    stderr: StderrTail,
) -> Supervised {
    let exit = child.try_wait().ok().flatten();
    let reaping = Reaping::start(
        child,
        exit,
        limits.tree,
        limits.kill_grace,
        limits.marker,
        keep,
    );
    Supervised {
        end: RunEnd::Completed,
        exit,
        stopped_by_us: exit.is_none(),
        reaping: Some(reaping),
        proven: false,
        events: obs.events,
        tool_calls_dropped: obs.calls_dropped,
        unknown_lines: obs.unknown,
        oversized: obs.oversized,
        stderr,
        usage: obs.usage,
        budget_stop: false,
    }
}

/// The next tick of `probe`; never without one.
async fn tick(probe: &mut Option<tokio::time::Interval>) {
    match probe {
        Some(p) => {
            p.tick().await;
        }
        None => std::future::pending().await,
    }
}

async fn next_line<R: tokio::io::AsyncRead + Unpin>(
    lines: &mut Option<Lines<BufReader<R>>>,
) -> Option<Line> {
    match lines {
        Some(l) => l.next().await,
        None => std::future::pending().await,
    }
}

struct Observed {
    /// The provider's reader of this run's output.
    parser: Box<dyn EventParser>,
    /// The output's end was given to the parser.
    ended: bool,
    /// The provider's name, for warnings.
    agent: &'static str,
    /// What result assembly needs: everything but messages (published, then let go), with at
    /// most [`KEEP_TOOL_CALLS`] tool calls and [`KEEP_TOOL_TEXT_TOTAL`] bytes of their output.
    events: Vec<AgentEvent>,
    /// Ids of the tool calls kept, so a result is kept exactly when its call was.
    calls_kept: std::collections::HashSet<String>,
    calls_kept_n: usize,
    calls_dropped: usize,
    tool_text: usize,
    unknown: usize,
    oversized: Vec<u64>,
    /// A completion event arrived.
    completed: bool,
    /// The session, as the agent's events named it.
    session_id: Option<String>,
    /// Token usage so far: the last [`AgentEvent::Usage`], or the completion's.
    usage: Option<Usage>,
}

impl Observed {
    fn new(provider: &dyn Provider) -> Self {
        Self {
            parser: provider.parser(),
            ended: false,
            agent: provider.name(),
            events: Vec::new(),
            calls_kept: std::collections::HashSet::new(),
            calls_kept_n: 0,
            calls_dropped: 0,
            tool_text: 0,
            unknown: 0,
            oversized: Vec::new(),
            completed: false,
            session_id: None,
            usage: None,
        }
    }

    fn take(&mut self, line: Line, publish: &Publisher) {
        let bytes = match line {
            Line::Text(b) => b,
            Line::Oversized(n) => {
                self.oversized.push(n);
                publish.send(RunEvent::Warning {
                    message: format!("{} printed a {n}-byte line; it was skipped", self.agent),
                });
                return;
            }
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let mut out = Vec::new();
        self.parser.line(&bytes, &mut out);
        for ev in out {
            self.keep(ev, publish);
        }
    }

    /// The output ended: what only its end reveals (OpenCode's completion).
    fn finish(&mut self, publish: &Publisher) {
        if std::mem::replace(&mut self.ended, true) {
            return;
        }
        let mut out = Vec::new();
        self.parser.end(&mut out);
        for ev in out {
            self.keep(ev, publish);
        }
    }

    fn keep(&mut self, mut ev: AgentEvent, publish: &Publisher) {
        if self.completed {
            // the run's verdict is taken: later lines are what the agent printed while stopping
            return;
        }
        match &mut ev {
            AgentEvent::Unknown(_) => {
                self.unknown += 1;
                if self.unknown > KEEP_UNKNOWN {
                    return;
                }
            }
            AgentEvent::Message { role, text } => {
                publish.send(RunEvent::Message {
                    role: role.clone(),
                    text: head_str(text, 4096),
                });
                // result assembly never reads messages: keeping them would let a chatty run
                // grow without bound
                return;
            }
            AgentEvent::ToolCall {
                id,
                tool,
                parameters,
                ..
            } => {
                publish.send(RunEvent::ToolCall {
                    id: id.clone(),
                    tool: tool.clone(),
                    parameters: shorten(parameters),
                });
                // counted, not measured by the set: droid may reuse an id
                if self.calls_kept_n >= KEEP_TOOL_CALLS {
                    self.calls_dropped += 1;
                    return;
                }
                self.calls_kept_n += 1;
                self.calls_kept.insert(id.clone());
            }
            AgentEvent::ToolResult {
                id,
                tool,
                is_error,
                text,
                ..
            } => {
                publish.send(RunEvent::ToolResult {
                    id: id.clone(),
                    tool: tool.clone(),
                    is_error: *is_error,
                    excerpt: tail_str(text, 1024).0,
                });
                // once calls are being dropped, a result is kept only for a kept call, and only
                // one per call (a reused id must not let results pile up)
                if self.calls_dropped > 0 && !self.calls_kept.remove(id.as_str()) {
                    return;
                }
                let keep = if self.tool_text >= KEEP_TOOL_TEXT_TOTAL {
                    KEEP_TOOL_TEXT_OVER
                } else {
                    KEEP_TOOL_TEXT
                };
                let (tail, cut) = tail_str(text, keep);
                if cut {
                    *text = tail;
                }
                self.tool_text += text.len();
            }
            AgentEvent::Usage(u) => {
                // only the latest total matters: not kept
                self.usage = Some(u.clone());
                return;
            }
            AgentEvent::Completion {
                usage, session_id, ..
            } => {
                self.completed = true;
                if usage.is_some() {
                    self.usage.clone_from(usage);
                }
                if session_id.is_some() {
                    self.session_id.clone_from(session_id);
                }
            }
            AgentEvent::Error { source, message } => publish.send(RunEvent::Warning {
                message: format!("{} {source} error: {}", self.agent, head_str(message, 2048)),
            }),
            AgentEvent::Init { session_id, .. } => {
                if session_id.is_some() {
                    self.session_id.clone_from(session_id);
                }
            }
        }
        self.events.push(ev);
    }
}

/// Tool parameters for display: long strings (file contents) shortened.
fn shorten(v: &serde_json::Value) -> serde_json::Value {
    match v {
        serde_json::Value::String(s) if s.len() > 512 => {
            serde_json::Value::String(head_str(s, 512))
        }
        serde_json::Value::Array(a) => a.iter().map(shorten).collect(),
        serde_json::Value::Object(o) => o
            .iter()
            .map(|(k, v)| (k.clone(), shorten(v)))
            .collect::<serde_json::Map<_, _>>()
            .into(),
        other => other.clone(),
    }
}
