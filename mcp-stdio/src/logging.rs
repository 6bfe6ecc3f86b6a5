//! `notifications/message`: log lines for the client, about the runs its tool calls start (droid
//! started and its version, warnings, the final status; phases and droid's tool calls at debug).
//!
//! Who asked for what:
//! - legacy revisions (2024-11-05 … 2025-11-25): the session's level, set by `logging/setLevel`.
//!   The spec leaves the default open; we send **nothing until the client sets a level**, which is
//!   the 2026 rule ("no `notifications/message` unless requested") and keeps clients that never
//!   ask seeing exactly what they saw before. Our own diagnostics always go to stderr;
//! - 2026-07-28: only for requests whose `_meta` carries `io.modelcontextprotocol/logLevel`, at
//!   that level, for that request alone (`logging/setLevel` is gone in that revision).
//!
//! Messages carry no secrets: pids, droid's version, statuses and engine warnings (which the engine
//! writes without environment values), never the request or droid's environment. Volume is bounded
//! by the engine's event channel, and everything below `info` is one line per droid step at most.

use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use droid_contract::Status;
use droid_exec::RunEvent;
use serde_json::{Value, json};

use crate::jsonrpc::notification;
use crate::outbox::Outbox;

/// The `logger` of every message.
pub const LOGGER: &str = "droid-executor";

/// A syslog severity, as MCP names them, least severe first (so `Ord` is "at least as severe").
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// Detailed tracing: phases, droid's tool calls and messages.
    Debug,
    /// Normal events: droid started, the run succeeded.
    Info,
    /// Significant normal events: a task submitted or cancelled, a partial result.
    Notice,
    /// Something odd that did not stop the run.
    Warning,
    /// The run failed, timed out or could not start.
    Error,
    /// Unused by this server.
    Critical,
    /// Unused by this server.
    Alert,
    /// Unused by this server.
    Emergency,
}

impl Level {
    /// Every level, least severe first.
    pub const ALL: [Level; 8] = [
        Self::Debug,
        Self::Info,
        Self::Notice,
        Self::Warning,
        Self::Error,
        Self::Critical,
        Self::Alert,
        Self::Emergency,
    ];

    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Debug => "debug",
            Self::Info => "info",
            Self::Notice => "notice",
            Self::Warning => "warning",
            Self::Error => "error",
            Self::Critical => "critical",
            Self::Alert => "alert",
            Self::Emergency => "emergency",
        }
    }

    /// The level named `s`, if it is one.
    pub fn parse(s: &str) -> Option<Level> {
        Self::ALL.into_iter().find(|l| l.as_str() == s)
    }

    /// The level from a `logging/setLevel` or `_meta` value; the `-32602` text otherwise.
    ///
    /// # Errors
    /// A message naming the accepted levels.
    pub fn from_value(v: Option<&Value>) -> Result<Level, String> {
        v.and_then(Value::as_str)
            .and_then(Level::parse)
            .ok_or_else(|| {
                let names: Vec<&str> = Self::ALL.iter().map(|l| l.as_str()).collect();
                format!("level must be one of {}", names.join(", "))
            })
    }

    fn index(self) -> u8 {
        match self {
            Self::Debug => 1,
            Self::Info => 2,
            Self::Notice => 3,
            Self::Warning => 4,
            Self::Error => 5,
            Self::Critical => 6,
            Self::Alert => 7,
            Self::Emergency => 8,
        }
    }

    fn from_index(i: u8) -> Option<Level> {
        Self::ALL.into_iter().find(|l| l.index() == i)
    }
}

/// The level a legacy session set with `logging/setLevel`; none until then.
#[derive(Debug, Clone, Default)]
pub struct SessionLevel(Arc<AtomicU8>);

impl SessionLevel {
    /// Set by `logging/setLevel`; applies to every message sent from now on, running calls included.
    pub fn set(&self, level: Level) {
        self.0.store(level.index(), Ordering::Relaxed);
    }

    /// The current level.
    pub fn get(&self) -> Option<Level> {
        Level::from_index(self.0.load(Ordering::Relaxed))
    }
}

/// Which level decides for one call.
#[derive(Debug, Clone)]
pub enum Threshold {
    /// The session's, read at each message (legacy).
    Session(SessionLevel),
    /// The request's own `_meta` level (2026-07-28).
    Request(Level),
}

/// Where one call's log messages go.
#[derive(Debug, Clone)]
pub struct LogSink {
    /// The server's output.
    pub out: Outbox,
    /// The level messages must reach.
    pub threshold: Threshold,
}

impl LogSink {
    /// Whether a message at `level` goes out now.
    pub fn enabled(&self, level: Level) -> bool {
        let min = match &self.threshold {
            Threshold::Session(s) => s.get(),
            Threshold::Request(l) => Some(*l),
        };
        min.is_some_and(|m| level >= m)
    }

    /// Send `{level, logger, data}` if `level` is enabled; `data` is an object with a `message`.
    pub async fn log(&self, level: Level, data: Value) {
        if self.enabled(level) {
            self.out.send(message(level, data)).await;
        }
    }
}

/// A `notifications/message`.
pub fn message(level: Level, data: Value) -> Value {
    notification(
        "notifications/message",
        json!({"level": level.as_str(), "logger": LOGGER, "data": data}),
    )
}

/// The level a run's final status is logged at: failures are errors.
pub fn status_level(status: Status) -> Level {
    match status {
        Status::Success => Level::Info,
        Status::Partial | Status::Cancelled => Level::Notice,
        Status::Failed | Status::Timeout | Status::Error => Level::Error,
    }
}

/// What a run event becomes as a log message (`droid_version` for `started`), if anything.
pub fn event_message(ev: &RunEvent, droid_version: Option<&str>) -> Option<(Level, Value)> {
    let summary = ev.summary().unwrap_or_default();
    Some(match ev {
        RunEvent::Started {
            pid,
            autonomy,
            model,
            ..
        } => (
            Level::Info,
            json!({"message": summary, "event": "started", "pid": pid, "droid_version": droid_version,
                   "autonomy": autonomy, "model": model}),
        ),
        RunEvent::Warning { message } => (
            Level::Warning,
            json!({"message": summary, "event": "warning", "warning": message}),
        ),
        RunEvent::Completed { status } => (
            status_level(*status),
            json!({"message": format!("run finished: {}", status.as_str()), "event": "completed",
                   "status": status.as_str()}),
        ),
        RunEvent::Progress { phase, .. } => (
            Level::Debug,
            json!({"message": summary, "event": "progress", "phase": phase}),
        ),
        RunEvent::ToolCall { tool, .. } => (
            Level::Debug,
            json!({"message": summary, "event": "tool_call", "tool": tool}),
        ),
        RunEvent::Message { .. } if !summary.is_empty() => (
            Level::Debug,
            json!({"message": summary, "event": "message"}),
        ),
        RunEvent::Message { .. } | RunEvent::ToolResult { .. } => return None,
    })
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn levels_round_trip_and_order_by_severity() {
        for (i, l) in Level::ALL.into_iter().enumerate() {
            assert_eq!(Level::parse(l.as_str()), Some(l));
            assert_eq!(Level::from_index(l.index()), Some(l));
            for later in &Level::ALL[i..] {
                assert!(*later >= l);
            }
        }
        assert_eq!(Level::parse("verbose"), None);
        assert!(Level::from_value(Some(&json!(3))).is_err());
        assert_eq!(Level::from_value(Some(&json!("error"))), Ok(Level::Error));
    }

    #[tokio::test]
    async fn a_session_sends_nothing_until_a_level_is_set_then_only_at_or_above_it() {
        let (out, mut rx) = Outbox::new();
        let session = SessionLevel::default();
        let sink = LogSink {
            out,
            threshold: Threshold::Session(session.clone()),
        };
        sink.log(Level::Emergency, json!({"message": "before"}))
            .await;
        session.set(Level::Warning);
        sink.log(Level::Info, json!({"message": "below"})).await;
        sink.log(Level::Warning, json!({"message": "at"})).await;
        sink.log(Level::Error, json!({"message": "above"})).await;
        drop(sink);
        let mut got = Vec::new();
        while let Some(m) = rx.recv().await {
            got.push(m["params"]["data"]["message"].clone());
        }
        assert_eq!(got, vec![json!("at"), json!("above")]);
    }

    #[test]
    fn failures_are_errors() {
        let done = |status| event_message(&RunEvent::Completed { status }, None).map(|m| m.0);
        assert_eq!(done(Status::Success), Some(Level::Info));
        assert_eq!(done(Status::Failed), Some(Level::Error));
        assert_eq!(done(Status::Timeout), Some(Level::Error));
        assert_eq!(done(Status::Error), Some(Level::Error));
        let user = RunEvent::Message {
            role: "user".into(),
            text: "hi".into(),
        };
        assert_eq!(event_message(&user, None), None);
    }
}
