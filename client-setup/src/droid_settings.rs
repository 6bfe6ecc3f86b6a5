//! What droid 0.225.2 needs, beyond its `mcp.json` entry, for its model to see droid-executor's
//! tools and to call them at the autonomy a user runs droid at: two keys of its user settings
//! (`~/.factory/settings.json`, JSON with comments, edited in place by [`crate::jsonc`]).
//!
//! Measured with the real droid against a scripted model (docs/operations.md, "droid as the MCP
//! client"; read from its bundle where the behaviour was first seen):
//! - droid starts its MCP servers in the background, and the first model request of `droid exec`
//!   goes out before they are up, so the model is never told of their tools. `blockOnMcpLoad:
//!   true` makes droid wait for them (every droid start then waits for every MCP server it has);
//!   there is no per-server form.
//! - droid rates an MCP tool call's impact `low`, `medium` or `high` and runs it without asking
//!   when the session's autonomy is at least that (`droid exec` with no `--auto` is `low`, like
//!   `--auto low`); otherwise `droid exec` ends the run ("Exec ended early: MCP tool … requires
//!   higher autonomy"). The impact is, in order: the user's `mcpAutonomyOverrides[server]`
//!   (`tools[tool]`, then `defaultLevel`); for a stdio server, `low` when the tool's annotations
//!   say `readOnlyHint: true`; else `high`. So without settings every tool but the read-only ones
//!   needs `--auto high`.
//!
//! `setup mcp --client droid` writes `blockOnMcpLoad: true` and a level for each of our tools
//! ([`level`]): the delegation family (`ask`, `pend`, `ping`, `cancel`, and the per-provider
//! forms) and the droid tools that only read or stop a task are `low`, callable at droid's
//! default; the tools that run a task that edits the repository (`execute_droid_task`,
//! `droid_submit`) or write it (`droid_apply`) are `medium`; `droid_discard`, which throws work
//! away, is `high`. droid rates a tool, not a call: `ask` is `low` because its default is a
//! consultation (`read_only`); an `ask` with autonomy `low` or `medium` lets the other agent edit
//! even when droid runs at its default, within the server's `max_autonomy`.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use droid_exec::EngineError;
use droid_exec::config::EnvMap;
use droid_exec::health::{Check, Level};

use crate::jsonc::{self, Change};
use crate::registration::{SERVER_NAME, read_optional};

/// droid's user settings: `$HOME/.factory/settings.json`.
///
/// # Errors
/// [`EngineError::Setting`] without a HOME.
pub fn settings_path(env: &EnvMap) -> Result<PathBuf, EngineError> {
    factory_dir(env).map(|d| d.join("settings.json"))
}

fn factory_dir(env: &EnvMap) -> Result<PathBuf, EngineError> {
    env.get("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".factory"))
        .ok_or_else(|| EngineError::Setting {
            name: "HOME".into(),
            message: "is not set; cannot find droid's settings".into(),
        })
}

/// The autonomy droid needs to call `tool` without asking (its `mcpAutonomyOverrides` level).
pub fn level(tool: &str) -> &'static str {
    let verb = tool.split('_').next().unwrap_or(tool);
    match tool {
        "execute_droid_task" | "droid_submit" | "droid_apply" => "medium",
        "droid_pend" | "droid_ping" | "droid_cancel" => "low",
        _ if droid_exec::config::DELEGATION_VERBS.contains(&verb) => "low",
        _ => "high",
    }
}

/// The settings changes: droid waits for its MCP servers before the first model request, and
/// rates each of `tools` at its [`level`].
pub fn changes(tools: &[String]) -> Vec<Change> {
    let mut out = vec![Change::new(&["blockOnMcpLoad"], json!(true))];
    out.extend(tools.iter().map(|t| {
        Change::new(
            &["mcpAutonomyOverrides", SERVER_NAME, "tools", t.as_str()],
            json!(level(t)),
        )
    }));
    out
}

/// The tools of each level, for a person: the delegation family first, the per-provider forms
/// (`ask_codex`, …) folded into it.
pub fn levels_text(tools: &[String]) -> String {
    let is_per_provider = |t: &str| {
        t.split_once('_').is_some_and(|(v, p)| {
            droid_exec::config::DELEGATION_VERBS.contains(&v)
                && droid_contract::ProviderId::parse(p).is_some()
        })
    };
    let of = |wanted: &str| -> String {
        let mut names: Vec<&str> = tools
            .iter()
            .map(String::as_str)
            .filter(|t| level(t) == wanted && !is_per_provider(t))
            .collect();
        names.sort_by_key(|t| t.starts_with("droid_") || t.starts_with("execute_"));
        names.join(", ")
    };
    let per_provider = if tools.iter().any(|t| is_per_provider(t)) {
        " (and ask_codex … of the per_provider toolset)"
    } else {
        ""
    };
    format!(
        "at its default autonomy droid calls {}{per_provider}; {} need `droid exec --auto medium` \
         (or higher), {} `--auto high`",
        of("low"),
        of("medium"),
        of("high")
    )
}

/// What `setup mcp --client droid` says once it has written the settings: what each tool needs
/// and what droid cannot be told.
pub fn note(tools: &[String]) -> String {
    format!(
        "note: {} (droid rates a tool, not a call). blockOnMcpLoad makes droid wait for its MCP \
         servers when it starts. A project's .factory/settings.json, a settings.local.json or an \
         organization's maxAutonomyLevel can override these: `droid-executor doctor` checks",
        levels_text(tools)
    )
}

/// The settings as droid reads them at the user level: `settings.json` with
/// `settings.local.json`'s keys over it (droid merges the two files key by key, the local one
/// winning); `None` for a file that is absent or not JSONC.
fn user_settings(dir: &Path) -> (Value, Vec<String>) {
    let mut merged = serde_json::Map::new();
    let mut unreadable = Vec::new();
    for name in ["settings.json", "settings.local.json"] {
        let path = dir.join(name);
        match read_optional(&path) {
            Ok(Some(text)) => match jsonc::value(&text) {
                Ok(Some(Value::Object(map))) => merged.extend(map),
                Ok(None) => {}
                _ => unreadable.push(path.display().to_string()),
            },
            Ok(None) => {}
            Err(_) => unreadable.push(path.display().to_string()),
        }
    }
    (Value::Object(merged), unreadable)
}

/// `doctor`'s `droid mcp` line: whether droid-executor is registered with droid, and if so
/// whether droid's settings let its model see the tools and call them ([`changes`]), with what
/// each tool needs; the fix is `setup mcp --client droid`.
pub fn droid_mcp_check(env: &EnvMap, program: Option<&Path>, tools: &[String]) -> Check {
    let name = "droid_mcp";
    let dir = match factory_dir(env) {
        Ok(d) => d,
        Err(e) => {
            return Check {
                name,
                level: Level::Warn,
                detail: e.to_string(),
                fix: String::new(),
            };
        }
    };
    let mcp_json = dir.join("mcp.json");
    let entry = read_optional(&mcp_json)
        .ok()
        .flatten()
        .and_then(|t| jsonc::value(&t).ok().flatten())
        .and_then(|v| v.get("mcpServers")?.get(SERVER_NAME).cloned());
    let Some(entry) = entry else {
        return Check {
            name,
            level: Level::Ok,
            detail: format!(
                "droid-executor is not registered with droid ({} has no {SERVER_NAME}); \
                 `droid-executor setup mcp --client droid` registers it",
                mcp_json.display()
            ),
            fix: String::new(),
        };
    };
    let setup = "droid-executor setup mcp --client droid";
    if entry.get("disabled") == Some(&Value::Bool(true)) {
        return Check {
            name,
            level: Level::Warn,
            detail: format!("registered in {}, but disabled", mcp_json.display()),
            fix: format!(
                "set disabled to false there, or `droid mcp remove {SERVER_NAME}` and {setup}"
            ),
        };
    }
    let command = entry.get("command").and_then(Value::as_str);
    if let (Some(command), Some(program)) = (command, program)
        && Path::new(command) != program
    {
        return Check {
            name,
            level: Level::Warn,
            detail: format!(
                "registered in {} with {command}, not this droid-executor ({})",
                mcp_json.display(),
                program.display()
            ),
            fix: format!("`droid mcp remove {SERVER_NAME}`, then {setup}"),
        };
    }
    let (settings, unreadable) = user_settings(&dir);
    let mut wrong: Vec<String> = unreadable
        .iter()
        .map(|p| format!("{p} is not JSON droid-executor can read"))
        .collect();
    if settings.get("blockOnMcpLoad") != Some(&Value::Bool(true)) {
        wrong.push("blockOnMcpLoad is not true (droid's model is not told of the tools)".into());
    }
    let levels = settings
        .get("mcpAutonomyOverrides")
        .and_then(|o| o.get(SERVER_NAME))
        .and_then(|o| o.get("tools"));
    let off: Vec<&str> = tools
        .iter()
        .map(String::as_str)
        .filter(|t| levels.and_then(|l| l.get(*t)).and_then(Value::as_str) != Some(level(t)))
        .collect();
    if !off.is_empty() {
        wrong.push(format!(
            "mcpAutonomyOverrides.{SERVER_NAME} does not rate {} as setup does",
            off.join(", ")
        ));
    }
    if wrong.is_empty() {
        Check {
            name,
            level: Level::Ok,
            detail: format!(
                "registered; droid's model sees the tools (blockOnMcpLoad); {}",
                levels_text(tools)
            ),
            fix: String::new(),
        }
    } else {
        Check {
            name,
            level: Level::Warn,
            detail: format!(
                "registered, but in {}: {}",
                dir.join("settings.json").display(),
                wrong.join("; ")
            ),
            fix: format!(
                "{setup} (it writes them; a settings.local.json that sets them wins over it)"
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn each_tool_has_a_level() {
        for (tool, want) in [
            ("ask", "low"),
            ("pend", "low"),
            ("ping", "low"),
            ("cancel", "low"),
            ("ask_codex", "low"),
            ("cancel_opencode", "low"),
            ("droid_pend", "low"),
            ("droid_ping", "low"),
            ("droid_cancel", "low"),
            ("execute_droid_task", "medium"),
            ("droid_submit", "medium"),
            ("droid_apply", "medium"),
            ("droid_discard", "high"),
            ("something_new", "high"),
        ] {
            assert_eq!(level(tool), want, "{tool}");
        }
    }

    #[test]
    fn the_text_folds_the_per_provider_forms() {
        let tools: Vec<String> = [
            "execute_droid_task",
            "droid_pend",
            "droid_discard",
            "ask",
            "pend",
            "ask_codex",
            "pend_codex",
        ]
        .map(str::to_owned)
        .to_vec();
        assert_eq!(
            levels_text(&tools),
            "at its default autonomy droid calls ask, pend, droid_pend (and ask_codex … of the \
             per_provider toolset); execute_droid_task need `droid exec --auto medium` (or \
             higher), droid_discard `--auto high`"
        );
    }

    #[test]
    fn doctor_reads_what_setup_writes() {
        let home = std::env::temp_dir().join(format!("dx-droid-settings-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        std::fs::create_dir_all(home.join(".factory")).unwrap();
        let env: EnvMap = [("HOME".to_owned(), home.display().to_string())].into();
        let tools: Vec<String> = ["ask", "execute_droid_task"].map(str::to_owned).to_vec();
        let exe = Path::new("/opt/bin/droid-executor");
        assert_eq!(droid_mcp_check(&env, Some(exe), &tools).level, Level::Ok);
        std::fs::write(
            home.join(".factory/mcp.json"),
            r#"{"mcpServers": {"droid-executor": {"type": "stdio", "command": "/opt/bin/droid-executor", "args": ["mcp"]}}}"#,
        )
        .unwrap();
        let check = droid_mcp_check(&env, Some(exe), &tools);
        assert_eq!(check.level, Level::Warn, "{check:?}");
        assert!(
            check.detail.contains("blockOnMcpLoad is not true"),
            "{check:?}"
        );
        let settings = jsonc::set(Some("// mine\n{\"model\": \"x\"}\n"), &changes(&tools)).unwrap();
        std::fs::write(home.join(".factory/settings.json"), &settings).unwrap();
        let check = droid_mcp_check(&env, Some(exe), &tools);
        assert_eq!(check.level, Level::Ok, "{check:?}");
        // a local file that says otherwise wins
        std::fs::write(
            home.join(".factory/settings.local.json"),
            r#"{"blockOnMcpLoad": false}"#,
        )
        .unwrap();
        assert_eq!(droid_mcp_check(&env, Some(exe), &tools).level, Level::Warn);
        // another droid-executor registered
        let other = droid_mcp_check(&env, Some(Path::new("/new/droid-executor")), &tools);
        assert!(
            other.fix.starts_with("`droid mcp remove droid-executor`"),
            "{other:?}"
        );
        std::fs::remove_dir_all(&home).unwrap();
    }
}
