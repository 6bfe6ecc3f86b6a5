//! `droid-executor ping [<provider>] [--json]`: seed 002's ping from the command line
//! (docs/architecture.md#origin): for each provider (all five without one) whether its CLI is
//! found, its version, whether an endpoint or key is configured, and what to do if not
//! ([`droid_exec::health::provider_checks`], as the MCP tools `ping_<provider>`). Lines as
//! `doctor` prints them: OK, WARN or FAIL, the fix below.
//!
//! Exit codes, as `doctor`: 0 when no check failed (a provider that is not installed is a WARN),
//! 1 when one did, 2 for usage errors.

use std::process::ExitCode;

use clap::Args;
use droid_contract::ProviderId;
use droid_exec::check_text::{self, Layout};
use droid_exec::health::{Level, provider_checks};

use crate::context::Context;
use crate::output::say;
use crate::provider_arg::{parse_provider, provider_help};

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 no check failed (a provider not installed is a WARN), 1 a \
                        check failed, 2 usage error."
)]
pub(crate) struct PingArgs {
    #[arg(
        value_parser = parse_provider,
        help = provider_help("The provider", " (default: all of them)")
    )]
    provider: Option<ProviderId>,
    /// Print the checks as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn ping(args: PingArgs, ctx: &Context) -> ExitCode {
    let cfg = match ctx.engine_config() {
        Ok(cfg) => cfg,
        Err(e) => {
            eprintln!("droid-executor: {e:#}");
            return ExitCode::from(2);
        }
    };
    let providers = match args.provider {
        Some(p) => vec![p],
        None => ProviderId::ALL.to_vec(),
    };
    let mut checks = Vec::new();
    for p in providers {
        checks.extend(provider_checks(cfg, ctx.env(), p).await);
    }
    let out = if args.json {
        check_text::json(&checks)
    } else {
        check_text::render(&checks, Layout::Columns)
    };
    say(&out);
    if checks.iter().any(|c| c.level == Level::Fail) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
