//! Supervising one agent process: read its events as they come, publish them, and stop it on
//! timeout, cancellation, or shortly after its completion event.
//!
//! `select!` over: the next stdout line, the process exiting, the deadline, the cancel token, and
//! (once a completion event arrived) the exit grace. droid can linger after `completion` (~6 s
//! flushing telemetry when not in airgap mode), and its session is already on disk by then, so the
//! result is ready: we wait `exit_grace` and then end the process group ourselves.

use std::os::unix::process::ExitStatusExt as _;
use std::process::ExitStatus;
use std::time::Duration;

use droid_contract::RunEnd;
use tokio::io::BufReader;
use tokio::process::Child;
use tokio::sync::mpsc;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::event::RunEvent;
use crate::event_log::EventLog;
use crate::excerpt::{Tail, head_str, tail_str};
use crate::lines::{Line, Lines, MAX_LINE_BYTES};
use crate::provider::{AgentEvent, Provider};
use crate::redact::Redactor;
use crate::spawn::{read_tail, terminate};

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
    log: Option<std::sync::Arc<EventLog>>,
    /// Masks secrets in every event before it leaves (docs/architecture.md#security): droid's
    /// messages reach MCP
    /// progress notifications and the CLI's progress line as they are.
    redact: Option<Redactor>,
}

impl Publisher {
    /// Publish to `tx` (or nowhere).
    pub fn new(tx: Option<mpsc::Sender<RunEvent>>) -> Self {
        Self {
            tx,
            dropped: std::sync::Arc::default(),
            log: None,
            redact: None,
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
        log: Option<std::sync::Arc<EventLog>>,
    ) -> Self {
        Self {
            log,
            ..Self::new(tx)
        }
    }

    /// Send `ev`; when the channel is full the event is dropped and counted.
    pub fn send(&self, ev: RunEvent) {
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
    pub exit: Option<ExitStatus>,
    /// We ended the process (after completion, on timeout or on cancel).
    pub stopped_by_us: bool,
    pub events: Vec<AgentEvent>,
    /// Tool calls past [`KEEP_TOOL_CALLS`], left out of `events`.
    pub tool_calls_dropped: usize,
    pub unknown_lines: usize,
    pub oversized: Vec<u64>,
    pub stderr: Tail,
}

pub(crate) struct Limits {
    pub deadline: Instant,
    pub kill_grace: Duration,
    pub exit_grace: Duration,
    pub marker: String,
    /// The control pipe of the supervisor the child is ([`crate::guard`]), which ends droid's
    /// whole tree itself; `None`: the child is droid, its tree is ended by the marker sweep.
    pub tree: Option<crate::guard::TreeControl>,
}

enum Stop {
    Exited(Option<ExitStatus>),
    GraceOver,
    Timeout,
    Cancel,
}

pub(crate) async fn supervise(
    mut child: Child,
    provider: &dyn Provider,
    limits: &Limits,
    cancel: &CancellationToken,
    publish: &Publisher,
) -> Supervised {
    let pid = child.id();
    let stderr_task = tokio::spawn(read_tail(child.stderr.take(), STDERR_KEEP));
    let mut lines = child
        .stdout
        .take()
        .map(|s| Lines::new(BufReader::with_capacity(64 * 1024, s), MAX_LINE_BYTES));
    let mut obs = Observed::default();
    let stop = loop {
        let grace = obs.completed_at.map(|t| t + limits.exit_grace);
        tokio::select! {
            biased;
            () = cancel.cancelled() => break Stop::Cancel,
            () = tokio::time::sleep_until(limits.deadline) => break Stop::Timeout,
            () = sleep_opt(grace) => break Stop::GraceOver,
            status = child.wait() => break Stop::Exited(status.ok()),
            line = next_line(&mut lines) => match line {
                Some(l) => obs.take(l, provider, publish),
                None => lines = None,
            },
        }
    };
    let (exit, stopped_by_us) = match stop {
        Stop::Exited(status) => {
            match &limits.tree {
                // the supervisor exits only once droid's tree is gone; killed by a signal it may
                // have been killed itself before that (droid's own signal death looks the same)
                Some(_) if status.is_some_and(|s| s.signal().is_none()) => {}
                _ => {
                    // the process is gone; kill whatever it left behind in its group or elsewhere
                    if let Some(pid) = pid {
                        crate::spawn::signal_group(pid, nix::sys::signal::Signal::SIGKILL);
                    }
                    crate::sweep::sweep(&limits.marker, Duration::from_secs(3)).await;
                }
            }
            (status, false)
        }
        Stop::GraceOver | Stop::Timeout | Stop::Cancel => (
            match &limits.tree {
                Some(tree) => {
                    crate::guard::stop(&mut child, tree, limits.kill_grace, &limits.marker).await
                }
                None => terminate(&mut child, limits.kill_grace, &limits.marker).await,
            },
            true,
        ),
    };
    // what droid printed before it went away is still in the pipe (unless it was read to its end)
    if let Some(open) = lines.as_mut() {
        let _ = tokio::time::timeout(DRAIN, async {
            while let Some(l) = open.next().await {
                obs.take(l, provider, publish);
            }
        })
        .await;
    }
    let stderr = match tokio::time::timeout(DRAIN, stderr_task).await {
        Ok(Ok(t)) => t,
        _ => Tail::new(0),
    };
    let completed = obs.completed_at.is_some();
    let end = match stop {
        _ if completed => RunEnd::Completed,
        Stop::Timeout => RunEnd::TimedOut,
        Stop::Cancel => RunEnd::Cancelled,
        Stop::Exited(_) | Stop::GraceOver => RunEnd::Failed,
    };
    Supervised {
        end,
        exit,
        stopped_by_us,
        events: obs.events,
        tool_calls_dropped: obs.calls_dropped,
        unknown_lines: obs.unknown,
        oversized: obs.oversized,
        stderr,
    }
}

async fn sleep_opt(at: Option<Instant>) {
    match at {
        Some(t) => tokio::time::sleep_until(t).await,
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

#[derive(Default)]
struct Observed {
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
    completed_at: Option<Instant>,
}

impl Observed {
    fn take(&mut self, line: Line, provider: &dyn Provider, publish: &Publisher) {
        let bytes = match line {
            Line::Text(b) => b,
            Line::Oversized(n) => {
                self.oversized.push(n);
                publish.send(RunEvent::Warning {
                    message: format!("droid printed a {n}-byte line; it was skipped"),
                });
                return;
            }
        };
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return;
        }
        let mut ev = provider.parse_line(&bytes);
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
            AgentEvent::Completion { .. } => {
                if self.completed_at.is_none() {
                    self.completed_at = Some(Instant::now());
                }
            }
            AgentEvent::Error { source, message } => publish.send(RunEvent::Warning {
                message: format!("droid {source} error: {}", head_str(message, 2048)),
            }),
            AgentEvent::Init { .. } => {}
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
