//! `droid-executor ask <provider> MESSAGE`: seed 002's ask from the command line
//! (docs/architecture.md#origin), a thin shortcut over `run --provider P`. The request comes from
//! [`droid_exec::ask::ask_request`], as for the MCP tools `ask_<provider>`: a consultation
//! (`read_only`) of 120 s unless `--autonomy` and `--timeout` say otherwise, in the current
//! directory unless `--repo` names another. By default it runs in this process and prints the
//! result like `run`; `--background` submits it, prints the task id on stdout (`{"task_id": …}`
//! with `--json`) and on stderr how to fetch the reply (`droid-executor pend <provider> ID`).
//!
//! Exit codes, as `run`: 0 success (or submitted), 1 the task ran but did not succeed (failed,
//! partial, timeout, cancelled), 2 usage errors and `error` results (nothing ran), 4 the answer
//! could not be written to stdout.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use droid_contract::{Autonomy, ProviderId};
use droid_exec::ask::{Ask, ask_request};

use crate::context::Context;
use crate::in_process::in_process;
use crate::provider_arg::{parse_provider, provider_help};

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 success (or submitted with --background), 1 the task ran \
                        but did not succeed (failed, partial, timeout, cancelled), 2 usage error \
                        or nothing ran (error), 4 the answer could not be written to stdout."
)]
pub(crate) struct AskArgs {
    #[arg(value_parser = parse_provider, help = provider_help("Who answers", ""))]
    provider: ProviderId,
    /// The whole request, in your own words (its first line is the objective).
    message: String,
    /// The repository to work in (default: the current directory).
    #[arg(long, value_name = "DIR")]
    repo: Option<PathBuf>,
    /// read_only (default: a consultation, nothing changes) | low | medium | high (capped by
    /// max_autonomy).
    #[arg(long, value_name = "LEVEL", value_parser = parse_autonomy)]
    autonomy: Option<Autonomy>,
    /// Time budget in seconds (default 120).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u32>,
    /// Continue this session of the provider (a result's session_id).
    #[arg(long, value_name = "ID")]
    session: Option<String>,
    /// none | worktree: let it work in a git worktree of its own (apply its change later with
    /// `droid-executor tasks apply ID`).
    #[arg(long, value_name = "none|worktree", value_parser = droid_contract::Isolation::parse)]
    isolation: Option<droid_contract::Isolation>,
    /// Submit it as a background task, print its id and return at once (fetch the reply with
    /// `droid-executor pend <provider> ID`).
    #[arg(long)]
    background: bool,
    /// Print the ExecutionResult as JSON (with --background: `{"task_id": …}`).
    #[arg(long)]
    json: bool,
}

fn parse_autonomy(s: &str) -> Result<Autonomy, String> {
    [
        Autonomy::ReadOnly,
        Autonomy::Low,
        Autonomy::Medium,
        Autonomy::High,
    ]
    .into_iter()
    .find(|a| a.as_str() == s)
    .ok_or_else(|| "one of \"read_only\", \"low\", \"medium\", \"high\"".to_owned())
}

pub(crate) async fn ask(args: AskArgs, ctx: &Context) -> ExitCode {
    let cfg = match ctx.engine_config() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("droid-executor: {e:#}");
            return ExitCode::from(2);
        }
    };
    let repo = match &args.repo {
        Some(dir) => std::path::absolute(dir).unwrap_or_else(|_| dir.clone()),
        None => match std::env::current_dir() {
            Ok(cwd) => cwd,
            Err(e) => {
                eprintln!("droid-executor: cannot tell the current directory ({e}); pass --repo");
                return ExitCode::from(2);
            }
        },
    };
    // the request carries paths as UTF-8 text: a lossy conversion would name another directory
    if repo.to_str().is_none() {
        eprintln!(
            "droid-executor: --repo {repo:?} is not valid UTF-8; use a UTF-8 path to it (a symlink)"
        );
        return ExitCode::from(2);
    }
    let request = ask_request(&Ask {
        provider: args.provider,
        message: &args.message,
        repo_root: &repo,
        autonomy: args.autonomy,
        timeout_s: args.timeout,
        session: args.session.as_deref(),
        isolation: args.isolation,
        fallback: None,
        max_tokens: None,
    });
    if args.provider == ProviderId::Droid {
        for w in &cfg.droid_warnings {
            eprintln!("droid-executor: warning: {w}");
        }
    }
    let provider = args.provider;
    let follow = move |id: &str| format!("droid-executor pend {provider} {id} --wait 60");
    let background = args
        .background
        .then_some(&follow as &dyn Fn(&str) -> String);
    in_process(cfg.clone(), &request, args.json, background).await
}
