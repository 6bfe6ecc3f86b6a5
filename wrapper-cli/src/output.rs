//! What a command prints on stdout, and the exit code that follows from it: one line, the
//! answer flushed, an ExecutionResult (JSON or the report), a submitted task's id. A closed
//! stdout is not worth a panic; an answer that could not be written exits [`UNDELIVERED`].

use std::process::ExitCode;

use droid_contract::{ExecutionResult, Status};
use serde_json::json;

use crate::render;

/// One line of the command's output on stdout. A closed stdout (`| head`) is not worth a panic:
/// the write error is ignored.
pub(crate) fn say(text: &str) {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
}

/// The command's answer on stdout, flushed; the error when it could not be written (stdout
/// closed, or a pipe whose reader has gone: Rust ignores SIGPIPE, so this is `EPIPE`).
pub(crate) fn emit(text: &str) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    writeln!(out, "{text}")?;
    out.flush()
}

pub(crate) fn exit_code(status: Status) -> ExitCode {
    match status {
        Status::Success => ExitCode::SUCCESS,
        Status::Partial | Status::Failed | Status::Timeout | Status::Cancelled => ExitCode::from(1),
        Status::Error => ExitCode::from(2),
    }
}

/// Print the result on stdout; its exit code, or [`UNDELIVERED`] when stdout is closed or its
/// reader has gone (the result would be lost: that is not a success, whatever the run did).
pub(crate) fn print_result(result: &ExecutionResult, json: bool) -> ExitCode {
    let text = if json {
        serde_json::to_string_pretty(result).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    } else {
        render::report(result)
    };
    match emit(&text) {
        Ok(()) => exit_code(result.status),
        Err(e) => {
            eprintln!(
                "droid-executor: the result ({}) could not be written to stdout: {e}; it is lost \
                 (run with --background to keep results in the task store)",
                result.status.as_str()
            );
            ExitCode::from(UNDELIVERED)
        }
    }
}

/// The exit code when the answer could not be written to stdout (a closed pipe, a full disk).
pub(crate) const UNDELIVERED: u8 = 4;

/// A submitted task's id: `{"task_id": …}` with `--json`, else the id and on stderr how to
/// follow it (`follow` gives the command for an id). Exit 0, or [`UNDELIVERED`] when stdout is
/// closed (the task runs on; its result stays in the store).
pub(crate) fn print_submitted(
    id: &str,
    json_out: bool,
    follow: &dyn Fn(&str) -> String,
) -> ExitCode {
    let text = if json_out {
        json!({ "task_id": id }).to_string()
    } else {
        id.to_owned()
    };
    if let Err(e) = emit(&text) {
        eprintln!(
            "droid-executor: the task id {id} could not be written to stdout: {e}; the task runs \
             on and its result is kept in the task store (droid-executor tasks show {id})"
        );
        return ExitCode::from(UNDELIVERED);
    }
    if !json_out {
        eprintln!("droid-executor: follow it with: {}", follow(id));
    }
    ExitCode::SUCCESS
}
