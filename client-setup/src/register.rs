//! Registering `droid-executor mcp` with an MCP client (`droid-executor setup mcp --client …`).
//! Every entry names its client in the server's environment (`DROID_EXECUTOR_CLIENT`, see
//! `droid_exec::client_env`), so that a hint about a variable the client dropped names the
//! client's filter, and passes by name (never by value) the variables the server and each
//! enabled provider read, where the client filters its environment.
//!
//! - droid: `droid mcp add droid-executor --env DROID_EXECUTOR_CLIENT=droid -- <program> mcp`
//!   (droid writes `~/.factory/mcp.json`; the `--` keeps droid from reading our arguments as its
//!   options), then `blockOnMcpLoad` and a level per tool in `~/.factory/settings.json`, without
//!   which droid's model is never told of the tools and every call but a read-only one needs
//!   `--auto high` ([`crate::droid_settings`]);
//! - Claude Code: the user-scope `mcpServers` entry in `~/.claude.json` (what
//!   `claude mcp add --scope user` writes), other keys of that file kept as they are. Headless
//!   `claude -p` denies an MCP tool that no permission rule allows, so with
//!   [`Registration::allow_tools`] the rules `mcp__droid-executor__<tool>` are added to
//!   `permissions.allow` in `~/.claude/settings.json`; without it the plan says which rules to add;
//! - Codex: a `[mcp_servers.droid-executor]` table in `$CODEX_HOME/config.toml` (default
//!   `~/.codex/config.toml`), the rest of the file left as it is. `codex exec` runs with approval
//!   policy `never` and refuses a tool call that needs approval, starts an MCP server with only
//!   `HOME`, `LANG`, `LC_ALL`, `LOGNAME`, `PATH`, `SHELL`, `TERM`, `TMPDIR`, `TZ` and `USER`, and
//!   abandons a tool call after 300 s; so the entry approves each of our tools
//!   (`[mcp_servers.droid-executor.tools.<tool>] approval_mode = "approve"`), names the variables
//!   to pass (`env_vars`, only those that are set are passed) and sets `tool_timeout_sec` above
//!   the run budget. An older entry of ours is replaced in place; one the user added settings to
//!   is left alone when it already says what we write, and refused otherwise (replacing it would
//!   lose them);
//! - Gemini CLI: `mcpServers.droid-executor` in `~/.gemini/settings.json`, trusted, with an
//!   `env` map passing back what it would drop ([`crate::gemini`]);
//! - OpenCode: `mcp.droid-executor` in `~/.config/opencode/opencode.json` ([`crate::opencode`]).
//!
//! The JSON-with-comments files (droid's, Gemini's and OpenCode's settings) are edited in place,
//! every other byte kept; an existing entry of ours keeps what the user added to it.
//!
//! A [`Plan`] says what would be done (`--dry-run` prints it); [`apply`] does it. Registering
//! twice is not an error when the existing entry already says the same.

use std::path::{Path, PathBuf};
use std::time::Duration;

use droid_contract::ProviderId;
use serde_json::{Value, json};

use droid_exec::EngineError;
use droid_exec::client_env::CLIENT_VAR;
use droid_exec::config::{EngineConfig, EnvMap};
use droid_exec::process::capture::capture;
use droid_exec::process::spawn::SpawnSpec;
use droid_exec::state_file::write_atomic;

use crate::jsonc;
use crate::registration::read_optional;
pub use crate::registration::{Registration, SERVER_NAME};

/// One step of registering.
#[derive(Debug, Clone, PartialEq)]
pub enum Plan {
    /// Run droid with these arguments.
    Command {
        /// The droid program.
        program: PathBuf,
        /// Its arguments.
        args: Vec<String>,
    },
    /// Write this JSON file (the whole new content).
    Json {
        /// The file.
        path: PathBuf,
        /// Its new content.
        content: Value,
        /// What changes, in a line.
        what: String,
        /// It already says exactly this: nothing to write.
        unchanged: bool,
    },
    /// Write this JSON-with-comments file, edited in place (its other bytes kept).
    Jsonc {
        /// The file.
        path: PathBuf,
        /// Its new text.
        content: String,
        /// What changes, in a line.
        what: String,
        /// It already says exactly this: nothing to write.
        unchanged: bool,
    },
    /// Write this TOML file (the whole new content), whose entry for us is `entry`.
    Toml {
        /// The file.
        path: PathBuf,
        /// Its new content.
        content: String,
        /// Our tables, as written.
        entry: String,
        /// The file already has exactly this entry: nothing to write.
        unchanged: bool,
    },
    /// Nothing to do but tell the user this.
    Note(String),
}

impl std::fmt::Display for Plan {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Plan::Command { program, args } => {
                write!(f, "run: {} {}", program.display(), args.join(" "))
            }
            Plan::Json {
                path,
                what,
                unchanged,
                ..
            }
            | Plan::Jsonc {
                path,
                what,
                unchanged,
                ..
            } if *unchanged => write!(f, "{} already has {what}", path.display()),
            Plan::Json { path, what, .. } | Plan::Jsonc { path, what, .. } => {
                write!(f, "write {}: {what}", path.display())
            }
            Plan::Toml {
                path, unchanged, ..
            } if *unchanged => write!(
                f,
                "{} already has this [mcp_servers.{SERVER_NAME}]",
                path.display()
            ),
            Plan::Toml { path, entry, .. } => {
                write!(f, "write {}:\n{}", path.display(), entry.trim_end())
            }
            Plan::Note(text) => f.write_str(text),
        }
    }
}

fn home(env: &EnvMap) -> Result<PathBuf, EngineError> {
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| EngineError::Setting {
            name: "HOME".into(),
            message: "is not set; cannot find the client's configuration".into(),
        })
}

/// A JSON file's object (an absent file is `{}`).
fn read_json_object(path: &Path) -> Result<serde_json::Map<String, Value>, EngineError> {
    let value = match read_optional(path)? {
        None => json!({}),
        Some(t) => serde_json::from_str::<Value>(&t).map_err(|e| EngineError::Config {
            path: path.to_path_buf(),
            message: e.to_string(),
        })?,
    };
    match value {
        Value::Object(map) => Ok(map),
        _ => Err(EngineError::Config {
            path: path.to_path_buf(),
            message: "expected a JSON object".into(),
        }),
    }
}

/// The object at `key` of `map`, made when absent.
fn object_at<'m>(
    map: &'m mut serde_json::Map<String, Value>,
    key: &str,
    path: &Path,
) -> Result<&'m mut serde_json::Map<String, Value>, EngineError> {
    map.entry(key)
        .or_insert_with(|| json!({}))
        .as_object_mut()
        .ok_or_else(|| EngineError::Config {
            path: path.to_path_buf(),
            message: format!("{key} is not an object"),
        })
}

/// The tools a client is told about: `tools` (the front-end's), then every delegation tool of
/// every provider and toolset (`ask`, `ask_codex`, …). All of them, whatever the settings
/// `providers` and `toolsets` say today: an approval of a tool the server does not list is
/// inert, and enabling a provider or a toolset later needs no new registration.
pub fn every_tool(tools: &[&str]) -> Vec<String> {
    let mut all: Vec<String> = tools.iter().map(|t| (*t).to_owned()).collect();
    let every_provider = droid_exec::Settings::default().providers;
    for t in droid_exec::config::delegation_tools(&every_provider) {
        if !all.contains(&t) {
            all.push(t);
        }
    }
    all
}

/// The Claude Code permission rules that allow our tools.
pub fn claude_allow_rules<T: AsRef<str>>(tools: &[T]) -> Vec<String> {
    tools
        .iter()
        .map(|t| format!("mcp__{SERVER_NAME}__{}", t.as_ref()))
        .collect()
}

/// The entry's environment for `client`: its name, so the server words its hints for it.
fn client_env(client: ProviderId) -> Value {
    json!({ CLIENT_VAR: client.as_str() })
}

/// A JSON-with-comments file with our entry at `at` made to say `wanted` (what the user added
/// to it, and to its maps named in `merged`, kept).
fn jsonc_entry(
    path: PathBuf,
    at: &[&str],
    wanted: &Value,
    merged: &[&str],
) -> Result<Plan, EngineError> {
    let existing = read_optional(&path)?;
    let config_error = |e: jsonc::JsoncError| EngineError::Config {
        path: path.clone(),
        message: format!(
            "{e}; it must be JSON (comments allowed): fix the file, or add the entry by hand (`--dry-run` shows it)"
        ),
    };
    let current = match &existing {
        Some(t) => jsonc::value(t).map_err(config_error)?,
        None => None,
    };
    let mut here = current.as_ref();
    for key in at {
        here = here.and_then(|v| v.get(*key));
    }
    let changes = jsonc::entry_changes(at, here, wanted, merged);
    let content = jsonc::set(existing.as_deref(), &changes).map_err(config_error)?;
    let unchanged = existing.as_deref() == Some(content.as_str());
    Ok(Plan::Jsonc {
        what: format!("{} = {wanted}", at.join(".")),
        path,
        content,
        unchanged,
    })
}

/// What registering with `client` takes, step by step; `droid` is droid's program (`None`: not
/// found, and the plan runs `droid` by name, which only a dry run should print).
///
/// # Errors
/// [`EngineError::Setting`] without a HOME, [`EngineError::Config`] for a
/// client configuration file that cannot be parsed or whose entry for us cannot be replaced.
pub fn plan(
    client: ProviderId,
    reg: &Registration<'_>,
    droid: Option<&Path>,
    env: &EnvMap,
) -> Result<Vec<Plan>, EngineError> {
    let exe = reg.program.display().to_string();
    match client {
        ProviderId::Droid => {
            // not found: the plan names it as a user would type it (`--dry-run` shows it; the
            // front-end says what to install and does not apply it)
            let droid = droid.unwrap_or(Path::new("droid"));
            let tools = every_tool(reg.tools);
            let settings = crate::droid_settings::settings_path(env)?;
            let existing = read_optional(&settings)?;
            let content = jsonc::set(
                existing.as_deref(),
                &crate::droid_settings::changes(&tools),
            )
            .map_err(|e| EngineError::Config {
                path: settings.clone(),
                message: format!(
                    "{e}; droid's settings must be JSON (comments allowed): fix the file, or add \
                     blockOnMcpLoad and mcpAutonomyOverrides by hand (`--dry-run` shows them)"
                ),
            })?;
            let count = |l: &str| {
                tools
                    .iter()
                    .filter(|t| crate::droid_settings::level(t) == l)
                    .count()
            };
            Ok(vec![
                Plan::Command {
                    program: droid.to_path_buf(),
                    args: vec![
                        "mcp".into(),
                        "add".into(),
                        SERVER_NAME.into(),
                        "--env".into(),
                        format!("{CLIENT_VAR}={}", ProviderId::Droid.as_str()),
                        "--".into(),
                        exe,
                        "mcp".into(),
                    ],
                },
                Plan::Jsonc {
                    unchanged: existing.as_deref() == Some(content.as_str()),
                    path: settings,
                    content,
                    what: format!(
                        "blockOnMcpLoad = true, mcpAutonomyOverrides.{SERVER_NAME}.tools = a \
                         level for each tool ({} low, {} medium, {} high)",
                        count("low"),
                        count("medium"),
                        count("high")
                    ),
                },
                Plan::Note(crate::droid_settings::note(&tools)),
            ])
        }
        ProviderId::Claude => {
            let home = home(env)?;
            let path = home.join(".claude.json");
            let mut content = read_json_object(&path)?;
            let entry = json!({"type": "stdio", "command": exe, "args": ["mcp"],
                               "env": client_env(ProviderId::Claude)});
            let servers = object_at(&mut content, "mcpServers", &path)?;
            let unchanged = servers.get(SERVER_NAME) == Some(&entry);
            servers.insert(SERVER_NAME.into(), entry.clone());
            let mut steps = vec![Plan::Json {
                path,
                content: Value::Object(content),
                what: format!("mcpServers.{SERVER_NAME} = {entry}"),
                unchanged,
            }];
            let rules = claude_allow_rules(&every_tool(reg.tools));
            let settings = home.join(".claude/settings.json");
            if reg.allow_tools {
                steps.push(claude_allow(&settings, &rules)?);
            } else {
                steps.push(Plan::Note(format!(
                    "note: headless `claude -p` denies these tools until they are allowed: run \
                     again with --allow-tools to add them to permissions.allow in {}, or pass \
                     --allowedTools {}",
                    settings.display(),
                    rules.join(",")
                )));
            }
            Ok(steps)
        }
        ProviderId::Codex => {
            let dir = env
                .get("CODEX_HOME")
                .filter(|h| !h.is_empty())
                .map_or_else(
                    || home(env).map(|h| h.join(".codex")),
                    |h| Ok(PathBuf::from(h)),
                )?;
            let path = dir.join("config.toml");
            let existing = read_optional(&path)?.unwrap_or_default();
            Ok(vec![codex_plan(path, &existing, &codex_entry(reg))?])
        }
        ProviderId::Gemini => Ok(vec![
            jsonc_entry(
                crate::gemini::settings_path(env)?,
                &crate::gemini::AT,
                &crate::gemini::entry(reg),
                &["env"],
            )?,
            Plan::Note(crate::gemini::NOTE.to_owned()),
        ]),
        ProviderId::Opencode => Ok(vec![jsonc_entry(
            crate::opencode::config_path(env)?,
            &crate::opencode::AT,
            &crate::opencode::entry(reg),
            &["environment"],
        )?]),
    }
}

/// `permissions.allow` of Claude Code's user settings with `rules` added (those already there
/// are not repeated; everything else is kept).
fn claude_allow(path: &Path, rules: &[String]) -> Result<Plan, EngineError> {
    let mut content = read_json_object(path)?;
    let permissions = object_at(&mut content, "permissions", path)?;
    let allow = permissions
        .entry("allow")
        .or_insert_with(|| json!([]))
        .as_array_mut()
        .ok_or_else(|| EngineError::Config {
            path: path.to_path_buf(),
            message: "permissions.allow is not an array".into(),
        })?;
    let missing: Vec<&String> = rules
        .iter()
        .filter(|r| !allow.iter().any(|a| a.as_str() == Some(r.as_str())))
        .collect();
    let unchanged = missing.is_empty();
    allow.extend(missing.into_iter().map(|r| Value::String(r.clone())));
    Ok(Plan::Json {
        path: path.to_path_buf(),
        content: Value::Object(content),
        what: format!("permissions.allow with {}", rules.join(", ")),
        unchanged,
    })
}

/// A TOML basic string (a JSON string has the same escapes).
fn toml_string(s: &str) -> String {
    Value::String(s.to_owned()).to_string()
}

/// Our tables in Codex's config.toml.
fn codex_entry(reg: &Registration<'_>) -> String {
    let names: Vec<String> = reg.env_vars.iter().map(|v| toml_string(v)).collect();
    let mut text = format!(
        "[mcp_servers.{SERVER_NAME}]\n\
         # written by `droid-executor setup mcp --client codex`; run it again to update\n\
         command = {}\n\
         args = [\"mcp\"]\n\
         # Codex gives an MCP server only HOME, PATH, LANG and a few more: these are passed, by\n\
         # name, when set (what the server and the enabled providers read)\n\
         env_vars = [{}]\n\
         # one call may run a whole task: above the run budget (Codex's default is 300 s)\n\
         tool_timeout_sec = {}\n\
         \n\
         [mcp_servers.{SERVER_NAME}.env]\n\
         # who started the server: its hints name Codex's env_vars for a variable that is missing\n\
         {CLIENT_VAR} = \"codex\"\n",
        toml_string(&reg.program.display().to_string()),
        names.join(", "),
        reg.tool_timeout_secs,
    );
    for tool in every_tool(reg.tools) {
        // `codex exec` never asks: a tool that needs approval is refused
        text.push_str(&format!(
            "\n[mcp_servers.{SERVER_NAME}.tools.{tool}]\napproval_mode = \"approve\"\n"
        ));
    }
    text
}

fn parse_toml(path: &Path, text: &str) -> Result<toml::Table, EngineError> {
    toml::from_str(text).map_err(|e| EngineError::Config {
        path: path.to_path_buf(),
        message: e.to_string().trim().to_owned(),
    })
}

/// `table` without our server (and without `mcp_servers` when that leaves it empty).
fn without_ours(mut table: toml::Table) -> toml::Table {
    if let Some(toml::Value::Table(servers)) = table.get_mut("mcp_servers") {
        servers.remove(SERVER_NAME);
        if servers.is_empty() {
            table.remove("mcp_servers");
        }
    }
    table
}

/// Whether `current` says everything `wanted` says (tables: each key of `wanted` is in
/// `current` and covered; other values: equal).
fn covers(current: &toml::Value, wanted: &toml::Value) -> bool {
    match (current, wanted) {
        (toml::Value::Table(c), toml::Value::Table(w)) => w
            .iter()
            .all(|(k, wv)| c.get(k).is_some_and(|cv| covers(cv, wv))),
        _ => current == wanted,
    }
}

/// The dotted paths of `current` that `wanted` does not have, under `prefix`.
fn extras(current: &toml::Value, wanted: &toml::Value, prefix: &str, out: &mut Vec<String>) {
    if let (toml::Value::Table(c), toml::Value::Table(w)) = (current, wanted) {
        for (k, cv) in c {
            match w.get(k) {
                None => out.push(format!("{prefix}{k}")),
                Some(wv) => extras(cv, wv, &format!("{prefix}{k}."), out),
            }
        }
    }
}

/// Whether `line` is a table header (`[a.b]` or `[[a.b]]`, maybe with a comment) for our server
/// or one of its sub-tables.
fn is_header(line: &str) -> Option<bool> {
    let trimmed = line.trim_start();
    if !trimmed.starts_with('[') {
        return None;
    }
    // a header alone is a valid document: an empty table at that path
    let table: toml::Table = toml::from_str(trimmed).ok()?;
    let ours = table
        .get("mcp_servers")
        .and_then(toml::Value::as_table)
        .is_some_and(|s| s.contains_key(SERVER_NAME));
    Some(ours)
}

/// The new config.toml: `existing` with our tables (if any) taken out and `entry` appended.
/// The result is checked: our entry must be exactly `entry` and everything else as it was,
/// otherwise (an entry written as an inline table or dotted keys) nothing is written.
fn codex_plan(path: PathBuf, existing: &str, entry: &str) -> Result<Plan, EngineError> {
    let table = parse_toml(&path, existing)?;
    let wanted = parse_toml(&path, entry)?;
    let wanted_server = wanted
        .get("mcp_servers")
        .and_then(|s| s.get(SERVER_NAME))
        .cloned();
    let current_server = table.get("mcp_servers").and_then(|s| s.get(SERVER_NAME));
    if let (Some(current), Some(wanted)) = (current_server, wanted_server.as_ref()) {
        // what the user added to our entry stays: it is ours when it says what we would write
        if covers(current, wanted) {
            return Ok(Plan::Toml {
                path,
                content: existing.to_owned(),
                entry: entry.to_owned(),
                unchanged: true,
            });
        }
        let mut added = Vec::new();
        extras(current, wanted, "", &mut added);
        if !added.is_empty() {
            return Err(EngineError::Config {
                path,
                message: format!(
                    "[mcp_servers.{SERVER_NAME}] has settings setup does not write ({}), which \
                     replacing it would lose; edit it by hand (`setup mcp --client codex \
                     --dry-run` shows the entry) or remove it and run setup again",
                    added.join(", ")
                ),
            });
        }
    }
    let content = if current_server.is_none() {
        let sep = if existing.is_empty() || existing.ends_with("\n\n") {
            ""
        } else if existing.ends_with('\n') {
            "\n"
        } else {
            "\n\n"
        };
        format!("{existing}{sep}{entry}")
    } else {
        let mut ours = false;
        let mut kept = String::with_capacity(existing.len());
        for line in existing.split_inclusive('\n') {
            if let Some(is_ours) = is_header(line) {
                ours = is_ours;
            }
            if !ours {
                kept.push_str(line);
            }
        }
        let kept = kept.trim_end();
        if kept.is_empty() {
            entry.to_owned()
        } else {
            format!("{kept}\n\n{entry}")
        }
    };
    let written = parse_toml(&path, &content).ok();
    let same_rest = written
        .as_ref()
        .is_some_and(|w| without_ours(w.clone()) == without_ours(table.clone()));
    let ours_right = written
        .as_ref()
        .and_then(|w| w.get("mcp_servers"))
        .and_then(|s| s.get(SERVER_NAME))
        == wanted_server.as_ref();
    if !(same_rest && ours_right) {
        return Err(EngineError::Config {
            path,
            message: format!(
                "its entry for mcp_servers.{SERVER_NAME} is not written as [mcp_servers.{SERVER_NAME}] \
                 tables and cannot be replaced; remove it and run setup again"
            ),
        });
    }
    Ok(Plan::Toml {
        path,
        content,
        entry: entry.to_owned(),
        unchanged: false,
    })
}

/// Carry out one step of a plan; what happened, in a sentence.
///
/// # Errors
/// [`EngineError::Io`] when a file cannot be written, [`EngineError::Spawn`] when droid cannot be
/// started, [`EngineError::Setting`] when droid refuses (its message included).
pub async fn apply(plan: &Plan, cfg: &EngineConfig) -> Result<String, EngineError> {
    match plan {
        Plan::Command { program, args } => {
            let spec = SpawnSpec {
                program: program.clone(),
                args: args.iter().map(Into::into).collect(),
                cwd: cfg.scratch_root.clone(),
                env: cfg.env.clone(),
                stdin_piped: false,
                stdin_file: None,
                detach_log: None,
                rlimits: droid_exec::process::limits::Rlimits::NONE,
            };
            let marker = format!("setup-{}", std::process::id());
            let out = capture(&spec, None, Duration::from_secs(60), 16 * 1024, &marker).await?;
            let stdout = out.stdout.text().trim().to_owned();
            let stderr = out.stderr.text().trim().to_owned();
            if out.code == Some(0) {
                Ok(stdout)
            } else if stderr.contains("already exists") || stdout.contains("already exists") {
                Ok(format!(
                    "droid already has an MCP server named {SERVER_NAME} (droid mcp remove {SERVER_NAME} to replace it): {}",
                    if stderr.is_empty() { stdout } else { stderr }
                ))
            } else {
                Err(EngineError::Setting {
                    name: "droid mcp add".into(),
                    message: format!("exit {:?}: {stderr} {stdout}", out.code),
                })
            }
        }
        Plan::Json {
            unchanged: true, ..
        }
        | Plan::Jsonc {
            unchanged: true, ..
        }
        | Plan::Toml {
            unchanged: true, ..
        } => Ok(format!("{plan}; nothing to do")),
        Plan::Jsonc {
            path,
            content,
            what,
            ..
        } => {
            crate::replace_file::replace_file(path, content.as_bytes())?;
            Ok(format!("wrote {}: {what}", path.display()))
        }
        Plan::Json {
            path,
            content,
            what,
            ..
        } => {
            ensure_parent(path)?;
            let mut bytes = serde_json::to_vec_pretty(content)
                .map_err(|e| EngineError::io("encode", path)(std::io::Error::other(e)))?;
            bytes.push(b'\n');
            write_atomic(path, &bytes)?;
            Ok(format!("wrote {}: {what}", path.display()))
        }
        Plan::Toml { path, content, .. } => {
            ensure_parent(path)?;
            write_atomic(path, content.as_bytes())?;
            Ok(format!("registered {SERVER_NAME} in {}", path.display()))
        }
        Plan::Note(text) => Ok(text.clone()),
    }
}

fn ensure_parent(path: &Path) -> Result<(), EngineError> {
    match path.parent() {
        Some(dir) => std::fs::create_dir_all(dir).map_err(EngineError::io("create directory", dir)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOOLS: &[&str] = &["execute_droid_task", "droid_ping"];

    fn reg(allow_tools: bool) -> Registration<'static> {
        Registration {
            program: Path::new("/opt/bin/droid-executor"),
            tools: TOOLS,
            env_vars: vec!["DROID_CLI_CMD".into(), "FACTORY_API_KEY".into()],
            tool_timeout_secs: 660,
            allow_tools,
        }
    }

    fn one(mut steps: Vec<Plan>) -> Plan {
        assert_eq!(steps.len(), 1, "{steps:#?}");
        steps.remove(0)
    }

    const ENTRY: &str = "[mcp_servers.droid-executor]\n\
        # written by `droid-executor setup mcp --client codex`; run it again to update\n\
        command = \"/opt/bin/droid-executor\"\n\
        args = [\"mcp\"]\n\
        # Codex gives an MCP server only HOME, PATH, LANG and a few more: these are passed, by\n\
        # name, when set (what the server and the enabled providers read)\n\
        env_vars = [\"DROID_CLI_CMD\", \"FACTORY_API_KEY\"]\n\
        # one call may run a whole task: above the run budget (Codex's default is 300 s)\n\
        tool_timeout_sec = 660\n\
        \n\
        [mcp_servers.droid-executor.env]\n\
        # who started the server: its hints name Codex's env_vars for a variable that is missing\n\
        DROID_EXECUTOR_CLIENT = \"codex\"\n\
        \n\
        [mcp_servers.droid-executor.tools.execute_droid_task]\n\
        approval_mode = \"approve\"\n\
        \n\
        [mcp_servers.droid-executor.tools.droid_ping]\n\
        approval_mode = \"approve\"\n";

    /// [`ENTRY`] and the approvals of the delegation tools after it: the twenty per-provider
    /// ones, then the four taking a provider argument.
    fn entry_with_families() -> String {
        let mut text = ENTRY.to_owned();
        let mut tools: Vec<String> = Vec::new();
        for p in ["droid", "codex", "claude", "gemini", "opencode"] {
            for v in ["ask", "pend", "ping", "cancel"] {
                tools.push(format!("{v}_{p}"));
            }
        }
        tools.extend(["ask", "pend", "ping", "cancel"].map(str::to_owned));
        for t in tools {
            text.push_str(&format!(
                "\n[mcp_servers.droid-executor.tools.{t}]\napproval_mode = \"approve\"\n"
            ));
        }
        text
    }

    #[test]
    fn plans_keep_what_is_there() {
        let home = std::env::temp_dir().join(format!("dx-setup-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        std::fs::write(
            home.join(".claude.json"),
            r#"{"theme": "dark", "mcpServers": {"other": {"command": "x"}}}"#,
        )
        .unwrap();
        std::fs::write(home.join(".codex/config.toml"), "model = \"o3\"\n").unwrap();
        let env: EnvMap = [("HOME".to_owned(), home.display().to_string())].into();
        let steps = plan(ProviderId::Claude, &reg(false), None, &env).unwrap();
        let [
            Plan::Json {
                content, unchanged, ..
            },
            Plan::Note(note),
        ] = &steps[..]
        else {
            panic!("claude is a JSON file and a note: {steps:#?}")
        };
        assert!(!unchanged);
        assert_eq!(content["theme"], "dark");
        assert_eq!(content["mcpServers"]["other"]["command"], "x");
        assert_eq!(
            content["mcpServers"][SERVER_NAME],
            json!({"type": "stdio", "command": "/opt/bin/droid-executor", "args": ["mcp"],
                   "env": {"DROID_EXECUTOR_CLIENT": "claude"}})
        );
        assert!(
            note.contains("--allowedTools mcp__droid-executor__execute_droid_task,mcp__droid-executor__droid_ping,mcp__droid-executor__ask_droid,"),
            "{note}"
        );
        assert!(
            note.contains(",mcp__droid-executor__ask_codex,mcp__droid-executor__pend_codex,mcp__droid-executor__ping_codex,mcp__droid-executor__cancel_codex,"),
            "{note}"
        );
        let Plan::Toml {
            content, unchanged, ..
        } = one(plan(ProviderId::Codex, &reg(false), None, &env).unwrap())
        else {
            panic!("codex is a TOML file")
        };
        assert!(!unchanged);
        assert_eq!(
            content,
            format!("model = \"o3\"\n\n{}", entry_with_families())
        );
        std::fs::write(home.join(".codex/config.toml"), &content).unwrap();
        let Plan::Toml { unchanged, .. } =
            one(plan(ProviderId::Codex, &reg(false), None, &env).unwrap())
        else {
            panic!("codex is a TOML file")
        };
        assert!(unchanged);
        // droid not found: the plan names it as a user would type it (the front-end says what
        // to install and applies nothing); then droid's settings and what it cannot be told
        let steps = plan(ProviderId::Droid, &reg(false), None, &env).unwrap();
        let [
            Plan::Command { program, args },
            Plan::Jsonc {
                content, unchanged, ..
            },
            Plan::Note(note),
        ] = &steps[..]
        else {
            panic!("droid is a command, its settings and a note: {steps:#?}")
        };
        assert_eq!(program, &PathBuf::from("droid"));
        assert_eq!(
            args.join(" "),
            "mcp add droid-executor --env DROID_EXECUTOR_CLIENT=droid -- /opt/bin/droid-executor mcp"
        );
        assert!(!unchanged);
        let settings = jsonc::value(content).unwrap().unwrap();
        assert_eq!(settings["blockOnMcpLoad"], true);
        let levels = &settings["mcpAutonomyOverrides"][SERVER_NAME]["tools"];
        assert_eq!(
            (
                &levels["ask"],
                &levels["pend_codex"],
                &levels["execute_droid_task"]
            ),
            (&json!("low"), &json!("low"), &json!("medium"))
        );
        assert!(note.contains("need `droid exec --auto medium`"), "{note}");
        std::fs::write(home.join(".claude.json"), "{oops").unwrap();
        assert!(matches!(
            plan(ProviderId::Claude, &reg(false), None, &env),
            Err(EngineError::Config { .. })
        ));
        std::fs::remove_dir_all(&home).unwrap();
    }

    /// Gemini CLI and OpenCode: an entry in a JSON-with-comments file, the user's comments and
    /// what they added to the entry kept, and nothing to do the second time.
    #[test]
    fn gemini_and_opencode_entries_keep_the_file() {
        let home = std::env::temp_dir().join(format!("dx-setup-jsonc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join(".gemini")).unwrap();
        let gemini = home.join(".gemini/settings.json");
        std::fs::write(
            &gemini,
            "{\n  // auth\n  \"security\": {\"auth\": {\"selectedType\": \"gemini-api-key\"}},\n  \"mcpServers\": {\"droid-executor\": {\"command\": \"/old\", \"env\": {\"MINE\": \"1\"}, \"includeTools\": [\"ask\"]}}\n}\n",
        )
        .unwrap();
        let env: EnvMap = [("HOME".to_owned(), home.display().to_string())].into();
        let steps = plan(ProviderId::Gemini, &reg(false), None, &env).unwrap();
        let [Plan::Jsonc { content, .. }, Plan::Note(_)] = &steps[..] else {
            panic!("gemini is a JSONC file and a note: {steps:#?}")
        };
        assert!(content.starts_with("{\n  // auth\n"), "{content}");
        assert_eq!(
            jsonc::value(content).unwrap().unwrap()["mcpServers"][SERVER_NAME],
            json!({
                "command": "/opt/bin/droid-executor",
                "args": ["mcp"],
                "env": {"MINE": "1", "DROID_EXECUTOR_CLIENT": "gemini",
                        "FACTORY_API_KEY": "$FACTORY_API_KEY"},
                "includeTools": ["ask"],
                "timeout": 660_000,
                "trust": true,
            })
        );
        std::fs::write(&gemini, content).unwrap();
        let again = plan(ProviderId::Gemini, &reg(false), None, &env).unwrap();
        assert!(
            matches!(
                again[0],
                Plan::Jsonc {
                    unchanged: true,
                    ..
                }
            ),
            "{again:#?}"
        );
        let Plan::Jsonc { path, content, .. } =
            one(plan(ProviderId::Opencode, &reg(false), None, &env).unwrap())
        else {
            panic!("opencode is a JSONC file")
        };
        assert_eq!(path, home.join(".config/opencode/opencode.json"));
        assert_eq!(
            jsonc::value(&content).unwrap().unwrap(),
            json!({"mcp": {SERVER_NAME: {
                "type": "local",
                "command": ["/opt/bin/droid-executor", "mcp"],
                "enabled": true,
                "environment": {"DROID_EXECUTOR_CLIENT": "opencode"},
                "timeout": 660_000,
            }}})
        );
        std::fs::write(&gemini, "{\"mcpServers\": []}").unwrap();
        let err = plan(ProviderId::Gemini, &reg(false), None, &env).unwrap_err();
        assert!(
            err.to_string().contains("mcpServers is not an object"),
            "{err}"
        );
        std::fs::remove_dir_all(&home).unwrap();
    }

    /// The entry an earlier version appended (command and args only) is replaced in place; the
    /// user's tables before and after it stay.
    #[test]
    fn an_older_codex_entry_is_replaced() {
        let old = "model = \"o3\"\n\n[mcp_servers.droid-executor]\ncommand = \"/old/droid-executor\"\nargs = [\"mcp\"]\n\n[mcp_servers.droid-executor.tools.droid_ping]\napproval_mode = \"prompt\"\n\n[profiles.fast]\nmodel = \"gpt-5.5\"\n";
        let Plan::Toml {
            content, unchanged, ..
        } = codex_plan(PathBuf::from("config.toml"), old, ENTRY).unwrap()
        else {
            panic!("a TOML plan")
        };
        assert!(!unchanged);
        assert_eq!(
            content,
            format!("model = \"o3\"\n\n[profiles.fast]\nmodel = \"gpt-5.5\"\n\n{ENTRY}")
        );
        // keys the user added to our entry are kept when ours say the same, never dropped
        let Plan::Toml { unchanged, .. } = codex_plan(
            PathBuf::from("config.toml"),
            &format!("{ENTRY}startup_timeout_sec = 20\n"),
            ENTRY,
        )
        .unwrap() else {
            panic!("a TOML plan")
        };
        assert!(unchanged);
        let custom = "[mcp_servers.droid-executor]\ncommand = \"/old\"\nstartup_timeout_sec = 20\n\n[mcp_servers.droid-executor.env]\nA = \"1\"\n";
        let err = codex_plan(PathBuf::from("config.toml"), custom, ENTRY).unwrap_err();
        assert!(
            err.to_string()
                .contains("has settings setup does not write (env.A, startup_timeout_sec)"),
            "{err}"
        );
        // an inline table cannot be cut out line by line: refused, nothing written
        let inline = "[mcp_servers]\ndroid-executor = { command = \"x\" }\n";
        let err = codex_plan(PathBuf::from("config.toml"), inline, ENTRY).unwrap_err();
        assert!(
            err.to_string().contains("remove it and run setup again"),
            "{err}"
        );
    }

    #[test]
    fn claude_rules_are_added_once() {
        let dir = std::env::temp_dir().join(format!("dx-setup-allow-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("settings.json");
        std::fs::write(
            &path,
            r#"{"model": "opus", "permissions": {"allow": ["Bash(ls:*)", "mcp__droid-executor__droid_ping"]}}"#,
        )
        .unwrap();
        let rules = claude_allow_rules(TOOLS);
        let Plan::Json {
            content, unchanged, ..
        } = claude_allow(&path, &rules).unwrap()
        else {
            panic!("a JSON plan")
        };
        assert!(!unchanged);
        assert_eq!(
            content,
            json!({"model": "opus", "permissions": {"allow": [
                "Bash(ls:*)", "mcp__droid-executor__droid_ping", "mcp__droid-executor__execute_droid_task"
            ]}})
        );
        std::fs::write(&path, content.to_string()).unwrap();
        let Plan::Json { unchanged, .. } = claude_allow(&path, &rules).unwrap() else {
            panic!("a JSON plan")
        };
        assert!(unchanged);
        std::fs::write(&path, r#"{"permissions": {"allow": "all"}}"#).unwrap();
        assert!(matches!(
            claude_allow(&path, &rules),
            Err(EngineError::Config { .. })
        ));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
