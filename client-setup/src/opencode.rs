//! Registering `droid-executor mcp` with OpenCode 1.18.33 (`setup mcp --client opencode`): an
//! entry under `mcp` in its global config (`$XDG_CONFIG_HOME/opencode/opencode.json`, default
//! `~/.config/opencode/opencode.json`, or `opencode.jsonc` when that is the one there; JSON with
//! comments, edited in place by [`crate::jsonc`]).
//!
//! Measured with the real OpenCode (`opencode run`) against a scripted model: it gives a local
//! MCP server its whole environment, offers its tools as `<server>_<tool>` (`droid-executor_ask`)
//! and runs them without asking; a tool call may take the entry's `timeout` milliseconds, so the
//! entry sets it above the run budget.

use std::path::PathBuf;

use serde_json::{Value, json};

use droid_exec::EngineError;
use droid_exec::client_env::CLIENT_VAR;
use droid_exec::config::EnvMap;

use crate::registration::{Registration, SERVER_NAME};

/// OpenCode's global config file.
///
/// # Errors
/// [`EngineError::Setting`] when neither `XDG_CONFIG_HOME` nor `HOME` is set.
pub fn config_path(env: &EnvMap) -> Result<PathBuf, EngineError> {
    let dir = if let Some(xdg) = env.get("XDG_CONFIG_HOME").filter(|x| !x.is_empty()) {
        PathBuf::from(xdg).join("opencode")
    } else {
        env.get("HOME")
            .filter(|h| !h.is_empty())
            .map(|h| PathBuf::from(h).join(".config/opencode"))
            .ok_or_else(|| EngineError::Setting {
                name: "HOME".into(),
                message: "is not set; cannot find OpenCode's config".into(),
            })?
    };
    let json = dir.join("opencode.json");
    let jsonc = dir.join("opencode.jsonc");
    Ok(if !json.exists() && jsonc.exists() {
        jsonc
    } else {
        json
    })
}

/// Our entry: a local server, enabled, naming its client, with a tool-call timeout above the
/// run budget.
pub fn entry(reg: &Registration<'_>) -> Value {
    json!({
        "type": "local",
        "command": [reg.program.display().to_string(), "mcp"],
        "enabled": true,
        "environment": {CLIENT_VAR: "opencode"},
        "timeout": reg.tool_timeout_secs * 1000,
    })
}

/// The path of our entry in the config.
pub const AT: [&str; 2] = ["mcp", SERVER_NAME];
