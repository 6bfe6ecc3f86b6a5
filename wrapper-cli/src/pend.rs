//! `droid-executor pend <provider> [TASK_ID] [--repo DIR] [--wait S] [--json]`: seed 002's pend
//! from the command line (docs/architecture.md#origin), a thin shortcut over `tasks wait`.
//! Without a task id it takes that provider's latest task in this repository (the one the
//! current directory, or `--repo`, lies in: [`droid_exec::Tasks::latest_in_repository`]), never
//! another repository's, which only its id reaches; an id of another provider's task is refused,
//! naming both. It waits up to `--wait` seconds (default 0: look
//! once) and prints the agent's final reply first (the engine's one definition of it,
//! [`droid_exec::reply`], which MCP's `pend` uses too: the answer without the report block), then
//! the verified result (status, agent, files changed, commands, tests, issues); `--json` prints
//! the task record as `tasks show --json` does, with the reply first (`reply`, null while it runs
//! or when there is none), as MCP's `pend` gives it.
//!
//! Exit codes, as `tasks wait`: once the task has finished, as `run` (0 success, 1 failed,
//! partial, timeout or cancelled, 2 error); 3 when it is still not finished; 2 for usage errors,
//! an unknown task, a task of another provider or an unusable store.

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::Args;
use droid_contract::{ProviderId, TaskRecord};
use droid_exec::Tasks;

use crate::context::Context;
use crate::output::{UNDELIVERED, emit, exit_code};
use crate::provider_arg::{parse_provider, provider_help};
use crate::provider_task::{repository_dir, resolve};

/// Exit code of a task that is still not finished (as `tasks wait`).
const STILL_RUNNING: u8 = 3;

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: once the task has finished, 0 success, 1 failed, partial, \
                        timeout or cancelled, 2 error; 3 still not finished; 2 usage error, \
                        unknown task, a task of another provider, or an unusable task store."
)]
pub(crate) struct PendArgs {
    #[arg(
        value_parser = parse_provider,
        help = provider_help("The provider whose task it is", "")
    )]
    provider: ProviderId,
    /// The task id `ask --background` printed (default: that provider's latest task in this
    /// repository).
    task_id: Option<String>,
    /// The repository whose latest task to take without a task id (default: the one the
    /// current directory lies in).
    #[arg(long, value_name = "DIR", conflicts_with = "task_id")]
    repo: Option<PathBuf>,
    /// Wait up to this many seconds for the task to finish (default 0: look once).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    wait: u64,
    /// Print the task record as JSON.
    #[arg(long)]
    json: bool,
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("droid-executor: {e}");
    ExitCode::from(2)
}

/// The record for people: the agent's reply first ([`droid_exec::reply`]: its final answer, as
/// MCP's `pend` gives it), then the verified result; or, while it runs, its state and how to
/// wait for it. A finished task without a reply (timed out, cancelled, or silent) shows the
/// result's summary in its report instead.
fn show(provider: ProviderId, rec: &TaskRecord, reply: Option<&str>) -> String {
    match &rec.result {
        Some(result) if rec.state.is_finished() => match reply {
            // the summary only when it says something the reply does not (the report's own
            // account of the work, when the agent wrote one)
            Some(reply) => format!(
                "{}\n\ntask {}: {}\n{}",
                reply.trim_end(),
                rec.task_id,
                rec.state.as_str(),
                if result.summary.trim() == reply.trim() {
                    crate::render::report_under_reply(result)
                } else {
                    crate::render::report(result)
                }
            ),
            None => format!(
                "{} gave no reply\n\ntask {}: {}\n{}",
                provider.display_name(),
                rec.task_id,
                rec.state.as_str(),
                crate::render::report(result)
            ),
        },
        _ => format!(
            "task {}: {} (created {}, updated {})\nnot finished; wait for it with: \
             droid-executor pend {provider} {} --wait 60",
            rec.task_id,
            rec.state.as_str(),
            rec.created_at,
            rec.updated_at,
            rec.task_id
        ),
    }
}

/// `--json`: the task record with the reply first (`{"reply", "task_id", "state", …}`), as MCP's
/// `pend` gives it.
fn with_reply(reply: Option<&str>, rec: &TaskRecord) -> String {
    let mut out = serde_json::Map::new();
    out.insert(
        "reply".into(),
        reply.map_or(serde_json::Value::Null, Into::into),
    );
    if let Ok(serde_json::Value::Object(fields)) = serde_json::to_value(rec) {
        out.extend(fields);
    }
    serde_json::to_string_pretty(&out).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

pub(crate) async fn pend(args: PendArgs, ctx: &Context) -> ExitCode {
    let cfg = match ctx.engine_config() {
        Ok(cfg) => cfg,
        Err(e) => return fail(format!("{e:#}")),
    };
    let tasks = match Tasks::open(cfg) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    let dir = match repository_dir(args.repo.as_deref()) {
        Ok(dir) => dir,
        Err(e) => return fail(e),
    };
    let id = match resolve(&tasks, args.provider, args.task_id.as_deref(), &dir).await {
        Ok(id) => id,
        Err(e) => return fail(e),
    };
    let rec = match tasks.wait(&id, Duration::from_secs(args.wait)).await {
        Ok(rec) => rec,
        Err(e) => return fail(e),
    };
    let reply = droid_exec::reply::of_task(&tasks, &rec);
    let text = if args.json {
        with_reply(reply.as_deref(), &rec)
    } else {
        show(args.provider, &rec, reply.as_deref())
    };
    if let Err(e) = emit(&text) {
        eprintln!(
            "droid-executor: task {id} could not be written to stdout: {e}; it stays in the task \
             store (droid-executor tasks show {id})"
        );
        return ExitCode::from(UNDELIVERED);
    }
    match &rec.result {
        Some(r) if rec.state.is_finished() => exit_code(r.status),
        _ => ExitCode::from(STILL_RUNNING),
    }
}
