//! How a tool answers: a `CallToolResult` ([`tool_result`]), its short text ([`TEXT_MAX`]) and
//! its structured content cut to [`RESULT_MAX`] with a note saying where the whole is, and the
//! answers shared by every tool family (bad arguments, engine errors, a task record, a result).

use droid_contract::{ExecutionResult, Issue, Omitted, Status, TaskRecord};
use droid_exec::EngineError;
use serde_json::{Map, Value, json};

use crate::server::Server;

/// Longest `droid_pend` wait, in seconds. Ten minutes is well over the 60 s many clients give a
/// tool call: the description tells the model to stay under its client's limit, and a call with
/// a `progressToken` gets a heartbeat while it waits, so clients that reset their timeout on
/// progress can use the whole range.
pub const MAX_WAIT_SECONDS: u64 = 600;

/// A `CallToolResult`.
pub(crate) fn tool_result(text: String, structured: Option<Value>, is_error: bool) -> Value {
    let mut r = json!({"content": [{"type": "text", "text": text}], "isError": is_error});
    if let (Some(s), Some(obj)) = (structured, r.as_object_mut()) {
        obj.insert("structuredContent".into(), s);
    }
    r
}

/// A bad-argument answer: `isError` with what to fix.
pub(crate) fn bad_arguments(text: impl Into<String>) -> Value {
    tool_result(text.into(), None, true)
}

/// Longest text rendering of a result or task record, in bytes, the `…` that marks a cut
/// included (the structured content carries everything).
pub const TEXT_MAX: usize = 4000;

/// `s` cut to at most [`TEXT_MAX`] bytes on a character boundary, ending in `…` when cut.
pub(crate) fn shorten(mut s: String) -> String {
    const MARK: char = '…';
    if s.len() > TEXT_MAX {
        let mut cut = TEXT_MAX - MARK.len_utf8();
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push(MARK);
    }
    s
}

/// A short text for a result: status, summary, files, issues.
pub fn render_result(r: &ExecutionResult) -> String {
    render_result_noting(r, None)
}

/// [`render_result`], with `note` (what was left out of the structured result) after the summary.
pub(crate) fn render_result_noting(r: &ExecutionResult, note: Option<&str>) -> String {
    let mut s = format!("status: {}\nsummary: {}", r.status.as_str(), r.summary);
    if let Some(a) = r
        .agent
        .as_ref()
        .filter(|a| a.provider != droid_contract::ProviderId::Droid)
    {
        s.push_str(&format!("\nagent: {}", a.provider));
    }
    if let Some(note) = note {
        s.push_str(&format!("\nnote: {note}"));
    }
    if !r.files_changed.is_empty() {
        let files: Vec<&str> = r.files_changed.iter().map(|f| f.path.as_str()).collect();
        s.push_str(&format!("\nfiles changed: {}", files.join(", ")));
    }
    if let Some(passed) = r.tests.passed {
        s.push_str(&format!("\ntests passed: {passed}"));
    }
    if let Some(w) = &r.worktree {
        let next = if w.state == droid_contract::WorktreeState::Ready {
            " (droid_apply or droid_discard it)"
        } else {
            ""
        };
        s.push_str(&format!(
            "\nworktree: {} on branch {}{next}",
            w.state.as_str(),
            w.branch
        ));
    }
    for i in &r.issues {
        s.push_str(&issue_line(i));
    }
    if let Some(sid) = &r.session_id {
        s.push_str(&format!("\nsession_id: {sid}"));
    }
    shorten(s)
}

/// An issue as a line of a text answer (with its leading newline).
pub(crate) fn issue_line(i: &Issue) -> String {
    format!(
        "\nissue [{}]: {} -> {}",
        i.kind.as_str(),
        i.description,
        i.suggested_action
    )
}

#[cfg(test)]
pub(crate) fn render_record(rec: &TaskRecord) -> String {
    render_record_noting(rec, None, "", "droid_pend")
}

/// A record's text: `head` (a delegation tool's reply) first, then the record; `pend` is the
/// tool to call again while the task runs.
pub(crate) fn render_record_noting(
    rec: &TaskRecord,
    note: Option<&str>,
    head: &str,
    pend: &str,
) -> String {
    let mut s = format!("{head}task {}: {}", rec.task_id, rec.state.as_str());
    match &rec.result {
        Some(r) => {
            s.push('\n');
            s.push_str(&render_result_noting(r, note));
        }
        None => s.push_str(&format!(
            "\nnot finished; call {pend} with task_id {} (and wait_seconds) again",
            rec.task_id
        )),
    }
    shorten(s)
}

pub(crate) fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

/// Largest `structuredContent` of a result or task record, in bytes of compact JSON (24 KiB,
/// about 6 000 tokens: well under the 25 000 tokens over which Claude Code saves a result to a
/// file and shows the model a 2 KB preview). A bigger result is cut by
/// [`ExecutionResult::fit`]: `status`, `summary`, `issues` and `files_changed` are kept, the
/// command excerpts shortened and the oldest commands and log lines left out, and a last log
/// line (also in the text) says how many and where the whole result is. The whole result is
/// always in the task store: a task's own, and a cut synchronous result is stored as a finished
/// task for that ([`sync_answer`]).
pub const RESULT_MAX: usize = 24 * 1024;

/// The note a cut result carries: what was left out, and `whole` (where the rest is).
pub(crate) fn cut_note(o: &Omitted, r: &ExecutionResult, whole: &str) -> String {
    let mut parts = Vec::new();
    let mut count = |n: usize, of: usize, what: &str| {
        if n > 0 {
            parts.push(format!("{n} of {of} {what}"));
        }
    };
    count(
        o.commands,
        r.commands_run.len(),
        "commands_run (the oldest)",
    );
    count(o.logs, r.logs.len(), "logs (the oldest)");
    count(o.files, r.files_changed.len(), "files_changed (the last)");
    count(o.issues, r.issues.len(), "issues (the last)");
    let left = if parts.is_empty() {
        String::new()
    } else {
        format!(": {} left out", parts.join(", "))
    };
    let texts = if o.shortened {
        ", long texts and command excerpts shortened"
    } else {
        ""
    };
    format!(
        "this MCP result was cut to {} KiB{left}{texts}; {whole}",
        RESULT_MAX / 1024
    )
}

/// Where the whole result of task `id` is.
pub(crate) fn whole_in_task(server: &Server, id: &str) -> String {
    let file = server.tasks().map_or_else(String::new, |t| {
        format!(
            " (file {})",
            t.store_dir()
                .join("tasks")
                .join(id)
                .join("result.json")
                .display()
        )
    });
    format!(
        "the whole result is task {id} in the task store: `droid-executor tasks show {id} --json` prints it{file}"
    )
}

/// `r` fitted into [`RESULT_MAX`], and the note saying what was cut (`None` when whole).
pub(crate) fn fit_result(r: &ExecutionResult, whole: &str) -> (ExecutionResult, Option<String>) {
    let (fitted, o) = r.fit(RESULT_MAX, |o| cut_note(o, r, whole));
    let note = (!o.nothing()).then(|| cut_note(&o, r, whole));
    (fitted, note)
}

pub(crate) fn status_is_error(status: Status) -> bool {
    match status {
        Status::Success | Status::Partial => false,
        Status::Failed | Status::Timeout | Status::Cancelled | Status::Error => true,
    }
}

/// The `CallToolResult` of a finished run: `isError` unless it succeeded (fully or partly). A
/// result over [`RESULT_MAX`] is cut, its note saying `whole` is where the rest is.
pub(crate) fn result_answer_cut(r: &ExecutionResult, whole: &str) -> Value {
    let (fitted, note) = fit_result(r, whole);
    tool_result(
        render_result_noting(r, note.as_deref()),
        Some(to_value(&fitted)),
        status_is_error(r.status),
    )
}

/// The `CallToolResult` of a finished run that fits whole (a request refused before it ran).
pub fn result_answer(r: &ExecutionResult) -> Value {
    result_answer_cut(r, "the whole result was not stored")
}

/// The `CallToolResult` of task `id`'s result, cut to [`RESULT_MAX`] if need be (the whole stays
/// in the store).
pub fn task_result_answer(server: &Server, id: &str, r: &ExecutionResult) -> Value {
    result_answer_cut(r, &whole_in_task(server, id))
}

/// The answer to a synchronous `execute_droid_task`: when the result is too big to send whole,
/// it is first stored as a finished task (request `args`), so the note can say where it is.
pub(crate) async fn sync_answer(server: &Server, args: &Value, r: &ExecutionResult) -> Value {
    if serde_json::to_vec(r).map_or(0, |b| b.len()) <= RESULT_MAX {
        return result_answer(r);
    }
    let stored = match (server.tasks(), server.engine().admit(args)) {
        (Some(tasks), Ok(req)) => tasks.record(&req, r).await.map_err(|e| e.to_string()),
        (None, _) => Err("there is no task store".to_owned()),
        (Some(_), Err(v)) => Err(format!("the request is invalid ({v})")),
    };
    let whole = match stored {
        Ok(key) => {
            server.remember(&key);
            whole_in_task(server, key.as_str())
        }
        Err(why) => {
            tracing::warn!("a cut result could not be stored: {why}");
            format!("the whole result could not be stored: {why}")
        }
    };
    result_answer_cut(r, &whole)
}

/// The `CallToolResult` of a task record, its result cut to [`RESULT_MAX`] if need be (the
/// whole stays in the store).
pub(crate) fn record_answer(server: &Server, rec: &TaskRecord) -> Value {
    record_answer_with(server, rec, "", "droid_pend")
}

/// [`record_answer`], its text starting with `head`; `pend` is the tool that follows the task.
pub(crate) fn record_answer_with(
    server: &Server,
    rec: &TaskRecord,
    head: &str,
    pend: &str,
) -> Value {
    let Some(r) = &rec.result else {
        return tool_result(
            render_record_noting(rec, None, head, pend),
            Some(to_value(rec)),
            false,
        );
    };
    let (fitted, note) = fit_result(r, &whole_in_task(server, &rec.task_id));
    let cut = TaskRecord {
        result: Some(fitted),
        ..rec.clone()
    };
    tool_result(
        render_record_noting(rec, note.as_deref(), head, pend),
        Some(to_value(&cut)),
        false,
    )
}

pub(crate) fn engine_error(e: &EngineError) -> Value {
    let hint = match e {
        EngineError::NoSuchTask { .. } => {
            "check the task_id (droid_pend without task_id shows your latest task in this session)"
        }
        _ => "check the task store (droid_ping) and try again",
    };
    bad_arguments(format!("{e}; {hint}"))
}

/// Only these keys may appear in `args`.
pub(crate) fn only_keys(args: &Map<String, Value>, allowed: &[&str]) -> Result<(), Value> {
    match args.keys().find(|k| !allowed.contains(&k.as_str())) {
        None => Ok(()),
        Some(k) => Err(bad_arguments(format!(
            "unknown argument {k:?}; this tool takes {}",
            if allowed.is_empty() {
                "no arguments".to_owned()
            } else {
                allowed.join(", ")
            }
        ))),
    }
}
