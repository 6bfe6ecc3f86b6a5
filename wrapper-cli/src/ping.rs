//! `droid-executor ping [<provider>] [--json]`: seed 002's ping from the command line
//! (docs/architecture.md#origin): for each provider (all five without one) whether its CLI is
//! found, its version, whether an endpoint or key is configured, and what to do if not
//! ([`droid_exec::health::provider_checks`], as the MCP tools `ping_<provider>`). Lines as
//! `doctor` prints them: OK, WARN or FAIL, the fix below.
//!
//! Exit codes, as `doctor`: 0 when no check failed (a provider that is not installed is a WARN),
//! 1 when one did, 2 for usage errors.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use droid_contract::ProviderId;
use droid_exec::health::{Level, provider_checks};

use crate::cli::{engine_config, env_map, settings};

#[derive(Debug, Args)]
#[command(
    after_help = "Exit codes: 0 no check failed (a provider not installed is a WARN), 1 a \
                        check failed, 2 usage error."
)]
pub(crate) struct PingArgs {
    /// The provider: codex, claude, gemini, opencode or droid (default: all five).
    #[arg(value_parser = crate::ask::parse_provider)]
    provider: Option<ProviderId>,
    /// Print the checks as JSON.
    #[arg(long)]
    json: bool,
}

pub(crate) async fn ping(args: PingArgs, config: Option<&PathBuf>) -> ExitCode {
    let env = env_map();
    let settings = match settings(config, &env) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("droid-executor: {e:#}");
            return ExitCode::from(2);
        }
    };
    let cfg = engine_config(&settings, &env);
    let providers = match args.provider {
        Some(p) => vec![p],
        None => ProviderId::ALL.to_vec(),
    };
    let mut checks = Vec::new();
    for p in providers {
        checks.extend(provider_checks(&cfg, &env, p).await);
    }
    let out = if args.json {
        crate::doctor::checks_json(&checks)
    } else {
        crate::doctor::checks_text(&checks)
    };
    crate::cli::say(&out);
    if checks.iter().any(|c| c.level == Level::Fail) {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}
