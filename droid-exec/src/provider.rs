//! The seam between the engine and an agent CLI: how to invoke it, and how to read its output as
//! [`AgentEvent`]s. droid is the first provider; Codex, Claude Code, Gemini and OpenCode come later
//! (seed 002, docs/architecture.md#origin) without touching supervision, verification or result
//! assembly.

use std::ffi::OsString;
use std::path::Path;

use droid_contract::{Autonomy, Usage};
use serde_json::Value;

/// Everything a provider needs to build its command line.
#[derive(Debug, Clone)]
pub struct Invocation<'a> {
    /// Absolute working directory (the repository).
    pub cwd: &'a Path,
    /// The prompt file (the prompt never goes on argv: one argument is capped at 128 KiB).
    pub prompt_file: &'a Path,
    /// Autonomy after the server's cap.
    pub autonomy: Autonomy,
    /// Model id.
    pub model: Option<&'a str>,
    /// Reasoning effort.
    pub reasoning_effort: Option<&'a str>,
    /// Session to continue.
    pub session_id: Option<&'a str>,
}

/// One thing the agent did or said, normalised across providers.
#[derive(Debug, Clone, PartialEq)]
pub enum AgentEvent {
    /// The session started.
    Init {
        /// Session id.
        session_id: Option<String>,
        /// Model the agent claims to use.
        model: Option<String>,
    },
    /// A complete message.
    Message {
        /// `user` or `assistant`.
        role: String,
        /// Its text.
        text: String,
    },
    /// A tool call.
    ToolCall {
        /// Call id (pairs with its result).
        id: String,
        /// Tool name (`Execute`, `Create`, `Edit`, …).
        tool: String,
        /// Arguments as the model gave them.
        parameters: Value,
        /// Epoch milliseconds, when the agent reports it.
        timestamp_ms: Option<u64>,
    },
    /// A tool's result.
    ToolResult {
        /// Call id.
        id: String,
        /// Tool name.
        tool: String,
        /// The tool failed.
        is_error: bool,
        /// Its output (or error message).
        text: String,
        /// Epoch milliseconds, when the agent reports it.
        timestamp_ms: Option<u64>,
    },
    /// The agent finished its turn successfully: the only proof of success.
    Completion {
        /// Final assistant text.
        final_text: String,
        /// Model turns.
        num_turns: Option<u64>,
        /// Session id.
        session_id: Option<String>,
        /// Token usage.
        usage: Option<Usage>,
    },
    /// The agent reported an error.
    Error {
        /// Where it came from (`agent_loop`, `cli`).
        source: String,
        /// The message.
        message: String,
    },
    /// A line the provider does not understand (kept as a log line, never fatal).
    Unknown(String),
}

/// An agent CLI the engine can drive.
pub trait Provider: Send + Sync + std::fmt::Debug {
    /// Short name (`droid`).
    fn name(&self) -> &'static str;
    /// Arguments (after the program) for one run.
    fn args(&self, inv: &Invocation<'_>) -> Vec<OsString>;
    /// Arguments that make the program print its version.
    fn version_args(&self) -> Vec<OsString>;
    /// Parse one output line (without its newline).
    fn parse_line(&self, line: &[u8]) -> AgentEvent;
}
