//! `droid-executor config show [--json]`: the effective configuration, each value with where it
//! came from (environment variable, config file, default), plus the config file's path and how
//! droid is found. An invalid file is reported with its line and column, exit 2.

use std::process::ExitCode;

use clap::{Args, Subcommand};
use droid_exec::Settings;
use droid_exec::provenance::sources;
use serde_json::json;

use crate::context::Context;
use crate::output::say;

#[derive(Debug, Args)]
pub(crate) struct ConfigArgs {
    #[command(subcommand)]
    action: ConfigAction,
}

#[derive(Debug, Subcommand)]
enum ConfigAction {
    /// Print the effective configuration and where each value came from.
    Show {
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
}

pub(crate) fn config(args: ConfigArgs, ctx: &Context) -> ExitCode {
    let ConfigAction::Show { json } = args.action;
    if let Err(e) = ctx.check_named_config() {
        eprintln!("droid-executor config: {e}");
        return ExitCode::from(2);
    }
    let env = ctx.env();
    let path = ctx.config_path();
    let rows = match sources(path.as_deref(), env) {
        Ok(r) => r,
        Err(e) => {
            eprintln!("droid-executor config: {e}");
            return ExitCode::from(2);
        }
    };
    let present = path.as_ref().is_some_and(|p| p.exists());
    let defaults;
    let settings = match ctx.settings() {
        Ok(s) => s,
        Err(_) => {
            defaults = Settings::default();
            &defaults
        }
    };
    let located = settings.locate_droid(env);
    if json {
        say(&json!({
            "config_file": path.as_ref().map(|p| p.display().to_string()),
            "config_file_present": present,
            "settings": rows,
            "droid": {
                "path": located.program.as_ref().map(|p| p.display().to_string()),
                "source": located.source,
            },
        })
        .to_string());
        return ExitCode::SUCCESS;
    }
    let file = match &path {
        Some(p) if present => format!("{}", p.display()),
        Some(p) => format!("{} (not present)", p.display()),
        None => "none (HOME unset)".to_owned(),
    };
    say(&format!("# config file: {file}"));
    let width = rows.iter().map(|r| r.key.len()).max().unwrap_or(0);
    for r in &rows {
        let value = r.value.to_string();
        say(&format!("{:<width$} = {value:<40} # {}", r.key, r.source));
    }
    let droid = located
        .program
        .map_or_else(|| "not found".to_owned(), |p| p.display().to_string());
    say(&format!("# droid: {droid} ({})", located.source));
    ExitCode::SUCCESS
}
