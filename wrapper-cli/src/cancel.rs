//! `droid-executor cancel <provider> [TASK_ID] [--repo DIR] [--json]`: seed 002's cancel from the
//! command line (docs/architecture.md#origin), a thin shortcut over `tasks cancel`. Which task,
//! as `pend` decides it ([`crate::provider_task::resolve`]): the id given (refused when it is another
//! provider's), else that provider's latest task in this repository, never another
//! repository's. It prints the task's state right after the request (`--json`: the task record);
//! `pend` shows the final one.
//!
//! Exit codes: 0 the cancel was requested (or the task had finished already: its state says
//! which); 2 for usage errors, an unknown task, a task of another provider or an unusable store.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use droid_contract::ProviderId;
use droid_exec::Tasks;

use crate::context::Context;
use crate::output::{UNDELIVERED, emit};
use crate::provider_arg::{parse_provider, provider_help};
use crate::provider_task::{repository_dir, resolve};

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 cancel requested (or the task had finished already), 2 usage \
                  error, unknown task, a task of another provider, or an unusable task store."
)]
pub(crate) struct CancelArgs {
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
    /// Print the task record as JSON.
    #[arg(long)]
    json: bool,
}

fn fail(e: impl std::fmt::Display) -> ExitCode {
    eprintln!("droid-executor: {e}");
    ExitCode::from(2)
}

pub(crate) async fn cancel(args: CancelArgs, ctx: &Context) -> ExitCode {
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
        Err(e) => return fail(e.replace("droid-executor pend", "droid-executor cancel")),
    };
    let rec = match tasks.cancel(&id).await {
        Ok(rec) => rec,
        Err(e) => return fail(e),
    };
    let text = if args.json {
        serde_json::to_string_pretty(&rec).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    } else if rec.state.is_finished() {
        format!(
            "task {id} had finished already: {}; see it with: droid-executor pend {} {id}",
            rec.state.as_str(),
            args.provider
        )
    } else {
        format!(
            "cancel requested for task {id} ({}); see the end with: droid-executor pend {} {id} \
             --wait 30",
            rec.state.as_str(),
            args.provider
        )
    };
    if let Err(e) = emit(&text) {
        eprintln!("droid-executor: could not write to stdout: {e}");
        return ExitCode::from(UNDELIVERED);
    }
    ExitCode::SUCCESS
}
