//! What the engine publishes while a run goes on. Every front-end renders the same stream (SSE,
//! MCP progress, ACP updates, the CLI's progress line).

use droid_contract::Status;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// How many events may wait for a slow consumer before newer ones are dropped (and counted in a
/// warning): enough for a burst of tool calls, small enough to bound memory.
pub const EVENT_CHANNEL_CAPACITY: usize = 256;

/// Where a run's events are recorded as they are published, beside the channel a front-end
/// reads: a background task's event log (`crate::tasks`). The run knows only this trait; the
/// task store implements it, so a run imports nothing of the store.
pub(crate) trait EventSink: Send + Sync + std::fmt::Debug {
    /// Record `ev` (already masked) now. Never fails the run: a sink that cannot record says so
    /// in the log and stops.
    fn record(&self, ev: &RunEvent);
}

/// The phase a run is in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    /// Waiting for a run slot, or for another run on the same repository to end.
    Queued,
    /// Recording the repository before the run.
    Snapshot,
    /// droid is working.
    Agent,
    /// Re-running the suggested commands.
    Verify,
    /// Building the result.
    Assemble,
}

/// One thing that happened during a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum RunEvent {
    /// droid was started.
    Started {
        /// Its pid.
        pid: u32,
        /// The program path.
        program: String,
        /// The autonomy it runs with.
        autonomy: String,
        /// The model, when one was named.
        model: Option<String>,
    },
    /// A complete message from droid or its user.
    Message {
        /// `user` or `assistant`.
        role: String,
        /// Text (bounded).
        text: String,
    },
    /// droid called a tool.
    ToolCall {
        /// Call id.
        id: String,
        /// Tool name.
        tool: String,
        /// Its arguments (long strings shortened).
        parameters: Value,
    },
    /// A tool returned.
    ToolResult {
        /// Call id.
        id: String,
        /// Tool name.
        tool: String,
        /// It failed.
        is_error: bool,
        /// The end of its output (bounded).
        excerpt: String,
    },
    /// The run moved to another phase.
    Progress {
        /// The phase.
        phase: Phase,
        /// What is going on.
        message: String,
    },
    /// Something odd that did not stop the run.
    Warning {
        /// What.
        message: String,
    },
    /// The run ended; the result is ready.
    Completed {
        /// Its status.
        status: Status,
    },
}

impl RunEvent {
    /// One line for people (a progress line, an MCP progress message), or `None` for events not
    /// worth a line of their own (user messages, tool results). At most 100 characters, no
    /// control characters.
    pub fn summary(&self) -> Option<String> {
        let line = match self {
            Self::Started { pid, .. } => format!("droid started (pid {pid})"),
            Self::Message { role, text } if role == "assistant" => {
                format!("droid: {}", text.lines().next().unwrap_or(""))
            }
            Self::Message { .. } | Self::ToolResult { .. } => return None,
            Self::ToolCall {
                tool, parameters, ..
            } => {
                let what = parameters
                    .get("command")
                    .or_else(|| parameters.get("file_path"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                format!("{tool} {what}")
            }
            Self::Progress { message, .. } => message.clone(),
            Self::Warning { message } => format!("warning: {message}"),
            Self::Completed { status } => format!("finished: {}", status.as_str()),
        };
        Some(line.chars().filter(|c| !c.is_control()).take(100).collect())
    }
}
