//! `droid-executor tasks list|show|wait|cancel|clean|apply|discard`: background tasks as the
//! store holds them, readable while no server runs. `--json` prints task records
//! (`{"task_id", "state", "created_at", "updated_at", "result"}`); `apply` and `discard` print a
//! WorktreeAnswer.
//!
//! Exit codes: `show`, `list` and `clean` exit 0 when they could answer; `wait` and `cancel` exit
//! like `run` once the task has finished (0 success, 1 failed/partial/timeout/cancelled, 2 error)
//! and 3 when it is still not finished when they stop waiting; `apply` and `discard` 0 when done
//! (`--check`: would apply cleanly), 1 on a conflict, 2 when refused (already applied, a run
//! working there); 2 for an unknown task or an unusable store.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Subcommand};
use droid_contract::{TaskRecord, TaskState};
use droid_exec::{TaskFilter, Tasks};
use serde_json::Value;

use crate::context::Context;
use crate::expired::clean_expired;
use crate::output::exit_code;
use crate::render;

/// How long `tasks cancel` waits for the task to stop (droid gets 5 s after SIGTERM, then the
/// sweep, then verification is skipped).
const CANCEL_WAIT: Duration = Duration::from_secs(30);

/// Exit code of `wait` and `cancel` for a task that is still not finished.
const STILL_RUNNING: u8 = 3;

#[derive(Debug, Args)]
pub(crate) struct TasksArgs {
    #[command(subcommand)]
    command: TasksCommand,
}

#[derive(Debug, Subcommand)]
enum TasksCommand {
    /// List tasks, newest first.
    List {
        /// Only tasks in this state (queued, running, success, partial, failed, timeout,
        /// cancelled, error).
        #[arg(long)]
        state: Option<TaskState>,
        /// At most this many.
        #[arg(long)]
        limit: Option<usize>,
        /// Print the task records as a JSON array (with --worktrees: the worktrees).
        #[arg(long)]
        json: bool,
        /// List the worktrees of worktree tasks (state, disk, path) instead of the tasks.
        #[arg(long)]
        worktrees: bool,
    },
    /// Show a task (default: the latest).
    Show {
        /// The task id.
        id: Option<String>,
        /// Print the task record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Wait for a task to finish (default: the latest) and show it.
    Wait {
        /// The task id.
        id: Option<String>,
        /// Stop waiting after this many seconds (exit code 3 if it is still not finished).
        #[arg(long, value_name = "SECONDS")]
        timeout: Option<u64>,
        /// Print the task record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Cancel a task, wait for it to stop (up to 30 s) and show it.
    Cancel {
        /// The task id.
        id: String,
        /// Print the task record as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Bring a worktree task's change into your working tree as uncommitted changes (merged
    /// three-way; all or nothing: on a conflict nothing changes and the exit code is 1).
    Apply {
        /// The task id.
        id: String,
        /// Say what would happen; change nothing.
        #[arg(long)]
        check: bool,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove a worktree task's worktree and branch.
    Discard {
        /// The task id.
        id: String,
        /// Print the answer as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Remove finished tasks whose result is older than the TTL (task_ttl).
    Clean {
        /// Remove every finished task, whatever its age.
        #[arg(long)]
        all: bool,
        /// Print `{"removed": N}`.
        #[arg(long)]
        json: bool,
    },
}

fn out(text: &str) {
    let mut o = std::io::stdout().lock();
    // a closed stdout (`| head`) is not worth a panic
    let _ = writeln!(o, "{text}");
    let _ = o.flush();
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("droid-executor: {e}");
    ExitCode::from(2)
}

fn json_text<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_string_pretty(v).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
}

/// The `objective` of a stored request, shortened to `max` characters.
fn objective(tasks: &Tasks, id: &str, max: usize) -> String {
    let text = tasks
        .request(id)
        .ok()
        .and_then(|r| {
            r.get("objective")
                .and_then(Value::as_str)
                .map(str::to_owned)
        })
        .unwrap_or_default();
    let one_line = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if one_line.chars().count() > max {
        let cut: String = one_line.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    } else {
        one_line
    }
}

/// A task record for people: its header, then the result's report or the latest events.
fn show(tasks: &Tasks, rec: &TaskRecord) -> String {
    let mut s = format!(
        "task {}: {}\ncreated {}, updated {}\nobjective: {}\n",
        rec.task_id,
        rec.state.as_str(),
        rec.created_at,
        rec.updated_at,
        objective(tasks, &rec.task_id, 200)
    );
    match &rec.result {
        Some(result) => {
            s.push('\n');
            s.push_str(&render::report(result));
        }
        None => {
            let events = tasks.events(&rec.task_id, 0).unwrap_or_default();
            let start = events.len().saturating_sub(5);
            if !events.is_empty() {
                s.push_str("latest events:\n");
            }
            for e in &events[start..] {
                s.push_str(&format!("  {}\n", render::event_line(e)));
            }
            s.push_str(&format!(
                "(not finished; wait for it with: droid-executor tasks wait {})",
                rec.task_id
            ));
        }
    }
    s
}

fn finished_code(rec: &TaskRecord) -> ExitCode {
    match &rec.result {
        Some(r) if rec.state.is_finished() => exit_code(r.status),
        _ => ExitCode::from(STILL_RUNNING),
    }
}

/// Wait for the task, print its record, exit like `run` (or 3 while unfinished).
async fn wait_and_show(tasks: &Tasks, id: &str, limit: Duration, json: bool) -> ExitCode {
    match tasks.wait(id, limit).await {
        Ok(rec) => {
            out(&if json {
                json_text(&rec)
            } else {
                show(tasks, &rec)
            });
            finished_code(&rec)
        }
        Err(e) => fail(e),
    }
}

/// The id given, or the latest task's.
async fn resolve(tasks: &Tasks, id: Option<String>) -> Result<String, String> {
    match id {
        Some(id) => Ok(id),
        None => match tasks.latest().await {
            Ok(Some(rec)) => Ok(rec.task_id),
            Ok(None) => {
                Err("no tasks yet; start one with: droid-executor run --background …".into())
            }
            Err(e) => Err(e.to_string()),
        },
    }
}

pub(crate) async fn tasks(args: TasksArgs, ctx: &Context) -> ExitCode {
    let cfg = match ctx.engine_config() {
        Ok(cfg) => cfg,
        Err(e) => return fail(format!("{e:#}")),
    };
    let tasks = match Tasks::open(cfg) {
        Ok(t) => t,
        Err(e) => return fail(e),
    };
    match args.command {
        TasksCommand::List {
            state,
            limit,
            json,
            worktrees: only_worktrees,
        } => {
            // only a listing cleans: looking at one task reads that task alone (an expired one
            // is removed by the look itself)
            clean_expired(&tasks).await;
            if only_worktrees {
                if !json {
                    let text = worktrees(&tasks);
                    out(text.trim_start_matches('\n'));
                    if text.is_empty() {
                        out("no worktrees");
                    }
                    return ExitCode::SUCCESS;
                }
                return match tasks.worktrees_json() {
                    Ok(list) => {
                        out(&json_text(&list));
                        ExitCode::SUCCESS
                    }
                    Err(e) => fail(e),
                };
            }
            let filter = TaskFilter {
                state,
                limit,
                after: None,
                provider: None,
            };
            let listing = match tasks.survey(&filter).await {
                Ok(l) => l,
                Err(e) => return fail(e),
            };
            // a bad entry of the store is skipped and named; the others are listed
            for d in &listing.damaged {
                eprintln!(
                    "droid-executor: warning: skipped task store entry {}: {}",
                    d.entry, d.problem
                );
            }
            let records = listing.tasks;
            if json {
                out(&json_text(&records));
            } else if records.is_empty() {
                out("no tasks");
            } else {
                let mut text = format!(
                    "{:<25} {:<9} {:<9} {:<24} OBJECTIVE",
                    "TASK", "PROVIDER", "STATE", "CREATED"
                );
                for r in &records {
                    // the id names the provider that runs it (`codex-1795349045-3fa2`)
                    let provider = droid_exec::pend::provider_of(&r.task_id)
                        .unwrap_or_default()
                        .as_str();
                    text.push_str(&format!(
                        "\n{:<25} {:<9} {:<9} {:<24} {}",
                        r.task_id,
                        provider,
                        r.state.as_str(),
                        r.created_at,
                        objective(&tasks, &r.task_id, 60)
                    ));
                }
                text.push_str(&worktrees(&tasks));
                out(&text);
            }
            ExitCode::SUCCESS
        }
        TasksCommand::Apply { id, check, json } => answer(tasks.apply(&id, check).await, json),
        TasksCommand::Discard { id, json } => answer(tasks.discard(&id).await, json),
        TasksCommand::Show { id, json } => {
            let id = match resolve(&tasks, id).await {
                Ok(id) => id,
                Err(e) => return fail(e),
            };
            match tasks.status(&id).await {
                Ok(rec) => {
                    out(&if json {
                        json_text(&rec)
                    } else {
                        show(&tasks, &rec)
                    });
                    ExitCode::SUCCESS
                }
                Err(e) => fail(e),
            }
        }
        TasksCommand::Wait { id, timeout, json } => {
            let id = match resolve(&tasks, id).await {
                Ok(id) => id,
                Err(e) => return fail(e),
            };
            // no --timeout: as long as it takes (a run is bounded by its own max_runtime)
            let limit = timeout.map_or(
                Duration::from_secs(u64::from(u32::MAX)),
                Duration::from_secs,
            );
            wait_and_show(&tasks, &id, limit, json).await
        }
        TasksCommand::Cancel { id, json } => {
            let rec = match tasks.cancel(&id).await {
                Ok(rec) => rec,
                Err(e) => return fail(e),
            };
            if rec.state.is_finished() && !json {
                eprintln!(
                    "droid-executor: task {id} had already finished ({})",
                    rec.state.as_str()
                );
            }
            wait_and_show(&tasks, &id, CANCEL_WAIT, json).await
        }
        TasksCommand::Clean { all, json } => match tasks.clean(all).await {
            Ok(n) => {
                out(&if json {
                    serde_json::json!({"removed": n}).to_string()
                } else {
                    format!("removed {n} task(s)")
                });
                ExitCode::SUCCESS
            }
            Err(e) => fail(e),
        },
    }
}

/// The worktrees of the store for `tasks list`: each with its task, state, disk and path; empty
/// when there are none.
fn worktrees(tasks: &Tasks) -> String {
    let list = match tasks.worktrees() {
        // those holding a checkout: a run works there, or a change waits (an applied or
        // discarded one is only a record until its task expires)
        Ok(l) => l
            .into_iter()
            .filter(droid_exec::WorktreeEntry::holds_checkout)
            .collect::<Vec<_>>(),
        Err(e) => return format!("\n\nworktrees: cannot be listed: {e}"),
    };
    if list.is_empty() {
        return String::new();
    }
    let total: u64 = list.iter().map(|w| w.disk.bytes).sum();
    let partial = list.iter().any(|w| w.disk.partial);
    let all = droid_exec::worktree::DiskUse {
        bytes: total,
        entries: 0,
        partial,
    };
    let mut text = format!(
        "\n\nworktrees ({}, {}):\n{:<25} {:<10} {:>9}  PATH",
        list.len(),
        all.human(),
        "TASK",
        "STATE",
        "DISK"
    );
    for w in &list {
        let state = w.state_str();
        text.push_str(&format!(
            "\n{:<25} {:<10} {:>9}  {}",
            w.id,
            state,
            w.disk.human(),
            w.path.display()
        ));
    }
    text
}

/// Print an apply or discard answer; exit 0 done, 1 conflict, 2 refused (or an unknown task).
fn answer(
    got: Result<droid_contract::WorktreeAnswer, droid_exec::EngineError>,
    json: bool,
) -> ExitCode {
    use droid_contract::WorktreeOutcome;
    let a = match got {
        Ok(a) => a,
        Err(e) => return fail(e),
    };
    if json {
        out(&json_text(&a));
    } else {
        let mut text = format!("{}: {}", a.outcome.as_str(), a.summary);
        for f in &a.files_changed {
            text.push_str(&format!("\n  {} {}", change_tag(f.change_type), f.path));
        }
        for c in &a.conflicts {
            text.push_str(&format!("\n  conflict: {c}"));
        }
        for i in &a.issues {
            if i.description != a.summary {
                text.push_str(&format!("\n{}: {}", i.kind.as_str(), i.description));
            }
            text.push_str(&format!("\n  -> {}", i.suggested_action));
        }
        out(&text);
    }
    match a.outcome {
        WorktreeOutcome::Applied | WorktreeOutcome::Clean | WorktreeOutcome::Discarded => {
            ExitCode::SUCCESS
        }
        WorktreeOutcome::Conflict => ExitCode::from(1),
        WorktreeOutcome::Refused => ExitCode::from(2),
    }
}

fn change_tag(c: droid_contract::ChangeType) -> &'static str {
    use droid_contract::ChangeType;
    match c {
        ChangeType::Added => "A",
        ChangeType::Modified => "M",
        ChangeType::Deleted => "D",
        ChangeType::Renamed => "R",
    }
}
